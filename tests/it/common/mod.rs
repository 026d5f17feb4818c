//! What several integration tests share: running the built binary.

use std::process::Command;

/// Runs `tokenscope ARGS`: exit code (-1 when killed by a signal), standard output, standard error.
pub fn tokenscope(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tokenscope"))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run tokenscope: {e}"));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Numbers equal to a relative 1e-9 (a streamed figure is summed or divided in another order than a loaded one),
/// everything else exactly.
pub fn assert_json_close(x: &serde_json::Value, y: &serde_json::Value, at: &str) {
    match (x, y) {
        (serde_json::Value::Object(a), serde_json::Value::Object(b)) => {
            assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>(), "{at}");
            for (k, v) in a {
                assert_json_close(v, &b[k], &format!("{at}.{k}"));
            }
        }
        (serde_json::Value::Array(a), serde_json::Value::Array(b)) => {
            assert_eq!(a.len(), b.len(), "{at}");
            for (i, (u, v)) in a.iter().zip(b).enumerate() {
                assert_json_close(u, v, &format!("{at}[{i}]"));
            }
        }
        (serde_json::Value::Number(a), serde_json::Value::Number(b)) => {
            let (a, b) = (a.as_f64().unwrap(), b.as_f64().unwrap());
            assert!(
                (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0),
                "{at}: {a} != {b}"
            );
        }
        _ => assert_eq!(x, y, "{at}"),
    }
}

/// The demo trace's requests (`sample_traces/demo.parquet`: `synth --scenario mixed`): the scenario's 300 ordinary
/// requests, and those it plants: chat-victim, rag-24k and four rag-6k (a prefill interrupting decodes), med-question
/// (an EOS mis-trigger), doc-96k and short-700 (a long prefill).
pub const DEMO_REQUESTS: usize = 300 + 6 + 1 + 2;

/// The records of a Parquet trace counted by `kind` and the value of one string column (`""` when null), read with
/// the parquet crate alone: the figures a test expects of a file, found without tokenscope's reader.
pub fn parquet_counts(path: &std::path::Path, column: &str) -> std::collections::BTreeMap<(String, String), usize> {
    use arrow_array::{Array, StringArray};
    use parquet::arrow::ProjectionMask;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let builder = ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(path).unwrap()).unwrap();
    let wanted = ProjectionMask::columns(builder.parquet_schema(), ["kind", column]);
    let mut counts = std::collections::BTreeMap::new();
    for batch in builder.with_projection(wanted).build().unwrap() {
        let batch = batch.unwrap();
        let strings = |name: &str| {
            batch
                .column_by_name(name)
                .unwrap_or_else(|| panic!("{}: no column {name}", path.display()))
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap_or_else(|| panic!("{}: {name} is not Utf8", path.display()))
                .clone()
        };
        let (kind, value) = (strings("kind"), strings(column));
        for row in 0..batch.num_rows() {
            let v = if value.is_null(row) { "" } else { value.value(row) };
            *counts.entry((kind.value(row).to_owned(), v.to_owned())).or_insert(0) += 1;
        }
    }
    counts
}

/// The records of a Parquet trace of one kind, counted with the parquet crate alone (see [`parquet_counts`]).
pub fn parquet_records(path: &std::path::Path, kind: &str) -> usize {
    parquet_counts(path, "kind")
        .iter()
        .filter(|((k, _), _)| k == kind)
        .map(|(_, n)| n)
        .sum()
}

/// The engine steps of a gzipped llama-server log at `-lv 5`: one `llama_decode` a step, each logging its batch size
/// (`srv decode: n_batch (effective) = N`), counted in the text.
pub fn llamacpp_log_steps(path: &std::path::Path) -> usize {
    use std::io::Read;
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap())
        .read_to_string(&mut text)
        .unwrap();
    text.lines()
        .filter(|l| l.contains(" decode: n_batch (effective) = "))
        .count()
}
