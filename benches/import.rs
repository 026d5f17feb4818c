//! Importer benchmark: how fast each importer reads what an engine or tool wrote, beside the bare cost of parsing the
//! same bytes as JSON (`serde_json::Value`, line by line), measured in the same run.
//!
//! `cargo bench --bench import [-- --requests N --runs R]`. Inputs are generated once into `target/bench-data/`:
//! - SGLang OTLP: the `large` scenario's engine with N requests (default 5,000, about 1 M spans), written by
//!   `synth --as sglang-otlp`;
//! - AIPerf: the real export's 89 completed records repeated to N requests, with fresh ids;
//! - vLLM iteration log and TensorRT-LLM IterationStats: one step per 5 tokens of the same workload.
//!
//! Each measurement runs in a fresh process (its own peak resident set); figures are the median of R runs.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use tokenscope::ingest::Progress;
use tokenscope::load::load;

mod common;

/// One measurement in this (child) process; prints `seconds peak_rss_mib records`.
fn child(mode: &str, file: &Path) {
    let start = Instant::now();
    let records = match mode {
        "import" => {
            let l = load(file, &Progress::default()).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(l.report.rejected_count(), 0, "{:?}", l.report.rejected.first());
            l.report.records
        }
        "json" => {
            // The reference: every line (or the whole document) parsed as a JSON value and dropped.
            let text = std::fs::read(file).unwrap_or_else(|e| panic!("{e}"));
            let mut n = 0u64;
            for line in text.split(|&c| c == b'\n').filter(|l| !l.is_empty()) {
                if let Ok(v) = serde_json::from_slice::<serde_json::Value>(line) {
                    n += u64::from(!v.is_null());
                }
            }
            n
        }
        other => panic!("unknown mode {other}"),
    };
    println!(
        "{} {} {records}",
        start.elapsed().as_secs_f64(),
        common::status_mib("VmHWM:")
    );
}

fn measure(mode: &str, file: &Path, runs: usize) -> [f64; 3] {
    common::measure_in_child(mode, file, runs)
}

fn bench_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-data");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    dir
}

/// The inputs, generated when missing: (name, path, unit, count of units in the file).
fn inputs(requests: usize) -> Vec<(&'static str, PathBuf, &'static str, u64)> {
    let dir = bench_dir();
    let (parquet, _) = common::large_files(requests);
    let trace = load(&parquet, &Progress::default())
        .unwrap_or_else(|e| panic!("{e}"))
        .trace;
    let mut out = Vec::new();

    let sglang = dir.join(format!("sglang-{requests}.otlp.jsonl"));
    if !sglang.exists() {
        let mut w = std::io::BufWriter::new(std::fs::File::create(&sglang).unwrap_or_else(|e| panic!("{e}")));
        tokenscope::synth::sglang_otlp::write(&trace, &mut w).unwrap_or_else(|e| panic!("{e}"));
    }
    let spans = std::fs::read_to_string(&sglang).map_or(0, |t| t.matches("\"spanId\"").count() as u64);
    out.push(("SGLang OTLP JSON", sglang, "spans", spans));

    let aiperf = dir.join(format!("aiperf-{requests}.jsonl"));
    if !aiperf.exists() {
        let real = std::fs::read_to_string("sample_traces/engines/aiperf/profile_export.jsonl")
            .unwrap_or_else(|e| panic!("{e}"));
        let completed: Vec<&str> = real.lines().filter(|l| l.contains("\"error\":null")).collect();
        let mut w = std::io::BufWriter::new(std::fs::File::create(&aiperf).unwrap_or_else(|e| panic!("{e}")));
        for i in 0..requests {
            let line = completed[i % completed.len()];
            let id_at = line.find("\"x_request_id\":\"").unwrap_or(0) + 16;
            writeln!(w, "{}{i:08}-{}", &line[..id_at], &line[id_at..]).unwrap_or_else(|e| panic!("{e}"));
        }
    }
    out.push(("AIPerf records", aiperf, "requests", requests as u64));

    // One engine step per iteration of the workload, as vLLM's log and TensorRT-LLM's statistics write them.
    let its = &trace.iterations;
    let vllm = dir.join(format!("vllm-{requests}.log"));
    if !vllm.exists() {
        let mut w = std::io::BufWriter::new(std::fs::File::create(&vllm).unwrap_or_else(|e| panic!("{e}")));
        for i in 0..its.len() {
            let t = chrono::DateTime::from_timestamp_nanos(its.start_ns[i]);
            writeln!(
                w,
                "(APIServer pid=1) INFO {} [loggers.py:199] Engine 000: Iteration({i}): {} context requests, {} context tokens, {} generation requests, {} generation tokens, iteration elapsed time: {:.2} ms, GPU KV cache usage: {:.1}%",
                t.format("%m-%d %H:%M:%S"),
                its.num_prefill_reqs.at(i).unwrap_or(0),
                its.num_prefill_tokens.at(i).unwrap_or(0),
                its.num_decode_reqs.at(i).unwrap_or(0),
                its.num_decode_tokens.at(i).unwrap_or(0),
                (its.end_ns[i] - its.start_ns[i]) as f64 / 1e6,
                its.kv_usage.at(i).unwrap_or(0.0) * 100.0
            )
            .unwrap_or_else(|e| panic!("{e}"));
        }
    }
    out.push(("vLLM iteration log", vllm, "lines", its.len() as u64));

    let trt = dir.join(format!("trtllm-{requests}.json"));
    if !trt.exists() {
        let mut w = std::io::BufWriter::new(std::fs::File::create(&trt).unwrap_or_else(|e| panic!("{e}")));
        for i in 0..its.len() {
            let t = chrono::DateTime::from_timestamp_nanos(its.start_ns[i]);
            let v = serde_json::json!({
                "iter": i,
                "timestamp": t.format("%m-%d-%Y %H:%M:%S%.6f").to_string(),
                "iterLatencyMS": (its.end_ns[i] - its.start_ns[i]) as f64 / 1e6,
                "numQueuedRequests": its.num_waiting.at(i).unwrap_or(0),
                "inflightBatchingStats": {
                    "numScheduledRequests": its.num_reqs.at(i).unwrap_or(0),
                    "numContextRequests": its.num_prefill_reqs.at(i).unwrap_or(0),
                    "numCtxTokens": its.num_prefill_tokens.at(i).unwrap_or(0),
                    "numGenRequests": its.num_decode_reqs.at(i).unwrap_or(0),
                },
                "kvCacheStats": {"usedNumBlocks": 10, "maxNumBlocks": 1000},
            });
            serde_json::to_writer(&mut w, &v).unwrap_or_else(|e| panic!("{e}"));
            w.write_all(b"\n").unwrap_or_else(|e| panic!("{e}"));
        }
    }
    out.push(("TensorRT-LLM IterationStats", trt, "steps", its.len() as u64));
    out
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        child(&args[i + 1], Path::new(&args[i + 2]));
        return;
    }
    let requests = common::flag("--requests", 5000);
    let runs = common::flag("--runs", 3);
    println!("importers on inputs from the large workload with {requests} requests; median of {runs} runs");
    println!(
        "{:<28} {:>9} {:>12} {:>9} {:>10} {:>12} {:>10} {:>10}",
        "input", "MiB", "units", "s", "MiB/s", "units/s", "peak MiB", "x JSON"
    );
    for (name, path, unit, count) in inputs(requests) {
        let mib = common::size_mib(&path);
        let [secs, peak, _] = measure("import", &path, runs);
        let [json_secs, _, _] = measure("json", &path, runs);
        println!(
            "{name:<28} {mib:>9.1} {:>12} {secs:>9.2} {:>10.1} {:>12.0} {peak:>10.0} {:>10.2}",
            format!("{count} {unit}"),
            mib / secs,
            count as f64 / secs,
            secs / json_secs
        );
    }
}
