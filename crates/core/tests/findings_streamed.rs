//! Findings of a trace streamed from its files (`load::stream::findings`, for a trace over the memory budget) are
//! the loaded trace's: every finding of the streamable kinds equal, row numbers included, on traces that raise each
//! of those kinds, written in row groups of every size from one row to the whole file. A file out of the format's
//! order is refused, not misread.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers may unwrap: a panic here is a failed test"
)]

use std::collections::BTreeSet;
use std::path::Path;

use tokenscope_core::analysis::findings::{Kind, STREAMABLE, Thresholds, find_kinds};
use tokenscope_core::analysis::summary::Slo;
use tokenscope_core::format::parquet::write_with_row_groups;
use tokenscope_core::load::stream::StreamError;
use tokenscope_core::load::stream::findings::{find, needing_a_load};
use tokenscope_core::load::{Progress, load};
use tokenscope_core::trace::Trace;

use crate::findings::{sample, th};
use crate::findings_by_hand::{at, collapsed_speculation, imbalanced, request, step, token, trace_of};
use crate::findings_windowed::{chronically_chunked, overloaded};

/// KV saturation with a preemption: steps of `e` at 96 % for 2 s, one preempting at 1.2 s; request `a` (a 100-token
/// prompt) emits a token every 100 ms from 100 ms and is preempted from 1.5 s to 1.6 s. And `g`, whose tokens 3 and 4
/// are missing and whose `output_tokens` says 6 for its 4 records: a token-count mismatch naming its last token,
/// found after a gap in its indexes.
fn saturated_with_a_preemption() -> Trace {
    let mut l = vec![request("a", 0, r#","input_tokens":100"#)];
    l.push(request("g", 50, r#","output_tokens":6"#));
    for (k, index) in [0u32, 1, 2, 5].into_iter().enumerate() {
        l.push(token("g", index, 300 + 10 * k as i64, ""));
    }
    for k in 0..10 {
        let more = if k == 6 { r#","num_preempted":1"# } else { "" };
        l.push(step(
            "e",
            k,
            200 * k,
            200 * k + 200,
            &format!(r#","kv_usage":0.96{more}"#),
        ));
    }
    l.push(format!(
        r#"{{"kind":"stage","request_id":"a","stage":"preempted","start_ns":{},"end_ns":{}}}"#,
        at(1500),
        at(1600)
    ));
    for k in 1..=30u32 {
        l.push(token("a", k - 1, 100 * i64::from(k), ""));
    }
    trace_of(&l)
}

/// Four preemptions on e within 640 ms (steps at 0, 300 and 600 ms preempting 1, 1 and 2): a at 0 ms, b at 300, c
/// and d at 600, each with a 10-token prompt and a token every 100 ms from 50 ms to 950 ms.
fn bursting() -> Trace {
    let mut l = Vec::new();
    for (id, at_ms) in [("a", 0), ("b", 300), ("c", 600), ("d", 600)] {
        l.push(request(id, 0, r#","input_tokens":10"#));
        l.push(format!(
            r#"{{"kind":"stage","request_id":"{id}","stage":"preempted","start_ns":{},"end_ns":{}}}"#,
            at(at_ms),
            at(at_ms + 50)
        ));
        for k in 0..10u32 {
            l.push(token(id, k, 50 + 100 * i64::from(k), ""));
        }
    }
    for (n, from, preempted) in [(0, 0, 1), (1, 300, 1), (2, 600, 2), (3, 700, 0)] {
        l.push(step(
            "e",
            n,
            from,
            from + 40,
            &format!(r#","num_preempted":{preempted}"#),
        ));
    }
    trace_of(&l)
}

/// Requests prefilled on p and decoded on d: r1's KV transfer took 600 ms of its 1,000 ms TTFT, r2 queued on p for
/// 700 ms of its 1,000.
fn slow_transfer() -> Trace {
    trace_of(&[
        format!(
            r#"{{"kind":"request","request_id":"r2","source":"p","decode_source":"d","arrival_ns":{},"finished_ns":{}}}"#,
            at(0),
            at(1100)
        ),
        format!(
            r#"{{"kind":"stage","request_id":"r2","stage":"queue","start_ns":{},"end_ns":{}}}"#,
            at(0),
            at(700)
        ),
        format!(
            r#"{{"kind":"stage","request_id":"r2","stage":"prefill","start_ns":{},"end_ns":{}}}"#,
            at(700),
            at(900)
        ),
        token("r2", 0, 1000, ""),
        token("r2", 1, 1100, ""),
        format!(
            r#"{{"kind":"request","request_id":"r1","source":"p","decode_source":"d","arrival_ns":{},"finished_ns":{}}}"#,
            at(0),
            at(1100)
        ),
        format!(
            r#"{{"kind":"stage","request_id":"r1","stage":"kv_transfer","start_ns":{},"end_ns":{},"tokens":8000}}"#,
            at(300),
            at(900)
        ),
        token("r1", 0, 1000, ""),
        token("r1", 1, 1100, ""),
    ])
}

/// The loaded findings of the streamable kinds and the streamed ones of `file` (a Parquet trace) are the same:
/// whole findings, the tokens they name by row and index, and the trace's start.
fn assert_streams_as_loaded(file: &Path, slo: &Slo, th: &Thresholds, what: &str) -> Vec<Kind> {
    let loaded = load(file, &Progress::default()).unwrap().trace;
    let expected = find_kinds(&loaded, slo, th, &STREAMABLE);
    let streamed = find(&[file.to_owned()], None, slo, th, &Kind::ALL).unwrap();
    assert_eq!(streamed.findings, expected, "{what}");
    for f in &streamed.findings {
        for &t in &f.tokens {
            let named = (loaded.tokens.request[t], loaded.tokens.index[t]);
            assert_eq!(streamed.token_index.get(&t), Some(&named), "{what}: token row {t}");
        }
    }
    assert_eq!(streamed.start_ns, loaded.start_ns(), "{what}");
    assert_eq!(streamed.trace.request_count(), loaded.request_count(), "{what}");
    assert_eq!(streamed.trace.token_count(), 0, "{what}: no token is held");
    expected.iter().map(|f| f.kind).collect()
}

#[test]
fn streamed_findings_are_the_loaded_ones_in_row_groups_of_every_size() {
    let dir = tempfile::tempdir().unwrap();
    let (slo, th) = (Slo::DEFAULT, th());
    let traces: Vec<(&str, Trace, &[usize])> = vec![
        ("demo", sample("demo.parquet"), &[997, 65_536, 1 << 22]),
        ("llamacpp", sample("llamacpp_gemma3_270m.parquet"), &[3, 100, 1 << 20]),
        // The real llama.cpp incident: a client's recording joined with the server's -lv 5 log.
        ("incident", sample("llamacpp_incident_joined.parquet"), &[7, 1 << 20]),
        ("four_requests", sample("four_requests.jsonl"), &[1, 2, 5, 1 << 20]),
        ("overloaded", overloaded(), &[1, 7, 1 << 20]),
        ("chronic", chronically_chunked(1000), &[13, 1000, 1 << 20]),
        ("saturated", saturated_with_a_preemption(), &[1, 4, 1 << 20]),
        ("bursting", bursting(), &[1, 3, 1 << 20]),
        ("collapsed", collapsed_speculation(), &[1, 5, 1 << 20]),
        ("transfer", slow_transfer(), &[1, 1 << 20]),
        ("imbalanced", imbalanced(), &[1, 1 << 20]),
    ];
    let mut kinds: BTreeSet<Kind> = BTreeSet::new();
    for (name, trace, sizes) in traces {
        for &size in sizes {
            let file = dir.path().join(format!("{name}-{size}.parquet"));
            write_with_row_groups(&trace, &file, size).unwrap();
            kinds.extend(assert_streams_as_loaded(
                &file,
                &slo,
                &th,
                &format!("{name} in groups of {size}"),
            ));
        }
    }
    // Every streamable kind was raised by some trace: none passed for having nothing to find.
    assert_eq!(kinds, STREAMABLE.into_iter().collect(), "kinds raised");
}

#[test]
fn a_preempted_requests_recomputed_tokens_are_counted_from_the_streamed_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("saturated.parquet");
    write_with_row_groups(&saturated_with_a_preemption(), &file, 4).unwrap();
    let streamed = find(&[file], None, &Slo::default(), &th(), &[Kind::KvSaturation]).unwrap();
    let [f] = streamed.findings.as_slice() else {
        panic!("{:#?}", streamed.findings)
    };
    // Ten steps of 200 ms at 96 %: 2 s saturated. Preempted at 1.5 s, `a` had emitted its tokens at 100 ms ..
    // 1,400 ms (14): with its 100-token prompt, 114 tokens computed again.
    assert_eq!(
        f.summary,
        "KV cache of e at 95 % or more for 10 steps (2.00 s), peak 96.0 %; 1 preemptions (a), 114 tokens computed again"
    );
    // The requests and steps only, each in one pass over the tokens: the first (facts), and none more since this
    // finding names no token.
    assert_eq!(streamed.passes, 1);
}

#[test]
fn a_preemption_bursts_recomputed_tokens_are_those_emitted_before_each_preemption() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bursting.parquet");
    write_with_row_groups(&bursting(), &file, 3).unwrap();
    let streamed = find(&[file], None, &Slo::default(), &th(), &[Kind::PreemptionBurst]).unwrap();
    let [f] = streamed.findings.as_slice() else {
        panic!("{:#?}", streamed.findings)
    };
    // Prompts of 10 tokens, computed again for each of the four; and the tokens each had when preempted: a none (at
    // 0 ms), b 3 (50, 150, 250 ms), c and d 6 each (up to 550 ms): 40 + 15 = 55.
    assert_eq!(
        f.summary,
        "4 preemptions in 3 steps of e within 640.0 ms: a, b and 2 others recomputed (55 tokens computed again)"
    );
}

#[test]
fn every_kind_but_a_rescored_runs_is_judged_in_one_pass_over_the_tokens() {
    assert_eq!(needing_a_load(), [Kind::OffDistribution, Kind::SamplingAccident]);
    // The demo's incidents (two interruptions, two monopolies, an EOS mis-trigger, SLO violations, truncations) all
    // come out of one pass, with the stop token's choice read alone afterwards.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("demo.parquet");
    write_with_row_groups(&sample("demo.parquet"), &file, 65_536).unwrap();
    let streamed = find(&[file], None, &Slo::DEFAULT, &th(), &Kind::ALL).unwrap();
    let kinds: BTreeSet<Kind> = streamed.findings.iter().map(|f| f.kind).collect();
    assert_eq!(
        kinds,
        [
            Kind::DecodeInterrupted,
            Kind::EosMistrigger,
            Kind::PrefillMonopoly,
            Kind::SloViolations,
            Kind::Truncation
        ]
        .into_iter()
        .collect()
    );
    assert_eq!(streamed.passes, 1);
}

#[test]
fn tokens_of_a_request_apart_are_refused_not_misread() {
    // b's tokens on either side of a's: a load sorts them, a stream cannot.
    let lines = [
        request("a", 0, ""),
        request("b", 0, ""),
        token("b", 0, 100, ""),
        token("a", 0, 100, ""),
        token("b", 1, 200, ""),
    ];
    let dir = tempfile::tempdir().unwrap();
    let jsonl = dir.path().join("apart.jsonl");
    std::fs::write(&jsonl, lines.join("\n")).unwrap();
    // Written as the lines come (a Parquet writer keeps the rows' order when it is given them so).
    let file = dir.path().join("apart.parquet");
    write_rows_in_order(&jsonl, &file);
    match find(&[file], None, &Slo::DEFAULT, &th(), &Kind::ALL) {
        Err(StreamError::Unordered(why)) => assert!(why.contains("together"), "{why}"),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("tokens apart were read"),
    }
}

#[test]
fn a_token_column_of_the_wrong_type_is_refused_before_the_tokens_are_read() {
    // `special` written as text: a load rejects the file's tokens; a stream says so from the schema, naming the
    // column and the fix, before its pass (the last thing a pass reads is the texts).
    let lines = [
        request("a", 0, ""),
        token("a", 0, 100, r#","special":"yes""#),
        token("a", 1, 200, r#","special":"no""#),
    ];
    let dir = tempfile::tempdir().unwrap();
    let jsonl = dir.path().join("typed.jsonl");
    std::fs::write(&jsonl, lines.join("\n")).unwrap();
    let file = dir.path().join("typed.parquet");
    write_rows_in_order(&jsonl, &file);
    match find(&[file], None, &Slo::DEFAULT, &th(), &Kind::ALL) {
        Err(StreamError::Load(e)) => {
            let why = e.to_string();
            assert!(
                why.contains("typed.parquet")
                    && why.contains("column special is string, not boolean")
                    && !why.contains("row group"),
                "{why}"
            );
        }
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("a text column was read as a flag"),
    }
}

#[test]
fn a_stop_token_in_the_next_file_is_read_there() {
    // a's tokens 0..3 in one file and 4..5 in the next (a writer that rotates by rows), its last a special token
    // chosen with p = e^-3 = 0.050: an EOS mis-trigger, its probability read from the second file.
    let dir = tempfile::tempdir().unwrap();
    let parts = [
        vec![
            request("a", 0, r#","output_tokens":6"#),
            token("a", 0, 100, ""),
            token("a", 1, 200, ""),
            token("a", 2, 300, ""),
            token("a", 3, 400, ""),
        ],
        vec![
            token("a", 4, 500, r#","logprob":-0.1"#),
            token("a", 5, 600, r#","special":true,"logprob":-3.0"#),
        ],
    ];
    let folder = dir.path().join("rotated");
    std::fs::create_dir(&folder).unwrap();
    for (k, lines) in parts.iter().enumerate() {
        let jsonl = dir.path().join(format!("part-{k}.jsonl"));
        std::fs::write(&jsonl, lines.join("\n")).unwrap();
        write_rows_in_order(&jsonl, &folder.join(format!("part-{k}.parquet")));
    }
    let files = vec![folder.join("part-0.parquet"), folder.join("part-1.parquet")];
    let streamed = find(&files, None, &Slo::default(), &th(), &[Kind::EosMistrigger]).unwrap();
    let [f] = streamed.findings.as_slice() else {
        panic!("{:#?}", streamed.findings)
    };
    assert_eq!(f.summary, "a ended at token 5 on ⟨special⟩ chosen with p = 0.050");
    assert_eq!(streamed.token_index.get(&5), Some(&(0, 5)));
}

#[test]
fn findings_do_not_depend_on_the_order_the_files_hold_the_requests_in() {
    // a (arrival 0 ms) and b (1 ms) each repeat token 7 twenty times from 10 ms, at the same times: two repetition
    // loops at one instant. The file holds b's tokens first; a load numbers a first, and so must the stream.
    let mut lines = vec![request("a", 0, ""), request("b", 1, "")];
    for id in ["b", "a"] {
        for k in 0..20u32 {
            lines.push(token(id, k, 10 + i64::from(k), r#","token_id":7"#));
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let jsonl = dir.path().join("loops.jsonl");
    std::fs::write(&jsonl, lines.join("\n")).unwrap();
    let file = dir.path().join("loops.parquet");
    write_rows_in_order(&jsonl, &file);
    let kinds = assert_streams_as_loaded(&file, &Slo::default(), &th(), "b's tokens first");
    assert_eq!(kinds, [Kind::RepetitionLoop, Kind::RepetitionLoop]);
}

#[test]
fn a_clients_recording_beside_a_servers_trace_is_left_to_a_load_that_joins_them() {
    let (client, server) = (
        crate::common::repo("sample_traces/llamacpp_gemma3_270m.parquet"),
        crate::common::repo("sample_traces/demo.parquet"),
    );
    match find(&[client.clone(), server], None, &Slo::DEFAULT, &th(), &Kind::ALL) {
        Err(StreamError::Unordered(why)) => assert!(why.contains("join needs the trace loaded"), "{why}"),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("two halves were read as one trace"),
    }
    // One half alone streams.
    assert!(find(&[client], None, &Slo::DEFAULT, &th(), &Kind::ALL).is_ok());
}

/// A Parquet file of the JSONL lines' records, in the lines' order (tokens as they come, not as a load sorts them).
fn write_rows_in_order(jsonl: &Path, parquet: &Path) {
    use std::sync::Arc;

    use arrow_array::{ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray};
    use arrow_schema::{DataType, Field, Schema};
    let text = std::fs::read_to_string(jsonl).unwrap();
    let rows: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let s = |k: &str| -> ArrayRef {
        Arc::new(StringArray::from(
            rows.iter()
                .map(|r| r[k].as_str().map(str::to_owned))
                .collect::<Vec<_>>(),
        ))
    };
    let i =
        |k: &str| -> ArrayRef { Arc::new(Int64Array::from(rows.iter().map(|r| r[k].as_i64()).collect::<Vec<_>>())) };
    let mut columns = vec![
        ("kind", s("kind"), DataType::Utf8),
        ("request_id", s("request_id"), DataType::Utf8),
        ("source", s("source"), DataType::Utf8),
        ("arrival_ns", i("arrival_ns"), DataType::Int64),
        ("index", i("index"), DataType::Int64),
        ("emitted_ns", i("emitted_ns"), DataType::Int64),
        ("token_id", i("token_id"), DataType::Int64),
    ];
    // `special` where a line has one, as written (a boolean, or text where the format wants a boolean); `logprob`.
    if rows.iter().any(|r| r["special"].is_string()) {
        columns.push(("special", s("special"), DataType::Utf8));
    } else if rows.iter().any(|r| r["special"].is_boolean()) {
        let flags: ArrayRef = Arc::new(BooleanArray::from(
            rows.iter().map(|r| r["special"].as_bool()).collect::<Vec<_>>(),
        ));
        columns.push(("special", flags, DataType::Boolean));
    }
    if rows.iter().any(|r| r["logprob"].is_number()) {
        let lp: ArrayRef = Arc::new(Float64Array::from(
            rows.iter().map(|r| r["logprob"].as_f64()).collect::<Vec<_>>(),
        ));
        columns.push(("logprob", lp, DataType::Float64));
    }
    let schema = Arc::new(Schema::new(
        columns
            .iter()
            .map(|(n, _, t)| Field::new(*n, t.clone(), true))
            .collect::<Vec<_>>(),
    ));
    let batch = RecordBatch::try_new(schema.clone(), columns.iter().map(|c| c.1.clone()).collect()).unwrap();
    let mut w = parquet::arrow::ArrowWriter::try_new(std::fs::File::create(parquet).unwrap(), schema, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}
