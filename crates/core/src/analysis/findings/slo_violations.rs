//! SLO violations: requests that missed an objective, one finding per objective.

use super::words::{percent, range, row_u32};
use super::{Context, Detector, Finding, Kind, MAX_LISTED_REQUESTS, Severity, Thresholds};
use crate::analysis::metrics::ms;
use crate::analysis::summary::Slo;
use crate::trace::Trace;

/// The detector of [`Kind::SloViolations`].
pub(super) struct SloViolations;

impl Detector for SloViolations {
    fn kind(&self) -> Kind {
        Kind::SloViolations
    }

    /// One finding per objective (TTFT, TPOT) that requests missed, as [`Slo::misses`] judges: how many, and the
    /// worst of them (up to [`MAX_LISTED_REQUESTS`], worst first; TTFT misses without a first token count as worst).
    fn detect(&self, cx: &Context<'_>) -> Vec<Finding> {
        let (trace, slo) = (cx.trace, cx.slo);
        if !slo.is_set() {
            return Vec::new();
        }
        let n = trace.request_count();
        // (request, figure in ns; None = no first token)
        let mut ttft: Vec<(u32, Option<f64>)> = Vec::new();
        let mut tpot: Vec<(u32, Option<f64>)> = Vec::new();
        for r in 0..row_u32(n) {
            let m = cx.metrics(r);
            if let Some(limit) = slo.ttft_ms {
                match m.ttft_ns.map(ms) {
                    Some(t) if t <= limit => {}
                    t => ttft.push((r, t)),
                }
            }
            if let Some(limit) = slo.tpot_ms
                && let Some(t) = m.tpot_ns.map(|t| t / 1e6).filter(|&t| t > limit)
            {
                tpot.push((r, Some(t)));
            }
        }
        let mut out = Vec::new();
        for (name, limit, mut missed) in [("TTFT", slo.ttft_ms, ttft), ("TPOT", slo.tpot_ms, tpot)] {
            let Some(limit) = limit else { continue };
            if missed.is_empty() {
                continue;
            }
            // Worst first: no figure, then the largest.
            missed.sort_by(|a, b| match (a.1, b.1) {
                (None, None) => a.0.cmp(&b.0),
                (None, Some(_)) => std::cmp::Ordering::Less,
                (Some(_), None) => std::cmp::Ordering::Greater,
                (Some(x), Some(y)) => y.total_cmp(&x).then(a.0.cmp(&b.0)),
            });
            let from = missed.iter().map(|m| trace.requests.arrival_ns[m.0 as usize]).min();
            let to = missed
                .iter()
                .map(|m| cx.finish_ns(m.0).unwrap_or(trace.requests.arrival_ns[m.0 as usize]))
                .max();
            let (from_ns, to_ns) = range(from.unwrap_or(0), to.unwrap_or(0));
            let worst = &missed[0];
            let worst_figure = worst
                .1
                .map_or_else(|| "no first token".to_owned(), |v| format!("{name} {v:.1} ms"));
            let summary = format!(
                "{} of {n} requests ({:.1} %) missed the {name} objective of {limit} ms; worst {} ({worst_figure})",
                missed.len(),
                percent(missed.len(), n),
                trace.request_id(worst.0),
            );
            let requests: Vec<u32> = missed.iter().take(MAX_LISTED_REQUESTS).map(|m| m.0).collect();
            out.push(Finding {
                kind: Kind::SloViolations,
                severity: Severity::Warning,
                summary,
                from_ns,
                to_ns,
                requests,
                steps: Vec::new(),
                tokens: Vec::new(),
            });
        }
        out
    }
}

/// [`Kind::SloViolations`]'s findings alone, unsorted.
pub fn slo_violations(trace: &Trace, slo: &Slo) -> Vec<Finding> {
    SloViolations.detect(&Context::new(trace, slo, &Thresholds::default()))
}
