//! The trace summary of `tokenscope summary`: token usage, span, throughput, latency distributions, SLO attainment
//! and goodput, finish reasons and reconciliation, for the whole trace or per group (model, app, user, source).

use rayon::prelude::*;
use std::collections::BTreeMap;

use serde::Serialize;

use super::cost::{Cost, Prices};
use super::metrics::{Distribution, RequestMetrics, finish_ns, itl_ns, ms, request_metrics};
use crate::trace::Trace;

/// Service-level objectives. A request meets them when every given one holds: TTFT defined and <= `ttft_ms`;
/// TPOT <= `tpot_ms`, or undefined (fewer than 2 output tokens: nothing to be slow between).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, serde::Deserialize)]
pub struct Slo {
    /// Time-to-first-token limit, ms.
    pub ttft_ms: Option<f64>,
    /// Time-per-output-token limit, ms.
    pub tpot_ms: Option<f64>,
}

impl Slo {
    /// Objectives a chat service commonly sets, used when none are given (the app's defaults, and `tokenscope
    /// findings` without `--slo-*`): the first token within a second, 50 ms per output token after it.
    pub const DEFAULT: Slo = Slo {
        ttft_ms: Some(1000.0),
        tpot_ms: Some(50.0),
    };

    /// The objectives a request misses, as sentences with figures ("TTFT 612.0 ms > 500 ms"); empty when it meets
    /// every one.
    pub fn misses(&self, m: &RequestMetrics) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(limit) = self.ttft_ms {
            match m.ttft_ns.map(ms) {
                Some(t) if t <= limit => {}
                Some(t) => out.push(format!("TTFT {t:.1} ms > {limit} ms")),
                None => out.push(format!("no first token (TTFT objective {limit} ms)")),
            }
        }
        if let Some(limit) = self.tpot_ms
            && let Some(t) = m.tpot_ns.map(|t| t / 1e6).filter(|&t| t > limit)
        {
            out.push(format!("TPOT {t:.1} ms > {limit} ms"));
        }
        out
    }

    /// True when at least one objective is set.
    pub fn is_set(&self) -> bool {
        self.ttft_ms.is_some() || self.tpot_ms.is_some()
    }
}

/// SLO attainment and goodput.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SloResult {
    /// The TTFT objective, ms.
    pub ttft_ms: Option<f64>,
    /// The TPOT objective, ms.
    pub tpot_ms: Option<f64>,
    /// Share of requests that met every objective, 0..1.
    pub attainment: Option<f64>,
    /// Output tokens per second of the requests that met every objective, over the span.
    pub goodput_tok_s: Option<f64>,
}

/// The figures of a set of requests. Times in ms, throughput in output tokens per second.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// Requests.
    pub requests: u64,
    /// Sum of `input_tokens`.
    pub input_tokens: u64,
    /// Sum of `cached_tokens`; `None` when no request has one (the source does not say: never shown as zero).
    pub cached_tokens: Option<u64>,
    /// Sum of output tokens (usage, else token records).
    pub output_tokens: u64,
    /// First arrival to last finish, ms.
    pub span_ms: Option<f64>,
    /// Output tokens / span.
    pub throughput_tok_s: Option<f64>,
    /// Time to first token.
    pub ttft_ms: Distribution,
    /// Time per output token.
    pub tpot_ms: Distribution,
    /// End to end.
    pub e2e_ms: Distribution,
    /// Queueing.
    pub queue_ms: Distribution,
    /// Inter-token latency, one value per gap between consecutive token records.
    pub itl_ms: Distribution,
    /// Present when SLOs were given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slo: Option<SloResult>,
    /// Requests by `finish_reason` (`"(none)"` when absent).
    pub finish_reasons: BTreeMap<String, u64>,
    /// Requests whose `output_tokens` disagrees with their token records.
    pub token_mismatches: u64,
    /// Present when a price table was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<Cost>,
    /// Present when requests have both halves (a joined trace): the client's view against the server's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivery: Option<super::delivery::Delivery>,
    /// Speculative decoding's figures, present when the source says anything of drafts (`docs/SPECULATIVE.md`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub spec: Option<super::spec::SpecFigures>,
}

/// The label a request is grouped by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GroupBy {
    /// `model`.
    Model,
    /// `app_id`.
    #[value(name = "app_id")]
    AppId,
    /// `user_id`.
    #[value(name = "user_id")]
    UserId,
    /// `source`.
    Source,
}

impl GroupBy {
    /// Every grouping.
    pub const ALL: [GroupBy; 4] = [GroupBy::Model, GroupBy::AppId, GroupBy::UserId, GroupBy::Source];

    /// The field name.
    pub fn name(self) -> &'static str {
        match self {
            GroupBy::Model => "model",
            GroupBy::AppId => "app_id",
            GroupBy::UserId => "user_id",
            GroupBy::Source => "source",
        }
    }

    /// The label column of the requests table this grouping reads.
    pub fn label_column(self, trace: &Trace) -> &[u32] {
        match self {
            GroupBy::Model => &trace.requests.model,
            GroupBy::AppId => &trace.requests.app_id,
            GroupBy::UserId => &trace.requests.user_id,
            GroupBy::Source => &trace.requests.source,
        }
    }
}

/// The key of requests without the grouping label.
pub const NO_LABEL: &str = crate::trace::window::ABSENT;

/// The summary of the given requests.
pub fn summarize(trace: &Trace, requests: &[u32], slo: Slo, prices: Option<&Prices>) -> Summary {
    let mut totals = Totals::new(slo, requests.len());
    let mut itl = Vec::new();
    let mut cost = Cost::default();
    for &r in requests {
        let ri = r as usize;
        let m = request_metrics(trace, r);
        itl.extend(itl_ns(trace, r).map(ms));
        totals.add(
            &m,
            &RequestCounts {
                arrival_ns: trace.requests.arrival_ns[ri],
                finish_ns: finish_ns(trace, r),
                input_tokens: trace.requests.input_tokens.at(ri),
                cached_tokens: trace.requests.cached_tokens.at(ri),
                finish_reason: trace.label(trace.requests.finish_reason[ri]),
                token_mismatch: token_mismatch(trace, r).is_some(),
            },
        );
        if let Some(p) = prices {
            cost.add(&p.request_cost(trace, r));
        }
    }
    let mut s = totals.finish(Distribution::of(&mut itl));
    s.cost = prices.map(|_| cost);
    s.delivery = super::delivery::delivery(trace, requests);
    s.spec = super::spec::spec_figures(trace, requests);
    s
}

/// What a request adds to a summary besides its latency figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RequestCounts<'a> {
    /// When it arrived.
    pub arrival_ns: i64,
    /// When it finished (`finished_ns`, else its last token), if known.
    pub finish_ns: Option<i64>,
    /// `input_tokens`.
    pub input_tokens: Option<u32>,
    /// `cached_tokens`.
    pub cached_tokens: Option<u32>,
    /// `finish_reason`.
    pub finish_reason: Option<&'a str>,
    /// Its `output_tokens` disagrees with its token records.
    pub token_mismatch: bool,
}

/// A summary added up request by request: from a loaded trace ([`summarize`]) or from a trace streamed without
/// loading it (`load::stream`), so that both give the same figures.
#[derive(Debug, Clone)]
pub struct Totals {
    slo: Slo,
    requests: u64,
    ttft: Vec<f64>,
    tpot: Vec<f64>,
    e2e: Vec<f64>,
    queue: Vec<f64>,
    input: u64,
    output: u64,
    good_output: u64,
    good_requests: u64,
    cached: Option<u64>,
    first_arrival: i64,
    last_finish: i64,
    finish_reasons: BTreeMap<String, u64>,
    token_mismatches: u64,
}

impl Totals {
    /// Nothing added yet; room for `requests`.
    pub fn new(slo: Slo, requests: usize) -> Self {
        Totals {
            slo,
            requests: 0,
            ttft: Vec::with_capacity(requests),
            tpot: Vec::with_capacity(requests),
            e2e: Vec::with_capacity(requests),
            queue: Vec::with_capacity(requests),
            input: 0,
            output: 0,
            good_output: 0,
            good_requests: 0,
            cached: None,
            first_arrival: i64::MAX,
            last_finish: i64::MIN,
            finish_reasons: BTreeMap::new(),
            token_mismatches: 0,
        }
    }

    /// Adds a request.
    pub fn add(&mut self, m: &RequestMetrics, r: &RequestCounts<'_>) {
        self.requests += 1;
        self.ttft.extend(m.ttft_ns.map(ms));
        self.tpot.extend(m.tpot_ns.map(|t| t / 1e6));
        self.e2e.extend(m.e2e_ns.map(ms));
        self.queue.extend(m.queue_ns.map(ms));
        self.input += u64::from(r.input_tokens.unwrap_or(0));
        if let Some(c) = r.cached_tokens {
            self.cached = Some(self.cached.unwrap_or(0) + u64::from(c));
        }
        self.output += u64::from(m.output_tokens);
        self.first_arrival = self.first_arrival.min(r.arrival_ns);
        self.last_finish = self.last_finish.max(r.finish_ns.unwrap_or(r.arrival_ns));
        let reason = r.finish_reason.unwrap_or(NO_LABEL);
        match self.finish_reasons.get_mut(reason) {
            Some(n) => *n += 1,
            None => {
                self.finish_reasons.insert(reason.to_owned(), 1);
            }
        }
        if r.token_mismatch {
            self.token_mismatches += 1;
        }
        if self.slo.misses(m).is_empty() {
            self.good_requests += 1;
            self.good_output += u64::from(m.output_tokens);
        }
    }

    /// The summary, with the inter-token latencies' distribution (ms); no cost, no delivery.
    #[expect(clippy::cast_precision_loss, reason = "token counts and ms figures far below 2^53")]
    pub fn finish(mut self, itl_ms: Distribution) -> Summary {
        let n = self.requests;
        let span_ms = (n > 0).then(|| ms(self.last_finish - self.first_arrival));
        let per_second = |tokens: u64| span_ms.filter(|&s| s > 0.0).map(|s| tokens as f64 / (s / 1e3));
        let slo = self.slo;
        let slo_result = slo.is_set().then(|| SloResult {
            ttft_ms: slo.ttft_ms,
            tpot_ms: slo.tpot_ms,
            attainment: (n > 0).then(|| self.good_requests as f64 / n as f64),
            goodput_tok_s: per_second(self.good_output),
        });
        Summary {
            requests: n,
            input_tokens: self.input,
            cached_tokens: self.cached,
            output_tokens: self.output,
            span_ms,
            throughput_tok_s: per_second(self.output),
            ttft_ms: Distribution::of(&mut self.ttft),
            tpot_ms: Distribution::of(&mut self.tpot),
            e2e_ms: Distribution::of(&mut self.e2e),
            queue_ms: Distribution::of(&mut self.queue),
            itl_ms,
            slo: slo_result,
            finish_reasons: self.finish_reasons,
            token_mismatches: self.token_mismatches,
            cost: None,
            delivery: None,
            spec: None,
        }
    }
}

/// When a request's `output_tokens` disagrees with its token records (and it has some): the usage and the number
/// of records.
pub fn token_mismatch(trace: &Trace, r: u32) -> Option<(u32, usize)> {
    mismatch(trace.requests.output_tokens.at(r as usize), trace.tokens_of(r).len())
}

/// An `output_tokens` of `usage` against `records` token records: the two when they disagree (and there are
/// records).
pub fn mismatch(usage: Option<u32>, records: usize) -> Option<(u32, usize)> {
    usage
        .filter(|&usage| records > 0 && usage as usize != records)
        .map(|u| (u, records))
}

/// The summary of every request of the trace.
pub fn summarize_all(trace: &Trace, slo: Slo, prices: Option<&Prices>) -> Summary {
    let all: Vec<u32> = (0..u32::try_from(trace.request_count()).unwrap_or(u32::MAX)).collect();
    summarize(trace, &all, slo, prices)
}

/// Summaries per group, sorted by key; requests without the label form the group [`NO_LABEL`].
pub fn summarize_by(trace: &Trace, by: GroupBy, slo: Slo, prices: Option<&Prices>) -> Vec<(String, Summary)> {
    let mut groups: BTreeMap<&str, Vec<u32>> = BTreeMap::new();
    for (r, &label) in by.label_column(trace).iter().enumerate() {
        let key = trace.label(label).unwrap_or(NO_LABEL);
        groups
            .entry(key)
            .or_default()
            .push(u32::try_from(r).unwrap_or(u32::MAX));
    }
    // Each group on its own core (rayon); the order stays the keys'.
    let groups: Vec<(&str, Vec<u32>)> = groups.into_iter().collect();
    groups
        .into_par_iter()
        .map(|(k, rows)| (k.to_owned(), summarize(trace, &rows, slo, prices)))
        .collect()
}
