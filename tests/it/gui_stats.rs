//! The statistics window shows the figures of `tokenscope summary --by` (the same code), sorts by a clicked column
//! and exports what it shows as CSV.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers may unwrap: a panic here is a failed test"
)]

use std::process::Command;

use eframe::egui;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use serde_json::Value;
use tokenscope::analysis::stats::columns_for;
use tokenscope::analysis::summary::GroupBy;
use tokenscope::trace::Nullable;
use tokenscope::ui::views::stats::Grouping;
use tokenscope::ui::{App, TraceSource};

const PRICES: &str = r#"{"currency": "EUR", "default": {"input": 0.15, "cached_input": 0.075, "output": 0.6}}"#;

fn summary_json(prices: &std::path::Path) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_tokenscope"))
        .args(["summary", "sample_traces/demo.parquet", "--json", "--by", "app_id"])
        .args(["--slo-ttft-ms", "1000", "--slo-tpot-ms", "50", "--prices"])
        .arg(prices)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn stats_harness(dir: &std::path::Path) -> Harness<'static, App> {
    let mut app = App::new(TraceSource::Demo, None);
    app.wait_loaded();
    app.save_dir = Some(dir.to_path_buf());
    app.session_mut().unwrap().stats.prices = tokenscope::analysis::cost::Prices::from_json(PRICES).unwrap();
    app.session_mut().unwrap().stats.grouping = Grouping::By(GroupBy::AppId);
    app.shown.stats = true;
    let mut h = Harness::builder()
        .with_size(egui::vec2(1400.0, 860.0))
        .build_ui_state(|ui, app: &mut App| app.ui(ui), app);
    // The first frame starts the findings and the statistics on threads; wait for both before settling.
    h.step();
    h.state_mut().session_mut().unwrap().findings.wait();
    h.state_mut().session_mut().unwrap().stats.wait();
    h.run();
    h
}

#[test]
fn the_table_shows_the_figures_of_summary_by() {
    let dir = tempfile::tempdir().unwrap();
    let prices = dir.path().join("prices.json");
    std::fs::write(&prices, PRICES).unwrap();
    let cli = summary_json(&prices);
    let h = stats_harness(dir.path());
    let rows = h.state().session().unwrap().stats.rows().expect("computed");
    let groups = cli["groups"].as_array().unwrap();
    assert_eq!(rows.len(), groups.len());
    assert_eq!(rows.len(), 4, "chat, code, medical, search");
    for ((key, s), g) in rows.iter().zip(groups) {
        assert_eq!(key, g["key"].as_str().unwrap());
        assert_eq!(s.requests, g["requests"].as_u64().unwrap());
        assert_eq!(s.input_tokens, g["input_tokens"].as_u64().unwrap());
        assert_eq!(s.cached_tokens, g["cached_tokens"].as_u64());
        assert_eq!(s.output_tokens, g["output_tokens"].as_u64().unwrap());
        for (field, d) in [("ttft_ms", &s.ttft_ms), ("tpot_ms", &s.tpot_ms), ("e2e_ms", &s.e2e_ms)] {
            for (p, v) in [("p50", d.p50), ("p95", d.p95), ("p99", d.p99)] {
                // serde_json's default float parser may be one ulp off the printed shortest form.
                let (a, b) = (v.unwrap(), g[field][p].as_f64().unwrap());
                assert!((a - b).abs() <= 1e-9 * a.abs(), "{key} {field} {p}: {a} vs {b}");
            }
        }
        let close = |a: f64, b: &Value| assert!((a - b.as_f64().unwrap()).abs() <= 1e-9 * a.abs(), "{key}: {a} vs {b}");
        close(s.slo.unwrap().attainment.unwrap(), &g["slo"]["attainment"]);
        close(s.slo.unwrap().goodput_tok_s.unwrap(), &g["slo"]["goodput_tok_s"]);
        close(s.cost.unwrap().total, &g["cost"]["total"]);
        close(s.cost.unwrap().cache_savings, &g["cost"]["cache_savings"]);
    }
    // On screen as summary prints them: chat's TTFT p99 and the search group's SLO attainment.
    let chat = &groups[0];
    assert_eq!(chat["key"], "chat");
    let p99 = format!("{:.1}", chat["ttft_ms"]["p99"].as_f64().unwrap());
    assert!(h.get_all_by_label(&p99).count() >= 1, "{p99} on screen");
    let search = &groups[3];
    let attainment = format!("{:.1} %", search["slo"]["attainment"].as_f64().unwrap() * 100.0);
    assert!(h.get_all_by_label(&attainment).count() >= 1, "{attainment} on screen");
    h.get_by_label_contains("cost EUR");
}

#[test]
fn a_click_on_a_header_sorts_and_the_csv_holds_the_rows_shown() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = stats_harness(dir.path());
    // Requests per app: chat 171, search 91, code 46, medical 1. A click sorts descending, a second ascending.
    h.get_by_label("requests").click();
    h.run();
    let order = |h: &Harness<'_, App>| -> Vec<String> {
        h.state()
            .session()
            .unwrap()
            .stats
            .rows()
            .unwrap()
            .into_iter()
            .map(|(k, _)| k)
            .collect()
    };
    assert_eq!(order(&h), ["chat", "search", "code", "medical"]);
    h.get_by_label("requests ↓").click();
    h.run();
    assert_eq!(order(&h), ["medical", "code", "search", "chat"]);

    h.get_by_label("Export CSV…").click();
    h.step();
    // Written on a thread of its own: the app takes the result on a later frame.
    let path = match h.state_mut().wait_saved() {
        Some(result) => result.unwrap(),
        None => dir.path().join(
            std::fs::read_dir(dir.path())
                .unwrap()
                .next()
                .unwrap()
                .unwrap()
                .file_name(),
        ),
    };
    assert!(path.extension().is_some_and(|e| e == "csv"), "{}", path.display());
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    assert!(
        header.starts_with("app_id,requests,input_tokens,cached_tokens,output_tokens,"),
        "{header}"
    );
    assert!(header.ends_with(",cost,cache_savings"), "{header}");
    let firsts: Vec<&str> = lines.map(|l| l.split(',').next().unwrap()).collect();
    assert_eq!(firsts, ["medical", "code", "search", "chat"]);
    let rows = h.state().session().unwrap().stats.rows().unwrap();
    assert_eq!(header.split(',').count(), 1 + columns_for(&rows).len());
    // The chat row: its requests and token sums counted here from the trace's request rows.
    let t = &h.state().session().unwrap().view.trace;
    let chat = t.labels.lookup("chat").unwrap();
    let rows: Vec<usize> = (0..t.request_count())
        .filter(|&r| t.requests.app_id[r] == chat)
        .collect();
    let sum = |col: &Nullable<u32>| rows.iter().map(|&r| u64::from(col.at(r).unwrap_or(0))).sum::<u64>();
    let want = format!(
        "chat,{},{},{},{},",
        rows.len(),
        sum(&t.requests.input_tokens),
        sum(&t.requests.cached_tokens),
        sum(&t.requests.output_tokens)
    );
    assert!(rows.len() > 100, "{}", rows.len());
    assert!(text.lines().nth(4).unwrap().starts_with(&want), "{want}\n{text}");
}

#[test]
fn a_click_on_a_row_shows_that_groups_distributions() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = stats_harness(dir.path());
    h.get_by_label("Distributions of every request (click a row to choose a group, again for all)");
    // The medical app has one request (med-question): its TTFT samples are that one request's.
    h.get_by_label("medical").click();
    // The next frame starts computing the group's samples (a spinner meanwhile); wait for them.
    h.run_steps(2);
    h.state_mut().session_mut().unwrap().stats.wait();
    h.run();
    assert_eq!(h.state().session().unwrap().stats.group.as_deref(), Some("medical"));
    h.get_by_label("Distributions of app_id = medical (click a row to choose a group, again for all)");
    // Its one TTFT and one TPOT, in the two histograms' legends.
    assert_eq!(h.get_all_by_label("1 request").count(), 2);
    // Again: every request.
    h.get_by_label("medical").click();
    // The next frame starts computing the group's samples (a spinner meanwhile); wait for them.
    h.run_steps(2);
    h.state_mut().session_mut().unwrap().stats.wait();
    h.run();
    assert_eq!(h.state().session().unwrap().stats.group, None);
    h.get_by_label_contains("Distributions of every request");
}

#[test]
fn another_trace_replaces_the_table_and_forgets_the_group() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = stats_harness(dir.path());
    h.get_by_label("medical").click();
    h.run_steps(2);
    h.state_mut().session_mut().unwrap().stats.wait();
    h.run_steps(2);
    assert_eq!(h.state().session().unwrap().stats.group.as_deref(), Some("medical"));
    // The long-prefill sample: 10 requests, apps chat and search, no "medical".
    h.state_mut()
        .open(TraceSource::Path("sample_traces/long_prefill.jsonl".into()));
    h.state_mut().wait_loaded();
    h.run_steps(2);
    h.state_mut().session_mut().unwrap().stats.wait();
    h.run_steps(2);
    let rows = h.state().session().unwrap().stats.rows().unwrap();
    assert_eq!(h.state().session().unwrap().stats.group, None);
    assert_eq!(rows.iter().map(|(_, s)| s.requests).sum::<u64>(), 10);
    assert!(rows.iter().all(|(k, _)| k != "medical"), "{rows:?}");
}
