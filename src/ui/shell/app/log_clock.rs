//! File > Server log times…: the date a server log starts on and the zone its server wrote in, for logs whose times
//! lack them; applying them opens the trace again.

use eframe::egui::{self, Ui};

use crate::ui::widgets::command::Command;

/// What File > Server log times… asks for, as typed, and why it was refused.
#[derive(Debug, Default)]
pub(super) struct LogClockInput {
    pub(super) date: String,
    pub(super) zone: String,
    pub(super) error: Option<String>,
}

/// The row of File > Server log times…: the date a log starts on and the zone its server wrote in, for logs whose
/// times lack them (vLLM writes `MM-DD HH:MM:SS`, SGLang no zone); applying them opens the trace again. False once
/// applied or cancelled.
pub(super) fn log_clock_ui(ui: &mut Ui, input: &mut LogClockInput, out: &mut Vec<Command>) -> bool {
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
