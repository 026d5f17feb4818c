//! Findings: automatic diagnosis of the known incident patterns. Each detector is a pure function of the trace and
//! its [`Thresholds`], linear (or n log n) in tokens and steps, and returns [`Finding`]s that say what happened in
//! one sentence with figures, where (a time range), and who (requests, steps and tokens) — for the findings panel,
//! `tokenscope findings`, and tests. Noisy kinds are grouped: one finding per prefill episode, per KV-saturation
//! run, per SLO objective, one for all truncations and one for all token-count mismatches.

use std::fmt::Write as _;

use rustc_hash::FxHashMap as HashMap;

use super::metrics::{ms, request_metrics};
use super::stats::thousands;
use super::summary::Slo;
use super::tokens::{Rank, display_text};
use crate::trace::{NO_STR, NULL_U32, StageKind, Trace, opt_f64, opt_u32};

/// A decode token stalls when its inter-token latency exceeds this many times the request's own median ITL: the
/// interference panel's stall factor. Alone it is not enough (an unchunked engine stalls its decodes 3-5× for
/// every ordinary prompt it prefills: ~90 such stalls in 600 requests of `steady`); with
/// [`DEFAULT_LARGE_PREFILL_TOKENS`] it singles out the incidents, whose stalls are 100-350× the median.
pub const DEFAULT_ITL_FACTOR: f64 = super::interference::STALL_FACTOR;

/// Prompt tokens of other requests, computed in the stalled token's step and in the steps it waited through, that
/// make a stall "decode interrupted by prefill". Twice vLLM's default `max_num_batched_tokens` (8,192): with
/// chunked prefill at the default budget a decode shares a step with at most 8,192 prompt tokens (on the `large`
/// benchmark trace, 1,091 stalls over 3× carried 4,096-8,191 of them, none more), and without it ordinary chat
/// prompts prefill a few at a time (in `steady`, no stall over 3× waited behind even 4,096). The planted stalls
/// waited behind 48,000 (24,000 + 4 × 6,000) and 20,479 per chunk of the 96k prompt.
pub const DEFAULT_LARGE_PREFILL_TOKENS: u32 = 16_384;

/// A stop token chosen with a probability below this is a suspect end. A natural stop is the model's clear first
/// choice (p > 0.9 in the simulator, usually above 0.5 in real traces); below one half another continuation was
/// at least as likely.
pub const DEFAULT_EOS_MAX_PROBABILITY: f64 = 0.5;

/// A stop token chosen at this rank or worse (1 = the most probable) is a suspect end, whatever its probability:
/// sampling picked it over a more likely continuation.
pub const DEFAULT_EOS_MIN_RANK: u32 = 2;

/// When the trace records neither the stop token's probability nor its rank, an answer shorter than this fraction
/// of the median output length of its app and model is a suspect end (a quarter: log-normal answer lengths with
/// the spread of chat traffic fall that short about once in 300). With the probability recorded, a confident stop
/// is the model's intent however short the answer, so length alone does not make a finding.
pub const DEFAULT_EARLY_EOS_FACTOR: f64 = 0.25;

/// The early-end test needs at least this many requests of the same app and model for their median to mean
/// "usually".
pub const DEFAULT_EARLY_EOS_MIN_PEERS: u32 = 20;

/// A request's prefill that takes this many consecutive steps or more holds the prefill budget while others wait.
/// Ordinary prompts fit one step, or two when they are admitted with little budget left (266 two-step prefills on
/// the `large` trace, none in `steady`); three consecutive chunks means a prompt well over a budget long (5 on
/// `large`: 12-15k-token prompts under an 8,192 budget; the incident's 96k prompt took 5 steps of 20,480).
pub const DEFAULT_MONOPOLY_STEPS: u32 = 3;

/// KV-cache use (0..1) at which the cache is saturated: new requests cannot be admitted and running ones get
/// preempted. vLLM preempts when it cannot allocate a block, which happens within the last few percent.
pub const DEFAULT_KV_SATURATION: f64 = 0.95;

/// Preemptions on one instance within [`DEFAULT_PREEMPTION_BURST_WINDOW_MS`] of each other that make a burst. One
/// preemption now and then is the scheduler doing its job; several close together recompute prompts in a loop.
pub const DEFAULT_PREEMPTION_BURST_COUNT: u32 = 3;

/// Steps with preemptions closer than this (ms, start to start) belong to the same burst.
pub const DEFAULT_PREEMPTION_BURST_WINDOW_MS: f64 = 1_000.0;

/// The longest n-gram (in tokens) checked for repetition loops: a loop is the same n-gram, n = 1 to this, repeated
/// back to back. Eight covers the phrases and list items models loop on.
pub const DEFAULT_REPETITION_NGRAM: u32 = 8;

/// Back-to-back repeats of an n-gram that make a loop.
pub const DEFAULT_REPETITION_REPEATS: u32 = 4;

/// The shortest loop, in tokens: four repeats of a 1- or 2-gram ("----", "\n\n\n\n") are formatting, not a loop.
/// Sixteen tokens of period 8 or less by chance take 8 coincidences in a row ((1/40)^8 ≈ 10^-13 per position in
/// the simulator's 40-word vocabulary; rarer still in a real one).
pub const DEFAULT_REPETITION_MIN_TOKENS: u32 = 16;

/// Prefilling requests named in a decode-interrupted sentence; the others are counted.
const MAX_NAMED_CULPRITS: usize = 5;

/// Requests listed in a grouped finding; its sentence gives the total.
pub const MAX_LISTED_REQUESTS: usize = 50;

/// A stall, or a wait behind a monopolising prefill, at least this long (ms) is critical: the user sees the
/// answer freeze.
pub const CRITICAL_DELAY_MS: f64 = 1_000.0;

/// Known stop-token texts, for traces that neither flag special tokens nor give `meta.eos_token_ids`.
const STOP_TEXTS: [&str; 8] = [
    "<|im_end|>",
    "</s>",
    "<|endoftext|>",
    "<|eot_id|>",
    "<|end_of_text|>",
    "<|end|>",
    "<eos>",
    "<end_of_turn>",
];

/// The thresholds of every detector; defaults are the `DEFAULT_*` constants (see them for the reasons).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct Thresholds {
    /// Decode interrupted: ITL > this × the request's median ITL.
    pub itl_factor: f64,
    /// Decode interrupted: other requests' prompt tokens in the stall's steps, at least.
    pub large_prefill_tokens: u32,
    /// EOS mis-trigger: stop-token probability below this.
    pub eos_max_probability: f64,
    /// EOS mis-trigger: stop-token rank at least this (1 = most probable).
    pub eos_min_rank: u32,
    /// EOS mis-trigger without logprobs: output shorter than this × its app and model's median.
    pub early_eos_factor: f64,
    /// EOS mis-trigger without logprobs: requests of the app and model needed for a median.
    pub early_eos_min_peers: u32,
    /// Prefill monopoly: consecutive prefill steps of one request, at least.
    pub monopoly_steps: u32,
    /// KV saturation: KV-cache use (0..1) at least.
    pub kv_saturation: f64,
    /// Preemption burst: preemptions, at least.
    pub preemption_burst_count: u32,
    /// Preemption burst: the largest gap between preempting steps, ms.
    pub preemption_burst_window_ms: f64,
    /// Repetition loop: longest n-gram checked.
    pub repetition_ngram: u32,
    /// Repetition loop: back-to-back repeats, at least.
    pub repetition_repeats: u32,
    /// Repetition loop: tokens in the loop, at least.
    pub repetition_min_tokens: u32,
}

impl Thresholds {
    /// Checks that every threshold means something: factors and shares in range, counts large enough to make a
    /// pattern. The message names the field, its command-line flag, the value and what it should be.
    ///
    /// # Errors
    /// The first threshold out of range.
    pub fn check(&self) -> Result<(), String> {
        let bad = |field: &str, value: String, want: &str| {
            Err(format!("{field} (--{}) = {value}: {want}", field.replace('_', "-")))
        };
        let t = self;
        if !(t.itl_factor.is_finite() && t.itl_factor > 1.0) {
            return bad(
                "itl_factor",
                t.itl_factor.to_string(),
                "give a factor above 1 (the default is 3)",
            );
        }
        if !(0.0..=1.0).contains(&t.eos_max_probability) {
            return bad(
                "eos_max_probability",
                t.eos_max_probability.to_string(),
                "give a probability from 0 to 1",
            );
        }
        if t.eos_min_rank < 1 {
            return bad(
                "eos_min_rank",
                t.eos_min_rank.to_string(),
                "ranks start at 1 (the most likely token)",
            );
        }
        if !(t.early_eos_factor.is_finite() && (0.0..1.0).contains(&t.early_eos_factor)) {
            return bad(
                "early_eos_factor",
                t.early_eos_factor.to_string(),
                "give a share of the median from 0 to below 1",
            );
        }
        if t.early_eos_min_peers < 1 {
            return bad(
                "early_eos_min_peers",
                t.early_eos_min_peers.to_string(),
                "give at least 1",
            );
        }
        if t.monopoly_steps < 2 {
            return bad(
                "monopoly_steps",
                t.monopoly_steps.to_string(),
                "give at least 2 (1 would flag every prefill)",
            );
        }
        if !(t.kv_saturation > 0.0 && t.kv_saturation <= 1.0) {
            return bad(
                "kv_saturation",
                t.kv_saturation.to_string(),
                "give a share of the cache above 0, at most 1",
            );
        }
        if t.preemption_burst_count < 2 {
            return bad(
                "preemption_burst_count",
                t.preemption_burst_count.to_string(),
                "a burst is at least 2",
            );
        }
        if !(t.preemption_burst_window_ms.is_finite() && t.preemption_burst_window_ms > 0.0) {
            return bad(
                "preemption_burst_window_ms",
                t.preemption_burst_window_ms.to_string(),
                "give a window above 0 ms",
            );
        }
        if t.repetition_ngram < 1 {
            return bad(
                "repetition_ngram",
                t.repetition_ngram.to_string(),
                "give an n-gram of at least 1 token",
            );
        }
        if t.repetition_repeats < 2 {
            return bad(
                "repetition_repeats",
                t.repetition_repeats.to_string(),
                "a loop repeats at least 2 times",
            );
        }
        Ok(())
    }
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            itl_factor: DEFAULT_ITL_FACTOR,
            large_prefill_tokens: DEFAULT_LARGE_PREFILL_TOKENS,
            eos_max_probability: DEFAULT_EOS_MAX_PROBABILITY,
            eos_min_rank: DEFAULT_EOS_MIN_RANK,
            early_eos_factor: DEFAULT_EARLY_EOS_FACTOR,
            early_eos_min_peers: DEFAULT_EARLY_EOS_MIN_PEERS,
            monopoly_steps: DEFAULT_MONOPOLY_STEPS,
            kv_saturation: DEFAULT_KV_SATURATION,
            preemption_burst_count: DEFAULT_PREEMPTION_BURST_COUNT,
            preemption_burst_window_ms: DEFAULT_PREEMPTION_BURST_WINDOW_MS,
            repetition_ngram: DEFAULT_REPETITION_NGRAM,
            repetition_repeats: DEFAULT_REPETITION_REPEATS,
            repetition_min_tokens: DEFAULT_REPETITION_MIN_TOKENS,
        }
    }
}

/// What a finding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    /// A decode token stalled behind other requests' large prefills.
    DecodeInterrupted,
    /// Generation ended on an unlikely stop token, or far earlier than usual.
    EosMistrigger,
    /// One request's prefill held the engine for several consecutive steps while others waited.
    PrefillMonopoly,
    /// Several preemptions close together on one instance.
    PreemptionBurst,
    /// The KV cache stayed (nearly) full.
    KvSaturation,
    /// Requests missed a service-level objective.
    SloViolations,
    /// An answer repeated the same n-gram back to back.
    RepetitionLoop,
    /// Answers cut at their token limit (`finish_reason = length`).
    Truncation,
    /// `output_tokens` disagrees with the token records.
    TokenMismatch,
}

impl Kind {
    /// Every kind, in display order.
    pub const ALL: [Kind; 9] = [
        Kind::DecodeInterrupted,
        Kind::EosMistrigger,
        Kind::PrefillMonopoly,
        Kind::PreemptionBurst,
        Kind::KvSaturation,
        Kind::SloViolations,
        Kind::RepetitionLoop,
        Kind::Truncation,
        Kind::TokenMismatch,
    ];

    /// The kebab-case name (command line, JSON).
    pub fn name(self) -> &'static str {
        match self {
            Kind::DecodeInterrupted => "decode-interrupted",
            Kind::EosMistrigger => "eos-mistrigger",
            Kind::PrefillMonopoly => "prefill-monopoly",
            Kind::PreemptionBurst => "preemption-burst",
            Kind::KvSaturation => "kv-saturation",
            Kind::SloViolations => "slo-violations",
            Kind::RepetitionLoop => "repetition-loop",
            Kind::Truncation => "truncation",
            Kind::TokenMismatch => "token-mismatch",
        }
    }

    /// The kind with this name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }

    /// A title for people.
    pub fn title(self) -> &'static str {
        match self {
            Kind::DecodeInterrupted => "Decode interrupted by prefill",
            Kind::EosMistrigger => "EOS mis-trigger",
            Kind::PrefillMonopoly => "Prefill monopoly (head-of-line blocking)",
            Kind::PreemptionBurst => "Preemption burst",
            Kind::KvSaturation => "KV cache saturation",
            Kind::SloViolations => "SLO violations",
            Kind::RepetitionLoop => "Repetition loop",
            Kind::Truncation => "Truncated at the token limit",
            Kind::TokenMismatch => "Token count mismatch",
        }
    }
}

/// How bad a finding is. `Critical` sorts first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// A user saw a frozen or wrong answer.
    Critical,
    /// Degraded service worth a look.
    Warning,
    /// Worth knowing.
    Info,
}

impl Severity {
    /// The lowercase name.
    pub fn name(self) -> &'static str {
        match self {
            Severity::Critical => "critical",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
}

/// One diagnosis.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Finding {
    /// What it is.
    pub kind: Kind,
    /// How bad.
    pub severity: Severity,
    /// One sentence with figures and request ids by name.
    pub summary: String,
    /// Start of the time range to zoom to (ns since the Unix epoch).
    pub from_ns: i64,
    /// End of that range; `from_ns < to_ns`.
    pub to_ns: i64,
    /// Request rows; the first is the subject (the victim, the truncated answer, the monopolising request).
    pub requests: Vec<u32>,
    /// Iteration rows (steps) involved, ascending.
    pub steps: Vec<u32>,
    /// Token rows involved; the first is the one to select (the subject's), the rest ascending.
    pub tokens: Vec<usize>,
}

/// Every finding, sorted by severity, then `from_ns`, then kind.
pub fn find(trace: &Trace, slo: &Slo, th: &Thresholds) -> Vec<Finding> {
    let mut out = decode_interrupted(trace, th);
    out.extend(eos_mistrigger(trace, th));
    out.extend(prefill_monopoly(trace, th));
    out.extend(preemption_bursts(trace, th));
    out.extend(kv_saturation(trace, th));
    out.extend(slo_violations(trace, slo));
    out.extend(repetition_loops(trace, th));
    out.extend(truncation(trace));
    out.extend(token_mismatches(trace));
    out.sort_by_key(|f| (f.severity, f.from_ns, f.kind));
    out
}

// ---------------------------------------------------------------------------------------------------------------
// Shared helpers.

fn row_u32(i: usize) -> u32 {
    u32::try_from(i).unwrap_or(u32::MAX)
}

/// A duration for a sentence: "3.71 s" from one second, else "12.6 ms".
fn duration(ns: i64) -> String {
    let m = ms(ns);
    if m.abs() >= 1_000.0 {
        format!("{:.2} s", m / 1_000.0)
    } else if m.abs() >= 10.0 {
        format!("{m:.1} ms")
    } else {
        format!("{m:.2} ms")
    }
}

/// A multiple for a sentence: "3.4" under ten, else "350".
fn multiple(x: f64) -> String {
    if x < 10.0 { format!("{x:.1}") } else { format!("{x:.0}") }
}

/// "a", "a and b", "a, b and c", "a, b and 5 others": at most three names.
fn names(trace: &Trace, rows: &[u32]) -> String {
    let name = |r: u32| trace.request_id(r).to_owned();
    match rows {
        [] => String::new(),
        [a] => name(*a),
        [a, b] => format!("{} and {}", name(*a), name(*b)),
        [a, b, c] => format!("{}, {} and {}", name(*a), name(*b), name(*c)),
        [a, b, rest @ ..] => format!("{}, {} and {} others", name(*a), name(*b), rest.len()),
    }
}

/// `part / whole` as a percentage with one decimal.
#[allow(clippy::cast_precision_loss)] // request counts far below 2^53
fn percent(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// The range between two times, at least 1 ns long (`from < to`).
fn range(a_ns: i64, b_ns: i64) -> (i64, i64) {
    let (from, to) = (a_ns.min(b_ns), a_ns.max(b_ns));
    (from, to.max(from + 1))
}

/// The iteration rows of each source (label id), sorted by start.
fn source_rows(trace: &Trace) -> HashMap<u32, std::ops::Range<usize>> {
    trace
        .sources_with_iterations()
        .iter()
        .map(|(s, r)| (*s, r.start as usize..r.end as usize))
        .collect()
}

/// The prefill chunks of every step, as (request, tokens), from the prefill stages that name their step. Steps
/// without such stages fall back to their `num_prefill_tokens`, unattributed (request [`NULL_U32`]), when the
/// trace has no attributed prefill stage at all.
struct PrefillIndex {
    start: Vec<u32>,
    chunks: Vec<(u32, u32)>,
    attributed: bool,
}

impl PrefillIndex {
    fn new(trace: &Trace) -> Self {
        let steps = trace.iterations.len();
        let mut start = vec![0u32; steps + 1];
        let is_chunk = |s: usize| trace.stages.kind[s] == StageKind::Prefill && trace.stages.iter_row[s].is_some();
        for s in 0..trace.stages.len() {
            if is_chunk(s)
                && let Some(row) = trace.stages.iter_row[s].map(|r| r as usize).filter(|&r| r < steps)
            {
                start[row + 1] += 1;
            }
        }
        for i in 0..steps {
            start[i + 1] += start[i];
        }
        let mut fill = start.clone();
        let mut chunks = vec![(0u32, 0u32); start[steps] as usize];
        for s in 0..trace.stages.len() {
            if is_chunk(s)
                && let Some(row) = trace.stages.iter_row[s].map(|r| r as usize).filter(|&r| r < steps)
            {
                chunks[fill[row] as usize] = (trace.stages.request[s], trace.stages.tokens[s].unwrap_or(0));
                fill[row] += 1;
            }
        }
        let attributed = !chunks.is_empty();
        PrefillIndex {
            start,
            chunks,
            attributed,
        }
    }

    /// The prefill chunks of step `row`.
    fn of<'a>(&'a self, trace: &Trace, row: usize) -> impl Iterator<Item = (u32, u32)> + 'a {
        let attributed = match (self.start.get(row), self.start.get(row + 1)) {
            (Some(&a), Some(&b)) => &self.chunks[a as usize..b as usize],
            _ => &[],
        };
        let anonymous = (!self.attributed)
            .then(|| trace.iterations.num_prefill_tokens.get(row).copied().flatten())
            .flatten()
            .filter(|&n| n > 0)
            .map(|n| (NULL_U32, n));
        attributed.iter().copied().chain(anonymous)
    }
}

/// Adds `(request, tokens)` into a list that sums per request.
fn add_to(list: &mut Vec<(u32, u64)>, request: u32, tokens: u64) {
    match list.iter_mut().find(|(r, _)| *r == request) {
        Some(e) => e.1 += tokens,
        None => list.push((request, tokens)),
    }
}

// ---------------------------------------------------------------------------------------------------------------
// Decode interrupted by prefill.

/// One stalled token.
struct Stall {
    victim: u32,
    token: usize,
    itl_ns: i64,
    median_ns: i64,
    source: u32,
    /// Steps in the stall's window that carried other requests' prefill, ascending.
    steps: Vec<u32>,
    from_ns: i64,
    to_ns: i64,
}

/// Decode tokens whose ITL exceeds `itl_factor` × their request's median while other requests prefilled at least
/// `large_prefill_tokens` prompt tokens in the token's step and the steps it waited through (its instance's steps
/// that started after the previous token). Stalls whose prefill steps overlap or follow each other form one finding
/// per episode: the worst-stalled victim (longest ITL, then largest multiple of its median) is the subject, the
/// other victims follow, then the prefilling requests (the culprits), most prompt tokens first.
pub fn decode_interrupted(trace: &Trace, th: &Thresholds) -> Vec<Finding> {
    let rows_of = source_rows(trace);
    if rows_of.is_empty() {
        return Vec::new();
    }
    let prefills = PrefillIndex::new(trace);
    let it = &trace.iterations;
    let tk = &trace.tokens;
    let mut stalls: Vec<Stall> = Vec::new();
    let mut gaps: Vec<i64> = Vec::new();
    for r in 0..row_u32(trace.request_count()) {
        let tokens = trace.tokens_of(r);
        if tokens.len() < 3 {
            continue;
        }
        let source = trace.requests.source[r as usize];
        let Some(rows) = rows_of.get(&source) else { continue };
        gaps.clear();
        gaps.extend(super::metrics::itl_ns(trace, r));
        if gaps.len() < 2 {
            continue;
        }
        let Some(median_ns) = super::metrics::median(&mut gaps) else {
            continue;
        };
        if median_ns <= 0 {
            continue;
        }
        #[allow(clippy::cast_precision_loss)] // ns far below 2^53
        let limit = th.itl_factor * median_ns as f64;
        let starts = &it.start_ns[rows.clone()];
        for t in tokens.start + 1..tokens.end {
            if tk.index[t] != tk.index[t - 1] + 1 {
                continue;
            }
            let (prev, emitted) = (tk.emitted_ns[t - 1], tk.emitted_ns[t]);
            let itl = emitted - prev;
            #[allow(clippy::cast_precision_loss)]
            if (itl as f64) <= limit {
                continue;
            }
            // The steps that started after the previous token, up to the token's own step (or its emission).
            let first = rows.start + starts.partition_point(|&s| s < prev);
            let window = match opt_u32(tk.iter_row[t]).map(|o| o as usize) {
                Some(own) if rows.contains(&own) => first.min(own)..own + 1,
                _ => first..rows.start + starts.partition_point(|&s| s < emitted),
            };
            let mut others = 0u64;
            let mut steps = Vec::new();
            for row in window {
                let mut in_step = 0u64;
                for (q, n) in prefills.of(trace, row) {
                    if q != r {
                        in_step += u64::from(n);
                    }
                }
                if in_step > 0 {
                    others += in_step;
                    steps.push(row_u32(row));
                }
            }
            if others == 0 || others < u64::from(th.large_prefill_tokens) {
                continue;
            }
            stalls.push(Stall {
                victim: r,
                token: t,
                itl_ns: itl,
                median_ns,
                source,
                steps,
                from_ns: prev,
                to_ns: emitted,
            });
        }
    }
    // Episodes: stalls of one instance whose prefill steps overlap or follow each other (a prompt prefilled in
    // consecutive chunks stalls a decode once per chunk).
    stalls.sort_by_key(|s| (s.source, s.steps.first().copied(), s.from_ns));
    let mut out = Vec::new();
    let mut i = 0;
    while i < stalls.len() {
        let mut last_step = stalls[i].steps.last().copied().unwrap_or(0);
        let mut j = i + 1;
        while j < stalls.len()
            && stalls[j].source == stalls[i].source
            && stalls[j].steps.first().is_some_and(|&f| f <= last_step + 1)
        {
            last_step = last_step.max(stalls[j].steps.last().copied().unwrap_or(0));
            j += 1;
        }
        out.push(interrupted_finding(trace, &prefills, &stalls[i..j]));
        i = j;
    }
    out
}

/// Who prefilled: the requests with a tenth of the tokens or more by name (up to [`MAX_NAMED_CULPRITS`]), the
/// rest as a count ("rag-24k, rag-6k-1, rag-6k-2, rag-6k-3 and rag-6k-4 with 5 smaller prompts").
fn culprit_phrase(trace: &Trace, culprits: &[(u32, u64)], total: u64) -> String {
    let major: Vec<u32> = culprits
        .iter()
        .filter(|c| c.0 != NULL_U32 && c.1 * 10 >= total)
        .map(|c| c.0)
        .take(MAX_NAMED_CULPRITS)
        .collect();
    if major.is_empty() {
        return "other requests".to_owned();
    }
    let names: Vec<&str> = major.iter().map(|&r| trace.request_id(r)).collect();
    let mut out = match names.split_last() {
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    };
    let rest = culprits.len() - major.len();
    if rest > 0 {
        let _ = write!(out, " with {rest} smaller prompt{}", if rest == 1 { "" } else { "s" });
    }
    out
}

/// The finding of one episode of stalls.
#[allow(clippy::cast_precision_loss)] // ns far below 2^53
fn interrupted_finding(trace: &Trace, prefills: &PrefillIndex, episode: &[Stall]) -> Finding {
    let mut order: Vec<&Stall> = episode.iter().collect();
    order.sort_by(|a, b| {
        b.itl_ns
            .cmp(&a.itl_ns)
            .then(
                (i128::from(b.itl_ns) * i128::from(a.median_ns)).cmp(&(i128::from(a.itl_ns) * i128::from(b.median_ns))),
            )
            .then(a.token.cmp(&b.token))
    });
    let worst = order[0];
    let mut steps: Vec<u32> = episode.iter().flat_map(|s| s.steps.iter().copied()).collect();
    steps.sort_unstable();
    steps.dedup();
    // Victims, worst first (each once, at its worst stall).
    let mut victims: Vec<u32> = Vec::new();
    for s in &order {
        if !victims.contains(&s.victim) {
            victims.push(s.victim);
        }
    }
    // Culprits: every request prefilling in the episode's steps, other than the subject, most tokens first.
    let mut culprits: Vec<(u32, u64)> = Vec::new();
    for &row in &steps {
        for (q, n) in prefills.of(trace, row as usize) {
            if q != worst.victim {
                add_to(&mut culprits, q, u64::from(n));
            }
        }
    }
    culprits.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let total: u64 = culprits.iter().map(|c| c.1).sum();
    let named: Vec<u32> = culprits.iter().map(|c| c.0).filter(|&q| q != NULL_U32).collect();
    let who = culprit_phrase(trace, &culprits, total);
    let mut summary = format!(
        "{}'s token {} waited {} (ITL {}× its median {}) while {who} prefilled {} prompt tokens in {} step{}",
        trace.request_id(worst.victim),
        trace.tokens.index[worst.token],
        duration(worst.itl_ns),
        multiple(worst.itl_ns as f64 / worst.median_ns as f64),
        duration(worst.median_ns),
        thousands(total),
        steps.len(),
        if steps.len() == 1 { "" } else { "s" },
    );
    if let Some(source) = trace.label(worst.source) {
        let _ = write!(summary, " on {source}");
    }
    if victims.len() > 1 {
        let _ = write!(summary, "; {} stalled too", names(trace, &victims[1..]));
    }
    let mut requests = victims;
    for &q in &named {
        if !requests.contains(&q) {
            requests.push(q);
        }
    }
    requests.truncate(MAX_LISTED_REQUESTS);
    let mut tokens: Vec<usize> = episode.iter().map(|s| s.token).filter(|&t| t != worst.token).collect();
    tokens.sort_unstable();
    tokens.insert(0, worst.token);
    let (from_ns, to_ns) = range(
        episode.iter().map(|s| s.from_ns).min().unwrap_or(worst.from_ns),
        episode.iter().map(|s| s.to_ns).max().unwrap_or(worst.to_ns),
    );
    let max_ms = ms(worst.itl_ns);
    Finding {
        kind: Kind::DecodeInterrupted,
        severity: if max_ms >= CRITICAL_DELAY_MS {
            Severity::Critical
        } else {
            Severity::Warning
        },
        summary,
        from_ns,
        to_ns,
        requests,
        steps,
        tokens,
    }
}

// ---------------------------------------------------------------------------------------------------------------
// EOS mis-trigger.

/// True when token row `t` is a stop or special token: flagged special, one of `meta.eos_token_ids`, or a known
/// stop text.
fn is_stop_token(trace: &Trace, t: usize) -> bool {
    trace.is_special_token(trace.tokens.token_id[t], trace.tokens.special[t])
        || trace
            .texts
            .get(trace.tokens.text[t])
            .is_some_and(|s| STOP_TEXTS.contains(&s))
}

/// The rank of token row `t`: as written, else found among its candidates in memory.
fn rank_of(trace: &Trace, t: usize) -> Rank {
    if let Some(r) = opt_u32(trace.tokens.rank[t]) {
        return Rank::Known(r);
    }
    let cands = trace.candidates_of(t);
    if cands.is_empty() {
        return Rank::Unknown;
    }
    let chosen = trace.tokens.token_id[t];
    match trace.candidates.token_id[cands.clone()]
        .iter()
        .position(|&id| id == chosen && id != NULL_U32)
    {
        Some(k) => Rank::Known(row_u32(k + 1)),
        None => Rank::BeyondTopK(row_u32(cands.len())),
    }
}

/// The most probable candidate of token row `t` other than the chosen token: (text as shown, probability).
fn best_alternative(trace: &Trace, t: usize) -> Option<(String, f64)> {
    let chosen = (trace.tokens.token_id[t], trace.tokens.text[t]);
    let c = &trace.candidates;
    trace
        .candidates_of(t)
        .filter(|&k| {
            if chosen.0 != NULL_U32 && c.token_id[k] != NULL_U32 {
                c.token_id[k] != chosen.0
            } else {
                c.text[k] != chosen.1
            }
        })
        .filter(|&k| !c.logprob[k].is_nan())
        .max_by(|&a, &b| c.logprob[a].total_cmp(&c.logprob[b]))
        .map(|k| {
            let text = display_text(trace, c.token_id[k], trace.texts.get(c.text[k]), c.special[k]);
            (text, c.logprob[k].exp())
        })
}

/// The median output length (nearest rank) and the number of requests of each (app, model), over requests with
/// output.
fn output_medians(trace: &Trace) -> HashMap<(u32, u32), (u32, usize)> {
    let mut groups: HashMap<(u32, u32), Vec<u32>> = HashMap::default();
    for r in 0..row_u32(trace.request_count()) {
        let out = trace.output_tokens(r);
        if out > 0 {
            let ri = r as usize;
            groups
                .entry((trace.requests.app_id[ri], trace.requests.model[ri]))
                .or_default()
                .push(out);
        }
    }
    groups
        .into_iter()
        .map(|(k, mut v)| {
            let m = super::metrics::median(&mut v).unwrap_or(0);
            (k, (m, v.len()))
        })
        .collect()
}

/// Answers that ended on a stop or special token (flagged special, in `meta.eos_token_ids`, or a known stop text)
/// chosen with probability below `eos_max_probability` or at rank `eos_min_rank` or worse; or, when the trace
/// records neither, shorter than `early_eos_factor` × the median output of their app and model (with at least
/// `early_eos_min_peers` requests). One finding per request; the stop token is the one to select.
pub fn eos_mistrigger(trace: &Trace, th: &Thresholds) -> Vec<Finding> {
    let n = trace.request_count();
    let stop = trace.labels.lookup("stop");
    let medians = output_medians(trace);
    let mut out = Vec::new();
    for r in 0..row_u32(n) {
        let ri = r as usize;
        let tokens = trace.tokens_of(r);
        let Some(t) = tokens.clone().last() else { continue };
        let reason = trace.requests.finish_reason[ri];
        if reason != NO_STR && Some(reason) != stop {
            continue;
        }
        let output = trace.output_tokens(r);
        if trace.tokens.index[t] + 1 != output || !is_stop_token(trace, t) {
            continue;
        }
        let p = opt_f64(trace.tokens.logprob[t]).map(f64::exp);
        let rank = rank_of(trace, t);
        let low_rank = match rank {
            Rank::Known(k) => k >= th.eos_min_rank,
            Rank::BeyondTopK(k) => k.saturating_add(1) >= th.eos_min_rank,
            Rank::Unknown => false,
        };
        let low_p = p.is_some_and(|p| p < th.eos_max_probability);
        let shown = display_text(
            trace,
            trace.tokens.token_id[t],
            trace.texts.get(trace.tokens.text[t]),
            trace.tokens.special[t],
        );
        let id = trace.request_id(r);
        let index = trace.tokens.index[t];
        let summary = if low_rank || low_p {
            let mut s = format!("{id} ended at token {index} on {shown} chosen ");
            match (p, rank) {
                (Some(p), Rank::Unknown) => {
                    let _ = write!(s, "with p = {p:.3}");
                }
                (Some(p), rank) => {
                    let _ = write!(s, "with p = {p:.3} (rank {rank})");
                }
                (None, rank) => {
                    let _ = write!(s, "at rank {rank}");
                }
            }
            if let Some((text, q)) = best_alternative(trace, t) {
                let which = if p.is_none_or(|p| q > p) {
                    "the most likely token"
                } else {
                    "the runner-up"
                };
                let _ = write!(s, "; {which} was “{text}” (p = {q:.3})");
            }
            s
        } else if p.is_none() && rank == Rank::Unknown {
            let key = (trace.requests.app_id[ri], trace.requests.model[ri]);
            let Some(&(median, peers)) = medians.get(&key) else {
                continue;
            };
            if peers < th.early_eos_min_peers as usize || f64::from(output) >= th.early_eos_factor * f64::from(median) {
                continue;
            }
            let group = match (trace.label(key.0), trace.label(key.1)) {
                (Some(app), _) => format!("its app {app}"),
                (None, Some(model)) => format!("its model {model}"),
                (None, None) => "the trace".to_owned(),
            };
            format!(
                "{id} ended at token {index} on {shown} after {output} tokens, under {:.0} % of the median {median} \
                 of {group} ({peers} requests)",
                100.0 * th.early_eos_factor
            )
        } else {
            continue;
        };
        let prev = if t > tokens.start {
            trace.tokens.emitted_ns[t - 1]
        } else {
            trace.requests.arrival_ns[ri]
        };
        let (from_ns, to_ns) = range(prev, trace.tokens.emitted_ns[t]);
        out.push(Finding {
            kind: Kind::EosMistrigger,
            severity: if low_rank || low_p {
                Severity::Critical
            } else {
                Severity::Warning
            },
            summary,
            from_ns,
            to_ns,
            requests: vec![r],
            steps: opt_u32(trace.tokens.iter_row[t]).into_iter().collect(),
            tokens: vec![t],
        });
    }
    out
}

// ---------------------------------------------------------------------------------------------------------------
// Prefill monopoly.

/// Spans during which requests waited (queued or preempted), per source: (start, end, request) sorted by start,
/// and the longest span (for a bounded search back from a time).
struct WaitIndex {
    by_source: HashMap<u32, Waits>,
}

/// The wait spans of one source, (start, end, request) sorted by start, and the longest span's length.
#[derive(Default)]
struct Waits {
    spans: Vec<(i64, i64, u32)>,
    longest: i64,
}

impl WaitIndex {
    fn new(trace: &Trace) -> Self {
        let mut by_source: HashMap<u32, Waits> = HashMap::default();
        for r in 0..row_u32(trace.request_count()) {
            let ri = r as usize;
            let source = trace.requests.source[ri];
            let mut push = |a: i64, b: i64| {
                if b > a {
                    let e = by_source.entry(source).or_default();
                    e.spans.push((a, b, r));
                    e.longest = e.longest.max(b - a);
                }
            };
            let explicit = trace.explicit_stages_of(r);
            let mut queue_stage = false;
            for s in explicit {
                match trace.stages.kind[s] {
                    StageKind::Queue => {
                        queue_stage = true;
                        push(trace.stages.start_ns[s], trace.stages.end_ns[s]);
                    }
                    StageKind::Preempted => push(trace.stages.start_ns[s], trace.stages.end_ns[s]),
                    _ => {}
                }
            }
            if !queue_stage && let Some(s) = trace.requests.scheduled_ns[ri] {
                push(trace.requests.arrival_ns[ri], s);
            }
        }
        for w in by_source.values_mut() {
            w.spans.sort_unstable();
        }
        WaitIndex { by_source }
    }

    /// Requests of `source` other than `except` that waited during `[from, to)`, with the overlap (ns), longest
    /// first.
    fn waiting(&self, source: u32, from: i64, to: i64, except: u32) -> Vec<(u32, i64)> {
        let Some(Waits { spans, longest }) = self.by_source.get(&source) else {
            return Vec::new();
        };
        // A span that overlaps `from` started at most `longest` before it.
        let first = spans.partition_point(|s| s.0 < from.saturating_sub(*longest));
        let mut out: Vec<(u32, i64)> = Vec::new();
        for &(a, b, r) in &spans[first..] {
            if a >= to {
                break;
            }
            let overlap = b.min(to) - a.max(from);
            if overlap > 0 && r != except {
                match out.iter_mut().find(|(q, _)| *q == r) {
                    Some(e) => e.1 += overlap,
                    None => out.push((r, overlap)),
                }
            }
        }
        out.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        out
    }
}

/// Requests whose prefill chunks ran in `monopoly_steps` or more consecutive steps of their instance while other
/// requests waited (queued or preempted during those steps; without queue times in the trace, `num_waiting` after
/// the first step). Names the waiting requests and the queue time the steps added to each (their wait inside the
/// steps' span). One finding per run of steps; the monopolising request is the subject.
pub fn prefill_monopoly(trace: &Trace, th: &Thresholds) -> Vec<Finding> {
    let waits = WaitIndex::new(trace);
    let it = &trace.iterations;
    let st = &trace.stages;
    let min_steps = th.monopoly_steps.max(1) as usize;
    let mut out = Vec::new();
    for r in 0..row_u32(trace.request_count()) {
        // Prefill chunks in step order: runs of consecutive rows of one source.
        let mut chunks: Vec<(u32, u32)> = trace
            .explicit_stages_of(r)
            .filter(|&s| st.kind[s] == StageKind::Prefill)
            .filter_map(|s| st.iter_row[s].map(|row| (row, st.tokens[s].unwrap_or(0))))
            .collect();
        if chunks.len() < min_steps {
            continue;
        }
        chunks.sort_unstable();
        let mut a = 0;
        while a < chunks.len() {
            let mut b = a + 1;
            while b < chunks.len()
                && chunks[b].0 == chunks[b - 1].0 + 1
                && it.source[chunks[b].0 as usize] == it.source[chunks[a].0 as usize]
            {
                b += 1;
            }
            if b - a >= min_steps
                && let Some(f) = monopoly_finding(trace, &waits, r, &chunks[a..b])
            {
                out.push(f);
            }
            a = b;
        }
    }
    out
}

/// The finding of one run of consecutive prefill steps of `request`, if others waited.
fn monopoly_finding(trace: &Trace, waits: &WaitIndex, request: u32, run: &[(u32, u32)]) -> Option<Finding> {
    let it = &trace.iterations;
    let (first, last) = (run[0].0 as usize, run[run.len() - 1].0 as usize);
    let source = it.source[first];
    let (from_ns, to_ns) = range(it.start_ns[first], it.end_ns[last]);
    let waiting = waits.waiting(source, from_ns, to_ns, request);
    let max_waiting = run[1..]
        .iter()
        .filter_map(|&(row, _)| it.num_waiting[row as usize])
        .max()
        .unwrap_or(0);
    if waiting.is_empty() && max_waiting == 0 {
        return None;
    }
    let tokens: u64 = run.iter().map(|&(_, n)| u64::from(n)).sum();
    let id = trace.request_id(request);
    let on = trace.label(source).map_or(String::new(), |s| format!(" of {s}"));
    let mut summary = format!(
        "{id}'s prefill of {} prompt tokens took {} consecutive steps{on} ({})",
        thousands(tokens),
        run.len(),
        duration(to_ns - from_ns)
    );
    let longest = waiting.first().map_or(0, |w| w.1);
    if waiting.is_empty() {
        let plural = if max_waiting == 1 { " was" } else { "s were" };
        let _ = write!(summary, " while up to {max_waiting} request{plural} waiting");
    } else {
        let rows: Vec<u32> = waiting.iter().map(|w| w.0).collect();
        let total: i64 = waiting.iter().map(|w| w.1).sum();
        let _ = write!(
            summary,
            " while {} waited: {} of added queue time",
            names(trace, &rows),
            duration(total)
        );
        if waiting.len() > 1 {
            let _ = write!(
                summary,
                " in all, {} for {}",
                duration(longest),
                trace.request_id(rows[0])
            );
        }
    }
    let mut requests = vec![request];
    requests.extend(waiting.iter().map(|w| w.0).take(MAX_LISTED_REQUESTS - 1));
    let severity = if ms(longest) >= CRITICAL_DELAY_MS {
        Severity::Critical
    } else {
        Severity::Warning
    };
    Some(Finding {
        kind: Kind::PrefillMonopoly,
        severity,
        summary,
        from_ns,
        to_ns,
        requests,
        steps: run.iter().map(|&(row, _)| row).collect(),
        tokens: trace.tokens_of(request).next().into_iter().collect(),
    })
}

// ---------------------------------------------------------------------------------------------------------------
// Preemption bursts and KV saturation.

/// Explicit preempted stages per source: (start, request), sorted.
fn preempted_stages(trace: &Trace) -> HashMap<u32, Vec<(i64, u32)>> {
    let mut by_source: HashMap<u32, Vec<(i64, u32)>> = HashMap::default();
    for s in 0..trace.stages.len() {
        if trace.stages.kind[s] == StageKind::Preempted {
            let r = trace.stages.request[s];
            let source = trace.requests.source.get(r as usize).copied().unwrap_or(NO_STR);
            by_source.entry(source).or_default().push((trace.stages.start_ns[s], r));
        }
    }
    for v in by_source.values_mut() {
        v.sort_unstable();
    }
    by_source
}

/// Distinct requests of `source` whose preempted stage starts in `[from, to]`, in time order.
fn preempted_in(stages: &HashMap<u32, Vec<(i64, u32)>>, source: u32, from: i64, to: i64) -> Vec<u32> {
    let Some(v) = stages.get(&source) else {
        return Vec::new();
    };
    let first = v.partition_point(|s| s.0 < from);
    let mut out: Vec<u32> = Vec::new();
    for &(at, r) in &v[first..] {
        if at > to {
            break;
        }
        if !out.contains(&r) {
            out.push(r);
        }
    }
    out
}

/// Clusters of steps with preemptions (`num_preempted`) on one instance, each within
/// `preemption_burst_window_ms` of the previous one, with `preemption_burst_count` preemptions or more. Names the
/// requests preempted (from the trace's preempted stages).
pub fn preemption_bursts(trace: &Trace, th: &Thresholds) -> Vec<Finding> {
    let it = &trace.iterations;
    let stages = preempted_stages(trace);
    #[allow(clippy::cast_possible_truncation)] // a window in ms, far below 2^63 ns
    let window_ns = (th.preemption_burst_window_ms * 1e6) as i64;
    let mut out = Vec::new();
    for &(source, ref rows) in trace.sources_with_iterations() {
        let preempting: Vec<usize> = (rows.start as usize..rows.end as usize)
            .filter(|&i| it.num_preempted[i].unwrap_or(0) > 0)
            .collect();
        let mut a = 0;
        while a < preempting.len() {
            let mut b = a + 1;
            while b < preempting.len() && it.start_ns[preempting[b]] - it.start_ns[preempting[b - 1]] <= window_ns {
                b += 1;
            }
            let cluster = &preempting[a..b];
            let total: u32 = cluster.iter().map(|&i| it.num_preempted[i].unwrap_or(0)).sum();
            if total >= th.preemption_burst_count {
                let (first, last) = (cluster[0], cluster[cluster.len() - 1]);
                let (from_ns, to_ns) = range(it.start_ns[first], it.end_ns[last]);
                let mut requests = preempted_in(&stages, source, from_ns, to_ns);
                let mut summary = format!(
                    "{total} preemptions in {} steps{} within {}",
                    cluster.len(),
                    trace.label(source).map_or(String::new(), |s| format!(" of {s}")),
                    duration(to_ns - from_ns)
                );
                if !requests.is_empty() {
                    let _ = write!(summary, ": {} recomputed", names(trace, &requests));
                }
                if let Some(peak) = cluster.iter().filter_map(|&i| it.kv_usage[i]).reduce(f64::max) {
                    let _ = write!(summary, " (KV cache up to {:.1} %)", 100.0 * peak);
                }
                requests.truncate(MAX_LISTED_REQUESTS);
                out.push(Finding {
                    kind: Kind::PreemptionBurst,
                    severity: Severity::Warning,
                    summary,
                    from_ns,
                    to_ns,
                    requests,
                    steps: cluster.iter().map(|&i| row_u32(i)).collect(),
                    tokens: Vec::new(),
                });
            }
            a = b;
        }
    }
    out
}

/// Runs of consecutive steps of one instance with `kv_usage` at `kv_saturation` or more: one finding per run,
/// naming the requests preempted during it.
pub fn kv_saturation(trace: &Trace, th: &Thresholds) -> Vec<Finding> {
    let it = &trace.iterations;
    let stages = preempted_stages(trace);
    let saturated = |i: usize| it.kv_usage[i].is_some_and(|u| u >= th.kv_saturation);
    let mut out = Vec::new();
    for &(source, ref rows) in trace.sources_with_iterations() {
        let (start, end) = (rows.start as usize, rows.end as usize);
        let mut a = start;
        while a < end {
            if !saturated(a) {
                a += 1;
                continue;
            }
            let mut b = a + 1;
            while b < end && saturated(b) {
                b += 1;
            }
            let (from_ns, to_ns) = range(it.start_ns[a], it.end_ns[b - 1]);
            let peak = (a..b).filter_map(|i| it.kv_usage[i]).fold(0.0, f64::max);
            let preempted: u32 = (a..b).map(|i| it.num_preempted[i].unwrap_or(0)).sum();
            let mut requests = preempted_in(&stages, source, from_ns, to_ns);
            let mut summary = format!(
                "KV cache{} at {:.0} % or more for {} step{} ({}), peak {:.1} %",
                trace.label(source).map_or(String::new(), |s| format!(" of {s}")),
                100.0 * th.kv_saturation,
                b - a,
                if b - a == 1 { "" } else { "s" },
                duration(to_ns - from_ns),
                100.0 * peak
            );
            if preempted > 0 {
                let _ = write!(summary, "; {preempted} preemptions");
                if !requests.is_empty() {
                    let _ = write!(summary, " ({})", names(trace, &requests));
                }
            }
            requests.truncate(MAX_LISTED_REQUESTS);
            out.push(Finding {
                kind: Kind::KvSaturation,
                severity: Severity::Warning,
                summary,
                from_ns,
                to_ns,
                requests,
                steps: (a..b).map(row_u32).collect(),
                tokens: Vec::new(),
            });
            a = b;
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------------------------
// SLO violations.

/// One finding per objective (TTFT, TPOT) that requests missed, as [`Slo::misses`] judges: how many, and the
/// worst of them (up to [`MAX_LISTED_REQUESTS`], worst first; TTFT misses without a first token count as worst).
pub fn slo_violations(trace: &Trace, slo: &Slo) -> Vec<Finding> {
    if !slo.is_set() {
        return Vec::new();
    }
    let n = trace.request_count();
    // (request, figure in ns; None = no first token)
    let mut ttft: Vec<(u32, Option<f64>)> = Vec::new();
    let mut tpot: Vec<(u32, Option<f64>)> = Vec::new();
    for r in 0..row_u32(n) {
        let m = request_metrics(trace, r);
        if let Some(limit) = slo.ttft_ms {
            match m.ttft_ns.map(ms) {
                Some(t) if t <= limit => {}
                t => ttft.push((r, t)),
            }
        }
        if let Some(limit) = slo.tpot_ms
            && let Some(t) = m.tpot_ns.map(|t| t / 1e6).filter(|&t| t > limit)
        {
            tpot.push((r, Some(t)));
        }
    }
    let mut out = Vec::new();
    for (name, limit, mut missed) in [("TTFT", slo.ttft_ms, ttft), ("TPOT", slo.tpot_ms, tpot)] {
        let Some(limit) = limit else { continue };
        if missed.is_empty() {
            continue;
        }
        // Worst first: no figure, then the largest.
        missed.sort_by(|a, b| match (a.1, b.1) {
            (None, None) => a.0.cmp(&b.0),
            (None, Some(_)) => std::cmp::Ordering::Less,
            (Some(_), None) => std::cmp::Ordering::Greater,
            (Some(x), Some(y)) => y.total_cmp(&x).then(a.0.cmp(&b.0)),
        });
        let from = missed.iter().map(|m| trace.requests.arrival_ns[m.0 as usize]).min();
        let to = missed
            .iter()
            .map(|m| trace.finish_ns(m.0).unwrap_or(trace.requests.arrival_ns[m.0 as usize]))
            .max();
        let (from_ns, to_ns) = range(from.unwrap_or(0), to.unwrap_or(0));
        let worst = &missed[0];
        let worst_figure = worst
            .1
            .map_or_else(|| "no first token".to_owned(), |v| format!("{name} {v:.1} ms"));
        let summary = format!(
            "{} of {n} requests ({:.1} %) missed the {name} objective of {limit} ms; worst {} ({worst_figure})",
            missed.len(),
            percent(missed.len(), n),
            trace.request_id(worst.0),
        );
        let requests: Vec<u32> = missed.iter().take(MAX_LISTED_REQUESTS).map(|m| m.0).collect();
        out.push(Finding {
            kind: Kind::SloViolations,
            severity: Severity::Warning,
            summary,
            from_ns,
            to_ns,
            requests,
            steps: Vec::new(),
            tokens: Vec::new(),
        });
    }
    out
}

// ---------------------------------------------------------------------------------------------------------------
// Repetition loops.

/// The longest stretch of `keys` that repeats an n-gram (n = 1 to `max_n`) back to back at least `repeats` times
/// and spans at least `min_tokens`: (start, length, n), the smallest n among the longest stretches.
fn longest_loop(keys: &[u64], max_n: usize, repeats: usize, min_tokens: usize) -> Option<(usize, usize, usize)> {
    let mut best: Option<(usize, usize, usize)> = None;
    for n in 1..=max_n.min(keys.len() / 2) {
        // run = consecutive positions i with keys[i] == keys[i - n]; the stretch is run + n tokens of period n.
        let mut run = 0usize;
        for i in n..=keys.len() {
            if i < keys.len() && keys[i] == keys[i - n] {
                run += 1;
                continue;
            }
            let span = run + n;
            if run > 0 && span >= min_tokens && span / n >= repeats && best.is_none_or(|b| span > b.1) {
                best = Some((i - span, span, n));
            }
            run = 0;
        }
    }
    best
}

/// Answers that repeat an n-gram of their tokens (token ids, else texts) back to back: `repetition_repeats` times
/// or more, over `repetition_min_tokens` tokens or more, for n from 1 to `repetition_ngram`. One finding per
/// request, on its longest loop; the loop's first token is the one to select.
pub fn repetition_loops(trace: &Trace, th: &Thresholds) -> Vec<Finding> {
    let tk = &trace.tokens;
    let max_n = th.repetition_ngram.max(1) as usize;
    let repeats = th.repetition_repeats.max(2) as usize;
    let min_tokens = (th.repetition_min_tokens as usize).max(repeats);
    let mut keys: Vec<u64> = Vec::new();
    let mut out = Vec::new();
    for r in 0..row_u32(trace.request_count()) {
        let tokens = trace.tokens_of(r);
        if tokens.len() < min_tokens {
            continue;
        }
        keys.clear();
        keys.extend(tokens.clone().map(|t| {
            if tk.token_id[t] != NULL_U32 {
                u64::from(tk.token_id[t])
            } else if tk.text[t] != NO_STR {
                1 << 32 | u64::from(tk.text[t])
            } else {
                2 << 32 | t as u64 // unknown: equal to nothing else
            }
        }));
        let Some((start, span, n)) = longest_loop(&keys, max_n, repeats, min_tokens) else {
            continue;
        };
        let first = tokens.start + start;
        let gram: String = (first..first + n)
            .map(|t| display_text(trace, tk.token_id[t], trace.texts.get(tk.text[t]), tk.special[t]))
            .collect();
        let gram = if gram.chars().count() > 40 {
            format!("{}…", gram.chars().take(40).collect::<String>())
        } else {
            gram
        };
        let summary = format!(
            "{} repeated “{gram}” ({n}-gram) {} times from token {}: {span} tokens, {:.0} % of its output",
            trace.request_id(r),
            span / n,
            tk.index[first],
            percent(span, tokens.len()),
        );
        let (from_ns, to_ns) = range(tk.emitted_ns[first], tk.emitted_ns[first + span - 1]);
        out.push(Finding {
            kind: Kind::RepetitionLoop,
            severity: Severity::Warning,
            summary,
            from_ns,
            to_ns,
            requests: vec![r],
            steps: Vec::new(),
            tokens: (first..first + span).collect(),
        });
    }
    out
}

// ---------------------------------------------------------------------------------------------------------------
// Truncation and token-count mismatches.

/// The requests that stopped at their token limit (`finish_reason = length`), as one finding: longest answers
/// first; each listed request's last token.
pub fn truncation(trace: &Trace) -> Vec<Finding> {
    let Some(length) = trace.labels.lookup("length") else {
        return Vec::new();
    };
    let mut cut: Vec<u32> = (0..row_u32(trace.request_count()))
        .filter(|&r| trace.requests.finish_reason[r as usize] == length)
        .collect();
    if cut.is_empty() {
        return Vec::new();
    }
    let (from_ns, to_ns) = span_of(trace, &cut);
    cut.sort_by_key(|&r| (std::cmp::Reverse(trace.output_tokens(r)), r));
    let n = trace.request_count();
    let subject = cut[0];
    let output = trace.output_tokens(subject);
    let tokens_word = if output == 1 { "token" } else { "tokens" };
    let summary = if cut.len() == 1 {
        format!(
            "{} stopped at its token limit (finish_reason length) after {} {tokens_word}",
            trace.request_id(subject),
            thousands(u64::from(output)),
        )
    } else {
        format!(
            "{} of {n} requests ({:.1} %) stopped at their token limit (finish_reason length): {}; the longest, {}, \
             after {} {tokens_word}",
            cut.len(),
            percent(cut.len(), n),
            names(trace, &cut),
            trace.request_id(subject),
            thousands(u64::from(output)),
        )
    };
    cut.truncate(MAX_LISTED_REQUESTS);
    let tokens = last_tokens(trace, &cut);
    vec![Finding {
        kind: Kind::Truncation,
        severity: Severity::Info,
        summary,
        from_ns,
        to_ns,
        requests: cut,
        steps: Vec::new(),
        tokens,
    }]
}

/// The requests whose `output_tokens` disagrees with their token records (as `tokenscope summary` counts them),
/// as one finding: the largest differences first.
pub fn token_mismatches(trace: &Trace) -> Vec<Finding> {
    let mut bad: Vec<(u32, u32, usize)> = (0..row_u32(trace.request_count()))
        .filter_map(|r| super::summary::token_mismatch(trace, r).map(|(u, k)| (r, u, k)))
        .collect();
    if bad.is_empty() {
        return Vec::new();
    }
    bad.sort_by_key(|&(r, u, k)| (std::cmp::Reverse((u as usize).abs_diff(k)), r));
    let rows: Vec<u32> = bad.iter().map(|b| b.0).collect();
    let (from_ns, to_ns) = span_of(trace, &rows);
    let (subject, usage, records) = bad[0];
    let summary = format!(
        "output_tokens disagrees with the token records of {} request{}: {} says {usage} and has {records} record{}",
        bad.len(),
        if bad.len() == 1 { "" } else { "s" },
        trace.request_id(subject),
        if records == 1 { "" } else { "s" },
    );
    let mut requests = rows;
    requests.truncate(MAX_LISTED_REQUESTS);
    let tokens = last_tokens(trace, &requests);
    vec![Finding {
        kind: Kind::TokenMismatch,
        severity: Severity::Info,
        summary,
        from_ns,
        to_ns,
        requests,
        steps: Vec::new(),
        tokens,
    }]
}

/// First arrival to last finish of some requests.
fn span_of(trace: &Trace, rows: &[u32]) -> (i64, i64) {
    let from = rows.iter().map(|&r| trace.requests.arrival_ns[r as usize]).min();
    let to = rows
        .iter()
        .map(|&r| trace.finish_ns(r).unwrap_or(trace.requests.arrival_ns[r as usize]))
        .max();
    range(from.unwrap_or(0), to.unwrap_or(0))
}

/// The last token of each request that has tokens: the first request's first, the rest ascending.
fn last_tokens(trace: &Trace, rows: &[u32]) -> Vec<usize> {
    let mut out: Vec<usize> = rows.iter().filter_map(|&r| trace.tokens_of(r).last()).collect();
    if out.len() > 1 {
        out[1..].sort_unstable();
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn thresholds_out_of_range_are_named_with_their_flag() {
        let d = super::Thresholds::default();
        assert_eq!(d.check(), Ok(()));
        let e = super::Thresholds { eos_min_rank: 0, ..d }.check().unwrap_err();
        assert!(
            e.starts_with("eos_min_rank (--eos-min-rank) = 0: ranks start at 1"),
            "{e}"
        );
        let e = super::Thresholds {
            itl_factor: f64::NAN,
            ..d
        }
        .check()
        .unwrap_err();
        assert!(e.starts_with("itl_factor (--itl-factor) = NaN"), "{e}");
        assert!(super::Thresholds { monopoly_steps: 1, ..d }.check().is_err());
        assert!(
            super::Thresholds {
                kv_saturation: 1.5,
                ..d
            }
            .check()
            .is_err()
        );
        assert!(
            super::Thresholds {
                kv_saturation: 1.0,
                ..d
            }
            .check()
            .is_ok()
        );
        assert!(
            super::Thresholds {
                repetition_repeats: 1,
                ..d
            }
            .check()
            .is_err()
        );
    }

    use super::*;

    #[test]
    fn defaults_are_the_constants() {
        let th = Thresholds::default();
        assert_eq!(th.itl_factor, DEFAULT_ITL_FACTOR);
        assert_eq!(th.large_prefill_tokens, DEFAULT_LARGE_PREFILL_TOKENS);
        assert_eq!(th.monopoly_steps, 3);
        assert_eq!(th.eos_min_rank, 2);
        assert!((th.eos_max_probability - 0.5).abs() < f64::EPSILON);
        assert!((th.kv_saturation - 0.95).abs() < f64::EPSILON);
    }

    #[test]
    fn figures_read_as_people_write_them() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(48_000), "48,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(duration(3_682_954_766), "3.68 s");
        assert_eq!(duration(10_500_000), "10.5 ms");
        assert_eq!(duration(1_250_000), "1.25 ms");
        assert_eq!(multiple(3.44), "3.4");
        assert_eq!(multiple(350.2), "350");
        assert_eq!(range(5, 10), (5, 10));
        assert_eq!(range(10, 5), (5, 10));
        assert_eq!(range(7, 7), (7, 8));
    }

    #[test]
    fn a_loop_is_the_longest_back_to_back_repetition() {
        // 1 2 3 (a b)×6 4: the 2-gram repeats 6 times over 12 tokens from position 3.
        let mut keys = vec![1, 2, 3];
        for _ in 0..6 {
            keys.extend([10, 11]);
        }
        keys.push(4);
        assert_eq!(longest_loop(&keys, 8, 4, 8), Some((3, 12, 2)));
        // Asked for 7 repeats, or 13 tokens: none.
        assert_eq!(longest_loop(&keys, 8, 7, 8), None);
        assert_eq!(longest_loop(&keys, 8, 4, 13), None);
        // Only 1-grams checked: none.
        assert_eq!(longest_loop(&keys, 1, 4, 8), None);
        // A loop running to the end, of a 1-gram.
        let mut tail = vec![5, 6];
        tail.extend([9; 10]);
        assert_eq!(longest_loop(&tail, 8, 4, 8), Some((2, 10, 1)));
        // A partial last repeat counts in the span: (1 2 3)×3 then 1 2 is 11 tokens of period 3.
        let partial = [1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2];
        assert_eq!(longest_loop(&partial, 8, 3, 8), Some((0, 11, 3)));
        assert_eq!(longest_loop(&[], 8, 4, 8), None);
    }
}
