//! What the waterfall says of what is under the pointer: a step (its tokens, batch, KV use and time), a request
//! (its figures), or a run of merged items too small to draw apart (how many, their total and longest time).

use eframe::egui::Ui;

use super::Hover;
use crate::trace::{StageKind, Trace};
use crate::view::lod::RenderItem;
use crate::view::trace_view::TraceView;
use crate::view::{layout, ruler};

pub(super) fn hover_ui(ui: &mut Ui, view: &TraceView, hover: Hover) {
    let trace = &view.trace;
    let rel = |t: i64| ruler::format_relative(t - view.t0_ns, 1_000_000);
    match hover {
        Hover::Ruler { t_ns } => {
            ui.label(format!("{} after start", ruler::format_duration(t_ns - view.t0_ns)));
            ui.label(ruler::format_utc(t_ns));
        }
        Hover::Step { track, item } => {
            let t = &view.engines[track];
            let rows = trace.iterations_of_source(t.source);
            let it = &trace.iterations;
            match item {
                RenderItem::Span { index, .. } => {
                    let i = rows.start + index;
                    ui.strong(format!(
                        "step {} on {}",
                        it.iteration[i],
                        trace.label(t.source).unwrap_or("engine")
                    ));
                    ui.label(format!(
                        "start {} (+{})",
                        rel(it.start_ns[i]),
                        ruler::format_duration(it.end_ns[i] - it.start_ns[i])
                    ));
                    ui.label(format!(
                        "prefill {} tokens, decode {} tokens",
                        it.num_prefill_tokens.at(i).map_or("?".into(), |v| v.to_string()),
                        it.num_decode_tokens.at(i).map_or("?".into(), |v| v.to_string())
                    ));
                    ui.label(format!(
                        "batch {} requests, {} waiting, KV {}",
                        it.num_reqs.at(i).map_or("?".into(), |v| v.to_string()),
                        it.num_waiting.at(i).map_or("?".into(), |v| v.to_string()),
                        it.kv_usage.at(i).map_or("?".into(), |v| format!("{:.0} %", v * 100.0))
                    ));
                }
                RenderItem::Merged {
                    spans,
                    total_ns,
                    max_ns,
                    ..
                } => merged_ui(ui, "steps", spans.len(), total_ns, max_ns),
            }
        }
        Hover::Request { request } => request_ui(ui, trace, request),
        Hover::Load { row, t_ns, counts } => {
            if let Some(strip) = view.load.as_ref() {
                super::load::hover_ui(ui, view, strip, row, t_ns, counts);
            }
        }
        Hover::Stage { request, item, spans } => {
            ui.strong(trace.request_id(request));
            match item {
                RenderItem::Span { index, .. } => {
                    let s = spans[index];
                    let kind = layout::stage_of_class(s.class);
                    let full = trace
                        .stages_of(request)
                        .into_iter()
                        .find(|x| x.kind == kind && x.end_ns >= s.end_ns && x.start_ns <= s.end_ns);
                    ui.label(format!(
                        "{} from {} for {}",
                        kind.name(),
                        rel(s.start_ns),
                        ruler::format_duration(s.end_ns - s.start_ns)
                    ));
                    if let Some(f) = full {
                        if let Some(n) = f.iteration {
                            ui.label(format!("step {n}"));
                        }
                        if let Some(n) = f.tokens {
                            ui.label(format!("{n} tokens"));
                        }
                        if let Some(t) = f.token {
                            let text = trace.texts.get(trace.tokens.text[t as usize]).unwrap_or("");
                            ui.label(format!("token {}: {text:?}", trace.tokens.index[t as usize]));
                        }
                        if f.derived {
                            ui.weak("derived from the request's timestamps");
                        }
                    }
                    if kind == StageKind::Decode && trace.token_count() == 0 {
                        ui.weak("no token records: per-token steps need kind=\"token\" records");
                    }
                    if kind == StageKind::Waiting {
                        ui.weak(
                            "waiting for the first token: queue and prefill not split (a client-side trace; open it \
                             with the server's files of the same run to split it)",
                        );
                    }
                }
                RenderItem::Merged {
                    spans,
                    total_ns,
                    max_ns,
                    ..
                } => merged_ui(ui, "stages", spans.len(), total_ns, max_ns),
            }
        }
    }
}

pub(super) fn request_ui(ui: &mut Ui, trace: &Trace, request: u32) {
    let m = crate::analysis::metrics::request_metrics(trace, request);
    ui.strong(trace.request_id(request));
    let ms = |v: Option<i64>| v.map_or("?".to_owned(), ruler::format_duration);
    ui.label(format!(
        "TTFT {}, E2E {}, queue {}",
        ms(m.ttft_ns),
        ms(m.e2e_ns),
        ms(m.queue_ns)
    ));
    ui.label(format!("{} output tokens", trace.output_tokens(request)));
    ui.weak("zoom in (W, Ctrl+wheel) to see each step; click to select");
}

pub(super) fn merged_ui(ui: &mut Ui, what: &str, count: usize, total_ns: i64, max_ns: i64) {
    ui.label(format!("{count} {what} merged at this zoom"));
    ui.label(format!(
        "total {}, longest {}",
        ruler::format_duration(total_ns),
        ruler::format_duration(max_ns)
    ));
    ui.weak("zoom in (W, Ctrl+wheel) to see each");
}
