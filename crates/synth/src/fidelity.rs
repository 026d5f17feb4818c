//! How far a simulated run is from a real one (or a repeat of a run from the first): the latency figures
//! percentile by percentile, each with its signed error and a verdict against a tolerance.

use serde::{Deserialize, Serialize};

use tokenscope_core::analysis::metrics::Distribution;
use tokenscope_core::analysis::summary::{Slo, Summary, summarize_all};
use tokenscope_core::trace::Trace;

/// The figures compared, in the report's order.
pub const FIGURES: [&str; 5] = ["TTFT", "ITL", "TPOT", "E2E", "queue"];
/// The percentiles compared.
pub const PERCENTILES: [u32; 4] = [50, 90, 95, 99];

/// When a figure counts as reproduced: within `pct` % of the real one, or within `floor_ms` of it (a 3 ms queue
/// predicted as 5 ms is 67 % off, and no one would call it wrong).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Tolerance {
    /// Relative tolerance, %.
    pub pct: f64,
    /// Absolute tolerance, ms.
    pub floor_ms: f64,
}

impl Default for Tolerance {
    fn default() -> Self {
        Tolerance {
            pct: 10.0,
            floor_ms: 5.0,
        }
    }
}

/// One figure at one percentile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FigureError {
    /// TTFT, ITL, TPOT, E2E or queue.
    pub figure: String,
    /// 50, 90, 95 or 99.
    pub percentile: u32,
    /// The real (reference) run's value, ms.
    pub real_ms: Option<f64>,
    /// The simulated (compared) run's value, ms.
    pub sim_ms: Option<f64>,
    /// `(sim - real) / real`, %: positive when the simulation is slower.
    pub error_pct: Option<f64>,
    /// Within the tolerance; `None` when either side lacks the figure.
    pub within: Option<bool>,
}

/// The comparison of two runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fidelity {
    /// The tolerance the verdicts use.
    pub tolerance: Tolerance,
    /// Requests of the real run.
    pub real_requests: u64,
    /// Requests of the simulated run.
    pub sim_requests: u64,
    /// Every figure at every percentile.
    pub rows: Vec<FigureError>,
}

impl Fidelity {
    /// The row of a figure at a percentile.
    pub fn get(&self, figure: &str, percentile: u32) -> Option<&FigureError> {
        self.rows
            .iter()
            .find(|r| r.figure == figure && r.percentile == percentile)
    }

    /// Rows compared, and of them within the tolerance.
    pub fn score(&self) -> (usize, usize) {
        let compared = self.rows.iter().filter(|r| r.within.is_some()).count();
        let within = self.rows.iter().filter(|r| r.within == Some(true)).count();
        (compared, within)
    }
}

fn distribution<'a>(s: &'a Summary, figure: &str) -> &'a Distribution {
    match figure {
        "TTFT" => &s.ttft_ms,
        "ITL" => &s.itl_ms,
        "TPOT" => &s.tpot_ms,
        "E2E" => &s.e2e_ms,
        _ => &s.queue_ms,
    }
}

fn at(d: &Distribution, p: u32) -> Option<f64> {
    match p {
        50 => d.p50,
        90 => d.p90,
        95 => d.p95,
        _ => d.p99,
    }
}

/// Compares `sim` with `real`, figure by figure.
pub fn compare(real: &Trace, sim: &Trace, tolerance: Tolerance) -> Fidelity {
    let (a, b) = (
        summarize_all(real, Slo::default(), None),
        summarize_all(sim, Slo::default(), None),
    );
    from_summaries(&a, &b, tolerance)
}

/// Compares the figures of a simulated (or repeated) run, `b`, with those of a real one, `a`.
pub fn from_summaries(a: &Summary, b: &Summary, tolerance: Tolerance) -> Fidelity {
    let mut rows = Vec::new();
    for figure in FIGURES {
        for p in PERCENTILES {
            let (real_ms, sim_ms) = (at(distribution(a, figure), p), at(distribution(b, figure), p));
            let (error_pct, within) = match (real_ms, sim_ms) {
                (Some(r), Some(s)) => {
                    let error = (r > 0.0).then(|| (s - r) / r * 100.0);
                    let close = (s - r).abs() <= tolerance.floor_ms || error.is_some_and(|e| e.abs() <= tolerance.pct);
                    (error, Some(close))
                }
                _ => (None, None),
            };
            rows.push(FigureError {
                figure: figure.to_owned(),
                percentile: p,
                real_ms,
                sim_ms,
                error_pct,
                within,
            });
        }
    }
    Fidelity {
        tolerance,
        real_requests: a.requests,
        sim_requests: b.requests,
        rows,
    }
}

/// The report as text: one row per figure, the percentiles side by side (`real → sim (±e %)`), and a verdict.
pub fn render(f: &Fidelity, real_name: &str, sim_name: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let t = f.tolerance;
    let _ = writeln!(
        out,
        "fidelity of {sim_name} ({} requests) against {real_name} ({} requests): within {} % or {} ms",
        f.sim_requests, f.real_requests, t.pct, t.floor_ms
    );
    let _ = writeln!(
        out,
        "{:<7} {:>4} {:>10} {:>10} {:>9}  verdict",
        "figure", "p", "real ms", "sim ms", "error"
    );
    let num = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.1}"));
    for r in &f.rows {
        let error = r.error_pct.map_or_else(|| "-".to_owned(), |e| format!("{e:+.1} %"));
        let verdict = match r.within {
            Some(true) => "ok",
            Some(false) => "OFF",
            None => "-",
        };
        let _ = writeln!(
            out,
            "{:<7} {:>4} {:>10} {:>10} {:>9}  {verdict}",
            r.figure,
            format!("p{}", r.percentile),
            num(r.real_ms),
            num(r.sim_ms),
            error
        );
    }
    let (compared, within) = f.score();
    let _ = writeln!(out, "{within} of {compared} figures within the tolerance");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokenscope_core::trace::report::Place;
    use tokenscope_core::trace::{NO_STR, Request, TraceBuilder};

    /// A trace of requests with the given TTFTs (arrival at i seconds, one token).
    fn with_ttfts(ttfts_ms: &[i64]) -> Trace {
        let mut b = TraceBuilder::default();
        for (i, &t) in ttfts_ms.iter().enumerate() {
            let id = b.labels.intern(&format!("r{i}"));
            let at = 1_000_000_000_000 + i as i64 * 1_000_000_000;
            b.add_request(
                Request {
                    id,
                    source: NO_STR,
                    trace_id: NO_STR,
                    model: NO_STR,
                    app_id: NO_STR,
                    user_id: NO_STR,
                    arrival_ns: at,
                    scheduled_ns: Some(at),
                    first_token_ns: Some(at + t * 1_000_000),
                    finished_ns: Some(at + t * 1_000_000),
                    input_tokens: Some(10),
                    cached_tokens: None,
                    context_tokens: None,
                    output_tokens: Some(1),
                    finish_reason: NO_STR,
                    status: NO_STR,
                    error_code: NO_STR,
                    temperature: None,
                    top_p: None,
                    top_k: None,
                    max_tokens: None,
                    seed: None,
                    num_preemptions: None,
                    prompt_hash: NO_STR,
                    server_queue_ns: None,
                    server_ttft_ns: None,
                    server_decode_ns: None,
                    sent_ns: None,
                    server_request_id: NO_STR,
                    spec_drafted_tokens: None,
                    spec_accepted_tokens: None,
                    decode_source: NO_STR,
                },
                Place::default(),
            );
        }
        b.finish().0
    }

    #[test]
    fn errors_are_signed_and_judged_against_the_tolerance() {
        // Ten TTFTs 100..1000 ms: p50 = 500 (rank 5), p90 = 900 (rank 9), p95 = p99 = 1000.
        let real = with_ttfts(&[100, 200, 300, 400, 500, 600, 700, 800, 900, 1000]);
        // The simulation: 20 % slower everywhere but the tail, which is 5 % faster (950 ms).
        let sim = with_ttfts(&[120, 240, 360, 480, 600, 720, 840, 960, 1080, 950]);
        // Sorted: 120 240 360 480 600 720 840 950 960 1080 -> p50 600, p90 960, p95 = p99 1080.
        let f = compare(&real, &sim, Tolerance::default());
        let p50 = f.get("TTFT", 50).unwrap();
        assert_eq!((p50.real_ms, p50.sim_ms), (Some(500.0), Some(600.0)));
        assert!((p50.error_pct.unwrap() - 20.0).abs() < 1e-9);
        assert_eq!(p50.within, Some(false));
        let p90 = f.get("TTFT", 90).unwrap();
        assert!((p90.error_pct.unwrap() - (960.0 - 900.0) / 900.0 * 100.0).abs() < 1e-9);
        assert_eq!(p90.within, Some(true)); // 6.7 %
        let p99 = f.get("TTFT", 99).unwrap();
        assert!((p99.error_pct.unwrap() - 8.0).abs() < 1e-9);
        // No tokens after the first: no ITL on either side, so no verdict.
        assert_eq!(f.get("ITL", 50).unwrap().within, None);
        // Queue is 0 on both sides: within the floor, with no relative error.
        let q = f.get("queue", 50).unwrap();
        assert_eq!((q.error_pct, q.within), (None, Some(true)));
        let text = render(&f, "real", "sim");
        assert!(
            text.contains("TTFT     p50      500.0      600.0   +20.0 %  OFF"),
            "{text}"
        );
    }
}
