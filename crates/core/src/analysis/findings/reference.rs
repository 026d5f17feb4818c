//! Findings from a re-scored run (`tokenscope rescore`): emitted tokens the model itself would almost never emit
//! (off its distribution: a serving defect), and stop tokens the dice drew where the model meant to go on.

use super::words::names;
use super::{Context, Detector, Finding, Kind, MAX_LISTED_REQUESTS, Severity};
use crate::analysis::reference::{OFF_DISTRIBUTION_P, Verdict, first_choice_text, percent, verdict};
use crate::analysis::tokens::display_text;
use crate::trace::{Reference, Trace};

/// A stop token the reference gives less than this, emitted where its first choice was another token, was drawn by
/// the dice against the model's intent.
pub const ACCIDENT_MAX_P: f64 = 0.5;

/// The detector of [`Kind::OffDistribution`].
pub(super) struct OffDistribution;

/// The detector of [`Kind::SamplingAccident`].
pub(super) struct SamplingAccident;

/// The reference's own first choice, in words: `"the" (75 %)`.
fn first_choice(trace: &Trace, r: &Reference) -> String {
    let text = first_choice_text(trace, r);
    match r.top_logprob {
        Some(lp) => format!("{text:?} ({})", percent(lp.exp())),
        None => format!("{text:?}"),
    }
}

/// What the reference gave the emitted token, in words.
fn given(r: &Reference) -> String {
    let listed = r.listed.map_or_else(|| "listed".to_owned(), |k| k.to_string());
    match (r.logprob, r.rank) {
        (Some(lp), Some(k)) => format!("{} (rank {k})", percent(lp.exp())),
        (Some(lp), None) => format!("{} (below its {listed} most probable)", percent(lp.exp())),
        (None, _) => format!("less than any of its {listed} most probable"),
    }
}

/// The emitted token `t` in words.
fn emitted(trace: &Trace, t: usize) -> String {
    format!(
        "{:?}",
        display_text(
            trace,
            trace.tokens.token_id[t],
            trace.texts.get(trace.tokens.text[t]),
            trace.tokens.special[t]
        )
    )
}

/// The time of token `t`, as a finding's range.
fn range_of(trace: &Trace, tokens: &[usize]) -> (i64, i64) {
    let times = tokens.iter().map(|&t| trace.tokens.emitted_ns[t]);
    let from = times.clone().min().unwrap_or(0);
    let to = times.max().unwrap_or(0).max(from + 1);
    (from, to)
}

impl Detector for OffDistribution {
    fn kind(&self) -> Kind {
        Kind::OffDistribution
    }

    /// The emitted tokens the reference gives less than [`OFF_DISTRIBUTION_P`] (or does not list), as one finding:
    /// the least probable first. Critical: the model would not have written them at any temperature served.
    fn detect(&self, cx: &Context<'_>) -> Vec<Finding> {
        let trace = cx.trace;
        let refs = &trace.references;
        let mut off: Vec<Reference> = (0..refs.len())
            .map(|i| refs.row(i))
            .filter(|r| verdict(r) == Verdict::OffDistribution)
            .collect();
        if off.is_empty() {
            return Vec::new();
        }
        // The least probable first; a token not listed is less probable than any listed one.
        off.sort_by(|a, b| {
            let p = |r: &Reference| r.logprob.unwrap_or(f64::NEG_INFINITY);
            p(a).total_cmp(&p(b)).then(a.token.cmp(&b.token))
        });
        let worst = off[0];
        let t = worst.token as usize;
        let mut requests: Vec<u32> = off.iter().map(|r| r.request).collect();
        requests.sort_unstable();
        requests.dedup();
        let summary = format!(
            "{} of {} re-scored tokens were off the model's distribution (under {} by the reference, the same model \
             asked again): {}; the least likely, {}'s token {} {}, which the reference gives {} where it would choose \
             {}: not a draw of the dice but the serving (a kernel, quantization or batching fault) or another model",
            off.len(),
            refs.len(),
            percent(OFF_DISTRIBUTION_P),
            names(trace, &requests),
            trace.request_id(worst.request),
            trace.tokens.index[t],
            emitted(trace, t),
            given(&worst),
            first_choice(trace, &worst),
        );
        let mut tokens: Vec<usize> = off.iter().map(|r| r.token as usize).collect();
        let (from_ns, to_ns) = range_of(trace, &tokens);
        if let Some(rest) = tokens.get_mut(1..) {
            rest.sort_unstable();
        }
        let subject = worst.request;
        requests.retain(|&r| r != subject);
        requests.insert(0, subject);
        requests.truncate(MAX_LISTED_REQUESTS);
        vec![Finding {
            kind: Kind::OffDistribution,
            severity: Severity::Critical,
            summary,
            from_ns,
            to_ns,
            requests,
            steps: Vec::new(),
            tokens,
        }]
    }
}

impl Detector for SamplingAccident {
    fn kind(&self) -> Kind {
        Kind::SamplingAccident
    }

    /// Stop and special tokens emitted where the reference gives them less than [`ACCIDENT_MAX_P`] (but not so
    /// little as to be off its distribution) and would itself have chosen another token: one finding per request.
    fn detect(&self, cx: &Context<'_>) -> Vec<Finding> {
        let trace = cx.trace;
        let refs = &trace.references;
        let mut out = Vec::new();
        for i in 0..refs.len() {
            let r = refs.row(i);
            let t = r.token as usize;
            let Some(lp) = r.logprob else { continue };
            if verdict(&r) != Verdict::Sampled
                || lp.exp() >= ACCIDENT_MAX_P
                || !trace.is_special_token(trace.tokens.token_id[t], trace.tokens.special[t])
            {
                continue;
            }
            let temperature = trace
                .requests
                .temperature
                .at(r.request as usize)
                .map_or_else(String::new, |x| format!(" at temperature {x}"));
            let summary = format!(
                "{}'s answer stopped at token {} on {} drawn by sampling{temperature}: the reference (the same model \
                 asked again) gives it {} and would have gone on with {}; the dice, not the model: a lower \
                 temperature or top-p keeps such a stop from being drawn",
                trace.request_id(r.request),
                trace.tokens.index[t],
                emitted(trace, t),
                given(&r),
                first_choice(trace, &r),
            );
            let (from_ns, to_ns) = range_of(trace, &[t]);
            out.push(Finding {
                kind: Kind::SamplingAccident,
                severity: Severity::Warning,
                summary,
                from_ns,
                to_ns,
                requests: vec![r.request],
                steps: Vec::new(),
                tokens: vec![t],
            });
        }
        out
    }
}
