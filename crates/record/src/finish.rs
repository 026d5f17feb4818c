//! The end of a recording, for `record` and the app's live recording alike: the raw capture written when asked,
//! the server's log joined when given, the trace written, and the journal removed once the trace is whole on disk.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use super::{Recording, client, journal, request_id, write_raw};
use tokenscope_core::load::Loaded;
use tokenscope_core::trace::Trace;

/// Where a recording goes when it ends.
#[derive(Debug, Clone, Copy)]
pub struct Finish<'a> {
    /// The raw capture of every stream (`--raw`), when asked for.
    pub raw: Option<&'a PathBuf>,
    /// The server's log of the run, joined with the recording when given.
    pub server_log: Option<&'a Path>,
    /// The trace to write.
    pub output: &'a Path,
}

/// What was written.
#[derive(Debug)]
pub struct Written {
    /// The trace written (joined with the server's side when it joined).
    pub trace: Trace,
    /// Lines for standard error: the load's notes, a log that did not join and why, the first failed requests.
    pub notes: String,
}

impl Finish<'_> {
    /// Writes the recording; the journal beside the output is removed once the trace is written.
    ///
    /// # Errors
    /// The raw capture or the trace cannot be written (the journal is then kept, and said).
    pub fn write(&self, rec: &Recording) -> Result<Written, String> {
        let mut notes = String::new();
        if let Some(raw) = self.raw {
            write_raw(&rec.outcomes, raw).map_err(|e| format!("cannot write {}: {e}", raw.display()))?;
        }
        // The server's half, when given: joined with the recording, or the recording alone and why.
        let recording = || tokenscope_core::load::Loaded {
            trace: rec.trace.clone(),
            report: rec.report.clone(),
        };
        let (trace, load_notes) = match self.server_log.map(|log| join_server_log(recording(), log)) {
            Some((joined, None)) => (Cow::Owned(joined.trace), joined.report.notes),
            Some((_, Some(why))) => {
                notes.push_str(&format!(
                    "note: the server's log was not joined, the recording is written alone: {why}\n"
                ));
                (Cow::Borrowed(&rec.trace), rec.report.notes.clone())
            }
            None => (Cow::Borrowed(&rec.trace), rec.report.notes.clone()),
        };
        let journal = journal::path_for(self.output);
        tokenscope_core::format::write(&trace, self.output).map_err(|e| {
            format!(
                "{e}; what was recorded is in {}, which opens as a trace",
                journal.display()
            )
        })?;
        // Written whole: the journal has done its job.
        let _ = std::fs::remove_file(&journal);
        for n in &load_notes {
            notes.push_str(&format!("note: {n}\n"));
        }
        for o in rec.outcomes.iter().filter(|o| o.ending != client::Ending::Done).take(5) {
            notes.push_str(&format!(
                "note: {}: {}\n",
                request_id(o.index),
                o.error.as_deref().unwrap_or("failed")
            ));
        }
        Ok(Written {
            trace: trace.into_owned(),
            notes,
        })
    }
}

/// A recording joined with the server's side of the run read from `log` (at its end, or as both are written in a
/// live view); the recording alone, with the reason, when the log cannot be read or does not join.
pub fn join_server_log(recording: Loaded, log: &Path) -> (Loaded, Option<String>) {
    match tokenscope_core::load::load(log, &tokenscope_core::ingest::Progress::default()) {
        Ok(server) => join_loaded(recording, &server, log),
        Err(e) => (recording, Some(e.to_string())),
    }
}

/// A recording joined with the server's side of the run, read from `log`; the recording alone, with the reason,
/// when they do not join.
pub fn join_loaded(recording: Loaded, server: &Loaded, log: &Path) -> (Loaded, Option<String>) {
    use tokenscope_core::load::join;
    let names = ("the recording", &*log.display().to_string());
    match join::pair(&recording.trace, &server.trace, names) {
        Ok(pairs) => {
            let mut report = recording.report;
            report.notes.extend(server.report.notes.iter().cloned());
            let (trace, report) = join::build(recording.trace, &server.trace, &pairs, report);
            (Loaded { trace, report }, None)
        }
        Err(e) => (recording, Some(e.to_string())),
    }
}
