//! The detectors' thresholds: one struct, its defaults (the `DEFAULT_*` constants, with the reasons), its checks, and
//! the command-line flags derived from it (`tokenscope findings --itl-factor 5 ...`).

/// A decode token stalls when its inter-token latency exceeds this many times the request's own median ITL: the
/// interference panel's stall factor. Alone it is not enough (an unchunked engine stalls its decodes 3-5× for
/// every ordinary prompt it prefills: ~90 such stalls in 600 requests of `steady`); with
/// [`DEFAULT_LARGE_PREFILL_TOKENS`] it singles out the incidents, whose stalls are 100-350× the median.
pub const DEFAULT_ITL_FACTOR: f64 = crate::analysis::interference::STALL_FACTOR;

/// Prompt tokens of other requests, computed in the stalled token's step and in the steps it waited through, that
/// make a stall "decode interrupted by prefill". Twice vLLM's default `max_num_batched_tokens` (8,192): with
/// chunked prefill at the default budget a decode shares a step with at most 8,192 prompt tokens (on the `large`
/// benchmark trace, 1,091 stalls over 3× carried 4,096-8,191 of them, none more), and without it ordinary chat
/// prompts prefill a few at a time (in `steady`, no stall over 3× waited behind even 4,096). The planted stalls
/// waited behind 48,000 (24,000 + 4 × 6,000) and 20,479 per chunk of the 96k prompt.
pub const DEFAULT_LARGE_PREFILL_TOKENS: u32 = 16_384;

/// Decode interrupted on an instance with too few requests to know an ordinary prefill (under 100), whatever the
/// prompt's size: a decode token that waited this long (ms) or more, most of it through other requests' prefill.
/// Ten times a 50 ms TPOT objective: a reader sees a stall of half a second mid-answer, on any hardware. A real
/// llama.cpp run of 5 requests on a CPU stalls three answers 7 s behind a 2,045-token chunk, which the token-count
/// fallback ([`DEFAULT_LARGE_PREFILL_TOKENS`]) misses. Where an ordinary prefill is known, the relative yardstick
/// (`outsized_prefill_factor`) decides: applied there too, this rule found 12 stalls of ordinary heavy-tailed
/// prompts in the clean `h100-8b chunked azure x0.5` run of the corpus (an overloaded engine: a condition, not an
/// incident).
pub const DEFAULT_STALL_MS: f64 = 500.0;

/// The share of a stall's time (0..1) that other requests' prefill must account for, for [`DEFAULT_STALL_MS`] to
/// make it an interruption: each step the token waited through counts for its time × its other-prefill tokens'
/// share of the step's tokens.
pub const STALL_PREFILL_SHARE: f64 = 0.5;

/// Decode interrupted, on an instance with too few requests to know an ordinary prefill: a stall of `stall_factor`
/// times its request's median ITL or more is an interruption whatever its length, when this share of it (0..1) or
/// more was spent in steps that computed other requests' prompts and no decode. Such a stall is one on any
/// hardware: the decode was held off the engine by prefills that had it to themselves. (A stall of a few requests
/// batched together, prefill and decodes sharing steps, stays with `stall_ms`.)
pub const STALL_ALONE_SHARE: f64 = 0.9;

/// Decode interrupted: see [`STALL_ALONE_SHARE`]. Twenty times the median: an overloaded engine's ordinary
/// variation (a busy step, a preemption) stays under ten times (the corpus' clean runs, `docs/FINDINGS.md`).
pub const DEFAULT_STALL_FACTOR: f64 = 20.0;

/// Prefill monopoly: the added queue time of the request that waited longest behind the monopolising prompt must
/// be at least this share (0..1) of that request's TTFT (the monopoly is what its user waited for), or a second
/// (`CRITICAL_DELAY_MS`: a wait a user notices, whatever else queued them; an overloaded engine queues everyone, and
/// a 96k-token prompt's five steps on `l4-8b` still add seconds to the requests behind it). On real runs of
/// llama.cpp with Gemma 3 270M, every short prompt takes two or three steps (the prompt is cut into pieces), so a
/// count of steps alone names them monopolies for 1 to 70 ms of added queue among TTFTs of hundreds of ms
/// (`docs/FINDINGS.md`, "Real runs"); the real monopolies add 77 % (`long-prefill`) and 90 % (the llama.cpp incident)
/// of the waiter's TTFT.
pub const DEFAULT_MONOPOLY_TTFT_SHARE: f64 = 0.5;

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

/// A threshold out of range: its field, command-line flag, value and what it should be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field} (--{flag}) = {value}: {want}", flag = field.replace('_', "-"))]
pub struct ThresholdError {
    /// The field of [`Thresholds`].
    pub field: &'static str,
    /// The value given, as written.
    pub value: String,
    /// What it should be.
    pub want: &'static str,
}

/// Overload: a queue that never emptied for this long, seconds. A burst the engine absorbs in a few seconds is not
/// overload; a queue that stays ten seconds is, on any hardware.
pub const DEFAULT_OVERLOAD_MIN_S: f64 = 10.0;

/// Overload: the median queue time of the requests that arrived meanwhile, ms, at least. A second in the queue is
/// what a user notices before anything happens; it also keeps an engine that schedules every step, with a request
/// or two waiting a few ms each time, from being called overloaded.
pub const DEFAULT_OVERLOAD_QUEUE_MS: f64 = 1_000.0;

/// Chronic interference: the share of the decode tokens' time owed to other requests' prefill, in a minute, at
/// least. On `steady` (ordinary chat prompts at 1.5 req/s an instance) it is 4 to 8 %; a third of the decode time
/// is a condition worth acting on (a smaller chunk budget, disaggregation).
pub const DEFAULT_CHRONIC_PREFILL_SHARE: f64 = 0.3;

/// Chronic interference: the share of the decode tokens, in a minute, that waited through another request's prompt
/// computation, at least. What makes it chronic rather than one incident: a 24k-token prompt stalling a decode for
/// 1.6 s in a short trace owes a large share of the decode time to prefill, but through a handful of tokens (under
/// 3 % in `prefill-interrupts-decode`), where a condition slows a tenth of the tokens or more (20 % when every fifth
/// step carries a chunk; 53 % in the Azure conversations replayed twice as fast).
pub const DEFAULT_CHRONIC_TOKEN_SHARE: f64 = 0.1;

/// Decode interrupted and prefill monopoly: a prompt is outsized when its share of its instance's work took this
/// many times what the large end of ordinary traffic takes there (the 99th percentile over the instance's
/// requests), in time, so on any hardware. Measured on the corpus (`docs/FINDINGS.md`): ordinary prompts reach at
/// most 1.7x, the planted large ones are at least 3.4x (a 24k-token prompt among chat on the CPU profile) and up to
/// 300x. On `large` (heavy-tailed prompts up to 16k tokens, nothing planted) five of 50,000 exceed it.
pub const DEFAULT_OUTSIZED_PREFILL_FACTOR: f64 = 3.0;

/// Acceptance collapse: a request's (or a 10 s window's) drafts accepted at this share of the run's acceptance rate
/// or less. A healthy speculative run varies by request with its text (code and repeated text accept more than
/// prose), within a factor of about 1.5 either way of its mean (llama.cpp drafting with Gemma 3 270M for itself,
/// `tests/data/real/llamacpp-spec/`); half the run's rate is a draft model that stopped predicting its target.
pub const DEFAULT_COLLAPSE_FACTOR: f64 = 0.5;

/// Acceptance collapse: the drafts a request (or a window) must have proposed to be judged: a short answer's rate
/// says little (4 verify steps of 4 drafts each: one rejection moves it by a quarter).
pub const DEFAULT_COLLAPSE_MIN_DRAFTS: u32 = 32;

/// The thresholds of every detector; defaults are the `DEFAULT_*` constants (see them for the reasons).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize, clap::Args)]
#[serde(default)]
pub struct Thresholds {
    /// Decode interrupted: ITL > this × the request's median ITL.
    #[arg(long, allow_negative_numbers = true, default_value_t = DEFAULT_ITL_FACTOR)]
    pub itl_factor: f64,
    /// Decode interrupted, on an instance with under 100 requests (no ordinary prefill to compare with): other
    /// requests' prompt tokens in the stall's steps, at least.
    #[arg(long, default_value_t = DEFAULT_LARGE_PREFILL_TOKENS)]
    pub large_prefill_tokens: u32,
    /// Decode interrupted, on an instance with under 100 requests: a token that waited this long (ms) or more,
    /// mostly through other requests' prefill, whatever the prompt's size.
    #[arg(long, allow_negative_numbers = true, default_value_t = DEFAULT_STALL_MS)]
    pub stall_ms: f64,
    /// EOS mis-trigger: stop-token probability below this.
    #[arg(long, allow_negative_numbers = true, default_value_t = DEFAULT_EOS_MAX_PROBABILITY)]
    pub eos_max_probability: f64,
    /// EOS mis-trigger: stop-token rank at least this (1 = most probable).
    #[arg(long, default_value_t = DEFAULT_EOS_MIN_RANK)]
    pub eos_min_rank: u32,
    /// EOS mis-trigger without logprobs: output shorter than this × its app and model's median.
    #[arg(long, allow_negative_numbers = true, default_value_t = DEFAULT_EARLY_EOS_FACTOR)]
    pub early_eos_factor: f64,
    /// EOS mis-trigger without logprobs: requests of the app and model needed for a median.
    #[arg(long, default_value_t = DEFAULT_EARLY_EOS_MIN_PEERS)]
    pub early_eos_min_peers: u32,
    /// Prefill monopoly, on an instance with under 100 requests (no ordinary prefill to compare with): consecutive
    /// prefill steps of one request, at least.
    #[arg(long, default_value_t = DEFAULT_MONOPOLY_STEPS)]
    pub monopoly_steps: u32,
    /// KV saturation: KV-cache use (0..1) at least.
    #[arg(long, allow_negative_numbers = true, default_value_t = DEFAULT_KV_SATURATION)]
    pub kv_saturation: f64,
    /// Preemption burst: preemptions, at least.
    #[arg(long, default_value_t = DEFAULT_PREEMPTION_BURST_COUNT)]
    pub preemption_burst_count: u32,
    /// Preemption burst: the largest gap between preempting steps, ms.
    #[arg(long, allow_negative_numbers = true, default_value_t = DEFAULT_PREEMPTION_BURST_WINDOW_MS)]
    pub preemption_burst_window_ms: f64,
    /// Repetition loop: longest n-gram checked.
    #[arg(long, default_value_t = DEFAULT_REPETITION_NGRAM)]
    pub repetition_ngram: u32,
    /// Repetition loop: back-to-back repeats, at least.
    #[arg(long, default_value_t = DEFAULT_REPETITION_REPEATS)]
    pub repetition_repeats: u32,
    /// Repetition loop: tokens in the loop, at least.
    #[arg(long, default_value_t = DEFAULT_REPETITION_MIN_TOKENS)]
    pub repetition_min_tokens: u32,
    /// Overload: a queue that never emptied for this long, s.
    #[arg(long, allow_negative_numbers = true, default_value_t = DEFAULT_OVERLOAD_MIN_S)]
    pub overload_min_s: f64,
    /// Overload: the median queue time of the requests that arrived meanwhile, ms, at least.
    #[arg(long, allow_negative_numbers = true, default_value_t = DEFAULT_OVERLOAD_QUEUE_MS)]
    pub overload_queue_ms: f64,
    /// Chronic interference: the share (0..1) of decode time owed to other requests' prefill, at least.
    #[arg(long, allow_negative_numbers = true, default_value_t = DEFAULT_CHRONIC_PREFILL_SHARE)]
    pub chronic_prefill_share: f64,
    /// Chronic interference: the share (0..1) of decode tokens that waited through another request's prompt, at
    /// least.
    #[arg(long, allow_negative_numbers = true, default_value_t = DEFAULT_CHRONIC_TOKEN_SHARE)]
    pub chronic_token_share: f64,
    /// Decode interrupted and prefill monopoly: a prompt that took this many times its instance's ordinary prefill
    /// time (the 99th percentile over its requests) is outsized.
    #[arg(long, allow_negative_numbers = true, default_value_t = DEFAULT_OUTSIZED_PREFILL_FACTOR)]
    pub outsized_prefill_factor: f64,
    /// Acceptance collapse: drafts accepted at this share (0..1) of the run's acceptance rate or less.
    #[arg(long, allow_negative_numbers = true, default_value_t = DEFAULT_COLLAPSE_FACTOR)]
    pub collapse_factor: f64,
    /// Acceptance collapse: drafts a request or a 10 s window proposed, at least, to be judged.
    #[arg(long, default_value_t = DEFAULT_COLLAPSE_MIN_DRAFTS)]
    pub collapse_min_drafts: u32,
    /// Decode interrupted, on an instance with too few requests to know an ordinary prefill: a stall this many times
    /// its request's median ITL, spent almost wholly behind prompts alone in their steps, whatever its length.
    #[arg(long, allow_negative_numbers = true, default_value_t = DEFAULT_STALL_FACTOR)]
    pub stall_factor: f64,
    /// Prefill monopoly: the longest added wait must be at least this share (0..1) of that waiter's TTFT.
    #[arg(long, allow_negative_numbers = true, default_value_t = DEFAULT_MONOPOLY_TTFT_SHARE)]
    pub monopoly_ttft_share: f64,
}

impl Thresholds {
    /// Checks that every threshold means something: factors and shares in range, counts large enough to make a
    /// pattern. The message names the field, its command-line flag, the value and what it should be.
    ///
    /// # Errors
    /// The first threshold out of range.
    pub fn check(&self) -> Result<(), ThresholdError> {
        let bad = |field: &'static str, value: String, want: &'static str| Err(ThresholdError { field, value, want });
        let t = self;
        if !(t.itl_factor.is_finite() && t.itl_factor > 1.0) {
            return bad(
                "itl_factor",
                t.itl_factor.to_string(),
                "give a factor above 1 (the default is 3)",
            );
        }
        if !(t.stall_ms.is_finite() && t.stall_ms > 0.0) {
            return bad(
                "stall_ms",
                t.stall_ms.to_string(),
                "give a duration in ms above 0 (the default is 500)",
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
        if !(t.overload_min_s.is_finite() && t.overload_min_s > 0.0) {
            return bad(
                "overload_min_s",
                t.overload_min_s.to_string(),
                "give a duration above 0 s (the default is 10)",
            );
        }
        if !(t.overload_queue_ms.is_finite() && t.overload_queue_ms >= 0.0) {
            return bad(
                "overload_queue_ms",
                t.overload_queue_ms.to_string(),
                "give a queue time of 0 ms or more (the default is 1000)",
            );
        }
        if !(t.chronic_prefill_share > 0.0 && t.chronic_prefill_share <= 1.0) {
            return bad(
                "chronic_prefill_share",
                t.chronic_prefill_share.to_string(),
                "give a share of the decode time above 0, at most 1",
            );
        }
        if !(t.outsized_prefill_factor.is_finite() && t.outsized_prefill_factor > 1.0) {
            return bad(
                "outsized_prefill_factor",
                t.outsized_prefill_factor.to_string(),
                "give a factor above 1 (the default is 3)",
            );
        }
        if !(t.collapse_factor > 0.0 && t.collapse_factor < 1.0) {
            return bad(
                "collapse_factor",
                t.collapse_factor.to_string(),
                "give a share of the run's acceptance rate above 0, below 1 (the default is 0.5)",
            );
        }
        if !(t.stall_factor.is_finite() && t.stall_factor > 1.0) {
            return bad(
                "stall_factor",
                t.stall_factor.to_string(),
                "give a factor above 1 (the default is 20)",
            );
        }
        if !(0.0..=1.0).contains(&t.monopoly_ttft_share) {
            return bad(
                "monopoly_ttft_share",
                t.monopoly_ttft_share.to_string(),
                "give a share of the waiter's TTFT from 0 to 1 (the default is 0.5)",
            );
        }
        if t.collapse_min_drafts < 1 {
            return bad(
                "collapse_min_drafts",
                t.collapse_min_drafts.to_string(),
                "give at least 1 draft (the default is 32)",
            );
        }
        if !(t.chronic_token_share >= 0.0 && t.chronic_token_share <= 1.0) {
            return bad(
                "chronic_token_share",
                t.chronic_token_share.to_string(),
                "give a share of the decode tokens from 0 to 1",
            );
        }
        Ok(())
    }
}

/// A threshold's value, to edit as the type it has.
#[derive(Debug)]
pub enum ThresholdValue<'a> {
    /// A factor, share, probability or duration.
    Real(&'a mut f64),
    /// A count of tokens, steps, requests or preemptions.
    Count(&'a mut u32),
}

impl Thresholds {
    /// Every threshold by its field name, to edit (the app's findings panel); in the flags' order.
    pub fn values_mut(&mut self) -> [(&'static str, ThresholdValue<'_>); 23] {
        use ThresholdValue::{Count, Real};
        [
            ("itl_factor", Real(&mut self.itl_factor)),
            ("large_prefill_tokens", Count(&mut self.large_prefill_tokens)),
            ("stall_ms", Real(&mut self.stall_ms)),
            ("eos_max_probability", Real(&mut self.eos_max_probability)),
            ("eos_min_rank", Count(&mut self.eos_min_rank)),
            ("early_eos_factor", Real(&mut self.early_eos_factor)),
            ("early_eos_min_peers", Count(&mut self.early_eos_min_peers)),
            ("monopoly_steps", Count(&mut self.monopoly_steps)),
            ("kv_saturation", Real(&mut self.kv_saturation)),
            ("preemption_burst_count", Count(&mut self.preemption_burst_count)),
            ("preemption_burst_window_ms", Real(&mut self.preemption_burst_window_ms)),
            ("repetition_ngram", Count(&mut self.repetition_ngram)),
            ("repetition_repeats", Count(&mut self.repetition_repeats)),
            ("repetition_min_tokens", Count(&mut self.repetition_min_tokens)),
            ("overload_min_s", Real(&mut self.overload_min_s)),
            ("overload_queue_ms", Real(&mut self.overload_queue_ms)),
            ("chronic_prefill_share", Real(&mut self.chronic_prefill_share)),
            ("chronic_token_share", Real(&mut self.chronic_token_share)),
            ("outsized_prefill_factor", Real(&mut self.outsized_prefill_factor)),
            ("collapse_factor", Real(&mut self.collapse_factor)),
            ("collapse_min_drafts", Count(&mut self.collapse_min_drafts)),
            ("stall_factor", Real(&mut self.stall_factor)),
            ("monopoly_ttft_share", Real(&mut self.monopoly_ttft_share)),
        ]
    }

    /// What each threshold means, by field name: the help of its command-line flag, so the app and
    /// `tokenscope findings --help` say the same.
    /// Built once (the app's editor asks every frame).
    pub fn help() -> &'static [(String, String)] {
        use clap::Args as _;
        static HELP: std::sync::OnceLock<Vec<(String, String)>> = std::sync::OnceLock::new();
        HELP.get_or_init(|| {
            Thresholds::augment_args(clap::Command::new("findings"))
                .get_arguments()
                .map(|a| {
                    let help = a.get_help().map(ToString::to_string).unwrap_or_default();
                    (a.get_id().as_str().to_owned(), help)
                })
                .collect()
        })
    }
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            itl_factor: DEFAULT_ITL_FACTOR,
            large_prefill_tokens: DEFAULT_LARGE_PREFILL_TOKENS,
            stall_ms: DEFAULT_STALL_MS,
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
            overload_min_s: DEFAULT_OVERLOAD_MIN_S,
            overload_queue_ms: DEFAULT_OVERLOAD_QUEUE_MS,
            chronic_prefill_share: DEFAULT_CHRONIC_PREFILL_SHARE,
            chronic_token_share: DEFAULT_CHRONIC_TOKEN_SHARE,
            outsized_prefill_factor: DEFAULT_OUTSIZED_PREFILL_FACTOR,
            collapse_factor: DEFAULT_COLLAPSE_FACTOR,
            collapse_min_drafts: DEFAULT_COLLAPSE_MIN_DRAFTS,
            stall_factor: DEFAULT_STALL_FACTOR,
            monopoly_ttft_share: DEFAULT_MONOPOLY_TTFT_SHARE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_threshold_is_editable_and_explained() {
        let mut t = Thresholds::default();
        let help = Thresholds::help();
        assert_eq!(help.len(), 23, "one flag per threshold");
        for ((name, _), (id, text)) in t.values_mut().into_iter().zip(help) {
            assert_eq!(name, id, "the editor lists the thresholds in the flags' order");
            assert!(!text.is_empty(), "{id} has no help");
        }
        // An edit through the editor changes the threshold.
        if let (_, ThresholdValue::Real(v)) = &mut t.values_mut()[15] {
            **v = 250.0;
        }
        assert_eq!(t.overload_queue_ms, 250.0);
    }

    #[test]
    fn thresholds_out_of_range_are_named_with_their_flag() {
        let d = Thresholds::default();
        assert_eq!(d.check(), Ok(()));
        let e = Thresholds { eos_min_rank: 0, ..d }.check().unwrap_err().to_string();
        assert!(
            e.starts_with("eos_min_rank (--eos-min-rank) = 0: ranks start at 1"),
            "{e}"
        );
        let e = Thresholds {
            itl_factor: f64::NAN,
            ..d
        }
        .check()
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("itl_factor (--itl-factor) = NaN"), "{e}");
        assert!(Thresholds { monopoly_steps: 1, ..d }.check().is_err());
        assert!(
            Thresholds {
                kv_saturation: 1.5,
                ..d
            }
            .check()
            .is_err()
        );
        assert!(
            Thresholds {
                kv_saturation: 1.0,
                ..d
            }
            .check()
            .is_ok()
        );
        assert!(
            Thresholds {
                repetition_repeats: 1,
                ..d
            }
            .check()
            .is_err()
        );
    }

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
}
