//! Frame benchmark: CPU time of one frame of the waterfall (layout and drawing by egui, then tessellation into
//! triangles) on the `large` trace, at three zoom levels. Goal (DESIGN.md): p99 <= 8 ms at every zoom.
//!
//! `cargo bench --bench frame [-- --requests N | --xlarge] [--frames F --walk-max-s S --select-runs R]`. Uses `target/bench-data/large-N.parquet` (written by
//! `benches/common.rs`, shared with the load benchmark; generated when missing). No display and no GPU: egui runs headless, which is exactly
//! the CPU part of a frame (the GPU upload and draw are not measured).

use std::sync::Arc;
use std::time::Instant;

use eframe::egui::{self, Pos2, RawInput, Rect, vec2};
use tokenscope::ui::views::microscope::Microscope;
use tokenscope::ui::views::waterfall::{WaterfallState, waterfall_ui};
use tokenscope::ui::widgets::theme::ROW_HEIGHT;
use tokenscope::view::TraceView;
use tokenscope::view::lanes::TrackLayout;
use tokenscope::view::layout::{TrackFilter, TrackOrder};
use tokenscope::view::viewport::Viewport;

mod common;

/// A view to draw: its name, its time range (`None`: fitted by the first frame), and whether it pans every frame.
type Case = (&'static str, Option<(i64, i64)>, bool);

fn percentile(sorted: &[f64], p: usize) -> f64 {
    let rank = (p * sorted.len()).div_ceil(100).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn main() {
    let requests = common::flag("--requests", 50_000);
    let frames = common::flag("--frames", 200).max(10);
    // Each range is analysed this many times (the median is shown).
    let select_runs = common::flag("--select-runs", 5).max(1);
    let walk_max_s = i64::try_from(common::flag("--walk-max-s", usize::MAX)).unwrap_or(i64::MAX);
    // `--xlarge`: the 500,000-request trace (`tokenscope synth --scenario xlarge -o target/bench-data/xlarge.parquet`).
    let path = if std::env::args().any(|a| a == "--xlarge") {
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-data/xlarge.parquet")
    } else {
        common::large_files(requests).0
    };
    let start = Instant::now();
    let trace = common::load_lazily(&path);
    let load_s = start.elapsed().as_secs_f64();
    let start = Instant::now();
    let view = TraceView::new(Arc::new(trace), TrackOrder::Arrival, &TrackFilter::default());
    let view_s = start.elapsed().as_secs_f64();
    let trace = Arc::clone(&view.trace);
    println!(
        "frame benchmark: {} requests, {} tokens, {} steps; window 1600 x 1000 points; {frames} frames per zoom",
        trace.request_count(),
        trace.token_count(),
        trace.iterations.len()
    );
    println!("load {load_s:.2} s, view build {view_s:.2} s (open to first frame = both + one frame)");

    let ctx = egui::Context::default();
    let screen = Rect::from_min_size(Pos2::ZERO, vec2(1600.0, 1000.0));
    let mid = i64::midpoint(view.t0_ns, view.t1_ns);
    // The whole trace twice: with the view still (the pointer moving), and panned a point every frame, so that
    // nothing drawn before can be drawn again as it was.
    let whole = (
        view.t0_ns - (view.t1_ns - view.t0_ns) / 50,
        view.t1_ns + (view.t1_ns - view.t0_ns) / 50,
    );
    let cases: [Case; 4] = [
        ("whole trace (zoomed out)", None, false),
        ("whole trace, panning", Some(whole), true),
        (
            "mid zoom: 10 s",
            Some((mid - 5_000_000_000, mid + 5_000_000_000)),
            false,
        ),
        ("deep zoom: 50 ms", Some((mid - 25_000_000, mid + 25_000_000)), false),
    ];
    println!(
        "{:<34} {:>9} {:>9} {:>9} {:>10}",
        "view", "p50 ms", "p99 ms", "max ms", "triangles"
    );
    for (layout, name, range, pan) in [TrackLayout::Tracks, TrackLayout::Lanes]
        .into_iter()
        .flat_map(|l| cases.map(|(name, range, pan)| (l, name, range, pan)))
    {
        let name = match layout {
            TrackLayout::Tracks => format!("tracks, {name}"),
            TrackLayout::Lanes => format!("lanes, {name}"),
        };
        let mut state = WaterfallState::default();
        state.layout = layout;
        // Scroll to the requests alive in the range, as a user looking there would.
        if let Some((a, _)) = range {
            let first = view
                .rows
                .iter()
                .position(|&r| trace.requests.arrival_ns[r as usize] >= a - 2_000_000_000);
            if layout == TrackLayout::Tracks {
                state.scroll_y = first.unwrap_or(0) as f32 * ROW_HEIGHT;
            }
        }
        let mut times = Vec::with_capacity(frames);
        let mut triangles = 0;
        for f in 0..frames + 5 {
            if let Some((a, b)) = range {
                let vp = Viewport::fit(a, b, 1450.0);
                let moved = if pan { vp.panned(f as f64) } else { vp };
                state.viewport = Some(moved);
            } else if f == 0 {
                state.viewport = None;
            }
            // The pointer moves across the tracks, so hover work is part of every frame.
            let x = 200.0 + (f % 100) as f32 * 13.0;
            let input = RawInput {
                screen_rect: Some(screen),
                time: Some(f as f64 / 60.0),
                events: vec![egui::Event::PointerMoved(Pos2::new(x, 600.0))],
                ..RawInput::default()
            };
            let t = Instant::now();
            let output = ctx.run_ui(input, |ui| {
                egui::CentralPanel::default().show(ui, |ui| {
                    waterfall_ui(ui, &view, &mut state, None, &mut Vec::new());
                });
            });
            let meshes = ctx.tessellate(output.shapes, output.pixels_per_point);
            let elapsed = t.elapsed().as_secs_f64() * 1e3;
            if f >= 5 {
                times.push(elapsed);
                triangles = meshes
                    .iter()
                    .map(|m| match &m.primitive {
                        egui::epaint::Primitive::Mesh(mesh) => mesh.indices.len() / 3,
                        egui::epaint::Primitive::Callback(_) => 0,
                    })
                    .sum::<usize>();
            }
        }
        times.sort_by(f64::total_cmp);
        println!(
            "{name:<34} {:>9.2} {:>9.2} {:>9.2} {triangles:>10}",
            percentile(&times, 50),
            percentile(&times, 99),
            times.last().copied().unwrap_or(0.0)
        );
    }

    // Drag-select a range: the interference panel's figures, computed when the drag ends, from the trace's index
    // (built once in the background when the trace opens), against the walk of every request it replaced (the
    // reference, in the same run); both must give the same figures.
    let t = Instant::now();
    let index = tokenscope::analysis::range_index::RangeIndex::build(&trace);
    println!(
        "range index: built in {:.0} ms (once per trace, in the background)",
        t.elapsed().as_secs_f64() * 1e3
    );
    println!(
        "{:<14} {:>10} {:>10} {:>7} {:>8} {:>8} {:>9}",
        "drag-select", "index ms", "walk ms", "ratio", "steps", "holders", "decoding"
    );
    let whole = (view.t1_ns - view.t0_ns) / 2 + 1;
    for (label, half) in [
        ("1 s", 500_000_000i64),
        ("10 s", 5_000_000_000),
        ("60 s", 30_000_000_000),
        ("10 min", 300_000_000_000),
        ("whole trace", whole),
    ] {
        let (from, to) = (mid - half, mid + half);
        let mut indexed = Vec::new();
        let mut x = None;
        for _ in 0..select_runs {
            let t = Instant::now();
            x = Some(tokenscope::analysis::interference::interference_indexed(
                &trace, &index, from, to,
            ));
            indexed.push(t.elapsed().as_secs_f64() * 1e3);
        }
        indexed.sort_by(f64::total_cmp);
        let x = x.unwrap_or_default();
        // The walk of a whole large trace takes a minute: `--walk-max-s S` leaves out the ranges longer than S.
        let walk_ms = if half / 500_000_000 <= walk_max_s {
            let t = Instant::now();
            let walked = tokenscope::analysis::interference::interference_by_walk(&trace, from, to);
            let walk_ms = t.elapsed().as_secs_f64() * 1e3;
            if let Err(e) = x.same_figures(&walked) {
                panic!("drag-select {label}: the index and the walk differ: {e}");
            }
            walk_ms
        } else {
            f64::NAN
        };
        println!(
            "{label:<14} {:>10.2} {walk_ms:>10.1} {:>7.3} {:>8} {:>8} {:>9}",
            indexed[select_runs / 2],
            indexed[select_runs / 2] / walk_ms,
            x.steps.count,
            x.counts.prefilling,
            x.counts.decoding
        );
    }

    // Click a request to its candidates shown: the microscope's figures, and the candidates read from the Parquet
    // file for that request only. 50 requests spread over the trace.
    let picks: Vec<u32> = (0..50).map(|k| (k * trace.request_count() / 50) as u32).collect();
    let reader = tokenscope::load::open_candidates(&trace).unwrap_or_else(|e| panic!("{e}"));
    let mut times = Vec::with_capacity(picks.len());
    let mut tokens = 0;
    for &r in &picks {
        let t = Instant::now();
        let mut m = Microscope::new(&trace, reader.as_ref(), r, None);
        m.wait_candidates(&trace);
        times.push(t.elapsed().as_secs_f64() * 1e3);
        assert!(
            m.candidates.iter().all(|c| !c.is_empty()),
            "every token has its candidates"
        );
        tokens += m.candidates.len();
    }
    times.sort_by(f64::total_cmp);
    println!(
        "click to candidates ({} requests, {} tokens each on average): p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        picks.len(),
        tokens / picks.len(),
        percentile(&times, 50),
        percentile(&times, 99),
        times.last().copied().unwrap_or(0.0)
    );
}
