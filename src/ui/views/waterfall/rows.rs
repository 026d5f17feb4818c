//! The waterfall's request rows: how many the layout has and how tall they are, which are alive in a time range,
//! the scroll that keeps a request or the requests alive in view, and the request under a point.

use eframe::egui::Pos2;

use super::{Areas, WaterfallState, theme};
use crate::trace::Trace;
use crate::view::lanes::{TrackLayout, request_extent};
use crate::view::layout;
use crate::view::trace_view::TraceView;
use crate::view::viewport::Viewport;

/// Lanes are never lower than this, points: below it scroll.
pub(super) const MIN_LANE_HEIGHT: f32 = 1.0;

/// How many request rows the layout has.
pub(super) fn row_count(view: &TraceView, layout: TrackLayout) -> usize {
    match layout {
        TrackLayout::Tracks => view.rows.len(),
        TrackLayout::Lanes => view.lanes().len(),
    }
}

/// The row of request `r`, when shown.
pub(super) fn row_of(view: &TraceView, layout: TrackLayout, r: u32) -> Option<usize> {
    match layout {
        TrackLayout::Tracks => view.rows.iter().position(|&x| x == r),
        TrackLayout::Lanes => view.lanes().lane_of(r),
    }
}

/// True when row `k` has a request alive at some time in `from_ns..=to_ns`.
pub(super) fn row_alive(view: &TraceView, layout: TrackLayout, k: usize, from_ns: i64, to_ns: i64) -> bool {
    match layout {
        TrackLayout::Tracks => view
            .rows
            .get(k)
            .is_some_and(|&r| is_alive(&view.trace, r, from_ns, to_ns)),
        TrackLayout::Lanes => !view.lanes().in_range(k, from_ns, to_ns).is_empty(),
    }
}

/// The height of a request row: a track's, or for lanes as low as fits them all in `height` (down to
/// [`MIN_LANE_HEIGHT`]).
pub(super) fn row_height_for(layout: TrackLayout, rows: usize, height: f32) -> f32 {
    match layout {
        TrackLayout::Tracks => theme::ROW_HEIGHT,
        TrackLayout::Lanes => (height / rows.max(1) as f32).clamp(MIN_LANE_HEIGHT, theme::ROW_HEIGHT),
    }
}

/// True when request `r` is alive (arrived, not finished) at some time in `from_ns..=to_ns`.
pub(super) fn is_alive(trace: &Trace, r: u32, from_ns: i64, to_ns: i64) -> bool {
    request_extent(trace, r).is_some_and(|(a, b)| b >= from_ns && a <= to_ns)
}

/// The first row with a request alive in `from_ns..=to_ns`.
pub(super) fn first_alive_row(view: &TraceView, layout: TrackLayout, from_ns: i64, to_ns: i64) -> Option<usize> {
    (0..row_count(view, layout)).find(|&k| row_alive(view, layout, k, from_ns, to_ns))
}

/// Scrolls the request tracks so that request `r`'s row shows two rows below the top (or as far as the rows go),
/// unless it is on screen already; nothing when the request is filtered out.
pub fn scroll_to_request(state: &mut WaterfallState, view: &TraceView, r: u32) {
    let Some(k) = row_of(view, state.layout, r) else {
        return;
    };
    let h = state.row_height();
    let top = k as f32 * h;
    let on_screen = state
        .requests_rect
        .is_some_and(|rect| top >= state.scroll_y && top + h <= state.scroll_y + rect.height());
    if !on_screen {
        state.scroll_y = (k as f32 - 2.0).max(0.0) * h;
    }
}

/// When none of the request rows on screen (`height` points of them) has a request alive in `vp`, scrolls to the
/// first that has.
pub(super) fn scroll_to_alive(state: &mut WaterfallState, view: &TraceView, vp: &Viewport, height: f32) {
    let (layout, h) = (state.layout, state.row_height());
    let (from, to) = (vp.start_ns, vp.end_ns());
    let mut on_screen = layout::visible_rows(state.scroll_y, h, height, row_count(view, layout));
    if !on_screen.any(|k| row_alive(view, layout, k, from, to))
        && let Some(k) = first_alive_row(view, layout, from, to)
    {
        state.scroll_y = k as f32 * h;
    }
}

/// After the time axis was moved from outside (the waterfall it is linked to in a comparison), brings a track alive
/// in the new range into view as a zoom of its own does.
pub fn follow_axis(state: &mut WaterfallState, view: &TraceView) {
    if let (Some(vp), Some(rect)) = (state.viewport, state.requests_rect) {
        scroll_to_alive(state, view, &vp, rect.height());
    }
}

/// Scrolls the request rows to the first with a request alive in `from_ns..=to_ns`.
pub fn scroll_to_time(state: &mut WaterfallState, view: &TraceView, from_ns: i64, to_ns: i64) {
    if let Some(k) = first_alive_row(view, state.layout, from_ns, to_ns) {
        state.scroll_y = k as f32 * state.row_height();
    }
}

/// The request under a point: a track's, or in lanes the one of the lane at that time (or within 3 points of it).
pub(super) fn request_at(
    frame: &Areas,
    view: &TraceView,
    state: &WaterfallState,
    vp: &Viewport,
    p: Pos2,
) -> Option<u32> {
    if !frame.requests.contains(p) {
        return None;
    }
    let k = ((p.y - frame.requests.top() + state.scroll_y) / state.row_height())
        .floor()
        .max(0.0) as usize;
    match state.layout {
        TrackLayout::Tracks => view.rows.get(k).copied(),
        TrackLayout::Lanes => {
            let t = vp.time_from_x(f64::from(p.x - frame.time.left()));
            let slack = (3.0 * vp.ns_per_point) as i64;
            view.lanes().at(k, t, slack)
        }
    }
}
