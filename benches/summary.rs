//! The summary of one big Parquet file, streamed, against the polars lazy query a user would write for the same
//! figures (below: [`polars_query`]), and against loading the trace (`summary` without `--out-of-core`); the timeline
//! streamed too. Each measurement runs in a fresh process, so its peak resident set (VmHWM) is its own; figures are
//! the median of R runs.
//!
//! `cargo bench --bench summary [-- --requests N --runs R] [--xlarge]`. The workload is `large`
//! (`target/bench-data/large-N.parquet`, see `benches/common.rs`); with `--xlarge`,
//! `target/bench-data/xlarge.parquet` (`tokenscope synth --scenario xlarge -o target/bench-data/xlarge.parquet`,
//! 6.1 GB), which is not loaded (it does not fit here). Issue 33's targets: the streamed summary at most 0.5x the
//! polars query's time, and on `xlarge` a peak resident set of at most 1 GB, the timeline's too.
//!
//! With `--findings`, the findings too: streamed (`load::stream::findings`, the trace's requests and steps loaded, its
//! tokens streamed in one pass) against loading the trace alone and against the same kinds found on the loaded trace
//! (on `xlarge` as well: about 8 GB and a minute and a half a run).

use std::path::Path;
use std::time::Instant;

use polars::prelude::*;
use tokenscope::analysis::summary::{Slo, summarize_all};
use tokenscope::query::TimelineOptions;
use tokenscope::query::dataset::timeline_files;

mod common;

/// The polars lazy query of the summary's figures, as a user writes it: request latencies from the request rows'
/// fields, inter-token latencies as the difference of consecutive tokens' times within a request, totals; on
/// polars' streaming engine. Returns the number of figures computed.
fn polars_query(path: &Path) -> PolarsResult<usize> {
    let scan = LazyFrame::scan_parquet(
        PlRefPath::from(path.to_string_lossy().as_ref()),
        ScanArgsParquet::default(),
    )?;
    let ms = |e: Expr| e.cast(DataType::Float64) / lit(1e6);
    let requests = scan.clone().filter(col("kind").eq(lit("request"))).select([
        ms(col("first_token_ns") - col("arrival_ns")).alias("ttft"),
        ms(col("finished_ns") - col("arrival_ns")).alias("e2e"),
        ms(col("scheduled_ns") - col("arrival_ns")).alias("queue"),
        when(col("output_tokens").gt_eq(lit(2)))
            .then(
                ms(col("finished_ns") - col("first_token_ns"))
                    / (col("output_tokens") - lit(1)).cast(DataType::Float64),
            )
            .otherwise(lit(NULL))
            .alias("tpot"),
        col("input_tokens"),
        col("cached_tokens"),
        col("output_tokens"),
    ]);
    let figures = |name: &str| {
        let c = || col(name);
        vec![
            c().count().alias(format!("{name}_count")),
            c().mean().alias(format!("{name}_mean")),
            c().quantile(lit(0.5), QuantileMethod::Equiprobable)
                .alias(format!("{name}_p50")),
            c().quantile(lit(0.9), QuantileMethod::Equiprobable)
                .alias(format!("{name}_p90")),
            c().quantile(lit(0.95), QuantileMethod::Equiprobable)
                .alias(format!("{name}_p95")),
            c().quantile(lit(0.99), QuantileMethod::Equiprobable)
                .alias(format!("{name}_p99")),
            c().max().alias(format!("{name}_max")),
        ]
    };
    let mut per_request: Vec<Expr> = ["ttft", "e2e", "queue", "tpot"]
        .iter()
        .flat_map(|n| figures(n))
        .collect();
    per_request.extend([
        col("input_tokens").sum(),
        col("cached_tokens").sum(),
        col("output_tokens").sum(),
        len().alias("requests"),
    ]);
    let a = requests
        .select(per_request)
        .collect_with_engine(Engine::Streaming)?
        .unwrap_single();
    let itl = scan
        .filter(col("kind").eq(lit("token")))
        .select([ms(col("emitted_ns") - col("emitted_ns").shift(lit(1)).over([col("request_id")])?).alias("itl")])
        .select(figures("itl"))
        .collect_with_engine(Engine::Streaming)?
        .unwrap_single();
    Ok(a.width() + itl.width())
}

/// One measurement in this (child) process; prints `seconds peak_rss_mib`.
fn child(mode: &str, file: &Path) {
    let files = [file.to_path_buf()];
    let t = Instant::now();
    let figures = match mode {
        "streamed" => match tokenscope::load::stream::summarize(&files, None, Slo::DEFAULT) {
            Ok(s) => s.summary.requests,
            Err(e) => panic!("{e}"),
        },
        "loaded" => summarize_all(&common::load_lazily(file), Slo::DEFAULT, None).requests,
        "polars" => polars_query(file).unwrap_or_else(|e| panic!("{e}")) as u64,
        "timeline" => {
            let options = TimelineOptions {
                every_ns: 1,
                by: None,
                slo: Slo::DEFAULT,
            };
            match timeline_files(&files, None, &options, Some(60)) {
                Ok((df, _)) => df.height() as u64,
                Err(e) => panic!("{e}"),
            }
        }
        "findings-streamed" => {
            let th = tokenscope::analysis::findings::Thresholds::default();
            let all = tokenscope::analysis::findings::Kind::ALL;
            match tokenscope::load::stream::findings::find(&files, None, &Slo::DEFAULT, &th, &all) {
                Ok(f) => f.findings.len() as u64,
                Err(e) => panic!("{e}"),
            }
        }
        "load" => common::load_lazily(file).request_count() as u64,
        "findings-loaded" => {
            use tokenscope::analysis::findings::{STREAMABLE, Thresholds, find_kinds};
            let trace = common::load_lazily(file);
            find_kinds(&trace, &Slo::DEFAULT, &Thresholds::default(), &STREAMABLE).len() as u64
        }
        other => panic!("unknown mode {other}"),
    };
    let secs = t.elapsed().as_secs_f64();
    assert!(figures > 0, "{mode}: nothing computed");
    println!("{secs} {}", common::status_mib("VmHWM:"));
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        child(&args[i + 1], Path::new(&args[i + 2]));
        return;
    }
    let runs = common::flag("--runs", 3).max(1);
    let xlarge = args.iter().any(|a| a == "--xlarge");
    let file = if xlarge {
        let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-data/xlarge.parquet");
        if !file.exists() {
            eprintln!(
                "{} is missing: make it with `tokenscope synth --scenario xlarge -o {}` (4 minutes, 6 GB)",
                file.display(),
                file.display()
            );
            return;
        }
        file
    } else {
        common::large_files(common::flag("--requests", 50_000)).0
    };
    println!(
        "summary benchmark: {} ({:.0} MiB), median of {runs} runs (fresh process each)",
        file.display(),
        common::size_mib(&file)
    );
    println!("{:<44} {:>9} {:>13}", "what", "seconds", "peak RSS MiB");
    let run = |name: &str, mode: &str| {
        let [secs, peak]: [f64; 2] = common::measure_in_child(mode, &file, runs);
        println!("{name:<44} {secs:>9.2} {peak:>13.0}");
        [secs, peak]
    };
    let polars = run("polars lazy query (streaming engine)", "polars");
    let streamed = run("tokenscope summary --out-of-core (streamed)", "streamed");
    let timeline = run("tokenscope timeline --out-of-core (streamed)", "timeline");
    let loaded = (!xlarge).then(|| run("tokenscope summary (load, then figures)", "loaded"));
    println!();
    println!(
        "streamed summary / polars query: {:.2} (target <= 0.5)",
        streamed[0] / polars[0]
    );
    if let Some(l) = loaded {
        println!("streamed summary / loaded summary: {:.2}", streamed[0] / l[0]);
    }
    println!(
        "peak RSS: summary {:.0} MiB, timeline {:.0} MiB (target on xlarge <= 1 GB)",
        streamed[1], timeline[1]
    );
    if args.iter().any(|a| a == "--findings") {
        println!();
        let load = run("load alone (candidates left on disk)", "load");
        let loaded = run("findings, streamable kinds (load, then find)", "findings-loaded");
        let streamed = run("findings (streamed, one pass)", "findings-streamed");
        println!(
            "streamed findings / loaded: {:.2} of the time, {:.2} of the peak RSS",
            streamed[0] / loaded[0],
            streamed[1] / loaded[1]
        );
        println!(
            "streamed findings / load alone: {:.2} of the time (target on xlarge <= 0.5)",
            streamed[0] / load[0]
        );
    }
}
