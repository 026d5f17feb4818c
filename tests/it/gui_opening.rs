//! Opening traces in the app, without a display (egui_kittest): a dataset's dialog, a trace above the memory budget,
//! a trace drawn while it loads, CJK tokens, a server log with its date and zone, a saved stream.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers may unwrap: a panic here is a failed test"
)]

use eframe::egui::{self, Key};
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use tokenscope::ui::{App, TraceSource};

use crate::gui::{harness_on, settle};

#[test]
fn a_dataset_shows_what_it_holds_and_opens_the_part_chosen() {
    use tokenscope::format::partition::{PartitionKey, write_partitioned};
    use tokenscope::ingest::Progress;
    use tokenscope::load::load;
    // The demo cut by hour and source: one hour, two instances, two files.
    let demo = load(std::path::Path::new("sample_traces/demo.parquet"), &Progress::default())
        .unwrap()
        .trace;
    let dir = tempfile::tempdir().unwrap();
    write_partitioned(&demo, dir.path(), &[PartitionKey::Hour, PartitionKey::Source], None).unwrap();
    let mut app = App::new(TraceSource::Path(dir.path().into()), None);
    assert!(
        app.session().is_none(),
        "a dataset is not loaded before its part is chosen"
    );
    assert_eq!(
        app.dataset_dialog().unwrap().wait(),
        None,
        "a dataset: the dialog stays"
    );
    let mut h = Harness::builder()
        .with_size(egui::vec2(1400.0, 860.0))
        .build_ui_state(|ui, app: &mut App| app.ui(ui), app);
    h.run();
    h.get_by_label("Open a dataset");
    h.get_by_label("source (2 values)");
    h.get_by_label("hour (1 value)");
    h.get_by_label_contains("reads 2 of 2 files");
    // Unchecking an instance leaves one file to read.
    h.get_by_label("vllm-1").click();
    h.run();
    h.get_by_label_contains("reads 1 of 2 files");
    h.get_by_label_contains("where source=vllm-0");
    // Up to 08:00:50 UTC (the demo's first request arrives at 08:00:00.466).
    let to = 1_764_403_250_000_000_000;
    h.state_mut().dataset_dialog().unwrap().to = "2025-11-29T08:00:50".to_owned();
    h.run();
    h.get_by_label_contains("to 2025-11-29T08:00:50");
    h.get_by_label("Open").click();
    h.run();
    h.state_mut().wait_loaded();
    h.step();
    h.state_mut().session_mut().unwrap().findings.wait();
    h.run();
    // What a filter written independently keeps: vllm-0's requests arriving in the first 50 s.
    let vllm0 = demo.labels.lookup("vllm-0").unwrap();
    let want = (0..demo.request_count())
        .filter(|&r| demo.requests.source[r] == vllm0 && demo.requests.arrival_ns[r] < to)
        .count();
    assert!(want > 50 && want < 172, "{want}");
    let shown = h.state().session().expect("the part is shown");
    assert_eq!(shown.view.trace.request_count(), want);
    assert_eq!(shown.view.engines.len(), 1, "one instance's steps");
    assert!(h.state_mut().dataset_dialog().is_none(), "the dialog closed");
}

#[test]
fn a_parquet_trace_above_the_memory_budget_opens_without_its_tokens_with_its_findings_streamed() {
    use tokenscope::analysis::findings::{STREAMABLE, Thresholds, find};
    use tokenscope::analysis::summary::Slo;
    // A 1 MB budget: the demo (3 MB of Parquet, about 150 MB loaded) is estimated far above it.
    let mut app = App::with_budget(
        TraceSource::Path("sample_traces/demo.parquet".into()),
        None,
        Some(1_000_000),
    );
    app.wait_loaded();
    let demo = tokenscope::load::load(
        std::path::Path::new("sample_traces/demo.parquet"),
        &tokenscope::ingest::Progress::default(),
    )
    .unwrap()
    .trace;
    let shown = app.session().expect("opened without its tokens");
    let trace = &shown.view.trace;
    assert_eq!(trace.request_count(), demo.request_count());
    assert_eq!(trace.iterations.len(), demo.iterations.len());
    assert_eq!(trace.tokens.len(), 0, "the tokens stay on disk");
    // The findings are the loaded trace's, of every kind a stream judges: the same kinds naming the same requests.
    let named = |t: &tokenscope::trace::Trace, f: &tokenscope::analysis::findings::Finding| {
        let ids: Vec<String> = f.requests.iter().map(|&r| t.request_id(r).to_owned()).collect();
        (f.kind, ids)
    };
    let want: Vec<_> = find(&demo, &Slo::DEFAULT, &Thresholds::default())
        .iter()
        .filter(|f| STREAMABLE.contains(&f.kind))
        .map(|f| named(&demo, f))
        .collect();
    let got: Vec<_> = shown
        .findings
        .findings
        .as_ref()
        .expect("computed while it opened")
        .iter()
        .map(|f| named(trace, f))
        .collect();
    assert!(want.len() >= 4, "{want:?}");
    assert_eq!(got, want);
    // Other objectives do not judge the trace without its tokens again (its token detectors would see none).
    let mut app = app;
    let s = app.session_mut().unwrap();
    let trace = std::sync::Arc::clone(&s.view.trace);
    let stricter = Slo {
        ttft_ms: Some(1.0),
        ..Slo::DEFAULT
    };
    assert!(
        !s.findings.refresh(&trace, stricter, Thresholds::default(), None),
        "nothing computed again"
    );
    assert_eq!(s.findings.findings.as_ref().map(Vec::len), Some(want.len()));
    let mut h = Harness::builder()
        .with_size(egui::vec2(1400.0, 860.0))
        .build_ui_state(|ui, app: &mut App| app.ui(ui), app);
    h.run();
    h.get_by_label_contains("Opened without its tokens");
    h.get_by_label_contains("over the memory budget of 1 MB");
    assert_eq!(h.state().memory_budget(), 1_000_000);
}

#[test]
fn a_jsonl_trace_above_the_memory_budget_is_not_loaded_and_the_app_says_so() {
    // Only a Parquet trace's tokens can be left on disk: a JSONL one over the budget is refused.
    let dir = tempfile::tempdir().unwrap();
    let jsonl = dir.path().join("demo.jsonl");
    let demo = tokenscope::load::load(
        std::path::Path::new("sample_traces/demo.parquet"),
        &tokenscope::ingest::Progress::default(),
    )
    .unwrap()
    .trace;
    tokenscope::format::write(&demo, &jsonl).unwrap();
    let mut app = App::with_budget(TraceSource::Path(jsonl), None, Some(1_000_000));
    app.wait_loaded();
    assert!(app.session().is_none());
    let mut h = Harness::builder()
        .with_size(egui::vec2(1400.0, 860.0))
        .build_ui_state(|ui, app: &mut App| app.ui(ui), app);
    h.run();
    h.get_by_label_contains("more than the budget of 1 MB");
}

#[test]
fn a_trace_is_drawn_while_it_loads_and_replaced_by_the_whole_when_done() {
    // The demo in row groups of 100 rows: a load of some 450 row groups, whose requests come first.
    let demo = tokenscope::load::load(
        std::path::Path::new("sample_traces/demo.parquet"),
        &tokenscope::ingest::Progress::default(),
    )
    .unwrap()
    .trace;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("demo-small-groups.parquet");
    tokenscope::format::parquet::write_with_row_groups(&demo, &path, 100).unwrap();
    // The first frame (fonts installed, the CJK ones among them) is drawn before the load starts: it can outlast
    // the whole load in a debug build, and the preview would never be on screen.
    let mut first = App::new(TraceSource::Path(dir.path().join("nothing-here.parquet")), None);
    first.wait_loaded();
    let mut h = Harness::builder()
        .with_size(egui::vec2(1400.0, 860.0))
        .build_ui_state(|ui, app: &mut App| app.ui(ui), first);
    h.step();
    assert!(h.state().session().is_none());
    h.state_mut().open(TraceSource::Path(path));
    let start = std::time::Instant::now();
    while h.state().preview_requests().is_none() {
        assert!(
            h.state().session().is_none(),
            "the load ended before a preview was drawn"
        );
        assert!(start.elapsed().as_secs() < 60, "no preview");
        h.step();
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let shown = h.state().preview_requests().unwrap();
    assert!(shown > 0 && shown <= crate::common::DEMO_REQUESTS, "{shown}");
    h.get_by_label_contains("read so far. Findings and statistics start when the load ends.");
    h.state_mut().wait_loaded();
    h.step();
    assert_eq!(h.state().preview_requests(), None);
    assert_eq!(
        h.state().session().unwrap().view.trace.request_count(),
        crate::common::DEMO_REQUESTS
    );
}

#[test]
fn chinese_japanese_and_korean_tokens_are_drawn_with_the_systems_cjk_fonts() {
    // kittest fails a frame that draws a glyph no font has. A machine without a font for one of the scripts fails
    // here and says so: scripts/test.sh installs fonts-wqy-microhei, which draws all three.
    let text = "你好，世界 · こんにちは · 안녕하세요";
    let cjk = tokenscope::ui::widgets::theme::cjk_fonts();
    assert!(
        cjk.missing.is_empty(),
        "no font on this machine draws {}: install one (Debian: apt-get install fonts-wqy-microhei; scripts/test.sh \
         does), or name a font file in TOKENSCOPE_CJK_FONT",
        cjk.missing.join(", ")
    );
    for font in &cjk.fonts {
        eprintln!("CJK font: {} (face {})", font.path.display(), font.index);
    }
    let mut h = Harness::builder()
        .with_size(egui::vec2(500.0, 80.0))
        .with_context_setup(tokenscope::ui::widgets::theme::install_fonts)
        .build_ui(|ui| {
            ui.label(text);
        });
    h.run();
    h.get_by_label(text);
}

#[test]
fn a_server_log_opens_as_counter_rows_and_its_times_can_be_given_a_date_and_zone() {
    // vLLM's log of a minute of overload: no request, no step, nine stats lines.
    let mut h = harness_on("sample_traces/engines/vllm-log/server.log");
    h.get_by_label_contains("no requests · no tokens · no steps · 9 counter samples");
    let view = &h.state().session().unwrap().view;
    assert_eq!(view.sampled.len(), 1, "one instance's counter rows");
    assert_eq!(view.sampled[0].max[1], 46.0, "waiting peaks at 46");
    let before = view.trace.samples.time_ns[0];
    // File > Server log times…: a zone that is not one is refused where it was typed, and nothing is reopened.
    h.get_by_label("File").click();
    h.run();
    h.get_by_label("Server log times…").click();
    h.run();
    h.get_by_label("Server's zone:").focus();
    h.get_by_label("Server's zone:").type_text("Asia/Shanghai");
    h.run();
    h.get_by_label("Apply and open again").click();
    h.run();
    h.get_by_label_contains("is not a zone offset");
    assert_eq!(h.state().log_clock().utc_offset_s, None);
    // Then +08:00: the same readings, eight hours earlier on the epoch.
    h.get_by_label("Server's zone:").focus();
    h.key_press_modifiers(egui::Modifiers::COMMAND, Key::A);
    h.get_by_label("Server's zone:").type_text("+08:00");
    h.run();
    h.get_by_label("Apply and open again").click();
    h.step();
    h.state_mut().wait_loaded();
    settle(&mut h);
    assert_eq!(h.state().log_clock().utc_offset_s, Some(8 * 3600));
    assert!(
        h.query_by_label("Apply and open again").is_none(),
        "the row is closed once applied"
    );
    let after = h.state().session().unwrap().view.trace.samples.time_ns[0];
    assert_eq!(before - after, 8 * 3_600_000_000_000);
}

#[test]
fn a_saved_stream_opens_with_its_tokens_and_candidates_and_no_latency_made_up() {
    // The body of a real llama.cpp chat stream, saved with curl: tokens and candidates, no times.
    let mut h = harness_on("tests/data/record/chat_eos_omitted.sse");
    h.get_by_label_contains("1 requests · 6 tokens · no steps · no times (a saved stream: order only)");
    h.state_mut().session_mut().unwrap().selected = Some(0);
    h.run();
    h.get_by_label_contains("no times: the source wrote none (a saved stream)");
    h.get_by_label_contains("No times in this trace (a saved stream)");
    // No latency is made up from the placeholder spacing: the header has no TTFT.
    assert!(h.query_by_label_contains("TTFT").is_none());
    // The tokens are there to inspect, with the server's candidates: the first token's three.
    let m = h.state().session().unwrap().microscope.as_ref().unwrap();
    let trace = &h.state().session().unwrap().view.trace;
    assert_eq!(trace.tokens_of(m.request).len(), 6);
    assert_eq!(trace.candidates_of(trace.tokens_of(m.request).start).len(), 3);
}

#[test]
fn the_date_and_zone_given_at_start_apply_to_the_trace_given_at_start() {
    // `tokenscope server.log --log-date 2025-11-03 --log-tz +08:00`: the app's first load reads the log with them.
    let log = TraceSource::Path("sample_traces/engines/vllm-log/server.log".into());
    let clock = tokenscope::import::log_clock::LogClock {
        date: chrono::NaiveDate::from_ymd_opt(2025, 11, 3),
        utc_offset_s: Some(8 * 3600),
    };
    let mut app = App::with_log_clock(log, None, None, None, clock);
    app.wait_loaded();
    let first = app.session().unwrap().view.trace.samples.time_ns[0];
    // The first stats line is printed 11-03 16:00:37 local: 08:00:37 UTC on 2025-11-03.
    assert_eq!(first, 1_762_156_837_000_000_000);
}
