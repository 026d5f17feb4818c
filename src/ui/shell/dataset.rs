//! The dataset dialog: a directory of several Parquet files (a hive-partitioned dataset, say a day of a fleet) is
//! not loaded at once. Its folder names and its files' footers are read first, on a thread of their own, and the
//! dialog shows what it holds (files, bytes, records, the time it spans, its folder keys and their values); the user
//! chooses a time window and values, sees how many files that reads, and opens that part only.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use eframe::egui::{self, RichText, Ui};
use tokenscope_core::analysis::stats::thousands;
use tokenscope_core::format::window::{self, Survey, Window};
use tokenscope_core::ingest::LoadError;

use crate::ui::shell::session::TraceSource;
use crate::ui::widgets::job::Job;

/// Reads what `path` holds: `None` when it is no dataset (one file, or files that are not all Parquet), which the
/// app then loads as it is.
///
/// # Errors
/// A footer cannot be read.
pub fn survey(path: &Path) -> Result<Option<Survey>, String> {
    match tokenscope_core::load::survey(path) {
        Ok(s) if s.files >= 2 => Ok(Some(s)),
        Ok(_)
        | Err(LoadError::NotParquet { .. } | LoadError::UnknownFormat { .. } | LoadError::EmptyDirectory { .. }) => {
            Ok(None)
        }
        Err(e) => Err(e.to_string()),
    }
}

enum State {
    Surveying(Job<Result<Option<Survey>, String>>),
    Ready(Survey),
    Failed(String),
}

/// What the dialog asks the app to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// Load this.
    Open(TraceSource),
    /// Close the dialog without loading.
    Cancel,
}

/// The open dialog of a dataset.
pub struct DatasetDialog {
    /// The dataset's directory.
    pub path: PathBuf,
    state: State,
    /// The window's start and end as typed (the dataset's extent until changed).
    pub from: String,
    pub to: String,
    extent: (String, String),
    /// Per folder key, each value and whether it is chosen.
    pub chosen: BTreeMap<String, BTreeMap<String, bool>>,
}

fn utc(ns: i64) -> String {
    chrono::DateTime::from_timestamp_nanos(ns)
        .format("%Y-%m-%dT%H:%M:%S")
        .to_string()
}

impl DatasetDialog {
    /// Starts reading what `path` holds; `waker` repaints when it is known.
    ///
    /// # Errors
    /// The thread cannot start.
    pub fn start(path: PathBuf, waker: Option<&egui::Context>) -> Result<Self, String> {
        let p = path.clone();
        let job = Job::spawn("dataset-survey", waker, move || survey(&p))?;
        Ok(DatasetDialog {
            path,
            state: State::Surveying(job),
            from: String::new(),
            to: String::new(),
            extent: (String::new(), String::new()),
            chosen: BTreeMap::new(),
        })
    }

    /// Waits for the survey (tests).
    pub fn wait(&mut self) -> Option<Answer> {
        if let State::Surveying(job) = &self.state {
            job.wait();
        }
        self.poll()
    }

    /// Takes the survey when it is done; an answer at once when the path is no dataset.
    pub fn poll(&mut self) -> Option<Answer> {
        let State::Surveying(job) = &self.state else {
            return None;
        };
        let Ok(result) = job.try_recv() else {
            return None;
        };
        match result {
            Ok(Some(found)) => {
                let s = &found;
                self.extent = (
                    s.first_ns.map(utc).unwrap_or_default(),
                    s.last_ns
                        .map(|t| utc(t.saturating_add(1_000_000_000)))
                        .unwrap_or_default(),
                );
                (self.from, self.to) = self.extent.clone();
                self.chosen = s
                    .keys
                    .iter()
                    .map(|(k, values)| (k.clone(), values.keys().map(|v| (v.clone(), true)).collect()))
                    .collect();
                self.state = State::Ready(found);
                None
            }
            Ok(None) => Some(Answer::Open(TraceSource::Path(self.path.clone()))),
            Err(e) => {
                self.state = State::Failed(e);
                None
            }
        }
    }

    /// The window the fields describe, or what is wrong with them.
    ///
    /// # Errors
    /// A time that does not parse, an empty window, a key with no value chosen.
    pub fn window(&self) -> Result<Window, String> {
        let time = |text: &str, extent: &str| -> Result<Option<i64>, String> {
            let t = text.trim();
            if t.is_empty() || t == extent {
                Ok(None)
            } else {
                window::parse_time(t).map(Some)
            }
        };
        let w = Window {
            from_ns: time(&self.from, &self.extent.0)?,
            to_ns: time(&self.to, &self.extent.1)?,
            filters: self
                .chosen
                .iter()
                .filter(|(_, values)| values.values().any(|&c| !c))
                .flat_map(|(k, values)| {
                    values
                        .iter()
                        .filter(|(_, c)| **c)
                        .map(move |(v, _)| (k.clone(), v.clone()))
                })
                .collect(),
        };
        if let (Some(f), Some(t)) = (w.from_ns, w.to_ns)
            && f >= t
        {
            return Err("the window's start must come before its end".to_owned());
        }
        if let Some((k, _)) = self.chosen.iter().find(|(_, values)| values.values().all(|&c| !c)) {
            return Err(format!("choose at least one value of {k}"));
        }
        Ok(w)
    }

    /// The files and bytes the window reads, of all.
    pub fn reads(&self, w: &Window) -> Option<(usize, u64)> {
        let State::Ready(found) = &self.state else {
            return None;
        };
        let kept = found.by_file.iter().filter(|(keys, _)| w.keeps_folder(keys));
        Some(kept.fold((0, 0), |(n, b), (_, bytes)| (n + 1, b + bytes)))
    }

    /// Draws the dialog; the answer when the user chose.
    pub fn ui(&mut self, ctx: &egui::Context) -> Option<Answer> {
        if let Some(a) = self.poll() {
            return Some(a);
        }
        let mut answer = None;
        let screen = ctx.content_rect();
        egui::Window::new("Open a dataset")
            .collapsible(false)
            .resizable(false)
            .default_width(620.0)
            .default_pos(screen.center() - egui::vec2(310.0, 240.0))
            .show(ctx, |ui| {
                ui.label(RichText::new(self.path.display().to_string()).monospace());
                ui.add_space(4.0);
                match &self.state {
                    State::Surveying(_) => {
                        ui.horizontal(|ui| {
                            ui.spinner();
                            ui.label("Reading the folders and the files' footers…");
                        });
                        if ui.button("Cancel").clicked() {
                            answer = Some(Answer::Cancel);
                        }
                    }
                    State::Failed(e) => {
                        ui.colored_label(ui.visuals().error_fg_color, e.as_str());
                        ui.horizontal(|ui| {
                            if ui.button("Open everything").clicked() {
                                answer = Some(Answer::Open(TraceSource::Part(self.path.clone(), Window::default())));
                            }
                            if ui.button("Cancel").clicked() {
                                answer = Some(Answer::Cancel);
                            }
                        });
                    }
                    State::Ready(_) => answer = self.ready_ui(ui),
                }
            });
        answer
    }

    fn ready_ui(&mut self, ui: &mut Ui) -> Option<Answer> {
        let State::Ready(s) = &self.state else {
            return None;
        };
        egui::Grid::new("dataset-facts")
            .num_columns(2)
            .spacing([16.0, 4.0])
            .show(ui, |ui| {
                ui.label("files");
                ui.label(format!("{} ({})", s.files, megabytes(s.bytes)));
                ui.end_row();
                ui.label("records");
                ui.label(format!("{} (by the footers)", thousands(s.records)));
                ui.end_row();
                ui.label("time");
                ui.label(match (s.first_ns, s.last_ns) {
                    (Some(a), Some(b)) => format!("{} to {} UTC (by the files' statistics)", utc(a), utc(b)),
                    _ => "not in the footers".to_owned(),
                });
                ui.end_row();
            });
        ui.separator();
        ui.label("Open the requests arriving (and the steps starting) in:");
        egui::Grid::new("dataset-window")
            .num_columns(2)
            .spacing([16.0, 4.0])
            .show(ui, |ui| {
                let label = ui.label("from");
                ui.add(
                    egui::TextEdit::singleline(&mut self.from)
                        .id_salt("dataset-from")
                        .desired_width(240.0),
                )
                .labelled_by(label.id);
                ui.end_row();
                let label = ui.label("to (excluded)");
                ui.add(
                    egui::TextEdit::singleline(&mut self.to)
                        .id_salt("dataset-to")
                        .desired_width(240.0),
                )
                .labelled_by(label.id);
                ui.end_row();
            });
        ui.small("UTC: 2025-11-29T08:15, or RFC 3339 with an offset, or a date");
        for (key, values) in &mut self.chosen {
            ui.add_space(4.0);
            ui.horizontal(|ui| {
                let n = values.len();
                ui.strong(format!("{key} ({n} value{})", if n == 1 { "" } else { "s" }));
                if ui.small_button("all").clicked() {
                    for c in values.values_mut() {
                        *c = true;
                    }
                }
                if ui.small_button("none").clicked() {
                    for c in values.values_mut() {
                        *c = false;
                    }
                }
            });
            egui::ScrollArea::vertical()
                .id_salt(("dataset-values", key.as_str()))
                .max_height(96.0)
                .show(ui, |ui| {
                    ui.horizontal_wrapped(|ui| {
                        for (value, chosen) in values.iter_mut() {
                            ui.checkbox(chosen, value.as_str());
                        }
                    });
                });
        }
        ui.separator();
        let window = self.window();
        let reads = window.as_ref().ok().and_then(|w| self.reads(w));
        match (&window, reads) {
            (Err(e), _) => {
                ui.colored_label(ui.visuals().error_fg_color, e.as_str());
            }
            (Ok(_), Some((0, _))) => {
                ui.colored_label(ui.visuals().error_fg_color, "no file can hold records of this window");
            }
            (Ok(w), Some((n, bytes))) => {
                ui.label(format!(
                    "reads {n} of {} files ({} of {}): {}",
                    s.files,
                    megabytes(bytes),
                    megabytes(s.bytes),
                    w.describe()
                ));
            }
            (Ok(_), None) => {}
        }
        let mut answer = None;
        ui.horizontal(|ui| {
            let can = window.is_ok() && reads.is_some_and(|(n, _)| n > 0);
            if ui.add_enabled(can, egui::Button::new("Open")).clicked()
                && let Ok(w) = window
            {
                answer = Some(Answer::Open(TraceSource::Part(self.path.clone(), w)));
            }
            if ui.button("Cancel").clicked() {
                answer = Some(Answer::Cancel);
            }
        });
        answer
    }
}

fn megabytes(bytes: u64) -> String {
    #[expect(clippy::cast_precision_loss, reason = "display")]
    let mb = bytes as f64 / 1e6;
    if mb >= 1000.0 {
        format!("{:.1} GB", mb / 1e3)
    } else {
        format!("{mb:.1} MB")
    }
}
