//! The app shell: the session of the trace on screen and the load of the next one, the commands applied after each
//! frame ([`App::apply`], in `commands`), the load-problems panel and the side panel of the selection. Panels draw and push
//! [`Command`]s. Around it: `menu` (the menu bar), `bars` (the toolbar and the status bar), `windows` (findings,
//! statistics, comparison, timeline, query), `output` (exports, PNGs, captures and their saving), `log_clock`
//! (File > Server log times…), `loading` (a load on its thread, the file dialog, what a finished load becomes).

mod bars;
mod commands;
mod live;
mod loading;
mod log_clock;
mod menu;
mod output;
mod watching;
mod what_if;
mod windows;
mod without_tokens;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::TryRecvError;
use std::time::{Duration, Instant};

use eframe::egui::{self, RichText, Ui};

use crate::analysis::cost::Prices;
use crate::analysis::findings::Thresholds;
use crate::analysis::summary::Slo;
use crate::ingest::{LoadError, Progress};
use crate::load;
use crate::load::Loaded;
use crate::trace::CandidateSource;
use crate::ui::shell::compare::{Comparing, Side};
use crate::ui::shell::dataset::{Answer, DatasetDialog};
use crate::ui::shell::panels;
use crate::ui::shell::render::View;
use crate::ui::shell::session::{Session, TraceSource};
use crate::ui::views::microscope::microscope_ui;
use crate::ui::views::preview::Preview;
use crate::ui::views::waterfall;
use crate::ui::widgets::command::Command;
use crate::ui::widgets::job::Job;
use crate::ui::widgets::png;
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
    /// A server's log to watch as it is written.
    Watch,
}

/// A load in progress; the trace on screen stays usable meanwhile.
struct Loading {
    source: TraceSource,
    purpose: Purpose,
    progress: Arc<Progress>,
    rx: Job<LoadResult>,
}

/// What a load gives: the trace and where to read its candidates from, and for a trace opened without its tokens
/// (over the memory budget), its streamed findings.
type LoadResult = Result<
    (
        Loaded,
        Option<Arc<dyn CandidateSource>>,
        Option<without_tokens::WithoutTokens>,
    ),
    LoadError,
>;

/// An open-file dialog running on its own thread.
struct Dialog {
    rx: Job<Option<PathBuf>>,
    purpose: Purpose,
    started: Instant,
}

/// Which panels and windows are shown: the app's state of what is open, apart from what it keeps between runs
/// ([`Settings`]) and what runs in the background.
#[derive(Debug, Clone, Copy)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "independent switches: each panel or window shown or not"
)]
pub struct Shown {
    /// The findings panel (open at start: what was found is the first thing to read).
    pub findings: bool,
    /// The statistics window.
    pub stats: bool,
    /// The Query window.
    pub query: bool,
    /// The Timeline panel.
    pub timeline: bool,
    /// The load-problems window.
    pub problems: bool,
}

impl Default for Shown {
    fn default() -> Self {
        Shown {
            findings: true,
            stats: false,
            query: false,
            timeline: false,
            problems: false,
        }
    }
}

/// The app.
pub struct App {
    settings: Settings,
    /// The importer of the files given on the command line (`--from KIND`); files opened later are recognised.
    importer: Option<crate::import::Kind>,
    /// The date and zone of server logs whose times lack them (`--log-date`, `--log-tz`), for every load.
    log_clock: crate::import::log_clock::LogClock,
    /// File > Server log times…: the row asking for them, when open.
    log_clock_input: Option<log_clock::LogClockInput>,
    /// File > Compare with a what-if…'s row, while it is open.
    what_if_input: Option<what_if::WhatIfInput>,
    /// The trace on screen and everything that belongs to it.
    session: Option<Session>,
    /// The trace it is compared with, and the comparison.
    compare: Option<Comparing>,
    /// A trace to compare with once the one being loaded is on screen (`tokenscope A --compare B`).
    compare_next: Option<TraceSource>,
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
    /// Which panels and windows are shown.
    pub shown: Shown,
    fonts_installed: bool,
    /// What runs apart from the frames.
    background: Background,
    /// Where the waterfall and the high-power view were drawn (regenerated each frame).
    panel_rects: [Option<egui::Rect>; 2],
    /// Where PNGs and slices are saved without asking (tests set it); `None` asks through the file dialog.
    pub save_dir: Option<PathBuf>,
    /// What was asked for during the frame, applied after it.
    commands: Vec<Command>,
    /// The UI's context, for background jobs to wake it when their result is ready (set by the first frame).
    ctx: Option<egui::Context>,
}

/// What runs apart from the window's frames, each polled by them: a load, a screenshot and the PNGs being saved or
/// rendered, a recording, a watch. Beside it in [`App`]: what is persisted ([`Settings`]) and which panels and
/// windows are open ([`Shown`]).
#[derive(Default)]
struct Background {
    loading: Option<Loading>,
    /// A screenshot on its way from the renderer.
    pending_capture: Option<png::Pending>,
    /// A PNG being saved (through a dialog) on its own thread.
    saving: Option<Job<Result<PathBuf, String>>>,
    /// A 2x image being rendered for the clipboard on its own thread.
    rendering: Option<Job<Result<egui::ColorImage, String>>>,
    /// A recording shown as it is made.
    live: Option<crate::ui::shell::live::Live>,
    /// A server's log watched (File > Watch a server's log…, `tokenscope watch`).
    watching: Option<crate::ui::shell::watching::Watching>,
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

    /// As [`App::with_budget`], reading every file of `source` with the importer `from` (`--from KIND`) instead
    /// of recognising it.
    pub fn with_importer(
        source: TraceSource,
        storage: Option<&dyn eframe::Storage>,
        budget: Option<u64>,
        from: Option<crate::import::Kind>,
    ) -> Self {
        Self::with_log_clock(
            source,
            storage,
            budget,
            from,
            crate::import::log_clock::LogClock::default(),
        )
    }

    /// As [`App::with_importer`], reading server logs' times (which lack a year or a zone) with this date and zone
    /// (`--log-date`, `--log-tz`), the trace given here included.
    pub fn with_log_clock(
        source: TraceSource,
        storage: Option<&dyn eframe::Storage>,
        budget: Option<u64>,
        from: Option<crate::import::Kind>,
        log_clock: crate::import::log_clock::LogClock,
    ) -> Self {
        let mut app = Self::blank(storage, budget, from, log_clock);
        app.open(source);
        app
    }

    /// An app with nothing on screen or loading, with settings from a previous run.
    fn blank(
        storage: Option<&dyn eframe::Storage>,
        budget: Option<u64>,
        from: Option<crate::import::Kind>,
        log_clock: crate::import::log_clock::LogClock,
    ) -> Self {
        let settings = storage
            .and_then(|s| eframe::get_value(s, STORAGE_KEY))
            .unwrap_or_default();
        App {
            settings,
            session: None,
            compare: None,
            compare_next: None,
            background: Background::default(),
            dialog: None,
            message: None,
            notice: None,
            path_input: String::new(),
            path_purpose: None,
            dataset: None,
            budget_override: budget,
            importer: from,
            log_clock,
            log_clock_input: None,
            what_if_input: None,
            shown: Shown::default(),
            fonts_installed: false,
            preview: None,
            panel_rects: [None, None],
            save_dir: None,
            commands: Vec::new(),
            ctx: None,
        }
    }

    /// An app showing a recording as it is made (`tokenscope record --live`).
    pub fn recording(options: crate::ui::shell::live::LiveOptions, storage: Option<&dyn eframe::Storage>) -> Self {
        Self::recording_in(options, storage, None)
    }

    /// As [`Self::recording`], in the window of `ctx`: woken when the journal grows, and closed by Ctrl-C or SIGTERM
    /// (the recording stopped and written first).
    pub fn recording_in(
        options: crate::ui::shell::live::LiveOptions,
        storage: Option<&dyn eframe::Storage>,
        ctx: Option<egui::Context>,
    ) -> Self {
        let mut app = Self::blank(storage, None, None, crate::import::log_clock::LogClock::default());
        app.ctx = ctx;
        app.record_live(options);
        app
    }

    /// An app watching a server's log as it is written (`tokenscope watch` without `--json`), in the window of
    /// `ctx` (woken by each look with news).
    pub fn watching_in(
        options: crate::record::watcher::WatchOptions,
        storage: Option<&dyn eframe::Storage>,
        ctx: Option<egui::Context>,
    ) -> Self {
        let mut app = Self::blank(storage, None, None, crate::import::log_clock::LogClock::default());
        app.ctx = ctx;
        app.watch(options);
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
        let showing = self
            .background
            .loading
            .as_ref()
            .is_some_and(|l| l.purpose == Purpose::Show)
            || self.dataset.is_some();
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
                s.candidates.as_ref(),
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
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "a positive setting in GB"
        )]
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
            Answer::Cancel => self.compare_next = None,
        }
    }

    /// The dataset dialog, while it is open (tests fill it in).
    pub fn dataset_dialog(&mut self) -> Option<&mut DatasetDialog> {
        self.dataset.as_mut()
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

    /// The caption strip of a PNG (trace, time range on screen in UTC, selection), over the bottom of the captured
    /// region in the frame that is captured.
    fn caption_ui(&self, ctx: &egui::Context, region: egui::Rect) {
        let Some(s) = &self.session else { return };
        let trace = &s.view.trace;
        let text = png::caption_text(
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
            egui::pos2(region.left(), region.bottom() - png::CAPTION_HEIGHT),
            region.max,
        );
        png::paint_caption(&painter, strip, text);
    }

    /// The whole window: draws every panel, then applies what was asked for during the frame.
    pub fn ui(&mut self, ui: &mut Ui) {
        if !self.fonts_installed {
            crate::ui::widgets::theme::install_fonts(ui.ctx());
            self.fonts_installed = true;
        }
        if self.ctx.is_none() {
            self.ctx = Some(ui.ctx().clone());
        }
        self.poll_loading();
        self.poll_dialog();
        self.poll_live(&ui.ctx().clone());
        self.poll_watching(&ui.ctx().clone());
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
                .push(Command::RenderPng(View::Both, png::Destination::File));
        }
        egui::Panel::top("menu").show(ui, |ui| self.menu_ui(ui));
        egui::Panel::top("toolbar").show(ui, |ui| self.toolbar_ui(ui));
        if self.background.live.is_some() {
            egui::Panel::top("live").show(ui, |ui| self.live_bar_ui(ui));
        }
        if self.background.watching.is_some() {
            egui::Panel::top("watch").show(ui, |ui| self.watch_bar_ui(ui));
        }
        egui::Panel::bottom("status").show(ui, |ui| self.status_ui(ui));
        if self.shown.problems
            && let Some(s) = &self.session
        {
            let mut open = true;
            egui::Panel::bottom("problems")
                .resizable(true)
                .default_size(160.0)
                .show(ui, |ui| {
                    panels::problems_ui(ui, &s.report, &mut open);
                });
            self.shown.problems = open;
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
            && let Some(p) = &self.background.pending_capture
        {
            let region = p.crop.unwrap_or_else(|| ui.ctx().content_rect());
            self.caption_ui(ui.ctx(), region);
        }
        // Jobs wake the UI when they finish; only the load's progress bar and a screenshot on its way need frames.
        if self.background.pending_capture.is_some() || self.background.loading.is_some() {
            ui.ctx().request_repaint_after(Duration::from_millis(50));
        }
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
            if self.background.loading.is_some()
                && let Some(p) = &mut self.preview
                && p.ui(ui, self.settings.layout)
            {
                return;
            }
            ui.centered_and_justified(|ui| {
                if self.background.loading.is_some() {
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
            crate::ui::shell::compare::stacked_ui(ui, s, c, &mut self.commands);
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
