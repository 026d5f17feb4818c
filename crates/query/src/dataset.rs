//! Figures of a dataset without loading it: `sql/tokenscope.sql` (the same file Spark runs) over a polars scan of
//! the dataset's Parquet files, on polars' streaming engine. Only the columns the SQL names are read (never the
//! candidates), in batches; what stays in memory is what the figures need (a row per request, and the values whose
//! percentiles are asked: one per request for TTFT, TPOT, E2E and queue, one per inter-token gap for ITL).

use std::collections::BTreeMap;
use std::path::PathBuf;

use polars::prelude::*;
use polars::sql::SQLContext;
use tokenscope_core::analysis::metrics::Distribution;
use tokenscope_core::analysis::summary::{Slo, SloResult, Summary};
use tokenscope_core::format::schema::{SCALAR_FIELDS, Scalar};

use crate::exact::{Outcome, Second, Tally};
use crate::sql::QueryError;

/// The derived tables and the summary in SQL, shared with Spark (`sql/tokenscope.sql`).
pub const SQL: &str = include_str!("../../../sql/tokenscope.sql");

/// The statements of [`SQL`], `(view name, query)`, in order.
pub fn statements() -> Vec<(&'static str, &'static str)> {
    let mut out = Vec::new();
    // A statement's name is a line of its own; the header mentions the marker inside a sentence.
    const MARK: &str = "\n-- view: ";
    let mut rest = SQL;
    while let Some(at) = rest.find(MARK) {
        let after = &rest[at + MARK.len()..];
        let (name, body) = after.split_once('\n').unwrap_or((after, ""));
        let end = body.find(MARK).unwrap_or(body.len());
        out.push((name.trim(), body[..end].trim()));
        rest = &body[end..];
    }
    out
}

/// The columns of the format the SQL reads (a scan reads these alone).
pub const COLUMNS: [&str; 17] = [
    "kind",
    "request_id",
    "source",
    "model",
    "app_id",
    "user_id",
    "arrival_ns",
    "scheduled_ns",
    "first_token_ns",
    "finished_ns",
    "input_tokens",
    "cached_tokens",
    "output_tokens",
    "finish_reason",
    "status",
    "index",
    "emitted_ns",
];

/// A lazy scan of trace files as the one table `trace`, with the columns [`COLUMNS`] (null where a file lacks one).
///
/// # Errors
/// A file cannot be opened or is not Parquet.
pub fn scan(files: &[PathBuf]) -> Result<LazyFrame, QueryError> {
    let paths: Vec<PlRefPath> = files
        .iter()
        .map(|p| PlRefPath::from(p.to_string_lossy().as_ref()))
        .collect();
    // The folders' `key=value` pairs are not read as columns: each file holds its records whole (their source
    // included), and the keys are for choosing files, which the caller did.
    let mut args = ScanArgsParquet {
        allow_missing_columns: true,
        ..ScanArgsParquet::default()
    };
    args.hive_options.enabled = Some(false);
    let lf = LazyFrame::scan_parquet_files(paths.into_iter().collect(), args)
        .map_err(|e| QueryError(format!("scanning {} file(s): {e}", files.len())))?;
    let schema = lf
        .clone()
        .collect_schema()
        .map_err(|e| QueryError(format!("reading the files' schema: {e}")))?;
    // A column no file has (a trace without tokens has no `index`) is null, typed as the format types it.
    let select: Vec<Expr> = COLUMNS
        .iter()
        .map(|&c| {
            if schema.contains(c) {
                col(c)
            } else {
                let ty = match SCALAR_FIELDS.iter().find(|(name, _)| *name == c).map(|(_, ty)| ty) {
                    Some(Scalar::Int) => DataType::Int64,
                    Some(Scalar::Float) => DataType::Float64,
                    Some(Scalar::Bool) => DataType::Boolean,
                    Some(Scalar::Str) | None => DataType::String,
                };
                lit(NULL).cast(ty).alias(c)
            }
        })
        .collect();
    Ok(lf.select(select))
}

/// Runs [`SQL`] over `trace` and returns the context with every view registered (and `trace`).
///
/// # Errors
/// A statement fails (a column of the wrong type, say).
pub fn context(trace: LazyFrame) -> Result<SQLContext, QueryError> {
    let mut ctx = SQLContext::new();
    ctx.register("trace", trace);
    for (name, sql) in statements() {
        let lf = ctx
            .execute(sql)
            .map_err(|e| QueryError(format!("view {name} of sql/tokenscope.sql: {e}")))?;
        ctx.register(name, lf);
    }
    Ok(ctx)
}

/// Collects a query of the context on the streaming engine.
fn collect(ctx: &mut SQLContext, sql: &str) -> Result<DataFrame, QueryError> {
    ctx.execute(sql)
        .and_then(|lf| lf.collect_with_engine(Engine::Streaming))
        // One query, one sink: a single frame (several come only from collecting several frames at once).
        .map(|r| r.unwrap_single())
        .map_err(|e| QueryError(format!("{e}\n(in {sql})")))
}

/// Runs `sql` over the views of [`SQL`] on a dataset, out of core: `requests` (one row per request with `ttft_ms`,
/// `tpot_ms`, `e2e_ms`, `queue_ms`, their `_ns` forms, labels and token counts), `tokens`, `itl`, `trace` (the raw
/// records) and the others the file defines (`docs/QUERY.md`).
///
/// # Errors
/// A file cannot be read, or the query fails (the error lists the tables).
pub fn query_files(files: &[PathBuf], sql: &str) -> Result<DataFrame, QueryError> {
    let mut ctx = context(scan(files)?)?;
    ctx.execute(sql)
        .and_then(|lf| lf.collect_with_engine(Engine::Streaming))
        .map(|r| r.unwrap_single())
        .map_err(|e| {
            let mut names: Vec<&str> = vec!["trace"];
            names.extend(statements().iter().map(|(n, _)| *n));
            QueryError(format!(
                "in the query: {e}; out of core, the tables are the views of sql/tokenscope.sql: {}",
                names.join(", ")
            ))
        })
}

/// Values of one latency figure a first pass keeps before it counts them per bucket instead (8 M: 64 MB).
pub const KEEP: usize = 1 << 23;

/// The latency figures, in the order of the summary's distributions: the per-request ones as the `requests` view
/// names them, then the inter-token gaps of the `itl` view.
const FIGURES: [&str; 5] = ["ttft_ns", "tpot_ns", "e2e_ns", "queue_ns", "itl_ns"];

/// Tokens whose request has no request record in the same files: a dataset with any cannot be read file by file.
const ORPHANS: &str = "SELECT COUNT(*) AS n FROM token_counts c \
                       LEFT JOIN (SELECT request_id, 1 AS present FROM requests_raw) r ON c.request_id = r.request_id \
                       WHERE r.present IS NULL";

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
pub fn summarize_files(files: &[PathBuf], slo: Slo) -> Result<DatasetSummary, QueryError> {
    summarize_files_keeping(files, slo, KEEP)
}

/// [`summarize_files`], keeping at most `keep` values of a figure in the first pass.
///
/// # Errors
/// As [`summarize_files`].
pub fn summarize_files_keeping(files: &[PathBuf], slo: Slo, keep: usize) -> Result<DatasetSummary, QueryError> {
    let by_file: Vec<Vec<PathBuf>> = files.iter().map(|f| vec![f.clone()]).collect();
    if files.len() > 1 {
        if let Some(s) = summarize_units(&by_file, slo, keep, true)? {
            return Ok(s);
        }
    }
    let whole = [files.to_vec()];
    let mut s = summarize_units(&whole, slo, keep, false)?
        .ok_or_else(|| QueryError("the dataset as one unit cannot have orphan tokens".to_owned()))?;
    s.file_by_file = files.len() <= 1;
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

/// Reads each unit (a set of files holding whole requests) in turn. `None` when `check` finds a unit holding tokens
/// of a request recorded elsewhere.
fn summarize_units(
    units: &[Vec<PathBuf>],
    slo: Slo,
    keep: usize,
    check: bool,
) -> Result<Option<DatasetSummary>, QueryError> {
    let mut t = Totals {
        summary: Summary {
            requests: 0,
            input_tokens: 0,
            cached_tokens: 0,
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
        },
        first_arrival: None,
        last_end: None,
        good: 0,
        good_tokens: 0,
    };
    let mut tallies: [Tally; 5] = std::array::from_fn(|_| Tally::new(keep));
    for unit in units {
        let mut ctx = context(scan(unit)?)?;
        let at = |e: QueryError| QueryError(format!("{}: {e}", name_of(unit)));
        if check && count_of(&collect(&mut ctx, ORPHANS).map_err(at)?)? > 0 {
            return Ok(None);
        }
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
            let mut ctx = context(scan(unit)?)?;
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
        #[allow(clippy::cast_precision_loss)] // spans far below 2^53 ns
        let span = t.last_end.zip(t.first_arrival).map(|(e, a)| (e - a) as f64 / 1e6);
        s.span_ms = span;
        #[allow(clippy::cast_precision_loss)] // token counts far below 2^53
        let output = s.output_tokens as f64;
        s.throughput_tok_s = s.span_ms.filter(|&ms| ms > 0.0).map(|ms| output / (ms / 1e3));
    }
    if slo.is_set() {
        s.slo = Some(slo_result(slo, s.requests, t.good, t.good_tokens, s.span_ms));
    }
    Ok(Some(DatasetSummary {
        summary: s,
        file_by_file: units.len() > 1,
        passes,
    }))
}

fn name_of(unit: &[PathBuf]) -> String {
    match unit {
        [one] => one.display().to_string(),
        many => format!("{} files", many.len()),
    }
}

/// Adds one unit's requests to the totals and its latencies to the tallies.
fn first_pass(ctx: &mut SQLContext, slo: Slo, t: &mut Totals, tallies: &mut [Tally; 5]) -> Result<(), QueryError> {
    let df = collect(
        ctx,
        "SELECT arrival_ns, end_ns, input_tokens, cached_tokens, output_tokens, finish_reason, \
         ttft_ns, tpot_ns, e2e_ns, queue_ns FROM requests",
    )?;
    let ints = |name: &str| -> Result<Vec<Option<i64>>, QueryError> {
        Ok(column(&df, name, &DataType::Int64)?
            .i64()
            .map_err(|e| QueryError(e.to_string()))?
            .iter()
            .collect())
    };
    let floats = |name: &str| -> Result<Vec<Option<f64>>, QueryError> {
        Ok(column(&df, name, &DataType::Float64)?
            .f64()
            .map_err(|e| QueryError(e.to_string()))?
            .iter()
            .collect())
    };
    let s = &mut t.summary;
    let sum = |v: Vec<Option<i64>>| {
        v.into_iter()
            .flatten()
            .map(|x| u64::try_from(x).unwrap_or(0))
            .sum::<u64>()
    };
    s.requests += df.height() as u64;
    s.input_tokens += sum(ints("input_tokens")?);
    s.cached_tokens += sum(ints("cached_tokens")?);
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

/// A column of a result, as `ty`.
fn column(df: &DataFrame, name: &str, ty: &DataType) -> Result<Column, QueryError> {
    df.column(name)
        .and_then(|c| c.cast(ty))
        .map_err(|e| QueryError(format!("column {name}: {e}")))
}

/// The one count of a `SELECT COUNT(*) AS n` result.
fn count_of(df: &DataFrame) -> Result<u64, QueryError> {
    let n = column(df, "n", &DataType::Int64)?;
    let v = n.i64().map_err(|e| QueryError(e.to_string()))?.get(0).unwrap_or(0);
    Ok(u64::try_from(v).unwrap_or(0))
}

#[allow(clippy::cast_precision_loss)] // counts far below 2^53
fn slo_result(slo: Slo, requests: u64, good: u64, tokens: u64, span_ms: Option<f64>) -> SloResult {
    SloResult {
        ttft_ms: slo.ttft_ms,
        tpot_ms: slo.tpot_ms,
        attainment: (requests > 0).then(|| good as f64 / requests as f64),
        goodput_tok_s: span_ms.filter(|&ms| ms > 0.0).map(|ms| tokens as f64 / (ms / 1e3)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sql_file_is_read_as_named_statements_in_order() {
        let names: Vec<&str> = statements().iter().map(|(n, _)| *n).collect();
        assert_eq!(names.first(), Some(&"requests_raw"));
        assert!(
            names.contains(&"summary") && names.contains(&"token_mismatches"),
            "{names:?}"
        );
        for (name, sql) in statements() {
            let code = sql.lines().find(|l| !l.starts_with("--")).unwrap_or_default();
            assert!(code.starts_with("SELECT"), "{name}: {sql}");
            assert!(!sql.contains("-- view:"), "{name}");
        }
    }
}
