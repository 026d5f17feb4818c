//! The `tokenscope` command: parses arguments and dispatches; the work is in the library.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// mimalloc, not the system's allocator: it gives memory the passes of a streamed trace free back (`Cargo.toml`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
use tokenscope::cli::{self, Output};

/// A microscope for LLM inference engines: open a token- and stage-level trace and see why a request was slow
/// or wrong. With no subcommand, opens the app on TRACE (or on the demo trace, a simulated run).
#[derive(Parser)]
#[command(
    name = "tokenscope",
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("TOKENSCOPE_COMMIT"), ")"),
    args_conflicts_with_subcommands = true
)]
struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    #[command(flatten)]
    app: cli::app::AppArgs,
    #[command(flatten)]
    globals: cli::globals::GlobalArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Load a trace and report every rejected record and warning (exit 1 when it cannot be loaded).
    Validate(cli::validate::ValidateArgs),
    /// Print the trace's figures: tokens, span, throughput, TTFT/TPOT/E2E/queue/ITL percentiles, SLO goodput.
    Summary(cli::summary::SummaryArgs),
    /// Simulate a continuous-batching engine and write its trace: a named scenario, or a replay of a real
    /// request trace (Mooncake JSONL, Azure CSV).
    Synth(cli::synth::SynthArgs),
    /// Record a token-level trace, with candidates, from an OpenAI-compatible server: real prompts sent in a
    /// closed or open loop, every streamed token with its client-side arrival time, id, logprob and candidates.
    Record(cli::record::RecordArgs),
    /// Re-score a recording's answers on a server running the model: what the model itself gives each emitted
    /// token (the dice or not the model: off-distribution tokens, sampling accidents), written as its references.
    Rescore(cli::rescore::RescoreArgs),
    /// Follow what a server already writes (its log), sending it nothing: each incident said once as it happens
    /// (--json: one line each), and the minutes around it kept as a trace (--incidents DIR).
    Watch(cli::watch::WatchArgs),
    /// Export the slice of a trace around an incident: a trace file (.parquet, .jsonl) or Chrome Trace Event JSON
    /// (.json, for Perfetto UI). Times are ms after the trace's start (the waterfall ruler's 0).
    Export(cli::export::ExportArgs),
    /// Find the known incident patterns (decode interrupted by prefill, EOS mis-trigger, prefill monopoly,
    /// preemption bursts, KV saturation, SLO violations, repetition loops, truncation, token mismatches).
    Findings(cli::findings::FindingsArgs),
    /// Compare two traces, A (before) and B (after): the figures side by side with their change, attainment and
    /// goodput under the objectives, the findings gone and new, and the requests of both (paired by id, or by
    /// arrival and prompt length) whose TTFT and TPOT changed most.
    Diff(cli::diff::DiffArgs),
    /// Render the views to a PNG with no display (software rendering), for incident reports and CI. Times are ms
    /// after the trace's start (the waterfall ruler's 0).
    Render(cli::render::RenderArgs),
    /// Fit the simulator's step costs and scheduler on a real server's steps (a joined run, an engine trace),
    /// check them by replaying held-out runs, and write the profile `synth --profile FILE` takes.
    Fit(cli::fit::FitArgs),
    /// Measure the detectors on the diagnosis corpus: simulated runs on three hardware profiles, chunked prefill on
    /// and off, chat traffic and real arrivals below and above capacity, with and without each planted incident.
    Corpus(cli::corpus::CorpusArgs),
    /// Run SQL over the trace's tables: requests, tokens, steps, stages, transfers, candidates, samples
    /// (docs/QUERY.md), e.g.
    /// "SELECT app_id, QUANTILE_DISC(ttft_ms, 0.99) FROM requests WHERE input_tokens > 4000 GROUP BY app_id".
    #[cfg(feature = "query")]
    Query(cli::query::QueryArgs),
    /// Metrics over time: request rate, output tokens/s, goodput, TTFT and TPOT p50/p95/p99, queue length, KV use
    /// and preemptions per time bucket (docs/QUERY.md).
    #[cfg(feature = "query")]
    Timeline(cli::timeline::TimelineArgs),
    /// Write a trace in format v1 (Parquet or JSONL, by the output's extension), from a trace or from what an
    /// engine or tool wrote; several files of one run become one trace.
    Convert(cli::convert::ConvertArgs),
}

fn emit(out: &Output) -> ExitCode {
    print!("{}", out.stdout);
    eprint!("{}", out.stderr);
    ExitCode::from(u8::try_from(out.code).unwrap_or(1))
}

fn main() -> ExitCode {
    let command = <Args as clap::CommandFactory>::command();
    let subcommands: Vec<String> = command.get_subcommands().map(|c| c.get_name().to_owned()).collect();
    let names: Vec<&str> = subcommands.iter().map(String::as_str).collect();
    let argv = cli::globals::subcommand_first(std::env::args_os().collect(), &names, &cli::globals::reading_flags());
    // A first word that is neither a subcommand nor a path: said plainly before clap reads it as the app's TRACE.
    if let Some(first) = argv.get(1).and_then(|a| a.to_str())
        && !first.starts_with('-')
        && first != "help"
        && !names.contains(&first)
        && let Some(message) = cli::app::not_a_trace_path(std::path::Path::new(first), &names)
    {
        return emit(&Output::error(message, 2));
    }
    let args = Args::parse_from(argv);
    let reading = args
        .command
        .as_ref()
        .map_or_else(|| args.globals.clone(), Command::reading);
    let window = match reading.install() {
        Ok(w) => w,
        Err(out) => return emit(&out),
    };
    if let Some(kind) = reading.from
        && out_of_core(args.command.as_ref())
    {
        return emit(&Output::error(
            format!(
                "--out-of-core reads tokenscope's Parquet traces only, not {0}: convert first (tokenscope convert \
                 FILE --from {0} -o trace.parquet), or leave out --out-of-core",
                kind.name()
            ),
            2,
        ));
    }
    emit(&match args.command {
        Some(Command::Validate(a)) => a.run(),
        Some(Command::Summary(a)) => a.run(),
        Some(Command::Synth(a)) => a.run(),
        Some(Command::Export(a)) => a.run(),
        #[cfg(feature = "query")]
        Some(Command::Query(a)) => a.run(),
        #[cfg(feature = "query")]
        Some(Command::Timeline(a)) => a.run(),
        Some(Command::Diff(a)) => a.run(),
        Some(Command::Findings(a)) => a.run(),
        Some(Command::Render(a)) => a.run(),
        Some(Command::Fit(a)) => a.run(),
        Some(Command::Corpus(a)) => a.run(),
        Some(Command::Record(a)) => a.run(),
        Some(Command::Watch(a)) => a.run(),
        Some(Command::Rescore(a)) => a.run(),
        Some(Command::Convert(a)) => {
            let from = a.reading.from;
            a.run(from)
        }
        None => args.app.run(&args.globals, &window, &names),
    })
}

impl Command {
    /// The reading flags the command was given; none for a command that reads no trace, the server log's clock
    /// alone for `record`.
    fn reading(&self) -> cli::globals::GlobalArgs {
        match self {
            Self::Validate(a) => a.reading.clone(),
            Self::Summary(a) => a.reading.clone(),
            Self::Synth(a) => a.reading.clone(),
            Self::Export(a) => a.reading.clone(),
            #[cfg(feature = "query")]
            Self::Query(a) => a.reading.clone(),
            #[cfg(feature = "query")]
            Self::Timeline(a) => a.reading.clone(),
            Self::Diff(a) => a.reading.clone(),
            Self::Findings(a) => a.reading.clone(),
            Self::Render(a) => a.reading.clone(),
            Self::Fit(a) => a.reading.clone(),
            Self::Convert(a) => a.reading.clone(),
            Self::Rescore(a) => a.reading.clone(),
            Self::Record(a) => cli::globals::GlobalArgs {
                log: a.log.clone(),
                ..cli::globals::GlobalArgs::default()
            },
            Self::Corpus(_) | Self::Watch(_) => cli::globals::GlobalArgs::default(),
        }
    }
}

/// Whether the subcommand reads its Parquet files out of core (`--out-of-core`), with no importer.
fn out_of_core(command: Option<&Command>) -> bool {
    match command {
        Some(Command::Summary(a)) => a.out_of_core,
        #[cfg(feature = "query")]
        Some(Command::Query(a)) => a.out_of_core,
        #[cfg(feature = "query")]
        Some(Command::Timeline(a)) => a.out_of_core,
        _ => false,
    }
}
