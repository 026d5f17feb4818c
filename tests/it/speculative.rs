//! Speculative decoding on a run written by hand: eight requests decoding on one engine in 30 ms verify steps,
//! each step emitting 1 to 4 tokens of a request at once (its accepted drafts and its own token, all at the step's
//! end, as a client receives a burst). The figures are per verify step, not per token; a healthy run raises no
//! finding; a prefill planted among the verify steps is still found; the high-power view groups the tokens by step.

use eframe::egui;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use serde_json::Value;
use tokenscope::ui::{App, TraceSource};

use crate::common::tokenscope;

/// 2025-11-29 08:00:00 UTC, ns.
const T0: i64 = 1_764_403_200_000_000_000;
const MS: i64 = 1_000_000;
/// Verify steps after the prefill step.
const VERIFY_STEPS: usize = 10;

/// Tokens request `r` emits in verify step `s` (1 to 4: 0 to 3 accepted drafts of 4, then its own token).
fn emitted(r: usize, s: usize) -> usize {
    1 + (r + s) % 4
}

/// The run as JSON lines: 8 requests arriving at T0, one prefill step (0..30 ms) that emits each request's first
/// token, then verify steps of 30 ms each; with `planted`, a 20,000-token prompt arriving at 150 ms whose prefill
/// takes a step of its own, 2 s, between the 5th and 6th verify steps (no decode in it).
fn run_jsonl(planted: bool) -> String {
    let mut lines = vec![r#"{"kind":"meta","format":"tokenscope","version":1,"engine":"hand"}"#.to_owned()];
    // Step k ends at end_of(k); the planted prefill step runs after verify step 5 (step index 5).
    let end_of = |k: usize| -> i64 {
        let base = 30 * MS * (k as i64 + 1);
        if planted && k > 5 { base + 2_000 * MS } else { base }
    };
    let steps = VERIFY_STEPS + 1;
    for k in 0..steps {
        let end = end_of(k);
        lines.push(format!(
            r#"{{"kind":"iteration","source":"engine","iteration":{k},"start_ns":{},"end_ns":{},"num_decode_reqs":8,"num_decode_tokens":{},"num_prefill_tokens":{}}}"#,
            T0 + end - 30 * MS,
            T0 + end,
            if k == 0 { 0 } else { 40 },
            if k == 0 { 800 } else { 0 }
        ));
    }
    if planted {
        let (start, end) = (T0 + end_of(5), T0 + end_of(5) + 2_000 * MS);
        lines.push(format!(
            r#"{{"kind":"iteration","source":"engine","iteration":100,"start_ns":{start},"end_ns":{end},"num_decode_reqs":0,"num_decode_tokens":0,"num_prefill_tokens":20000}}"#
        ));
        lines.push(format!(
            r#"{{"kind":"request","request_id":"big","source":"engine","arrival_ns":{},"scheduled_ns":{start},"first_token_ns":{end},"finished_ns":{end},"input_tokens":20000,"output_tokens":1}}"#,
            T0 + 150 * MS
        ));
        lines.push(format!(
            r#"{{"kind":"stage","request_id":"big","stage":"prefill","start_ns":{start},"end_ns":{end},"iteration":100,"tokens":20000}}"#
        ));
        lines.push(format!(
            r#"{{"kind":"token","request_id":"big","index":0,"emitted_ns":{end},"iteration":100}}"#
        ));
    }
    for r in 0..8 {
        let id = format!("r{r}");
        let mut index = 0;
        let mut tokens = Vec::new();
        tokens.push(format!(
            r#"{{"kind":"token","request_id":"{id}","index":0,"emitted_ns":{},"iteration":0,"spec":"plain"}}"#,
            T0 + end_of(0)
        ));
        for s in 1..steps {
            let n = emitted(r, s);
            for j in 0..n {
                index += 1;
                let role = if j + 1 == n { "bonus" } else { "draft" };
                let drafted = if j == 0 { r#","spec_drafted_tokens":4"# } else { "" };
                tokens.push(format!(
                    r#"{{"kind":"token","request_id":"{id}","index":{index},"emitted_ns":{},"iteration":{s},"spec":"{role}"{drafted}}}"#,
                    T0 + end_of(s)
                ));
            }
        }
        lines.push(format!(
            r#"{{"kind":"request","request_id":"{id}","source":"engine","arrival_ns":{T0},"scheduled_ns":{T0},"first_token_ns":{},"finished_ns":{},"input_tokens":100,"output_tokens":{}}}"#,
            T0 + end_of(0),
            T0 + end_of(steps - 1),
            index + 1
        ));
        lines.extend(tokens);
    }
    lines.join("\n") + "\n"
}

fn write(dir: &std::path::Path, planted: bool) -> String {
    let path = dir.join(if planted { "planted.jsonl" } else { "burst.jsonl" });
    std::fs::write(&path, run_jsonl(planted)).unwrap();
    path.display().to_string()
}

fn json(out: &str) -> Value {
    serde_json::from_str(out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

#[test]
fn a_healthy_burst_run_has_one_itl_per_verify_step_its_acceptance_and_no_finding() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), false);
    let (code, out, err) = tokenscope(&["summary", "--json", &path]);
    assert_eq!(code, 0, "{err}");
    let s = json(&out);
    // Every emission after a request's first comes 30 ms after the one before: 8 requests x 10 verify steps = 80
    // gaps, all 30 ms (per token, 3 of 4 gaps on average would read 0 ms).
    assert_eq!(s["itl_ms"]["count"], 80);
    assert_eq!(s["itl_ms"]["p50"], 30.0);
    assert_eq!(s["itl_ms"]["max"], 30.0);
    // TPOT stays per token: r0 emits 1 + (2+3+4+1+2+3+4+1+2+3) = 26 tokens, 300 ms after its first: 12 ms.
    let tokens_r0: usize = 1 + (1..=VERIFY_STEPS).map(|s| emitted(0, s)).sum::<usize>();
    assert_eq!(tokens_r0, 26);

    // Drafts: 4 per verify step of each request = 320; accepted: emitted − 1 per step.
    let accepted: usize = (0..8)
        .flat_map(|r| (1..=VERIFY_STEPS).map(move |s| emitted(r, s) - 1))
        .sum();
    assert_eq!(s["spec_drafted_tokens"], 320);
    assert_eq!(s["spec_accepted_tokens"], accepted);
    assert_eq!(s["spec"]["from"], "tokens");
    assert_eq!(s["spec"]["verify_steps"], 80);
    // Tokens per verify step: (accepted + 80 bonus tokens) / 80.
    let length = (accepted as f64 + 80.0) / 80.0;
    assert!((s["spec"]["acceptance_length"].as_f64().unwrap() - length).abs() < 1e-12);
    // Position k is accepted when the step emitted more than k tokens: the (r + s) % 4 cycle gives 3/4, 2/4, 1/4
    // of the 80 steps.
    assert_eq!(
        s["spec"]["acceptance_by_position"],
        serde_json::json!([0.75, 0.5, 0.25, 0.0])
    );
    let (code, out, err) = tokenscope(&["findings", "--json", "--no-slo", &path]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out)["findings"], serde_json::json!([]), "{out}");
}

#[cfg(feature = "query")]
#[test]
fn the_tokens_table_gives_an_itl_to_each_emissions_first_token_and_tpot_stays_per_token() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), false);
    // r0: 26 tokens in 11 emissions: 10 gaps; the others of a burst have no ITL of their own.
    let (code, out, err) = tokenscope(&[
        "query",
        &path,
        "SELECT count(itl_ms) AS gaps, max(emission) AS last, count(*) AS n FROM tokens WHERE request_id = 'r0'",
        "--format",
        "json",
    ]);
    assert_eq!(code, 0, "{err}");
    let rows = json(&out);
    assert_eq!(
        (
            rows[0]["gaps"].as_u64(),
            rows[0]["last"].as_u64(),
            rows[0]["n"].as_u64()
        ),
        (Some(10), Some(10), Some(26)),
        "{out}"
    );
    // TPOT: 300 ms after the first token, over 25 more tokens: 12 ms.
    let (code, out, err) = tokenscope(&[
        "query",
        &path,
        "SELECT tpot_ms FROM requests WHERE request_id = 'r0'",
        "--format",
        "json",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(json(&out)[0]["tpot_ms"], 12.0, "{out}");
}

#[test]
fn a_prefill_planted_among_verify_steps_is_still_an_interruption() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), true);
    let (code, out, err) = tokenscope(&["findings", "--json", "--no-slo", "--kind", "decode-interrupted", &path]);
    assert_eq!(code, 0, "{err}");
    let found = json(&out)["findings"].as_array().unwrap().clone();
    assert_eq!(found.len(), 1, "{out}");
    // The stall: from verify step 5's end (180 ms) to step 6's (2,210 ms): 2,030 ms, 67.7x the 30 ms median.
    let summary = found[0]["summary"].as_str().unwrap();
    assert!(summary.contains("waited 2.03 s"), "{summary}");
    assert!(
        summary.contains("while big prefilled 20,000 prompt tokens"),
        "{summary}"
    );
}

#[test]
fn gui_the_high_power_view_shows_a_verify_steps_drafts_its_own_token_and_what_it_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), false);
    let mut app = App::new(TraceSource::Path(path.into()), None);
    app.wait_loaded();
    app.shown.findings = false;
    let mut h = Harness::builder()
        .with_size(egui::vec2(1500.0, 1000.0))
        .build_ui_state(|ui, app: &mut App| app.ui(ui), app);
    h.step();
    h.state_mut().session_mut().unwrap().findings.wait();
    h.run();
    let r = h.state().session().unwrap().view.trace.request_row("r0").unwrap();
    h.state_mut().session_mut().unwrap().selected = Some(r);
    h.run();
    // r0: 40 drafts over its 10 verify steps, 15 accepted (1+2+3+0+1+2+3+0+1+2), 25 rejected; (15 + 10) / 10 = 2.5
    // tokens a step.
    h.get_by_label_contains(
        "speculative: 40 drafts, 15 accepted (38 %), 25 rejected · 10 verify steps, 2.50 tokens each",
    );
    let m = h.state().session().unwrap().microscope.as_ref().unwrap();
    assert_eq!(m.color_by, tokenscope::ui::views::microscope::ColorBy::Speculation);
    // Its 4th verify step emitted one token (its own): all 4 drafts rejected, said after it; its 3rd rejected 1.
    assert_eq!(m.starts.iter().filter(|&&s| s).count(), 11, "11 emissions");
    h.get_all_by_label("✗4")
        .next()
        .expect("a step that rejected all 4 drafts");
    h.get_all_by_label("✗1").next().expect("a step that rejected 1 of 4");
}

#[test]
fn gui_the_statistics_and_the_timeline_show_acceptance_by_draft_position_and_tokens_per_step() {
    // 120 of 320 drafts accepted (each residue of (r + s) % 4 on 20 of the 80 verify steps: 20 × (0+1+2+3)),
    // (120 + 80) / 80 = 2.50 tokens a step; positions 1-4 accepted on 3/4, 2/4, 1/4 and none of the steps.
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), false);
    let mut app = App::new(TraceSource::Path(path.into()), None);
    app.wait_loaded();
    app.shown.findings = false;
    app.shown.stats = true;
    app.session_mut().unwrap().stats.grouping = tokenscope::ui::views::stats::Grouping::All;
    let mut h = Harness::builder()
        .with_size(egui::vec2(1500.0, 1000.0))
        .build_ui_state(|ui, app: &mut App| app.ui(ui), app);
    h.step();
    h.state_mut().session_mut().unwrap().stats.wait();
    h.run();
    h.get_by_label("drafts accepted");
    h.get_by_label("37.5 %");
    h.get_by_label("2.50");
    h.get_by_label("Draft acceptance by position");
    let trace = h.state().session().unwrap().view.trace.clone();
    // The Timeline's plots, one bucket of a second holding every verify step (the run spans 330 ms).
    let options = tokenscope::query::TimelineOptions {
        every_ns: 1_000_000_000,
        by: None,
        slo: tokenscope::analysis::summary::Slo::default(),
    };
    let rows = tokenscope::query::Rows::of(&tokenscope::query::timeline(&trace, &options).unwrap());
    let plotted = |title: &str| {
        let metric = tokenscope::ui::views::timeline::METRICS
            .iter()
            .find(|m| m.title == title)
            .unwrap();
        tokenscope::ui::views::timeline::lines(&rows, metric, None, options.every_ns)
            .into_iter()
            .map(|s| (s.name, s.runs[0][0][1]))
            .collect::<Vec<_>>()
    };
    assert_eq!(plotted("tokens per verify step"), [("tokens per step".to_owned(), 2.5)]);
    let acceptance = plotted("draft acceptance");
    let names: Vec<&str> = acceptance.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["accepted drafts", "draft 1", "draft 2", "draft 3", "draft 4"],
        "{acceptance:?}"
    );
    // The steps give no draft counts here: the rate is the tokens' verify steps', 120 of 320.
    let values: Vec<f64> = acceptance.iter().map(|(_, v)| *v).collect();
    assert_eq!(values, [0.375, 0.75, 0.5, 0.25, 0.0]);
}
