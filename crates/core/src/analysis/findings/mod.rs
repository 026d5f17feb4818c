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
pub use tokens::{RequestTokens, TokenSource, facts_of};
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
    /// Its findings, in no particular order.
    fn detect(&self, cx: &Context<'_>) -> Vec<Finding>;
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

/// The kinds whose detectors read no more of the tokens than a [`TokenSource`] gives (each request's token rows and
/// ends, and visits of every request's tokens in turn): those that can run on a trace streamed from its files
/// ([`find_kinds_over`]). The others need the trace loaded: they look up tokens by time across requests, or read
/// the candidates.
pub const STREAMABLE: [Kind; 11] = [
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

/// The findings of the detectors of `kinds` on one run's context.
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
    let mut out: Vec<Finding> = DETECTORS
        .par_iter()
        .filter(|d| kinds.contains(&d.kind()) && untimed_ok(d.kind()))
        .flat_map_iter(|d| d.detect(cx))
        .collect();
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
