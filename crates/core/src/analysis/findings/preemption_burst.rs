//! Preemption bursts: several preemptions close together on one instance.

use std::fmt::Write as _;

use super::words::{duration, names, range, row_u32};
use super::{Context, Detector, Finding, Kind, MAX_LISTED_REQUESTS, Severity, Thresholds};
use crate::analysis::stats::thousands;
use crate::analysis::summary::Slo;
use crate::trace::Trace;

/// The detector of [`Kind::PreemptionBurst`].
pub(super) struct PreemptionBurst;

impl Detector for PreemptionBurst {
    fn kind(&self) -> Kind {
        Kind::PreemptionBurst
    }

    /// Clusters of steps with preemptions (`num_preempted`) on one instance, each within
    /// `preemption_burst_window_ms` of the previous one, with `preemption_burst_count` preemptions or more. Names the
    /// requests preempted (from the trace's preempted stages).
    fn detect(&self, cx: &Context<'_>) -> Vec<Finding> {
        let (trace, th) = (cx.trace, cx.th);
        let it = &trace.iterations;
        #[expect(clippy::cast_possible_truncation, reason = "a window in ms, far below 2^63 ns")]
        let window_ns = (th.preemption_burst_window_ms * 1e6) as i64;
        let mut out = Vec::new();
        for &(source, ref rows) in trace.sources_with_iterations() {
            let preempting: Vec<usize> = (rows.start as usize..rows.end as usize)
                .filter(|&i| it.num_preempted.at(i).unwrap_or(0) > 0)
                .collect();
            let mut a = 0;
            while a < preempting.len() {
                let mut b = a + 1;
                while b < preempting.len() && it.start_ns[preempting[b]] - it.start_ns[preempting[b - 1]] <= window_ns {
                    b += 1;
                }
                let cluster = &preempting[a..b];
                let total: u32 = cluster.iter().map(|&i| it.num_preempted.at(i).unwrap_or(0)).sum();
                if total >= th.preemption_burst_count {
                    let (first, last) = (cluster[0], cluster[cluster.len() - 1]);
                    let (from_ns, to_ns) = range(it.start_ns[first], it.end_ns[last]);
                    let mut requests = cx.preempted_in(source, from_ns, to_ns);
                    let mut summary = format!(
                        "{total} preemptions in {} steps{} within {}",
                        cluster.len(),
                        trace.label(source).map_or(String::new(), |s| format!(" of {s}")),
                        duration(to_ns - from_ns)
                    );
                    if !requests.is_empty() {
                        let _ = write!(summary, ": {} recomputed", names(trace, &requests));
                        let recomputed = cx.recomputed_tokens(source, from_ns, to_ns);
                        if recomputed > 0 {
                            let _ = write!(summary, " ({} tokens computed again)", thousands(recomputed));
                        }
                    }
                    if let Some(peak) = cluster.iter().filter_map(|&i| it.kv_usage.at(i)).reduce(f64::max) {
                        let _ = write!(summary, " (KV cache up to {:.1} %)", 100.0 * peak);
                    }
                    requests.truncate(MAX_LISTED_REQUESTS);
                    out.push(Finding {
                        kind: Kind::PreemptionBurst,
                        severity: Severity::Warning,
                        summary,
                        from_ns,
                        to_ns,
                        requests,
                        steps: cluster.iter().map(|&i| row_u32(i)).collect(),
                        tokens: Vec::new(),
                    });
                }
                a = b;
            }
        }
        out
    }
}

/// [`Kind::PreemptionBurst`]'s findings alone, unsorted.
pub fn preemption_bursts(trace: &Trace, th: &Thresholds) -> Vec<Finding> {
    PreemptionBurst.detect(&Context::new(trace, &Slo::default(), th))
}
