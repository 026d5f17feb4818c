//! Fit benchmark: `tokenscope fit` on the `large` workload (50,000 requests, ~10 M output tokens, ~100,000 steps on
//! four instances), beside the summary of the same trace in memory as the reference, measured in the same run. The
//! target (issue "A simulator you can trust"): a fit of 10 M tokens in under 10 s.
//!
//! `cargo bench --bench fit [-- --requests N --runs R]`. The trace is generated once into `target/bench-data/` and
//! loaded once; the fit (reading each step's work from its linked tokens and chunks, then 63 weighted least squares:
//! one pass and one regime, and every knot from 2 to 32 tokens with and without split passes) and the summary are
//! each timed R times, median reported.

use tokenscope::analysis::summary::{Slo, summarize_all};
use tokenscope::ingest::Progress;
use tokenscope::load::load;
use tokenscope::synth::fit::fit;

mod common;

fn main() {
    let requests = common::flag("--requests", 50_000);
    let runs = common::flag("--runs", 3).max(1);
    let (parquet, _) = common::large_files(requests);
    let trace = load(&parquet, &Progress::default())
        .unwrap_or_else(|e| panic!("{e}"))
        .trace;
    let traces = [("large.parquet".to_owned(), &trace)];
    let (fit_ms, fit_max, profile) = common::time(runs, || fit(&traces, "large").unwrap_or_else(|e| panic!("{e}")));
    let (summary_ms, summary_max, _) = common::time(runs, || summarize_all(&trace, Slo::default(), None));
    println!(
        "fit benchmark: synth large, {requests} requests, {} output tokens, {} steps fitted, median of {runs} runs",
        trace.token_count(),
        profile.steps
    );
    println!(
        "{:<28} {:>10} {:>10} {:>12}",
        "what", "median ms", "max ms", "x summary"
    );
    println!(
        "{:<28} {fit_ms:>10.0} {fit_max:>10.0} {:>12.2}",
        "fit",
        fit_ms / summary_ms
    );
    println!(
        "{:<28} {summary_ms:>10.0} {summary_max:>10.0} {:>12.2}",
        "summary (reference)", 1.0
    );
}
