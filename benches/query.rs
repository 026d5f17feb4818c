//! SQL and timeline benchmark on the `large` trace, after it is loaded (the app's case: the trace is in memory,
//! the user asks). Each figure includes building the tables the query names from the trace.
//!
//! - a group-by over the requests (per model: count, mean and nearest-rank p99 TTFT), against the statistics
//!   table's own exact path over the same groups (`summarize_by`, every figure of every model), measured in the
//!   same run;
//! - a group-by over the tokens (per request: count and p99 inter-token latency), against Python polars doing the
//!   same from the file (`scan_parquet`, filter the token rows, group by request: reading included), when Python
//!   polars is installed;
//! - the timeline in 10 s buckets per source (every series), and in 1 s buckets for the whole trace.
//!
//! `cargo bench --bench query [-- --requests N --runs R]`. Uses `target/bench-data/large-N.parquet` (see
//! `benches/common.rs`). Issue 17's targets: the requests group-by under 0.5 s, the tokens one under 3 s.

use std::process::Command;
use std::sync::Arc;

use tokenscope::analysis::summary::{GroupBy, Slo, summarize_by};
use tokenscope::query::{TimelineOptions, run, timeline};

mod common;

use common::time;

/// Python polars grouping the token rows of the file by request: the median of `runs` times in ms.
fn polars_tokens(path: &std::path::Path, runs: usize) -> Option<f64> {
    let script = r#"
import sys, time
import polars as pl
t = time.perf_counter()
df = (pl.scan_parquet(sys.argv[1]).filter(pl.col("kind") == "token")
      .with_columns(itl=pl.col("emitted_ns").diff().over("request_id"))
      .group_by("request_id").agg(pl.len(), pl.col("itl").quantile(0.99, "nearest")).collect())
print(time.perf_counter() - t, df.height)
"#;
    let mut times = Vec::new();
    for _ in 0..runs {
        let out = Command::new("python3").arg("-c").arg(script).arg(path).output().ok()?;
        let text = String::from_utf8_lossy(&out.stdout);
        let secs: f64 = text.split_whitespace().next()?.parse().ok()?;
        times.push(secs * 1e3);
    }
    times.sort_by(f64::total_cmp);
    times.get(times.len() / 2).copied()
}

fn main() {
    let requests = common::flag("--requests", 50_000);
    let runs = common::flag("--runs", 5).max(1);
    let (path, _) = common::large_files(requests);
    let trace = Arc::new(common::load_lazily(&path));
    println!(
        "query benchmark: {} requests, {} tokens, {} steps; {runs} runs each (median / max)",
        trace.request_count(),
        trace.token_count(),
        trace.iterations.len()
    );

    let (reference, reference_max, groups) = time(runs, || summarize_by(&trace, GroupBy::Model, Slo::DEFAULT, None));
    println!(
        "reference: summarize_by model ({} groups, every figure): {reference:.0} / {reference_max:.0} ms",
        groups.len()
    );
    let sql = "SELECT model, count(*) AS n, avg(ttft_ms) AS ttft_mean, QUANTILE_DISC(ttft_ms, 0.99) AS ttft_p99 \
               FROM requests GROUP BY model";
    let (median, max, df) = time(runs, || run(&trace, sql).unwrap_or_else(|e| panic!("{e}")));
    println!(
        "query: requests by model ({} rows): {median:.0} / {max:.0} ms, {:.2}x the reference (target < 500 ms)",
        df.height(),
        median / reference
    );

    let sql =
        "SELECT request_id, count(*) AS n, QUANTILE_DISC(itl_ms, 0.99) AS itl_p99 FROM tokens GROUP BY request_id";
    let (median, max, df) = time(runs, || run(&trace, sql).unwrap_or_else(|e| panic!("{e}")));
    let python = polars_tokens(&path, runs);
    println!(
        "query: tokens by request ({} rows): {median:.0} / {max:.0} ms (target < 3000 ms){}",
        df.height(),
        python.map_or_else(
            || "; Python polars not installed".to_owned(),
            |p| format!("; Python polars from the file: {p:.0} ms, we take {:.2}x", median / p)
        )
    );

    for (every_s, by) in [(10, Some(GroupBy::Source)), (1, None)] {
        let options = TimelineOptions {
            every_ns: every_s * 1_000_000_000,
            by,
            slo: Slo::DEFAULT,
        };
        let (median, max, df) = time(runs, || timeline(&trace, &options).unwrap_or_else(|e| panic!("{e}")));
        println!(
            "timeline every {every_s} s{} ({} rows): {median:.0} / {max:.0} ms, {:.2}x the reference",
            by.map_or(String::new(), |b| format!(" by {}", b.name())),
            df.height(),
            median / reference
        );
    }
    println!("peak resident set: {:.0} MiB", common::status_mib("VmHWM"));
}
