//! Lanes: the request tracks packed into as few rows as their overlap allows, Perfetto-style. Each lane holds
//! requests that do not overlap in time, in time order, so the number of lanes is the run's peak concurrency and a
//! zoomed-out view shows who overlapped whom at once. Which request is at a point, and which are in a time range,
//! are binary searches in one lane.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::ops::Range;

use super::lod::Span;
use crate::trace::{StageKind, Trace};

/// How the request tracks are laid out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize, clap::ValueEnum)]
pub enum TrackLayout {
    /// One track per request, in the chosen order.
    #[default]
    Tracks,
    /// Requests packed into lanes of non-overlapping requests.
    Lanes,
}

impl TrackLayout {
    /// Every layout with its label.
    pub const ALL: [(TrackLayout, &'static str); 2] = [
        (TrackLayout::Tracks, "a track per request"),
        (TrackLayout::Lanes, "lanes (packed)"),
    ];
}

/// A request's extent on the time axis: arrival to finish, at least a millisecond (a request that never finished
/// shows as that millisecond).
pub fn request_extent(trace: &Trace, r: u32) -> Option<(i64, i64)> {
    let a = *trace.requests.arrival_ns.get(r as usize)?;
    let end = trace.finish_ns(r).unwrap_or(a).max(a.saturating_add(1_000_000));
    Some((a, end))
}

/// Requests packed into lanes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Lanes {
    /// Per lane, its requests in time order.
    lanes: Vec<Vec<u32>>,
    /// Per lane, the extents of its requests (parallel to `lanes`): starts and ends both ascending.
    extents: Vec<Vec<(i64, i64)>>,
    /// Per lane, when each request was scheduled and had its first token (parallel to `lanes`), within its extent:
    /// its queue, prefill and decode drawn without reading the trace.
    marks: Vec<Vec<(i64, Option<i64>)>>,
    /// Per request row of the trace, its lane (`u32::MAX`: not shown).
    lane_of: Vec<u32>,
    /// Tells this packing from every other of the process: samples taken of one are not drawn for another.
    id: u64,
}

/// The source of [`Lanes::id`].
static NEXT_LANES_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl Lanes {
    /// Packs `rows` (the requests shown) into lanes: by arrival, each request goes to the lowest-numbered lane that
    /// is free when it arrives (its last request finished at or before; with `open_ends`, a live view's, a request
    /// without an end never frees its lane, so it is the last of it), or to a new lane. This uses as many lanes
    /// as the most requests alive at one time, the fewest possible. n log n.
    pub fn pack(trace: &Trace, rows: &[u32], open_ends: bool) -> Lanes {
        let mut order: Vec<(i64, i64, u32)> = rows
            .iter()
            .filter_map(|&r| request_extent(trace, r).map(|(a, b)| (a, b, r)))
            .collect();
        order.sort_unstable();
        let mut lanes: Vec<Vec<u32>> = Vec::new();
        let mut extents: Vec<Vec<(i64, i64)>> = Vec::new();
        let mut marks: Vec<Vec<(i64, Option<i64>)>> = Vec::new();
        let mut lane_of = vec![u32::MAX; trace.request_count()];
        // Lanes in use by when they free up, and free lanes by number.
        let mut busy: BinaryHeap<Reverse<(i64, u32)>> = BinaryHeap::new();
        let mut free: BinaryHeap<Reverse<u32>> = BinaryHeap::new();
        for (start, end, r) in order {
            while let Some(&Reverse((until, lane))) = busy.peek() {
                if until > start {
                    break;
                }
                busy.pop();
                free.push(Reverse(lane));
            }
            let lane = if let Some(Reverse(lane)) = free.pop() {
                lane
            } else {
                lanes.push(Vec::new());
                extents.push(Vec::new());
                marks.push(Vec::new());
                u32::try_from(lanes.len() - 1).unwrap_or(u32::MAX)
            };
            let k = lane as usize;
            lanes[k].push(r);
            extents[k].push((start, end));
            marks[k].push(marks_of(trace, r, start, end));
            lane_of[r as usize] = lane;
            // In a live view a request with no end is still streaming and keeps its lane: whatever came after it
            // would be drawn over its open end.
            let open =
                open_ends && (r as usize) < trace.requests.len() && trace.requests.finished_ns.at(r as usize).is_none();
            busy.push(Reverse((if open { i64::MAX } else { end }, lane)));
        }
        Lanes {
            lanes,
            extents,
            marks,
            lane_of,
            id: NEXT_LANES_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        }
    }

    /// How many lanes.
    pub fn len(&self) -> usize {
        self.lanes.len()
    }

    /// True when no request is shown.
    pub fn is_empty(&self) -> bool {
        self.lanes.is_empty()
    }

    /// The requests of lane `k`, in time order.
    pub fn requests(&self, k: usize) -> &[u32] {
        self.lanes.get(k).map_or(&[], Vec::as_slice)
    }

    /// The extents of lane `k`'s requests, parallel to [`Lanes::requests`].
    pub fn extents(&self, k: usize) -> &[(i64, i64)] {
        self.extents.get(k).map_or(&[], Vec::as_slice)
    }

    /// The queue, prefill and decode of the request at position `i` of lane `k`, from its times alone, as
    /// [`coarse_spans`] gives them.
    pub fn spans(&self, k: usize, i: usize) -> impl Iterator<Item = Span> + use<> {
        let (arrival, end) = self.extents[k][i];
        let (scheduled, first) = self.marks[k][i];
        stage_spans(arrival, scheduled, first, end)
    }

    /// The stage class (queue, prefill, decode) at time `t_ns` of the request at position `i` of lane `k`, if it is
    /// alive then.
    pub fn class_at(&self, k: usize, i: usize, t_ns: i64) -> Option<u8> {
        let (arrival, end) = self.extents[k][i];
        let (scheduled, first) = self.marks[k][i];
        let kind = if t_ns < arrival || t_ns > end {
            return None;
        } else if t_ns < scheduled {
            StageKind::Queue
        } else {
            match first {
                Some(f) if t_ns < f && scheduled == UNSPLIT => StageKind::Waiting,
                Some(f) if t_ns < f => StageKind::Prefill,
                Some(_) => StageKind::Decode,
                None => StageKind::Other,
            }
        };
        Some(kind as u8)
    }

    /// The position, from `i` on, of the first request of lane `k` that ends at or after `t_ns` (the one alive at
    /// `t_ns`, or the next): an exponential search, a few steps when `t_ns` is near position `i`.
    pub fn seek(&self, k: usize, i: usize, t_ns: i64) -> usize {
        let e = self.extents(k);
        let n = e.len();
        if i >= n || e[i].1 >= t_ns {
            return i.min(n);
        }
        let mut step = 1;
        while i + step < n && e[i + step].1 < t_ns {
            step *= 2;
        }
        let (lo, hi) = (i + step / 2 + 1, (i + step + 1).min(n));
        lo + e[lo..hi].partition_point(|&(_, end)| end < t_ns)
    }

    /// Samples lane `k` on a grid of time columns: `out[c]` is 1 + the stage class of the request alive at the
    /// middle of column `columns.start + c`, `origin_ns + (j + 0.5) * ns_per_column` for column `j`, or 0 when none
    /// is. Seeks forward from the last sample's request, so a row of columns costs about one step each. For lanes
    /// with more requests in view than point columns, where drawing each request would cost more than the pixels.
    pub fn sample_columns(&self, k: usize, origin_ns: i64, ns_per_column: f64, columns: Range<i64>, out: &mut [u8]) {
        let e = self.extents(k);
        let time = |j: i64| origin_ns.saturating_add(((j as f64 + 0.5) * ns_per_column) as i64);
        let mut i = e.partition_point(|&(_, end)| end < time(columns.start));
        for (j, slot) in columns.zip(out.iter_mut()) {
            let t = time(j);
            if i < e.len() && e[i].1 < t {
                i = self.seek(k, i, t);
            }
            *slot = if i < e.len() {
                self.class_at(k, i, t).map_or(0, |c| c + 1)
            } else {
                0
            };
        }
    }

    /// The lane of request `r`, when shown.    /// The lane of request `r`, when shown.
    pub fn lane_of(&self, r: u32) -> Option<usize> {
        self.lane_of
            .get(r as usize)
            .filter(|&&l| l != u32::MAX)
            .map(|&l| l as usize)
    }

    /// The positions in lane `k` of the requests alive at some time in `from_ns..=to_ns`.
    pub fn in_range(&self, k: usize, from_ns: i64, to_ns: i64) -> Range<usize> {
        let e = self.extents(k);
        // Ends ascend as starts do (the requests of a lane do not overlap).
        let first = e.partition_point(|&(_, end)| end < from_ns);
        let last = e.partition_point(|&(start, _)| start <= to_ns);
        first..last.max(first)
    }

    /// The request of lane `k` at time `t_ns`, or the nearest within `slack_ns` of it.
    pub fn at(&self, k: usize, t_ns: i64, slack_ns: i64) -> Option<u32> {
        let range = self.in_range(k, t_ns.saturating_sub(slack_ns), t_ns.saturating_add(slack_ns));
        let e = self.extents(k);
        range
            .min_by_key(|&i| {
                let (a, b) = e[i];
                if t_ns < a {
                    a - t_ns
                } else {
                    t_ns.saturating_sub(b).max(0)
                }
            })
            .map(|i| self.lanes[k][i])
    }
}

/// A request drawn small: queue, prefill and decode as up to three spans from its timestamps alone (no walk of its
/// tokens, nothing allocated), classed as [`super::layout::request_spans`] classes them.
pub fn coarse_spans(trace: &Trace, r: u32) -> impl Iterator<Item = Span> + use<> {
    let (arrival, end) = request_extent(trace, r).unwrap_or((0, 0));
    let (scheduled, first) = marks_of(trace, r, arrival, end);
    stage_spans(arrival, scheduled, first, end)
}

/// When request `r` (alive from `arrival` to `end`) was scheduled and had its first token, within those bounds. A
/// request with no scheduling time (a client-side trace) is marked [`UNSPLIT`]: its wait is not split.
fn marks_of(trace: &Trace, r: u32, arrival: i64, end: i64) -> (i64, Option<i64>) {
    let first = trace.first_token_ns(r).map(|f| f.clamp(arrival, end));
    match trace.requests.scheduled_ns.at(r as usize) {
        Some(s) => {
            let scheduled = s.clamp(arrival, end);
            (scheduled, first.map(|f| f.max(scheduled)))
        }
        None => (UNSPLIT, first),
    }
}

/// The scheduling mark of a request whose wait for its first token is not split into queue and prefill.
const UNSPLIT: i64 = i64::MIN;

/// Queue from `arrival` to `scheduled`, prefill to `first` (token), decode to `end`, leaving out the empty ones;
/// without a first token, what follows the queue is of no known stage (`Other`). With no scheduling time
/// ([`UNSPLIT`]), the wait up to the first token is one `Waiting` span.
fn stage_spans(arrival: i64, scheduled: i64, first: Option<i64>, end: i64) -> impl Iterator<Item = Span> {
    let (wait, scheduled) = if scheduled == UNSPLIT {
        (StageKind::Waiting, arrival)
    } else {
        (StageKind::Prefill, scheduled)
    };
    let (prefill_end, after) = match first {
        Some(f) => (f, StageKind::Decode),
        None => (scheduled, StageKind::Other),
    };
    [
        (arrival, scheduled, StageKind::Queue),
        (scheduled, prefill_end, wait),
        (prefill_end, end, after),
    ]
    .into_iter()
    .filter(|&(a, b, _)| b > a)
    .map(|(start_ns, end_ns, kind)| Span {
        start_ns,
        end_ns,
        class: kind as u8,
    })
}

/// A lane's spans, given in time order, merged into runs to draw: a span joins the run before it when of the same
/// class and within half a point of it; a span under a point wide joins the run before it whatever its class
/// (a sliver of queue between two decodes is not drawn), or stands alone when nothing is near it. Requests too
/// narrow to draw stage by stage then cost a quad per run instead of three each.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Runs {
    runs: Vec<(f64, f64, u8)>,
}

impl Runs {
    /// Forgets the runs.
    pub fn clear(&mut self) {
        self.runs.clear();
    }

    /// Adds a span from `x0` to `x1` points of class `class`, after those added before.
    pub fn push(&mut self, x0: f64, x1: f64, class: u8) {
        if x1 < x0 {
            return;
        }
        match self.runs.last_mut() {
            Some(run) if x0 <= run.1 + 0.5 && (run.2 == class || x1 - x0 < 1.0) => run.1 = run.1.max(x1),
            _ => self.runs.push((x0, x1, class)),
        }
    }

    /// The runs: `(from, to, class)` in points, each at least a point wide.
    pub fn runs(&self) -> impl Iterator<Item = (f64, f64, u8)> + '_ {
        self.runs.iter().map(|&(a, b, c)| (a, b.max(a + 1.0), c))
    }
}

/// The runs of one class in samples of [`Lanes::sample_columns`], handed to `run` as `(first column, end column,
/// class)`; columns with no request are in no run.
pub fn class_runs(samples: &[u8], mut run: impl FnMut(usize, usize, u8)) {
    let mut c0 = 0;
    for c in 1..=samples.len() {
        if c == samples.len() || samples[c] != samples[c0] {
            if samples[c0] != 0 {
                run(c0, c, samples[c0] - 1);
            }
            c0 = c;
        }
    }
}

/// Samples of lanes kept from frame to frame on a grid of time columns fixed to a time origin (see
/// [`Lanes::sample_columns`]): panning at one zoom keeps the grid, so a frame samples only the columns that came
/// into view, and copies the rest.
#[derive(Debug, Clone, Default)]
pub struct LaneSamples {
    /// The packing, origin and column width the samples are of.
    grid: Option<(u64, i64, u64)>,
    /// Per lane, the columns it holds samples of and the samples.
    lanes: Vec<(Range<i64>, Vec<u8>)>,
    /// Samples taken by the last [`LaneSamples::lane`] calls since [`LaneSamples::grid`]: what a frame cost.
    taken: usize,
}

impl LaneSamples {
    /// Sets the grid for the calls that follow; samples of another grid are dropped.
    pub fn grid(&mut self, lanes: &Lanes, origin_ns: i64, ns_per_column: f64) {
        let grid = Some((lanes.id, origin_ns, ns_per_column.to_bits()));
        if self.grid != grid {
            self.grid = grid;
            self.lanes.clear();
        }
        self.lanes.resize_with(lanes.len(), Default::default);
        self.taken = 0;
    }

    /// The samples of lane `k` for `columns` of the grid, reusing the columns already held.
    pub fn lane(&mut self, lanes: &Lanes, k: usize, columns: Range<i64>) -> &[u8] {
        let Some((_, origin, bits)) = self.grid else {
            return &[];
        };
        let Some((held, samples)) = self.lanes.get_mut(k) else {
            return &[];
        };
        if *held != columns {
            let n = usize::try_from(columns.end - columns.start).unwrap_or(0);
            let mut fresh = vec![0u8; n];
            let (a, b) = (columns.start.max(held.start), columns.end.min(held.end));
            let (keep_from, keep_to) = if a < b { (a, b) } else { (columns.start, columns.start) };
            if a < b {
                let at = |j: i64, from: i64| usize::try_from(j - from).unwrap_or(0);
                fresh[at(a, columns.start)..at(b, columns.start)]
                    .copy_from_slice(&samples[at(a, held.start)..at(b, held.start)]);
            }
            let ns = f64::from_bits(bits);
            for part in [columns.start..keep_from, keep_to..columns.end] {
                if part.is_empty() {
                    continue;
                }
                let from = usize::try_from(part.start - columns.start).unwrap_or(0);
                let to = usize::try_from(part.end - columns.start).unwrap_or(0);
                self.taken += to - from;
                lanes.sample_columns(k, origin, ns, part, &mut fresh[from..to]);
            }
            *held = columns;
            *samples = fresh;
        }
        samples
    }

    /// The samples taken since the grid was last set (the others were copied).
    pub fn taken(&self) -> usize {
        self.taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::TraceBuilder;

    const MS: i64 = 1_000_000;
    /// 2025-11-29, a plausible time for a trace.
    const T0: i64 = 1_764_403_200_000_000_000;

    /// Requests with these (arrival, finish) times in ms, ids r0, r1, ...
    fn trace_of(extents: &[(i64, i64)]) -> Trace {
        let mut b = TraceBuilder::default();
        let lines: Vec<String> = extents
            .iter()
            .enumerate()
            .map(|(i, &(a, f))| {
                format!(
                    r#"{{"kind":"request","request_id":"r{i}","arrival_ns":{},"finished_ns":{}}}"#,
                    T0 + a * MS,
                    T0 + f * MS
                )
            })
            .collect();
        let text = lines.join("\n");
        let path = std::path::Path::new("t.jsonl");
        crate::format::jsonl::read_from(text.as_bytes(), path, 0, &mut b, &crate::ingest::Progress::default()).unwrap();
        b.finish().0
    }

    fn ids(t: &Trace, l: &Lanes) -> Vec<Vec<String>> {
        (0..l.len())
            .map(|k| l.requests(k).iter().map(|&r| t.request_id(r).to_owned()).collect())
            .collect()
    }

    #[test]
    fn packs_into_as_many_lanes_as_requests_overlap() {
        // r0 0-10, r1 2-5, r2 5-8 (r1 has finished: lane 1 again), r3 6-12 (r0 and r2 alive: lane 2),
        // r4 10-11 (r0 finished at 10: lane 0, the lowest free), r5 12-20 (all free: lane 0).
        let t = trace_of(&[(0, 10), (2, 5), (5, 8), (6, 12), (10, 11), (12, 20)]);
        let rows: Vec<u32> = (0..6).collect();
        let l = Lanes::pack(&t, &rows, false);
        assert_eq!(ids(&t, &l), [vec!["r0", "r4", "r5"], vec!["r1", "r2"], vec!["r3"]]);
        assert_eq!(l.lane_of(3), Some(2));
        // Only the rows shown are packed.
        let l = Lanes::pack(&t, &[0, 5], false);
        assert_eq!(ids(&t, &l), [vec!["r0", "r5"]]);
        assert_eq!(l.lane_of(1), None);
    }

    #[test]
    fn a_request_without_an_end_keeps_its_lane() {
        // r0 arrives at 0 and has not ended (a live view's request still streaming): its extent is its first ms,
        // but what comes after it would be drawn over its open end. r1 (5-8 ms) takes lane 1; r2 (9-10 ms) lane 1
        // again, free since 8 ms; r0 stays the last of lane 0. In a trace read whole (its end not written), r0 is
        // its first ms and the three share lane 0.
        let mut b = TraceBuilder::default();
        let text = [
            format!(r#"{{"kind":"request","request_id":"r0","arrival_ns":{T0}}}"#),
            format!(
                r#"{{"kind":"request","request_id":"r1","arrival_ns":{},"finished_ns":{}}}"#,
                T0 + 5 * MS,
                T0 + 8 * MS
            ),
            format!(
                r#"{{"kind":"request","request_id":"r2","arrival_ns":{},"finished_ns":{}}}"#,
                T0 + 9 * MS,
                T0 + 10 * MS
            ),
        ]
        .join("\n");
        let path = std::path::Path::new("t.jsonl");
        crate::format::jsonl::read_from(text.as_bytes(), path, 0, &mut b, &crate::ingest::Progress::default()).unwrap();
        let t = b.finish().0;
        let l = Lanes::pack(&t, &[0, 1, 2], true);
        assert_eq!(ids(&t, &l), [vec!["r0"], vec!["r1", "r2"]]);
        let l = Lanes::pack(&t, &[0, 1, 2], false);
        assert_eq!(ids(&t, &l), [vec!["r0", "r1", "r2"]]);
    }

    #[test]
    fn finds_the_request_at_a_time_and_those_in_a_range() {
        let t = trace_of(&[(0, 10), (2, 5), (5, 8), (6, 12), (10, 11), (12, 20)]);
        let l = Lanes::pack(&t, &(0..6).collect::<Vec<_>>(), false);
        let id = |r: Option<u32>| r.map(|r| t.request_id(r).to_owned());
        let at = |ms: i64| T0 + ms * MS;
        assert_eq!(id(l.at(0, at(3), 0)).as_deref(), Some("r0"));
        assert_eq!(id(l.at(0, at(15), 0)).as_deref(), Some("r5"));
        assert_eq!(id(l.at(1, at(9), 0)), None, "lane 1 is empty after 8 ms");
        assert_eq!(
            id(l.at(1, at(9), 2 * MS)).as_deref(),
            Some("r2"),
            "the nearest within the slack"
        );
        // Lane 0 between 10.5 and 11.5 ms: r4 (10-11) and r5 is not yet there.
        assert_eq!(l.in_range(0, at(10) + MS / 2, at(11) + MS / 2), 1..2);
        assert_eq!(l.in_range(0, at(0), at(30)), 0..3);
        assert_eq!(l.in_range(2, at(13), at(14)), 1..1);
    }

    #[test]
    fn a_dense_lane_is_sampled_a_column_at_a_time() {
        // Lane 0: r0 0-10, r4 10-11, r5 12-20 ms (no stage times: after an empty queue, no known stage). Columns of
        // 2 ms from 0: samples at 1, 3, .., 19 ms; 11 ms is r4's end, 13 ms is in r5.
        let t = trace_of(&[(0, 10), (2, 5), (5, 8), (6, 12), (10, 11), (12, 20)]);
        let l = Lanes::pack(&t, &(0..6).collect::<Vec<_>>(), false);
        let runs_of = |samples: &[u8]| {
            let mut runs = Vec::new();
            class_runs(samples, |a, b, c| runs.push((a, b, c)));
            runs
        };
        let mut samples = [9u8; 12];
        l.sample_columns(0, T0, 2.0 * MS as f64, 0..12, &mut samples);
        let other = StageKind::Other as u8;
        // Columns 0..=9 (1 to 19 ms) are all inside some request; column 10 (21 ms) and 11 (23 ms) are past the end.
        assert_eq!(
            samples,
            [other + 1; 10].into_iter().chain([0, 0]).collect::<Vec<_>>()[..]
        );
        assert_eq!(runs_of(&samples), [(0, 10, other)]);
        // A lane with a gap: lane 1 holds r1 2-5 and r2 5-8; from 0 in 1 ms columns: empty at 0.5 and 1.5 ms, then
        // 2.5 to 7.5 ms, then empty.
        let mut samples = [9u8; 10];
        l.sample_columns(1, T0, MS as f64, 0..10, &mut samples);
        assert_eq!(runs_of(&samples), [(2, 8, other)]);
        // Columns -3..2 of the same grid: at -2.5 .. 1.5 ms, before anything.
        let mut samples = [9u8; 5];
        l.sample_columns(1, T0, MS as f64, -3..2, &mut samples);
        assert_eq!(samples, [0; 5]);
    }

    #[test]
    fn lane_samples_are_kept_while_panning_and_dropped_on_zoom() {
        let t = trace_of(&[(0, 10), (2, 5), (5, 8), (6, 12), (10, 11), (12, 20)]);
        let l = Lanes::pack(&t, &(0..6).collect::<Vec<_>>(), false);
        let fresh = |k: usize, columns: Range<i64>, ns: f64| {
            let mut v = vec![0u8; usize::try_from(columns.end - columns.start).unwrap()];
            l.sample_columns(k, T0, ns, columns, &mut v);
            v
        };
        let mut cache = LaneSamples::default();
        cache.grid(&l, T0, MS as f64);
        assert_eq!(cache.lane(&l, 1, 0..10), fresh(1, 0..10, MS as f64));
        assert_eq!(cache.taken(), 10);
        // Panned by three columns: three new samples, the same figures as sampling afresh.
        cache.grid(&l, T0, MS as f64);
        assert_eq!(cache.lane(&l, 1, 3..13), fresh(1, 3..13, MS as f64));
        assert_eq!(cache.taken(), 3);
        // Back by five: five new ones (columns -2..3), 3..8 copied.
        cache.grid(&l, T0, MS as f64);
        assert_eq!(cache.lane(&l, 1, -2..8), fresh(1, -2..8, MS as f64));
        assert_eq!(cache.taken(), 5);
        // Far away: no overlap, all sampled. The same columns again: none.
        cache.grid(&l, T0, MS as f64);
        assert_eq!(cache.lane(&l, 0, 100..110), fresh(0, 100..110, MS as f64));
        assert_eq!(cache.lane(&l, 0, 100..110), fresh(0, 100..110, MS as f64));
        assert_eq!(cache.taken(), 10);
        // Zoomed: another grid, everything sampled again.
        cache.grid(&l, T0, 2.0 * MS as f64);
        assert_eq!(cache.lane(&l, 0, 0..12), fresh(0, 0..12, 2.0 * MS as f64));
        assert_eq!(cache.taken(), 12);
        // Another packing of the same rows: its samples are not taken for this one's.
        let again = Lanes::pack(&t, &(0..6).collect::<Vec<_>>(), false);
        cache.grid(&again, T0, 2.0 * MS as f64);
        let _ = cache.lane(&again, 0, 0..12);
        assert_eq!(cache.taken(), 12);
    }

    #[test]
    fn seeks_the_request_alive_at_a_time_from_a_position() {
        // Lane 0 holds r0 0-10, r4 10-11, r5 12-20 (ms).
        let t = trace_of(&[(0, 10), (2, 5), (5, 8), (6, 12), (10, 11), (12, 20)]);
        let l = Lanes::pack(&t, &(0..6).collect::<Vec<_>>(), false);
        let at = |ms: i64| T0 + ms * MS;
        assert_eq!(l.seek(0, 0, at(5)), 0);
        assert_eq!(l.seek(0, 0, at(10) + 1), 1, "r0 ends at 10: r4 is alive");
        assert_eq!(l.seek(0, 0, at(11) + 1), 2, "between r4 and r5: the next, r5");
        assert_eq!(l.seek(0, 1, at(30)), 3, "past the lane's end");
        assert_eq!(l.seek(0, 2, at(0)), 2, "never before the position given");
        // No scheduled or first-token times: after its (empty) queue, no known stage.
        assert_eq!(l.class_at(0, 0, at(5)), Some(StageKind::Other as u8));
        assert_eq!(l.class_at(0, 1, at(12)), None);
    }

    #[test]
    fn spans_merge_into_runs_of_a_class() {
        let (queue, prefill, decode) = (
            StageKind::Queue as u8,
            StageKind::Prefill as u8,
            StageKind::Decode as u8,
        );
        let mut r = Runs::default();
        // A request: its queue 0.8-1.0, a sliver with nothing before it, starts a run; its prefill 1.0-1.3, a
        // sliver, joins it; its decode 1.3-6.0 starts one. The next request: its queue sliver 6.1-6.3 joins the
        // decode, and its decode 6.4-9.0 too (same class, within half a point). A decode far away, 20.0-20.2, stands
        // alone and is drawn a point wide, as is the queue's run.
        r.push(0.8, 1.0, queue);
        r.push(1.0, 1.3, prefill);
        r.push(1.3, 6.0, decode);
        r.push(6.1, 6.3, queue);
        r.push(6.4, 9.0, decode);
        r.push(20.0, 20.2, decode);
        let runs: Vec<_> = r.runs().collect();
        assert_eq!(runs, [(0.8, 1.8, queue), (1.3, 9.0, decode), (20.0, 21.0, decode)]);
        // A wide prefill after a decode starts a run of its own.
        r.push(21.0, 25.0, prefill);
        assert_eq!(r.runs().last(), Some((21.0, 25.0, prefill)));
        r.clear();
        assert_eq!(r.runs().count(), 0);
    }

    #[test]
    fn a_small_request_is_queue_prefill_decode() {
        let t = crate::test_support::sample("four_requests.jsonl");
        let r = t.request_row("r3").unwrap();
        let spans: Vec<Span> = coarse_spans(&t, r).collect();
        let kinds: Vec<u8> = spans.iter().map(|s| s.class).collect();
        assert_eq!(
            kinds,
            [
                StageKind::Queue as u8,
                StageKind::Prefill as u8,
                StageKind::Decode as u8
            ]
        );
        let (a, end) = request_extent(&t, r).unwrap();
        assert_eq!((spans[0].start_ns, spans[2].end_ns), (a, end));
        // r3 queued 200 ms, first token 500 ms after arrival (the layout test's figures).
        assert_eq!(spans[0].end_ns - a, 200 * MS);
        assert_eq!(spans[1].end_ns - a, 500 * MS);
    }
}
