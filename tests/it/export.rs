//! Evidence for incident reports: a slice of a trace re-loads with the same per-request figures; the Chrome trace
//! is structurally valid; redaction leaves no original text.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers may unwrap: a panic here is a failed test"
)]

use std::path::Path;

use crate::common::tokenscope;
use serde_json::Value;
use tokenscope::analysis::metrics::request_metrics;
use tokenscope::ingest::Progress;
use tokenscope::load::load;

const LONG: &str = "sample_traces/long_prefill.jsonl";

#[test]
fn a_slice_reloads_with_the_same_per_request_figures() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["slice.parquet", "slice.jsonl"] {
        let out = dir.path().join(name);
        let out_s = out.to_string_lossy();
        // 2.5 s .. 6 s after the trace's start: the long prefill's first steps and the requests alive then.
        let (code, stdout, stderr) =
            tokenscope(&["export", LONG, "--from-ms", "2500", "--to-ms", "6000", "-o", &out_s]);
        assert_eq!(code, 0, "{stderr}");
        assert!(stdout.contains("wrote"), "{stdout}");
        let full = load(Path::new(LONG), &Progress::default()).unwrap().trace;
        let part = load(&out, &Progress::default()).unwrap();
        assert_eq!(part.report.rejected_count(), 0, "{:?}", part.report.rejected.first());
        let part = part.trace;
        assert!(part.request_row("doc-96k").is_some() && part.request_row("short-700").is_some());
        assert!(
            part.request_count() < full.request_count(),
            "requests finished before 2.5 s are left out"
        );
        for r in 0..part.request_count() as u32 {
            let id = part.request_id(r);
            let (a, b) = (
                request_metrics(&part, r),
                request_metrics(&full, full.request_row(id).unwrap()),
            );
            assert_eq!(a, b, "{id}");
            assert_eq!(
                part.tokens_of(r).len(),
                full.tokens_of(full.request_row(id).unwrap()).len(),
                "{id}"
            );
        }
        // The steps of the range, and the prefill chunks of the 96k prompt with their iteration numbers.
        assert!(part.iterations.len() >= 2);
        let doc = part.request_row("doc-96k").unwrap();
        assert_eq!(part.explicit_stages_of(doc).len(), 5);
    }
}

#[test]
fn the_chrome_trace_is_structurally_valid() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("slice.json");
    let (code, _, stderr) = tokenscope(&[
        "export",
        LONG,
        "--from-ms",
        "0",
        "--to-ms",
        "20000",
        "-o",
        &out.to_string_lossy(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let events = v["traceEvents"].as_array().unwrap();
    assert!(events.len() > 100);
    for e in events {
        let ph = e["ph"].as_str().unwrap();
        assert!(["M", "X", "C", "i"].contains(&ph), "{e}");
        assert!(e["name"].is_string() && e["pid"].is_u64() && e["tid"].is_u64(), "{e}");
        if ph != "M" {
            assert!(e["ts"].as_f64().is_some_and(|t| t >= 0.0), "{e}");
        }
        if ph == "X" {
            assert!(e["dur"].as_f64().is_some_and(|d| d >= 0.0), "{e}");
        }
    }
    // One track per request, named after it; the engine's steps and counters; token instants with their text.
    let named = |name: &str| events.iter().any(|e| e["ph"] == "M" && e["args"]["name"] == name);
    assert!(named("doc-96k") && named("short-700") && named("engine steps") && named("vllm-0"));
    let prefills = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["name"] == "prefill" && e["args"]["request_id"] == "doc-96k");
    assert_eq!(prefills.count(), 5);
    assert!(events.iter().any(|e| e["ph"] == "C" && e["name"] == "batch size"));
    assert!(events.iter().any(|e| e["ph"] == "i" && e["args"]["text"].is_string()));
}

#[test]
fn redaction_leaves_no_original_text() {
    let dir = tempfile::tempdir().unwrap();
    let full = load(Path::new("sample_traces/eos_mistrigger.jsonl"), &Progress::default())
        .unwrap()
        .trace;
    for name in ["r.jsonl", "r.json"] {
        let out = dir.path().join(name);
        let (code, stdout, stderr) = tokenscope(&[
            "export",
            "sample_traces/eos_mistrigger.jsonl",
            "--from-ms",
            "0",
            "--to-ms",
            "60000",
            "--redact",
            "-o",
            &out.to_string_lossy(),
        ]);
        assert_eq!(code, 0, "{stderr}");
        assert!(stdout.contains("texts redacted"));
        let written = std::fs::read_to_string(&out).unwrap();
        // Every text of the trace (longer than 3 characters, so it cannot be JSON syntax by chance) is gone.
        let mut checked = 0;
        for id in 0..full.texts.len() as u32 {
            let t = full.texts.get(id).unwrap();
            if t.trim().chars().count() > 3 {
                let quoted = serde_json::to_string(t).unwrap();
                assert!(!written.contains(&quoted), "{name}: {quoted} is still there");
                checked += 1;
            }
        }
        assert!(checked > 20, "the sample has words to check ({checked})");
    }
    // Within one export the same text gets the same hash: the redacted trace keeps its repetitions.
    let part = load(&dir.path().join("r.jsonl"), &Progress::default()).unwrap().trace;
    assert!(part.texts.len() >= 20);
    assert!((0..part.texts.len() as u32).all(|i| {
        let t = part.texts.get(i).unwrap();
        t.is_empty() || t.starts_with('#') || t.starts_with("<|")
    }));
}

#[test]
fn bad_export_requests_say_what_is_wrong() {
    let (code, _, err) = tokenscope(&["export", LONG, "--from-ms", "500", "--to-ms", "100", "-o", "x.jsonl"]);
    assert_eq!(code, 2);
    assert!(err.contains("FROM < TO"), "{err}");
    let (code, _, err) = tokenscope(&[
        "export",
        LONG,
        "--from-ms",
        "0",
        "--to-ms",
        "100",
        "--requests",
        "nope,doc-96k",
        "-o",
        "x.jsonl",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("no request with id nope"), "{err}");
    let (code, _, err) = tokenscope(&[
        "export",
        LONG,
        "--from-ms",
        "0",
        "--to-ms",
        "100",
        "-o",
        "/no/such/dir/x.jsonl",
    ]);
    assert_eq!(code, 1);
    assert!(err.contains("/no/such/dir/x.jsonl"), "{err}");
}

#[test]
fn a_slice_of_a_trace_loaded_without_candidates_reads_them_back() {
    use tokenscope::format::parquet::{CandidateReader, write_with_row_groups};
    use tokenscope::load::{LoadOptions, load_with};
    use tokenscope::trace::slice::{slice, slice_with};
    let eager = load(Path::new("sample_traces/eos_mistrigger.jsonl"), &Progress::default())
        .unwrap()
        .trace;
    let dir = tempfile::tempdir().unwrap();
    let pq = dir.path().join("t.parquet");
    write_with_row_groups(&eager, &pq, 200).unwrap();
    let lazy = load_with(
        &pq,
        &Progress::default(),
        LoadOptions {
            lazy_candidates: true,
            ..LoadOptions::default()
        },
    )
    .unwrap()
    .trace;
    let reader = CandidateReader::open(&lazy).unwrap().unwrap();
    let read = |r: u32| reader.read(&lazy, r).unwrap();
    let t0 = eager.requests.arrival_ns.iter().copied().min().unwrap();
    let (from, to) = (t0 + 1_000_000_000, t0 + 3_000_000_000);
    let from_lazy = slice_with(&lazy, from, to, None, Some(&read));
    let from_eager = slice(&eager, from, to, None);
    assert_eq!(from_lazy.candidates.len(), from_eager.candidates.len());
    assert!(from_lazy.candidates.len() > 100);
    let med = from_lazy.request_row("med-question").unwrap();
    assert_eq!(
        from_lazy.owned_candidates(med),
        from_eager.owned_candidates(from_eager.request_row("med-question").unwrap())
    );
}
