//! The high-power view as a user drives it: the EOS that ended an answer is shown as a badge with its rank and
//! probability; a decode token stalled behind a prefill has its wait explained, and hovering its step names the
//! request that was prefilling.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers may unwrap: a panic here is a failed test"
)]

use eframe::egui::{self, Key};
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use egui_plot::PlotPoint;
use tokenscope::ui::{App, TraceSource};

fn harness_on(path: &str) -> Harness<'static, App> {
    let mut app = App::new(TraceSource::Path(path.into()), None);
    app.wait_loaded();
    // The findings panel (tested in gui.rs) names the same tokens: closed here, the labels are the microscope's.
    app.shown.findings = false;
    let mut h = Harness::builder()
        .with_size(egui::vec2(1500.0, 1000.0))
        .build_ui_state(|ui, app: &mut App| app.ui(ui), app);
    // The first frame starts the findings on a thread; on a busy machine they outlast the frames `run` allows.
    h.step();
    h.state_mut().session_mut().unwrap().findings.wait();
    h.run();
    h
}

fn select(h: &mut Harness<'_, App>, id: &str) -> u32 {
    let r = h.state().session().unwrap().view.trace.request_row(id).unwrap();
    h.state_mut().session_mut().unwrap().selected = Some(r);
    h.run();
    r
}

#[test]
fn the_eos_that_ended_the_medical_answer_is_a_badge_with_rank_2_and_10_percent() {
    let mut h = harness_on("sample_traces/eos_mistrigger.jsonl");
    select(&mut h, "med-question");
    // Its 38th and last token, in the output strip.
    h.get_by_label("⟨EOS⟩").click();
    h.run();
    let m = h.state().session().unwrap().microscope.as_ref().unwrap();
    assert_eq!(m.token, Some(37));
    h.get_by_label_contains("token 37: ⟨EOS⟩");
    h.get_by_label_contains("rank 2");
    h.get_by_label_contains("p 10.0 %");
    // A 38-token answer in 428 ms met the default objectives: the problem is not latency.
    h.get_by_label_contains("SLO met");
    // The candidates table shows what lost: the ordinary token at 75 %.
    h.get_by_label("75.0 %");
    // Left goes back to token 36, which is an ordinary word, not a badge.
    h.key_press(Key::ArrowLeft);
    h.run();
    assert_eq!(
        h.state().session().unwrap().microscope.as_ref().unwrap().token,
        Some(36)
    );
}

#[test]
fn the_stalled_token_is_explained_by_the_prefill_in_its_step() {
    let mut h = harness_on("sample_traces/prefill_interrupts_decode.jsonl");
    select(&mut h, "chat-victim");
    // chat-victim's request line: first token at ...203.071406205 s, finished at ...207.720802755 s, 80 output
    // tokens: TPOT (7.720802755 - 3.071406205) s / 79 = 58.85 ms.
    h.get_by_label_contains("SLO missed: TPOT 58.9 ms > 50 ms");
    let (k, transform) = {
        let m = h.state().session().unwrap().microscope.as_ref().unwrap();
        let k = (1..m.latencies.len()).max_by_key(|&k| m.latencies[k].total_ns).unwrap();
        let l = m.latencies[k];
        // The slow token's bar is schedule wait and compute: it waited through prefill-only steps, then its own.
        let (w, c) = (l.schedule_wait_ns.unwrap(), l.compute_ns.unwrap());
        assert!(l.total_ns > 1_000_000_000, "{l:?}");
        assert!(w + c >= l.total_ns * 9 / 10, "{l:?}");
        (k, m.load_transform.unwrap())
    };
    // Hover the load chart at the token that waited behind the most prefill of others: the slow one.
    let m = h.state().session().unwrap().microscope.as_ref().unwrap();
    let heaviest = (0..m.loads.len())
        .max_by_key(|&j| m.loads[j].others_prefill_tokens)
        .unwrap();
    let trace = h.state().session().unwrap().view.trace.clone();
    let names: Vec<&str> = m.loads[heaviest]
        .prefills
        .iter()
        .chain(&m.loads[heaviest].waited_behind)
        .map(|&(r, _)| trace.request_id(r))
        .collect();
    assert_eq!(
        heaviest, k,
        "the slowest token is the one that waited behind the most prefill"
    );
    assert_eq!(names[0], "rag-24k");
    assert!(
        !names.is_empty(),
        "a step of the victim carried other requests' prefill"
    );
    let pos = transform.position_from_point(&PlotPoint::new(heaviest as f64, 1.0));
    h.hover_at(pos);
    h.run();
    h.hover_at(pos + egui::vec2(0.5, 0.0));
    for _ in 0..40 {
        h.step();
    }
    h.get_by_label_contains(&format!("prefilling: {}", names[0]));
}

#[test]
fn from_parquet_the_candidates_are_read_for_the_selected_request_only() {
    let mut h = harness_on("sample_traces/demo.parquet");
    let trace = h.state().session().unwrap().view.trace.clone();
    assert!(trace.candidates.is_empty(), "the app leaves Parquet candidates on disk");
    select(&mut h, "med-question");
    h.state_mut()
        .session_mut()
        .unwrap()
        .microscope
        .as_mut()
        .unwrap()
        .wait_candidates(&trace);
    h.run();
    h.get_by_label("⟨EOS⟩").click();
    h.run();
    h.get_by_label_contains("rank 2");
    h.get_by_label_contains("p 10.0 %");
    h.get_by_label("75.0 %");
}
