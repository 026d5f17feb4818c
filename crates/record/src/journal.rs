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

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::json;
use tokio::sync::{mpsc, oneshot};

use tokenscope_core::import::openai::Ending;

/// Lines waiting for the writer at most: a slow disk makes the streams wait rather than memory grow.
const QUEUED_LINES: usize = 4_096;

/// The ids a request's lines carry.
#[derive(Debug, Clone, Copy)]
pub struct Ids<'a> {
    /// The request's id in the recording (`rec-00001`).
    pub request_id: &'a str,
    /// The W3C trace id it carried.
    pub trace_id: &'a str,
}

/// How a request ended, for its last line.
#[derive(Debug, Clone, Copy)]
pub struct Ended<'a> {
    /// When it was sent (a retried send's time), Unix ns.
    pub sent_ns: i64,
    /// When it ended, Unix ns.
    pub end_ns: i64,
    /// How.
    pub ending: Ending,
    /// The HTTP status or what failed.
    pub error_code: Option<&'a str>,
    /// Why, in words.
    pub error: Option<&'a str>,
}

/// What the writer is sent.
#[derive(Debug)]
enum Message {
    /// A line to append.
    Line(String),
    /// The requests just written to a part of a rotating recording: their lines leave the journal (which is written
    /// again without them and put in place of the old in one rename), and the answer says how that went.
    Forget(HashSet<String>, oneshot::Sender<std::io::Result<()>>),
}

/// Where the recording's streams write their lines.
#[derive(Debug, Clone)]
pub struct Journal {
    lines: mpsc::Sender<Message>,
    /// Bytes appended so far.
    written: Arc<AtomicU64>,
    /// What waits for the disk.
    backlog: Arc<Backlog>,
}

/// How far the journal's writing is behind the streams, for a live view to say: lines handed to the writer and not
/// yet written, and how long the streams waited, in all, because [`QUEUED_LINES`] were waiting (the streams are held
/// then; nothing is dropped).
#[derive(Debug, Default)]
pub struct Backlog {
    queued: AtomicU64,
    held_ns: AtomicU64,
}

impl Backlog {
    /// Lines waiting to be written.
    pub fn queued(&self) -> u64 {
        self.queued.load(Ordering::Relaxed)
    }

    /// How long the streams were held, in all, waiting for the disk.
    pub fn held(&self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.held_ns.load(Ordering::Relaxed))
    }
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
    /// Creates (truncates) the journal at `path` and starts its writer; `backlog` counts what waits for the disk.
    ///
    /// # Errors
    /// The file cannot be created.
    pub fn create(path: &Path, backlog: Arc<Backlog>) -> std::io::Result<(Journal, Writer)> {
        let file = std::fs::File::create(path)?;
        let (tx, mut rx) = mpsc::channel::<Message>(QUEUED_LINES);
        let written = Arc::new(AtomicU64::new(0));
        let counted = Arc::clone(&written);
        let waiting = Arc::clone(&backlog);
        let path = path.to_owned();
        let task = tokio::task::spawn_blocking(move || {
            let mut out = std::io::BufWriter::new(file);
            let mut lines = 0u64;
            while let Some(message) = rx.blocking_recv() {
                match message {
                    Message::Line(line) => {
                        out.write_all(line.as_bytes())?;
                        out.write_all(b"\n")?;
                        lines += 1;
                        waiting.queued.fetch_sub(1, Ordering::Relaxed);
                        counted.fetch_add(line.len() as u64 + 1, Ordering::Relaxed);
                    }
                    Message::Forget(ids, answer) => {
                        out.flush()?;
                        let kept = forget(&path, &ids);
                        let reopened = kept.and_then(|()| std::fs::OpenOptions::new().append(true).open(&path));
                        match reopened {
                            Ok(f) => {
                                out = std::io::BufWriter::new(f);
                                let _ = answer.send(Ok(()));
                            }
                            // The journal cannot be written again: said to the rotation, and the recording's
                            // writing ends with the error.
                            Err(e) => {
                                let _ = answer.send(Err(std::io::Error::new(e.kind(), e.to_string())));
                                return Err(e);
                            }
                        }
                    }
                }
                // Drained: what is buffered goes to the system before the writer waits again.
                if rx.is_empty() {
                    out.flush()?;
                }
            }
            out.flush()?;
            Ok(lines)
        });
        Ok((
            Journal {
                lines: tx,
                written,
                backlog,
            },
            Writer { task },
        ))
    }

    /// Bytes appended to the journal so far (what a rotation by size counts).
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    /// Leaves out of the journal the lines of these requests (written to a part); waits for it to be done.
    ///
    /// # Errors
    /// The journal could not be written again.
    pub async fn forget(&self, ids: HashSet<String>) -> std::io::Result<()> {
        let (tx, rx) = oneshot::channel();
        if self.lines.send(Message::Forget(ids, tx)).await.is_err() {
            return Err(std::io::Error::other("the journal's writer has stopped"));
        }
        rx.await
            .unwrap_or_else(|_| Err(std::io::Error::other("the journal's writer has stopped")))
    }

    /// Hands a line to the writer: at once while fewer than [`QUEUED_LINES`] wait, else when one is written (the
    /// wait counted in the backlog).
    async fn send(&self, line: String) {
        self.backlog.queued.fetch_add(1, Ordering::Relaxed);
        let line = match self.lines.try_send(Message::Line(line)) {
            Ok(()) => return,
            Err(mpsc::error::TrySendError::Full(line)) => line,
            Err(mpsc::error::TrySendError::Closed(_)) => {
                self.backlog.queued.fetch_sub(1, Ordering::Relaxed);
                return;
            }
        };
        let held = std::time::Instant::now();
        if self.lines.send(line).await.is_err() {
            self.backlog.queued.fetch_sub(1, Ordering::Relaxed);
        }
        let ns = u64::try_from(held.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.backlog.held_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// A request about to be sent: a live view shows it waiting from here (a retried send says its time again in
    /// its later lines).
    pub async fn sent(&self, ids: Ids<'_>, sent_ns: i64) {
        let line = json!({
            "request_id": ids.request_id,
            "trace_id": ids.trace_id,
            "sent_ns": sent_ns,
            "events": [],
        });
        self.send(line.to_string()).await;
    }

    /// A chunk of a stream, as it arrived.
    pub async fn chunk(&self, ids: Ids<'_>, sent_ns: i64, at_ns: i64, data: &str) {
        let line = json!({
            "request_id": ids.request_id,
            "trace_id": ids.trace_id,
            "sent_ns": sent_ns,
            "events": [[at_ns, data]],
        });
        self.send(line.to_string()).await;
    }

    /// How a request ended.
    pub async fn end(&self, ids: Ids<'_>, e: Ended<'_>) {
        let line = json!({
            "request_id": ids.request_id,
            "trace_id": ids.trace_id,
            "sent_ns": e.sent_ns,
            "end_ns": e.end_ns,
            "ending": e.ending,
            "error_code": e.error_code,
            "error": e.error,
            "events": [],
        });
        self.send(line.to_string()).await;
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

/// The request id of a journal line, read without parsing it (`..."request_id":"rec-00001",...`, as the journal
/// writes it; inside a chunk's text every quote is escaped, so the key found is the line's own); `None` for a line
/// without one.
pub fn request_id_of(line: &[u8]) -> Option<&str> {
    let key = br#""request_id":""#;
    let from = memchr::memmem::find(line, key)? + key.len();
    let len = line[from..].iter().position(|&b| b == b'"' || b == b'\\')?;
    (line.get(from + len) == Some(&b'"')).then_some(())?;
    std::str::from_utf8(&line[from..from + len]).ok()
}

/// Writes the journal at `path` again without the lines of `ids`, beside it, then puts it in place in one rename: a
/// kill at any moment leaves the old journal or the new, whole.
fn forget(path: &Path, ids: &HashSet<String>) -> std::io::Result<()> {
    use std::io::BufRead;
    // Hidden beside it: a directory opened as a trace never reads it half written.
    let name = path
        .file_name()
        .map_or_else(Default::default, |n| n.to_string_lossy().into_owned());
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    {
        let mut input = std::io::BufReader::new(std::fs::File::open(path)?);
        let mut out = std::io::BufWriter::new(std::fs::File::create(&tmp)?);
        let mut line = Vec::new();
        loop {
            line.clear();
            if input.read_until(b'\n', &mut line)? == 0 {
                break;
            }
            let body = line.strip_suffix(b"\n").unwrap_or(&line);
            // Known by its id alone, not parsed: the streams wait while the journal is written again.
            if request_id_of(body).is_some_and(|id| ids.contains(id)) {
                continue;
            }
            out.write_all(body)?;
            out.write_all(b"\n")?;
        }
        // Handed to the system, not synced to the disk: as for every line of the journal, a killed process loses
        // nothing, a power loss what the disk had not been given yet. (A sync here held the streams for as long as
        // the disk took, at every part.)
        out.flush()?;
    }
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lines_request_id_is_its_own_not_one_in_its_chunks_text() {
        let data = serde_json::json!({"choices": [{"delta": {"content": "{\"request_id\":\"rec-99999\"}"}}]});
        let line = json!({"events": [[1, data.to_string()]], "request_id": "rec-00007", "sent_ns": 1}).to_string();
        assert_eq!(request_id_of(line.as_bytes()), Some("rec-00007"));
        assert_eq!(request_id_of(br#"{"events":[]}"#), None);
        // Cut before the id's end: none.
        assert_eq!(request_id_of(br#"{"request_id":"rec-0"#), None);
    }

    #[test]
    fn every_line_handed_to_the_writer_is_counted_until_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("j.partial.jsonl");
        let backlog = Arc::new(Backlog::default());
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let lines = runtime.block_on(async {
            let (journal, writer) = Journal::create(&path, Arc::clone(&backlog)).unwrap();
            let ids = Ids {
                request_id: "rec-00000",
                trace_id: "0af7651916cd43dd8448eb211c80319c",
            };
            journal.sent(ids, 1).await;
            for k in 0..9 {
                journal.chunk(ids, 1, 10 + k, "{}").await;
            }
            drop(journal);
            writer.finish().await.unwrap()
        });
        assert_eq!(lines, 10);
        assert_eq!(backlog.queued(), 0);
        assert_eq!(
            backlog.held(),
            std::time::Duration::ZERO,
            "4,096 may wait: the streams were never held"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 10);
    }
}
