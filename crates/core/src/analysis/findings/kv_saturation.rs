//! KV-cache saturation: runs of steps with the cache (nearly) full.

use std::fmt::Write as _;

use super::words::{duration, names, range, row_u32};
use super::{Context, Detector, Finding, Kind, MAX_LISTED_REQUESTS, Severity, Thresholds};
use crate::analysis::stats::thousands;
use crate::analysis::summary::Slo;
use crate::trace::Trace;

/// The detector of [`Kind::KvSaturation`].
pub(super) struct KvSaturation;

impl Detector for KvSaturation {
    fn kind(&self) -> Kind {
        Kind::KvSaturation
    }

    /// Runs of consecutive steps of one instance with `kv_usage` at `kv_saturation` or more: one finding per run,
    /// naming the requests preempted during it.
    fn detect(&self, cx: &Context<'_>) -> Vec<Finding> {
        let (trace, th) = (cx.trace, cx.th);
        let it = &trace.iterations;
        let saturated = |i: usize| it.kv_usage[i].is_some_and(|u| u >= th.kv_saturation);
        let mut out = Vec::new();
        for &(source, ref rows) in trace.sources_with_iterations() {
            let (start, end) = (rows.start as usize, rows.end as usize);
            let mut a = start;
            while a < end {
                if !saturated(a) {
                    a += 1;
                    continue;
                }
                let mut b = a + 1;
                while b < end && saturated(b) {
                    b += 1;
                }
                let (from_ns, to_ns) = range(it.start_ns[a], it.end_ns[b - 1]);
                let peak = (a..b).filter_map(|i| it.kv_usage[i]).fold(0.0, f64::max);
                let preempted: u32 = (a..b).map(|i| it.num_preempted[i].unwrap_or(0)).sum();
                let mut requests = cx.preempted_in(source, from_ns, to_ns);
                let mut summary = format!(
                    "KV cache{} at {:.0} % or more for {} step{} ({}), peak {:.1} %",
                    trace.label(source).map_or(String::new(), |s| format!(" of {s}")),
                    100.0 * th.kv_saturation,
                    b - a,
                    if b - a == 1 { "" } else { "s" },
                    duration(to_ns - from_ns),
                    100.0 * peak
                );
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
                    steps: (a..b).map(row_u32).collect(),
                    tokens: Vec::new(),
                });
                a = b;
            }
        }
        out
    }
}

/// [`Kind::KvSaturation`]'s findings alone, unsorted.
pub fn kv_saturation(trace: &Trace, th: &Thresholds) -> Vec<Finding> {
    KvSaturation.detect(&Context::new(trace, &Slo::default(), th))
}
