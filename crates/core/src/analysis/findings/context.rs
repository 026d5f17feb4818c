//! What one run of the detectors shares: the trace, objectives and thresholds, and the indexes more than one
//! detector needs, each built once, on first use.

use std::ops::Range;
use std::sync::OnceLock;

use rustc_hash::FxHashMap as HashMap;

use super::Thresholds;
use super::tokens::{TokenSource, facts_of};
use super::words::{range, row_u32};
use crate::analysis::facts::RequestFacts;
use crate::analysis::metrics::RequestMetrics;
use crate::analysis::summary::Slo;
use crate::trace::{NO_STR, NULL_U32, StageKind, Trace};

/// One run of the detectors: what they look at, and the indexes they share. Safe to share between threads: an index
/// two detectors ask for at once is built by one while the other waits.
pub struct Context<'a> {
    /// The trace.
    pub trace: &'a Trace,
    /// The service-level objectives.
    pub slo: &'a Slo,
    /// The thresholds.
    pub th: &'a Thresholds,
    /// What the detectors read of the tokens: the trace itself when it is loaded, else its files streamed.
    pub tokens: &'a dyn TokenSource,
    source_rows: OnceLock<HashMap<u32, Range<usize>>>,
    prefills: OnceLock<PrefillIndex>,
    waits: OnceLock<WaitIndex>,
    preempted: OnceLock<HashMap<u32, Vec<(i64, u32)>>>,
    prefill_times: OnceLock<PrefillTimes>,
}

/// How long each request's prompt held its instance, and what is ordinary per instance: the yardstick of an outsized
/// prefill, in time, on any hardware. What a step took beyond a decode-only step of its instance (their median) is
/// the prompts' work, shared among the prompts it computed in proportion to their tokens (a 600-token prompt sharing
/// a step with a chunk of 20,000 tokens held 3 % of that, not all of it); prefill stages that name no step count
/// whole.
pub(super) struct PrefillTimes {
    by_request: Vec<i64>,
    /// Per source: a decode-only step's duration (median).
    base: HashMap<u32, i64>,
    /// Per source: the 99th percentile (nearest rank) over its requests with a prefill, and how many there are.
    ordinary: HashMap<u32, (i64, usize)>,
}

/// Requests with a prefill an instance needs before its 99th percentile says what a large ordinary prefill takes
/// (with fewer it is the largest, the culprit itself); with fewer, the detectors fall back to counts
/// (`large_prefill_tokens`, `monopoly_steps`).
pub(super) const MIN_PREFILL_PEERS: usize = 100;

impl PrefillTimes {
    fn new(trace: &Trace, prefills: &PrefillIndex) -> Self {
        let (st, it) = (&trace.stages, &trace.iterations);
        // A decode-only step per source (one that computed no prompt and decoded): what a decode token takes
        // without prefill in its way, and the part of every step that is not the prompts' work.
        let mut decode_only: HashMap<u32, Vec<i64>> = HashMap::default();
        for row in 0..it.len() {
            let d = it.end_ns[row] - it.start_ns[row];
            if prefills.of(trace, row).next().is_none() && it.num_decode_reqs.at(row).is_none_or(|n| n > 0) && d > 0 {
                decode_only.entry(it.source[row]).or_default().push(d);
            }
        }
        let base: HashMap<u32, i64> = decode_only
            .into_iter()
            .filter_map(|(s, mut v)| crate::analysis::metrics::median(&mut v).map(|m| (s, m)))
            .collect();
        let mut times = PrefillTimes {
            by_request: vec![0i64; trace.request_count()],
            base,
            ordinary: HashMap::default(),
        };
        for row in 0..it.len() {
            for (q, n) in prefills.of(trace, row) {
                let work = times.work_of_chunk(trace, prefills, row, n);
                if let Some(t) = times.by_request.get_mut(q as usize) {
                    *t += work;
                }
            }
        }
        let by_request = &mut times.by_request;
        for s in 0..st.len() {
            if st.kind[s] == StageKind::Prefill
                && st.iter_row[s].is_none()
                && let Some(t) = by_request.get_mut(st.request[s] as usize)
            {
                *t += (st.end_ns[s] - st.start_ns[s]).max(0);
            }
        }
        let mut per_source: HashMap<u32, Vec<i64>> = HashMap::default();
        for (r, &t) in by_request.iter().enumerate() {
            if t > 0 {
                per_source.entry(trace.requests.source[r]).or_default().push(t);
            }
        }
        // The large end of ordinary traffic: most prompts share a cached prefix and compute little, so a median says
        // what a cached prompt takes; the 99th percentile says what the largest ordinary ones take, heavy tails
        // included, and a few outsized prompts among a hundred requests do not move it.
        times.ordinary = per_source
            .into_iter()
            .map(|(s, mut v)| {
                v.sort_unstable();
                let n = v.len();
                (s, (v[(n * 99).div_ceil(100).max(1) - 1], n))
            })
            .collect();
        times
    }

    /// The time `request`'s prompt took to compute, ns (0 when unknown).
    pub(super) fn of(&self, request: u32) -> i64 {
        self.by_request.get(request as usize).copied().unwrap_or(0)
    }

    /// A decode-only step of `source` (the median duration of its steps that computed no prompt and decoded), ns;
    /// `None` when every step computed a prompt.
    pub(super) fn decode_only_step(&self, source: u32) -> Option<i64> {
        self.base.get(&source).copied()
    }

    /// The work of a chunk of `tokens` prompt tokens in step `row`: the step's duration beyond a decode-only step of
    /// its instance, shared among the step's prompt tokens, ns.
    pub(super) fn work_of_chunk(&self, trace: &Trace, prefills: &PrefillIndex, row: usize, tokens: u32) -> i64 {
        let it = &trace.iterations;
        let total: u64 = prefills.of(trace, row).map(|(_, n)| u64::from(n)).sum();
        let work = (it.end_ns[row] - it.start_ns[row] - self.base.get(&it.source[row]).copied().unwrap_or(0)).max(0);
        share_of(work, u64::from(tokens), total.max(u64::from(tokens)))
    }

    /// An ordinary prefill on `source`, ns, when it has enough requests to say.
    pub(super) fn ordinary(&self, source: u32) -> Option<i64> {
        self.ordinary
            .get(&source)
            .filter(|(m, n)| *n >= MIN_PREFILL_PEERS && *m > 0)
            .map(|(m, _)| *m)
    }
}

impl<'a> Context<'a> {
    /// A run on `trace` with these objectives and thresholds; no index is built yet.
    pub fn new(trace: &'a Trace, slo: &'a Slo, th: &'a Thresholds) -> Self {
        Self::over(trace, trace, slo, th)
    }

    /// A run on `trace` whose tokens are read from `tokens` (a trace loaded without its tokens, whose files stream
    /// them).
    pub fn over(trace: &'a Trace, tokens: &'a dyn TokenSource, slo: &'a Slo, th: &'a Thresholds) -> Self {
        Context {
            trace,
            slo,
            th,
            tokens,
            source_rows: OnceLock::new(),
            prefills: OnceLock::new(),
            waits: OnceLock::new(),
            preempted: OnceLock::new(),
            prefill_times: OnceLock::new(),
        }
    }

    /// The trace's start ([`Trace::start_ns`], its tokens counted), from which times are said.
    pub fn start_ns(&self) -> i64 {
        let trace = self.trace;
        match self.tokens.earliest() {
            None => trace.start_ns(),
            Some(t) if trace.request_count() + trace.iterations.len() + trace.samples.len() == 0 => t,
            Some(t) => trace.start_ns().min(t),
        }
    }

    /// Request `r`'s record and its tokens' facts.
    pub(super) fn facts(&self, r: u32) -> RequestFacts {
        facts_of(self.trace, self.tokens, r)
    }

    /// Request `r`'s figures (TTFT, TPOT, ...), as [`crate::analysis::metrics::request_metrics`] gives them.
    pub(super) fn metrics(&self, r: u32) -> RequestMetrics {
        self.facts(r).metrics()
    }

    /// When request `r` produced its first token: `first_token_ns`, else token 0's time.
    pub(super) fn first_token_ns(&self, r: u32) -> Option<i64> {
        self.facts(r).first_ns()
    }

    /// When request `r` finished: `finished_ns`, else its last token's time.
    pub(super) fn finish_ns(&self, r: u32) -> Option<i64> {
        self.facts(r).finish_ns()
    }

    /// Request `r`'s output tokens: `output_tokens`, else its token records.
    pub(super) fn output_tokens(&self, r: u32) -> u32 {
        self.facts(r).output()
    }

    /// First arrival to last finish of some requests.
    pub(super) fn span_of(&self, rows: &[u32]) -> (i64, i64) {
        let arrival = |r: u32| self.trace.requests.arrival_ns[r as usize];
        let from = rows.iter().map(|&r| arrival(r)).min();
        let to = rows.iter().map(|&r| self.finish_ns(r).unwrap_or(arrival(r))).max();
        range(from.unwrap_or(0), to.unwrap_or(0))
    }

    /// The last token of each request that has tokens: the first request's first, the rest ascending.
    pub(super) fn last_tokens(&self, rows: &[u32]) -> Vec<usize> {
        let mut out: Vec<usize> = rows.iter().filter_map(|&r| self.tokens.rows(r).last()).collect();
        if out.len() > 1 {
            out[1..].sort_unstable();
        }
        out
    }

    /// The iteration rows of each source (label id), sorted by start.
    pub(super) fn source_rows(&self) -> &HashMap<u32, Range<usize>> {
        self.source_rows.get_or_init(|| source_rows(self.trace))
    }

    /// The prefill chunks of every step.
    pub(super) fn prefills(&self) -> &PrefillIndex {
        self.prefills.get_or_init(|| PrefillIndex::new(self.trace))
    }

    /// The spans during which requests waited (queued or preempted), per source.
    pub(super) fn waits(&self) -> &WaitIndex {
        self.waits.get_or_init(|| WaitIndex::new(self.trace))
    }

    /// Each request's prefill time, and an ordinary one per instance.
    pub(super) fn prefill_times(&self) -> &PrefillTimes {
        self.prefill_times
            .get_or_init(|| PrefillTimes::new(self.trace, self.prefills()))
    }

    /// The explicit preempted stages per source: (start, request), sorted.
    pub(super) fn preempted(&self) -> &HashMap<u32, Vec<(i64, u32)>> {
        self.preempted.get_or_init(|| preempted_stages(self.trace))
    }

    /// Distinct requests of `source` whose preempted stage starts in `[from, to]`, in time order.
    pub(super) fn preempted_in(&self, source: u32, from: i64, to: i64) -> Vec<u32> {
        let Some(v) = self.preempted().get(&source) else {
            return Vec::new();
        };
        let first = v.partition_point(|s| s.0 < from);
        let mut out: Vec<u32> = Vec::new();
        for &(at, r) in &v[first..] {
            if at > to {
                break;
            }
            if !out.contains(&r) {
                out.push(r);
            }
        }
        out
    }

    /// The tokens recomputed after the preemptions of `source` in `[from, to]`: a preempted request's KV cache is
    /// dropped, so its prompt and the tokens it had generated by then are computed again when it resumes. Prompts
    /// of unknown length count as none.
    pub(super) fn recomputed_tokens(&self, source: u32, from: i64, to: i64) -> u64 {
        let Some(v) = self.preempted().get(&source) else {
            return 0;
        };
        let trace = self.trace;
        let first = v.partition_point(|s| s.0 < from);
        v[first..]
            .iter()
            .take_while(|&&(at, _)| at <= to)
            .map(|&(at, r)| {
                let prompt = trace.requests.input_tokens.get(r as usize).unwrap_or(0);
                u64::from(prompt) + self.tokens.emitted_before(r, at)
            })
            .sum()
    }
}

/// The steps a decode token waited through, as rows of its instance's steps (`rows`, sorted by start; `starts` their
/// start times): those that started after the token before it (`prev`), up to the token's own step (`iter_row`) when
/// it is one of them, else up to its emission; and that own step.
pub(super) fn waited_steps(
    rows: &Range<usize>,
    starts: &[i64],
    gap: (i64, i64),
    iter_row: u32,
) -> (Range<usize>, Option<usize>) {
    WaitedSteps::default().steps(rows, starts, gap, iter_row)
}

/// [`waited_steps`] for the tokens of one request in turn: each search starts where the one before ended, as a
/// request's tokens come in time order and most wait through a step or two (two binary searches over an instance's
/// steps for each of a hundred million tokens were a fifth of a streamed `findings`).
#[derive(Debug, Clone, Copy)]
pub(super) struct WaitedSteps {
    after_prev: Cursor,
    before_emitted: Cursor,
}

impl Default for WaitedSteps {
    fn default() -> Self {
        let start = Cursor { at: 0, x: i64::MIN };
        WaitedSteps {
            after_prev: start,
            before_emitted: start,
        }
    }
}

impl WaitedSteps {
    /// As [`waited_steps`]; `rows` and `starts` the same at each call.
    pub(super) fn steps(
        &mut self,
        rows: &Range<usize>,
        starts: &[i64],
        (prev, emitted): (i64, i64),
        iter_row: u32,
    ) -> (Range<usize>, Option<usize>) {
        let own = crate::trace::opt_u32(iter_row)
            .map(|o| o as usize)
            .filter(|o| rows.contains(o));
        let first = rows.start + self.after_prev.first_not_before(starts, prev);
        let window = match own {
            Some(own) => first.min(own)..own + 1,
            None => first..rows.start + self.before_emitted.first_not_before(starts, emitted),
        };
        (window, own)
    }
}

/// A search of sorted times that starts from its last answer when the time asked did not go back.
#[derive(Debug, Clone, Copy)]
struct Cursor {
    at: usize,
    x: i64,
}

impl Cursor {
    /// Steps walked one by one before searching the rest.
    const WALK: usize = 8;

    /// `starts.partition_point(|&s| s < x)`.
    fn first_not_before(&mut self, starts: &[i64], x: i64) -> usize {
        let mut p = if x >= self.x { self.at.min(starts.len()) } else { 0 };
        let walk_end = (p + Self::WALK).min(starts.len());
        while p < walk_end && starts[p] < x {
            p += 1;
        }
        if p == walk_end && p < starts.len() && starts[p] < x {
            p += starts[p..].partition_point(|&s| s < x);
        }
        self.at = p;
        self.x = x;
        p
    }
}

/// `part / whole` of a duration, ns.
pub(super) fn share_of(duration: i64, part: u64, whole: u64) -> i64 {
    let share = i128::from(duration) * i128::from(part) / i128::from(whole.max(1));
    i64::try_from(share).unwrap_or(i64::MAX)
}

/// The iteration rows of each source (label id), sorted by start.
fn source_rows(trace: &Trace) -> HashMap<u32, Range<usize>> {
    trace
        .sources_with_iterations()
        .iter()
        .map(|(s, r)| (*s, r.start as usize..r.end as usize))
        .collect()
}

/// The prefill chunks of every step, as (request, tokens), from the prefill stages that name their step. Steps
/// without such stages fall back to their `num_prefill_tokens`, unattributed (request [`NULL_U32`]), when the
/// trace has no attributed prefill stage at all.
pub(super) struct PrefillIndex {
    start: Vec<u32>,
    chunks: Vec<(u32, u32)>,
    attributed: bool,
}

impl PrefillIndex {
    fn new(trace: &Trace) -> Self {
        let steps = trace.iterations.len();
        let mut start = vec![0u32; steps + 1];
        let is_chunk = |s: usize| trace.stages.kind[s] == StageKind::Prefill && trace.stages.iter_row[s].is_some();
        for s in 0..trace.stages.len() {
            if is_chunk(s)
                && let Some(row) = trace.stages.iter_row[s].map(|r| r as usize).filter(|&r| r < steps)
            {
                start[row + 1] += 1;
            }
        }
        for i in 0..steps {
            start[i + 1] += start[i];
        }
        let mut fill = start.clone();
        let mut chunks = vec![(0u32, 0u32); start[steps] as usize];
        for s in 0..trace.stages.len() {
            if is_chunk(s)
                && let Some(row) = trace.stages.iter_row[s].map(|r| r as usize).filter(|&r| r < steps)
            {
                chunks[fill[row] as usize] = (trace.stages.request[s], trace.stages.tokens[s].unwrap_or(0));
                fill[row] += 1;
            }
        }
        let attributed = !chunks.is_empty();
        PrefillIndex {
            start,
            chunks,
            attributed,
        }
    }

    /// The prefill chunks of step `row`.
    pub(super) fn of<'a>(&'a self, trace: &Trace, row: usize) -> impl Iterator<Item = (u32, u32)> + 'a {
        let attributed = match (self.start.get(row), self.start.get(row + 1)) {
            (Some(&a), Some(&b)) => &self.chunks[a as usize..b as usize],
            _ => &[],
        };
        let anonymous = (!self.attributed)
            .then(|| trace.iterations.num_prefill_tokens.get(row))
            .flatten()
            .filter(|&n| n > 0)
            .map(|n| (NULL_U32, n));
        attributed.iter().copied().chain(anonymous)
    }
}

/// Adds `(request, tokens)` into a list that sums per request.
pub(super) fn add_to(list: &mut Vec<(u32, u64)>, request: u32, tokens: u64) {
    match list.iter_mut().find(|(r, _)| *r == request) {
        Some(e) => e.1 += tokens,
        None => list.push((request, tokens)),
    }
}

/// Spans during which requests waited (queued or preempted), per source: (start, end, request) sorted by start,
/// and the longest span (for a bounded search back from a time).
pub(super) struct WaitIndex {
    by_source: HashMap<u32, Waits>,
}

/// The wait spans of one source, (start, end, request) sorted by start, and the longest span's length.
#[derive(Default)]
struct Waits {
    spans: Vec<(i64, i64, u32)>,
    longest: i64,
}

impl WaitIndex {
    fn new(trace: &Trace) -> Self {
        let mut by_source: HashMap<u32, Waits> = HashMap::default();
        for r in 0..row_u32(trace.request_count()) {
            let ri = r as usize;
            let source = trace.requests.source[ri];
            let mut push = |a: i64, b: i64| {
                if b > a {
                    let e = by_source.entry(source).or_default();
                    e.spans.push((a, b, r));
                    e.longest = e.longest.max(b - a);
                }
            };
            let explicit = trace.explicit_stages_of(r);
            let mut queue_stage = false;
            for s in explicit {
                match trace.stages.kind[s] {
                    StageKind::Queue => {
                        queue_stage = true;
                        push(trace.stages.start_ns[s], trace.stages.end_ns[s]);
                    }
                    StageKind::Preempted => push(trace.stages.start_ns[s], trace.stages.end_ns[s]),
                    _ => {}
                }
            }
            if !queue_stage && let Some(s) = trace.requests.scheduled_ns.at(ri) {
                push(trace.requests.arrival_ns[ri], s);
            }
        }
        for w in by_source.values_mut() {
            w.spans.sort_unstable();
        }
        WaitIndex { by_source }
    }

    /// Requests of `source` other than `except` that waited during `[from, to)`, with the overlap (ns), longest
    /// first.
    pub(super) fn waiting(&self, source: u32, from: i64, to: i64, except: u32) -> Vec<(u32, i64)> {
        let Some(Waits { spans, longest }) = self.by_source.get(&source) else {
            return Vec::new();
        };
        // A span that overlaps `from` started at most `longest` before it.
        let first = spans.partition_point(|s| s.0 < from.saturating_sub(*longest));
        let mut out: Vec<(u32, i64)> = Vec::new();
        for &(a, b, r) in &spans[first..] {
            if a >= to {
                break;
            }
            let overlap = b.min(to) - a.max(from);
            if overlap > 0 && r != except {
                match out.iter_mut().find(|(q, _)| *q == r) {
                    Some(e) => e.1 += overlap,
                    None => out.push((r, overlap)),
                }
            }
        }
        out.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        out
    }
}

/// Explicit preempted stages per source: (start, request), sorted.
fn preempted_stages(trace: &Trace) -> HashMap<u32, Vec<(i64, u32)>> {
    let mut by_source: HashMap<u32, Vec<(i64, u32)>> = HashMap::default();
    for s in 0..trace.stages.len() {
        if trace.stages.kind[s] == StageKind::Preempted {
            let r = trace.stages.request[s];
            let source = trace.requests.source.get(r as usize).copied().unwrap_or(NO_STR);
            by_source.entry(source).or_default().push((trace.stages.start_ns[s], r));
        }
    }
    for v in by_source.values_mut() {
        v.sort_unstable();
    }
    by_source
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_waited_steps_of_a_requests_tokens_in_turn_are_the_searched_ones() {
        // Eight steps of an instance, rows 10..18, starting at these times (two start together).
        let starts = [100, 200, 300, 300, 400, 1_000, 1_100, 5_000];
        let rows = 10..18;
        // Tokens' (previous token, emission, own step): forward, a step or many apart, one own step outside the
        // instance, and a token whose times go back (a clock stepped back): each as a fresh search finds it.
        let gaps = [
            ((50, 150), NULL_U32),
            ((150, 250), 11),
            ((250, 300), NULL_U32),
            ((300, 450), 14),
            ((450, 5_500), NULL_U32),
            ((5_500, 6_000), 3),
            ((120, 310), NULL_U32),
            ((310, 1_050), 15),
        ];
        let mut waits = WaitedSteps::default();
        for (gap, own) in gaps {
            let ((prev, emitted), own_row) = (gap, crate::trace::opt_u32(own).map(|o| o as usize));
            // By hand: from the first step that starts at or after `prev`, to the own step when it is one of the
            // instance's, else to the last that starts before the emission.
            let first = 10 + starts.iter().filter(|&&s| s < prev).count();
            let expected = match own_row.filter(|o| rows.contains(o)) {
                Some(o) => (first.min(o)..o + 1, Some(o)),
                None => (first..10 + starts.iter().filter(|&&s| s < emitted).count(), None),
            };
            assert_eq!(waits.steps(&rows, &starts, gap, own), expected, "{gap:?}");
            assert_eq!(waited_steps(&rows, &starts, gap, own), expected, "{gap:?}");
        }
    }
}
