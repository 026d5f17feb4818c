//! Metrics over time, as a serving team watches them on Grafana: per time bucket (and per label), request rate,
//! output tokens/s, goodput, TTFT and TPOT percentiles, queue length, KV use and preemptions.
//!
//! Which bucket an event lands in follows what each figure measures, as engines' own metrics do: a request counts
//! towards the rate when it arrives, its TTFT when its first token comes, its TPOT when it finishes; a token when it
//! is emitted, towards goodput too if its request met every objective (so goodput never exceeds throughput); a
//! step's queue, KV use and preemptions when the step starts (an instance without steps: its counter samples' queue
//! and KV use, when read). Percentiles are by nearest rank (`QuantileMethod::Equiprobable`: the value at rank
//! ceil(p × n)), the same figures as `summary`'s. Rates divide by the bucket's width, the last bucket's too, which
//! may be partial.

use polars::prelude::*;
use tokenscope_core::analysis::metrics::{RequestMetrics, request_metrics};
use tokenscope_core::analysis::summary::{GroupBy, NO_LABEL, Slo};
use tokenscope_core::trace::Trace;

use crate::sql::QueryError;

/// What a timeline is computed over.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimelineOptions {
    /// Bucket width, ns (> 0).
    pub every_ns: i64,
    /// One series per value of this label; one series for the whole trace when `None`.
    pub by: Option<GroupBy>,
    /// The objectives goodput counts against; no goodput when none is set.
    pub slo: Slo,
}

/// Bucket widths a timeline picks from, ns: 1-2-5 steps of seconds, then minutes and hours.
const NICE_NS: [i64; 16] = [
    1_000_000,
    10_000_000,
    100_000_000,
    1_000_000_000,
    2_000_000_000,
    5_000_000_000,
    10_000_000_000,
    15_000_000_000,
    30_000_000_000,
    60_000_000_000,
    120_000_000_000,
    300_000_000_000,
    600_000_000_000,
    900_000_000_000,
    1_800_000_000_000,
    3_600_000_000_000,
];

const HOUR: i64 = 3_600_000_000_000;

/// The bucket width that cuts `span_ns` into at most about `buckets` buckets: the smallest of 1 ms, 10 ms, 100 ms,
/// 1 s, 2 s, 5 s, 10 s, 15 s, 30 s, 1 min, 2 min, 5 min, 10 min, 15 min, 30 min, then whole hours.
pub fn auto_every(span_ns: i64, buckets: u32) -> i64 {
    let buckets = i64::from(buckets.max(1));
    let wanted = (span_ns.max(1) + buckets - 1) / buckets;
    NICE_NS
        .iter()
        .copied()
        .find(|&w| w >= wanted)
        .unwrap_or_else(|| (wanted + HOUR - 1) / HOUR * HOUR)
}

/// The series' column names, in order (after `t_s` and the label column); a trace whose tokens name their verify
/// steps adds `accept_pos_1` ... `accept_pos_K` after them, its acceptance at each draft position.
pub const SERIES: [&str; 15] = [
    "requests",
    "request_rate",
    "output_tok_s",
    "goodput_tok_s",
    "ttft_p50_ms",
    "ttft_p95_ms",
    "ttft_p99_ms",
    "tpot_p50_ms",
    "tpot_p95_ms",
    "tpot_p99_ms",
    "queue_len",
    "kv_usage",
    "preemptions",
    "accept_rate",
    "accept_length",
];

/// The prefix of the per-position acceptance columns (`accept_pos_1` for the first draft).
pub const ACCEPT_POS: &str = "accept_pos_";

/// The timeline of `trace`: one row per bucket (per label value with `by`), sorted by label then time. Columns:
/// `t_s` (bucket start, seconds since the trace's start), the label (named as `by`), then [`SERIES`].
///
/// # Errors
/// The bucket width is not positive.
pub fn timeline(trace: &Trace, options: &TimelineOptions) -> Result<DataFrame, QueryError> {
    check(options)?;
    frames_of(trace, options)
        .and_then(|f| compute(f, options))
        .map_err(|e| QueryError(format!("computing the timeline: {e}")))
}

pub(crate) fn check(options: &TimelineOptions) -> Result<(), QueryError> {
    if options.every_ns <= 0 {
        return Err(QueryError(format!(
            "the bucket width must be positive, not {} ns",
            options.every_ns
        )));
    }
    Ok(())
}

/// What a timeline is computed from, whether a loaded trace or a dataset's files.
pub(crate) struct Frames {
    /// A row per request: `g` (its label), `arrival_ns`, `first_ns`, `finish_ns` (null when unknown), `ttft_ns` and
    /// `tpot_ns` (f64), `out` (output tokens), `good` (met every objective).
    pub requests: LazyFrame,
    /// Tokens: `g`, `emitted_ns`, `n` (tokens at that time) and `good_n` (those of requests that met every
    /// objective); a row per token, or per label and bucket already counted (`emitted_ns` the bucket's start).
    pub tokens: LazyFrame,
    /// A row per step: `g` (its source, or "" for the whole trace), `start_ns`, `num_waiting`, `kv_usage`,
    /// `num_preempted`, `spec_drafted` and `spec_accepted` (speculative decoding's draft tokens), `spec_length` (a
    /// counter sample's mean acceptance length; null for a step).
    pub steps: LazyFrame,
    /// A row per verify step of a request, read from its tokens: `g` (the request's label), `at_ns` (its first
    /// token), `drafted`, `accepted`, `emitted`.
    pub verify: LazyFrame,
    /// The longest draft of a verify step (0 without any): the per-position columns computed.
    pub positions: u32,
    /// The trace's start (first arrival, step or token) and last event, ns.
    pub start: i64,
    pub last: i64,
    /// Every label value a series is given for, sorted ("" alone for the whole trace).
    pub labels: Vec<String>,
    /// The trace has token records (else output is counted from the requests finishing).
    pub has_tokens: bool,
}

fn label_of(trace: &Trace, by: Option<GroupBy>, request: usize) -> &str {
    by.map_or("", |by| {
        trace.label(by.label_column(trace)[request]).unwrap_or(NO_LABEL)
    })
}

/// Whether the steps' series apply: steps carry their source only.
pub(crate) fn steps_apply(by: Option<GroupBy>) -> bool {
    matches!(by, None | Some(GroupBy::Source))
}

/// The requests' rows of a timeline: label, arrival, first token and finish times, TTFT and TPOT (ns), output
/// tokens, and whether each met the objectives; from a loaded trace or a streamed one.
pub(crate) struct RequestRows<S> {
    g: Vec<S>,
    arrival: Vec<i64>,
    first: Vec<Option<i64>>,
    finish: Vec<Option<i64>>,
    ttft: Vec<Option<f64>>,
    tpot: Vec<Option<f64>>,
    out: Vec<i64>,
    /// Whether each request met every objective (false when none is set).
    pub(crate) good: Vec<bool>,
}

impl<S: AsRef<str>> RequestRows<S> {
    pub(crate) fn with_capacity(n: usize) -> Self {
        RequestRows {
            g: Vec::with_capacity(n),
            arrival: Vec::with_capacity(n),
            first: Vec::with_capacity(n),
            finish: Vec::with_capacity(n),
            ttft: Vec::with_capacity(n),
            tpot: Vec::with_capacity(n),
            out: Vec::with_capacity(n),
            good: Vec::with_capacity(n),
        }
    }

    /// Adds a request: its label, arrival and figures.
    #[expect(clippy::cast_precision_loss, reason = "ns far below 2^53")]
    pub(crate) fn push(&mut self, label: S, arrival: i64, m: &RequestMetrics, slo: Slo) {
        self.g.push(label);
        self.arrival.push(arrival);
        self.first.push(m.ttft_ns.map(|t| arrival + t));
        self.finish.push(m.e2e_ns.map(|t| arrival + t));
        self.ttft.push(m.ttft_ns.map(|t| t as f64));
        self.tpot.push(m.tpot_ns);
        self.out.push(i64::from(m.output_tokens));
        self.good.push(slo.is_set() && slo.misses(m).is_empty());
    }

    /// The label of request `r`.
    pub(crate) fn label(&self, r: usize) -> &str {
        self.g[r].as_ref()
    }

    /// The rows as the frame [`Frames::requests`] reads.
    pub(crate) fn into_frame(self) -> PolarsResult<DataFrame> {
        let g: Vec<&str> = self.g.iter().map(AsRef::as_ref).collect();
        DataFrame::new_infer_height(vec![
            Column::new("g".into(), g),
            Column::new("arrival_ns".into(), self.arrival),
            Column::new("first_ns".into(), self.first),
            Column::new("finish_ns".into(), self.finish),
            Column::new("ttft_ns".into(), self.ttft),
            Column::new("tpot_ns".into(), self.tpot),
            Column::new("out".into(), self.out),
            Column::new("good".into(), self.good),
        ])
    }
}

fn frames_of(trace: &Trace, options: &TimelineOptions) -> PolarsResult<Frames> {
    let by = options.by;
    let start = trace.start_ns();
    let n = trace.request_count();

    // Requests: their label, times and figures.
    let mut rows = RequestRows::with_capacity(n);
    let mut last = start;
    for r in 0..n {
        #[expect(clippy::cast_possible_truncation, reason = "request rows are u32")]
        let m = request_metrics(trace, r as u32);
        let a = trace.requests.arrival_ns[r];
        last = last.max(a).max(m.e2e_ns.map_or(a, |t| a + t));
        rows.push(label_of(trace, by, r), a, &m, options.slo);
    }
    let good = rows.good.clone();
    let requests = rows.into_frame()?.lazy();

    // Tokens, with their request's label and whether it met the objectives.
    let mut token_g = Vec::with_capacity(trace.token_count());
    let mut token_good = Vec::with_capacity(trace.token_count());
    for (r, &met) in good.iter().enumerate() {
        let count = trace.tokens_of(r as u32).len();
        token_g.extend(std::iter::repeat_n(label_of(trace, by, r), count));
        token_good.extend(std::iter::repeat_n(u32::from(met), count));
    }
    if let Some(&t) = trace.tokens.emitted_ns.iter().max() {
        last = last.max(t);
    }
    let ones = vec![1u32; token_good.len()];
    let tokens = DataFrame::new_infer_height(vec![
        Column::new("g".into(), token_g),
        Column::new("emitted_ns".into(), &trace.tokens.emitted_ns),
        Column::new("n".into(), ones),
        Column::new("good_n".into(), token_good),
    ])?
    .lazy();

    // The steps' queue, KV use and preemptions; for an instance without steps, its counter samples' queue and KV
    // use (a server log's stats lines), which say nothing of preemptions.
    let it = &trace.iterations;
    let with_steps: Vec<u32> = trace.sources_with_iterations().iter().map(|&(s, _)| s).collect();
    let sa = &trace.samples;
    let sampled: Vec<usize> = (0..sa.len()).filter(|&i| !with_steps.contains(&sa.source[i])).collect();
    let group = |s: u32| {
        if by.is_some() {
            trace.label(s).unwrap_or(NO_LABEL)
        } else {
            ""
        }
    };
    let mut step_g: Vec<&str> = it.source.iter().map(|&s| group(s)).collect();
    let mut step_start = it.start_ns.clone();
    let mut waiting = it.num_waiting.to_options();
    let mut kv = it.kv_usage.to_options();
    let mut preempted = it.num_preempted.to_options();
    let mut drafted = it.spec_drafted_tokens.to_options();
    let mut accepted = it.spec_accepted_tokens.to_options();
    let mut spec_length: Vec<Option<f64>> = vec![None; it.len()];
    for &i in &sampled {
        step_g.push(group(sa.source[i]));
        step_start.push(sa.time_ns[i]);
        waiting.push(sa.num_waiting[i]);
        kv.push(sa.kv_usage[i]);
        preempted.push(None);
        drafted.push(sa.spec_drafted_tokens[i]);
        accepted.push(sa.spec_accepted_tokens[i]);
        spec_length.push(sa.spec_accept_length[i]);
    }
    if steps_apply(by)
        && let Some(&t) = step_start.iter().max()
    {
        last = last.max(t);
    }
    let steps = DataFrame::new_infer_height(vec![
        Column::new("g".into(), step_g),
        Column::new("start_ns".into(), step_start),
        Column::new("num_waiting".into(), waiting),
        Column::new("kv_usage".into(), kv),
        Column::new("num_preempted".into(), preempted),
        Column::new("spec_drafted".into(), drafted),
        Column::new("spec_accepted".into(), accepted),
        Column::new("spec_length".into(), spec_length),
    ])?
    .lazy();
    let (verify, positions) = verify_frame(trace, by)?;

    let mut labels: Vec<String> = (0..n).map(|r| label_of(trace, by, r).to_owned()).collect();
    if by == Some(GroupBy::Source) {
        // A source with steps but no request of its own still has a queue and KV use to show.
        labels.extend(it.source.iter().map(|&s| trace.label(s).unwrap_or(NO_LABEL).to_owned()));
        labels.extend(
            sampled
                .iter()
                .map(|&i| trace.label(sa.source[i]).unwrap_or(NO_LABEL).to_owned()),
        );
    }
    Ok(Frames {
        requests,
        tokens,
        steps,
        verify,
        positions,
        start,
        last,
        labels,
        has_tokens: !trace.tokens.is_empty(),
    })
}

/// The verify steps of `trace`'s requests ([`Frames::verify`]), and the longest draft among them.
fn verify_frame(trace: &Trace, by: Option<GroupBy>) -> PolarsResult<(LazyFrame, u32)> {
    let (mut g, mut at, mut drafted, mut accepted, mut emitted) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for r in 0..trace.request_count() {
        #[expect(clippy::cast_possible_truncation, reason = "request rows are u32")]
        for v in tokenscope_core::analysis::spec::verify_steps_of(trace, &[r as u32]) {
            g.push(label_of(trace, by, r));
            at.push(trace.tokens.emitted_ns[v.first]);
            drafted.push(v.drafted);
            accepted.push(v.accepted);
            emitted.push(v.emitted);
        }
    }
    let positions = drafted.iter().copied().max().unwrap_or(0);
    Ok((verify_columns(g, at, drafted, accepted, emitted)?, positions))
}

/// A verify frame ([`Frames::verify`]) of these columns.
pub(crate) fn verify_columns(
    g: Vec<&str>,
    at: Vec<i64>,
    drafted: Vec<u32>,
    accepted: Vec<u32>,
    emitted: Vec<u32>,
) -> PolarsResult<LazyFrame> {
    Ok(DataFrame::new_infer_height(vec![
        Column::new("g".into(), g),
        Column::new("at_ns".into(), at),
        Column::new("drafted".into(), drafted),
        Column::new("accepted".into(), accepted),
        Column::new("emitted".into(), emitted),
    ])?
    .lazy())
}

/// The most rows a timeline gives (buckets times label values).
const MAX_ROWS: i128 = 5_000_000;

/// The percentile columns (of [`SERIES`]), computed in ns and given in ms.
const PERCENTILE_COLUMNS: &[&str] = SERIES.split_at(4).1.split_at(6).0;

pub(crate) fn compute(frames: Frames, options: &TimelineOptions) -> PolarsResult<DataFrame> {
    let Frames {
        requests,
        tokens,
        steps,
        verify,
        positions,
        start,
        last,
        mut labels,
        has_tokens,
    } = frames;
    let by = options.by;
    let every = options.every_ns;
    let every_s = every as f64 / 1e9;

    let bucket = |time: &str| (col(time) - lit(start)).floor_div(lit(every)).alias("bucket");
    let keys = |time: &str| [col("g"), bucket(time)];
    // Ranked in ns, as the trace writes times; turned into ms once picked, as `summary` does (ns / 1e6).
    let q = |p: f64, c: &str, name: &str| col(c).quantile(lit(p), QuantileMethod::Equiprobable).alias(name);

    let arrivals = requests
        .clone()
        .group_by(keys("arrival_ns"))
        .agg([len().alias("requests")]);
    let firsts = requests
        .clone()
        .filter(col("first_ns").is_not_null())
        .group_by(keys("first_ns"))
        .agg([
            q(0.50, "ttft_ns", "ttft_p50_ms"),
            q(0.95, "ttft_ns", "ttft_p95_ms"),
            q(0.99, "ttft_ns", "ttft_p99_ms"),
        ]);
    let finishes = requests
        .filter(col("finish_ns").is_not_null())
        .group_by(keys("finish_ns"))
        .agg([
            q(0.50, "tpot_ns", "tpot_p50_ms"),
            q(0.95, "tpot_ns", "tpot_p95_ms"),
            q(0.99, "tpot_ns", "tpot_p99_ms"),
            col("out").filter(col("good")).sum().alias("good_finished_tokens"),
            col("out").sum().alias("finished_tokens"),
        ]);
    let emitted = tokens
        .group_by(keys("emitted_ns"))
        .agg([col("n").sum().alias("tokens"), col("good_n").sum().alias("good_tokens")]);
    let stepped = steps.group_by(keys("start_ns")).agg([
        col("num_waiting").mean().alias("queue_len"),
        col("kv_usage").mean().alias("kv_usage"),
        // A sum of nothing known is unknown, not zero: null unless some step of the bucket says.
        when(col("num_preempted").count().gt(lit(0)))
            .then(col("num_preempted").sum())
            .otherwise(lit(NULL))
            .alias("preemptions"),
        // Speculative decoding: the drafts the bucket's steps accepted, over those they verified; null without drafts.
        when(col("spec_drafted").sum().gt(lit(0)))
            .then(
                col("spec_accepted").sum().cast(DataType::Float64) / col("spec_drafted").sum().cast(DataType::Float64),
            )
            .otherwise(lit(NULL))
            .alias("accept_rate"),
        col("spec_length").mean().alias("sampled_length"),
    ]);
    // Verify steps read from tokens: tokens per verify step, and the share of the steps proposing draft k that
    // accepted it.
    let mut per_step = vec![
        (col("emitted").sum().cast(DataType::Float64) / len().cast(DataType::Float64)).alias("verified_length"),
        when(col("drafted").sum().gt(lit(0)))
            .then(col("accepted").sum().cast(DataType::Float64) / col("drafted").sum().cast(DataType::Float64))
            .otherwise(lit(NULL))
            .alias("verified_rate"),
    ];
    per_step.extend((1..=positions).map(|k| {
        let proposed = col("drafted").gt_eq(lit(k));
        let taken = proposed.clone().and(col("accepted").gt_eq(lit(k)));
        let n = proposed.cast(DataType::UInt32).sum();
        when(n.clone().gt(lit(0)))
            .then(taken.cast(DataType::UInt32).sum().cast(DataType::Float64) / n.cast(DataType::Float64))
            .otherwise(lit(NULL))
            .alias(format!("{ACCEPT_POS}{k}"))
    }));
    let verified = verify.group_by(keys("at_ns")).agg(per_step);

    // Every bucket of every label, so that a quiet bucket shows as zero rather than as a gap.
    let buckets = last.saturating_sub(start) / every + 1;
    labels.sort_unstable();
    labels.dedup();
    if labels.is_empty() {
        labels.push(String::new());
    }
    // A row per bucket and label: an absurd time in a trace, or too narrow a width, must not ask for billions.
    let rows = i128::from(buckets) * labels.len() as i128;
    if rows > MAX_ROWS {
        return Err(PolarsError::ComputeError(
            format!(
                "{buckets} buckets of {every} ns for {} label value(s) is more than {MAX_ROWS} rows: the trace spans \
                 {:.1} s; choose a wider bucket (--every)",
                labels.len(),
                last.saturating_sub(start) as f64 / 1e9
            )
            .into(),
        ));
    }
    let grid_g: Vec<&str> = labels
        .iter()
        .flat_map(|l| std::iter::repeat_n(l.as_str(), usize::try_from(buckets).unwrap_or(0)))
        .collect();
    let grid_b: Vec<i64> = labels.iter().flat_map(|_| 0..buckets).collect();
    let grid = DataFrame::new_infer_height(vec![
        Column::new("g".into(), grid_g),
        Column::new("bucket".into(), grid_b),
    ])?
    .lazy();

    // Each aggregate is computed on its own (a dataset's streams them from its files) and the small results are
    // joined: one plan of them all would be deep enough to exhaust a thread's stack in the optimiser.
    let done = |lf: LazyFrame| -> PolarsResult<LazyFrame> {
        Ok(lf.collect_with_engine(Engine::Streaming)?.unwrap_single().lazy())
    };
    let on = || [col("g"), col("bucket")];
    let join = |l: LazyFrame, r: LazyFrame| l.join(r, on(), on(), JoinArgs::new(JoinType::Left));
    let mut lf = join(grid, done(arrivals)?);
    lf = join(lf, done(firsts)?);
    lf = join(lf, done(finishes)?);
    lf = join(lf, done(emitted)?);
    lf = join(lf, done(verified)?);
    if steps_apply(by) {
        lf = join(lf, done(stepped)?);
    } else {
        lf = lf.with_columns([
            lit(NULL).cast(DataType::Float64).alias("queue_len"),
            lit(NULL).cast(DataType::Float64).alias("kv_usage"),
            lit(NULL).cast(DataType::UInt32).alias("preemptions"),
            lit(NULL).cast(DataType::Float64).alias("accept_rate"),
            lit(NULL).cast(DataType::Float64).alias("sampled_length"),
        ]);
    }
    // Output tokens from token records when the trace has them, else from the usage of the requests finishing.
    let (output, good_output) = if has_tokens {
        (col("tokens"), col("good_tokens"))
    } else {
        (col("finished_tokens"), col("good_finished_tokens"))
    };
    let goodput = if options.slo.is_set() {
        good_output.fill_null(lit(0)).cast(DataType::Float64) / lit(every_s)
    } else {
        lit(NULL).cast(DataType::Float64)
    };
    let mut select = vec![(col("bucket").cast(DataType::Float64) * lit(every_s)).alias("t_s")];
    if let Some(by) = by {
        select.push(col("g").alias(by.name()));
    }
    select.extend([
        col("requests")
            .fill_null(lit(0))
            .cast(DataType::UInt64)
            .alias("requests"),
        (col("requests").fill_null(lit(0)).cast(DataType::Float64) / lit(every_s)).alias("request_rate"),
        (output.fill_null(lit(0)).cast(DataType::Float64) / lit(every_s)).alias("output_tok_s"),
        goodput.alias("goodput_tok_s"),
    ]);
    select.extend(PERCENTILE_COLUMNS.iter().map(|&c| col(c).cast(DataType::Float64)));
    select.extend([
        col("queue_len"),
        col("kv_usage"),
        col("preemptions").cast(DataType::UInt64),
        // The steps' counts where they say, else the tokens' verify steps.
        col("accept_rate")
            .cast(DataType::Float64)
            .fill_null(col("verified_rate"))
            .alias("accept_rate"),
        // The tokens' verify steps where they say, else the engine's counters' mean.
        col("verified_length")
            .fill_null(col("sampled_length"))
            .cast(DataType::Float64)
            .alias("accept_length"),
    ]);
    select.extend((1..=positions).map(|k| col(format!("{ACCEPT_POS}{k}")).cast(DataType::Float64)));
    let mut df = lf
        .sort(["g", "bucket"], SortMultipleOptions::default())
        .select(select)
        .collect_with_engine(Engine::Streaming)?
        .unwrap_single();
    for &name in PERCENTILE_COLUMNS {
        let ms: Float64Chunked = df.column(name)?.f64()?.iter().map(|v| v.map(|ns| ns / 1e6)).collect();
        df.with_column(ms.into_column().with_name(name.into()))?;
    }
    Ok(df)
}
