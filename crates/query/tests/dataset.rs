//! The figures of a dataset computed by `sql/tokenscope.sql` on polars' streaming engine are those of the in-memory
//! path, on the demo as one file and as a hive-partitioned dataset.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers may unwrap: a panic here is a failed test"
)]

use std::path::{Path, PathBuf};

use tokenscope_core::analysis::metrics::Distribution;
use tokenscope_core::analysis::summary::{Slo, Summary, summarize_all};
use tokenscope_core::format::partition::{PartitionKey, write_partitioned};
use tokenscope_core::ingest::Progress;
use tokenscope_core::load::{load, parquet_files};
use tokenscope_query::dataset::{summarize_files, summarize_files_keeping};

fn demo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../sample_traces/demo.parquet")
}

fn close(a: Option<f64>, b: Option<f64>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => (a - b).abs() <= 1e-9 * a.abs().max(1.0),
        (None, None) => true,
        _ => false,
    }
}

/// Counts, percentiles, maxima, totals and the span exactly; means and rates to 1e-9 (a sum's order differs).
fn assert_same(sql: &Summary, memory: &Summary) {
    let dist = |name: &str, a: &Distribution, b: &Distribution| {
        assert_eq!(
            (a.count, a.p50, a.p90, a.p95, a.p99, a.max),
            (b.count, b.p50, b.p90, b.p95, b.p99, b.max),
            "{name}"
        );
        assert!(close(a.mean, b.mean), "{name} mean {:?} {:?}", a.mean, b.mean);
    };
    assert_eq!(
        (
            sql.requests,
            sql.input_tokens,
            sql.cached_tokens,
            sql.output_tokens,
            sql.span_ms
        ),
        (
            memory.requests,
            memory.input_tokens,
            memory.cached_tokens,
            memory.output_tokens,
            memory.span_ms
        )
    );
    assert!(close(sql.throughput_tok_s, memory.throughput_tok_s));
    dist("ttft", &sql.ttft_ms, &memory.ttft_ms);
    dist("tpot", &sql.tpot_ms, &memory.tpot_ms);
    dist("e2e", &sql.e2e_ms, &memory.e2e_ms);
    dist("queue", &sql.queue_ms, &memory.queue_ms);
    dist("itl", &sql.itl_ms, &memory.itl_ms);
    assert_eq!(sql.finish_reasons, memory.finish_reasons);
    assert_eq!(sql.token_mismatches, memory.token_mismatches);
    let (a, b) = (
        sql.slo.expect("objectives given"),
        memory.slo.expect("objectives given"),
    );
    assert_eq!(a.attainment, b.attainment);
    assert!(close(a.goodput_tok_s, b.goodput_tok_s));
}

#[test]
fn the_sql_figures_of_one_file_are_the_in_memory_ones() {
    let trace = match load(&demo(), &Progress::default()) {
        Ok(l) => l.trace,
        Err(e) => panic!("{e}"),
    };
    let memory = summarize_all(&trace, Slo::DEFAULT, None);
    let sql = summarize_files(&[demo()], None, Slo::DEFAULT)
        .unwrap_or_else(|e| panic!("{e}"))
        .summary;
    // The demo is big enough for ranks to matter: 309 requests, and a gap between each token and the one before it
    // (one token a step: 39,769 gaps).
    assert_eq!(
        (sql.requests, sql.itl_ms.count),
        (trace.request_count() as u64, gaps_between_tokens(&trace) as u64)
    );
    assert!(sql.itl_ms.count > 10_000, "{}", sql.itl_ms.count);
    assert_same(&sql, &memory);
}

#[test]
fn a_partitioned_dataset_gives_the_figures_of_the_trace_it_was_cut_from() {
    let trace = match load(&demo(), &Progress::default()) {
        Ok(l) => l.trace,
        Err(e) => panic!("{e}"),
    };
    let memory = summarize_all(&trace, Slo::DEFAULT, None);
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let written = write_partitioned(&trace, dir.path(), &[PartitionKey::Hour, PartitionKey::Source], None)
        .unwrap_or_else(|e| panic!("{e}"));
    // The demo's 100 s are in one hour, on two instances: two folders.
    let folders: Vec<String> = written
        .iter()
        .map(|(p, _, _)| {
            p.strip_prefix(dir.path())
                .map_or_else(|_| String::new(), |r| r.display().to_string())
        })
        .collect();
    assert_eq!(
        folders,
        [
            "hour=2025-11-29T08/source=vllm-0/part-0.parquet",
            "hour=2025-11-29T08/source=vllm-1/part-0.parquet"
        ]
    );
    assert_eq!(written.iter().map(|(_, r, _)| r).sum::<usize>(), trace.request_count());
    let files = parquet_files(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(files.len(), 2);
    let done = summarize_files(&files, None, Slo::DEFAULT).unwrap_or_else(|e| panic!("{e}"));
    // Each file holds its requests whole: read one at a time, each figure's values few enough to keep.
    assert_eq!((done.file_by_file, done.passes), (true, 1));
    assert_same(&done.summary, &memory);
    // Keeping at most 1,000 values per figure, the percentiles are found in a second pass, exactly.
    let two = summarize_files_keeping(&files, None, Slo::DEFAULT, 1_000).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((two.file_by_file, two.passes), (true, 2));
    assert_same(&two.summary, &memory);
    // The folder opens as one trace again, with the same figures.
    let reloaded = match load(dir.path(), &Progress::default()) {
        Ok(l) => {
            assert_eq!(l.report.rejected_count(), 0);
            summarize_all(&l.trace, Slo::DEFAULT, None)
        }
        Err(e) => panic!("{e}"),
    };
    assert_eq!(reloaded, memory);
}

#[test]
fn a_query_out_of_core_answers_as_the_loaded_trace_does() {
    use tokenscope_query::{Rows, dataset::query_files, run};
    let trace = match load(&demo(), &Progress::default()) {
        Ok(l) => l.trace,
        Err(e) => panic!("{e}"),
    };
    let sql = "SELECT app_id, count(*) AS n, sum(output_tokens) AS tokens, QUANTILE_DISC(ttft_ms, 0.99) AS p99, \
               max(e2e_ms) AS worst FROM requests GROUP BY app_id ORDER BY app_id";
    let memory = Rows::of(&run(&trace, sql).unwrap_or_else(|e| panic!("{e}")));
    let streamed = Rows::of(&query_files(&[demo()], None, sql).unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(memory.columns, streamed.columns);
    assert_eq!(memory.rows.len(), streamed.rows.len());
    assert!(memory.rows.len() > 1, "several apps");
    for (a, b) in memory.rows.iter().zip(&streamed.rows) {
        assert_eq!(a[0], b[0]);
        for (x, y) in a[1..].iter().zip(&b[1..]) {
            // The same values; a ms figure may differ in its last bit (the streaming engine multiplies by 1e-6).
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            assert!((x - y).abs() <= 1e-12 * x.abs().max(1.0), "{a:?} {b:?}");
        }
    }
    // Out of core, the raw records are there too, and the inter-token gaps.
    let gaps =
        Rows::of(&query_files(&[demo()], None, "SELECT count(*) AS n FROM itl").unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(gaps.rows[0][0].as_f64(), Some(gaps_between_tokens(&trace) as f64));
    let err = query_files(&[demo()], None, "SELECT * FROM nothing")
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("the tables are the views of sql/tokenscope.sql: trace, requests_raw"),
        "{err}"
    );
}

#[test]
fn a_dataset_whose_files_split_requests_from_their_tokens_is_read_as_one() {
    use polars::prelude::*;
    let memory = match load(&demo(), &Progress::default()) {
        Ok(l) => summarize_all(&l.trace, Slo::DEFAULT, None),
        Err(e) => panic!("{e}"),
    };
    // The demo's request records in one file, every other record in another: neither file holds whole requests.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let all = LazyFrame::scan_parquet(
        PlRefPath::from(demo().to_string_lossy().as_ref()),
        ScanArgsParquet::default(),
    )
    .and_then(LazyFrame::collect)
    .unwrap_or_else(|e| panic!("{e}"));
    for (name, requests) in [("a.parquet", true), ("b.parquet", false)] {
        let kind = col("kind").eq(lit("request"));
        let mut part = all
            .clone()
            .lazy()
            .filter(if requests { kind } else { kind.not() })
            .collect()
            .unwrap_or_else(|e| panic!("{e}"));
        let file = std::fs::File::create(dir.path().join(name)).unwrap_or_else(|e| panic!("{e}"));
        ParquetWriter::new(file)
            .finish(&mut part)
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let files = parquet_files(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    let done = summarize_files(&files, None, Slo::DEFAULT).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        !done.file_by_file,
        "b.parquet holds tokens of requests recorded in a.parquet"
    );
    assert_same(&done.summary, &memory);
}

/// The gaps between consecutive tokens of each request: its tokens less one, counted by hand from the trace (a
/// trace of one token a step, whose tokens' indexes follow one another).
fn gaps_between_tokens(trace: &tokenscope_core::trace::Trace) -> usize {
    (0..trace.request_count())
        .map(|r| {
            let tokens = trace.tokens_of(r as u32);
            assert!(
                tokens
                    .clone()
                    .zip(tokens.clone().skip(1))
                    .all(|(a, b)| trace.tokens.index[b] == trace.tokens.index[a] + 1),
                "request {r}: an index gap"
            );
            tokens.len().saturating_sub(1)
        })
        .sum()
}
