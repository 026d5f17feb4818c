//! The summary of a dataset out of core: the views of `sql/tokenscope.sql` one file at a time, combined in Rust
//! (sums, extremes, counts per finish reason, exact nearest-rank percentiles in at most two passes).

use std::collections::BTreeMap;
use std::path::PathBuf;

use polars::prelude::*;
use polars::sql::SQLContext;
use tokenscope_core::analysis::metrics::Distribution;
use tokenscope_core::analysis::summary::{Slo, SloResult, Summary};
use tokenscope_core::format::window::Window;

use super::{collect, column, context_until, count_of, floats, ints, name_of, scan, units};
use crate::exact::{Outcome, Second, Tally};
use crate::sql::QueryError;

/// Values of one latency figure a first pass keeps before it counts them per bucket instead (8 M: 64 MB).
pub const KEEP: usize = 1 << 23;

/// The latency figures, in the order of the summary's distributions: the per-request ones as the `requests` view
/// names them, then the inter-token gaps of the `itl` view.
const FIGURES: [&str; 5] = ["ttft_ns", "tpot_ns", "e2e_ns", "queue_ns", "itl_ns"];

/// The summary of a dataset, and how it was computed.
#[derive(Debug, Clone, PartialEq)]
pub struct DatasetSummary {
    /// The figures of `tokenscope summary` (no cost: prices are the in-memory path's).
    pub summary: Summary,
    /// Each file held its requests whole (request record and tokens), so the files were read one at a time and
    /// memory is bounded by the largest file; `false`: some file held tokens of a request recorded in another, and
    /// the dataset was read as one.
    pub file_by_file: bool,
    /// Passes over the data: 2 when a figure had more than [`KEEP`] values (its percentiles are found exactly in a
    /// second pass, see [`crate::exact`]).
    pub passes: u32,
}

/// The summary of the trace in `files` without loading it, in memory bounded by the largest file rather than by
/// the dataset: the views of [`SQL`] on polars' streaming engine, one file at a time, combined here (sums, extremes,
/// counts per finish reason, and exact nearest-rank percentiles by [`crate::exact`]). With objectives, their
/// attainment and goodput. The figures are the in-memory path's (tested).
///
/// # Errors
/// A file cannot be read, or a statement fails; the error names the file.
pub fn summarize_files(files: &[PathBuf], window: Option<&Window>, slo: Slo) -> Result<DatasetSummary, QueryError> {
    summarize_files_keeping(files, window, slo, KEEP)
}

/// [`summarize_files`], keeping at most `keep` values of a figure in the first pass.
///
/// # Errors
/// As [`summarize_files`].
pub fn summarize_files_keeping(
    files: &[PathBuf],
    window: Option<&Window>,
    slo: Slo,
    keep: usize,
) -> Result<DatasetSummary, QueryError> {
    let (units, file_by_file) = units(files, window)?;
    let mut s = summarize_units(&units, window, slo, keep)?;
    s.file_by_file = file_by_file || files.len() <= 1;
    Ok(s)
}

/// What the first pass adds up over the units.
struct Totals {
    summary: Summary,
    first_arrival: Option<i64>,
    last_end: Option<i64>,
    good: u64,
    good_tokens: u64,
}

/// Reads each unit (a set of files holding whole requests) in turn.
fn summarize_units(
    units: &[Vec<PathBuf>],
    window: Option<&Window>,
    slo: Slo,
    keep: usize,
) -> Result<DatasetSummary, QueryError> {
    let mut t = Totals {
        summary: Summary {
            requests: 0,
            input_tokens: 0,
            cached_tokens: None,
            output_tokens: 0,
            span_ms: None,
            throughput_tok_s: None,
            ttft_ms: Distribution::default(),
            tpot_ms: Distribution::default(),
            e2e_ms: Distribution::default(),
            queue_ms: Distribution::default(),
            itl_ms: Distribution::default(),
            slo: None,
            finish_reasons: BTreeMap::new(),
            token_mismatches: 0,
            cost: None,
            // The views read no client-side column: a joined dataset's delivery figures come from a full load.
            delivery: None,
            // Nor a token's speculative role: a dataset's speculative figures come from a full load too.
            spec: None,
        },
        first_arrival: None,
        last_end: None,
        good: 0,
        good_tokens: 0,
    };
    let mut tallies: [Tally; 5] = std::array::from_fn(|_| Tally::new(keep));
    for unit in units {
        let mut ctx = context_until(scan(unit, window)?, "itl")?;
        let at = |e: QueryError| QueryError(format!("{}: {e}", name_of(unit)));
        first_pass(&mut ctx, slo, &mut t, &mut tallies).map_err(at)?;
    }
    // The figures whose values were too many to keep are found in a second pass.
    let mut passes = 1;
    let mut seconds: [Option<Second>; 5] = Default::default();
    let mut done: [Distribution; 5] = Default::default();
    for (i, tally) in tallies.into_iter().enumerate() {
        match tally.finish() {
            Outcome::Done(d) => done[i] = d,
            Outcome::Second(s) => seconds[i] = Some(s),
        }
    }
    if seconds.iter().any(Option::is_some) {
        passes = 2;
        let needed: Vec<bool> = seconds.iter().map(Option::is_some).collect();
        for unit in units {
            let mut ctx = context_until(scan(unit, window)?, "itl")?;
            each_latency(&mut ctx, &needed, |i, v| {
                if let Some(s) = &mut seconds[i] {
                    s.add(v);
                }
            })
            .map_err(|e| QueryError(format!("{}: {e}", name_of(unit))))?;
        }
        for (i, s) in seconds.into_iter().enumerate() {
            if let Some(s) = s {
                done[i] = s.finish();
            }
        }
    }
    // Latencies are ranked in ns, as the trace writes them; turned into ms here as the in-memory path does.
    let [ttft, tpot, e2e, queue, itl] = done.map(|d| Distribution {
        mean: d.mean.map(|v| v / 1e6),
        p50: d.p50.map(|v| v / 1e6),
        p90: d.p90.map(|v| v / 1e6),
        p95: d.p95.map(|v| v / 1e6),
        p99: d.p99.map(|v| v / 1e6),
        max: d.max.map(|v| v / 1e6),
        count: d.count,
    });
    let mut s = t.summary;
    (s.ttft_ms, s.tpot_ms, s.e2e_ms, s.queue_ms, s.itl_ms) = (ttft, tpot, e2e, queue, itl);
    if s.requests > 0 {
        #[expect(clippy::cast_precision_loss, reason = "spans far below 2^53 ns")]
        let span = t.last_end.zip(t.first_arrival).map(|(e, a)| (e - a) as f64 / 1e6);
        s.span_ms = span;
        #[expect(clippy::cast_precision_loss, reason = "token counts far below 2^53")]
        let output = s.output_tokens as f64;
        s.throughput_tok_s = s.span_ms.filter(|&ms| ms > 0.0).map(|ms| output / (ms / 1e3));
    }
    if slo.is_set() {
        s.slo = Some(slo_result(slo, s.requests, t.good, t.good_tokens, s.span_ms));
    }
    Ok(DatasetSummary {
        summary: s,
        file_by_file: units.len() > 1,
        passes,
    })
}

/// Adds one unit's requests to the totals and its latencies to the tallies.
fn first_pass(ctx: &mut SQLContext, slo: Slo, t: &mut Totals, tallies: &mut [Tally; 5]) -> Result<(), QueryError> {
    let df = collect(
        ctx,
        "SELECT arrival_ns, end_ns, input_tokens, cached_tokens, output_tokens, finish_reason, \
         ttft_ns, tpot_ns, e2e_ns, queue_ns FROM requests",
    )?;
    let ints = |name: &str| ints(&df, name);
    let floats = |name: &str| floats(&df, name);
    let s = &mut t.summary;
    let sum = |v: Vec<Option<i64>>| {
        v.into_iter()
            .flatten()
            .map(|x| u64::try_from(x).unwrap_or(0))
            .sum::<u64>()
    };
    s.requests += df.height() as u64;
    s.input_tokens += sum(ints("input_tokens")?);
    let cached = ints("cached_tokens")?;
    if cached.iter().any(Option::is_some) {
        s.cached_tokens = Some(s.cached_tokens.unwrap_or(0) + sum(cached));
    }
    let output = ints("output_tokens")?;
    s.output_tokens += sum(output.clone());
    for a in ints("arrival_ns")?.into_iter().flatten() {
        t.first_arrival = Some(t.first_arrival.map_or(a, |m| m.min(a)));
    }
    for e in ints("end_ns")?.into_iter().flatten() {
        t.last_end = Some(t.last_end.map_or(e, |m| m.max(e)));
    }
    let reasons = column(&df, "finish_reason", &DataType::String)?;
    for reason in reasons.str().map_err(|e| QueryError(e.to_string()))?.iter() {
        *s.finish_reasons
            .entry(reason.unwrap_or("(none)").to_owned())
            .or_insert(0) += 1;
    }
    let (ttft, tpot) = (floats("ttft_ns")?, floats("tpot_ns")?);
    if slo.is_set() {
        // As `Slo::misses`: a TTFT objective needs a first token within it; a TPOT objective holds for a request
        // of one token. Compared in ns (exact for whole-ns objectives).
        for ((ttft, tpot), out) in ttft.iter().zip(&tpot).zip(&output) {
            let ttft_ok = slo.ttft_ms.is_none_or(|l| ttft.is_some_and(|v| v <= l * 1e6));
            let tpot_ok = slo.tpot_ms.is_none_or(|l| tpot.is_none_or(|v| v <= l * 1e6));
            if ttft_ok && tpot_ok {
                t.good += 1;
                t.good_tokens += out.map_or(0, |o| u64::try_from(o).unwrap_or(0));
            }
        }
    }
    for (i, values) in [ttft, tpot, floats("e2e_ns")?, floats("queue_ns")?]
        .into_iter()
        .enumerate()
    {
        for v in values.into_iter().flatten() {
            tallies[i].add(v);
        }
    }
    s.token_mismatches += count_of(&collect(ctx, "SELECT COUNT(*) AS n FROM token_mismatches")?)?;
    each_latency(ctx, &[false, false, false, false, true], |i, v| tallies[i].add(v))
}

/// Calls `f(figure, value)` for every value of the figures `needed` (indices into [`FIGURES`]).
fn each_latency(ctx: &mut SQLContext, needed: &[bool], mut f: impl FnMut(usize, f64)) -> Result<(), QueryError> {
    let per_request: Vec<&str> = FIGURES[..4]
        .iter()
        .zip(needed)
        .filter(|(_, n)| **n)
        .map(|(c, _)| *c)
        .collect();
    let mut frames = Vec::new();
    if !per_request.is_empty() {
        frames.push(collect(
            ctx,
            &format!("SELECT {} FROM requests", per_request.join(", ")),
        )?);
    }
    if needed.get(4).copied().unwrap_or(false) {
        frames.push(collect(ctx, "SELECT itl_ns FROM itl")?);
    }
    for df in &frames {
        for c in df.columns() {
            let Some(i) = FIGURES.iter().position(|f| f == c.name()) else {
                continue;
            };
            let values = c.cast(&DataType::Float64).map_err(|e| QueryError(e.to_string()))?;
            for v in values.f64().map_err(|e| QueryError(e.to_string()))?.iter().flatten() {
                f(i, v);
            }
        }
    }
    Ok(())
}

#[expect(clippy::cast_precision_loss, reason = "counts far below 2^53")]
fn slo_result(slo: Slo, requests: u64, good: u64, tokens: u64, span_ms: Option<f64>) -> SloResult {
    SloResult {
        ttft_ms: slo.ttft_ms,
        tpot_ms: slo.tpot_ms,
        attainment: (requests > 0).then(|| good as f64 / requests as f64),
        goodput_tok_s: span_ms.filter(|&ms| ms > 0.0).map(|ms| tokens as f64 / (ms / 1e3)),
    }
}
