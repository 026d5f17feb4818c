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

use rayon::prelude::*;

use super::words::{duration, multiple, range, row_u32};
use super::{Context, Detector, Finding, Kind, MAX_LISTED_REQUESTS, Severity};
use crate::analysis::metrics::{median, request_metrics};
use crate::analysis::stats::thousands;
use crate::trace::{NULL_U32, Trace, opt_u32};

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

    /// Per instance with steps, in windows of a minute from the trace's start: a window whose decode tokens (at
    /// least 200) owe `chronic_prefill_share` or more of their time to other requests' prefill, through
    /// `chronic_token_share` or more of them (many tokens slowed, not a few stalled), is interfered; consecutive
    /// ones make an episode. Two passes over the tokens, the second only when there is an episode; nothing is
    /// sorted or kept per token.
    fn detect(&self, cx: &Context<'_>) -> Vec<Finding> {
        let (trace, th) = (cx.trace, cx.th);
        let origin = trace.start_ns();
        let window_of = |g: &Gap| usize::try_from((trace.tokens.emitted_ns[g.token] - origin) / WINDOW_NS).unwrap_or(0);
        let mut sources: Vec<(&u32, &std::ops::Range<usize>)> = cx.source_rows().iter().collect();
        sources.sort_by_key(|(s, _)| **s);
        // Each instance on its own core.
        let per_source = |(&source, rows): (&u32, &std::ops::Range<usize>)| -> Vec<Finding> {
            let Some(base) = cx.prefill_times().decode_only_step(source) else {
                return Vec::new();
            };
            let mut windows: Vec<Window> = Vec::new();
            visit_gaps(cx, source, rows.clone(), base, |g| {
                let w = window_of(&g);
                if windows.len() <= w {
                    windows.resize(w + 1, Window::default());
                }
                windows[w].add(&g);
            });
            // Episodes: runs of consecutive interfered windows, as ranges of window indices.
            let mut episodes: Vec<std::ops::Range<usize>> = Vec::new();
            for (w, win) in windows.iter().enumerate() {
                if !win.interfered(th) {
                    continue;
                }
                match episodes.last_mut() {
                    Some(e) if e.end == w => e.end = w + 1,
                    _ => episodes.push(w..w + 1),
                }
            }
            if episodes.is_empty() {
                return Vec::new();
            }
            let mut found: Vec<Episode> = episodes.iter().map(|_| Episode::default()).collect();
            visit_gaps(cx, source, rows.clone(), base, |g| {
                let w = window_of(&g);
                let k = episodes.partition_point(|e| e.end <= w);
                if let (Some(e), Some(f)) = (episodes.get(k), found.get_mut(k))
                    && e.contains(&w)
                {
                    f.add(trace, &g);
                }
            });
            found.into_iter().map(|e| finding(trace, source, base, e)).collect()
        };
        sources.into_par_iter().flat_map_iter(per_source).collect()
    }
}

/// What a window of a minute adds up to.
#[derive(Debug, Clone, Copy, Default)]
struct Window {
    tokens: usize,
    slowed: usize,
    total: i64,
    owed: i64,
}

impl Window {
    fn add(&mut self, g: &Gap) {
        self.tokens += 1;
        self.total += g.itl;
        self.owed += g.owed;
        if g.owed > 0 {
            self.slowed += 1;
        }
    }

    /// Enough tokens, a large enough share of the time owed, through a large enough share of the tokens.
    #[allow(clippy::cast_precision_loss)] // ns and counts far below 2^53
    fn interfered(&self, th: &super::Thresholds) -> bool {
        self.tokens >= MIN_TOKENS
            && self.total > 0
            && self.owed as f64 >= th.chronic_prefill_share * self.total as f64
            && self.slowed as f64 >= th.chronic_token_share * self.tokens as f64
    }
}

/// What an episode's finding says, gathered in one pass.
#[derive(Debug, Default)]
struct Episode {
    window: Window,
    slowed_itls: Vec<i64>,
    mixed: usize,
    /// Per request: the time it owed, and its token that owed the most (owed, token).
    /// Indexed by request row (a lookup for each of millions of tokens); untouched requests have no token.
    by_request: Vec<(i64, (i64, usize))>,
    from: Option<i64>,
    to: Option<i64>,
}

impl Episode {
    fn add(&mut self, trace: &Trace, g: &Gap) {
        self.window.add(g);
        if g.owed > 0 {
            self.slowed_itls.push(g.itl);
        }
        if g.mixed {
            self.mixed += 1;
        }
        if self.by_request.is_empty() {
            self.by_request = vec![(0, (-1, usize::MAX)); trace.request_count()];
        }
        let Some(e) = self.by_request.get_mut(g.request as usize) else {
            return;
        };
        e.0 += g.owed;
        if g.owed > e.1.0 || (g.owed == e.1.0 && g.token < e.1.1) {
            e.1 = (g.owed, g.token);
        }
        let emitted = trace.tokens.emitted_ns[g.token];
        self.from = Some(self.from.map_or(emitted - g.itl, |f| f.min(emitted - g.itl)));
        self.to = Some(self.to.map_or(emitted, |t| t.max(emitted)));
    }
}

/// [`Kind::ChronicInterference`]'s findings alone, unsorted.
pub fn chronic_interference(trace: &Trace, th: &super::Thresholds) -> Vec<Finding> {
    ChronicInterference.detect(&Context::new(trace, &crate::analysis::summary::Slo::default(), th))
}

/// Visits the decode tokens of the instance's requests (request by request) with what they owe to other requests'
/// prefill.
fn visit_gaps(cx: &Context<'_>, source: u32, rows: std::ops::Range<usize>, base: i64, mut visit: impl FnMut(Gap)) {
    let trace = cx.trace;
    let (it, tk) = (&trace.iterations, &trace.tokens);
    let starts = &it.start_ns[rows.clone()];
    // Per step of the instance: how many requests' prompts it computed, and which when one (so that "another
    // request's prompt" is a lookup, not a walk, for each of millions of tokens).
    let prompts: Vec<(u32, u32)> = rows
        .clone()
        .map(|row| {
            let mut count = 0u32;
            let mut only = NULL_U32;
            for (q, _) in cx.prefills().of(trace, row) {
                count += 1;
                only = q;
            }
            (count, only)
        })
        .collect();
    let other = |row: usize, r: u32| {
        let (count, only) = prompts[row - rows.start];
        count > 1 || (count == 1 && only != r)
    };
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
            let prefilled = window.clone().any(|row| other(row, r));
            visit(Gap {
                request: r,
                token: t,
                itl,
                owed: if prefilled { (itl - base).max(0) } else { 0 },
                mixed: prefilled && own.is_some_and(|row| other(row, r)),
            });
        }
    }
}

/// The finding of one episode.
#[allow(clippy::cast_precision_loss)] // ns and counts far below 2^53
fn finding(trace: &Trace, source: u32, base: i64, e: Episode) -> Finding {
    let Episode {
        window,
        mut slowed_itls,
        mixed,
        by_request,
        from,
        to,
    } = e;
    let (total, owed) = (window.total, window.owed);
    let share = 100.0 * owed as f64 / total.max(1) as f64;
    let n_slowed = slowed_itls.len();
    let slowed_median = median(&mut slowed_itls).unwrap_or(0);
    // The requests hurt most: the most time owed to prefill.
    let mut merged: Vec<(u32, i64)> = by_request
        .iter()
        .enumerate()
        .filter(|(_, (_, (_, t)))| *t != usize::MAX)
        .map(|(r, &(o, _))| (row_u32(r), o))
        .collect();
    merged.sort_by_key(|&(r, o)| (std::cmp::Reverse(o), r));
    let mut tpots: Vec<i64> = merged
        .iter()
        .filter_map(|&(r, _)| request_metrics(trace, r).tpot_ns)
        .map(|t| t.round() as i64)
        .collect();
    let tpot = median(&mut tpots);
    let (from, to) = (from.unwrap_or(0), to.unwrap_or(0));
    let on = trace.label(source).map_or(String::new(), |s| format!(" on {s}"));
    let mut summary = format!(
        "Decodes{on} spent {share:.0} % of their time behind other requests' prefill for {}: {} of {} tokens waited \
         through a prompt's computation and took {} (median) where a decode-only step takes {} ({}×)",
        duration(to - from),
        thousands(n_slowed as u64),
        thousands(window.tokens as u64),
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
    let token = requests
        .first()
        .and_then(|&s| by_request.get(s as usize))
        .map(|&(_, (_, t))| t);
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
