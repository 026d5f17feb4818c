//! The `tokenscope` command: parses arguments and dispatches; the work is in the library.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tokenscope::cli::{self, Output};
use tokenscope::format::window::{self, Window};
use tokenscope::import::log_clock::{self, LogClock};
use tokenscope::ui::{self, TraceSource};

/// A microscope for LLM inference engines: open a token- and stage-level trace and see why a request was slow
/// or wrong. With no subcommand, opens the app on TRACE (or on the embedded demo trace).
#[derive(Parser)]
#[command(name = "tokenscope", version, args_conflicts_with_subcommands = true)]
struct Args {
    #[command(subcommand)]
    command: Option<Command>,
    /// Trace to open in the app (.parquet, .jsonl[.gz|.zst], a directory of them, or what an engine or tool
    /// writes); several files of one run (a recording and the server's log) open as one trace.
    traces: Vec<PathBuf>,
    /// Only the part of the trace from this time: requests arriving and steps starting at or after it. A dataset's
    /// `date=`/`hour=` folders before it are not read. RFC 3339 (2025-11-29T08:15:00Z), a UTC date and time
    /// (2025-11-29T08:15), a UTC date, or ns since 1970.
    #[arg(long, global = true, value_name = "TIME", value_parser = window::parse_time)]
    from_time: Option<i64>,
    /// Only the part of the trace before this time (same forms as --from-time).
    #[arg(long, global = true, value_name = "TIME", value_parser = window::parse_time)]
    to_time: Option<i64>,
    /// Only requests whose label has this value (source, model, app_id, user_id), and only a dataset's folders
    /// with it (any folder key: date=2025-11-29, hour=08, ...). Repeat for several; all must hold.
    #[arg(long = "where", global = true, value_name = "KEY=VALUE", value_parser = window::parse_filter)]
    filters: Vec<(String, String)>,
    /// In the app: compare TRACE (A) with this trace (B), as File > Compare with… does.
    #[arg(long, value_name = "TRACE_B")]
    compare: Option<PathBuf>,
    /// Refuse, before reading a record, to load a trace estimated to take more memory than this (4GB, 500MB);
    /// by default half this machine's memory. The message says which part of it fits.
    #[arg(long, global = true, value_name = "SIZE", value_parser = tokenscope::load::budget::parse_size)]
    memory_budget: Option<u64>,
    /// Read every input with this importer instead of recognising it by its content (for a file whose name and
    /// first bytes do not say what it is).
    #[arg(long, global = true, value_enum, value_name = "KIND")]
    from: Option<tokenscope::import::Kind>,
    /// The date a server log starts on (YYYY-MM-DD), for logs whose times have no year (vLLM's `MM-DD HH:MM:SS`);
    /// by default the year of the trace's other files, else of the log file's last change.
    #[arg(long, global = true, value_name = "DATE", value_parser = log_clock::parse_date)]
    log_date: Option<chrono::NaiveDate>,
    /// The zone a server log's times are in (+08:00, -05:00, UTC): Python's logging writes local time with no zone;
    /// by default they are read as UTC.
    #[arg(long, global = true, value_name = "OFFSET", value_parser = log_clock::parse_offset, allow_hyphen_values = true)]
    log_tz: Option<i32>,
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
    /// Run SQL over the trace's tables: requests, tokens, steps, stages, candidates (docs/QUERY.md), e.g.
    /// "SELECT app_id, QUANTILE_DISC(ttft_ms, 0.99) FROM requests WHERE input_tokens > 4000 GROUP BY app_id".
    #[cfg(feature = "query")]
    Query(cli::query::QueryArgs),
    /// Metrics over time: request rate, output tokens/s, goodput, TTFT and TPOT p50/p95/p99, queue length, KV use
    /// and preemptions per time bucket (docs/QUERY.md).
    #[cfg(feature = "query")]
    Timeline(cli::timeline::TimelineArgs),
    /// Write a trace in format v1 (Parquet or JSONL, by the output's extension), from a trace or from what an
    /// engine or tool wrote; several files of one run become one trace.
    Convert {
        /// The trace, or the engine's or tool's files (recognised by their content).
        #[arg(required = true)]
        input: Vec<PathBuf>,
        /// Write a hive-partitioned dataset under OUTPUT (a folder): key=value folders of Parquet files, outermost
        /// first (e.g. date,hour,source).
        #[arg(long, value_enum, value_delimiter = ',', value_name = "KEY,..")]
        partition_by: Vec<tokenscope::format::partition::PartitionKey>,
        /// The file to write (.parquet, .jsonl, .jsonl.gz, .jsonl.zst), or the dataset's folder.
        #[arg(short, long)]
        output: PathBuf,
    },
}

fn emit(out: &Output) -> ExitCode {
    print!("{}", out.stdout);
    eprint!("{}", out.stderr);
    ExitCode::from(u8::try_from(out.code).unwrap_or(1))
}

fn main() -> ExitCode {
    // A first word that is neither a subcommand nor a path: said plainly before clap reads it as the app's TRACE.
    if let Some(first) = std::env::args_os().nth(1).and_then(|a| a.into_string().ok())
        && !first.starts_with('-')
        && first != "help"
        && !<Args as clap::CommandFactory>::command()
            .get_subcommands()
            .any(|c| c.get_name() == first)
        && let Some(message) = not_a_trace_path(std::path::Path::new(&first))
    {
        eprintln!("error: {message}");
        return ExitCode::from(2);
    }
    let args = Args::parse();
    let window = Window {
        from_ns: args.from_time,
        to_ns: args.to_time,
        filters: args.filters.clone(),
    };
    if let (Some(from), Some(to)) = (window.from_ns, window.to_ns)
        && from >= to
    {
        eprintln!(
            "error: --from-time must come before --to-time: the window {} holds nothing",
            window.describe()
        );
        return ExitCode::from(2);
    }
    cli::set_window(window.clone());
    cli::set_budget(args.memory_budget);
    cli::set_from(args.from);
    let log_clock = LogClock {
        date: args.log_date,
        utc_offset_s: args.log_tz,
    };
    cli::set_log_clock(log_clock);
    if let Some(kind) = args.from
        && out_of_core(args.command.as_ref())
    {
        eprintln!(
            "error: --out-of-core reads tokenscope's Parquet traces only, not {}: convert first \
             (tokenscope convert FILE --from {} -o trace.parquet), or leave out --out-of-core",
            kind.name(),
            kind.name()
        );
        return ExitCode::from(2);
    }
    match args.command {
        Some(Command::Validate(args)) => emit(&args.run()),
        Some(Command::Summary(args)) => emit(&args.run()),
        Some(Command::Synth(args)) => emit(&args.run()),
        Some(Command::Export(args)) => emit(&args.run()),
        #[cfg(feature = "query")]
        Some(Command::Query(args)) => emit(&args.run()),
        #[cfg(feature = "query")]
        Some(Command::Timeline(args)) => emit(&args.run()),
        Some(Command::Diff(args)) => emit(&args.run()),
        Some(Command::Findings(args)) => emit(&args.run()),
        Some(Command::Render(args)) => emit(&args.run()),
        Some(Command::Fit(args)) => emit(&args.run()),
        Some(Command::Corpus(args)) => emit(&args.run()),
        Some(Command::Record(args)) => emit(&args.run()),
        Some(Command::Convert {
            input,
            partition_by,
            output,
        }) => emit(&cli::convert::run(&input, args.from, &partition_by, &output)),
        None => {
            for p in args.traces.iter().chain(&args.compare) {
                if let Some(message) = not_a_trace_path(p) {
                    eprintln!("error: {message}");
                    return ExitCode::from(2);
                }
            }
            if args.compare.is_some() && args.traces.is_empty() {
                eprintln!("error: --compare B compares TRACE (A) with B: give TRACE too (tokenscope A --compare B)");
                return ExitCode::from(2);
            }
            let mut traces = args.traces;
            let source = match (traces.len(), traces.pop()) {
                (_, None) => TraceSource::Demo,
                (1, Some(p)) if window.is_all() => TraceSource::Path(p),
                (1, Some(p)) => TraceSource::Part(p, window.clone()),
                (_, Some(p)) if window.is_all() => {
                    traces.push(p);
                    TraceSource::Paths(traces)
                }
                (_, Some(_)) => {
                    eprintln!(
                        "error: --from-time, --to-time and --where choose a part of one trace: give one file or \
                         directory, or convert the files of the run to one first (tokenscope convert ... -o OUT)"
                    );
                    return ExitCode::from(2);
                }
            };
            // B is read through the same window as A.
            let compare = args.compare.map(|b| {
                if window.is_all() {
                    TraceSource::Path(b)
                } else {
                    TraceSource::Part(b, window.clone())
                }
            });
            match ui::run(source, args.memory_budget, args.from, log_clock, compare) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!(
                        "error: cannot open the window: {e}. On a machine without a display, run under Xvfb \
                               (see README) or use the subcommands (tokenscope --help)"
                    );
                    ExitCode::from(1)
                }
            }
        }
    }
}

/// Whether the subcommand reads its Parquet files out of core (`--out-of-core`), with no importer.
#[allow(clippy::unnecessary_wraps, unused_variables)] // without the `query` feature nothing reads out of core
fn out_of_core(command: Option<&Command>) -> bool {
    #[cfg(feature = "query")]
    return matches!(
        command,
        Some(
            Command::Summary(cli::summary::SummaryArgs { out_of_core: true, .. })
                | Command::Query(cli::query::QueryArgs { out_of_core: true, .. })
                | Command::Timeline(cli::timeline::TimelineArgs { out_of_core: true, .. })
        )
    );
    #[cfg(not(feature = "query"))]
    false
}

/// Why the app cannot open `path`, said before a window opens: a mistyped subcommand (`sumary`), or no such file.
fn not_a_trace_path(path: &std::path::Path) -> Option<String> {
    if path.exists() {
        return None;
    }
    let word = path.to_str().unwrap_or_default();
    let command = <Args as clap::CommandFactory>::command();
    let closest = command
        .get_subcommands()
        .map(|c| c.get_name())
        .map(|name| (strsim::jaro_winkler(word, name), name))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    Some(match closest {
        Some((score, name)) if score > 0.8 && !word.contains(['/', '.']) => {
            format!("unrecognized subcommand '{word}': did you mean '{name}'? (tokenscope --help lists them)")
        }
        _ => format!(
            "{}: no such file or directory; give a trace file or directory (tokenscope --help lists the subcommands)",
            path.display()
        ),
    })
}
