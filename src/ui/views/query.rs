//! The Query window: SQL over the open trace's tables (`docs/QUERY.md`) with a history, a results table, a plot of a
//! chosen column and CSV export. A click on a row with a `request_id` selects that request in the waterfall.

use std::sync::Arc;
use std::time::{Duration, Instant};

use eframe::egui::{self, Key, Modifiers, Ui};
use egui_extras::{Column as TableColumn, TableBuilder};
use egui_plot::{Legend, Line, Plot, PlotPoints};

use crate::query::{Cell, Rows};
use crate::trace::Trace;
use crate::ui::widgets::command::Command;
use crate::ui::widgets::job::Job;
use crate::ui::widgets::theme;

/// Rows the window keeps of a result (CSV export included); the CLI gives them all.
pub const SHOWN_ROWS: usize = 100_000;
/// Queries the history keeps, most recent first.
pub const HISTORY: usize = 50;
/// The query the editor starts with.
pub const FIRST_QUERY: &str = "SELECT model, count(*) AS requests,\n       QUANTILE_DISC(ttft_ms, 0.99) AS ttft_p99_ms,\n       QUANTILE_DISC(tpot_ms, 0.99) AS tpot_p99_ms\nFROM requests GROUP BY model ORDER BY requests DESC";

/// A query's result as the window shows it.
pub struct Outcome {
    /// The query that gave it.
    pub sql: String,
    /// Its first [`SHOWN_ROWS`] rows.
    pub rows: Rows,
    /// How many rows it had.
    pub total: usize,
    /// How long it took.
    pub elapsed: Duration,
    /// The columns with a number in some row: those the plot offers.
    pub numeric: Vec<String>,
}

/// A plot's lines: an optional label (the first text column's value) and its points.
type Lines = Vec<(Option<String>, Vec<[f64; 2]>)>;

/// The window's state, per trace.
pub struct QueryState {
    /// The editor's text.
    pub sql: String,
    /// The last result, or why there is none.
    pub result: Option<Result<Outcome, String>>,
    job: Option<Job<Result<Outcome, String>>>,
    /// The column plotted, by name.
    pub plot: Option<String>,
    /// The row clicked last.
    pub selected_row: Option<usize>,
    /// The lines of the plotted column, made once per result and column (not every frame).
    plotted: Option<(String, Lines)>,
}

impl Default for QueryState {
    fn default() -> Self {
        QueryState {
            sql: FIRST_QUERY.to_owned(),
            result: None,
            job: None,
            plot: None,
            selected_row: None,
            plotted: None,
        }
    }
}

impl QueryState {
    /// The state for the next trace: the same text in the editor, no result.
    pub fn carried(&self) -> Self {
        QueryState {
            sql: self.sql.clone(),
            ..QueryState::default()
        }
    }

    /// Runs the editor's query on a thread of its own; its result replaces the last when it comes.
    pub fn run(&mut self, trace: &Arc<Trace>, waker: Option<&egui::Context>) {
        let (trace, sql) = (Arc::clone(trace), self.sql.clone());
        let work = move || {
            let start = Instant::now();
            let df = crate::query::run(&trace, &sql).map_err(|e| e.to_string())?;
            let rows = Rows::head(&df, SHOWN_ROWS);
            let numeric = (0..rows.columns.len())
                .filter(|&c| rows.rows.iter().any(|r| r[c].as_f64().is_some()))
                .map(|c| rows.columns[c].clone())
                .collect();
            Ok(Outcome {
                rows,
                numeric,
                total: df.height(),
                elapsed: start.elapsed(),
                sql,
            })
        };
        match Job::spawn("query", waker, work) {
            Ok(job) => self.job = Some(job),
            Err(e) => self.result = Some(Err(e)),
        }
    }

    /// True while a query runs.
    pub fn running(&self) -> bool {
        self.job.is_some()
    }

    /// Takes the result of the running query when it is there.
    pub fn poll(&mut self) {
        if let Some(job) = &self.job {
            match job.try_recv() {
                Ok(r) => {
                    self.set(r);
                    self.job = None;
                }
                Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                    self.result = Some(Err("the query stopped without a result".to_owned()));
                    self.job = None;
                }
                Err(std::sync::mpsc::TryRecvError::Empty) => {}
            }
        }
    }

    /// Waits for the running query (tests use this).
    pub fn wait(&mut self) {
        if let Some(job) = self.job.take() {
            match job.recv() {
                Ok(r) => self.set(r),
                Err(_) => self.result = Some(Err("the query stopped without a result".to_owned())),
            }
        }
    }

    fn set(&mut self, r: Result<Outcome, String>) {
        if let Ok(o) = &r
            && self.plot.as_ref().is_some_and(|p| o.rows.column(p).is_none())
        {
            self.plot = None;
        }
        self.selected_row = None;
        self.plotted = None;
        self.result = Some(r);
    }
}

/// Columns that read as time, for the plot's x axis.
const TIME_COLUMNS: [&str; 5] = ["t_s", "arrival_s", "start_s", "emitted_s", "bucket_s"];

/// The window's contents. `history` is the app's, most recent first; a query run is put at its head.
pub fn query_ui(
    ui: &mut Ui,
    trace: &Arc<Trace>,
    state: &mut QueryState,
    history: &mut Vec<String>,
    out: &mut Vec<Command>,
) {
    state.poll();
    // Ctrl+Enter runs, also while the editor has the focus (taken before the editor sees the key).
    let mut run = ui.input_mut(|i| i.consume_key(Modifiers::COMMAND, Key::Enter));
    ui.horizontal(|ui| {
        run |= ui
            .add_enabled(!state.running(), egui::Button::new("Run"))
            .on_hover_text("Ctrl+Enter")
            .clicked();
        let label = ui.label("History");
        let count = format!("{} quer{}", history.len(), if history.len() == 1 { "y" } else { "ies" });
        egui::ComboBox::from_id_salt("query-history")
            .selected_text(count)
            .width(90.0)
            .show_ui(ui, |ui| {
                if history.is_empty() {
                    ui.weak("No query run yet");
                }
                for q in history.iter() {
                    let one_line: String = q.split_whitespace().collect::<Vec<_>>().join(" ");
                    if ui.selectable_label(false, truncate(&one_line, 90)).clicked() {
                        state.sql.clone_from(q);
                    }
                }
            })
            .response
            .labelled_by(label.id);
        ui.weak("Tables: requests, tokens, steps, stages, transfers, candidates, samples (docs/QUERY.md)");
    });
    let label = ui.label("SQL");
    egui::ScrollArea::vertical()
        .id_salt("query-editor")
        .max_height(130.0)
        .show(ui, |ui| {
            ui.add(
                egui::TextEdit::multiline(&mut state.sql)
                    .code_editor()
                    .desired_rows(5)
                    .desired_width(f32::INFINITY),
            )
            .labelled_by(label.id);
        });
    if run && !state.running() && !state.sql.trim().is_empty() {
        remember(history, &state.sql);
        state.run(trace, Some(ui.ctx()));
    }
    ui.separator();
    if state.running() {
        ui.horizontal(|ui| {
            ui.spinner();
            ui.label("running…");
        });
    }
    match &state.result {
        None => {
            ui.weak("Run a query to see its result here.");
        }
        Some(Err(e)) => {
            ui.colored_label(ui.visuals().error_fg_color, e);
        }
        Some(Ok(o)) => {
            let shown = Shown {
                plot: &mut state.plot,
                plotted: &mut state.plotted,
                selected: &mut state.selected_row,
            };
            result_ui(ui, trace, o, shown, out);
        }
    }
}

/// What the window shows of a result: the plotted column, its lines, the row clicked.
struct Shown<'a> {
    plot: &'a mut Option<String>,
    plotted: &'a mut Option<(String, Lines)>,
    selected: &'a mut Option<usize>,
}

fn result_ui(ui: &mut Ui, trace: &Trace, o: &Outcome, shown: Shown<'_>, out: &mut Vec<Command>) {
    let Shown {
        plot,
        plotted,
        selected,
    } = shown;
    let rows = &o.rows;
    ui.horizontal(|ui| {
        let shown = if o.total > rows.rows.len() {
            format!("{} of {} rows", rows.rows.len(), o.total)
        } else {
            format!("{} row{}", o.total, if o.total == 1 { "" } else { "s" })
        };
        ui.label(format!("{shown} in {:.0} ms", o.elapsed.as_secs_f64() * 1000.0));
        if ui.button("Save CSV…").clicked() {
            out.push(Command::SaveCsv {
                csv: rows.to_csv(),
                what: "query",
            });
        }
        let label = ui.label("Plot");
        egui::ComboBox::from_id_salt("query-plot")
            .selected_text(plot.as_deref().unwrap_or("none"))
            .show_ui(ui, |ui| {
                if ui.selectable_label(plot.is_none(), "none").clicked() {
                    *plot = None;
                }
                for name in &o.numeric {
                    if ui
                        .selectable_label(plot.as_ref() == Some(name), name.as_str())
                        .clicked()
                    {
                        *plot = Some(name.clone());
                    }
                }
            })
            .response
            .labelled_by(label.id);
        if rows.column("request_id").is_some() {
            ui.weak("click a row to select its request");
        }
    });
    let plot_height = if plot.is_some() { 180.0 } else { 0.0 };
    let table_height = (ui.available_height() - plot_height - 30.0).max(120.0);
    let id_col = rows.column("request_id");
    let mut clicked = None;
    egui::ScrollArea::horizontal().id_salt("query-h").show(ui, |ui| {
        ui.style_mut().interaction.selectable_labels = false;
        TableBuilder::new(ui)
            .id_salt(("query-table", &o.sql))
            .striped(true)
            .resizable(true)
            .sense(egui::Sense::click())
            .max_scroll_height(table_height)
            .columns(TableColumn::auto().at_least(50.0).clip(true), rows.columns.len())
            .header(22.0, |mut header| {
                for name in &rows.columns {
                    header.col(|ui| {
                        ui.strong(name);
                    });
                }
            })
            .body(|body| {
                body.rows(20.0, rows.rows.len(), |mut row| {
                    let i = row.index();
                    row.set_selected(*selected == Some(i));
                    for cell in &rows.rows[i] {
                        row.col(|ui| {
                            let text = cell.display();
                            if matches!(cell, Cell::Text(_) | Cell::Bool(_)) {
                                ui.label(text);
                            } else {
                                ui.with_layout(egui::Layout::right_to_left(egui::Align::Center), |ui| {
                                    ui.label(text);
                                });
                            }
                        });
                    }
                    if row.response().clicked() {
                        clicked = Some(i);
                    }
                });
            });
    });
    if let Some(i) = clicked {
        *selected = Some(i);
        if let Some(Cell::Text(id)) = id_col.map(|c| &rows.rows[i][c])
            && let Some(request) = trace.request_row(id)
        {
            out.push(Command::Select {
                request: Some(request),
                scroll: true,
            });
        }
    }
    if let Some(name) = plot.as_deref()
        && let Some(y) = rows.column(name)
    {
        let x = TIME_COLUMNS.iter().filter(|&&t| t != name).find_map(|t| rows.column(t));
        if plotted.as_ref().is_none_or(|(column, _)| column != name) {
            *plotted = Some((name.to_owned(), series_of(rows, x, y)));
        }
        let series = plotted.as_ref().map(|(_, s)| s.as_slice()).unwrap_or_default();
        let x_name = x.map_or("row", |x| rows.columns[x].as_str());
        Plot::new(("query-plot", &o.sql))
            .height(plot_height)
            .x_axis_label(x_name)
            .y_axis_label(name)
            .legend(Legend::default())
            .show(ui, |p| {
                for (k, (label, points)) in series.iter().enumerate() {
                    let label = label.clone().unwrap_or_else(|| name.to_owned());
                    let line = Line::new(label, PlotPoints::from(points.clone()));
                    p.line(if k == 0 { line.color(theme::COUNTER_COLOR) } else { line });
                }
            });
    }
}

/// Most lines a plot draws, one per value of the result's first text column (`source`, `model`); with more values
/// than this, one line of every row.
pub const MAX_SERIES: usize = 12;

/// The plot's lines: `(x, y)` of every row with both, split by the first text column when it has few values (a
/// query by time and source draws a line per source), else one line. Rows without an `x` column are numbered.
fn series_of(rows: &Rows, x: Option<usize>, y: usize) -> Lines {
    let key = rows
        .columns
        .iter()
        .enumerate()
        .find(|(c, _)| rows.rows.iter().any(|r| matches!(r[*c], Cell::Text(_))))
        .map(|(c, _)| c);
    let mut out: Lines = Vec::new();
    for (i, r) in rows.rows.iter().enumerate() {
        #[expect(clippy::cast_precision_loss, reason = "row numbers of a shown result")]
        let Some(xv) = x.map_or(Some(i as f64), |x| r[x].as_f64()) else {
            continue;
        };
        let Some(yv) = r[y].as_f64() else { continue };
        let label = key.map(|k| r[k].display());
        match out.iter_mut().find(|(l, _)| *l == label) {
            Some((_, points)) => points.push([xv, yv]),
            None => out.push((label, vec![[xv, yv]])),
        }
    }
    if out.len() > MAX_SERIES {
        let mut all: Vec<[f64; 2]> = out.into_iter().flat_map(|(_, p)| p).collect();
        all.sort_by(|a, b| a[0].total_cmp(&b[0]));
        return vec![(None, all)];
    }
    out
}

/// Puts `sql` at the head of the history (once).
fn remember(history: &mut Vec<String>, sql: &str) {
    let sql = sql.trim().to_owned();
    history.retain(|q| q != &sql);
    history.insert(0, sql);
    history.truncate(HISTORY);
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_owned()
    } else {
        let mut t: String = s.chars().take(n).collect();
        t.push('…');
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plot_draws_a_line_per_source_or_one_for_many_values() {
        let row = |t: f64, s: &str, v: f64| vec![Cell::Float(t), Cell::Text(s.into()), Cell::Float(v)];
        let rows = Rows {
            columns: vec!["t_s".into(), "source".into(), "kv".into()],
            rows: vec![
                row(0.0, "a", 1.0),
                row(0.0, "b", 2.0),
                row(1.0, "a", 3.0),
                row(1.0, "b", 4.0),
            ],
        };
        assert_eq!(
            series_of(&rows, Some(0), 2),
            vec![
                (Some("a".to_owned()), vec![[0.0, 1.0], [1.0, 3.0]]),
                (Some("b".to_owned()), vec![[0.0, 2.0], [1.0, 4.0]]),
            ]
        );
        // 13 request ids: one line through every row, in x order.
        let many = Rows {
            columns: rows.columns.clone(),
            rows: (0..13)
                .rev()
                .map(|i| row(f64::from(i), &format!("r{i}"), 1.0))
                .collect(),
        };
        let s = series_of(&many, Some(0), 2);
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].1.first(), Some(&[0.0, 1.0]));
        assert_eq!(s[0].1.len(), 13);
    }

    #[test]
    fn the_history_keeps_each_query_once_most_recent_first() {
        let mut h = vec!["a".to_owned(), "b".to_owned()];
        remember(&mut h, "  b \n");
        assert_eq!(h, ["b", "a"]);
        for i in 0..60 {
            remember(&mut h, &format!("q{i}"));
        }
        assert_eq!(h.len(), HISTORY);
        assert_eq!(h[0], "q59");
    }
}
