//! What a range analysis needs, indexed once per trace so that analysing any time range costs about the same: a
//! second or the whole trace. Steps have prefix sums per instance; waits (queue, preemption), decode stalls and
//! prefill spans are windows found by time; each request's decode figures over its whole life are computed once,
//! and only the requests the range cuts through are read token by token.

use std::ops::Range;

use rayon::prelude::*;

use crate::trace::{StageKind, Trace};

/// A decode gap longer than this many times the request's own median inter-token latency is a stall.
pub const STALL_FACTOR: f64 = 3.0;

/// Items per block of [`Windows`] and [`SourceSteps`]: the blocks' maxima let a query skip 64 items at a time.
const BLOCK: usize = 64;

/// Time windows of requests (queue waits, stalls, prefill spans), sorted by start, found by overlap with a range.
#[derive(Debug, Default)]
pub struct Windows {
    /// Start of each window, ascending.
    start: Vec<i64>,
    /// End of each window.
    end: Vec<i64>,
    /// The request of each window.
    request: Vec<u32>,
    /// Prompt tokens of each window (prefill spans; 0 otherwise).
    tokens: Vec<u32>,
    /// The largest end of each block of [`BLOCK`] windows.
    block_end: Vec<i64>,
    /// The largest end of each run of [`BLOCK`] blocks: a query skips 4,096 windows at a time far from its range.
    super_end: Vec<i64>,
}

/// One window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Window {
    /// Start, ns.
    pub start_ns: i64,
    /// End, ns.
    pub end_ns: i64,
    /// Request row.
    pub request: u32,
    /// Prompt tokens (prefill spans), else 0.
    pub tokens: u32,
}

impl Windows {
    fn new(mut all: Vec<Window>) -> Self {
        all.par_sort_unstable();
        let block_end: Vec<i64> = all
            .chunks(BLOCK)
            .map(|c| c.iter().map(|w| w.end_ns).max().unwrap_or(i64::MIN))
            .collect();
        let super_end = block_end
            .chunks(BLOCK)
            .map(|c| c.iter().copied().max().unwrap_or(i64::MIN))
            .collect();
        Windows {
            start: all.iter().map(|w| w.start_ns).collect(),
            end: all.iter().map(|w| w.end_ns).collect(),
            request: all.iter().map(|w| w.request).collect(),
            tokens: all.iter().map(|w| w.tokens).collect(),
            block_end,
            super_end,
        }
    }

    /// Calls `f` with each window that overlaps `[from_ns, to_ns]`, in order of start: by a positive length when
    /// `strict`, else touching counts (`end >= from && start <= to`).
    pub fn for_each_overlapping(&self, from_ns: i64, to_ns: i64, strict: bool, mut f: impl FnMut(Window)) {
        let last = if strict {
            self.start.partition_point(|&s| s < to_ns)
        } else {
            self.start.partition_point(|&s| s <= to_ns)
        };
        let ends_after = |e: i64| if strict { e > from_ns } else { e >= from_ns };
        let blocks = (0..self.super_end.len())
            .take_while(|&g| g * BLOCK * BLOCK < last)
            .filter(|&g| ends_after(self.super_end[g]))
            .flat_map(|g| g * BLOCK..((g + 1) * BLOCK).min(self.block_end.len()));
        for b in blocks {
            let first = b * BLOCK;
            if first >= last {
                break;
            }
            if !ends_after(self.block_end[b]) {
                continue;
            }
            for i in first..(first + BLOCK).min(last) {
                let (s, e) = (self.start[i], self.end[i]);
                let overlaps = if strict {
                    e.min(to_ns) - s.max(from_ns) > 0
                } else {
                    ends_after(e)
                };
                if overlaps {
                    f(Window {
                        start_ns: s,
                        end_ns: e,
                        request: self.request[i],
                        tokens: self.tokens[i],
                    });
                }
            }
        }
    }

    /// How many windows.
    pub fn len(&self) -> usize {
        self.start.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.start.is_empty()
    }
}

/// One instance's steps: prefix sums of durations and tokens, and each block's longest step.
#[derive(Debug, Default)]
pub struct SourceSteps {
    /// Source label id.
    pub source: u32,
    /// Its iteration rows.
    pub rows: Range<usize>,
    /// `duration[..k]` summed, ns (k from 0 to the step count).
    duration: Vec<i64>,
    /// Prompt tokens of the first k steps.
    prefill: Vec<u64>,
    /// Output tokens of the first k steps.
    decode: Vec<u64>,
    /// Longest step of each block of [`BLOCK`] steps, ns.
    block_max: Vec<i64>,
    /// Longest step, ns.
    longest: i64,
}

/// What the steps of a row range add up to.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StepTotals {
    /// Steps.
    pub count: u64,
    /// Their durations summed, ns.
    pub duration_ns: i64,
    /// Their time inside the range, ns.
    pub inside_ns: i64,
    /// Longest of them, ns.
    pub max_ns: i64,
    /// Prompt tokens.
    pub prefill_tokens: u64,
    /// Output tokens.
    pub decode_tokens: u64,
}

impl SourceSteps {
    fn new(trace: &Trace, source: u32, rows: Range<usize>) -> Self {
        let it = &trace.iterations;
        let n = rows.len();
        let (mut duration, mut prefill, mut decode) = (
            Vec::with_capacity(n + 1),
            Vec::with_capacity(n + 1),
            Vec::with_capacity(n + 1),
        );
        let (mut d, mut p, mut q) = (0i64, 0u64, 0u64);
        duration.push(0);
        prefill.push(0);
        decode.push(0);
        for i in rows.clone() {
            d = d.saturating_add(it.end_ns[i].saturating_sub(it.start_ns[i]));
            p += u64::from(it.num_prefill_tokens.at(i).unwrap_or(0));
            q += u64::from(it.num_decode_tokens.at(i).unwrap_or(0));
            duration.push(d);
            prefill.push(p);
            decode.push(q);
        }
        let lengths: Vec<i64> = rows.clone().map(|i| it.end_ns[i] - it.start_ns[i]).collect();
        let block_max: Vec<i64> = lengths
            .chunks(BLOCK)
            .map(|c| c.iter().copied().max().unwrap_or(0))
            .collect();
        let longest = block_max.iter().copied().max().unwrap_or(0);
        SourceSteps {
            source,
            rows,
            duration,
            prefill,
            decode,
            block_max,
            longest,
        }
    }

    /// The totals of the steps overlapping `[from_ns, to_ns)` (rows `range`, as `Trace::iterations_overlapping`
    /// gives them).
    fn totals(&self, trace: &Trace, range: Range<usize>, from_ns: i64, to_ns: i64) -> StepTotals {
        if range.is_empty() {
            return StepTotals::default();
        }
        let it = &trace.iterations;
        let (a, b) = (range.start - self.rows.start, range.end - self.rows.start);
        let duration_ns = self.duration[b] - self.duration[a];
        // Time outside the range: only steps that start before it or end after it, found from either end (steps
        // of a source run one after another; a step cannot end after the range unless it starts within the
        // longest step's length of its end).
        let outside = |i: usize| {
            let (s, e) = (it.start_ns[i], it.end_ns[i]);
            (e - s) - (e.min(to_ns) - s.max(from_ns)).max(0)
        };
        let mut cut = 0i64;
        let mut head = range.start;
        while head < range.end && it.start_ns[head] < from_ns {
            cut += outside(head);
            head += 1;
        }
        let mut tail = range.end;
        while tail > head && it.start_ns[tail - 1] > to_ns.saturating_sub(self.longest) {
            tail -= 1;
            cut += outside(tail);
        }
        // The longest: whole blocks by their maxima, the ends of the range step by step.
        let length = |i: usize| it.end_ns[i] - it.start_ns[i];
        let mut max_ns = 0i64;
        let mut k = a;
        while k < b {
            if k.is_multiple_of(BLOCK) && k + BLOCK <= b {
                max_ns = max_ns.max(self.block_max[k / BLOCK]);
                k += BLOCK;
            } else {
                max_ns = max_ns.max(length(self.rows.start + k));
                k += 1;
            }
        }
        StepTotals {
            count: (b - a) as u64,
            duration_ns,
            inside_ns: duration_ns - cut,
            max_ns,
            prefill_tokens: self.prefill[b] - self.prefill[a],
            decode_tokens: self.decode[b] - self.decode[a],
        }
    }
}

/// A request's decode over its whole life.
#[derive(Debug, Clone, Copy, Default)]
pub struct Decode {
    /// Median inter-token latency (between consecutive indices), ns; 0 under two tokens.
    pub median_itl_ns: i64,
    /// Longest gap between one token record and the next, ns.
    pub max_gap_ns: i64,
    /// True when its tokens' times never go back.
    pub sorted: bool,
    /// Its token records.
    pub tokens: u32,
    /// When its first and last token records were emitted, ns (0 without tokens).
    pub first_ns: i64,
    pub last_ns: i64,
    /// True when its first token record is output token 0.
    pub from_first: bool,
}

/// The index: built once per trace ([`RangeIndex::build`]), queried by `interference::interference_indexed`.
#[derive(Debug, Default)]
pub struct RangeIndex {
    /// Per request: its finish (`finish_ns`, else its arrival).
    pub finish_ns: Vec<i64>,
    /// The largest finish of requests `0..=r` (requests are in arrival order).
    finish_max: Vec<i64>,
    /// Per request: its decode figures.
    pub decode: Vec<Decode>,
    /// Queue and preemption windows.
    pub waits: Windows,
    /// Decode gaps longer than [`STALL_FACTOR`] x the request's median.
    pub stalls: Windows,
    /// Prefill spans (explicit, or derived from scheduling and first token), for ranges without steps.
    pub prefills: Windows,
    /// Steps per source, as `Trace::sources_with_iterations` lists them.
    pub steps: Vec<SourceSteps>,
    /// `chunk_start[i]..chunk_start[i + 1]`: the explicit prefill stages computed in iteration row `i`.
    chunk_start: Vec<u32>,
    /// Prefill chunks, by iteration row.
    chunks: Vec<Chunk>,
}

/// A prefill chunk: an explicit prefill stage computed in one step, with what a range query reads of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    /// Its request row.
    pub request: u32,
    /// Prompt tokens it computed (0 when not recorded).
    pub tokens: u32,
    /// The iteration row of its step.
    pub step: u32,
}

impl RangeIndex {
    /// Indexes `trace`: linear in its tokens and stages (and sorts of the windows), on every core.
    pub fn build(trace: &Trace) -> Self {
        let n = trace.request_count();
        let q = &trace.requests;
        let finish_ns: Vec<i64> = (0..n as u32)
            .map(|r| trace.finish_ns(r).unwrap_or(q.arrival_ns[r as usize]))
            .collect();
        let finish_max = finish_ns
            .iter()
            .scan(i64::MIN, |m, &f| {
                *m = (*m).max(f);
                Some(*m)
            })
            .collect();
        let decode: Vec<Decode> = (0..n as u32)
            .into_par_iter()
            .map(|r| {
                let tokens = trace.tokens_of(r);
                let emitted = &trace.tokens.emitted_ns[tokens.clone()];
                let mut itl: Vec<i64> = super::metrics::itl_ns(trace, r).collect();
                Decode {
                    median_itl_ns: super::metrics::median(&mut itl).unwrap_or(0),
                    max_gap_ns: emitted.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0),
                    sorted: emitted.is_sorted(),
                    tokens: u32::try_from(emitted.len()).unwrap_or(u32::MAX),
                    first_ns: emitted.first().copied().unwrap_or(0),
                    last_ns: emitted.last().copied().unwrap_or(0),
                    from_first: trace.tokens.index.get(tokens.start).is_some_and(|&i| i == 0) && !tokens.is_empty(),
                }
            })
            .collect();
        let stalls = (0..n as u32)
            .into_par_iter()
            .flat_map_iter(|r| {
                let median = decode[r as usize].median_itl_ns;
                let emitted = &trace.tokens.emitted_ns[trace.tokens_of(r)];
                emitted
                    .windows(2)
                    .filter(move |w| median > 0 && is_stall(w[1] - w[0], median))
                    .map(move |w| Window {
                        start_ns: w[0],
                        end_ns: w[1],
                        request: r,
                        tokens: 0,
                    })
            })
            .collect();
        let (waits, prefills) = Self::stage_windows(trace);
        let steps = trace
            .sources_with_iterations()
            .iter()
            .map(|(source, rows)| SourceSteps::new(trace, *source, rows.start as usize..rows.end as usize))
            .collect();
        // Prefill chunks by the step that computed them, in stage order within a step.
        let st = &trace.stages;
        let mut by_step: Vec<(u32, u32)> = (0..st.len())
            .filter(|&s| st.kind[s] == StageKind::Prefill)
            .filter_map(|s| st.iter_row[s].map(|row| (row, s as u32)))
            .collect();
        by_step.par_sort_unstable();
        // Read by a query in step order, so copied out of the stage table (where they are by request).
        let chunks = by_step
            .iter()
            .map(|&(step, s)| Chunk {
                request: st.request[s as usize],
                tokens: st.tokens[s as usize].unwrap_or(0),
                step,
            })
            .collect();
        let mut chunk_start = vec![0u32; trace.iterations.len() + 1];
        for &(row, _) in &by_step {
            if let Some(c) = chunk_start.get_mut(row as usize + 1) {
                *c += 1;
            }
        }
        for i in 1..chunk_start.len() {
            chunk_start[i] += chunk_start[i - 1];
        }
        RangeIndex {
            finish_ns,
            finish_max,
            decode,
            waits: Windows::new(waits),
            stalls: Windows::new(stalls),
            prefills: Windows::new(prefills),
            steps,
            chunk_start,
            chunks,
        }
    }

    /// Queue and preemption windows, and prefill spans, as `Trace::stages_of` gives them (explicit stages, else
    /// derived from the request's times), without its per-token decode steps.
    fn stage_windows(trace: &Trace) -> (Vec<Window>, Vec<Window>) {
        let q = &trace.requests;
        let st = &trace.stages;
        let mut waits = Vec::new();
        let mut prefills = Vec::new();
        for r in 0..trace.request_count() as u32 {
            let (mut has_queue, mut has_prefill) = (false, false);
            for i in trace.explicit_stages_of(r) {
                let w = Window {
                    start_ns: st.start_ns[i],
                    end_ns: st.end_ns[i],
                    request: r,
                    tokens: 0,
                };
                match st.kind[i] {
                    StageKind::Queue => {
                        has_queue = true;
                        waits.push(w);
                    }
                    StageKind::Preempted => waits.push(w),
                    StageKind::Prefill => {
                        has_prefill = true;
                        prefills.push(Window {
                            tokens: st.tokens[i].unwrap_or(0),
                            ..w
                        });
                    }
                    _ => {}
                }
            }
            let arrival = q.arrival_ns[r as usize];
            let scheduled = q.scheduled_ns.at(r as usize);
            if !has_queue && let Some(s) = scheduled {
                waits.push(Window {
                    start_ns: arrival,
                    end_ns: s,
                    request: r,
                    tokens: 0,
                });
            }
            if !has_prefill
                && let (Some(s), Some(f)) = (scheduled, trace.first_token_ns(r))
                && f >= s
            {
                prefills.push(Window {
                    start_ns: s,
                    end_ns: f,
                    request: r,
                    tokens: 0,
                });
            }
        }
        (waits, prefills)
    }

    /// The requests alive (arrived, not finished) at some time in `[from_ns, to_ns]`, in row order.
    pub fn alive(&self, trace: &Trace, from_ns: i64, to_ns: i64) -> impl Iterator<Item = u32> + '_ {
        let arrivals = &trace.requests.arrival_ns;
        let last = arrivals.partition_point(|&a| a <= to_ns);
        let first = self.finish_max[..last].partition_point(|&f| f < from_ns);
        (first..last)
            .filter(move |&r| self.finish_ns[r] >= from_ns)
            .map(|r| r as u32)
    }

    /// True when request `r` is alive at some time in `[from_ns, to_ns]`.
    pub fn is_alive(&self, trace: &Trace, r: u32, from_ns: i64, to_ns: i64) -> bool {
        let r = r as usize;
        trace.requests.arrival_ns[r] <= to_ns && self.finish_ns[r] >= from_ns
    }

    /// The totals of source `k`'s steps overlapping `[from_ns, to_ns)`, and their rows.
    pub fn step_totals(&self, trace: &Trace, k: usize, from_ns: i64, to_ns: i64) -> (StepTotals, Range<usize>) {
        let s = &self.steps[k];
        let rows = trace.iterations_overlapping(s.source, from_ns, to_ns);
        (s.totals(trace, rows.clone(), from_ns, to_ns), rows)
    }

    /// The prefill chunks computed in iteration rows `rows`, by step.
    pub fn chunks_in(&self, rows: Range<usize>) -> &[Chunk] {
        let (a, b) = (
            self.chunk_start[rows.start] as usize,
            self.chunk_start[rows.end] as usize,
        );
        &self.chunks[a..b]
    }
}

/// True when a gap of `gap_ns` is a stall for a request whose median inter-token latency is `median_ns`.
#[expect(clippy::cast_precision_loss, reason = "ns spans far below 2^53")]
pub fn is_stall(gap_ns: i64, median_ns: i64) -> bool {
    median_ns > 0 && gap_ns as f64 > STALL_FACTOR * median_ns as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn windows(spans: &[(i64, i64)]) -> Windows {
        Windows::new(
            spans
                .iter()
                .enumerate()
                .map(|(k, &(start_ns, end_ns))| Window {
                    start_ns,
                    end_ns,
                    request: k as u32,
                    tokens: 0,
                })
                .collect(),
        )
    }

    fn found(w: &Windows, from: i64, to: i64, strict: bool) -> Vec<u32> {
        let mut out = Vec::new();
        w.for_each_overlapping(from, to, strict, |x| out.push(x.request));
        out
    }

    #[test]
    fn windows_are_found_by_overlap_past_a_long_one() {
        // A long window first (0..1000), then 200 short ones of 10 each from 5 on: block maxima must not hide
        // the long one, nor let the short ones far from the range through.
        let mut spans = vec![(0, 1000)];
        spans.extend((0..200).map(|k| (5 + k * 10, 15 + k * 10)));
        let w = windows(&spans);
        // 500..520: the long one, and the short ones 49 (495..505), 50 (505..515), 51 (515..525).
        assert_eq!(found(&w, 500, 520, true), [0, 50, 51, 52]);
        // Touching: 505 is the end of 49 (495..505) and 525 the start of 52 (525..535) only when not strict.
        assert_eq!(found(&w, 505, 525, true), [0, 51, 52]);
        assert_eq!(found(&w, 505, 525, false), [0, 50, 51, 52, 53]);
        assert_eq!(found(&w, 3000, 4000, false), Vec::<u32>::new());
        assert_eq!(found(&w, 1500, 1506, true), [150, 151]);
        // Past a superblock (4,096 windows): 10,000 windows of 10 each, and a long one at the end.
        let mut spans: Vec<(i64, i64)> = (0..10_000).map(|k| (k * 10, k * 10 + 10)).collect();
        spans.push((95_000, 200_000));
        let w = windows(&spans);
        assert_eq!(found(&w, 45_001, 45_009, true), [4500]);
        assert_eq!(found(&w, 99_995, 120_000, true), [10_000, 9999], "by start");
        assert_eq!(found(&w, 150_000, 150_001, false), [10_000]);
        let mut all = Vec::new();
        w.for_each_overlapping(i64::MIN, i64::MAX, false, |x| all.push(x.request));
        assert_eq!(all.len(), 10_001);
    }

    #[test]
    fn step_totals_of_any_range_match_a_walk_of_the_steps() {
        let t = crate::test_support::sample("demo.parquet");
        let index = RangeIndex::build(&t);
        let t0 = t.start_ns();
        for (a, b) in [
            (0, 1),
            (0, 100_000),
            (17_000, 17_500),
            (20_000, 23_000),
            (99_000, 200_000),
        ] {
            let (from, to) = (t0 + a * 1_000_000, t0 + b * 1_000_000);
            for k in 0..index.steps.len() {
                let (totals, rows) = index.step_totals(&t, k, from, to);
                let it = &t.iterations;
                let walk = StepTotals {
                    count: rows.len() as u64,
                    duration_ns: rows.clone().map(|i| it.end_ns[i] - it.start_ns[i]).sum(),
                    inside_ns: rows
                        .clone()
                        .map(|i| (it.end_ns[i].min(to) - it.start_ns[i].max(from)).max(0))
                        .sum(),
                    max_ns: rows.clone().map(|i| it.end_ns[i] - it.start_ns[i]).max().unwrap_or(0),
                    prefill_tokens: rows
                        .clone()
                        .map(|i| u64::from(it.num_prefill_tokens.at(i).unwrap_or(0)))
                        .sum(),
                    decode_tokens: rows
                        .clone()
                        .map(|i| u64::from(it.num_decode_tokens.at(i).unwrap_or(0)))
                        .sum(),
                };
                assert_eq!(totals, walk, "source {k}, {a}..{b} ms");
            }
        }
    }
}
