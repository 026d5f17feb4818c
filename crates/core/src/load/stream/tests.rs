//! The streamed figures are the loaded trace's: on the samples cut into row groups of every size, on a hand-made
//! file with rows a load rejects, and with a window; a file out of the format's order is refused, not miscounted.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers may unwrap: a panic here is a failed test"
)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;

use super::*;
use crate::analysis::summary::summarize_all;
use crate::format::parquet::write_with_row_groups;
use crate::ingest::Progress;
use crate::load::load;

fn sample(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../sample_traces")
        .join(name)
}

fn loaded(path: &Path) -> crate::trace::Trace {
    load(path, &Progress::default()).unwrap().trace
}

/// Every figure equal, the means to 1e-12 of their value when `exact_means` is off (a second look at the
/// latencies sums them in another order).
fn assert_same(streamed: &Summary, memory: &Summary, exact_means: bool, what: &str) {
    if exact_means {
        assert_eq!(streamed, memory, "{what}");
        return;
    }
    let strip = |s: &Summary| {
        let mut s = s.clone();
        s.itl_ms.mean = None;
        s
    };
    assert_eq!(strip(streamed), strip(memory), "{what}");
    let (a, b) = (streamed.itl_ms.mean.unwrap(), memory.itl_ms.mean.unwrap());
    assert!((a - b).abs() <= 1e-12 * b.abs(), "{what}: ITL mean {a} against {b}");
}

#[test]
fn the_samples_cut_into_row_groups_of_every_size_stream_to_their_loaded_figures() {
    let dir = tempfile::tempdir().unwrap();
    let slo = Slo::DEFAULT;
    // (sample, sizes of row group): down to one row a group where the sample is small enough for it.
    let cases: [(&str, &[usize]); 4] = [
        ("four_requests.jsonl", &[1, 2, 3, 5, 8, 13, 1 << 20]),
        ("long_prefill.jsonl", &[1, 7, 64, 1000, 1 << 20]),
        ("llamacpp_gemma3_270m.parquet", &[3, 100, 4096, 1 << 20]),
        ("demo.parquet", &[997, 65_536, 1 << 22]),
    ];
    for (name, sizes) in cases {
        let trace = loaded(&sample(name));
        let memory = summarize_all(&trace, slo, None);
        assert!(memory.requests > 0 && memory.itl_ms.count > 0, "{name}");
        for &size in sizes {
            let file = dir.path().join(format!("{name}-{size}.parquet"));
            write_with_row_groups(&trace, &file, size).unwrap();
            let streamed = summarize(std::slice::from_ref(&file), None, slo).unwrap();
            assert_same(&streamed.summary, &memory, true, &format!("{name} in groups of {size}"));
            assert_eq!(streamed.passes, 2, "{name}");
            // The steps' line too: count, instances, span, tokens and durations.
            let it = &trace.iterations;
            let steps = crate::analysis::facts::StepFigures::of((0..it.len()).map(|i| {
                (
                    it.source[i],
                    it.start_ns[i],
                    it.end_ns[i],
                    it.num_prefill_tokens.at(i),
                    it.num_decode_tokens.at(i),
                )
            }));
            assert_eq!(streamed.steps, steps, "{name} in groups of {size}");
            assert_eq!(streamed.samples, trace.samples.len() as u64, "{name}");
            assert_eq!(streamed.skipped, Skipped::default(), "{name}");
            // Keeping 10 latencies, their percentiles come from a second look, exactly.
            let twice = summarize_keeping(std::slice::from_ref(&file), None, slo, 10).unwrap();
            assert_eq!(twice.passes, if memory.itl_ms.count > 10 { 3 } else { 2 }, "{name}");
            assert_same(
                &twice.summary,
                &memory,
                false,
                &format!("{name} in groups of {size}, 2 looks"),
            );
        }
    }
}

#[test]
fn a_window_and_a_filter_choose_the_requests_a_load_chooses() {
    let trace = loaded(&sample("demo.parquet"));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("demo.parquet");
    write_with_row_groups(&trace, &file, 4096).unwrap();
    let start = trace.start_ns();
    let source = trace.label(trace.requests.source[0]).unwrap().to_owned();
    let window = Window {
        from_ns: Some(start + 20_000_000_000),
        to_ns: Some(start + 60_000_000_000),
        filters: vec![("source".to_owned(), source)],
    };
    let options = crate::load::LoadOptions {
        window: Some(Arc::new(window.clone())),
        ..crate::load::LoadOptions::default()
    };
    let windowed = crate::load::load_with(&file, &Progress::default(), options)
        .unwrap()
        .trace;
    let memory = summarize_all(&windowed, Slo::DEFAULT, None);
    assert!(memory.requests > 10 && memory.requests < trace.request_count() as u64);
    let streamed = summarize(std::slice::from_ref(&file), Some(&window), Slo::DEFAULT).unwrap();
    assert_same(&streamed.summary, &memory, true, "window");
    assert_eq!(
        streamed.skipped.outside_window,
        trace.request_count() as u64 - memory.requests
    );
    assert_eq!(
        streamed.skipped.orphan_tokens, 0,
        "the tokens of requests outside are not orphans"
    );
}

/// A Parquet file of these rows: (kind, request_id, arrival_ns, output_tokens, index, emitted_ns).
type Row = (
    &'static str,
    Option<&'static str>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
    Option<i64>,
);

fn write_rows(path: &Path, rows: &[Row], group: usize) {
    let schema = Arc::new(Schema::new(vec![
        Field::new("kind", DataType::Utf8, false),
        Field::new("request_id", DataType::Utf8, true),
        Field::new("arrival_ns", DataType::Int64, true),
        Field::new("output_tokens", DataType::Int64, true),
        Field::new("index", DataType::Int64, true),
        Field::new("emitted_ns", DataType::Int64, true),
    ]));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(rows.iter().map(|r| Some(r.0)).collect::<Vec<_>>())),
        Arc::new(StringArray::from(rows.iter().map(|r| r.1).collect::<Vec<_>>())),
        Arc::new(Int64Array::from(rows.iter().map(|r| r.2).collect::<Vec<_>>())),
        Arc::new(Int64Array::from(rows.iter().map(|r| r.3).collect::<Vec<_>>())),
        Arc::new(Int64Array::from(rows.iter().map(|r| r.4).collect::<Vec<_>>())),
        Arc::new(Int64Array::from(rows.iter().map(|r| r.5).collect::<Vec<_>>())),
    ];
    let batch = RecordBatch::try_new(Arc::clone(&schema), columns).unwrap();
    let props = WriterProperties::builder()
        .set_max_row_group_row_count(Some(group))
        .build();
    let mut w = ArrowWriter::try_new(std::fs::File::create(path).unwrap(), schema, Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
}

const MS: i64 = 1_000_000;
/// 2025-11-24, in ns: the times below are after it.
const T0: i64 = 1_764_000_000_000_000_000;

/// Two requests, a duplicate, a request without id, one timed in seconds, one with a negative count, an orphan
/// token, a token without time, one with a negative index, an index gap.
const ROWS: [Row; 15] = [
    ("request", Some("a"), Some(T0 + 1_000 * MS), None, None, None),
    ("request", Some("a"), Some(T0 + 5), None, None, None),
    ("request", Some("b"), Some(T0 + 1_000 * MS), Some(3), None, None),
    ("request", None, Some(T0), None, None, None),
    ("token", Some("a"), None, None, Some(0), Some(T0 + 1_100 * MS)),
    ("token", Some("a"), None, None, Some(1), Some(T0 + 1_130 * MS)),
    ("token", Some("a"), None, None, Some(3), Some(T0 + 1_200 * MS)),
    ("token", Some("a"), None, None, Some(4), Some(T0 + 1_250 * MS)),
    ("token", Some("zz"), None, None, Some(0), Some(T0 + 1_300 * MS)),
    ("token", Some("b"), None, None, Some(0), Some(T0 + 1_500 * MS)),
    ("token", Some("b"), None, None, Some(1), Some(T0 + 1_520 * MS)),
    ("token", Some("b"), None, None, Some(2), None),
    ("request", Some("c"), Some(1_764_000_000), None, None, None),
    ("request", Some("d"), Some(T0), Some(-1), None, None),
    ("token", Some("d"), None, None, Some(-1), Some(T0 + 10 * MS)),
];

#[test]
fn figures_by_hand_with_the_rows_a_load_rejects_left_out_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    for group in [1, 2, 5, 15] {
        let file = dir.path().join(format!("hand-{group}.parquet"));
        write_rows(&file, &ROWS, group);
        let done = summarize(std::slice::from_ref(&file), None, Slo::DEFAULT).unwrap();
        let s = &done.summary;
        // a: TTFT 100 ms, E2E 250 ms, 4 tokens, TPOT (250 - 100) / 3 = 50 ms; gaps 30 and 50 ms (none across the
        // missing index 2). b: TTFT 500 ms, E2E 520 ms, usage 3 against 2 records, TPOT (520 - 500) / 2 = 10 ms;
        // gap 20 ms.
        assert_eq!(s.requests, 2, "groups of {group}");
        assert_eq!((s.ttft_ms.p50, s.ttft_ms.max), (Some(100.0), Some(500.0)));
        assert_eq!((s.e2e_ms.p50, s.e2e_ms.max), (Some(250.0), Some(520.0)));
        assert_eq!((s.tpot_ms.p50, s.tpot_ms.max), (Some(10.0), Some(50.0)));
        assert_eq!(s.output_tokens, 4 + 3);
        assert_eq!(s.token_mismatches, 1);
        // Gaps 20, 30, 50: p50 is the 2nd by nearest rank.
        assert_eq!(
            (s.itl_ms.count, s.itl_ms.p50, s.itl_ms.max),
            (3, Some(30.0), Some(50.0))
        );
        assert_eq!(
            done.skipped,
            Skipped {
                incomplete_requests: 3,
                duplicate_requests: 1,
                outside_window: 0,
                incomplete_tokens: 2,
                orphan_tokens: 1,
                incomplete_steps: 0,
            }
        );
        // A load of the same file rejects those rows and gives the same figures.
        let memory = summarize_all(&loaded(&file), Slo::DEFAULT, None);
        assert_same(s, &memory, true, &format!("hand, groups of {group}"));
    }
}

#[test]
fn tokens_out_of_order_are_refused_with_the_row_not_miscounted() {
    let dir = tempfile::tempdir().unwrap();
    let a = |index, t| ("token", Some("a"), None, None, Some(index), Some(T0 + t));
    let b = |index, t| ("token", Some("b"), None, None, Some(index), Some(T0 + t));
    let req = |id| ("request", Some(id), Some(T0), None, None, None);
    // a's tokens in two places (rows 3 and 5), then a token before its predecessor (row 4).
    let split: [Row; 6] = [req("a"), req("b"), a(0, 10), a(1, 20), b(0, 30), a(2, 40)];
    let backwards: [Row; 5] = [req("a"), req("b"), a(0, 10), a(2, 20), a(1, 30)];
    for group in [1, 2, 6] {
        let file = dir.path().join(format!("split-{group}.parquet"));
        write_rows(&file, &split, group);
        match summarize(std::slice::from_ref(&file), None, Slo::DEFAULT) {
            Err(StreamError::Unordered(why)) => assert!(why.contains("row 5") && why.contains("together"), "{why}"),
            other => panic!("groups of {group}: {other:?}"),
        }
        let file = dir.path().join(format!("backwards-{group}.parquet"));
        write_rows(&file, &backwards, group);
        match summarize(std::slice::from_ref(&file), None, Slo::DEFAULT) {
            Err(StreamError::Unordered(why)) => assert!(why.contains("row 4") && why.contains("token 1"), "{why}"),
            other => panic!("groups of {group}: {other:?}"),
        }
    }
}

#[test]
fn a_joined_trace_and_a_wrong_column_are_refused_naming_them() {
    match summarize(&[sample("llamacpp_incident_joined.parquet")], None, Slo::DEFAULT) {
        Err(StreamError::Unordered(why)) => assert!(why.contains("joined"), "{why}"),
        other => panic!("{other:?}"),
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("float-times.parquet");
    let schema = Arc::new(Schema::new(vec![
        Field::new("kind", DataType::Utf8, false),
        Field::new("request_id", DataType::Utf8, false),
        Field::new("arrival_ns", DataType::Float64, false),
    ]));
    let batch = RecordBatch::try_new(
        Arc::clone(&schema),
        vec![
            Arc::new(StringArray::from(vec!["request"])) as ArrayRef,
            Arc::new(StringArray::from(vec!["a"])),
            Arc::new(arrow_array::Float64Array::from(vec![1.5])),
        ],
    )
    .unwrap();
    let mut w = ArrowWriter::try_new(std::fs::File::create(&file).unwrap(), schema, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    match summarize(std::slice::from_ref(&file), None, Slo::DEFAULT) {
        Err(StreamError::Load(e)) => {
            let text = e.to_string();
            assert!(
                text.contains("float-times.parquet") && text.contains("arrival_ns is float, not int"),
                "{text}"
            );
        }
        other => panic!("{other:?}"),
    }
}
