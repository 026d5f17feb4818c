//! How long an engine step takes: a roofline-style model of a 7-8 B dense model on one H100-class GPU.
//!
//! `step = base + a × prefill tokens + b × decode sequences + c × context tokens read by decodes
//!         + d × attention pairs of prefill chunks`, times a seeded noise factor.
//!
//! Where the constants come from (Llama-3-8B-like: 32 layers, hidden 4096, 8 KV heads of 128, bf16):
//! - `base` 10 ms: reading the 16 GB of weights once per step at ~3.35 TB/s is ~4.8 ms; scheduling, sampling,
//!   detokenizing and kernel launches on the CPU add a few ms more. A small decode batch therefore costs ~11-12 ms,
//!   which is what vLLM reports for 8 B models at low concurrency.
//! - `a` 0.065 ms per prefill token: 2 × 8e9 FLOPs per token at ~250 TFLOP/s effective (about a third of the
//!   dense bf16 peak, typical for prefill). An 8k-token prompt: 10 + 532 + 32 (attention) ≈ 0.57 s.
//! - `b` 0.06 ms per decode sequence: per-sequence sampling, logits and bookkeeping.
//! - `c` 4e-5 ms per context token read by a decode: its KV cache (2 × 32 × 8 × 128 × 2 B = 128 KiB per token)
//!   streamed at ~3.35 TB/s. A batch of 64 decodes over 2,000-token contexts adds ~5 ms.
//! - `d` 9.5e-7 ms per attention pair of a prefill chunk (a new token attending to one earlier token):
//!   4 × 4096 × 32 FLOPs at ~550 TFLOP/s. Quadratic in prompt length: the chunks of a 96k prompt get slower,
//!   from ~1.5 s to ~2.7 s each with a 20k-token budget.

use rand::RngExt;
use rand_distr::{Distribution, Normal};

/// The constants of the step-time model (see the module doc for where they come from).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepCost {
    /// Fixed cost of a step, ms.
    pub base_ms: f64,
    /// Per prefill token, ms.
    pub prefill_token_ms: f64,
    /// Per prefill chunk (a sequence prefilling in the step), ms: what a chunk costs beyond its tokens (llama.cpp
    /// saves a checkpoint of a sliding-window model's cache per chunk). 0 in the named profiles.
    pub prefill_chunk_ms: f64,
    /// Per decoding sequence, ms.
    pub decode_seq_ms: f64,
    /// Per draft token a speculative verify step checks beyond its sequence's own token, ms: the verify pass
    /// computes them as a prompt's tokens are computed, so the named profiles take their prompt token's cost, and
    /// a profile fitted on a run without speculation does too (`docs/SIMULATOR.md`).
    pub verify_token_ms: f64,
    /// Per context token read by a decoding sequence, ms.
    pub context_token_ms: f64,
    /// Per (new token, earlier token) attention pair of a prefill chunk, ms.
    pub attention_pair_ms: f64,
    /// Standard deviation of the multiplicative noise (0.03 = ±3 %).
    pub noise: f64,
    /// Batch regimes: a step of at least this many tokens (prompt tokens plus decoding sequences) runs the
    /// large-batch kernels, a smaller one the small-batch kernels (llama.cpp on a CPU switches at 4 tokens). 0: one
    /// regime. The named profiles have one; a fitted profile has two when its server's steps show them.
    pub batch_knot: u32,
    /// Fixed cost of a pass of the large-batch regime, on top of `base_ms`, ms.
    pub large_batch_ms: f64,
    /// Per token of a pass of the small-batch regime, on top of the per-token costs, ms.
    pub small_batch_token_ms: f64,
    /// Each prefill chunk runs in a pass of its own, the decodes in one more, each pass paying `base_ms` and its
    /// regime (false in the named profiles).
    pub split_passes: bool,
}

impl Default for StepCost {
    fn default() -> Self {
        StepCost {
            base_ms: 10.0,
            prefill_token_ms: 0.065,
            decode_seq_ms: 0.06,
            verify_token_ms: 0.065,
            context_token_ms: 4e-5,
            attention_pair_ms: 9.5e-7,
            noise: 0.03,
            ..StepCost::ONE_REGIME
        }
    }
}

/// The hardware and model an engine of the simulator stands for: its step costs and its KV cache. The findings must
/// hold on all of them (`docs/FINDINGS.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Profile {
    /// A 7-8 B dense model on one H100-class GPU: the constants of [`StepCost::default`], 26,000 KV blocks.
    #[default]
    #[value(name = "h100-8b")]
    H100,
    /// The same model on an L4-class GPU (~300 GB/s, ~120 dense bf16 TFLOP/s): reading the weights takes ~53 ms a
    /// step, a prompt token ~0.4 ms (a third of the peak), a context token's KV 0.44 µs; 8 GB left for the KV cache
    /// (62k tokens: 3,900 blocks).
    #[value(name = "l4-8b")]
    L4,
    /// A 270 M model on two CPU cores (llama.cpp, as `record` ran Gemma 3 270M here: ITL 28 ms alone, 104 ms for
    /// each of 8 streams, TTFT ~100 ms for a short prompt): 25 ms a step, 10 ms per decoding sequence, 0.7 ms per
    /// prompt token; 8 sequences at most.
    #[value(name = "cpu-270m")]
    Cpu,
}

impl Profile {
    /// Every profile, for the corpus.
    pub const ALL: [Profile; 3] = [Profile::H100, Profile::L4, Profile::Cpu];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Profile::H100 => "h100-8b",
            Profile::L4 => "l4-8b",
            Profile::Cpu => "cpu-270m",
        }
    }

    /// Its step-time model.
    pub fn cost(self) -> StepCost {
        match self {
            Profile::H100 => StepCost::default(),
            Profile::L4 => StepCost {
                base_ms: 55.0,
                prefill_token_ms: 0.4,
                decode_seq_ms: 0.2,
                verify_token_ms: 0.4,
                context_token_ms: 4.4e-4,
                attention_pair_ms: 4.3e-6,
                noise: 0.03,
                ..StepCost::ONE_REGIME
            },
            Profile::Cpu => StepCost {
                base_ms: 25.0,
                prefill_token_ms: 0.7,
                decode_seq_ms: 10.0,
                verify_token_ms: 0.7,
                context_token_ms: 1e-4,
                attention_pair_ms: 2e-6,
                noise: 0.05,
                ..StepCost::ONE_REGIME
            },
        }
    }

    /// KV-cache blocks (of 16 tokens) and most sequences in a step.
    pub fn capacity(self) -> (u32, u32) {
        match self {
            Profile::H100 => (26_000, 256),
            Profile::L4 => (3_900, 128),
            Profile::Cpu => (2_048, 8),
        }
    }
}

/// How an engine runs a step's batch: in one pass, or (llama.cpp with a sliding-window model) each prefill chunk
/// in a pass of its own and the decoding sequences in one more; and where its kernels switch from the small-batch
/// to the large-batch regime.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Regimes {
    /// A pass of at least this many tokens runs the large-batch kernels (0: one regime).
    pub knot: u32,
    /// Each prefill chunk is a pass of its own, the decodes one more.
    pub split_passes: bool,
}

/// What the passes of a step add up to under [`Regimes`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Passes {
    /// Passes run.
    pub passes: u64,
    /// Passes in the large-batch regime.
    pub large: u64,
    /// Tokens of the passes in the small-batch regime.
    pub small_tokens: u64,
}

/// The work of one step, as the cost model sees it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepWork {
    /// Prompt tokens computed.
    pub prefill_tokens: u64,
    /// Prefill chunks: sequences prefilling in the step.
    pub prefill_chunks: u64,
    /// Sequences decoding one token each.
    pub decode_seqs: u64,
    /// Draft tokens verified beyond the decoding sequences' own tokens (speculative decoding: a sequence that
    /// drafted k tokens is one decoding sequence and k verify tokens).
    pub verify_tokens: u64,
    /// Context tokens the decoding sequences attend to.
    pub decode_context_tokens: u64,
    /// Attention pairs of the prefill chunks: for a chunk of n tokens after p computed ones, n·p + n(n+1)/2.
    pub attention_pairs: u64,
    /// The tokens of each prefill chunk.
    pub chunk_tokens: Vec<u64>,
}

impl StepWork {
    /// Adds a prefill chunk of `n` tokens after `before` already computed tokens of the same sequence.
    pub fn add_prefill(&mut self, n: u64, before: u64) {
        self.prefill_tokens += n;
        self.prefill_chunks += 1;
        self.attention_pairs += n * before + n * (n + 1) / 2;
        self.chunk_tokens.push(n);
    }

    /// Adds a decoding sequence with `context` tokens of context.
    pub fn add_decode(&mut self, context: u64) {
        self.decode_seqs += 1;
        self.decode_context_tokens += context;
    }

    /// Adds a decoding sequence with `context` tokens of context that verifies `drafts` draft tokens.
    pub fn add_verify(&mut self, context: u64, drafts: u64) {
        self.add_decode(context);
        self.verify_tokens += drafts;
    }

    /// The tokens the step's batch holds: its prompt tokens, one per decoding sequence and the drafts verified.
    pub fn batch_tokens(&self) -> u64 {
        self.prefill_tokens + self.decode_seqs + self.verify_tokens
    }

    /// The step's passes under `r`: how many, how many in the large-batch regime, and the tokens of the others.
    pub fn passes(&self, r: Regimes) -> Passes {
        let mut p = Passes::default();
        let mut add = |tokens: u64| {
            if tokens == 0 {
                return;
            }
            p.passes += 1;
            if r.knot > 0 && tokens >= u64::from(r.knot) {
                p.large += 1;
            } else if r.knot > 0 {
                p.small_tokens += tokens;
            }
        };
        if r.split_passes {
            self.chunk_tokens.iter().for_each(|&n| add(n));
            // Steps read from counts know no chunk sizes: their prompt tokens are one pass.
            if self.chunk_tokens.is_empty() {
                add(self.prefill_tokens);
            }
            add(self.decode_seqs + self.verify_tokens);
        } else {
            add(self.batch_tokens());
        }
        p.passes = p.passes.max(1);
        p
    }
}

impl StepCost {
    /// No cost at all, one batch regime: the base of struct updates.
    pub const ONE_REGIME: StepCost = StepCost {
        base_ms: 0.0,
        prefill_token_ms: 0.0,
        prefill_chunk_ms: 0.0,
        decode_seq_ms: 0.0,
        verify_token_ms: 0.0,
        context_token_ms: 0.0,
        attention_pair_ms: 0.0,
        noise: 0.0,
        batch_knot: 0,
        large_batch_ms: 0.0,
        small_batch_token_ms: 0.0,
        split_passes: false,
    };

    /// Its batch regimes.
    pub fn regimes(&self) -> Regimes {
        Regimes {
            knot: self.batch_knot,
            split_passes: self.split_passes,
        }
    }

    /// The noiseless duration of a step, ms.
    #[expect(clippy::cast_precision_loss, reason = "token counts far below 2^53")]
    pub fn expected_ms(&self, w: &StepWork) -> f64 {
        let p = w.passes(self.regimes());
        let regime = self.large_batch_ms * p.large as f64 + self.small_batch_token_ms * p.small_tokens as f64;
        self.base_ms * p.passes as f64
            + self.prefill_token_ms * w.prefill_tokens as f64
            + self.prefill_chunk_ms * w.prefill_chunks as f64
            + self.decode_seq_ms * w.decode_seqs as f64
            + self.verify_token_ms * w.verify_tokens as f64
            + self.context_token_ms * w.decode_context_tokens as f64
            + self.attention_pair_ms * w.attention_pairs as f64
            + regime
    }

    /// The duration of a step with noise, in whole nanoseconds (at least 1 µs).
    #[expect(clippy::cast_possible_truncation, reason = "a step lasts far less than 2^63 ns")]
    pub fn sample_ns(&self, w: &StepWork, rng: &mut impl RngExt) -> i64 {
        let factor = Normal::new(1.0, self.noise)
            .map_or(1.0, |n| n.sample(rng))
            .clamp(0.8, 1.25);
        ((self.expected_ms(w) * factor * 1e6).round() as i64).max(1_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_decode_batch_takes_about_12_ms() {
        // 8 sequences over 2,000-token contexts: 10 + 8 × 0.06 + 16,000 × 4e-5 = 10 + 0.48 + 0.64 = 11.12 ms.
        let mut w = StepWork::default();
        for _ in 0..8 {
            w.add_decode(2000);
        }
        let ms = StepCost::default().expected_ms(&w);
        assert!((ms - 11.12).abs() < 1e-9, "{ms}");
    }

    #[test]
    fn a_verify_step_pays_its_drafts_as_prompt_tokens() {
        // The 8 sequences above, each verifying 4 drafts: 11.12 + 32 × 0.065 = 13.2 ms; the batch holds 8 + 32.
        let mut w = StepWork::default();
        for _ in 0..8 {
            w.add_verify(2000, 4);
        }
        assert_eq!((w.decode_seqs, w.verify_tokens, w.batch_tokens()), (8, 32, 40));
        let ms = StepCost::default().expected_ms(&w);
        assert!((ms - 13.2).abs() < 1e-9, "{ms}");
    }

    #[test]
    fn an_8k_prefill_takes_about_0_6_s() {
        // 10 + 8192 × 0.065 + (8192 × 8193 / 2) × 9.5e-7 = 10 + 532.48 + 31.88 = 574.36 ms.
        let mut w = StepWork::default();
        w.add_prefill(8192, 0);
        assert_eq!(w.attention_pairs, 8192 * 8193 / 2);
        let ms = StepCost::default().expected_ms(&w);
        assert!((ms - 574.36).abs() < 0.01, "{ms}");
    }

    #[test]
    fn later_chunks_of_a_long_prompt_cost_more() {
        let cost = StepCost::default();
        let chunk = |before| {
            let mut w = StepWork::default();
            w.add_prefill(20_480, before);
            cost.expected_ms(&w)
        };
        // First chunk: 10 + 1331.2 + 209.7e6 × 9.5e-7 ≈ 1540 ms; fourth (61,440 tokens before): ≈ 2736 ms.
        assert!((chunk(0) - 1540.4).abs() < 1.0, "{}", chunk(0));
        assert!((chunk(61_440) - 2735.7).abs() < 1.0, "{}", chunk(61_440));
    }
}
