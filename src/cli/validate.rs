//! `tokenscope validate TRACE [--json]`: loads a trace and reports every rejected record and warning.
//! Exit code 0 when the trace loads (even with rejected records), 1 when it cannot be loaded at all.

use std::path::Path;
use std::path::PathBuf;

use serde_json::{Value, json};

use super::{Output, thousands};
use crate::ingest::LoadError;
use crate::trace::report::{Encoding, Report};

/// The JSON form of a report: `{records, kept, rejected: [...], rejected_total, rejected_by_kind, warnings: [...],
/// warnings_total, fatal}`.
pub fn report_json(report: &Report, fatal: Option<&str>) -> Value {
    let rejected: Vec<Value> = report
        .rejected
        .iter()
        .map(|r| {
            let file = report.file_of(r.place);
            let mut v = json!({
                "file": file.map(|f| f.path.as_str()),
                "kind": r.problem.name(),
                "record": r.record,
                "field": r.field,
                "reason": r.reason,
            });
            let key = match file.map(|f| f.encoding) {
                Some(Encoding::Parquet) => "row",
                Some(Encoding::Items) => "item",
                _ => "line",
            };
            v[key] = json!(r.place.at);
            v
        })
        .collect();
    let warnings: Vec<Value> = report
        .warnings
        .iter()
        .map(|w| json!({"kind": w.concern.name(), "request_id": w.request_id, "message": w.message}))
        .collect();
    let by_kind: serde_json::Map<String, Value> = report
        .rejected_by_problem
        .iter()
        .map(|(p, n)| (p.name().to_owned(), json!(n)))
        .collect();
    json!({
        "records": report.records,
        "kept": report.kept(),
        "rejected": rejected,
        "rejected_total": report.rejected_count(),
        "rejected_by_kind": by_kind,
        "warnings": warnings,
        "warnings_total": report.warning_count(),
        "notes": report.notes,
        "fatal": fatal,
    })
}

/// The human form of a report.
pub fn report_text(report: &Report) -> String {
    let mut out = String::new();
    let files: Vec<&str> = report.files.iter().map(|f| f.path.as_str()).collect();
    out.push_str(&format!(
        "{}: {} records, {} kept, {} rejected, {} warnings\n",
        files.join(", "),
        thousands(report.records),
        thousands(report.kept()),
        thousands(report.rejected_count()),
        thousands(report.warning_count())
    ));
    if !report.notes.is_empty() {
        out.push_str("\nnotes on the source:\n");
        for n in &report.notes {
            out.push_str(&format!("  {n}\n"));
        }
    }
    if !report.rejected.is_empty() {
        out.push_str("\nrejected:\n");
        for r in &report.rejected {
            let what = match (r.record, r.field) {
                (Some(rec), Some(f)) => format!("{rec}.{f}"),
                (None, Some(f)) => f.to_owned(),
                (Some(rec), None) => rec.to_owned(),
                (None, None) => String::new(),
            };
            let what = if what.is_empty() { what } else { format!(" {what}:") };
            out.push_str(&format!(
                "  {}  [{}]{what} {}\n",
                report.describe(r.place),
                r.problem.name(),
                r.reason
            ));
        }
        let shown = report.rejected.len() as u64;
        if report.rejected_count() > shown {
            out.push_str(&format!(
                "  ... and {} more\n",
                thousands(report.rejected_count() - shown)
            ));
        }
        let counts: Vec<String> = report
            .rejected_by_problem
            .iter()
            .map(|(p, n)| format!("{} {}", p.name(), thousands(*n)))
            .collect();
        out.push_str(&format!("  by kind: {}\n", counts.join(", ")));
    }
    if !report.warnings.is_empty() {
        out.push_str("\nwarnings:\n");
        for w in &report.warnings {
            out.push_str(&format!("  [{}] {}\n", w.concern.name(), w.message));
        }
        let shown = report.warnings.len() as u64;
        if report.warning_count() > shown {
            out.push_str(&format!(
                "  ... and {} more\n",
                thousands(report.warning_count() - shown)
            ));
        }
    }
    out
}

/// The arguments of `validate`.
#[derive(Debug, Clone, clap::Args)]
pub struct ValidateArgs {
    /// The trace: one file or directory, or several files of one run (a client's recording with the server's
    /// files: they are joined).
    #[arg(required = true, num_args = 1..)]
    pub traces: Vec<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    // The part of the trace to read, the memory budget, the importer, a server log's clock.
    #[command(flatten)]
    pub reading: super::globals::GlobalArgs,
}

impl ValidateArgs {
    /// Runs `validate`.
    pub fn run(&self) -> Output {
        let inputs: Vec<&Path> = self.traces.iter().map(PathBuf::as_path).collect();
        run(&inputs, self.json)
    }
}

/// Runs `validate`.
pub fn run(paths: &[&Path], as_json: bool) -> Output {
    match super::load(paths, crate::load::LoadOptions::default()) {
        Ok(loaded) => Output {
            stdout: if as_json {
                format!("{:#}\n", report_json(&loaded.report, None))
            } else {
                report_text(&loaded.report)
            },
            stderr: String::new(),
            code: 0,
        },
        Err(e) => fatal(&e, as_json),
    }
}

/// The output of a load that failed.
pub fn fatal(e: &LoadError, as_json: bool) -> Output {
    let message = e.to_string();
    if as_json {
        Output {
            stdout: format!("{:#}\n", report_json(&Report::default(), Some(&message))),
            stderr: String::new(),
            code: 1,
        }
    } else {
        Output::error(message, 1)
    }
}
