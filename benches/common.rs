//! What the benchmarks share: the `large` workload, generated once into `target/bench-data/`.

// Each benchmark includes this module and uses part of it.
#![allow(dead_code)]
#![allow(
    clippy::missing_panics_doc,
    reason = "a benchmark's helpers panic on a broken setup: that is the report"
)]

use std::path::{Path, PathBuf};
use std::time::Instant;

use tokenscope::format::write;
use tokenscope::ingest::Progress;
use tokenscope::load::{LoadOptions, load_with};
use tokenscope::synth::arrivals::ReplayOptions;
use tokenscope::synth::{Scenario, SynthOptions, generate};
use tokenscope::trace::Trace;

/// The allocator the command and the app run with (`src/main.rs`): a benchmark measures what a user runs. glibc's
/// arenas held a streamed `findings` of `xlarge` at 1.16 GB where mimalloc gives back what each pass frees.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// The `large` scenario with `requests` requests (seed 1) as Parquet and JSONL, generated when missing.
pub fn large_files(requests: usize) -> (PathBuf, PathBuf) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench-data");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let parquet = dir.join(format!("large-{requests}.parquet"));
    let jsonl = dir.join(format!("large-{requests}.jsonl"));
    if !parquet.exists() || !jsonl.exists() {
        eprintln!("generating the large scenario with {requests} requests ...");
        let start = Instant::now();
        let options = SynthOptions {
            scenario: Scenario::Large,
            seed: 1,
            requests: Some(requests),
            arrivals: None,
            replay: ReplayOptions::default(),
            sources: 4,
            prefix_cache_tokens: None,
            profile: tokenscope::synth::ProfileChoice::default(),
            chunked_prefill: None,
            plant: None,
        };
        let trace = generate(&options).unwrap_or_else(|e| panic!("{e}"));
        eprintln!("simulated in {:.1} s", start.elapsed().as_secs_f64());
        for path in [&parquet, &jsonl] {
            write(&trace, path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
        eprintln!("written in {:.1} s", start.elapsed().as_secs_f64());
    }
    (parquet, jsonl)
}

/// Runs `f` `runs` times; returns the median and the slowest time in ms, and the last result.
pub fn time<T>(runs: usize, mut f: impl FnMut() -> T) -> (f64, f64, T) {
    let mut times = Vec::with_capacity(runs);
    let mut last = None;
    for _ in 0..runs {
        let t = Instant::now();
        last = Some(f());
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    let out = last.unwrap_or_else(|| panic!("at least one run"));
    (times[times.len() / 2], times[times.len() - 1], out)
}

/// A trace file loaded as the app loads it: candidates left on disk, read per request when one is selected.
pub fn load_lazily(path: &Path) -> Trace {
    let options = LoadOptions {
        lazy_candidates: true,
        ..LoadOptions::default()
    };
    match load_with(path, &Progress::default(), options) {
        Ok(l) => l.trace,
        Err(e) => panic!("{}: {e}", path.display()),
    }
}

/// A trace loaded whole, candidates included.
pub fn load_whole(path: &Path) -> Trace {
    match tokenscope::load::load(path, &Progress::default()) {
        Ok(l) => l.trace,
        Err(e) => panic!("{}: {e}", path.display()),
    }
}

/// A flag's value from the command line, or its default.
pub fn flag<T: std::str::FromStr>(name: &str, default: T) -> T {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A file's size in MiB.
pub fn size_mib(p: &Path) -> f64 {
    std::fs::metadata(p).map_or(0, |m| m.len()) as f64 / (1024.0 * 1024.0)
}

/// A `/proc/self/status` memory figure (`VmHWM`: peak resident set; `VmRSS`: resident now), in MiB.
pub fn status_mib(key: &str) -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

/// Runs this benchmark again as `--child MODE FILE` in `runs` fresh processes (each its own peak resident set) and
/// returns the figures the child printed, of the run with the median first figure (its time).
pub fn measure_in_child<const N: usize>(mode: &str, file: &Path, runs: usize) -> [f64; N] {
    let mut results: Vec<[f64; N]> = (0..runs)
        .map(|_| {
            let exe = std::env::current_exe().unwrap_or_else(|e| panic!("{e}"));
            let out = std::process::Command::new(exe)
                .args(["--child", mode])
                .arg(file)
                .output()
                .unwrap_or_else(|e| panic!("child: {e}"));
            let text = String::from_utf8_lossy(&out.stdout);
            let v: Vec<f64> = text.split_whitespace().filter_map(|x| x.parse().ok()).collect();
            v.try_into().unwrap_or_else(|v: Vec<f64>| {
                panic!(
                    "child printed {} figures, not {N}: {text} {}",
                    v.len(),
                    String::from_utf8_lossy(&out.stderr)
                )
            })
        })
        .collect();
    results.sort_by(|a, b| a[0].total_cmp(&b[0]));
    results[runs / 2]
}
