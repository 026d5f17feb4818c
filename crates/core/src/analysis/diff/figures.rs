//! The figures of two traces side by side: each change, and its verdict.

use serde::Serialize;

use crate::analysis::stats::Unit;
use crate::analysis::summary::Summary;

/// Which way a figure is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    /// Latencies, cost.
    Lower,
    /// Throughput, attainment, goodput.
    Higher,
    /// Counts that describe the workload, not its service.
    Neither,
}

/// A figure of a [`Summary`] the comparison shows.
#[derive(Debug, Clone, Copy)]
pub struct Figure {
    /// Machine name (JSON key).
    pub key: &'static str,
    /// Human name, with its unit.
    pub label: &'static str,
    /// How it reads.
    pub unit: Unit,
    /// Which way is better.
    pub better: Better,
    /// The figure of a summary; `None` when undefined.
    pub get: fn(&Summary) -> Option<f64>,
}

#[expect(clippy::cast_precision_loss, reason = "counts far below 2^53")]
#[expect(
    clippy::unnecessary_wraps,
    reason = "the shape of the other figures, which may be absent"
)]
fn count(v: u64) -> Option<f64> {
    Some(v as f64)
}

macro_rules! figures {
    ($( $key:literal, $label:literal, $unit:ident, $better:ident, $get:expr; )+) => {
        /// Every figure, in display order.
        pub const FIGURES: &[Figure] = &[
            $( Figure { key: $key, label: $label, unit: Unit::$unit, better: Better::$better, get: $get }, )+
        ];
    };
}

figures! {
    "requests", "requests", Count, Neither, |s| count(s.requests);
    "input_tokens", "input tokens", Count, Neither, |s| count(s.input_tokens);
    "cached_tokens", "cached tokens", Count, Higher, |s| s.cached_tokens.and_then(count);
    "output_tokens", "output tokens", Count, Neither, |s| count(s.output_tokens);
    "span_s", "span s", Rate, Neither, |s| s.span_ms.map(|v| v / 1e3);
    "throughput_tok_s", "throughput tok/s", Rate, Higher, |s| s.throughput_tok_s;
    "ttft_mean_ms", "TTFT mean ms", Ms, Lower, |s| s.ttft_ms.mean;
    "ttft_p50_ms", "TTFT p50 ms", Ms, Lower, |s| s.ttft_ms.p50;
    "ttft_p90_ms", "TTFT p90 ms", Ms, Lower, |s| s.ttft_ms.p90;
    "ttft_p99_ms", "TTFT p99 ms", Ms, Lower, |s| s.ttft_ms.p99;
    "ttft_max_ms", "TTFT max ms", Ms, Lower, |s| s.ttft_ms.max;
    "tpot_mean_ms", "TPOT mean ms", Ms, Lower, |s| s.tpot_ms.mean;
    "tpot_p50_ms", "TPOT p50 ms", Ms, Lower, |s| s.tpot_ms.p50;
    "tpot_p90_ms", "TPOT p90 ms", Ms, Lower, |s| s.tpot_ms.p90;
    "tpot_p99_ms", "TPOT p99 ms", Ms, Lower, |s| s.tpot_ms.p99;
    "itl_p99_ms", "ITL p99 ms", Ms, Lower, |s| s.itl_ms.p99;
    "itl_max_ms", "ITL max ms", Ms, Lower, |s| s.itl_ms.max;
    "e2e_p50_ms", "E2E p50 ms", Ms, Lower, |s| s.e2e_ms.p50;
    "e2e_p99_ms", "E2E p99 ms", Ms, Lower, |s| s.e2e_ms.p99;
    "queue_p50_ms", "queue p50 ms", Ms, Lower, |s| s.queue_ms.p50;
    "queue_p99_ms", "queue p99 ms", Ms, Lower, |s| s.queue_ms.p99;
    "slo_attainment", "SLO met", Share, Higher, |s| s.slo.and_then(|x| x.attainment);
    "goodput_tok_s", "goodput tok/s", Rate, Higher, |s| s.slo.and_then(|x| x.goodput_tok_s);
    "cost", "cost", Money, Lower, |s| s.cost.map(|c| c.total);
    "client_ttft_p50_ms", "client TTFT p50 ms", Ms, Lower, |s| s.delivery.as_ref().and_then(|d| d.client_ttft_ms.p50);
    "client_ttft_p99_ms", "client TTFT p99 ms", Ms, Lower, |s| s.delivery.as_ref().and_then(|d| d.client_ttft_ms.p99);
    "ttft_gap_p50_ms", "TTFT gap p50 ms", Ms, Lower, |s| s.delivery.as_ref().and_then(|d| d.ttft_gap_ms.p50);
    "delivery_p50_ms", "token delivery p50 ms", Ms, Lower, |s| s.delivery.as_ref().and_then(|d| d.token_ms.p50);
    "delivery_p99_ms", "token delivery p99 ms", Ms, Lower, |s| s.delivery.as_ref().and_then(|d| d.token_ms.p99);
}

/// A change smaller than this share of A's figure reads as no change: percentiles of two runs of one workload
/// differ by a few tenths of a percent without either being better.
pub const SAME_WITHIN: f64 = 0.01;

/// How a figure moved from A to B.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Moved the better way by more than [`SAME_WITHIN`].
    Better,
    /// Moved the worse way by more than [`SAME_WITHIN`].
    Worse,
    /// Within [`SAME_WITHIN`].
    Same,
    /// Changed, but the figure has no better way ([`Better::Neither`]).
    Changed,
    /// Undefined in A or B.
    Undefined,
}

/// One figure of A and B with its change.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Change {
    /// The figure's key.
    pub key: &'static str,
    /// The figure's human name.
    #[serde(skip)]
    pub label: &'static str,
    /// How it reads.
    #[serde(skip)]
    pub unit: Unit,
    /// A's figure.
    pub a: Option<f64>,
    /// B's figure.
    pub b: Option<f64>,
    /// B − A.
    pub change: Option<f64>,
    /// (B − A) / A; undefined when A is 0.
    pub relative: Option<f64>,
    /// Better, worse or the same.
    pub verdict: Verdict,
}

impl Change {
    /// The change of one figure.
    pub fn of(figure: &Figure, a: &Summary, b: &Summary) -> Self {
        let (va, vb) = ((figure.get)(a), (figure.get)(b));
        let change = va.zip(vb).map(|(x, y)| y - x);
        let relative = va.zip(change).filter(|(x, _)| *x != 0.0).map(|(x, d)| d / x.abs());
        let verdict = match (change, relative) {
            (None, _) => Verdict::Undefined,
            (Some(0.0), _) => Verdict::Same,
            (Some(_), Some(r)) if r.abs() < SAME_WITHIN => Verdict::Same,
            (Some(d), _) => match figure.better {
                Better::Neither => Verdict::Changed,
                Better::Lower if d < 0.0 => Verdict::Better,
                Better::Higher if d > 0.0 => Verdict::Better,
                _ => Verdict::Worse,
            },
        };
        Change {
            key: figure.key,
            label: figure.label,
            unit: figure.unit,
            a: va,
            b: vb,
            change,
            relative,
            verdict,
        }
    }
}

impl Change {
    /// B − A as tables show it, with its sign: `+12.5`, `-3`, `+4.0 pt` (percentage points for shares); `-` when
    /// undefined.
    pub fn change_text(&self) -> String {
        let Some(d) = self.change else { return "-".to_owned() };
        let sign = if d > 0.0 {
            "+"
        } else if d < 0.0 {
            "-"
        } else {
            ""
        };
        let amount = match self.unit {
            Unit::Share => format!("{:.1} pt", d.abs() * 100.0),
            unit => unit.format(Some(d.abs())),
        };
        format!("{sign}{amount}")
    }
}

/// Every figure's change; the SLO figures only with objectives, cost only with a price table.
pub fn changes(a: &Summary, b: &Summary) -> Vec<Change> {
    FIGURES
        .iter()
        .filter(|f| match f.key {
            "slo_attainment" | "goodput_tok_s" => a.slo.is_some() || b.slo.is_some(),
            "cost" => a.cost.is_some() || b.cost.is_some(),
            k if k.starts_with("client_") || k.starts_with("delivery_") || k.starts_with("ttft_gap") => {
                a.delivery.is_some() || b.delivery.is_some()
            }
            _ => true,
        })
        .map(|f| Change::of(f, a, b))
        .collect()
}
