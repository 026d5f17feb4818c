//! What the waterfall draws from, computed once per trace without egui: the trace's time span, one engine track per
//! source (its steps as spans, its counters' scales), a track of sampled counters per source that has samples and
//! no steps, the request rows in their order, and the labels the filters offer.

use std::sync::{Arc, OnceLock};

use super::lanes::Lanes;
use super::layout::{self, TrackFilter, TrackOrder};
use super::load::LoadStrip;
use super::lod::Span;
use super::step_summary::{StepSummary, counter_values};
use super::viewport::Viewport;
use crate::trace::instances::InstanceRole;
use crate::trace::{NO_STR, Trace};

/// Per-trace data the view draws from, computed once per trace (and per order or filter for `rows`).
#[derive(Clone)]
pub struct TraceView {
    /// The trace.
    pub trace: Arc<Trace>,
    /// Earliest time in the trace (`Trace::start_ns`: the ruler's 0), ns.
    pub t0_ns: i64,
    /// Latest time in the trace, ns.
    pub t1_ns: i64,
    /// One engine track per source with steps.
    pub engines: Vec<EngineTrack>,
    /// One track of sampled counters per source with samples but no steps (a server log's stats lines).
    pub sampled: Vec<SampleTrack>,
    /// Every instance's load on one scale, when the trace has two instances or more.
    pub load: Option<LoadStrip>,
    /// The request rows shown, in order ([`TraceView::set_rows`] changes them).
    pub rows: Vec<u32>,
    /// The rows packed into lanes, when first asked for.
    lanes: OnceLock<Lanes>,
    /// A live view's: a request without an end is still open, and keeps its lane (in a trace read whole, one
    /// without an end is one whose end was not written, drawn to what is known of it).
    open_ends: bool,
    /// How many times the rows were set.
    generation: u64,
    /// The distinct model, app, user and finish-reason labels, for the filters.
    pub filter_labels: [Vec<u32>; 4],
}

/// A source's steps.
#[derive(Clone)]
pub struct EngineTrack {
    /// Source label id.
    pub source: u32,
    /// Its steps as spans (class: prefill share).
    pub spans: Vec<Span>,
    /// Largest batch size, prefill tokens and waiting count over the source's steps (the counters' scale).
    pub max_counters: [f32; 4],
    /// Whether any step of the source has each counter (an engine's own output may lack some: absent, not zero).
    pub present: [bool; 4],
    /// Its steps in time buckets, for zoomed-out views.
    pub summary: StepSummary,
    /// What it did: prefill or decode only in a disaggregated deployment, else both.
    pub role: InstanceRole,
}

/// A source's counter samples, drawn as steps that hold each reading until the next.
#[derive(Clone)]
pub struct SampleTrack {
    /// Source label id.
    pub source: u32,
    /// Its rows in `trace.samples` (sorted by time).
    pub rows: std::ops::Range<usize>,
    /// The largest value of each of [`SAMPLE_COUNTERS`] (its row's scale; KV use 1).
    pub max: [f32; 4],
    /// Whether any sample has each counter.
    pub present: [bool; 4],
}

/// The counters drawn for a source's samples; [`sample_values`] gives a sample's.
pub const SAMPLE_COUNTERS: [&str; 4] = ["running", "waiting", "KV use", "generation tok/s"];

/// A sample's counters, in [`SAMPLE_COUNTERS`] order; `None` for those it lacks.
#[expect(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    reason = "counts and rates drawn as f32"
)]
pub fn sample_values(trace: &Trace, i: usize) -> [Option<f32>; 4] {
    let sa = &trace.samples;
    [
        sa.num_running[i].map(|v| v as f32),
        sa.num_waiting[i].map(|v| v as f32),
        sa.kv_usage[i].map(|v| v as f32),
        sa.generation_throughput[i].map(|v| v as f32),
    ]
}

/// The sample tracks of a trace: one per source with samples and no steps, in the samples' source order.
pub fn sample_tracks(trace: &Trace) -> Vec<SampleTrack> {
    let with_steps: Vec<u32> = trace.sources_with_iterations().iter().map(|&(s, _)| s).collect();
    let sources = &trace.samples.source;
    let mut out: Vec<SampleTrack> = Vec::new();
    let mut start = 0;
    for i in 1..=sources.len() {
        if i < sources.len() && sources[i] == sources[start] {
            continue;
        }
        let source = sources[start];
        if !with_steps.contains(&source) {
            let mut max = [1.0f32; 4];
            let mut present = [false; 4];
            for row in start..i {
                for (k, v) in sample_values(trace, row).into_iter().enumerate() {
                    if let Some(v) = v {
                        max[k] = max[k].max(v);
                        present[k] = true;
                    }
                }
            }
            max[2] = 1.0; // KV use is a fraction: scale 0..1
            out.push(SampleTrack {
                source,
                rows: start..i,
                max,
                present,
            });
        }
        start = i;
    }
    out
}

/// Which counters a step has.
pub fn counters_present(trace: &Trace, i: usize) -> [bool; 4] {
    let it = &trace.iterations;
    [
        it.num_reqs.at(i).is_some(),
        it.num_prefill_tokens.at(i).is_some(),
        it.kv_usage.at(i).is_some(),
        it.num_waiting.at(i).is_some(),
    ]
}

impl TraceView {
    /// Prepares a trace for drawing.
    pub fn new(trace: Arc<Trace>, order: TrackOrder, filter: &TrackFilter) -> Self {
        Self::from_origin(trace, order, filter, None)
    }

    /// A live view of a growing trace: its times counted from `origin` when that is earlier than the trace's start
    /// (a live view whose oldest requests left memory keeps the recording's start as its zero), and its requests
    /// without an end still open, each keeping its lane. `None`: as [`Self::new`].
    pub fn from_origin(trace: Arc<Trace>, order: TrackOrder, filter: &TrackFilter, origin: Option<i64>) -> Self {
        let t = &trace;
        let t0_ns = origin.map_or(t.start_ns(), |o| o.min(t.start_ns()));
        let ends = t
            .requests
            .finished_ns
            .iter()
            .flatten()
            .chain(t.iterations.end_ns.iter().copied())
            .chain(t.samples.time_ns.iter().copied())
            .chain(t.tokens.emitted_ns.iter().copied())
            .chain(t.requests.arrival_ns.iter().copied());
        let t1_ns = ends.max().unwrap_or(t0_ns).max(t0_ns + 1_000_000);
        let roles = t.instance_roles();
        let mut engines: Vec<EngineTrack> = t
            .sources_with_iterations()
            .iter()
            .map(|&(source, ref range)| {
                let mut max_counters = [1.0f32, 1.0, 1.0, 1.0];
                let mut present = [false; 4];
                for i in range.start as usize..range.end as usize {
                    for (m, v) in max_counters.iter_mut().zip(counter_values(t, i)) {
                        *m = m.max(v);
                    }
                    for (p, has) in present.iter_mut().zip(counters_present(t, i)) {
                        *p |= has;
                    }
                }
                max_counters[2] = 1.0; // KV use is a fraction: scale 0..1
                EngineTrack {
                    source,
                    spans: layout::engine_spans(t, source),
                    max_counters,
                    present,
                    summary: StepSummary::build(t, range.start as usize..range.end as usize, t0_ns, t1_ns),
                    role: roles.get(&source).copied().unwrap_or(InstanceRole::Both),
                }
            })
            .collect();
        // Grouped by role: prefill instances, then decode instances, then ordinary ones, each in the trace's order.
        engines.sort_by_key(|e| e.role);
        let rows = layout::track_rows(t, order, filter);
        let sampled = sample_tracks(t);
        let load = LoadStrip::of(t);
        let q = &t.requests;
        let filter_labels = [&q.model, &q.app_id, &q.user_id, &q.finish_reason].map(|c| distinct_labels(c));
        TraceView {
            trace,
            t0_ns,
            t1_ns,
            engines,
            sampled,
            load,
            rows,
            lanes: OnceLock::new(),
            open_ends: origin.is_some(),
            generation: 0,
            filter_labels,
        }
    }

    /// Shows these request rows, in this order.
    pub fn set_rows(&mut self, rows: Vec<u32>) {
        self.rows = rows;
        self.lanes = OnceLock::new();
        self.generation += 1;
    }

    /// How many times the rows were set: what was drawn from older rows is stale.
    pub fn rows_generation(&self) -> u64 {
        self.generation
    }

    /// The rows shown, packed into lanes (computed on first use, n log n).
    pub fn lanes(&self) -> &Lanes {
        self.lanes
            .get_or_init(|| Lanes::pack(&self.trace, &self.rows, self.open_ends))
    }

    /// A viewport showing the whole trace across `width` points.
    pub fn full_view(&self, width: f64) -> Viewport {
        let pad = (self.t1_ns - self.t0_ns) / 50;
        Viewport::fit(self.t0_ns - pad, self.t1_ns + pad, width)
    }
}

/// The distinct labels of a column, sorted by label id.
pub fn distinct_labels(column: &[u32]) -> Vec<u32> {
    let mut values: Vec<u32> = column.iter().copied().filter(|&v| v != NO_STR).collect();
    values.sort_unstable();
    values.dedup();
    values
}
