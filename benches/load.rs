//! Load benchmark: how fast a trace loads and is indexed, from Parquet and from JSONL, beside a bare arrow-rs
//! decode of the same Parquet columns and Python polars' `read_parquet` / `read_ndjson` of the same files.
//!
//! `cargo bench --bench load [-- --requests N --runs R] [--parquet-only | --xlarge]`. The workload is `tokenscope synth --scenario large`
//! (50,000 requests, ~10 M output tokens, top-5 candidates, 102,427 iterations); `--requests 5000` gives ~1 M
//! tokens. Files are generated once into `target/bench-data/` (deterministic: same N, same bytes). Each
//! measurement runs in a fresh process, so its peak resident set (VmHWM) is its own; figures are the median of R
//! runs. Polars is measured when `python3 -c "import polars"` works (`pip install polars`).

use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use tokenscope::ingest::Progress;
use tokenscope::load::{LoadOptions, load, load_with};
use tokenscope::view::TraceView;
use tokenscope::view::layout::{TrackFilter, TrackOrder};

mod common;

/// One measurement in this (child) process; prints `seconds peak_rss_mib rss_after_mib held_mib`.
fn child(mode: &str, file: &Path) {
    let start = Instant::now();
    // What was loaded stays alive until the resident set is read.
    let keep: Box<dyn std::any::Any>;
    let held_bytes = match mode {
        "load" | "lazy" => match load_with(
            file,
            &Progress::default(),
            LoadOptions {
                lazy_candidates: mode == "lazy",
                ..LoadOptions::default()
            },
        ) {
            Ok(l) => {
                assert_eq!(l.report.rejected_count(), 0, "the generated trace is valid");
                let bytes = l.trace.column_bytes();
                keep = Box::new(l);
                bytes
            }
            Err(e) => panic!("load {}: {e}", file.display()),
        },
        // Open to first frame as the app does it: the time to the first preview of the requests and steps read so
        // far, and the view built from it (a frame costs about a millisecond on top). The load is left to end.
        "first-frame" => {
            let first: Arc<Mutex<Option<f64>>> = Arc::default();
            let seen = Arc::clone(&first);
            let progress = Progress::with_previews(std::time::Duration::ZERO, move |trace| {
                let mut seen = seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                if seen.is_none() {
                    let view = TraceView::new(trace, TrackOrder::Arrival, &TrackFilter::default());
                    assert!(view.trace.request_count() > 0);
                    *seen = Some(start.elapsed().as_secs_f64());
                }
            });
            let options = LoadOptions {
                lazy_candidates: true,
                ..LoadOptions::default()
            };
            keep = Box::new(load_with(file, &progress, options).map(|l| l.trace.request_count()));
            let at = first
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .unwrap_or(f64::NAN);
            println!(
                "{at} {} {} 0",
                common::status_mib("VmHWM:"),
                common::status_mib("VmRSS:")
            );
            drop(keep);
            return;
        }
        // `tokenscope summary FILE` as the CLI runs it (candidates left on disk), its text thrown away.
        "summary" => {
            let slo = tokenscope::analysis::summary::Slo::default();
            let out = tokenscope::cli::summary::run(&[file], false, slo, None, None);
            keep = Box::new(out);
            0
        }
        "arrow" => {
            let f = std::fs::File::open(file).unwrap_or_else(|e| panic!("{e}"));
            let reader = ParquetRecordBatchReaderBuilder::try_new(f)
                .and_then(|b| b.with_batch_size(64 * 1024).build())
                .unwrap_or_else(|e| panic!("{e}"));
            let mut batches = Vec::new();
            for b in reader {
                batches.push(b.unwrap_or_else(|e| panic!("{e}")));
            }
            let bytes = batches
                .iter()
                .map(arrow_array::RecordBatch::get_array_memory_size)
                .sum();
            keep = Box::new(batches);
            bytes
        }
        other => panic!("unknown mode {other}"),
    };
    let secs = start.elapsed().as_secs_f64();
    let held_mib = held_bytes as f64 / (1024.0 * 1024.0);
    println!(
        "{secs} {} {} {held_mib}",
        common::status_mib("VmHWM:"),
        common::status_mib("VmRSS:")
    );
    drop(keep);
}

fn measure(mode: &str, file: &Path, runs: usize) -> [f64; 4] {
    common::measure_in_child(mode, file, runs)
}

/// What Python polars takes to read the file: `seconds peak_rss_mib rss_after_mib held_mib`, or `None` without
/// polars.
fn polars(file: &Path, runs: usize) -> Option<[f64; 4]> {
    let script = r#"
import resource, sys, time
import polars as pl
path = sys.argv[1]
t = time.perf_counter()
df = pl.read_parquet(path) if path.endswith(".parquet") else pl.read_ndjson(path, infer_schema_length=None)
secs = time.perf_counter() - t
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
rss = int(open("/proc/self/statm").read().split()[1]) * resource.getpagesize() / 2**20
print(secs, peak, rss, df.estimated_size() / 2**20)
"#;
    let mut results = Vec::new();
    for _ in 0..runs {
        let out = Command::new("python3").arg("-c").arg(script).arg(file).output().ok()?;
        let text = String::from_utf8_lossy(&out.stdout);
        let v: Vec<f64> = text.split_whitespace().filter_map(|x| x.parse().ok()).collect();
        if v.len() != 4 {
            eprintln!(
                "polars on {}: {}",
                file.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
            return None;
        }
        results.push([v[0], v[1], v[2], v[3]]);
    }
    results.sort_by(|a, b| a[0].total_cmp(&b[0]));
    Some(results[runs / 2])
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        child(&args[i + 1], Path::new(&args[i + 2]));
        return;
    }
    let requests = common::flag("--requests", 50_000);
    let runs = common::flag("--runs", 3).max(1);
    if args.iter().any(|a| a == "--xlarge") {
        xlarge(runs);
        return;
    }
    let (parquet, jsonl) = common::large_files(requests);
    let tokens = load(&parquet, &Progress::default()).map_or(0, |l| l.trace.token_count());
    let size_mib = common::size_mib;
    println!(
        "load benchmark: synth large, {requests} requests, {tokens} output tokens, median of {runs} runs (fresh process each)"
    );
    println!(
        "{:<36} {:>9} {:>9} {:>11} {:>13} {:>14} {:>10}",
        "what", "file MiB", "seconds", "M tokens/s", "peak RSS MiB", "RSS after MiB", "held MiB"
    );
    let m_tokens = tokens as f64 / 1e6;
    let print = |name: &str, file: &Path, m: [f64; 4]| {
        let [secs, peak, after, held] = m;
        println!(
            "{name:<36} {:>9.1} {secs:>9.3} {:>11.2} {peak:>13.0} {after:>14.0} {held:>10.0}",
            size_mib(file),
            m_tokens / secs
        );
        secs
    };
    let arrow = print(
        "arrow-rs decode, all columns",
        &parquet,
        measure("arrow", &parquet, runs),
    );
    let ours_pq = print(
        "tokenscope load+index, Parquet",
        &parquet,
        measure("load", &parquet, runs),
    );
    print(
        "  same, candidates left on disk (app)",
        &parquet,
        measure("lazy", &parquet, runs),
    );
    let summary = print("tokenscope summary (CLI)", &parquet, measure("summary", &parquet, runs));
    let polars_pq = polars(&parquet, runs).map(|m| print("polars read_parquet (Python)", &parquet, m));
    // `--parquet-only`: the Parquet rows alone (the JSONL ones take minutes, polars' most of them).
    let jsonl_too = !args.iter().any(|a| a == "--parquet-only");
    let ours_jsonl = jsonl_too.then(|| print("tokenscope load+index, JSONL", &jsonl, measure("load", &jsonl, runs)));
    let polars_jsonl = jsonl_too
        .then(|| polars(&jsonl, runs))
        .flatten()
        .map(|m| print("polars read_ndjson (Python)", &jsonl, m));
    println!();
    println!(
        "tokenscope Parquet throughput / arrow-rs decode: {:.2}",
        arrow / ours_pq
    );
    if let Some(p) = polars_pq {
        println!("tokenscope Parquet time / polars read_parquet:   {:.2}", ours_pq / p);
        println!("tokenscope summary time / polars read_parquet:   {:.2}", summary / p);
    }
    if let (Some(ours), Some(p)) = (ours_jsonl, polars_jsonl) {
        println!("tokenscope JSONL time / polars read_ndjson:      {:.2}", ours / p);
    }
}

/// `--xlarge`: the app's load of `xlarge` (500,000 requests, ~97 M tokens, candidates left on disk) against polars
/// reading `large`, the same workload a tenth the size, times ten: polars' `read_parquet` of xlarge itself would
/// need about 70 GB here (7 GB for large), and its time grows with the rows.
fn xlarge(runs: usize) {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench-data/xlarge.parquet");
    if !file.exists() {
        eprintln!(
            "{} is missing: make it with `tokenscope synth --scenario xlarge -o {}` (4 minutes, 6 GB)",
            file.display(),
            file.display()
        );
        return;
    }
    let (large, _) = common::large_files(50_000);
    println!("load benchmark, xlarge: median of {runs} runs (fresh process each)");
    println!(
        "{:<44} {:>9} {:>9} {:>13} {:>14} {:>10}",
        "what", "file MiB", "seconds", "peak RSS MiB", "RSS after MiB", "held MiB"
    );
    let print = |name: &str, file: &Path, m: [f64; 4]| {
        let [secs, peak, after, held] = m;
        println!(
            "{name:<44} {:>9.1} {secs:>9.3} {peak:>13.0} {after:>14.0} {held:>10.0}",
            common::size_mib(file)
        );
        m
    };
    let first = print(
        "tokenscope open to first frame (preview)",
        &file,
        measure("first-frame", &file, runs),
    );
    let app = print(
        "tokenscope load+index, candidates on disk",
        &file,
        measure("lazy", &file, runs),
    );
    let polars_large = polars(&large, runs).map(|m| print("polars read_parquet of large (Python)", &large, m));
    println!();
    println!("resident after load / columns held: {:.2}", app[2] / app[3]);
    if let Some(p) = polars_large {
        println!(
            "app load of xlarge / (10 x polars read_parquet of large): {:.2}",
            app[0] / (10.0 * p[0])
        );
        println!(
            "open to first frame of xlarge / (10 x polars read_parquet of large): {:.3}",
            first[0] / (10.0 * p[0])
        );
    }
}
