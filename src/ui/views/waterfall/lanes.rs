//! The request rows packed into lanes (`view::lanes`): each lane's requests drawn stage by stage when there is room,
//! else as runs or one sample a column, into a mesh kept while the view stays the same; what is under the pointer.

use super::*;

/// What the lanes' mesh was made for: while it stays the same (the pointer moving, a repaint for another panel),
/// the mesh is drawn again as it is.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct LanesKey {
    view: [u64; 3],
    area: [u32; 4],
    scroll: [u32; 2],
    selected: Option<u32>,
    rows: (usize, u64),
}

/// The lanes' mesh of the last frame, with its outline and labels, and the samples of dense lanes (kept while
/// panning at one zoom).
#[derive(Debug, Clone)]
pub(super) struct LanesCache {
    key: LanesKey,
    mesh: std::sync::Arc<egui::Mesh>,
    outline: Option<Rect>,
    labels: Vec<(Pos2, String)>,
    samples: LaneSamples,
}

/// The request rows as lanes: each lane's requests in the view, drawn stage by stage when wide enough and the lanes
/// tall enough, else as runs of their queue, prefill and decode (from each request's times), or, when requests
/// outnumber half the point columns, as one sample a column. The mesh is kept while the view, the rows and the
/// selection stay the same.
pub(super) fn draw_lanes(
    p: &Paint<'_>,
    at: RowsAt,
    selected: Option<u32>,
    hover: &mut Option<Hover>,
    cache: &mut Option<LanesCache>,
) {
    let Paint {
        ui,
        painter,
        areas: frame,
        vp,
        view,
        pointer,
    } = *p;
    let painter = painter.with_clip_rect(frame.requests);
    let area = frame.requests;
    let lanes = view.lanes();
    if lanes.is_empty() {
        painter.text(
            area.center(),
            Align2::CENTER_CENTER,
            no_rows_text(&view.trace),
            FontId::proportional(13.0),
            theme::MUTED_TEXT,
        );
        return;
    }
    let key = LanesKey {
        view: [vp.start_ns as u64, vp.ns_per_point.to_bits(), vp.width.to_bits()],
        area: [area.left(), area.top(), area.right(), area.bottom()].map(f32::to_bits),
        scroll: [at.scroll_y.to_bits(), at.row_h.to_bits()],
        selected,
        rows: (view.rows.len(), view.rows_generation()),
    };
    let built = match cache.take() {
        Some(c) if c.key == key => c,
        c => build_lanes(frame, vp, view, at, selected, key, c),
    };
    let clip = painter.clip_rect().intersect(frame.time);
    painter
        .with_clip_rect(clip)
        .add(egui::Shape::Mesh(std::sync::Arc::clone(&built.mesh)));
    if let Some(r) = built.outline {
        painter.with_clip_rect(clip).rect_stroke(
            r,
            1.0,
            Stroke::new(2.0, theme::SELECTION_OUTLINE),
            egui::StrokeKind::Outside,
        );
    }
    // Live: what was read since the snapshot, drawn over the kept mesh each frame (it changes every frame).
    let live = live_overlay(frame, vp, view, at);
    if let Some((mesh, _)) = &live {
        painter.with_clip_rect(clip).add(egui::Shape::mesh(mesh.clone()));
    }
    let font = FontId::monospace(11.0);
    for (pos, label) in built.labels.iter().chain(live.iter().flat_map(|(_, l)| l)) {
        painter.text(
            *pos,
            Align2::LEFT_CENTER,
            label,
            font.clone(),
            ui.visuals().text_color(),
        );
    }
    if at.row_h < 11.0 {
        painter.text(
            pos2(frame.labels_x, area.top() + 2.0),
            Align2::LEFT_TOP,
            format!("{} lanes", lanes.len()),
            FontId::proportional(12.0),
            ui.visuals().strong_text_color(),
        );
    }
    *cache = Some(built);
    if let Some(h) = pointer.and_then(|p| lane_hover(frame, vp, view, at, p)) {
        *hover = Some(h);
    }
}

/// Live: on each visible lane whose last request has not ended, its open bar to the present and the tokens read
/// since the snapshot (an open request keeps its lane, so it is the lane's last); the requests sent since on rows
/// below the lanes. `None` for a trace that is not live.
fn live_overlay(
    frame: &Areas,
    vp: &Viewport,
    view: &TraceView,
    at: RowsAt,
) -> Option<(egui::Mesh, Vec<(Pos2, String)>)> {
    at.open_until_ns?;
    let (trace, lanes, area) = (&view.trace, view.lanes(), frame.requests);
    let mut mesh = egui::Mesh::default();
    let mut labels = Vec::new();
    let x_at = |t: i64| frame.time.left() + vp.x_from_time(t) as f32;
    for k in layout::visible_rows(at.scroll_y, at.row_h, area.height(), lanes.len()) {
        let (Some(&r), Some(&(_, end))) = (lanes.requests(k).last(), lanes.extents(k).last()) else {
            continue;
        };
        if trace.requests.finished_ns.at(r as usize).is_none() {
            let top = area.top() + k as f32 * at.row_h - at.scroll_y;
            let from = trace.finish_ns(r).unwrap_or(end);
            draw_open(&mut mesh, at, r, from, egui::Rangef::new(top, top + at.row_h), &x_at);
        }
    }
    draw_pending(&mut mesh, &mut labels, at, lanes.len(), (area, frame.labels_x), &x_at);
    Some((mesh, labels))
}

/// What the pointer is over in the lanes: a stage of a request drawn stage by stage, else the request.
fn lane_hover(frame: &Areas, vp: &Viewport, view: &TraceView, at: RowsAt, p: Pos2) -> Option<Hover> {
    if !frame.requests.contains(p) || !frame.time.x_range().contains(p.x) {
        return None;
    }
    let lanes = view.lanes();
    let k = ((p.y - frame.requests.top() + at.scroll_y) / at.row_h).floor().max(0.0) as usize;
    let slack = (3.0 * vp.ns_per_point) as i64;
    let request = lanes.at(k, vp.time_from_x(f64::from(p.x - frame.time.left())), slack)?;
    let (a, b) = request_extent(&view.trace, request)?;
    if at.row_h >= 8.0 && (vp.x_from_time(b) - vp.x_from_time(a)) as f32 >= DETAIL_WIDTH {
        let spans = layout::request_spans(&view.trace, request);
        let px = f64::from(p.x - frame.time.left());
        let item = compute_render_items(&spans, vp).into_iter().find(|item| match item {
            RenderItem::Span { x0, x1, .. } | RenderItem::Merged { x0, x1, .. } => {
                (*x0 - 1.0..=*x1 + 1.0).contains(&px)
            }
        });
        if let Some(item) = item {
            return Some(Hover::Stage { request, item, spans });
        }
    }
    Some(Hover::Request { request })
}

/// Makes the lanes' mesh, outline and labels for `key`.
fn build_lanes(
    frame: &Areas,
    vp: &Viewport,
    view: &TraceView,
    at: RowsAt,
    selected: Option<u32>,
    key: LanesKey,
    previous: Option<LanesCache>,
) -> LanesCache {
    let (scroll_y, row_h) = (at.scroll_y, at.row_h);
    let trace = &view.trace;
    let area = frame.requests;
    let lanes = view.lanes();
    let rows = layout::visible_rows(scroll_y, row_h, area.height(), lanes.len());
    // The last frame's samples, and its mesh's memory once egui is done with it (hundreds of thousands of vertices
    // when zoomed out over a big trace: allocated once, not every frame).
    let (mut samples, mut mesh) = match previous {
        Some(p) => (p.samples, std::sync::Arc::try_unwrap(p.mesh).unwrap_or_default()),
        None => Default::default(),
    };
    mesh.clear();
    let mut labels = Vec::new();
    let mut outline = None;
    let left = frame.time.left();
    let x_at = |t: i64| left + vp.x_from_time(t) as f32;
    let pad = if row_h >= 10.0 { 3.0 } else { (row_h / 6.0).floor() };
    let stage_color = |class| theme::stage_color(layout::stage_of_class(class));
    let mut runs = Runs::default();
    let width = frame.time.width().ceil().max(1.0) as usize;
    let selected_lane = selected.and_then(|r| lanes.lane_of(r));
    // Dense lanes are sampled on columns fixed to the view's start, a point wide: column `j` is at `x_j`.
    let npp = vp.ns_per_point;
    let offset = (vp.start_ns - view.t0_ns) as f64 / npp;
    let first = offset.floor() as i64;
    let columns = first..first + width as i64 + 1;
    let x_j = |j: i64| left + (j as f64 - offset) as f32;
    samples.grid(lanes, view.t0_ns, npp);
    for k in rows {
        let top = area.top() + k as f32 * row_h - scroll_y;
        let row_rect = Rect::from_min_max(pos2(area.left(), top), pos2(area.right(), top + row_h));
        if selected_lane == Some(k) {
            mesh.add_colored_rect(row_rect, theme::SELECTED_ROW);
        } else if k % 2 == 1 && row_h >= 6.0 {
            mesh.add_colored_rect(row_rect, theme::STRIPE_ROW);
        }
        if row_h >= 11.0 {
            labels.push((pos2(frame.labels_x, row_rect.center().y), format!("lane {}", k + 1)));
        }
        let y = egui::Rangef::new(top + pad, top + row_h - pad);
        if selected_lane == Some(k)
            && let Some((a, b)) = selected.and_then(|r| request_extent(trace, r))
        {
            let (x0, x1) = (x_at(a), x_at(b));
            outline = Some(Rect::from_x_y_ranges(x0..=x1.max(x0 + 2.0), top..=top + row_h));
        }
        let in_view = lanes.in_range(k, vp.start_ns, vp.end_ns());
        if in_view.len() * 2 > width {
            // More requests than one per two columns: one sample per column, the stage of the request alive at its
            // middle (kept from the last frame when the column was in view); one quad per run of a stage.
            class_runs(samples.lane(lanes, k, columns.clone()), |c0, c1, class| {
                let (j0, j1) = (columns.start + c0 as i64, columns.start + c1 as i64);
                let r = Rect::from_x_y_ranges(x_j(j0)..=x_j(j1), y);
                mesh.add_colored_rect(r, stage_color(class));
            });
        } else {
            runs.clear();
            let (requests, extents) = (lanes.requests(k), lanes.extents(k));
            for i in in_view {
                let (r, (a, b)) = (requests[i], extents[i]);
                let (x0, x1) = (x_at(a), x_at(b));
                if row_h >= 8.0 && x1 - x0 >= DETAIL_WIDTH {
                    let spans = layout::request_spans(trace, r);
                    let items = compute_render_items(&spans, vp);
                    draw_items(&mut mesh, frame, &items, &spans, y, stage_color, None);
                } else {
                    for s in lanes.spans(k, i) {
                        let (s0, s1) = (vp.x_from_time(s.start_ns), vp.x_from_time(s.end_ns));
                        runs.push(s0.max(-2.0), s1.min(f64::from(frame.time.width()) + 2.0), s.class);
                    }
                }
                // The finish bar tells requests that follow each other in a lane apart.
                if row_h >= 6.0 && x1 - x0 >= 3.0 {
                    mesh.add_colored_rect(
                        Rect::from_min_max(pos2(x1 - 1.0, top + 1.0), pos2(x1, top + row_h - 1.0)),
                        theme::MARKER,
                    );
                }
            }
            for (x0, x1, class) in runs.runs() {
                let r = Rect::from_x_y_ranges(left + x0 as f32..=left + x1 as f32, y);
                mesh.add_colored_rect(r, stage_color(class));
            }
        }
    }
    LanesCache {
        key,
        mesh: std::sync::Arc::new(mesh),
        outline,
        labels,
        samples,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three lanes of 60 back-to-back requests of 7 ms each (queue 1 ms, prefill 2 ms, decode 4 ms), a lane 1 ms
    /// behind the one above.
    fn dense_lanes() -> TraceView {
        let (t0, ms) = (1_700_000_000_000_000_000i64, 1_000_000i64);
        let mut lines = Vec::new();
        for lane in 0..3 {
            for i in 0..60 {
                let a = t0 + (i * 7 + lane) * ms;
                lines.push(format!(
                    r#"{{"kind":"request","request_id":"r{lane}-{i}","arrival_ns":{a},"scheduled_ns":{},"first_token_ns":{},"finished_ns":{}}}"#,
                    a + ms,
                    a + 3 * ms,
                    a + 7 * ms - 1
                ));
            }
        }
        let mut b = crate::trace::TraceBuilder::default();
        let text = lines.join("\n");
        let progress = crate::ingest::Progress::default();
        crate::format::jsonl::read_from(text.as_bytes(), std::path::Path::new("t.jsonl"), 0, &mut b, &progress)
            .expect("the test's records are valid");
        let trace = std::sync::Arc::new(b.finish().0);
        TraceView::new(trace, layout::TrackOrder::Arrival, &layout::TrackFilter::default())
    }

    #[test]
    fn panned_lanes_draw_what_a_fresh_frame_draws_from_a_few_new_samples() {
        let view = dense_lanes();
        assert_eq!(view.lanes().len(), 3);
        // 40 points for 422 ms: 60 requests a lane in view, more than one per two columns, so sampled; the columns
        // (10.5 ms) fall on every stage of the requests (7 ms).
        let frame = Areas {
            whole: Rect::NOTHING,
            time: Rect::from_min_size(pos2(100.0, 0.0), vec2(40.0, 100.0)),
            labels_x: 4.0,
            ruler: Rect::NOTHING,
            load_top: 0.0,
            engines_top: 0.0,
            sampled_top: 0.0,
            requests: Rect::from_min_size(pos2(0.0, 20.0), vec2(140.0, 48.0)),
        };
        let at = RowsAt {
            scroll_y: 0.0,
            row_h: 16.0,
            open_until_ns: None,
            fresh: &[],
            pending: &[],
        };
        let key = |vp: &Viewport| LanesKey {
            view: [vp.start_ns as u64, vp.ns_per_point.to_bits(), vp.width.to_bits()],
            area: [0; 4],
            scroll: [0; 2],
            selected: None,
            rows: (0, 0),
        };
        let vp = Viewport::fit(view.t0_ns, view.t1_ns, 40.0);
        let first = build_lanes(&frame, &vp, &view, at, None, key(&vp), None);
        assert_eq!(first.samples.taken(), 3 * 41, "every column of the three lanes");
        for shift in [3.0, -5.0, 2.5] {
            // Panned by `shift` points (half a point included): the same grid, so only the new columns are sampled.
            let panned = Viewport {
                start_ns: vp.start_ns + (shift * vp.ns_per_point) as i64,
                ..vp
            };
            let kept = build_lanes(&frame, &panned, &view, at, None, key(&panned), Some(first.clone()));
            let fresh = build_lanes(&frame, &panned, &view, at, None, key(&panned), None);
            assert_eq!(kept.mesh.vertices, fresh.mesh.vertices);
            assert_eq!(kept.mesh.indices, fresh.mesh.indices);
            // The grid's first column in view, before and after (the pan's nanoseconds round down).
            let first_column = |vp: &Viewport| ((vp.start_ns - view.t0_ns) as f64 / vp.ns_per_point).floor() as i64;
            let new_columns = (first_column(&panned) - first_column(&vp)).unsigned_abs() as usize;
            assert!((2..=5).contains(&new_columns));
            assert_eq!(kept.samples.taken(), 3 * new_columns, "panned by {shift}");
            assert!(
                kept.mesh.vertices.len() > 3 * 4 * 3,
                "each lane shows runs of its stages"
            );
        }
    }

    #[test]
    fn lanes_get_lower_to_fit_and_scroll_below_one_point() {
        // 600 points of tracks: 15 lanes keep a track's 16 points, 100 get 6, 400 get 1.5, 1,000 get 1 and scroll.
        assert_eq!(row_height_for(TrackLayout::Lanes, 15, 600.0), 16.0);
        assert_eq!(row_height_for(TrackLayout::Lanes, 100, 600.0), 6.0);
        assert_eq!(row_height_for(TrackLayout::Lanes, 400, 600.0), 1.5);
        assert_eq!(row_height_for(TrackLayout::Lanes, 1000, 600.0), 1.0);
        assert_eq!(row_height_for(TrackLayout::Tracks, 1000, 600.0), theme::ROW_HEIGHT);
    }

    #[test]
    fn a_live_lane_draws_its_open_request_to_the_present_and_the_requests_sent_since_below() {
        // r0 sent at 0, not ended (its lane's last: r1, 5-8 ms, goes to lane 1); r9 sent since the snapshot.
        let (t0, ms) = (1_700_000_000_000_000_000i64, 1_000_000i64);
        let text = [
            format!(r#"{{"kind":"request","request_id":"r0","arrival_ns":{t0}}}"#),
            format!(
                r#"{{"kind":"request","request_id":"r1","arrival_ns":{},"finished_ns":{}}}"#,
                t0 + 5 * ms,
                t0 + 8 * ms
            ),
        ]
        .join("\n");
        let mut b = crate::trace::TraceBuilder::default();
        let progress = crate::ingest::Progress::default();
        crate::format::jsonl::read_from(text.as_bytes(), std::path::Path::new("t.jsonl"), 0, &mut b, &progress)
            .unwrap();
        // A live view's (from its start): r0, not ended, keeps its lane.
        let view = TraceView::from_origin(
            std::sync::Arc::new(b.finish().0),
            layout::TrackOrder::Arrival,
            &layout::TrackFilter::default(),
            Some(t0),
        );
        assert_eq!(view.lanes().len(), 2);
        // 1 point a millisecond from t0; lanes 16 points tall from y = 20.
        let frame = Areas {
            whole: Rect::NOTHING,
            time: Rect::from_min_size(pos2(100.0, 0.0), vec2(40.0, 100.0)),
            labels_x: 4.0,
            ruler: Rect::NOTHING,
            load_top: 0.0,
            engines_top: 0.0,
            sampled_top: 0.0,
            requests: Rect::from_min_size(pos2(0.0, 20.0), vec2(140.0, 80.0)),
        };
        let vp = Viewport {
            start_ns: t0,
            ns_per_point: ms as f64,
            width: 40.0,
        };
        let pending = [PendingRow {
            id: "r9".to_owned(),
            from_ns: t0 + 12 * ms,
            ticks: vec![t0 + 14 * ms, t0 + 16 * ms],
        }];
        let fresh = [(0, t0 + 15 * ms)];
        let mut at = RowsAt {
            scroll_y: 0.0,
            row_h: 16.0,
            open_until_ns: Some(t0 + 20 * ms),
            fresh: &fresh,
            pending: &pending,
        };
        let (mesh, labels) = live_overlay(&frame, &vp, &view, at).expect("a live trace");
        let quads = |color| {
            let mut q: Vec<[f32; 4]> = mesh
                .vertices
                .chunks(4)
                .filter(|v| v[0].color == color)
                .map(|v| {
                    let (xs, ys) = (v.iter().map(|p| p.pos.x), v.iter().map(|p| p.pos.y));
                    [
                        xs.clone().fold(f32::MAX, f32::min),
                        xs.fold(f32::MIN, f32::max),
                        ys.clone().fold(f32::MAX, f32::min),
                        ys.fold(f32::MIN, f32::max),
                    ]
                })
                .collect();
            q.sort_by(|a, b| a[2].total_cmp(&b[2]).then(a[0].total_cmp(&b[0])));
            q
        };
        // r0 on lane 0 (y 20-36): open from its extent's end (1 ms: it has no time but its send) to 20 ms, its middle
        // fifth; r9 on the row below the two lanes (y 52-68), from 12 to 20 ms.
        assert_eq!(
            quads(theme::OPEN_REQUEST),
            [[101.0, 120.0, 26.4, 29.6], [112.0, 120.0, 58.4, 61.6]]
        );
        // The token read since the snapshot on r0's bar (15 ms), r9's two (14, 16 ms).
        assert_eq!(
            quads(theme::FRESH_TOKEN),
            [
                [114.5, 115.5, 24.0, 32.0],
                [113.5, 114.5, 56.0, 64.0],
                [115.5, 116.5, 56.0, 64.0]
            ]
        );
        assert_eq!(labels, [(pos2(4.0, 60.0), "r9".to_owned())]);
        // Not live: nothing over the lanes.
        at.open_until_ns = None;
        assert!(live_overlay(&frame, &vp, &view, at).is_none());
    }
}
