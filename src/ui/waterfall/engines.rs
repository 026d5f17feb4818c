//! The engine tracks of the waterfall: per source, its steps coloured by prefill share (a density strip when
//! zoomed out past a step per point), and its counter rows (batch size, prefill tokens, KV use, waiting), each
//! saying "not in the trace" when the source lacks it.

use eframe::egui::{self, Align2, FontId, Rect, Stroke, pos2};

use super::{Hover, Paint, draw_items};
use crate::ui::theme;
use crate::view::layout;
use crate::view::lod::{RenderItem, compute_render_items, visible};
use crate::view::step_summary::{COUNTERS, counter_values};

pub(super) fn engine_block_height() -> f32 {
    theme::ENGINE_ROW_HEIGHT + theme::COUNTER_ROW_HEIGHT * COUNTERS.len() as f32 + 6.0
}

pub(super) fn draw_engines(p: &Paint<'_>, hover: &mut Option<Hover>) {
    let Paint {
        ui,
        painter,
        areas: frame,
        vp,
        view,
        pointer,
    } = *p;
    let trace = &view.trace;
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
    let font = FontId::proportional(11.0);
    let mut mesh = egui::Mesh::default();
    for (k_track, track) in view.engines.iter().enumerate() {
        let top = frame.engines_top + k_track as f32 * engine_block_height() + 2.0;
        let steps_y = egui::Rangef::new(top, top + theme::ENGINE_ROW_HEIGHT - 2.0);
        // A disaggregated deployment's instances say what they did, unless their name does already.
        let name = track.role.label(trace.label(track.source).unwrap_or("engine"));
        painter.text(
            pos2(frame.labels_x, steps_y.center()),
            Align2::LEFT_CENTER,
            name,
            FontId::proportional(12.0),
            ui.visuals().strong_text_color(),
        );
        let rows = trace.iterations_of_source(track.source);
        let vis = visible(&track.spans, vp);
        let columns = frame.time.width().ceil().max(1.0) as usize;
        // Zoomed out past one step per point, the step row becomes a density strip: each point column is as opaque
        // as the share of its time the engine was busy, and coloured by its prefill share of tokens. Far out, the
        // columns come from the track's buckets, not from every step.
        let summary = (vis.len() > columns)
            .then(|| track.summary.columns(vp, columns))
            .flatten();
        let density_mode = vis.len() > columns;
        if density_mode {
            // The step under the pointer, found by time.
            if let Some(px) = pointer
                .filter(|p| steps_y.contains(p.y))
                .map(|p| f64::from(p.x - frame.time.left()))
            {
                let t = vp.time_from_x(px);
                let slack = vp.ns_per_point as i64;
                let k = track.spans.partition_point(|s| s.start_ns <= t + slack);
                if let Some(index) = k.checked_sub(1).filter(|&i| track.spans[i].end_ns >= t - slack) {
                    let s = track.spans[index];
                    *hover = Some(Hover::Step {
                        track: k_track,
                        item: RenderItem::Span {
                            index,
                            x0: vp.x_from_time(s.start_ns),
                            x1: vp.x_from_time(s.end_ns),
                        },
                    });
                }
            }
        } else {
            let items = compute_render_items(&track.spans, vp);
            if let Some(item) = draw_items(
                &mut mesh,
                frame,
                &items,
                &track.spans,
                steps_y,
                theme::step_color,
                pointer,
            ) {
                *hover = Some(Hover::Step { track: k_track, item });
            }
        }
        // Counter rows: per point column, the largest value among the steps in it; and the tokens by kind.
        let (column_max, column_tokens, busy) = if let Some(c) = summary {
            (c.max, c.tokens, c.busy)
        } else {
            let mut column_max = vec![[0.0f32; 4]; columns];
            let mut column_tokens = vec![(0u64, 0u64); columns];
            for i in vis.clone() {
                let s = track.spans[i];
                let (x0, x1) = (vp.x_from_time(s.start_ns).max(0.0), vp.x_from_time(s.end_ns).max(0.0));
                let (c0, c1) = ((x0 as usize).min(columns - 1), (x1 as usize).min(columns - 1));
                let values = counter_values(trace, rows.start + i);
                for col in &mut column_max[c0..=c1] {
                    for (m, v) in col.iter_mut().zip(values) {
                        *m = m.max(v);
                    }
                }
                let (p, d) = layout::prefill_mix(trace, rows.start + i);
                for col in &mut column_tokens[c0..=c1] {
                    col.0 += p;
                    col.1 += d;
                }
            }
            let busy = if density_mode {
                crate::view::lod::density(&track.spans, vp, columns)
            } else {
                Vec::new()
            };
            (column_max, column_tokens, busy)
        };
        if density_mode {
            let left = frame.time.left();
            for (col, (&b, &(p, d))) in busy.iter().zip(&column_tokens).enumerate() {
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
            // One quad per run of columns of the same height and colour.
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
                        flush(&mut mesh, run, col);
                        run = Some((col, h, color));
                    }
                }
            }
            flush(&mut mesh, run, column_max.len());
        }
    }
    // Spans and markers of times before or after the view stay inside the time axis.
    painter
        .with_clip_rect(painter.clip_rect().intersect(frame.time))
        .add(egui::Shape::mesh(mesh));
    let bottom = frame.engines_top + engine_block_height() * view.engines.len() as f32;
    painter.hline(frame.requests.x_range(), bottom, Stroke::new(1.0, theme::GRID));
}
