//! Readers and writers: the same trace as JSONL and Parquet gives the same figures and the same records; every
//! malformed input gives its own report and never a panic.

// Test helpers may unwrap (a panic here is a failed test) and start threads (a stopper, a watchdog).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use parquet::arrow::ArrowWriter;
use tokenscope::analysis::summary::{Slo, summarize_all};
use tokenscope::cli::summary::summary_json;
use tokenscope::format::records::for_each_record;
use tokenscope::format::{jsonl, write};
use tokenscope::ingest::{LoadError, Progress};
use tokenscope::load::{Loaded, load};
use tokenscope::trace::Trace;
use tokenscope::trace::report::Problem;

use crate::common;

const SAMPLE: &str = "sample_traces/four_requests.jsonl";

fn must_load(path: &Path) -> Loaded {
    load(path, &Progress::default()).unwrap_or_else(|e| panic!("{} loads: {e}", path.display()))
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"))
}

/// Every record of a trace, as the JSONL writer would write it.
fn jsonl_text(trace: &Trace) -> String {
    let mut out = Vec::new();
    for_each_record(trace, |r| jsonl::write_record(&mut out, r)).unwrap_or_else(|e| panic!("write: {e}"));
    String::from_utf8(out).unwrap_or_else(|e| panic!("utf8: {e}"))
}

fn summary_of(trace: &Trace) -> String {
    let slo = Slo {
        ttft_ms: Some(200.0),
        tpot_ms: Some(55.0),
    };
    summary_json(&summarize_all(trace, slo, None), 0, None).to_string()
}

#[test]
fn jsonl_and_parquet_give_identical_summaries_and_records() {
    let dir = tmp();
    let original = must_load(Path::new(SAMPLE));
    let pq = dir.path().join("t.parquet");
    write(&original.trace, &pq).unwrap_or_else(|e| panic!("{e}"));
    let from_parquet = must_load(&pq);
    assert_eq!(from_parquet.report.rejected_count(), 0);
    assert_eq!(summary_of(&original.trace), summary_of(&from_parquet.trace));
    // Nothing is lost: the records re-written from the Parquet copy are byte-identical to those of the original.
    assert_eq!(jsonl_text(&original.trace), jsonl_text(&from_parquet.trace));
    // And back to JSONL, compressed both ways.
    for name in ["back.jsonl", "back.jsonl.gz", "back.jsonl.zst"] {
        let p = dir.path().join(name);
        write(&from_parquet.trace, &p).unwrap_or_else(|e| panic!("{e}"));
        let again = must_load(&p);
        assert_eq!(jsonl_text(&original.trace), jsonl_text(&again.trace), "{name}");
    }
}

#[test]
fn record_order_does_not_matter() {
    let dir = tmp();
    let text = std::fs::read_to_string(SAMPLE).unwrap_or_else(|e| panic!("{e}"));
    let mut lines: Vec<&str> = text.lines().collect();
    lines.reverse();
    let reversed = dir.path().join("reversed.jsonl");
    std::fs::write(&reversed, lines.join("\n")).unwrap_or_else(|e| panic!("{e}"));
    let a = must_load(Path::new(SAMPLE));
    let b = must_load(&reversed);
    assert_eq!(jsonl_text(&a.trace), jsonl_text(&b.trace));
}

#[test]
fn a_directory_of_parquet_files_is_one_trace() {
    let dir = tmp();
    let text = std::fs::read_to_string(SAMPLE).unwrap_or_else(|e| panic!("{e}"));
    // Split the sample into two partitions: r1, r2 and their records; everything else.
    let (first, second): (Vec<&str>, Vec<&str>) = text
        .lines()
        .partition(|l| l.contains("\"r1\"") || l.contains("\"r2\"") || l.contains("\"meta\""));
    let part = |name: &str, lines: &[&str]| -> PathBuf {
        let j = dir.path().join(format!("{name}.jsonl"));
        std::fs::write(&j, lines.join("\n")).unwrap_or_else(|e| panic!("{e}"));
        let loaded = must_load(&j);
        let pq_dir = dir.path().join("parts");
        std::fs::create_dir_all(&pq_dir).unwrap_or_else(|e| panic!("{e}"));
        let pq = pq_dir.join(format!("{name}.parquet"));
        write(&loaded.trace, &pq).unwrap_or_else(|e| panic!("{e}"));
        pq_dir
    };
    part("a", &first);
    let parts = part("b", &second);
    let whole = must_load(&parts);
    assert_eq!(whole.report.files.len(), 2);
    assert_eq!(whole.report.rejected_count(), 0, "{:?}", whole.report.rejected.first());
    assert_eq!(whole.trace.request_count(), 4);
    assert_eq!(whole.trace.token_count(), 12);
    let original = must_load(Path::new(SAMPLE));
    assert_eq!(summary_of(&original.trace), summary_of(&whole.trace));
}

fn problems(path: &str) -> Vec<(Problem, Option<&'static str>, u64)> {
    let l = must_load(Path::new(path));
    l.report
        .rejected
        .iter()
        .map(|r| (r.problem, r.field, r.place.at))
        .collect()
}

#[test]
fn a_line_of_garbage_costs_only_that_line() {
    let l = must_load(Path::new("tests/data/bad/garbage_line.jsonl"));
    assert_eq!(
        problems("tests/data/bad/garbage_line.jsonl"),
        [(Problem::Malformed, None, 2)]
    );
    assert_eq!(l.report.records, 3);
    assert_eq!(l.report.kept(), 2);
    assert_eq!(l.trace.token_count(), 1, "the token after the garbage line is kept");
}

#[test]
fn float_seconds_and_milliseconds_in_ns_fields_are_named() {
    let l = must_load(Path::new("tests/data/bad/float_seconds.jsonl"));
    assert_eq!(
        problems("tests/data/bad/float_seconds.jsonl"),
        [
            (Problem::FloatTime, Some("arrival_ns"), 2),
            (Problem::TimeUnit, Some("arrival_ns"), 3)
        ]
    );
    assert!(
        l.report.rejected[0].reason.contains("float"),
        "{}",
        l.report.rejected[0].reason
    );
    assert!(
        l.report.rejected[1].reason.contains("milliseconds"),
        "{}",
        l.report.rejected[1].reason
    );
    assert_eq!(l.trace.request_count(), 1);
}

#[test]
fn a_token_of_an_unknown_request_is_rejected() {
    let l = must_load(Path::new("tests/data/bad/unknown_request.jsonl"));
    assert_eq!(
        problems("tests/data/bad/unknown_request.jsonl"),
        [(Problem::UnknownRequest, Some("request_id"), 3)]
    );
    assert!(l.report.rejected[0].reason.contains("ghost"));
    assert_eq!(l.trace.token_count(), 1);
}

#[test]
fn a_record_without_request_id_is_rejected() {
    assert_eq!(
        problems("tests/data/bad/missing_request_id.jsonl"),
        [(Problem::MissingField, Some("request_id"), 2)]
    );
}

#[test]
fn many_problems_each_get_their_own_report() {
    let l = must_load(Path::new("tests/data/bad/many_problems.jsonl"));
    let got: Vec<(u64, &str)> = l
        .report
        .rejected
        .iter()
        .map(|r| (r.place.at, r.problem.name()))
        .collect();
    assert_eq!(
        got,
        [
            (1, "negative_duration"), // scheduled before arrival
            (3, "duplicate"),         // request b twice
            (4, "request_rejected"),  // token of the rejected request a
            (5, "out_of_range"),      // logprob 0.7 > 0
            (6, "wrong_type"),        // candidate logprob "high"
            (8, "unknown_stage"),     // "prefil"
            (9, "negative_duration"), // iteration ends before it starts
            (10, "out_of_range"),     // kv_usage 42
            (11, "unknown_kind"),     // "launch"
            (12, "unknown_kind"),     // no kind
            (13, "out_of_range"),     // index -1
            (14, "malformed"),        // candidates [1, 2]
            (15, "malformed"),        // a JSON array
            (16, "malformed"),        // truncated last line
        ]
    );
    assert_eq!(l.report.records, 16);
    assert_eq!(l.report.kept(), 2);
    let warnings: Vec<&str> = l.report.warnings.iter().map(|w| w.concern.name()).collect();
    assert_eq!(warnings, ["index_gap", "token_mismatch"]);
}

#[test]
fn a_truncated_parquet_file_is_a_clear_fatal_error() {
    let dir = tmp();
    let pq = dir.path().join("t.parquet");
    write(&must_load(Path::new(SAMPLE)).trace, &pq).unwrap_or_else(|e| panic!("{e}"));
    let bytes = std::fs::read(&pq).unwrap_or_else(|e| panic!("{e}"));
    let cut = dir.path().join("cut.parquet");
    std::fs::write(&cut, &bytes[..bytes.len() * 2 / 3]).unwrap_or_else(|e| panic!("{e}"));
    match load(&cut, &Progress::default()) {
        Err(e @ LoadError::Parquet { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("cut.parquet") && msg.contains("truncated"), "{msg}");
        }
        other => panic!("expected a Parquet error, got {other:?}"),
    }
}

fn write_batch(path: &Path, columns: Vec<(&str, ArrayRef)>) {
    let batch = RecordBatch::try_from_iter_with_nullable(columns.into_iter().map(|(n, a)| (n, a, true)))
        .unwrap_or_else(|e| panic!("{e}"));
    let file = std::fs::File::create(path).unwrap_or_else(|e| panic!("{e}"));
    let mut w = ArrowWriter::try_new(file, batch.schema(), None).unwrap_or_else(|e| panic!("{e}"));
    w.write(&batch).unwrap_or_else(|e| panic!("{e}"));
    w.close().unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn a_parquet_file_without_arrival_ns_names_the_column() {
    let dir = tmp();
    let pq = dir.path().join("no_arrival.parquet");
    write_batch(
        &pq,
        vec![
            (
                "kind",
                Arc::new(StringArray::from(vec!["request", "request"])) as ArrayRef,
            ),
            ("request_id", Arc::new(StringArray::from(vec!["a", "b"])) as ArrayRef),
        ],
    );
    match load(&pq, &Progress::default()) {
        Err(e @ LoadError::MissingColumn { .. }) => {
            let msg = e.to_string();
            assert!(
                msg.contains("\"arrival_ns\"") && msg.contains("request records"),
                "{msg}"
            );
        }
        other => panic!("expected a missing-column error, got {other:?}"),
    }
}

#[test]
fn parquet_columns_of_other_types_are_read_or_rejected_by_row() {
    let dir = tmp();
    let pq = dir.path().join("types.parquet");
    // arrival_ns as float seconds: every row is rejected by name; an unknown x_ column is ignored.
    write_batch(
        &pq,
        vec![
            (
                "kind",
                Arc::new(StringArray::from(vec!["request", "request"])) as ArrayRef,
            ),
            ("request_id", Arc::new(StringArray::from(vec!["a", "b"])) as ArrayRef),
            (
                "arrival_ns",
                Arc::new(Float64Array::from(vec![1_764_403_200.5, 1_764_403_201.0])) as ArrayRef,
            ),
            ("x_custom", Arc::new(Int64Array::from(vec![1, 2])) as ArrayRef),
        ],
    );
    let l = must_load(&pq);
    let got: Vec<(u64, Problem, Option<&str>)> = l
        .report
        .rejected
        .iter()
        .map(|r| (r.place.at, r.problem, r.field))
        .collect();
    assert_eq!(
        got,
        [
            (0, Problem::FloatTime, Some("arrival_ns")),
            (1, Problem::FloatTime, Some("arrival_ns"))
        ]
    );
}

#[test]
fn all_null_columns_are_absent_values_not_errors() {
    // pyarrow writes a column that is None throughout with the Null type.
    let dir = tmp();
    let pq = dir.path().join("nulls.parquet");
    write_batch(
        &pq,
        vec![
            (
                "kind",
                Arc::new(StringArray::from(vec!["request", "request"])) as ArrayRef,
            ),
            ("request_id", Arc::new(StringArray::from(vec!["a", "b"])) as ArrayRef),
            (
                "arrival_ns",
                Arc::new(Int64Array::from(vec![
                    1_764_403_200_000_000_000,
                    1_764_403_201_000_000_000,
                ])) as ArrayRef,
            ),
            ("error_code", Arc::new(arrow_array::NullArray::new(2)) as ArrayRef),
            ("candidates", Arc::new(arrow_array::NullArray::new(2)) as ArrayRef),
        ],
    );
    let l = must_load(&pq);
    assert_eq!(l.report.rejected_count(), 0, "{:?}", l.report.rejected.first());
    assert_eq!(l.trace.request_count(), 2);
}

#[test]
fn garbage_bytes_and_empty_files_never_panic() {
    let dir = tmp();
    let cases: [(&str, &[u8]); 5] = [
        ("empty.jsonl", b""),
        ("binary.jsonl", &[0xff, 0xfe, 0x00, 0x7b, 0x0a, 0x80]),
        ("bad.jsonl.gz", &[0x1f, 0x8b, 0x08, 0x00, 0x01]),
        ("par1.parquet", b"PAR1PAR1"),
        (
            "deep.jsonl",
            b"{\"kind\":\"token\",\"candidates\":[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]}\n",
        ),
    ];
    for (name, bytes) in cases {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap_or_else(|e| panic!("{e}"));
        // Either a report or an error: what matters is that it returns.
        let _ = load(&p, &Progress::default());
    }
    let gz = must_load(&dir.path().join("bad.jsonl.gz"));
    assert_eq!(
        gz.report.rejected_by_problem.get(&Problem::Malformed),
        Some(&1),
        "a truncated gzip is reported"
    );
}

#[test]
fn every_field_survives_jsonl_to_parquet_to_jsonl() {
    // A fixture with every field of every kind set (unicode and control characters in texts, special false,
    // a failed request without tokens, stages of five kinds).
    let original = must_load(Path::new("tests/data/every_field.jsonl"));
    assert_eq!(
        original.report.rejected_count(),
        0,
        "{:?}",
        original.report.rejected.first()
    );
    let dir = tmp();
    let pq = dir.path().join("t.parquet");
    write(&original.trace, &pq).unwrap();
    let back = must_load(&pq);
    assert_eq!(jsonl_text(&original.trace), jsonl_text(&back.trace));
    // And the records written are those of the fixture, field for field (the fixture is in writing order).
    let fixture: Vec<serde_json::Value> = std::fs::read_to_string("tests/data/every_field.jsonl")
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let written: Vec<serde_json::Value> = jsonl_text(&back.trace)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(written, fixture);
}

#[test]
fn many_row_groups_read_in_parallel_give_the_same_trace() {
    use tokenscope::synth::{Scenario, SynthOptions, arrivals::ReplayOptions, generate};
    let options = SynthOptions {
        scenario: Scenario::EosMistrigger,
        seed: 3,
        requests: None,
        arrivals: None,
        replay: ReplayOptions::default(),
        sources: 1,
        prefix_cache_tokens: None,
        profile: tokenscope::synth::ProfileChoice::default(),
        chunked_prefill: None,
        plant: None,
    };
    let trace = generate(&options).unwrap();
    let dir = tmp();
    let pq = dir.path().join("small_groups.parquet");
    // 97-row groups: requests, iterations, stages and tokens land in different groups, decoded on different
    // threads and merged, with labels and texts interned separately in each.
    tokenscope::format::parquet::write_with_row_groups(&trace, &pq, 97).unwrap();
    let back = must_load(&pq);
    assert_eq!(back.report.rejected_count(), 0, "{:?}", back.report.rejected.first());
    assert_eq!(jsonl_text(&trace), jsonl_text(&back.trace));
}

#[test]
fn eos_is_recognised_from_meta_alone() {
    let dir = tmp();
    let p = dir.path().join("eos.jsonl");
    std::fs::write(
        &p,
        "\u{feff}{\"kind\":\"meta\",\"eos_token_ids\":[7]}\n\
         {\"kind\":\"request\",\"request_id\":\"a\",\"arrival_ns\":1764403200000000000}\n\
         {\"kind\":\"token\",\"request_id\":\"a\",\"index\":0,\"emitted_ns\":1764403200100000000,\"token_id\":5}\n\
         {\"kind\":\"token\",\"request_id\":\"a\",\"index\":1,\"emitted_ns\":1764403200200000000,\"token_id\":7,\"text\":\"\"}\n",
    )
    .unwrap();
    let l = must_load(&p);
    assert_eq!(
        l.report.rejected_count(),
        0,
        "a byte-order mark before the first record is not an error"
    );
    let t = &l.trace;
    let toks = t.tokens_of(0);
    // Neither token says "special"; the second is an EOS by meta.eos_token_ids.
    assert!(!t.is_special_token(t.tokens.token_id[toks.start], t.tokens.special[toks.start]));
    assert!(t.is_special_token(t.tokens.token_id[toks.start + 1], t.tokens.special[toks.start + 1]));
}

#[test]
fn an_unknown_format_version_is_a_warning() {
    let dir = tmp();
    let p = dir.path().join("v2.jsonl");
    std::fs::write(
        &p,
        "{\"kind\":\"meta\",\"format\":\"tokenscope\",\"version\":2}\n\
         {\"kind\":\"request\",\"request_id\":\"a\",\"arrival_ns\":1764403200000000000}\n",
    )
    .unwrap();
    let l = must_load(&p);
    assert_eq!(l.trace.request_count(), 1);
    let w: Vec<&str> = l.report.warnings.iter().map(|w| w.concern.name()).collect();
    assert_eq!(w, ["format_version"]);
}

#[test]
fn candidates_left_on_disk_read_per_request_equal_the_eager_ones() {
    use tokenscope::format::parquet::read_request_candidates;
    use tokenscope::load::{LoadOptions, load_with};
    let eager = must_load(Path::new("sample_traces/eos_mistrigger.jsonl"));
    let dir = tmp();
    let pq = dir.path().join("groups.parquet");
    // Small row groups, so a request's token rows cross row-group boundaries.
    tokenscope::format::parquet::write_with_row_groups(&eager.trace, &pq, 150).unwrap();
    let lazy = load_with(
        &pq,
        &Progress::default(),
        LoadOptions {
            lazy_candidates: true,
            ..LoadOptions::default()
        },
    )
    .unwrap();
    assert_eq!(lazy.report.rejected_count(), 0);
    assert!(
        lazy.trace.candidates.is_empty(),
        "no candidate is held after a lazy load"
    );
    assert!(lazy.trace.candidates_on_disk.is_some());
    for id in ["med-question", "req-00000", "req-00007"] {
        let (re, rl) = (
            eager.trace.request_row(id).unwrap(),
            lazy.trace.request_row(id).unwrap(),
        );
        let want = eager.trace.owned_candidates(re);
        assert!(want.iter().all(|c| c.len() == 5), "{id}: five candidates a token");
        assert_eq!(read_request_candidates(&lazy.trace, rl).unwrap(), want, "{id}");
    }
    // Everything else is as an eager load has it.
    let summary = |t: &Trace| summary_json(&summarize_all(t, Slo::default(), None), 0, None).to_string();
    assert_eq!(summary(&lazy.trace), summary(&eager.trace));
}

/// Runs `f` on a thread and fails the test if it has not returned within `secs` seconds (a hang, not a timing).
fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(secs))
        .unwrap_or_else(|_| panic!("no answer within {secs} s: the reader hangs"))
}

/// A file of 12 row groups of 40,000 rows and no `arrival_ns` column: the first row group is token rows ending
/// with a request record (the fatal error, found late), the others are token rows only.
fn late_fatal_error_file(path: &Path) {
    use parquet::file::properties::WriterProperties;
    const GROUP: usize = 40_000;
    let rows = 12 * GROUP;
    let kind: Vec<&str> = (0..rows)
        .map(|i| if i == GROUP - 1 { "request" } else { "token" })
        .collect();
    let request_id: Vec<String> = (0..rows).map(|i| format!("r{}", i / 100)).collect();
    let index: Vec<i64> = (0..rows).map(|i| (i % 100) as i64).collect();
    let emitted: Vec<i64> = (0..rows).map(|i| 1_764_403_200_000_000_000 + i as i64 * 1000).collect();
    let batch = RecordBatch::try_from_iter_with_nullable([
        ("kind", Arc::new(StringArray::from(kind)) as ArrayRef, true),
        ("request_id", Arc::new(StringArray::from(request_id)) as ArrayRef, true),
        ("index", Arc::new(Int64Array::from(index)) as ArrayRef, true),
        ("emitted_ns", Arc::new(Int64Array::from(emitted)) as ArrayRef, true),
    ])
    .unwrap();
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(GROUP))
        .build();
    let file = std::fs::File::create(path).unwrap();
    let mut w = ArrowWriter::try_new(file, batch.schema(), Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

#[test]
fn a_fatal_error_found_late_in_the_first_row_group_returns_promptly() {
    // The hand-written pool this replaced hung here: its workers, ahead of the merge, slept until the merge caught
    // up, and the merge had stopped at the error.
    let dir = tmp();
    let pq = dir.path().join("late_fatal.parquet");
    late_fatal_error_file(&pq);
    let path = pq.clone();
    let result = within(120, move || load(&path, &Progress::default()).map(|_| ()));
    match result {
        Err(e @ LoadError::MissingColumn { .. }) => {
            let msg = e.to_string();
            assert!(msg.contains("\"arrival_ns\"") && msg.contains("row 39999"), "{msg}");
        }
        other => panic!("expected the missing column, got {other:?}"),
    }
    // The same through the command line.
    let path = pq.display().to_string();
    let (code, _, stderr) = within(120, move || common::tokenscope(&["validate", &path]));
    assert_ne!(code, 0);
    assert!(stderr.contains("arrival_ns"), "{stderr}");
}

#[test]
fn a_cancelled_load_stops_with_cancelled() {
    let dir = tmp();
    let pq = dir.path().join("many_groups.parquet");
    late_fatal_error_file(&pq);
    let progress = Progress::default();
    progress.cancel();
    let path = pq.clone();
    let result = within(120, move || load(&path, &progress).map(|_| ()));
    assert!(matches!(result, Err(LoadError::Cancelled)), "{result:?}");
}

#[test]
fn a_directory_of_partitions_is_the_same_trace_as_one_file() {
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let original = must_load(Path::new("sample_traces/long_prefill.jsonl"));
    let dir = tmp();
    let single = dir.path().join("single.parquet");
    tokenscope::format::parquet::write_with_row_groups(&original.trace, &single, 200).unwrap();
    // Each row group of the single file becomes a partition of its own, named in record order: requests,
    // iterations, stages and tokens land in different files, read together on the pool and merged in name order.
    let parts = dir.path().join("parts");
    std::fs::create_dir(&parts).unwrap();
    let groups = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&single).unwrap())
        .unwrap()
        .metadata()
        .num_row_groups();
    assert!(groups >= 8, "{groups} row groups");
    for rg in 0..groups {
        let reader = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&single).unwrap())
            .unwrap()
            .with_row_groups(vec![rg])
            .build()
            .unwrap();
        let file = std::fs::File::create(parts.join(format!("part-{rg:03}.parquet"))).unwrap();
        let mut w = None;
        for batch in reader {
            let batch = batch.unwrap();
            let w =
                w.get_or_insert_with(|| ArrowWriter::try_new(file.try_clone().unwrap(), batch.schema(), None).unwrap());
            w.write(&batch).unwrap();
        }
        w.unwrap().close().unwrap();
    }
    let back = must_load(&parts);
    assert_eq!(back.report.files.len(), groups);
    assert_eq!(back.report.rejected_count(), 0, "{:?}", back.report.rejected.first());
    assert_eq!(jsonl_text(&original.trace), jsonl_text(&back.trace));
}

/// Asserts that every request a preview shows has the figures of the full trace: TTFT, E2E and queue time.
fn previews_agree_with(previews: &[Arc<Trace>], full: &Trace) {
    for p in previews {
        for r in 0..p.request_count() as u32 {
            let f = full.request_row(p.request_id(r)).unwrap();
            let (a, b) = (
                tokenscope::analysis::metrics::request_metrics(p, r),
                tokenscope::analysis::metrics::request_metrics(full, f),
            );
            assert_eq!(
                (a.ttft_ns, a.e2e_ns, a.queue_ns),
                (b.ttft_ns, b.e2e_ns, b.queue_ns),
                "{}",
                p.request_id(r)
            );
        }
    }
}

#[test]
fn a_parquet_load_previews_its_requests_and_steps_as_they_are_read_and_ends_with_the_same_trace() {
    // The demo in row groups of 100 rows: its 309 requests and 16,585 steps come before its 40,078 tokens, so the
    // first previews show part of the requests, the later ones all of them and all the steps.
    let demo = must_load(Path::new("sample_traces/demo.parquet")).trace;
    let dir = tmp();
    let path = dir.path().join("demo.parquet");
    tokenscope::format::parquet::write_with_row_groups(&demo, &path, 100).unwrap();
    let previews: Arc<std::sync::Mutex<Vec<Arc<Trace>>>> = Arc::default();
    let heard = Arc::clone(&previews);
    let progress = Progress::with_each_preview(move |t| heard.lock().unwrap().push(t));
    let loaded = tokenscope::load::load_with(&path, &progress, tokenscope::load::LoadOptions::default()).unwrap();
    let full = &loaded.trace;
    let previews = previews.lock().unwrap();
    assert!(previews.len() >= 2, "{} previews", previews.len());
    // The demo's requests and steps, counted in its file by the parquet crate alone (309 and 16,585).
    let demo_file = Path::new("sample_traces/demo.parquet");
    let (requests, steps) = (
        common::parquet_records(demo_file, "request"),
        common::parquet_records(demo_file, "iteration"),
    );
    assert!(
        requests > 100 && steps > 100,
        "row groups of 100 rows hold several of each"
    );
    let counts: Vec<usize> = previews.iter().map(|p| p.request_count()).collect();
    assert!(counts.is_sorted(), "{counts:?}");
    assert!(
        counts[0] < requests,
        "the first preview comes before every request is read: {counts:?}"
    );
    let last = previews.last().unwrap();
    assert_eq!((last.request_count(), last.iterations.len()), (requests, steps));
    assert_eq!(last.token_count(), 0, "a preview holds no tokens");
    // Every request a preview shows has the figures of the full trace: times, lengths, TTFT and E2E.
    previews_agree_with(&previews, full);
    assert_eq!(last.iterations.start_ns, full.iterations.start_ns);
    // And the load itself gives the trace a load without previews gives.
    let plain = must_load(&path).trace;
    assert_eq!(summary_of(full), summary_of(&plain));
    assert_eq!(jsonl_text(full), jsonl_text(&plain));
}

#[test]
fn a_jsonl_load_is_previewed_as_its_chunks_are_merged() {
    // The demo's records, requests spread through the file, which is read in 2 MB chunks.
    let demo = must_load(Path::new("sample_traces/demo.parquet")).trace;
    let text = jsonl_text(&demo);
    let (requests, others): (Vec<&str>, Vec<&str>) = text.lines().partition(|l| l.contains(r#""kind":"request""#));
    let per = others.len().div_ceil(requests.len());
    let mut lines = Vec::new();
    for (i, r) in requests.iter().enumerate() {
        lines.push(*r);
        lines.extend_from_slice(&others[(i * per).min(others.len())..((i + 1) * per).min(others.len())]);
    }
    let dir = tmp();
    let path = dir.path().join("spread.jsonl");
    std::fs::write(&path, lines.join("\n")).unwrap();
    assert!(
        std::fs::metadata(&path).unwrap().len() > 4 << 20,
        "more than two chunks"
    );
    let previews: Arc<std::sync::Mutex<Vec<Arc<Trace>>>> = Arc::default();
    let heard = Arc::clone(&previews);
    let progress = Progress::with_each_preview(move |t| heard.lock().unwrap().push(t));
    let loaded = tokenscope::load::load_with(&path, &progress, tokenscope::load::LoadOptions::default()).unwrap();
    let previews = previews.lock().unwrap();
    // The first preview comes after the first chunk is merged (the next ones at most every four times a preview's
    // cost: this small file's chunks merge faster than that, a real one's are hundreds of windows apart).
    let counts: Vec<usize> = previews.iter().map(|p| p.request_count()).collect();
    assert!(!counts.is_empty(), "no preview");
    assert!(counts.is_sorted() && counts[0] < demo.request_count(), "{counts:?}");
    let full = &loaded.trace;
    previews_agree_with(&previews, full);
    // The same trace as a load without previews (not byte for byte the demo's: JSON floats parse to within an
    // ulp of what was written).
    let plain = must_load(&path).trace;
    // The spread file's records, counted in its lines.
    let lines_of = |kind: &str| {
        lines
            .iter()
            .filter(|l| l.contains(&format!(r#""kind":"{kind}""#)))
            .count()
    };
    assert_eq!(
        (full.request_count(), full.token_count()),
        (lines_of("request"), lines_of("token"))
    );
    assert_eq!(
        jsonl_text(full),
        jsonl_text(&plain),
        "previews change nothing of the load"
    );
}
