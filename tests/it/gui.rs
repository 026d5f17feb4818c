//! The app as a user drives it, without a display (egui_kittest): it opens the demo, drag-selecting the
//! long-prefill incident names the 96k-token request first, W/S/A/D move the view, clicking a track selects it.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers may unwrap: a panic here is a failed test"
)]

use eframe::egui::{self, Key, Pos2, pos2};
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use tokenscope::ui::{App, TraceSource};
use tokenscope::view::viewport::Viewport;

pub(crate) const SECOND: i64 = 1_000_000_000;

pub(crate) fn demo_app() -> App {
    let mut app = App::new(TraceSource::Demo, None);
    app.wait_loaded();
    app
}

/// Runs the app until it settles, waiting for the background jobs a frame starts (the findings of a trace just
/// loaded, an interference analysis): on a busy machine they outlast `run`'s few steps, and a spinner keeps
/// repainting meanwhile.
pub(crate) fn settle(h: &mut Harness<'static, App>) {
    for _ in 0..100 {
        h.step();
        if let Some(s) = h.state_mut().session_mut() {
            s.findings.wait();
            s.wait_interference();
        }
        if h.try_run().is_ok() {
            return;
        }
    }
    h.run();
}

pub(crate) fn harness(app: App) -> Harness<'static, App> {
    let mut h = Harness::builder()
        .with_size(egui::vec2(1400.0, 860.0))
        .build_ui_state(|ui, app: &mut App| app.ui(ui), app);
    // The first frame starts the findings on a thread; on a busy machine they outlast the frames `run` allows.
    h.step();
    h.state_mut().session_mut().unwrap().findings.wait();
    h.run();
    h
}

/// The screen x of a time, from the last frame's viewport and time axis.
pub(crate) fn x_of(h: &Harness<'_, App>, t_ns: i64) -> f32 {
    let w = &h.state().session().unwrap().waterfall;
    let (vp, rect) = (w.viewport.unwrap(), w.time_rect.unwrap());
    rect.left() + vp.x_from_time(t_ns) as f32
}

pub(crate) fn t0(h: &Harness<'_, App>) -> i64 {
    h.state().session().unwrap().view.t0_ns
}

#[test]
fn the_app_opens_the_demo() {
    let h = harness(demo_app());
    let shown = h.state().session().expect("a trace is shown");
    assert_eq!(shown.view.trace.request_count(), crate::common::DEMO_REQUESTS);
    assert_eq!(shown.view.engines.len(), 2, "one engine track per instance");
    let tokens = shown.view.trace.token_count();
    assert!(tokens > 100 * crate::common::DEMO_REQUESTS, "{tokens}");
    h.get_by_label_contains(&format!("{} requests · {tokens} tokens", crate::common::DEMO_REQUESTS));
    h.get_by_label_contains("demo.parquet");
}

/// A drag that ends with one frame, for when the drop starts work that shows a spinner until it is done.
pub(crate) fn drag_then_step(h: &mut Harness<'_, App>, from: Pos2, to: Pos2) {
    h.hover_at(from);
    h.run();
    h.drag_at(from);
    h.run();
    let steps = 6;
    for k in 1..=steps {
        let f = k as f32 / steps as f32;
        h.hover_at(pos2(from.x + (to.x - from.x) * f, from.y + (to.y - from.y) * f));
        h.run();
    }
    h.drop_at(to);
    h.step();
}

#[test]
fn a_drag_over_the_long_prefill_names_the_96k_request_first() {
    let mut h = harness(demo_app());
    // Show 60 s .. 90 s of the demo: the long prefill is on vllm-1 from ~70 s.
    let base = t0(&h);
    let width = h.state().session().unwrap().waterfall.viewport.unwrap().width;
    h.state_mut().session_mut().unwrap().waterfall.viewport =
        Some(Viewport::fit(base + 60 * SECOND, base + 90 * SECOND, width));
    h.run();
    let y = h.state().session().unwrap().waterfall.requests_rect.unwrap().center().y;
    let (from, to) = (
        pos2(x_of(&h, base + 71 * SECOND), y),
        pos2(x_of(&h, base + 79 * SECOND), y),
    );
    // The drop starts the range's analysis on a thread: wait for it rather than count on the frames `run` allows.
    drag_then_step(&mut h, from, to);
    h.state_mut().session_mut().unwrap().wait_interference();
    h.run();
    let app = h.state();
    let range = app.session().unwrap().waterfall.range.expect("a range is selected");
    assert!((range.0 - (base + 71 * SECOND)).abs() < SECOND / 10, "{range:?}");
    let x = app
        .session()
        .unwrap()
        .interference
        .as_ref()
        .expect("the interference panel has its figures");
    let trace = &app.session().unwrap().view.trace;
    assert_eq!(trace.request_id(x.holders[0].request), "doc-96k");
    assert!(
        x.holders[0].share > 0.9,
        "it held nearly all of vllm-1: {:?}",
        x.holders[0]
    );
    // The panel shows it (in its holders table, and again among the requests prefilling).
    h.get_by_label("Who held the engine");
    assert!(h.get_all_by_label("doc-96k").count() >= 1);
}

#[test]
fn w_s_a_d_move_the_view() {
    let mut h = harness(demo_app());
    let before = h.state().session().unwrap().waterfall.viewport.unwrap();
    h.remove_cursor();
    h.key_press(Key::W);
    h.run();
    let zoomed = h.state().session().unwrap().waterfall.viewport.unwrap();
    assert!(
        (before.ns_per_point / zoomed.ns_per_point - 1.25).abs() < 1e-9,
        "W zooms in 1.25x"
    );
    // Without a pointer over the tracks, zoom keeps the centre.
    let centre = before.time_from_x(before.width / 2.0);
    assert!((zoomed.time_from_x(zoomed.width / 2.0) - centre).abs() <= zoomed.ns_per_point as i64 + 1);
    h.key_press(Key::S);
    h.run();
    let back = h.state().session().unwrap().waterfall.viewport.unwrap();
    assert!(
        (back.ns_per_point / before.ns_per_point - 1.0).abs() < 1e-9,
        "S zooms out by the same factor"
    );
    h.key_press(Key::D);
    h.run();
    let right = h.state().session().unwrap().waterfall.viewport.unwrap();
    let tenth = (back.width * 0.1 * back.ns_per_point).round() as i64;
    assert_eq!(
        right.start_ns - back.start_ns,
        tenth,
        "D pans right by a tenth of the width"
    );
    h.key_press(Key::A);
    h.key_press(Key::A);
    h.run();
    let left = h.state().session().unwrap().waterfall.viewport.unwrap();
    assert_eq!(right.start_ns - left.start_ns, 2 * tenth, "A pans left");
}

#[test]
fn clicking_a_request_track_selects_it() {
    let mut h = harness(demo_app());
    let rect = h.state().session().unwrap().waterfall.requests_rect.unwrap();
    // The third track (rows are 16 points, in arrival order).
    let p = pos2(rect.left() + 40.0, rect.top() + 2.5 * 16.0);
    h.hover_at(p);
    h.run();
    h.drag_at(p);
    h.run();
    h.drop_at(p);
    h.run();
    let app = h.state();
    let r = app.session().unwrap().selected.expect("a request is selected");
    let trace = &app.session().unwrap().view.trace;
    assert_eq!(r, app.session().unwrap().view.rows[2]);
    let id = trace.request_id(r).to_owned();
    h.get_by_label(&id);
}

#[test]
fn a_bad_file_reports_its_error_and_keeps_the_trace_on_screen() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("broken.parquet");
    std::fs::write(&bad, b"PAR1 not parquet").unwrap();
    let mut app = demo_app();
    app.open(TraceSource::Path(bad));
    app.wait_loaded();
    let h = harness(app);
    assert_eq!(
        h.state().session().unwrap().view.trace.request_count(),
        crate::common::DEMO_REQUESTS,
        "the demo is still shown"
    );
    h.get_by_label_contains("broken.parquet is not a readable Parquet file");
}

#[test]
fn moving_to_a_late_time_brings_the_requests_alive_there_into_view() {
    let mut h = harness(demo_app());
    let base = t0(&h);
    let width = h.state().session().unwrap().waterfall.viewport.unwrap().width;
    h.state_mut().session_mut().unwrap().waterfall.viewport =
        Some(Viewport::fit(base + 60 * SECOND, base + 90 * SECOND, width));
    h.run();
    assert_eq!(
        h.state().session().unwrap().waterfall.scroll_y,
        0.0,
        "nothing moved the tracks yet"
    );
    h.remove_cursor();
    h.key_press(Key::D);
    h.run();
    let app = h.state();
    let vp = app.session().unwrap().waterfall.viewport.unwrap();
    let view = &app.session().unwrap().view;
    let first = (app.session().unwrap().waterfall.scroll_y / 16.0).round() as usize;
    let r = view.rows[first];
    let trace = &view.trace;
    let (arrival, finish) = (trace.requests.arrival_ns[r as usize], trace.finish_ns(r).unwrap());
    assert!(
        finish >= vp.start_ns && arrival <= vp.end_ns(),
        "the first track on screen is alive in the view"
    );
    // And it is the first such track in arrival order.
    assert!(
        view.rows[..first]
            .iter()
            .all(|&q| trace.finish_ns(q).unwrap() < vp.start_ns)
    );
}

#[test]
fn hovering_a_stage_describes_it() {
    let mut h = harness(demo_app());
    // The first track (req-00000): hover the middle of its longest stage.
    let (rect, r, stage) = {
        let app = h.state();
        let view = &app.session().unwrap().view;
        let r = view.rows[0];
        let spans = tokenscope::view::layout::request_spans(&view.trace, r);
        let longest = *spans.iter().max_by_key(|s| s.end_ns - s.start_ns).unwrap();
        (app.session().unwrap().waterfall.requests_rect.unwrap(), r, longest)
    };
    let width = h.state().session().unwrap().waterfall.viewport.unwrap().width;
    let pad = (stage.end_ns - stage.start_ns) * 2;
    h.state_mut().session_mut().unwrap().waterfall.viewport =
        Some(Viewport::fit(stage.start_ns - pad, stage.end_ns + pad, width));
    h.run();
    let x = x_of(&h, i64::midpoint(stage.start_ns, stage.end_ns));
    let p = pos2(x, rect.top() + 8.0);
    h.hover_at(p);
    h.run();
    h.hover_at(pos2(x + 1.0, p.y));
    // Tooltips wait for the pointer to rest.
    for _ in 0..40 {
        h.step();
    }
    let kind = tokenscope::view::layout::stage_of_class(stage.class).name();
    let id = h.state().session().unwrap().view.trace.request_id(r).to_owned();
    h.get_by_label_contains(&format!("{kind} from"));
    assert!(h.query_all_by_label(&id).count() >= 1);
}

/// A file dropped on the window, as the windowing system hands it to egui.
#[derive(Debug)]
struct Dropped(std::path::PathBuf);

impl egui::DroppedFile for Dropped {
    fn path(&self) -> &std::path::Path {
        &self.0
    }
    fn bytes(&self) -> Result<Vec<u8>, String> {
        std::fs::read(&self.0).map_err(|e| e.to_string())
    }
}

#[test]
fn a_file_dropped_on_the_window_opens() {
    let mut h = harness(demo_app());
    let path = std::path::PathBuf::from("sample_traces/long_prefill.jsonl");
    h.input_mut()
        .dropped_files
        .push(std::sync::Arc::new(Dropped(path.clone())));
    h.step();
    h.state_mut().wait_loaded();
    settle(&mut h);
    let shown = h.state().session().unwrap();
    assert_eq!(shown.source, TraceSource::Path(path));
    assert_eq!(shown.view.trace.request_count(), 10);
    h.get_by_label_contains("long_prefill.jsonl");
}

#[test]
fn a_recording_and_its_servers_log_dropped_together_open_as_one_run() {
    let mut h = harness(demo_app());
    let halves = [
        std::path::PathBuf::from("tests/data/real/llamacpp/incident_client.parquet"),
        std::path::PathBuf::from("tests/data/real/llamacpp/incident_server.log.gz"),
    ];
    for p in &halves {
        h.input_mut()
            .dropped_files
            .push(std::sync::Arc::new(Dropped(p.clone())));
    }
    h.step();
    h.state_mut().wait_loaded();
    settle(&mut h);
    let shown = h.state().session().unwrap();
    assert_eq!(shown.source, TraceSource::Paths(halves.to_vec()));
    // The client's requests and tokens (5 and 544), with the server's steps (172): both halves in one trace.
    h.get_by_label_contains(&format!(
        "{} requests · {} tokens · {} steps",
        crate::common::parquet_records(&halves[0], "request"),
        crate::common::parquet_records(&halves[0], "token"),
        crate::common::llamacpp_log_steps(&halves[1])
    ));
    assert!(
        shown.view.trace.labels.lookup("llama-server").is_some(),
        "the server's steps, its source"
    );
    // rec-00000 under the microscope: its tokens came from the server's steps and reached the client after.
    let r = shown.view.trace.request_row("rec-00000").unwrap();
    h.state_mut().session_mut().unwrap().selected = Some(r);
    h.run();
    h.get_by_label_contains("delivery (server to client)");
    assert!(h.query_by_label_contains("Needs the engine's steps").is_none());
}

#[test]
fn ctrl_shift_s_saves_a_2x_png_of_what_is_on_screen() {
    let dir = tempfile::tempdir().unwrap();
    let mut app = demo_app();
    app.save_dir = Some(dir.path().to_path_buf());
    let mut h = harness(app);
    assert!(!h.state().saving());
    h.key_press_modifiers(egui::Modifiers::COMMAND | egui::Modifiers::SHIFT, Key::S);
    h.step();
    // Drawn offscreen on a thread of its own at 2 pixels per point: the 1400 x 860 point window is 2800 x 1720.
    let path = h.state_mut().wait_saved().expect("a PNG was asked for").unwrap();
    assert!(path.starts_with(dir.path()));
    let img = image::open(&path).unwrap();
    assert_eq!((img.width(), img.height()), (2800, 1720));
    h.run();
    h.get_by_label_contains("Saved ");
}

#[test]
fn the_window_as_on_screen_is_captured_with_its_caption() {
    let dir = tempfile::tempdir().unwrap();
    let mut app = demo_app();
    app.save_dir = Some(dir.path().to_path_buf());
    let mut h = harness(app);
    assert!(!h.state().capture_pending());
    h.get_by_label("File").click();
    h.run();
    h.get_by_label("Save PNG of the window as on screen").click();
    h.step();
    // The request went to the renderer: kittest's offscreen one answers it a frame later.
    assert!(h.state().capture_pending());
    // Until it is saved: a software render and a PNG write on a busy machine take what they take (a minute at most).
    let mut saved = None;
    let deadline = std::time::Instant::now() + std::time::Duration::from_mins(1);
    while std::time::Instant::now() < deadline {
        h.step();
        saved = std::fs::read_dir(dir.path()).unwrap().next().map(|e| e.unwrap().path());
        if saved.is_some() && !h.state().saving() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(!h.state().capture_pending());
    let path = saved.expect("the screenshot was saved");
    let img = image::open(&path).unwrap().to_rgba8();
    // The window at the harness's 1 pixel per point.
    assert_eq!(img.dimensions(), (1400, 860));
    // The caption strip: the bottom 20 points are the caption's near-black fill, with white text on it.
    let strip = (841..859).flat_map(|y| (0..1400).map(move |x| (x, y)));
    let (dark, white) = strip.fold((0, 0), |(d, w), (x, y)| {
        let p = img.get_pixel(x, y).0;
        (
            d + usize::from(p[..3] == [12, 12, 12]),
            w + usize::from(p[..3] == [255, 255, 255]),
        )
    });
    assert!(dark > 1400 * 18 / 2, "{dark} caption-fill pixels");
    assert!(white > 100, "{white} white text pixels");
}

#[test]
fn clicking_the_long_prefill_finding_selects_the_96k_request_and_zooms_to_it() {
    let mut h = harness(demo_app());
    h.state_mut().session_mut().unwrap().findings.wait();
    h.run();
    let full = h.state().session().unwrap().waterfall.viewport.unwrap();
    h.get_by_label_contains("doc-96k's prefill of 96,213 prompt tokens")
        .click();
    // The click starts an interference analysis of the zoomed range: waited for, not raced.
    settle(&mut h);
    let app = h.state();
    let trace = &app.session().unwrap().view.trace;
    let doc = trace.request_row("doc-96k").unwrap();
    assert_eq!(
        app.session().unwrap().selected,
        Some(doc),
        "the monopolising request is selected"
    );
    assert_eq!(app.session().unwrap().microscope.as_ref().map(|m| m.request), Some(doc));
    // The finding's token, doc-96k's first (index 0), is selected under the microscope.
    assert_eq!(
        app.session().unwrap().microscope.as_ref().and_then(|m| m.token),
        Some(0)
    );
    // The finding spans doc-96k's five prefill steps; the view shows them with a tenth of their length either side.
    let f = app
        .session()
        .unwrap()
        .findings
        .findings
        .as_ref()
        .unwrap()
        .iter()
        .find(|f| f.kind == tokenscope::analysis::findings::Kind::PrefillMonopoly && f.requests[0] == doc)
        .unwrap();
    assert_eq!(f.steps.len(), 5);
    let vp = app.session().unwrap().waterfall.viewport.unwrap();
    let span = f.to_ns - f.from_ns;
    assert!(
        vp.start_ns <= f.from_ns && vp.end_ns() >= f.to_ns,
        "the whole finding is on screen"
    );
    assert!((vp.end_ns() - vp.start_ns) <= span + span / 4, "zoomed to it");
    assert!(vp.end_ns() - vp.start_ns < (full.end_ns() - full.start_ns) / 5);
    assert_eq!(app.session().unwrap().waterfall.range, Some((f.from_ns, f.to_ns)));
    // doc-96k's track is scrolled into view.
    let k = app.session().unwrap().view.rows.iter().position(|&r| r == doc).unwrap();
    let height = app.session().unwrap().waterfall.requests_rect.unwrap().height();
    let rows = tokenscope::view::layout::visible_rows(
        app.session().unwrap().waterfall.scroll_y,
        tokenscope::ui::widgets::theme::ROW_HEIGHT,
        height,
        app.session().unwrap().view.rows.len(),
    );
    assert!(rows.contains(&k), "row {k} of doc-96k in {rows:?}");
}

#[test]
fn copy_2x_png_of_the_views_puts_the_offscreen_render_on_the_clipboard() {
    let mut h = harness(demo_app());
    h.get_by_label("File").click();
    h.run();
    h.get_by_label("Copy 2x PNG of the views").click();
    // Rendered on a thread of its own; the frame that takes it asks the platform to copy it.
    let mut copied = None;
    // Up to a minute: a software render on a busy 2-core machine takes a few seconds at most.
    for _ in 0..6000 {
        h.step();
        copied = h.output().platform_output.commands.iter().find_map(|c| match c {
            egui::OutputCommand::CopyImage(image) => Some(image.size),
            _ => None,
        });
        if copied.is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // The 1400 x 860 point window at 2 pixels per point.
    assert_eq!(copied, Some([2800, 1720]));
    h.run();
    h.get_by_label_contains("Copied the 2x PNG of the views");
}

/// The app on a file or directory, loaded, settled.
pub(crate) fn harness_on(path: &str) -> Harness<'static, App> {
    let mut app = App::new(TraceSource::Path(path.into()), None);
    app.wait_loaded();
    assert!(app.session().is_some(), "{path} opened");
    harness(app)
}

#[test]
fn what_engines_and_tools_write_opens_in_the_app_and_says_what_it_lacks() {
    // SGLang's OTLP (gzip): requests, batches as steps, tokens; no candidates, said so; a note on the source.
    let mut h = harness_on("sample_traces/engines/sglang/prefill_interrupts_decode.otlp.jsonl.gz");
    // The same simulated run as the JSONL sample (sample_traces/README.md): its records, counted by kind.
    let jsonl = std::fs::read_to_string("sample_traces/prefill_interrupts_decode.jsonl").unwrap();
    let count = |kind: &str| jsonl.matches(&format!("\"kind\":\"{kind}\"")).count();
    assert_eq!(
        count("request"),
        12 + 6,
        "the scenario's 12 ordinary requests and the 6 it plants"
    );
    h.get_by_label_contains(&format!(
        "{} requests · {} tokens · {} steps · no candidates",
        count("request"),
        count("token"),
        count("iteration")
    ));
    h.get_by_label("sglang");
    h.get_by_label_contains("2 notes on the source").click();
    h.run();
    h.get_by_label_contains("no candidates in an SGLang trace");
    // The engine's batches are drawn as the scheduler's track.
    h.get_by_label_contains("Scheduler [TP 0] [PP 0]");

    // vLLM: spans and the iteration log of one run, one trace.
    let h = harness_on("sample_traces/engines/vllm");
    h.get_by_label_contains("3 requests · no tokens · 9 steps");
    // TensorRT-LLM: iteration statistics and perf metrics.
    let h = harness_on("sample_traces/engines/trtllm");
    h.get_by_label_contains("2 requests · 7 tokens · 6 steps · no candidates");
    // AIPerf: client-side chunks, no engine steps.
    let h = harness_on("sample_traces/engines/aiperf");
    // Its records, counted in the export: one token record per chunk, a request's first and one per gap after it.
    let export = std::fs::read_to_string("sample_traces/engines/aiperf/profile_export.jsonl").unwrap();
    let records: Vec<serde_json::Value> = export.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let chunks: usize = records
        .iter()
        .filter_map(|r| r["metrics"]["inter_chunk_latency"]["value"].as_array())
        .map(|gaps| gaps.len() + 1)
        .sum();
    h.get_by_label_contains(&format!(
        "{} requests · {chunks} tokens · no steps · no candidates",
        records.len()
    ));
    h.get_by_label_contains("openai/gpt-oss-20b");
    // AIPerf raw with logprobs: candidates, so the status bar does not say they are missing.
    let mut h = harness_on("sample_traces/engines/aiperf-raw");
    h.get_by_label_contains("2 requests · 7 tokens · no steps");
    assert!(h.query_by_label_contains("no candidates").is_none());
    // Under the microscope, the step load a trace without steps cannot give is said, not drawn empty.
    h.state_mut().session_mut().unwrap().selected = Some(0);
    h.run();
    h.get_by_label_contains("Needs the engine's steps");
}

#[test]
fn a_range_analysis_of_one_trace_never_lands_on_the_next() {
    // Drag-select on the demo (the analysis runs on a thread), then open another trace before any frame takes its
    // result: the analysis belongs to the demo and is dropped with it.
    let mut app = demo_app();
    let demo = app.session().unwrap().id;
    let t0 = app.session().unwrap().view.t0_ns;
    app.go_to(t0 + 20 * SECOND, t0 + 25 * SECOND, None, None);
    // How the findings panel is set carries over to the next trace; what was computed for the demo does not.
    let hidden = tokenscope::analysis::findings::Kind::Truncation;
    app.session_mut().unwrap().findings.hidden.push(hidden);
    // The analysis's result is ready, not yet taken by a frame, when the next trace opens.
    app.session().unwrap().wait_interference_ready();
    assert!(app.session().unwrap().analysing());
    app.open(TraceSource::Path("sample_traces/long_prefill.jsonl".into()));
    app.wait_loaded();
    let h = harness(app);
    let next = h.state().session().unwrap();
    assert_ne!(next.id, demo, "a new trace is a new session");
    assert!(next.interference.is_none(), "the demo's analysis reached long_prefill");
    assert_eq!(next.waterfall.range, None);
    assert_eq!(next.findings.hidden, [hidden]);
    h.get_by_label_contains("long_prefill.jsonl");
}

#[test]
fn thresholds_edited_in_the_findings_panel_apply_at_once() {
    use tokenscope::analysis::findings::Kind;
    let mut h = harness(demo_app());
    let monopoly = |h: &Harness<'static, App>| {
        let s = h.state().session().unwrap();
        s.findings
            .findings
            .as_ref()
            .unwrap()
            .iter()
            .any(|f| f.kind == Kind::PrefillMonopoly)
    };
    assert!(
        monopoly(&h),
        "doc-96k's prompt, far above the demo's ordinary ones at the default factor of 6"
    );
    h.get_by_label("Thresholds…").click();
    h.run();
    // A prompt outsized only at 1000x the ordinary (as a screen reader sets a value): computed again, none is.
    // Findings are computed again on a background job, which repaints until it is done: two frames take the edit
    // and start it, then the test waits for it (the harness's step limit cannot, on a loaded machine).
    h.get_by_label("outsized prefill factor").set_value_accesskit(1000.0);
    h.run_steps(2);
    h.state_mut().session_mut().unwrap().findings.wait();
    h.run();
    assert!(!monopoly(&h));
    // A value that does not check is kept as a draft with the reason, and not applied.
    h.get_by_label("outsized prefill factor").set_value_accesskit(0.5);
    h.run_steps(2);
    h.get_by_label_contains("outsized_prefill_factor (--outsized-prefill-factor) = 0.5: give a factor above 1");
    h.state_mut().session_mut().unwrap().findings.wait();
    assert!(!monopoly(&h), "still 1000: the draft was not applied");
    // Defaults bring the finding back.
    h.get_by_label("Defaults").click();
    h.run_steps(2);
    h.state_mut().session_mut().unwrap().findings.wait();
    h.run();
    assert!(monopoly(&h));
}

#[cfg(feature = "query")]
#[test]
fn a_query_typed_and_run_with_ctrl_enter_lists_rows_and_a_click_selects_the_request() {
    use tokenscope::analysis::metrics::request_metrics;
    let mut h = harness(demo_app());
    // The request with the longest TTFT, computed here from the model.
    let trace = std::sync::Arc::clone(&h.state().session().unwrap().view.trace);
    let slowest = (0..trace.request_count() as u32)
        .max_by_key(|&r| request_metrics(&trace, r).ttft_ns.unwrap_or(i64::MIN))
        .unwrap();
    let slowest_id = trace.request_id(slowest).to_owned();
    h.get_by_label("Query").click();
    h.run();
    h.get_by_label("SQL").focus();
    h.key_press_modifiers(egui::Modifiers::COMMAND, Key::A);
    h.get_by_label("SQL")
        .type_text("SELECT request_id, ttft_ms FROM requests ORDER BY ttft_ms DESC LIMIT 3");
    h.run();
    h.key_press_modifiers(egui::Modifiers::COMMAND, Key::Enter);
    h.step();
    h.state_mut().session_mut().unwrap().query.wait();
    h.run();
    h.get_by_label_contains("3 rows in");
    assert_eq!(h.state().session().unwrap().selected, None);
    h.get_by_label(&slowest_id).click();
    h.run();
    assert_eq!(h.state().session().unwrap().selected, Some(slowest));
    // A mistake is explained in the window, and the query stays in the history.
    h.get_by_label("SQL").focus();
    h.key_press_modifiers(egui::Modifiers::COMMAND, Key::A);
    h.get_by_label("SQL").type_text("SELECT ttft FROM requests");
    h.run();
    h.get_by_label("Run").click();
    h.step();
    h.state_mut().session_mut().unwrap().query.wait();
    h.run();
    h.get_by_label_contains("no column \"ttft\" in requests (did you mean ttft_ms?)");
}

#[cfg(feature = "query")]
#[test]
fn the_timeline_follows_the_waterfall_and_a_drag_across_it_selects_a_range() {
    let mut h = harness(demo_app());
    h.get_by_label("Timeline").click();
    // step, not run: the timeline computes on a thread, with a spinner meanwhile.
    h.step();
    h.state_mut().session_mut().unwrap().timeline.wait();
    h.run();
    // The whole demo (100.3 s, shown with a margin) in at most 100 round buckets: 2 s, 51 of them.
    let s = h.state().session().unwrap();
    assert_eq!(s.timeline.shown_width(), Some(2 * SECOND));
    assert_eq!(s.timeline.rows().unwrap().rows.len(), 51);
    // One time is at one x on both: hovering a plot at the x of 40 s marks 40 s across the waterfall.
    let base = t0(&h);
    // The plot's name in its gutter (the other "output tok/s" is its checkbox, above).
    let y = h
        .get_all_by_label("output tok/s")
        .map(|n| n.rect())
        .max_by(|a, b| a.top().total_cmp(&b.top()))
        .unwrap()
        .center()
        .y;
    h.hover_at(pos2(x_of(&h, base + 40 * SECOND), y));
    h.run();
    let marked = h.state().session().unwrap().waterfall.linked_hover_ns.unwrap();
    let per_point = h.state().session().unwrap().waterfall.viewport.unwrap().ns_per_point;
    assert!(
        ((marked - base - 40 * SECOND) as f64).abs() <= 2.0 * per_point,
        "{marked}"
    );
    // A drag across the plot from 20 s to 30 s selects that range in the waterfall and analyses it.
    let (from, to) = (x_of(&h, base + 20 * SECOND), x_of(&h, base + 30 * SECOND));
    // The drop starts the range's analysis and, the selection panel narrowing the view, a timeline of finer
    // buckets: both show a spinner until done.
    drag_then_step(&mut h, pos2(from, y), pos2(to, y));
    let (a, b) = h.state().session().unwrap().waterfall.range.expect("a range selected");
    assert!(((a - base - 20 * SECOND) as f64).abs() <= 2.0 * per_point, "{a}");
    assert!(((b - base - 30 * SECOND) as f64).abs() <= 2.0 * per_point, "{b}");
    h.state_mut().session_mut().unwrap().wait_interference();
    assert!(h.state().session().unwrap().interference.is_some());
    // Zoomed in to 10 s of the demo, the automatic buckets follow: 100 ms.
    let width = h.state().session().unwrap().waterfall.viewport.unwrap().width;
    h.state_mut().session_mut().unwrap().waterfall.viewport =
        Some(Viewport::fit(base + 20 * SECOND, base + 30 * SECOND, width));
    // Frame by frame: the selection panel appearing narrows the view again, which may ask for another timeline.
    for _ in 0..10 {
        h.step();
        h.state_mut().session_mut().unwrap().timeline.wait();
    }
    assert_eq!(h.state().session().unwrap().timeline.shown_width(), Some(SECOND / 10));
}

#[test]
fn a_token_with_a_hundred_thousand_candidates_lists_the_first_hundred() {
    // One request, one token written with 100,000 candidates.
    const T0: i64 = 1_764_403_200_000_000_000;
    let candidates: Vec<String> = (0..100_000)
        .map(|i| format!(r#"{{"token_id":{i},"text":"t{i}","logprob":-{}.5}}"#, 1 + i % 30))
        .collect();
    let text = format!(
        "{{\"kind\":\"request\",\"request_id\":\"r\",\"arrival_ns\":{T0}}}\n\
         {{\"kind\":\"token\",\"request_id\":\"r\",\"index\":0,\"emitted_ns\":{},\"token_id\":0,\"text\":\"t0\",\
         \"logprob\":-1.5,\"candidates\":[{}]}}\n",
        T0 + 1_000_000,
        candidates.join(",")
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wide.jsonl");
    std::fs::write(&path, text).unwrap();
    let mut app = App::new(TraceSource::Path(path), None);
    app.wait_loaded();
    let mut h = harness(app);
    h.state_mut().go_to(T0, T0 + SECOND, Some(0), Some(0));
    // A fixed number of frames: how many the first ones take to settle (fonts, the theme) varies from run to run.
    h.run_steps(10);
    h.get_by_label_contains("and 99,900 more candidates (a frame lists 100 at most)");
    // The first hundred are listed, the 101st is not.
    h.get_by_label("t99");
    assert!(h.query_by_label("t100").is_none());
}

#[test]
fn lanes_pack_the_demo_into_its_peak_concurrency_and_a_click_selects_the_request_under_it() {
    let mut h = harness(demo_app());
    h.get_by_label("Layout").click();
    h.run();
    h.get_by_label("lanes (packed)").click();
    h.run();
    let (lanes, peak, row_h, rect) = {
        let s = h.state().session().unwrap();
        assert_eq!(s.waterfall.layout, tokenscope::view::lanes::TrackLayout::Lanes);
        let trace = &s.view.trace;
        // The peak concurrency counted here by a sweep over arrivals and finishes (a finish before an arrival at
        // the same time frees its lane); a request lasts at least a millisecond on the axis.
        let mut events: Vec<(i64, i32)> = (0..trace.request_count() as u32)
            .flat_map(|r| {
                let a = trace.requests.arrival_ns[r as usize];
                let f = trace.finish_ns(r).unwrap_or(a).max(a + 1_000_000);
                [(a, 1), (f, -1)]
            })
            .collect();
        events.sort_unstable();
        let (mut alive, mut peak) = (0, 0);
        for (_, d) in events {
            alive += d;
            peak = peak.max(alive);
        }
        let lanes = s.view.lanes().clone();
        (
            lanes,
            peak as usize,
            s.waterfall.row_height,
            s.waterfall.requests_rect.unwrap(),
        )
    };
    assert_eq!(lanes.len(), peak, "as many lanes as requests alive at once at the peak");
    // The demo's requests overlap: packing has something to do.
    assert!(peak > 1 && peak < crate::common::DEMO_REQUESTS, "{peak}");
    // Every request is in a lane, and a lane's requests never overlap.
    assert_eq!(
        (0..lanes.len()).map(|k| lanes.requests(k).len()).sum::<usize>(),
        crate::common::DEMO_REQUESTS
    );
    for k in 0..lanes.len() {
        assert!(
            lanes.extents(k).windows(2).all(|w| w[0].1 <= w[1].0),
            "lane {k} overlaps"
        );
    }
    // Fifteen lanes fit the window at a track's height.
    assert_eq!(row_h, 16.0);
    // Click the middle of the sixth request of the third lane.
    let (r, (a, b)) = (lanes.requests(2)[5], lanes.extents(2)[5]);
    let p = pos2(x_of(&h, a + (b - a) / 2), rect.top() + 2.5 * row_h);
    h.hover_at(p);
    h.run();
    h.drag_at(p);
    h.run();
    h.drop_at(p);
    h.run();
    assert_eq!(h.state().session().unwrap().selected, Some(r));
    let id = h.state().session().unwrap().view.trace.request_id(r).to_owned();
    h.get_by_label(&id);
    // Back to a track per request: the selected request's track is on screen.
    h.get_by_label("Layout").click();
    h.run();
    h.get_by_label("a track per request").click();
    h.run();
    let s = h.state().session().unwrap();
    let k = s.view.rows.iter().position(|&x| x == r).unwrap() as f32;
    let (top, height) = (k * 16.0 - s.waterfall.scroll_y, rect.height());
    assert!(top >= 0.0 && top + 16.0 <= height, "track {k} at {top} in {height}");
}
