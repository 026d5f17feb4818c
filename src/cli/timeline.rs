//! `tokenscope timeline TRACE [--every 10s] [--by LABEL] [--format table|csv|json]`: request rate, throughput,
//! goodput, latency percentiles, queue, KV use and preemptions per time bucket (`docs/QUERY.md`).

use std::path::Path;
use std::path::PathBuf;
use std::time::Duration;

use super::Output;
use super::query::{Format, print};
use super::validate::fatal;
use crate::analysis::summary::{GroupBy, Slo};
use crate::query::{Rows, TimelineOptions, auto_every, timeline};

/// Buckets a timeline is cut into when no width is given (at most).
pub const AUTO_BUCKETS: u32 = 60;

/// A bucket width from the command line: `10s`, `500ms`, `5m`, `1h` (humantime's units), more than zero.
pub fn parse_every(text: &str) -> Result<Duration, String> {
    match humantime::parse_duration(text) {
        Ok(d) if !d.is_zero() => Ok(d),
        Ok(_) => Err(format!("{text}: a bucket is wider than zero")),
        Err(e) => Err(format!("{text}: {e}; write a width like 10s, 500ms, 5m or 1h")),
    }
}

/// The arguments of `timeline`.
#[derive(Debug, Clone, clap::Args)]
pub struct TimelineArgs {
    /// The trace.
    pub trace: PathBuf,
    /// Bucket width (10s, 500ms, 5m); by default the round width that makes at most 60 buckets.
    #[arg(long, value_name = "WIDTH", value_parser = parse_every)]
    pub every: Option<std::time::Duration>,
    /// One series per value of this request label (steps' series only by source).
    #[arg(long, value_enum)]
    pub by: Option<GroupBy>,
    /// How to print the series.
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
    #[command(flatten)]
    pub slo: super::SloArgs,
    /// Compute from the Parquet files (a file, a directory, a partitioned dataset) without loading them: streamed a
    /// few row groups at a time, in memory set by the requests and steps, not the tokens. Chosen by itself for a
    /// Parquet trace whose figures all stream (no counter samples, no speculative decoding), or that would not fit
    /// the memory budget, unless --in-memory.
    #[arg(long, conflicts_with = "in_memory")]
    pub out_of_core: bool,
    /// Load the trace whole before computing the series (for comparison: they are the same, a mean's last digit
    /// aside).
    #[arg(long)]
    pub in_memory: bool,
    /// Say on standard error how the series were computed (streamed or loaded) and why.
    #[arg(long)]
    pub verbose: bool,
    // The part of the trace to read, the memory budget, the importer, a server log's clock.
    #[command(flatten)]
    pub reading: super::globals::GlobalArgs,
}

impl TimelineArgs {
    /// Runs `timeline`.
    pub fn run(&self) -> Output {
        let slo = self.slo.objectives().slo();
        if self.out_of_core {
            return run_out_of_core(&self.trace, self.every, self.by, slo, self.format);
        }
        let mut why_load = "--in-memory".to_owned();
        if !self.in_memory {
            if let Some(over) = super::over_budget(&self.trace) {
                let mut out = run_out_of_core(&self.trace, self.every, self.by, slo, self.format);
                // What cannot be streamed is the load's to open, or to refuse saying what fits.
                if out.code == 0 {
                    out.stderr = format!("note: {over}: {}", out.stderr.trim_start_matches("note: "));
                    return out;
                }
            }
            // A Parquet trace whose series all stream takes that path, its fastest.
            match super::streams_exactly(&self.trace) {
                Ok(()) => {
                    let mut out = run_out_of_core(&self.trace, self.every, self.by, slo, self.format);
                    if out.code == 0 {
                        if self.verbose {
                            out.stderr.insert_str(0, "note: a Parquet trace's fastest path\n");
                        } else {
                            out.stderr.clear();
                        }
                        return out;
                    }
                    out.stderr.trim().clone_into(&mut why_load);
                }
                Err(why) => why_load = why,
            }
        }
        let mut out = run(&self.trace, self.every, self.by, slo, self.format);
        if self.verbose {
            out.stderr
                .insert_str(0, &format!("note: the trace was loaded whole: {why_load}\n"));
        }
        out
    }
}

/// Computes the timeline of the trace at `path`; buckets of `every`, or the round width that makes at most
/// [`AUTO_BUCKETS`] of them.
pub fn run(path: &Path, every: Option<Duration>, by: Option<GroupBy>, slo: Slo, format: Format) -> Output {
    let options = crate::load::LoadOptions {
        lazy_candidates: true,
        ..crate::load::LoadOptions::default()
    };
    let loaded = match super::load(&[path], options) {
        Ok(l) => l,
        Err(e) => return fatal(&e, false),
    };
    let trace = &loaded.trace;
    let every_ns = if let Some(d) = every {
        i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
    } else {
        let end = (0..u32::try_from(trace.request_count()).unwrap_or(u32::MAX))
            .filter_map(|r| trace.finish_ns(r))
            .max()
            .unwrap_or_else(|| trace.start_ns());
        auto_every(end - trace.start_ns(), AUTO_BUCKETS)
    };
    match timeline(trace, &TimelineOptions { every_ns, by, slo }) {
        Ok(df) => present(&Rows::of(&df), every_ns, slo, format),
        Err(e) => Output::error(e, 2),
    }
}

/// Computes the timeline of the Parquet files at `path` (a file, a directory, a partitioned dataset) without
/// loading them, streamed a few row groups at a time: the figures of [`run`] on the loaded trace.
pub fn run_out_of_core(path: &Path, every: Option<Duration>, by: Option<GroupBy>, slo: Slo, format: Format) -> Output {
    let files = match super::window_files(path) {
        Ok(f) => f,
        Err(e) => return fatal(&e, false),
    };
    let options = TimelineOptions {
        every_ns: every.map_or(1, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)),
        by,
        slo,
    };
    let auto = every.is_none().then_some(AUTO_BUCKETS);
    match crate::query::dataset::timeline_files(&files, super::window(), &options, auto) {
        Ok((df, every_ns)) => {
            let mut out = present(&Rows::of(&df), every_ns, slo, format);
            out.stderr = format!(
                "note: streamed from {} Parquet file(s), without loading the trace; records are checked only by the \
                 rules of the fields read (`tokenscope validate` checks every rule)\n",
                files.len()
            );
            out
        }
        Err(e) => Output::error(format!("{}: {e}", path.display()), 2),
    }
}

/// The timeline as printed: a table says its bucket width and objectives first.
fn present(rows: &Rows, every_ns: i64, slo: Slo, format: Format) -> Output {
    let mut out = print(rows, format);
    if format == Format::Table {
        let width = humantime::format_duration(Duration::from_nanos(u64::try_from(every_ns).unwrap_or(0)));
        let objectives = match (slo.ttft_ms, slo.tpot_ms) {
            (None, None) => "no objectives, no goodput".to_owned(),
            (t, p) => {
                let mut parts = Vec::new();
                parts.extend(t.map(|t| format!("TTFT <= {t} ms")));
                parts.extend(p.map(|p| format!("TPOT <= {p} ms")));
                format!("goodput against {}", parts.join(" and "))
            }
        };
        out.stdout = format!("buckets of {width}; {objectives}\n{}", out.stdout);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_in_human_units() {
        assert_eq!(parse_every("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_every("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_every("5m"), Ok(Duration::from_mins(5)));
        assert!(parse_every("0s").is_err_and(|e| e.contains("wider than zero")));
        assert!(parse_every("ten").is_err_and(|e| e.contains("10s, 500ms")));
    }
}
