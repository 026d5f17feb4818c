//! `tokenscope summary TRACE [--json] [--slo-ttft-ms X] [--slo-tpot-ms Y] [--by FIELD]`: the figures of the format's
//! "Derived figures", as an aligned table with units or as JSON.

use std::path::Path;
use std::path::PathBuf;

use serde_json::{Value, json};

use super::validate::fatal;
use super::{Output, table, thousands};
use crate::analysis::cost::Prices;
use crate::analysis::metrics::Distribution;
use crate::analysis::samples::{SampleFigures, sample_figures};
use crate::analysis::stats::{self, money};
use crate::analysis::summary::{GroupBy, Slo, Summary, summarize_all, summarize_by};
use crate::trace::Trace;

fn fmt_ms(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:.1}"))
}

fn dist_row(name: &str, d: &Distribution) -> Vec<String> {
    vec![
        name.to_owned(),
        thousands(d.count),
        fmt_ms(d.mean),
        fmt_ms(d.p50),
        fmt_ms(d.p90),
        fmt_ms(d.p95),
        fmt_ms(d.p99),
        fmt_ms(d.max),
    ]
}

fn slo_text(s: &Summary) -> Option<String> {
    let slo = s.slo?;
    let mut limits = Vec::new();
    if let Some(t) = slo.ttft_ms {
        limits.push(format!("TTFT <= {t} ms"));
    }
    if let Some(t) = slo.tpot_ms {
        limits.push(format!("TPOT <= {t} ms"));
    }
    Some(format!(
        "{}: attainment {}, goodput {}",
        limits.join(" and "),
        slo.attainment
            .map_or_else(|| "-".to_owned(), |a| format!("{:.1} %", a * 100.0)),
        slo.goodput_tok_s
            .map_or_else(|| "-".to_owned(), |g| format!("{g:.1} tok/s"))
    ))
}

/// The engine's steps in a line: how many, on how many instances, over what time, the prompt and output tokens they
/// computed (when the source counts them), and their median and 99th-percentile durations. `None` without steps.
fn steps_text(trace: &Trace) -> Option<String> {
    let it = &trace.iterations;
    let rows = (0..it.len()).map(|i| {
        (
            it.source[i],
            it.start_ns[i],
            it.end_ns[i],
            it.num_prefill_tokens.at(i),
            it.num_decode_tokens.at(i),
        )
    });
    crate::analysis::facts::StepFigures::of(rows).map(|f| steps_line(&f))
}

/// The steps' line of the summary.
fn steps_line(f: &crate::analysis::facts::StepFigures) -> String {
    let count = |v: Option<u64>| v.map_or_else(|| "-".to_owned(), thousands);
    format!(
        "{} on {} instance(s) over {:.3} s; prompt tokens {}, output tokens {}; step p50 {} ms, p99 {} ms",
        thousands(f.steps),
        f.instances,
        f.span_s,
        count(f.prompt_tokens),
        count(f.output_tokens),
        fmt_ms(f.duration_ms.p50),
        fmt_ms(f.duration_ms.p99)
    )
}

/// The engine's counter samples in a line: how many, on how many instances, over what time, read how often.
fn samples_text(f: &SampleFigures) -> String {
    let every = f
        .every_ms
        .map_or_else(String::new, |ms| format!(", read every {:.1} s (median)", ms / 1e3));
    let prefills = if f.prefill_batches > 0 {
        format!("; {} of them prefill batches", thousands(f.prefill_batches))
    } else {
        String::new()
    };
    format!(
        "{} on {} instance(s) over {:.1} s{every}{prefills}",
        thousands(f.samples),
        f.instances,
        f.span_ms / 1e3
    )
}

/// The table of the counters the samples carry (only those: a counter no sample has is not a row of zeros).
fn counters_table(f: &SampleFigures) -> String {
    let num = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.1}"));
    let mut rows = vec![
        ["engine counters", "count", "mean", "p50", "p90", "p99", "max"]
            .map(str::to_owned)
            .to_vec(),
    ];
    for c in &f.counters {
        let d = &c.values;
        rows.push(vec![
            c.label.to_owned(),
            thousands(d.count),
            num(d.mean),
            num(d.p50),
            num(d.p90),
            num(d.p99),
            num(d.max),
        ]);
    }
    table(&rows)
}

/// The request-level latencies' table.
/// The speculative line: drafts and acceptance, then what the tokens say of the verify steps.
fn spec_text(f: &crate::analysis::spec::SpecFigures) -> String {
    let from = match f.from {
        crate::analysis::spec::SpecSource::Requests => "requests",
        crate::analysis::spec::SpecSource::Tokens => "tokens",
        crate::analysis::spec::SpecSource::Steps => "steps",
        crate::analysis::spec::SpecSource::Samples => "the engine's counters",
    };
    let mut text = format!(
        "{} drafted, {} accepted ({}, from the {from})",
        thousands(f.drafted_tokens),
        thousands(f.accepted_tokens),
        f.acceptance_rate
            .map_or_else(|| "-".to_owned(), |r| format!("{:.1} %", r * 100.0))
    );
    if let (Some(n), Some(len)) = (f.verify_steps, f.acceptance_length) {
        let _ = std::fmt::Write::write_fmt(
            &mut text,
            format_args!("; {len:.2} tokens per verify step over {}", thousands(n)),
        );
    }
    if !f.acceptance_by_position.is_empty() {
        let by: Vec<String> = f.acceptance_by_position.iter().map(|a| format!("{a:.2}")).collect();
        text.push_str(&format!("; accepted by position {}", by.join(" ")));
    }
    text
}

fn latency_table(s: &Summary) -> String {
    let rows = vec![
        ["latency (ms)", "count", "mean", "p50", "p90", "p95", "p99", "max"]
            .map(str::to_owned)
            .to_vec(),
        dist_row("TTFT", &s.ttft_ms),
        dist_row("TPOT", &s.tpot_ms),
        dist_row("E2E", &s.e2e_ms),
        dist_row("queue", &s.queue_ms),
        dist_row("ITL", &s.itl_ms),
    ];
    table(&rows)
}

/// The human form of a summary.
pub fn summary_text(trace: &Trace, s: &Summary, rejected: u64, currency: &str) -> String {
    let mut out = String::new();
    let m = &trace.meta;
    let engine = [m.engine.as_deref(), m.engine_version.as_deref(), m.model.as_deref()]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(" ");
    let mut head = vec![vec![
        "engine".to_owned(),
        if engine.is_empty() { "-".to_owned() } else { engine },
    ]];
    if let Some(note) = &m.note {
        head.push(vec!["note".to_owned(), note.clone()]);
    }
    head.extend([
        vec!["requests".to_owned(), thousands(s.requests)],
        vec![
            "tokens".to_owned(),
            if s.requests == 0 {
                // No request: the source says nothing of tokens per request (an iteration log); not zero.
                "- (no requests in the trace)".to_owned()
            } else {
                format!(
                    "input {}, cached {}, output {}",
                    thousands(s.input_tokens),
                    s.cached_tokens.map_or_else(|| "-".to_owned(), thousands),
                    thousands(s.output_tokens)
                )
            },
        ],
        vec![
            "span".to_owned(),
            s.span_ms
                .filter(|_| trace.has_times())
                .map_or_else(|| "-".to_owned(), |v| format!("{:.3} s", v / 1e3)),
        ],
        vec![
            "throughput".to_owned(),
            s.throughput_tok_s
                .filter(|_| trace.has_times())
                .map_or_else(|| "-".to_owned(), |v| format!("{v:.1} output tok/s")),
        ],
    ]);
    if let Some(steps) = steps_text(trace) {
        head.push(vec!["engine steps".to_owned(), steps]);
    }
    let samples = sample_figures(trace);
    if let Some(f) = &samples {
        head.push(vec!["engine samples".to_owned(), samples_text(f)]);
    }
    if let Some(f) = &s.spec {
        head.push(vec!["speculative".to_owned(), spec_text(f)]);
    }
    if let Some(t) = slo_text(s) {
        head.push(vec!["SLO".to_owned(), t]);
    }
    if let Some(c) = s.cost {
        let cache = if s.cached_tokens.is_some() {
            format!(
                "cached input {}, output {}); the prefix cache saved {}",
                money(c.cached_input),
                money(c.output),
                money(c.cache_savings)
            )
        } else {
            // The source gives no cached counts: every input token is billed as uncached, and the savings unknown.
            format!(
                "output {}); cached input unknown: the trace has no cached counts, so every input token is billed \
                 as uncached",
                money(c.output)
            )
        };
        head.push(vec![
            "cost".to_owned(),
            format!("{currency} {} (input {}, {cache}", money(c.total), money(c.input)),
        ]);
    }
    let reasons: Vec<String> = s
        .finish_reasons
        .iter()
        .map(|(k, n)| format!("{k} {}", thousands(*n)))
        .collect();
    // Without requests there is nothing to finish or to mismatch: absent, not zero.
    let per_request = |v: String| if s.requests == 0 { "-".to_owned() } else { v };
    head.push(vec!["finish reasons".to_owned(), per_request(reasons.join(", "))]);
    head.push(vec![
        "token mismatches".to_owned(),
        per_request(thousands(s.token_mismatches)),
    ]);
    head.push(vec!["rejected records".to_owned(), thousands(rejected)]);
    if trace.candidates_on_disk.is_some() {
        // The figures need no candidate: a Parquet trace's are left on disk (most of its bytes) and not checked.
        head.push(vec![
            "candidates".to_owned(),
            "left on disk, not read (`tokenscope validate` checks them)".to_owned(),
        ]);
    }
    for row in &head {
        out.push_str(&format!("{:<18}{}\n", row[0], row[1]));
    }
    out.push('\n');
    if s.requests == 0 {
        out.push_str("latency           - (no requests in the trace: no TTFT, TPOT, E2E, queue or ITL)\n");
    } else if !trace.has_times() {
        out.push_str("latency           - (the source wrote no times, a saved stream: no TTFT, TPOT, E2E or ITL)\n");
    } else {
        out.push_str(&latency_table(s));
    }
    if let Some(f) = samples.as_ref().filter(|f| !f.counters.is_empty()) {
        out.push('\n');
        out.push_str(&counters_table(f));
    }
    if let Some(d) = &s.delivery {
        out.push_str(&format!(
            "\nclient vs server ({} of {} requests have both halves; the server's times on the client's clock)\n",
            thousands(d.requests),
            thousands(s.requests)
        ));
        let rows = vec![
            ["delivery (ms)", "count", "mean", "p50", "p90", "p95", "p99", "max"]
                .map(str::to_owned)
                .to_vec(),
            dist_row("client TTFT", &d.client_ttft_ms),
            dist_row("server TTFT", &d.server_ttft_ms),
            dist_row("TTFT gap", &d.ttft_gap_ms),
            dist_row("token delivery", &d.token_ms),
            dist_row("client ITL", &d.client_itl_ms),
        ];
        out.push_str(&table(&rows));
    }
    out
}

/// The per-group table of `--by`: the statistics panel's columns.
pub fn groups_text(by: GroupBy, groups: &[(String, Summary)], currency: &str) -> String {
    let columns = stats::columns_for(groups);
    let header = columns.iter().map(|c| match c.unit {
        stats::Unit::Money => format!("{} {currency}", c.header),
        _ => c.header.to_owned(),
    });
    let mut rows = vec![std::iter::once(by.name().to_owned()).chain(header).collect()];
    for (key, s) in groups {
        rows.push(
            std::iter::once(key.clone())
                .chain(columns.iter().map(|c| c.format((c.get)(s))))
                .collect(),
        );
    }
    table(&rows)
}

/// The engine, its version and the model of Parquet files, by their footers' statistics, when every file that
/// names one names the same.
fn footer_meta(files: &[std::path::PathBuf]) -> crate::trace::Meta {
    let one = |column: &str| -> Option<String> {
        let mut value: Option<String> = None;
        for f in files {
            let (lo, hi) = crate::format::parquet::footer_text_range(f, column)?;
            if lo != hi || value.as_ref().is_some_and(|v| *v != lo) {
                return None;
            }
            value = Some(lo);
        }
        value
    };
    crate::trace::Meta {
        engine: one("engine"),
        engine_version: one("engine_version"),
        model: one("model"),
        note: one("note"),
        ..crate::trace::Meta::default()
    }
}

/// The JSON form: the summary's fields plus `rejected`, and with `--by`, `by` and `groups: [{key, ...}]`.
pub fn summary_json(s: &Summary, rejected: u64, groups: Option<(GroupBy, &[(String, Summary)])>) -> Value {
    let mut v = serde_json::to_value(s).unwrap_or(Value::Null);
    v["rejected"] = json!(rejected);
    if s.requests == 0 {
        // No request: token counts per request are unknown, not zero.
        v["input_tokens"] = Value::Null;
        v["output_tokens"] = Value::Null;
    }
    if let Some((by, groups)) = groups {
        v["by"] = json!(by.name());
        v["groups"] = Value::Array(
            groups
                .iter()
                .map(|(key, g)| {
                    let mut g = serde_json::to_value(g).unwrap_or(Value::Null);
                    g["key"] = json!(key);
                    g
                })
                .collect(),
        );
    }
    v
}

/// The arguments of `summary`.
#[derive(Debug, Clone, clap::Args)]
#[expect(clippy::struct_excessive_bools, reason = "command-line flags, each its own switch")]
pub struct SummaryArgs {
    /// The trace: one file or directory, or several files of one run (a client's recording with the server's
    /// files: they are joined).
    #[arg(required = true, num_args = 1..)]
    pub traces: Vec<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// TTFT objective in ms, for SLO attainment and goodput.
    #[arg(long, value_name = "MS", value_parser = super::positive_ms)]
    pub slo_ttft_ms: Option<f64>,
    /// TPOT objective in ms, for SLO attainment and goodput.
    #[arg(long, value_name = "MS", value_parser = super::positive_ms)]
    pub slo_tpot_ms: Option<f64>,
    /// Also break the figures down by this request label.
    #[arg(long, value_enum)]
    pub by: Option<GroupBy>,
    /// A price table (JSON, per 1 M tokens: input, cached input, output; by model) for cost attribution.
    #[arg(long, value_name = "FILE")]
    pub prices: Option<PathBuf>,
    /// Compute the figures without loading the trace, or fail saying why they cannot be: the Parquet files (a file,
    /// a directory, a partitioned dataset) streamed a few row groups at a time, in memory set by the requests, not the
    /// tokens. Records are checked only by the rules of the fields read. Chosen by itself for a Parquet trace whose
    /// figures all stream (no counter samples, no speculative decoding, no --by or --prices), or that would not fit
    /// the memory budget, unless --in-memory.
    #[arg(long, conflicts_with_all = ["by", "prices", "in_memory"])]
    pub out_of_core: bool,
    /// Load the trace whole before computing the figures (for comparison: they are the same).
    #[arg(long)]
    pub in_memory: bool,
    /// Say on standard error how the figures were computed (streamed or loaded) and why.
    #[arg(long)]
    pub verbose: bool,
    // The part of the trace to read, the memory budget, the importer, a server log's clock.
    #[command(flatten)]
    pub reading: super::globals::GlobalArgs,
}

impl SummaryArgs {
    /// Runs `summary`.
    pub fn run(&self) -> Output {
        let slo = Slo {
            ttft_ms: self.slo_ttft_ms,
            tpot_ms: self.slo_tpot_ms,
        };
        let inputs: Vec<&Path> = self.traces.iter().map(PathBuf::as_path).collect();
        if self.out_of_core {
            return run_out_of_core(&inputs, self.json, slo);
        }
        // A Parquet trace whose figures all stream, or that would not fit the memory budget, is streamed (its
        // fastest path); the rest is loaded.
        let why_load = match self.streams(&inputs) {
            Ok(why) => match streamed(&inputs, self.json, slo, why) {
                Ok(mut out) => {
                    if self.verbose {
                        out.stderr.insert_str(0, "note: a Parquet trace's fastest path\n");
                    } else if out.code == 0 && !out.stderr.contains("memory budget") {
                        out.stderr.clear();
                    }
                    return out;
                }
                Err(why) => why,
            },
            Err(why) => why,
        };
        let mut out = run(&inputs, self.json, slo, self.by, self.prices.as_deref());
        if self.verbose {
            out.stderr
                .insert_str(0, &format!("note: the trace was loaded whole: {why_load}\n"));
        }
        out
    }

    /// Whether `summary` streams `inputs` by itself: `Ok` with why when over the memory budget (`None`: its figures
    /// all stream); `Err` with why it loads.
    fn streams(&self, inputs: &[&Path]) -> Result<Option<String>, String> {
        if self.in_memory {
            return Err("--in-memory".to_owned());
        }
        if self.by.is_some() || self.prices.is_some() {
            return Err("--by and --prices are computed on the trace loaded".to_owned());
        }
        let [one] = inputs else {
            return Err(
                "several files are loaded together (a client's recording and a server's files are joined)".to_owned(),
            );
        };
        if super::from().is_some() {
            return Err("--from names an importer".to_owned());
        }
        let files = super::window_files(one).map_err(|e| e.to_string())?;
        if let Some(over) = super::over_budget(one) {
            return Ok(Some(over));
        }
        match super::only_streamed_figures(&files) {
            Some(why) => Err(why),
            None => Ok(None),
        }
    }
}

/// Runs `summary`.
pub fn run(paths: &[&Path], as_json: bool, slo: Slo, by: Option<GroupBy>, prices: Option<&Path>) -> Output {
    let prices = match prices.map(Prices::load) {
        None => None,
        Some(Ok(p)) => Some(p),
        Some(Err(e)) => return Output::error(e, 2),
    };
    // No figure of the summary needs a candidate: a Parquet trace's stay on disk, as the app leaves them.
    let options = crate::load::LoadOptions {
        lazy_candidates: true,
        ..crate::load::LoadOptions::default()
    };
    let loaded = match super::load(paths, options) {
        Ok(l) => l,
        Err(e) => return fatal(&e, as_json),
    };
    let trace = &loaded.trace;
    let rejected = loaded.report.rejected_count();
    let s = summarize_all(trace, slo, prices.as_ref());
    let groups = by.map(|by| (by, summarize_by(trace, by, slo, prices.as_ref())));
    let stdout = if as_json {
        let mut v = summary_json(&s, rejected, groups.as_ref().map(|(b, g)| (*b, g.as_slice())));
        v["candidates_checked"] = json!(trace.candidates_on_disk.is_none());
        v["computed_by"] = json!("loaded");
        // The counters of the engine's samples; null without samples (not zeros).
        v["samples"] = json!(sample_figures(trace));
        // Speculative decoding: null where nothing in the trace says (not zeros).
        let spec = &s.spec;
        v["spec_drafted_tokens"] = json!(spec.as_ref().map(|f| f.drafted_tokens));
        v["spec_accepted_tokens"] = json!(spec.as_ref().map(|f| f.accepted_tokens));
        v["spec"] = json!(spec);
        if !trace.has_times() {
            // A source without times: its figures of time are unknown, not those of its made-up order.
            for key in [
                "ttft_ms",
                "tpot_ms",
                "e2e_ms",
                "queue_ms",
                "itl_ms",
                "span_ms",
                "throughput_tok_s",
                "slo",
            ] {
                v[key] = Value::Null;
            }
            v["clock"] = json!("untimed");
        }
        if let Some(p) = &prices {
            v["currency"] = json!(p.currency);
        }
        format!("{v:#}\n")
    } else {
        let currency = prices.as_ref().map_or("", |p| p.currency.as_str());
        let mut text = summary_text(trace, &s, rejected, currency);
        if let Some((by, g)) = &groups {
            text.push('\n');
            text.push_str(&groups_text(*by, g, currency));
        }
        text
    };
    let stderr = if rejected > 0 {
        format!("note: {rejected} record(s) were rejected; `tokenscope validate` lists them\n")
    } else {
        String::new()
    };
    Output {
        stdout,
        stderr,
        code: 0,
    }
}

/// Runs `summary --out-of-core`, or `summary` of a Parquet trace over the memory budget (`over`: why): the figures
/// streamed from the files a window of row groups at a time (`load::stream`), keeping a few facts per request and
/// none per token. Records are checked only by the rules of the fields read.
pub fn run_out_of_core(paths: &[&Path], as_json: bool, slo: Slo) -> Output {
    streamed(paths, as_json, slo, None).unwrap_or_else(|why| {
        Output::error(
            format!(
                "its figures cannot be streamed: {why}; leave out --out-of-core to load it (or convert it: \
                 tokenscope convert writes a request's tokens together)"
            ),
            1,
        )
    })
}

/// The streamed summary of the one path in `paths` (`over`: why it was not asked for); `Err` with the reason when
/// the trace cannot be streamed and must be loaded.
fn streamed(paths: &[&Path], as_json: bool, slo: Slo, over: Option<String>) -> Result<Output, String> {
    let [path] = paths else {
        return Ok(Output::error(
            "--out-of-core reads one file or dataset directory; give several files as one directory, or leave out \
             --out-of-core to open them together",
            2,
        ));
    };
    let path = *path;
    let files = match super::window_files(path) {
        Ok(f) => f,
        Err(e) => return Ok(fatal(&e, as_json)),
    };
    let done = match crate::load::stream::summarize(&files, super::window(), slo) {
        Ok(s) => s,
        Err(crate::load::stream::StreamError::Load(e)) => return Ok(fatal(&e, as_json)),
        Err(crate::load::stream::StreamError::Unordered(why)) => return Err(why),
    };
    let s = &done.summary;
    let left_out = done.skipped.rejected();
    let stdout = if as_json {
        let mut v = summary_json(s, left_out, None);
        v["candidates_checked"] = json!(false);
        v["computed_by"] = json!("streamed");
        v["files"] = json!(files.len());
        v["passes"] = json!(done.passes);
        if super::only_streamed_figures(&files).is_none() {
            // Known absent, as a load says them: no counter samples, nothing of speculative decoding.
            for key in ["samples", "spec", "spec_drafted_tokens", "spec_accepted_tokens"] {
                v[key] = Value::Null;
            }
        }
        format!("{v:#}\n")
    } else {
        // The engine and model come from the files' footers (the meta record is the only one with an engine; a model
        // only when every file has one).
        let mut about = crate::trace::TraceBuilder::default().finish().0;
        about.meta = footer_meta(&files);
        // Candidates are never read by a stream: said as a load leaves them on disk.
        let with_candidates = files.iter().any(|f| {
            crate::format::parquet::stream::StreamFile::open(f)
                .is_ok_and(|f| f.has_column(crate::format::schema::CANDIDATES))
        });
        if with_candidates {
            about.candidates_on_disk = Some(crate::trace::CandidatesOnDisk {
                files: files.clone(),
                rows: Vec::new(),
            });
        }
        let mut lines: Vec<String> = summary_text(&about, s, left_out, "")
            .lines()
            .map(|l| {
                if l.starts_with("rejected records") {
                    format!(
                        "records           {} left out (only the rules of the fields read checked)",
                        thousands(left_out)
                    )
                } else {
                    l.to_owned()
                }
            })
            .collect();
        // The engine's lines where a loaded trace has them: before the objectives, the cost and the reasons.
        let mut engine = Vec::new();
        engine.extend(
            done.steps
                .as_ref()
                .map(|f| format!("{:<18}{}", "engine steps", steps_line(f))),
        );
        if done.samples > 0 {
            engine.push(format!(
                "{:<18}{} read; their counters are shown when the trace is loaded",
                "engine samples",
                thousands(done.samples)
            ));
        }
        let at = lines
            .iter()
            .position(|l| ["SLO ", "cost ", "finish reasons"].iter().any(|p| l.starts_with(p)))
            .unwrap_or(lines.len());
        lines.splice(at..at, engine);
        lines.join("\n") + "\n"
    };
    let why = over.map_or_else(String::new, |o| format!("{o}: "));
    Ok(Output {
        stdout,
        stderr: format!(
            "note: {why}streamed from {} Parquet file(s) in {} pass(es), without loading the trace; records are \
             checked only by the rules of the fields read (`tokenscope validate` checks every rule)\n",
            thousands(files.len() as u64),
            done.passes
        ),
        code: 0,
    })
}
