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

use crate::result::{Cell, Rows};
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

fn number(rows: &Rows, row: usize, name: &str) -> Option<f64> {
    rows.column(name).and_then(|c| rows.rows.get(row)?.get(c)?.as_f64())
}

#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // counts
fn count(rows: &Rows, row: usize, name: &str) -> u64 {
    number(rows, row, name).map_or(0, |v| v as u64)
}

/// The summary of the trace in `files`, computed by [`SQL`] on polars' streaming engine: the figures of
/// `tokenscope summary` (no cost: prices are the in-memory path's). With objectives, their attainment and goodput.
///
/// # Errors
/// A file cannot be read, or a statement fails.
pub fn summarize_files(files: &[PathBuf], slo: Slo) -> Result<Summary, QueryError> {
    let mut ctx = context(scan(files)?)?;
    let rows = Rows::of(&collect(&mut ctx, "SELECT * FROM summary")?);
    let totals = Rows::of(&collect(&mut ctx, "SELECT * FROM totals")?);
    let mut s = Summary {
        requests: count(&totals, 0, "requests"),
        input_tokens: count(&totals, 0, "input_tokens"),
        cached_tokens: count(&totals, 0, "cached_tokens"),
        output_tokens: count(&totals, 0, "output_tokens"),
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
    };
    // Latencies come in ns, as ranked: turned into ms here as the in-memory path does (ns / 1e6).
    let ms = |ns: Option<f64>| ns.map(|v| v / 1e6);
    if s.requests > 0 {
        s.span_ms = ms(number(&totals, 0, "span_ns"));
        #[allow(clippy::cast_precision_loss)] // token counts far below 2^53
        let output = s.output_tokens as f64;
        s.throughput_tok_s = s.span_ms.filter(|&ms| ms > 0.0).map(|ms| output / (ms / 1e3));
    }
    for row in 0..rows.rows.len() {
        let figure = rows.column("figure").and_then(|c| match &rows.rows[row][c] {
            Cell::Text(t) => Some(t.clone()),
            _ => None,
        });
        let d = Distribution {
            count: count(&rows, row, "count"),
            mean: ms(number(&rows, row, "mean")),
            p50: ms(number(&rows, row, "p50")),
            p90: ms(number(&rows, row, "p90")),
            p95: ms(number(&rows, row, "p95")),
            p99: ms(number(&rows, row, "p99")),
            max: ms(number(&rows, row, "max")),
        };
        match figure.as_deref() {
            Some("ttft") => s.ttft_ms = d,
            Some("tpot") => s.tpot_ms = d,
            Some("e2e") => s.e2e_ms = d,
            Some("queue") => s.queue_ms = d,
            Some("itl") => s.itl_ms = d,
            _ => {}
        }
    }
    let reasons = Rows::of(&collect(
        &mut ctx,
        "SELECT finish_reason, COUNT(*) AS n FROM requests GROUP BY finish_reason",
    )?);
    for row in 0..reasons.rows.len() {
        if let Cell::Text(reason) = &reasons.rows[row][0] {
            s.finish_reasons.insert(reason.clone(), count(&reasons, row, "n"));
        }
    }
    s.token_mismatches = count(
        &Rows::of(&collect(&mut ctx, "SELECT COUNT(*) AS n FROM token_mismatches")?),
        0,
        "n",
    );
    if slo.is_set() {
        // The objectives are the caller's, not the shared file's: the query is made here, with them as literals,
        // compared in ns (exact for whole-ns objectives: TTFT ns <= L ns exactly when TTFT ms <= L / 1e6 ms).
        let ttft = slo.ttft_ms.map_or("TRUE".to_owned(), |t| {
            format!("ttft_ns IS NOT NULL AND ttft_ns <= {:?}", t * 1e6)
        });
        let tpot = slo.tpot_ms.map_or("TRUE".to_owned(), |t| {
            format!("(tpot_ns IS NULL OR tpot_ns <= {:?})", t * 1e6)
        });
        let good = Rows::of(&collect(
            &mut ctx,
            &format!("SELECT COUNT(*) AS n, SUM(output_tokens) AS tokens FROM requests WHERE {ttft} AND {tpot}"),
        )?);
        let (n, tokens) = (count(&good, 0, "n"), count(&good, 0, "tokens"));
        s.slo = Some(slo_result(slo, s.requests, n, tokens, s.span_ms));
    }
    Ok(s)
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
