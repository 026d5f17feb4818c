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

/// The thresholds of every detector; defaults are the `DEFAULT_*` constants (see them for the reasons).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize, clap::Args)]
#[serde(default)]
pub struct Thresholds {
    /// Decode interrupted: ITL > this × the request's median ITL.
    #[arg(long, allow_negative_numbers = true, default_value_t = DEFAULT_ITL_FACTOR)]
    pub itl_factor: f64,
    /// Decode interrupted: other requests' prompt tokens in the stall's steps, at least.
    #[arg(long, default_value_t = DEFAULT_LARGE_PREFILL_TOKENS)]
    pub large_prefill_tokens: u32,
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
    /// Prefill monopoly: consecutive prefill steps of one request, at least.
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

#[cfg(test)]
mod tests {
    use super::*;

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
