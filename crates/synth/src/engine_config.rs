//! One simulated engine instance's configuration (its step budget, sequences, KV cache, prefix cache, step-time
//! model, speculation) and the limits every instance has: what the simulator, the fitter, the scenarios and a
//! what-if's overrides share, below them all.

use super::arrivals::PREFIX_BLOCK_TOKENS;
use super::cost::StepCost;
use super::speculation::Speculation;

/// The wait between two back-to-back steps of an engine, ns: the CPU's turn (scheduling the next batch).
pub const STEP_GAP_NS: i64 = 200_000;

/// Tokens per KV-cache block (vLLM's default block size).
pub const KV_BLOCK_TOKENS: u32 = 16;

/// The largest step budget an engine may have (and `--set` accepts), tokens: a million tokens in one step is far
/// beyond any engine's.
pub const MAX_BATCHED_TOKENS: u32 = 1 << 20;
/// The most sequences in a step an engine may have (and `--set` accepts).
pub const MAX_SEQS: u32 = 65_536;

/// One engine instance.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineConfig {
    /// Its `source` name.
    pub name: String,
    /// Token budget of a step (`max_num_batched_tokens`).
    pub max_num_batched_tokens: u32,
    /// Most sequences in a step (`max_num_seqs`).
    pub max_num_seqs: u32,
    /// Chunked prefill (V1 scheduling) or prefill-first steps (V0).
    pub chunked_prefill: bool,
    /// KV-cache blocks of [`KV_BLOCK_TOKENS`] tokens.
    pub kv_blocks: u32,
    /// Prefix-cache capacity, in prompt blocks of 512 tokens (least recently used evicted first). It stands for
    /// the finished requests' KV blocks an engine keeps in its free memory for reuse, so it is at most the KV
    /// cache's size; it does not take blocks from running requests (a simplification: a real engine evicts cached
    /// blocks as running requests need them).
    pub prefix_cache_blocks: usize,
    /// Step-time model.
    pub cost: StepCost,
    /// A prompt's last this many tokens run in a step of their own, after the rest (llama.cpp saves a checkpoint
    /// of a sliding-window model's cache there); 0: none.
    pub prefill_tail: u32,
    /// Speculative decoding: every decoding sequence drafts and a step verifies; `None`: one token per step.
    pub speculation: Option<Speculation>,
}

impl EngineConfig {
    /// vLLM-like defaults for an 8 B model on one 80 GB GPU: budget 8192, 256 sequences, chunked prefill,
    /// 26,000 KV blocks (~416k tokens: what is left of 80 GB after 16 GB of weights, at 128 KiB per token), a
    /// prefix cache as large as the KV cache (812 prompt blocks of 512 tokens).
    pub fn new(name: &str) -> Self {
        EngineConfig {
            name: name.to_owned(),
            max_num_batched_tokens: 8192,
            max_num_seqs: 256,
            chunked_prefill: true,
            kv_blocks: 26_000,
            prefix_cache_blocks: 26_000 * KV_BLOCK_TOKENS as usize / PREFIX_BLOCK_TOKENS as usize,
            cost: StepCost::default(),
            prefill_tail: 0,
            speculation: None,
        }
    }
}
