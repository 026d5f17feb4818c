//! The statistics window: the figures of `tokenscope summary --by` per model, app, user or source (requests, token
//! usage, TTFT / TPOT / E2E percentiles, SLO attainment, goodput, cost and cache savings under an editable price
//! table), sortable by any column and exportable as CSV; histograms and CDFs of TTFT and TPOT for the whole trace or
//! the group clicked in the table.

use std::sync::Arc;
use std::sync::mpsc::TryRecvError;

use eframe::egui::{self, RichText, Ui};
use egui_extras::{Column as TableColumn, TableBuilder};
use egui_plot::{Bar, BarChart, GridInput, GridMark, Legend, Line, Plot, VLine};

use crate::analysis::cost::{Price, Prices};
use crate::analysis::metrics::{ms, request_metrics};
use crate::analysis::stats;
use crate::analysis::summary::{GroupBy, NO_LABEL, Slo, Summary, summarize_all, summarize_by};
use crate::trace::Trace;
use crate::ui::widgets::command::Command;
use crate::ui::widgets::theme;
use crate::view::TraceView;

/// The grouping of the table: the whole trace, or one of the labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grouping {
    /// One row for the whole trace.
    All,
    /// One row per label value.
    By(GroupBy),
}

impl Grouping {
    fn name(self) -> &'static str {
        match self {
            Grouping::All => "whole trace",
            Grouping::By(g) => g.name(),
        }
    }

    /// The CSV header of the key column.
    fn key_header(self) -> &'static str {
        match self {
            Grouping::All => "group",
            Grouping::By(g) => g.name(),
        }
    }
}

/// Sorted values of a set of requests, for the histograms and CDFs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Samples {
    /// TTFT of each request that has one, ms, ascending.
    pub ttft_ms: Vec<f64>,
    /// TPOT of each request that has one, ms, ascending.
    pub tpot_ms: Vec<f64>,
}

impl Samples {
    /// The samples of the requests for which `keep` is true.
    pub fn of(trace: &Trace, keep: impl Fn(u32) -> bool) -> Self {
        let mut s = Samples::default();
        for r in 0..u32::try_from(trace.request_count()).unwrap_or(u32::MAX) {
            if keep(r) {
                let m = request_metrics(trace, r);
                s.ttft_ms.extend(m.ttft_ns.map(ms));
                s.tpot_ms.extend(m.tpot_ns.map(|t| t / 1e6));
            }
        }
        s.ttft_ms.sort_by(f64::total_cmp);
        s.tpot_ms.sort_by(f64::total_cmp);
        s
    }
}

/// What the inputs of a computation were, to know when to compute again.
#[derive(Debug, Clone, PartialEq)]
struct Key {
    grouping: Grouping,
    group: Option<String>,
    slo: Slo,
    prices: Prices,
}

/// A computation's result.
struct Computed {
    key: Key,
    /// The rows, in the order of `sorted_by`.
    groups: Vec<(String, Summary)>,
    /// The sort `groups` is in (`None`: by group, as computed).
    sorted_by: Option<(&'static str, bool)>,
    samples: Samples,
    /// Speculative decoding's acceptance at draft position 1, 2, ... of the plotted requests (empty where their
    /// tokens do not say).
    acceptance_by_position: Vec<f64>,
}

/// The window's state.
pub struct StatsState {
    /// Rows per label or one row.
    pub grouping: Grouping,
    /// The group clicked in the table: the plots show it (else the whole trace).
    pub group: Option<String>,
    /// Sort column (its `key`) and direction (true: descending); `None` sorts by group.
    pub sort: Option<(&'static str, bool)>,
    /// The price table.
    pub prices: Prices,
    /// Whether the price editor is open.
    show_prices: bool,
    current: Option<Computed>,
    job: Option<(Key, crate::ui::widgets::job::Job<Computed>)>,
}

impl Default for StatsState {
    fn default() -> Self {
        StatsState {
            grouping: Grouping::By(GroupBy::Model),
            group: None,
            sort: None,
            prices: Prices::default(),
            show_prices: false,
            current: None,
            job: None,
        }
    }
}

/// Computes the table and the plots' samples for `key`.
fn compute(trace: &Trace, key: Key) -> Computed {
    let groups = match key.grouping {
        Grouping::All => vec![("all".to_owned(), summarize_all(trace, key.slo, Some(&key.prices)))],
        Grouping::By(by) => summarize_by(trace, by, key.slo, Some(&key.prices)),
    };
    let samples = match (&key.group, key.grouping) {
        (Some(g), Grouping::By(by)) => {
            let column = by.label_column(trace);
            Samples::of(trace, |r| {
                trace.label(column[r as usize]).unwrap_or(NO_LABEL) == g.as_str()
            })
        }
        _ => Samples::of(trace, |_| true),
    };
    // The group's figures are in its row; the whole trace's, grouped by a label, are computed once more.
    let spec = match (&key.group, key.grouping) {
        (Some(g), Grouping::By(_)) => groups.iter().find(|(k, _)| k == g).and_then(|(_, s)| s.spec.clone()),
        (_, Grouping::All) => groups.first().and_then(|(_, s)| s.spec.clone()),
        (None, Grouping::By(_)) => {
            let all: Vec<u32> = (0..u32::try_from(trace.request_count()).unwrap_or(u32::MAX)).collect();
            crate::analysis::spec::spec_figures(trace, &all)
        }
    };
    Computed {
        key,
        groups,
        sorted_by: None,
        samples,
        acceptance_by_position: spec.map(|f| f.acceptance_by_position).unwrap_or_default(),
    }
}

impl StatsState {
    /// The state for the next trace: nothing computed, no group clicked; the same grouping, sort and prices.
    pub fn carried(&self) -> Self {
        StatsState {
            grouping: self.grouping,
            sort: self.sort,
            prices: self.prices.clone(),
            ..StatsState::default()
        }
    }

    /// Waits for the computation in progress (tests use this).
    pub fn wait(&mut self) {
        if let Some((_, rx)) = self.job.take()
            && let Ok(c) = rx.recv()
        {
            self.current = Some(c);
        }
    }

    /// The table's rows as shown (after sorting), when computed.
    pub fn rows(&self) -> Option<Vec<(String, Summary)>> {
        let c = self.current.as_ref()?;
        let mut groups = c.groups.clone();
        if c.sorted_by != self.sort {
            sort_rows(&mut groups, self.sort);
        }
        Some(groups)
    }

    /// Puts the computed rows in the order asked for, once per change of order or of rows (not every frame: with
    /// a row per user there may be thousands).
    fn ensure_sorted(&mut self) {
        if let Some(c) = &mut self.current
            && c.sorted_by != self.sort
        {
            sort_rows(&mut c.groups, self.sort);
            c.sorted_by = self.sort;
        }
    }

    /// Starts computing when the inputs changed; takes a finished computation.
    fn refresh(&mut self, trace: &Arc<Trace>, slo: Slo, waker: Option<&egui::Context>) {
        // The currency is a label: changing it needs no computation.
        let prices = Prices {
            currency: String::new(),
            ..self.prices.clone()
        };
        let key = Key {
            grouping: self.grouping,
            group: self.group.clone(),
            slo,
            prices,
        };
        if let Some((_, rx)) = &self.job {
            match rx.try_recv() {
                Ok(c) => {
                    self.current = Some(c);
                    self.job = None;
                }
                Err(TryRecvError::Disconnected) => self.job = None,
                Err(TryRecvError::Empty) => {}
            }
        }
        let up_to_date = self.current.as_ref().is_some_and(|c| c.key == key);
        // One computation at a time: while a price is dragged, the latest value is computed when the last finishes.
        if up_to_date || self.job.is_some() {
            return;
        }
        let (shared, job_key) = (Arc::clone(trace), key.clone());
        let spawned = crate::ui::widgets::job::Job::spawn("statistics", waker, move || compute(&shared, job_key));
        if let Ok(job) = spawned {
            self.job = Some((key, job));
        } else {
            self.current = Some(compute(trace, key));
        }
    }
}

/// Sorts rows by a column (its key) and direction, or by group.
fn sort_rows(groups: &mut [(String, Summary)], by: Option<(&'static str, bool)>) {
    let columns = stats::columns_for(groups);
    let column = by.and_then(|(key, _)| columns.iter().find(|c| c.key == key));
    stats::sort(groups, column, by.is_some_and(|s| s.1));
}

/// The names of model labels (the view's distinct models, computed once per trace), sorted.
fn models(trace: &Trace, ids: &[u32]) -> Vec<String> {
    let mut m: Vec<String> = ids
        .iter()
        .filter_map(|&id| trace.label(id).map(str::to_owned))
        .collect();
    m.sort();
    m
}

fn price_row(ui: &mut Ui, name: &str, p: &mut Price) -> bool {
    let mut changed = false;
    ui.label(name);
    for v in [&mut p.input, &mut p.cached_input, &mut p.output] {
        changed |= ui
            .add(egui::DragValue::new(v).range(0.0..=1000.0).speed(0.01).max_decimals(4))
            .changed();
    }
    // A cached token costs at most an uncached one (as price files are checked).
    p.cached_input = p.cached_input.min(p.input);
    changed
}

fn prices_ui(ui: &mut Ui, prices: &mut Prices, models: &[String]) {
    ui.horizontal(|ui| {
        let l = ui.label("Currency");
        ui.add(egui::TextEdit::singleline(&mut prices.currency).desired_width(50.0))
            .labelled_by(l.id);
        ui.weak("prices per 1 M tokens; a model without its own row costs the default");
    });
    egui::Grid::new("prices").striped(true).show(ui, |ui| {
        for h in ["model", "input", "cached input", "output", ""] {
            ui.strong(h);
        }
        ui.end_row();
        price_row(ui, "default", &mut prices.default);
        ui.label("");
        ui.end_row();
        for m in models {
            let own = prices.models.contains_key(m);
            let mut p = prices.models.get(m).copied().unwrap_or(prices.default);
            let changed = price_row(ui, m, &mut p);
            if changed {
                prices.models.insert(m.clone(), p);
            }
            if own && ui.small_button("use default").clicked() {
                prices.models.remove(m);
            } else if !own {
                ui.weak("default");
            }
            ui.end_row();
        }
    });
}

/// Latencies span decades (10 ms decodes, 10 s queues), so the plots' x axis is log10 of milliseconds.
fn log_ms(v: f64) -> f64 {
    v.max(1e-3).log10()
}

/// Grid marks of a log10 axis: every decade, thinner marks at 2x and 5x.
fn decade_marks(input: GridInput) -> Vec<GridMark> {
    let (lo, hi) = input.bounds;
    let mut marks = Vec::new();
    #[expect(clippy::cast_possible_truncation, reason = "a few decades")]
    for k in (lo.floor() as i64)..=(hi.ceil() as i64) {
        for (m, step_size) in [(1.0f64, 1.0), (2.0, 0.3), (5.0, 0.3)] {
            let value = k as f64 + m.log10();
            if (lo..=hi).contains(&value) {
                marks.push(GridMark { value, step_size });
            }
        }
    }
    marks
}

/// The label of a decade mark: "10 ms", "1 s".
fn decade_label(mark: GridMark, _range: &std::ops::RangeInclusive<f64>) -> String {
    if mark.step_size < 1.0 {
        return String::new();
    }
    let ms = 10f64.powf(mark.value);
    if ms >= 1000.0 {
        format!("{} s", ms / 1000.0)
    } else {
        format!("{ms} ms")
    }
}

fn plot(id: String) -> Plot<'static> {
    Plot::new(id)
        .height(150.0)
        .allow_drag(false)
        .allow_zoom(false)
        .allow_scroll(false)
        .x_grid_spacer(decade_marks)
        .x_axis_formatter(decade_label)
        .legend(Legend::default())
}

/// A histogram of sorted values in 40 log-spaced bins, with the objective marked.
fn histogram(ui: &mut Ui, id: &str, title: &str, sorted: &[f64], limit: Option<f64>) {
    ui.vertical(|ui| {
        ui.label(RichText::new(title).strong());
        const BINS: usize = 40;
        let (lo, hi) = match (sorted.first(), sorted.last()) {
            (Some(&a), Some(&b)) => (log_ms(a), log_ms(b).max(log_ms(a) + 0.1)),
            _ => (0.0, 1.0),
        };
        let width = (hi - lo) / BINS as f64;
        let mut counts = [0u32; BINS];
        for &v in sorted {
            #[expect(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "clamped to 0..BINS"
            )]
            let b = (((log_ms(v) - lo) / width).floor().max(0.0) as usize).min(BINS - 1);
            counts[b] += 1;
        }
        let bars = counts
            .iter()
            .enumerate()
            .map(|(i, &c)| Bar::new(lo + (i as f64 + 0.5) * width, f64::from(c)).width(width * 0.95))
            .collect();
        plot(format!("{id}-hist")).y_axis_label("requests").show(ui, |p| {
            let n = sorted.len();
            let name = format!("{n} request{}", if n == 1 { "" } else { "s" });
            p.bar_chart(BarChart::new(name, bars).color(theme::COUNTER_COLOR));
            if let Some(l) = limit {
                p.vline(VLine::new(format!("objective {l} ms"), log_ms(l)).color(theme::SLOW_TOKEN));
            }
        });
    });
}

/// A bar per draft position: the share of the verify steps proposing it that accepted it.
fn acceptance_bars(ui: &mut Ui, by_position: &[f64]) {
    ui.vertical(|ui| {
        ui.label(RichText::new("Draft acceptance by position").strong());
        #[expect(clippy::cast_precision_loss, reason = "a few draft positions")]
        let bars = by_position
            .iter()
            .enumerate()
            .map(|(i, &a)| {
                Bar::new((i + 1) as f64, a * 100.0)
                    .width(0.8)
                    .name(format!("draft {}", i + 1))
            })
            .collect();
        plot("spec-positions".to_owned())
            .y_axis_label("% accepted")
            .x_axis_label("draft position")
            .include_y(100.0)
            .show(ui, |p| {
                p.bar_chart(BarChart::new("accepted", bars).color(theme::SPEC_DRAFT));
            });
    });
}

/// Points of an empirical CDF on the log10 ms axis: at most 2,000, the last value always among them.
#[expect(clippy::cast_precision_loss, reason = "ranks far below 2^53")]
pub fn cdf_points(sorted: &[f64]) -> Vec<[f64; 2]> {
    let n = sorted.len();
    let step = n.div_ceil(2000).max(1);
    (0..n)
        .step_by(step)
        .chain((n > 0 && !(n - 1).is_multiple_of(step)).then(|| n - 1))
        .map(|i| [log_ms(sorted[i]), (i + 1) as f64 / n as f64])
        .collect()
}

/// The empirical CDF of sorted values, with the objective marked; while comparing, the other trace's (B) over it in
/// its own colour.
pub fn cdf(ui: &mut Ui, id: &str, title: &str, sorted: &[f64], other: Option<&[f64]>, limit: Option<f64>) {
    ui.vertical(|ui| {
        ui.label(RichText::new(title).strong());
        plot(format!("{id}-cdf"))
            .legend(Legend::default().position(egui_plot::Corner::RightBottom))
            .include_y(0.0)
            .include_y(1.0)
            .y_axis_label("share of requests")
            .show(ui, |p| {
                match other {
                    None => p.line(Line::new("CDF", cdf_points(sorted)).color(theme::COUNTER_COLOR)),
                    Some(b) => {
                        p.line(Line::new("A", cdf_points(sorted)).color(theme::TRACE_A));
                        p.line(Line::new("B", cdf_points(b)).color(theme::TRACE_B));
                    }
                }
                if let Some(l) = limit {
                    p.vline(VLine::new(format!("objective {l} ms"), log_ms(l)).color(theme::SLOW_TOKEN));
                }
            });
    });
}

/// The window's contents: the controls, the table of groups (a click on a header sorts, on a row chooses the group
/// whose distributions are drawn), then those distributions. "Export CSV…" asks the app to save the table.
pub fn stats_ui(
    ui: &mut Ui,
    view: &TraceView,
    state: &mut StatsState,
    other: Option<&Samples>,
    slo: Slo,
    out: &mut Vec<Command>,
) {
    let trace = &view.trace;
    // The computation wakes the UI when it is done: no polling.
    state.refresh(trace, slo, Some(ui.ctx()));
    state.ensure_sorted();
    controls_ui(ui, state, slo, out);
    if state.show_prices {
        ui.group(|ui| prices_ui(ui, &mut state.prices, &models(trace, &view.filter_labels[0])));
    }
    let Some(rows) = state.current.as_ref().map(|c| c.groups.as_slice()) else {
        ui.spinner();
        return;
    };
    let (clicked_header, clicked_row) = table_ui(ui, state, rows);
    match clicked_header {
        Some(None) => state.sort = None,
        Some(Some(i)) => {
            state.sort = match state.sort {
                Some((s, true)) if s == i => Some((i, false)),
                _ => Some((i, true)),
            };
        }
        None => {}
    }
    if let Some(k) = clicked_row
        && state.grouping != Grouping::All
    {
        state.group = if state.group.as_deref() == Some(k.as_str()) {
            None
        } else {
            Some(k)
        };
    }
    ui.separator();
    if let Some(c) = &state.current {
        distributions_ui(ui, c, other, slo);
    }
}

/// The bar above the table: the grouping, the prices, the CSV export, a spinner while computing, and the SLO.
fn controls_ui(ui: &mut Ui, state: &mut StatsState, slo: Slo, out: &mut Vec<Command>) {
    ui.horizontal(|ui| {
        let l = ui.label("Group by");
        egui::ComboBox::from_id_salt("stats-group")
            .selected_text(state.grouping.name())
            .show_ui(ui, |ui| {
                let options = std::iter::once(Grouping::All).chain(GroupBy::ALL.into_iter().map(Grouping::By));
                for g in options {
                    if ui.selectable_value(&mut state.grouping, g, g.name()).changed() {
                        state.group = None;
                        state.sort = None;
                    }
                }
            })
            .response
            .labelled_by(l.id);
        ui.toggle_value(&mut state.show_prices, "Prices…");
        if ui.button("Export CSV…").clicked()
            && let Some(c) = &state.current
        {
            let columns = stats::columns_for(&c.groups);
            if let Ok(text) = stats::to_csv(state.grouping.key_header(), &c.groups, &columns) {
                out.push(Command::SaveCsv {
                    csv: text,
                    what: "statistics",
                });
            }
        }
        if state.job.is_some() {
            ui.spinner();
        }
        let objectives = [
            slo.ttft_ms.map(|t| format!("TTFT ≤ {t} ms")),
            slo.tpot_ms.map(|t| format!("TPOT ≤ {t} ms")),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>();
        ui.weak(if objectives.is_empty() {
            "no SLO set (SLOs menu)".to_owned()
        } else {
            format!("SLO: {} (SLOs menu)", objectives.join(" and "))
        });
    });
}

/// What a click in the table chose: a header (`Some(None)`: the group's column, unsorting; `Some(Some(key))`: a
/// column to sort by), and a row's group.
type TableClicks = (Option<Option<&'static str>>, Option<String>);

/// The table of groups, one row each, the current group's row selected. Returns what was clicked.
fn table_ui(ui: &mut Ui, state: &StatsState, rows: &[(String, Summary)]) -> TableClicks {
    let columns = stats::columns_for(rows);
    let currency = state.prices.currency.clone();
    let mut clicked_header = None;
    let mut clicked_row = None;
    egui::ScrollArea::horizontal().id_salt("stats-h").show(ui, |ui| {
        // A click on a cell's text selects the row, not the text.
        ui.style_mut().interaction.selectable_labels = false;
        TableBuilder::new(ui)
            .striped(true)
            .resizable(true)
            .sense(egui::Sense::click())
            .max_scroll_height(220.0)
            .column(TableColumn::auto().at_least(90.0))
            .columns(TableColumn::auto().at_least(60.0), columns.len())
            .header(36.0, |mut header| {
                header.col(|ui| {
                    if ui.button(state.grouping.name()).clicked() {
                        clicked_header = Some(None);
                    }
                });
                for c in &columns {
                    header.col(|ui| {
                        let arrow = match state.sort {
                            Some((s, true)) if s == c.key => " ↓",
                            Some((s, false)) if s == c.key => " ↑",
                            _ => "",
                        };
                        let text = if c.unit == stats::Unit::Money {
                            format!("{} {currency}{arrow}", c.header)
                        } else {
                            format!("{}{arrow}", c.header)
                        };
                        if ui.button(text).on_hover_text("sort by this column").clicked() {
                            clicked_header = Some(Some(c.key));
                        }
                    });
                }
            })
            .body(|body| {
                body.rows(20.0, rows.len(), |mut row| {
                    let (key, s) = &rows[row.index()];
                    row.set_selected(state.group.as_deref() == Some(key.as_str()));
                    row.col(|ui| {
                        ui.label(key);
                    });
                    for c in &columns {
                        row.col(|ui| {
                            ui.with_layout(egui::Layout::right_to_left(egui::Align::Center), |ui| {
                                ui.label(c.format((c.get)(s)));
                            });
                        });
                    }
                    if row.response().clicked() {
                        clicked_row = Some(key.clone());
                    }
                });
            });
    });
    (clicked_header, clicked_row)
}

/// The distributions of the chosen group (A's, B's over them when comparing): TTFT and TPOT histograms and CDFs
/// against the SLO, and the drafts accepted by position when the trace speculated.
fn distributions_ui(ui: &mut Ui, c: &Computed, other: Option<&Samples>, slo: Slo) {
    let whose = match &c.key.group {
        Some(g) => format!("{} = {g}", c.key.grouping.name()),
        None => "every request".to_owned(),
    };
    ui.label(format!(
        "Distributions of {whose} (click a row to choose a group, again for all)"
    ));
    let speculative = !c.acceptance_by_position.is_empty();
    ui.columns(if speculative { 5 } else { 4 }, |cols| {
        if speculative {
            acceptance_bars(&mut cols[4], &c.acceptance_by_position);
        }
        histogram(&mut cols[0], "ttft", "TTFT histogram", &c.samples.ttft_ms, slo.ttft_ms);
        let b = |f: fn(&Samples) -> &[f64]| other.map(f);
        cdf(
            &mut cols[1],
            "ttft",
            "TTFT CDF",
            &c.samples.ttft_ms,
            b(|s| &s.ttft_ms),
            slo.ttft_ms,
        );
        histogram(&mut cols[2], "tpot", "TPOT histogram", &c.samples.tpot_ms, slo.tpot_ms);
        cdf(
            &mut cols[3],
            "tpot",
            "TPOT CDF",
            &c.samples.tpot_ms,
            b(|s| &s.tpot_ms),
            slo.tpot_ms,
        );
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cdf_keeps_its_last_point_once() {
        let v: Vec<f64> = (1..=5).map(f64::from).collect();
        let p = cdf_points(&v);
        assert_eq!(p.len(), 5);
        assert_eq!(p[4], [5f64.log10(), 1.0]);
        let many: Vec<f64> = (1..=4001).map(f64::from).collect();
        let p = cdf_points(&many);
        // Every third value (step ceil(4001 / 2000) = 3): ranks 1, 4, ..., 4000 (1,334 points), then 4001.
        assert_eq!(p.len(), 1_335);
        assert_eq!(p.last().map(|q| q[1]), Some(1.0));
    }
}
