//! The `tokenscope` command: parses arguments and dispatches; the work is in the library.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tokenscope::analysis::findings;
use tokenscope::analysis::summary::{GroupBy, Slo};
use tokenscope::cli::{self, Output};
use tokenscope::format::window::{self, Window};
use tokenscope::import::log_clock::{self, LogClock};
use tokenscope::ui::render::View;
use tokenscope::ui::{self, TraceSource};
use tokenscope::view::lanes::TrackLayout;

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
    Validate {
        /// The trace: one file or directory, or several files of one run (a client's recording with the server's
        /// files: they are joined).
        #[arg(required = true, num_args = 1..)]
        traces: Vec<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print the trace's figures: tokens, span, throughput, TTFT/TPOT/E2E/queue/ITL percentiles, SLO goodput.
    Summary {
        /// The trace: one file or directory, or several files of one run (a client's recording with the server's
        /// files: they are joined).
        #[arg(required = true, num_args = 1..)]
        traces: Vec<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// TTFT objective in ms, for SLO attainment and goodput.
        #[arg(long, value_name = "MS", value_parser = cli::positive_ms)]
        slo_ttft_ms: Option<f64>,
        /// TPOT objective in ms, for SLO attainment and goodput.
        #[arg(long, value_name = "MS", value_parser = cli::positive_ms)]
        slo_tpot_ms: Option<f64>,
        /// Also break the figures down by this request label.
        #[arg(long, value_enum)]
        by: Option<GroupBy>,
        /// A price table (JSON, per 1 M tokens: input, cached input, output; by model) for cost attribution.
        #[arg(long, value_name = "FILE")]
        prices: Option<PathBuf>,
        /// Compute the figures without loading the trace: sql/tokenscope.sql on polars' streaming engine over the
        /// Parquet files (a file, a directory, a partitioned dataset), in bounded memory. Records are not validated.
        #[cfg(feature = "query")]
        #[arg(long, conflicts_with_all = ["by", "prices"])]
        out_of_core: bool,
    },
    /// Simulate a continuous-batching engine and write its trace: a named scenario, or a replay of a real
    /// request trace (Mooncake JSONL, Azure CSV).
    Synth(cli::synth::SynthArgs),
    /// Record a token-level trace, with candidates, from an OpenAI-compatible server: real prompts sent in a
    /// closed or open loop, every streamed token with its client-side arrival time, id, logprob and candidates.
    Record {
        /// The server's base URL (http://127.0.0.1:8080, with or without /v1).
        #[arg(long)]
        url: String,
        /// Prompts: JSON lines of {"prompt": ...} or {"messages": [...]} (optionally with max_tokens, app_id,
        /// user_id), or plain text, one prompt per line; cycled to --requests.
        #[arg(long, value_name = "FILE")]
        prompts: PathBuf,
        /// The API: chat (/v1/chat/completions), completions (/v1/completions), llamacpp (/completion).
        #[arg(long, value_enum, default_value = "chat")]
        api: tokenscope::record::client::Api,
        /// Requests to send.
        #[arg(long, default_value_t = 16)]
        requests: usize,
        /// Requests in flight at most (closed loop without --rate).
        #[arg(long, default_value_t = 1)]
        concurrency: usize,
        /// Open loop: requests per second, Poisson arrivals (still at most --concurrency in flight).
        #[arg(long)]
        rate: Option<f64>,
        /// Output tokens per request, unless a prompt has its own max_tokens.
        #[arg(long, default_value_t = 128)]
        max_tokens: u32,
        /// Candidates per token (0: no logprobs).
        #[arg(long, default_value_t = 5)]
        top_logprobs: u32,
        /// Sampling temperature.
        #[arg(long)]
        temperature: Option<f64>,
        /// Sampling seed sent to the server.
        #[arg(long)]
        sampling_seed: Option<u64>,
        /// The model to ask for.
        #[arg(long)]
        model: Option<String>,
        /// JSON object of fields merged into every request body, e.g. '{"logit_bias": {"1": 3}}'.
        #[arg(long, value_name = "JSON", value_parser = cli::record::parse_extra)]
        extra_body: Option<serde_json::Map<String, serde_json::Value>>,
        /// An HTTP header, "Name: value" (repeat for more).
        // Parsed after clap, which would echo a value it refuses: a header usually carries a key.
        #[arg(long = "header", value_name = "NAME: VALUE")]
        headers: Vec<String>,
        /// End-of-sequence token id, when the server does not say it (repeat for more).
        #[arg(long = "eos-id")]
        eos_ids: Vec<u32>,
        /// Seed of the open loop's arrivals.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Seconds without a chunk before a stream counts as stalled.
        #[arg(long, default_value_t = 60.0)]
        idle_timeout: f64,
        /// Seconds a whole request may take.
        #[arg(long, default_value_t = 600.0)]
        timeout: f64,
        /// After Ctrl-C, seconds the streams in flight may go on before they are cut.
        #[arg(long, default_value_t = 5.0)]
        grace: f64,
        /// Also write every streamed chunk with its arrival time (JSON lines; opens as kind openai-stream).
        #[arg(long, value_name = "FILE")]
        raw: Option<PathBuf>,
        /// The server's log of this run (llama-server --log-file PATH, best at -lv 5; or any server-side file
        /// tokenscope reads): read when the recording ends and joined with it, so the trace written has both halves.
        /// When the two do not join, the recording is written alone and the reason said.
        #[arg(long, value_name = "PATH")]
        server_log: Option<PathBuf>,
        /// The trace to write (.parquet, .jsonl).
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Export the slice of a trace around an incident: a trace file (.parquet, .jsonl) or Chrome Trace Event JSON
    /// (.json, for Perfetto UI). Times are ms after the trace's start (the waterfall ruler's 0).
    Export {
        /// The trace: one file or directory, or several files of one run (a client's recording with the server's
        /// files: they are joined).
        #[arg(required = true, num_args = 1..)]
        traces: Vec<PathBuf>,
        /// Range start, ms after the trace's start.
        #[arg(long, value_name = "MS", allow_negative_numbers = true)]
        from_ms: f64,
        /// Range end, ms after the trace's start.
        #[arg(long, value_name = "MS", allow_negative_numbers = true)]
        to_ms: f64,
        /// Only these requests (comma-separated ids).
        #[arg(long, value_delimiter = ',')]
        requests: Option<Vec<String>>,
        /// Replace token and candidate texts with hashes (keyed per export; repetitions still show).
        #[arg(long)]
        redact: bool,
        /// The file to write.
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Find the known incident patterns (decode interrupted by prefill, EOS mis-trigger, prefill monopoly,
    /// preemption bursts, KV saturation, SLO violations, repetition loops, truncation, token mismatches).
    Findings {
        /// The trace: one file or directory, or several files of one run (a client's recording with the server's
        /// files: they are joined).
        #[arg(required = true, num_args = 1..)]
        traces: Vec<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// Only these kinds (comma-separated).
        #[arg(long, value_delimiter = ',', value_enum)]
        kind: Option<Vec<findings::Kind>>,
        /// TTFT objective in ms, for the SLO-violation finding (without either objective: TTFT 1000 ms and TPOT
        /// 50 ms, the app's defaults).
        #[arg(long, value_name = "MS", value_parser = cli::positive_ms)]
        slo_ttft_ms: Option<f64>,
        /// TPOT objective in ms, for the SLO-violation finding.
        #[arg(long, value_name = "MS", value_parser = cli::positive_ms)]
        slo_tpot_ms: Option<f64>,
        /// Judge no objective: no SLO-violation finding.
        #[arg(long, conflicts_with_all = ["slo_ttft_ms", "slo_tpot_ms"])]
        no_slo: bool,
        #[command(flatten)]
        thresholds: findings::Thresholds,
    },
    /// Compare two traces, A (before) and B (after): the figures side by side with their change, attainment and
    /// goodput under the objectives, the findings gone and new, and the requests of both (paired by id, or by
    /// arrival and prompt length) whose TTFT and TPOT changed most.
    Diff(cli::diff::DiffArgs),
    /// Render the views to a PNG with no display (software rendering), for incident reports and CI. Times are ms
    /// after the trace's start (the waterfall ruler's 0).
    Render {
        /// The trace: one file or directory, or several files of one run (a client's recording with the server's
        /// files: they are joined).
        #[arg(required = true, num_args = 1..)]
        traces: Vec<PathBuf>,
        /// Range start, ms after the trace's start (with --to-ms; default: the whole trace).
        #[arg(long, value_name = "MS", allow_negative_numbers = true)]
        from_ms: Option<f64>,
        /// Range end, ms after the trace's start.
        #[arg(long, value_name = "MS", allow_negative_numbers = true)]
        to_ms: Option<f64>,
        /// The request to select and show in the high-power view (id).
        #[arg(long, value_name = "ID")]
        request: Option<String>,
        /// The token to select in it: its index in the output.
        #[arg(long, value_name = "N")]
        token: Option<u32>,
        /// Which views: waterfall, request or both (default: both with --request, else waterfall).
        #[arg(long, value_enum)]
        view: Option<View>,
        /// Width in points.
        #[arg(long, allow_negative_numbers = true, default_value_t = 1400.0)]
        width: f32,
        /// Height in points.
        #[arg(long, allow_negative_numbers = true, default_value_t = 860.0)]
        height: f32,
        /// Pixels per point (2: a 2x image).
        #[arg(long, allow_negative_numbers = true, default_value_t = 2.0)]
        scale: f32,
        /// Leave out the caption strip (trace, time range in UTC, selection).
        #[arg(long)]
        no_caption: bool,
        /// TTFT objective for the request header, ms.
        #[arg(long, value_name = "MS", value_parser = cli::positive_ms, default_value_t = 1000.0)]
        slo_ttft_ms: f64,
        /// TPOT objective for the request header, ms.
        #[arg(long, value_name = "MS", value_parser = cli::positive_ms, default_value_t = 50.0)]
        slo_tpot_ms: f64,
        /// Render the Nth finding of `tokenscope findings` (from 1; default objectives and thresholds): its time
        /// range, its request and token selected, as a click on it shows in the app.
        #[arg(long, value_name = "N", conflicts_with_all = ["from_ms", "to_ms", "request", "token"])]
        finding: Option<usize>,
        /// The request tracks: one per request, or packed into lanes of requests that do not overlap.
        #[arg(long, value_enum, default_value = "tracks")]
        layout: TrackLayout,
        /// The PNG to write.
        #[arg(short, long)]
        output: PathBuf,
    },
    /// Fit the simulator's step costs and scheduler on a real server's steps (a joined run, an engine trace),
    /// check them by replaying held-out runs, and write the profile `synth --profile FILE` takes.
    Fit(cli::fit::FitArgs),
    /// Measure the detectors on the diagnosis corpus: simulated runs on three hardware profiles, chunked prefill on
    /// and off, chat traffic and real arrivals below and above capacity, with and without each planted incident.
    Corpus {
        /// The repository's root (the replays read tests/data/real/).
        #[arg(long, default_value = ".")]
        root: PathBuf,
        /// Only this profile's cases.
        #[arg(long, value_enum)]
        profile: Option<tokenscope::synth::Profile>,
        /// Replace the tables of this file (docs/FINDINGS.md) between its markers instead of printing them.
        #[arg(long, value_name = "FILE")]
        write: Option<PathBuf>,
        #[command(flatten)]
        thresholds: findings::Thresholds,
    },
    /// Run SQL over the trace's tables: requests, tokens, steps, stages, candidates (docs/QUERY.md), e.g.
    /// "SELECT app_id, QUANTILE_DISC(ttft_ms, 0.99) FROM requests WHERE input_tokens > 4000 GROUP BY app_id".
    #[cfg(feature = "query")]
    Query {
        /// The trace.
        trace: PathBuf,
        /// The query.
        sql: String,
        /// How to print the result.
        #[arg(long, value_enum, default_value_t)]
        format: cli::query::Format,
        /// Query the Parquet files (a file, a directory, a partitioned dataset) without loading them: the views of
        /// sql/tokenscope.sql (requests, tokens, itl, trace, ...) on polars' streaming engine.
        #[arg(long)]
        out_of_core: bool,
    },
    /// Metrics over time: request rate, output tokens/s, goodput, TTFT and TPOT p50/p95/p99, queue length, KV use
    /// and preemptions per time bucket (docs/QUERY.md).
    #[cfg(feature = "query")]
    Timeline {
        /// The trace.
        trace: PathBuf,
        /// Bucket width (10s, 500ms, 5m); by default the round width that makes at most 60 buckets.
        #[arg(long, value_name = "WIDTH", value_parser = cli::timeline::parse_every)]
        every: Option<std::time::Duration>,
        /// One series per value of this request label (steps' series only by source).
        #[arg(long, value_enum)]
        by: Option<GroupBy>,
        /// How to print the series.
        #[arg(long, value_enum, default_value_t)]
        format: cli::query::Format,
        /// TTFT objective in ms for goodput (default 1000 with the TPOT default, unless --no-slo).
        #[arg(long, value_name = "MS", value_parser = cli::positive_ms)]
        slo_ttft_ms: Option<f64>,
        /// TPOT objective in ms for goodput (default 50 with the TTFT default, unless --no-slo).
        #[arg(long, value_name = "MS", value_parser = cli::positive_ms)]
        slo_tpot_ms: Option<f64>,
        /// No objectives: no goodput.
        #[arg(long, conflicts_with_all = ["slo_ttft_ms", "slo_tpot_ms"])]
        no_slo: bool,
        /// Compute from the Parquet files (a file, a directory, a partitioned dataset) without loading them: the
        /// requests' figures by sql/tokenscope.sql and the tokens streamed, on polars' streaming engine.
        #[arg(long)]
        out_of_core: bool,
    },
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
        Some(Command::Validate { traces, json }) => emit(&cli::validate::run(&paths(&traces), json)),
        Some(Command::Summary {
            traces,
            json,
            slo_ttft_ms,
            slo_tpot_ms,
            by,
            prices,
            #[cfg(feature = "query")]
            out_of_core,
        }) => {
            let slo = Slo {
                ttft_ms: slo_ttft_ms,
                tpot_ms: slo_tpot_ms,
            };
            #[cfg(feature = "query")]
            if out_of_core {
                return emit(&cli::summary::run_out_of_core(&paths(&traces), json, slo));
            }
            emit(&cli::summary::run(&paths(&traces), json, slo, by, prices.as_deref()))
        }
        Some(Command::Synth(args)) => emit(&args.run()),
        Some(Command::Export {
            traces,
            from_ms,
            to_ms,
            requests,
            redact,
            output,
        }) => {
            let options = cli::export::ExportOptions {
                from_ms,
                to_ms,
                requests,
                redact,
            };
            emit(&cli::export::run(&paths(&traces), &options, &output))
        }
        #[cfg(feature = "query")]
        Some(Command::Query {
            trace,
            sql,
            format,
            out_of_core,
        }) => emit(&if out_of_core {
            cli::query::run_out_of_core(&trace, &sql, format)
        } else {
            cli::query::run(&trace, &sql, format)
        }),
        #[cfg(feature = "query")]
        Some(Command::Timeline {
            trace,
            every,
            by,
            format,
            slo_ttft_ms,
            slo_tpot_ms,
            no_slo,
            out_of_core,
        }) => {
            let given = Slo {
                ttft_ms: slo_ttft_ms,
                tpot_ms: slo_tpot_ms,
            };
            let slo = match (given.is_set(), no_slo) {
                (true, _) => given,
                (false, true) => Slo::default(),
                (false, false) => Slo::DEFAULT,
            };
            emit(&if out_of_core {
                cli::timeline::run_out_of_core(&trace, every, by, slo, format)
            } else {
                cli::timeline::run(&trace, every, by, slo, format)
            })
        }
        Some(Command::Diff(args)) => emit(&args.run()),
        Some(Command::Findings {
            traces,
            json,
            kind,
            slo_ttft_ms,
            slo_tpot_ms,
            no_slo,
            thresholds,
        }) => {
            let objectives = cli::findings::Objectives::from_flags(slo_ttft_ms, slo_tpot_ms, no_slo);
            emit(&cli::findings::run(
                &paths(&traces),
                json,
                objectives,
                &thresholds,
                kind.as_deref(),
            ))
        }
        Some(Command::Render {
            traces,
            from_ms,
            to_ms,
            request,
            token,
            view,
            width,
            height,
            scale,
            no_caption,
            slo_ttft_ms,
            slo_tpot_ms,
            finding,
            layout,
            output,
        }) => {
            let options = cli::render::RenderOptions {
                finding,
                layout,
                from_ms,
                to_ms,
                request,
                token,
                view,
                width,
                height,
                scale,
                caption: !no_caption,
                slo: Slo {
                    ttft_ms: Some(slo_ttft_ms),
                    tpot_ms: Some(slo_tpot_ms),
                },
            };
            emit(&cli::render::run(&paths(&traces), &options, &output))
        }
        Some(Command::Fit(args)) => emit(&args.run()),
        Some(Command::Corpus {
            root,
            profile,
            write,
            thresholds,
        }) => emit(&cli::corpus::run(&root, profile, &thresholds, write.as_deref())),
        Some(Command::Record {
            url,
            prompts,
            api,
            requests,
            concurrency,
            rate,
            max_tokens,
            top_logprobs,
            temperature,
            sampling_seed,
            model,
            extra_body,
            headers,
            eos_ids,
            seed,
            idle_timeout,
            timeout,
            grace,
            raw,
            server_log,
            output,
        }) => {
            let secs = |name: &str, v: f64| {
                (v.is_finite() && v > 0.0)
                    .then(|| std::time::Duration::from_secs_f64(v))
                    .ok_or_else(|| format!("--{name} {v}: give a positive number of seconds"))
            };
            let limits = match (
                secs("idle-timeout", idle_timeout),
                secs("timeout", timeout),
                secs("grace", grace),
            ) {
                (Ok(idle), Ok(total), Ok(grace)) => (tokenscope::record::client::Limits { idle, total }, grace),
                (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return emit(&Output::error(e, 2)),
            };
            if rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
                return emit(&Output::error(
                    "--rate: give a positive number of requests per second",
                    2,
                ));
            }
            let headers = match headers
                .iter()
                .map(|h| cli::record::parse_header(h))
                .collect::<Result<Vec<_>, _>>()
            {
                Ok(h) => h,
                Err(e) => return emit(&Output::error(e, 2)),
            };
            let options = tokenscope::record::RecordOptions {
                url,
                api,
                requests,
                concurrency: concurrency.max(1),
                rate,
                sampling: tokenscope::record::client::Sampling {
                    model,
                    max_tokens,
                    top_logprobs,
                    temperature,
                    seed: sampling_seed,
                    extra: extra_body.unwrap_or_default(),
                },
                headers,
                eos_ids,
                limits: limits.0,
                grace: limits.1,
                seed,
                journal: None,
            };
            let progress = std::io::IsTerminal::is_terminal(&std::io::stderr());
            emit(&cli::record::run(
                &options,
                &prompts,
                raw.as_ref(),
                server_log.as_deref(),
                &output,
                progress,
            ))
        }
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
            Command::Summary { out_of_core: true, .. }
                | Command::Query { out_of_core: true, .. }
                | Command::Timeline { out_of_core: true, .. }
        )
    );
    #[cfg(not(feature = "query"))]
    false
}

/// The paths of the command line as the loaders take them.
fn paths(traces: &[PathBuf]) -> Vec<&std::path::Path> {
    traces.iter().map(PathBuf::as_path).collect()
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
