//! The app's panels and windows around the waterfall: findings, statistics, the comparison, the timeline and the
//! query. Each draws from the session and pushes commands.

use std::sync::Arc;

use eframe::egui::{self, Ui};

use super::App;
use crate::ui::views::findings as findings_panel;
use crate::ui::views::stats;

impl App {
    /// The findings panel (left), computed on a thread of its own once per trace, objectives and thresholds.
    pub(super) fn findings_panel(&mut self, ui: &mut Ui) {
        let Some(s) = &mut self.session else { return };
        let trace = Arc::clone(&s.view.trace);
        // The findings wake the UI when they are done: no polling.
        s.findings
            .refresh(&trace, self.settings.slo, self.settings.thresholds, Some(ui.ctx()));
        if !self.shown.findings {
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
        self.shown.findings = open;
    }

    /// The statistics window, when open.
    pub(super) fn stats_window(&mut self, ctx: &egui::Context) {
        let Some(s) = &mut self.session else { return };
        if !self.shown.stats {
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
        self.shown.stats = open;
    }

    /// The Comparison window, while comparing; the comparison is computed again when the objectives or thresholds
    /// change.
    pub(super) fn compare_window(&mut self, ctx: &egui::Context) {
        let (Some(s), Some(c)) = (&self.session, &mut self.compare) else {
            return;
        };
        c.poll();
        c.other.poll_interference();
        c.refresh(
            &s.view.trace,
            s.candidates.as_ref(),
            self.settings.slo,
            self.settings.thresholds,
            Some(ctx),
        );
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
            .show(ctx, |ui| crate::ui::shell::compare::comparison_ui(ui, s, c, slo, out));
        c.show_window = open;
    }

    /// The Timeline panel (under the waterfall, on its time axis), when shown.
    #[cfg(feature = "query")]
    pub(super) fn timeline_panel(&mut self, ui: &mut Ui) {
        if !self.shown.timeline {
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
                crate::ui::views::timeline::timeline_ui(
                    ui,
                    &s.view,
                    &mut s.waterfall,
                    &mut s.timeline,
                    other,
                    slo,
                    out,
                );
            });
    }

    /// The Query window, when open.
    #[cfg(feature = "query")]
    pub(super) fn query_window(&mut self, ctx: &egui::Context) {
        let Some(s) = &mut self.session else { return };
        if !self.shown.query {
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
                crate::ui::views::query::query_ui(ui, &trace, &mut s.query, history, out);
            });
        self.shown.query = open;
    }
}
