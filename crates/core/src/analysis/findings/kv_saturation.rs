//! KV-cache saturation: episodes of steps with the cache (nearly) full, one finding each.

use std::fmt::Write as _;

use super::words::{duration, names, range, row_u32};
use super::{Context, Detector, Finding, Kind, MAX_LISTED_REQUESTS, Severity, Thresholds};
use crate::analysis::stats::thousands;
use crate::analysis::summary::Slo;
use crate::trace::Trace;

/// Saturated runs closer than this (ms, the end of one to the start of the next) are one episode: a cache that dips
/// under the line for a few steps and fills again has not recovered. Ten seconds, the overload finding's window:
/// ten minutes of real Azure conversations replayed on `l4-8b` at twice their speed gave 154 runs, many one step
/// long, a few seconds apart.
pub const EPISODE_GAP_MS: f64 = 10_000.0;

/// An episode whose saturated steps last less than this in all (ms), and in which nothing was preempted, is a
/// brush with the limit, not a saturation: a step or two at 95 % that the scheduler absorbs.
pub const MIN_SATURATED_MS: f64 = 1_000.0;

/// The detector of [`Kind::KvSaturation`].
pub(super) struct KvSaturation;

impl Detector for KvSaturation {
    fn kind(&self) -> Kind {
        Kind::KvSaturation
    }

    /// Episodes of one instance's steps with `kv_usage` at `kv_saturation` or more: runs of such steps, merged
    /// when the cache drops below the line for less than [`EPISODE_GAP_MS`] between them, kept when their saturated
    /// steps last [`MIN_SATURATED_MS`] in all or a request was preempted meanwhile. One finding per episode, naming
    /// the requests preempted during it.
    fn detect(&self, cx: &Context<'_>) -> Vec<Finding> {
        let (trace, th) = (cx.trace, cx.th);
        let it = &trace.iterations;
        let saturated = |i: usize| it.kv_usage.at(i).is_some_and(|u| u >= th.kv_saturation);
        let mut out = Vec::new();
        for &(source, ref rows) in trace.sources_with_iterations() {
            let steps: Vec<usize> = (rows.start as usize..rows.end as usize)
                .filter(|&i| saturated(i))
                .collect();
            // Episodes: saturated steps whose gap (end of one to start of the next) is under the merge gap.
            let mut episodes: Vec<&[usize]> = Vec::new();
            let mut first = 0;
            for k in 1..=steps.len() {
                let split = k == steps.len() || {
                    #[expect(clippy::cast_precision_loss, reason = "ns far below 2^53")]
                    let gap_ms = (it.start_ns[steps[k]] - it.end_ns[steps[k - 1]]) as f64 / 1e6;
                    gap_ms >= EPISODE_GAP_MS
                };
                if split {
                    episodes.push(&steps[first..k]);
                    first = k;
                }
            }
            for episode in episodes {
                let (Some(&a), Some(&last)) = (episode.first(), episode.last()) else {
                    continue;
                };
                let (from_ns, to_ns) = range(it.start_ns[a], it.end_ns[last]);
                let saturated_ns: i64 = episode.iter().map(|&i| it.end_ns[i] - it.start_ns[i]).sum();
                let preempted: u32 = (a..=last).map(|i| it.num_preempted.at(i).unwrap_or(0)).sum();
                #[expect(clippy::cast_precision_loss, reason = "ns far below 2^53")]
                if (saturated_ns as f64) < MIN_SATURATED_MS * 1e6 && preempted == 0 {
                    continue;
                }
                let peak = episode.iter().filter_map(|&i| it.kv_usage.at(i)).fold(0.0, f64::max);
                let mut requests = cx.preempted_in(source, from_ns, to_ns);
                let n = episode.len();
                let mut summary = format!(
                    "KV cache{} at {:.0} % or more for {} step{} ({}",
                    trace.label(source).map_or(String::new(), |s| format!(" of {s}")),
                    100.0 * th.kv_saturation,
                    thousands(n as u64),
                    if n == 1 { "" } else { "s" },
                    duration(saturated_ns),
                );
                if n != last - a + 1 {
                    let _ = write!(summary, " within {}", duration(to_ns - from_ns));
                }
                let _ = write!(summary, "), peak {:.1} %", 100.0 * peak);
                if preempted > 0 {
                    let _ = write!(summary, "; {preempted} preemptions");
                    if !requests.is_empty() {
                        let _ = write!(summary, " ({})", names(trace, &requests));
                    }
                    let recomputed = cx.recomputed_tokens(source, from_ns, to_ns);
                    if recomputed > 0 {
                        let _ = write!(summary, ", {} tokens computed again", thousands(recomputed));
                    }
                }
                requests.truncate(MAX_LISTED_REQUESTS);
                out.push(Finding {
                    kind: Kind::KvSaturation,
                    severity: Severity::Warning,
                    summary,
                    from_ns,
                    to_ns,
                    requests,
                    steps: episode.iter().map(|&i| row_u32(i)).collect(),
                    tokens: Vec::new(),
                });
            }
        }
        // Instances with counter samples but no steps (a server log): judged from the samples.
        out.extend(super::from_samples::kv_saturation(trace, th));
        out
    }
}

/// [`Kind::KvSaturation`]'s findings alone, unsorted.
pub fn kv_saturation(trace: &Trace, th: &Thresholds) -> Vec<Finding> {
    KvSaturation.detect(&Context::new(trace, &Slo::default(), th))
}
