//! The timeline of a dataset out of core, streamed ([`tokenscope_core::load::stream`]): a first pass keeps a few
//! facts per request and a row per step, a second each request's token facts, a third counts the tokens per request
//! and bucket, then per label and bucket. Memory holds a window of row groups, a row per request and per step, and a
//! row per label and bucket, never a row per token.

use std::path::PathBuf;

use polars::prelude::*;
use tokenscope_core::analysis::summary::{GroupBy, NO_LABEL};
use tokenscope_core::format::window::Window;
use tokenscope_core::load::stream::{StreamError, Streamed};

use crate::sql::QueryError;
use crate::timeline::{Frames, TimelineOptions, auto_every, check, compute, steps_apply};

fn failed(what: &str) -> impl Fn(PolarsError) -> QueryError + '_ {
    move |e| QueryError(format!("{what}: {e}"))
}

fn streaming(e: StreamError) -> QueryError {
    QueryError(e.to_string())
}

/// The timeline of the trace in `files` without loading it: the figures of [`crate::timeline()`] on the loaded
/// trace. With `auto`, the bucket width is the round one that cuts the requests' extent into at most that many
/// buckets, as `tokenscope timeline` picks it; returns the timeline and the width used, ns.
///
/// # Errors
/// A file cannot be read, its tokens are not in the format's order, or the width is not positive.
#[allow(clippy::cast_precision_loss)] // ns figures far below 2^53
pub fn timeline_files(
    files: &[PathBuf],
    window: Option<&Window>,
    options: &TimelineOptions,
    auto: Option<u32>,
) -> Result<(DataFrame, i64), QueryError> {
    if auto.is_none() {
        check(options)?;
    }
    let by = options.by;
    let mut s = Streamed::open(files, window, true).map_err(streaming)?;
    s.read_tokens(None).map_err(streaming)?;

    // The extent, as the loaded trace's: its start is the first arrival, step or token; its last event the last
    // arrival, finish or token, or step when the steps' series are given.
    let arrivals = s.requests.iter().map(|f| f.arrival_ns);
    let finishes = s.requests.iter().filter_map(|f| f.finish_ns());
    let step_starts = s.steps.iter().map(|st| st.start_ns);
    let token_extent = s.token_extent;
    let start = [
        arrivals.clone().min(),
        step_starts.clone().min(),
        token_extent.map(|(lo, _)| lo),
    ]
    .into_iter()
    .flatten()
    .min()
    .unwrap_or(0);
    let last_finish = finishes.clone().max();
    let mut last = [finishes.chain(arrivals).max(), token_extent.map(|(_, hi)| hi)]
        .into_iter()
        .flatten()
        .fold(start, i64::max);
    if steps_apply(by) {
        last = last.max(step_starts.max().unwrap_or(start));
    }
    let mut options = *options;
    if let Some(buckets) = auto {
        options.every_ns = auto_every(last_finish.unwrap_or(start) - start, buckets);
    }
    check(&options)?;
    let every = options.every_ns;

    // A row per request: its label, times and figures, and whether it met the objectives.
    let group = |f: &tokenscope_core::analysis::facts::RequestFacts| -> String {
        by.map_or_else(String::new, |by| {
            let slot = match by {
                GroupBy::Source => 0,
                GroupBy::Model => 1,
                GroupBy::AppId => 2,
                GroupBy::UserId => 3,
            };
            f.labels[slot].map_or(NO_LABEL, |l| s.label(l)).to_owned()
        })
    };
    let n = s.requests.len();
    let mut g = Vec::with_capacity(n);
    let (mut arrival, mut first, mut finish) = (Vec::with_capacity(n), Vec::with_capacity(n), Vec::with_capacity(n));
    let (mut ttft, mut tpot, mut out, mut good) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for f in &s.requests {
        let m = f.metrics();
        g.push(group(f));
        arrival.push(f.arrival_ns);
        first.push(m.ttft_ns.map(|t| f.arrival_ns + t));
        finish.push(m.e2e_ns.map(|t| f.arrival_ns + t));
        ttft.push(m.ttft_ns.map(|t| t as f64));
        tpot.push(m.tpot_ns);
        out.push(i64::from(m.output_tokens));
        good.push(options.slo.is_set() && options.slo.misses(&m).is_empty());
    }

    // Tokens per label and bucket, from the counts per request and bucket.
    let mut per_bucket: std::collections::BTreeMap<(String, i64), (u64, u64)> = std::collections::BTreeMap::new();
    for c in s.count_tokens(start, every).map_err(streaming)? {
        let r = c.request as usize;
        let e = per_bucket.entry((g[r].clone(), c.bucket)).or_default();
        e.0 += u64::from(c.n);
        if good[r] {
            e.1 += u64::from(c.n);
        }
    }
    let (mut token_g, mut token_at, mut token_n, mut token_good) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for ((label, bucket), (count, good_count)) in per_bucket {
        token_g.push(label);
        token_at.push(start + bucket * every);
        token_n.push(count);
        token_good.push(good_count);
    }
    let tokens = DataFrame::new_infer_height(vec![
        Column::new("g".into(), token_g),
        Column::new("emitted_ns".into(), token_at),
        Column::new("n".into(), token_n),
        Column::new("good_n".into(), token_good),
    ])
    .map_err(failed("the tokens"))?;

    let mut labels = g.clone();
    let requests = DataFrame::new_infer_height(vec![
        Column::new("g".into(), g),
        Column::new("arrival_ns".into(), arrival),
        Column::new("first_ns".into(), first),
        Column::new("finish_ns".into(), finish),
        Column::new("ttft_ns".into(), ttft),
        Column::new("tpot_ns".into(), tpot),
        Column::new("out".into(), out),
        Column::new("good".into(), good),
    ])
    .map_err(failed("the requests"))?;

    // The steps' queue, KV use and preemptions (a source without steps: its counter samples').
    let step_label = |source: u32| {
        if by.is_some() {
            s.label(source).to_owned()
        } else {
            String::new()
        }
    };
    let step_g: Vec<String> = s.steps.iter().map(|st| step_label(st.source)).collect();
    if by == Some(GroupBy::Source) {
        // A source with steps but no request of its own still has a queue and KV use to show.
        labels.extend(step_g.iter().cloned());
    }
    let steps = DataFrame::new_infer_height(vec![
        Column::new("g".into(), step_g),
        Column::new(
            "start_ns".into(),
            s.steps.iter().map(|st| st.start_ns).collect::<Vec<_>>(),
        ),
        Column::new(
            "num_waiting".into(),
            s.steps.iter().map(|st| st.num_waiting).collect::<Vec<_>>(),
        ),
        Column::new(
            "kv_usage".into(),
            s.steps.iter().map(|st| st.kv_usage).collect::<Vec<_>>(),
        ),
        Column::new(
            "num_preempted".into(),
            s.steps.iter().map(|st| st.num_preempted).collect::<Vec<_>>(),
        ),
    ])
    .map_err(failed("the steps"))?;
    let frames = Frames {
        requests: requests.lazy(),
        tokens: tokens.lazy(),
        steps: steps.lazy(),
        start,
        last,
        labels,
        has_tokens: token_extent.is_some(),
    };
    compute(frames, &options)
        .map(|df| (df, options.every_ns))
        .map_err(|e| QueryError(format!("computing the timeline: {e}")))
}
