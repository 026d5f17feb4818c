//! The findings panel: what the detectors found (`analysis::findings`), most severe first, one card each with its
//! sentence, time and subject; a click takes the waterfall there and selects the request and token involved.

use std::sync::Arc;
use std::sync::mpsc::TryRecvError;

use eframe::egui::{self, Color32, RichText, Ui};

use crate::analysis::findings::{Finding, Kind, Severity, ThresholdValue, Thresholds, find};
use crate::analysis::summary::Slo;
use crate::trace::Trace;
use crate::ui::widgets::command::Command;
use crate::ui::widgets::theme;

/// Findings computed with a snapshot of a growing trace (a live recording's): the findings, the objectives and
/// thresholds they were computed with, and the earliest send of a request still streaming (findings reaching it are
/// provisional).
pub type SnapshotFindings = (Vec<Finding>, Slo, Thresholds, Option<i64>);

/// What the findings were computed from, to know when to compute again.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Key {
    slo: Slo,
    thresholds: Thresholds,
}

/// The findings of one trace, and how the panel shows them.
#[derive(Default)]
pub struct FindingsState {
    /// The findings, when computed.
    pub findings: Option<Vec<Finding>>,
    /// The finding last clicked (index into `findings`).
    pub selected: Option<usize>,
    /// Kinds hidden from the list.
    pub hidden: Vec<Kind>,
    /// The thresholds' editor is open.
    pub editing: bool,
    /// The thresholds as edited, when they do not check yet (kept until they do, or are reset).
    draft: Option<(Thresholds, String)>,
    key: Option<Key>,
    job: Option<(Key, crate::ui::widgets::job::Job<Vec<Finding>>)>,
    /// A live recording's: from this time on requests are still streaming, so findings reaching it are provisional.
    pub open_from_ns: Option<i64>,
    /// Judged on tokens this trace does not hold (a trace opened without them, its tokens streamed from disk): never
    /// judged again on the trace, whose detectors would see no token; other objectives or thresholds need it opened
    /// again.
    pub judged_on_disk: bool,
    /// The objectives or thresholds changed since such findings were judged.
    stale: bool,
}

/// The colour of a severity.
pub fn severity_color(s: Severity) -> Color32 {
    match s {
        Severity::Critical => theme::SLOW_TOKEN,
        Severity::Warning => theme::SLOWISH_TOKEN,
        Severity::Info => theme::COUNTER_COLOR,
    }
}

impl FindingsState {
    /// The state for the next trace: no findings yet, the same kinds hidden.
    pub fn carried(&self) -> Self {
        FindingsState {
            hidden: self.hidden.clone(),
            editing: self.editing,
            ..FindingsState::default()
        }
    }

    /// Starts computing when the objectives or thresholds changed (or never were computed); takes finished
    /// findings. True while computing.
    pub fn refresh(
        &mut self,
        trace: &Arc<Trace>,
        slo: Slo,
        thresholds: Thresholds,
        waker: Option<&egui::Context>,
    ) -> bool {
        let key = Key { slo, thresholds };
        if self.judged_on_disk {
            self.stale = self.key != Some(key);
            return false;
        }
        if let Some((_, rx)) = &self.job {
            match rx.try_recv() {
                Ok(f) => {
                    self.findings = Some(f);
                    self.selected = None;
                    self.key = self.job.take().map(|(k, _)| k);
                }
                Err(TryRecvError::Disconnected) => self.job = None,
                Err(TryRecvError::Empty) => {}
            }
        }
        // One computation at a time: objectives changed meanwhile are computed when the last one finishes.
        if self.key == Some(key) || self.job.is_some() {
            return self.job.is_some();
        }
        let shared = Arc::clone(trace);
        let job_key = key;
        let spawned = crate::ui::widgets::job::Job::spawn("findings", waker, move || {
            find(&shared, &job_key.slo, &job_key.thresholds)
        });
        if let Ok(job) = spawned {
            self.job = Some((key, job));
        } else {
            self.findings = Some(find(trace, &key.slo, &key.thresholds));
            self.key = Some(key);
        }
        self.job.is_some()
    }

    /// Findings computed with a trace elsewhere (a live snapshot's, on its builder's thread) for these objectives
    /// and thresholds: shown at once, the finding selected kept when there still is one at its place.
    pub fn computed(&mut self, findings: Vec<Finding>, slo: Slo, thresholds: Thresholds, open_from_ns: Option<i64>) {
        self.open_from_ns = open_from_ns;
        if self.selected.is_some_and(|i| i >= findings.len()) {
            self.selected = None;
        }
        self.findings = Some(findings);
        self.key = Some(Key { slo, thresholds });
        self.job = None;
    }

    /// Waits for the findings being computed (tests use this).
    pub fn wait(&mut self) {
        if let Some((key, rx)) = self.job.take()
            && let Ok(f) = rx.recv()
        {
            self.findings = Some(f);
            self.key = Some(key);
        }
    }

    /// How many findings of each severity, for the toolbar.
    pub fn counts(&self) -> Option<[usize; 3]> {
        let f = self.findings.as_ref()?;
        let n = |s| f.iter().filter(|x| x.severity == s).count();
        Some([n(Severity::Critical), n(Severity::Warning), n(Severity::Info)])
    }
}

/// Where a finding takes the view.
pub fn go_to(trace: &Trace, f: &Finding) -> Command {
    let (request, token) = f.subject(trace);
    Command::GoTo {
        from_ns: f.from_ns,
        to_ns: f.to_ns,
        request,
        token,
    }
}

fn card(ui: &mut Ui, trace: &Trace, t0_ns: i64, f: &Finding, selected: bool, provisional: bool) -> egui::Response {
    let fill = if selected {
        theme::SELECTED_ROW
    } else {
        ui.visuals().faint_bg_color
    };
    let inner = egui::Frame::group(ui.style()).fill(fill).show(ui, |ui| {
        ui.set_width(ui.available_width());
        ui.horizontal(|ui| {
            ui.label(
                RichText::new(f.severity.name().to_uppercase())
                    .color(severity_color(f.severity))
                    .strong()
                    .small(),
            );
            ui.strong(f.kind.title());
            if provisional {
                ui.weak(RichText::new("provisional").italics().small()).on_hover_text(
                    "A request in its window is still streaming: it may change, or go, as the run goes on",
                );
            }
        });
        ui.label(&f.summary);
        #[expect(clippy::cast_precision_loss, reason = "seconds of a trace")]
        let at = |ns: i64| (ns - t0_ns) as f64 / 1e9;
        let mut place = format!("{:.2} s to {:.2} s", at(f.from_ns), at(f.to_ns));
        if let Some(&r) = f.requests.first() {
            place.push_str(&format!(" · {}", trace.request_id(r)));
            if f.requests.len() > 1 {
                place.push_str(&format!(" +{}", f.requests.len() - 1));
            }
        }
        if !f.steps.is_empty() {
            let n = f.steps.len();
            place.push_str(&format!(" · {n} step{}", if n == 1 { "" } else { "s" }));
        }
        ui.weak(place);
    });
    inner.response.interact(egui::Sense::click())
}

/// The thresholds' editor: every threshold with its flag's help; a change that checks is applied at once (the
/// findings are computed again), one that does not is kept as a draft with the reason shown.
fn thresholds_ui(ui: &mut Ui, state: &mut FindingsState, thresholds: &mut Thresholds) {
    let mut draft = state.draft.as_ref().map_or(*thresholds, |d| d.0);
    let mut changed = false;
    let help = Thresholds::help();
    egui::Grid::new("thresholds")
        .num_columns(2)
        .striped(true)
        .show(ui, |ui| {
            for (name, value) in draft.values_mut() {
                let text = help.iter().find(|(id, _)| id == name).map_or("", |(_, h)| h.as_str());
                let label = ui.label(name.replace('_', " ")).on_hover_text(text);
                let response = match value {
                    ThresholdValue::Real(v) => ui.add(egui::DragValue::new(v).speed(0.01).max_decimals(3)),
                    ThresholdValue::Count(v) => ui.add(egui::DragValue::new(v).speed(0.2)),
                };
                changed |= response.labelled_by(label.id).on_hover_text(text).changed();
                ui.end_row();
            }
        });
    ui.horizontal(|ui| {
        if ui.button("Defaults").clicked() {
            draft = Thresholds::default();
            changed = true;
        }
        if let Some((_, why)) = &state.draft {
            ui.colored_label(ui.visuals().error_fg_color, why);
        }
    });
    if changed {
        match draft.check() {
            Ok(()) => {
                *thresholds = draft;
                state.draft = None;
            }
            Err(e) => state.draft = Some((draft, e.to_string())),
        }
    }
}

/// The panel's contents; a click on a finding asks to go there.
pub fn findings_ui(
    ui: &mut Ui,
    trace: &Trace,
    t0_ns: i64,
    state: &mut FindingsState,
    thresholds: &mut Thresholds,
    out: &mut Vec<Command>,
) {
    ui.toggle_value(&mut state.editing, "Thresholds…")
        .on_hover_text("What each detector needs to report a finding; kept between runs");
    if state.editing {
        thresholds_ui(ui, state, thresholds);
        ui.separator();
    }
    let Some(findings) = &state.findings else {
        ui.horizontal(|ui| {
            ui.spinner();
            ui.label("Looking for known incident patterns…");
        });
        return;
    };
    if findings.is_empty() {
        ui.label("Nothing found: no known incident pattern in this trace under the current objectives and thresholds.");
        return;
    }
    let [c, w, i] = state.counts().unwrap_or_default();
    ui.label(format!("{c} critical · {w} warning · {i} info. Click one to go there."));
    if state.open_from_ns.is_some() {
        ui.weak("Live: a finding whose window reaches a request still streaming is provisional.");
    }
    if state.stale {
        ui.weak(
            "Judged on the tokens on disk with the objectives and thresholds of when the trace was opened: open it \
             again to judge them with the new ones.",
        );
    }
    ui.horizontal_wrapped(|ui| {
        for kind in Kind::ALL {
            let n = findings.iter().filter(|f| f.kind == kind).count();
            if n == 0 {
                continue;
            }
            let mut shown = !state.hidden.contains(&kind);
            if ui.checkbox(&mut shown, format!("{} {n}", kind.name())).changed() {
                if shown {
                    state.hidden.retain(|k| *k != kind);
                } else {
                    state.hidden.push(kind);
                }
            }
        }
    });
    ui.separator();
    let mut clicked = None;
    egui::ScrollArea::vertical().show(ui, |ui| {
        for (k, f) in findings.iter().enumerate() {
            if state.hidden.contains(&f.kind) {
                continue;
            }
            let provisional = state.open_from_ns.is_some_and(|open| f.to_ns >= open);
            if card(ui, trace, t0_ns, f, state.selected == Some(k), provisional)
                .on_hover_text("Go there: zoom to its time range and select its request and token")
                .clicked()
            {
                clicked = Some(k);
            }
        }
    });
    if let Some(k) = clicked {
        state.selected = Some(k);
        out.push(go_to(trace, &findings[k]));
    }
}
