//! The load strip above the engine tracks: a thin row per instance (a data-parallel rank, a prefill or a decode
//! server), every row on one scale, so that a starved rank reads grey beside a busy one and a queue reads red. Each
//! point column shows the most requests the instance held in it: blue as deep as its running requests' share of the
//! scale, red as soon as one waits; a grey line where it was idle, nothing where its load is not known.

use eframe::egui::{self, Align2, Color32, FontId, Rect, pos2};

use super::{Hover, Paint};
use crate::ui::widgets::theme;
use crate::view::load::{Basis, LoadStrip};
use crate::view::trace_view::TraceView;

/// The height of an instance's row.
pub const ROW: f32 = 14.0;
/// An idle column: a line, not a block.
const IDLE: Color32 = crate::ui::widgets::theme::IDLE_LOAD;

/// The height of the heading line.
const HEADING: f32 = 14.0;

/// The height of the strip (0 without one).
pub(super) fn block_height(view: &TraceView) -> f32 {
    view.load
        .as_ref()
        .map_or(0.0, |l| HEADING + ROW * l.rows.len() as f32 + 4.0)
}

/// The colour of a column holding `running` and `waiting` requests on a scale of `max`.
fn color(running: u32, waiting: u32, max: u32) -> Color32 {
    let share = |n: u32| (n as f32 / max.max(1) as f32).clamp(0.0, 1.0);
    if waiting > 0 {
        theme::COUNTER_ALERT_COLOR.gamma_multiply(0.55 + 0.45 * share(running + waiting))
    } else if running > 0 {
        theme::COUNTER_COLOR.gamma_multiply(0.4 + 0.6 * share(running))
    } else {
        IDLE
    }
}

/// Draws the strip from `top`; sets `hover` to the instance and time under the pointer. Returns where its first
/// instance's row starts, when drawn.
pub(super) fn draw(p: &Paint<'_>, top: f32, hover: &mut Option<Hover>) -> Option<f32> {
    let strip = p.view.load.as_ref()?;
    let frame = p.areas;
    let trace = &p.view.trace;
    let basis = if strip.rows.iter().all(|r| r.basis == Basis::Samples) {
        "from their counters"
    } else if strip.rows.iter().all(|r| r.basis == Basis::Requests) {
        "from their requests"
    } else {
        "from counters or requests"
    };
    p.painter.text(
        pos2(frame.labels_x, top + HEADING / 2.0),
        Align2::LEFT_CENTER,
        format!("load per instance, 0-{} requests ({basis}); red: waiting", strip.max),
        FontId::proportional(11.0),
        theme::MUTED_TEXT,
    );
    let columns = frame.time.width().ceil().max(1.0) as usize;
    let left = frame.time.left();
    let mut mesh = egui::Mesh::default();
    for (k, row) in strip.rows.iter().enumerate() {
        let y0 = top + HEADING + k as f32 * ROW;
        let y1 = y0 + ROW - 2.0;
        let name = row.role.label(trace.label(row.source).unwrap_or("instance"));
        p.painter.text(
            pos2(frame.labels_x + 8.0, f32::midpoint(y0, y1)),
            Align2::LEFT_CENTER,
            name,
            FontId::proportional(11.0),
            theme::MUTED_TEXT,
        );
        // One quad per run of columns of one colour.
        let mut run: Option<(usize, Color32)> = None;
        let flush = |mesh: &mut egui::Mesh, run: Option<(usize, Color32)>, end: usize| {
            if let Some((start, c)) = run.filter(|r| r.1 != Color32::TRANSPARENT) {
                let (a, b) = (left + start as f32, left + end as f32);
                let r = if c == IDLE {
                    Rect::from_min_max(pos2(a, y1 - 2.0), pos2(b, y1))
                } else {
                    Rect::from_min_max(pos2(a, y0), pos2(b, y1))
                };
                mesh.add_colored_rect(r, c);
            }
        };
        let values = row.columns(p.vp, columns);
        for (col, v) in values.iter().enumerate() {
            let c = v.map_or(Color32::TRANSPARENT, |(r, w)| color(r, w, strip.max));
            match run {
                Some((_, rc)) if rc == c => {}
                _ => {
                    flush(&mut mesh, run, col);
                    run = Some((col, c));
                }
            }
        }
        flush(&mut mesh, run, values.len());
        if let Some(pt) = p
            .pointer
            .filter(|pt| frame.time.contains(*pt) && (y0..y1 + 2.0).contains(&pt.y))
        {
            let col = ((pt.x - left).max(0.0) as usize).min(columns - 1);
            *hover = Some(Hover::Load {
                row: k,
                t_ns: p.vp.time_from_x(f64::from(pt.x - left)),
                counts: values[col],
            });
        }
    }
    p.painter
        .with_clip_rect(p.painter.clip_rect().intersect(frame.time))
        .add(egui::Shape::mesh(mesh));
    Some(top + HEADING)
}

/// What the tooltip says of an instance's load at a time.
pub(super) fn hover_ui(
    ui: &mut egui::Ui,
    view: &TraceView,
    strip: &LoadStrip,
    row: usize,
    t_ns: i64,
    counts: Option<(u32, u32)>,
) {
    let Some(r) = strip.rows.get(row) else {
        return;
    };
    ui.strong(view.trace.label(r.source).unwrap_or("instance"));
    ui.label(crate::view::ruler::format_relative(t_ns - view.t0_ns, 1_000_000));
    match counts {
        Some((running, waiting)) => {
            ui.label(format!(
                "{running} running, {waiting} waiting (the most in this column)"
            ));
        }
        None => {
            ui.weak("load not known here (before its first reading)");
        }
    }
    ui.weak(match r.basis {
        Basis::Samples => "from the instance's counters, each reading held until the next",
        Basis::Requests => "from its requests: waiting from arrival to being scheduled, running until they leave it",
    });
}
