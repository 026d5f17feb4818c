//! `tokenscope synth`: a small, honest simulator of a continuous-batching engine that writes realistic traces.
//! Real token-level production traces are not public; this is the source of the demo, of the test traces for every
//! view and finding, and of the benchmark workload.
//!
//! - [`cost`]: how long a step takes (a roofline model of an 8 B model on one H100-class GPU);
//! - [`sampler`]: a synthetic vocabulary and top-k candidates with realistic ranks;
//! - [`arrivals`]: Poisson traffic, or a replay of a real request trace (Mooncake, Azure);
//! - [`engine`]: the scheduler (vLLM-like), the KV and prefix caches, several instances;
//! - [`scenarios`]: the named scenarios, three of them incidents and one their clean baseline.

pub mod arrivals;
pub mod cost;
pub mod engine;
pub mod sampler;
pub mod scenarios;
pub mod sglang_otlp;

use std::path::PathBuf;

use crate::trace::Trace;
use arrivals::{ArrivalsError, ReplayOptions};
pub use cost::Profile;
pub use scenarios::Incident;

/// A named scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scenario {
    /// Chunked prefill off: large prefills stall a decoding request.
    PrefillInterruptsDecode,
    /// A medical question stops early on a low-probability stop token.
    EosMistrigger,
    /// A 96k-token prompt holds the prefill budget for 5 steps; a 700-token request waits.
    LongPrefill,
    /// The demo: a few hundred ordinary requests with one of each incident.
    Mixed,
    /// The demo's engines and ordinary traffic with no incident planted: the clean baseline of the findings.
    Steady,
    /// The benchmark workload: 50,000 requests, ~10 M output tokens.
    Large,
    /// A replay of a real request trace (`--arrivals`).
    Replay,
}

impl Scenario {
    /// Every scenario with its command-line name.
    pub const ALL: [(Scenario, &'static str); 7] = [
        (Scenario::PrefillInterruptsDecode, "prefill-interrupts-decode"),
        (Scenario::EosMistrigger, "eos-mistrigger"),
        (Scenario::LongPrefill, "long-prefill"),
        (Scenario::Mixed, "mixed"),
        (Scenario::Steady, "steady"),
        (Scenario::Large, "large"),
        (Scenario::Replay, "replay"),
    ];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        Self::ALL.iter().find(|(s, _)| *s == self).map_or("", |(_, n)| n)
    }

    /// Ordinary requests when `--requests` is not given.
    pub fn default_requests(self) -> usize {
        match self {
            Scenario::PrefillInterruptsDecode => 12,
            Scenario::EosMistrigger => 10,
            Scenario::LongPrefill => 8,
            Scenario::Mixed | Scenario::Steady => 300,
            Scenario::Large => 50_000,
            Scenario::Replay => usize::MAX,
        }
    }
}

/// What to simulate.
#[derive(Debug, Clone, PartialEq)]
pub struct SynthOptions {
    /// The scenario.
    pub scenario: Scenario,
    /// Seed of every random choice.
    pub seed: u64,
    /// Ordinary requests (scenario default when `None`); for `replay`, a limit.
    pub requests: Option<usize>,
    /// For `replay`: the request trace to replay.
    pub arrivals: Option<PathBuf>,
    /// For `replay`: window, limit and speed.
    pub replay: ReplayOptions,
    /// For `replay`: engine instances.
    pub sources: usize,
    /// Prefix-cache capacity per instance in tokens (default: the KV cache's size). Larger values model a KV
    /// pool in CPU memory or on SSD, as Mooncake serves from.
    pub prefix_cache_tokens: Option<u64>,
    /// The hardware and model every instance stands for.
    pub profile: Profile,
    /// Chunked prefill on or off on every instance (`None`: as the scenario sets it).
    pub chunked_prefill: Option<bool>,
    /// An incident planted in the traffic, this many seconds after the start, on the first instance.
    pub plant: Option<(Incident, f64)>,
}

/// Why a scenario could not be generated.
#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    /// `replay` without `--arrivals`.
    #[error("the replay scenario needs --arrivals FILE (a Mooncake JSONL or Azure CSV request trace)")]
    NoArrivals,
    /// An option out of its range.
    #[error("{0}")]
    BadOption(String),
    /// The arrivals file could not be read.
    #[error(transparent)]
    Arrivals(#[from] ArrivalsError),
}

/// Simulates a scenario.
pub fn generate(options: &SynthOptions) -> Result<Trace, SynthError> {
    let requests = options.requests.unwrap_or_else(|| options.scenario.default_requests());
    let seed = options.seed;
    let scale = options.replay.time_scale;
    if !(scale.is_finite() && scale > 0.0) {
        return Err(SynthError::BadOption(format!(
            "--time-scale {scale}: give a positive number (0.5 plays twice as fast)"
        )));
    }
    let (mut config, arrivals) = match options.scenario {
        Scenario::PrefillInterruptsDecode => scenarios::prefill_interrupts_decode(seed, requests),
        Scenario::EosMistrigger => scenarios::eos_mistrigger(seed, requests),
        Scenario::LongPrefill => scenarios::long_prefill_scenario(seed, requests),
        Scenario::Mixed => scenarios::mixed(seed, requests),
        Scenario::Steady => scenarios::steady(seed, requests),
        Scenario::Large => scenarios::large(seed, requests),
        Scenario::Replay => {
            let path = options.arrivals.as_ref().ok_or(SynthError::NoArrivals)?;
            let mut replay = options.replay;
            replay.limit = replay.limit.or(options.requests);
            let arrivals = arrivals::replay(path, replay, scenarios::T0_NS)?;
            scenarios::replay(seed, arrivals, options.sources)
        }
    };
    if options.profile != Profile::default() {
        let (kv_blocks, max_num_seqs) = options.profile.capacity();
        for e in &mut config.engines {
            e.cost = options.profile.cost();
            e.kv_blocks = kv_blocks;
            e.max_num_seqs = max_num_seqs;
            e.prefix_cache_blocks =
                kv_blocks as usize * engine::KV_BLOCK_TOKENS as usize / arrivals::PREFIX_BLOCK_TOKENS as usize;
        }
    }
    if let Some(on) = options.chunked_prefill {
        for e in &mut config.engines {
            e.chunked_prefill = on;
        }
    }
    let mut arrivals = arrivals;
    if let Some((incident, at_s)) = options.plant {
        if !(at_s.is_finite() && at_s >= 0.0) {
            return Err(SynthError::BadOption(format!(
                "--plant {}@{at_s}: give a time of 0 s or more",
                incident.name()
            )));
        }
        arrivals.extend(incident.requests(at_s));
        arrivals.sort_by(|a, b| a.at_ns.cmp(&b.at_ns).then_with(|| a.id.cmp(&b.id)));
    }
    if let Some(tokens) = options.prefix_cache_tokens {
        let blocks = usize::try_from(tokens / u64::from(arrivals::PREFIX_BLOCK_TOKENS)).unwrap_or(usize::MAX);
        for e in &mut config.engines {
            e.prefix_cache_blocks = blocks;
        }
    }
    Ok(engine::simulate(&config, &arrivals))
}
