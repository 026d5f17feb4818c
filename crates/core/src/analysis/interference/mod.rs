//! Interference in a time range: what the engine did (its steps), who was prefilling, who was decoding and which
//! decodes stalled, who waited in the queue, and who held the engine — each prefilling request's share of the
//! step time and how many requests it delayed. The drag-select panel of the waterfall shows this.

use std::fmt::Write as _;

use rayon::prelude::*;

use super::metrics::ms;
pub use super::range_index::STALL_FACTOR;
use super::range_index::{RangeIndex, is_stall};
use crate::trace::{StageKind, Trace};

pub mod transfers;
pub use transfers::{Transfer, Transfers};

/// The engine steps overlapping the range, all sources together.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Steps {
    /// Steps overlapping the range.
    pub count: u64,
    /// Prompt tokens they computed.
    pub prefill_tokens: u64,
    /// Output tokens they computed.
    pub decode_tokens: u64,
    /// Mean step duration, ms.
    pub mean_ms: f64,
    /// Longest step, ms.
    pub max_ms: f64,
    /// Step time inside the range, summed over sources, ms.
    pub busy_ms: f64,
}

/// A request that computed prompt tokens in the range.
#[derive(Debug, Clone, PartialEq)]
pub struct Prefilling {
    /// Request row.
    pub request: u32,
    /// Prompt tokens computed in steps overlapping the range.
    pub tokens: u64,
    /// Those steps.
    pub steps: u32,
}

/// A request that emitted tokens in the range.
#[derive(Debug, Clone, PartialEq)]
pub struct Decoding {
    /// Request row.
    pub request: u32,
    /// Tokens emitted in the range.
    pub tokens: u32,
    /// Its median inter-token latency over the whole request, ms.
    pub median_itl_ms: f64,
    /// Its longest gap overlapping the range, ms.
    pub max_itl_ms: f64,
    /// True when that gap exceeds [`STALL_FACTOR`] x the median.
    pub stalled: bool,
}

/// A request waiting (queued, or preempted) during the range.
#[derive(Debug, Clone, PartialEq)]
pub struct Waiting {
    /// Request row.
    pub request: u32,
    /// Time of the range it spent waiting, ms.
    pub waited_ms: f64,
}

/// A request that held the engine with its prefill.
#[derive(Debug, Clone, PartialEq)]
pub struct Holder {
    /// Request row.
    pub request: u32,
    /// Prompt tokens it computed in the range.
    pub tokens: u64,
    /// Step time attributed to it (each step's time split by tokens computed), ms.
    pub held_ms: f64,
    /// `held_ms` over the step time of its instance in the range.
    pub share: f64,
    /// Other requests of its instance that waited, or stalled in decode, during its prefill steps; counted for
    /// the [`DELAYED_COUNTED`] largest holders.
    pub delayed: Option<u32>,
}

/// Everything the interference panel shows for a range.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Interference {
    /// Range start, ns.
    pub from_ns: i64,
    /// Range end, ns.
    pub to_ns: i64,
    /// The steps; zero when the trace has no iterations.
    pub steps: Steps,
    /// Requests prefilling, most tokens first (the first [`LIST_LIMIT`]).
    pub prefilling: Vec<Prefilling>,
    /// Requests decoding, stalled first, then by longest gap (the first [`LIST_LIMIT`]).
    pub decoding: Vec<Decoding>,
    /// Requests waiting, longest first (the first [`LIST_LIMIT`]).
    pub waiting: Vec<Waiting>,
    /// Who held the engine, largest share first (the first [`LIST_LIMIT`]): the requests prefilling.
    pub holders: Vec<Holder>,
    /// How many requests prefilled (and held the engine), decoded, stalled, and waited, in all.
    pub counts: Counts,
    /// KV transfers between instances overlapping the range (disaggregated serving), longest first.
    pub transfers: Transfers,
}

/// How many requests each list would hold without [`LIST_LIMIT`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    /// Requests that computed prompt tokens (each a holder).
    pub prefilling: usize,
    /// Requests decoding.
    pub decoding: usize,
    /// Of those, stalled.
    pub stalled: usize,
    /// Requests waiting.
    pub waiting: usize,
}

/// The most entries each list keeps: more than any panel shows, few enough that a whole trace of half a million
/// requests is analysed in tens of milliseconds.
pub const LIST_LIMIT: usize = 1000;

/// Overlap of `[a0, a1]` with `[b0, b1]`, ns.
fn overlap(a0: i64, a1: i64, b0: i64, b1: i64) -> i64 {
    (a1.min(b1) - a0.max(b0)).max(0)
}

/// How many holders, the largest first, have the requests they delayed counted.
pub const DELAYED_COUNTED: usize = 100;

/// Analyses `[from_ns, to_ns]`, indexing the trace first: for one range. A view that analyses many keeps a
/// [`RangeIndex`] and calls [`interference_indexed`].
pub fn interference(trace: &Trace, from_ns: i64, to_ns: i64) -> Interference {
    interference_indexed(trace, &RangeIndex::build(trace), from_ns, to_ns)
}

/// Per request of the trace, what a range adds up for it, and which requests were touched: sums in time linear in
/// what the range holds, with no sort.
struct Sums<T> {
    of: Vec<T>,
    touched: Vec<u32>,
}

impl<T: Default + Clone + PartialEq> Sums<T> {
    fn new(n: usize) -> Self {
        Sums {
            of: vec![T::default(); n],
            touched: Vec::new(),
        }
    }

    fn at(&mut self, r: u32) -> &mut T {
        let slot = &mut self.of[r as usize];
        if *slot == T::default() {
            self.touched.push(r);
        }
        slot
    }
}

/// Keeps the first `k` of `v` in the order `cmp` gives (a total order): a selection, then a sort of those kept.
fn top_k<T>(v: &mut Vec<T>, k: usize, cmp: impl Fn(&T, &T) -> std::cmp::Ordering) {
    if v.len() > k && k > 0 {
        v.select_nth_unstable_by(k - 1, &cmp);
        v.truncate(k);
    }
    v.sort_unstable_by(cmp);
}

/// The panel's orders: most prompt tokens; largest holder; stalled, then longest gap; longest wait (ties by request).
fn by_tokens(a: &Prefilling, b: &Prefilling) -> std::cmp::Ordering {
    b.tokens.cmp(&a.tokens).then(a.request.cmp(&b.request))
}
fn by_held(a: &Holder, b: &Holder) -> std::cmp::Ordering {
    b.held_ms.total_cmp(&a.held_ms).then(a.request.cmp(&b.request))
}
fn by_stall(a: &Decoding, b: &Decoding) -> std::cmp::Ordering {
    b.stalled
        .cmp(&a.stalled)
        .then(b.max_itl_ms.total_cmp(&a.max_itl_ms))
        .then(a.request.cmp(&b.request))
}
fn by_wait(a: &Waiting, b: &Waiting) -> std::cmp::Ordering {
    b.waited_ms.total_cmp(&a.waited_ms).then(a.request.cmp(&b.request))
}

/// Request `r`'s decode in `[from_ns, to_ns]`, when it emitted a token in it or a gap crosses it.
fn decoding(trace: &Trace, index: &RangeIndex, r: u32, from_ns: i64, to_ns: i64) -> Option<Decoding> {
    let d = index.decode[r as usize];
    if d.tokens < 2 {
        return None;
    }
    let (emitted_in, max_gap) = if d.sorted && d.first_ns >= from_ns && d.last_ns <= to_ns {
        (d.tokens as usize, Some(d.max_gap_ns))
    } else {
        let emitted = &trace.tokens.emitted_ns[trace.tokens_of(r)];
        let count = emitted.len();
        if d.sorted {
            let lo = emitted.partition_point(|&t| t < from_ns);
            let hi = emitted.partition_point(|&t| t <= to_ns);
            // Gap k (emitted[k - 1]..emitted[k]) overlaps the range when k >= lo and k - 1 < hi.
            let gaps = lo.max(1)..(hi + 1).min(count);
            (hi - lo, gaps.map(|k| emitted[k] - emitted[k - 1]).max())
        } else {
            let emitted_in = emitted.iter().filter(|&&t| (from_ns..=to_ns).contains(&t)).count();
            let gap = emitted
                .windows(2)
                .filter(|w| w[1] >= from_ns && w[0] <= to_ns)
                .map(|w| w[1] - w[0])
                .max();
            (emitted_in, gap)
        }
    };
    if emitted_in == 0 && max_gap.is_none() {
        return None;
    }
    // A request still in its first token is prefilling, not decoding.
    if d.from_first && d.first_ns > to_ns {
        return None;
    }
    let max_gap = max_gap.unwrap_or(0);
    Some(Decoding {
        request: r,
        tokens: u32::try_from(emitted_in).unwrap_or(u32::MAX),
        median_itl_ms: ms(d.median_itl_ns),
        max_itl_ms: ms(max_gap),
        stalled: is_stall(max_gap, d.median_itl_ns),
    })
}

/// Analyses `[from_ns, to_ns]` with the trace's index: about the same time for a second as for the whole trace
/// (the requests the range cuts through are read token by token, the others from the index; the lists keep their
/// first [`LIST_LIMIT`], chosen without sorting the rest).
#[expect(clippy::cast_precision_loss, reason = "counts and ns spans far below 2^53")]
pub fn interference_indexed(trace: &Trace, index: &RangeIndex, from_ns: i64, to_ns: i64) -> Interference {
    let (from_ns, to_ns) = (from_ns.min(to_ns), from_ns.max(to_ns));
    let mut out = Interference {
        from_ns,
        to_ns,
        ..Interference::default()
    };
    let it = &trace.iterations;
    let st = &trace.stages;
    let n = trace.request_count();
    let alive = |r: u32| index.is_alive(trace, r, from_ns, to_ns);

    // Steps of every source overlapping the range, from the prefix sums.
    let mut step_ranges: Vec<std::ops::Range<usize>> = Vec::new();
    let mut busy_by_source: rustc_hash::FxHashMap<u32, f64> = rustc_hash::FxHashMap::default();
    let mut duration_ns = 0i64;
    for k in 0..index.steps.len() {
        let (totals, rows) = index.step_totals(trace, k, from_ns, to_ns);
        if rows.is_empty() {
            continue;
        }
        out.steps.count += totals.count;
        out.steps.prefill_tokens += totals.prefill_tokens;
        out.steps.decode_tokens += totals.decode_tokens;
        out.steps.max_ms = out.steps.max_ms.max(ms(totals.max_ns));
        out.steps.busy_ms += ms(totals.inside_ns);
        *busy_by_source.entry(index.steps[k].source).or_default() += ms(totals.inside_ns);
        duration_ns += totals.duration_ns;
        step_ranges.push(rows);
    }
    if out.steps.count > 0 {
        out.steps.mean_ms = ms(duration_ns) / out.steps.count as f64;
    }
    let has_steps = out.steps.count > 0;

    // Per prefilling request: prompt tokens, chunks (or spans), and the step time its share of each step's tokens
    // holds. With steps, from the prefill chunks of the steps in the range; without, from the prefill spans that
    // overlap it.
    let mut prefill: Sums<(u64, u32, f64)> = Sums::new(n);
    if has_steps {
        for rows in &step_ranges {
            for c in index.chunks_in(rows.clone()) {
                let i = c.step as usize;
                let tokens = u64::from(c.tokens);
                let step_tokens =
                    u64::from(it.num_prefill_tokens.at(i).unwrap_or(0) + it.num_decode_tokens.at(i).unwrap_or(0));
                let inside = ms(overlap(it.start_ns[i], it.end_ns[i], from_ns, to_ns));
                let held = if step_tokens == 0 {
                    0.0
                } else {
                    inside * tokens as f64 / step_tokens as f64
                };
                let e = prefill.at(c.request);
                *e = (e.0 + tokens, e.1 + 1, e.2 + held);
            }
        }
    } else {
        index.prefills.for_each_overlapping(from_ns, to_ns, true, |w| {
            if alive(w.request) {
                let o = ms(overlap(w.start_ns, w.end_ns, from_ns, to_ns));
                let e = prefill.at(w.request);
                *e = (e.0 + u64::from(w.tokens), e.1 + 1, e.2 + o);
            }
        });
    }

    // Waiting: queue and preemption windows overlapping the range.
    let mut waited: Sums<i64> = Sums::new(n);
    index.waits.for_each_overlapping(from_ns, to_ns, true, |w| {
        if alive(w.request) {
            *waited.at(w.request) += overlap(w.start_ns, w.end_ns, from_ns, to_ns);
        }
    });
    out.waiting = waited
        .touched
        .iter()
        .map(|&request| Waiting {
            request,
            waited_ms: ms(waited.of[request as usize]),
        })
        .collect();

    // Decoding: the requests alive in the range with tokens in it or a gap across it; those wholly inside it from
    // the index alone, the few it cuts through token by token; on every core.
    let alive_rows: Vec<u32> = index.alive(trace, from_ns, to_ns).collect();
    out.decoding = alive_rows
        .par_iter()
        .filter_map(|&r| decoding(trace, index, r, from_ns, to_ns))
        .collect();

    let mut busy_without_steps: rustc_hash::FxHashMap<u32, f64> = rustc_hash::FxHashMap::default();
    if !has_steps {
        for &r in &prefill.touched {
            *busy_without_steps.entry(trace.requests.source[r as usize]).or_default() += prefill.of[r as usize].2;
        }
    }
    let busy = if has_steps {
        &busy_by_source
    } else {
        &busy_without_steps
    };
    let busy_of = |source: u32| busy.get(&source).copied().filter(|&b| b > 0.0);
    (out.prefilling, out.holders) = prefill
        .touched
        .par_iter()
        .map(|&request| {
            let (tokens, steps, held_ms) = prefill.of[request as usize];
            let source = trace.requests.source[request as usize];
            let holder = Holder {
                request,
                tokens,
                held_ms,
                share: busy_of(source).map_or(0.0, |b| held_ms / b),
                delayed: None,
            };
            (Prefilling { request, tokens, steps }, holder)
        })
        .unzip();
    out.transfers = transfers::in_range(trace, from_ns, to_ns);
    out.keep_first(LIST_LIMIT);

    // Whom the largest holders delayed: other requests of their instance that waited, or stalled in decode,
    // during their prefill steps (or spans).
    for h in out.holders.iter_mut().take(DELAYED_COUNTED) {
        let request = h.request;
        let source = trace.requests.source[request as usize];
        let in_range = |row: usize| step_ranges.iter().any(|rows| rows.contains(&row));
        let windows: Vec<(i64, i64)> = if has_steps {
            trace
                .explicit_stages_of(request)
                .filter(|&s| st.kind[s] == StageKind::Prefill)
                .filter_map(|s| st.iter_row[s].map(|row| row as usize))
                .filter(|&i| in_range(i))
                .map(|i| (it.start_ns[i].max(from_ns), it.end_ns[i].min(to_ns)))
                .collect()
        } else {
            prefill_spans_in(trace, request, from_ns, to_ns)
        };
        let mut delayed: Vec<u32> = Vec::new();
        let mut hit = |w: crate::analysis::range_index::Window| {
            if w.request != request && trace.requests.source[w.request as usize] == source && alive(w.request) {
                delayed.push(w.request);
            }
        };
        for &(w0, w1) in &windows {
            index.waits.for_each_overlapping(w0, w1, true, &mut hit);
            index.stalls.for_each_overlapping(w0, w1, true, &mut hit);
        }
        delayed.sort_unstable();
        delayed.dedup();
        h.delayed = Some(u32::try_from(delayed.len()).unwrap_or(u32::MAX));
    }
    out
}

/// A request's prefill spans (explicit or derived) clipped to `[from_ns, to_ns]` (those outside it come out empty).
fn prefill_spans_in(trace: &Trace, request: u32, from_ns: i64, to_ns: i64) -> Vec<(i64, i64)> {
    trace
        .stages_of(request)
        .into_iter()
        .filter(|s| s.kind == StageKind::Prefill)
        .map(|s| (s.start_ns.max(from_ns), s.end_ns.min(to_ns)))
        .collect()
}

/// The median of a request's inter-token latencies, ns; `None` under two tokens.
fn median_itl(trace: &Trace, request: u32) -> Option<i64> {
    let mut gaps: Vec<i64> = super::metrics::itl_ns(trace, request).collect();
    super::metrics::median(&mut gaps)
}

/// The analysis as it was before the index: a walk of every request, stage and token, holders' `delayed` counted
/// for all. The reference the index is tested and benchmarked against.
#[expect(clippy::cast_precision_loss, reason = "counts and ns spans far below 2^53")]
pub fn interference_by_walk(trace: &Trace, from_ns: i64, to_ns: i64) -> Interference {
    let (from_ns, to_ns) = (from_ns.min(to_ns), from_ns.max(to_ns));
    let mut out = Interference {
        from_ns,
        to_ns,
        ..Interference::default()
    };

    // Steps of every source overlapping the range.
    let mut step_rows: Vec<usize> = Vec::new();
    for &(source, _) in trace.sources_with_iterations() {
        step_rows.extend(trace.iterations_overlapping(source, from_ns, to_ns));
    }
    let it = &trace.iterations;
    let mut total_ms = 0.0;
    // Step time inside the range per source: a holder's share is of its own instance's time.
    let mut busy_by_source: rustc_hash::FxHashMap<u32, f64> = rustc_hash::FxHashMap::default();
    for &i in &step_rows {
        let d = ms(it.end_ns[i] - it.start_ns[i]);
        total_ms += d;
        out.steps.max_ms = out.steps.max_ms.max(d);
        let inside = ms(overlap(it.start_ns[i], it.end_ns[i], from_ns, to_ns));
        out.steps.busy_ms += inside;
        *busy_by_source.entry(it.source[i]).or_default() += inside;
        out.steps.prefill_tokens += u64::from(it.num_prefill_tokens.at(i).unwrap_or(0));
        out.steps.decode_tokens += u64::from(it.num_decode_tokens.at(i).unwrap_or(0));
    }
    out.steps.count = step_rows.len() as u64;
    out.steps.mean_ms = if step_rows.is_empty() {
        0.0
    } else {
        total_ms / step_rows.len() as f64
    };

    // Prefill chunks in those steps, by request: tokens and the step time their share of each step's tokens holds.
    let in_range: rustc_hash::FxHashSet<u32> = step_rows.iter().map(|&i| i as u32).collect();
    let mut by_request: std::collections::BTreeMap<u32, (u64, u32, f64, Vec<usize>)> =
        std::collections::BTreeMap::new();
    for s in 0..trace.stages.len() {
        if trace.stages.kind[s] != StageKind::Prefill {
            continue;
        }
        let Some(row) = trace.stages.iter_row[s].filter(|r| in_range.contains(r)) else {
            continue;
        };
        let i = row as usize;
        let tokens = u64::from(trace.stages.tokens[s].unwrap_or(0));
        let step_tokens = u64::from(it.num_prefill_tokens.at(i).unwrap_or(0) + it.num_decode_tokens.at(i).unwrap_or(0));
        let inside = ms(overlap(it.start_ns[i], it.end_ns[i], from_ns, to_ns));
        let held = if step_tokens == 0 {
            0.0
        } else {
            inside * tokens as f64 / step_tokens as f64
        };
        let e = by_request.entry(trace.stages.request[s]).or_default();
        e.0 += tokens;
        e.1 += 1;
        e.2 += held;
        e.3.push(i);
    }
    // Without iterations, prefill spans (explicit or derived) overlapping the range still say who was prefilling.
    let has_steps = !step_rows.is_empty();

    // Requests active in the range: waiting, decoding, prefilling without step data.
    let mut stall_windows: Vec<(u32, u32, i64, i64)> = Vec::new(); // (request, source, gap start, gap end)
    let mut wait_windows: Vec<(u32, u32, i64, i64)> = Vec::new();
    for r in 0..trace.request_count() as u32 {
        let ri = r as usize;
        let arrival = trace.requests.arrival_ns[ri];
        let finish = crate::analysis::metrics::finish_ns(trace, r).unwrap_or(arrival);
        if arrival > to_ns || finish < from_ns {
            continue;
        }
        let source = trace.requests.source[ri];
        let mut waited = 0;
        for span in trace.stages_of(r) {
            match span.kind {
                StageKind::Queue | StageKind::Preempted => {
                    let o = overlap(span.start_ns, span.end_ns, from_ns, to_ns);
                    if o > 0 {
                        waited += o;
                        wait_windows.push((r, source, span.start_ns, span.end_ns));
                    }
                }
                StageKind::Prefill if !has_steps => {
                    let o = overlap(span.start_ns, span.end_ns, from_ns, to_ns);
                    if o > 0 {
                        let e = by_request.entry(r).or_default();
                        e.0 += u64::from(span.tokens.unwrap_or(0));
                        e.1 += 1;
                        e.2 += ms(o);
                    }
                }
                _ => {}
            }
        }
        if waited > 0 {
            out.waiting.push(Waiting {
                request: r,
                waited_ms: ms(waited),
            });
        }
        let tokens = trace.tokens_of(r);
        if tokens.len() < 2 {
            continue;
        }
        let emitted = &trace.tokens.emitted_ns[tokens.clone()];
        let emitted_in = emitted.iter().filter(|&&t| (from_ns..=to_ns).contains(&t)).count();
        // Gaps overlapping the range: gap k spans emitted[k - 1]..emitted[k].
        let gaps: Vec<(i64, i64)> = emitted
            .windows(2)
            .map(|w| (w[0], w[1]))
            .filter(|&(a, b)| b >= from_ns && a <= to_ns)
            .collect();
        if emitted_in == 0 && gaps.is_empty() {
            continue;
        }
        let median = median_itl(trace, r).unwrap_or(0);
        let (max_a, max_b) = gaps.iter().copied().max_by_key(|(a, b)| b - a).unwrap_or((0, 0));
        let stalled = median > 0 && (max_b - max_a) as f64 > STALL_FACTOR * median as f64;
        for &(a, b) in &gaps {
            if median > 0 && (b - a) as f64 > STALL_FACTOR * median as f64 {
                stall_windows.push((r, source, a, b));
            }
        }
        // A request still in its first token is prefilling, not decoding.
        if trace.tokens.index[tokens.start] == 0 && emitted[0] > to_ns {
            continue;
        }
        out.decoding.push(Decoding {
            request: r,
            tokens: u32::try_from(emitted_in).unwrap_or(u32::MAX),
            median_itl_ms: ms(median),
            max_itl_ms: ms(max_b - max_a),
            stalled,
        });
    }

    let mut busy_without_steps: rustc_hash::FxHashMap<u32, f64> = rustc_hash::FxHashMap::default();
    if !has_steps {
        for (&request, e) in &by_request {
            *busy_without_steps
                .entry(trace.requests.source[request as usize])
                .or_default() += e.2;
        }
    }
    for (&request, (tokens, steps, held_ms, rows)) in &by_request {
        out.prefilling.push(Prefilling {
            request,
            tokens: *tokens,
            steps: *steps,
        });
        let source = trace.requests.source[request as usize];
        let windows: Vec<(i64, i64)> = if rows.is_empty() {
            prefill_spans_in(trace, request, from_ns, to_ns)
        } else {
            rows.iter()
                .map(|&i| (it.start_ns[i].max(from_ns), it.end_ns[i].min(to_ns)))
                .collect()
        };
        let hit = |&(r, s, a, b): &(u32, u32, i64, i64)| {
            r != request && s == source && windows.iter().any(|&(w0, w1)| overlap(a, b, w0, w1) > 0)
        };
        let mut delayed: Vec<u32> = wait_windows
            .iter()
            .chain(&stall_windows)
            .filter(|w| hit(w))
            .map(|w| w.0)
            .collect();
        delayed.sort_unstable();
        delayed.dedup();
        out.holders.push(Holder {
            request,
            tokens: *tokens,
            held_ms: *held_ms,
            share: {
                let source = trace.requests.source[request as usize];
                let busy = if has_steps {
                    &busy_by_source
                } else {
                    &busy_without_steps
                };
                busy.get(&source).filter(|&&b| b > 0.0).map_or(0.0, |b| held_ms / b)
            },
            delayed: Some(u32::try_from(delayed.len()).unwrap_or(u32::MAX)),
        });
    }
    out.prefilling
        .sort_by(|a, b| b.tokens.cmp(&a.tokens).then(a.request.cmp(&b.request)));
    out.holders
        .sort_by(|a, b| b.held_ms.total_cmp(&a.held_ms).then(a.request.cmp(&b.request)));
    out.decoding
        .sort_by(|a, b| b.stalled.cmp(&a.stalled).then(b.max_itl_ms.total_cmp(&a.max_itl_ms)));
    out.waiting.sort_by(|a, b| b.waited_ms.total_cmp(&a.waited_ms));
    out.transfers = transfers::in_range(trace, from_ns, to_ns);
    out.keep_first(LIST_LIMIT);
    out
}

impl Interference {
    /// Counts the lists, then keeps the first `k` of each in the panel's order.
    pub fn keep_first(&mut self, k: usize) {
        self.counts = Counts {
            prefilling: self.prefilling.len(),
            decoding: self.decoding.len(),
            stalled: self.decoding.iter().filter(|d| d.stalled).count(),
            waiting: self.waiting.len(),
        };
        let (prefilling, holders) = (&mut self.prefilling, &mut self.holders);
        let (decoding, waiting) = (&mut self.decoding, &mut self.waiting);
        rayon::join(
            || rayon::join(|| top_k(prefilling, k, by_tokens), || top_k(holders, k, by_held)),
            || rayon::join(|| top_k(decoding, k, by_stall), || top_k(waiting, k, by_wait)),
        );
    }

    /// The panel's content as plain text, for "Copy as text" and incident reports.
    pub fn to_text(&self, trace: &Trace) -> String {
        let mut t = String::new();
        let t0 = trace.requests.arrival_ns.iter().min().copied().unwrap_or(self.from_ns);
        let _ = writeln!(
            t,
            "range {:.3} s .. {:.3} s ({:.1} ms)",
            ms(self.from_ns - t0) / 1e3,
            ms(self.to_ns - t0) / 1e3,
            ms(self.to_ns - self.from_ns)
        );
        let s = &self.steps;
        let _ = writeln!(
            t,
            "steps: {} (prefill {} tokens, decode {} tokens), mean {:.1} ms, max {:.1} ms",
            s.count, s.prefill_tokens, s.decode_tokens, s.mean_ms, s.max_ms
        );
        let _ = writeln!(t, "who held the engine:");
        for h in self.holders.iter().take(DELAYED_COUNTED) {
            let _ = writeln!(
                t,
                "  {}  {:.0} % of {}'s step time ({:.1} ms), {} prompt tokens, delayed {} requests",
                trace.request_id(h.request),
                trace
                    .label(trace.requests.source[h.request as usize])
                    .unwrap_or("engine"),
                h.share * 100.0,
                h.held_ms,
                h.tokens,
                h.delayed.unwrap_or(0)
            );
        }
        if self.counts.prefilling > DELAYED_COUNTED {
            let _ = writeln!(t, "  and {} more", self.counts.prefilling - DELAYED_COUNTED);
        }
        let stalled: Vec<&Decoding> = self.decoding.iter().filter(|d| d.stalled).collect();
        let _ = writeln!(
            t,
            "decoding: {} requests, {} stalled",
            self.counts.decoding, self.counts.stalled
        );
        for d in stalled {
            let _ = writeln!(
                t,
                "  {}  longest gap {:.1} ms vs median {:.1} ms",
                trace.request_id(d.request),
                d.max_itl_ms,
                d.median_itl_ms
            );
        }
        let _ = writeln!(t, "waiting: {} requests", self.counts.waiting);
        for w in self.waiting.iter().take(20) {
            let _ = writeln!(t, "  {}  {:.1} ms", trace.request_id(w.request), w.waited_ms);
        }
        let x = &self.transfers;
        if !x.list.is_empty() {
            let tokens = x
                .tokens
                .map_or_else(|| "tokens not in the trace".to_owned(), |n| format!("{n} tokens"));
            let _ = writeln!(
                t,
                "KV transfers: {} ({:.1} ms in range, {tokens})",
                x.list.len(),
                x.in_range_ms
            );
            for m in x.list.iter().take(20) {
                let _ = writeln!(t, "  {}  {:.1} ms", trace.request_id(m.request), m.ms);
            }
        }
        t
    }

    /// Ok when `other` has the same figures: counts, requests and order equal, times within a billionth (sums
    /// taken in another order), holders' `delayed` equal where this analysis counted it. The error names the first
    /// difference.
    pub fn same_figures(&self, other: &Interference) -> Result<(), String> {
        let close = |x: f64, y: f64| (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0);
        let (a, b) = (self, other);
        let (sa, sb) = (&a.steps, &b.steps);
        if (sa.count, sa.prefill_tokens, sa.decode_tokens) != (sb.count, sb.prefill_tokens, sb.decode_tokens)
            || !(close(sa.mean_ms, sb.mean_ms) && close(sa.max_ms, sb.max_ms) && close(sa.busy_ms, sb.busy_ms))
        {
            return Err(format!("steps {sa:?} against {sb:?}"));
        }
        if a.counts != b.counts {
            return Err(format!("counts {:?} against {:?}", a.counts, b.counts));
        }
        if a.prefilling != b.prefilling {
            return Err("prefilling differs".to_owned());
        }
        if a.decoding != b.decoding {
            return Err("decoding differs".to_owned());
        }
        if a.waiting.len() != b.waiting.len() {
            return Err(format!("{} waiting against {}", a.waiting.len(), b.waiting.len()));
        }
        for (x, y) in a.waiting.iter().zip(&b.waiting) {
            if x.request != y.request || !close(x.waited_ms, y.waited_ms) {
                return Err(format!("waiting {x:?} against {y:?}"));
            }
        }
        if a.holders.len() != b.holders.len() {
            return Err(format!("{} holders against {}", a.holders.len(), b.holders.len()));
        }
        for (x, y) in a.holders.iter().zip(&b.holders) {
            let same = x.request == y.request
                && x.tokens == y.tokens
                && close(x.held_ms, y.held_ms)
                && close(x.share, y.share)
                && (x.delayed.is_none() || x.delayed == y.delayed);
            if !same {
                return Err(format!("holder {x:?} against {y:?}"));
            }
        }
        Ok(())
    }

    /// The request row of the top holder, if any.
    pub fn top_holder(&self) -> Option<u32> {
        self.holders.first().map(|h| h.request)
    }
}

#[cfg(test)]
mod tests;
