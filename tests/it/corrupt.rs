//! Corrupt files (`tests/data/corrupt/`, each listed with its expected report in its README): a report that names
//! the file, the row group and the reason, and never a panic message on the terminal.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers may unwrap: a panic here is a failed test"
)]

use crate::common::tokenscope;

#[test]
fn decoder_panics_are_rejected_row_groups_and_never_printed() {
    // Two mutants of a 10-request Parquet trace (a few bytes changed at random) that make arrow-rs and parquet-rs
    // panic while decoding: the row group is reported lost with the decoder's words, and nothing is printed.
    for (file, why) in [
        (
            "decoder-panic-bit-chunks.parquet",
            "row group 0 (rows 0..1780) cannot be decoded: the decoder failed (offset + len out of bounds); its 1780 \
             remaining rows are lost",
        ),
        (
            "decoder-panic-negative-column-start.parquet",
            "cannot be decoded: the decoder failed (column start and length should not be negative)",
        ),
    ] {
        let path = format!("tests/data/corrupt/{file}");
        let (code, out, err) = tokenscope(&["validate", &path]);
        assert!(!err.contains("panicked") && !err.contains("backtrace"), "{file}: {err}");
        assert!(out.contains(why), "{file}: {out}");
        assert!(
            out.starts_with(&format!("{path}: 1,780 records, 0 kept, 1,780 rejected")),
            "{file}: {out}"
        );
        // Loaded, with every record accounted for: the exit code says there were rejections.
        assert_eq!(code, 0, "{file}: {err}");
    }
}

use tokenscope::ingest::{LoadError, Progress};
use tokenscope::load::load;

/// The four-request sample written as Parquet in row groups of `rows` rows, into `dir`.
fn small_parquet(dir: &std::path::Path, rows: usize) -> (std::path::PathBuf, Vec<u8>) {
    let trace = load(
        std::path::Path::new("sample_traces/four_requests.jsonl"),
        &Progress::default(),
    )
    .unwrap()
    .trace;
    let path = dir.join("four.parquet");
    tokenscope::format::parquet::write_with_row_groups(&trace, &path, rows).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    (path, bytes)
}

#[test]
fn a_file_cut_at_any_row_group_boundary_or_inside_a_page_is_a_named_fatal_error() {
    use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
    let dir = tempfile::tempdir().unwrap();
    let (path, bytes) = small_parquet(dir.path(), 4);
    let meta = ArrowReaderMetadata::load(&std::fs::File::open(&path).unwrap(), ArrowReaderOptions::new()).unwrap();
    let groups = meta.metadata().row_groups();
    assert!(groups.len() >= 4, "{} row groups", groups.len());
    // Every row group's first byte, the middle of its first column's pages, and the footer's middle.
    let mut cuts = Vec::new();
    for rg in groups {
        let first = rg.columns()[0].data_page_offset();
        let len = rg.columns()[0].compressed_size();
        cuts.push(usize::try_from(first).unwrap());
        cuts.push(usize::try_from(first + len / 2).unwrap());
    }
    cuts.push(bytes.len() - 100);
    let cut = dir.path().join("cut.parquet");
    for at in cuts {
        std::fs::write(&cut, &bytes[..at]).unwrap();
        match load(&cut, &Progress::default()) {
            Err(LoadError::Parquet { path, message }) => {
                assert!(path.ends_with("cut.parquet"), "{path}");
                assert!(!message.is_empty());
                let said = LoadError::Parquet { path, message }.to_string();
                assert!(
                    said.contains("is not a readable Parquet file") && said.contains("truncated"),
                    "{said}"
                );
            }
            other => panic!("cut at byte {at}: {:?}", other.map(|l| l.trace.request_count())),
        }
    }
}

#[test]
fn a_bit_flipped_anywhere_in_the_footer_is_an_error_or_a_report_never_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    // One row group: a footer of a few kilobytes, every fifth byte of which gets a bit flipped.
    let (_, bytes) = small_parquet(dir.path(), 1_000);
    // The footer: its length is in the 4 bytes before the closing "PAR1".
    let n = bytes.len();
    let footer_len = u32::from_le_bytes(bytes[n - 8..n - 4].try_into().unwrap()) as usize;
    let footer = n - 8 - footer_len..n;
    let flipped = dir.path().join("flipped.parquet");
    let (mut errors, mut loaded) = (0, 0);
    let tried: Vec<usize> = footer.clone().step_by(5).collect();
    for (k, &at) in tried.iter().enumerate() {
        let mut b = bytes.clone();
        b[at] ^= 1 << (k % 8);
        std::fs::write(&flipped, &b).unwrap();
        match load(&flipped, &Progress::default()) {
            Ok(l) => {
                loaded += 1;
                // Whatever was kept or rejected, every record is accounted for.
                assert!(l.report.records > 0 || l.trace.request_count() == 0);
            }
            Err(_) => errors += 1,
        }
    }
    // Each byte tried gave one of the two outcomes; both happen (names and statistics can change harmlessly).
    assert_eq!(errors + loaded, tried.len());
    assert!(errors > 0 && loaded > 0, "{errors} errors, {loaded} loaded");
}

#[test]
fn odd_lines_are_rejected_with_their_place_and_odd_texts_load_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("odd.jsonl");
    let mut text = Vec::new();
    text.extend_from_slice(br#"{"kind":"request","request_id":"r","arrival_ns":1764403200000000000}"#);
    text.push(b'\n');
    // Line 2: not UTF-8. Line 3: NaN is no JSON. Line 4: an arrival of 10^19 is beyond i64.
    text.extend_from_slice(b"{\"kind\":\"request\",\"request_id\":\"\xff\xfe\",\"arrival_ns\":1}\n");
    text.extend_from_slice(
        b"{\"kind\":\"token\",\"request_id\":\"r\",\"index\":9,\"emitted_ns\":1764403200100000000,\"logprob\":NaN}\n",
    );
    text.extend_from_slice(b"{\"kind\":\"request\",\"request_id\":\"big\",\"arrival_ns\":10000000000000000000}\n");
    // Tokens: a right-to-left override, a bell and a NUL, a megabyte of text, and 100,000 candidates on one.
    let token = |index: u32, text: &str, candidates: &str| {
        format!(
            "{{\"kind\":\"token\",\"request_id\":\"r\",\"index\":{index},\"emitted_ns\":{},\"text\":{}{candidates}}}\n",
            1_764_403_200_100_000_000u64 + u64::from(index) * 10_000_000,
            serde_json::to_string(text).unwrap()
        )
    };
    text.extend_from_slice(token(0, "\u{202e}evil\u{202c}", "").as_bytes());
    text.extend_from_slice(token(1, "\u{7}bell\u{0}", "").as_bytes());
    text.extend_from_slice(token(2, &"x".repeat(1_000_000), "").as_bytes());
    let many: Vec<String> = (0..100_000)
        .map(|i| format!("{{\"token_id\":{i},\"logprob\":-{}.5}}", i % 50))
        .collect();
    text.extend_from_slice(token(3, "y", &format!(",\"candidates\":[{}]", many.join(","))).as_bytes());
    std::fs::write(&path, &text).unwrap();
    let l = load(&path, &Progress::default()).unwrap();
    let t = &l.trace;
    assert_eq!((t.request_count(), t.token_count()), (1, 4));
    let rejected: Vec<u64> = l.report.rejected.iter().map(|r| r.place.at).collect();
    assert_eq!(rejected, [2, 3, 4], "{:?}", l.report.rejected);
    let texts: Vec<&str> = (0..4).map(|k| t.texts.str_or_empty(t.tokens.text[k])).collect();
    assert_eq!(texts[0], "\u{202e}evil\u{202c}");
    assert_eq!(texts[1], "\u{7}bell\u{0}");
    assert_eq!(texts[2].len(), 1_000_000);
    assert_eq!(t.candidates_of(3).len(), 100_000);
}

#[test]
fn spans_whose_parents_form_a_cycle_are_walked_once() {
    // Found by the `import` fuzz target: an SGLang OTLP file whose span parent ids form a cycle made the walk from a
    // request's scheduler span to its slices grow without end (24 GB before the kernel killed it). The file's first
    // byte picked the importer (0: SGLang OTLP); the rest is the file.
    let bytes = std::fs::read("tests/data/corrupt/sglang-otlp-parent-cycle.bin").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cycle.otlp.json");
    std::fs::write(&path, &bytes[1..]).unwrap();
    let options = tokenscope::load::LoadOptions {
        from: Some(tokenscope::import::Kind::SglangOtlp),
        ..tokenscope::load::LoadOptions::default()
    };
    // It ends, with what the file holds (the cut at a non-UTF-8 byte is reported).
    let outcome = tokenscope::load::load_many(&[path.as_path()], &Progress::default(), options);
    match outcome {
        Ok(l) => assert!(l.report.records > 0 || l.report.rejected_count() > 0 || l.trace.request_count() > 0),
        Err(e) => assert!(e.to_string().contains("cycle.otlp.json"), "{e}"),
    }
}

#[test]
fn a_page_header_that_would_keep_the_decoder_busy_for_minutes_is_refused_at_once() {
    // Found by the `parquet` fuzz target: a page header declaring a list of more elements than its bytes hold, which
    // parquet-rs 60.1's Thrift decoder skips one by one for minutes. The bounded walk refuses it first.
    let (tx, rx) = std::sync::mpsc::channel();
    #[expect(
        clippy::disallowed_methods,
        reason = "a thread the test can leave behind if the load hangs (a scoped one would be joined): the watchdog \
                  is the point"
    )]
    std::thread::spawn(move || {
        let loaded = load(
            std::path::Path::new("tests/data/corrupt/hang-thrift-skip.parquet"),
            &Progress::default(),
        );
        let _ = tx.send(loaded);
    });
    let loaded = rx
        .recv_timeout(std::time::Duration::from_mins(2))
        .expect("the load ends (it took minutes before the page-header check)");
    let report = match loaded {
        Ok(l) => l.report,
        Err(e) => panic!("the file's footer is fine: its row group is the problem, not the file ({e})"),
    };
    let reasons: Vec<&str> = report.rejected.iter().map(|r| r.reason.as_str()).collect();
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("cannot be decoded: column ") && r.contains("page header at byte")),
        "{reasons:?}"
    );
}

#[test]
fn columns_of_the_wrong_physical_type_are_named_with_both_types() {
    use std::sync::Arc;

    use arrow_array::RecordBatch;
    use arrow_array::{ArrayRef, Float64Array, StringArray};
    use arrow_schema::{DataType, Field, Schema};
    // arrival_ns written as text ("1764403200000000000"), input_tokens as a float: a dumper's mistake.
    let schema = Arc::new(Schema::new(vec![
        Field::new("kind", DataType::Utf8, false),
        Field::new("request_id", DataType::Utf8, false),
        Field::new("arrival_ns", DataType::Utf8, false),
        Field::new("input_tokens", DataType::Float64, false),
    ]));
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from(vec!["request", "request"])),
        Arc::new(StringArray::from(vec!["a", "b"])),
        Arc::new(StringArray::from(vec!["1764403200000000000", "1764403200001000000"])),
        Arc::new(Float64Array::from(vec![12.0, 7.5])),
    ];
    let batch = RecordBatch::try_new(schema.clone(), columns).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("types.parquet");
    let mut w = parquet::arrow::ArrowWriter::try_new(std::fs::File::create(&path).unwrap(), schema, None).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let (code, out, err) = tokenscope(&["validate", path.to_str().unwrap()]);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("2 records, 0 kept, 2 rejected"), "{out}");
    assert!(
        out.contains("row 0  [wrong_type] request.arrival_ns: arrival_ns is a string; expected integer nanoseconds"),
        "the row, the column and both types are named: {out}"
    );
}

#[test]
fn a_bit_flipped_anywhere_in_the_data_pages_is_an_error_a_rejection_or_a_changed_value_never_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    // One row group; every other byte between the leading "PAR1" and the footer (page headers, levels,
    // dictionaries, values) gets one bit flipped, a file each (every byte: 7,291 files, 34 s in a debug build).
    let (_, bytes) = small_parquet(dir.path(), 1_000);
    let n = bytes.len();
    let footer_len = u32::from_le_bytes(bytes[n - 8..n - 4].try_into().unwrap()) as usize;
    let data: Vec<usize> = (4..n - 8 - footer_len).step_by(2).collect();
    let tried = data.len();
    let dir_path = dir.path().to_path_buf();
    let (tx, rx) = std::sync::mpsc::channel();
    #[expect(
        clippy::disallowed_methods,
        reason = "a thread the test can leave behind if a load hangs: the watchdog is the point"
    )]
    std::thread::spawn(move || {
        let flipped = dir_path.join("flipped.parquet");
        let (mut errors, mut rejected, mut clean) = (0, 0, 0);
        for (k, &at) in data.iter().enumerate() {
            let mut b = bytes.clone();
            b[at] ^= 1 << (k % 8);
            std::fs::write(&flipped, &b).unwrap();
            match load(&flipped, &Progress::default()) {
                Err(e) => {
                    assert!(
                        e.to_string().contains("flipped.parquet"),
                        "byte {at}: the error names the file: {e}"
                    );
                    errors += 1;
                }
                Ok(l) if l.report.rejected_count() > 0 => rejected += 1,
                // A flipped bit in a value is another valid value: Parquet pages carry no checksum here.
                Ok(_) => clean += 1,
            }
        }
        let _ = tx.send((errors, rejected, clean));
    });
    let (errors, rejected, clean) = rx
        .recv_timeout(std::time::Duration::from_mins(10))
        .expect("every load ends");
    assert_eq!(errors + rejected + clean, tried);
    assert!(
        rejected > 0 && clean > 0,
        "{errors} errors, {rejected} with rejections, {clean} clean"
    );
    eprintln!("{tried} flips: {errors} errors, {rejected} loads with rejections, {clean} loads of other values");
}
