//! The wide-angle view: a time ruler, one engine track per source (its steps coloured by prefill share, with
//! counter rows: batch size, prefill tokens, KV use, waiting), then one track per request (queue, prefill chunks,
//! decode steps, preemptions; first-token and finish markers). Navigation follows Perfetto and Tracy: Ctrl+wheel
//! zooms at the pointer, W/S zoom, A/D pan, drag on the ruler pans, drag on the tracks selects a time range, F
//! fits the selection, double-click resets; the wheel scrolls the request tracks, which are virtualised. The
//! request tracks are one per request, or packed into lanes of requests that do not overlap (`view::lanes`), as many
//! as the run's peak concurrency, with rows as low as it takes to fit them on screen.
//!
//! What is drawn comes from `view` (viewport, level of detail, layout): this module turns it into shapes and input
//! into state changes, and nothing else; `engines` draws the engine tracks, `lanes` the requests packed into lanes,
//! `rows` places and scrolls the request rows,
//! `hover` what is under the pointer.

mod engines;
mod hover;
mod lanes;
mod load;
mod rows;

pub use self::load::ROW as LOAD_ROW_HEIGHT;
pub use self::rows::{follow_axis, scroll_to_request, scroll_to_time};

use eframe::egui::{self, Align2, FontId, Key, Pos2, Rect, Sense, Stroke, Ui, pos2, vec2};

use self::engines::{draw_engines, engine_block_height};
use self::hover::hover_ui;
use self::lanes::{LanesCache, draw_lanes};
use self::rows::{request_at, row_count, row_height_for, scroll_to_alive};
use crate::trace::Trace;
use crate::ui::widgets::command::Command;
use crate::ui::widgets::sample_rows;
use crate::ui::widgets::theme;
use crate::view::lanes::{LaneSamples, Runs, TrackLayout, class_runs, request_extent};
use crate::view::layout;
use crate::view::lod::{RenderItem, Span, compute_render_items};
use crate::view::ruler;
use crate::view::trace_view::TraceView;
use crate::view::viewport::Viewport;

/// A drag in progress.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Drag {
    /// Selecting a time range from this time.
    Select { anchor_ns: i64 },
    /// Panning (started on the ruler).
    Pan,
}

/// What the waterfall remembers between frames.
#[derive(Debug, Default)]
pub struct WaterfallState {
    /// The time axis; `None` fits the whole trace on the next frame.
    pub viewport: Option<Viewport>,
    /// How far the request tracks are scrolled down, points.
    pub scroll_y: f32,
    /// The drag-selected time range, ns.
    pub range: Option<(i64, i64)>,
    /// A time range to fit across the width on the next frame (when the width is known), ns.
    pub fit: Option<(i64, i64)>,
    /// Time under the pointer, for the status bar (regenerated each frame).
    pub hover_ns: Option<i64>,
    /// Time under the pointer in a panel on the same axis (the timeline), marked across the tracks.
    pub linked_hover_ns: Option<i64>,
    /// Where the time axis was drawn, screen points (regenerated each frame).
    pub time_rect: Option<Rect>,
    /// Where the request tracks were drawn, screen points (regenerated each frame).
    pub requests_rect: Option<Rect>,
    /// Where the load strip's first instance row starts (its rows follow, [`LOAD_ROW_HEIGHT`] apart), when drawn.
    pub load_rows_top: Option<f32>,
    /// One track per request, or lanes (set by the app from its settings).
    pub layout: TrackLayout,
    /// The height of a request row in the last frame, points (0 before the first).
    pub row_height: f32,
    /// The layout of the last frame.
    drawn_layout: Option<TrackLayout>,
    /// The lanes' mesh of the last frame.
    lanes_cache: Option<LanesCache>,
    /// A live recording's present: requests without an end are drawn open up to it (set by the app).
    pub open_until_ns: Option<i64>,
    /// A live recording's tokens read since the snapshot on screen: (request row, arrival), sorted; each a tick on
    /// its request's open bar (set by the app).
    pub fresh: Vec<(u32, i64)>,
    /// A live recording's requests sent since the snapshot on screen, drawn below its tracks (set by the app).
    pub pending: Vec<PendingRow>,
    drag: Option<Drag>,
}

/// A request of a live recording not yet in the snapshot on screen: drawn below the tracks, open from its send (or
/// its first token read) to the present, with a tick per token read, until the next snapshot has it.
#[derive(Debug, Clone, PartialEq)]
pub struct PendingRow {
    /// Its id.
    pub id: String,
    /// Its send, or its first token read, Unix ns.
    pub from_ns: i64,
    /// Its tokens' arrivals, in order.
    pub ticks: Vec<i64>,
}

impl WaterfallState {
    /// Forgets what was drawn of the last trace (the lanes' mesh) when the trace changed in place (grew, live).
    pub fn forget_drawn(&mut self) {
        self.lanes_cache = None;
    }

    /// The height of a request row: the last frame's, or a track's before the first frame.
    pub fn row_height(&self) -> f32 {
        if self.row_height > 0.0 {
            self.row_height
        } else {
            theme::ROW_HEIGHT
        }
    }
}

/// A request this wide on screen or wider (in lanes of 8 points or more) is drawn with every stage (each decode
/// step); narrower, as its queue, prefill and decode from its timestamps, rasterised with its lane (points).
const DETAIL_WIDTH: f32 = 48.0;

/// What the pointer is over, to describe in a tooltip.
enum Hover {
    Step {
        track: usize,
        item: RenderItem,
    },
    Stage {
        request: u32,
        item: RenderItem,
        spans: Vec<Span>,
    },
    /// A request drawn small (its queue, prefill and decode only).
    Request {
        request: u32,
    },
    Ruler {
        t_ns: i64,
    },
    /// An instance's row of the load strip at a time, with its counts in the column there.
    Load {
        row: usize,
        t_ns: i64,
        counts: Option<(u32, u32)>,
    },
}

/// Geometry of one frame.
/// Where the parts of the waterfall go in this frame.
#[derive(Debug, Clone, Copy)]
struct Areas {
    /// The whole waterfall, labels included.
    whole: Rect,
    time: Rect,
    labels_x: f32,
    ruler: Rect,
    /// The top of the load rows (below the ruler).
    load_top: f32,
    engines_top: f32,
    /// The top of the sampled counters' rows (below the engines).
    sampled_top: f32,
    requests: Rect,
}

/// What every part of the waterfall draws with in one frame.
#[derive(Clone, Copy)]
struct Paint<'a> {
    ui: &'a Ui,
    painter: &'a egui::Painter,
    areas: &'a Areas,
    vp: &'a Viewport,
    view: &'a TraceView,
    /// Where the pointer is, when over the waterfall.
    pointer: Option<Pos2>,
}

/// What the request area says when it has no row: the filter hides them all, or the trace has none.
fn no_rows_text(trace: &Trace) -> &'static str {
    if trace.request_count() == 0 {
        "No requests in this trace: its source gives an engine's steps or counters, not requests."
    } else {
        "No request matches the filter."
    }
}

/// Draws the waterfall in the remaining space of `ui` and handles its input: its areas laid out, the input turned
/// into a viewport and commands, the rows placed, then everything painted.
pub fn waterfall_ui(
    ui: &mut Ui,
    view: &TraceView,
    state: &mut WaterfallState,
    selected: Option<u32>,
    out: &mut Vec<Command>,
) {
    let rect = ui.available_rect_before_wrap();
    let response = ui.allocate_rect(rect, Sense::click_and_drag());
    let frame = layout_areas(rect, view);
    let time = frame.time;
    let width = f64::from(time.width().max(1.0));
    let mut vp = state.viewport.unwrap_or_else(|| view.full_view(width));
    vp.width = width;
    if let Some((a, b)) = state.fit.take() {
        vp = Viewport::fit(a, b, width);
        state.viewport = Some(vp);
    }
    let vp = navigate(ui, &response, (view, selected), &frame, state, vp, out);
    // When the time range changed and none of the tracks on screen is alive in it, bring the first that is into
    // view: zoomed into minute 70, tracks of minute 1 would show nothing.
    if state
        .viewport
        .is_some_and(|old| old.start_ns != vp.start_ns || old.ns_per_point != vp.ns_per_point)
    {
        scroll_to_alive(state, view, &vp, frame.requests.height());
    }
    let row_h = place_rows(view, state, selected, &frame, &vp);
    if response.clicked()
        && let Some(p) = response.interact_pointer_pos()
        && let Some(r) = request_at(&frame, view, state, &vp, p)
    {
        out.push(Command::Select {
            request: Some(r),
            scroll: false,
        });
    }
    let pointer = response.hover_pos();
    state.viewport = Some(vp);
    state.time_rect = Some(time);
    state.requests_rect = Some(frame.requests);
    state.hover_ns = pointer
        .filter(|p| time.contains(*p))
        .map(|p| vp.time_from_x(f64::from(p.x - time.left())));
    let painter = ui.painter_at(rect);
    let paint = Paint {
        ui,
        painter: &painter,
        areas: &frame,
        vp: &vp,
        view,
        pointer,
    };
    if let Some(h) = paint_waterfall(&paint, state, selected, row_h)
        && state.drag.is_none()
    {
        response.on_hover_ui_at_pointer(|ui| hover_ui(ui, view, h));
    }
}

/// Where each part of the waterfall goes in `rect`: the ruler, the load rows, the engine tracks, the sampled
/// counters, and the request tracks below them.
fn layout_areas(rect: Rect, view: &TraceView) -> Areas {
    let time = Rect::from_min_max(pos2(rect.left() + theme::LABEL_WIDTH, rect.top()), rect.max);
    let ruler = Rect::from_min_size(time.min, vec2(time.width(), theme::RULER_HEIGHT));
    let load_top = ruler.bottom();
    let engines_top = load_top + load::block_height(view);
    let engines_height = match (view.engines.is_empty(), view.sampled.is_empty()) {
        (false, _) => engine_block_height() * view.engines.len() as f32,
        // A line saying there is no engine track, unless sampled counters stand in for one.
        (true, true) => 20.0,
        (true, false) => 0.0,
    };
    let sampled_top = engines_top + engines_height;
    let requests = Rect::from_min_max(
        pos2(rect.left(), sampled_top + sample_rows::block_height(view)),
        rect.max,
    );
    Areas {
        whole: rect,
        time,
        labels_x: rect.left() + 4.0,
        ruler,
        load_top,
        engines_top,
        sampled_top,
        requests,
    }
}

/// The viewport after this frame's input (zoom, pan, keys, drags) over the waterfall; a range selected or cleared
/// is pushed to `out`. `on`: the trace's view and the selected request (F fits it).
fn navigate(
    ui: &Ui,
    response: &egui::Response,
    (view, selected): (&TraceView, Option<u32>),
    frame: &Areas,
    state: &mut WaterfallState,
    mut vp: Viewport,
    out: &mut Vec<Command>,
) -> Viewport {
    let time = frame.time;
    let width = vp.width;
    let pointer = response.hover_pos();
    let x_of = |p: Pos2| f64::from(p.x - time.left());
    if let Some(p) = pointer.filter(|p| time.contains(*p)) {
        let zoom = ui.input(egui::InputState::zoom_delta);
        if (zoom - 1.0).abs() > 1e-4 {
            vp = vp.zoomed_at(x_of(p), f64::from(zoom));
        }
    }
    if response.hovered() {
        let scroll = ui.input(|i| i.smooth_scroll_delta);
        if scroll.x != 0.0 {
            vp = vp.panned(-f64::from(scroll.x));
        }
        state.scroll_y -= scroll.y;
    }
    if !ui.ctx().egui_wants_keyboard_input() {
        let anchor = pointer.filter(|p| time.contains(*p)).map_or(width / 2.0, x_of);
        ui.input(|i| {
            if i.key_pressed(Key::W) {
                vp = vp.zoomed_at(anchor, 1.25);
            }
            if i.key_pressed(Key::S) {
                vp = vp.zoomed_at(anchor, 0.8);
            }
            if i.key_pressed(Key::A) {
                vp = vp.panned(-width * 0.1);
            }
            if i.key_pressed(Key::D) {
                vp = vp.panned(width * 0.1);
            }
            if i.key_pressed(Key::Escape) && state.range.is_some() {
                state.range = None;
                out.push(Command::ClearRange);
            }
        });
        if ui.input(|i| i.key_pressed(Key::F)) {
            let target = state
                .range
                .or_else(|| selected.and_then(|r| request_extent(&view.trace, r)));
            if let Some((a, b)) = target {
                let pad = ((b - a) / 20).max(1_000);
                vp = Viewport::fit(a - pad, b + pad, width);
            }
        }
    }
    if response.double_clicked() {
        vp = view.full_view(width);
    }
    if response.drag_started()
        && let Some(p) = ui
            .input(|i| i.pointer.press_origin())
            .or_else(|| response.interact_pointer_pos())
    {
        // From where the button went down, not where the drag was recognised a few points later.
        state.drag = if frame.ruler.contains(p) {
            Some(Drag::Pan)
        } else if time.contains(p) {
            Some(Drag::Select {
                anchor_ns: vp.time_from_x(x_of(p)),
            })
        } else {
            None
        };
    }
    if response.dragged() {
        match state.drag {
            Some(Drag::Pan) => vp = vp.panned(-f64::from(response.drag_delta().x)),
            Some(Drag::Select { anchor_ns }) => {
                if let Some(p) = response.interact_pointer_pos() {
                    let t = vp.time_from_x(x_of(p).clamp(0.0, width));
                    state.range = Some((anchor_ns.min(t), anchor_ns.max(t)));
                }
            }
            None => {}
        }
    }
    if response.drag_stopped() {
        if let (Some(Drag::Select { .. }), Some((a, b))) = (state.drag, state.range) {
            if vp.x_from_time(b) - vp.x_from_time(a) >= 3.0 {
                out.push(Command::AnalyseRange(a, b));
            } else {
                state.range = None;
                out.push(Command::ClearRange);
            }
        }
        state.drag = None;
    }
    vp
}

/// The request rows' height in this layout, and their scroll kept in range (a layout just changed keeps the
/// selected request in view, else the requests alive in the view).
fn place_rows(
    view: &TraceView,
    state: &mut WaterfallState,
    selected: Option<u32>,
    frame: &Areas,
    vp: &Viewport,
) -> f32 {
    let rows = row_count(view, state.layout);
    let row_h = row_height_for(state.layout, rows, frame.requests.height());
    state.row_height = row_h;
    if state.drawn_layout != Some(state.layout) {
        if state.drawn_layout.is_some() {
            state.scroll_y = 0.0;
            state.requests_rect = Some(frame.requests);
            match selected {
                Some(r) => scroll_to_request(state, view, r),
                None => scroll_to_alive(state, view, vp, frame.requests.height()),
            }
        }
        state.drawn_layout = Some(state.layout);
    }
    // A live recording's requests not in the snapshot yet are rows below the tracks or lanes: they can be scrolled
    // to.
    let total_rows_height = (rows + state.pending.len()) as f32 * row_h;
    state.scroll_y = state
        .scroll_y
        .clamp(0.0, (total_rows_height - frame.requests.height() + row_h).max(0.0));
    row_h
}

/// Paints the waterfall of this frame: the grid, the ruler, the load rows, the engines, the sampled counters, the
/// request rows (tracks or lanes), then the linked time, the range selected and the cursor over them. Returns what
/// is under the pointer.
fn paint_waterfall(p: &Paint<'_>, state: &mut WaterfallState, selected: Option<u32>, row_h: f32) -> Option<Hover> {
    let (painter, frame, vp, view) = (p.painter, p.areas, p.vp, p.view);
    let time = frame.time;
    painter.rect_filled(frame.whole, 0.0, p.ui.visuals().extreme_bg_color);
    let step = ruler::tick_step_ns(vp, 90.0);
    let ticks = ruler::ticks(vp, view.t0_ns, step);
    let x_at = |t: i64| time.left() + vp.x_from_time(t) as f32;
    for &t in &ticks {
        painter.vline(x_at(t), time.y_range(), Stroke::new(1.0, theme::GRID));
    }
    let mut hover = None;
    draw_ruler(p, &ticks, step, &mut hover);
    state.load_rows_top = load::draw(p, frame.load_top, &mut hover);
    draw_engines(p, &mut hover);
    sample_rows::draw(p.ui, painter, time, frame.labels_x, frame.sampled_top, vp, view);
    let rows_at = RowsAt {
        scroll_y: state.scroll_y,
        row_h,
        open_until_ns: state.open_until_ns,
        fresh: &state.fresh,
        pending: &state.pending,
    };
    match state.layout {
        TrackLayout::Tracks => draw_requests(p, rows_at, selected, &mut hover),
        TrackLayout::Lanes => draw_lanes(p, rows_at, selected, &mut hover, &mut state.lanes_cache),
    }
    if let Some(t) = state.linked_hover_ns.filter(|_| state.hover_ns.is_none()) {
        let x = x_at(t);
        if time.x_range().contains(x) {
            painter.vline(x, time.y_range(), Stroke::new(1.0, theme::SELECTION_EDGE));
        }
    }
    if let Some((a, b)) = state.range {
        let (x0, x1) = (x_at(a).max(time.left()), x_at(b).min(time.right()));
        if x1 > x0 {
            let shade = Rect::from_x_y_ranges(x0..=x1, time.y_range());
            painter.rect_filled(shade, 0.0, theme::SELECTION_FILL);
            painter.vline(x0, time.y_range(), Stroke::new(1.0, theme::SELECTION_EDGE));
            painter.vline(x1, time.y_range(), Stroke::new(1.0, theme::SELECTION_EDGE));
            painter.text(
                pos2(f32::midpoint(x0, x1), frame.ruler.bottom() + 2.0),
                Align2::CENTER_TOP,
                ruler::format_duration(b - a),
                FontId::proportional(12.0),
                theme::SELECTION_EDGE,
            );
        }
    }
    if let Some(x) = p.pointer.filter(|q| time.contains(*q)).map(|q| q.x) {
        painter.vline(x, time.y_range(), Stroke::new(1.0, theme::CURSOR));
    }
    hover
}

/// Where the request rows are scrolled to, and how high they are.
#[derive(Clone, Copy)]
struct RowsAt<'a> {
    scroll_y: f32,
    row_h: f32,
    /// A live recording's present (requests without an end are drawn open up to it).
    open_until_ns: Option<i64>,
    /// A live recording's tokens not yet in the trace: (request row, arrival), sorted.
    fresh: &'a [(u32, i64)],
    /// A live recording's requests not yet in the trace.
    pending: &'a [PendingRow],
}

fn draw_ruler(p: &Paint<'_>, ticks: &[i64], step: i64, hover: &mut Option<Hover>) {
    let Paint {
        painter,
        areas: frame,
        vp,
        view,
        pointer,
        ..
    } = *p;
    painter.rect_filled(frame.ruler, 0.0, theme::RULER_FILL);
    for &t in ticks {
        let x = frame.time.left() + vp.x_from_time(t) as f32;
        painter.text(
            pos2(x + 3.0, frame.ruler.center().y),
            Align2::LEFT_CENTER,
            ruler::format_relative(t - view.t0_ns, step),
            FontId::proportional(11.0),
            theme::MUTED_TEXT,
        );
    }
    painter.text(
        pos2(frame.labels_x, frame.ruler.center().y),
        Align2::LEFT_CENTER,
        "time since start",
        FontId::proportional(11.0),
        theme::MUTED_TEXT,
    );
    if let Some(p) = pointer.filter(|p| frame.ruler.contains(*p)) {
        *hover = Some(Hover::Ruler {
            t_ns: vp.time_from_x(f64::from(p.x - frame.time.left())),
        });
    }
}

/// Adds the render items of a track in `y` to `mesh` (plain quads: two triangles a span, no anti-aliasing fringe,
/// which is most of the cost of a frame with thousands of spans); returns the item under the pointer.
fn draw_items(
    mesh: &mut egui::Mesh,
    frame: &Areas,
    items: &[RenderItem],
    spans: &[Span],
    y: egui::Rangef,
    color: impl Fn(u8) -> egui::Color32,
    pointer: Option<Pos2>,
) -> Option<RenderItem> {
    let mut hovered = None;
    let left = frame.time.left();
    for item in items {
        let (x0, x1, class) = match item {
            RenderItem::Span { index, x0, x1 } => (*x0, *x1, spans[*index].class),
            RenderItem::Merged { x0, x1, class, .. } => (*x0, *x1, *class),
        };
        let r = Rect::from_x_y_ranges(
            (left + x0.max(-2.0) as f32)..=(left + x1.min(f64::from(frame.time.width()) + 2.0) as f32),
            y,
        );
        mesh.add_colored_rect(r, color(class));
        if matches!(item, RenderItem::Merged { .. }) {
            // Merged runs get a darker top edge, so they read as many steps, not one.
            let edge = Rect::from_x_y_ranges(r.x_range(), r.top()..=r.top() + 1.0);
            mesh.add_colored_rect(edge, theme::MERGED_EDGE);
        }
        if pointer.is_some_and(|p| r.expand2(vec2(1.0, 0.0)).contains(p)) {
            hovered = Some(item.clone());
        }
    }
    hovered
}

fn draw_requests(p: &Paint<'_>, at: RowsAt, selected: Option<u32>, hover: &mut Option<Hover>) {
    let Paint {
        ui,
        painter,
        areas: frame,
        vp,
        view,
        pointer,
    } = *p;
    let (scroll_y, row_h) = (at.scroll_y, at.row_h);
    let trace = &view.trace;
    let painter = painter.with_clip_rect(frame.requests);
    let area = frame.requests;
    if view.rows.is_empty() {
        painter.text(
            area.center(),
            Align2::CENTER_CENTER,
            no_rows_text(trace),
            FontId::proportional(13.0),
            theme::MUTED_TEXT,
        );
        return;
    }
    let rows = layout::visible_rows(scroll_y, row_h, area.height(), view.rows.len());
    let font = FontId::monospace(11.0);
    // Quads of every row in one mesh (cheap to draw), labels after it so nothing covers them.
    let mut mesh = egui::Mesh::default();
    let mut labels = Vec::new();
    let x_at = |t: i64| frame.time.left() + vp.x_from_time(t) as f32;
    for k in rows {
        let r = view.rows[k];
        let top = area.top() + k as f32 * row_h - scroll_y;
        let row_rect = Rect::from_min_max(pos2(area.left(), top), pos2(area.right(), top + row_h));
        if selected == Some(r) {
            mesh.add_colored_rect(row_rect, theme::SELECTED_ROW);
        } else if k % 2 == 1 {
            mesh.add_colored_rect(row_rect, theme::STRIPE_ROW);
        }
        let id = trace.request_id(r);
        let label = if id.chars().count() > 20 {
            format!("{}…", id.chars().take(19).collect::<String>())
        } else {
            id.to_owned()
        };
        labels.push((pos2(frame.labels_x, row_rect.center().y), label));
        let spans = layout::request_spans(trace, r);
        let items = compute_render_items(&spans, vp);
        let y = egui::Rangef::new(top + 3.0, top + row_h - 3.0);
        let color = |class| theme::stage_color(layout::stage_of_class(class));
        if let Some(item) = draw_items(&mut mesh, frame, &items, &spans, y, color, pointer) {
            *hover = Some(Hover::Stage {
                request: r,
                item,
                spans: spans.clone(),
            });
        }
        // Markers: first token (a tick above the track) and finish (a bar across it).
        if let Some(t) = crate::analysis::metrics::first_token_ns(trace, r) {
            let x = x_at(t);
            mesh.add_colored_rect(
                Rect::from_min_max(pos2(x - 0.75, top + 1.0), pos2(x + 0.75, top + 5.0)),
                theme::MARKER,
            );
        }
        if let Some(t) = crate::analysis::metrics::finish_ns(trace, r) {
            let x = x_at(t);
            let bar = Rect::from_min_max(pos2(x - 1.0, top + 2.0), pos2(x + 1.0, top + row_h - 2.0));
            mesh.add_colored_rect(bar, theme::MARKER);
        }
        // Live: a request without an end yet is open from what is known of it to the present.
        if at.open_until_ns.is_some() && trace.requests.finished_ns.at(r as usize).is_none() {
            let from = spans.last().map_or(trace.requests.arrival_ns[r as usize], |s| s.end_ns);
            draw_open(&mut mesh, at, r, from, egui::Rangef::new(top, top + row_h), &x_at);
        }
    }
    // Live: requests sent since the snapshot, below its tracks until the next snapshot has them.
    draw_pending(
        &mut mesh,
        &mut labels,
        at,
        view.rows.len(),
        (area, frame.labels_x),
        &x_at,
    );
    // Spans and markers of times before or after the view stay inside the time axis.
    painter
        .with_clip_rect(painter.clip_rect().intersect(frame.time))
        .add(egui::Shape::mesh(mesh));
    for (pos, label) in labels {
        painter.text(pos, Align2::LEFT_CENTER, label, font.clone(), ui.visuals().text_color());
    }
}

/// Live: request `r`, not ended, open from `from` (what is known of it) to the present, with the tokens read since
/// the snapshot as ticks on the open bar, on the row spanning `row`.
fn draw_open(mesh: &mut egui::Mesh, at: RowsAt, r: u32, from: i64, row: egui::Rangef, x_at: &impl Fn(i64) -> f32) {
    let first = at.fresh.partition_point(|f| f.0 < r);
    let ticks = at.fresh[first..].iter().take_while(|f| f.0 == r).map(|f| f.1);
    open_bar(mesh, (from, at.open_until_ns), ticks, row, x_at);
}

/// A bar open from `from` to `now` (when later) across the middle fifth of `row`, and a tick at each of `ticks`.
fn open_bar(
    mesh: &mut egui::Mesh,
    (from, now): (i64, Option<i64>),
    ticks: impl Iterator<Item = i64>,
    row: egui::Rangef,
    x_at: &impl Fn(i64) -> f32,
) {
    let (top, row_h) = (row.min, row.span());
    if let Some(now) = now.filter(|&n| n > from) {
        let open = Rect::from_x_y_ranges(x_at(from)..=x_at(now), top + row_h * 0.4..=top + row_h * 0.6);
        mesh.add_colored_rect(open, theme::OPEN_REQUEST);
    }
    for t in ticks {
        let x = x_at(t);
        let tick = Rect::from_min_max(pos2(x - 0.5, top + row_h * 0.25), pos2(x + 0.5, top + row_h * 0.75));
        mesh.add_colored_rect(tick, theme::FRESH_TOKEN);
    }
}

/// Live: the requests sent since the snapshot, on rows below its `below` rows (tracks or lanes), each open from its
/// send to the present with the tokens read since as ticks; `(area, labels_x)`: where rows are drawn, and their
/// labels.
fn draw_pending(
    mesh: &mut egui::Mesh,
    labels: &mut Vec<(Pos2, String)>,
    at: RowsAt,
    below: usize,
    (area, labels_x): (Rect, f32),
    x_at: &impl Fn(i64) -> f32,
) {
    let row_h = at.row_h;
    for (j, p) in at.pending.iter().enumerate() {
        let top = area.top() + (below + j) as f32 * row_h - at.scroll_y;
        if top > area.bottom() {
            break;
        }
        if top + row_h < area.top() {
            continue;
        }
        labels.push((pos2(labels_x, top + row_h / 2.0), p.id.clone()));
        let now = at
            .open_until_ns
            .unwrap_or(p.from_ns)
            .max(p.ticks.last().copied().unwrap_or(p.from_ns));
        let row = egui::Rangef::new(top, top + row_h);
        open_bar(mesh, (p.from_ns, Some(now)), p.ticks.iter().copied(), row, x_at);
    }
}
