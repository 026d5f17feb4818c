//! Which step computed a streamed token: its instance's step of its `iteration`, found for each of a hundred million
//! tokens without hashing each.

use rustc_hash::FxHashMap;

use crate::trace::{NULL_I64, NULL_U32, Trace};

/// The step row of each (source, iteration), looked up for each of a hundred million tokens: a table per source
/// indexed by iteration where its iterations are about as many as their span (an engine counts its steps), a map
/// where they are not. (A load keeps one step of each source and iteration.)
pub(super) struct StepRows {
    dense: FxHashMap<u32, (i64, Vec<u32>)>,
    sparse: FxHashMap<(u32, i64), u32>,
}

/// The step rows of one source's tokens.
#[derive(Clone, Copy)]
pub(super) enum SourceSteps<'a> {
    /// The row of iteration `first + k` at `k`.
    Dense(i64, &'a [u32]),
    Sparse(u32, &'a FxHashMap<(u32, i64), u32>),
}

impl StepRows {
    pub(super) fn of(trace: &Trace) -> Self {
        let it = &trace.iterations;
        // Per source: its lowest and highest iteration, and how many steps.
        let mut span: FxHashMap<u32, (i64, i64, usize)> = FxHashMap::default();
        for i in 0..it.len() {
            let n = it.iteration[i];
            let e = span.entry(it.source[i]).or_insert((n, n, 0));
            *e = (e.0.min(n), e.1.max(n), e.2 + 1);
        }
        let mut dense: FxHashMap<u32, (i64, Vec<u32>)> = span
            .iter()
            .filter(|&(_, &(lo, hi, n))| {
                let width = u64::try_from(hi.saturating_sub(lo)).unwrap_or(u64::MAX);
                width < 4 * n as u64 + 1024
            })
            .map(|(&source, &(lo, hi, _))| {
                let width = usize::try_from(hi - lo).unwrap_or(0) + 1;
                (source, (lo, vec![NULL_U32; width]))
            })
            .collect();
        let mut sparse = FxHashMap::default();
        for i in 0..it.len() {
            let row = u32::try_from(i).unwrap_or(NULL_U32);
            let (source, n) = (it.source[i], it.iteration[i]);
            match dense.get_mut(&source) {
                Some((lo, rows)) => rows[usize::try_from(n - *lo).unwrap_or(0)] = row,
                None => {
                    sparse.insert((source, n), row);
                }
            }
        }
        StepRows { dense, sparse }
    }

    pub(super) fn of_source(&self, source: u32) -> SourceSteps<'_> {
        match self.dense.get(&source) {
            Some((lo, rows)) => SourceSteps::Dense(*lo, rows),
            None => SourceSteps::Sparse(source, &self.sparse),
        }
    }
}

impl SourceSteps<'_> {
    /// The step row of iteration `n` ([`NULL_U32`] when absent or unknown).
    pub(super) fn row(self, n: i64) -> u32 {
        if n == NULL_I64 {
            return NULL_U32;
        }
        match self {
            SourceSteps::Dense(lo, rows) => usize::try_from(n.wrapping_sub(lo))
                .ok()
                .and_then(|k| rows.get(k).copied())
                .unwrap_or(NULL_U32),
            SourceSteps::Sparse(source, map) => map.get(&(source, n)).copied().unwrap_or(NULL_U32),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::trace_of;

    #[test]
    fn a_step_is_found_by_its_source_and_iteration_in_a_table_or_a_map() {
        // Source "a" counts its steps 5, 6, 7, 9 (a table from 5, 8 absent); "b" numbers two steps 0 and 10^9 (a map).
        const T0: i64 = 1_764_403_200_000_000_000;
        let lines: Vec<String> = [("a", 5), ("a", 6), ("b", 0), ("a", 7), ("a", 9), ("b", 1_000_000_000)]
            .iter()
            .enumerate()
            .map(|(k, (source, n))| {
                let start = T0 + i64::try_from(k).unwrap() * 1_000_000;
                format!(
                    r#"{{"kind":"iteration","source":"{source}","iteration":{n},"start_ns":{start},"end_ns":{}}}"#,
                    start + 500_000
                )
            })
            .collect();
        let trace = trace_of(&lines.join("\n"));
        let steps = StepRows::of(&trace);
        let it = &trace.iterations;
        let id = |source: &str| trace.labels.lookup(source).expect("a label");
        // The reference: a walk of every step.
        let walked = |source: &str, n: i64| {
            (0..it.len())
                .find(|&i| it.source[i] == id(source) && it.iteration[i] == n)
                .map_or(NULL_U32, |i| u32::try_from(i).unwrap())
        };
        assert!(matches!(steps.of_source(id("a")), SourceSteps::Dense(5, rows) if rows.len() == 5));
        assert!(matches!(steps.of_source(id("b")), SourceSteps::Sparse(..)));
        for (source, n) in [
            ("a", 4),
            ("a", 5),
            ("a", 6),
            ("a", 7),
            ("a", 8),
            ("a", 9),
            ("a", 10),
            ("b", 0),
            ("b", 1),
        ] {
            assert_eq!(steps.of_source(id(source)).row(n), walked(source, n), "{source} {n}");
        }
        assert_eq!(steps.of_source(id("b")).row(1_000_000_000), walked("b", 1_000_000_000));
        assert_ne!(walked("a", 9), NULL_U32);
        assert_eq!(steps.of_source(id("a")).row(NULL_I64), NULL_U32);
        assert_eq!(steps.of_source(u32::MAX - 1).row(5), NULL_U32, "a source without steps");
    }
}
