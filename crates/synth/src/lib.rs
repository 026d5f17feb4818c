//! `tokenscope synth`: a small, honest simulator of a continuous-batching engine that writes realistic traces.
//! Real token-level production traces are not public; this is the source of the demo, of the test traces for every
//! view and finding, and of the benchmark workload.
//!
//! - [`cost`]: how long a step takes (a roofline model of an 8 B model on one H100-class GPU);
//! - [`sampler`]: a synthetic vocabulary and top-k candidates with realistic ranks;
//! - [`arrivals`]: Poisson traffic, or a replay of a real request trace (Mooncake, Azure);
//! - [`from_trace`]: a replay of any tokenscope trace, with the engine configuration inferred from its steps;
//! - [`overrides`]: changes to the engines' configuration (`--set KEY=VALUE`), applied after the scenario's;
//! - [`engine`]: the scheduler (vLLM-like), the KV and prefix caches, several instances;
//! - [`speculation`]: speculative decoding (drafts, verify steps, acceptance by position);
//! - [`scenarios`]: the named scenarios, three of them incidents and one their clean baseline;
//! - [`fit`]: a profile fitted on a real run's steps, [`fidelity`]: a simulated run against the real one;
//! - [`corpus`]: the diagnosis corpus, simulated incidents judged by the findings.
//!
//! Its own crate (`tokenscope-synth`) on the core: nothing in the core imports it.

pub mod arrivals;
pub mod choice;
pub mod corpus;
pub mod cost;
pub mod disagg;
pub mod engine;
pub mod engine_config;
pub mod fidelity;
pub mod fit;
pub mod from_trace;
pub mod overrides;
pub mod sampler;
pub mod scenarios;
pub mod sglang_otlp;
pub mod speculation;
pub mod xlarge;

use std::path::PathBuf;

use arrivals::{Arrival, ArrivalsError, ReplayOptions};
pub use choice::ProfileChoice;
pub use cost::Profile;
use engine::SimConfig;
pub use overrides::{Overrides, Setting};
pub use scenarios::Incident;
use tokenscope_core::trace::Trace;
use tokenscope_core::trace::instances::InstanceRole;

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
    /// Ten times `large`: 500,000 requests, ~100 M output tokens, written part by part (`.parquet` only).
    Xlarge,
    /// A replay of a real request trace (`--arrivals`).
    Replay,
}

impl Scenario {
    /// Every scenario with its command-line name.
    pub const ALL: [(Scenario, &'static str); 8] = [
        (Scenario::PrefillInterruptsDecode, "prefill-interrupts-decode"),
        (Scenario::EosMistrigger, "eos-mistrigger"),
        (Scenario::LongPrefill, "long-prefill"),
        (Scenario::Mixed, "mixed"),
        (Scenario::Steady, "steady"),
        (Scenario::Large, "large"),
        (Scenario::Xlarge, "xlarge"),
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
            Scenario::Xlarge => 500_000,
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
    /// The hardware and model every instance stands for: a named profile or a fitted one.
    pub profile: ProfileChoice,
    /// Chunked prefill on or off on every instance (`None`: as the scenario sets it).
    pub chunked_prefill: Option<bool>,
    /// An incident planted in the traffic, this many seconds after the start, on the first instance.
    pub plant: Option<(Incident, f64)>,
}

/// Why a scenario could not be generated.
#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    /// `replay` without `--arrivals` (or `--from-trace`).
    #[error(
        "the replay scenario needs --arrivals FILE (a Mooncake JSONL or Azure CSV request trace) or --from-trace \
         TRACE (a trace tokenscope opens)"
    )]
    NoArrivals,
    /// An option out of its range.
    #[error("{0}")]
    BadOption(String),
    /// The arrivals file could not be read.
    #[error(transparent)]
    Arrivals(#[from] ArrivalsError),
    /// The trace could not be written (`xlarge`, written as it is simulated).
    #[error(transparent)]
    Write(#[from] tokenscope_core::format::WriteError),
}

/// The app's demo trace: the `mixed` scenario with seed 1, as `tokenscope synth --scenario mixed` writes
/// `sample_traces/demo.parquet` (a test keeps the two the same). Made when asked, in about 0.15 s of a release build,
/// rather than carried in the binary (3.1 MB of Parquet).
pub fn demo() -> Trace {
    let options = SynthOptions {
        scenario: Scenario::Mixed,
        ..SynthOptions::replay_defaults()
    };
    // `mixed` reads no file and takes no option that can be out of range.
    generate(&options).unwrap_or_default()
}

/// Simulates a scenario.
pub fn generate(options: &SynthOptions) -> Result<Trace, SynthError> {
    generate_with(options, &Overrides::default())
}

/// Simulates a scenario with the engines' configuration changed by `set` (on top of the option flags).
///
/// # Errors
/// An option out of its range, `replay` without `--arrivals`, or an arrivals file that cannot be read.
pub fn generate_with(options: &SynthOptions, set: &Overrides) -> Result<Trace, SynthError> {
    let requests = options.requests.unwrap_or_else(|| options.scenario.default_requests());
    let seed = options.seed;
    check_time_scale(options)?;
    let (mut config, arrivals) = match options.scenario {
        Scenario::PrefillInterruptsDecode => scenarios::prefill_interrupts_decode(seed, requests),
        Scenario::EosMistrigger => scenarios::eos_mistrigger(seed, requests),
        Scenario::LongPrefill => scenarios::long_prefill_scenario(seed, requests),
        Scenario::Mixed => scenarios::mixed(seed, requests),
        Scenario::Steady => scenarios::steady(seed, requests),
        Scenario::Large => scenarios::large(seed, requests),
        Scenario::Xlarge => return Err(SynthError::BadOption(xlarge::IN_PARTS.to_owned())),
        Scenario::Replay => {
            let path = options.arrivals.as_ref().ok_or(SynthError::NoArrivals)?;
            let arrivals = arrivals::replay(path, replay_options(options), scenarios::T0_NS)?;
            scenarios::replay(seed, arrivals, options.sources)
        }
    };
    configure(&mut config, &flag_overrides(options).then(set), &[])?;
    simulate(&config, arrivals, options.plant)
}

/// Applies `overrides` to the engines of `config`, and its disaggregation, if any.
///
/// # Errors
/// A transfer key without a disaggregation, or more instances than the simulator serves.
fn configure(config: &mut SimConfig, overrides: &Overrides, given: &[disagg::Role]) -> Result<(), SynthError> {
    overrides.apply(&mut config.engines).map_err(SynthError::BadOption)?;
    let count = |role| u32::try_from(given.iter().filter(|&&r| r == role).count()).unwrap_or(u32::MAX);
    let (prefill, decode) = (count(disagg::Role::Prefill), count(disagg::Role::Decode));
    if given.len() == config.engines.len() && prefill + decode > 0 {
        // A disaggregated trace, replayed as it ran: its prefill instances hand their requests to its decode ones.
        if overrides.disaggregation.is_some() {
            return Err(SynthError::BadOption(format!(
                "--set disaggregation: the trace is disaggregated already ({prefill} prefill and {decode} decode \
                 instance(s)) and is replayed so; the transfer keys change its KV transfers"
            )));
        }
        config.roles = given.to_vec();
        config.disaggregation = Some(disagg::Disaggregation {
            prefill,
            decode,
            transfer: overrides.transfer_cost(),
        });
    } else {
        config.roles = Vec::new();
        config.disaggregation = overrides.disaggregation().map_err(SynthError::BadOption)?;
    }
    let per_instance = match config.disaggregation {
        Some(_) if !config.roles.is_empty() => 1,
        Some(d) => (d.prefill + d.decode) as usize,
        None => 1,
    };
    let total = config.engines.len() * per_instance;
    if total > overrides::MAX_INSTANCES {
        return Err(SynthError::BadOption(format!(
            "{total} instances ({} x {per_instance}): the simulator serves at most {}; give fewer with --set \
             instances=N or a smaller disaggregation",
            config.engines.len(),
            overrides::MAX_INSTANCES
        )));
    }
    Ok(())
}

/// A tokenscope trace served again: the new trace and what the replay assumed.
#[derive(Debug, Clone)]
pub struct TraceReplay {
    /// The simulated trace.
    pub trace: Trace,
    /// The engines as inferred from the replayed trace, before any override (see [`from_trace::infer_engines`]).
    pub inferred: Vec<from_trace::InferredEngine>,
    /// The overrides applied, as `key=value` words.
    pub applied: Vec<String>,
    /// What else the replay changed: figures replaced, requests routed rather than pinned.
    pub notes: Vec<String>,
}

/// Serves the requests of `source` (a loaded tokenscope trace) again on engines configured as its steps suggest,
/// changed by the option flags and `set`. Requests keep their ids, arrival times and lengths (see
/// [`from_trace::arrivals`]); each goes to the instance of its own source, unless `set` changes the number of
/// instances: then they are routed least-loaded. `options.scenario`, `arrivals` and `sources` are not used.
///
/// # Errors
/// An option out of its range, or no request to replay (the trace has none in the window and limit given).
pub fn replay_trace(source: &Trace, options: &SynthOptions, set: &Overrides) -> Result<TraceReplay, SynthError> {
    check_time_scale(options)?;
    let inferred = from_trace::infer_engines(source);
    let overrides = flag_overrides(options).then(set);
    let mut config = scenarios::config(inferred.iter().map(|e| e.config.clone()).collect(), options.seed);
    let engines = &config.engines;
    if engines.len() > overrides::MAX_INSTANCES && overrides.instances.is_none() {
        return Err(SynthError::BadOption(format!(
            "the trace has {} sources, and the simulator serves at most {} instances: give --set instances=N to \
             route its requests over fewer",
            engines.len(),
            overrides::MAX_INSTANCES
        )));
    }
    // The trace's instances' roles, kept when it is disaggregated and its instances are replayed one for one.
    let roles = source.instance_roles();
    let given: Vec<disagg::Role> = inferred
        .iter()
        .map(|e| match roles.get(&e.source) {
            Some(InstanceRole::Prefill) => disagg::Role::Prefill,
            Some(InstanceRole::Decode) => disagg::Role::Decode,
            _ => disagg::Role::Both,
        })
        .collect();
    let keep = if overrides.instances.is_none() { &given[..] } else { &[] };
    configure(&mut config, &overrides, keep)?;
    let pinned = config.engines.len() == inferred.len();
    let pins: Vec<u32> = inferred.iter().map(|e| e.source).collect();
    let (arrivals, clamped) = from_trace::arrivals(source, pinned.then_some(&pins[..]), replay_options(options));
    if arrivals.is_empty() {
        return Err(SynthError::BadOption(
            "no request to replay: the trace has none (in the window and limit given)".to_owned(),
        ));
    }
    // The simulation adds step times to arrivals: they must leave room below i64's 2262.
    if arrivals.iter().any(|a| a.at_ns > LATEST_ARRIVAL_NS) {
        return Err(SynthError::BadOption(format!(
            "--time-scale {}: the replay's arrivals would run past the year 2200; give a smaller scale or a --window",
            options.replay.time_scale
        )));
    }
    let mut notes = clamped.notes();
    let profile_note = overrides.profile.clone().unwrap_or_default().error_note();
    notes.push(profile_note.clone());
    if !pinned {
        notes.push(format!(
            "requests routed least-loaded over {} instances (the trace has {})",
            config.engines.len(),
            inferred.len()
        ));
    }
    if let Some(d) = &config.disaggregation {
        notes.push(if config.roles.is_empty() {
            d.describe()
        } else {
            d.describe_as_given()
        });
    }
    if let Some(model) = &source.meta.model {
        config.model.clone_from(model);
    }
    let mut trace = simulate(&config, arrivals, options.plant)?;
    trace.meta.note = Some(format!("a replay of a trace by tokenscope's simulator: {profile_note}"));
    Ok(TraceReplay {
        trace,
        inferred,
        applied: overrides.describe(),
        notes,
    })
}

/// Serves `source`'s requests again on engines configured by a fitted profile (what `fit --validate` compares
/// with the real run).
///
/// # Errors
/// No request to replay.
pub fn replay_with_profile(source: &Trace, profile: &fit::FittedProfile, seed: u64) -> Result<TraceReplay, SynthError> {
    let options = SynthOptions {
        seed,
        ..SynthOptions::replay_defaults()
    };
    let set = Overrides {
        profile: Some(ProfileChoice::Fitted(std::sync::Arc::new(profile.clone()))),
        ..Overrides::default()
    };
    replay_trace(source, &options, &set)
}

impl SynthOptions {
    /// The options of a plain replay of a trace: its every request, at its own pace, on the default profile.
    pub fn replay_defaults() -> Self {
        SynthOptions {
            scenario: Scenario::Replay,
            seed: 1,
            requests: None,
            arrivals: None,
            replay: ReplayOptions::default(),
            sources: 1,
            prefix_cache_tokens: None,
            profile: ProfileChoice::default(),
            chunked_prefill: None,
            plant: None,
        }
    }
}

/// The latest arrival a replay simulates: 2200-01-01 UTC in ns, 62 years below `i64::MAX`.
const LATEST_ARRIVAL_NS: i64 = 7_258_118_400_000_000_000;

fn check_time_scale(options: &SynthOptions) -> Result<(), SynthError> {
    let scale = options.replay.time_scale;
    if scale.is_finite() && scale > 0.0 {
        Ok(())
    } else {
        Err(SynthError::BadOption(format!(
            "--time-scale {scale}: give a positive number (0.5 plays twice as fast)"
        )))
    }
}

/// The replay's window, speed and limit (`--requests` is a limit when `--limit` is not given).
fn replay_options(options: &SynthOptions) -> ReplayOptions {
    let mut replay = options.replay;
    replay.limit = replay.limit.or(options.requests);
    replay
}

/// The overrides the option flags (`--chunked-prefill`, `--prefix-cache-tokens`, `--profile`) stand for; the default
/// profile changes nothing.
fn flag_overrides(options: &SynthOptions) -> Overrides {
    Overrides {
        chunked_prefill: options.chunked_prefill,
        prefix_cache_tokens: options.prefix_cache_tokens,
        profile: (!options.profile.is_default()).then(|| options.profile.clone()),
        ..Overrides::default()
    }
}

/// Plants the incident, if any, in `arrivals` and runs the simulation.
fn simulate(
    config: &SimConfig,
    mut arrivals: Vec<Arrival>,
    plant: Option<(Incident, f64)>,
) -> Result<Trace, SynthError> {
    if let Some((incident, at_s)) = plant {
        if !(at_s.is_finite() && at_s >= 0.0) {
            return Err(SynthError::BadOption(format!(
                "--plant {}@{at_s}: give a time of 0 s or more",
                incident.name()
            )));
        }
        arrivals.extend(incident.requests(at_s));
        arrivals.sort_by(|a, b| a.at_ns.cmp(&b.at_ns).then_with(|| a.id.cmp(&b.id)));
    }
    Ok(engine::simulate(config, &arrivals))
}
