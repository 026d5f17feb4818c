//! Figures of a dataset without loading it: `sql/tokenscope.sql` (the same file Spark runs) over a polars scan of
//! the dataset's Parquet files, on polars' streaming engine. Only the columns the SQL names are read (never the
//! candidates), in batches; what stays in memory is what the figures need (a row per request, and the values whose
//! percentiles are asked: one per request for TTFT, TPOT, E2E and queue, one per inter-token gap for ITL).

use std::path::PathBuf;

use polars::prelude::*;
use polars::sql::SQLContext;
use tokenscope_core::analysis::summary::NO_LABEL;
use tokenscope_core::format::schema::{KIND, SCALAR_FIELDS, Scalar};
use tokenscope_core::format::window::{LABELS, Window};
use tokenscope_core::trace::DEFAULT_SOURCE;

use crate::sql::QueryError;

mod summary;
mod timeline;

pub use summary::{DatasetSummary, KEEP, summarize_files, summarize_files_keeping};
pub use timeline::timeline_files;

/// The derived tables and the summary in SQL, shared with Spark (`sql/tokenscope.sql`).
pub const SQL: &str = include_str!("../../../../sql/tokenscope.sql");

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

/// The columns of the format the SQL and the timeline read (a scan reads these alone, and of them only those a
/// query uses).
pub const COLUMNS: [&str; 22] = [
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
    // A token's step: the tokens of one step are one emission (the `itl` view).
    "iteration",
    "start_ns",
    "num_waiting",
    "kv_usage",
    "num_preempted",
];

/// A lazy scan of trace files as the one table `trace`, with the columns [`COLUMNS`] (null where a file lacks one);
/// with a window, only its records: requests arriving within it whose labels match, with their records, steps
/// starting within it whose source matches, and the meta (the choice [`Window::apply`] makes of a loaded trace).
///
/// # Errors
/// A file cannot be opened or is not Parquet.
pub fn scan(files: &[PathBuf], window: Option<&Window>) -> Result<LazyFrame, QueryError> {
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
    // Every record of the format has a kind: a Parquet file without the column is not a trace, and its figures
    // would all be zero (the in-memory load refuses it the same way).
    if !schema.contains(KIND) {
        let first = files.first().map_or_else(String::new, |p| p.display().to_string());
        return Err(QueryError(format!(
            "{first}: not a tokenscope trace: required column \"{KIND}\" is absent (every record of the format has \
             one; see docs/TRACE_FORMAT.md). If it is an engine's or a tool's file, convert it first: tokenscope \
             convert {first} -o trace.parquet"
        )));
    }
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
    let lf = lf.select(select);
    match window.filter(|w| !w.is_all()) {
        Some(w) => in_window(lf, w).map_err(|e| QueryError(format!("choosing the window's records: {e}"))),
        None => Ok(lf),
    }
}

/// The records of `trace` in the window: the requests' and steps' by their own columns, the others (tokens,
/// stages, ...) by their request, joined to the ids of the requests chosen.
fn in_window(trace: LazyFrame, w: &Window) -> PolarsResult<LazyFrame> {
    let in_time = |c: &str| {
        let mut e = col(c).is_not_null();
        if let Some(f) = w.from_ns {
            e = e.and(col(c).gt_eq(lit(f)));
        }
        if let Some(t) = w.to_ns {
            e = e.and(col(c).lt(lit(t)));
        }
        e
    };
    // A record without a label has the loaded trace's: its source "engine", "(none)" for the others.
    let label = |k: &str| {
        let absent = if k == "source" { DEFAULT_SOURCE } else { NO_LABEL };
        col(k).fill_null(lit(absent))
    };
    let kind = |k: &str| col("kind").eq(lit(k));
    let mut requests = kind("request").and(in_time("arrival_ns"));
    let mut steps = kind("iteration").and(in_time("start_ns"));
    // One of the values given for a key (`Window::allows`), for every key given.
    let mut keys: Vec<&str> = w.filters.iter().map(|(k, _)| k.as_str()).collect();
    keys.sort_unstable();
    keys.dedup();
    for k in keys {
        let any = w
            .filters
            .iter()
            .filter(|(fk, _)| fk == k)
            .fold(lit(false), |e, (_, v)| e.or(label(k).eq(lit(v.clone()))));
        if LABELS.contains(&k) {
            requests = requests.and(any.clone());
        }
        if k == "source" {
            steps = steps.and(any);
        }
    }
    let chosen = trace.clone().filter(requests.clone());
    let ids = chosen
        .clone()
        .select([col("request_id")])
        .unique(None, UniqueKeepStrategy::Any);
    let theirs = trace
        .clone()
        .filter(
            kind("request")
                .not()
                .and(kind("iteration").not())
                .and(kind("meta").not()),
        )
        .join(
            ids,
            [col("request_id")],
            [col("request_id")],
            JoinArgs::new(JoinType::Inner),
        );
    let rest = trace.filter(steps.or(kind("meta")));
    let columns: Vec<Expr> = COLUMNS.iter().map(|&c| col(c)).collect();
    concat([chosen, theirs.select(columns.clone()), rest], UnionArgs::default())
}

/// Runs [`SQL`] over `trace` and returns the context with every view registered (and `trace`).
///
/// # Errors
/// A statement fails (a column of the wrong type, say).
pub fn context(trace: LazyFrame) -> Result<SQLContext, QueryError> {
    context_until(trace, "")
}

/// [`context`] with the views up to `last` (all of them when no view has that name): planning every view, down to
/// the summary's, takes a deep recursion that a computation needing only `requests` should not pay.
///
/// # Errors
/// A statement fails.
pub fn context_until(trace: LazyFrame, last: &str) -> Result<SQLContext, QueryError> {
    let mut ctx = SQLContext::new();
    ctx.register("trace", trace);
    let all = statements();
    let upto = all
        .iter()
        .position(|(name, _)| *name == last)
        .map_or(all.len(), |i| i + 1);
    for &(name, sql) in &all[..upto] {
        let lf = ctx
            .execute(sql)
            .map_err(|e| QueryError(format!("view {name} of sql/tokenscope.sql: {e}")))?;
        ctx.register(name, lf);
    }
    Ok(ctx)
}

/// Collects a query of the context on the streaming engine.
#[expect(
    clippy::redundant_closure_for_method_calls,
    reason = "the method is polars-core's, a crate this one reaches only through polars' prelude"
)]
pub(crate) fn collect(ctx: &mut SQLContext, sql: &str) -> Result<DataFrame, QueryError> {
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
#[expect(
    clippy::redundant_closure_for_method_calls,
    reason = "the method is polars-core's, a crate this one reaches only through polars' prelude"
)]
pub fn query_files(files: &[PathBuf], window: Option<&Window>, sql: &str) -> Result<DataFrame, QueryError> {
    let mut ctx = context(scan(files, window)?)?;
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

/// Tokens whose request has no request record in the same files: a dataset with any cannot be read file by file.
pub(crate) const ORPHANS: &str = "SELECT COUNT(*) AS n FROM token_counts c \
                                  LEFT JOIN (SELECT request_id, 1 AS present FROM requests_raw) r \
                                  ON c.request_id = r.request_id WHERE r.present IS NULL";

/// A file or a set of files, in messages.
pub(crate) fn name_of(unit: &[PathBuf]) -> String {
    match unit {
        [one] => one.display().to_string(),
        many => format!("{} files", many.len()),
    }
}

/// How to read a dataset: a file at a time when each holds its requests whole (request record and tokens, as
/// `convert --partition-by` writes them), else all files as one. Checked on each file's `token_counts` against its
/// `requests_raw` (a group-by of the file's tokens, the cheapest view that knows them). The flag says file by file.
///
/// # Errors
/// A file cannot be read; the error names it.
pub(crate) fn units(files: &[PathBuf], window: Option<&Window>) -> Result<(Vec<Vec<PathBuf>>, bool), QueryError> {
    if files.len() > 1 {
        let mut whole = true;
        for f in files {
            let unit = std::slice::from_ref(f);
            let at = |e: QueryError| QueryError(format!("{}: {e}", name_of(unit)));
            let mut ctx = context_until(scan(unit, window)?, "token_counts").map_err(at)?;
            if count_of(&collect(&mut ctx, ORPHANS).map_err(at)?)? > 0 {
                whole = false;
                break;
            }
        }
        if whole {
            return Ok((files.iter().map(|f| vec![f.clone()]).collect(), true));
        }
    }
    Ok((vec![files.to_vec()], false))
}

/// The values of a column of a result, as i64.
pub(crate) fn ints(df: &DataFrame, name: &str) -> Result<Vec<Option<i64>>, QueryError> {
    let c = column(df, name, &DataType::Int64)?;
    Ok(c.i64().map_err(|e| QueryError(e.to_string()))?.iter().collect())
}

/// The values of a column of a result, as f64.
pub(crate) fn floats(df: &DataFrame, name: &str) -> Result<Vec<Option<f64>>, QueryError> {
    let c = column(df, name, &DataType::Float64)?;
    Ok(c.f64().map_err(|e| QueryError(e.to_string()))?.iter().collect())
}

/// A column of a result, as `ty`.
pub(crate) fn column(df: &DataFrame, name: &str, ty: &DataType) -> Result<Column, QueryError> {
    df.column(name)
        .and_then(|c| c.cast(ty))
        .map_err(|e| QueryError(format!("column {name}: {e}")))
}

/// The one count of a `SELECT COUNT(*) AS n` result.
pub(crate) fn count_of(df: &DataFrame) -> Result<u64, QueryError> {
    let n = column(df, "n", &DataType::Int64)?;
    let v = n.i64().map_err(|e| QueryError(e.to_string()))?.get(0).unwrap_or(0);
    Ok(u64::try_from(v).unwrap_or(0))
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
