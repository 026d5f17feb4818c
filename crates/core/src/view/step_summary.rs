//! An engine track's steps summed into time buckets at several widths, a pyramid built once per trace, so that a
//! zoomed-out view draws its density strip and counters from a few buckets per point column instead of every step:
//! a million steps cost what a thousand columns do.

use super::viewport::Viewport;
use crate::trace::Trace;

/// The counters drawn under each engine track, by name; [`counter_values`] gives a step's.
pub const COUNTERS: [&str; 4] = ["batch size", "prefill tokens", "KV use", "waiting"];

/// A step's counters, in the order of [`COUNTERS`] (0 where the step has none).
pub fn counter_values(trace: &Trace, i: usize) -> [f32; 4] {
    let it = &trace.iterations;
    let f = |v: Option<u32>| v.unwrap_or(0) as f32;
    let kv = it.kv_usage.at(i).unwrap_or(0.0) as f32;
    [
        f(it.num_reqs.at(i)),
        f(it.num_prefill_tokens.at(i)),
        kv,
        f(it.num_waiting.at(i)),
    ]
}

/// Buckets of the finest level across the trace's span.
const FINEST: usize = 1 << 16;

/// One level: buckets of `width_ns` from `t0_ns`.
#[derive(Debug, Clone, Default)]
struct Level {
    width_ns: i64,
    /// Step time in each bucket, ns.
    busy: Vec<i64>,
    /// Prompt and output tokens of the steps overlapping each bucket, each step's in proportion to its time in the
    /// bucket (what matters is a bucket's prefill share: a long step weighs by its time, not by its buckets).
    tokens: Vec<(u64, u64)>,
    /// The largest counters of the steps overlapping each bucket.
    max: Vec<[f32; 4]>,
}

/// What a view's point columns show of an engine's steps.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ColumnStats {
    /// The share of each column's time the engine was busy, 0 to 1.
    pub busy: Vec<f32>,
    /// Prompt and output tokens of the steps in each column, in proportion to their time in it (for its prefill
    /// share).
    pub tokens: Vec<(u64, u64)>,
    /// The largest counters of the steps in each column.
    pub max: Vec<[f32; 4]>,
}

/// A source's steps in buckets of doubling widths.
#[derive(Debug, Clone, Default)]
pub struct StepSummary {
    t0_ns: i64,
    levels: Vec<Level>,
}

impl StepSummary {
    /// Sums the steps of rows `rows` (one source's, by start) into buckets from `t0_ns` to `t1_ns`.
    pub fn build(trace: &Trace, rows: std::ops::Range<usize>, t0_ns: i64, t1_ns: i64) -> Self {
        let it = &trace.iterations;
        let width_ns = ((t1_ns - t0_ns) / FINEST as i64).max(1);
        let n = usize::try_from((t1_ns - t0_ns) / width_ns + 1).unwrap_or(FINEST + 1);
        let mut level = Level {
            width_ns,
            busy: vec![0; n],
            tokens: vec![(0, 0); n],
            max: vec![[0.0; 4]; n],
        };
        let bucket = |t: i64| usize::try_from((t - t0_ns) / width_ns).unwrap_or(0).min(n - 1);
        for i in rows {
            let (s, e) = (it.start_ns[i].max(t0_ns), it.end_ns[i].min(t1_ns));
            if e < s {
                continue;
            }
            let values = counter_values(trace, i);
            let (p, d) = super::layout::prefill_mix(trace, i);
            // A step's tokens by its time in each bucket, the last taking what rounding left (an instant step's
            // all in its bucket): the buckets' tokens add up to the steps'.
            let share = |x: u64, before: i64| {
                if e > s {
                    u64::try_from(u128::from(x) * before.max(0) as u128 / (e - s) as u128).unwrap_or(x)
                } else {
                    0
                }
            };
            let (first, last) = (bucket(s), bucket(e));
            for b in first..=last {
                let b0 = t0_ns + b as i64 * width_ns;
                let o = e.min(b0 + width_ns) - s.max(b0);
                level.busy[b] += o;
                for (m, v) in level.max[b].iter_mut().zip(values) {
                    *m = m.max(v);
                }
                // The tokens of the step's time up to this bucket's end, less those up to its start.
                let (upto_end, upto_start) = if b == last {
                    ((p, d), (share(p, s.max(b0) - s), share(d, s.max(b0) - s)))
                } else {
                    (
                        (share(p, b0 + width_ns - s), share(d, b0 + width_ns - s)),
                        (share(p, s.max(b0) - s), share(d, s.max(b0) - s)),
                    )
                };
                level.tokens[b].0 += upto_end.0 - upto_start.0;
                level.tokens[b].1 += upto_end.1 - upto_start.1;
            }
        }
        let mut levels = vec![level];
        while levels.last().is_some_and(|l| l.busy.len() > 1) {
            let Some(l) = levels.last() else { break };
            let pairs = l.busy.len().div_ceil(2);
            let at = |v: usize| v.min(l.busy.len() - 1);
            let next = Level {
                width_ns: l.width_ns * 2,
                busy: (0..pairs)
                    .map(|k| {
                        l.busy[2 * k]
                            + if 2 * k + 1 < l.busy.len() {
                                l.busy[at(2 * k + 1)]
                            } else {
                                0
                            }
                    })
                    .collect(),
                tokens: (0..pairs)
                    .map(|k| {
                        let (a, b) = (l.tokens[2 * k], l.tokens.get(2 * k + 1).copied().unwrap_or((0, 0)));
                        (a.0 + b.0, a.1 + b.1)
                    })
                    .collect(),
                max: (0..pairs)
                    .map(|k| {
                        let (mut a, b) = (l.max[2 * k], l.max.get(2 * k + 1).copied().unwrap_or([0.0; 4]));
                        for (x, y) in a.iter_mut().zip(b) {
                            *x = x.max(y);
                        }
                        a
                    })
                    .collect(),
            };
            levels.push(next);
        }
        StepSummary { t0_ns, levels }
    }

    /// The columns of `vp` (`columns` points wide) from the coarsest level with at least two buckets a column;
    /// `None` when the view is zoomed in past the finest level (draw the steps themselves). Each bucket counts in
    /// the column its start falls in, its busy time shared with the next column when it straddles both; a column
    /// within half a percent of busy all through is busy all through (the buckets' edges are not the columns').
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    pub fn columns(&self, vp: &Viewport, columns: usize) -> Option<ColumnStats> {
        let finest = self.levels.first()?;
        if vp.ns_per_point < 2.0 * finest.width_ns as f64 || columns == 0 {
            return None;
        }
        let level = self
            .levels
            .iter()
            .take_while(|l| 2.0 * l.width_ns as f64 <= vp.ns_per_point)
            .last()?;
        let mut out = ColumnStats {
            busy: vec![0.0; columns],
            tokens: vec![(0, 0); columns],
            max: vec![[0.0; 4]; columns],
        };
        let n = level.busy.len();
        let first = ((vp.start_ns - self.t0_ns).max(0) / level.width_ns) as usize;
        let last = (((vp.end_ns() - self.t0_ns).max(0) / level.width_ns) as usize + 1).min(n);
        let mut busy = vec![0i64; columns];
        for b in first.min(n)..last {
            let start = self.t0_ns + b as i64 * level.width_ns;
            let x = vp.x_from_time(start);
            if x < 0.0 {
                continue;
            }
            let c = x as usize;
            if c >= columns {
                break;
            }
            // A bucket straddling two columns shares its busy time between them by its overlap with each.
            let x1 = vp.x_from_time(start + level.width_ns);
            let split = (c + 1) as f64;
            if x1 > split && c + 1 < columns {
                let right = ((x1 - split) / (x1 - x) * level.busy[b] as f64) as i64;
                busy[c] += level.busy[b] - right;
                busy[c + 1] += right;
            } else {
                busy[c] += level.busy[b];
            }
            let t = &mut out.tokens[c];
            t.0 += level.tokens[b].0;
            t.1 += level.tokens[b].1;
            for (m, v) in out.max[c].iter_mut().zip(level.max[b]) {
                *m = m.max(v);
            }
        }
        out.busy = busy
            .into_iter()
            .map(|t| {
                let share = t as f64 / vp.ns_per_point;
                if share > 0.995 { 1.0 } else { share.max(0.0) as f32 }
            })
            .collect();
        Some(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_of_a_zoomed_out_view_add_up_to_the_steps() {
        let t = crate::test_support::sample("demo.parquet");
        let view = crate::view::TraceView::new(
            std::sync::Arc::new(t),
            crate::view::layout::TrackOrder::Arrival,
            &crate::view::layout::TrackFilter::default(),
        );
        let t = &view.trace;
        for track in &view.engines {
            let rows = t.iterations_of_source(track.source);
            let summary = StepSummary::build(t, rows.clone(), view.t0_ns, view.t1_ns);
            // The whole trace over 500 points: the busy time adds up to the steps' (a column's share times its
            // width), and a column inside the longest step (a prefill of thousands of tokens) is busy all through
            // and over 99 % prefill.
            let vp = Viewport::fit(view.t0_ns, view.t1_ns + 1, 500.0);
            let c = summary.columns(&vp, 500).unwrap();
            let it = &t.iterations;
            let longest = rows.clone().max_by_key(|&i| it.end_ns[i] - it.start_ns[i]).unwrap();
            let middle = vp.x_from_time(i64::midpoint(it.start_ns[longest], it.end_ns[longest])) as usize;
            let (p, d) = c.tokens[middle];
            assert!(
                p > 1_000 && d * 100 < p && c.busy[middle] == 1.0,
                "{p} {d} {}",
                c.busy[middle]
            );
            // Tokens are shared out by time and add up to the steps' (in buckets whose start is in the view).
            let prefill: u64 = rows
                .clone()
                .map(|i| u64::from(it.num_prefill_tokens.at(i).unwrap_or(0)))
                .sum();
            let drawn_prefill: u64 = c.tokens.iter().map(|t| t.0).sum();
            assert!(drawn_prefill == prefill, "{drawn_prefill} of {prefill}");
            let busy: i64 = rows.clone().map(|i| it.end_ns[i] - it.start_ns[i]).sum();
            let drawn: f64 = c.busy.iter().map(|&b| f64::from(b) * vp.ns_per_point).sum();
            assert!(
                (drawn - busy as f64).abs() / (busy as f64) < 0.01,
                "{drawn} against {busy}"
            );
            // The batch-size counter's peak is some column's.
            let peak = rows.clone().map(|i| counter_values(t, i)[0]).fold(0.0f32, f32::max);
            assert_eq!(c.max.iter().map(|m| m[0]).fold(0.0f32, f32::max), peak);
            // Zoomed into 10 ms: the steps themselves.
            assert!(
                summary
                    .columns(&Viewport::fit(view.t0_ns, view.t0_ns + 10_000_000, 500.0), 500)
                    .is_none()
            );
        }
    }
}
