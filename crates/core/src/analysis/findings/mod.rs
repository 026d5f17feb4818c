//! Findings: automatic diagnosis of the known incident patterns. Each detector (one file each, behind
//! [`Detector`]) is a pure function of a [`Context`] (the trace, the objectives, the [`Thresholds`], and indexes
//! shared by the detectors, built once), linear (or n log n) in tokens and steps. It returns [`Finding`]s that say
//! what happened in one sentence with figures, where (a time range), and who (requests, steps and tokens), for the
//! findings panel, `tokenscope findings`, and tests. Noisy kinds are grouped: one finding per prefill episode, per
//! KV-saturation run, per SLO objective, one for all truncations and one for all token-count mismatches. The
//! detectors of one run work in parallel (rayon).

mod acceptance_collapse;
mod chronic_interference;
mod context;
mod decode_interrupted;
mod eos_mistrigger;
mod from_samples;
mod kv_saturation;
mod overload;
mod preemption_burst;
mod prefill_monopoly;
mod prefill_queueing;
mod rank_imbalance;
mod reference;
mod repetition_loop;
mod slo_violations;
mod slow_transfer;
mod thresholds;
mod token_mismatch;
mod tokens;
mod truncation;
mod words;

use rayon::prelude::*;

use crate::analysis::summary::Slo;
use crate::trace::Trace;

pub use acceptance_collapse::acceptance_collapse;
pub use chronic_interference::chronic_interference;
pub use context::Context;
pub use decode_interrupted::decode_interrupted;
pub use eos_mistrigger::{eos_mistrigger, tokens_needing_candidates};
pub use kv_saturation::kv_saturation;
pub use overload::overload;
pub use preemption_burst::preemption_bursts;
pub use prefill_monopoly::prefill_monopoly;
pub use repetition_loop::repetition_loops;
pub use slo_violations::slo_violations;
pub use thresholds::*;
pub use token_mismatch::token_mismatches;
pub use tokens::{RequestTokens, Texts, TokenChoice, TokenSource, facts_of};
pub use truncation::truncation;

/// Requests listed in a grouped finding; its sentence gives the total.
pub const MAX_LISTED_REQUESTS: usize = 50;

/// A stall, or a wait behind a monopolising prefill, at least this long (ms) is critical: the user sees the
/// answer freeze.
pub const CRITICAL_DELAY_MS: f64 = 1_000.0;

/// One kind of diagnosis: what it finds in a run's [`Context`].
pub trait Detector: Sync {
    /// The kind of its findings.
    fn kind(&self) -> Kind;
    /// For a detector that reads the tokens one by one: its visitor, made from all but the tokens. [`run`] hands it
    /// every request's tokens in the one pass it shares with the other visitors; `None` for a detector that reads no
    /// more of the tokens than each request's facts ([`TokenSource::rows`], [`TokenSource::ends`]).
    fn visitor<'c>(&self, _cx: &'c Context<'c>) -> Option<Box<dyn Visitor<'c> + 'c>> {
        None
    }
    /// Its findings, in no particular order: for a detector with a visitor, that visitor fed a visit of its own.
    fn detect(&self, cx: &Context<'_>) -> Vec<Finding> {
        let Some(mut visitor) = self.visitor(cx) else {
            return Vec::new();
        };
        loop {
            cx.tokens.visit(visitor.texts(), &mut |rt| visitor.see(&rt));
            match visitor.finish() {
                After::Findings(found) => return found,
                After::Again(next) => visitor = next,
            }
        }
    }
}

/// What a detector that reads the tokens one by one makes of them: made before the pass from all but the tokens
/// ([`Detector::visitor`]), handed each request's tokens whole, then asked for its findings.
pub trait Visitor<'c>: Send {
    /// Whether it reads the tokens' ids, texts and special flags.
    fn texts(&self) -> bool {
        false
    }
    /// One request's tokens, whole, in `index` order. What the other requests' tokens say (their facts, their rows)
    /// may not be known yet: a streamed trace learns it in this same pass.
    fn see(&mut self, rt: &RequestTokens<'_>);
    /// Once every request's tokens were seen: its findings, or itself again for one more pass (a detector that must
    /// first learn where to look, as chronic interference learns its episodes).
    fn finish(self: Box<Self>) -> After<'c>;
}

/// What a [`Visitor`] gives once the pass is over.
pub enum After<'c> {
    /// Its findings, in no particular order.
    Findings(Vec<Finding>),
    /// It needs the tokens once more, handed to this visitor.
    Again(Box<dyn Visitor<'c> + 'c>),
}

/// Every detector, in [`Kind::ALL`]'s order.
pub const DETECTORS: [&dyn Detector; 17] = [
    &decode_interrupted::DecodeInterrupted,
    &eos_mistrigger::EosMistrigger,
    &prefill_monopoly::PrefillMonopoly,
    &preemption_burst::PreemptionBurst,
    &kv_saturation::KvSaturation,
    &slo_violations::SloViolations,
    &repetition_loop::RepetitionLoop,
    &truncation::Truncation,
    &token_mismatch::TokenMismatch,
    &overload::Overload,
    &chronic_interference::ChronicInterference,
    &acceptance_collapse::AcceptanceCollapse,
    &slow_transfer::SlowKvTransfer,
    &prefill_queueing::PrefillQueueing,
    &rank_imbalance::RankImbalance,
    &reference::OffDistribution,
    &reference::SamplingAccident,
];

/// What a finding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, clap::ValueEnum)]
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
    /// Requests arrived faster than an instance scheduled them, long enough that its queue never emptied.
    Overload,
    /// Decodes spent a large share of their time behind other requests' prefill, minute after minute.
    ChronicInterference,
    /// Speculative decoding's drafts stopped being accepted, for some requests or for a stretch of time.
    AcceptanceCollapse,
    /// Disaggregated serving: requests spent most of their time to first token moving their KV cache.
    SlowKvTransfer,
    /// Disaggregated serving: requests waited on their prefill instance for most of their time to first token.
    PrefillQueueing,
    /// Requests waited on one instance of a server (a data-parallel rank) while another ran none.
    RankImbalance,
    /// Emitted tokens the model itself, asked again, gives almost no chance: not sampling, a serving defect.
    OffDistribution,
    /// A stop token drawn by sampling where the model, asked again, would have gone on.
    SamplingAccident,
}

impl Kind {
    /// Every kind, in display order.
    pub const ALL: [Kind; 17] = [
        Kind::DecodeInterrupted,
        Kind::EosMistrigger,
        Kind::PrefillMonopoly,
        Kind::PreemptionBurst,
        Kind::KvSaturation,
        Kind::SloViolations,
        Kind::RepetitionLoop,
        Kind::Truncation,
        Kind::TokenMismatch,
        Kind::Overload,
        Kind::ChronicInterference,
        Kind::AcceptanceCollapse,
        Kind::SlowKvTransfer,
        Kind::PrefillQueueing,
        Kind::RankImbalance,
        Kind::OffDistribution,
        Kind::SamplingAccident,
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
            Kind::Overload => "overload",
            Kind::ChronicInterference => "chronic-interference",
            Kind::AcceptanceCollapse => "acceptance-collapse",
            Kind::SlowKvTransfer => "slow-kv-transfer",
            Kind::PrefillQueueing => "prefill-queueing",
            Kind::RankImbalance => "rank-imbalance",
            Kind::OffDistribution => "off-distribution",
            Kind::SamplingAccident => "sampling-accident",
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
            Kind::Overload => "Overload: the queue kept growing",
            Kind::ChronicInterference => "Decodes chronically slowed by prefill",
            Kind::AcceptanceCollapse => "Speculative acceptance collapse",
            Kind::SlowKvTransfer => "Slow KV transfer (disaggregated serving)",
            Kind::PrefillQueueing => "Queueing on the prefill instance (disaggregated serving)",
            Kind::RankImbalance => "Rank imbalance: requests waited beside an idle instance",
            Kind::OffDistribution => "Off-distribution tokens (re-scored: not the dice)",
            Kind::SamplingAccident => "Sampling accident at a stop token (re-scored: the dice)",
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

impl Finding {
    /// What a click on it selects: its subject request, and the subject's token as a position among the request's
    /// tokens (when the first token named is one of its).
    pub fn subject(&self, trace: &Trace) -> (Option<u32>, Option<usize>) {
        let request = self.requests.first().copied();
        let token = match (request, self.tokens.first()) {
            (Some(r), Some(&t)) => {
                let rows = trace.tokens_of(r);
                rows.contains(&t).then(|| t - rows.start)
            }
            _ => None,
        };
        (request, token)
    }
}

/// The kinds that can be judged on a trace streamed from its files ([`find_kinds_over`]): every kind but those of a
/// re-scored run, which read the reference's verdicts of the tokens (a table as large as the tokens) and need the
/// trace loaded.
pub const STREAMABLE: [Kind; 15] = [
    Kind::DecodeInterrupted,
    Kind::EosMistrigger,
    Kind::PrefillMonopoly,
    Kind::PreemptionBurst,
    Kind::KvSaturation,
    Kind::SloViolations,
    Kind::RepetitionLoop,
    Kind::Truncation,
    Kind::TokenMismatch,
    Kind::Overload,
    Kind::ChronicInterference,
    Kind::AcceptanceCollapse,
    Kind::SlowKvTransfer,
    Kind::PrefillQueueing,
    Kind::RankImbalance,
];

/// Every finding, sorted by severity, then `from_ns`, then kind.
pub fn find(trace: &Trace, slo: &Slo, th: &Thresholds) -> Vec<Finding> {
    find_kinds(trace, slo, th, &Kind::ALL)
}

/// The findings of the detectors of `kinds` only, sorted as [`find`] sorts them. The detectors run in parallel and
/// share the indexes of one [`Context`].
pub fn find_kinds(trace: &Trace, slo: &Slo, th: &Thresholds, kinds: &[Kind]) -> Vec<Finding> {
    run(&Context::new(trace, slo, th), kinds)
}

/// The findings of the detectors of `kinds` that are [`STREAMABLE`] on `trace` (its requests, steps, stages and
/// samples) whose tokens are read from `tokens`, sorted as [`find`] sorts them. On a loaded trace and its own tokens,
/// the findings [`find_kinds`] gives of those kinds.
pub fn find_kinds_over(
    trace: &Trace,
    tokens: &dyn TokenSource,
    slo: &Slo,
    th: &Thresholds,
    kinds: &[Kind],
) -> Vec<Finding> {
    let kinds: Vec<Kind> = kinds.iter().copied().filter(|k| STREAMABLE.contains(k)).collect();
    run(&Context::over(trace, tokens, slo, th), &kinds)
}

/// Passes over the tokens a run makes at most: one feeds every visitor; chronic interference asks for one more when
/// it found an episode (to gather it and place its median exactly), and, on a streamed trace whose first token came
/// before every arrival, step and sample, one more to count its windows from there. (A visitor still asking after
/// these is given its findings so far: none is dropped.)
const MAX_PASSES: u32 = 3;

/// The findings of the detectors of `kinds` on one run's context. The detectors that read the tokens one by one
/// share one pass over them ([`TokenSource::visit_all`]; a streamed trace learns each request's facts in it too),
/// then every detector runs on what it gathered, in parallel.
fn run(cx: &Context<'_>, kinds: &[Kind]) -> Vec<Finding> {
    let trace = cx.trace;
    // A trace without times (a saved stream) is judged on what its tokens say, never on their made-up times.
    let untimed_ok = |k: Kind| {
        trace.has_times()
            || matches!(
                k,
                Kind::EosMistrigger
                    | Kind::RepetitionLoop
                    | Kind::Truncation
                    | Kind::TokenMismatch
                    | Kind::OffDistribution
                    | Kind::SamplingAccident
            )
    };
    let chosen: Vec<&dyn Detector> = DETECTORS
        .iter()
        .copied()
        .filter(|d| kinds.contains(&d.kind()) && untimed_ok(d.kind()))
        .collect();
    let made: Vec<Option<Box<dyn Visitor<'_> + '_>>> = chosen.par_iter().map(|&d| d.visitor(cx)).collect();
    let mut visitors = Vec::new();
    let mut rest = Vec::new();
    for (d, v) in chosen.into_iter().zip(made) {
        match v {
            Some(v) => visitors.push(v),
            None => rest.push(d),
        }
    }
    let mut out: Vec<Finding> = Vec::new();
    // One pass, more only for a visitor that asks (a streamed trace's facts are read by the first, visitors or not).
    let mut passes = 0;
    while (!visitors.is_empty() || (passes == 0 && !cx.tokens.ready())) && passes < MAX_PASSES {
        passes += 1;
        cx.tokens.visit_all(&mut visitors);
        let after: Vec<After<'_>> = visitors.into_par_iter().map(Visitor::finish).collect();
        visitors = Vec::new();
        for a in after {
            match a {
                After::Findings(f) => out.extend(f),
                After::Again(v) => visitors.push(v),
            }
        }
    }
    out.extend(rest.par_iter().flat_map_iter(|d| d.detect(cx)).collect::<Vec<_>>());
    out.sort_by_key(|f| (f.severity, f.from_ns, f.kind));
    out
}

/// How far each request's prefill was from an ordinary one of its instance: its prompts' share of the steps' work
/// over the instance's median, the measure `outsized_prefill_factor` is compared with (`None` for requests without a
/// prefill, or on an instance with too few requests to say). For the corpus' report.
pub fn prefill_ratios(trace: &Trace) -> Vec<Option<f64>> {
    let (slo, th) = (Slo::default(), Thresholds::default());
    let cx = Context::new(trace, &slo, &th);
    let times = cx.prefill_times();
    (0..trace.request_count())
        .map(|r| {
            let r = u32::try_from(r).unwrap_or(u32::MAX);
            let t = times.of(r);
            #[expect(clippy::cast_precision_loss, reason = "ns far below 2^53")]
            times
                .ordinary(trace.requests.source[r as usize])
                .filter(|_| t > 0)
                .map(|o| t as f64 / o as f64)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_detectors_are_the_kinds_in_order() {
        assert_eq!(DETECTORS.map(super::Detector::kind), Kind::ALL);
    }
}
