//! The command line, run as a user runs it: output shape, figures and exit codes.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers may unwrap: a panic here is a failed test"
)]

use std::path::Path;

use crate::common::tokenscope;
use serde_json::Value;

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("JSON output ({e}): {text}"))
}

#[test]
fn validate_json_lists_each_rejection_with_its_line() {
    let (code, out, _) = tokenscope(&["validate", "tests/data/bad/float_seconds.jsonl", "--json"]);
    assert_eq!(code, 0, "the trace loads, with rejections");
    let v = json(&out);
    assert_eq!(v["records"], 3);
    assert_eq!(v["kept"], 1);
    assert_eq!(v["fatal"], Value::Null);
    let rejected = v["rejected"].as_array().unwrap_or_else(|| panic!("rejected is a list"));
    assert_eq!(rejected.len(), 2);
    assert_eq!(rejected[0]["line"], 2);
    assert_eq!(rejected[0]["kind"], "float_time");
    assert_eq!(rejected[0]["field"], "arrival_ns");
    assert_eq!(rejected[1]["line"], 3);
    assert_eq!(rejected[1]["kind"], "time_unit");
}

#[test]
fn validate_of_an_unreadable_file_exits_1_with_the_reason() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let p = dir.path().join("broken.parquet");
    std::fs::write(&p, b"PAR1 this is not parquet").unwrap_or_else(|e| panic!("{e}"));
    let path = p.to_string_lossy().into_owned();
    let (code, out, _) = tokenscope(&["validate", &path, "--json"]);
    assert_eq!(code, 1);
    let v = json(&out);
    let fatal = v["fatal"]
        .as_str()
        .unwrap_or_else(|| panic!("fatal is a message: {out}"));
    assert!(fatal.contains("broken.parquet"), "{fatal}");
    let (code, _, err) = tokenscope(&["validate", &path]);
    assert_eq!(code, 1);
    assert!(err.starts_with("error: "), "{err}");
    let (code, _, err) = tokenscope(&["summary", "no/such/file.jsonl"]);
    assert_eq!(code, 1);
    assert!(err.contains("no/such/file.jsonl"), "{err}");
}

#[test]
fn summary_json_is_the_same_from_jsonl_and_from_parquet() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let pq = dir.path().join("four.parquet");
    let pq = pq.to_string_lossy();
    let (code, out, err) = tokenscope(&["convert", "sample_traces/four_requests.jsonl", "-o", &pq]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("4 requests, 12 tokens"), "{out}");
    let args = ["--json", "--slo-ttft-ms", "200", "--slo-tpot-ms", "55", "--by", "model"];
    let (_, from_jsonl, _) = tokenscope(&[&["summary", "sample_traces/four_requests.jsonl"], &args[..]].concat());
    let (_, from_parquet, _) = tokenscope(&[&["summary", &*pq], &args[..]].concat());
    // The same figures; only what was read differs: a Parquet trace's candidates stay on disk, unchecked.
    let (mut a, mut b) = (json(&from_jsonl), json(&from_parquet));
    assert_eq!(a["candidates_checked"], true);
    assert_eq!(b["candidates_checked"], false);
    a["candidates_checked"] = Value::Null;
    b["candidates_checked"] = Value::Null;
    assert_eq!(a, b);
    let v = json(&from_jsonl);
    assert_eq!(v["requests"], 4);
    assert_eq!(v["throughput_tok_s"], 13.0);
    assert_eq!(v["ttft_ms"]["p50"], 150.0);
    assert_eq!(v["tpot_ms"]["count"], 3);
    assert_eq!(v["slo"]["attainment"], 0.5);
    assert_eq!(v["slo"]["goodput_tok_s"], 4.0);
    assert_eq!(v["token_mismatches"], 1);
    assert_eq!(v["rejected"], 0);
    assert_eq!(v["by"], "model");
    assert_eq!(v["groups"][0]["key"], "llama-3-8b");
    assert_eq!(v["groups"][1]["requests"], 3);
}

#[test]
fn summary_leaves_a_parquet_traces_candidates_on_disk_and_says_so() {
    let (code, out, _) = tokenscope(&["summary", "sample_traces/demo.parquet"]);
    assert_eq!(code, 0);
    assert!(
        out.contains("candidates        left on disk, not read (`tokenscope validate` checks them)"),
        "{out}"
    );
    let (_, out, _) = tokenscope(&["summary", "sample_traces/eos_mistrigger.jsonl"]);
    assert!(!out.contains("left on disk"), "JSONL is read whole: {out}");
}

#[test]
fn summary_text_is_a_table_with_units() {
    let (code, out, _) = tokenscope(&["summary", "sample_traces/four_requests.jsonl"]);
    assert_eq!(code, 0);
    assert!(out.contains("13.0 output tok/s"), "{out}");
    let ttft = out
        .lines()
        .find(|l| l.starts_with("TTFT"))
        .unwrap_or_else(|| panic!("a TTFT row: {out}"));
    let cells: Vec<&str> = ttft.split_whitespace().collect();
    assert_eq!(
        cells,
        ["TTFT", "4", "227.5", "150.0", "500.0", "500.0", "500.0", "500.0"]
    );
    assert!(out.contains("latency (ms)"));
    assert!(Path::new("sample_traces/four_requests.jsonl").exists());
}

#[test]
fn findings_json_names_the_planted_eos_and_kinds_filter() {
    let (code, stdout, stderr) = tokenscope(&["findings", "sample_traces/eos_mistrigger.jsonl", "--json"]);
    assert_eq!(code, 0, "{stderr}");
    let v: Value = serde_json::from_str(&stdout).unwrap();
    let list = v["findings"].as_array().unwrap();
    let eos: Vec<&Value> = list.iter().filter(|f| f["kind"] == "eos-mistrigger").collect();
    assert_eq!(eos.len(), 1, "{stdout}");
    assert_eq!(eos[0]["severity"], "critical");
    assert_eq!(eos[0]["requests"][0], "med-question");
    assert_eq!(eos[0]["tokens"][0]["request"], "med-question");
    assert_eq!(eos[0]["tokens"][0]["index"], 37);
    assert!(eos[0]["summary"].as_str().unwrap().contains("p = 0.100 (rank 2)"));
    assert!(eos[0]["from_ms"].as_f64().unwrap() < eos[0]["to_ms"].as_f64().unwrap());
    assert_eq!(v["thresholds"]["eos_max_probability"], 0.5);
    // Only the kinds asked for; a threshold from the command line: rank >= 3 and p < 0.05 no longer flag it.
    let (_, stdout, _) = tokenscope(&[
        "findings",
        "sample_traces/eos_mistrigger.jsonl",
        "--kind",
        "eos-mistrigger",
        "--eos-min-rank",
        "3",
        "--eos-max-probability",
        "0.05",
    ]);
    assert!(
        stdout.starts_with("sample_traces/eos_mistrigger.jsonl: 0 findings"),
        "{stdout}"
    );
    let (code, _, stderr) = tokenscope(&["findings", "sample_traces/eos_mistrigger.jsonl", "--kind", "eos"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("eos-mistrigger"),
        "the valid kinds are listed: {stderr}"
    );
    // Every threshold has its flag (derived from the thresholds struct), and a bad value names it.
    let (code, _, stderr) = tokenscope(&[
        "findings",
        "sample_traces/eos_mistrigger.jsonl",
        "--early-eos-min-peers",
        "0",
        "--repetition-min-tokens",
        "32",
    ]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("early_eos_min_peers (--early-eos-min-peers) = 0: give at least 1"),
        "{stderr}"
    );
}

#[test]
fn findings_judge_the_default_objectives_unless_told_and_say_so() {
    // Without objectives, TTFT 1 s and TPOT 50 ms (the app's): long_prefill's short-700 waited 8.5 s.
    let (code, stdout, _) = tokenscope(&["findings", "sample_traces/long_prefill.jsonl"]);
    assert_eq!(code, 0);
    let second = stdout.lines().nth(1).unwrap();
    assert_eq!(
        second,
        "objectives: TTFT <= 1000 ms, TPOT <= 50 ms (defaults; --slo-ttft-ms, --slo-tpot-ms or --no-slo to change)"
    );
    assert!(stdout.contains("missed the TTFT objective of 1000 ms"), "{stdout}");
    // Given ones are judged alone; --no-slo judges none.
    let (_, stdout, _) = tokenscope(&["findings", "sample_traces/long_prefill.jsonl", "--slo-ttft-ms", "20000"]);
    assert_eq!(stdout.lines().nth(1), Some("objectives: TTFT <= 20000 ms"));
    assert!(!stdout.contains("[slo-violations]"), "nobody waited 20 s: {stdout}");
    let (_, stdout, _) = tokenscope(&["findings", "sample_traces/long_prefill.jsonl", "--no-slo", "--json"]);
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["slo"]["ttft_ms"], Value::Null);
    assert_eq!(v["slo"]["defaults"], false);
    assert!(
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .all(|f| f["kind"] != "slo-violations")
    );
    let (code, _, stderr) = tokenscope(&[
        "findings",
        "sample_traces/long_prefill.jsonl",
        "--no-slo",
        "--slo-ttft-ms",
        "5",
    ]);
    assert_eq!(code, 2);
    assert!(stderr.contains("cannot be used with"), "{stderr}");
}

#[test]
fn findings_text_of_the_long_prefill_lists_the_monopoly_steps() {
    let (code, stdout, _) = tokenscope(&[
        "findings",
        "sample_traces/long_prefill.jsonl",
        "--kind",
        "prefill-monopoly",
    ]);
    assert_eq!(code, 0);
    assert!(stdout.contains("1 finding (1 critical, 0 warning, 0 info)"), "{stdout}");
    assert!(
        stdout.contains("doc-96k's prefill of 96,213 prompt tokens took 5 consecutive steps"),
        "{stdout}"
    );
    // The steps are those of doc-96k's prefill stages in the file.
    let steps: Vec<String> = std::fs::read_to_string("sample_traces/long_prefill.jsonl")
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["kind"] == "stage" && r["request_id"] == "doc-96k" && r["stage"] == "prefill")
        .map(|r| format!("vllm-0#{}", r["iteration"]))
        .collect();
    assert_eq!(steps.len(), 5, "{steps:?}");
    assert!(stdout.contains(&format!("steps: {}", steps.join(", "))), "{stdout}");
    let (code, _, stderr) = tokenscope(&["findings", "sample_traces/long_prefill.jsonl", "--itl-factor", "-1"]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("itl_factor (--itl-factor) = -1: give a factor above 1"),
        "{stderr}"
    );
    let (code, _, stderr) = tokenscope(&["findings", "no/such/file.jsonl"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("no/such/file.jsonl"), "{stderr}");
}

#[test]
fn summary_prices_errors_name_the_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("prices.json");
    std::fs::write(&bad, r#"{"default": {"input": 1, "cached_input": 0.5, "ouput": 2}}"#).unwrap();
    let bad_s = bad.to_string_lossy();
    let (code, _, stderr) = tokenscope(&["summary", "sample_traces/four_requests.jsonl", "--prices", &bad_s]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("prices.json") && stderr.contains("unknown field `ouput`"),
        "{stderr}"
    );
    let good = dir.path().join("good.json");
    std::fs::write(
        &good,
        r#"{"currency": "EUR", "default": {"input": 1, "cached_input": 0.5, "output": 2}}"#,
    )
    .unwrap();
    let (code, stdout, _) = tokenscope(&[
        "summary",
        "sample_traces/four_requests.jsonl",
        "--prices",
        &good.to_string_lossy(),
    ]);
    assert_eq!(code, 0);
    // One price for all: uncached 812 + 36 + 1,000 + 50 = 1,898 x 1, cached (64 + 1,000) x 0.5 = 532, output 13 x 2
    // = 26: 2,456 per 1 M tokens; the cache saved 1,064 x (1 - 0.5) = 532. Three significant digits below 100.
    assert!(
        stdout.contains("cost              EUR 0.00246 (input 0.00190, cached input 0.000532, output 0.0000260); the prefix cache saved 0.000532"),
        "{stdout}"
    );
}

#[cfg(feature = "query")]
#[test]
fn query_prints_an_aligned_table_csv_or_json() {
    // chat: r1, r3, r4 (TTFT 150, 500, 60: mean 236.667, nearest-rank p99 500); search: r2 (200).
    let sql = "SELECT app_id, count(*) AS n, avg(ttft_ms) AS ttft, QUANTILE_DISC(ttft_ms, 0.99) AS p99 \
               FROM requests GROUP BY app_id ORDER BY app_id";
    let (code, out, err) = tokenscope(&["query", "sample_traces/four_requests.jsonl", sql]);
    assert_eq!((code, err.as_str()), (0, ""));
    assert_eq!(
        out,
        "app_id  n     ttft  p99\nchat    3  236.667  500\nsearch  1      200  200\n(2 rows)\n"
    );
    let (_, out, _) = tokenscope(&["query", "sample_traces/four_requests.jsonl", sql, "--format", "csv"]);
    assert_eq!(
        out,
        "app_id,n,ttft,p99\nchat,3,236.66666666666666,500\nsearch,1,200,200\n"
    );
    let (_, out, _) = tokenscope(&["query", "sample_traces/four_requests.jsonl", sql, "--format", "json"]);
    let v = json(&out);
    assert_eq!(v[1]["app_id"], "search");
    assert_eq!(v[1]["p99"], 200.0);
}

#[cfg(feature = "query")]
#[test]
fn query_errors_exit_2_naming_the_column() {
    let (code, out, err) = tokenscope(&[
        "query",
        "sample_traces/four_requests.jsonl",
        "SELECT tpot FROM requests",
    ]);
    assert_eq!((code, out.as_str()), (2, ""));
    assert!(
        err.starts_with("error: no column \"tpot\" in requests (did you mean tpot_ms?)"),
        "{err}"
    );
}

#[cfg(feature = "query")]
#[test]
fn query_reads_a_parquet_traces_candidates_only_when_asked() {
    // The demo's candidates stay on disk for a query of requests, and are read for one of candidates: the count
    // of candidates equals that of the sum over tokens of their candidates, which `tokens` alone cannot give.
    let (code, out, err) = tokenscope(&[
        "query",
        "sample_traces/demo.parquet",
        "SELECT count(*) AS n FROM candidates WHERE position = 1",
        "--format",
        "csv",
    ]);
    assert_eq!(code, 0, "{err}");
    let (_, tokens, _) = tokenscope(&[
        "query",
        "sample_traces/demo.parquet",
        "SELECT count(*) AS n FROM tokens",
        "--format",
        "csv",
    ]);
    // Every token of the demo has candidates, so the first-placed candidates are as many as the tokens.
    assert_eq!(out, tokens);
    assert!(out.starts_with("n\n") && out.trim_end().len() > 2, "{out}");
}

#[cfg(feature = "query")]
#[test]
fn timeline_csv_of_the_four_requests_in_half_seconds() {
    let (code, out, err) = tokenscope(&[
        "timeline",
        "sample_traces/four_requests.jsonl",
        "--every",
        "500ms",
        "--format",
        "csv",
    ]);
    assert_eq!((code, err.as_str()), (0, ""));
    let mut reader = csv::Reader::from_reader(out.as_bytes());
    let header: Vec<String> = reader.headers().unwrap().iter().map(str::to_owned).collect();
    let rows: Vec<Vec<String>> = reader
        .records()
        .map(|r| r.unwrap().iter().map(str::to_owned).collect())
        .collect();
    let at = |row: usize, name: &str| rows[row][header.iter().position(|h| h == name).unwrap()].clone();
    // Three buckets: the last event is r3's finish at 1.0 s.
    assert_eq!(rows.len(), 3);
    assert_eq!([at(0, "t_s"), at(1, "t_s"), at(2, "t_s")], ["0", "0.5", "1"]);
    // All four arrive in the first half second: 8 per second.
    assert_eq!(at(0, "request_rate"), "8");
    // Tokens at 0.15, 0.2, 0.25 (r1), 0.3 (r2), 0.36, 0.42, 0.48 (r4) | 0.6 (r4), 0.7, 0.8, 0.9 (r3) | 1.0 (r3).
    assert_eq!(
        [at(0, "output_tok_s"), at(1, "output_tok_s"), at(2, "output_tok_s")],
        ["14", "8", "2"]
    );
    // Default objectives (TTFT 1 s, TPOT 50 ms): r1 (TPOT 50) and r2 (one token) meet them; r3 (100) and r4 (60)
    // do not. Their 3 + 1 tokens all come in the first bucket.
    assert_eq!([at(0, "goodput_tok_s"), at(1, "goodput_tok_s")], ["8", "0"]);
    // First tokens of r1 (150), r2 (200), r4 (60) in the first bucket: nearest-rank p50 of {60, 150, 200} is rank 2.
    assert_eq!(
        [at(0, "ttft_p50_ms"), at(0, "ttft_p99_ms"), at(1, "ttft_p50_ms")],
        ["150", "200", "500"]
    );
    assert_eq!(at(2, "ttft_p50_ms"), "");
    // Steps 7, 8, 9 start in the first bucket with 0, 0 and 1 waiting; none says how many it preempted.
    assert!(at(0, "queue_len").starts_with("0.333"), "{}", at(0, "queue_len"));
    assert_eq!([at(0, "preemptions"), at(1, "queue_len")], ["", ""]);
}

#[test]
fn a_trace_of_gigabytes_above_the_memory_budget_is_refused_at_once() {
    // A 4.6 GB JSON-lines file (sparse: it takes no disk) is estimated at 0.4 byte of memory per byte, plus the
    // load's own 150 MB: 1.99 GB, above a 1 GB budget. The refusal comes before a byte is read.
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.jsonl");
    std::fs::File::create(&big).unwrap().set_len(4_600_000_000).unwrap();
    let (code, _, err) = tokenscope(&["validate", big.to_str().unwrap(), "--memory-budget", "1GB"]);
    assert_eq!(code, 1, "{err}");
    assert!(
        err.contains("big.jsonl: loading it would take about 2.0 GB of memory, more than the budget of 1.0 GB")
            && err.contains("--from-time")
            && err.contains("--memory-budget (this machine has"),
        "{err}"
    );
    let (code, _, err) = tokenscope(&["summary", "sample_traces/demo.parquet", "--memory-budget", "lots"]);
    assert_eq!(code, 2);
    assert!(err.contains("write a size like 4GB"), "{err}");
}

#[test]
fn synth_replays_a_trace_under_a_changed_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("A.parquet");
    let b = dir.path().join("B.parquet");
    let (a, b) = (a.to_string_lossy(), b.to_string_lossy());
    let (code, _, err) = tokenscope(&["synth", "--scenario", "steady", "--requests", "40", "-o", &a]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = tokenscope(&[
        "synth",
        "--scenario",
        "replay",
        "--from-trace",
        &a,
        "--set",
        "chunked_prefill=on",
        "--set",
        "max_num_batched_tokens=2048",
        "-o",
        &b,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("replayed 40 of the trace's 40 requests"), "{out}");
    assert!(
        out.contains("  vllm-0: chunked prefill off") && out.contains("  vllm-1: chunked prefill on"),
        "{out}"
    );
    assert!(
        out.contains("overrides: chunked_prefill=on, max_num_batched_tokens=2048"),
        "{out}"
    );
    let load = |p: &str| {
        tokenscope::load::load(Path::new(p), &tokenscope::ingest::Progress::default())
            .unwrap()
            .trace
    };
    let (ta, tb) = (load(&a), load(&b));
    assert_eq!(tb.request_count(), 40);
    for r in 0..ta.request_count() as u32 {
        let id = ta.request_id(r);
        let rb = tb.request_row(id).unwrap_or_else(|| panic!("{id} replayed"));
        let (ia, ib) = (r as usize, rb as usize);
        assert_eq!(ta.requests.input_tokens.at(ia), tb.requests.input_tokens.at(ib), "{id}");
        assert_eq!(ta.output_tokens(r), tb.output_tokens(rb), "{id}");
        assert_eq!(ta.requests.arrival_ns[ia], tb.requests.arrival_ns[ib], "{id}");
        let label = |t: &tokenscope::trace::Trace, id: u32| t.label(id).map(str::to_owned);
        assert_eq!(
            label(&ta, ta.requests.finish_reason[ia]),
            label(&tb, tb.requests.finish_reason[ib]),
            "{id}"
        );
        // Pinned: the instances were not changed in number.
        assert_eq!(
            label(&ta, ta.requests.source[ia]),
            label(&tb, tb.requests.source[ib]),
            "{id}"
        );
    }
    let it = &tb.iterations;
    assert!(!it.is_empty());
    let largest = (0..it.len())
        .map(|s| it.num_prefill_tokens.at(s).unwrap_or(0) + it.num_decode_tokens.at(s).unwrap_or(0))
        .max()
        .unwrap_or(0);
    assert!(largest <= 2048, "a step of {largest} tokens");
    // Mixed steps only happen with chunked prefill, now on on both instances.
    assert!((0..it.len()).any(|s| it.num_prefill_tokens.at(s) > Some(0) && it.num_decode_tokens.at(s) > Some(0)));
}

#[test]
fn synth_replay_options_are_checked() {
    let (code, _, err) = tokenscope(&["synth", "--scenario", "replay", "--set", "batch=3", "-o", "x.parquet"]);
    assert_eq!(code, 2);
    assert!(err.contains("unknown key \"batch\""), "{err}");
    let (code, _, err) = tokenscope(&[
        "synth",
        "--scenario",
        "replay",
        "--from-trace",
        "a.parquet",
        "--arrivals",
        "b.csv",
        "-o",
        "x.parquet",
    ]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = tokenscope(&["synth", "--scenario", "replay", "-o", "x.parquet"]);
    assert_eq!(code, 1);
    assert!(err.contains("--from-trace"), "{err}");
    let (code, _, err) = tokenscope(&[
        "synth",
        "--scenario",
        "replay",
        "--from-trace",
        "no/such/trace.parquet",
        "-o",
        "x.parquet",
    ]);
    assert_eq!(code, 1);
    assert!(
        err.starts_with("error: ") && err.contains("no/such/trace.parquet"),
        "{err}"
    );
}

#[test]
fn findings_and_diff_from_parquet_read_only_the_candidates_they_need_and_match_a_whole_load() {
    // The demo as Parquet (its candidates left on disk but for the stop tokens requests ended on) and as JSONL
    // (read whole): the same findings, the EOS mis-trigger's runner-up included, and the same diff.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let jsonl = dir.path().join("demo.jsonl");
    let jsonl = jsonl.to_string_lossy();
    let (code, _, err) = tokenscope(&["convert", "sample_traces/demo.parquet", "-o", &jsonl]);
    assert_eq!(code, 0, "{err}");
    let (_, from_parquet, _) = tokenscope(&["findings", "--json", "sample_traces/demo.parquet"]);
    let (_, from_jsonl, _) = tokenscope(&["findings", "--json", &jsonl]);
    let (mut a, mut b) = (json(&from_parquet), json(&from_jsonl));
    // The Parquet trace is streamed, the JSONL one loaded: all else the same.
    assert_eq!(
        (&a["computed_by"], &b["computed_by"]),
        (&json("\"streamed\""), &json("\"loaded\""))
    );
    for key in ["trace", "computed_by", "passes", "not_judged"] {
        a[key] = Value::Null;
        b[key] = Value::Null;
    }
    assert_eq!(a, b);
    let eos: Vec<&Value> = a["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "eos-mistrigger")
        .collect();
    assert_eq!(eos.len(), 1, "{eos:?}");
    let summary = eos[0]["summary"].as_str().unwrap();
    assert!(
        summary.contains("(rank ") && summary.contains("was “"),
        "the rank and the alternative, read from disk: {summary}"
    );
    let (_, diff_parquet, _) = tokenscope(&[
        "diff",
        "--json",
        "sample_traces/demo.parquet",
        "sample_traces/demo.parquet",
    ]);
    let (_, diff_jsonl, _) = tokenscope(&["diff", "--json", &jsonl, &jsonl]);
    // The Parquet traces are streamed, the JSONL ones loaded: their figures the same but for the order of a sum.
    let strip = |text: &str| {
        let mut v = json(text);
        v["a"] = Value::Null;
        v["b"] = Value::Null;
        let by = v["computed_by"].take();
        (v, by)
    };
    let ((parquet, by_parquet), (jsonl, by_jsonl)) = (strip(&diff_parquet), strip(&diff_jsonl));
    assert_eq!((by_parquet, by_jsonl), (json("\"streamed\""), json("\"loaded\"")));
    crate::common::assert_json_close(&parquet, &jsonl, "diff");
}

#[test]
fn global_options_may_come_before_the_subcommand() {
    // As after it: the demo over a 100 MB budget is summarised streamed.
    for budget in [&["--memory-budget", "100MB"][..], &["--memory-budget=100MB"][..]] {
        let mut args = budget.to_vec();
        args.extend(["summary", "sample_traces/demo.parquet", "--json"]);
        let (code, out, err) = tokenscope(&args);
        assert_eq!(code, 0, "{err}");
        assert!(err.contains("over the memory budget of 100 MB"), "{err}");
        let want = format!("\"requests\": {}", crate::common::DEMO_REQUESTS);
        assert!(out.contains(&want), "{out}");
    }
}

#[test]
fn a_mistyped_subcommand_or_a_missing_file_is_said_before_any_window() {
    let (code, _, err) = tokenscope(&["sumary", "sample_traces/four_requests.jsonl"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("unrecognized subcommand 'sumary': did you mean 'summary'?"),
        "{err}"
    );
    let (code, _, err) = tokenscope(&["missing.parquet"]);
    assert_eq!(code, 2);
    assert!(err.contains("missing.parquet: no such file or directory"), "{err}");
    assert!(!err.contains("window"), "{err}");
}

#[test]
fn summary_findings_and_validate_take_both_halves_of_a_run() {
    let client = "tests/data/real/llamacpp/incident_client.parquet";
    let server = "tests/data/real/llamacpp/incident_server.log.gz";
    let (code, out, _) = tokenscope(&["summary", client, server, "--json"]);
    assert_eq!(code, 0);
    let v = json(&out);
    assert_eq!(v["requests"], 5);
    // The client-vs-server figures of a joined trace: every token the client recorded, each received after it was
    // produced.
    let recorded = tokenscope::load::load(std::path::Path::new(client), &tokenscope::ingest::Progress::default())
        .unwrap()
        .trace
        .token_count();
    assert_eq!(v["delivery"]["requests"], 5);
    assert_eq!(v["delivery"]["token_ms"]["count"], recorded);
    let (code, out, _) = tokenscope(&["validate", client, server]);
    assert_eq!(code, 0);
    assert!(out.contains("Joined 5 of 5 client requests with the server's"), "{out}");
    let (code, out, _) = tokenscope(&["findings", client, server, "--kind", "decode-interrupted"]);
    assert_eq!(code, 0);
    // What the library finds on the joined trace (`join.rs` works its figures out), printed.
    let joined = tokenscope::load::load_many(
        &[std::path::Path::new(client), std::path::Path::new(server)],
        &tokenscope::ingest::Progress::default(),
        tokenscope::load::LoadOptions::default(),
    )
    .unwrap();
    let found = tokenscope::analysis::findings::find_kinds(
        &joined.trace,
        &tokenscope::analysis::summary::Slo::default(),
        &tokenscope::analysis::findings::Thresholds::default(),
        &[tokenscope::analysis::findings::Kind::DecodeInterrupted],
    );
    assert!(!found.is_empty());
    assert!(found.iter().all(|f| out.contains(&f.summary)), "{out}");
    // One file alone is one half: the recording has no steps.
    let (_, out, _) = tokenscope(&["summary", client, "--json"]);
    assert_eq!(json(&out)["delivery"], Value::Null);
}

#[test]
fn synth_as_sglang_refuses_a_name_that_is_not_json_lines() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.parquet");
    let (code, _, err) = tokenscope(&[
        "synth",
        "--scenario",
        "eos-mistrigger",
        "--as",
        "sglang-otlp",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("give the output a .jsonl name"), "{err}");
    assert!(!out.exists(), "nothing written");
    let (code, _, err) = tokenscope(&["synth", "--scenario", "eos-mistrigger", "-o", "x.csv"]);
    assert_eq!(code, 2);
    assert!(err.contains(".parquet, .jsonl, .jsonl.gz or .jsonl.zst"), "{err}");
}

#[cfg(feature = "query")]
#[test]
fn out_of_core_refuses_a_parquet_file_that_is_not_a_trace() {
    // A Parquet file of some other table: no `kind` column. The in-memory path refuses it; so must out of core.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("other.parquet");
    let batch = arrow_array::RecordBatch::try_from_iter([(
        "x",
        std::sync::Arc::new(arrow_array::Int64Array::from(vec![1, 2, 3])) as arrow_array::ArrayRef,
    )])
    .unwrap();
    let file = std::fs::File::create(&path).unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let p = path.to_str().unwrap();
    for args in [
        vec!["summary", p, "--out-of-core"],
        vec!["query", p, "--out-of-core", "select count(*) as n from requests"],
        vec!["summary", p],
    ] {
        let (code, out, err) = tokenscope(&args);
        assert_ne!(code, 0, "{args:?}: {out}");
        assert!(err.contains("\"kind\""), "{args:?}: {err}");
    }
}

#[test]
fn every_reading_command_takes_from_and_refuses_what_is_not_that_kind() {
    // The SGLang fixture under a name that says nothing, read with --from by each reading command.
    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("dump");
    std::fs::copy("tests/data/import/sglang/otlp_small.jsonl", &dump).unwrap();
    let d = dump.to_str().unwrap();
    let (code, out, err) = tokenscope(&["summary", d, "--from", "sglang-otlp"]);
    assert_eq!(code, 0, "{err}");
    // expected.md: 2 requests, 120 + 2,000 prompt tokens, 4 + 3 output tokens.
    assert!(out.contains("requests          2"), "{out}");
    assert!(out.contains("input 2,120"), "{out}");
    assert!(out.contains("output 7"), "{out}");
    let (code, out, err) = tokenscope(&["validate", d, "--from", "sglang-otlp"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("22 records, 22 kept, 0 rejected"), "{out}");
    // A trace of tokenscope's own format read as vLLM spans: nothing, said, exit 1, for every reading command.
    let slice = dir.path().join("slice.json");
    for command in ["validate", "summary", "findings", "export"] {
        let mut args = vec![command, "sample_traces/four_requests.jsonl", "--from", "vllm-otlp"];
        if command == "export" {
            args.extend(["--from-ms", "0", "--to-ms", "10", "-o", slice.to_str().unwrap()]);
        }
        let (code, out, err) = tokenscope(&args);
        assert_eq!(code, 1, "{command}: {out}{err}");
        assert!(err.contains("nothing was read as vllm-otlp"), "{command}: {err}");
        assert!(
            err.contains("is a tokenscope trace: leave out --from"),
            "{command}: {err}"
        );
    }
    // Out of core reads tokenscope's Parquet only: an importer there is refused, not ignored.
    let (code, _, err) = tokenscope(&["summary", d, "--out-of-core", "--from", "sglang-otlp"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("convert first (tokenscope convert FILE --from sglang-otlp"),
        "{err}"
    );
}

#[test]
fn convert_from_the_wrong_kind_writes_nothing_and_says_what_the_file_looks_like() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.parquet");
    // An AIPerf export read as TensorRT-LLM's perf metrics.
    let (code, _, err) = tokenscope(&[
        "convert",
        "sample_traces/engines/aiperf/profile_export.jsonl",
        "--from",
        "trtllm-perf",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("nothing was read as trtllm-perf"), "{err}");
    assert!(err.contains("looks like aiperf"), "{err}");
    assert!(!out.exists(), "nothing written");
}

#[test]
fn a_source_without_cached_counts_shows_them_absent_not_zero() {
    // AIPerf's export has no cached counts: "-" in text, null in JSON, and the cost says it bills input as uncached.
    let aiperf = "sample_traces/engines/aiperf";
    let (code, out, _) = tokenscope(&["summary", aiperf]);
    assert_eq!(code, 0);
    let tokens = out.lines().find(|l| l.starts_with("tokens")).unwrap();
    assert!(tokens.contains("cached -,"), "{tokens}");
    let (_, out, _) = tokenscope(&["summary", aiperf, "--json"]);
    assert_eq!(json(&out)["cached_tokens"], Value::Null);
    let dir = tempfile::tempdir().unwrap();
    let prices = dir.path().join("prices.json");
    std::fs::write(
        &prices,
        r#"{"default": {"input": 1, "cached_input": 0.5, "output": 2}}"#,
    )
    .unwrap();
    let (_, out, _) = tokenscope(&["summary", aiperf, "--prices", prices.to_str().unwrap()]);
    let cost = out.lines().find(|l| l.starts_with("cost")).unwrap();
    assert!(cost.contains("cached input unknown"), "{cost}");
    // A trace with cached counts still sums them: four_requests.jsonl has 64 + 1000.
    let (_, out, _) = tokenscope(&["summary", "sample_traces/four_requests.jsonl", "--json"]);
    assert_eq!(json(&out)["cached_tokens"], 1064);
}

#[test]
fn summary_of_a_steps_only_log_shows_its_steps_and_no_token_counts() {
    // vLLM's iteration log: nine steps, no request. Read off the log by hand: prompt tokens 512 + 256 + 128 = 896,
    // one output token in each of steps 1, 2, 3, 5, 6, 7 and 8 = 7; durations 40, 25, 10, 10, 20 and four of 12.5
    // ms: nearest-rank p50 is the 5th of nine sorted (12.5), p99 the 9th (40). The log's times are whole seconds, so
    // each step starts at the later of its second and the previous step's end: steps 0-3 from 08:00:00 (40 + 25 + 10
    // + 10 ms), 4-5 from 08:00:01, 6-8 from 08:00:02 (3 x 12.5 ms): the steps span 2 s + 37.5 ms = 2.038 s.
    let (code, out, err) = tokenscope(&["summary", "sample_traces/engines/vllm/server.log"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("requests          0\n"), "{out}");
    assert!(
        out.contains("tokens            - (no requests in the trace)\n"),
        "{out}"
    );
    assert!(
        out.contains(
            "engine steps      9 on 1 instance(s) over 2.038 s; prompt tokens 896, output tokens 7; step p50 12.5 ms, \
             p99 40.0 ms\n"
        ),
        "{out}"
    );
    let (code, out, _) = tokenscope(&["summary", "sample_traces/engines/vllm/server.log", "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["input_tokens"], serde_json::Value::Null);
    assert_eq!(v["output_tokens"], serde_json::Value::Null);
}
