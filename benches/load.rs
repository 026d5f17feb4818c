//! Load benchmark: how fast a trace of N output tokens (default 1,000,000, top-5 candidates each) loads and is
//! indexed, from Parquet and from JSONL, beside a bare arrow-rs decode of the same Parquet file.
//!
//! `cargo bench --bench load [-- --tokens N --runs R]`. Each measurement runs in a fresh child process so its peak
//! resident set (VmHWM) is its own; the figure is the median of R runs. Files are generated once into
//! `target/bench-data/` (deterministic: the same N gives the same bytes).

use std::fmt::Write as _;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use tokenscope::format::{Progress, load, write};

/// A small deterministic generator (xorshift64*), so the benchmark needs no randomness crate.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const T0: i64 = 1_764_403_200_000_000_000;
const WORDS: [&str; 12] = [
    " the", " of", " model", " token", ",", ".", "\n", " is", " a", " cache", " batch", " and",
];

/// Writes a JSONL trace with about `tokens` output tokens: requests of 50..350 tokens arriving every ~40 ms,
/// one iteration per 20 ms step, every token with its iteration and top-5 candidates.
fn generate(path: &Path, tokens: u64) -> std::io::Result<()> {
    let mut w = BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    writeln!(
        w,
        r#"{{"kind":"meta","format":"tokenscope","version":1,"engine":"vllm","model":"bench-7b","eos_token_ids":[2]}}"#
    )?;
    let step_ns: i64 = 20_000_000;
    let mut produced = 0u64;
    let mut request = 0u64;
    let mut last_step = 0i64;
    let mut line = String::with_capacity(1024);
    while produced < tokens {
        let n = (50 + rng.below(300)).min(tokens - produced).max(1);
        let arrival = T0 + i64::try_from(request).unwrap_or(0) * 40_000_000;
        let first_step = (arrival - T0) / step_ns + 1 + i64::try_from(rng.below(3)).unwrap_or(0);
        let first = T0 + first_step * step_ns + 15_000_000;
        let last = first + (i64::try_from(n).unwrap_or(1) - 1) * step_ns;
        writeln!(
            w,
            r#"{{"kind":"request","request_id":"req-{request}","arrival_ns":{arrival},"scheduled_ns":{},"first_token_ns":{first},"finished_ns":{last},"input_tokens":{},"output_tokens":{n},"finish_reason":"stop","model":"bench-7b","app_id":"app-{}"}}"#,
            T0 + first_step * step_ns,
            100 + rng.below(4000),
            request % 7
        )?;
        for i in 0..n {
            let step = first_step + i64::try_from(i).unwrap_or(0);
            last_step = last_step.max(step);
            let chosen = rng.below(12) as usize;
            line.clear();
            let _ = write!(
                line,
                r#"{{"kind":"token","request_id":"req-{request}","index":{i},"emitted_ns":{},"iteration":{step},"token_id":{},"text":{:?},"logprob":-0.{:03},"candidates":["#,
                T0 + step * step_ns + 15_000_000,
                100 + chosen,
                WORDS[chosen],
                rng.below(999)
            );
            for k in 0..5usize {
                let id = (chosen + k) % 12;
                let _ = write!(
                    line,
                    r#"{}{{"token_id":{},"text":{:?},"logprob":-{}.{:03}}}"#,
                    if k == 0 { "" } else { "," },
                    100 + id,
                    WORDS[id],
                    k,
                    rng.below(999)
                );
            }
            line.push_str("]}");
            writeln!(w, "{line}")?;
        }
        produced += n;
        request += 1;
    }
    for step in 0..=last_step {
        let start = T0 + step * step_ns;
        writeln!(
            w,
            r#"{{"kind":"iteration","iteration":{step},"start_ns":{start},"end_ns":{},"num_reqs":{},"num_prefill_tokens":{},"num_decode_tokens":{},"kv_usage":0.{:02}}}"#,
            start + 14_000_000,
            1 + rng.below(64),
            rng.below(2048),
            rng.below(64),
            rng.below(99)
        )?;
    }
    w.flush()
}

/// A `/proc/self/status` memory figure (`VmHWM`: peak resident set; `VmRSS`: resident now), in MiB.
fn status_mib(key: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

/// One measurement in this (child) process; prints `seconds peak_rss_mib rss_after_mib held_mib`.
fn child(mode: &str, file: &Path) {
    let start = Instant::now();
    // What was loaded stays alive until the resident set is read.
    let keep: Box<dyn std::any::Any>;
    let held_bytes = match mode {
        "load" => match load(file, &Progress::default()) {
            Ok(l) => {
                assert_eq!(l.report.rejected_count(), 0, "the generated trace is valid");
                let bytes = l.trace.column_bytes();
                keep = Box::new(l);
                bytes
            }
            Err(e) => panic!("load {}: {e}", file.display()),
        },
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
                .map(arrow::array::RecordBatch::get_array_memory_size)
                .sum();
            keep = Box::new(batches);
            bytes
        }
        other => panic!("unknown mode {other}"),
    };
    let secs = start.elapsed().as_secs_f64();
    #[allow(clippy::cast_precision_loss)]
    let held_mib = held_bytes as f64 / (1024.0 * 1024.0);
    println!("{secs} {} {} {held_mib}", status_mib("VmHWM:"), status_mib("VmRSS:"));
    drop(keep);
}

fn measure(mode: &str, file: &Path, runs: usize) -> [f64; 4] {
    let mut results: Vec<[f64; 4]> = (0..runs)
        .map(|_| {
            let exe = std::env::current_exe().unwrap_or_else(|e| panic!("{e}"));
            let out = Command::new(exe)
                .args(["--child", mode])
                .arg(file)
                .output()
                .unwrap_or_else(|e| panic!("child: {e}"));
            let text = String::from_utf8_lossy(&out.stdout);
            let v: Vec<f64> = text.split_whitespace().filter_map(|x| x.parse().ok()).collect();
            assert_eq!(
                v.len(),
                4,
                "child output: {text} {}",
                String::from_utf8_lossy(&out.stderr)
            );
            [v[0], v[1], v[2], v[3]]
        })
        .collect();
    results.sort_by(|a, b| a[0].total_cmp(&b[0]));
    results[runs / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        child(&args[i + 1], Path::new(&args[i + 2]));
        return;
    }
    let flag = |name: &str, default: u64| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let tokens = flag("--tokens", 1_000_000);
    let runs = usize::try_from(flag("--runs", 3)).unwrap_or(3).max(1);
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-data");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let jsonl = dir.join(format!("load-{tokens}.jsonl"));
    let parquet = dir.join(format!("load-{tokens}.parquet"));
    if !jsonl.exists() || !parquet.exists() {
        eprintln!("generating {} ...", jsonl.display());
        generate(&jsonl, tokens).unwrap_or_else(|e| panic!("{e}"));
        let loaded = load(&jsonl, &Progress::default()).unwrap_or_else(|e| panic!("{e}"));
        write(&loaded.trace, &parquet).unwrap_or_else(|e| panic!("{e}"));
    }
    let size_mib = |p: &Path| {
        #[allow(clippy::cast_precision_loss)]
        let mib = std::fs::metadata(p).map(|m| m.len()).unwrap_or(0) as f64 / (1024.0 * 1024.0);
        mib
    };
    println!("load benchmark: {tokens} output tokens, top-5 candidates, median of {runs} runs (fresh process each)");
    println!(
        "{:<34} {:>9} {:>10} {:>12} {:>13} {:>14} {:>10}",
        "what", "file MiB", "seconds", "M tokens/s", "peak RSS MiB", "RSS after MiB", "held MiB"
    );
    #[allow(clippy::cast_precision_loss)]
    let m_tokens = tokens as f64 / 1e6;
    for (name, mode, file) in [
        ("arrow-rs decode, all columns", "arrow", &parquet),
        ("tokenscope load+index, Parquet", "load", &parquet),
        ("tokenscope load+index, JSONL", "load", &jsonl),
    ] {
        let [secs, peak, after, held] = measure(mode, file, runs);
        println!(
            "{name:<34} {:>9.1} {secs:>10.3} {:>12.2} {peak:>13.0} {after:>14.0} {held:>10.0}",
            size_mib(file),
            m_tokens / secs
        );
    }
}
