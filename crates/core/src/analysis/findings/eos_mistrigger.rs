//! EOS mis-trigger: an answer that ended on an unlikely stop token, or far earlier than its peers.

use std::fmt::Write as _;

use rustc_hash::FxHashMap as HashMap;

use super::words::{range, row_u32};
use super::{Context, Detector, Finding, Kind, Severity, Thresholds};
use crate::analysis::summary::Slo;
use crate::analysis::tokens::{Rank, display_text};
use crate::trace::{NO_STR, NULL_U32, Trace, opt_f64, opt_u32};

/// Known stop-token texts, for traces that neither flag special tokens nor give `meta.eos_token_ids`.
const STOP_TEXTS: [&str; 8] = [
    "<|im_end|>",
    "</s>",
    "<|endoftext|>",
    "<|eot_id|>",
    "<|end_of_text|>",
    "<|end|>",
    "<eos>",
    "<end_of_turn>",
];

/// The detector of [`Kind::EosMistrigger`].
pub(super) struct EosMistrigger;

impl Detector for EosMistrigger {
    fn kind(&self) -> Kind {
        Kind::EosMistrigger
    }

    /// Answers that ended on a stop or special token (flagged special, in `meta.eos_token_ids`, or a known stop text)
    /// chosen with probability below `eos_max_probability` or at rank `eos_min_rank` or worse; or, when the trace
    /// records neither, shorter than `early_eos_factor` × the median output of their app and model (with at least
    /// `early_eos_min_peers` requests). One finding per request; the stop token is the one to select.
    fn detect(&self, cx: &Context<'_>) -> Vec<Finding> {
        let (trace, th) = (cx.trace, cx.th);
        let n = trace.request_count();
        let stop = trace.labels.lookup("stop");
        let medians = output_medians(trace);
        let mut out = Vec::new();
        for r in 0..row_u32(n) {
            let ri = r as usize;
            let tokens = trace.tokens_of(r);
            let Some(t) = ended_on_stop(trace, r, stop) else {
                continue;
            };
            let output = trace.output_tokens(r);
            let p = opt_f64(trace.tokens.logprob[t]).map(f64::exp);
            let rank = rank_of(trace, t);
            let low_rank = match rank {
                Rank::Known(k) => k >= th.eos_min_rank,
                Rank::BeyondTopK(k) => k.saturating_add(1) >= th.eos_min_rank,
                Rank::Unknown => false,
            };
            let low_p = p.is_some_and(|p| p < th.eos_max_probability);
            let shown = display_text(
                trace,
                trace.tokens.token_id[t],
                trace.texts.get(trace.tokens.text[t]),
                trace.tokens.special[t],
            );
            let id = trace.request_id(r);
            let index = trace.tokens.index[t];
            let summary = if low_rank || low_p {
                let mut s = format!("{id} ended at token {index} on {shown} chosen ");
                match (p, rank) {
                    (Some(p), Rank::Unknown) => {
                        let _ = write!(s, "with p = {p:.3}");
                    }
                    (Some(p), rank) => {
                        let _ = write!(s, "with p = {p:.3} (rank {rank})");
                    }
                    (None, rank) => {
                        let _ = write!(s, "at rank {rank}");
                    }
                }
                if let Some((text, q)) = best_alternative(trace, t) {
                    let which = if p.is_none_or(|p| q > p) {
                        "the most likely token"
                    } else {
                        "the runner-up"
                    };
                    let _ = write!(s, "; {which} was “{text}” (p = {q:.3})");
                }
                s
            } else if p.is_none() && rank == Rank::Unknown {
                let key = (trace.requests.app_id[ri], trace.requests.model[ri]);
                let Some(&(median, peers)) = medians.get(&key) else {
                    continue;
                };
                if peers < th.early_eos_min_peers as usize
                    || f64::from(output) >= th.early_eos_factor * f64::from(median)
                {
                    continue;
                }
                let group = match (trace.label(key.0), trace.label(key.1)) {
                    (Some(app), _) => format!("its app {app}"),
                    (None, Some(model)) => format!("its model {model}"),
                    (None, None) => "the trace".to_owned(),
                };
                format!(
                    "{id} ended at token {index} on {shown} after {output} tokens, under {:.0} % of the median {median} \
                     of {group} ({peers} requests)",
                    100.0 * th.early_eos_factor
                )
            } else {
                continue;
            };
            let prev = if t > tokens.start {
                trace.tokens.emitted_ns[t - 1]
            } else {
                trace.requests.arrival_ns[ri]
            };
            let (from_ns, to_ns) = range(prev, trace.tokens.emitted_ns[t]);
            out.push(Finding {
                kind: Kind::EosMistrigger,
                severity: if low_rank || low_p {
                    Severity::Critical
                } else {
                    Severity::Warning
                },
                summary,
                from_ns,
                to_ns,
                requests: vec![r],
                steps: opt_u32(trace.tokens.iter_row[t]).into_iter().collect(),
                tokens: vec![t],
            });
        }
        out
    }
}

/// [`Kind::EosMistrigger`]'s findings alone, unsorted.
pub fn eos_mistrigger(trace: &Trace, th: &Thresholds) -> Vec<Finding> {
    EosMistrigger.detect(&Context::new(trace, &Slo::default(), th))
}

/// True when token row `t` is a stop or special token: flagged special, one of `meta.eos_token_ids`, or a known
/// stop text.
fn is_stop_token(trace: &Trace, t: usize) -> bool {
    trace.is_special_token(trace.tokens.token_id[t], trace.tokens.special[t])
        || trace
            .texts
            .get(trace.tokens.text[t])
            .is_some_and(|s| STOP_TEXTS.contains(&s))
}

/// The tokens whose candidates the detector reads: the last token of each request that ended on a stop token (its
/// rank when not written, and the alternatives it names). A trace loaded with its candidates on disk reads these.
pub fn tokens_needing_candidates(trace: &Trace) -> Vec<u32> {
    let stop = trace.labels.lookup("stop");
    (0..row_u32(trace.request_count()))
        .filter_map(|r| ended_on_stop(trace, r, stop).and_then(|t| u32::try_from(t).ok()))
        .collect()
}

/// The token row request `r` ended on, when its answer ended on a stop token (finish reason `stop`, label id
/// `stop`, or none) as its last output token.
fn ended_on_stop(trace: &Trace, r: u32, stop: Option<u32>) -> Option<usize> {
    let t = trace.tokens_of(r).last()?;
    let reason = trace.requests.finish_reason[r as usize];
    let ends = (reason == NO_STR || Some(reason) == stop)
        && trace.tokens.index[t] + 1 == trace.output_tokens(r)
        && is_stop_token(trace, t);
    ends.then_some(t)
}

/// The rank of token row `t`: as written, else found among its candidates in memory.
fn rank_of(trace: &Trace, t: usize) -> Rank {
    if let Some(r) = opt_u32(trace.tokens.rank[t]) {
        return Rank::Known(r);
    }
    let cands = trace.candidates_of(t);
    if cands.is_empty() {
        return Rank::Unknown;
    }
    let chosen = trace.tokens.token_id[t];
    match trace.candidates.token_id[cands.clone()]
        .iter()
        .position(|&id| id == chosen && id != NULL_U32)
    {
        Some(k) => Rank::Known(row_u32(k + 1)),
        None => Rank::BeyondTopK(row_u32(cands.len())),
    }
}

/// The most probable candidate of token row `t` other than the chosen token: (text as shown, probability).
fn best_alternative(trace: &Trace, t: usize) -> Option<(String, f64)> {
    let chosen = (trace.tokens.token_id[t], trace.tokens.text[t]);
    let c = &trace.candidates;
    trace
        .candidates_of(t)
        .filter(|&k| {
            if chosen.0 != NULL_U32 && c.token_id[k] != NULL_U32 {
                c.token_id[k] != chosen.0
            } else {
                c.text[k] != chosen.1
            }
        })
        .filter(|&k| !c.logprob[k].is_nan())
        .max_by(|&a, &b| c.logprob[a].total_cmp(&c.logprob[b]))
        .map(|k| {
            let text = display_text(trace, c.token_id[k], trace.texts.get(c.text[k]), c.special[k]);
            (text, c.logprob[k].exp())
        })
}

/// The median output length (nearest rank) and the number of requests of each (app, model), over requests with
/// output.
fn output_medians(trace: &Trace) -> HashMap<(u32, u32), (u32, usize)> {
    let mut groups: HashMap<(u32, u32), Vec<u32>> = HashMap::default();
    for r in 0..row_u32(trace.request_count()) {
        let out = trace.output_tokens(r);
        if out > 0 {
            let ri = r as usize;
            groups
                .entry((trace.requests.app_id[ri], trace.requests.model[ri]))
                .or_default()
                .push(out);
        }
    }
    groups
        .into_iter()
        .map(|(k, mut v)| {
            let m = crate::analysis::metrics::median(&mut v).unwrap_or(0);
            (k, (m, v.len()))
        })
        .collect()
}
