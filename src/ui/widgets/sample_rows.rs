//! The sampled counters of instances without steps (a server log's stats lines: vLLM's every 10 s, SGLang's per
//! batch), drawn under the engine tracks: a row per counter, each reading held until the next, since the log says
//! nothing of what happened between two readings. A counter the log does not give says so instead of drawing zero.

use eframe::egui::{self, Align2, FontId, Rect, Ui, pos2};

use crate::ui::widgets::theme;
use crate::view::trace_view::{SAMPLE_COUNTERS, TraceView, sample_values};
use crate::view::viewport::Viewport;

/// The height of the line naming a track.
const NAME_ROW: f32 = 16.0;

/// The height of a counter's row: taller than a step counter's, since a log's few readings are all there is.
const ROW: f32 = 30.0;

/// The height of one source's block.
fn track_height() -> f32 {
    NAME_ROW + ROW * SAMPLE_COUNTERS.len() as f32 + 6.0
}

/// The height of every sample track together (0 without any).
pub fn block_height(view: &TraceView) -> f32 {
    view.sampled.len() as f32 * track_height()
}

/// Draws the sample tracks from `top`: names at `labels_x`, counters across `time`.
pub fn draw(ui: &Ui, painter: &egui::Painter, time: Rect, labels_x: f32, top: f32, vp: &Viewport, view: &TraceView) {
    let trace = &view.trace;
    let font = FontId::proportional(11.0);
    let mut mesh = egui::Mesh::default();
    for (k, track) in view.sampled.iter().enumerate() {
        let track_top = top + k as f32 * track_height();
        let name = trace.label(track.source).unwrap_or("engine");
        let times = &trace.samples.time_ns[track.rows.clone()];
        painter.text(
            pos2(labels_x, track_top + NAME_ROW / 2.0),
            Align2::LEFT_CENTER,
            format!("{name}: {} counter readings (no steps in the trace)", times.len()),
            FontId::proportional(12.0),
            ui.visuals().strong_text_color(),
        );
        for (c, label) in SAMPLE_COUNTERS.iter().enumerate() {
            let y0 = track_top + NAME_ROW + c as f32 * ROW;
            let y1 = y0 + ROW - 2.0;
            let text = if !track.present[c] {
                format!("{label}: not in the log")
            } else if c == 2 {
                format!("{label} 0-100 %")
            } else {
                format!("{label} 0-{}", track.max[c].round())
            };
            painter.text(
                pos2(labels_x + 8.0, f32::midpoint(y0, y1)),
                Align2::LEFT_CENTER,
                text,
                font.clone(),
                theme::MUTED_TEXT,
            );
            if !track.present[c] {
                continue;
            }
            for (j, row) in track.rows.clone().enumerate() {
                let Some(v) = sample_values(trace, row)[c] else {
                    continue;
                };
                let x0 = time.left() + vp.x_from_time(times[j]) as f32;
                // Held until the next reading; the last one a few points wide.
                let x1 = times
                    .get(j + 1)
                    .map_or(x0 + 3.0, |&t| time.left() + vp.x_from_time(t) as f32);
                if x1 < time.left() || x0 > time.right() {
                    continue;
                }
                let h = (v / track.max[c]).clamp(0.0, 1.0) * (y1 - y0);
                let color = if c == 2 && v >= 0.95 {
                    theme::COUNTER_ALERT_COLOR
                } else {
                    theme::COUNTER_COLOR
                };
                mesh.add_colored_rect(Rect::from_min_max(pos2(x0, y1 - h), pos2(x1.max(x0 + 1.0), y1)), color);
            }
        }
    }
    painter
        .with_clip_rect(painter.clip_rect().intersect(time))
        .add(egui::Shape::mesh(mesh));
}
