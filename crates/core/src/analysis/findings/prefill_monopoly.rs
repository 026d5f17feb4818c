//! Prefill monopoly (head-of-line blocking): one request's prefill held its instance for consecutive steps
//! while others waited.

use std::fmt::Write as _;

use super::context::WaitIndex;
use super::words::{duration, names, range, row_u32};
use super::{CRITICAL_DELAY_MS, Context, Detector, Finding, Kind, MAX_LISTED_REQUESTS, Severity, Thresholds};
use crate::analysis::metrics::ms;
use crate::analysis::stats::thousands;
use crate::analysis::summary::Slo;
use crate::trace::{StageKind, Trace};

/// The detector of [`Kind::PrefillMonopoly`].
pub(super) struct PrefillMonopoly;

impl Detector for PrefillMonopoly {
    fn kind(&self) -> Kind {
        Kind::PrefillMonopoly
    }

    /// Requests whose prefill chunks ran in `monopoly_steps` or more consecutive steps of their instance while other
    /// requests waited (queued or preempted during those steps; without queue times in the trace, `num_waiting` after
    /// the first step). Names the waiting requests and the queue time the steps added to each (their wait inside the
    /// steps' span). One finding per run of steps; the monopolising request is the subject.
    fn detect(&self, cx: &Context<'_>) -> Vec<Finding> {
        let (trace, th) = (cx.trace, cx.th);
        let waits = cx.waits();
        let it = &trace.iterations;
        let st = &trace.stages;
        let min_steps = th.monopoly_steps.max(1) as usize;
        let mut out = Vec::new();
        for r in 0..row_u32(trace.request_count()) {
            // Prefill chunks in step order: runs of consecutive rows of one source.
            let mut chunks: Vec<(u32, u32)> = trace
                .explicit_stages_of(r)
                .filter(|&s| st.kind[s] == StageKind::Prefill)
                .filter_map(|s| st.iter_row[s].map(|row| (row, st.tokens[s].unwrap_or(0))))
                .collect();
            if chunks.len() < min_steps {
                continue;
            }
            chunks.sort_unstable();
            let mut a = 0;
            while a < chunks.len() {
                let mut b = a + 1;
                while b < chunks.len()
                    && chunks[b].0 == chunks[b - 1].0 + 1
                    && it.source[chunks[b].0 as usize] == it.source[chunks[a].0 as usize]
                {
                    b += 1;
                }
                if b - a >= min_steps
                    && let Some(f) = monopoly_finding(trace, waits, r, &chunks[a..b])
                {
                    out.push(f);
                }
                a = b;
            }
        }
        out
    }
}

/// [`Kind::PrefillMonopoly`]'s findings alone, unsorted.
pub fn prefill_monopoly(trace: &Trace, th: &Thresholds) -> Vec<Finding> {
    PrefillMonopoly.detect(&Context::new(trace, &Slo::default(), th))
}

/// The finding of one run of consecutive prefill steps of `request`, if others waited.
fn monopoly_finding(trace: &Trace, waits: &WaitIndex, request: u32, run: &[(u32, u32)]) -> Option<Finding> {
    let it = &trace.iterations;
    let (first, last) = (run[0].0 as usize, run[run.len() - 1].0 as usize);
    let source = it.source[first];
    let (from_ns, to_ns) = range(it.start_ns[first], it.end_ns[last]);
    let waiting = waits.waiting(source, from_ns, to_ns, request);
    let max_waiting = run[1..]
        .iter()
        .filter_map(|&(row, _)| it.num_waiting[row as usize])
        .max()
        .unwrap_or(0);
    if waiting.is_empty() && max_waiting == 0 {
        return None;
    }
    let tokens: u64 = run.iter().map(|&(_, n)| u64::from(n)).sum();
    let id = trace.request_id(request);
    let on = trace.label(source).map_or(String::new(), |s| format!(" of {s}"));
    let mut summary = format!(
        "{id}'s prefill of {} prompt tokens took {} consecutive steps{on} ({})",
        thousands(tokens),
        run.len(),
        duration(to_ns - from_ns)
    );
    let longest = waiting.first().map_or(0, |w| w.1);
    if waiting.is_empty() {
        let plural = if max_waiting == 1 { " was" } else { "s were" };
        let _ = write!(summary, " while up to {max_waiting} request{plural} waiting");
    } else {
        let rows: Vec<u32> = waiting.iter().map(|w| w.0).collect();
        let total: i64 = waiting.iter().map(|w| w.1).sum();
        let _ = write!(
            summary,
            " while {} waited: {} of added queue time",
            names(trace, &rows),
            duration(total)
        );
        if waiting.len() > 1 {
            let _ = write!(
                summary,
                " in all, {} for {}",
                duration(longest),
                trace.request_id(rows[0])
            );
        }
    }
    let mut requests = vec![request];
    requests.extend(waiting.iter().map(|w| w.0).take(MAX_LISTED_REQUESTS - 1));
    let severity = if ms(longest) >= CRITICAL_DELAY_MS {
        Severity::Critical
    } else {
        Severity::Warning
    };
    Some(Finding {
        kind: Kind::PrefillMonopoly,
        severity,
        summary,
        from_ns,
        to_ns,
        requests,
        steps: run.iter().map(|&(row, _)| row).collect(),
        tokens: trace.tokens_of(request).next().into_iter().collect(),
    })
}
