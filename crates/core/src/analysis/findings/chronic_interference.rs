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
use rustc_hash::FxHashMap as HashMap;

use super::context::WaitedSteps;
use super::words::{duration, multiple, range, row_u32};
use super::{After, Context, Detector, Finding, Kind, MAX_LISTED_REQUESTS, RequestTokens, Severity, Visitor};
use crate::analysis::exact::{Outcome, Second, Tally};
use crate::analysis::metrics::median;
use crate::analysis::stats::thousands;
use crate::trace::{NULL_U32, Trace};

/// The window episodes are made of.
const WINDOW_NS: i64 = 60_000_000_000;

/// Decode tokens a window needs to judge it: fewer make a share of nothing.
const MIN_TOKENS: usize = 200;

/// The detector of [`Kind::ChronicInterference`].
pub(super) struct ChronicInterference;

/// One decode token, as this detector sees it.
struct Gap {
    request: u32,
    /// Its place among its request's tokens.
    token: usize,
    emitted: i64,
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
    /// ones make an episode. The windows are counted in the pass over the tokens that feeds every detector; the
    /// tokens of the episodes' instances are read once more only when there is an episode; nothing is sorted or kept
    /// per token.
    fn visitor<'c>(&self, cx: &'c Context<'c>) -> Option<Box<dyn Visitor<'c> + 'c>> {
        let steps = Steps::new(cx);
        if steps.of.is_empty() {
            return None;
        }
        Some(Box::new(Chronic {
            cx,
            steps,
            // The trace's start before its tokens are read: theirs counts only when earlier than every arrival,
            // step and sample, and the windows are then counted again.
            origin: cx.trace.start_ns(),
            round: Round::Windows,
            windows: HashMap::default(),
            slowed: HashMap::default(),
            episodes: HashMap::default(),
            found: HashMap::default(),
            medians: HashMap::default(),
            second: HashMap::default(),
        }))
    }
}

/// What a pass over the tokens is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Round {
    /// Every decode token, counted into its window.
    Windows,
    /// The tokens of the episodes, gathered into what their findings say, and their slowed latencies in the buckets
    /// that hold their medians, for their exact values.
    Episodes,
}

/// The detector's work across its passes.
struct Chronic<'c> {
    cx: &'c Context<'c>,
    steps: Steps,
    /// Where the windows start.
    origin: i64,
    round: Round,
    /// Per source: its windows of a minute.
    windows: HashMap<u32, Vec<Window>>,
    /// Per source: each window's slowed latencies counted per bucket, so that an episode's median is found in the
    /// same visit that gathers its finding.
    slowed: HashMap<u32, Vec<Tally>>,
    /// Per source: runs of consecutive interfered windows, as ranges of window indices.
    episodes: HashMap<u32, Vec<std::ops::Range<usize>>>,
    /// Per source: what each of its episodes' findings says.
    found: HashMap<u32, Vec<Episode>>,
    /// The median of each episode's slowed latencies.
    medians: HashMap<(u32, usize), i64>,
    /// The episodes whose median is counted exactly in the pass that gathers them.
    second: HashMap<(u32, usize), Second>,
}

/// The window of a token: minutes from `origin`.
fn window_of(origin: i64, g: &Gap) -> usize {
    usize::try_from((g.emitted - origin) / WINDOW_NS).unwrap_or(0)
}

/// The episode of window `w`, if any: its place among its source's episodes (`runs`).
fn episode_of(runs: &[std::ops::Range<usize>], w: usize) -> Option<usize> {
    let k = runs.partition_point(|e| e.end <= w);
    runs.get(k).is_some_and(|e| e.contains(&w)).then_some(k)
}

impl<'c> Visitor<'c> for Chronic<'c> {
    fn see(&mut self, rt: &RequestTokens<'_>) {
        let cx = self.cx;
        let source = cx.trace.decode_source(rt.request);
        match self.round {
            Round::Windows => {
                let (origin, steps) = (self.origin, &self.steps);
                let windows = self.windows.entry(source).or_default();
                let slowed = self.slowed.entry(source).or_default();
                steps.gaps(cx, rt, |g| {
                    let w = window_of(origin, &g);
                    if windows.len() <= w {
                        windows.resize(w + 1, Window::default());
                        slowed.resize_with(w + 1, || Tally::coarse(0, WINDOW_BUCKET_BITS));
                    }
                    windows[w].add(&g);
                    if g.owed > 0 {
                        #[expect(clippy::cast_precision_loss, reason = "ns far below 2^53")]
                        slowed[w].add(g.itl as f64);
                    }
                });
            }
            Round::Episodes => {
                let (Some(runs), Some(found)) = (self.episodes.get(&source), self.found.get_mut(&source)) else {
                    return;
                };
                let (origin, second) = (self.origin, &mut self.second);
                self.steps.gaps(cx, rt, |g| {
                    let Some(k) = episode_of(runs, window_of(origin, &g)) else {
                        return;
                    };
                    if let Some(f) = found.get_mut(k) {
                        f.add(cx.trace, &g);
                    }
                    #[expect(clippy::cast_precision_loss, reason = "ns far below 2^53")]
                    let itl = g.itl as f64;
                    if g.owed > 0
                        && let Some(s) = second.get_mut(&(source, k))
                        && s.wants(itl)
                    {
                        s.add(itl);
                    }
                });
            }
        }
    }

    fn finish(mut self: Box<Self>) -> After<'c> {
        let cx = self.cx;
        match self.round {
            Round::Windows => {
                if cx.start_ns() != self.origin {
                    // A token came before every arrival, step and sample: the windows start there.
                    self.origin = cx.start_ns();
                    self.windows.clear();
                    self.slowed.clear();
                    return After::Again(self);
                }
                for (&source, list) in &self.windows {
                    for (w, win) in list.iter().enumerate() {
                        if !win.interfered(cx.th) {
                            continue;
                        }
                        let runs = self.episodes.entry(source).or_default();
                        match runs.last_mut() {
                            Some(e) if e.end == w => e.end = w + 1,
                            _ => runs.push(w..w + 1),
                        }
                    }
                }
                if self.episodes.is_empty() {
                    return After::Findings(Vec::new());
                }
                // Each episode's median: the bucket that holds it is known from its windows' counts; its exact value
                // is found in the pass that gathers the episode.
                let mut slowed = std::mem::take(&mut self.slowed);
                for (&source, runs) in &self.episodes {
                    let Some(tallies) = slowed.get_mut(&source) else {
                        continue;
                    };
                    for (k, run) in runs.iter().enumerate() {
                        let mut tally = Tally::coarse(0, WINDOW_BUCKET_BITS);
                        for w in run.clone() {
                            if let Some(t) = tallies.get_mut(w) {
                                tally.merge(std::mem::replace(t, Tally::coarse(0, WINDOW_BUCKET_BITS)));
                            }
                        }
                        match tally.finish() {
                            Outcome::Done(d) => {
                                self.medians.insert((source, k), as_ns(d.p50));
                            }
                            Outcome::Second(s) => {
                                self.second.insert((source, k), s);
                            }
                        }
                    }
                }
                self.found = self
                    .episodes
                    .iter()
                    .map(|(&s, runs)| (s, runs.iter().map(|_| Episode::new()).collect()))
                    .collect();
                self.round = Round::Episodes;
                After::Again(self)
            }
            Round::Episodes => {
                let second = std::mem::take(&mut self.second);
                self.medians
                    .extend(second.into_iter().map(|(k, s)| (k, as_ns(s.finish().p50))));
                After::Findings(self.findings())
            }
        }
    }
}

impl Chronic<'_> {
    /// The findings of the episodes, by source.
    fn findings(mut self) -> Vec<Finding> {
        let mut sources: Vec<u32> = self.found.keys().copied().collect();
        sources.sort_unstable();
        let mut out = Vec::new();
        for source in sources {
            let base = self.steps.base.get(&source).copied().unwrap_or(0);
            let list = self.found.remove(&source).unwrap_or_default();
            for (k, e) in list.into_iter().enumerate() {
                let slowed_median = self.medians.get(&(source, k)).copied().unwrap_or(0);
                out.push(finding(self.cx, source, base, e, slowed_median));
            }
        }
        out
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
    #[expect(clippy::cast_precision_loss, reason = "ns and counts far below 2^53")]
    fn interfered(&self, th: &super::Thresholds) -> bool {
        self.tokens >= MIN_TOKENS
            && self.total > 0
            && self.owed as f64 >= th.chronic_prefill_share * self.total as f64
            && self.slowed as f64 >= th.chronic_token_share * self.tokens as f64
    }
}

/// Bits of mantissa of the buckets a window counts its slowed latencies in: a bucket 1/256 of its value wide, so
/// that a window holds a few hundred of them (at 16 bits, the default, tens of thousands: hundreds of MB over the
/// windows of a long trace), and the second count meets, in the bucket of an episode's median, a few thousand distinct
/// latencies.
const WINDOW_BUCKET_BITS: u32 = 8;

/// A latency found by [`Tally`] again in ns (it counts them as `f64`, exact below 2^53).
#[expect(clippy::cast_possible_truncation, reason = "an i64 of ns given as f64")]
fn as_ns(v: Option<f64>) -> i64 {
    v.map_or(0, |v| v as i64)
}

/// What an episode's finding says, gathered in one pass.
#[derive(Debug)]
struct Episode {
    window: Window,
    mixed: usize,
    /// Per request: the time it owed, and its token that owed the most (owed, its place among the request's tokens).
    /// Indexed by request row (a lookup for each of millions of tokens); untouched requests have no token.
    by_request: Vec<(i64, (i64, usize))>,
    from: Option<i64>,
    to: Option<i64>,
}

impl Episode {
    fn new() -> Self {
        Episode {
            window: Window::default(),
            mixed: 0,
            by_request: Vec::new(),
            from: None,
            to: None,
        }
    }

    fn add(&mut self, trace: &Trace, g: &Gap) {
        self.window.add(g);
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
        let emitted = g.emitted;
        self.from = Some(self.from.map_or(emitted - g.itl, |f| f.min(emitted - g.itl)));
        self.to = Some(self.to.map_or(emitted, |t| t.max(emitted)));
    }
}

/// [`Kind::ChronicInterference`]'s findings alone, unsorted.
pub fn chronic_interference(trace: &Trace, th: &super::Thresholds) -> Vec<Finding> {
    ChronicInterference.detect(&Context::new(trace, &crate::analysis::summary::Slo::default(), th))
}

/// The steps of each instance with a decode-only step, as the visits of the decode tokens need them.
struct Steps {
    /// Per source: its step rows.
    of: HashMap<u32, std::ops::Range<usize>>,
    /// Per source: a decode-only step's duration (median).
    base: HashMap<u32, i64>,
    /// Per step row: how many requests' prompts it computed, and which when one (so that "another request's
    /// prompt" is a lookup, not a walk, for each of millions of tokens).
    prompts: Vec<(u32, u32)>,
}

impl Steps {
    fn new(cx: &Context<'_>) -> Self {
        let trace = cx.trace;
        let mut of = HashMap::default();
        let mut base = HashMap::default();
        for (&source, rows) in cx.source_rows() {
            if let Some(b) = cx.prefill_times().decode_only_step(source) {
                of.insert(source, rows.clone());
                base.insert(source, b);
            }
        }
        let prompts = if of.is_empty() {
            Vec::new()
        } else {
            (0..trace.iterations.len())
                .into_par_iter()
                .map(|row| {
                    let mut count = 0u32;
                    let mut only = NULL_U32;
                    for (q, _) in cx.prefills().of(trace, row) {
                        count += 1;
                        only = q;
                    }
                    (count, only)
                })
                .collect()
        };
        Steps { of, base, prompts }
    }

    /// The decode tokens of one request, with what they owe to other requests' prefill (none on an instance
    /// without a decode-only step).
    fn gaps(&self, cx: &Context<'_>, rt: &RequestTokens<'_>, mut visit: impl FnMut(Gap)) {
        let trace = cx.trace;
        let it = &trace.iterations;
        let other = |row: usize, r: u32| {
            let (count, only) = self.prompts[row];
            count > 1 || (count == 1 && only != r)
        };
        let r = rt.request;
        let source = trace.decode_source(r);
        let (Some(rows), Some(&base)) = (self.of.get(&source), self.base.get(&source)) else {
            return;
        };
        let starts = &it.start_ns[rows.clone()];
        let mut waits = WaitedSteps::default();
        for k in 1..rt.len() {
            if rt.index[k] != rt.index[k - 1] + 1 {
                continue;
            }
            let (prev, emitted) = (rt.emitted_ns[k - 1], rt.emitted_ns[k]);
            let itl = emitted - prev;
            if itl <= 0 {
                continue;
            }
            let (window, own) = waits.steps(rows, starts, (prev, emitted), rt.iter_row[k]);
            let prefilled = window.clone().any(|row| other(row, r));
            visit(Gap {
                request: r,
                token: k,
                emitted,
                itl,
                owed: if prefilled { (itl - base).max(0) } else { 0 },
                mixed: prefilled && own.is_some_and(|row| other(row, r)),
            });
        }
    }
}

/// The finding of one episode.
#[expect(clippy::cast_precision_loss, reason = "ns and counts far below 2^53")]
fn finding(cx: &Context<'_>, source: u32, base: i64, e: Episode, slowed_median: i64) -> Finding {
    let trace = cx.trace;
    let Episode {
        window,
        mixed,
        by_request,
        from,
        to,
    } = e;
    let (total, owed) = (window.total, window.owed);
    let share = 100.0 * owed as f64 / total.max(1) as f64;
    let n_slowed = window.slowed;
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
        .filter_map(|&(r, _)| cx.metrics(r).tpot_ns)
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
    let token = requests.first().and_then(|&s| {
        by_request
            .get(s as usize)
            .map(|&(_, (_, k))| cx.tokens.rows(s).start + k)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::trace_of;

    /// 1,000 cycles of four 10 ms decode-only steps and one 50 ms step that also computes another request's prompt;
    /// `v` gets a token at the end of every step (as `tests/findings_windowed.rs`' `chronically_chunked`).
    fn chunked() -> Trace {
        const T0: i64 = 1_764_403_200_000_000_000;
        let at = |ms: i64| T0 + ms * 1_000_000;
        let mut l = vec![format!(
            r#"{{"kind":"request","request_id":"v","source":"e","arrival_ns":{T0},"scheduled_ns":{T0}}}"#
        )];
        let mut t = 0i64;
        for k in 0..5_000i64 {
            let prefill = k % 5 == 4;
            let len = if prefill { 50 } else { 10 };
            let extra = if prefill { r#","num_prefill_tokens":512"# } else { "" };
            l.push(format!(
                r#"{{"kind":"iteration","source":"e","iteration":{k},"start_ns":{},"end_ns":{},"num_decode_reqs":1{extra}}}"#,
                at(t),
                at(t + len)
            ));
            if prefill {
                let (a, b) = (at(t), at(t + len));
                l.push(format!(
                    r#"{{"kind":"request","request_id":"p{k}","source":"e","arrival_ns":{a},"scheduled_ns":{a},"output_tokens":1}}"#
                ));
                l.push(format!(
                    r#"{{"kind":"stage","request_id":"p{k}","stage":"prefill","iteration":{k},"start_ns":{a},"end_ns":{b},"tokens":512}}"#
                ));
                l.push(format!(
                    r#"{{"kind":"token","request_id":"p{k}","index":0,"emitted_ns":{b},"iteration":{k}}}"#
                ));
            }
            l.push(format!(
                r#"{{"kind":"token","request_id":"v","index":{k},"emitted_ns":{},"iteration":{k}}}"#,
                at(t + len)
            ));
            t += len;
        }
        trace_of(&l.join("\n"))
    }

    #[test]
    fn an_episodes_median_is_found_exactly_in_the_visit_that_gathers_it() {
        // 1,000 slowed latencies of 50 ms: the windows count them per bucket in the first visit, the median's value is
        // counted in the second, the one that gathers the episode (`tests/corpus.rs` counts the passes).
        let t = chunked();
        let found = chronic_interference(&t, &super::super::Thresholds::default());
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(
            found[0].summary.contains(
                "1,000 of 4,999 tokens waited through a prompt's computation and took 50.0 ms (median) where a \
                 decode-only step takes 10.0 ms (5.0×)"
            ),
            "{}",
            found[0].summary
        );
    }
}
