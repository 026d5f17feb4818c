//! The engine tracks of the waterfall: per source, its steps coloured by prefill share (a density strip when
//! zoomed out past a step per point), and its counter rows (batch size, prefill tokens, KV use, waiting), each
//! saying "not in the trace" when the source lacks it.

use eframe::egui::{self, Align2, FontId, Rect, Stroke, pos2};

use super::{Hover, Paint, draw_items};
use crate::ui::widgets::theme;
use crate::view::layout;
use crate::view::lod::{RenderItem, compute_render_items, visible};
use crate::view::step_summary::{COUNTERS, ColumnStats, counter_values};
use crate::view::trace_view::EngineTrack;

pub(super) fn engine_block_height() -> f32 {
    theme::ENGINE_ROW_HEIGHT + theme::COUNTER_ROW_HEIGHT * COUNTERS.len() as f32 + 6.0
}

/// Draws every engine track (its steps, then its counter rows) and the line under them; what is under the pointer
/// goes to `hover`.
pub(super) fn draw_engines(p: &Paint<'_>, hover: &mut Option<Hover>) {
    let (painter, frame, view) = (p.painter, p.areas, p.view);
    if view.engines.is_empty() && view.sampled.is_empty() {
        painter.text(
            pos2(frame.time.left() + 6.0, frame.engines_top + 10.0),
            Align2::LEFT_CENTER,
            "No engine track: this trace has no kind=\"iteration\" records (start_ns, end_ns, num_prefill_tokens, \
             num_decode_tokens, num_reqs, kv_usage, num_waiting).",
            FontId::proportional(12.0),
            theme::MUTED_TEXT,
        );
        return;
    }
    if view.engines.is_empty() {
        return;
    }
    let mut mesh = egui::Mesh::default();
    for (k_track, track) in view.engines.iter().enumerate() {
        let top = frame.engines_top + k_track as f32 * engine_block_height() + 2.0;
        let steps_y = egui::Rangef::new(top, top + theme::ENGINE_ROW_HEIGHT - 2.0);
        // A disaggregated deployment's instances say what they did, unless their name does already.
        let name = track.role.label(view.trace.label(track.source).unwrap_or("engine"));
        painter.text(
            pos2(frame.labels_x, steps_y.center()),
            Align2::LEFT_CENTER,
            name,
            FontId::proportional(12.0),
            p.ui.visuals().strong_text_color(),
        );
        let columns = frame.time.width().ceil().max(1.0) as usize;
        // Zoomed out past one step per point, the step row becomes a density strip: each point column is as opaque
        // as the share of its time the engine was busy, and coloured by its prefill share of tokens.
        let density_mode = visible(&track.spans, p.vp).len() > columns;
        if density_mode {
            if let Some(h) = step_under_pointer(p, k_track, track, steps_y) {
                *hover = Some(h);
            }
        } else {
            let items = compute_render_items(&track.spans, p.vp);
            if let Some(item) = draw_items(
                &mut mesh,
                frame,
                &items,
                &track.spans,
                steps_y,
                theme::step_color,
                p.pointer,
            ) {
                *hover = Some(Hover::Step { track: k_track, item });
            }
        }
        let stats = column_stats(p, track, columns, density_mode);
        if density_mode {
            paint_density(&mut mesh, frame.time.left(), steps_y, &stats);
        }
        counter_rows(p, track, steps_y, &stats.max, &mut mesh);
    }
    // Spans and markers of times before or after the view stay inside the time axis.
    painter
        .with_clip_rect(painter.clip_rect().intersect(frame.time))
        .add(egui::Shape::mesh(mesh));
    let bottom = frame.engines_top + engine_block_height() * view.engines.len() as f32;
    painter.hline(frame.requests.x_range(), bottom, Stroke::new(1.0, theme::GRID));
}

/// In a density strip, the step under the pointer, found by time.
fn step_under_pointer(p: &Paint<'_>, k_track: usize, track: &EngineTrack, steps_y: egui::Rangef) -> Option<Hover> {
    let vp = p.vp;
    let px = p
        .pointer
        .filter(|q| steps_y.contains(q.y))
        .map(|q| f64::from(q.x - p.areas.time.left()))?;
    let t = vp.time_from_x(px);
    let slack = vp.ns_per_point as i64;
    let k = track.spans.partition_point(|s| s.start_ns <= t + slack);
    let index = k.checked_sub(1).filter(|&i| track.spans[i].end_ns >= t - slack)?;
    let s = track.spans[index];
    Some(Hover::Step {
        track: k_track,
        item: RenderItem::Span {
            index,
            x0: vp.x_from_time(s.start_ns),
            x1: vp.x_from_time(s.end_ns),
        },
    })
}

/// Per point column, the largest counters among the steps in it, their tokens by kind, and (in a density strip)
/// the share of its time the engine was busy. Far out, they come from the track's buckets, not from every step.
fn column_stats(p: &Paint<'_>, track: &EngineTrack, columns: usize, density_mode: bool) -> ColumnStats {
    let (vp, trace) = (p.vp, &p.view.trace);
    let vis = visible(&track.spans, vp);
    if density_mode && let Some(c) = track.summary.columns(vp, columns) {
        return c;
    }
    let rows = trace.iterations_of_source(track.source);
    let mut max = vec![[0.0f32; 4]; columns];
    let mut tokens = vec![(0u64, 0u64); columns];
    for i in vis {
        let s = track.spans[i];
        let (x0, x1) = (vp.x_from_time(s.start_ns).max(0.0), vp.x_from_time(s.end_ns).max(0.0));
        let (c0, c1) = ((x0 as usize).min(columns - 1), (x1 as usize).min(columns - 1));
        let values = counter_values(trace, rows.start + i);
        for col in &mut max[c0..=c1] {
            for (m, v) in col.iter_mut().zip(values) {
                *m = m.max(v);
            }
        }
        let (p, d) = layout::prefill_mix(trace, rows.start + i);
        for col in &mut tokens[c0..=c1] {
            col.0 += p;
            col.1 += d;
        }
    }
    let busy = if density_mode {
        crate::view::lod::density(&track.spans, vp, columns)
    } else {
        Vec::new()
    };
    ColumnStats { busy, tokens, max }
}

/// The density strip: each column as opaque as the engine was busy in it, coloured by its prefill share.
fn paint_density(mesh: &mut egui::Mesh, left: f32, steps_y: egui::Rangef, stats: &ColumnStats) {
    for (col, (&b, &(p, d))) in stats.busy.iter().zip(&stats.tokens).enumerate() {
        if b <= 0.0 {
            continue;
        }
        let class = (p * u64::from(layout::PREFILL_CLASSES))
            .checked_div(p + d)
            .map_or(0, |c| c.min(255) as u8);
        let color = theme::step_color(class).gamma_multiply(b.clamp(0.15, 1.0));
        let r = Rect::from_x_y_ranges(left + col as f32..=left + col as f32 + 1.0, steps_y);
        mesh.add_colored_rect(r, color);
    }
}

/// The track's counter rows under its steps: each named with its range, or "not in the trace", and drawn as one
/// quad per run of columns of the same height and colour.
fn counter_rows(
    p: &Paint<'_>,
    track: &EngineTrack,
    steps_y: egui::Rangef,
    column_max: &[[f32; 4]],
    mesh: &mut egui::Mesh,
) {
    let (painter, frame) = (p.painter, p.areas);
    let font = FontId::proportional(11.0);
    for (c, label) in COUNTERS.iter().enumerate() {
        let y0 = steps_y.max + 2.0 + c as f32 * theme::COUNTER_ROW_HEIGHT;
        let y1 = y0 + theme::COUNTER_ROW_HEIGHT - 2.0;
        let scale = track.max_counters[c];
        if !track.present[c] {
            painter.text(
                pos2(frame.labels_x + 8.0, f32::midpoint(y0, y1)),
                Align2::LEFT_CENTER,
                format!("{label}: not in the trace"),
                font.clone(),
                theme::MUTED_TEXT,
            );
            continue;
        }
        let range = if c == 2 {
            "0-100 %".to_owned()
        } else {
            format!("0-{}", scale.round())
        };
        painter.text(
            pos2(frame.labels_x + 8.0, f32::midpoint(y0, y1)),
            Align2::LEFT_CENTER,
            format!("{label} {range}"),
            font.clone(),
            theme::MUTED_TEXT,
        );
        let mut run: Option<(usize, f32, egui::Color32)> = None;
        let left = frame.time.left();
        let flush = |mesh: &mut egui::Mesh, run: Option<(usize, f32, egui::Color32)>, end: usize| {
            if let Some((start, h, color)) = run.filter(|r| r.1 > 0.0) {
                let r = Rect::from_min_max(pos2(left + start as f32, y1 - h), pos2(left + end as f32, y1));
                mesh.add_colored_rect(r, color);
            }
        };
        for (col, values) in column_max.iter().enumerate() {
            let v = values[c];
            let h = ((v / scale).clamp(0.0, 1.0) * (y1 - y0) * 2.0).round() / 2.0;
            let color = if c == 2 && v >= 0.95 {
                theme::COUNTER_ALERT_COLOR
            } else {
                theme::COUNTER_COLOR
            };
            match run {
                Some((_, rh, rc)) if rh == h && rc == color => {}
                _ => {
                    flush(mesh, run, col);
                    run = Some((col, h, color));
                }
            }
        }
        flush(mesh, run, column_max.len());
    }
}
