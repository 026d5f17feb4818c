//! SGLang's spans as its own tracing code emits them (`scripts/engines/sglang-trace/`, fixtures and their ground
//! truth in `tests/data/import/sglang/engine/`): the import is checked against what the harness drove, not against a
//! reading of the engine's source.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers may unwrap: a panic here is a failed test"
)]

use std::path::{Path, PathBuf};

use serde_json::Value;
use tokenscope_core::ingest::Progress;
use tokenscope_core::load::{LoadOptions, Loaded, load_many};

const DIR: &str = "tests/data/import/sglang/engine";

/// The releases exercised: 0.5.3 (the first with `--enable-trace`) and 0.5.9 trace with the rid-keyed API, 0.5.10
/// (the first with `TraceReqContext`) and 0.5.23 (the newest) with the request-context one.
const VERSIONS: [&str; 4] = ["0.5.3", "0.5.9", "0.5.10", "0.5.23"];

/// Every scenario the harness drove, in both versions.
const SCENARIOS: [&str; 7] = ["no-overlap", "overlap", "mixed", "retract", "abort", "dp2", "tp2"];

/// The releases that trace with the rid-keyed API (`sglang/srt/tracing/trace.py`).
fn rid_api(version: &str) -> bool {
    matches!(version, "0.5.3" | "0.5.9")
}

/// The requests of a scenario whose spans an import can have: with the rid-keyed API, a request aborted while
/// queued never ends its root span, so it is never exported (its other spans are reported as left out).
fn exported(version: &str, truth: &Value) -> Vec<Value> {
    truth["requests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| !(rid_api(version) && r["output_tokens"].as_u64() == Some(0)))
        .cloned()
        .collect()
}

fn truth(version: &str, scenario: &str) -> Value {
    let path = crate::common::repo(DIR).join(version).join(scenario).join("truth.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The export bodies of a scenario, each a file of its own, as a receiver that writes one file per POST keeps them.
fn bodies(version: &str, scenario: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(crate::common::repo(DIR).join(version).join(scenario))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "pb"))
        .collect();
    files.sort();
    files
}

fn load(paths: &[PathBuf]) -> Loaded {
    let paths: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    load_many(&paths, &Progress::default(), LoadOptions::default()).unwrap()
}

/// Per request (by rid): its output token count, and its token records' times.
fn tokens_by_rid(loaded: &Loaded) -> Vec<(String, Option<u32>, Vec<i64>)> {
    let t = &loaded.trace;
    let mut out: Vec<(String, Option<u32>, Vec<i64>)> = (0..t.request_count())
        .map(|r| {
            let r = u32::try_from(r).unwrap();
            let id = t.request_id(r).to_owned();
            let times = t.tokens_of(r).map(|k| t.tokens.emitted_ns[k]).collect();
            (id, t.requests.output_tokens.at(r as usize), times)
        })
        .collect();
    out.sort();
    out
}

#[test]
fn an_export_split_across_bodies_imports_as_the_whole_export() {
    // SGLang's tokenizer and scheduler export from two processes, each in batches: the root of a request and its
    // scheduler's spans are in different bodies. Given as one file per body, they join by trace id, and the import
    // is the one of the same spans in one JSON-lines file.
    // The same with the formats mixed: the first body as a JSON line of its own, the others as protobuf.
    let scratch = tempfile::tempdir().unwrap();
    for version in VERSIONS {
        for scenario in SCENARIOS {
            let files = bodies(version, scenario);
            assert!(files.len() >= 2, "{version} {scenario}: {files:?}");
            let split = load(&files);
            let jsonl = crate::common::repo(DIR)
                .join(version)
                .join(scenario)
                .join("spans.jsonl");
            let whole = load(std::slice::from_ref(&jsonl));
            let first_line = std::fs::read_to_string(&jsonl)
                .unwrap()
                .lines()
                .next()
                .unwrap()
                .to_owned();
            let first = scratch.path().join(format!("{version}-{scenario}-000.jsonl"));
            std::fs::write(&first, first_line).unwrap();
            let mut mixed = vec![first];
            mixed.extend(files[1..].iter().cloned());
            let mixed = load(&mixed);
            let expected = exported(version, &truth(version, scenario)).len();
            assert_eq!(split.trace.request_count(), expected, "{version} {scenario}");
            for (name, other) in [("whole", &whole), ("mixed", &mixed)] {
                assert_eq!(
                    tokens_by_rid(&split),
                    tokens_by_rid(other),
                    "{version} {scenario}: split and {name} differ"
                );
                assert_eq!(
                    split.trace.iterations.len(),
                    other.trace.iterations.len(),
                    "{version} {scenario}: {name}"
                );
            }
        }
    }
}

#[test]
fn a_part_of_an_export_is_reported_not_silently_dropped() {
    // The scheduler's bodies without the tokenizer's, which holds the roots: nothing can be mapped, and the notes
    // say which spans were left out and why.
    let files = bodies("0.5.23", "no-overlap");
    let whole = load(&files);
    let roots_in: Vec<&PathBuf> = files
        .iter()
        .filter(|f| {
            let one = load(&[(*f).clone()]);
            one.trace.request_count() > 0
        })
        .collect();
    assert_eq!(roots_in.len(), 1, "one body holds the roots: {files:?}");
    let without: Vec<PathBuf> = files.iter().filter(|f| *f != roots_in[0]).cloned().collect();
    let part = load(&without);
    assert_eq!(part.trace.request_count(), 0);
    let notes = part.report.notes.join("\n");
    assert!(notes.contains("SGLang spans of 3 requests were left out"), "{notes}");
    assert!(notes.contains("give every file of the export"), "{notes}");
    assert_eq!(whole.trace.request_count(), 3);
}

#[test]
fn every_output_token_is_a_token_record_at_the_time_the_scheduler_produced_it() {
    // For every request of every scenario (overlap on and off, chunked and mixed prefill, retraction, aborts, DP and
    // TP ranks), from the bodies as separate files: the root's token count, one token record per output token in
    // time order, token 0 within 1 ms of the scheduler's first token (the end of the last prefill chunk), and every
    // later token within 1 ms of the end of the batch that produced it.
    for version in VERSIONS {
        for scenario in SCENARIOS {
            let truth = truth(version, scenario);
            let loaded = load(&bodies(version, scenario));
            let t = &loaded.trace;
            for req in &exported(version, &truth) {
                let rid = req["rid"].as_str().unwrap();
                let at = format!("{version} {scenario} {}", req["key"]);
                let r = t.request_row(rid).unwrap_or_else(|| panic!("{at}: not imported"));
                let output = u32::try_from(req["output_tokens"].as_u64().unwrap()).unwrap();
                // 0.5.3's roots carry no token counts: absent, and the token records say it.
                if output > 0 && version != "0.5.3" {
                    assert_eq!(t.requests.output_tokens.at(r as usize), Some(output), "{at}");
                }
                let times: Vec<i64> = t.tokens_of(r).map(|k| t.tokens.emitted_ns[k]).collect();
                assert_eq!(times.len(), output as usize, "{at}: one record per output token");
                assert!(times.windows(2).all(|w| w[0] <= w[1]), "{at}: {times:?}");
                let produced: Vec<i64> = req["schedulers"][0]["tokens"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|tok| tok["ns"].as_i64().unwrap())
                    .collect();
                assert_eq!(produced.len(), times.len(), "{at}");
                // Its prefill chunks: one prefill stage per chunk, ending within 1 ms of the chunk's end.
                let chunks: Vec<i64> = req["schedulers"][0]["prefill_chunks"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|c| c["end_ns"].as_i64().unwrap())
                    .collect();
                let mut stages: Vec<i64> = t
                    .explicit_stages_of(r)
                    .filter(|&k| t.stages.kind[k] == tokenscope_core::trace::StageKind::Prefill)
                    .map(|k| t.stages.end_ns[k])
                    .collect();
                stages.sort_unstable();
                assert_eq!(stages.len(), chunks.len(), "{at}: prefill chunks");
                for (got, want) in stages.iter().zip(&chunks) {
                    assert!(
                        (got - want).abs() <= 1_000_000,
                        "{at}: a chunk ends at {got}, not {want}"
                    );
                }
                for (k, (&got, &want)) in times.iter().zip(&produced).enumerate() {
                    assert!(
                        (got - want).abs() <= 1_000_000,
                        "{at}: token {k} at {got}, produced at {want} ({} µs off)",
                        (got - want) / 1000
                    );
                }
            }
        }
    }
}

#[test]
fn every_batch_is_a_step_from_its_schedule_to_its_result() {
    // One step per batch of each scheduler (TP ranks run the same batches: rank 0's are the instance's), starting
    // when SGLang scheduled it and ending within 1 ms of when its result was processed. Under the overlap scheduler
    // the slice that carries a batch's `schedule` event ends with the batch before: the end comes from the members'
    // own result slices instead.
    for version in VERSIONS {
        for scenario in SCENARIOS {
            let at = format!("{version} {scenario}");
            let truth = truth(version, scenario);
            let mut want: Vec<(i64, Option<i64>)> = truth["batches"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|b| b["rank"].as_str().unwrap().starts_with("TP0"))
                .map(|b| {
                    // A batch that gave no member a token (under overlap, the one more a finished request rode)
                    // leaves no slice that ends with its result: only its start is known.
                    let gave = !b["produced"].as_array().unwrap().is_empty();
                    (
                        b["schedule_ns"].as_i64().unwrap(),
                        gave.then(|| b["result_ns"].as_i64().unwrap()),
                    )
                })
                .collect();
            want.sort_unstable();
            let loaded = load(&bodies(version, scenario));
            let it = &loaded.trace.iterations;
            let mut got: Vec<(i64, i64)> = it.start_ns.iter().copied().zip(it.end_ns.iter().copied()).collect();
            got.sort_unstable();
            if version == "0.5.3" {
                // 0.5.3 names no batch, and each member of a batch reads the clock for itself: no step is made up.
                assert!(got.is_empty(), "{at}: {} steps", got.len());
                let notes = loaded.report.notes.join("\n");
                assert!(notes.contains("0.5.3 names no batch"), "{at}: {notes}");
                continue;
            }
            assert_eq!(got.len(), want.len(), "{at}: steps");
            for ((start, end), (scheduled, result)) in got.iter().zip(&want) {
                assert_eq!(start, scheduled, "{at}");
                // 0.5.9's slices lie flat, and a batch's end is its first member's slice that carries its event:
                // its start is exact, its end within a few ms.
                let result = result.filter(|_| version != "0.5.9");
                if let Some(result) = result {
                    assert!(
                        (end - result).abs() <= 1_000_000,
                        "{at}: step from {start} ends {end}, result {result}"
                    );
                }
            }
        }
    }
}
