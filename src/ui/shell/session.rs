//! One open trace: everything that belongs to it (its view, filters, selection, range analysis, microscope,
//! findings, statistics and their background jobs) in one struct, replaced whole when another trace is shown. A
//! job belongs to the session that started it: when the session goes, its jobs go with it, and their results can
//! never land on another trace.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::TryRecvError;
use std::sync::{Arc, OnceLock};

use eframe::egui;
use tokenscope_core::format::window::Window;

use crate::analysis::interference::{Interference, interference_indexed};
use crate::analysis::range_index::RangeIndex;
use crate::load::Loaded;
use crate::trace::CandidateSource;
use crate::trace::report::Report;
use crate::ui::views::findings::FindingsState;
use crate::ui::views::microscope::Microscope;
use crate::ui::views::stats::StatsState;
use crate::ui::views::waterfall::{self, WaterfallState};
use crate::ui::widgets::job::Job;
use crate::view::TraceView;
use crate::view::layout::{TrackFilter, TrackOrder};

/// The name of the trace shown when the app starts without a path: the simulator's `mixed` scenario
/// ([`crate::synth::demo`]), the same trace as `sample_traces/demo.parquet`.
pub const DEMO_NAME: &str = "demo.parquet";

/// Where a trace comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceSource {
    /// A file or directory.
    Path(PathBuf),
    /// Several files of one run opened together (a client's recording with the server's files: joined).
    Paths(Vec<PathBuf>),
    /// The part of a file or dataset in a window (`--from-time`, `--where`, the dataset dialog).
    Part(PathBuf, Window),
    /// The demo: the simulator's `mixed` scenario, made at start.
    Demo,
    /// A recording being made (its journal, which opens as a trace, and the server's URL as shown).
    Live {
        /// The recording's journal.
        journal: PathBuf,
        /// The server, as a title may show it.
        url: String,
    },
    /// The trace on screen replayed by the simulator with changes (`synth --set` keys separated by spaces): a
    /// what-if to compare it with.
    WhatIf {
        /// The changes, as given.
        settings: String,
    },
    /// A server's log watched as it is written (opened again, it is read whole).
    Watch {
        /// The log.
        log: PathBuf,
    },
}

impl TraceSource {
    /// Its name for titles and the status bar.
    pub fn name(&self) -> String {
        match self {
            TraceSource::Path(p) => p.display().to_string(),
            TraceSource::Paths(ps) => ps
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(" + "),
            TraceSource::Part(p, w) => format!("{} ({})", p.display(), w.describe()),
            TraceSource::Demo => format!("{DEMO_NAME} (the demo, simulated)"),
            TraceSource::Live { url, .. } => format!("recording {url}"),
            TraceSource::Watch { log } => format!("watching {}", log.display()),
            TraceSource::WhatIf { settings } => format!("what-if: {settings} (A replayed by the simulator)"),
        }
    }
}

/// Tells sessions apart: each trace shown gets the next number, also when the same file is opened again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SessionId(u64);

/// One open trace and everything the app holds for it.
pub struct Session {
    /// Which session this is (widgets' memory is kept per session).
    pub id: SessionId,
    /// Where the trace came from.
    pub source: TraceSource,
    /// What the waterfall draws.
    pub view: TraceView,
    /// What loading found wrong, and the importers' notes.
    pub report: Report,
    /// Reads a selected request's candidates when the load left them on disk.
    pub candidates: Option<Arc<dyn CandidateSource>>,
    /// The request tracks' filter.
    pub filter: TrackFilter,
    /// The waterfall's viewport, scroll and range.
    pub waterfall: WaterfallState,
    /// The selected request row.
    pub selected: Option<u32>,
    /// The analysis of the drag-selected range.
    pub interference: Option<Interference>,
    /// An analysis being computed.
    interference_job: Option<Job<Interference>>,
    /// The trace indexed for range analyses, built in the background when the trace opens.
    range_index: Arc<OnceLock<RangeIndex>>,
    /// The index being built (dropping the job leaves the build to end on its own).
    _index_job: Option<Job<()>>,
    /// The selected request under the microscope (made again when the selection changes).
    pub microscope: Option<Microscope>,
    /// A token to select once the microscope shows the selected request (a finding's).
    pending_token: Option<usize>,
    /// The findings of this trace.
    pub findings: FindingsState,
    /// The statistics of this trace.
    pub stats: StatsState,
    /// The Query window's editor and result.
    #[cfg(feature = "query")]
    pub query: crate::ui::views::query::QueryState,
    /// The Timeline panel's choices and series.
    #[cfg(feature = "query")]
    pub timeline: crate::ui::views::timeline::TimelineState,
}

/// The trace's index for range analyses, built on a thread of its own (or by the first analysis, if that thread
/// could not start).
fn index_in_background(trace: &Arc<crate::trace::Trace>) -> (Arc<OnceLock<RangeIndex>>, Option<Job<()>>) {
    let index = Arc::new(OnceLock::new());
    let (t, i) = (Arc::clone(trace), Arc::clone(&index));
    let job = Job::spawn("range index", None, move || {
        i.get_or_init(|| RangeIndex::build(&t));
    })
    .ok();
    (index, job)
}

/// The interference figures of `a..b`, indexing the trace first if nobody has.
fn analyse(trace: &crate::trace::Trace, index: &OnceLock<RangeIndex>, a: i64, b: i64) -> Interference {
    interference_indexed(trace, index.get_or_init(|| RangeIndex::build(trace)), a, b)
}

impl Session {
    /// Holds the job building the range index (it is never read: dropping it would leave the build to end alone).
    #[expect(clippy::used_underscore_binding, reason = "the job is held, never read")]
    fn hold_index_job(&mut self, job: Option<Job<()>>) {
        self._index_job = job;
    }

    /// A session for a trace just loaded. The findings' hidden kinds and the statistics' grouping, sort and prices
    /// carry over from the session it replaces.
    pub fn new(
        source: TraceSource,
        loaded: Loaded,
        candidates: Option<Arc<dyn CandidateSource>>,
        order: TrackOrder,
        previous: Option<&Session>,
    ) -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        let filter = TrackFilter::default();
        let view = TraceView::new(Arc::new(loaded.trace), order, &filter);
        let (range_index, index_job) = index_in_background(&view.trace);
        Session {
            id: SessionId(NEXT.fetch_add(1, Ordering::Relaxed)),
            source,
            view,
            report: loaded.report,
            candidates,
            filter,
            waterfall: WaterfallState::default(),
            selected: None,
            interference: None,
            interference_job: None,
            range_index,
            _index_job: index_job,
            microscope: None,
            pending_token: None,
            findings: previous.map(|p| p.findings.carried()).unwrap_or_default(),
            stats: previous.map(|p| p.stats.carried()).unwrap_or_default(),
            #[cfg(feature = "query")]
            query: previous.map(|p| p.query.carried()).unwrap_or_default(),
            #[cfg(feature = "query")]
            timeline: previous.map(|p| p.timeline.carried()).unwrap_or_default(),
        }
    }

    /// Shows the next version of a growing trace (a live recording's) in place: the view, filter, selected request
    /// (by id) and token, range and the panels' choices are kept; the findings come computed with it.
    pub fn retrace(
        &mut self,
        (loaded, origin): (Loaded, Option<i64>),
        order: TrackOrder,
        findings: Option<crate::ui::views::findings::SnapshotFindings>,
        waker: Option<&egui::Context>,
    ) {
        let selected = self.selected.map(|r| self.view.trace.request_id(r).to_owned());
        let token = self.microscope.as_ref().and_then(|m| m.token);
        let color_by = self.microscope.as_ref().map(|m| m.color_by);
        self.view = TraceView::from_origin(Arc::new(loaded.trace), order, &self.filter, origin);
        self.report = loaded.report;
        let (index, job) = index_in_background(&self.view.trace);
        self.range_index = index;
        self.hold_index_job(job);
        self.waterfall.forget_drawn();
        self.selected = selected.and_then(|id| self.view.trace.request_row(&id));
        self.microscope = None;
        self.pending_token = token;
        self.sync_microscope(waker);
        if let (Some(m), Some(c)) = (&mut self.microscope, color_by) {
            m.color_by = c;
        }
        if let Some((a, b)) = self.waterfall.range {
            self.analyse_range(a, b, waker);
        }
        match findings {
            Some((f, slo, thresholds, open)) => self.findings.computed(f, slo, thresholds, open),
            None => self.findings = self.findings.carried(),
        }
        self.stats = self.stats.carried();
        #[cfg(feature = "query")]
        self.timeline.retraced();
    }

    /// Orders and filters the request tracks again.
    pub fn refresh_rows(&mut self, order: TrackOrder) {
        let rows = crate::view::layout::track_rows(&self.view.trace, order, &self.filter);
        self.view.set_rows(rows);
    }

    /// Selects a request (or none); `scroll` brings its track into view.
    pub fn select(&mut self, request: Option<u32>, scroll: bool) {
        self.selected = request;
        if let (Some(r), true) = (request, scroll) {
            waterfall::scroll_to_request(&mut self.waterfall, &self.view, r);
        }
    }

    /// Fits a time range across the waterfall with a margin of a twentieth on each side.
    pub fn zoom_to(&mut self, a: i64, b: i64) {
        let pad = ((b - a) / 20).max(1_000);
        self.waterfall.fit = Some((a - pad, b + pad));
    }

    /// Shows a time range with a margin, selects a request (scrolled into view) and a token, and analyses the range
    /// as if it had been drag-selected.
    pub fn go_to(
        &mut self,
        from_ns: i64,
        to_ns: i64,
        request: Option<u32>,
        token: Option<usize>,
        waker: Option<&egui::Context>,
    ) {
        let pad = ((to_ns - from_ns) / 10).max(1_000_000);
        self.waterfall.fit = Some((from_ns - pad, to_ns + pad));
        match request {
            Some(r) => waterfall::scroll_to_request(&mut self.waterfall, &self.view, r),
            None => waterfall::scroll_to_time(&mut self.waterfall, &self.view, from_ns, to_ns),
        }
        if request.is_some() && request != self.selected {
            self.pending_token = token;
            self.selected = request;
        } else if let Some(m) = &mut self.microscope {
            m.token = token;
        }
        self.waterfall.range = Some((from_ns, to_ns));
        self.analyse_range(from_ns, to_ns, waker);
    }

    /// Computes the interference figures of a range on a thread of its own (waiting for the trace's index when it
    /// is still being built).
    pub fn analyse_range(&mut self, a: i64, b: i64, waker: Option<&egui::Context>) {
        let (trace, index) = (Arc::clone(&self.view.trace), Arc::clone(&self.range_index));
        match Job::spawn("interference", waker, move || analyse(&trace, &index, a, b)) {
            Ok(job) => self.interference_job = Some(job),
            Err(_) => self.interference = Some(analyse(&self.view.trace, &self.range_index, a, b)),
        }
    }

    /// Forgets the range, its analysis, and an analysis still running.
    pub fn clear_range(&mut self) {
        self.interference = None;
        self.interference_job = None;
        self.waterfall.range = None;
    }

    /// True while the range is being analysed.
    pub fn analysing(&self) -> bool {
        self.interference_job.is_some()
    }

    /// Takes the analysis of the selected range when it is ready.
    pub fn poll_interference(&mut self) {
        if let Some(rx) = &self.interference_job {
            match rx.try_recv() {
                Ok(x) => {
                    self.interference = Some(x);
                    self.interference_job = None;
                }
                Err(TryRecvError::Disconnected) => self.interference_job = None,
                Err(TryRecvError::Empty) => {}
            }
        }
    }

    /// Waits for the analysis of the selected range (tests use this).
    pub fn wait_interference(&mut self) {
        while let Some(job) = &self.interference_job {
            job.wait();
            self.poll_interference();
        }
    }

    /// Waits until the range's analysis has its result, without taking it (tests: a result ready but not yet shown).
    pub fn wait_interference_ready(&self) {
        if let Some(job) = &self.interference_job {
            job.wait();
        }
    }

    /// Puts the selected request under the microscope when the selection changed.
    pub fn sync_microscope(&mut self, waker: Option<&egui::Context>) {
        let current = self.microscope.as_ref().map(|m| m.request);
        if current == self.selected {
            return;
        }
        self.microscope = self.selected.map(|r| {
            let mut m = Microscope::new(&self.view.trace, self.candidates.as_ref(), r, waker);
            m.token = self.pending_token.take();
            m
        });
    }
}
