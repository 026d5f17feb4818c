//! The recording's journal: what the recorder receives, written as it comes, so that a recording survives its
//! process being killed, and a live view can show it as it comes. Each request's send is a line `{request_id,
//! trace_id, sent_ns, events: []}`, each chunk a line `{request_id, trace_id, sent_ns, events: [[t_ns, data]]}` as
//! it arrives, each ending a line `{request_id, sent_ns, end_ns, ending, error_code, error, events: []}`: the raw
//! capture's fields over several lines, which `tokenscope` opens as a trace (kind `openai-stream`). Requests that
//! never got their ending line (in flight at a `kill -9`) load up to their last chunk, marked cut.
//!
//! Lines go through a bounded channel to one writer on tokio's blocking pool: a full channel makes the streams wait
//! (nothing is dropped). The writer hands every line to the system before waiting for the next (a killed process
//! loses nothing the system holds); a power loss can lose what the disk had not yet been given.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::json;
use tokio::sync::mpsc;

use super::client::{Outcome, RequestIds};

/// Lines waiting for the writer at most: a slow disk makes the streams wait rather than memory grow.
const QUEUED_LINES: usize = 4_096;

/// Where the recording's streams write their lines.
#[derive(Debug, Clone)]
pub struct Journal {
    lines: mpsc::Sender<String>,
}

/// The writer's end: join it to learn how writing went.
pub struct Writer {
    task: tokio::task::JoinHandle<std::io::Result<u64>>,
}

/// The journal's path beside the output: `rec.parquet` → `rec.parquet.partial.jsonl`.
pub fn path_for(output: &Path) -> PathBuf {
    let mut name = output.as_os_str().to_owned();
    name.push(".partial.jsonl");
    PathBuf::from(name)
}

impl Journal {
    /// Creates (truncates) the journal at `path` and starts its writer.
    ///
    /// # Errors
    /// The file cannot be created.
    pub fn create(path: &Path) -> std::io::Result<(Journal, Writer)> {
        let file = std::fs::File::create(path)?;
        let (tx, mut rx) = mpsc::channel::<String>(QUEUED_LINES);
        let task = tokio::task::spawn_blocking(move || {
            let mut out = std::io::BufWriter::new(file);
            let mut written = 0u64;
            while let Some(line) = rx.blocking_recv() {
                out.write_all(line.as_bytes())?;
                out.write_all(b"\n")?;
                written += 1;
                // Drained: what is buffered goes to the system before the writer waits again.
                if rx.is_empty() {
                    out.flush()?;
                }
            }
            out.flush()?;
            Ok(written)
        });
        Ok((Journal { lines: tx }, Writer { task }))
    }

    /// A request about to be sent: a live view shows it waiting from here (a retried send says its time again in
    /// its later lines).
    pub async fn sent(&self, ids: &RequestIds, sent_ns: i64) {
        let line = json!({
            "request_id": ids.request_id,
            "trace_id": ids.trace_id,
            "sent_ns": sent_ns,
            "events": [],
        });
        let _ = self.lines.send(line.to_string()).await;
    }

    /// A chunk of a stream, as it arrived.
    pub async fn chunk(&self, ids: &RequestIds, sent_ns: i64, at_ns: i64, data: &str) {
        let line = json!({
            "request_id": ids.request_id,
            "trace_id": ids.trace_id,
            "sent_ns": sent_ns,
            "events": [[at_ns, data]],
        });
        let _ = self.lines.send(line.to_string()).await;
    }

    /// How a request ended.
    pub async fn end(&self, ids: &RequestIds, o: &Outcome) {
        let line = json!({
            "request_id": ids.request_id,
            "trace_id": ids.trace_id,
            "sent_ns": o.sent_ns,
            "end_ns": o.end_ns,
            "ending": o.ending,
            "error_code": o.error_code,
            "error": o.error,
            "events": [],
        });
        let _ = self.lines.send(line.to_string()).await;
    }
}

impl Writer {
    /// Waits for every line sent to be written (the journals' senders all dropped first); the lines written.
    ///
    /// # Errors
    /// A write failed.
    pub async fn finish(self) -> std::io::Result<u64> {
        self.task.await.unwrap_or_else(|e| Err(std::io::Error::other(e)))
    }
}
