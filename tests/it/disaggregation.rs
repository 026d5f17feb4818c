//! Disaggregated serving (issue 49): a request prefilled on one instance and decoded on another, its KV transfer
//! between them, as a trace says it and as the simulator's what-if makes it.

use std::path::Path;

use serde_json::Value;

use crate::common::tokenscope;

fn load(path: &str) -> tokenscope::trace::Trace {
    tokenscope::load::load(Path::new(path), &tokenscope::ingest::Progress::default())
        .unwrap_or_else(|e| panic!("{path}: {e}"))
        .trace
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// One request, prefilled on `p0` in its steps 7 and 8 and decoded on `d0` in its steps 7, 8 and 9 (the same numbers:
/// each instance counts its own), with a 3 ms transfer of its 2,000 prompt tokens between.
const HAND_BUILT: &str = r#"{"kind":"meta","format":"tokenscope","version":1}
{"kind":"iteration","source":"p0","iteration":7,"start_ns":1764403201000000000,"end_ns":1764403201020000000,"num_prefill_tokens":1024}
{"kind":"iteration","source":"p0","iteration":8,"start_ns":1764403201020000000,"end_ns":1764403201035000000,"num_prefill_tokens":976}
{"kind":"iteration","source":"d0","iteration":7,"start_ns":1764403201038000000,"end_ns":1764403201048000000,"num_decode_tokens":1}
{"kind":"iteration","source":"d0","iteration":8,"start_ns":1764403201048000000,"end_ns":1764403201058000000,"num_decode_tokens":1}
{"kind":"iteration","source":"d0","iteration":9,"start_ns":1764403201058000000,"end_ns":1764403201068000000,"num_decode_tokens":1}
{"kind":"request","request_id":"r1","source":"p0","decode_source":"d0","arrival_ns":1764403200995000000,"scheduled_ns":1764403201000000000,"first_token_ns":1764403201048000000,"finished_ns":1764403201068000000,"input_tokens":2000,"output_tokens":3}
{"kind":"stage","request_id":"r1","stage":"prefill","start_ns":1764403201000000000,"end_ns":1764403201020000000,"iteration":7,"tokens":1024}
{"kind":"stage","request_id":"r1","stage":"prefill","start_ns":1764403201020000000,"end_ns":1764403201035000000,"iteration":8,"tokens":976}
{"kind":"stage","request_id":"r1","stage":"kv_transfer","start_ns":1764403201035000000,"end_ns":1764403201038000000,"tokens":2000,"bytes":262144000}
{"kind":"token","request_id":"r1","index":0,"emitted_ns":1764403201048000000,"iteration":7}
{"kind":"token","request_id":"r1","index":1,"emitted_ns":1764403201058000000,"iteration":8}
{"kind":"token","request_id":"r1","index":2,"emitted_ns":1764403201068000000,"iteration":9}
"#;

#[test]
fn a_hand_built_two_instance_trace_keeps_the_request_whole_across_instances() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("pd.jsonl");
    std::fs::write(&path, HAND_BUILT).unwrap_or_else(|e| panic!("{e}"));
    let path = path.to_string_lossy().into_owned();
    let t = load(&path);
    assert_eq!(t.request_count(), 1);
    let (p0, d0) = (
        t.labels.lookup("p0").unwrap_or(u32::MAX),
        t.labels.lookup("d0").unwrap_or(u32::MAX),
    );
    assert_eq!((t.requests.source[0], t.decode_source(0)), (p0, d0));
    // The tokens' steps 7, 8, 9 are the decode instance's, not the prefill instance's 7 and 8.
    for k in t.tokens_of(0) {
        let row = t.tokens.iter_row[k] as usize;
        assert_eq!(t.iterations.source[row], d0, "token {k}");
    }
    // The prefill chunks' steps are the prefill instance's.
    for s in t.explicit_stages_of(0) {
        if let Some(row) = t.stages.iter_row[s] {
            assert_eq!(t.iterations.source[row as usize], p0);
        }
    }
    // Its TTFT, 1,048 - 995 = 53 ms, holds the 3 ms transfer; TPOT (1,068 - 1,048) / 2 = 10 ms.
    let (code, out, err) = tokenscope(&["summary", "--json", &path]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    assert_eq!(v["ttft_ms"]["p50"], 53.0, "{out}");
    assert_eq!(v["tpot_ms"]["p50"], 10.0, "{out}");
    let (code, out, err) = tokenscope(&["findings", "--json", &path]);
    assert_eq!(code, 0, "{err}");
    assert!(json(&out)["findings"].as_array().is_some(), "{out}");
    #[cfg(feature = "query")]
    {
        let sql = "SELECT request_id, from_source, to_source, start_ns, end_ns, duration_ms, tokens, bytes, retries \
                   FROM transfers";
        let (code, out, err) = tokenscope(&["query", &path, sql, "--format", "json"]);
        assert_eq!(code, 0, "{err}");
        let rows = json(&out);
        assert_eq!(rows.as_array().map(Vec::len), Some(1), "{out}");
        let row = &rows[0];
        assert_eq!(
            (&row["request_id"], &row["from_source"], &row["to_source"]),
            (&Value::from("r1"), &Value::from("p0"), &Value::from("d0"))
        );
        assert_eq!(
            (&row["start_ns"], &row["end_ns"]),
            (
                &Value::from(1_764_403_201_035_000_000_i64),
                &Value::from(1_764_403_201_038_000_000_i64)
            )
        );
        // 2,000 tokens of 131,072 bytes (an 8 B model's KV); the retries not in the trace, absent.
        assert_eq!(
            (&row["duration_ms"], &row["tokens"], &row["bytes"], &row["retries"]),
            (
                &Value::from(3.0),
                &Value::from(2000),
                &Value::from(262_144_000),
                &Value::Null
            )
        );
        let (_, out, _) = tokenscope(&["query", &path, "SELECT decode_source FROM requests", "--format", "csv"]);
        assert_eq!(out, "decode_source\nd0\n");
    }
}

#[test]
fn a_one_prefill_one_decode_replay_removes_the_interruption_and_prices_the_transfer() {
    // The incident: chunked prefill off, long prompts stall a decoding request (scenario prefill-interrupts-decode).
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let a = dir.path().join("incident.parquet").to_string_lossy().into_owned();
    let b = dir.path().join("1p1d.parquet").to_string_lossy().into_owned();
    let (code, _, err) = tokenscope(&["synth", "--scenario", "prefill-interrupts-decode", "-o", &a]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = tokenscope(&[
        "synth",
        "--scenario",
        "replay",
        "--from-trace",
        &a,
        "--set",
        "disaggregation=1p1d",
        "-o",
        &b,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("overrides: disaggregation=1p1d"), "{out}");
    assert!(
        out.contains("each instance became 1 prefill and 1 decode instance(s)")
            && out.contains("at 25 GB/s after 1 ms"),
        "{out}"
    );
    let kinds = |path: &str| -> Vec<String> {
        let (code, out, err) = tokenscope(&["findings", "--json", path]);
        assert_eq!(code, 0, "{err}");
        json(&out)["findings"]
            .as_array()
            .map(|l| l.iter().map(|f| f["kind"].as_str().unwrap_or("").to_owned()).collect())
            .unwrap_or_default()
    };
    assert!(kinds(&a).iter().any(|k| k == "decode-interrupted"), "{:?}", kinds(&a));
    assert!(!kinds(&b).iter().any(|k| k == "decode-interrupted"), "{:?}", kinds(&b));

    let (ta, tb) = (load(&a), load(&b));
    assert_eq!(ta.request_count(), tb.request_count());
    let name = |t: &tokenscope::trace::Trace, id: u32| t.label(id).unwrap_or("").to_owned();
    let mut transfers = 0;
    for r in 0..tb.request_count() as u32 {
        let ri = r as usize;
        let Some(input) = tb.requests.input_tokens.at(ri) else {
            continue;
        };
        if tb.tokens_of(r).is_empty() {
            continue;
        }
        // Prefilled on the trace's instance's prefill twin, decoded on its decode twin.
        let source = name(
            &ta,
            ta.requests.source[ta.request_row(tb.request_id(r)).unwrap_or(0) as usize],
        );
        assert_eq!(name(&tb, tb.requests.source[ri]), format!("{source}-prefill"));
        assert_eq!(name(&tb, tb.decode_source(r)), format!("{source}-decode"));
        // One transfer of the whole prompt, after its last prefill chunk and before its first token: 1 ms plus its
        // bytes (131,072 a token, the 8 B model's KV in bf16) at 25 GB/s.
        let st = &tb.stages;
        let spans: Vec<usize> = tb.explicit_stages_of(r).collect();
        let moved: Vec<usize> = spans
            .iter()
            .copied()
            .filter(|&s| st.kind[s] == tokenscope::trace::StageKind::KvTransfer)
            .collect();
        assert_eq!(moved.len(), 1, "{}", tb.request_id(r));
        let s = moved[0];
        let bytes = f64::from(input) * 131_072.0;
        let want_ns = 1_000_000 + (bytes / 25e9 * 1e9).round() as i64;
        assert_eq!(st.end_ns[s] - st.start_ns[s], want_ns, "{}", tb.request_id(r));
        assert_eq!(st.tokens[s], Some(input));
        let last_prefill = spans
            .iter()
            .filter(|&&p| st.kind[p] == tokenscope::trace::StageKind::Prefill)
            .map(|&p| st.end_ns[p])
            .max();
        assert_eq!(last_prefill, Some(st.start_ns[s]));
        assert!(tb.tokens.emitted_ns[tb.tokens_of(r).start] > st.end_ns[s]);
        transfers += 1;
    }
    assert!(transfers > 0);
    #[cfg(feature = "query")]
    {
        let (code, out, err) = tokenscope(&["query", &b, "SELECT count(*) AS n FROM transfers", "--format", "csv"]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(out, format!("n\n{transfers}\n"));
    }
    // The diff says what the remedy does to TPOT p99 (lower) and what the transfer adds to TTFT.
    let (code, out, err) = tokenscope(&["diff", &a, &b, "--json"]);
    assert_eq!(code, 0, "{err}");
    let v = json(&out);
    let figure = |key: &str| -> (f64, f64) {
        let f = v["figures"]
            .as_array()
            .and_then(|l| l.iter().find(|f| f["key"] == key))
            .unwrap_or_else(|| panic!("{key} in {out}"));
        (f["a"].as_f64().unwrap_or(f64::NAN), f["b"].as_f64().unwrap_or(f64::NAN))
    };
    let (tpot_a, tpot_b) = figure("tpot_p99_ms");
    assert!(tpot_b < tpot_a, "TPOT p99 {tpot_a} -> {tpot_b}");
}

#[test]
fn gui_the_instances_are_grouped_by_role_and_a_dragged_range_lists_its_transfers() {
    use eframe::egui::pos2;
    use egui_kittest::kittest::Queryable;
    use tokenscope::trace::instances::InstanceRole;
    use tokenscope::ui::{App, TraceSource};

    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("pd.jsonl");
    std::fs::write(&path, HAND_BUILT).unwrap_or_else(|e| panic!("{e}"));
    let mut app = App::new(TraceSource::Path(path), None);
    app.wait_loaded();
    let mut h = crate::gui::harness(app);
    // The prefill instance's track above the decode instance's, though "d0" sorts before "p0".
    let roles: Vec<(String, InstanceRole)> = {
        let view = &h.state().session().unwrap_or_else(|| panic!("opened")).view;
        view.engines
            .iter()
            .map(|e| (view.trace.label(e.source).unwrap_or("").to_owned(), e.role))
            .collect()
    };
    assert_eq!(
        roles,
        [
            ("p0".to_owned(), InstanceRole::Prefill),
            ("d0".to_owned(), InstanceRole::Decode)
        ]
    );
    // A drag from 1,030 to 1,045 ms (the trace starts at the arrival, 995 ms) holds the whole 3 ms transfer.
    const MS: i64 = 1_000_000;
    let base = crate::gui::t0(&h);
    let y = h
        .state()
        .session()
        .and_then(|s| s.waterfall.requests_rect)
        .map_or(0.0, |r| r.center().y);
    let (from, to) = (
        pos2(crate::gui::x_of(&h, base + 35 * MS), y),
        pos2(crate::gui::x_of(&h, base + 50 * MS), y),
    );
    crate::gui::drag_then_step(&mut h, from, to);
    if let Some(s) = h.state_mut().session_mut() {
        s.wait_interference();
    }
    h.run_steps(10);
    let moved = h
        .state()
        .session()
        .and_then(|s| s.interference.as_ref())
        .map(|x| x.transfers.clone())
        .unwrap_or_default();
    assert_eq!(moved.list.len(), 1, "{moved:?}");
    assert_eq!((moved.in_range_ms, moved.tokens), (3.0, Some(2_000)));
    // 262,144,000 bytes moved in 3 ms: 87.38 GB/s.
    h.get_by_label("KV transfers: 1 (3.0 ms in range, 2000 tokens, 262.1 MB moved, 262.1 MB of it in range)");
    h.get_by_label("3.0 ms, 2000 tokens, 262.1 MB at 87.38 GB/s");
}

#[test]
fn gui_a_starved_rank_reads_idle_beside_a_queueing_one_in_the_load_strip() {
    use egui_kittest::kittest::Queryable;
    // vLLM 0.33.0's own logging code, two data-parallel ranks: the load stops reaching engine 1, whose log falls
    // silent after its idle reading, while engine 0's queue grows.
    let log = "tests/data/import/vllm/logs/0.33.0-dp2-skew.log";
    let truth = json(
        &std::fs::read_to_string("tests/data/import/vllm/logs/0.33.0-dp2-skew.truth.json")
            .unwrap_or_else(|e| panic!("{e}")),
    );
    let stats: Vec<&Value> = truth["lines"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|l| l["kind"] == "stats" && l["emitted"] == true)
        .collect();
    let count = |l: &Value, k: &str| u32::try_from(l[k].as_u64().unwrap_or(0)).unwrap_or(0);
    let scale = stats
        .iter()
        .map(|l| count(l, "running") + count(l, "waiting"))
        .max()
        .unwrap_or(0);
    // The reading where engine 0's queue is longest, and engine 1's last reading by then; their times from the
    // first line's, as printed (whole seconds of one day).
    let second = |l: &Value| -> i64 {
        let printed = l["time_printed"].as_str().unwrap_or_default();
        let hms: Vec<i64> = printed[6..].split(':').filter_map(|v| v.parse().ok()).collect();
        hms[0] * 3600 + hms[1] * 60 + hms[2]
    };
    let busiest = stats
        .iter()
        .filter(|l| l["engine"] == 0)
        .max_by_key(|l| count(l, "waiting"))
        .unwrap_or_else(|| panic!("engine 0"));
    let starved = stats
        .iter()
        .rfind(|l| l["engine"] == 1 && second(l) <= second(busiest))
        .unwrap_or_else(|| panic!("engine 1"));
    let at_s = second(busiest) - second(stats[0]);
    let want = (
        (count(busiest, "running"), count(busiest, "waiting")),
        (count(starved, "running"), count(starved, "waiting")),
    );
    assert!(want.0.1 > 0 && want.1 == (0, 0), "{want:?}");
    let mut h = crate::gui::harness_on(log);
    crate::gui::settle(&mut h);
    let view = &h.state().session().unwrap_or_else(|| panic!("opened")).view;
    let strip = view.load.as_ref().unwrap_or_else(|| panic!("a load strip"));
    let names: Vec<&str> = strip
        .rows
        .iter()
        .map(|r| view.trace.label(r.source).unwrap_or(""))
        .collect();
    assert_eq!(names, ["engine", "engine-001"]);
    assert_eq!(strip.max, scale);
    // Half a second after engine 0's longest queue: it queues, engine 1 holds its idle reading.
    const MS: i64 = 1_000_000;
    let t = view.t0_ns + at_s * 1_000 * MS + 500 * MS;
    let vp = tokenscope::view::viewport::Viewport::fit(t, t + MS, 1.0);
    let (r0, r1) = (strip.rows[0].columns(&vp, 1)[0], strip.rows[1].columns(&vp, 1)[0]);
    assert_eq!((r0, r1), (Some(want.0), Some(want.1)));
    // Hovering engine 1's row there says so.
    let top = h
        .state()
        .session()
        .and_then(|s| s.waterfall.load_rows_top)
        .unwrap_or(0.0);
    let p = eframe::egui::pos2(
        crate::gui::x_of(&h, t),
        top + tokenscope::ui::views::waterfall::LOAD_ROW_HEIGHT * 1.5,
    );
    h.hover_at(p);
    h.run();
    h.hover_at(eframe::egui::pos2(p.x + 1.0, p.y));
    for _ in 0..40 {
        h.step();
    }
    h.get_by_label("engine-001");
    h.get_by_label("0 running, 0 waiting (the most in this column)");
}

#[test]
fn gui_a_what_if_replays_the_trace_on_screen_as_a_disaggregated_deployment_beside_it() {
    use egui_kittest::kittest::Queryable;
    use tokenscope::analysis::findings::Kind;
    use tokenscope::trace::instances::InstanceRole;
    // The incident: chunked prefill off, long prompts stall a decoding request.
    let mut h = crate::gui::harness_on("sample_traces/prefill_interrupts_decode.jsonl");
    crate::gui::settle(&mut h);
    // File > Compare with a what-if…, the preset, Replay and compare.
    h.get_by_label("File").click();
    h.run();
    h.get_by_label("Compare with a what-if…").click();
    h.run();
    h.get_by_label("1 prefill + 1 decode").click();
    h.run();
    h.get_by_label("Replay and compare").click();
    h.step();
    h.state_mut().wait_compared();
    h.run_steps(10);
    let c = h.state().comparing().unwrap_or_else(|| panic!("comparing"));
    // B is A replayed: vllm-0 became a prefill and a decode instance, every request handed from one to the other.
    let b = &c.other.view.trace;
    let mut roles: Vec<InstanceRole> = b.instance_roles().into_values().collect();
    roles.sort();
    assert_eq!(roles, [InstanceRole::Prefill, InstanceRole::Decode]);
    assert_eq!(
        b.request_count(),
        c.other
            .view
            .trace
            .requests
            .decode_source
            .iter()
            .filter(|&&d| d != tokenscope::trace::NO_STR)
            .count()
    );
    let cmp = c.comparison.as_ref().unwrap_or_else(|| panic!("compared"));
    let kinds =
        |f: &[tokenscope::analysis::findings::Finding]| f.iter().filter(|f| f.kind == Kind::DecodeInterrupted).count();
    assert!(kinds(&cmp.findings_a) > 0, "A's interruption");
    assert_eq!(kinds(&cmp.findings_b), 0, "gone in B");
    assert!(
        h.query_all_by_label_contains("what-if: disaggregation=1p1d (A replayed by the simulator)")
            .next()
            .is_some()
    );
}

#[test]
fn a_disaggregated_trace_is_replayed_as_it_ran_with_its_instances_roles() {
    // SGLang 0.5.23's prefill and decode servers' logs (its own timing code), as one trace.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let pd = dir.path().join("pd.parquet").to_string_lossy().into_owned();
    let logs = "tests/data/import/sglang/logs";
    let (prefill, decode) = (
        format!("{logs}/0.5.23-pd-prefill.log"),
        format!("{logs}/0.5.23-pd-decode.log"),
    );
    let (code, _, err) = tokenscope(&["convert", &prefill, &decode, "-o", &pd]);
    assert_eq!(code, 0, "{err}");
    let replay = |set: &[&str]| {
        let out = dir.path().join("replay.parquet").to_string_lossy().into_owned();
        let mut args = vec!["synth", "--scenario", "replay", "--from-trace", &pd, "-o", &out];
        for s in set {
            args.extend(["--set", s]);
        }
        let (code, stdout, err) = tokenscope(&args);
        (code, stdout + &err, out)
    };
    // Kept as it ran: the prefill instance hands its requests to the decode instance at 25 GB/s after 1 ms.
    let (code, said, out) = replay(&["transfer_gb_per_s=0.5"]);
    assert_eq!(code, 0, "{said}");
    assert!(
        said.contains("disaggregated as the trace ran: its 1 prefill instance(s)"),
        "{said}"
    );
    let sql =
        "SELECT request_id, from_source, to_source, duration_ms, tokens, bytes FROM transfers ORDER BY tokens DESC";
    let (code, rows, err) = tokenscope(&["query", &out, sql, "--format", "json"]);
    assert_eq!(code, 0, "{err}");
    let rows = json(&rows);
    let rows = rows.as_array().unwrap_or_else(|| panic!("rows"));
    // Every request that arrived at the prefill server moves its prompt's KV (its 7: six joined, its own warm-up);
    // the decode server's warm-up is served where it arrived.
    assert_eq!(rows.len(), 7, "{rows:?}");
    for r in rows {
        assert_eq!(
            (r["from_source"].as_str(), r["to_source"].as_str()),
            (Some("0.5.23-pd-prefill"), Some("0.5.23-pd-decode"))
        );
        // 131,072 bytes a token (the 8 B profile's model) at 0.5 GB/s, plus 1 ms.
        let tokens = r["tokens"].as_i64().unwrap_or(0);
        assert_eq!(r["bytes"].as_i64(), Some(tokens * 131_072), "{r}");
        let ms = (tokens * 131_072) as f64 / 0.5e9 * 1e3 + 1.0;
        assert!(
            (r["duration_ms"].as_f64().unwrap_or(0.0) - ms).abs() < 1e-3,
            "{r} vs {ms}"
        );
    }
    // The longest, e87e…'s 3,071 tokens: 402,522,112 bytes in 805.04 ms + 1 ms.
    assert_eq!(rows[0]["tokens"].as_i64(), Some(3_071));
    // Splitting it again is refused, with why.
    let (code, said, _) = replay(&["disaggregation=1p1d"]);
    assert_eq!(code, 1, "{said}");
    assert!(
        said.contains("the trace is disaggregated already (1 prefill and 1 decode instance(s))"),
        "{said}"
    );
}
