//! EOS mis-trigger: an answer that ended on an unlikely stop token, or far earlier than its peers.

use std::fmt::Write as _;

use rustc_hash::FxHashMap as HashMap;

use super::words::{range, row_u32};
use super::{After, Context, Detector, Finding, Kind, RequestTokens, Severity, Thresholds, TokenChoice, Visitor};
use crate::analysis::summary::Slo;
use crate::analysis::tokens::{Rank, display_text};
use crate::trace::{Flag, NO_STR, NULL_U32, Trace, opt_f64, opt_u32};

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
    fn visitor<'c>(&self, cx: &'c Context<'c>) -> Option<Box<dyn Visitor<'c> + 'c>> {
        Some(Box::new(Stops {
            cx,
            stop: cx.trace.labels.lookup("stop"),
            found: Vec::new(),
        }))
    }
}

/// The last token of an answer that ended on a stop token, as the pass over the tokens saw it.
struct Stop {
    request: u32,
    /// Its place among the request's tokens.
    k: usize,
    index: u32,
    token_id: u32,
    text: Option<String>,
    special: Flag,
    iter_row: u32,
    emitted_ns: i64,
    /// The token before it's time, else the request's arrival.
    before_ns: i64,
}

/// The answers that ended on a stop token.
struct Stops<'c> {
    cx: &'c Context<'c>,
    stop: Option<u32>,
    found: Vec<Stop>,
}

impl<'c> Visitor<'c> for Stops<'c> {
    fn texts(&self) -> bool {
        true
    }

    fn see(&mut self, rt: &RequestTokens<'_>) {
        let trace = self.cx.trace;
        let (r, k) = (rt.request, rt.len() - 1);
        let count = u32::try_from(rt.len()).unwrap_or(u32::MAX);
        let text = rt.texts.get(rt.text[k]);
        if !ends_on_stop(
            trace,
            r,
            self.stop,
            (rt.index[k], count),
            (rt.token_id[k], text, rt.special[k]),
        ) {
            return;
        }
        self.found.push(Stop {
            request: r,
            k,
            index: rt.index[k],
            token_id: rt.token_id[k],
            text: text.map(str::to_owned),
            special: rt.special[k],
            iter_row: rt.iter_row[k],
            emitted_ns: rt.emitted_ns[k],
            before_ns: if k > 0 {
                rt.emitted_ns[k - 1]
            } else {
                trace.requests.arrival_ns[r as usize]
            },
        });
    }

    fn finish(self: Box<Self>) -> After<'c> {
        let cx = self.cx;
        let medians = output_medians(cx);
        // The answers a share at a time, in the order the pass met them (their rows in order): the candidates read
        // for one share are let go before the next (those of half a million stop tokens, held at once, were a
        // quarter of a streamed run's peak memory), and each share reads its part of the files.
        let mut out: Vec<Finding> = Vec::new();
        for stops in self.found.chunks(JUDGED_AT_ONCE) {
            out.extend(judged_share(cx, &medians, stops));
        }
        out.sort_by_key(|f| f.requests.first().copied());
        After::Findings(out)
    }
}

/// Answers judged at once: their stop tokens' choices, and the candidates of those that need them, are held together.
const JUDGED_AT_ONCE: usize = 1 << 16;

/// The findings of some of the answers that ended on a stop token.
fn judged_share(cx: &Context<'_>, medians: &HashMap<(u32, u32), (u32, usize)>, stops: &[Stop]) -> Vec<Finding> {
    let rows: Vec<usize> = stops.iter().map(|s| cx.tokens.rows(s.request).start + s.k).collect();
    // The stop tokens' logprob and rank first (sorted by row, looked up by search: no map of every answer); the
    // candidates of those whose rank is not written, or that are unlikely by their probability or rank (the
    // alternative a finding names), after.
    let mut first = cx.tokens.choices(&rows, false);
    first.sort_unstable_by_key(|c| c.0);
    let again: Vec<usize> = first
        .iter()
        .filter(|(_, c)| {
            let (p, rank) = chance(c, NULL_U32);
            c.rank == NULL_U32 || unlikely(cx.th, p, rank)
        })
        .map(|c| c.0)
        .collect();
    let second: HashMap<usize, TokenChoice> = if again.is_empty() {
        HashMap::default()
    } else {
        cx.tokens.choices(&again, true).into_iter().collect()
    };
    let choice_of = |t: usize| {
        second
            .get(&t)
            .or_else(|| first.binary_search_by_key(&t, |c| c.0).ok().map(|k| &first[k].1))
    };
    stops
        .iter()
        .zip(rows)
        .filter_map(|(s, t)| judged(cx, medians, s, t, choice_of(t)))
        .collect()
}

/// A stop token's probability and rank (the chosen token's id `chosen`, for a rank found among its candidates).
fn chance(c: &TokenChoice, chosen: u32) -> (Option<f64>, Rank) {
    (opt_f64(c.logprob).map(f64::exp), rank_of(chosen, c))
}

/// True when a stop token was unlikely: probability under `eos_max_probability`, or rank `eos_min_rank` or worse.
fn unlikely(th: &Thresholds, p: Option<f64>, rank: Rank) -> bool {
    let low_rank = match rank {
        Rank::Known(k) => k >= th.eos_min_rank,
        Rank::BeyondTopK(k) => k.saturating_add(1) >= th.eos_min_rank,
        Rank::Unknown => false,
    };
    low_rank || p.is_some_and(|p| p < th.eos_max_probability)
}

/// The finding of an answer that ended on a stop token (`t`: its row), if its choice or its length says it ended by
/// mistake.
fn judged(
    cx: &Context<'_>,
    medians: &HashMap<(u32, u32), (u32, usize)>,
    s: &Stop,
    t: usize,
    choice: Option<&TokenChoice>,
) -> Option<Finding> {
    let (trace, th) = (cx.trace, cx.th);
    let (r, ri) = (s.request, s.request as usize);
    let output = cx.output_tokens(r);
    let (p, rank) = choice.map_or((None, Rank::Unknown), |c| chance(c, s.token_id));
    let chosen_unlikely = unlikely(th, p, rank);
    let shown = display_text(trace, s.token_id, s.text.as_deref(), s.special);
    let id = trace.request_id(r);
    let index = s.index;
    let summary = if chosen_unlikely {
        let mut text = format!("{id} ended at token {index} on {shown} chosen ");
        match (p, rank) {
            (Some(p), Rank::Unknown) => {
                let _ = write!(text, "with p = {p:.3}");
            }
            (Some(p), rank) => {
                let _ = write!(text, "with p = {p:.3} (rank {rank})");
            }
            (None, rank) => {
                let _ = write!(text, "at rank {rank}");
            }
        }
        if let Some((alt, q)) = choice.and_then(|c| best_alternative(trace, s, c)) {
            let which = if p.is_none_or(|p| q > p) {
                "the most likely token"
            } else {
                "the runner-up"
            };
            let _ = write!(text, "; {which} was “{alt}” (p = {q:.3})");
        }
        text
    } else if p.is_none() && rank == Rank::Unknown {
        let key = (trace.requests.app_id[ri], trace.requests.model[ri]);
        let &(median, peers) = medians.get(&key)?;
        if peers < th.early_eos_min_peers as usize || f64::from(output) >= th.early_eos_factor * f64::from(median) {
            return None;
        }
        let group = match (trace.label(key.0), trace.label(key.1)) {
            (Some(app), _) => format!("its app {app}"),
            (None, Some(model)) => format!("its model {model}"),
            (None, None) => "the trace".to_owned(),
        };
        format!(
            "{id} ended at token {index} on {shown} after {output} tokens, under {:.0} % of the median {median} of \
             {group} ({peers} requests)",
            100.0 * th.early_eos_factor
        )
    } else {
        return None;
    };
    let (from_ns, to_ns) = range(s.before_ns, s.emitted_ns);
    Some(Finding {
        kind: Kind::EosMistrigger,
        severity: if chosen_unlikely {
            Severity::Critical
        } else {
            Severity::Warning
        },
        summary,
        from_ns,
        to_ns,
        requests: vec![r],
        steps: opt_u32(s.iter_row).into_iter().collect(),
        tokens: vec![t],
    })
}

/// [`Kind::EosMistrigger`]'s findings alone, unsorted.
pub fn eos_mistrigger(trace: &Trace, th: &Thresholds) -> Vec<Finding> {
    EosMistrigger.detect(&Context::new(trace, &Slo::default(), th))
}

/// True when request `r` ended on a stop token: its finish reason is `stop` (label id `stop`) or not given, its last
/// token record (`index`, and how many it has) is its last output token, and that token (id, text, special flag)
/// is a stop or special token: flagged special, one of `meta.eos_token_ids`, or a known stop text.
fn ends_on_stop(
    trace: &Trace,
    r: u32,
    stop: Option<u32>,
    (index, count): (u32, u32),
    (token_id, text, special): (u32, Option<&str>, Flag),
) -> bool {
    let reason = trace.requests.finish_reason[r as usize];
    let output = trace.requests.output_tokens.at(r as usize).unwrap_or(count);
    (reason == NO_STR || Some(reason) == stop)
        && index + 1 == output
        && (trace.is_special_token(token_id, special) || text.is_some_and(|s| STOP_TEXTS.contains(&s)))
}

/// The tokens whose candidates the detector reads: the last token of each request that ended on a stop token (its
/// rank when not written, and the alternatives it names). A trace loaded with its candidates on disk reads these.
pub fn tokens_needing_candidates(trace: &Trace) -> Vec<u32> {
    let stop = trace.labels.lookup("stop");
    let tk = &trace.tokens;
    (0..row_u32(trace.request_count()))
        .filter_map(|r| {
            let rows = trace.tokens_of(r);
            let t = rows.clone().last()?;
            let count = u32::try_from(rows.len()).unwrap_or(u32::MAX);
            let text = trace.texts.get(tk.text[t]);
            ends_on_stop(
                trace,
                r,
                stop,
                (tk.index[t], count),
                (tk.token_id[t], text, tk.special[t]),
            )
            .then(|| u32::try_from(t).ok())
            .flatten()
        })
        .collect()
}

/// The rank of a token of id `chosen`: as written, else found among its candidates.
fn rank_of(chosen: u32, c: &TokenChoice) -> Rank {
    if let Some(r) = opt_u32(c.rank) {
        return Rank::Known(r);
    }
    if c.candidates.is_empty() {
        return Rank::Unknown;
    }
    match c
        .candidates
        .iter()
        .position(|k| k.token_id == chosen && k.token_id != NULL_U32)
    {
        Some(k) => Rank::Known(row_u32(k + 1)),
        None => Rank::BeyondTopK(row_u32(c.candidates.len())),
    }
}

/// The most probable candidate other than the chosen token: (text as shown, probability).
fn best_alternative(trace: &Trace, s: &Stop, c: &TokenChoice) -> Option<(String, f64)> {
    c.candidates
        .iter()
        .filter(|k| {
            if s.token_id != NULL_U32 && k.token_id != NULL_U32 {
                k.token_id != s.token_id
            } else {
                k.text != s.text
            }
        })
        .filter(|k| !k.logprob.is_nan())
        .max_by(|a, b| a.logprob.total_cmp(&b.logprob))
        .map(|k| {
            (
                display_text(trace, k.token_id, k.text.as_deref(), k.special),
                k.logprob.exp(),
            )
        })
}

/// The median output length (nearest rank) and the number of requests of each (app, model), over requests with
/// output.
fn output_medians(cx: &Context<'_>) -> HashMap<(u32, u32), (u32, usize)> {
    let trace = cx.trace;
    let mut groups: HashMap<(u32, u32), Vec<u32>> = HashMap::default();
    for r in 0..row_u32(trace.request_count()) {
        let out = cx.output_tokens(r);
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
