//! The named scenarios of `tokenscope synth`: each one an engine setup, ordinary traffic and, for the incident
//! scenarios, the planted requests that reproduce one of the three known incidents (see README, "The incidents");
//! `steady` is `mixed` with nothing planted.

use super::arrivals::{Arrival, LengthDist, PREFIX_BLOCK_TOKENS, Traffic, poisson};
use super::engine::{EngineConfig, Routing, SimConfig};

/// Trace start of every scenario: 2025-11-29 08:00:00 UTC, in ns.
pub const T0_NS: i64 = 1_764_403_200_000_000_000;

/// The request that decodes while large prefills run (prefill-interrupts-decode).
pub const VICTIM_ID: &str = "chat-victim";
/// The large prompt whose prefill stalls it.
pub const BIG_PREFILL_ID: &str = "rag-24k";
/// The request whose answer ends on a low-probability stop token (eos-mistrigger).
pub const MISTRIGGER_ID: &str = "med-question";
/// The output index at which it stops, and the stop token's probability there.
pub const MISTRIGGER_AT: (u32, f64) = (37, 0.10);
/// The 96k-token prompt that holds the prefill budget for five steps (long-prefill).
pub const LONG_ID: &str = "doc-96k";
/// Its prompt length, the incident's.
pub const LONG_INPUT: u32 = 96_213;
/// The 700-token request that waits behind it.
pub const SHORT_ID: &str = "short-700";

fn secs(s: f64) -> i64 {
    #[expect(clippy::cast_possible_truncation, reason = "seconds of a scenario")]
    let ns = (s * 1e9) as i64;
    T0_NS + ns
}

/// A planted request.
fn planted(id: &str, at_s: f64, input: u32, output: u32, app: &str, user: &str, source: Option<usize>) -> Arrival {
    // Planted prompts share nothing with the traffic: their own prefix blocks.
    let base = 1u64 << 50
        | (id
            .bytes()
            .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)))
            << 20);
    Arrival {
        id: id.to_owned(),
        at_ns: secs(at_s),
        input_tokens: input,
        output_tokens: output,
        max_tokens: output.max(1024),
        prefix_blocks: (0..u64::from(input.div_ceil(PREFIX_BLOCK_TOKENS)))
            .map(|b| base + b)
            .collect(),
        app_id: app.to_owned(),
        user_id: user.to_owned(),
        source,
        mistrigger: None,
    }
}

/// Chat-like background traffic: short prompts and answers.
pub fn light_traffic(rate_per_s: f64) -> Traffic {
    Traffic {
        rate_per_s,
        input: LengthDist {
            median: 600.0,
            sigma: 0.6,
            min: 32,
            max: 4_000,
        },
        output: LengthDist {
            median: 120.0,
            sigma: 0.5,
            min: 8,
            max: 400,
        },
    }
}

/// The prefill-interrupts-decode requests, from `at_s`: a short chat answer decoding while a 24k-token prompt and
/// four 6k-token prompts arrive and, without chunked prefill, are prefilled ahead of its decode steps.
fn interrupts(at_s: f64, source: Option<usize>) -> Vec<Arrival> {
    let mut v = vec![
        planted(VICTIM_ID, at_s, 900, 80, "chat", "user-03", source),
        planted(BIG_PREFILL_ID, at_s + 0.35, 24_000, 64, "search", "user-11", source),
    ];
    for k in 0..4 {
        let at = at_s + 0.9 + 0.35 * f64::from(k);
        v.push(planted(
            &format!("rag-6k-{}", k + 1),
            at,
            6_000,
            40,
            "search",
            "user-11",
            source,
        ));
    }
    v
}

/// The eos-mistrigger request at `at_s`: a medical question whose answer stops at output index 37.
fn mistrigger(at_s: f64, source: Option<usize>) -> Arrival {
    let mut a = planted(MISTRIGGER_ID, at_s, 420, 380, "medical", "user-07", source);
    a.mistrigger = Some(MISTRIGGER_AT);
    a
}

/// The long-prefill requests at `at_s`: a 96k-token document, and a 700-token question 50 ms behind it.
fn long_prefill(at_s: f64, source: Option<usize>) -> Vec<Arrival> {
    vec![
        planted(LONG_ID, at_s, LONG_INPUT, 200, "search", "user-21", source),
        planted(SHORT_ID, at_s + 0.05, 700, 120, "chat", "user-04", source),
    ]
}

/// An incident to plant in other traffic (`synth --plant KIND@SECONDS`): the requests of one of the incident
/// scenarios, on the first instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Incident {
    /// A chat answer decoding while a 24k-token prompt and four 6k-token prompts arrive.
    #[value(name = "prefill-interrupts-decode")]
    Interrupts,
    /// A 96k-token document, and a 700-token question 50 ms behind it.
    #[value(name = "long-prefill")]
    LongPrefill,
    /// A medical question whose answer stops on a low-probability stop token.
    #[value(name = "eos-mistrigger")]
    Mistrigger,
}

impl Incident {
    /// Every incident, for the corpus.
    pub const ALL: [Incident; 3] = [Incident::Interrupts, Incident::LongPrefill, Incident::Mistrigger];

    /// The command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Incident::Interrupts => "prefill-interrupts-decode",
            Incident::LongPrefill => "long-prefill",
            Incident::Mistrigger => "eos-mistrigger",
        }
    }

    /// The planted requests, `at_s` seconds after the scenarios' start, on the first instance.
    pub fn requests(self, at_s: f64) -> Vec<Arrival> {
        match self {
            Incident::Interrupts => interrupts(at_s, Some(0)),
            Incident::LongPrefill => long_prefill(at_s, Some(0)),
            Incident::Mistrigger => vec![mistrigger(at_s, Some(0))],
        }
    }

    /// The planted requests with their prompts cut to `max_prompt` tokens (a 96k-token prompt does not fit a smaller
    /// GPU's or a CPU's KV cache; the incident on that hardware is the same with other numbers).
    pub fn requests_fitting(self, at_s: f64, max_prompt: u32) -> Vec<Arrival> {
        let mut v = self.requests(at_s);
        for a in &mut v {
            if a.input_tokens > max_prompt {
                a.input_tokens = max_prompt.max(1);
                a.prefix_blocks
                    .truncate(a.input_tokens.div_ceil(PREFIX_BLOCK_TOKENS) as usize);
            }
        }
        v
    }

    /// The request a finding of the incident must name first (its subject).
    pub fn subject(self) -> &'static str {
        match self {
            Incident::Interrupts => VICTIM_ID,
            Incident::LongPrefill => LONG_ID,
            Incident::Mistrigger => MISTRIGGER_ID,
        }
    }
}

fn engine(name: &str, chunked: bool, budget: u32) -> EngineConfig {
    EngineConfig {
        chunked_prefill: chunked,
        max_num_batched_tokens: budget,
        ..EngineConfig::new(name)
    }
}

fn sorted(mut v: Vec<Arrival>) -> Vec<Arrival> {
    v.sort_by(|a, b| a.at_ns.cmp(&b.at_ns).then_with(|| a.id.cmp(&b.id)));
    v
}

/// The engines of a scenario, with the top-5 candidates and the synthetic model of every scenario.
pub fn config(engines: Vec<EngineConfig>, seed: u64) -> SimConfig {
    SimConfig {
        engines,
        routing: Routing::LeastLoaded,
        top_k: 5,
        model: "synthetic-8b".to_owned(),
        seed,
        first_iteration: 0,
        disaggregation: None,
        roles: Vec::new(),
    }
}

/// `prefill-interrupts-decode`: one V0-style instance (no chunked prefill, 32k budget).
pub fn prefill_interrupts_decode(seed: u64, background: usize) -> (SimConfig, Vec<Arrival>) {
    let mut a = poisson(&light_traffic(1.5), background, T0_NS, "req-", seed);
    a.extend(interrupts(3.0, Some(0)));
    (config(vec![engine("vllm-0", false, 32_768)], seed), sorted(a))
}

/// `eos-mistrigger`: one chunked-prefill instance.
pub fn eos_mistrigger(seed: u64, background: usize) -> (SimConfig, Vec<Arrival>) {
    let mut a = poisson(&light_traffic(2.0), background, T0_NS, "req-", seed);
    a.push(mistrigger(2.0, Some(0)));
    (config(vec![engine("vllm-0", true, 8_192)], seed), sorted(a))
}

/// `long-prefill`: one chunked-prefill instance with a 20,480-token budget, so the 96k prompt takes 5 steps.
pub fn long_prefill_scenario(seed: u64, background: usize) -> (SimConfig, Vec<Arrival>) {
    let mut a = poisson(&light_traffic(1.0), background, T0_NS, "req-", seed);
    a.extend(long_prefill(3.0, Some(0)));
    (config(vec![engine("vllm-0", true, 20_480)], seed), sorted(a))
}

/// `mixed`: two instances (vllm-0 without chunked prefill, vllm-1 with a 20k budget), ordinary traffic at 3 req/s
/// and one of each incident: prefill-interrupts-decode on vllm-0 at 20 s, the EOS mis-trigger at 45 s, the long
/// prefill on vllm-1 at 70 s.
pub fn mixed(seed: u64, background: usize) -> (SimConfig, Vec<Arrival>) {
    let mut a = poisson(&light_traffic(3.0), background, T0_NS, "req-", seed);
    a.extend(interrupts(20.0, Some(0)));
    a.push(mistrigger(45.0, Some(1)));
    a.extend(long_prefill(70.0, Some(1)));
    let engines = vec![engine("vllm-0", false, 32_768), engine("vllm-1", true, 20_480)];
    (config(engines, seed), sorted(a))
}

/// `steady`: `mixed` without its incidents — the same two instances and ordinary traffic, nothing planted. No
/// finding of the three incident kinds should fire on it.
pub fn steady(seed: u64, background: usize) -> (SimConfig, Vec<Arrival>) {
    let a = poisson(&light_traffic(3.0), background, T0_NS, "req-", seed);
    let engines = vec![engine("vllm-0", false, 32_768), engine("vllm-1", true, 20_480)];
    (config(engines, seed), a)
}

/// `large`: the benchmark workload. Four default instances, Poisson arrivals at 50 req/s, log-normal lengths with
/// a mean of ~200 output tokens: 50,000 requests make ~10 M output tokens.
pub fn large(seed: u64, requests: usize) -> (SimConfig, Vec<Arrival>) {
    let traffic = Traffic {
        rate_per_s: 50.0,
        input: LengthDist {
            median: 800.0,
            sigma: 0.9,
            min: 16,
            max: 16_000,
        },
        output: LengthDist {
            median: 160.0,
            sigma: 0.65,
            min: 1,
            max: 2_048,
        },
    };
    let a = poisson(&traffic, requests, T0_NS, "req-", seed);
    let engines = (0..4).map(|i| EngineConfig::new(&format!("vllm-{i}"))).collect();
    (config(engines, seed), a)
}

/// `replay`: the given arrivals on `sources` default instances.
pub fn replay(seed: u64, arrivals: Vec<Arrival>, sources: usize) -> (SimConfig, Vec<Arrival>) {
    let engines = (0..sources.max(1))
        .map(|i| EngineConfig::new(&format!("vllm-{i}")))
        .collect();
    (config(engines, seed), sorted(arrivals))
}
