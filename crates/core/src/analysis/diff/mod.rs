//! Two traces compared, "before" (A) and "after" (B): their figures side by side with the change, the findings
//! present in one and not the other, and, where the same requests appear in both, each request's change.
//!
//! Requests are paired by `request_id` when at least half of the smaller trace's ids are in both and those pairs
//! mostly agree on their prompt lengths (a replay keeps its original's ids; so does a re-run of a benchmark that
//! names its requests); otherwise by arrival and prompt length (the same offset from the trace's first arrival
//! within [`ARRIVAL_TOLERANCE_NS`] and the same known `input_tokens`), as two recordings of one prompt set at one
//! rate are. A pairing that covers less than half of the smaller trace is not reported: it would compare requests
//! that merely look alike.
//!
//! `figures` puts the figures side by side, `findings` matches the findings, `pairing` pairs the requests, `deltas`
//! measures each pair's change; this file assembles the comparison.

mod deltas;
mod figures;
mod findings;
mod pairing;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod token_tests;
mod tokens;

use crate::analysis::cost::Prices;
use crate::analysis::findings::{Finding, Thresholds, find};
use crate::analysis::metrics::{RequestMetrics, request_metrics};
use crate::analysis::summary::{GroupBy, Slo, Summary, summarize_all, summarize_by};
use crate::trace::Trace;

pub use deltas::*;
pub use figures::*;
pub use findings::*;
pub use pairing::*;
pub use tokens::*;

/// One group's figures in A and B (`--by`); a group missing from one trace has `None` there.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupPair {
    /// The label's value.
    pub key: String,
    /// A's figures.
    pub a: Option<Summary>,
    /// B's figures.
    pub b: Option<Summary>,
}

/// The whole comparison.
#[derive(Debug, Clone)]
pub struct Comparison {
    /// A's figures.
    pub a: Summary,
    /// B's figures.
    pub b: Summary,
    /// Each figure's change.
    pub changes: Vec<Change>,
    /// A's findings.
    pub findings_a: Vec<Finding>,
    /// B's findings.
    pub findings_b: Vec<Finding>,
    /// Which are in both.
    pub findings: FindingsDiff,
    /// The requests paired.
    pub pairing: Pairing,
    /// Each pair's figures.
    pub deltas: Vec<PairDelta>,
    /// B's clock minus A's ([`offset_ns`]): a time of A plus this is the same moment of B.
    pub offset_ns: i64,
    /// Per group, with `by`.
    pub groups: Vec<GroupPair>,
}

impl Comparison {
    /// How the pairs' figure moved.
    pub fn shift(&self, metric: Metric) -> Shift {
        Shift::of(&self.deltas, metric)
    }

    /// The change of the figure `key`.
    pub fn change(&self, key: &str) -> Option<&Change> {
        self.changes.iter().find(|c| c.key == key)
    }
}

/// What to compare with.
#[derive(Debug, Clone, Copy, Default)]
pub struct CompareOptions<'a> {
    /// The objectives attainment and goodput are judged by, and the SLO-violation findings.
    pub slo: Slo,
    /// The detectors' thresholds.
    pub thresholds: Option<&'a Thresholds>,
    /// A price table, for cost.
    pub prices: Option<&'a Prices>,
    /// Figures per group too.
    pub by: Option<GroupBy>,
}

/// One side of a comparison, its figures and findings computed: from a loaded trace ([`compare`]), or from a
/// streamed one, whose `trace` holds its requests without their tokens.
pub struct Computed<'t> {
    /// The requests (the findings name them by row).
    pub trace: &'t Trace,
    pub summary: Summary,
    pub findings: Vec<Finding>,
    /// A request row's latency figures.
    pub metrics: Box<dyn Fn(u32) -> RequestMetrics + Sync + 't>,
}

/// Compares A and B: both are summarised and searched at once (rayon), then their requests paired and their
/// findings matched.
pub fn compare(a: &Trace, b: &Trace, options: &CompareOptions<'_>) -> Comparison {
    let defaults = Thresholds::default();
    let th = options.thresholds.unwrap_or(&defaults);
    let (slo, prices) = (options.slo, options.prices);
    let ((sa, fa), (sb, fb)) = rayon::join(
        || (summarize_all(a, slo, prices), find(a, &slo, th)),
        || (summarize_all(b, slo, prices), find(b, &slo, th)),
    );
    let side = |trace, summary, findings| Computed {
        trace,
        summary,
        findings,
        metrics: Box::new(move |r| request_metrics(trace, r)),
    };
    let mut c = compare_computed(side(a, sa, fa), side(b, sb, fb));
    c.groups = options.by.map_or_else(Vec::new, |by| {
        let (ga, gb) = rayon::join(|| summarize_by(a, by, slo, prices), || summarize_by(b, by, slo, prices));
        join_groups(ga, gb)
    });
    c
}

/// Compares two sides computed already: their figures, their requests paired and their findings matched (no
/// groups).
pub fn compare_computed(a: Computed<'_>, b: Computed<'_>) -> Comparison {
    let pairing = pair_requests(a.trace, b.trace);
    let offset = offset_ns(a.trace, b.trace, &pairing);
    let deltas = pairing
        .pairs
        .iter()
        .map(|&(ra, rb)| PairDelta::between((ra, &(a.metrics)(ra)), (rb, &(b.metrics)(rb))))
        .collect();
    Comparison {
        changes: changes(&a.summary, &b.summary),
        findings: match_findings(&a.findings, &b.findings, &pairing, offset),
        offset_ns: offset,
        a: a.summary,
        b: b.summary,
        findings_a: a.findings,
        findings_b: b.findings,
        pairing,
        deltas,
        groups: Vec::new(),
    }
}

fn join_groups(a: Vec<(String, Summary)>, b: Vec<(String, Summary)>) -> Vec<GroupPair> {
    let mut map: std::collections::BTreeMap<String, GroupPair> = std::collections::BTreeMap::new();
    for (key, s) in a {
        map.insert(
            key.clone(),
            GroupPair {
                key,
                a: Some(s),
                b: None,
            },
        );
    }
    for (key, s) in b {
        map.entry(key.clone()).or_insert(GroupPair { key, a: None, b: None }).b = Some(s);
    }
    map.into_values().collect()
}
