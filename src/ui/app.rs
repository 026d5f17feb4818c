//! The app shell: the trace on screen and the one loading in the background, the menus, the toolbar of filters,
//! the status bar, the load-problems panel and the side panel of the selection. Panels draw; the app applies what
//! they report after the frame.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::TryRecvError;
use std::time::{Duration, Instant};

use eframe::egui::{self, RichText, Ui};

use super::capture;
use super::findings::{self as findings_panel, FindingsState};
use super::job::Job;
use super::microscope::{self, Microscope, microscope_ui};
use super::panels;
use super::render::{self, View};
use super::stats::{self, StatsState};
use super::waterfall::{self, TraceView, WaterfallState};
use crate::analysis::cost::Prices;
use crate::analysis::interference::{Interference, interference};
use crate::analysis::summary::Slo;
use crate::format::{self, LoadError, Loaded, Progress};
use crate::trace::CandidateSource;
use crate::trace::report::Report;
use crate::view::layout::{TrackFilter, TrackOrder};

/// The trace shown when the app starts without a path (embedded in the binary).
pub const DEMO_TRACE: &[u8] = include_bytes!("../../sample_traces/demo.parquet");
/// The demo trace's file name.
pub const DEMO_NAME: &str = "demo.parquet";
/// Recent files kept.
const MAX_RECENT: usize = 10;
/// The key of the app's persisted settings.
const STORAGE_KEY: &str = "tokenscope";

/// Where a trace comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceSource {
    /// A file or directory.
    Path(PathBuf),
    /// The embedded demo.
    Demo,
}

impl TraceSource {
    /// Its name for titles and the status bar.
    pub fn name(&self) -> String {
        match self {
            TraceSource::Path(p) => p.display().to_string(),
            TraceSource::Demo => format!("{DEMO_NAME} (embedded demo)"),
        }
    }
}

/// Settings kept between runs.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Settings {
    recent: Vec<String>,
    order: TrackOrder,
    /// The service-level objectives requests are judged by.
    #[serde(default = "default_slo")]
    slo: Slo,
    /// Draw a caption strip (trace, time range, selection) into PNG captures.
    #[serde(default = "default_caption")]
    caption: bool,
    /// The price table of the statistics window.
    #[serde(default)]
    prices: Prices,
}

fn default_caption() -> bool {
    true
}

/// Objectives a chat service commonly sets: first token within a second, 50 ms per output token after it.
fn default_slo() -> Slo {
    Slo {
        ttft_ms: Some(1000.0),
        tpot_ms: Some(50.0),
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            recent: Vec::new(),
            order: TrackOrder::default(),
            slo: default_slo(),
            caption: true,
            prices: Prices::default(),
        }
    }
}

/// The trace on screen.
pub struct Shown {
    /// Where it came from.
    pub source: TraceSource,
    /// What the waterfall draws.
    pub view: TraceView,
    /// What loading found wrong.
    pub report: Report,
    /// Reads a selected request's candidates when the load left them on disk.
    pub candidates: Option<Arc<dyn CandidateSource>>,
}

/// A load in progress; the trace on screen stays usable meanwhile.
struct Loading {
    source: TraceSource,
    progress: Arc<Progress>,
    rx: Job<Result<(Loaded, Option<Arc<dyn CandidateSource>>), LoadError>>,
}

/// An open-file dialog running on its own thread.
struct Dialog {
    rx: Job<Option<PathBuf>>,
    started: Instant,
}

/// The app.
pub struct App {
    settings: Settings,
    shown: Option<Shown>,
    loading: Option<Loading>,
    dialog: Option<Dialog>,
    /// The last load error or hint, shown until dismissed.
    message: Option<String>,
    /// The last success worth saying ("Saved …"), shown until dismissed.
    notice: Option<String>,
    /// The typed path of "Open path…".
    path_input: String,
    show_path_input: bool,
    show_problems: bool,
    filter: TrackFilter,
    /// The waterfall's state.
    pub waterfall: WaterfallState,
    /// The selected request row.
    pub selected: Option<u32>,
    /// The analysis of the drag-selected range.
    pub interference: Option<Interference>,
    /// An analysis being computed on its own thread (a minute of a large trace takes a fifth of a second).
    interference_job: Option<Job<Interference>>,
    /// The selected request under the microscope (regenerated when the selection changes).
    pub microscope: Option<Microscope>,
    fonts_installed: bool,
    /// A PNG asked for this frame: what and where.
    capture_request: Option<(capture::Target, capture::Destination)>,
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
    /// The statistics window.
    pub stats: StatsState,
    /// The findings panel.
    pub findings: FindingsState,
    /// A token to select once the microscope shows the selected request (a finding's).
    pending_token: Option<usize>,
    /// The UI's context, for background jobs to wake it when their result is ready (set by the first frame).
    ctx: Option<egui::Context>,
}

impl App {
    /// An app that starts loading `source`, with settings from a previous run.
    pub fn new(source: TraceSource, storage: Option<&dyn eframe::Storage>) -> Self {
        let settings = storage
            .and_then(|s| eframe::get_value(s, STORAGE_KEY))
            .unwrap_or_default();
        let mut app = App {
            settings,
            shown: None,
            loading: None,
            dialog: None,
            message: None,
            notice: None,
            path_input: String::new(),
            show_path_input: false,
            show_problems: false,
            filter: TrackFilter::default(),
            waterfall: WaterfallState::default(),
            selected: None,
            interference: None,
            interference_job: None,
            microscope: None,
            fonts_installed: false,
            capture_request: None,
            pending_capture: None,
            saving: None,
            rendering: None,
            panel_rects: [None, None],
            save_dir: None,
            stats: StatsState::default(),
            findings: FindingsState::default(),
            pending_token: None,
            ctx: None,
        };
        app.stats.prices = app.settings.prices.clone();
        app.open(source);
        app
    }

    /// Starts loading a trace on a background thread.
    pub fn open(&mut self, source: TraceSource) {
        if let Some(old) = self.loading.take() {
            old.progress.cancel();
        }
        let progress = Arc::new(Progress::default());
        let worker = (Arc::clone(&progress), source.clone());
        let spawned = Job::spawn("trace-loader", self.ctx.as_ref(), move || {
            let (progress, source) = worker;
            let result = match source {
                TraceSource::Path(p) => format::load_with(
                    &p,
                    &progress,
                    format::LoadOptions {
                        lazy_candidates: true,
                        ..format::LoadOptions::default()
                    },
                ),
                TraceSource::Demo => format::load_bytes(DEMO_NAME, DEMO_TRACE),
            };
            // The candidate reader reads the files' metadata once, here rather than at the first click.
            result.and_then(|loaded| {
                let reader = format::open_candidates(&loaded.trace)?;
                Ok((loaded, reader))
            })
        });
        match spawned {
            Ok(rx) => self.loading = Some(Loading { source, progress, rx }),
            Err(e) => self.message = Some(format!("cannot start loading: {e}")),
        }
    }

    /// Waits for the load in progress (tests and the headless renderer use this).
    pub fn wait_loaded(&mut self) {
        while let Some(loading) = &self.loading {
            loading.rx.wait();
            self.poll_loading();
        }
    }

    /// The trace on screen.
    pub fn shown(&self) -> Option<&Shown> {
        self.shown.as_ref()
    }

    fn poll_loading(&mut self) {
        let Some(loading) = &self.loading else { return };
        let result = match loading.rx.try_recv() {
            Ok(r) => r,
            Err(TryRecvError::Empty) => return,
            Err(TryRecvError::Disconnected) => Err(LoadError::Cancelled),
        };
        let source = loading.source.clone();
        self.loading = None;
        match result {
            Ok((loaded, reader)) => {
                if let TraceSource::Path(p) = &source {
                    let p = p.display().to_string();
                    self.settings.recent.retain(|r| *r != p);
                    self.settings.recent.insert(0, p);
                    self.settings.recent.truncate(MAX_RECENT);
                }
                self.filter = TrackFilter::default();
                let view = TraceView::new(Arc::new(loaded.trace), self.settings.order, &self.filter);
                self.show_problems = loaded.report.rejected_count() > 0;
                self.shown = Some(Shown {
                    source,
                    view,
                    report: loaded.report,
                    candidates: reader,
                });
                self.waterfall = WaterfallState::default();
                self.selected = None;
                self.interference = None;
                // An analysis of the previous trace's range still running must not land on this one.
                self.interference_job = None;
                self.microscope = None;
                self.message = None;
            }
            Err(LoadError::Cancelled) => {}
            Err(e) => self.message = Some(e.to_string()),
        }
    }

    fn poll_dialog(&mut self) {
        let Some(d) = &self.dialog else { return };
        match d.rx.try_recv() {
            Ok(Some(path)) => {
                self.dialog = None;
                self.open(TraceSource::Path(path));
            }
            Ok(None) | Err(TryRecvError::Disconnected) => {
                // An answer within a moment means no dialog was shown: no desktop portal is running.
                if d.started.elapsed() < Duration::from_millis(500) {
                    self.message = Some(
                        "No file dialog is available (no desktop portal answered). Type the path instead.".to_owned(),
                    );
                    self.show_path_input = true;
                }
                self.dialog = None;
            }
            Err(TryRecvError::Empty) => {}
        }
    }

    fn open_dialog(&mut self) {
        let spawned = Job::spawn("file-dialog", self.ctx.as_ref(), move || {
            rfd::FileDialog::new()
                .set_title("Open a tokenscope trace")
                .add_filter("trace", &["parquet", "jsonl", "gz", "zst", "ndjson"])
                .pick_file()
        });
        match spawned {
            Ok(rx) => {
                self.dialog = Some(Dialog {
                    rx,
                    started: Instant::now(),
                })
            }
            Err(_) => self.show_path_input = true,
        }
    }

    /// Re-orders or re-filters the request tracks.
    fn refresh_rows(&mut self) {
        if let Some(shown) = &mut self.shown {
            shown.view.rows = crate::view::layout::track_rows(&shown.view.trace, self.settings.order, &self.filter);
        }
    }

    /// The caption strip of a PNG: trace, the time range on screen in UTC, the selection; drawn over the bottom of
    /// the captured region in the frame that is captured.
    fn caption_ui(&self, ctx: &egui::Context, region: egui::Rect) {
        let Some(shown) = &self.shown else { return };
        let text = capture::caption_text(
            &shown.source.name(),
            self.waterfall.viewport,
            self.selected.map(|r| shown.view.trace.request_id(r)),
            self.microscope
                .as_ref()
                .and_then(|m| m.token_row(&shown.view.trace))
                .map(|t| shown.view.trace.tokens.index[t]),
        );
        let painter = ctx.layer_painter(egui::LayerId::new(egui::Order::Foreground, egui::Id::unique("caption")));
        let strip = egui::Rect::from_min_max(egui::pos2(region.left(), region.bottom() - 20.0), region.max);
        painter.rect_filled(strip, 0.0, super::theme::CAPTION_FILL);
        painter.text(
            egui::pos2(strip.left() + 8.0, strip.center().y),
            egui::Align2::LEFT_CENTER,
            text,
            egui::FontId::proportional(12.0),
            egui::Color32::WHITE,
        );
    }

    /// Writes the selected range as a slice on its own thread: the dialog asks where (without one, the current
    /// directory), candidates left on disk are read for the requests of the slice.
    fn export_range(&mut self, chrome: bool) {
        let (Some(shown), Some((from, to))) = (&self.shown, self.waterfall.range) else {
            return;
        };
        let trace = Arc::clone(&shown.view.trace);
        let reader = shown.candidates.clone();
        let save_dir = self.save_dir.clone();
        self.save_job("export-slice", move || {
            let ext = if chrome { "json" } else { "parquet" };
            let name = chrono::Utc::now()
                .format(&format!("tokenscope-slice-%Y%m%d-%H%M%S.{ext}"))
                .to_string();
            let path = capture::destination(save_dir.as_deref(), "Export the selected range", &name)?;
            let part = match &reader {
                Some(rd) => {
                    let read = |r: u32| rd.candidates(&trace, r).unwrap_or_else(|_| trace.owned_candidates(r));
                    crate::trace::slice::slice_with(&trace, from, to, None, Some(&read))
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
        let Some(shown) = &self.shown else { return };
        if self.saving.is_some() || self.rendering.is_some() {
            self.notice = Some("A PNG is being made: wait for it before asking for another.".to_owned());
            return;
        }
        let scene = render::Scene {
            view: shown.view.clone(),
            candidates: shown.candidates.clone(),
            source_name: shown.source.name(),
            time_range: self.waterfall.viewport.map(|v| (v.start_ns, v.end_ns())),
            selection: self.waterfall.range,
            request: self.selected,
            token: self.microscope.as_ref().and_then(|m| m.token),
            slo: self.settings.slo,
            caption: self.settings.caption,
            scroll_y: Some(self.waterfall.scroll_y),
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

    /// The findings panel (left), computed on a thread of its own once per trace and objectives.
    fn findings_panel(&mut self, ui: &mut Ui) {
        let Some(shown) = &self.shown else { return };
        let trace = Arc::clone(&shown.view.trace);
        // The findings wake the UI when they are done: no polling.
        self.findings.refresh(&trace, self.settings.slo, Some(ui.ctx()));
        if !self.findings.open {
            return;
        }
        let t0 = shown.view.t0_ns;
        let mut action = None;
        let mut open = true;
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
                action = findings_panel::findings_ui(ui, &trace, t0, &mut self.findings);
            });
        self.findings.open = open;
        if let Some(findings_panel::Action::GoTo {
            from_ns,
            to_ns,
            request,
            token,
        }) = action
        {
            self.go_to(from_ns, to_ns, request, token);
        }
    }

    /// Shows a time range with a margin, selects a request (scrolled into view) and a token, and analyses the range
    /// as if it had been drag-selected.
    pub fn go_to(&mut self, from_ns: i64, to_ns: i64, request: Option<u32>, token: Option<usize>) {
        let Some(shown) = &self.shown else { return };
        let pad = ((to_ns - from_ns) / 10).max(1_000_000);
        self.waterfall.fit = Some((from_ns - pad, to_ns + pad));
        match request {
            Some(r) => waterfall::scroll_to_request(&mut self.waterfall, &shown.view, r),
            None => waterfall::scroll_to_time(&mut self.waterfall, &shown.view, from_ns, to_ns),
        }
        if request.is_some() && request != self.selected {
            self.pending_token = token;
            self.selected = request;
        } else if let Some(m) = &mut self.microscope {
            m.token = token;
        }
        self.waterfall.range = Some((from_ns, to_ns));
        self.analyse_range(from_ns, to_ns);
    }

    /// Computes the interference figures of a range on a thread of its own.
    fn analyse_range(&mut self, a: i64, b: i64) {
        let Some(shown) = &self.shown else { return };
        let trace = Arc::clone(&shown.view.trace);
        match Job::spawn("interference", self.ctx.as_ref(), move || interference(&trace, a, b)) {
            Ok(job) => self.interference_job = Some(job),
            Err(_) => self.interference = Some(interference(&shown.view.trace, a, b)),
        }
    }

    /// The statistics window, when open.
    fn stats_window(&mut self, ctx: &egui::Context) {
        let Some(shown) = &self.shown else { return };
        if !self.stats.open {
            return;
        }
        let mut open = true;
        let mut action = None;
        let screen = ctx.content_rect();
        egui::Window::new("Statistics")
            .open(&mut open)
            .default_pos(screen.min + egui::vec2(40.0, 70.0))
            .default_size([1100.0, 520.0])
            .max_width(screen.width() - 60.0)
            .resizable(true)
            .show(ctx, |ui| {
                action = stats::stats_ui(ui, &shown.view, &mut self.stats, self.settings.slo);
            });
        self.stats.open = open;
        if let Some(stats::Action::SaveCsv(text)) = action {
            let name = chrono::Utc::now()
                .format("tokenscope-statistics-%Y%m%d-%H%M%S.csv")
                .to_string();
            self.save_in_background(text.into_bytes(), "Export the statistics as CSV", name);
        }
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

    /// Takes the analysis of the selected range when it is ready.
    fn poll_interference(&mut self) {
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

    /// The whole window.
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
        self.poll_interference();
        let dropped: Vec<PathBuf> = ui.input(|i| i.raw.dropped_files.iter().map(|f| f.path().to_path_buf()).collect());
        if let Some(p) = dropped.into_iter().next() {
            self.open(TraceSource::Path(p));
        }
        self.poll_capture(ui.ctx());
        if ui.input_mut(|i| i.consume_key(egui::Modifiers::COMMAND | egui::Modifiers::SHIFT, egui::Key::S)) {
            let which = if self.selected.is_some() {
                View::Both
            } else {
                View::Waterfall
            };
            self.render_png(which, ui.ctx().content_rect().size(), capture::Destination::File);
        }
        egui::Panel::top("menu").show(ui, |ui| self.menu_ui(ui));
        egui::Panel::top("toolbar").show(ui, |ui| self.toolbar_ui(ui));
        egui::Panel::bottom("status").show(ui, |ui| self.status_ui(ui));
        if self.show_problems
            && let Some(shown) = &self.shown
        {
            let mut open = true;
            egui::Panel::bottom("problems")
                .resizable(true)
                .default_size(160.0)
                .show(ui, |ui| {
                    panels::problems_ui(ui, &shown.report, &mut open);
                });
            self.show_problems = open;
        }
        self.findings_panel(ui);
        self.sync_microscope();
        if self.microscope.is_some() {
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
        if self.interference.is_some() || self.interference_job.is_some() {
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
        if let Some((target, destination)) = self.capture_request.take() {
            let crop = match target {
                capture::Target::Window => None,
                capture::Target::Waterfall => self.panel_rects[0],
                capture::Target::Microscope => self.panel_rects[1],
            };
            self.pending_capture = Some(capture::request(ui.ctx(), crop, destination));
        }
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
        egui::MenuBar::new().ui(ui, |ui| {
            ui.menu_button("File", |ui| {
                if ui.button("Open…").clicked() {
                    self.open_dialog();
                    ui.close();
                }
                ui.separator();
                let size = ui.ctx().content_rect().size();
                let has_request = self.microscope.is_some();
                let renders = [
                    ("Save 2x PNG of the views (Ctrl+Shift+S)", View::Both, true),
                    ("Save 2x PNG of the waterfall", View::Waterfall, true),
                    ("Save 2x PNG of the request view", View::Request, has_request),
                ];
                for (label, which, enabled) in renders {
                    if ui.add_enabled(enabled, egui::Button::new(label)).clicked() {
                        let which = if which == View::Both && !has_request {
                            View::Waterfall
                        } else {
                            which
                        };
                        self.render_png(which, size, capture::Destination::File);
                        ui.close();
                    }
                }
                if ui.button("Copy 2x PNG of the views").clicked() {
                    let which = if has_request { View::Both } else { View::Waterfall };
                    self.render_png(which, size, capture::Destination::Clipboard);
                    ui.close();
                }
                if ui.button("Save PNG of the window as on screen").clicked() {
                    self.capture_request = Some((capture::Target::Window, capture::Destination::File));
                    ui.close();
                }
                if ui.button("Copy PNG of the window").clicked() {
                    self.capture_request = Some((capture::Target::Window, capture::Destination::Clipboard));
                    ui.close();
                }
                ui.checkbox(&mut self.settings.caption, "Caption strip on PNGs");
                ui.separator();
                if ui.button("Open path…").clicked() {
                    self.show_path_input = true;
                    ui.close();
                }
                if ui.button("Open the demo trace").clicked() {
                    self.open(TraceSource::Demo);
                    ui.close();
                }
                ui.menu_button("Open recent", |ui| {
                    if self.settings.recent.is_empty() {
                        ui.weak("nothing yet");
                    }
                    for r in self.settings.recent.clone() {
                        if ui.button(&r).clicked() {
                            self.open(TraceSource::Path(PathBuf::from(r)));
                            ui.close();
                        }
                    }
                });
            });
            ui.menu_button("View", |ui| {
                if ui.button("Fit the whole trace (double-click)").clicked() {
                    self.waterfall.viewport = None;
                    ui.close();
                }
                if ui.checkbox(&mut self.findings.open, "Findings").clicked() {
                    ui.close();
                }
                if ui.checkbox(&mut self.stats.open, "Statistics").clicked() {
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

    fn toolbar_ui(&mut self, ui: &mut Ui) {
        ui.horizontal(|ui| {
            if self.show_path_input {
                ui.label("Path:");
                let r = ui.add(egui::TextEdit::singleline(&mut self.path_input).desired_width(420.0));
                let go =
                    ui.button("Open").clicked() || (r.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter)));
                if go && !self.path_input.trim().is_empty() {
                    self.open(TraceSource::Path(PathBuf::from(self.path_input.trim())));
                    self.show_path_input = false;
                }
                if ui.button("Cancel").clicked() {
                    self.show_path_input = false;
                }
                ui.separator();
            }
            if let Some(loading) = &self.loading {
                ui.label(format!("Loading {}", loading.source.name()));
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
            let Some(shown) = &self.shown else { return };
            let trace = Arc::clone(&shown.view.trace);
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
            let labels = &shown.view.filter_labels;
            for ((name, field), values) in [
                ("model", &mut self.filter.model),
                ("app", &mut self.filter.app_id),
                ("user", &mut self.filter.user_id),
                ("finish", &mut self.filter.finish_reason),
            ]
            .into_iter()
            .zip(labels)
            {
                changed |= panels::label_filter_ui(ui, name, field, values, &trace);
            }
            let search_label = ui.label("Search");
            changed |= ui
                .add(
                    egui::TextEdit::singleline(&mut self.filter.search)
                        .hint_text("request id")
                        .desired_width(140.0),
                )
                .labelled_by(search_label.id)
                .changed();
            if changed {
                self.refresh_rows();
            }
            ui.separator();
            let findings = match self.findings.counts() {
                Some([c, w, i]) => format!("Findings {}", c + w + i),
                None => "Findings …".to_owned(),
            };
            ui.toggle_value(&mut self.findings.open, findings);
            ui.toggle_value(&mut self.stats.open, "Statistics");
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
            let Some(shown) = &self.shown else {
                ui.label("No trace open. File > Open…, or drop a trace file on the window.");
                return;
            };
            panels::status_ui(ui, shown, self.waterfall.hover_ns);
            if shown.report.rejected_count() > 0
                && ui
                    .link(format!("{} rejected records", shown.report.rejected_count()))
                    .clicked()
            {
                self.show_problems = true;
            }
            let notes = shown.report.notes.len();
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

    /// Puts the selected request under the microscope when the selection changed.
    fn sync_microscope(&mut self) {
        let current = self.microscope.as_ref().map(|m| m.request);
        if current == self.selected {
            return;
        }
        self.microscope = match (self.selected, &self.shown) {
            (Some(r), Some(shown)) => {
                let mut m = Microscope::new(&shown.view.trace, shown.candidates.as_ref(), r, self.ctx.as_ref());
                m.token = self.pending_token.take();
                Some(m)
            }
            _ => None,
        };
    }

    fn microscope_ui(&mut self, ui: &mut Ui) {
        let (Some(shown), Some(m)) = (&self.shown, &mut self.microscope) else {
            return;
        };
        let trace = Arc::clone(&shown.view.trace);
        ui.horizontal(|ui| {
            ui.strong("Request under the microscope");
            if ui.small_button("Close").clicked() {
                self.selected = None;
            }
        });
        if let Some(microscope::Action::SelectRequest(r)) = microscope_ui(ui, &trace, m, self.settings.slo) {
            self.select_request(r);
        }
    }

    /// Selects a request named in a panel and scrolls its track into view.
    fn select_request(&mut self, r: u32) {
        self.selected = Some(r);
        if let Some(shown) = &self.shown {
            waterfall::scroll_to_request(&mut self.waterfall, &shown.view, r);
        }
    }

    fn side_ui(&mut self, ui: &mut Ui) {
        let Some(shown) = &self.shown else { return };
        let trace = Arc::clone(&shown.view.trace);
        let mut action = None;
        egui::ScrollArea::vertical().show(ui, |ui| {
            if self.interference_job.is_some() {
                ui.horizontal(|ui| {
                    ui.spinner();
                    ui.label("Analysing the selected range…");
                });
            } else if let Some(x) = &self.interference {
                action = panels::interference_ui(ui, &trace, x, shown.view.t0_ns);
                ui.separator();
            }
        });
        match action {
            Some(panels::Action::ZoomTo(a, b)) => {
                let pad = ((b - a) / 20).max(1_000);
                self.waterfall.fit = Some((a - pad, b + pad));
            }
            Some(panels::Action::Select(r)) => self.select_request(r),
            Some(panels::Action::Copy(text)) => ui.ctx().copy_text(text),
            Some(panels::Action::Export { chrome }) => self.export_range(chrome),
            Some(panels::Action::Close) => {
                self.interference = None;
                self.waterfall.range = None;
            }
            None => {}
        }
    }

    fn central_ui(&mut self, ui: &mut Ui) {
        let Some(shown) = &self.shown else {
            ui.centered_and_justified(|ui| {
                if self.loading.is_some() {
                    ui.label(RichText::new("Loading…").size(18.0));
                } else {
                    ui.label("Open a trace: File > Open…, File > Open path…, or drop a file here.");
                }
            });
            return;
        };
        let events = waterfall::waterfall_ui(ui, &shown.view, &mut self.waterfall, self.selected);
        for e in events {
            match e {
                waterfall::Event::SelectRequest(r) => self.selected = Some(r),
                waterfall::Event::RangeSelected(a, b) => self.analyse_range(a, b),
                waterfall::Event::RangeCleared => {
                    self.interference = None;
                    self.interference_job = None;
                }
            }
        }
    }
}

impl eframe::App for App {
    fn ui(&mut self, ui: &mut Ui, _frame: &mut eframe::Frame) {
        App::ui(self, ui);
    }

    fn save(&mut self, storage: &mut dyn eframe::Storage) {
        self.settings.prices = self.stats.prices.clone();
        eframe::set_value(storage, STORAGE_KEY, &self.settings);
    }
}
