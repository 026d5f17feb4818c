//! Corrupt files (`tests/data/corrupt/`, each listed with its expected report in its README): a report that names
//! the file, the row group and the reason, and never a panic message on the terminal.

// Test helpers may unwrap: a panic here is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::tokenscope;

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
