//! Comparing the trace on screen (A) with another (B), as `tokenscope diff` does: B's session beside A's, the two
//! waterfalls stacked on one time axis measured from each trace's start, and the Comparison window (the figures
//! with their change, the findings gone and new, the paired requests that changed most, the TTFT and TPOT CDFs of
//! both). The comparison is computed on a thread of its own, again when the objectives change.

use std::sync::Arc;
use std::sync::mpsc::TryRecvError;

use eframe::egui::{self, Color32, RichText, Ui};

use crate::analysis::diff::{
    Change, CompareOptions, Comparison, Metric, PairDelta, SeverityChange, TokenDiff, Verdict, compare, compare_tokens,
    most_changed,
};
use crate::analysis::findings::{Finding, Thresholds};
use crate::analysis::summary::Slo;
use crate::trace::{CandidateSource, Trace};
use crate::ui::shell::session::Session;
use crate::ui::views::stats::{self, Grouping, Samples};
use crate::ui::views::waterfall::WaterfallState;
use crate::ui::widgets::command::Command;
pub use crate::ui::widgets::command::Side;
use crate::ui::widgets::job::Job;
use crate::ui::widgets::theme;
use crate::view::TraceView;
use crate::view::viewport::Viewport;

/// The most tokens a trace may have for its candidates left on disk to be read whole for the answers' comparison
/// (a trace of that size holds some hundred MB of candidates).
const TOKENS_READ_FOR_CANDIDATES: usize = 1_000_000;

/// `trace` with its candidates in memory: itself when they are, else a copy with them read from `source` (when the
/// trace is small enough: beyond, the answers are compared on their tokens alone).
fn with_candidates(trace: &Arc<Trace>, source: Option<&Arc<dyn CandidateSource>>) -> Arc<Trace> {
    let Some(source) =
        source.filter(|_| trace.candidates_on_disk.is_some() && trace.token_count() <= TOKENS_READ_FOR_CANDIDATES)
    else {
        return Arc::clone(trace);
    };
    let mut found = Vec::new();
    for r in 0..u32::try_from(trace.request_count()).unwrap_or(u32::MAX) {
        let Ok(lists) = source.candidates(trace, r) else {
            return Arc::clone(trace);
        };
        let start = trace.tokens_of(r).start;
        found.extend(
            lists
                .into_iter()
                .enumerate()
                .map(|(k, list)| (u32::try_from(start + k).unwrap_or(u32::MAX), list)),
        );
    }
    let mut owned = Trace::clone(trace);
    owned.attach_candidates(found);
    Arc::new(owned)
}

/// Paired requests listed per metric in the window.
pub const LISTED_PAIRS: usize = 12;

/// What the comparison job computes: the comparison, what the window lists of it, and every request's samples.
pub struct Computed {
    /// The comparison.
    pub comparison: Comparison,
    /// The paired requests whose TTFT, then TPOT, changed most ([`LISTED_PAIRS`] each).
    pub top: [Vec<PairDelta>; 2],
    /// Every request's TTFT and TPOT, A's then B's, for the CDFs.
    pub samples: (Samples, Samples),
    /// The answers token by token, when both traces have tokens.
    pub tokens: Option<TokenDiff>,
}

/// The other trace and the comparison with it.
pub struct Comparing {
    /// B: the other trace's session (its own view, waterfall, selection).
    pub other: Session,
    /// The comparison, once computed.
    pub comparison: Option<Arc<Comparison>>,
    /// The paired requests whose TTFT, then TPOT, changed most, computed with the comparison.
    top: [Vec<PairDelta>; 2],
    /// Every request's TTFT and TPOT of A and B, for the window's CDFs, computed with the comparison.
    all_samples: Option<(Samples, Samples)>,
    /// The objectives and thresholds of `comparison`, or of the one being computed.
    inputs: Option<(Slo, Thresholds)>,
    job: Option<Job<Computed>>,
    /// Why the comparison could not be computed.
    pub failed: Option<String>,
    /// The shared time axis on A's clock (start, scale), as last synced.
    synced: Option<(i64, f64)>,
    /// B's TTFT and TPOT samples for the statistics window's group.
    samples: Option<((Grouping, Option<String>), Samples)>,
    /// The Comparison window is open.
    pub show_window: bool,
    /// The answers token by token, computed with the comparison when both traces have tokens.
    pub tokens: Option<Arc<TokenDiff>>,
}

impl Comparing {
    /// Compares with `other` (the comparison starts at the next [`Comparing::refresh`]).
    pub fn new(other: Session) -> Self {
        Comparing {
            other,
            comparison: None,
            top: [Vec::new(), Vec::new()],
            all_samples: None,
            inputs: None,
            job: None,
            failed: None,
            synced: None,
            samples: None,
            show_window: true,
            tokens: None,
        }
    }

    /// Starts computing the comparison when it was never computed, or for other objectives or thresholds. `a`'s
    /// candidates left on disk are read by `a_candidates` for the answers' comparison.
    pub fn refresh(
        &mut self,
        a: &Arc<Trace>,
        a_candidates: Option<&Arc<dyn CandidateSource>>,
        slo: Slo,
        thresholds: Thresholds,
        waker: Option<&egui::Context>,
    ) {
        if self.inputs == Some((slo, thresholds)) {
            return;
        }
        self.inputs = Some((slo, thresholds));
        let (a, b) = (Arc::clone(a), Arc::clone(&self.other.view.trace));
        let sources = (a_candidates.cloned(), self.other.candidates.clone());
        let work = move || {
            let options = CompareOptions {
                slo,
                thresholds: Some(&thresholds),
                ..CompareOptions::default()
            };
            let comparison = compare(&a, &b, &options);
            let top = [Metric::Ttft, Metric::Tpot].map(|m| most_changed(&comparison.deltas, m, LISTED_PAIRS));
            let samples = (Samples::of(&a, |_| true), Samples::of(&b, |_| true));
            let tokens = (!a.tokens.is_empty() && !b.tokens.is_empty()).then(|| {
                let (a, b) = (
                    with_candidates(&a, sources.0.as_ref()),
                    with_candidates(&b, sources.1.as_ref()),
                );
                compare_tokens(&a, &b, crate::analysis::diff::DEFAULT_KL_SHIFT)
            });
            Computed {
                comparison,
                top,
                samples,
                tokens,
            }
        };
        // A failure is said once, not retried every frame: new objectives try again.
        match Job::spawn("compare", waker, work) {
            Ok(job) => {
                self.job = Some(job);
                self.failed = None;
            }
            Err(e) => self.failed = Some(format!("cannot start the comparison: {e}")),
        }
    }

    /// Takes the comparison when it is ready.
    pub fn poll(&mut self) {
        if let Some(job) = &self.job {
            match job.try_recv() {
                Ok(Computed {
                    comparison,
                    top,
                    samples,
                    tokens,
                }) => {
                    self.comparison = Some(Arc::new(comparison));
                    self.tokens = tokens.map(Arc::new);
                    self.top = top;
                    self.all_samples = Some(samples);
                    self.job = None;
                }
                Err(TryRecvError::Disconnected) => {
                    self.job = None;
                    self.failed = Some("the comparison stopped without a result".to_owned());
                }
                Err(TryRecvError::Empty) => {}
            }
        }
    }

    /// Waits for the comparison being computed (tests use this).
    pub fn wait(&mut self) {
        while let Some(job) = &self.job {
            job.wait();
            self.poll();
        }
    }

    /// True while the comparison is being computed.
    pub fn computing(&self) -> bool {
        self.job.is_some()
    }

    /// B's samples for the statistics window's grouping and group (the same label value as A's plots show): every
    /// request's from the comparison job; a group's computed here once per choice (one pass over B's requests).
    pub fn samples(&mut self, grouping: Grouping, group: Option<&str>) -> &Samples {
        let (Grouping::By(by), Some(g)) = (grouping, group) else {
            return match &self.all_samples {
                Some((_, b)) => b,
                None => no_samples(),
            };
        };
        let key = (grouping, Some(g.to_owned()));
        if self.samples.as_ref().is_some_and(|(k, _)| *k != key) {
            self.samples = None;
        }
        let trace = &self.other.view.trace;
        let compute = || {
            let labels = by.label_column(trace);
            let none = crate::analysis::summary::NO_LABEL;
            Samples::of(trace, |r| trace.label(labels[r as usize]).unwrap_or(none) == g)
        };
        &self.samples.get_or_insert_with(|| (key, compute())).1
    }

    /// B's clock minus A's: the comparison's (from the paired requests), else the difference of their starts.
    pub fn offset_ns(&self, a_t0: i64) -> i64 {
        self.comparison
            .as_ref()
            .map_or_else(|| self.other.view.t0_ns.saturating_sub(a_t0), |c| c.offset_ns)
    }

    /// Keeps the two waterfalls on one time axis (B's clock shifted by [`Comparing::offset_ns`]): whichever moved
    /// since the last frame leads.
    pub fn sync_axes(&mut self, a: &mut WaterfallState, a_view: &TraceView) {
        let offset = self.offset_ns(a_view.t0_ns);
        let before = (a.viewport, self.other.waterfall.viewport);
        self.synced = sync_axes(a, &mut self.other.waterfall, offset, self.synced);
        // The one moved by the other brings a track alive in its new range into view, as its own zoom would.
        if a.viewport != before.0 {
            crate::ui::views::waterfall::follow_axis(a, a_view);
        }
        if self.other.waterfall.viewport != before.1 {
            crate::ui::views::waterfall::follow_axis(&mut self.other.waterfall, &self.other.view);
        }
    }
}

fn no_samples() -> &'static Samples {
    static EMPTY: std::sync::OnceLock<Samples> = std::sync::OnceLock::new();
    EMPTY.get_or_init(Samples::default)
}

/// Puts `b` on `a`'s axis (B's clock is A's plus `offset_ns`), or `a` on `b`'s when only `b` moved since
/// `synced`; returns the axis now shared, on A's clock. A waterfall not drawn yet (no viewport) follows the other.
pub fn sync_axes(
    a: &mut WaterfallState,
    b: &mut WaterfallState,
    offset_ns: i64,
    synced: Option<(i64, f64)>,
) -> Option<(i64, f64)> {
    let place = |state: &mut WaterfallState, start_ns: i64, npp: f64, width: f64| {
        state.viewport = Some(Viewport {
            start_ns,
            ns_per_point: npp,
            width,
        });
    };
    let on_a = |vp: &Viewport| (vp.start_ns, vp.ns_per_point);
    let from_b = |vp: &Viewport| (vp.start_ns.saturating_sub(offset_ns), vp.ns_per_point);
    match (a.viewport, b.viewport) {
        (Some(va), vb) => {
            let ra = on_a(&va);
            let rb = vb.as_ref().map(from_b);
            let lead = match (rb, synced) {
                (Some(rb), Some(s)) if ra == s && rb != s => rb,
                _ => ra,
            };
            if lead != ra {
                place(a, lead.0, lead.1, va.width);
            }
            if rb != Some(lead) {
                place(
                    b,
                    lead.0.saturating_add(offset_ns),
                    lead.1,
                    vb.map_or(va.width, |v| v.width),
                );
            }
            Some(lead)
        }
        (None, Some(vb)) => {
            let rb = from_b(&vb);
            place(a, rb.0, rb.1, vb.width);
            Some(rb)
        }
        (None, None) => synced,
    }
}

const A_COLOR: Color32 = theme::TRACE_A;
const B_COLOR: Color32 = theme::TRACE_B;

fn verdict_color(v: Verdict) -> Option<Color32> {
    match v {
        Verdict::Better => Some(theme::SLO_MET),
        Verdict::Worse => Some(theme::SLOW_TOKEN),
        _ => None,
    }
}

fn change_text(c: &Change) -> String {
    let relative = c
        .relative
        .map_or_else(String::new, |r| format!("  ({:+.1} %)", r * 100.0));
    format!("{}{relative}", c.change_text())
}

fn figures_ui(ui: &mut Ui, c: &Comparison) {
    egui::Grid::new("compare-figures")
        .striped(true)
        .num_columns(4)
        .spacing([18.0, 3.0])
        .show(ui, |ui| {
            for h in ["figure", "A", "B", "change"] {
                ui.strong(h);
            }
            ui.end_row();
            for ch in &c.changes {
                ui.label(ch.label);
                ui.label(RichText::new(ch.unit.format(ch.a)).color(A_COLOR));
                ui.label(RichText::new(ch.unit.format(ch.b)).color(B_COLOR));
                let text = RichText::new(change_text(ch));
                ui.label(match verdict_color(ch.verdict) {
                    Some(color) => text.color(color),
                    None => text,
                });
                ui.end_row();
            }
        });
}

/// How far B is from A, figure by figure (`diff --fidelity`): for a replay or simulation of A's requests (B), or a
/// repeat of A's run. Collapsed at first: most comparisons are before and after, not real and simulated.
fn fidelity_ui(ui: &mut Ui, c: &Comparison) {
    use crate::synth::fidelity::{Tolerance, from_summaries};
    let tolerance = Tolerance::default();
    let f = from_summaries(&c.a, &c.b, tolerance);
    let (compared, within) = f.score();
    egui::CollapsingHeader::new(format!(
        "Fidelity of B to A: {within} of {compared} figures within {} % or {} ms",
        tolerance.pct, tolerance.floor_ms
    ))
    .id_salt("compare-fidelity")
    .show(ui, |ui| {
        egui::Grid::new("compare-fidelity-grid")
            .striped(true)
            .num_columns(6)
            .spacing([18.0, 3.0])
            .show(ui, |ui| {
                for h in ["figure", "p", "A ms", "B ms", "error", ""] {
                    ui.strong(h);
                }
                ui.end_row();
                let num = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.1}"));
                for r in &f.rows {
                    ui.label(&r.figure);
                    ui.label(format!("p{}", r.percentile));
                    ui.label(RichText::new(num(r.real_ms)).color(A_COLOR));
                    ui.label(RichText::new(num(r.sim_ms)).color(B_COLOR));
                    ui.label(r.error_pct.map_or_else(|| "-".to_owned(), |e| format!("{e:+.1} %")));
                    match r.within {
                        Some(true) => ui.label(RichText::new("within").color(theme::SLO_MET)),
                        Some(false) => ui.label(RichText::new("off").color(theme::SLOW_TOKEN)),
                        None => ui.label("-"),
                    };
                    ui.end_row();
                }
            });
    });
}

fn finding_row(ui: &mut Ui, tag: &str, side: Side, view: &TraceView, f: &Finding, out: &mut Vec<Command>) {
    let trace = &view.trace;
    let subject = f.requests.first().map_or("", |&r| trace.request_id(r));
    let at_s = crate::analysis::metrics::ms(f.from_ns.saturating_sub(view.t0_ns)) / 1e3;
    let text = format!(
        "{tag} · {} · {} {} at {at_s:.1} s",
        f.severity.name(),
        f.kind.title(),
        subject
    );
    if ui.link(text).on_hover_text(&f.summary).clicked() {
        out.push(Command::CompareGoTo {
            side,
            from_ns: f.from_ns,
            to_ns: f.to_ns,
            request: f.requests.first().copied(),
        });
    }
}

/// Findings listed per group (gone, new, in both); `tokenscope diff --json` lists them all.
const LISTED_FINDINGS: usize = 40;

fn findings_ui(ui: &mut Ui, a: &TraceView, b: &TraceView, c: &Comparison, out: &mut Vec<Command>) {
    let d = &c.findings;
    ui.label(format!(
        "{} in A, {} in B: {} gone, {} new, {} in both",
        c.findings_a.len(),
        c.findings_b.len(),
        d.only_a.len(),
        d.only_b.len(),
        d.both.len()
    ));
    let more = |ui: &mut Ui, n: usize| {
        if n > LISTED_FINDINGS {
            ui.weak(format!(
                "and {} more (tokenscope diff lists them all)",
                n - LISTED_FINDINGS
            ));
        }
    };
    for &i in d.only_a.iter().take(LISTED_FINDINGS) {
        finding_row(ui, "gone", Side::A, a, &c.findings_a[i], out);
    }
    more(ui, d.only_a.len());
    for &j in d.only_b.iter().take(LISTED_FINDINGS) {
        finding_row(ui, "new", Side::B, b, &c.findings_b[j], out);
    }
    more(ui, d.only_b.len());
    for &(i, j) in d.both.iter().take(LISTED_FINDINGS) {
        let (fa, fb) = (&c.findings_a[i], &c.findings_b[j]);
        let tag = match SeverityChange::of(fa, fb) {
            SeverityChange::Same => "both".to_owned(),
            change => format!("{} ({} in A)", change.name(), fa.severity.name()),
        };
        finding_row(ui, &tag, Side::B, b, fb, out);
    }
    more(ui, d.both.len());
}

fn pairs_ui(ui: &mut Ui, a: &Trace, b: &Trace, list: &[PairDelta], metric: Metric, out: &mut Vec<Command>) {
    if list.is_empty() {
        return;
    }
    ui.label(RichText::new(format!("{} changed most (click: both waterfalls)", metric.name())).strong());
    egui::Grid::new(format!("compare-pairs-{}", metric.name()))
        .striped(true)
        .num_columns(4)
        .show(ui, |ui| {
            for h in ["request", "A ms", "B ms", "change ms"] {
                ui.strong(h);
            }
            ui.end_row();
            for d in list {
                let (x, y) = d.get(metric);
                let (ia, ib) = (a.request_id(d.a), b.request_id(d.b));
                let name = if ia == ib {
                    ia.to_owned()
                } else {
                    format!("{ia} / {ib}")
                };
                if ui.link(name).clicked() {
                    out.push(Command::SelectPair { a: d.a, b: d.b });
                }
                let ms = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.1}"));
                ui.label(RichText::new(ms(x)).color(A_COLOR));
                ui.label(RichText::new(ms(y)).color(B_COLOR));
                let change = d.change(metric).unwrap_or(0.0);
                let color = if change < 0.0 {
                    theme::SLO_MET
                } else {
                    theme::SLOW_TOKEN
                };
                ui.label(RichText::new(format!("{change:+.1}")).color(color));
                ui.end_row();
            }
        });
}

/// The Comparison window's contents.
pub fn comparison_ui(ui: &mut Ui, a: &Session, comparing: &Comparing, slo: Slo, out: &mut Vec<Command>) {
    let b = &comparing.other;
    ui.horizontal(|ui| {
        ui.label(RichText::new(format!("A  {}", a.source.name())).color(A_COLOR));
        ui.label("·");
        ui.label(RichText::new(format!("B  {}", b.source.name())).color(B_COLOR));
        if ui.small_button("Stop comparing").clicked() {
            out.push(Command::StopComparing);
        }
    });
    if let Some(e) = &comparing.failed {
        ui.colored_label(ui.visuals().error_fg_color, e);
        return;
    }
    let (Some(c), Some(samples)) = (&comparing.comparison, &comparing.all_samples) else {
        ui.horizontal(|ui| {
            ui.spinner();
            ui.label("Comparing…");
        });
        return;
    };
    let p = &c.pairing;
    ui.label(format!(
        "Requests {}: {} pairs, {} only in A, {} only in B",
        p.by.describe(),
        p.pairs.len(),
        p.only_a,
        p.only_b
    ));
    ui.separator();
    let (ta, tb) = (&a.view.trace, &b.view.trace);
    egui::ScrollArea::vertical().show(ui, |ui| {
        fidelity_ui(ui, c);
        // Where the two runs' answers part, when both have tokens: one line until it is opened.
        if let Some(d) = &comparing.tokens {
            let id = ui.scope_id().with("token-pair");
            let mut selected: Option<usize> = ui.data(|m| m.get_temp(id)).flatten();
            crate::ui::views::compare_tokens::tokens_ui(ui, ta, tb, d, &mut selected);
            ui.data_mut(|m| m.insert_temp(id, selected));
        }
        ui.separator();
        ui.columns(2, |cols| {
            figures_ui(&mut cols[0], c);
            findings_ui(&mut cols[1], &a.view, &b.view, c, out);
            cols[1].separator();
            pairs_ui(&mut cols[1], ta, tb, &comparing.top[0], Metric::Ttft, out);
            cols[1].separator();
            pairs_ui(&mut cols[1], ta, tb, &comparing.top[1], Metric::Tpot, out);
        });
        ui.separator();
        let (sa, sb) = (&samples.0, &samples.1);
        ui.columns(2, |cols| {
            stats::cdf(
                &mut cols[0],
                "compare-ttft",
                "TTFT CDF",
                &sa.ttft_ms,
                Some(&sb.ttft_ms),
                slo.ttft_ms,
            );
            stats::cdf(
                &mut cols[1],
                "compare-tpot",
                "TPOT CDF",
                &sa.tpot_ms,
                Some(&sb.tpot_ms),
                slo.tpot_ms,
            );
        });
    });
}

/// The two waterfalls stacked, A over B, on one time axis from each trace's start. A click on a request of B
/// selects it and its twin in A; B's drag-selected range is B's own (the side panel analyses A's).
pub fn stacked_ui(ui: &mut Ui, a: &mut Session, c: &mut Comparing, out: &mut Vec<Command>) {
    let rect = ui.available_rect_before_wrap();
    let half = ((rect.height() - GAP) / 2.0).max(0.0);
    let top = egui::Rect::from_min_size(rect.min, egui::vec2(rect.width(), half));
    let bottom = egui::Rect::from_min_max(egui::pos2(rect.left(), top.bottom() + GAP), rect.max);
    ui.scope_builder(egui::UiBuilder::new().max_rect(top), |ui| {
        ui.label(RichText::new(format!("A  {}", a.source.name())).color(A_COLOR).strong());
        ui.push_id(a.id, |ui| {
            crate::ui::views::waterfall::waterfall_ui(ui, &a.view, &mut a.waterfall, a.selected, out);
        });
    });
    let mut b_out = Vec::new();
    let b = &mut c.other;
    ui.scope_builder(egui::UiBuilder::new().max_rect(bottom), |ui| {
        ui.label(RichText::new(format!("B  {}", b.source.name())).color(B_COLOR).strong());
        ui.push_id(b.id, |ui| {
            crate::ui::views::waterfall::waterfall_ui(ui, &b.view, &mut b.waterfall, b.selected, &mut b_out);
        });
    });
    ui.allocate_rect(rect, egui::Sense::hover());
    for command in b_out {
        match command {
            Command::Select { request, scroll } => {
                c.other.select(request, scroll);
                let twin = c.comparison.as_ref().and_then(|cmp| {
                    let r = request?;
                    cmp.pairing.pairs.iter().find(|&&(_, rb)| rb == r).map(|&(ra, _)| ra)
                });
                if let Some(ra) = twin {
                    out.push(Command::Select {
                        request: Some(ra),
                        scroll: true,
                    });
                }
            }
            Command::ClearRange => c.other.clear_range(),
            Command::ZoomTo(from, to) => c.other.zoom_to(from, to),
            _ => {}
        }
    }
    c.sync_axes(&mut a.waterfall, &a.view);
}

/// Points between the two waterfalls.
const GAP: f32 = 6.0;

#[cfg(test)]
mod tests {
    use super::*;

    fn state(start_ns: i64, npp: f64) -> WaterfallState {
        let mut s = WaterfallState::default();
        s.viewport = Some(Viewport {
            start_ns,
            ns_per_point: npp,
            width: 1000.0,
        });
        s
    }

    #[test]
    fn the_axes_follow_whichever_waterfall_moved() {
        // B's clock is A's plus 49,000 ns (A starts at 1,000, B at 50,000); A shows from 1,300 ns at 2 ns per point.
        let (mut a, mut b) = (state(1_300, 2.0), WaterfallState::default());
        let synced = sync_axes(&mut a, &mut b, 49_000, None);
        assert_eq!(synced, Some((1_300, 2.0)));
        assert_eq!(b.viewport.map(|v| (v.start_ns, v.ns_per_point)), Some((50_300, 2.0)));
        // B is zoomed (A unchanged): A follows B.
        b.viewport = Some(Viewport {
            start_ns: 50_100,
            ns_per_point: 4.0,
            width: 1000.0,
        });
        let synced = sync_axes(&mut a, &mut b, 49_000, synced);
        assert_eq!(synced, Some((1_100, 4.0)));
        assert_eq!(a.viewport.map(|v| (v.start_ns, v.ns_per_point)), Some((1_100, 4.0)));
        // Both moved: A leads.
        a.viewport = Some(Viewport {
            start_ns: 1_000,
            ns_per_point: 1.0,
            width: 1000.0,
        });
        b.viewport = Some(Viewport {
            start_ns: 50_500,
            ns_per_point: 8.0,
            width: 1000.0,
        });
        assert_eq!(sync_axes(&mut a, &mut b, 49_000, synced), Some((1_000, 1.0)));
        assert_eq!(b.viewport.map(|v| v.start_ns), Some(50_000));
    }
}
