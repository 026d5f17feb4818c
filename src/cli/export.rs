//! `tokenscope export TRACE --from-ms A --to-ms B [--requests ID,..] [--redact] -o OUT`: the slice of a trace for
//! an incident report, as a trace file (`.parquet`, `.jsonl`…) or as Chrome Trace Event JSON (`.json`) for
//! Perfetto UI. Times are ms after the trace's start (`Trace::start_ns`, the waterfall ruler's 0).

use std::path::Path;
use std::path::PathBuf;

use super::{Output, thousands, validate};
use crate::format;
use crate::trace::slice::{redact, slice};

/// What to export.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportOptions {
    /// Range start, ms after the trace's start.
    pub from_ms: f64,
    /// Range end, ms after the trace's start.
    pub to_ms: f64,
    /// Only these requests (ids), when given.
    pub requests: Option<Vec<String>>,
    /// Replace token and candidate texts with hashes.
    pub redact: bool,
}

fn error(message: String) -> Output {
    Output::error(message, 2)
}

/// The arguments of `export`.
#[derive(Debug, Clone, clap::Args)]
pub struct ExportArgs {
    /// The trace: one file or directory, or several files of one run (a client's recording with the server's
    /// files: they are joined).
    #[arg(required = true, num_args = 1..)]
    pub traces: Vec<PathBuf>,
    /// Range start, ms after the trace's start.
    #[arg(long, value_name = "MS", allow_negative_numbers = true)]
    pub from_ms: f64,
    /// Range end, ms after the trace's start.
    #[arg(long, value_name = "MS", allow_negative_numbers = true)]
    pub to_ms: f64,
    /// Only these requests (comma-separated ids).
    #[arg(long, value_delimiter = ',')]
    pub requests: Option<Vec<String>>,
    /// Replace token and candidate texts with hashes (keyed per export; repetitions still show).
    #[arg(long)]
    pub redact: bool,
    /// The file to write.
    #[arg(short, long)]
    pub output: PathBuf,
    // The part of the trace to read, the memory budget, the importer, a server log's clock.
    #[command(flatten)]
    pub reading: super::globals::GlobalArgs,
}

impl ExportArgs {
    /// Runs `export`.
    pub fn run(&self) -> Output {
        let options = ExportOptions {
            from_ms: self.from_ms,
            to_ms: self.to_ms,
            requests: self.requests.clone(),
            redact: self.redact,
        };
        let inputs: Vec<&Path> = self.traces.iter().map(PathBuf::as_path).collect();
        run(&inputs, &options, &self.output)
    }
}

/// Runs `export`.
pub fn run(inputs: &[&Path], options: &ExportOptions, output: &Path) -> Output {
    let (a, b) = (options.from_ms, options.to_ms);
    if !(a.is_finite() && b.is_finite() && a >= 0.0 && b > a) {
        return error(format!(
            "--from-ms {a} --to-ms {b}: give 0 <= FROM < TO, in ms after the trace's start"
        ));
    }
    let is_chrome = output.extension().is_some_and(|e| e == "json");
    if !is_chrome && format::encoding_of(output).is_none() {
        return error(format!(
            "{}: give the output a .parquet, .jsonl, .jsonl.gz, .jsonl.zst or .json (Chrome trace) name",
            output.display()
        ));
    }
    let loaded = match super::load(inputs, crate::load::LoadOptions::default()) {
        Ok(l) => l,
        Err(e) => return validate::fatal(&e, false),
    };
    let trace = &loaded.trace;
    let (from_ns, to_ns) = (trace.at_ms(a), trace.at_ms(b));
    let only = match &options.requests {
        None => None,
        Some(ids) => {
            let rows: Vec<Option<u32>> = ids.iter().map(|id| trace.request_row(id)).collect();
            let unknown: Vec<&str> = ids
                .iter()
                .zip(&rows)
                .filter(|(_, r)| r.is_none())
                .map(|(id, _)| id.as_str())
                .collect();
            if !unknown.is_empty() {
                return error(format!(
                    "no request with id {} in {}",
                    unknown.join(", "),
                    inputs
                        .iter()
                        .map(|p| p.display().to_string())
                        .collect::<Vec<_>>()
                        .join(" + ")
                ));
            }
            Some(rows.into_iter().flatten().collect::<Vec<u32>>())
        }
    };
    let mut part = slice(trace, from_ns, to_ns, only.as_deref());
    if part.request_count() == 0 && part.iterations.is_empty() && part.samples.is_empty() {
        return error(format!(
            "nothing in {a} ms .. {b} ms after the trace's start: no request or step touches it"
        ));
    }
    if options.redact {
        redact(&mut part);
    }
    let written = if is_chrome {
        crate::export::perfetto::write(&part, output).map_err(|e| format!("cannot write {}: {e}", output.display()))
    } else {
        format::write(&part, output).map_err(|e| e.to_string())
    };
    if let Err(e) = written {
        return Output::error(e, 1);
    }
    Output {
        stdout: format!(
            "wrote {}: {} requests, {} tokens, {} steps from {a} ms to {b} ms{}\n",
            output.display(),
            thousands(part.request_count() as u64),
            thousands(part.token_count() as u64),
            thousands(part.iterations.len() as u64),
            if options.redact { ", texts redacted" } else { "" }
        ),
        stderr: String::new(),
        code: 0,
    }
}
