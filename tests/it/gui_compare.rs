//! The Comparison as a user drives it, without a display (egui_kittest): the demo against its clean baseline, the
//! requests paired and a click selecting both, a comparison asked while a trace loads, a bad second trace.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers may unwrap: a panic here is a failed test"
)]

use eframe::egui::{Key, pos2};
use egui_kittest::kittest::Queryable;
use tokenscope::ui::{App, TraceSource};
use tokenscope::view::viewport::Viewport;

use crate::gui::{SECOND, demo_app, harness, settle, t0};

#[test]
fn comparing_the_demo_with_its_clean_baseline_pairs_requests_and_a_click_selects_both() {
    use tokenscope::analysis::diff::{Metric, most_changed};
    use tokenscope::synth::arrivals::ReplayOptions;
    use tokenscope::synth::{Scenario, SynthOptions, generate};
    use tokenscope::ui::views::stats::Grouping;
    // B: the demo's engines and traffic with no incident planted (`synth --scenario steady`).
    let steady = generate(&SynthOptions {
        scenario: Scenario::Steady,
        seed: 1,
        requests: None,
        arrivals: None,
        replay: ReplayOptions::default(),
        sources: 1,
        prefix_cache_tokens: None,
        profile: tokenscope::synth::ProfileChoice::default(),
        chunked_prefill: None,
        plant: None,
    })
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let b_path = dir.path().join("steady.parquet");
    tokenscope::format::write(&steady, &b_path).unwrap();
    let mut h = harness(demo_app());
    // File > Compare with path…, the path typed, Enter.
    h.get_by_label("File").click();
    h.run();
    h.get_by_label("Compare with path…").click();
    h.run();
    h.get_by_label("Compare with (B):").focus();
    h.get_by_label("Compare with (B):").type_text(b_path.to_str().unwrap());
    h.key_press(Key::Enter);
    h.step();
    h.state_mut().wait_compared();
    h.run();
    let c = h.state().comparing().expect("comparing");
    let cmp = std::sync::Arc::clone(c.comparison.as_ref().expect("compared"));
    // The demo is the steady traffic (req-00000 .. req-00299, the same ids) plus 9 planted requests.
    assert_eq!(cmp.pairing.pairs.len(), 300);
    h.get_by_label_contains("Requests paired by request_id: 300 pairs, 9 only in A, 0 only in B");
    // The incidents of the demo are gone in B: its EOS mis-trigger among them.
    h.get_by_label_contains("gone · critical · EOS mis-trigger med-question");
    h.get_by_label("TTFT p99 ms");
    // How far B is from A, figure by figure (as `diff --fidelity`), folded until clicked.
    let fidelity =
        tokenscope::synth::fidelity::from_summaries(&cmp.a, &cmp.b, tokenscope::synth::fidelity::Tolerance::default());
    let (compared, within) = fidelity.score();
    assert_eq!(compared, 20, "every figure has both sides");
    let header = format!("Fidelity of B to A: {within} of 20 figures within 10 % or 5 ms");
    assert!(h.query_all_by_label("p50").next().is_none(), "folded");
    h.get_by_label(&header).click();
    h.run();
    let ttft = fidelity.get("TTFT", 50).unwrap();
    let text = format!("{:+.1} %", ttft.error_pct.unwrap());
    assert!(h.query_all_by_label(&text).next().is_some(), "{text}");
    assert_eq!(h.query_all_by_label("p50").count(), 5, "one p50 row per figure");
    h.get_by_label(&header).click();
    h.run();
    // Both waterfalls are drawn, B on A's time axis measured from each trace's start.
    let (a_t0, b_t0) = (t0(&h), h.state().comparing().unwrap().other.view.t0_ns);
    let rel = |start: i64, t0: i64| start - t0;
    let a_vp = h.state().session().unwrap().waterfall.viewport.unwrap();
    let b_vp = h.state().comparing().unwrap().other.waterfall.viewport.unwrap();
    assert_eq!(rel(a_vp.start_ns, a_t0), rel(b_vp.start_ns, b_t0));
    assert_eq!(a_vp.ns_per_point, b_vp.ns_per_point);
    // The request whose TTFT changed most, clicked in the window, is selected in both traces.
    let top = most_changed(&cmp.deltas, Metric::Ttft, 1)[0];
    let a_trace = std::sync::Arc::clone(&h.state().session().unwrap().view.trace);
    let name = a_trace.request_id(top.a).to_owned();
    // (It may be listed under TPOT too: the TTFT list comes first.)
    h.query_all_by_label(&name).next().unwrap().click();
    h.run();
    assert_eq!(h.state().session().unwrap().selected, Some(top.a));
    assert_eq!(h.state().comparing().unwrap().other.selected, Some(top.b));
    // Going to a request of A (a finding's click) selects its twin in B.
    let (ra, rb) = (
        a_trace.request_row("req-00052").unwrap(),
        h.state()
            .comparing()
            .unwrap()
            .other
            .view
            .trace
            .request_row("req-00052")
            .unwrap(),
    );
    let at = a_trace.requests.arrival_ns[ra as usize];
    h.state_mut().go_to(at, at + SECOND, Some(ra), None);
    // Going there starts the range's analyses on both traces: waited for, not raced.
    settle(&mut h);
    assert_eq!(h.state().comparing().unwrap().other.selected, Some(rb));
    // Zooming A (W) moves B with it.
    h.hover_at(pos2(700.0, 200.0));
    h.key_press(Key::W);
    h.run();
    let a_vp = h.state().session().unwrap().waterfall.viewport.unwrap();
    let b_vp = h.state().comparing().unwrap().other.waterfall.viewport.unwrap();
    assert!(a_vp.ns_per_point < b_vp.ns_per_point * 1.01 && a_vp.ns_per_point > b_vp.ns_per_point * 0.99);
    assert_eq!(rel(a_vp.start_ns, a_t0), rel(b_vp.start_ns, b_t0));
    // Moving A to the trace's last seconds moves B there, and B brings tracks alive there into view.
    let late = Viewport::fit(a_t0 + 95 * SECOND, a_t0 + 99 * SECOND, a_vp.width);
    h.state_mut().session_mut().unwrap().waterfall.viewport = Some(late);
    h.state_mut().comparing_mut().unwrap().other.waterfall.scroll_y = 0.0;
    h.run();
    let offset = h.state().comparing().unwrap().offset_ns(a_t0);
    let b = &h.state().comparing().unwrap().other;
    assert_eq!(b.waterfall.viewport.unwrap().start_ns, late.start_ns + offset);
    assert!(b.waterfall.scroll_y > 0.0, "B scrolled to requests alive at 95 s");
    // The timeline computes B's series with A's buckets, drawn dashed over A's.
    #[cfg(feature = "query")]
    {
        h.get_by_label("Timeline").click();
        h.step();
        h.state_mut().session_mut().unwrap().timeline.wait();
        h.step();
        h.state_mut().comparing_mut().unwrap().other.timeline.wait();
        h.run();
        let a_width = h.state().session().unwrap().timeline.shown_width();
        let b = &h.state().comparing().unwrap().other.timeline;
        assert!(a_width.is_some());
        assert_eq!(b.shown_width(), a_width, "B in A's buckets");
        assert!(b.rows().is_some_and(|r| !r.rows.is_empty()));
    }
    // The Statistics window draws B's CDFs over A's: every request of B, or the group's.
    h.get_by_label("Statistics").click();
    h.run();
    let c = h.state_mut().comparing_mut().unwrap();
    assert_eq!(c.samples(Grouping::All, None).ttft_ms.len(), 300);
    let chat = steady
        .requests
        .app_id
        .iter()
        .filter(|&&l| steady.label(l) == Some("chat"))
        .count();
    assert!(chat > 0 && chat < 300, "{chat}");
    assert_eq!(
        c.samples(
            Grouping::By(tokenscope::analysis::summary::GroupBy::AppId),
            Some("chat")
        )
        .ttft_ms
        .len(),
        chat
    );
    h.state_mut().shown.stats = false;
    h.run();
    // Stop comparing: one waterfall again.
    h.get_by_label("Stop comparing").click();
    h.run();
    assert!(h.state().comparing().is_none());
}

#[test]
fn a_comparison_asked_while_a_loads_waits_for_it_and_a_bad_b_leaves_a_on_screen() {
    // `tokenscope A --compare B`: B is asked for before A is loaded.
    let mut app = App::new(TraceSource::Path("sample_traces/long_prefill.jsonl".into()), None);
    app.compare_with(TraceSource::Path("sample_traces/four_requests.jsonl".into()));
    app.wait_compared();
    let h = harness(app);
    let shown = h.state().session().unwrap();
    assert_eq!(shown.view.trace.request_count(), 10, "A: long_prefill.jsonl");
    let c = h.state().comparing().expect("B compared with A once A was on screen");
    assert_eq!(c.other.view.trace.request_count(), 4, "B: four_requests.jsonl");
    // Nothing in common: 4 requests named r1..r4 against req-* and the planted ones.
    h.get_by_label_contains("Requests not paired: fewer than half");
    // A B that cannot be read says so, and A stays, with no comparison.
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("broken.parquet");
    std::fs::write(&bad, b"PAR1 not parquet").unwrap();
    let mut app = demo_app();
    app.compare_with(TraceSource::Path(bad));
    app.wait_compared();
    let h = harness(app);
    assert!(h.state().comparing().is_none());
    assert_eq!(
        h.state().session().unwrap().view.trace.request_count(),
        crate::common::DEMO_REQUESTS
    );
    h.get_by_label_contains("Cannot compare: ");
}
