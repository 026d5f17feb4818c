//! The high-power view of one request: its header, its output as a strip of token chips, the latency of every
//! token split into schedule wait / compute / output beside the load of the step that produced it, and the
//! candidate inspector of the selected token. Left/Right move between tokens.

use std::sync::Arc;

use eframe::egui::{self, Color32, RichText, Sense, Ui};
use egui_plot::{Bar, BarChart, HLine, Plot};

use crate::analysis::metrics::{ms, request_metrics};
use crate::analysis::reference::{Verdict, first_choice_text, percent, verdict};
use crate::analysis::summary::Slo;
use crate::analysis::tokens::{Choice, Latency, StepLoad, choice, display_text, latency, step_loads};
use crate::trace::{CandidateSource, OwnedCandidate, StageKind, Trace, opt_u32};
use crate::ui::widgets::command::Command;
use crate::ui::widgets::theme;

/// How the token chips are coloured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ColorBy {
    /// By inter-token latency relative to the request's median.
    #[default]
    Latency,
    /// By the chosen token's probability.
    Probability,
    /// By what the token was in its speculative verify step: an accepted draft, the target's own (bonus), plain.
    Speculation,
    /// By what a reference (the model re-scoring the answer) made of it: its first choice, a draw of the dice, off its
    /// distribution.
    Reference,
}

/// The figures of the request under the microscope, computed once when it is selected.
pub struct Microscope {
    /// The request row.
    pub request: u32,
    /// Latency of each of its tokens (a token that came out with the one before it has its emission's).
    pub latencies: Vec<Latency>,
    /// Whether each token starts an emission (`trace::emission`): the others came out with the token before them.
    pub starts: Vec<bool>,
    /// Load of each token's step.
    pub loads: Vec<StepLoad>,
    /// Choice of each token (rank and entropy wait for the candidates when they are read from disk).
    pub choices: Vec<Choice>,
    /// Candidates of each token, once read.
    pub candidates: Vec<Vec<OwnedCandidate>>,
    /// Candidates being read from disk, on their own thread.
    pending: Option<crate::ui::widgets::job::Job<Result<Vec<Vec<OwnedCandidate>>, String>>>,
    /// True when the candidates' reader wakes the UI when it is done.
    wakes_ui: bool,
    /// Why they could not be read.
    pub candidates_error: Option<String>,
    /// Median of the tokens' latencies after the first, ns.
    pub median_ns: i64,
    /// The selected token (index into the request's tokens).
    pub token: Option<usize>,
    /// Chip colouring.
    pub color_by: ColorBy,
    /// Where the load chart put its bars on screen (regenerated each frame; tests hover through it).
    pub load_transform: Option<egui_plot::PlotTransform>,
    /// A live recording's tokens of this request read since the snapshot on screen, in order (set by the app).
    pub fresh: Vec<String>,
}

impl Microscope {
    /// Puts a request under the microscope. Candidates held in memory are used at once; candidates left on disk
    /// are read on a thread of their own ([`Self::poll`] picks them up).
    pub fn new(
        trace: &Arc<Trace>,
        reader: Option<&Arc<dyn CandidateSource>>,
        request: u32,
        waker: Option<&egui::Context>,
    ) -> Self {
        let tokens = trace.tokens_of(request);
        let latencies: Vec<Latency> = tokens.clone().map(|t| latency(trace, request, t)).collect();
        let starts: Vec<bool> = tokens
            .clone()
            .map(|t| crate::trace::emission::starts_emission(&trace.tokens, tokens.start, t))
            .collect();
        let mut gaps = emission_gaps(&latencies, &starts);
        let median_ns = crate::analysis::metrics::median(&mut gaps).unwrap_or(0);
        let speculative = tokens
            .clone()
            .any(|t| trace.tokens.spec[t] != crate::trace::SpecRole::Unknown);
        let mut m = Microscope {
            request,
            latencies,
            starts,
            loads: step_loads(trace, request),
            choices: Vec::new(),
            candidates: vec![Vec::new(); tokens.len()],
            pending: None,
            candidates_error: None,
            wakes_ui: waker.is_some(),
            median_ns,
            token: None,
            color_by: if speculative {
                ColorBy::Speculation
            } else {
                ColorBy::Latency
            },
            load_transform: None,
            fresh: Vec::new(),
        };
        if let Some(reader) = reader.filter(|_| trace.candidates_on_disk.is_some()) {
            let (trace, reader) = (Arc::clone(trace), Arc::clone(reader));
            let spawned = crate::ui::widgets::job::Job::spawn("candidates", waker, move || {
                reader.candidates(&trace, request).map_err(|e| e.to_string())
            });
            match spawned {
                Ok(job) => m.pending = Some(job),
                Err(e) => m.candidates_error = Some(e),
            }
        } else {
            m.candidates = trace.owned_candidates(request);
        }
        m.choices = m.compute_choices(trace);
        m
    }

    fn compute_choices(&self, trace: &Trace) -> Vec<Choice> {
        trace
            .tokens_of(self.request)
            .zip(&self.candidates)
            .map(|(t, c)| choice(trace, t, c))
            .collect()
    }

    /// Takes the candidates read from disk when they are there; true while they are still coming.
    pub fn poll(&mut self, trace: &Trace) -> bool {
        let Some(rx) = &self.pending else { return false };
        match rx.try_recv() {
            Ok(result) => {
                self.pending = None;
                match result {
                    Ok(c) => {
                        self.candidates = c;
                        self.choices = self.compute_choices(trace);
                    }
                    Err(e) => self.candidates_error = Some(e),
                }
                false
            }
            Err(std::sync::mpsc::TryRecvError::Empty) => true,
            Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                self.pending = None;
                false
            }
        }
    }

    /// Waits for candidates read from disk (tests and benchmarks).
    pub fn wait_candidates(&mut self, trace: &Trace) {
        if let Some(job) = &self.pending {
            job.wait();
        }
        self.poll(trace);
    }

    /// The selected token's row in the trace.
    pub fn token_row(&self, trace: &Trace) -> Option<usize> {
        self.token.map(|k| trace.tokens_of(self.request).start + k)
    }
}

/// The latencies of the emissions after the first: one per emission, not per token.
fn emission_gaps(latencies: &[Latency], starts: &[bool]) -> Vec<i64> {
    latencies
        .iter()
        .zip(starts)
        .skip(1)
        .filter(|(_, s)| **s)
        .map(|(l, _)| l.total_ns)
        .collect()
}

fn chip_color(trace: &Trace, m: &Microscope, k: usize) -> Color32 {
    let alternate = if k.is_multiple_of(2) {
        theme::CHIP
    } else {
        theme::CHIP_ALT
    };
    match m.color_by {
        ColorBy::Speculation => match trace.tokens.spec[trace.tokens_of(m.request).start + k] {
            crate::trace::SpecRole::Draft => theme::SPEC_DRAFT,
            crate::trace::SpecRole::Bonus => theme::SPEC_BONUS,
            crate::trace::SpecRole::Plain | crate::trace::SpecRole::Unknown => alternate,
        },
        ColorBy::Latency => {
            let ratio = if m.median_ns > 0 && k > 0 && m.starts[k] {
                m.latencies[k].total_ns as f64 / m.median_ns as f64
            } else {
                1.0
            };
            if ratio >= 3.0 {
                theme::SLOW_TOKEN
            } else if ratio >= 1.5 {
                theme::SLOWISH_TOKEN
            } else {
                alternate
            }
        }
        ColorBy::Reference => match trace
            .reference_of(trace.tokens_of(m.request).start + k)
            .map(|r| verdict(&r))
        {
            Some(Verdict::Top) => theme::SLO_MET,
            Some(Verdict::Sampled) => theme::SLOWISH_TOKEN,
            Some(Verdict::OffDistribution) => theme::SLOW_TOKEN,
            None => alternate,
        },
        ColorBy::Probability => match m.choices[k].probability {
            Some(p) if p < 0.5 => theme::SLOW_TOKEN,
            Some(p) if p < 0.9 => theme::SLOWISH_TOKEN,
            _ => alternate,
        },
    }
}

/// The whole view; returns what the app should do.
pub fn microscope_ui(ui: &mut Ui, trace: &Arc<Trace>, m: &mut Microscope, slo: Slo, out: &mut Vec<Command>) {
    // A reader started with the UI's context wakes it; one started without (the headless renderer) is polled.
    if m.poll(trace) && !m.wakes_ui {
        ui.ctx().request_repaint_after(std::time::Duration::from_millis(10));
    }
    let tokens = trace.tokens_of(m.request);
    if !ui.ctx().egui_wants_keyboard_input() && !tokens.is_empty() {
        let last = tokens.len() - 1;
        ui.input(|i| {
            if i.key_pressed(egui::Key::ArrowRight) {
                m.token = Some(m.token.map_or(0, |k| (k + 1).min(last)));
            }
            if i.key_pressed(egui::Key::ArrowLeft) {
                m.token = Some(m.token.map_or(0, |k| k.saturating_sub(1)));
            }
        });
    }
    header_ui(ui, trace, m, slo);
    ui.separator();
    if tokens.is_empty() {
        ui.weak("No token records for this request: per-token latency and candidates need kind=\"token\" records.");
        return;
    }
    ui.columns(3, |cols| {
        strip_ui(&mut cols[0], trace, m);
        chart_ui(&mut cols[1], trace, m, out);
        candidates_ui(&mut cols[2], trace, m);
    });
}

fn header_ui(ui: &mut Ui, trace: &Trace, m: &Microscope, slo: Slo) {
    let r = m.request as usize;
    let q = &trace.requests;
    let label = |id: u32| trace.label(id).unwrap_or("-");
    let n = |v: Option<u32>| v.map_or("-".to_owned(), |v| v.to_string());
    let d = |v: Option<i64>| v.map_or("-".to_owned(), |v| format!("{:.1} ms", ms(v)));
    let metrics = request_metrics(trace, m.request);
    ui.horizontal_wrapped(|ui| {
        ui.heading(trace.request_id(m.request));
        ui.label(format!(
            "{} · model {} · app {} · user {}",
            label(q.source[r]),
            label(q.model[r]),
            label(q.app_id[r]),
            label(q.user_id[r])
        ));
    });
    let records = trace.tokens_of(m.request).len();
    let usage = q.output_tokens.at(r);
    let reconciled = match usage {
        Some(u) if u as usize != records && records > 0 => format!("usage {u} ≠ {records} token records"),
        Some(_) => "usage = token records".to_owned(),
        None => format!("{records} token records (no usage)"),
    };
    ui.label(format!(
        "tokens: input {} · cached {} · context {} · output {} ({reconciled})",
        n(q.input_tokens.at(r)),
        n(q.cached_tokens.at(r)),
        n(q.context_tokens.at(r)),
        n(usage)
    ));
    if !trace.has_times() {
        // A saved stream: its times are an order only, so no latency and no SLO verdict.
        ui.label(format!(
            "no times: the source wrote none (a saved stream) · finish {}",
            label(q.finish_reason[r])
        ));
        return;
    }
    let mut gaps = emission_gaps(&m.latencies, &m.starts);
    gaps.sort_unstable();
    let p99 = gaps.get((gaps.len() * 99).div_ceil(100).saturating_sub(1)).copied();
    ui.label(format!(
        "queue {} · TTFT {} · TPOT {} · E2E {} · ITL p50 {} p99 {}",
        d(metrics.queue_ns),
        d(metrics.ttft_ns),
        metrics.tpot_ns.map_or("-".to_owned(), |t| format!("{:.1} ms", t / 1e6)),
        d(metrics.e2e_ns),
        d((!gaps.is_empty()).then_some(m.median_ns)),
        d(p99)
    ));
    if let Some(f) = crate::analysis::spec::spec_figures(trace, &[m.request]) {
        let rejected = f.drafted_tokens - f.accepted_tokens;
        let mut line = format!(
            "speculative: {} drafts, {} accepted ({}), {rejected} rejected",
            f.drafted_tokens,
            f.accepted_tokens,
            f.acceptance_rate
                .map_or("-".to_owned(), |a| format!("{:.0} %", a * 100.0))
        );
        if let (Some(n), Some(len)) = (f.verify_steps, f.acceptance_length) {
            line.push_str(&format!(" · {n} verify steps, {len:.2} tokens each"));
        }
        ui.label(line);
    }
    ui.horizontal(|ui| {
        ui.label(format!(
            "finish {} · status {}",
            label(q.finish_reason[r]),
            label(q.status[r])
        ));
        ui.separator();
        let limits: Vec<String> = [("TTFT", slo.ttft_ms), ("TPOT", slo.tpot_ms)]
            .into_iter()
            .filter_map(|(n, v)| v.map(|v| format!("{n} ≤ {v} ms")))
            .collect();
        if limits.is_empty() {
            ui.weak("no SLO set (menu SLOs)");
        } else {
            let misses = slo.misses(&metrics);
            if misses.is_empty() {
                ui.label(RichText::new(format!("SLO met ({})", limits.join(", "))).color(theme::SLO_MET));
            } else {
                ui.label(RichText::new(format!("SLO missed: {}", misses.join(", "))).color(theme::SLOW_TOKEN));
            }
        }
    });
}

fn strip_ui(ui: &mut Ui, trace: &Trace, m: &mut Microscope) {
    ui.horizontal(|ui| {
        ui.strong("Output");
        ui.selectable_value(&mut m.color_by, ColorBy::Latency, "colour by latency");
        ui.selectable_value(&mut m.color_by, ColorBy::Probability, "by probability");
        if trace
            .tokens_of(m.request)
            .any(|t| trace.tokens.spec[t] != crate::trace::SpecRole::Unknown)
        {
            ui.selectable_value(&mut m.color_by, ColorBy::Speculation, "by verify step");
        }
        if trace.tokens_of(m.request).any(|t| trace.reference_of(t).is_some()) {
            ui.selectable_value(&mut m.color_by, ColorBy::Reference, "by reference")
                .on_hover_text(
                    "green: the reference's first choice; yellow: a draw of the dice; red: off its distribution (the \
                     model would not write it)",
                );
        }
    });
    let tokens = trace.tokens_of(m.request);
    egui::ScrollArea::vertical()
        .id_salt("strip")
        .max_height(ui.available_height())
        .show(ui, |ui| {
            ui.horizontal_wrapped(|ui| {
                ui.spacing_mut().item_spacing = egui::vec2(2.0, 2.0);
                for (k, t) in tokens.clone().enumerate() {
                    // A verify step's tokens side by side; a gap where the next emission begins.
                    if k > 0 && m.starts[k] && m.color_by == ColorBy::Speculation {
                        ui.add_space(4.0);
                    }
                    let text = display_text(
                        trace,
                        trace.tokens.token_id[t],
                        trace.texts.get(trace.tokens.text[t]),
                        trace.tokens.special[t],
                    );
                    let low = matches!(m.choices[k].rank, crate::analysis::tokens::Rank::Known(r) if r > 1)
                        || matches!(m.choices[k].rank, crate::analysis::tokens::Rank::BeyondTopK(_))
                        || m.choices[k].probability.is_some_and(|p| p < 0.5);
                    let mut rich = RichText::new(text)
                        .monospace()
                        .color(theme::CHIP_TEXT)
                        .background_color(chip_color(trace, m, k));
                    if low {
                        rich = rich.underline();
                    }
                    if m.token == Some(k) {
                        rich = rich.strong().background_color(theme::SELECTION_EDGE);
                    }
                    let r = ui.add(egui::Label::new(rich).sense(Sense::click()));
                    if r.clicked() {
                        m.token = Some(k);
                    }
                    // After a verify step's last token: the drafts it rejected.
                    let last_of_step = k + 1 == tokens.len() || m.starts[k + 1];
                    if last_of_step && m.color_by == ColorBy::Speculation {
                        let first = (0..=k).rev().find(|&j| m.starts[j]).unwrap_or(k);
                        let row = tokens.start + first;
                        if let Some(drafted) = crate::trace::opt_u8(trace.tokens.spec_drafted[row]) {
                            let accepted = (first..=k)
                                .filter(|&j| trace.tokens.spec[tokens.start + j] == crate::trace::SpecRole::Draft)
                                .count();
                            let rejected = usize::from(drafted).saturating_sub(accepted);
                            if rejected > 0 {
                                ui.label(RichText::new(format!("✗{rejected}")).small().color(theme::MUTED_TEXT))
                                    .on_hover_text(format!(
                                        "this verify step proposed {drafted} drafts, accepted {accepted} and rejected \
                                         {rejected}"
                                    ));
                            }
                        }
                    }
                }
                // Live: what arrived since the snapshot, shown as it comes; its latency and candidates come with
                // the next snapshot.
                for text in &m.fresh {
                    let shown = display_text(trace, crate::trace::NULL_U32, Some(text), crate::trace::Flag::Null);
                    ui.label(
                        RichText::new(shown)
                            .monospace()
                            .italics()
                            .color(theme::CHIP_TEXT)
                            .background_color(theme::FRESH_TOKEN),
                    )
                    .on_hover_text("streaming: arrived after the snapshot on screen");
                }
            });
        });
}

/// The request's two charts, their token axes linked: each token's latency split, then the prefill of others in
/// the steps it waited through.
fn chart_ui(ui: &mut Ui, trace: &Trace, m: &mut Microscope, out: &mut Vec<Command>) {
    ui.strong("Latency of each token (ms)");
    if !trace.has_times() {
        ui.weak(
            "No times in this trace (a saved stream): its tokens are in order, but how long each took is not known.",
        );
        return;
    }
    let link = egui::Id::unique("microscope-x");
    latency_chart_ui(ui, trace, m, link);
    ui.strong("Other requests' prefill tokens in the token's step and the steps it waited through");
    if trace.iterations.is_empty() {
        // An empty chart would read as "no prefill"; the trace cannot say.
        ui.weak(
            "Needs the engine's steps: this trace has no kind=\"iteration\" records (a recording made outside the \
             server, or a source that gives none).",
        );
        m.load_transform = None;
        return;
    }
    load_chart_ui(ui, trace, m, link, out);
}

/// Each token's latency as stacked bars (schedule wait, step compute, output, delivery), the median ITL across;
/// a click selects the token, a hover splits it.
fn latency_chart_ui(ui: &mut Ui, trace: &Trace, m: &mut Microscope, link: egui::Id) {
    // A token that came out with the one before it (a verify step's) has no bar of its own: its emission's bar
    // stands for both.
    let bars = |part: fn(&Latency) -> Option<i64>, color: Color32| -> Vec<Bar> {
        m.latencies
            .iter()
            .enumerate()
            .map(|(k, l)| {
                let v = if m.starts[k] { part(l).map_or(0.0, ms) } else { 0.0 };
                Bar::new(k as f64, v).width(0.8).fill(color)
            })
            .collect()
    };
    let (c_whole, c_wait, c_compute, c_output) = (
        theme::COUNTER_COLOR,
        theme::stage_color(StageKind::Queue),
        theme::stage_color(StageKind::Prefill),
        theme::stage_color(StageKind::Decode),
    );
    // A token without its engine step (a trace without iterations) has its latency whole, in a series of its own:
    // drawn as schedule wait, it would claim a split the trace cannot make.
    let whole = BarChart::new(
        "not split (no engine step)",
        bars(|l| l.compute_ns.is_none().then_some(l.total_ns), c_whole),
    )
    .color(c_whole);
    let wait = BarChart::new("schedule wait", bars(|l| l.schedule_wait_ns, c_wait))
        .color(c_wait)
        .stack_on(&[&whole]);
    let compute = BarChart::new("step compute", bars(|l| l.compute_ns, c_compute))
        .color(c_compute)
        .stack_on(&[&whole, &wait]);
    let output = BarChart::new("output", bars(|l| l.output_ns, c_output))
        .color(c_output)
        .stack_on(&[&whole, &wait, &compute]);
    // A joined trace: the token's way from the server to the client, on top of what the server took.
    let delivery = BarChart::new(
        "delivery (server to client)",
        bars(|l| l.delivery_ns.map(|d| d.max(0)), theme::DELIVERY),
    )
    .color(theme::DELIVERY)
    .stack_on(&[&whole, &wait, &compute, &output]);
    let delivered = m.latencies.iter().any(|l| l.delivery_ns.is_some());
    let height = (ui.available_height() * 0.6).max(80.0);
    let plot = Plot::new("latency")
        .height(height)
        .link_axis(link, [true, false])
        .allow_scroll(false)
        .legend(egui_plot::Legend::default())
        .x_axis_label("token index")
        .show(ui, |p| {
            if m.latencies.iter().any(|l| l.compute_ns.is_none()) {
                p.bar_chart(whole);
            }
            p.bar_chart(wait);
            p.bar_chart(compute);
            p.bar_chart(output);
            if delivered {
                p.bar_chart(delivery);
            }
            p.hline(HLine::new("median ITL", ms(m.median_ns)).color(theme::MARKER));
        });
    let hovered = plot
        .response
        .hover_pos()
        .map(|pos| plot.transform.value_from_position(pos).x.round());
    let hovered = hovered
        .filter(|&x| x >= 0.0 && (x as usize) < m.latencies.len())
        .map(|x| x as usize);
    if plot.response.clicked()
        && let Some(k) = hovered
    {
        m.token = Some(k);
    }
    if let Some(k) = hovered {
        let l = m.latencies[k];
        let load = m.loads[k].clone();
        let index = trace.tokens.index[trace.tokens_of(m.request).start + k];
        let with = (!m.starts[k]).then(|| (0..k).rev().find(|&j| m.starts[j]).unwrap_or(0));
        plot.response.on_hover_ui(|ui| {
            if let Some(j) = with {
                let first = trace.tokens.index[trace.tokens_of(m.request).start + j];
                ui.weak(format!(
                    "came out with token {first}, in the same emission (one verify step)"
                ));
            }
            ui.strong(format!("token {index}: {:.1} ms", ms(l.total_ns)));
            if let (Some(w), Some(c), Some(o)) = (l.schedule_wait_ns, l.compute_ns, l.output_ns) {
                ui.label(format!(
                    "wait {:.1} ms · compute {:.1} ms · output {:.1} ms",
                    ms(w),
                    ms(c),
                    ms(o)
                ));
            }
            if let Some(d) = l.delivery_ns {
                ui.label(format!("then {:.1} ms from the server to the client", ms(d)));
            }
            step_load_ui(ui, trace, &load);
        });
    }
}

/// The prefill tokens of other requests in each token's step and the steps it waited through; a click selects the
/// largest prefill of the token's step.
fn load_chart_ui(ui: &mut Ui, trace: &Trace, m: &mut Microscope, link: egui::Id, out: &mut Vec<Command>) {
    let load_bars: Vec<Bar> = m
        .loads
        .iter()
        .enumerate()
        .map(|(k, l)| {
            Bar::new(k as f64, f64::from(l.others_prefill_tokens))
                .width(0.8)
                .fill(theme::COUNTER_COLOR)
        })
        .collect();
    let load_plot = Plot::new("load")
        .height((ui.available_height() - 8.0).max(60.0))
        .link_axis(link, [true, false])
        .allow_scroll(false)
        .show(ui, |p| {
            p.bar_chart(BarChart::new("prefill tokens of others", load_bars).color(theme::COUNTER_COLOR));
        });
    m.load_transform = Some(load_plot.transform);
    let hovered = load_plot
        .response
        .hover_pos()
        .map(|pos| load_plot.transform.value_from_position(pos).x.round());
    if let Some(k) = hovered
        .filter(|&x| x >= 0.0 && (x as usize) < m.loads.len())
        .map(|x| x as usize)
    {
        let load = m.loads[k].clone();
        if load_plot.response.clicked()
            && let Some(&(r, _)) = load.prefills.iter().chain(&load.waited_behind).max_by_key(|p| p.1)
        {
            out.push(Command::Select {
                request: Some(r),
                scroll: true,
            });
        }
        load_plot.response.on_hover_ui(|ui| {
            ui.strong(format!(
                "token {}'s step",
                trace.tokens.index[trace.tokens_of(m.request).start + k]
            ));
            step_load_ui(ui, trace, &load);
            if !load.prefills.is_empty() || !load.waited_behind.is_empty() {
                ui.weak("click: select the largest prefill");
            }
        });
    }
}

fn step_load_ui(ui: &mut Ui, trace: &Trace, load: &StepLoad) {
    let Some(row) = load.iteration_row else {
        ui.weak("no iteration data for this token");
        return;
    };
    let it = &trace.iterations;
    let i = row as usize;
    ui.label(format!(
        "step {} · batch {} · prefill {} tokens, decode {} tokens",
        it.iteration[i],
        load.batch_size.map_or("?".to_owned(), |b| b.to_string()),
        it.num_prefill_tokens.at(i).map_or("?".to_owned(), |v| v.to_string()),
        it.num_decode_tokens.at(i).map_or("?".to_owned(), |v| v.to_string())
    ));
    if load.prefills.is_empty() {
        ui.label("no other request prefilled in this step");
    }
    for &(r, tokens) in load.prefills.iter().take(8) {
        ui.label(format!("prefilling: {} ({tokens} tokens)", trace.request_id(r)));
    }
    if !load.waited_behind.is_empty() {
        ui.label("before this step, the token waited behind:");
        for &(r, tokens) in load.waited_behind.iter().take(8) {
            ui.label(format!("prefilling: {} ({tokens} tokens)", trace.request_id(r)));
        }
    }
}

/// Candidates listed for a token: engines write 5 to 20; a trace with a million on one token must not lay out a
/// million rows in a frame.
pub const MAX_SHOWN_CANDIDATES: usize = 100;

fn candidates_ui(ui: &mut Ui, trace: &Trace, m: &Microscope) {
    ui.strong("Candidates");
    let Some(t) = m.token_row(trace) else {
        ui.weak("Click a token (or press Right) to see what the model chose between.");
        return;
    };
    let k = m.token.unwrap_or(0);
    let c = &m.choices[k];
    let chosen_id = trace.tokens.token_id[t];
    let text = display_text(
        trace,
        chosen_id,
        trace.texts.get(trace.tokens.text[t]),
        trace.tokens.special[t],
    );
    let index = trace.tokens.index[t];
    ui.label(RichText::new(format!("token {index}: {text}")).monospace().strong());
    ui.label(format!(
        "id {} · logprob {} · p {} · rank {} · top-k entropy {}",
        opt_u32(chosen_id).map_or("?".to_owned(), |v| v.to_string()),
        crate::trace::opt_f64(trace.tokens.logprob[t]).map_or("?".to_owned(), |v| format!("{v:.4}")),
        c.probability.map_or("?".to_owned(), |p| format!("{:.1} %", p * 100.0)),
        c.rank,
        c.entropy_nats.map_or("?".to_owned(), |h| format!("{h:.3} nats"))
    ));
    if let Some(r) = trace.reference_of(t) {
        reference_ui(ui, trace, &r);
    }
    let cands = &m.candidates[k];
    if cands.is_empty() {
        if m.pending.is_some() {
            ui.weak("Reading this request's candidates…");
        } else if let Some(e) = &m.candidates_error {
            ui.colored_label(ui.visuals().error_fg_color, format!("Cannot read the candidates: {e}"));
        } else {
            ui.weak("No candidates recorded for this token (the trace has no top-k logprobs).");
        }
        return;
    }
    egui::Grid::new("candidates")
        .striped(true)
        .num_columns(4)
        .show(ui, |ui| {
            ui.weak("rank");
            ui.weak("token");
            ui.weak("probability");
            ui.weak("");
            ui.end_row();
            for (rank, c) in cands.iter().take(MAX_SHOWN_CANDIDATES).enumerate() {
                let p = c.logprob.exp();
                let shown = display_text(trace, c.token_id, c.text.as_deref(), c.special);
                let is_chosen = c.token_id == chosen_id;
                ui.label((rank + 1).to_string());
                let mut rich = RichText::new(shown).monospace();
                if is_chosen {
                    rich = rich.strong().color(theme::SELECTION_EDGE);
                }
                ui.label(rich);
                ui.label(format!("{:.1} %", p * 100.0));
                let (rect, _) = ui.allocate_exact_size(egui::vec2(120.0, 12.0), Sense::hover());
                let w = (p.clamp(0.0, 1.0) as f32) * rect.width();
                let color = if is_chosen {
                    theme::SELECTION_EDGE
                } else {
                    theme::COUNTER_COLOR
                };
                ui.painter().rect_filled(
                    egui::Rect::from_min_size(rect.min, egui::vec2(w, rect.height())),
                    2.0,
                    color,
                );
                ui.end_row();
            }
        });
    if cands.len() > MAX_SHOWN_CANDIDATES {
        ui.weak(format!(
            "and {} more candidates (a frame lists {MAX_SHOWN_CANDIDATES} at most)",
            crate::analysis::stats::thousands((cands.len() - MAX_SHOWN_CANDIDATES) as u64)
        ));
    }
    if matches!(c.rank, crate::analysis::tokens::Rank::BeyondTopK(_)) {
        ui.label(
            RichText::new("The chosen token is not among the candidates written.").color(ui.visuals().warn_fg_color),
        );
    }
}

/// What the reference said of the token: its probability and rank there, its own first choice, and the verdict.
fn reference_ui(ui: &mut Ui, trace: &Trace, r: &crate::trace::Reference) {
    let v = verdict(r);
    let color = match v {
        Verdict::Top => theme::SLO_MET,
        Verdict::Sampled => theme::SLOWISH_TOKEN,
        Verdict::OffDistribution => ui.visuals().error_fg_color,
    };
    let listed = r.listed.map_or_else(|| "listed".to_owned(), |k| k.to_string());
    let given = match (r.logprob, r.rank) {
        (Some(lp), Some(k)) => format!("p {} · rank {k}", percent(lp.exp())),
        (Some(lp), None) => format!("p {} · below its {listed} most probable", percent(lp.exp())),
        (None, _) => format!("not among its {listed} most probable"),
    };
    let top = first_choice_text(trace, r);
    let top_p = r
        .top_logprob
        .map_or_else(String::new, |lp| format!(" {}", percent(lp.exp())));
    let words = match v {
        Verdict::Top => "its first choice",
        Verdict::Sampled => "a draw of the dice",
        Verdict::OffDistribution => "off its distribution: not the model's choice at any temperature served",
    };
    ui.horizontal_wrapped(|ui| {
        ui.label("Reference (re-scored):");
        ui.label(given);
        ui.label(format!("· its choice {top}{top_p} ·"));
        ui.label(RichText::new(words).color(color));
    });
}
