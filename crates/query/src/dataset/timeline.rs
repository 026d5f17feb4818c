//! The timeline of a dataset out of core, a file at a time when each holds its requests whole: a first pass
//! collects a row per request and per step and the tokens' extent; a second counts each file's tokens per request
//! and bucket, then per label and bucket. Memory holds the largest file's working set, a row per request and per
//! step, and a row per label and bucket, never a row per token.

use std::path::PathBuf;

use polars::prelude::*;
use polars::sql::SQLContext;
use tokenscope_core::analysis::summary::{GroupBy, NO_LABEL};
use tokenscope_core::format::window::Window;
use tokenscope_core::trace::DEFAULT_SOURCE;

use super::{collect, context_until, ints, name_of, number, scan, strings, units};
use crate::result::Rows;
use crate::sql::QueryError;
use crate::timeline::{Frames, TimelineOptions, auto_every, check, compute, steps_apply};

/// What the first pass reads of one unit.
struct Unit {
    requests: DataFrame,
    steps: DataFrame,
    first_token: Option<i64>,
    last_token: Option<i64>,
}

fn failed(what: &str) -> impl Fn(PolarsError) -> QueryError + '_ {
    move |e| QueryError(format!("{what}: {e}"))
}

/// The timeline of the trace in `files` without loading it: the figures of [`crate::timeline()`] on the loaded
/// trace. With `auto`, the bucket width is the round one that cuts the requests' extent into at most that many
/// buckets, as `tokenscope timeline` picks it; returns the timeline and the width used, ns.
///
/// # Errors
/// A file cannot be read, a statement fails, or the width is not positive.
pub fn timeline_files(
    files: &[PathBuf],
    window: Option<&Window>,
    options: &TimelineOptions,
    auto: Option<u32>,
) -> Result<(DataFrame, i64), QueryError> {
    if auto.is_none() {
        check(options)?;
    }
    let (units, _) = units(files, window)?;
    let mut read = Vec::with_capacity(units.len());
    for unit in &units {
        let mut ctx = context_until(scan(unit, window)?, "requests")?;
        read.push(first_pass(&mut ctx, options).map_err(|e| QueryError(format!("{}: {e}", name_of(unit))))?);
    }
    let stack = |frames: Vec<DataFrame>| -> Result<DataFrame, QueryError> {
        let lazies: Vec<LazyFrame> = frames.into_iter().map(IntoLazy::lazy).collect();
        concat(lazies, UnionArgs::default())
            .and_then(LazyFrame::collect)
            .map_err(failed("stacking the files' rows"))
    };
    let requests = stack(read.iter().map(|u| u.requests.clone()).collect())?;
    let steps = stack(read.iter().map(|u| u.steps.clone()).collect())?;

    // The extent, as the loaded trace's: its start is the first arrival, step or token; its last event the last
    // arrival, finish or token, or step when the steps' series are given.
    let ints = |df: &DataFrame, name: &str| -> Result<Vec<i64>, QueryError> {
        Ok(ints(df, name)?.into_iter().flatten().collect())
    };
    let (arrivals, finishes, step_starts) = (
        ints(&requests, "arrival_ns")?,
        ints(&requests, "finish_ns")?,
        ints(&steps, "start_ns")?,
    );
    let first_token = read.iter().filter_map(|u| u.first_token).min();
    let last_token = read.iter().filter_map(|u| u.last_token).max();
    let start = [
        arrivals.iter().min().copied(),
        step_starts.iter().min().copied(),
        first_token,
    ]
    .into_iter()
    .flatten()
    .min()
    .unwrap_or(0);
    let mut last = [finishes.iter().chain(&arrivals).max().copied(), last_token]
        .into_iter()
        .flatten()
        .fold(start, i64::max);
    if steps_apply(options.by) {
        last = last.max(step_starts.iter().max().copied().unwrap_or(start));
    }
    let mut options = *options;
    if let Some(buckets) = auto {
        options.every_ns = auto_every(finishes.iter().max().copied().unwrap_or(start) - start, buckets);
    }
    check(&options)?;

    let mut labels = strings(&requests, "g")?;
    if options.by == Some(GroupBy::Source) {
        // A source with steps but no request of its own still has a queue and KV use to show.
        labels.extend(strings(&steps, "g")?);
    }

    // Second pass: each unit's tokens per request and bucket, then per label and bucket.
    let every = options.every_ns;
    let mut counted = Vec::with_capacity(units.len());
    for (unit, first) in units.iter().zip(&read) {
        let mut ctx = context_until(scan(unit, window)?, "tokens")?;
        counted.push(
            count_tokens(&mut ctx, &first.requests, start, every)
                .map_err(|e| QueryError(format!("{}: {e}", name_of(unit))))?,
        );
    }
    drop(read);
    let tokens = stack(counted)?;
    let frames = Frames {
        requests: requests.lazy(),
        tokens: tokens.lazy(),
        steps: steps.lazy(),
        start,
        last,
        labels,
        has_tokens: last_token.is_some(),
    };
    compute(frames, &options)
        .map(|df| (df, options.every_ns))
        .map_err(|e| QueryError(format!("computing the timeline: {e}")))
}

/// A unit's requests (with whether each met the objectives), its steps and its tokens' extent.
fn first_pass(ctx: &mut SQLContext, options: &TimelineOptions) -> Result<Unit, QueryError> {
    let label = options
        .by
        .map_or("''".to_owned(), |by| format!("COALESCE({}, '{NO_LABEL}')", by.name()));
    let requests = collect(
        ctx,
        &format!(
            "SELECT request_id, {label} AS g, arrival_ns, arrival_ns + ttft_ns AS first_ns, \
             arrival_ns + e2e_ns AS finish_ns, CAST(ttft_ns AS DOUBLE) AS ttft_ns, tpot_ns, output_tokens AS out \
             FROM requests"
        ),
    )?;
    let slo = options.slo;
    let good = if slo.is_set() {
        // As `Slo::misses`, compared in ns (exact for whole-ns objectives).
        let ttft = slo.ttft_ms.map_or(lit(true), |l| {
            col("ttft_ns").is_not_null().and(col("ttft_ns").lt_eq(lit(l * 1e6)))
        });
        let tpot = slo.tpot_ms.map_or(lit(true), |l| {
            col("tpot_ns").is_null().or(col("tpot_ns").lt_eq(lit(l * 1e6)))
        });
        ttft.and(tpot)
    } else {
        lit(false)
    };
    let requests = requests
        .lazy()
        .with_column(good.alias("good"))
        .collect()
        .map_err(failed("the requests' objectives"))?;
    let step_label = if options.by.is_some() {
        format!("COALESCE(source, '{DEFAULT_SOURCE}')")
    } else {
        "''".to_owned()
    };
    let steps = collect(
        ctx,
        &format!(
            "SELECT {step_label} AS g, start_ns, num_waiting, kv_usage, num_preempted FROM trace \
             WHERE kind = 'iteration'"
        ),
    )?;
    let extent = Rows::of(&collect(
        ctx,
        "SELECT MIN(emitted_ns) AS first_token, MAX(emitted_ns) AS last_token FROM tokens",
    )?);
    #[allow(clippy::cast_possible_truncation)] // whole ns read back from an i64 column
    let at = |name: &str| number(&extent, 0, name).map(|v| v as i64);
    Ok(Unit {
        requests,
        steps,
        first_token: at("first_token"),
        last_token: at("last_token"),
    })
}

/// A unit's tokens per label and bucket: `g`, `emitted_ns` (the bucket's start), `n` (tokens) and `good_n` (those
/// of requests that met the objectives), counted per request first so that only a row per request and bucket meets
/// the requests.
fn count_tokens(ctx: &mut SQLContext, requests: &DataFrame, start: i64, every: i64) -> Result<DataFrame, QueryError> {
    let bucket_start =
        ((col("emitted_ns") - lit(start)).floor_div(lit(every)) * lit(every) + lit(start)).alias("emitted_ns");
    let per_request = ctx
        .execute("SELECT request_id, emitted_ns FROM tokens")
        .map_err(failed("the tokens"))?
        .group_by([col("request_id"), bucket_start])
        .agg([len().alias("n")]);
    let theirs = requests
        .clone()
        .lazy()
        .select([col("request_id"), col("g"), col("good")]);
    per_request
        .join(
            theirs,
            [col("request_id")],
            [col("request_id")],
            JoinArgs::new(JoinType::Inner),
        )
        .group_by([col("g"), col("emitted_ns")])
        .agg([
            col("n").sum().alias("n"),
            col("n").filter(col("good")).sum().alias("good_n"),
        ])
        .collect_with_engine(Engine::Streaming)
        .map(|r| r.unwrap_single())
        .map_err(failed("counting the tokens"))
}
