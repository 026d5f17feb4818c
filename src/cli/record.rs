//! `tokenscope record --url URL --prompts FILE [...] -o OUT`: records a token-level trace from an OpenAI-compatible
//! server (see [`crate::record`]).

use std::path::{Path, PathBuf};

use super::{Output, thousands};
use crate::record::{self, RecordOptions};

/// Parses `--header "Name: value"`. A mistake is said without the text given: a header usually carries a key.
pub fn parse_header(s: &str) -> Result<(String, String), String> {
    let (k, v) = s.split_once(':').ok_or_else(|| {
        format!(
            "--header: give it as \"Name: value\" (no ':' in the {} characters given, not shown: they may be a key)",
            s.chars().count()
        )
    })?;
    let k = k.trim();
    if k.is_empty() {
        return Err("--header: the name before ':' is empty".to_owned());
    }
    Ok((k.to_owned(), v.trim().to_owned()))
}

/// Parses `--extra-body '{...}'`: a JSON object.
pub fn parse_extra(s: &str) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    match serde_json::from_str::<serde_json::Value>(s) {
        Ok(serde_json::Value::Object(m)) => Ok(m),
        Ok(other) => Err(format!("--extra-body: {other} is not a JSON object")),
        Err(e) => Err(format!("--extra-body: not JSON ({e})")),
    }
}

/// Runs a recording and writes its trace (and raw capture).
pub fn run(
    options: &RecordOptions,
    prompts_path: &Path,
    raw: Option<&PathBuf>,
    server_log: Option<&Path>,
    output: &Path,
    progress: bool,
) -> Output {
    if crate::format::encoding_of(output).is_none() {
        return Output::error(
            format!(
                "{}: give the output a .parquet, .jsonl, .jsonl.gz or .jsonl.zst name",
                output.display()
            ),
            2,
        );
    }
    let prompts = match record::prompts::load(prompts_path) {
        Ok(p) => p,
        Err(e) => return Output::error(e, 2),
    };
    let mut stderr = String::new();
    for (line, why) in &prompts.rejected {
        stderr.push_str(&format!(
            "note: {}:{line}: {why}; line skipped\n",
            prompts_path.display()
        ));
    }
    // What is received is written as it comes, beside the output: a killed recording leaves it, and it opens.
    let journal = record::journal::path_for(output);
    let options = RecordOptions {
        journal: Some(journal.clone()),
        ..options.clone()
    };
    let rec = match record::run_recording(&options, &prompts.prompts, progress, None) {
        Ok(r) => r,
        Err(e) => return Output::error(e, 2),
    };
    if let Some(raw) = raw
        && let Err(e) = record::write_raw(&rec.outcomes, raw)
    {
        return Output::error(format!("cannot write {}: {e}", raw.display()), 1);
    }
    // The server's half, when given: joined with the recording, or the recording alone and why.
    let joined = server_log.map(|log| join_server_log(&rec, log));
    let (trace, notes) = match joined {
        Some(Ok((trace, notes))) => (std::borrow::Cow::Owned(trace), notes),
        Some(Err(why)) => {
            stderr.push_str(&format!(
                "note: the server's log was not joined, the recording is written alone: {why}\n"
            ));
            (std::borrow::Cow::Borrowed(&rec.trace), rec.report.notes.clone())
        }
        None => (std::borrow::Cow::Borrowed(&rec.trace), rec.report.notes.clone()),
    };
    if let Err(e) = crate::format::write(&trace, output) {
        return Output::error(
            format!(
                "{e}; what was recorded is in {}, which opens as a trace",
                journal.display()
            ),
            1,
        );
    }
    // Written whole: the journal has done its job.
    let _ = std::fs::remove_file(&journal);
    for n in &notes {
        stderr.push_str(&format!("note: {n}\n"));
    }
    let failed: Vec<&record::client::Outcome> = rec
        .outcomes
        .iter()
        .filter(|o| o.ending != record::client::Ending::Done)
        .collect();
    for o in failed.iter().take(5) {
        stderr.push_str(&format!(
            "note: {}: {}\n",
            record::request_id(o.index),
            o.error.as_deref().unwrap_or("failed")
        ));
    }
    let ok = rec.outcomes.len() - failed.len();
    Output {
        stdout: format!(
            "wrote {} ({} requests, {} tokens): {}\n",
            output.display(),
            thousands(trace.request_count() as u64),
            thousands(trace.token_count() as u64),
            record::summary_line(&rec)
        ),
        stderr,
        code: i32::from(ok == 0 && !rec.outcomes.is_empty()),
    }
}

/// The recording joined with the server's side of the run read from `log`: the joined trace and its notes.
fn join_server_log(rec: &record::Recording, log: &Path) -> Result<(crate::trace::Trace, Vec<String>), String> {
    use crate::load::join;
    let server = crate::load::load(log, &crate::ingest::Progress::default()).map_err(|e| e.to_string())?;
    let names = ("the recording", &*log.display().to_string());
    let pairs = join::pair(&rec.trace, &server.trace, (names.0, names.1)).map_err(|e| e.to_string())?;
    let mut report = rec.report.clone();
    report.notes.extend(server.report.notes);
    let (trace, report) = join::build(rec.trace.clone(), &server.trace, &pairs, report);
    Ok((trace, report.notes))
}
