//! vLLM's `llm_request` spans as its own code emits them (`scripts/engines/vllm-trace/`, fixtures and their ground
//! truth in `tests/data/import/vllm/engine/`): the import is checked against what the harness drove.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers may unwrap: a panic here is a failed test"
)]

use std::path::PathBuf;

use serde_json::Value;
use tokenscope_core::ingest::Progress;
use tokenscope_core::load::{LoadOptions, Loaded, load_many};

const DIR: &str = "tests/data/import/vllm/engine";
const SCENARIOS: [&str; 6] = [
    "stream_eos",
    "length",
    "long_prompt",
    "abort",
    "prefix_cache",
    "parallel_n2",
];

fn load(path: PathBuf) -> Loaded {
    load_many(&[path.as_path()], &Progress::default(), LoadOptions::default()).unwrap()
}

fn close(got: Option<i64>, want: &Value) -> bool {
    match (got, want.as_i64()) {
        (Some(g), Some(w)) => (g - w).abs() <= 1_000_000,
        (None, None) => true,
        _ => false,
    }
}

#[test]
fn every_request_with_a_span_imports_with_the_figures_vllm_measured() {
    // For both versions, from the protobuf body as the receiver kept it and from its JSON form: every request the
    // engine wrote a span for, with its prompt and output token counts, and its arrival, queue end and first token
    // within 1 ms of the engine's own times; a request the client aborted has no span, and is not in the trace.
    for version in ["0.15.1", "0.33.0"] {
        for scenario in SCENARIOS {
            let dir = crate::common::repo(DIR).join(version).join(scenario);
            let truth: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("truth.json")).unwrap()).unwrap();
            for file in ["000.pb", "spans.jsonl"] {
                let at = format!("{version} {scenario} {file}");
                let loaded = load(dir.join(file));
                let t = &loaded.trace;
                assert_eq!(
                    loaded.report.rejected_count(),
                    0,
                    "{at}: {:?}",
                    loaded.report.rejected.first()
                );
                let with_span: Vec<&Value> = truth["requests"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|r| r["span_expected"].as_bool() == Some(true))
                    .collect();
                assert_eq!(t.request_count(), with_span.len(), "{at}");
                let mut seen_ids: Vec<String> = Vec::new();
                for req in with_span {
                    // The sequences of an n = 2 request share its id: the second is ID#2.
                    let id = req["request_id"].as_str().unwrap().to_owned();
                    let k = seen_ids.iter().filter(|s| **s == id).count();
                    seen_ids.push(id.clone());
                    let id = if k == 0 { id } else { format!("{id}#{}", k + 1) };
                    let r = t.request_row(&id).unwrap_or_else(|| panic!("{at}: {id} not imported")) as usize;
                    let q = &t.requests;
                    let completion = u32::try_from(req["completion_tokens"].as_u64().unwrap()).unwrap();
                    let prompt = u32::try_from(req["prompt_tokens"].as_u64().unwrap()).unwrap();
                    assert_eq!(q.input_tokens.at(r), Some(prompt), "{at} {id}");
                    // Sequences are matched in the order their spans come: compare the count against either.
                    assert!(q.output_tokens.at(r).is_some(), "{at} {id}");
                    if req["n"].as_i64() == Some(1) {
                        assert_eq!(q.output_tokens.at(r), Some(completion), "{at} {id}");
                    }
                    assert!(close(Some(q.arrival_ns[r]), &req["arrival_ns"]), "{at} {id}: arrival");
                    if completion > 0 {
                        assert!(
                            close(q.first_token_ns.at(r), &req["first_token_ns"]),
                            "{at} {id}: first token"
                        );
                        assert!(
                            close(q.scheduled_ns.at(r), &req["scheduled_ns"]),
                            "{at} {id}: scheduled"
                        );
                    } else {
                        // Dropped before a token: no first token, no queue end (vLLM writes TTFT = e2e and a queue
                        // of 0 for it).
                        assert_eq!(q.first_token_ns.at(r), None, "{at} {id}");
                        assert_eq!(q.scheduled_ns.at(r), None, "{at} {id}");
                    }
                }
            }
        }
    }
}
