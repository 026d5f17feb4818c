//! The menu bar: File (open, compare, save and copy PNGs, the memory budget, server log times, recent files), View,
//! Panels, SLOs and Help. Its items push commands or open the toolbar's rows; the app applies them after the frame.

use std::path::PathBuf;

use eframe::egui::{self, Ui};

use super::log_clock::LogClockInput;
use super::what_if;
use super::{App, Purpose};
use crate::load;
use crate::ui::shell::render::View;
use crate::ui::widgets::command::Command;
use crate::ui::widgets::png;

impl App {
    pub(super) fn menu_ui(&mut self, ui: &mut Ui) {
        egui::MenuBar::new().ui(ui, |ui| {
            ui.menu_button("File", |ui| self.file_menu(ui));
            ui.menu_button("View", |ui| self.view_menu(ui));
            ui.menu_button("SLOs", |ui| self.slos_menu(ui));
            ui.menu_button("Help", help_menu);
        });
    }

    /// File: open, the PNGs, a path or a server's log, comparisons, then the demo and the settings of loading.
    fn file_menu(&mut self, ui: &mut Ui) {
        if ui.button("Open…").clicked() {
            self.commands.push(Command::OpenDialog);
            ui.close();
        }
        ui.separator();
        self.png_items(ui);
        ui.separator();
        if ui.button("Open path…").clicked() {
            self.path_purpose = Some(Purpose::Show);
            ui.close();
        }
        if ui
            .button("Watch a server's log…")
            .on_hover_text(
                "Follow a server's log as it is written, sending the server nothing: the waterfall, Timeline and \
                 findings of its last minutes",
            )
            .clicked()
        {
            self.path_purpose = Some(Purpose::Watch);
            ui.close();
        }
        ui.separator();
        self.compare_items(ui);
        ui.separator();
        if ui.button("Open the demo trace").clicked() {
            self.commands.push(Command::OpenDemo);
            ui.close();
        }
        self.loading_items(ui);
    }

    /// The PNGs of the views, rendered at 2x, and of the window as on screen, saved or copied.
    fn png_items(&mut self, ui: &mut Ui) {
        let has_request = self.session.as_ref().is_some_and(|s| s.microscope.is_some());
        let renders = [
            ("Save 2x PNG of the views (Ctrl+Shift+S)", View::Both, true),
            ("Save 2x PNG of the waterfall", View::Waterfall, true),
            ("Save 2x PNG of the request view", View::Request, has_request),
        ];
        for (label, which, enabled) in renders {
            if ui.add_enabled(enabled, egui::Button::new(label)).clicked() {
                self.commands.push(Command::RenderPng(which, png::Destination::File));
                ui.close();
            }
        }
        if ui.button("Copy 2x PNG of the views").clicked() {
            self.commands
                .push(Command::RenderPng(View::Both, png::Destination::Clipboard));
            ui.close();
        }
        if ui.button("Save PNG of the window as on screen").clicked() {
            self.commands
                .push(Command::Capture(png::Target::Window, png::Destination::File));
            ui.close();
        }
        if ui.button("Copy PNG of the window").clicked() {
            self.commands
                .push(Command::Capture(png::Target::Window, png::Destination::Clipboard));
            ui.close();
        }
        ui.checkbox(&mut self.settings.caption, "Caption strip on PNGs");
    }

    /// Comparing the trace on screen with another, a path, or a what-if; and stopping.
    fn compare_items(&mut self, ui: &mut Ui) {
        let open = self.session.is_some();
        if ui.add_enabled(open, egui::Button::new("Compare with…")).clicked() {
            self.commands.push(Command::CompareDialog);
            ui.close();
        }
        if ui.add_enabled(open, egui::Button::new("Compare with path…")).clicked() {
            self.path_purpose = Some(Purpose::Compare);
            ui.close();
        }
        if ui
            .add_enabled(open, egui::Button::new("Compare with a what-if…"))
            .on_hover_text(
                "The trace on screen served again by the simulator with a change (a disaggregated deployment, \
                 chunked prefill, speculative decoding, ...) beside it: a remedy tried before it is deployed",
            )
            .clicked()
        {
            self.what_if_input = Some(what_if::WhatIfInput::default());
            ui.close();
        }
        if self.compare.is_some() && ui.button("Stop comparing").clicked() {
            self.commands.push(Command::StopComparing);
            ui.close();
        }
    }

    /// How traces load: the memory budget, server logs' date and zone, and the files opened recently.
    fn loading_items(&mut self, ui: &mut Ui) {
        ui.horizontal(|ui| {
            let mut gb = self.settings.memory_budget_gb.unwrap_or_else(|| {
                #[expect(clippy::cast_precision_loss, reason = "display")]
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
                    self.commands.push(Command::Open(PathBuf::from(r)));
                    ui.close();
                }
            }
        });
    }

    /// View: fit the trace, and the panels and windows shown.
    fn view_menu(&mut self, ui: &mut Ui) {
        if ui.button("Fit the whole trace (double-click)").clicked() {
            if let Some(s) = &mut self.session {
                s.waterfall.viewport = None;
            }
            ui.close();
        }
        if ui.checkbox(&mut self.shown.findings, "Findings").clicked() {
            ui.close();
        }
        if ui.checkbox(&mut self.shown.stats, "Statistics").clicked() {
            ui.close();
        }
        #[cfg(feature = "query")]
        if ui.checkbox(&mut self.shown.query, "Query (SQL)").clicked() {
            ui.close();
        }
        #[cfg(feature = "query")]
        if ui.checkbox(&mut self.shown.timeline, "Timeline").clicked() {
            ui.close();
        }
        if ui.button("Load problems").clicked() {
            self.shown.problems = true;
            ui.close();
        }
    }

    /// SLOs: the objectives requests are judged by.
    fn slos_menu(&mut self, ui: &mut Ui) {
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
    }
}

/// Help: the keys and the mouse.
fn help_menu(ui: &mut Ui) {
    ui.label("Ctrl+wheel: zoom at the pointer · W/S: zoom · A/D: pan");
    ui.label("Drag on the ruler: pan · Drag on the tracks: select a time range");
    ui.label("F: fit the selection · Double-click: whole trace · Esc: clear the range");
    ui.label("Click a request track to select it. Drop a trace file on the window to open it.");
}
