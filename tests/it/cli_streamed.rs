//! Streamed figures from the command line: a Parquet trace is summarised and judged streamed by itself when every
//! figure streams, and over the memory budget, with the loaded figures; `--in-memory` loads it; what cannot be
//! streamed is loaded, or says why with `--out-of-core`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers may unwrap: a panic here is a failed test"
)]

use crate::common::tokenscope;
use serde_json::Value;

#[test]
fn a_parquet_trace_over_the_memory_budget_is_summarised_streamed_with_the_same_figures() {
    let demo = "sample_traces/demo.parquet";
    let (code, loaded, err) = tokenscope(&["summary", demo, "--json", "--in-memory"]);
    assert_eq!(code, 0, "{err}");
    assert!(!err.contains("streamed"), "{err}");
    // Plain: streamed by itself (the demo has no counter sample and no speculative decoding), quietly, and the same
    // JSON as the load but for how it was computed.
    let (code, plain, err) = tokenscope(&["summary", demo, "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.is_empty(), "{err}");
    let (mut a, mut b): (Value, Value) = (
        serde_json::from_str(&plain).unwrap(),
        serde_json::from_str(&loaded).unwrap(),
    );
    assert_eq!(
        (&a["computed_by"], &b["computed_by"]),
        (&Value::from("streamed"), &Value::from("loaded"))
    );
    for key in ["computed_by", "files", "passes"] {
        a[key] = Value::Null;
        b[key] = Value::Null;
    }
    assert_eq!(a, b);
    // With --verbose it says why; a trace with counter samples (a vLLM log converted) is loaded, and says why.
    let (_, _, err) = tokenscope(&["summary", demo, "--json", "--verbose"]);
    assert!(err.contains("a Parquet trace's fastest path"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let with_samples = dir.path().join("vllm.parquet");
    let with_samples = with_samples.to_str().unwrap();
    let (code, _, err) = tokenscope(&[
        "convert",
        "tests/data/import/vllm/logs/0.15.1-pd-nixl-decode.log",
        "-o",
        with_samples,
    ]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = tokenscope(&["summary", with_samples, "--json", "--verbose"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("loaded whole") && err.contains("`time_ns` values"),
        "{err}"
    );
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["computed_by"], "loaded");
    // 100 MB is below the fixed cost of any load (150 MB): the demo cannot be loaded within it, so it is streamed.
    let (code, streamed, err) = tokenscope(&["summary", demo, "--json", "--memory-budget", "100MB"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("over the memory budget of 100 MB") && err.contains("streamed from 1 Parquet file(s)"),
        "{err}"
    );
    let (loaded, streamed): (Value, Value) = (
        serde_json::from_str(&loaded).unwrap(),
        serde_json::from_str(&streamed).unwrap(),
    );
    // 309 requests; every figure the same, to the last digit.
    assert_eq!(streamed["requests"], crate::common::DEMO_REQUESTS);
    for key in [
        "requests",
        "input_tokens",
        "output_tokens",
        "span_ms",
        "ttft_ms",
        "tpot_ms",
        "e2e_ms",
        "itl_ms",
    ] {
        assert_eq!(streamed[key], loaded[key], "{key}");
    }
    assert_eq!(streamed["computed_by"], "streamed");
    // A joined trace cannot be streamed: --out-of-core says why and how to open it.
    let (code, _, err) = tokenscope(&[
        "summary",
        "sample_traces/llamacpp_incident_joined.parquet",
        "--out-of-core",
    ]);
    assert_eq!(code, 1);
    assert!(
        err.contains("cannot be streamed: ") && err.contains("joined") && err.contains("leave out --out-of-core"),
        "{err}"
    );
}

#[test]
fn over_the_memory_budget_the_timeline_streams_and_findings_says_what_needs_the_trace() {
    let demo = "sample_traces/demo.parquet";
    let timeline = |extra: &[&str]| {
        let mut args = vec!["timeline", demo, "--every", "20s", "--format", "csv"];
        args.extend(extra);
        tokenscope(&args)
    };
    let (code, loaded, err) = timeline(&[]);
    assert_eq!(code, 0, "{err}");
    let (code, streamed, err) = timeline(&["--memory-budget", "100MB"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("over the memory budget of 100 MB") && err.contains("streamed from 1 Parquet"),
        "{err}"
    );
    // The demo's 100 s in 20 s buckets: 6 rows and the header, every cell the loaded one's.
    assert_eq!(streamed.lines().count(), 7, "{streamed}");
    assert_eq!(loaded.lines().count(), 7, "{loaded}");
    // Every cell the loaded one's; a mean over steps to 1e-12 (the steps are summed in the file's order).
    for (a, b) in streamed.lines().zip(loaded.lines()) {
        for (x, y) in a.split(',').zip(b.split(',')) {
            let same = x == y
                || matches!((x.parse::<f64>(), y.parse::<f64>()), (Ok(x), Ok(y)) if (x - y).abs() <= 1e-12 * y.abs());
            assert!(same, "{x} against {y} in\n{a}\n{b}");
        }
    }
}

#[test]
fn findings_stream_every_kind_of_a_parquet_trace_and_load_only_when_asked_or_needed() {
    let demo = "sample_traces/demo.parquet";
    let (code, loaded, err) = tokenscope(&["findings", demo, "--json", "--in-memory", "--verbose"]);
    assert_eq!(code, 0);
    assert!(err.contains("loaded whole: --in-memory"), "{err}");
    // Plain: streamed, quietly; over the budget it says so.
    let (code, plain, err) = tokenscope(&["findings", demo, "--json"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.is_empty(), "{err}");
    let (code, streamed, err) = tokenscope(&["findings", demo, "--json", "--memory-budget", "100MB"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("over the memory budget of 100 MB")
            && err.contains("streamed from 1 Parquet file(s), the tokens in 1 pass(es)"),
        "{err}"
    );
    let value = |s: &str| -> serde_json::Value { serde_json::from_str(s).unwrap() };
    let (loaded, plain, streamed) = (value(&loaded), value(&plain), value(&streamed));
    // The demo's incidents and conditions, the same to the last field, the four founding kinds among them.
    let kinds_of = |v: &serde_json::Value| -> Vec<String> {
        v["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["kind"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        kinds_of(&streamed),
        [
            "decode-interrupted",
            "prefill-monopoly",
            "eos-mistrigger",
            "decode-interrupted",
            "prefill-monopoly",
            "slo-violations",
            "slo-violations",
            "truncation"
        ]
    );
    assert_eq!(streamed["findings"], loaded["findings"]);
    assert_eq!(plain["findings"], loaded["findings"]);
    assert_eq!(
        (&loaded["computed_by"], &streamed["computed_by"]),
        (&serde_json::json!("loaded"), &serde_json::json!("streamed"))
    );
    // A trace without references has nothing a re-scored kind could find: nothing is left unjudged.
    assert_eq!(streamed["not_judged"], serde_json::json!([]));
    assert_eq!(streamed["passes"], 1);
    // What cannot be streamed is loaded, and over the budget the load says what streams.
    let (code, _, err) = tokenscope(&[
        "findings",
        "sample_traces/four_requests.jsonl",
        "--memory-budget",
        "1KB",
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("need the trace loaded"), "{err}");
}

#[test]
fn a_corrupt_page_header_is_refused_by_a_stream_not_decoded_for_minutes() {
    // The page header of `request_id` declares a map of 91 elements in 68 bytes: parquet-rs's Thrift decoder would
    // walk it for minutes. The streamed passes check the headers first, as a load does; the header they name is in
    // `request_id`'s column chunk, as the file's footer places it.
    let file = std::fs::File::open("tests/data/corrupt/hang-thrift-skip.parquet").unwrap();
    let reader = parquet::file::reader::SerializedFileReader::new(file).unwrap();
    let footer = parquet::file::reader::FileReader::metadata(&reader);
    let chunk = footer
        .row_group(0)
        .columns()
        .iter()
        .find(|c| c.column_path().string() == "request_id")
        .unwrap();
    let (start, len) = chunk.byte_range();
    for command in ["summary", "findings"] {
        let (code, _, err) = tokenscope(&[command, "tests/data/corrupt/hang-thrift-skip.parquet", "--out-of-core"]);
        assert_eq!(code, 1, "{command}: {err}");
        let at: u64 = err
            .split_once("the page header at byte ")
            .and_then(|(_, rest)| rest.split_once(" is corrupt"))
            .and_then(|(n, _)| n.parse().ok())
            .unwrap_or_else(|| panic!("{command}: {err}"));
        assert!(
            (start..start + len).contains(&at),
            "{command}: byte {at} outside {start}+{len}: {err}"
        );
    }
}
