//! The app shell: the session of the trace on screen and the load of the next one, the menus, the toolbar of
//! filters, the status bar, the load-problems panel and the side panel of the selection. Panels draw and push
//! [`Command`]s; the app applies them after the frame ([`App::apply`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::TryRecvError;
use std::time::{Duration, Instant};

use eframe::egui::{self, RichText, Ui};

use super::capture;
use super::command::Command;
use super::compare::{Comparing, Side};
use super::dataset::{Answer, DatasetDialog};
use super::findings as findings_panel;
use super::job::Job;
use super::microscope::microscope_ui;
use super::panels;
use super::preview::Preview;
use super::render::{self, View};
use super::session::{DEMO_NAME, DEMO_TRACE, Session, TraceSource};
use super::stats;
use super::waterfall;
use crate::analysis::cost::Prices;
use crate::analysis::findings::Thresholds;
use crate::analysis::summary::Slo;
use crate::format;
use crate::ingest::{LoadError, Progress};
use crate::load;
use crate::load::Loaded;
use crate::trace::CandidateSource;
use crate::view::lanes::TrackLayout;
use crate::view::layout::TrackOrder;

/// Recent files kept.
const MAX_RECENT: usize = 10;
/// The key of the app's persisted settings.
const STORAGE_KEY: &str = "tokenscope";

/// Settings kept between runs.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Settings {
    recent: Vec<String>,
    order: TrackOrder,
    /// One track per request, or lanes.
    #[serde(default)]
    layout: TrackLayout,
    /// The service-level objectives requests are judged by.
    #[serde(default = "default_slo")]
    slo: Slo,
    /// Draw a caption strip (trace, time range, selection) into PNG captures.
    #[serde(default = "default_caption")]
    caption: bool,
    /// The price table of the statistics window.
    #[serde(default)]
    prices: Prices,
    /// The detectors' thresholds.
    #[serde(default)]
    thresholds: Thresholds,
    /// Queries run in the Query window, most recent first.
    #[serde(default)]
    query_history: Vec<String>,
    /// Refuse to load a trace estimated to take more memory than this, GB (`None`: half the machine's memory).
    #[serde(default)]
    memory_budget_gb: Option<f64>,
}

fn default_caption() -> bool {
    true
}

/// Objectives a chat service commonly sets: first token within a second, 50 ms per output token after it.
fn default_slo() -> Slo {
    Slo::DEFAULT
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            recent: Vec::new(),
            order: TrackOrder::default(),
            layout: TrackLayout::default(),
            slo: default_slo(),
            caption: true,
            prices: Prices::default(),
            thresholds: Thresholds::default(),
            query_history: Vec::new(),
            memory_budget_gb: None,
        }
    }
}

/// What a trace is opened for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Purpose {
    /// To be shown, replacing the trace on screen.
    Show,
    /// To be compared with the trace on screen (B).
    Compare,
}

/// A load in progress; the trace on screen stays usable meanwhile.
struct Loading {
    source: TraceSource,
    purpose: Purpose,
    progress: Arc<Progress>,
    rx: Job<LoadResult>,
}

/// What a load gives: the trace and where to read its candidates from.
type LoadResult = Result<(Loaded, Option<Arc<dyn CandidateSource>>), LoadError>;

/// An open-file dialog running on its own thread.
struct Dialog {
    rx: Job<Option<PathBuf>>,
    purpose: Purpose,
    started: Instant,
}

/// The app.
pub struct App {
    settings: Settings,
    /// The importer of the files given on the command line (`--from KIND`); files opened later are recognised.
    importer: Option<crate::import::Kind>,
    /// The date and zone of server logs whose times lack them (`--log-date`, `--log-tz`), for every load.
    log_clock: crate::import::log_clock::LogClock,
    /// File > Server log times…: the row asking for them, when open.
    log_clock_input: Option<LogClockInput>,
    /// The trace on screen and everything that belongs to it.
    session: Option<Session>,
    /// The trace it is compared with, and the comparison.
    compare: Option<Comparing>,
    /// A trace to compare with once the one being loaded is on screen (`tokenscope A --compare B`).
    compare_next: Option<TraceSource>,
    loading: Option<Loading>,
    /// The trace being loaded as read so far, while no other is on screen.
    preview: Option<Preview>,
    dialog: Option<Dialog>,
    /// The dataset dialog, open while a dataset's window is being chosen.
    dataset: Option<DatasetDialog>,
    /// The memory budget given for this run (`--memory-budget`), over the setting.
    budget_override: Option<u64>,
    /// The last load error or hint, shown until dismissed.
    message: Option<String>,
    /// The last success worth saying ("Saved …"), shown until dismissed.
    notice: Option<String>,
    /// The typed path of "Open path…".
    path_input: String,
    /// What the typed path is for (None: the path bar is hidden).
    path_purpose: Option<Purpose>,
    show_problems: bool,
    /// The findings panel is shown (open at start: what was found is the first thing to read).
    pub show_findings: bool,
    /// The statistics window is shown.
    pub show_stats: bool,
    /// The Query window is shown.
    pub show_query: bool,
    /// The Timeline panel is shown.
    pub show_timeline: bool,
    fonts_installed: bool,
    /// A screenshot on its way from the renderer.
    pending_capture: Option<capture::Pending>,
    /// A PNG being saved (through a dialog) on its own thread.
    saving: Option<Job<Result<PathBuf, String>>>,
    /// A 2x image being rendered for the clipboard on its own thread.
    rendering: Option<Job<Result<egui::ColorImage, String>>>,
    /// Where the waterfall and the high-power view were drawn (regenerated each frame).
    panel_rects: [Option<egui::Rect>; 2],
    /// Where PNGs and slices are saved without asking (tests set it); `None` asks through the file dialog.
    pub save_dir: Option<PathBuf>,
    /// What was asked for during the frame, applied after it.
    commands: Vec<Command>,
    /// The UI's context, for background jobs to wake it when their result is ready (set by the first frame).
    ctx: Option<egui::Context>,
}

impl App {
    /// An app that starts loading `source`, with settings from a previous run.
    pub fn new(source: TraceSource, storage: Option<&dyn eframe::Storage>) -> Self {
        Self::with_budget(source, storage, None)
    }

    /// [`App::new`], with a memory budget for this run (bytes; `--memory-budget`) instead of the setting.
    pub fn with_budget(source: TraceSource, storage: Option<&dyn eframe::Storage>, budget: Option<u64>) -> Self {
        Self::with_importer(source, storage, budget, None)
    }

    /// Reads server logs' times (which lack a year or a zone) with this date and zone, from the next load on; the
    /// trace given at start is loaded on the first frame, so setting it right after construction covers it.
    pub fn set_log_clock(&mut self, clock: crate::import::log_clock::LogClock) {
        self.log_clock = clock;
    }

    /// As [`App::with_budget`], reading every file of `source` with the importer `from` (`--from KIND`) instead
    /// of recognising it.
    pub fn with_importer(
        source: TraceSource,
        storage: Option<&dyn eframe::Storage>,
        budget: Option<u64>,
        from: Option<crate::import::Kind>,
    ) -> Self {
        let settings = storage
            .and_then(|s| eframe::get_value(s, STORAGE_KEY))
            .unwrap_or_default();
        let mut app = App {
            settings,
            session: None,
            compare: None,
            compare_next: None,
            loading: None,
            dialog: None,
            message: None,
            notice: None,
            path_input: String::new(),
            path_purpose: None,
            dataset: None,
            budget_override: budget,
            importer: from,
            log_clock: crate::import::log_clock::LogClock::default(),
            log_clock_input: None,
            show_problems: false,
            show_findings: true,
            show_stats: false,
            show_query: false,
            show_timeline: false,
            fonts_installed: false,
            preview: None,
            pending_capture: None,
            saving: None,
            rendering: None,
            panel_rects: [None, None],
            save_dir: None,
            commands: Vec::new(),
            ctx: None,
        };
        app.open(source);
        app
    }

    /// Opens a trace: a directory of several Parquet files (a dataset) through the dataset dialog, which shows what
    /// it holds and lets a window of it be chosen; anything else is loaded at once.
    pub fn open(&mut self, source: TraceSource) {
        // A directory of Parquet files only: a dataset to choose a part of. One that holds other files too (a
        // recording with its server's log) is the files of one run, loaded whole.
        if let TraceSource::Path(p) = &source
            && p.is_dir()
            && load::parquet_files(p).is_ok()
        {
            match DatasetDialog::start(p.clone(), self.ctx.as_ref()) {
                Ok(d) => {
                    self.dataset = Some(d);
                    return;
                }
                Err(e) => self.message = Some(e),
            }
        }
        self.load(source, Purpose::Show);
    }

    /// Compares the trace on screen (A) with another (B): B is loaded beside it (a directory whole, without the
    /// dataset dialog), then both waterfalls share the window and the Comparison window opens.
    pub fn compare_with(&mut self, source: TraceSource) {
        // A trace on its way to the screen is A: B waits for it (loading B now would cancel it).
        let showing = self.loading.as_ref().is_some_and(|l| l.purpose == Purpose::Show) || self.dataset.is_some();
        if showing {
            self.compare_next = Some(source);
            return;
        }
        if self.session.is_none() {
            self.message = Some("Open a trace first: the comparison is between it (A) and another (B).".to_owned());
            return;
        }
        self.load(source, Purpose::Compare);
    }

    /// The comparison, while one is shown.
    pub fn comparing(&self) -> Option<&Comparing> {
        self.compare.as_ref()
    }

    /// The comparison, to change (tests select through it).
    pub fn comparing_mut(&mut self) -> Option<&mut Comparing> {
        self.compare.as_mut()
    }

    /// Waits for the comparison being computed (tests use this).
    pub fn wait_compared(&mut self) {
        self.wait_loaded();
        if let (Some(c), Some(s)) = (&mut self.compare, &self.session) {
            c.refresh(
                &s.view.trace,
                self.settings.slo,
                self.settings.thresholds,
                self.ctx.as_ref(),
            );
            c.wait();
        }
    }

    /// The memory budget of a load, bytes: the setting, else half this machine's memory.
    pub fn memory_budget(&self) -> u64 {
        if let Some(b) = self.budget_override {
            return b;
        }
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // a positive setting in GB
        self.settings
            .memory_budget_gb
            .filter(|gb| *gb > 0.0)
            .map_or_else(load::budget::default_budget, |gb| (gb * 1e9) as u64)
    }

    /// Sets the memory budget, GB (`None`: half this machine's memory); kept between runs.
    pub fn set_memory_budget_gb(&mut self, gb: Option<f64>) {
        self.settings.memory_budget_gb = gb.filter(|gb| *gb > 0.0);
    }

    /// What the dataset dialog answered.
    fn answer(&mut self, answer: Answer) {
        self.dataset = None;
        match answer {
            Answer::Open(source) => self.load(source, Purpose::Show),
            // The trace B was to be compared with never came.
            _ => self.compare_next = None,
        }
    }

    /// The dataset dialog, while it is open (tests fill it in).
    pub fn dataset_dialog(&mut self) -> Option<&mut DatasetDialog> {
        self.dataset.as_mut()
    }

    /// Starts loading a trace on a background thread.
    fn load(&mut self, source: TraceSource, purpose: Purpose) {
        if let Some(old) = self.loading.take() {
            old.progress.cancel();
        }
        // With no trace on screen, the one loading is drawn as it is read.
        self.preview = None;
        let progress = if purpose == Purpose::Show && self.session.is_none() {
            let (preview, progress) = Preview::start(self.ctx.as_ref(), self.settings.order);
            self.preview = Some(preview);
            Arc::new(progress)
        } else {
            Arc::new(Progress::default())
        };
        let budget = self.memory_budget();
        let from = self.importer.take();
        let log_clock = self.log_clock;
        let worker = (Arc::clone(&progress), source.clone());
        let spawned = Job::spawn("trace-loader", self.ctx.as_ref(), move || {
            let (progress, source) = worker;
            let result = match source {
                TraceSource::Path(p) => load::load_with(
                    &p,
                    &progress,
                    load::LoadOptions {
                        lazy_candidates: true,
                        budget: Some(budget),
                        from,
                        log_clock,
                        ..load::LoadOptions::default()
                    },
                ),
                TraceSource::Part(p, window) => load::load_with(
                    &p,
                    &progress,
                    load::LoadOptions {
                        lazy_candidates: true,
                        window: Some(Arc::new(window)),
                        budget: Some(budget),
                        from,
                        log_clock,
                    },
                ),
                TraceSource::Paths(ps) => load::load_many(
                    &ps.iter().map(PathBuf::as_path).collect::<Vec<_>>(),
                    &progress,
                    load::LoadOptions {
                        lazy_candidates: true,
                        budget: Some(budget),
                        from,
                        log_clock,
                        ..load::LoadOptions::default()
                    },
                ),
                TraceSource::Demo => load::load_bytes(DEMO_NAME, DEMO_TRACE),
            };
            // The candidate reader reads the files' metadata once, here rather than at the first click.
            result.and_then(|loaded| {
                let reader = load::open_candidates(&loaded.trace)?;
                Ok((loaded, reader))
            })
        });
        match spawned {
            Ok(rx) => {
                self.loading = Some(Loading {
                    source,
                    purpose,
                    progress,
                    rx,
                });
            }
            Err(e) => self.message = Some(format!("cannot start loading: {e}")),
        }
    }

    /// Waits for the load in progress (tests and the headless renderer use this).
    pub fn wait_loaded(&mut self) {
        // A directory's survey first: when it is no dataset, the load starts here.
        if let Some(answer) = self.dataset.as_mut().and_then(DatasetDialog::wait) {
            self.answer(answer);
        }
        while let Some(loading) = &self.loading {
            loading.rx.wait();
            self.poll_loading();
        }
    }

    /// The session of the trace on screen.
    pub fn session(&self) -> Option<&Session> {
        self.session.as_ref()
    }

    /// How many requests the trace being loaded shows so far, while it is drawn as it is read.
    pub fn preview_requests(&self) -> Option<usize> {
        self.preview.as_ref().and_then(Preview::requests)
    }

    /// The session of the trace on screen, to change (tests select, zoom and wait through it).
    pub fn session_mut(&mut self) -> Option<&mut Session> {
        self.session.as_mut()
    }

    fn poll_loading(&mut self) {
        let Some(loading) = &self.loading else { return };
        let result = match loading.rx.try_recv() {
            Ok(r) => r,
            Err(TryRecvError::Empty) => return,
            Err(TryRecvError::Disconnected) => Err(LoadError::Cancelled),
        };
        let (source, purpose) = (loading.source.clone(), loading.purpose);
        self.loading = None;
        self.preview = None;
        match result {
            Ok((loaded, reader)) if purpose == Purpose::Compare => {
                let other = Session::new(source, loaded, reader, self.settings.order, self.session.as_ref());
                self.compare = Some(Comparing::new(other));
                self.message = None;
            }
            Ok((loaded, reader)) => {
                if let TraceSource::Path(p) | TraceSource::Part(p, _) = &source {
                    let p = p.display().to_string();
                    self.settings.recent.retain(|r| *r != p);
                    self.settings.recent.insert(0, p);
                    self.settings.recent.truncate(MAX_RECENT);
                }
                self.show_problems = loaded.report.rejected_count() > 0;
                let mut session = Session::new(source, loaded, reader, self.settings.order, self.session.as_ref());
                if self.session.is_none() {
                    session.stats.prices = self.settings.prices.clone();
                }
                // The previous session goes whole, with its jobs and its comparison: nothing of it can land on
                // this trace.
                self.session = Some(session);
                self.compare = None;
                if let Some(next) = self.compare_next.take() {
                    self.load(next, Purpose::Compare);
                }
                self.message = None;
            }
            Err(e) => {
                // B was to be compared with a trace that did not load: it is not compared with the next one.
                if purpose == Purpose::Show {
                    self.compare_next = None;
                }
                if !matches!(e, LoadError::Cancelled) {
                    self.message = Some(match purpose {
                        Purpose::Show => e.to_string(),
                        Purpose::Compare => format!("Cannot compare: {e}"),
                    });
                }
            }
        }
    }

    fn poll_dialog(&mut self) {
        let Some(d) = &self.dialog else { return };
        match d.rx.try_recv() {
            Ok(Some(path)) => {
                let purpose = d.purpose;
                self.dialog = None;
                match purpose {
                    Purpose::Show => self.open(TraceSource::Path(path)),
                    Purpose::Compare => self.compare_with(TraceSource::Path(path)),
                }
            }
            Ok(None) | Err(TryRecvError::Disconnected) => {
                // An answer within a moment means no dialog was shown: no desktop portal is running.
                if d.started.elapsed() < Duration::from_millis(500) {
                    self.message = Some(
                        "No file dialog is available (no desktop portal answered). Type the path instead.".to_owned(),
                    );
                    self.path_purpose = Some(d.purpose);
                }
                self.dialog = None;
            }
            Err(TryRecvError::Empty) => {}
        }
    }

    fn open_dialog(&mut self, purpose: Purpose) {
        let title = match purpose {
            Purpose::Show => "Open a tokenscope trace",
            Purpose::Compare => "Compare with a trace (B)",
        };
        let spawned = Job::spawn("file-dialog", self.ctx.as_ref(), move || {
            rfd::FileDialog::new()
                .set_title(title)
                .add_filter("trace", &["parquet", "jsonl", "gz", "zst", "ndjson"])
                .pick_file()
        });
        match spawned {
            Ok(rx) => {
                self.dialog = Some(Dialog {
                    rx,
                    purpose,
                    started: Instant::now(),
                });
            }
            Err(_) => self.path_purpose = Some(purpose),
        }
    }

    /// The caption strip of a PNG (trace, time range on screen in UTC, selection), over the bottom of the captured
    /// region in the frame that is captured.
    fn caption_ui(&self, ctx: &egui::Context, region: egui::Rect) {
        let Some(s) = &self.session else { return };
        let trace = &s.view.trace;
        let text = capture::caption_text(
            &s.source.name(),
            s.waterfall.viewport,
            s.selected.map(|r| trace.request_id(r)),
            s.microscope
                .as_ref()
                .and_then(|m| m.token_row(trace))
                .map(|t| trace.tokens.index[t]),
        );
        let painter = ctx.layer_painter(egui::LayerId::new(egui::Order::Foreground, egui::Id::unique("caption")));
        let strip = egui::Rect::from_min_max(
            egui::pos2(region.left(), region.bottom() - capture::CAPTION_HEIGHT),
            region.max,
        );
        capture::paint_caption(&painter, strip, text);
    }

    /// Applies what was asked for during the frame, in order.
    pub fn apply(&mut self, ctx: &egui::Context, commands: Vec<Command>) {
        for c in commands {
            self.apply_one(ctx, c);
        }
    }

    fn apply_one(&mut self, ctx: &egui::Context, command: Command) {
        let waker = self.ctx.clone();
        match command {
            Command::Open(path) => self.open(TraceSource::Path(path)),
            Command::OpenMany(paths) => self.open(TraceSource::Paths(paths)),
            Command::OpenDemo => self.open(TraceSource::Demo),
            Command::SetLogClock(clock) => {
                self.log_clock = clock;
                if let Some(source) = self.session.as_ref().map(|s| s.source.clone()) {
                    self.open(source);
                }
            }
            Command::OpenDialog => self.open_dialog(Purpose::Show),
            Command::CompareDialog => self.open_dialog(Purpose::Compare),
            Command::CompareWith(path) => self.compare_with(TraceSource::Path(path)),
            Command::StopComparing => {
                self.compare = None;
                self.compare_next = None;
                if let Some(l) = self.loading.as_ref().filter(|l| l.purpose == Purpose::Compare) {
                    l.progress.cancel();
                }
            }
            Command::SelectPair { a, b } => {
                if let (Some(s), Some(c)) = (&mut self.session, &mut self.compare) {
                    s.select(Some(a), true);
                    c.other.select(Some(b), true);
                }
            }
            Command::CompareGoTo {
                side,
                from_ns,
                to_ns,
                request,
            } => match side {
                Side::A => self.go_to(from_ns, to_ns, request, None),
                Side::B => {
                    if let Some(c) = &mut self.compare {
                        c.other.go_to(from_ns, to_ns, request, None, waker.as_ref());
                    }
                }
            },
            Command::RenderPng(which, destination) => self.render_png(which, ctx.content_rect().size(), destination),
            Command::Capture(target, destination) => {
                let crop = match target {
                    capture::Target::Window => None,
                    capture::Target::Waterfall => self.panel_rects[0],
                    capture::Target::Microscope => self.panel_rects[1],
                };
                self.pending_capture = Some(capture::request(ctx, crop, destination));
            }
            Command::CopyText(text) => ctx.copy_text(text),
            Command::ExportRange { chrome } => self.export_range(chrome),
            Command::SaveCsv { csv, what } => {
                let name = format!("tokenscope-{what}-{}.csv", chrono::Utc::now().format("%Y%m%d-%H%M%S"));
                let title = match what {
                    "statistics" => "Export the statistics as CSV",
                    _ => "Export the query's result as CSV",
                };
                self.save_in_background(csv.into_bytes(), title, name);
            }
            Command::Select { request, scroll } => {
                if let Some(s) = &mut self.session {
                    s.select(request, scroll);
                }
                self.select_twin();
            }
            Command::AnalyseRange(a, b) => {
                if let Some(s) = &mut self.session {
                    s.analyse_range(a, b, waker.as_ref());
                }
            }
            Command::SelectRange(a, b) => {
                if let Some(s) = &mut self.session {
                    s.waterfall.range = Some((a, b));
                    s.analyse_range(a, b, waker.as_ref());
                }
            }
            Command::ClearRange => {
                if let Some(s) = &mut self.session {
                    s.clear_range();
                }
            }
            Command::ZoomTo(a, b) => {
                if let Some(s) = &mut self.session {
                    s.zoom_to(a, b);
                }
            }
            Command::GoTo {
                from_ns,
                to_ns,
                request,
                token,
            } => self.go_to(from_ns, to_ns, request, token),
        }
    }

    /// Writes the selected range as a slice on its own thread: the dialog asks where (without one, the current
    /// directory), candidates left on disk are read for the requests of the slice.
    fn export_range(&mut self, chrome: bool) {
        let Some((s, (from, to))) = self.session.as_ref().and_then(|s| Some((s, s.waterfall.range?))) else {
            return;
        };
        let trace = Arc::clone(&s.view.trace);
        let reader = s.candidates.clone();
        let save_dir = self.save_dir.clone();
        self.save_job("export-slice", move || {
            let ext = if chrome { "json" } else { "parquet" };
            let name = chrono::Utc::now()
                .format(&format!("tokenscope-slice-%Y%m%d-%H%M%S.{ext}"))
                .to_string();
            let path = capture::destination(save_dir.as_deref(), "Export the selected range", &name)?;
            let part = match &reader {
                Some(rd) => {
                    let unread = std::cell::OnceCell::new();
                    let read = |r: u32| {
                        rd.candidates(&trace, r).unwrap_or_else(|e| {
                            let _ = unread.set(e);
                            Vec::new()
                        })
                    };
                    let part = crate::trace::slice::slice_with(&trace, from, to, None, Some(&read));
                    if let Some(e) = unread.get() {
                        return Err(format!("cannot read the candidates of the slice: {e}"));
                    }
                    part
                }
                None => crate::trace::slice::slice(&trace, from, to, None),
            };
            let written = if chrome {
                format::chrome::write(&part, &path).map_err(|e| e.to_string())
            } else {
                format::write(&part, &path).map_err(|e| e.to_string())
            };
            written.map(|()| path)
        });
    }

    /// Draws the views as they are on screen (time range, scroll, selection, token) offscreen at 2 pixels per
    /// point on a thread of its own, and saves the PNG.
    fn render_png(&mut self, which: View, size: egui::Vec2, destination: capture::Destination) {
        let Some(s) = &self.session else { return };
        if self.saving.is_some() || self.rendering.is_some() {
            self.notice = Some("A PNG is being made: wait for it before asking for another.".to_owned());
            return;
        }
        let which = if which != View::Waterfall && s.microscope.is_none() {
            View::Waterfall
        } else {
            which
        };
        let scene = render::Scene {
            view: s.view.clone(),
            candidates: s.candidates.clone(),
            source_name: s.source.name(),
            time_range: s.waterfall.viewport.map(|v| (v.start_ns, v.end_ns())),
            selection: s.waterfall.range,
            request: s.selected,
            token: s.microscope.as_ref().and_then(|m| m.token),
            slo: self.settings.slo,
            caption: self.settings.caption,
            scroll_y: Some(s.waterfall.scroll_y),
            layout: s.waterfall.layout,
        };
        let (width, height) = (size.x.max(400.0), size.y.max(300.0));
        let size = render::Size {
            width,
            height,
            // 2x, unless a very large window would exceed the renderer's largest image.
            pixels_per_point: render::fitting_scale(width, height, 2.0),
        };
        if destination == capture::Destination::Clipboard {
            match Job::spawn("render-png", self.ctx.as_ref(), move || {
                render::render(scene, which, size).map_err(|e| e.to_string())
            }) {
                Ok(job) => self.rendering = Some(job),
                Err(e) => self.message = Some(e),
            }
            return;
        }
        let save_dir = self.save_dir.clone();
        self.save_job("render-png", move || {
            let image = render::render(scene, which, size).map_err(|e| e.to_string())?;
            let png = capture::encode_png(&image)?;
            capture::save(&png, save_dir.as_deref(), &capture::default_name())
        });
    }

    /// The findings panel (left), computed on a thread of its own once per trace, objectives and thresholds.
    fn findings_panel(&mut self, ui: &mut Ui) {
        let Some(s) = &mut self.session else { return };
        let trace = Arc::clone(&s.view.trace);
        // The findings wake the UI when they are done: no polling.
        s.findings
            .refresh(&trace, self.settings.slo, self.settings.thresholds, Some(ui.ctx()));
        if !self.show_findings {
            return;
        }
        let t0 = s.view.t0_ns;
        let mut open = true;
        let (out, thresholds) = (&mut self.commands, &mut self.settings.thresholds);
        egui::Panel::left("findings")
            .resizable(true)
            .default_size(330.0)
            .show(ui, |ui| {
                ui.horizontal(|ui| {
                    ui.strong("Findings");
                    if ui.small_button("Close").clicked() {
                        open = false;
                    }
                });
                findings_panel::findings_ui(ui, &trace, t0, &mut s.findings, thresholds, out);
            });
        self.show_findings = open;
    }

    /// Shows a time range with a margin, selects a request (scrolled into view) and a token, and analyses the range
    /// as if it had been drag-selected.
    pub fn go_to(&mut self, from_ns: i64, to_ns: i64, request: Option<u32>, token: Option<usize>) {
        let waker = self.ctx.clone();
        if let Some(s) = &mut self.session {
            s.go_to(from_ns, to_ns, request, token, waker.as_ref());
        }
        self.select_twin();
    }

    /// While comparing, selects in B the twin of the request selected in A (when it has one) and brings it into view;
    /// no selection in A clears B's.
    fn select_twin(&mut self) {
        let (Some(s), Some(c)) = (&self.session, &mut self.compare) else {
            return;
        };
        let Some(r) = s.selected else {
            c.other.select(None, false);
            return;
        };
        let twin = c
            .comparison
            .as_ref()
            .and_then(|cmp| cmp.pairing.pairs.iter().find(|&&(ra, _)| ra == r).map(|&(_, rb)| rb));
        if let Some(rb) = twin
            && c.other.selected != Some(rb)
        {
            c.other.select(Some(rb), true);
        }
    }

    /// The statistics window, when open.
    fn stats_window(&mut self, ctx: &egui::Context) {
        let Some(s) = &mut self.session else { return };
        if !self.show_stats {
            return;
        }
        let mut open = true;
        let screen = ctx.content_rect();
        let (slo, out) = (self.settings.slo, &mut self.commands);
        let other = self
            .compare
            .as_mut()
            .map(|c| c.samples(s.stats.grouping, s.stats.group.as_deref()));
        egui::Window::new("Statistics")
            .open(&mut open)
            .default_pos(screen.min + egui::vec2(40.0, 70.0))
            .default_size([1100.0, 520.0])
            .max_width(screen.width() - 60.0)
            .resizable(true)
            .show(ctx, |ui| {
                stats::stats_ui(ui, &s.view, &mut s.stats, other, slo, out);
            });
        self.show_stats = open;
    }

    /// The Comparison window, while comparing; the comparison is computed again when the objectives or thresholds
    /// change.
    fn compare_window(&mut self, ctx: &egui::Context) {
        let (Some(s), Some(c)) = (&self.session, &mut self.compare) else {
            return;
        };
        c.poll();
        c.other.poll_interference();
        c.refresh(&s.view.trace, self.settings.slo, self.settings.thresholds, Some(ctx));
        if !c.show_window {
            return;
        }
        let mut open = true;
        let screen = ctx.content_rect();
        let (slo, out) = (self.settings.slo, &mut self.commands);
        egui::Window::new("Comparison")
            .open(&mut open)
            // On the right, over the tracks' far end: the engine labels and the start of both waterfalls stay in view.
            .default_pos(egui::pos2(
                (screen.right() - 820.0).max(screen.left()),
                screen.top() + 70.0,
            ))
            .default_size([800.0, 600.0])
            .max_width(screen.width() - 60.0)
            .resizable(true)
            .show(ctx, |ui| super::compare::comparison_ui(ui, s, c, slo, out));
        c.show_window = open;
    }

    /// The Timeline panel (under the waterfall, on its time axis), when shown.
    #[cfg(feature = "query")]
    fn timeline_panel(&mut self, ui: &mut Ui) {
        if !self.show_timeline {
            if let Some(s) = &mut self.session {
                s.waterfall.linked_hover_ns = None;
            }
            return;
        }
        let Some(s) = &mut self.session else { return };
        let (slo, out) = (self.settings.slo, &mut self.commands);
        egui::Panel::bottom("timeline")
            .resizable(true)
            .default_size(380.0)
            .show(ui, |ui| {
                let other = self.compare.as_mut().map(|c| (&c.other.view, &mut c.other.timeline));
                super::timeline::timeline_ui(ui, &s.view, &mut s.waterfall, &mut s.timeline, other, slo, out);
            });
    }

    /// The Query window, when open.
    #[cfg(feature = "query")]
    fn query_window(&mut self, ctx: &egui::Context) {
        let Some(s) = &mut self.session else { return };
        if !self.show_query {
            return;
        }
        let mut open = true;
        let screen = ctx.content_rect();
        let trace = Arc::clone(&s.view.trace);
        let (history, out) = (&mut self.settings.query_history, &mut self.commands);
        egui::Window::new("Query")
            .open(&mut open)
            .default_pos(screen.min + egui::vec2(60.0, 90.0))
            .default_size([900.0, 560.0])
            .max_width(screen.width() - 60.0)
            .resizable(true)
            .show(ctx, |ui| {
                super::query::query_ui(ui, &trace, &mut s.query, history, out);
            });
        self.show_query = open;
    }

    /// Saves bytes on a thread of their own (the dialog blocks), to `save_dir` when set.
    fn save_in_background(&mut self, bytes: Vec<u8>, title: &'static str, name: String) {
        let save_dir = self.save_dir.clone();
        self.save_job("save", move || {
            capture::save_as(&bytes, save_dir.as_deref(), title, &name)
        });
    }

    /// Runs a job that writes a file on a thread of its own; `poll_capture` reports the path it wrote or its error.
    fn save_job(&mut self, name: &str, job: impl FnOnce() -> Result<PathBuf, String> + Send + 'static) {
        match Job::spawn(name, self.ctx.as_ref(), job) {
            Ok(job) => self.saving = Some(job),
            Err(e) => self.message = Some(e),
        }
    }

    /// True while a PNG or a slice is being rendered or saved.
    pub fn saving(&self) -> bool {
        self.saving.is_some()
    }

    /// Waits for the PNG or slice being saved and returns what came of it (tests use this).
    pub fn wait_saved(&mut self) -> Option<Result<PathBuf, String>> {
        let rx = self.saving.take()?;
        let result = rx.recv().ok();
        match &result {
            Some(Ok(path)) => self.notice = Some(format!("Saved {}", path.display())),
            Some(Err(e)) => self.message = Some(e.clone()),
            None => {}
        }
        result
    }

    /// True while a screenshot is on its way from the renderer.
    pub fn capture_pending(&self) -> bool {
        self.pending_capture.is_some()
    }

    /// Turns a screenshot that arrived into a PNG on disk or on the clipboard.
    fn poll_capture(&mut self, ctx: &egui::Context) {
        if let Some(p) = &self.pending_capture
            && let Ok(image) = p.rx.try_recv()
        {
            let cropped = capture::crop_image(&image, p.crop, ctx.pixels_per_point());
            let destination = p.destination;
            self.pending_capture = None;
            match destination {
                capture::Destination::Clipboard => {
                    ctx.copy_image(cropped);
                    self.notice = Some("Copied the PNG to the clipboard.".to_owned());
                }
                capture::Destination::File => match capture::encode_png(&cropped) {
                    Ok(png) => {
                        let save_dir = self.save_dir.clone();
                        self.save_job("save-png", move || {
                            capture::save(&png, save_dir.as_deref(), &capture::default_name())
                        });
                    }
                    Err(e) => self.message = Some(format!("cannot encode the PNG: {e}")),
                },
            }
        }
        if let Some(rx) = &self.rendering
            && let Ok(result) = rx.try_recv()
        {
            self.rendering = None;
            match result {
                Ok(image) => {
                    ctx.copy_image(image);
                    self.notice = Some("Copied the 2x PNG of the views to the clipboard.".to_owned());
                }
                Err(e) => self.message = Some(e),
            }
        }
        if let Some(rx) = &self.saving
            && let Ok(result) = rx.try_recv()
        {
            self.saving = None;
            match result {
                Ok(path) => self.notice = Some(format!("Saved {}", path.display())),
                Err(e) => self.message = Some(e),
            }
        }
    }

    /// The whole window: draws every panel, then applies what was asked for during the frame.
    pub fn ui(&mut self, ui: &mut Ui) {
        if !self.fonts_installed {
            super::theme::install_fonts(ui.ctx());
            self.fonts_installed = true;
        }
        if self.ctx.is_none() {
            self.ctx = Some(ui.ctx().clone());
        }
        self.poll_loading();
        self.poll_dialog();
        if let Some(answer) = self.dataset.as_mut().and_then(|d| d.ui(ui.ctx())) {
            self.answer(answer);
        }
        if let Some(s) = &mut self.session {
            s.poll_interference();
        }
        let dropped: Vec<PathBuf> = ui.input(|i| i.raw.dropped_files.iter().map(|f| f.path().to_path_buf()).collect());
        match <[PathBuf; 1]>::try_from(dropped) {
            Ok([p]) => self.commands.push(Command::Open(p)),
            // Several files dropped together: one run's files, opened as one trace.
            Err(several) if !several.is_empty() => self.commands.push(Command::OpenMany(several)),
            Err(_) => {}
        }
        self.poll_capture(ui.ctx());
        if ui.input_mut(|i| i.consume_key(egui::Modifiers::COMMAND | egui::Modifiers::SHIFT, egui::Key::S)) {
            self.commands
                .push(Command::RenderPng(View::Both, capture::Destination::File));
        }
        egui::Panel::top("menu").show(ui, |ui| self.menu_ui(ui));
        egui::Panel::top("toolbar").show(ui, |ui| self.toolbar_ui(ui));
        egui::Panel::bottom("status").show(ui, |ui| self.status_ui(ui));
        if self.show_problems
            && let Some(s) = &self.session
        {
            let mut open = true;
            egui::Panel::bottom("problems")
                .resizable(true)
                .default_size(160.0)
                .show(ui, |ui| {
                    panels::problems_ui(ui, &s.report, &mut open);
                });
            self.show_problems = open;
        }
        self.findings_panel(ui);
        let waker = self.ctx.clone();
        if let Some(s) = &mut self.session {
            s.sync_microscope(waker.as_ref());
        }
        if self.session.as_ref().is_some_and(|s| s.microscope.is_some()) {
            egui::Panel::bottom("microscope")
                .resizable(true)
                .default_size(340.0)
                .show(ui, |ui| {
                    self.panel_rects[1] = Some(ui.max_rect());
                    self.microscope_ui(ui);
                });
        } else {
            self.panel_rects[1] = None;
        }
        #[cfg(feature = "query")]
        self.timeline_panel(ui);
        if self
            .session
            .as_ref()
            .is_some_and(|s| s.interference.is_some() || s.analysing())
        {
            egui::Panel::right("selection")
                .resizable(true)
                .default_size(380.0)
                .show(ui, |ui| self.side_ui(ui));
        }
        egui::CentralPanel::default().show(ui, |ui| {
            self.panel_rects[0] = Some(ui.max_rect());
            self.central_ui(ui);
        });
        self.stats_window(ui.ctx());
        self.compare_window(ui.ctx());
        #[cfg(feature = "query")]
        self.query_window(ui.ctx());
        let commands = std::mem::take(&mut self.commands);
        self.apply(ui.ctx(), commands);
        // The renderer reads a frame drawn after the request: the caption stays until the pixels arrive.
        if self.settings.caption
            && let Some(p) = &self.pending_capture
        {
            let region = p.crop.unwrap_or_else(|| ui.ctx().content_rect());
            self.caption_ui(ui.ctx(), region);
        }
        // Jobs wake the UI when they finish; only the load's progress bar and a screenshot on its way need frames.
        if self.pending_capture.is_some() || self.loading.is_some() {
            ui.ctx().request_repaint_after(Duration::from_millis(50));
        }
    }

    fn menu_ui(&mut self, ui: &mut Ui) {
        let out = &mut self.commands;
        egui::MenuBar::new().ui(ui, |ui| {
            ui.menu_button("File", |ui| {
                if ui.button("Open…").clicked() {
                    out.push(Command::OpenDialog);
                    ui.close();
                }
                ui.separator();
                let has_request = self.session.as_ref().is_some_and(|s| s.microscope.is_some());
                let renders = [
                    ("Save 2x PNG of the views (Ctrl+Shift+S)", View::Both, true),
                    ("Save 2x PNG of the waterfall", View::Waterfall, true),
                    ("Save 2x PNG of the request view", View::Request, has_request),
                ];
                for (label, which, enabled) in renders {
                    if ui.add_enabled(enabled, egui::Button::new(label)).clicked() {
                        out.push(Command::RenderPng(which, capture::Destination::File));
                        ui.close();
                    }
                }
                if ui.button("Copy 2x PNG of the views").clicked() {
                    out.push(Command::RenderPng(View::Both, capture::Destination::Clipboard));
                    ui.close();
                }
                if ui.button("Save PNG of the window as on screen").clicked() {
                    out.push(Command::Capture(capture::Target::Window, capture::Destination::File));
                    ui.close();
                }
                if ui.button("Copy PNG of the window").clicked() {
                    out.push(Command::Capture(
                        capture::Target::Window,
                        capture::Destination::Clipboard,
                    ));
                    ui.close();
                }
                ui.checkbox(&mut self.settings.caption, "Caption strip on PNGs");
                ui.separator();
                if ui.button("Open path…").clicked() {
                    self.path_purpose = Some(Purpose::Show);
                    ui.close();
                }
                ui.separator();
                let open = self.session.is_some();
                if ui.add_enabled(open, egui::Button::new("Compare with…")).clicked() {
                    out.push(Command::CompareDialog);
                    ui.close();
                }
                if ui.add_enabled(open, egui::Button::new("Compare with path…")).clicked() {
                    self.path_purpose = Some(Purpose::Compare);
                    ui.close();
                }
                if self.compare.is_some() && ui.button("Stop comparing").clicked() {
                    out.push(Command::StopComparing);
                    ui.close();
                }
                ui.separator();
                if ui.button("Open the demo trace").clicked() {
                    out.push(Command::OpenDemo);
                    ui.close();
                }
                ui.horizontal(|ui| {
                    let mut gb = self.settings.memory_budget_gb.unwrap_or_else(|| {
                        #[allow(clippy::cast_precision_loss)] // display
                        let half = load::budget::default_budget() as f64 / 1e9;
                        (half * 10.0).round() / 10.0
                    });
                    let label = ui.label("Memory budget");
                    let r = ui
                        .add(
                            egui::DragValue::new(&mut gb)
                                .range(0.1..=4096.0)
                                .speed(0.1)
                                .suffix(" GB"),
                        )
                        .labelled_by(label.id)
                        .on_hover_text("A trace estimated to take more is not loaded: open a part of it instead");
                    if r.changed() {
                        self.settings.memory_budget_gb = Some(gb);
                    }
                });
                if ui
                    .button("Server log times…")
                    .on_hover_text("The date and zone of a server log whose times lack them")
                    .clicked()
                {
                    self.log_clock_input = Some(LogClockInput::default());
                    ui.close();
                }
                ui.menu_button("Open recent", |ui| {
                    if self.settings.recent.is_empty() {
                        ui.weak("nothing yet");
                    }
                    for r in &self.settings.recent {
                        if ui.button(r).clicked() {
                            out.push(Command::Open(PathBuf::from(r)));
                            ui.close();
                        }
                    }
                });
            });
            ui.menu_button("View", |ui| {
                if ui.button("Fit the whole trace (double-click)").clicked() {
                    if let Some(s) = &mut self.session {
                        s.waterfall.viewport = None;
                    }
                    ui.close();
                }
                if ui.checkbox(&mut self.show_findings, "Findings").clicked() {
                    ui.close();
                }
                if ui.checkbox(&mut self.show_stats, "Statistics").clicked() {
                    ui.close();
                }
                #[cfg(feature = "query")]
                if ui.checkbox(&mut self.show_query, "Query (SQL)").clicked() {
                    ui.close();
                }
                #[cfg(feature = "query")]
                if ui.checkbox(&mut self.show_timeline, "Timeline").clicked() {
                    ui.close();
                }
                if ui.button("Load problems").clicked() {
                    self.show_problems = true;
                    ui.close();
                }
            });
            ui.menu_button("SLOs", |ui| {
                ui.label("Requests are judged by these objectives (0 = none):");
                for (label, value) in [
                    ("TTFT ≤ (ms)", &mut self.settings.slo.ttft_ms),
                    ("TPOT ≤ (ms)", &mut self.settings.slo.tpot_ms),
                ] {
                    ui.horizontal(|ui| {
                        let name = ui.label(label);
                        let mut v = value.unwrap_or(0.0);
                        if ui
                            .add(egui::DragValue::new(&mut v).range(0.0..=600_000.0).speed(1.0))
                            .labelled_by(name.id)
                            .changed()
                        {
                            *value = (v > 0.0).then_some(v);
                        }
                    });
                }
            });
            ui.menu_button("Help", |ui| {
                ui.label("Ctrl+wheel: zoom at the pointer · W/S: zoom · A/D: pan");
                ui.label("Drag on the ruler: pan · Drag on the tracks: select a time range");
                ui.label("F: fit the selection · Double-click: whole trace · Esc: clear the range");
                ui.label("Click a request track to select it. Drop a trace file on the window to open it.");
            });
        });
    }

    /// The date and zone server logs are read with, as the user last gave them (none: as each log says).
    pub fn log_clock(&self) -> crate::import::log_clock::LogClock {
        self.log_clock
    }

    fn toolbar_ui(&mut self, ui: &mut Ui) {
        if let Some(input) = &mut self.log_clock_input {
            let mut keep = true;
            ui.horizontal(|ui| keep = log_clock_ui(ui, input, &mut self.commands));
            if !keep {
                self.log_clock_input = None;
            }
        }
        ui.horizontal(|ui| {
            if let Some(purpose) = self.path_purpose {
                let label = ui.label(match purpose {
                    Purpose::Show => "Path:",
                    Purpose::Compare => "Compare with (B):",
                });
                let r = ui
                    .add(egui::TextEdit::singleline(&mut self.path_input).desired_width(420.0))
                    .labelled_by(label.id);
                let go =
                    ui.button("Open").clicked() || (r.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter)));
                if go && !self.path_input.trim().is_empty() {
                    let path = PathBuf::from(self.path_input.trim());
                    self.commands.push(match purpose {
                        Purpose::Show => Command::Open(path),
                        Purpose::Compare => Command::CompareWith(path),
                    });
                    self.path_purpose = None;
                }
                if ui.button("Cancel").clicked() {
                    self.path_purpose = None;
                }
                ui.separator();
            }
            if let Some(loading) = &self.loading {
                ui.label(match loading.purpose {
                    Purpose::Show => format!("Loading {}", loading.source.name()),
                    Purpose::Compare => format!("Loading B: {}", loading.source.name()),
                });
                ui.add(
                    egui::ProgressBar::new(loading.progress.fraction())
                        .desired_width(200.0)
                        .show_percentage(),
                );
                if ui.button("Cancel").clicked() {
                    loading.progress.cancel();
                }
                ui.separator();
            }
            let Some(s) = &mut self.session else { return };
            let trace = Arc::clone(&s.view.trace);
            let mut changed = false;
            let sort_label = ui.label("Sort");
            let order_label = TrackOrder::ALL
                .iter()
                .find(|(o, _)| *o == self.settings.order)
                .map_or("", |(_, l)| l);
            egui::ComboBox::from_id_salt("order")
                .selected_text(order_label)
                .show_ui(ui, |ui| {
                    for (o, label) in TrackOrder::ALL {
                        changed |= ui.selectable_value(&mut self.settings.order, o, label).changed();
                    }
                })
                .response
                .labelled_by(sort_label.id);
            let layout_label = ui.label("Layout");
            let layout_text = TrackLayout::ALL
                .iter()
                .find(|(l, _)| *l == self.settings.layout)
                .map_or("", |(_, l)| l);
            egui::ComboBox::from_id_salt("layout")
                .selected_text(layout_text)
                .show_ui(ui, |ui| {
                    for (l, label) in TrackLayout::ALL {
                        ui.selectable_value(&mut self.settings.layout, l, label);
                    }
                })
                .response
                .labelled_by(layout_label.id);
            let labels = &s.view.filter_labels;
            for ((name, field), values) in [
                ("model", &mut s.filter.model),
                ("app", &mut s.filter.app_id),
                ("user", &mut s.filter.user_id),
                ("finish", &mut s.filter.finish_reason),
            ]
            .into_iter()
            .zip(labels)
            {
                changed |= panels::label_filter_ui(ui, name, field, values, &trace);
            }
            let search_label = ui.label("Search");
            changed |= ui
                .add(
                    egui::TextEdit::singleline(&mut s.filter.search)
                        .hint_text("request id")
                        .desired_width(140.0),
                )
                .labelled_by(search_label.id)
                .changed();
            if changed {
                s.refresh_rows(self.settings.order);
            }
            ui.separator();
            let findings = match s.findings.counts() {
                Some([c, w, i]) => format!("Findings {}", c + w + i),
                None => "Findings …".to_owned(),
            };
            ui.toggle_value(&mut self.show_findings, findings);
            ui.toggle_value(&mut self.show_stats, "Statistics");
            if let Some(c) = &mut self.compare {
                ui.toggle_value(&mut c.show_window, "Comparison");
            }
            #[cfg(feature = "query")]
            ui.toggle_value(&mut self.show_timeline, "Timeline");
            #[cfg(feature = "query")]
            ui.toggle_value(&mut self.show_query, "Query");
        });
    }

    fn status_ui(&mut self, ui: &mut Ui) {
        ui.horizontal(|ui| {
            if let Some(m) = &self.message {
                ui.colored_label(ui.visuals().error_fg_color, m);
                if ui.small_button("Dismiss").clicked() {
                    self.message = None;
                }
                ui.separator();
            }
            if let Some(n) = &self.notice {
                ui.label(n);
                if ui.small_button("Dismiss").clicked() {
                    self.notice = None;
                }
                ui.separator();
            }
            let Some(s) = &self.session else {
                match (&self.loading, self.preview.as_ref().and_then(Preview::requests)) {
                    (Some(l), Some(n)) => ui.label(format!(
                        "Loading {}: {n} requests read so far are drawn; the rest follows.",
                        l.source.name()
                    )),
                    (Some(l), None) => ui.label(format!("Loading {}…", l.source.name())),
                    (None, _) => ui.label("No trace open. File > Open…, or drop a trace file on the window."),
                };
                return;
            };
            panels::status_ui(ui, s, s.waterfall.hover_ns);
            if s.report.rejected_count() > 0
                && ui
                    .link(format!("{} rejected records", s.report.rejected_count()))
                    .clicked()
            {
                self.show_problems = true;
            }
            let notes = s.report.notes.len();
            if notes > 0
                && ui
                    .link(format!(
                        "{notes} note{} on the source",
                        if notes == 1 { "" } else { "s" }
                    ))
                    .clicked()
            {
                self.show_problems = true;
            }
        });
    }

    fn microscope_ui(&mut self, ui: &mut Ui) {
        let Some(s) = &mut self.session else { return };
        let trace = Arc::clone(&s.view.trace);
        let Some(m) = &mut s.microscope else { return };
        ui.horizontal(|ui| {
            ui.strong("Request under the microscope");
            if ui.small_button("Close").clicked() {
                self.commands.push(Command::Select {
                    request: None,
                    scroll: false,
                });
            }
        });
        ui.push_id(s.id, |ui| {
            microscope_ui(ui, &trace, m, self.settings.slo, &mut self.commands);
        });
    }

    fn side_ui(&mut self, ui: &mut Ui) {
        let Some(s) = &self.session else { return };
        let trace = &s.view.trace;
        let out = &mut self.commands;
        egui::ScrollArea::vertical().show(ui, |ui| {
            if s.analysing() {
                ui.horizontal(|ui| {
                    ui.spinner();
                    ui.label("Analysing the selected range…");
                });
            } else if let Some(x) = &s.interference {
                panels::interference_ui(ui, trace, x, s.view.t0_ns, out);
                ui.separator();
            }
        });
    }

    fn central_ui(&mut self, ui: &mut Ui) {
        let Some(s) = &mut self.session else {
            if self.loading.is_some()
                && let Some(p) = &mut self.preview
                && p.ui(ui, self.settings.layout)
            {
                return;
            }
            ui.centered_and_justified(|ui| {
                if self.loading.is_some() {
                    ui.label(RichText::new("Loading…").size(18.0));
                } else {
                    ui.label("Open a trace: File > Open…, File > Open path…, or drop a file here.");
                }
            });
            return;
        };
        s.waterfall.layout = self.settings.layout;
        if let Some(c) = &mut self.compare {
            c.other.waterfall.layout = self.settings.layout;
            super::compare::stacked_ui(ui, s, c, &mut self.commands);
            return;
        }
        // Widgets' memory (scroll, hover) is kept per session: a new trace starts afresh.
        ui.push_id(s.id, |ui| {
            waterfall::waterfall_ui(ui, &s.view, &mut s.waterfall, s.selected, &mut self.commands);
        });
    }
}

impl eframe::App for App {
    fn ui(&mut self, ui: &mut Ui, _frame: &mut eframe::Frame) {
        App::ui(self, ui);
    }

    fn save(&mut self, storage: &mut dyn eframe::Storage) {
        if let Some(s) = &self.session {
            self.settings.prices = s.stats.prices.clone();
        }
        eframe::set_value(storage, STORAGE_KEY, &self.settings);
    }
}

/// What File > Server log times… asks for, as typed, and why it was refused.
#[derive(Debug, Default)]
struct LogClockInput {
    date: String,
    zone: String,
    error: Option<String>,
}

/// The row of File > Server log times…: the date a log starts on and the zone its server wrote in, for logs whose
/// times lack them (vLLM writes `MM-DD HH:MM:SS`, SGLang no zone); applying them opens the trace again. False once
/// applied or cancelled.
fn log_clock_ui(ui: &mut Ui, input: &mut LogClockInput, out: &mut Vec<Command>) -> bool {
    use crate::import::log_clock::{LogClock, parse_date, parse_offset};
    let label = ui.label("Log's first day:");
    ui.add(
        egui::TextEdit::singleline(&mut input.date)
            .hint_text("2025-11-03")
            .desired_width(100.0),
    )
    .labelled_by(label.id);
    let label = ui.label("Server's zone:");
    ui.add(
        egui::TextEdit::singleline(&mut input.zone)
            .hint_text("UTC, +08:00")
            .desired_width(100.0),
    )
    .labelled_by(label.id);
    let mut keep = true;
    if ui.button("Apply and open again").clicked() {
        let (date, zone) = (input.date.trim(), input.zone.trim());
        let clock = (|| -> Result<LogClock, String> {
            Ok(LogClock {
                date: (!date.is_empty()).then(|| parse_date(date)).transpose()?,
                utc_offset_s: (!zone.is_empty()).then(|| parse_offset(zone)).transpose()?,
            })
        })();
        match clock {
            Ok(clock) => {
                out.push(Command::SetLogClock(clock));
                keep = false;
            }
            Err(e) => input.error = Some(e),
        }
    }
    if ui.button("Cancel").clicked() {
        keep = false;
    }
    match &input.error {
        Some(e) => ui.colored_label(ui.visuals().error_fg_color, e),
        None => ui.weak("empty: as UTC, in the year of the trace's other files"),
    };
    keep
}
