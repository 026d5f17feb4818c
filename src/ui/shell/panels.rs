//! The smaller panels: status bar, load problems, label filters, the interference panel of a selected range and
//! the header of a selected request.

use eframe::egui::{self, RichText, Ui};

use crate::analysis::interference::Interference;
use crate::trace::report::Report;
use crate::trace::{NO_STR, Trace};
use crate::ui::shell::session::Session;
use crate::ui::widgets::command::Command;
use crate::view::ruler;

/// The status bar: trace, engine, model, counts, span in UTC, cursor time.
pub fn status_ui(ui: &mut Ui, shown: &Session, cursor_ns: Option<i64>) {
    let t = &shown.view.trace;
    let m = &t.meta;
    ui.label(RichText::new(shown.source.name()).strong());
    ui.separator();
    let engine = [m.engine.as_deref(), m.engine_version.as_deref()]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" ");
    if !engine.is_empty() {
        ui.label(engine);
    }
    if let Some(model) = &m.model {
        ui.label(model);
    }
    ui.separator();
    // What the trace has, and what its source could not give: absent, never shown as zero.
    let count = |n: usize, what: &str| {
        if n == 0 {
            format!("no {what}")
        } else {
            format!("{n} {what}")
        }
    };
    let mut levels = vec![
        count(t.request_count(), "requests"),
        count(t.token_count(), "tokens"),
        count(t.iterations.len(), "steps"),
    ];
    if !t.has_times() {
        levels.push("no times (a saved stream: order only)".to_owned());
    }
    if !t.samples.is_empty() {
        // Counter readings are said only when there are some: most traces have none, and need none.
        let n = t.samples.len();
        levels.push(format!("{n} counter sample{}", if n == 1 { "" } else { "s" }));
    }
    if t.token_count() > 0 && !t.has_candidates() {
        levels.push("no candidates".to_owned());
    }
    ui.label(levels.join(" · "));
    ui.separator();
    ui.label(format!(
        "{} to {} ({})",
        ruler::format_utc(shown.view.t0_ns),
        ruler::format_utc(shown.view.t1_ns).split(' ').nth(1).unwrap_or(""),
        ruler::format_duration(shown.view.t1_ns - shown.view.t0_ns)
    ));
    if let Some(c) = cursor_ns {
        ui.separator();
        ui.label(format!(
            "cursor {} · {}",
            ruler::format_duration(c - shown.view.t0_ns),
            ruler::format_utc(c)
        ));
    }
}

/// The rejected records and warnings of the load, with place, field and reason.
pub fn problems_ui(ui: &mut Ui, report: &Report, open: &mut bool) {
    ui.horizontal(|ui| {
        ui.strong(format!(
            "Load report: {} of {} records rejected, {} warnings",
            report.rejected_count(),
            report.records,
            report.warning_count()
        ));
        if ui.small_button("Close").clicked() {
            *open = false;
        }
    });
    // What the importers said of their sources: what they cannot give, clocks, joins.
    for note in &report.notes {
        ui.label(format!("Note: {note}"));
    }
    if report.rejected_count() == 0 && report.warning_count() == 0 {
        ui.label("Every record loaded.");
        return;
    }
    egui::ScrollArea::vertical().auto_shrink(false).show(ui, |ui| {
        egui::Grid::new("problems").striped(true).num_columns(4).show(ui, |ui| {
            for r in &report.rejected {
                ui.monospace(report.describe(r.place).to_string());
                ui.label(r.problem.name());
                ui.monospace(match (r.record, r.field) {
                    (Some(rec), Some(f)) => format!("{rec}.{f}"),
                    (_, Some(f)) => f.to_owned(),
                    (Some(rec), None) => rec.to_owned(),
                    (None, None) => String::new(),
                });
                ui.label(&r.reason);
                ui.end_row();
            }
            for w in &report.warnings {
                ui.label("warning");
                ui.label(w.concern.name());
                ui.monospace(w.request_id.clone().unwrap_or_default());
                ui.label(&w.message);
                ui.end_row();
            }
        });
        let shown = (report.rejected.len() + report.warnings.len()) as u64;
        let total = report.rejected_count() + report.warning_count();
        if total > shown {
            ui.weak(format!(
                "… and {} more (tokenscope validate --json lists counts by kind)",
                total - shown
            ));
        }
    });
}

/// A combo box filtering by one label column; returns true when the choice changed.
/// `values` are the distinct labels of the column (computed once per trace: [`crate::view::trace_view::distinct_labels`]).
pub fn label_filter_ui(ui: &mut Ui, name: &str, field: &mut u32, values: &[u32], trace: &Trace) -> bool {
    if values.len() < 2 && *field == NO_STR {
        return false;
    }
    let mut changed = false;
    let current = if *field == NO_STR {
        "any".to_owned()
    } else {
        trace.label(*field).unwrap_or("?").to_owned()
    };
    let label = ui.label(name);
    egui::ComboBox::from_id_salt(name)
        .selected_text(current)
        .show_ui(ui, |ui| {
            changed |= ui.selectable_value(field, NO_STR, "any").changed();
            for &v in values {
                changed |= ui.selectable_value(field, v, trace.label(v).unwrap_or("?")).changed();
            }
        })
        .response
        .labelled_by(label.id);
    changed
}

/// The interference panel of a drag-selected range: what the range is, who held the engine in it, then the
/// requests decoding, prefilling, waiting and moving their KV cache there.
pub fn interference_ui(ui: &mut Ui, trace: &Trace, x: &Interference, t0_ns: i64, out: &mut Vec<Command>) {
    range_header_ui(ui, trace, x, t0_ns, out);
    ui.add_space(4.0);
    holders_ui(ui, trace, x, out);
    ui.add_space(4.0);
    decoding_ui(ui, trace, x, out);
    ui.add_space(4.0);
    ui.strong(format!("Prefilling: {} requests", x.counts.prefilling));
    for p in x.prefilling.iter().take(20) {
        ui.horizontal(|ui| {
            request_link(ui, trace, p.request, out);
            ui.label(format!(
                "{} tokens in {} step{}",
                p.tokens,
                p.steps,
                if p.steps == 1 { "" } else { "s" }
            ));
        });
    }
    ui.add_space(4.0);
    ui.strong(format!("Waiting: {} requests", x.counts.waiting));
    for w in x.waiting.iter().take(20) {
        ui.horizontal(|ui| {
            request_link(ui, trace, w.request, out);
            ui.label(format!("{:.1} ms in range", w.waited_ms));
        });
    }
    if !x.transfers.list.is_empty() {
        ui.add_space(4.0);
        transfers_ui(ui, trace, x, out);
    }
}

/// A request's id as a link that selects it and scrolls to it.
fn request_link(ui: &mut Ui, trace: &Trace, request: u32, out: &mut Vec<Command>) {
    if ui.link(trace.request_id(request)).clicked() {
        out.push(Command::Select {
            request: Some(request),
            scroll: true,
        });
    }
}

/// The range's buttons (zoom, copy, close, export), its times from the trace's start `t0_ns`, and its steps.
fn range_header_ui(ui: &mut Ui, trace: &Trace, x: &Interference, t0_ns: i64, out: &mut Vec<Command>) {
    ui.horizontal(|ui| {
        ui.heading("Selected range");
        if ui.small_button("Zoom to selection").clicked() {
            out.push(Command::ZoomTo(x.from_ns, x.to_ns));
        }
        if ui.small_button("Copy as text").clicked() {
            out.push(Command::CopyText(x.to_text(trace)));
        }
        if ui.small_button("Close").clicked() {
            out.push(Command::ClearRange);
        }
    });
    ui.horizontal(|ui| {
        if ui
            .small_button("Export slice")
            .on_hover_text("the requests and steps of the range, as Parquet")
            .clicked()
        {
            out.push(Command::ExportRange { chrome: false });
        }
        if ui
            .small_button("Export for Perfetto")
            .on_hover_text("Chrome Trace Event JSON")
            .clicked()
        {
            out.push(Command::ExportRange { chrome: true });
        }
    });
    ui.label(format!(
        "{} to {} after start ({})",
        ruler::format_duration(x.from_ns - t0_ns),
        ruler::format_duration(x.to_ns - t0_ns),
        ruler::format_duration(x.to_ns - x.from_ns)
    ));
    let s = &x.steps;
    if s.count == 0 {
        ui.weak("No engine steps in range (the trace has no iteration records here).");
    } else {
        ui.label(format!(
            "{} steps: {} prefill tokens, {} decode tokens; step time mean {:.1} ms, max {:.1} ms",
            s.count, s.prefill_tokens, s.decode_tokens, s.mean_ms, s.max_ms
        ));
    }
}

/// Who held the engine: the prefills of the range by their share of their instance's step time.
fn holders_ui(ui: &mut Ui, trace: &Trace, x: &Interference, out: &mut Vec<Command>) {
    ui.strong("Who held the engine");
    if x.holders.is_empty() {
        ui.weak("No prefill in this range.");
    }
    egui::Grid::new("holders").striped(true).num_columns(4).show(ui, |ui| {
        ui.weak("request");
        ui.weak("share of its instance");
        ui.weak("prompt tokens");
        ui.weak("delayed");
        ui.end_row();
        // The few that matter: holders of at least 1 % of their instance's step time (at least the top one).
        let shown: Vec<_> = x
            .holders
            .iter()
            .enumerate()
            .filter(|(k, h)| *k == 0 || h.share >= 0.01)
            .take(20)
            .collect();
        for (_, h) in &shown {
            request_link(ui, trace, h.request, out);
            let source = trace
                .label(trace.requests.source[h.request as usize])
                .unwrap_or("engine");
            ui.label(format!("{:.0} % of {source} ({:.0} ms)", h.share * 100.0, h.held_ms));
            ui.label(h.tokens.to_string());
            match h.delayed {
                Some(n) => ui.label(format!("{n} requests")),
                None => ui.weak("not counted"),
            };
            ui.end_row();
        }
        let rest = x.counts.prefilling.saturating_sub(shown.len());
        if rest > 0 {
            ui.weak(format!("{rest} more"));
            ui.weak("under 1 % each");
            ui.end_row();
        }
    });
}

/// The requests decoding in the range, each with its longest gap against its median, the stalled ones marked.
fn decoding_ui(ui: &mut Ui, trace: &Trace, x: &Interference, out: &mut Vec<Command>) {
    ui.strong(format!(
        "Decoding: {} requests, {} stalled (gap > 3× their median ITL)",
        x.counts.decoding, x.counts.stalled
    ));
    egui::Grid::new("decoding").striped(true).num_columns(4).show(ui, |ui| {
        for d in x.decoding.iter().take(30) {
            request_link(ui, trace, d.request, out);
            ui.label(format!("{} tokens", d.tokens));
            ui.label(format!(
                "gap {:.1} ms vs median {:.1} ms",
                d.max_itl_ms, d.median_itl_ms
            ));
            ui.label(if d.stalled {
                RichText::new("stalled").color(ui.visuals().warn_fg_color)
            } else {
                RichText::new("")
            });
            ui.end_row();
        }
    });
}

/// The KV transfers of the range (disaggregated serving): their time in it, tokens and bytes, each with its rate.
fn transfers_ui(ui: &mut Ui, trace: &Trace, x: &Interference, out: &mut Vec<Command>) {
    let moved = &x.transfers;
    let tokens = moved
        .tokens
        .map_or_else(|| "tokens not in the trace".to_owned(), |n| format!("{n} tokens"));
    let bytes = moved
        .in_range_bytes
        .zip(moved.bytes)
        .map_or_else(String::new, |(inside, all)| {
            format!(", {} moved, {} of it in range", mb(all), mb(inside))
        });
    ui.strong(format!(
        "KV transfers: {} ({:.1} ms in range, {tokens}{bytes})",
        moved.list.len(),
        moved.in_range_ms
    ));
    for m in moved.list.iter().take(20) {
        ui.horizontal(|ui| {
            request_link(ui, trace, m.request, out);
            let what = m.tokens.map_or_else(String::new, |n| format!(", {n} tokens"));
            let size = m.bytes.map_or_else(String::new, |b| {
                // Its rate over its whole time: what a slow link shows.
                #[expect(clippy::cast_precision_loss, reason = "bytes to a rate")]
                let rate = if m.ms > 0.0 {
                    format!(" at {:.2} GB/s", b as f64 / m.ms / 1e6)
                } else {
                    String::new()
                };
                format!(", {}{rate}", mb(b))
            });
            ui.label(format!("{:.1} ms{what}{size}", m.ms));
        });
    }
}

/// Bytes as MB (10^6), one decimal.
#[expect(clippy::cast_precision_loss, reason = "bytes shown to a tenth of a MB")]
fn mb(bytes: u64) -> String {
    format!("{:.1} MB", bytes as f64 / 1e6)
}
