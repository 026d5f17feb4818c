//! The fleet path: `sql/tokenscope.sql` run unchanged on Apache Spark (local mode) over a hive-partitioned dataset
//! gives the figures of `tokenscope summary --json`, and so does `summary --out-of-core` (streamed).
//! Spark needs PySpark and a JDK (`scripts/test.sh` installs both); without them this test fails and says what to
//! install.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers may unwrap: a panic here is a failed test"
)]
#![cfg(feature = "query")]

use std::process::Command;

use crate::common::tokenscope;
use serde_json::Value;

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("JSON ({e}): {text}"))
}

/// Counts and percentiles equal; means and rates to 1e-9 relative (sums run in another order).
fn assert_figures_equal(what: &str, got: &Value, want: &Value) {
    for key in [
        "requests",
        "input_tokens",
        "cached_tokens",
        "output_tokens",
        "span_ms",
        "token_mismatches",
    ] {
        assert_eq!(got[key], want[key], "{what}: {key}");
    }
    assert_eq!(got["finish_reasons"], want["finish_reasons"], "{what}: finish_reasons");
    let close = |a: &Value, b: &Value| match (a.as_f64(), b.as_f64()) {
        (Some(a), Some(b)) => (a - b).abs() <= 1e-9 * a.abs().max(1.0),
        _ => a == b,
    };
    assert!(
        close(&got["throughput_tok_s"], &want["throughput_tok_s"]),
        "{what}: throughput"
    );
    for figure in ["ttft_ms", "tpot_ms", "e2e_ms", "queue_ms", "itl_ms"] {
        for key in ["count", "p50", "p90", "p95", "p99", "max"] {
            assert_eq!(got[figure][key], want[figure][key], "{what}: {figure}.{key}");
        }
        assert!(
            close(&got[figure]["mean"], &want[figure]["mean"]),
            "{what}: {figure}.mean"
        );
    }
}

/// The demo's requests per source, counted in its file by the parquet crate alone.
fn demo_requests_by_source() -> std::collections::BTreeMap<String, usize> {
    let counts = crate::common::parquet_counts(std::path::Path::new("sample_traces/demo.parquet"), "source");
    let by_source: std::collections::BTreeMap<String, usize> = counts
        .into_iter()
        .filter(|((kind, _), _)| kind == "request")
        .map(|((_, source), n)| (source, n))
        .collect();
    assert_eq!(by_source.values().sum::<usize>(), crate::common::DEMO_REQUESTS);
    by_source
}

/// The demo converted to a dataset partitioned by hour and source under `dir` (two files); its path.
fn partitioned_demo(dir: &std::path::Path) -> String {
    let dataset = dir.join("dataset").to_str().unwrap().to_owned();
    let (code, out, err) = tokenscope(&[
        "convert",
        "sample_traces/demo.parquet",
        "--partition-by",
        "hour,source",
        "-o",
        &dataset,
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("wrote 2 files under"), "{out}");
    dataset
}

#[test]
fn the_sql_file_on_spark_and_out_of_core_gives_summarys_figures() {
    let dir = tempfile::tempdir().unwrap();
    let dataset = &partitioned_demo(dir.path());
    let (code, memory, err) = tokenscope(&["summary", dataset, "--json"]);
    assert_eq!(code, 0, "{err}");
    let memory = json(&memory);
    assert_eq!(memory["requests"], crate::common::DEMO_REQUESTS);

    let (code, streaming, err) = tokenscope(&["summary", dataset, "--json", "--out-of-core"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("streamed from 2 Parquet file(s) in 2 pass(es), without loading the trace"),
        "{err}"
    );
    assert_figures_equal("out of core", &json(&streaming), &memory);

    // A question asked of the dataset's views, out of core: the demo's requests by source, counted in its file by
    // the parquet crate alone (172 and 137 of 309).
    let by_source = demo_requests_by_source();
    let (code, out, err) = tokenscope(&[
        "query",
        dataset,
        "SELECT source, count(*) AS n FROM requests GROUP BY source ORDER BY source",
        "--out-of-core",
        "--format",
        "csv",
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        format!(
            "source,n\nvllm-0,{}\nvllm-1,{}\n",
            by_source["vllm-0"], by_source["vllm-1"]
        )
    );

    // The timeline of the dataset, out of core, is the loaded one's: per source, in 10 s buckets.
    let timeline = |extra: &[&str]| {
        let mut args = vec![
            "timeline", dataset, "--every", "10s", "--by", "source", "--format", "csv",
        ];
        args.extend(extra);
        let (code, out, err) = tokenscope(&args);
        assert_eq!(code, 0, "{err}");
        out
    };
    let (memory_csv, streamed_csv) = (timeline(&[]), timeline(&["--out-of-core"]));
    let (a, b): (Vec<&str>, Vec<&str>) = (memory_csv.lines().collect(), streamed_csv.lines().collect());
    // 100 s of two sources: 11 buckets each, and the header.
    assert_eq!((a.len(), b.len()), (23, 23), "{streamed_csv}");
    for (x, y) in a.iter().zip(&b) {
        for (p, q) in x.split(',').zip(y.split(',')) {
            match (p.parse::<f64>(), q.parse::<f64>()) {
                // A mean over steps may sum in another order: its last digit may differ.
                (Ok(p), Ok(q)) => assert!((p - q).abs() <= 1e-12 * p.abs().max(1.0), "{x}\n{y}"),
                _ => assert_eq!(p, q, "{x}\n{y}"),
            }
        }
    }

    let has_spark = Command::new("python3")
        .args(["-c", "import pyspark"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        has_spark,
        "the python3 on PATH has no PySpark: run the tests with scripts/test.sh, which installs it (4.3.0, with a JDK), \
         or pip install pyspark==4.3.0 and apt-get install openjdk-17-jre-headless"
    );
    let spark = Command::new("python3")
        .args(["sql/spark_summary.py", dataset, "--master", "local[2]"])
        .env("PYSPARK_PYTHON", "python3")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&spark.stdout);
    let stderr = String::from_utf8_lossy(&spark.stderr);
    assert!(spark.status.success(), "Spark failed:\n{stderr}");
    assert_figures_equal("Spark", &json(&stdout), &memory);
}

#[test]
fn a_window_and_filters_choose_the_part_of_a_dataset_each_path_reads() {
    let dir = tempfile::tempdir().unwrap();
    let dataset = &partitioned_demo(dir.path());
    let summary = |extra: &[&str]| {
        let mut args = vec!["summary", dataset, "--json"];
        args.extend(extra);
        let (code, out, err) = tokenscope(&args);
        assert_eq!(code, 0, "{args:?}: {err}");
        (json(&out), err)
    };
    // One instance: its folder alone is read; 172 of the demo's 309 requests are vllm-0's.
    let (one, _) = summary(&["--where", "source=vllm-0"]);
    assert_eq!(one["requests"], demo_requests_by_source()["vllm-0"]);
    // Up to 08:00:50 UTC (the demo's first request arrives at 08:00:00.466): the requests arriving before, as a
    // query of the whole trace counts them independently.
    let (code, n, err) = tokenscope(&[
        "query",
        "sample_traces/demo.parquet",
        "SELECT count(*) AS n FROM requests WHERE arrival_ns < 1764403250000000000",
        "--format",
        "csv",
    ]);
    assert_eq!(code, 0, "{err}");
    let first_50: u64 = n.trim_start_matches("n\n").trim().parse().unwrap();
    assert!(
        first_50 > 100 && first_50 < crate::common::DEMO_REQUESTS as u64,
        "{first_50}"
    );
    let (window, err) = summary(&["--to-time", "2025-11-29T08:00:50Z"]);
    assert_eq!(window["requests"], first_50);
    assert!(err.is_empty() || !err.contains("error"), "{err}");
    // Out of core, the same window and filter give the same figures.
    let both = [
        "--where",
        "source=vllm-0",
        "--from-time",
        "2025-11-29T08:00:20",
        "--to-time",
        "2025-11-29T08:01:10",
    ];
    let (memory, _) = summary(&both);
    let mut args = both.to_vec();
    args.push("--out-of-core");
    let (streamed, _) = summary(&args);
    assert!(memory["requests"].as_u64().unwrap() > 20, "{memory}");
    assert_figures_equal("a window out of core", &streamed, &memory);
    // A key the dataset has no folder or label for, and a window no folder can hold, are explained.
    let (code, _, err) = tokenscope(&["summary", dataset, "--where", "region=eu"]);
    assert_ne!(code, 0);
    assert!(err.contains("no key \"region\"") && err.contains("hour"), "{err}");
    let (code, _, err) = tokenscope(&["summary", dataset, "--from-time", "2025-11-30"]);
    assert_ne!(code, 0);
    assert!(
        err.contains("no file of") && err.contains("hour (1 value: 2025-11-29T08)"),
        "{err}"
    );
    let (code, _, err) = tokenscope(&["summary", dataset, "--from-time", "yesterday"]);
    assert_eq!(code, 2);
    assert!(err.contains("RFC 3339"), "{err}");
}
