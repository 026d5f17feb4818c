//! File > Compare with a what-if…: the trace on screen (A) served again by the simulator with changes to its
//! engines, `synth --set` keys (`disaggregation=1p1d`: each instance becomes a prefill and a decode instance), and
//! opened beside it as B, so that a remedy is tried on the user's own trace before it is deployed.

use eframe::egui::{self, Ui};

use crate::ingest::LoadError;
use crate::load::Loaded;
use crate::synth::overrides::{SET_KEYS, Setting, parse_setting};
use crate::synth::{Overrides, SynthOptions, replay_trace};
use crate::trace::Trace;
use crate::trace::report::Report;
use crate::ui::widgets::command::Command;

/// The changes as typed, and why they were refused.
#[derive(Debug)]
pub(super) struct WhatIfInput {
    pub(super) settings: String,
    pub(super) error: Option<String>,
}

impl Default for WhatIfInput {
    fn default() -> Self {
        WhatIfInput {
            settings: "disaggregation=1p1d".to_owned(),
            error: None,
        }
    }
}

/// Changes given as `KEY=VALUE` separated by spaces, parsed as `synth --set` parses them.
///
/// # Errors
/// The first that does not parse, with what is accepted; none given.
pub fn parse_settings(text: &str) -> Result<Vec<Setting>, String> {
    let settings = text
        .split_whitespace()
        .map(parse_setting)
        .collect::<Result<Vec<_>, _>>()?;
    if settings.is_empty() {
        return Err(format!(
            "give one change or more, KEY=VALUE separated by spaces; keys: {SET_KEYS}"
        ));
    }
    Ok(settings)
}

/// The trace `shown` replayed by the simulator with the changes `text` gives, as a loaded trace whose notes say what
/// was replayed and how.
///
/// # Errors
/// No trace on screen, a change that does not parse, or the simulator's refusal.
pub(super) fn replay(shown: Option<&Trace>, text: &str) -> Result<Loaded, LoadError> {
    let failed = |message: String| LoadError::Simulated { message };
    let a = shown.ok_or_else(|| failed("no trace on screen to replay".to_owned()))?;
    let settings = parse_settings(text).map_err(failed)?;
    let replay = replay_trace(
        a,
        &SynthOptions::replay_defaults(),
        &Overrides::from_settings(&settings),
    )
    .map_err(|e| failed(e.to_string()))?;
    let mut report = Report::default();
    report.notes.push(format!(
        "A replayed by tokenscope's simulator with {}",
        replay.applied.join(" ")
    ));
    report.notes.extend(replay.notes);
    Ok(Loaded {
        trace: replay.trace,
        report,
    })
}

/// Common remedies, ready to try: (button, its changes, what it tries).
const PRESETS: [(&str, &str, &str); 3] = [
    (
        "1 prefill + 1 decode",
        "disaggregation=1p1d",
        "each instance split into a prefill and a decode instance, the KV cache moved between them",
    ),
    (
        "chunked prefill",
        "chunked_prefill=on",
        "long prompts cut into chunks that share steps with the decoding requests",
    ),
    (
        "speculative decoding",
        "spec_draft_tokens=3",
        "3 draft tokens a step, each accepted with a chance of 0.7 after the one before",
    ),
];

/// The row of File > Compare with a what-if…; false once the replay is asked for or cancelled.
pub(super) fn what_if_ui(ui: &mut Ui, input: &mut WhatIfInput, out: &mut Vec<Command>) -> bool {
    let label = ui.label("Replay A with:");
    ui.add(
        egui::TextEdit::singleline(&mut input.settings)
            .hint_text("disaggregation=1p1d transfer_gb_per_s=25")
            .desired_width(300.0),
    )
    .labelled_by(label.id)
    .on_hover_text(format!("synth --set keys, separated by spaces: {SET_KEYS}"));
    for (name, settings, what) in PRESETS {
        if ui.small_button(name).on_hover_text(what).clicked() {
            settings.clone_into(&mut input.settings);
            input.error = None;
        }
    }
    let mut keep = true;
    if ui.button("Replay and compare").clicked() {
        match parse_settings(&input.settings) {
            Ok(_) => {
                out.push(Command::CompareWhatIf(input.settings.trim().to_owned()));
                keep = false;
            }
            Err(e) => input.error = Some(e),
        }
    }
    if ui.button("Cancel").clicked() {
        keep = false;
    }
    if let Some(e) = &input.error {
        ui.colored_label(ui.visuals().error_fg_color, e);
    }
    keep
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changes_parse_as_synth_set_and_a_bad_one_is_named() {
        assert_eq!(
            parse_settings(" disaggregation=1p1d  transfer_gb_per_s=12.5 "),
            Ok(vec![Setting::Disaggregation(1, 1), Setting::TransferGbPerS(12.5)])
        );
        let e = parse_settings("disaggregation=1p1d bogus=3").unwrap_err();
        assert!(e.contains("unknown key \"bogus\""), "{e}");
        assert!(parse_settings("  ").unwrap_err().starts_with("give one change or more"));
    }
}
