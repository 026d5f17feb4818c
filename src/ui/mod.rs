//! The desktop app (eframe). For now a first window: it loads a trace on a background thread with a progress bar
//! and Cancel, then shows the trace's summary. The waterfall and the per-token views build on this shell.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, sync_channel};
use std::thread;

use eframe::egui;

use crate::analysis::summary::{Slo, summarize_all};
use crate::cli::summary::summary_text;
use crate::format::{self, LoadError, Loaded, Progress};

/// The trace shown when the app starts without a path (embedded in the binary).
pub const DEMO_TRACE: &[u8] = include_bytes!("../../sample_traces/demo.parquet");
/// The demo trace's file name.
pub const DEMO_NAME: &str = "demo.parquet";

/// Where the trace comes from.
#[derive(Debug, Clone)]
pub enum TraceSource {
    /// A file or directory.
    Path(PathBuf),
    /// The embedded demo.
    Demo,
}

impl TraceSource {
    fn name(&self) -> String {
        match self {
            TraceSource::Path(p) => p.display().to_string(),
            TraceSource::Demo => format!("{DEMO_NAME} (embedded demo)"),
        }
    }
}

enum State {
    Loading {
        progress: Arc<Progress>,
        rx: Receiver<Result<Loaded, LoadError>>,
    },
    Ready {
        summary: String,
        rejected: u64,
    },
    Failed(String),
}

/// The app.
pub struct App {
    source: TraceSource,
    state: State,
}

impl App {
    /// Starts loading `source` on a background thread.
    pub fn new(source: TraceSource) -> Self {
        let progress = Arc::new(Progress::default());
        let (tx, rx) = sync_channel(1);
        let worker_progress = Arc::clone(&progress);
        let worker_source = source.clone();
        let spawned = thread::Builder::new().name("trace-loader".into()).spawn(move || {
            let result = match worker_source {
                TraceSource::Path(p) => format::load(&p, &worker_progress),
                TraceSource::Demo => format::load_bytes(DEMO_NAME, DEMO_TRACE),
            };
            let _ = tx.send(result);
        });
        let state = match spawned {
            Ok(_) => State::Loading { progress, rx },
            Err(e) => State::Failed(format!("cannot start the loading thread: {e}")),
        };
        Self { source, state }
    }

    fn poll(&mut self) {
        if let State::Loading { rx, .. } = &self.state
            && let Ok(result) = rx.try_recv()
        {
            self.state = match result {
                Ok(loaded) => {
                    let rejected = loaded.report.rejected_count();
                    let s = summarize_all(&loaded.trace, Slo::default());
                    State::Ready {
                        summary: summary_text(&loaded.trace, &s, rejected),
                        rejected,
                    }
                }
                Err(e) => State::Failed(e.to_string()),
            };
        }
    }
}

impl eframe::App for App {
    fn ui(&mut self, ui: &mut egui::Ui, _frame: &mut eframe::Frame) {
        self.poll();
        egui::Panel::top("title").show(ui, |ui| {
            ui.horizontal(|ui| {
                ui.heading("tokenscope");
                ui.label(self.source.name());
            });
        });
        egui::CentralPanel::default().show(ui, |ui| match &self.state {
            State::Loading { progress, .. } => {
                ui.label("Loading…");
                ui.add(egui::ProgressBar::new(progress.fraction()).show_percentage());
                if ui.button("Cancel").clicked() {
                    progress.cancel();
                }
                ui.ctx().request_repaint();
            }
            State::Ready { summary, rejected } => {
                if *rejected > 0 {
                    ui.colored_label(
                        ui.visuals().warn_fg_color,
                        format!("{rejected} record(s) rejected: run `tokenscope validate` to list them"),
                    );
                }
                egui::ScrollArea::both().show(ui, |ui| {
                    ui.label(egui::RichText::new(summary.as_str()).monospace());
                });
            }
            State::Failed(message) => {
                ui.colored_label(ui.visuals().error_fg_color, message.as_str());
            }
        });
    }
}

/// Opens the window; returns when it is closed.
pub fn run(source: TraceSource) -> Result<(), eframe::Error> {
    let options = eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default()
            .with_inner_size([1280.0, 800.0])
            .with_title("tokenscope"),
        ..Default::default()
    };
    eframe::run_native("tokenscope", options, Box::new(|_cc| Ok(Box::new(App::new(source)))))
}
