//! Chronic prefill interference: decodes slowed, minute after minute, by other requests' prompts computed in the
//! same steps (chunked prefill) or in steps the decodes waited through (prefill-first scheduling). Not one stall: a
//! share of the instance's decode time. One finding per episode (consecutive windows of a minute), with that share,
//! the inter-token latency tokens had with and without prefill in their way, the TPOT requests got against what
//! decode-only steps give, and what would help.
//!
//! A decode token's wait is its inter-token latency (ITL); its steps are those that started after its previous
//! token, up to its own. The wait it owes to prefill is its ITL beyond what a decode-only step of its instance takes
//! (their median duration), when one of its steps computed another request's prompt. Criteria are shares of time,
//! so they hold on any hardware.

use std::fmt::Write as _;

use rustc_hash::FxHashMap as HashMap;

use super::words::{duration, multiple, range, row_u32};
use super::{Context, Detector, Finding, Kind, MAX_LISTED_REQUESTS, Severity};
use crate::analysis::metrics::{median, request_metrics};
use crate::analysis::stats::thousands;
use crate::trace::{Trace, opt_u32};

/// The window episodes are made of.
const WINDOW_NS: i64 = 60_000_000_000;

/// Decode tokens a window needs to judge it: fewer make a share of nothing.
const MIN_TOKENS: usize = 200;

/// The detector of [`Kind::ChronicInterference`].
pub(super) struct ChronicInterference;

/// One decode token, as this detector sees it.
struct Gap {
    request: u32,
    token: usize,
    itl: i64,
    /// The wait it owes to other requests' prefill (0 when none of its steps computed a prompt).
    owed: i64,
    /// Its own step computed a prompt too (chunked prefill), rather than only steps it waited through.
    mixed: bool,
}

impl Detector for ChronicInterference {
    fn kind(&self) -> Kind {
        Kind::ChronicInterference
    }

    /// Per instance with steps, in windows of a minute: a window whose decode tokens (at least 200) owe
    /// `chronic_prefill_share` or more of their time to other requests' prefill, through `chronic_token_share` or
    /// more of them (many tokens slowed, not a few stalled), is interfered; consecutive ones make an episode.
    fn detect(&self, cx: &Context<'_>) -> Vec<Finding> {
        let (trace, th) = (cx.trace, cx.th);
        let mut out = Vec::new();
        let mut sources: Vec<(&u32, &std::ops::Range<usize>)> = cx.source_rows().iter().collect();
        sources.sort_by_key(|(s, _)| **s);
        for (&source, rows) in sources {
            let Some(base) = decode_only_step(cx, rows.clone()) else {
                continue;
            };
            let gaps = gaps_of(cx, source, rows.clone(), base);
            let Some(first) = gaps.first().map(|g| trace.tokens.emitted_ns[g.token]) else {
                continue;
            };
            let window = |g: &Gap| (trace.tokens.emitted_ns[g.token] - first) / WINDOW_NS;
            // Windows: (index, first gap, end gap), gaps being in time order.
            let mut a = 0;
            let mut episode: Vec<usize> = Vec::new();
            let flush = |episode: &mut Vec<usize>, out: &mut Vec<Finding>| {
                if !episode.is_empty() {
                    let chosen: Vec<&Gap> = episode.iter().map(|&k| &gaps[k]).collect();
                    out.push(finding(trace, source, base, &chosen));
                    episode.clear();
                }
            };
            while a < gaps.len() {
                let w = window(&gaps[a]);
                let mut b = a;
                while b < gaps.len() && window(&gaps[b]) == w {
                    b += 1;
                }
                let total: i64 = gaps[a..b].iter().map(|g| g.itl).sum();
                let owed: i64 = gaps[a..b].iter().map(|g| g.owed).sum();
                let slowed = gaps[a..b].iter().filter(|g| g.owed > 0).count();
                #[allow(clippy::cast_precision_loss)] // ns and counts far below 2^53
                let interfered = b - a >= MIN_TOKENS
                    && total > 0
                    && owed as f64 >= th.chronic_prefill_share * total as f64
                    && slowed as f64 >= th.chronic_token_share * (b - a) as f64;
                let follows = episode.last().is_some_and(|&k| window(&gaps[k]) + 1 == w);
                if interfered {
                    if !follows {
                        flush(&mut episode, &mut out);
                    }
                    episode.extend(a..b);
                } else {
                    flush(&mut episode, &mut out);
                }
                a = b;
            }
            flush(&mut episode, &mut out);
        }
        out
    }
}

/// [`Kind::ChronicInterference`]'s findings alone, unsorted.
pub fn chronic_interference(trace: &Trace, th: &super::Thresholds) -> Vec<Finding> {
    ChronicInterference.detect(&Context::new(trace, &crate::analysis::summary::Slo::default(), th))
}

/// The median duration of the instance's steps that computed no prompt: what a decode token takes without prefill
/// in its way. `None` when every step computed one (nothing to compare with).
fn decode_only_step(cx: &Context<'_>, rows: std::ops::Range<usize>) -> Option<i64> {
    let it = &cx.trace.iterations;
    let mut d: Vec<i64> = rows
        .filter(|&row| cx.prefills().of(cx.trace, row).next().is_none())
        .filter(|&row| it.num_decode_reqs[row].is_none_or(|n| n > 0))
        .map(|row| it.end_ns[row] - it.start_ns[row])
        .filter(|&d| d > 0)
        .collect();
    median(&mut d)
}

/// The decode tokens of the instance's requests, in time order, with what they owe to other requests' prefill.
fn gaps_of(cx: &Context<'_>, source: u32, rows: std::ops::Range<usize>, base: i64) -> Vec<Gap> {
    let trace = cx.trace;
    let (it, tk) = (&trace.iterations, &trace.tokens);
    let starts = &it.start_ns[rows.clone()];
    let mut out = Vec::new();
    for r in 0..row_u32(trace.request_count()) {
        if trace.requests.source[r as usize] != source {
            continue;
        }
        let tokens = trace.tokens_of(r);
        for t in tokens.start + 1..tokens.end {
            if tk.index[t] != tk.index[t - 1] + 1 {
                continue;
            }
            let (prev, emitted) = (tk.emitted_ns[t - 1], tk.emitted_ns[t]);
            let itl = emitted - prev;
            if itl <= 0 {
                continue;
            }
            let own = opt_u32(tk.iter_row[t]).map(|o| o as usize).filter(|o| rows.contains(o));
            let first = rows.start + starts.partition_point(|&s| s < prev);
            let window = match own {
                Some(own) => first.min(own)..own + 1,
                None => first..rows.start + starts.partition_point(|&s| s < emitted),
            };
            let other = |row: usize| cx.prefills().of(trace, row).any(|(q, _)| q != r);
            let prefilled = window.clone().any(other);
            out.push(Gap {
                request: r,
                token: t,
                itl,
                owed: if prefilled { (itl - base).max(0) } else { 0 },
                mixed: prefilled && own.is_some_and(other),
            });
        }
    }
    out.sort_by_key(|g| (tk.emitted_ns[g.token], g.token));
    out
}

/// The finding of one episode.
#[allow(clippy::cast_precision_loss)] // ns and counts far below 2^53
fn finding(trace: &Trace, source: u32, base: i64, gaps: &[&Gap]) -> Finding {
    let total: i64 = gaps.iter().map(|g| g.itl).sum();
    let owed: i64 = gaps.iter().map(|g| g.owed).sum();
    let share = 100.0 * owed as f64 / total.max(1) as f64;
    let mut slowed: Vec<i64> = gaps.iter().filter(|g| g.owed > 0).map(|g| g.itl).collect();
    let n_slowed = slowed.len();
    let slowed_median = median(&mut slowed).unwrap_or(0);
    let mixed = gaps.iter().filter(|g| g.mixed).count();
    // The requests hurt most: the most time owed to prefill.
    let mut owed_by: HashMap<u32, i64> = HashMap::default();
    for g in gaps {
        *owed_by.entry(g.request).or_default() += g.owed;
    }
    let mut merged: Vec<(u32, i64)> = owed_by.into_iter().collect();
    merged.sort_by_key(|&(r, o)| (std::cmp::Reverse(o), r));
    let mut tpots: Vec<i64> = merged
        .iter()
        .filter_map(|&(r, _)| request_metrics(trace, r).tpot_ns)
        .map(|t| t.round() as i64)
        .collect();
    let tpot = median(&mut tpots);
    let from = gaps.first().map_or(0, |g| trace.tokens.emitted_ns[g.token] - g.itl);
    let to = gaps.last().map_or(0, |g| trace.tokens.emitted_ns[g.token]);
    let on = trace.label(source).map_or(String::new(), |s| format!(" on {s}"));
    let mut summary = format!(
        "Decodes{on} spent {share:.0} % of their time behind other requests' prefill for {}: {} of {} tokens waited \
         through a prompt's computation and took {} (median) where a decode-only step takes {} ({}×)",
        duration(to - from),
        thousands(n_slowed as u64),
        thousands(gaps.len() as u64),
        duration(slowed_median),
        duration(base),
        multiple(slowed_median as f64 / base.max(1) as f64),
    );
    if let Some(tpot) = tpot {
        let _ = write!(
            summary,
            "; the {} request{} decoding had a TPOT of {} (median) against about {} without it",
            thousands(merged.len() as u64),
            if merged.len() == 1 { "" } else { "s" },
            duration(tpot),
            duration(base)
        );
    }
    let advice = if mixed * 2 >= n_slowed {
        "Prompts were computed in the decodes' own steps (chunked prefill): a smaller token budget per step \
         (max_num_batched_tokens) trades some TTFT for TPOT; prefill/decode disaggregation removes the interference"
    } else {
        "Decodes waited through steps that computed only prompts (prefill first): chunked prefill bounds each stall to \
         a chunk; prefill/decode disaggregation removes the interference"
    };
    let _ = write!(summary, ". {advice}");
    let requests: Vec<u32> = merged.iter().take(MAX_LISTED_REQUESTS).map(|&(r, _)| r).collect();
    // The subject's token that owed the most.
    let token = requests.first().and_then(|&s| {
        gaps.iter()
            .filter(|g| g.request == s)
            .max_by_key(|g| (g.owed, std::cmp::Reverse(g.token)))
            .map(|g| g.token)
    });
    let (from_ns, to_ns) = range(from, to);
    Finding {
        kind: Kind::ChronicInterference,
        severity: Severity::Warning,
        summary,
        from_ns,
        to_ns,
        requests,
        steps: Vec::new(),
        tokens: token.into_iter().collect(),
    }
}
