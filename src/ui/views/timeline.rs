//! The Timeline panel: the metrics a serving team watches over time (throughput and goodput, TTFT and TPOT
//! percentiles, request rate, queue, KV use, preemptions) as plots under the waterfall, on its time axis: they show
//! the waterfall's time range, the time under the pointer is marked on both, and a drag across a plot selects a
//! range as a drag across the waterfall does.

use std::sync::Arc;

use eframe::egui::{self, Ui};
use egui_plot::{Legend, Line, Plot, PlotPoints, VLine};

use crate::analysis::summary::{GroupBy, Slo};
use crate::query::{Rows, TimelineOptions, auto_every, timeline};
use crate::trace::Trace;
use crate::ui::views::waterfall::WaterfallState;
use crate::ui::widgets::command::Command;
use crate::ui::widgets::job::Job;
use crate::ui::widgets::theme;
use crate::view::TraceView;

/// Buckets across the view when the width is automatic.
pub const VIEW_BUCKETS: u32 = 100;
/// Most buckets over the whole trace: zoomed far in, buckets stop shrinking here.
pub const MAX_BUCKETS: u32 = 5000;
/// Widths offered besides automatic, ns.
const WIDTHS: [(i64, &str); 6] = [
    (100_000_000, "100 ms"),
    (1_000_000_000, "1 s"),
    (5_000_000_000, "5 s"),
    (10_000_000_000, "10 s"),
    (60_000_000_000, "1 min"),
    (300_000_000_000, "5 min"),
];

/// One plot of the panel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Metric {
    /// Its title.
    pub title: &'static str,
    /// The columns drawn for the whole trace.
    pub columns: &'static [&'static str],
    /// The column drawn per label value.
    pub per_label: &'static str,
    /// Further columns drawn for the whole trace when the rows have them: those whose name starts so.
    pub more: Option<&'static str>,
}

/// The plots the panel can show, in order.
pub const METRICS: [Metric; 9] = [
    Metric {
        title: "output tok/s",
        columns: &["output_tok_s", "goodput_tok_s"],
        per_label: "output_tok_s",
        more: None,
    },
    Metric {
        title: "TTFT ms",
        columns: &["ttft_p50_ms", "ttft_p95_ms", "ttft_p99_ms"],
        per_label: "ttft_p99_ms",
        more: None,
    },
    Metric {
        title: "TPOT ms",
        columns: &["tpot_p50_ms", "tpot_p95_ms", "tpot_p99_ms"],
        per_label: "tpot_p99_ms",
        more: None,
    },
    Metric {
        title: "requests/s",
        columns: &["request_rate"],
        per_label: "request_rate",
        more: None,
    },
    Metric {
        title: "queue",
        columns: &["queue_len"],
        per_label: "queue_len",
        more: None,
    },
    Metric {
        title: "KV use",
        columns: &["kv_usage"],
        per_label: "kv_usage",
        more: None,
    },
    Metric {
        title: "preemptions",
        columns: &["preemptions"],
        per_label: "preemptions",
        more: None,
    },
    Metric {
        title: "draft acceptance",
        columns: &["accept_rate"],
        per_label: "accept_rate",
        more: Some(crate::query::timeline::ACCEPT_POS),
    },
    Metric {
        title: "tokens per verify step",
        columns: &["accept_length"],
        per_label: "accept_length",
        more: None,
    },
];

/// A series' name in a legend: "TTFT p99" for `ttft_p99_ms`.
pub fn series_name(column: &str) -> &str {
    match column {
        "output_tok_s" => "output",
        "goodput_tok_s" => "goodput",
        "ttft_p50_ms" => "TTFT p50",
        "ttft_p95_ms" => "TTFT p95",
        "ttft_p99_ms" => "TTFT p99",
        "tpot_p50_ms" => "TPOT p50",
        "tpot_p95_ms" => "TPOT p95",
        "tpot_p99_ms" => "TPOT p99",
        "request_rate" => "requests/s",
        "queue_len" => "waiting",
        "kv_usage" => "KV use",
        "accept_rate" => "accepted drafts",
        "accept_length" => "tokens per step",
        other => other,
    }
}

/// What a timeline was computed for.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Key {
    every_ns: i64,
    by: Option<GroupBy>,
    slo: Slo,
    /// Which version of a growing (live) trace.
    generation: u64,
}

/// The panel's state, per trace.
pub struct TimelineState {
    /// Bucket width, ns; `None` sizes buckets to the view.
    pub every_ns: Option<i64>,
    /// One line per value of this label.
    pub by: Option<GroupBy>,
    /// Which of [`METRICS`] are plotted.
    pub shown: [bool; METRICS.len()],
    current: Option<(Key, Result<Rows, String>)>,
    job: Option<(Key, Job<Result<Rows, String>>)>,
    /// Where a drag across a plot started, ns.
    drag_from: Option<i64>,
    /// Bumped when the trace grew (live): the series are computed again, the last ones shown meanwhile.
    generation: u64,
}

impl Default for TimelineState {
    fn default() -> Self {
        TimelineState {
            every_ns: None,
            by: None,
            shown: [true, true, true, false, true, true, false, false, false],
            current: None,
            job: None,
            drag_from: None,
            generation: 0,
        }
    }
}

impl TimelineState {
    /// The state for the next trace: the same choices, nothing computed.
    pub fn carried(&self) -> Self {
        TimelineState {
            every_ns: self.every_ns,
            by: self.by,
            shown: self.shown,
            ..TimelineState::default()
        }
    }

    /// The bucket width for a view of `view_ns` over a trace of `trace_ns`.
    pub fn width_for(&self, view_ns: i64, trace_ns: i64) -> i64 {
        self.every_ns
            .unwrap_or_else(|| auto_every(view_ns, VIEW_BUCKETS).max(auto_every(trace_ns, MAX_BUCKETS)))
    }

    /// Starts computing for `key` unless it is computed or computing.
    /// The trace grew (a live recording): the series are computed again, the last ones shown until then.
    pub fn retraced(&mut self) {
        self.generation += 1;
    }

    fn refresh(&mut self, trace: &Arc<Trace>, key: Key, waker: Option<&egui::Context>) {
        let key = Key {
            generation: self.generation,
            ..key
        };
        if self.current.as_ref().is_some_and(|(k, _)| *k == key) || self.job.as_ref().is_some_and(|(k, _)| *k == key) {
            return;
        }
        // A computation for an older version of a growing trace finishes first: restarting it at every version
        // would never finish one.
        if self.job.as_ref().is_some_and(|(k, _)| {
            Key {
                generation: key.generation,
                ..*k
            } == key
        }) {
            return;
        }
        let trace = Arc::clone(trace);
        let options = TimelineOptions {
            every_ns: key.every_ns,
            by: key.by,
            slo: key.slo,
        };
        let work = move || {
            timeline(&trace, &options)
                .map(|df| Rows::of(&df))
                .map_err(|e| e.to_string())
        };
        match Job::spawn("timeline", waker, work) {
            Ok(job) => self.job = Some((key, job)),
            Err(e) => self.current = Some((key, Err(e))),
        }
    }

    fn poll(&mut self) {
        if let Some((key, job)) = &self.job {
            match job.try_recv() {
                Ok(r) => {
                    self.current = Some((*key, r));
                    self.job = None;
                }
                Err(std::sync::mpsc::TryRecvError::Disconnected) => self.job = None,
                Err(std::sync::mpsc::TryRecvError::Empty) => {}
            }
        }
    }

    /// Waits for the computation in progress (tests use this).
    pub fn wait(&mut self) {
        if let Some((key, job)) = self.job.take()
            && let Ok(r) = job.recv()
        {
            self.current = Some((key, r));
        }
    }

    /// The rows shown, when computed.
    pub fn rows(&self) -> Option<&Rows> {
        self.current.as_ref().and_then(|(_, r)| r.as_ref().ok())
    }

    /// The bucket width of the rows shown, ns.
    pub fn shown_width(&self) -> Option<i64> {
        self.current.as_ref().map(|(k, _)| k.every_ns)
    }
}

/// One line of a plot: its name and its runs of consecutive buckets with a value. A bucket without one (no first
/// token, no step) breaks the line rather than being bridged.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The legend's name.
    pub name: String,
    /// Runs of points, x in seconds since the trace's start (bucket centres).
    pub runs: Vec<Vec<[f64; 2]>>,
}

impl Series {
    fn new(name: String) -> Self {
        Series {
            name,
            runs: vec![Vec::new()],
        }
    }

    fn push(&mut self, p: Option<[f64; 2]>) {
        match (p, self.runs.last_mut()) {
            (Some(p), Some(run)) => run.push(p),
            (None, Some(run)) if run.is_empty() => {}
            _ => self.runs.push(p.into_iter().collect()),
        }
    }

    fn finish(mut self) -> Self {
        self.runs.retain(|r| !r.is_empty());
        self
    }
}

/// The lines of one plot: a line per column of `metric` for the whole trace, or its per-label column per value
/// of `by`.
pub fn lines(rows: &Rows, metric: &Metric, by: Option<GroupBy>, every_ns: i64) -> Vec<Series> {
    let Some(t) = rows.column("t_s") else {
        return Vec::new();
    };
    #[expect(clippy::cast_precision_loss, reason = "bucket widths far below 2^53 ns")]
    let half = every_ns as f64 / 2e9;
    let point = |row: &Vec<crate::query::Cell>, c: usize| Some([row[t].as_f64()? + half, row[c].as_f64()?]);
    let out = if let Some(label) = by.and_then(|b| rows.column(b.name())) {
        let Some(c) = rows.column(metric.per_label) else {
            return Vec::new();
        };
        // Rows come sorted by label, then time.
        let mut out: Vec<Series> = Vec::new();
        for row in &rows.rows {
            let name = row[label].display();
            if out.last().is_none_or(|s| s.name != name) {
                out.push(Series::new(name));
            }
            if let Some(s) = out.last_mut() {
                s.push(point(row, c));
            }
        }
        out
    } else {
        let more = metric.more.map_or_else(Vec::new, |prefix| {
            rows.columns
                .iter()
                .filter(|c| c.starts_with(prefix))
                .map(String::as_str)
                .collect()
        });
        metric
            .columns
            .iter()
            .copied()
            .chain(more)
            .filter_map(|name| {
                let c = rows.column(name)?;
                // A draft position's acceptance: "draft 2".
                let legend = name
                    .strip_prefix(crate::query::timeline::ACCEPT_POS)
                    .map_or_else(|| series_name(name).to_owned(), |k| format!("draft {k}"));
                let mut s = Series::new(legend);
                for row in &rows.rows {
                    s.push(point(row, c));
                }
                Some(s)
            })
            .collect()
    };
    out.into_iter().map(Series::finish).collect()
}

/// The panel's contents, under the waterfall (showing `view`) whose axis it follows. While comparing, `other` is
/// B's view and state: its series are computed with the same buckets and drawn dashed over A's, on the axis measured
/// from each trace's start.
pub fn timeline_ui(
    ui: &mut Ui,
    view: &TraceView,
    waterfall: &mut WaterfallState,
    state: &mut TimelineState,
    other: Option<(&TraceView, &mut TimelineState)>,
    slo: Slo,
    out: &mut Vec<Command>,
) {
    state.poll();
    let t0 = view.t0_ns;
    let (view_from, view_to) = waterfall.viewport.map_or((t0, t0 + 1), |vp| (vp.start_ns, vp.end_ns()));
    let key = Key {
        every_ns: state.width_for(view_to - view_from, view.t1_ns - view.t0_ns),
        by: state.by,
        slo,
        generation: 0,
    };
    state.refresh(&view.trace, key, Some(ui.ctx()));
    let other = other.map(|(v, s)| {
        s.poll();
        s.refresh(&v.trace, key, Some(ui.ctx()));
        &*s
    });

    controls_ui(ui, state, key.every_ns);
    let rows = match &state.current {
        Some((_, Ok(rows))) => rows,
        Some((_, Err(e))) => {
            ui.colored_label(ui.visuals().error_fg_color, e);
            return;
        }
        None => {
            ui.spinner();
            return;
        }
    };
    let every_ns = state.current.as_ref().map_or(key.every_ns, |(k, _)| k.every_ns);
    let shown: Vec<Metric> = METRICS
        .iter()
        .zip(state.shown)
        .filter(|(_, s)| *s)
        .map(|(m, _)| *m)
        .collect();
    if shown.is_empty() {
        ui.weak("Tick a metric to plot it.");
        return;
    }
    // Each plot's frame spans the waterfall's time axis exactly, so that one time is at one x on both; the gutter on
    // its left names the plot and its range, as the waterfall's counter tracks do.
    let left = ui.max_rect().left();
    let (gutter, plot_width) = waterfall.time_rect.map_or((120.0, ui.available_width() - 120.0), |r| {
        ((r.left() - left).max(40.0), r.width().max(40.0))
    });
    #[expect(clippy::cast_precision_loss, reason = "a handful of plots")]
    let height = ((ui.available_height() - 24.0) / shown.len() as f32 - 2.0).max(40.0);
    let axis = Axis {
        t0,
        from_ns: view_from,
        to_ns: view_to,
        gutter,
        plot_width,
        height,
    };
    let mut hover = None;
    for (i, metric) in shown.iter().enumerate() {
        let series = lines(rows, metric, state.by, every_ns);
        let b_series = other
            .and_then(|s| Some((s.rows()?, s.shown_width()?)))
            .map_or_else(Vec::new, |(rows, every)| lines(rows, metric, state.by, every));
        let last = i + 1 == shown.len();
        let response = plot_ui(ui, &axis, metric, (series, b_series), waterfall, last);
        let pointer_ns = response.inner.map(|x| axis.ns_of(x));
        let r = &response.response;
        if let Some(t) = pointer_ns.filter(|_| r.hovered() || r.dragged()) {
            hover = Some(t);
        }
        if r.drag_started() {
            state.drag_from = pointer_ns;
        }
        if r.drag_stopped()
            && let (Some(a), Some(b)) = (state.drag_from.take(), pointer_ns)
        {
            let (a, b) = (a.min(b), a.max(b));
            if b > a {
                out.push(Command::SelectRange(a, b));
            }
        }
    }
    waterfall.linked_hover_ns = hover;
}

/// The bar above the plots: the bucket's width, the lines per group, which metrics are plotted, and a spinner while
/// the series are computed. `auto_ns`: the width the automatic choice takes now.
fn controls_ui(ui: &mut Ui, state: &mut TimelineState, auto_ns: i64) {
    ui.horizontal(|ui| {
        ui.strong("Timeline");
        let label = ui.label("bucket");
        let current = match state.every_ns {
            None => format!("auto ({})", width_name(auto_ns)),
            Some(w) => width_name(w),
        };
        egui::ComboBox::from_id_salt("timeline-every")
            .selected_text(current)
            .show_ui(ui, |ui| {
                ui.selectable_value(&mut state.every_ns, None, "auto");
                for (w, name) in WIDTHS {
                    ui.selectable_value(&mut state.every_ns, Some(w), name);
                }
            })
            .response
            .labelled_by(label.id);
        let label = ui.label("lines per");
        egui::ComboBox::from_id_salt("timeline-by")
            .selected_text(state.by.map_or("nothing", GroupBy::name))
            .show_ui(ui, |ui| {
                ui.selectable_value(&mut state.by, None, "nothing");
                for by in GroupBy::ALL {
                    ui.selectable_value(&mut state.by, Some(by), by.name());
                }
            })
            .response
            .labelled_by(label.id);
        ui.separator();
        for (shown, m) in state.shown.iter_mut().zip(METRICS) {
            ui.checkbox(shown, m.title);
        }
        if state.job.is_some() {
            ui.spinner();
        }
    });
}

/// Where the plots go: the waterfall's time axis (from the trace's start `t0`, the view `from_ns..to_ns`), the
/// gutter left of each plot and each plot's size.
struct Axis {
    t0: i64,
    from_ns: i64,
    to_ns: i64,
    gutter: f32,
    plot_width: f32,
    height: f32,
}

impl Axis {
    /// Seconds since the trace's start, the plots' x.
    #[expect(clippy::cast_precision_loss, reason = "times within a trace, far below 2^53 ns")]
    fn secs(&self, ns: i64) -> f64 {
        (ns - self.t0) as f64 / 1e9
    }

    /// The time at plot x `s`.
    #[expect(clippy::cast_possible_truncation, reason = "seconds within a trace")]
    fn ns_of(&self, s: f64) -> i64 {
        self.t0 + (s * 1e9) as i64
    }
}

/// One metric's plot with its gutter (the name and the range shown): A's lines, B's dashed over them, the range
/// selected and the waterfall's hovered time. Returns the plot's response with the pointer's x, seconds.
fn plot_ui(
    ui: &mut Ui,
    axis: &Axis,
    metric: &Metric,
    (series, b_series): (Vec<Series>, Vec<Series>),
    waterfall: &WaterfallState,
    last: bool,
) -> egui_plot::PlotResponse<Option<f64>> {
    let x_range = axis.secs(axis.from_ns)..=axis.secs(axis.to_ns);
    let top = series
        .iter()
        .chain(&b_series)
        .flat_map(|s| s.runs.iter().flatten())
        .filter(|p| x_range.contains(&p[0]))
        .map(|p| p[1])
        .fold(0.0_f64, f64::max);
    let height = axis.height;
    ui.horizontal(|ui| {
        ui.spacing_mut().item_spacing.x = 0.0;
        ui.allocate_ui(egui::vec2(axis.gutter, height), |ui| {
            ui.set_width(axis.gutter);
            ui.vertical(|ui| {
                ui.label(metric.title);
                ui.weak(format!("0 – {}", short(top)));
            });
        });
        let plot = Plot::new(("timeline", metric.title))
            .height(if last { height + 18.0 } else { height })
            .width(axis.plot_width)
            .show_axes([last, false])
            .x_axis_formatter(|mark, _| format!("{} s", mark.value))
            .show_x(true)
            .show_y(true)
            .allow_drag(false)
            .allow_zoom(false)
            .allow_scroll(false)
            .allow_boxed_zoom(false)
            .allow_double_click_reset(false)
            .set_margin_fraction(egui::vec2(0.0, 0.1))
            .legend(
                Legend::default()
                    .position(egui_plot::Corner::LeftTop)
                    .text_style(egui::TextStyle::Small)
                    .background_alpha(0.6),
            )
            .include_y(0.0);
        plot.show(ui, |p| {
            p.set_plot_bounds_x(x_range.clone());
            let a_names: Vec<String> = series.iter().map(|l| l.name.clone()).collect();
            for (k, line) in series.into_iter().enumerate() {
                let color = LINE_COLORS[k % LINE_COLORS.len()];
                for run in line.runs {
                    // One name for every run: the legend shows it once and hides them together.
                    p.line(Line::new(line.name.clone(), PlotPoints::from(run)).color(color));
                }
            }
            // B's lines in the colour of A's line of the same name, dashed.
            for (k, line) in b_series.into_iter().enumerate() {
                let k = a_names.iter().position(|n| *n == line.name).unwrap_or(k);
                let color = LINE_COLORS[k % LINE_COLORS.len()];
                let name = format!("{} (B)", line.name);
                for run in line.runs {
                    p.line(
                        Line::new(name.clone(), PlotPoints::from(run))
                            .color(color)
                            .style(egui_plot::LineStyle::dashed_loose()),
                    );
                }
            }
            if let Some((a, b)) = waterfall.range {
                for x in [axis.secs(a), axis.secs(b)] {
                    p.vline(VLine::new("", x).color(theme::SELECTION_EDGE));
                }
            }
            if let Some(t) = waterfall.hover_ns {
                p.vline(VLine::new("", axis.secs(t)).color(theme::SELECTION_EDGE).width(0.5));
            }
            p.pointer_coordinate().map(|c| c.x)
        })
    })
    .inner
}

/// The colours of a plot's lines.
const LINE_COLORS: [egui::Color32; 8] = theme::LINE_COLORS;

/// A plot's top value, short: 12, 3.4, 0.05, 12.3k.
fn short(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{:.1}k", v / 1000.0)
    } else if v >= 10.0 {
        format!("{v:.0}")
    } else if v >= 0.1 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

/// A bucket width for a person: "100 ms", "10 s", "5 min".
fn width_name(ns: i64) -> String {
    WIDTHS
        .iter()
        .find(|(w, _)| *w == ns)
        .map_or_else(|| crate::view::ruler::format_duration(ns), |(_, n)| (*n).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::query::Cell;

    fn rows() -> Rows {
        let row = |t: f64, app: &str, out: f64, good: f64| {
            vec![
                Cell::Float(t),
                Cell::Text(app.into()),
                Cell::Float(out),
                Cell::Float(good),
            ]
        };
        Rows {
            columns: vec![
                "t_s".into(),
                "app_id".into(),
                "output_tok_s".into(),
                "goodput_tok_s".into(),
            ],
            rows: vec![
                row(0.0, "chat", 10.0, 8.0),
                row(1.0, "chat", 12.0, 12.0),
                row(0.0, "code", 3.0, 0.0),
            ],
        }
    }

    #[test]
    fn lines_are_at_bucket_centres_per_column_or_per_label() {
        let m = &METRICS[0];
        // Without a label: output and goodput, each over every row, at t + half a 1 s bucket.
        let all = lines(&rows(), m, None, 1_000_000_000);
        assert_eq!((all[0].name.as_str(), all[1].name.as_str()), ("output", "goodput"));
        assert_eq!(all[0].runs, vec![vec![[0.5, 10.0], [1.5, 12.0], [0.5, 3.0]]]);
        assert_eq!(all[1].runs[0][0], [0.5, 8.0]);
        // Per app: the per-label column, one line per app.
        let per = lines(&rows(), m, Some(GroupBy::AppId), 1_000_000_000);
        let got: Vec<(&str, &Vec<Vec<[f64; 2]>>)> = per.iter().map(|s| (s.name.as_str(), &s.runs)).collect();
        assert_eq!(
            got,
            vec![
                ("chat", &vec![vec![[0.5, 10.0], [1.5, 12.0]]]),
                ("code", &vec![vec![[0.5, 3.0]]]),
            ]
        );
    }

    #[test]
    fn a_bucket_without_a_value_breaks_the_line() {
        let row = |t: f64, v: Option<f64>| vec![Cell::Float(t), v.map_or(Cell::Null, Cell::Float)];
        let rows = Rows {
            columns: vec!["t_s".into(), "ttft_p99_ms".into()],
            rows: vec![
                row(0.0, None),
                row(1.0, Some(5.0)),
                row(2.0, Some(6.0)),
                row(3.0, None),
                row(4.0, None),
                row(5.0, Some(7.0)),
            ],
        };
        let s = lines(&rows, &METRICS[1], None, 1_000_000_000);
        let p99 = s.iter().find(|s| s.name == "TTFT p99").unwrap();
        assert_eq!(p99.runs, vec![vec![[1.5, 5.0], [2.5, 6.0]], vec![[5.5, 7.0]]]);
        // Columns the rows lack draw nothing.
        assert!(s.iter().filter(|s| s.name != "TTFT p99").all(|s| s.runs.is_empty()));
    }

    #[test]
    fn automatic_buckets_follow_the_view_but_not_below_the_trace_cap() {
        let s = TimelineState::default();
        // A 100 s view of a 100 s trace: 1 s buckets.
        assert_eq!(s.width_for(100_000_000_000, 100_000_000_000), 1_000_000_000);
        // Zoomed to 1 s of a 10 000 s trace: 10 ms wanted, but 10 000 s in at most 5 000 buckets needs 2 s.
        assert_eq!(s.width_for(1_000_000_000, 10_000_000_000_000), 2_000_000_000);
        let fixed = TimelineState {
            every_ns: Some(60_000_000_000),
            ..TimelineState::default()
        };
        assert_eq!(fixed.width_for(1, 1), 60_000_000_000);
    }
}
