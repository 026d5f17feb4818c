//! Each paired request's change, and the requests that changed most.

use serde::Serialize;

use super::*;
use crate::analysis::metrics::{RequestMetrics, ms};

/// One paired request's figures in A and B, ms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairDelta {
    /// Row in A.
    pub a: u32,
    /// Row in B.
    pub b: u32,
    /// TTFT in A and B.
    pub ttft_ms: (Option<f64>, Option<f64>),
    /// TPOT in A and B.
    pub tpot_ms: (Option<f64>, Option<f64>),
    /// E2E in A and B.
    pub e2e_ms: (Option<f64>, Option<f64>),
}

impl PairDelta {
    /// The change between A's request `ra` and B's `rb`, of the figures given.
    pub fn between((ra, ma): (u32, &RequestMetrics), (rb, mb): (u32, &RequestMetrics)) -> Self {
        let ttft = |m: &RequestMetrics| m.ttft_ns.map(ms);
        let tpot = |m: &RequestMetrics| m.tpot_ns.map(|t| t / 1e6);
        let e2e = |m: &RequestMetrics| m.e2e_ns.map(ms);
        PairDelta {
            a: ra,
            b: rb,
            ttft_ms: (ttft(ma), ttft(mb)),
            tpot_ms: (tpot(ma), tpot(mb)),
            e2e_ms: (e2e(ma), e2e(mb)),
        }
    }

    pub fn change(self, metric: Metric) -> Option<f64> {
        let (x, y) = self.get(metric);
        x.zip(y).map(|(x, y)| y - x)
    }

    /// A's and B's figure of a metric.
    pub fn get(self, metric: Metric) -> (Option<f64>, Option<f64>) {
        match metric {
            Metric::Ttft => self.ttft_ms,
            Metric::Tpot => self.tpot_ms,
            Metric::E2e => self.e2e_ms,
        }
    }
}

/// A per-request latency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    /// Time to first token.
    Ttft,
    /// Time per output token.
    Tpot,
    /// End to end.
    E2e,
}

impl Metric {
    /// Every metric.
    pub const ALL: [Metric; 3] = [Metric::Ttft, Metric::Tpot, Metric::E2e];

    /// The upper-case name.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Ttft => "TTFT",
            Metric::Tpot => "TPOT",
            Metric::E2e => "E2E",
        }
    }
}

/// How the paired requests' figure moved.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Shift {
    /// Pairs with the figure defined in both.
    pub pairs: u64,
    /// Faster in B by more than [`SAME_WITHIN`] of A's figure.
    pub faster: u64,
    /// Slower in B by more than [`SAME_WITHIN`].
    pub slower: u64,
    /// Median of B − A, ms.
    pub median_change_ms: Option<f64>,
    /// Largest slowdown (B − A), ms.
    pub worst_change_ms: Option<f64>,
    /// Largest speed-up (most negative B − A), ms.
    pub best_change_ms: Option<f64>,
}

impl Shift {
    pub(super) fn of(deltas: &[PairDelta], metric: Metric) -> Self {
        let mut changes = Vec::new();
        let (mut faster, mut slower) = (0, 0);
        for d in deltas {
            let (Some(x), Some(y)) = d.get(metric) else { continue };
            let change = y - x;
            if change.abs() > SAME_WITHIN * x.abs() {
                if change < 0.0 {
                    faster += 1;
                } else {
                    slower += 1;
                }
            }
            changes.push(change);
        }
        changes.sort_by(f64::total_cmp);
        Shift {
            pairs: changes.len() as u64,
            faster,
            slower,
            median_change_ms: crate::analysis::metrics::nearest_rank(&changes, 50),
            worst_change_ms: changes.last().copied(),
            best_change_ms: changes.first().copied(),
        }
    }
}

/// The paired requests whose `metric` changed most (either way), largest |B − A| first, at most `n`.
pub fn most_changed(deltas: &[PairDelta], metric: Metric, n: usize) -> Vec<PairDelta> {
    let mut v: Vec<(f64, PairDelta)> = deltas
        .iter()
        .filter_map(|d| d.change(metric).map(|c| (c.abs(), *d)))
        .filter(|(c, _)| *c > 0.0)
        .collect();
    v.sort_by(|x, y| y.0.total_cmp(&x.0).then(x.1.a.cmp(&y.1.a)));
    v.into_iter().take(n).map(|(_, d)| d).collect()
}
