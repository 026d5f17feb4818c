//! The bars around the waterfall: the toolbar (the path and server-log-time rows when asked for, the load's
//! progress, the track order, layout and label filters) and the status bar.

use std::path::PathBuf;
use std::sync::Arc;

use eframe::egui::{self, Ui};

use super::log_clock::log_clock_ui;
use super::what_if::what_if_ui;
use super::{App, Purpose};
use crate::ui::shell::panels;
use crate::ui::views::preview::Preview;
use crate::ui::widgets::command::Command;
use crate::view::lanes::TrackLayout;
use crate::view::layout::TrackOrder;

impl App {
    /// The date and zone server logs are read with, as the user last gave them (none: as each log says).
    pub fn log_clock(&self) -> crate::import::log_clock::LogClock {
        self.log_clock
    }

    pub(super) fn toolbar_ui(&mut self, ui: &mut Ui) {
        if let Some(input) = &mut self.what_if_input {
            let mut keep = true;
            ui.horizontal(|ui| keep = what_if_ui(ui, input, &mut self.commands));
            if !keep {
                self.what_if_input = None;
            }
        }
        if let Some(input) = &mut self.log_clock_input {
            let mut keep = true;
            ui.horizontal(|ui| keep = log_clock_ui(ui, input, &mut self.commands));
            if !keep {
                self.log_clock_input = None;
            }
        }
        ui.horizontal(|ui| {
            self.path_ui(ui);
            self.loading_ui(ui);
            if self.session.is_some() {
                self.filters_ui(ui);
                ui.separator();
                self.panel_toggles_ui(ui);
            }
        });
    }

    /// The path typed for what the path asked is for (show, compare, watch), with Open and Cancel.
    fn path_ui(&mut self, ui: &mut Ui) {
        if let Some(purpose) = self.path_purpose {
            let label = ui.label(match purpose {
                Purpose::Show => "Path:",
                Purpose::Compare => "Compare with (B):",
                Purpose::Watch => "Server log to watch:",
            });
            let r = ui
                .add(egui::TextEdit::singleline(&mut self.path_input).desired_width(420.0))
                .labelled_by(label.id);
            let go = ui.button("Open").clicked() || (r.lost_focus() && ui.input(|i| i.key_pressed(egui::Key::Enter)));
            if go && !self.path_input.trim().is_empty() {
                let path = PathBuf::from(self.path_input.trim());
                self.commands.push(match purpose {
                    Purpose::Show => Command::Open(path),
                    Purpose::Compare => Command::CompareWith(path),
                    Purpose::Watch => Command::Watch(path),
                });
                self.path_purpose = None;
            }
            if ui.button("Cancel").clicked() {
                self.path_purpose = None;
            }
            ui.separator();
        }
    }

    /// A load under way: what is loading, its progress, and Cancel.
    fn loading_ui(&mut self, ui: &mut Ui) {
        if let Some(loading) = &self.background.loading {
            ui.label(match (loading.purpose, loading.progress.stage()) {
                (Purpose::Show | Purpose::Watch, Some(stage)) => format!("{}: {stage}", loading.source.name()),
                (Purpose::Show | Purpose::Watch, None) => format!("Loading {}", loading.source.name()),
                (Purpose::Compare, _) => format!("Loading B: {}", loading.source.name()),
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
    }

    /// The trace's track order and layout, and its filters by label and request id.
    fn filters_ui(&mut self, ui: &mut Ui) {
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
    }

    /// The toggles of the panels and windows: findings (with their count), statistics, comparison, timeline, query.
    fn panel_toggles_ui(&mut self, ui: &mut Ui) {
        let Some(s) = &self.session else { return };
        let findings = match s.findings.counts() {
            Some([c, w, i]) => format!("Findings {}", c + w + i),
            None => "Findings …".to_owned(),
        };
        ui.toggle_value(&mut self.shown.findings, findings);
        ui.toggle_value(&mut self.shown.stats, "Statistics");
        if let Some(c) = &mut self.compare {
            ui.toggle_value(&mut c.show_window, "Comparison");
        }
        #[cfg(feature = "query")]
        ui.toggle_value(&mut self.shown.timeline, "Timeline");
        #[cfg(feature = "query")]
        ui.toggle_value(&mut self.shown.query, "Query");
    }

    pub(super) fn status_ui(&mut self, ui: &mut Ui) {
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
                match (
                    &self.background.loading,
                    self.preview.as_ref().and_then(Preview::requests),
                ) {
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
                self.shown.problems = true;
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
                self.shown.problems = true;
            }
        });
    }
}
