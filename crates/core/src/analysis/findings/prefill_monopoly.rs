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

    /// Requests whose prompt held their instance for an outsized time while other requests waited (queued or
    /// preempted during those steps; without queue times in the trace, `num_waiting` after the first step): a run
    /// of consecutive steps computing it (one step without chunked prefill) that lasted `outsized_prefill_factor` ×
    /// the instance's ordinary prefill time (the median over its requests) or more. An instance with too few
    /// requests to know an ordinary prefill falls back to a count: `monopoly_steps` consecutive steps. Names the
    /// waiting requests and the queue time the steps added to each (their wait inside the steps' span). One finding
    /// per run of steps; the monopolising request is the subject.
    fn detect(&self, cx: &Context<'_>) -> Vec<Finding> {
        let (trace, th) = (cx.trace, cx.th);
        let waits = cx.waits();
        let it = &trace.iterations;
        let st = &trace.stages;
        let min_steps = th.monopoly_steps.max(1) as usize;
        let times = cx.prefill_times();
        let mut out = Vec::new();
        for r in 0..row_u32(trace.request_count()) {
            // Prefill chunks in step order: runs of consecutive rows of one source.
            let mut chunks: Vec<(u32, u32)> = trace
                .explicit_stages_of(r)
                .filter(|&s| st.kind[s] == StageKind::Prefill)
                .filter_map(|s| st.iter_row[s].map(|row| (row, st.tokens[s].unwrap_or(0))))
                .collect();
            if chunks.is_empty() {
                continue;
            }
            chunks.sort_unstable();
            let ordinary = times.ordinary(trace.requests.source[r as usize]);
            let mut a = 0;
            while a < chunks.len() {
                let mut b = a + 1;
                while b < chunks.len()
                    && chunks[b].0 == chunks[b - 1].0 + 1
                    && it.source[chunks[b].0 as usize] == it.source[chunks[a].0 as usize]
                {
                    b += 1;
                }
                // An outsized prefill in time, where the instance shows what an ordinary one takes; else a count. The
                // run's time is its share of each step's (its tokens among the step's prompt tokens).
                let run_time: i64 = chunks[a..b]
                    .iter()
                    .map(|&(row, n)| times.work_of_chunk(trace, cx.prefills(), row as usize, n))
                    .sum();
                #[expect(clippy::cast_precision_loss, reason = "ns far below 2^53")]
                let held = match ordinary {
                    Some(o) => run_time as f64 >= th.outsized_prefill_factor * o as f64,
                    None => b - a >= min_steps,
                };
                if held && let Some(f) = monopoly_finding(cx, waits, r, &chunks[a..b]) {
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

/// The finding of one run of consecutive prefill steps of `request`, if others waited and it cost them: the longest
/// waiter's added wait a second or more, or `monopoly_ttft_share` of its TTFT (judged where the trace knows who
/// waited, not from the steps' counters alone).
fn monopoly_finding(cx: &Context<'_>, waits: &WaitIndex, request: u32, run: &[(u32, u32)]) -> Option<Finding> {
    let trace = cx.trace;
    let it = &trace.iterations;
    let (first, last) = (run[0].0 as usize, run[run.len() - 1].0 as usize);
    let source = it.source[first];
    let (from_ns, to_ns) = range(it.start_ns[first], it.end_ns[last]);
    let waiting = waits.waiting(source, from_ns, to_ns, request);
    let max_waiting = run[1..]
        .iter()
        .filter_map(|&(row, _)| it.num_waiting.at(row as usize))
        .max()
        .unwrap_or(0);
    if waiting.is_empty() && max_waiting == 0 {
        return None;
    }
    let tokens: u64 = run.iter().map(|&(_, n)| u64::from(n)).sum();
    let id = trace.request_id(request);
    let on = trace.label(source).map_or(String::new(), |s| format!(" of {s}"));
    let steps = if run.len() == 1 {
        "a whole step".to_owned()
    } else {
        format!("{} consecutive steps", run.len())
    };
    let mut summary = format!(
        "{id}'s prefill of {} prompt tokens took {steps}{on} ({})",
        thousands(tokens),
        duration(to_ns - from_ns)
    );
    let longest = waiting.first().map_or(0, |w| w.1);
    // What it cost: a second of added wait or more is one a user notices whatever else delayed them (an overloaded
    // engine queues everyone); less than that must be a large share of the waiter's first token.
    #[expect(clippy::cast_precision_loss, reason = "ns far below 2^53")]
    if let Some(&(waiter, added)) = waiting.first()
        && ms(added) < CRITICAL_DELAY_MS
        && let Some(ttft) = cx.metrics(waiter).ttft_ns.filter(|&t| t > 0)
        && (added as f64) < cx.th.monopoly_ttft_share * ttft as f64
    {
        return None;
    }
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
        tokens: cx.tokens.rows(request).next().into_iter().collect(),
    })
}
