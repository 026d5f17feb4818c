//! The diagnosis corpus: simulated runs on which the detectors are measured (`tokenscope corpus`, the table of
//! `docs/FINDINGS.md`). Each case is one instance of a hardware profile, chunked prefill on or off, a load
//! (ordinary chat traffic below capacity, or ten minutes of the real Azure conversation trace replayed below and above
//! capacity) and, or not, one planted incident. A planted incident is found when a finding of its kind names its
//! requests; a finding of an incident kind that names none of them is false. The clean twins (nothing planted) must
//! give none.

use std::path::Path;

use rayon::prelude::*;

use crate::arrivals::{self, ReplayOptions};
use crate::engine::{self, EngineConfig, KV_BLOCK_TOKENS};
use crate::scenarios::{self, Incident, T0_NS};
use crate::{Profile, SynthError};
use tokenscope_core::analysis::findings::{Finding, Kind, Thresholds, find};
use tokenscope_core::analysis::summary::Slo;
use tokenscope_core::trace::Trace;

/// The real arrivals the replays use, relative to the repository's root.
pub const AZURE_10_MIN: &str = "tests/data/real/azure_conv_first_10min.csv";

/// When the incident is planted, seconds after the start.
const PLANT_AT_S: f64 = 20.0;

/// Which traffic a case carries.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Load {
    /// Chat-like Poisson traffic at the profile's ordinary rate, 120 s of it (150 requests at least).
    Chat,
    /// The Azure conversations, the first `requests` of them, arrivals stretched (`time_scale` > 1: below
    /// capacity) or compressed (< 1: above).
    Azure {
        /// Multiplies the gaps between arrivals.
        time_scale: f64,
        /// Requests replayed.
        requests: usize,
        /// Meant to exceed the instance's capacity.
        above_capacity: bool,
    },
}

/// One run of the corpus.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    /// The hardware and model.
    pub profile: Profile,
    /// Chunked prefill.
    pub chunked: bool,
    /// The traffic.
    pub load: Load,
    /// What is planted, if anything.
    pub plant: Option<Incident>,
}

impl Profile {
    /// Ordinary chat requests a second one instance serves without a queue: a fifth to a third of its capacity.
    fn chat_rate(self) -> f64 {
        match self {
            Profile::H100 => 1.5,
            Profile::L4 => 0.3,
            Profile::Cpu => 0.05,
        }
    }

    /// The longest planted prompt: three quarters of the KV cache (96k tokens fit an H100's; an L4's takes 46,800,
    /// a CPU's 24,576), so that others still run beside it.
    fn max_prompt(self) -> u32 {
        self.capacity().0 * KV_BLOCK_TOKENS * 3 / 4
    }

    /// The token budget of a step with chunked prefill: the incident scenarios' 20,480 on a GPU (a 96k prompt in
    /// five chunks), llama.cpp's default batch of 2,048 on a CPU.
    fn budget(self) -> u32 {
        match self {
            Profile::H100 | Profile::L4 => 20_480,
            Profile::Cpu => 2_048,
        }
    }

    /// Replay speeds below and above this profile's capacity for the Azure conversations (4.8 requests/s of
    /// ~1,000-token prompts), and how many requests to replay.
    fn azure_loads(self) -> [Load; 2] {
        let (below, above, requests) = match self {
            Profile::H100 => (2.0, 0.5, 1_200),
            Profile::L4 => (8.0, 1.0, 400),
            Profile::Cpu => (200.0, 5.0, 150),
        };
        [
            Load::Azure {
                time_scale: below,
                requests,
                above_capacity: false,
            },
            Load::Azure {
                time_scale: above,
                requests,
                above_capacity: true,
            },
        ]
    }
}

impl Case {
    /// A short name: `h100-8b chunked azure x0.5 + long-prefill`.
    pub fn name(&self) -> String {
        let load = match self.load {
            Load::Chat => "chat".to_owned(),
            Load::Azure { time_scale, .. } => format!("azure x{time_scale}"),
        };
        let plant = self.plant.map_or("clean".to_owned(), |p| format!("+ {}", p.name()));
        format!(
            "{} {} {load} {plant}",
            self.profile.name(),
            if self.chunked { "chunked" } else { "unchunked" }
        )
    }

    /// True when the load is meant to exceed the instance's capacity.
    pub fn overloaded(&self) -> bool {
        matches!(
            self.load,
            Load::Azure {
                above_capacity: true,
                ..
            }
        )
    }

    /// Simulates the case. `root` is the repository's root (for the replayed arrivals).
    ///
    /// # Errors
    /// The arrivals file cannot be read.
    pub fn simulate(&self, root: &Path, seed: u64) -> Result<Trace, SynthError> {
        let p = self.profile;
        let mut arrivals = match self.load {
            Load::Chat => {
                let rate = p.chat_rate();
                // Two minutes of it, or 150 requests on slow hardware: enough for an ordinary prefill to show, the planted
                // requests a few percent of them.
                #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "a small count")]
                let n = (rate * 120.0).round() as usize;
                arrivals::poisson(&scenarios::light_traffic(rate), n.max(150), T0_NS, "req-", seed)
            }
            Load::Azure {
                time_scale, requests, ..
            } => arrivals::replay(
                &root.join(AZURE_10_MIN),
                ReplayOptions {
                    time_scale,
                    limit: Some(requests),
                    window_s: None,
                },
                T0_NS,
            )?,
        };
        if let Some(incident) = self.plant {
            arrivals.extend(incident.requests_fitting(PLANT_AT_S, p.max_prompt()));
        }
        arrivals.sort_by(|a, b| a.at_ns.cmp(&b.at_ns).then_with(|| a.id.cmp(&b.id)));
        let (kv_blocks, max_num_seqs) = p.capacity();
        let engine = EngineConfig {
            chunked_prefill: self.chunked,
            max_num_batched_tokens: if self.chunked { p.budget() } else { 32_768 },
            max_num_seqs,
            kv_blocks,
            prefix_cache_blocks: kv_blocks as usize * KV_BLOCK_TOKENS as usize / arrivals::PREFIX_BLOCK_TOKENS as usize,
            cost: p.cost(),
            ..EngineConfig::new("engine-0")
        };
        Ok(engine::simulate(&scenarios::config(vec![engine], seed), &arrivals))
    }
}

/// Every case: 3 profiles × chunked on and off × 3 loads × 4 plants (none and each incident).
pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    for profile in Profile::ALL {
        for chunked in [true, false] {
            let [below, above] = profile.azure_loads();
            for load in [Load::Chat, below, above] {
                for plant in std::iter::once(None).chain(Incident::ALL.map(Some)) {
                    out.push(Case {
                        profile,
                        chunked,
                        load,
                        plant,
                    });
                }
            }
        }
    }
    out
}

/// The kinds a planted incident is found by.
fn kind_of(incident: Incident) -> Kind {
    match incident {
        Incident::Interrupts => Kind::DecodeInterrupted,
        Incident::LongPrefill => Kind::PrefillMonopoly,
        Incident::Mistrigger => Kind::EosMistrigger,
    }
}

/// The kinds that report incidents (one event with a culprit), as opposed to conditions and data checks.
pub const INCIDENT_KINDS: [Kind; 3] = [Kind::DecodeInterrupted, Kind::PrefillMonopoly, Kind::EosMistrigger];

/// What the detectors made of one case.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The case.
    pub case: Case,
    /// Whether the planted incident was found (`None` when nothing was planted).
    pub found: Option<bool>,
    /// Findings of the incident kinds that name no planted request, by kind.
    pub false_findings: Vec<Kind>,
    /// Whether an overload finding came out.
    pub overload: bool,
    /// Whether a chronic-interference finding came out.
    pub chronic: bool,
    /// Requests in the trace.
    pub requests: usize,
    /// The largest prefill of a request not planted, over its instance's ordinary one.
    pub largest_ordinary_ratio: f64,
    /// The largest prefill of a planted request, over its instance's ordinary one.
    pub planted_ratio: Option<f64>,
}

/// True when a finding names one of the planted requests.
fn names_planted(trace: &Trace, f: &Finding, planted: &[String]) -> bool {
    f.requests
        .iter()
        .any(|&r| planted.iter().any(|p| p == trace.request_id(r)))
}

/// Runs every case on rayon and judges the findings (default objectives, these thresholds).
///
/// # Errors
/// The first case that could not be simulated.
pub fn run(cases: &[Case], root: &Path, th: &Thresholds) -> Result<Vec<Outcome>, SynthError> {
    run_each(cases, root, th, &|_, _, _| {})
}

/// [`run`], handing each case's trace and findings to `also` too (a test's further check of every case).
///
/// # Errors
/// The first case that could not be simulated.
pub fn run_each(
    cases: &[Case],
    root: &Path,
    th: &Thresholds,
    also: &(dyn Fn(&Case, &Trace, &[Finding]) + Sync),
) -> Result<Vec<Outcome>, SynthError> {
    cases
        .par_iter()
        .map(|case| {
            let trace = case.simulate(root, 1)?;
            let findings = find(&trace, &Slo::DEFAULT, th);
            also(case, &trace, &findings);
            let planted: Vec<String> = case
                .plant
                .map(|p| p.requests(0.0).into_iter().map(|a| a.id).collect())
                .unwrap_or_default();
            let found = case.plant.map(|p| {
                findings
                    .iter()
                    .any(|f| f.kind == kind_of(p) && names_planted(&trace, f, &planted))
            });
            let false_findings = findings
                .iter()
                .filter(|f| INCIDENT_KINDS.contains(&f.kind) && !names_planted(&trace, f, &planted))
                .map(|f| f.kind)
                .collect();
            let ratios = tokenscope_core::analysis::findings::prefill_ratios(&trace);
            let is_planted = |r: usize| planted.iter().any(|p| p == trace.request_id(r as u32));
            let largest = |planted_side: bool| {
                ratios
                    .iter()
                    .enumerate()
                    .filter(|&(r, _)| is_planted(r) == planted_side)
                    .filter_map(|(_, x)| *x)
                    .reduce(f64::max)
            };
            Ok(Outcome {
                largest_ordinary_ratio: largest(false).unwrap_or(0.0),
                planted_ratio: largest(true),
                case: case.clone(),
                found,
                false_findings,
                overload: findings.iter().any(|f| f.kind == Kind::Overload),
                chronic: findings.iter().any(|f| f.kind == Kind::ChronicInterference),
                requests: trace.request_count(),
            })
        })
        .collect()
}

/// The tables of `docs/FINDINGS.md`: per incident kind, planted found and missed and false findings on the clean
/// twins and elsewhere, per profile; then the conditions per load; then every case.
pub fn report(outcomes: &[Outcome]) -> String {
    let mut out = String::new();
    out.push_str("| detector | profile | planted | found | missed | false on clean twins | false elsewhere |\n");
    out.push_str("|---|---|---:|---:|---:|---:|---:|\n");
    for incident in Incident::ALL {
        let kind = kind_of(incident);
        for profile in Profile::ALL {
            let of: Vec<&Outcome> = outcomes.iter().filter(|o| o.case.profile == profile).collect();
            let planted: Vec<&&Outcome> = of.iter().filter(|o| o.case.plant == Some(incident)).collect();
            let found = planted.iter().filter(|o| o.found == Some(true)).count();
            let false_clean: usize = of
                .iter()
                .filter(|o| o.case.plant.is_none())
                .map(|o| o.false_findings.iter().filter(|&&k| k == kind).count())
                .sum();
            let false_other: usize = of
                .iter()
                .filter(|o| o.case.plant.is_some())
                .map(|o| o.false_findings.iter().filter(|&&k| k == kind).count())
                .sum();
            out.push_str(&format!(
                "| {} | {} | {} | {found} | {} | {false_clean} | {false_other} |\n",
                kind.name(),
                profile.name(),
                planted.len(),
                planted.len() - found,
            ));
        }
    }
    out.push_str("\n| condition | profile | runs above capacity | found | runs below capacity | found (false) |\n");
    out.push_str("|---|---|---:|---:|---:|---:|\n");
    for profile in Profile::ALL {
        let of: Vec<&Outcome> = outcomes
            .iter()
            .filter(|o| o.case.profile == profile && matches!(o.case.load, Load::Azure { .. }))
            .collect();
        let above: Vec<&&Outcome> = of.iter().filter(|o| o.case.overloaded()).collect();
        let below: Vec<&&Outcome> = of.iter().filter(|o| !o.case.overloaded()).collect();
        out.push_str(&format!(
            "| overload | {} | {} | {} | {} | {} |\n",
            profile.name(),
            above.len(),
            above.iter().filter(|o| o.overload).count(),
            below.len(),
            below.iter().filter(|o| o.overload).count(),
        ));
    }
    out.push_str(
        "\n| case | requests | largest prefill / ordinary: others, planted | planted found | false incident findings \
         | overload | chronic interference |\n",
    );
    out.push_str("|---|---:|---|---|---|---|---|\n");
    for o in outcomes {
        let falses = if o.false_findings.is_empty() {
            "none".to_owned()
        } else {
            o.false_findings.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
        };
        let planted_ratio = o.planted_ratio.map_or("-".to_owned(), |x| format!("{x:.1}"));
        out.push_str(&format!(
            "| {} | {} | {:.1}, {planted_ratio} | {} | {falses} | {} | {} |\n",
            o.case.name(),
            o.requests,
            o.largest_ordinary_ratio,
            match o.found {
                None => "-",
                Some(true) => "yes",
                Some(false) => "**missed**",
            },
            if o.overload { "yes" } else { "no" },
            if o.chronic { "yes" } else { "no" },
        ));
    }
    out
}
