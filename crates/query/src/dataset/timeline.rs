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
use crate::timeline::{Frames, RequestRows, TimelineOptions, auto_every, check, compute, steps_apply, verify_columns};

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
    let finishes = s
        .requests
        .iter()
        .filter_map(tokenscope_core::analysis::facts::RequestFacts::finish_ns);
    let step_starts = s.steps.iter().map(|st| st.start_ns);
    let token_extent = s.token_extent;
    let start = [arrivals.clone().min(), s.first_step_ns, token_extent.map(|(lo, _)| lo)]
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
    let mut rows = RequestRows::with_capacity(s.requests.len());
    for f in &s.requests {
        rows.push(group(f), f.arrival_ns, &f.metrics(), options.slo);
    }

    // Tokens per label and bucket, counted per label and bucket as they stream.
    let mut names: Vec<String> = Vec::new();
    let mut ids: std::collections::HashMap<String, u32> = std::collections::HashMap::new();
    let group_ids: Vec<u32> = (0..s.requests.len())
        .map(|r| {
            let label = rows.label(r);
            if let Some(&id) = ids.get(label) {
                return id;
            }
            let id = u32::try_from(names.len()).unwrap_or(u32::MAX);
            names.push(label.to_owned());
            ids.insert(label.to_owned(), id);
            id
        })
        .collect();
    let counts = s
        .count_tokens(start, every, &group_ids, &rows.good)
        .map_err(streaming)?;
    let mut per_bucket: Vec<((u32, i64), _)> = counts.into_iter().collect();
    per_bucket.sort_unstable_by_key(|&(key, _)| key);
    let (mut token_g, mut token_at, mut token_n, mut token_good) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for ((group, bucket), c) in per_bucket {
        token_g.push(names[group as usize].as_str());
        token_at.push(start + bucket * every);
        token_n.push(c.n);
        token_good.push(c.good);
    }
    let tokens = DataFrame::new_infer_height(vec![
        Column::new("g".into(), token_g),
        Column::new("emitted_ns".into(), token_at),
        Column::new("n".into(), token_n),
        Column::new("good_n".into(), token_good),
    ])
    .map_err(failed("the tokens"))?;

    let mut labels: Vec<String> = (0..s.requests.len()).map(|r| rows.label(r).to_owned()).collect();
    let requests = rows.into_frame().map_err(failed("the requests"))?;

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
        Column::new(
            "spec_drafted".into(),
            s.steps.iter().map(|st| st.spec.0).collect::<Vec<_>>(),
        ),
        Column::new(
            "spec_accepted".into(),
            s.steps.iter().map(|st| st.spec.1).collect::<Vec<_>>(),
        ),
        Column::new("spec_length".into(), vec![None::<f64>; s.steps.len()]),
    ])
    .map_err(failed("the steps"))?;
    // A dataset's tokens are counted per bucket, not read one by one: its verify steps are not known.
    let verify = verify_columns(Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new())
        .map_err(failed("the verify steps"))?;
    let frames = Frames {
        requests: requests.lazy(),
        tokens: tokens.lazy(),
        steps: steps.lazy(),
        verify,
        positions: 0,
        start,
        last,
        labels,
        has_tokens: token_extent.is_some(),
    };
    compute(frames, &options)
        .map(|df| (df, options.every_ns))
        .map_err(|e| QueryError(format!("computing the timeline: {e}")))
}
