//! Server-log benchmark: reading an engine's ordinary log (vLLM's and SGLang's stats lines among everything else a
//! server writes) beside the bare cost of the same file scanned line by line with a regular expression that captures
//! the stats lines' numbers, measured in the same run. The target (issue "Open the logs every deployment already
//! writes"): no more than 2x the scan, with memory bounded by the samples kept, not by the file.
//!
//! `cargo bench --bench server_log [-- --mib N --runs R]`. The log (default 1,024 MiB) is generated once into
//! `target/bench-data/`: a vLLM and an SGLang log interleaved as two servers' outputs land in one file, each stats
//! line followed by nine other lines (access lines, a warning, a progress bar), their counters varying.
//!
//! Each measurement runs in a fresh process (its own peak resident set); figures are the median of R runs.

use std::io::{BufRead, Write};
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
            l.trace.samples.len() as u64
        }
        "regex" => {
            // The reference: every line read, the stats lines matched and their numbers captured and parsed.
            let vllm = regex::Regex::new(
                r"(\d\d-\d\d \d\d:\d\d:\d\d) .*Avg prompt throughput: ([\d.]+) tokens/s, Avg generation throughput: ([\d.]+) tokens/s, Running: (\d+) reqs, Waiting: (\d+) reqs, GPU KV cache usage: ([\d.]+)%",
            )
            .unwrap_or_else(|e| panic!("{e}"));
            let sglang = regex::Regex::new(
                r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)[^\]]*\] Decode batch, #running-req: (\d+), #token: (\d+), token usage: ([\d.]+), cuda graph: \w+, gen throughput \(token/s\): ([\d.]+), #queue-req: (\d+)",
            )
            .unwrap_or_else(|e| panic!("{e}"));
            let file = std::fs::File::open(file).unwrap_or_else(|e| panic!("{e}"));
            let mut reader = std::io::BufReader::with_capacity(1 << 20, file);
            let mut line = String::new();
            let mut n = 0u64;
            let mut sum = 0.0f64;
            loop {
                line.clear();
                if reader.read_line(&mut line).unwrap_or_else(|e| panic!("{e}")) == 0 {
                    break;
                }
                if let Some(c) = vllm.captures(&line).or_else(|| sglang.captures(&line)) {
                    n += 1;
                    for k in 2..c.len() {
                        sum += c.get(k).and_then(|m| m.as_str().parse::<f64>().ok()).unwrap_or(0.0);
                    }
                }
            }
            assert!(sum.is_finite());
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

/// The log, generated when missing: `mib` MiB of two servers' lines.
fn log_file(mib: usize) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-data");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let path = dir.join(format!("server-{mib}mib.log"));
    if path.exists() {
        return path;
    }
    let mut w = std::io::BufWriter::new(std::fs::File::create(&path).unwrap_or_else(|e| panic!("{e}")));
    let limit = (mib as u64) << 20;
    let mut written = 0u64;
    let mut i = 0u64;
    while written < limit {
        // One reading a second on each server (the log's times are whole seconds), starting 2025-11-03 00:00:00.
        let (h, m, s) = ((i / 3600) % 24, (i / 60) % 60, i % 60);
        let day = 3 + i / 86_400;
        let (running, waiting) = (i % 64, (i * 7) % 23);
        let kv = (i % 1000) as f64 / 10.0;
        let mut lines = vec![
            format!(
                "(APIServer pid=2812) INFO 11-{day:02} {h:02}:{m:02}:{s:02} [loggers.py:335] Engine 000: Avg prompt throughput: {:.1} tokens/s, Avg generation throughput: {:.1} tokens/s, Running: {running} reqs, Waiting: {waiting} reqs, GPU KV cache usage: {kv:.1}%, Prefix cache hit rate: {:.1}%",
                (i % 5000) as f64 * 1.7,
                (i % 3000) as f64 * 0.9,
                (i % 100) as f64
            ),
            format!(
                "[2025-11-{day:02} {h:02}:{m:02}:{s:02} DP{} TP0] Decode batch, #running-req: {running}, #token: {}, token usage: {:.2}, cuda graph: True, gen throughput (token/s): {:.2}, #queue-req: {waiting}",
                i % 2,
                i % 40_000,
                kv / 100.0,
                (i % 3000) as f64 * 0.77
            ),
        ];
        for k in 0..8 {
            lines.push(match k {
                3 => format!(
                    "(APIServer pid=2812) WARNING 11-{day:02} {h:02}:{m:02}:{s:02} [protocol.py:93] The following fields were present in the request but ignored: {{'top_k_custom'}}"
                ),
                5 => "Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:02<00:02,  1.20s/it]".to_owned(),
                _ => format!(
                    "(APIServer pid=2812) INFO:     127.0.0.1:{} - \"POST /v1/chat/completions HTTP/1.1\" 200 OK",
                    41_000 + (i * 8 + k) % 20_000
                ),
            });
        }
        for l in &lines {
            writeln!(w, "{l}").unwrap_or_else(|e| panic!("{e}"));
            written += l.len() as u64 + 1;
        }
        i += 1;
    }
    path
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        child(&args[i + 1], Path::new(&args[i + 2]));
        return;
    }
    let mib = common::flag("--mib", 1024);
    let runs = common::flag("--runs", 3);
    let path = log_file(mib);
    let size = common::size_mib(&path);
    println!("a {size:.0} MiB server log (vLLM's and SGLang's stats lines among other lines); median of {runs} runs");
    let [secs, peak, samples] = common::measure_in_child("import", &path, runs);
    let [regex_secs, regex_peak, matched] = common::measure_in_child("regex", &path, runs);
    println!(
        "{:<34} {:>9} {:>10} {:>10} {:>12}",
        "", "s", "MiB/s", "peak MiB", "stats lines"
    );
    println!(
        "{:<34} {secs:>9.2} {:>10.0} {peak:>10.0} {samples:>12.0}",
        "tokenscope (samples)",
        size / secs
    );
    println!(
        "{:<34} {regex_secs:>9.2} {:>10.0} {regex_peak:>10.0} {matched:>12.0}",
        "line-by-line regex scan",
        size / regex_secs
    );
    println!("tokenscope / regex scan: {:.2}x the time", secs / regex_secs);
}
