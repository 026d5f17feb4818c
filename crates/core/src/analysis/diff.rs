//! Two traces compared, "before" (A) and "after" (B): their figures side by side with the change, the findings
//! present in one and not the other, and, where the same requests appear in both, each request's change.
//!
//! Requests are paired by `request_id` when at least half of the smaller trace's ids are in both and those pairs
//! mostly agree on their prompt lengths (a replay keeps its original's ids; so does a re-run of a benchmark that
//! names its requests); otherwise by arrival and prompt length (the same offset from the trace's first arrival
//! within [`ARRIVAL_TOLERANCE_NS`] and the same known `input_tokens`), as two recordings of one prompt set at one
//! rate are. A pairing that covers less than half of the smaller trace is not reported: it would compare requests
//! that merely look alike.

use std::collections::HashMap;

use serde::Serialize;

use super::findings::{Finding, Kind, Thresholds, find};
use super::metrics::{RequestMetrics, ms, request_metrics};
use super::stats::Unit;
use super::summary::{GroupBy, Slo, Summary, summarize_all, summarize_by};
use crate::analysis::cost::Prices;
use crate::trace::Trace;

/// Which way a figure is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Better {
    /// Latencies, cost.
    Lower,
    /// Throughput, attainment, goodput.
    Higher,
    /// Counts that describe the workload, not its service.
    Neither,
}

/// A figure of a [`Summary`] the comparison shows.
#[derive(Debug, Clone, Copy)]
pub struct Figure {
    /// Machine name (JSON key).
    pub key: &'static str,
    /// Human name, with its unit.
    pub label: &'static str,
    /// How it reads.
    pub unit: Unit,
    /// Which way is better.
    pub better: Better,
    /// The figure of a summary; `None` when undefined.
    pub get: fn(&Summary) -> Option<f64>,
}

#[allow(clippy::cast_precision_loss)] // counts far below 2^53
fn count(v: u64) -> Option<f64> {
    Some(v as f64)
}

macro_rules! figures {
    ($( $key:literal, $label:literal, $unit:ident, $better:ident, $get:expr; )+) => {
        /// Every figure, in display order.
        pub const FIGURES: &[Figure] = &[
            $( Figure { key: $key, label: $label, unit: Unit::$unit, better: Better::$better, get: $get }, )+
        ];
    };
}

figures! {
    "requests", "requests", Count, Neither, |s| count(s.requests);
    "input_tokens", "input tokens", Count, Neither, |s| count(s.input_tokens);
    "cached_tokens", "cached tokens", Count, Higher, |s| s.cached_tokens.and_then(count);
    "output_tokens", "output tokens", Count, Neither, |s| count(s.output_tokens);
    "span_s", "span s", Rate, Neither, |s| s.span_ms.map(|v| v / 1e3);
    "throughput_tok_s", "throughput tok/s", Rate, Higher, |s| s.throughput_tok_s;
    "ttft_mean_ms", "TTFT mean ms", Ms, Lower, |s| s.ttft_ms.mean;
    "ttft_p50_ms", "TTFT p50 ms", Ms, Lower, |s| s.ttft_ms.p50;
    "ttft_p90_ms", "TTFT p90 ms", Ms, Lower, |s| s.ttft_ms.p90;
    "ttft_p99_ms", "TTFT p99 ms", Ms, Lower, |s| s.ttft_ms.p99;
    "ttft_max_ms", "TTFT max ms", Ms, Lower, |s| s.ttft_ms.max;
    "tpot_mean_ms", "TPOT mean ms", Ms, Lower, |s| s.tpot_ms.mean;
    "tpot_p50_ms", "TPOT p50 ms", Ms, Lower, |s| s.tpot_ms.p50;
    "tpot_p90_ms", "TPOT p90 ms", Ms, Lower, |s| s.tpot_ms.p90;
    "tpot_p99_ms", "TPOT p99 ms", Ms, Lower, |s| s.tpot_ms.p99;
    "itl_p99_ms", "ITL p99 ms", Ms, Lower, |s| s.itl_ms.p99;
    "itl_max_ms", "ITL max ms", Ms, Lower, |s| s.itl_ms.max;
    "e2e_p50_ms", "E2E p50 ms", Ms, Lower, |s| s.e2e_ms.p50;
    "e2e_p99_ms", "E2E p99 ms", Ms, Lower, |s| s.e2e_ms.p99;
    "queue_p50_ms", "queue p50 ms", Ms, Lower, |s| s.queue_ms.p50;
    "queue_p99_ms", "queue p99 ms", Ms, Lower, |s| s.queue_ms.p99;
    "slo_attainment", "SLO met", Share, Higher, |s| s.slo.and_then(|x| x.attainment);
    "goodput_tok_s", "goodput tok/s", Rate, Higher, |s| s.slo.and_then(|x| x.goodput_tok_s);
    "cost", "cost", Money, Lower, |s| s.cost.map(|c| c.total);
    "client_ttft_p50_ms", "client TTFT p50 ms", Ms, Lower, |s| s.delivery.as_ref().and_then(|d| d.client_ttft_ms.p50);
    "client_ttft_p99_ms", "client TTFT p99 ms", Ms, Lower, |s| s.delivery.as_ref().and_then(|d| d.client_ttft_ms.p99);
    "ttft_gap_p50_ms", "TTFT gap p50 ms", Ms, Lower, |s| s.delivery.as_ref().and_then(|d| d.ttft_gap_ms.p50);
    "delivery_p50_ms", "token delivery p50 ms", Ms, Lower, |s| s.delivery.as_ref().and_then(|d| d.token_ms.p50);
    "delivery_p99_ms", "token delivery p99 ms", Ms, Lower, |s| s.delivery.as_ref().and_then(|d| d.token_ms.p99);
}

/// A change smaller than this share of A's figure reads as no change: percentiles of two runs of one workload
/// differ by a few tenths of a percent without either being better.
pub const SAME_WITHIN: f64 = 0.01;

/// How a figure moved from A to B.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Moved the better way by more than [`SAME_WITHIN`].
    Better,
    /// Moved the worse way by more than [`SAME_WITHIN`].
    Worse,
    /// Within [`SAME_WITHIN`].
    Same,
    /// Changed, but the figure has no better way ([`Better::Neither`]).
    Changed,
    /// Undefined in A or B.
    Undefined,
}

/// One figure of A and B with its change.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Change {
    /// The figure's key.
    pub key: &'static str,
    /// The figure's human name.
    #[serde(skip)]
    pub label: &'static str,
    /// How it reads.
    #[serde(skip)]
    pub unit: Unit,
    /// A's figure.
    pub a: Option<f64>,
    /// B's figure.
    pub b: Option<f64>,
    /// B − A.
    pub change: Option<f64>,
    /// (B − A) / A; undefined when A is 0.
    pub relative: Option<f64>,
    /// Better, worse or the same.
    pub verdict: Verdict,
}

impl Change {
    /// The change of one figure.
    pub fn of(figure: &Figure, a: &Summary, b: &Summary) -> Self {
        let (va, vb) = ((figure.get)(a), (figure.get)(b));
        let change = va.zip(vb).map(|(x, y)| y - x);
        let relative = va.zip(change).filter(|(x, _)| *x != 0.0).map(|(x, d)| d / x.abs());
        let verdict = match (change, relative) {
            (None, _) => Verdict::Undefined,
            (Some(0.0), _) => Verdict::Same,
            (Some(_), Some(r)) if r.abs() < SAME_WITHIN => Verdict::Same,
            (Some(d), _) => match figure.better {
                Better::Neither => Verdict::Changed,
                Better::Lower if d < 0.0 => Verdict::Better,
                Better::Higher if d > 0.0 => Verdict::Better,
                _ => Verdict::Worse,
            },
        };
        Change {
            key: figure.key,
            label: figure.label,
            unit: figure.unit,
            a: va,
            b: vb,
            change,
            relative,
            verdict,
        }
    }
}

impl Change {
    /// B − A as tables show it, with its sign: `+12.5`, `-3`, `+4.0 pt` (percentage points for shares); `-` when
    /// undefined.
    pub fn change_text(&self) -> String {
        let Some(d) = self.change else { return "-".to_owned() };
        let sign = if d > 0.0 {
            "+"
        } else if d < 0.0 {
            "-"
        } else {
            ""
        };
        let amount = match self.unit {
            Unit::Share => format!("{:.1} pt", d.abs() * 100.0),
            unit => unit.format(Some(d.abs())),
        };
        format!("{sign}{amount}")
    }
}

/// Every figure's change; the SLO figures only with objectives, cost only with a price table.
pub fn changes(a: &Summary, b: &Summary) -> Vec<Change> {
    FIGURES
        .iter()
        .filter(|f| match f.key {
            "slo_attainment" | "goodput_tok_s" => a.slo.is_some() || b.slo.is_some(),
            "cost" => a.cost.is_some() || b.cost.is_some(),
            k if k.starts_with("client_") || k.starts_with("delivery_") || k.starts_with("ttft_gap") => {
                a.delivery.is_some() || b.delivery.is_some()
            }
            _ => true,
        })
        .map(|f| Change::of(f, a, b))
        .collect()
}

/// The findings of A and B matched. A finding of A and one of B are the same when they are of one kind and:
/// - for SLO violations, of the same objective (the detector makes one finding per objective);
/// - else name a request in common (A's request paired with B's, see [`pair_requests`]);
/// - else, when either names no request (a saturation without preemptions, an overload), their time ranges
///   overlap on A's clock (see [`offset_ns`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FindingsDiff {
    /// Indexes into A's findings found in A only: gone in B.
    pub only_a: Vec<usize>,
    /// Indexes into B's findings found in B only: new in B.
    pub only_b: Vec<usize>,
    /// Pairs of indexes (A, B) of the same finding in both.
    pub both: Vec<(usize, usize)>,
}

/// The objective an SLO-violation finding is about, which its sentence names ("missed the TTFT objective"); `None`
/// for other kinds.
fn objective(f: &Finding) -> Option<&'static str> {
    (f.kind == Kind::SloViolations).then(|| {
        ["TTFT", "TPOT"]
            .into_iter()
            .find(|o| f.summary.contains(&format!("{o} objective")))
            .unwrap_or("")
    })
}

/// How a finding found in both traces changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SeverityChange {
    /// Less severe in B (critical in A, a warning in B).
    Eased,
    /// More severe in B.
    Worsened,
    /// As severe.
    Same,
}

impl SeverityChange {
    /// How `b` compares with `a`.
    pub fn of(a: &Finding, b: &Finding) -> Self {
        // `Critical` sorts first: a greater severity in B is a milder one.
        match b.severity.cmp(&a.severity) {
            std::cmp::Ordering::Greater => SeverityChange::Eased,
            std::cmp::Ordering::Less => SeverityChange::Worsened,
            std::cmp::Ordering::Equal => SeverityChange::Same,
        }
    }

    /// The word for it.
    pub fn name(self) -> &'static str {
        match self {
            SeverityChange::Eased => "eased",
            SeverityChange::Worsened => "worse",
            SeverityChange::Same => "both",
        }
    }
}

/// Matches the findings of A and B, each at most once, in A's order. `pairing` translates A's requests to B's;
/// `offset_ns` is B's clock minus A's. Indexes keep it linear in the findings and the requests they name.
pub fn match_findings(fa: &[Finding], fb: &[Finding], pairing: &Pairing, offset_ns: i64) -> FindingsDiff {
    let twin: HashMap<u32, u32> = pairing.pairs.iter().copied().collect();
    let mut by_request: HashMap<(Kind, u32), Vec<usize>> = HashMap::new();
    let mut by_objective: HashMap<(Kind, &str), Vec<usize>> = HashMap::new();
    let mut by_kind: HashMap<Kind, Vec<usize>> = HashMap::new();
    for (j, f) in fb.iter().enumerate() {
        match objective(f) {
            Some(o) => by_objective.entry((f.kind, o)).or_default().push(j),
            None => {
                for &r in &f.requests {
                    by_request.entry((f.kind, r)).or_default().push(j);
                }
            }
        }
        by_kind.entry(f.kind).or_default().push(j);
    }
    let mut taken = vec![false; fb.len()];
    let free = |list: Option<&Vec<usize>>, taken: &[bool]| list.and_then(|l| l.iter().copied().find(|&j| !taken[j]));
    let overlaps = |f: &Finding, g: &Finding| {
        let (from, to) = (g.from_ns.saturating_sub(offset_ns), g.to_ns.saturating_sub(offset_ns));
        f.from_ns < to && from < f.to_ns
    };
    let mut out = FindingsDiff::default();
    for (i, f) in fa.iter().enumerate() {
        let found = match objective(f) {
            Some(o) => free(by_objective.get(&(f.kind, o)), &taken),
            None => f
                .requests
                .iter()
                .filter_map(|r| twin.get(r))
                .find_map(|&rb| free(by_request.get(&(f.kind, rb)), &taken))
                .or_else(|| {
                    by_kind.get(&f.kind).and_then(|list| {
                        list.iter().copied().find(|&j| {
                            !taken[j] && (f.requests.is_empty() || fb[j].requests.is_empty()) && overlaps(f, &fb[j])
                        })
                    })
                }),
        };
        match found {
            Some(j) => {
                taken[j] = true;
                out.both.push((i, j));
            }
            None => out.only_a.push(i),
        }
    }
    out.only_b = (0..fb.len()).filter(|&j| !taken[j]).collect();
    out
}

/// Two requests whose arrivals differ by more than this (from each trace's start) are not the same request when
/// paired by arrival and prompt length. Recording the same prompt set twice at the same seeded rate starts each
/// request within a few ms of its twin; 100 ms leaves room for a client's jitter and stays far below the gaps
/// between requests of different prompt lengths in ordinary traffic.
pub const ARRIVAL_TOLERANCE_NS: i64 = 100_000_000;

/// How requests were paired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PairedBy {
    /// The same `request_id`.
    RequestId,
    /// The same offset from the trace's start (within [`ARRIVAL_TOLERANCE_NS`]) and the same prompt length.
    ArrivalAndPrompt,
    /// The traces share too few requests to pair them.
    Unpaired,
}

impl PairedBy {
    /// Words for the output.
    pub fn describe(self) -> &'static str {
        match self {
            PairedBy::RequestId => "paired by request_id",
            PairedBy::ArrivalAndPrompt => "paired by arrival and prompt length",
            PairedBy::Unpaired => {
                "not paired: fewer than half of the smaller trace's requests match by id or by arrival and prompt"
            }
        }
    }
}

/// The requests of A paired with those of B.
#[derive(Debug, Clone, PartialEq)]
pub struct Pairing {
    /// How.
    pub by: PairedBy,
    /// (row in A, row in B), in A's arrival order.
    pub pairs: Vec<(u32, u32)>,
    /// Requests of A with no twin in B.
    pub only_a: usize,
    /// Requests of B with no twin in A.
    pub only_b: usize,
}

fn rows(trace: &Trace) -> impl Iterator<Item = u32> {
    0..u32::try_from(trace.request_count()).unwrap_or(u32::MAX)
}

fn by_id(a: &Trace, b: &Trace) -> Vec<(u32, u32)> {
    rows(a)
        .filter_map(|ra| b.request_row(a.request_id(ra)).map(|rb| (ra, rb)))
        .collect()
}

/// True when most id-pairs whose prompt lengths are both known agree on them: benchmarks that number their requests
/// 0..N share every id across unrelated runs.
fn same_prompts(a: &Trace, b: &Trace, pairs: &[(u32, u32)]) -> bool {
    let (mut known, mut equal) = (0usize, 0usize);
    for &(ra, rb) in pairs {
        if let (Some(x), Some(y)) = (
            a.requests.input_tokens[ra as usize],
            b.requests.input_tokens[rb as usize],
        ) {
            known += 1;
            equal += usize::from(x == y);
        }
    }
    equal * 2 >= known
}

/// The first arrival: the origin of arrival offsets (steps logged before it, a warm-up, do not shift them).
fn first_arrival(trace: &Trace) -> i64 {
    trace.requests.arrival_ns.first().copied().unwrap_or(0)
}

fn by_arrival(a: &Trace, b: &Trace) -> Vec<(u32, u32)> {
    let (oa, ob) = (first_arrival(a), first_arrival(b));
    // B's requests with a known prompt length, by length, ordered by arrival offset; a twin taken leaves its set, so
    // a burst of equal prompts costs a logarithm per request, not a walk over those already taken.
    let mut twins: HashMap<u32, std::collections::BTreeSet<(i64, u32)>> = HashMap::new();
    for rb in rows(b) {
        let i = rb as usize;
        if let Some(len) = b.requests.input_tokens[i] {
            twins
                .entry(len)
                .or_default()
                .insert((b.requests.arrival_ns[i].saturating_sub(ob), rb));
        }
    }
    let mut pairs = Vec::new();
    for ra in rows(a) {
        let i = ra as usize;
        let Some(set) = a.requests.input_tokens[i].and_then(|len| twins.get_mut(&len)) else {
            continue;
        };
        let at = a.requests.arrival_ns[i].saturating_sub(oa);
        let after = set.range((at, 0)..).next().copied();
        let before = set.range(..(at, 0)).next_back().copied();
        let nearest = [before, after]
            .into_iter()
            .flatten()
            .filter(|&(t, _)| t.abs_diff(at) <= ARRIVAL_TOLERANCE_NS.unsigned_abs())
            .min_by_key(|&(t, _)| t.abs_diff(at));
        if let Some(entry) = nearest {
            set.remove(&entry);
            pairs.push((ra, entry.1));
        }
    }
    pairs
}

/// Pairs the requests of A and B: by id when at least half of the smaller trace's ids are in both and those pairs
/// mostly agree on their prompt lengths, else by arrival and prompt length when that pairs at least half; else not
/// at all.
pub fn pair_requests(a: &Trace, b: &Trace) -> Pairing {
    let smaller = a.request_count().min(b.request_count());
    let enough = |pairs: &[(u32, u32)]| smaller > 0 && pairs.len() * 2 >= smaller;
    let (by, pairs) = {
        let ids = by_id(a, b);
        if enough(&ids) && same_prompts(a, b, &ids) {
            (PairedBy::RequestId, ids)
        } else {
            let arrivals = by_arrival(a, b);
            if enough(&arrivals) {
                (PairedBy::ArrivalAndPrompt, arrivals)
            } else {
                (PairedBy::Unpaired, Vec::new())
            }
        }
    };
    Pairing {
        by,
        only_a: a.request_count() - pairs.len(),
        only_b: b.request_count() - pairs.len(),
        pairs,
    }
}

/// B's clock minus A's: the median of the paired requests' arrival differences (a replay keeps its original's
/// clock, a re-run of a benchmark starts later, a replay of a window starts where the window does); without pairs,
/// the difference of the first arrivals.
pub fn offset_ns(a: &Trace, b: &Trace, pairing: &Pairing) -> i64 {
    let mut gaps: Vec<i64> = pairing
        .pairs
        .iter()
        .map(|&(ra, rb)| b.requests.arrival_ns[rb as usize].saturating_sub(a.requests.arrival_ns[ra as usize]))
        .collect();
    super::metrics::median(&mut gaps).unwrap_or_else(|| first_arrival(b).saturating_sub(first_arrival(a)))
}

/// One paired request's figures in A and B, ms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairDelta {
    /// Row in A.
    pub a: u32,
    /// Row in B.
    pub b: u32,
    /// TTFT in A and B.
    pub ttft_ms: (Option<f64>, Option<f64>),
    /// TPOT in A and B.
    pub tpot_ms: (Option<f64>, Option<f64>),
    /// E2E in A and B.
    pub e2e_ms: (Option<f64>, Option<f64>),
}

impl PairDelta {
    fn of(a: &Trace, ra: u32, b: &Trace, rb: u32) -> Self {
        let (ma, mb) = (request_metrics(a, ra), request_metrics(b, rb));
        let ttft = |m: &RequestMetrics| m.ttft_ns.map(ms);
        let tpot = |m: &RequestMetrics| m.tpot_ns.map(|t| t / 1e6);
        let e2e = |m: &RequestMetrics| m.e2e_ns.map(ms);
        PairDelta {
            a: ra,
            b: rb,
            ttft_ms: (ttft(&ma), ttft(&mb)),
            tpot_ms: (tpot(&ma), tpot(&mb)),
            e2e_ms: (e2e(&ma), e2e(&mb)),
        }
    }

    /// B − A of a metric, when both are defined.
    pub fn change(self, metric: Metric) -> Option<f64> {
        let (x, y) = self.get(metric);
        x.zip(y).map(|(x, y)| y - x)
    }

    /// A's and B's figure of a metric.
    pub fn get(self, metric: Metric) -> (Option<f64>, Option<f64>) {
        match metric {
            Metric::Ttft => self.ttft_ms,
            Metric::Tpot => self.tpot_ms,
            Metric::E2e => self.e2e_ms,
        }
    }
}

/// A per-request latency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    /// Time to first token.
    Ttft,
    /// Time per output token.
    Tpot,
    /// End to end.
    E2e,
}

impl Metric {
    /// Every metric.
    pub const ALL: [Metric; 3] = [Metric::Ttft, Metric::Tpot, Metric::E2e];

    /// The upper-case name.
    pub fn name(self) -> &'static str {
        match self {
            Metric::Ttft => "TTFT",
            Metric::Tpot => "TPOT",
            Metric::E2e => "E2E",
        }
    }
}

/// How the paired requests' figure moved.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Shift {
    /// Pairs with the figure defined in both.
    pub pairs: u64,
    /// Faster in B by more than [`SAME_WITHIN`] of A's figure.
    pub faster: u64,
    /// Slower in B by more than [`SAME_WITHIN`].
    pub slower: u64,
    /// Median of B − A, ms.
    pub median_change_ms: Option<f64>,
    /// Largest slowdown (B − A), ms.
    pub worst_change_ms: Option<f64>,
    /// Largest speed-up (most negative B − A), ms.
    pub best_change_ms: Option<f64>,
}

impl Shift {
    fn of(deltas: &[PairDelta], metric: Metric) -> Self {
        let mut changes = Vec::new();
        let (mut faster, mut slower) = (0, 0);
        for d in deltas {
            let (Some(x), Some(y)) = d.get(metric) else { continue };
            let change = y - x;
            if change.abs() > SAME_WITHIN * x.abs() {
                if change < 0.0 {
                    faster += 1;
                } else {
                    slower += 1;
                }
            }
            changes.push(change);
        }
        changes.sort_by(f64::total_cmp);
        Shift {
            pairs: changes.len() as u64,
            faster,
            slower,
            median_change_ms: super::metrics::nearest_rank(&changes, 50),
            worst_change_ms: changes.last().copied(),
            best_change_ms: changes.first().copied(),
        }
    }
}

/// The paired requests whose `metric` changed most (either way), largest |B − A| first, at most `n`.
pub fn most_changed(deltas: &[PairDelta], metric: Metric, n: usize) -> Vec<PairDelta> {
    let mut v: Vec<(f64, PairDelta)> = deltas
        .iter()
        .filter_map(|d| d.change(metric).map(|c| (c.abs(), *d)))
        .filter(|(c, _)| *c > 0.0)
        .collect();
    v.sort_by(|x, y| y.0.total_cmp(&x.0).then(x.1.a.cmp(&y.1.a)));
    v.into_iter().take(n).map(|(_, d)| d).collect()
}

/// One group's figures in A and B (`--by`); a group missing from one trace has `None` there.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupPair {
    /// The label's value.
    pub key: String,
    /// A's figures.
    pub a: Option<Summary>,
    /// B's figures.
    pub b: Option<Summary>,
}

/// The whole comparison.
#[derive(Debug, Clone)]
pub struct Comparison {
    /// A's figures.
    pub a: Summary,
    /// B's figures.
    pub b: Summary,
    /// Each figure's change.
    pub changes: Vec<Change>,
    /// A's findings.
    pub findings_a: Vec<Finding>,
    /// B's findings.
    pub findings_b: Vec<Finding>,
    /// Which are in both.
    pub findings: FindingsDiff,
    /// The requests paired.
    pub pairing: Pairing,
    /// Each pair's figures.
    pub deltas: Vec<PairDelta>,
    /// B's clock minus A's ([`offset_ns`]): a time of A plus this is the same moment of B.
    pub offset_ns: i64,
    /// Per group, with `by`.
    pub groups: Vec<GroupPair>,
}

impl Comparison {
    /// How the pairs' figure moved.
    pub fn shift(&self, metric: Metric) -> Shift {
        Shift::of(&self.deltas, metric)
    }

    /// The change of the figure `key`.
    pub fn change(&self, key: &str) -> Option<&Change> {
        self.changes.iter().find(|c| c.key == key)
    }
}

/// What to compare with.
#[derive(Debug, Clone, Copy, Default)]
pub struct CompareOptions<'a> {
    /// The objectives attainment and goodput are judged by, and the SLO-violation findings.
    pub slo: Slo,
    /// The detectors' thresholds.
    pub thresholds: Option<&'a Thresholds>,
    /// A price table, for cost.
    pub prices: Option<&'a Prices>,
    /// Figures per group too.
    pub by: Option<GroupBy>,
}

/// Compares A and B: both are summarised and searched at once (rayon), then their requests paired and their
/// findings matched.
pub fn compare(a: &Trace, b: &Trace, options: &CompareOptions<'_>) -> Comparison {
    let defaults = Thresholds::default();
    let th = options.thresholds.unwrap_or(&defaults);
    let (slo, prices) = (options.slo, options.prices);
    let ((sa, fa), (sb, fb)) = rayon::join(
        || (summarize_all(a, slo, prices), find(a, &slo, th)),
        || (summarize_all(b, slo, prices), find(b, &slo, th)),
    );
    let pairing = pair_requests(a, b);
    let offset = offset_ns(a, b, &pairing);
    let deltas = pairing
        .pairs
        .iter()
        .map(|&(ra, rb)| PairDelta::of(a, ra, b, rb))
        .collect();
    let groups = options.by.map_or_else(Vec::new, |by| {
        let (ga, gb) = rayon::join(|| summarize_by(a, by, slo, prices), || summarize_by(b, by, slo, prices));
        join_groups(ga, gb)
    });
    Comparison {
        changes: changes(&sa, &sb),
        findings: match_findings(&fa, &fb, &pairing, offset),
        offset_ns: offset,
        a: sa,
        b: sb,
        findings_a: fa,
        findings_b: fb,
        pairing,
        deltas,
        groups,
    }
}

fn join_groups(a: Vec<(String, Summary)>, b: Vec<(String, Summary)>) -> Vec<GroupPair> {
    let mut map: std::collections::BTreeMap<String, GroupPair> = std::collections::BTreeMap::new();
    for (key, s) in a {
        map.insert(
            key.clone(),
            GroupPair {
                key,
                a: Some(s),
                b: None,
            },
        );
    }
    for (key, s) in b {
        map.entry(key.clone()).or_insert(GroupPair { key, a: None, b: None }).b = Some(s);
    }
    map.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::findings::Severity;

    const T0: i64 = 1_764_403_200_000_000_000;

    /// A request record: arrival, first token and finish in ms after T0, prompt and output tokens.
    fn request(id: &str, at: i64, first: i64, done: i64, input: u32, output: u32) -> String {
        format!(
            r#"{{"kind":"request","request_id":"{id}","arrival_ns":{},"first_token_ns":{},"finished_ns":{},"input_tokens":{input},"output_tokens":{output},"finish_reason":"stop"}}"#,
            T0 + at * 1_000_000,
            T0 + first * 1_000_000,
            T0 + done * 1_000_000
        )
    }

    fn trace(lines: &[String]) -> Trace {
        let mut file = match tempfile::Builder::new().suffix(".jsonl").tempfile() {
            Ok(f) => f,
            Err(e) => panic!("{e}"),
        };
        std::io::Write::write_all(&mut file, lines.join("\n").as_bytes()).unwrap();
        crate::load::load(file.path(), &crate::ingest::Progress::default())
            .unwrap()
            .trace
    }

    /// A: r1 TTFT 100 ms, TPOT (1100 − 100) / 10 = 100 ms; r2 TTFT 200, TPOT (650 − 250) / 4 = 100.
    fn before() -> Trace {
        trace(&[
            request("r1", 0, 100, 1100, 500, 11),
            request("r2", 50, 250, 650, 800, 5),
        ])
    }

    /// B: r1 TTFT 300, TPOT (800 − 300) / 10 = 50; r2 TTFT 50, TPOT (250 − 100) / 4 = 37.5; r3 (B only) TTFT 10.
    fn after() -> Trace {
        trace(&[
            request("r1", 0, 300, 800, 500, 11),
            request("r2", 50, 100, 250, 800, 5),
            request("r3", 1000, 1010, 1020, 40, 2),
        ])
    }

    #[test]
    fn figures_change_with_their_verdicts() {
        let slo = Slo {
            ttft_ms: Some(250.0),
            tpot_ms: Some(120.0),
        };
        let c = compare(
            &before(),
            &after(),
            &CompareOptions {
                slo,
                ..CompareOptions::default()
            },
        );
        let get = |key: &str| *c.change(key).unwrap();
        // TTFT p50: A [100, 200] -> rank 1 = 100; B [10, 50, 300] -> rank ceil(1.5) = 2 = 50.
        let p50 = get("ttft_p50_ms");
        assert_eq!((p50.a, p50.b, p50.change), (Some(100.0), Some(50.0), Some(-50.0)));
        assert_eq!(p50.relative, Some(-0.5));
        assert_eq!(p50.verdict, Verdict::Better);
        // TTFT max 200 -> 300: worse by half.
        let max = get("ttft_max_ms");
        assert_eq!(
            (max.change, max.relative, max.verdict),
            (Some(100.0), Some(0.5), Verdict::Worse)
        );
        // Requests 2 -> 3: changed, neither better nor worse.
        assert_eq!(get("requests").verdict, Verdict::Changed);
        // Span 1.1 s -> 1.02 s; throughput 16 / 1.1 -> 18 / 1.02 tok/s.
        let tput = get("throughput_tok_s");
        assert!((tput.a.unwrap() - 16.0 / 1.1).abs() < 1e-9);
        assert!((tput.b.unwrap() - 18.0 / 1.02).abs() < 1e-9);
        assert_eq!(tput.verdict, Verdict::Better);
        // Attainment 2/2 -> 2/3 (r1's TTFT 300 ms misses 250 ms); goodput 16 / 1.1 -> (5 + 2) / 1.02.
        let met = get("slo_attainment");
        assert_eq!(met.a, Some(1.0));
        assert!((met.b.unwrap() - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(met.verdict, Verdict::Worse);
        assert!((get("goodput_tok_s").b.unwrap() - 7.0 / 1.02).abs() < 1e-9);
        // No price table: no cost row.
        assert!(c.change("cost").is_none());
    }

    #[test]
    fn requests_pair_by_id_and_their_changes_rank_by_size() {
        let c = compare(&before(), &after(), &CompareOptions::default());
        assert_eq!(c.pairing.by, PairedBy::RequestId);
        assert_eq!((c.pairing.pairs.len(), c.pairing.only_a, c.pairing.only_b), (2, 0, 1));
        // r1 TTFT +200 ms, r2 TTFT −150 ms: r1 first.
        let top = most_changed(&c.deltas, Metric::Ttft, 5);
        assert_eq!(top.len(), 2);
        assert_eq!(top[0].change(Metric::Ttft), Some(200.0));
        assert_eq!(top[1].change(Metric::Ttft), Some(-150.0));
        let ttft = c.shift(Metric::Ttft);
        assert_eq!((ttft.pairs, ttft.faster, ttft.slower), (2, 1, 1));
        // Sorted changes [−150, 200]: nearest-rank median = the first.
        assert_eq!(ttft.median_change_ms, Some(-150.0));
        assert_eq!((ttft.best_change_ms, ttft.worst_change_ms), (Some(-150.0), Some(200.0)));
        // TPOT −50 and −62.5 ms: both faster.
        let tpot = c.shift(Metric::Tpot);
        assert_eq!((tpot.faster, tpot.slower), (2, 0));
        assert_eq!(
            most_changed(&c.deltas, Metric::Tpot, 1)[0].change(Metric::Tpot),
            Some(-62.5)
        );
    }

    #[test]
    fn requests_without_shared_ids_pair_by_arrival_and_prompt_length() {
        // B's ids differ. x1 arrives 30 ms later than r1 with r1's prompt length: a twin. x2 has r2's length
        // but arrives 200 ms later (beyond 100 ms): no twin. x3 arrives with r3 but with another length: no twin.
        let a = trace(&[
            request("r1", 0, 100, 200, 500, 2),
            request("r2", 50, 150, 250, 800, 2),
            request("r3", 400, 450, 500, 100, 2),
        ]);
        let b = trace(&[
            request("x0", 0, 10, 20, 7, 2),
            request("x1", 30, 130, 230, 500, 2),
            request("x2", 250, 350, 450, 800, 2),
            request("x3", 400, 450, 500, 101, 2),
        ]);
        // One pair of three: less than half of the smaller trace, so not reported.
        let p = pair_requests(&a, &b);
        assert_eq!(p.by, PairedBy::Unpaired);
        assert!(p.pairs.is_empty());
        assert_eq!((p.only_a, p.only_b), (3, 4));
        // With r3's length matched, two of three pair.
        let b = trace(&[
            request("x0", 0, 10, 20, 7, 2),
            request("x1", 30, 130, 230, 500, 2),
            request("x2", 250, 350, 450, 800, 2),
            request("x3", 400, 450, 500, 100, 2),
        ]);
        let p = pair_requests(&a, &b);
        assert_eq!(p.by, PairedBy::ArrivalAndPrompt);
        let named: Vec<(&str, &str)> = p
            .pairs
            .iter()
            .map(|&(x, y)| (a.request_id(x), b.request_id(y)))
            .collect();
        assert_eq!(named, [("r1", "x1"), ("r3", "x3")]);
        assert_eq!((p.only_a, p.only_b), (1, 2));
    }

    fn finding(kind: Kind, from_ms: i64, to_ms: i64, requests: Vec<u32>) -> Finding {
        Finding {
            kind,
            severity: Severity::Warning,
            summary: String::new(),
            from_ns: T0 + from_ms * 1_000_000,
            to_ns: T0 + to_ms * 1_000_000,
            requests,
            steps: Vec::new(),
            tokens: Vec::new(),
        }
    }

    #[test]
    fn findings_match_by_kind_and_paired_request_by_objective_or_by_time() {
        let (a, b) = (before(), after());
        let pairing = pair_requests(&a, &b);
        let (r1a, r2a) = (a.request_row("r1").unwrap(), a.request_row("r2").unwrap());
        let (r1b, r3b) = (b.request_row("r1").unwrap(), b.request_row("r3").unwrap());
        let slo = |objective: &str, requests| {
            let mut f = finding(Kind::SloViolations, 0, 100, requests);
            f.summary = format!("1 of 3 requests (33.3 %) missed the {objective} objective of 50 ms; worst r1");
            f
        };
        let fa = vec![
            slo("TPOT", vec![r2a, r1a]),
            finding(Kind::KvSaturation, 100, 300, vec![]),
            finding(Kind::Truncation, 0, 10, vec![r1a]),
            finding(Kind::PreemptionBurst, 1_000, 2_000, vec![r2a]),
            finding(Kind::RepetitionLoop, 0, 10, vec![r2a]),
        ];
        let fb = vec![
            // r1 in both, but about TTFT: another finding than A's TPOT one.
            slo("TTFT", vec![r1b]),
            // Overlaps 100..300 ms: the same saturation.
            finding(Kind::KvSaturation, 250, 400, vec![]),
            // r1 again, but another kind: new in B.
            finding(Kind::RepetitionLoop, 0, 10, vec![r1b]),
            // The TPOT finding, naming other requests: the same objective, so the same finding.
            slo("TPOT", vec![r3b]),
            // A burst at the same time without a request named: the same burst as A's.
            finding(Kind::PreemptionBurst, 1_500, 1_600, vec![]),
        ];
        let d = match_findings(&fa, &fb, &pairing, 0);
        assert_eq!(d.both, [(0, 3), (1, 1), (3, 4)]);
        assert_eq!(d.only_a, [2, 4], "truncation and r2's loop are gone");
        assert_eq!(d.only_b, [0, 2]);
        // B's clock 10 s later (a replay of a later window): its saturation at 10.25 s is A's at 0.25 s.
        let late = vec![finding(Kind::KvSaturation, 10_250, 10_400, vec![])];
        assert_eq!(
            match_findings(&fa[1..2], &late, &pairing, 10_000_000_000).both,
            [(0, 0)]
        );
        assert_eq!(match_findings(&fa[1..2], &late, &pairing, 0).both, []);
        // The same finding, critical in A and a warning in B, eased; the other way, worse.
        let mut critical = fa[2].clone();
        critical.severity = Severity::Critical;
        assert_eq!(SeverityChange::of(&critical, &fa[2]), SeverityChange::Eased);
        assert_eq!(SeverityChange::of(&fa[2], &critical), SeverityChange::Worsened);
        assert_eq!(SeverityChange::of(&fa[2], &fa[2]), SeverityChange::Same);
    }

    #[test]
    fn shared_ids_with_other_prompts_are_other_requests() {
        // A benchmark numbering its requests 0..N: run 2 shares the ids but not the prompts; its requests arrive with
        // run 1's lengths 20 ms later, in another order of ids.
        let a = trace(&[
            request("0", 0, 10, 20, 100, 2),
            request("1", 500, 510, 520, 200, 2),
            request("2", 900, 910, 920, 300, 2),
        ]);
        let b = trace(&[
            request("2", 20, 30, 40, 100, 2),
            request("0", 520, 530, 540, 200, 2),
            request("1", 920, 930, 940, 300, 2),
        ]);
        let p = pair_requests(&a, &b);
        assert_eq!(p.by, PairedBy::ArrivalAndPrompt);
        let named: Vec<(&str, &str)> = p
            .pairs
            .iter()
            .map(|&(x, y)| (a.request_id(x), b.request_id(y)))
            .collect();
        assert_eq!(named, [("0", "2"), ("1", "0"), ("2", "1")]);
        // B's clock: 20 ms later (the median of the pairs' gaps).
        assert_eq!(offset_ns(&a, &b, &p), 20_000_000);
    }

    #[test]
    fn a_burst_of_equal_prompts_pairs_nearest_first_and_unknown_lengths_never() {
        // 2,000 requests of one length in one millisecond in both: each finds its twin in order, in n log n.
        let lines = |shift: i64| -> Vec<String> {
            (0..2_000)
                .map(|k| request(&format!("q{k}-{shift}"), shift, shift + 5, shift + 9, 64, 2))
                .collect()
        };
        let (a, b) = (trace(&lines(0)), trace(&lines(1)));
        let p = pair_requests(&a, &b);
        assert_eq!((p.by, p.pairs.len()), (PairedBy::ArrivalAndPrompt, 2_000));
        // Without input_tokens, nothing pairs by arrival.
        let bare = |id: &str| {
            format!(
                r#"{{"kind":"request","request_id":"{id}","arrival_ns":{T0},"first_token_ns":{},"finished_ns":{}}}"#,
                T0 + 1,
                T0 + 2
            )
        };
        let (a, b) = (trace(&[bare("x")]), trace(&[bare("y")]));
        assert_eq!(pair_requests(&a, &b).by, PairedBy::Unpaired);
    }

    #[test]
    fn a_change_within_one_percent_is_the_same() {
        let mut a = summarize_all(&before(), Slo::default(), None);
        let mut b = a.clone();
        a.ttft_ms.p99 = Some(1000.0);
        b.ttft_ms.p99 = Some(1009.0);
        let f = FIGURES.iter().find(|f| f.key == "ttft_p99_ms").unwrap();
        assert_eq!(Change::of(f, &a, &b).verdict, Verdict::Same);
        b.ttft_ms.p99 = Some(1011.0);
        assert_eq!(Change::of(f, &a, &b).verdict, Verdict::Worse);
        b.ttft_ms.p99 = None;
        assert_eq!(Change::of(f, &a, &b).verdict, Verdict::Undefined);
    }
}
