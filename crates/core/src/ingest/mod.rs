//! What every reader of a trace shares, below the loader and beside the model: the error that stops a load
//! ([`LoadError`]), the progress and cancel flag a load reports to ([`Progress`]), the raw record every reader
//! builds ([`raw`]), the one validator that turns raw records into model rows ([`validate`]), and the
//! containment of a panic inside a third-party decoder, which costs the rows it was decoding, not the load
//! ([`quiet`]).
//!
//! The native format's readers (`format/`) and the importers (`import/`) both build on this module; the loader
//! (`load/`) sits above them all.

pub mod quiet;
pub mod raw;
pub mod validate;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::trace::{Trace, TraceBuilder};

/// Why a trace could not be loaded at all. Record-level problems are not errors: they are in the [`Report`](crate::trace::report::Report).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file or directory cannot be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The system's reason.
        source: std::io::Error,
    },
    /// The file is not readable Parquet (for example truncated: the footer is at the end).
    #[error(
        "{path} is not a readable Parquet file: {message}. If it was truncated (an interrupted copy or dump), \
             copy or dump it again"
    )]
    Parquet {
        /// The path.
        path: String,
        /// The Parquet reader's words.
        message: String,
    },
    /// A column the file's records need is absent.
    #[error("{path}: required column {column:?} is absent: {detail}")]
    MissingColumn {
        /// The path.
        path: String,
        /// The column.
        column: String,
        /// Which records need it and what to do.
        detail: String,
    },
    /// The path is neither a trace file nor a directory of them.
    #[error(
        "{path}: not a trace file tokenscope recognises. It reads trace format v1 (.parquet, .jsonl, .jsonl.gz, \
         .jsonl.zst, or a directory of them) and what engines and tools write: {kinds}. If the file is one of \
         those, name it: tokenscope convert FILE --from KIND -o OUT.parquet"
    )]
    UnknownFormat {
        /// The path.
        path: String,
        /// The kinds of file the importers read (`import::Kind::names`).
        kinds: String,
    },
    /// A directory without trace files.
    #[error("{path}: the directory has no .parquet or .jsonl files")]
    EmptyDirectory {
        /// The path.
        path: String,
    },
    /// The user cancelled the load.
    #[error("loading was cancelled")]
    Cancelled,
    /// A file that only a full load reads, given to a path that reads Parquet alone.
    #[error(
        "{path}: the figures of a dataset are computed from Parquet files only; convert it first: tokenscope \
         convert {path} -o OUT.parquet"
    )]
    NotParquet {
        /// The path.
        path: String,
    },
    /// The trace would take more memory than the budget allows.
    #[error(
        "{path}: loading it would take about {} of memory, more than the budget of {}: {advice}",
        size(*need),
        size(*budget)
    )]
    OverBudget {
        /// The path(s).
        path: String,
        /// The estimate, bytes.
        need: u64,
        /// The budget, bytes.
        budget: u64,
        /// What can be opened instead.
        advice: String,
    },
    /// A client-side and a server-side trace that do not look like two halves of one run.
    #[error(
        "cannot join {client} with {server}: {why}. Open each on its own, or give the client's recording with the \
         server's files of the same run"
    )]
    Join {
        /// The client side's path(s).
        client: String,
        /// The server side's path(s).
        server: String,
        /// Why they do not belong together.
        why: String,
    },
    /// Files read with a named importer (`--from KIND`) that gave no request, step, sample or token: they are not of that
    /// kind.
    #[error("{path}: nothing was read as {kind}: {detail}")]
    NotThatKind {
        /// The path(s).
        path: String,
        /// The importer's name.
        kind: String,
        /// What was read and rejected, and what the files look like instead.
        detail: String,
    },
    /// A window or filter that cannot be applied (`--from-time`, `--to-time`, `--where`).
    #[error("{path}: {message}")]
    Window {
        /// The path.
        path: String,
        /// What is wrong and what the dataset has.
        message: String,
    },
    /// A trace made by the simulator (a what-if replay of the trace on screen) that could not be made.
    #[error("the what-if replay: {message}")]
    Simulated {
        /// Why.
        message: String,
    },
}

/// Shared between a loading thread and the UI: bytes done of bytes total, a cancel flag, and, when asked for,
/// previews of what has been read so far.
#[derive(Default)]
pub struct Progress {
    done_bytes: AtomicU64,
    total_bytes: AtomicU64,
    cancel: AtomicBool,
    previews: Option<Previews>,
    /// What is being done, when it is not the reading of the trace (a window names it).
    stage: std::sync::Mutex<Option<&'static str>>,
}

/// Who hears of previews during a load, and how often.
struct Previews {
    /// Called with each preview.
    sink: Box<dyn Fn(Arc<Trace>) + Send + Sync>,
    /// The least time between two previews; `None`: a preview at every chance (tests: no clock decides).
    every: Option<std::time::Duration>,
    /// When the last was made, and what it took.
    last: std::sync::Mutex<Option<(std::time::Instant, std::time::Duration)>>,
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress")
            .field("fraction", &self.fraction())
            .field("cancelled", &self.is_cancelled())
            .field("previews", &self.previews.is_some())
            .finish_non_exhaustive()
    }
}

impl Progress {
    /// A progress that hands `sink` a preview of the trace read so far (its requests and steps, without tokens)
    /// from time to time during a Parquet load: at most once per `every`, and never more often than four times
    /// what making one takes.
    pub fn with_previews(every: std::time::Duration, sink: impl Fn(Arc<Trace>) + Send + Sync + 'static) -> Self {
        Progress {
            previews: Some(Previews {
                sink: Box::new(sink),
                every: Some(every),
                last: std::sync::Mutex::new(None),
            }),
            ..Progress::default()
        }
    }

    /// A progress that hands `sink` a preview at every chance a load gives (each merged row group or chunk), paced by
    /// no clock: what a test of the previews counts on.
    pub fn with_each_preview(sink: impl Fn(Arc<Trace>) + Send + Sync + 'static) -> Self {
        Progress {
            previews: Some(Previews {
                sink: Box::new(sink),
                every: None,
                last: std::sync::Mutex::new(None),
            }),
            ..Progress::default()
        }
    }

    /// Makes a preview of `b` and hands it on, when previews are asked for and one is due.
    pub(crate) fn maybe_preview(&self, b: &TraceBuilder) {
        let Some(p) = &self.previews else { return };
        let mut last = p.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let paced = |(at, took): (std::time::Instant, std::time::Duration)| {
            p.every.is_some_and(|every| at.elapsed() < every.max(4 * took))
        };
        if last.is_some_and(paced) || !b.has_requests() {
            return;
        }
        let start = std::time::Instant::now();
        let preview = Arc::new(b.skeleton());
        *last = Some((std::time::Instant::now(), start.elapsed()));
        drop(last);
        (p.sink)(preview);
    }

    /// Starts a stage of its own, `what` (a window says it beside the file's name), with `total` units to do and
    /// none done.
    pub fn start_stage(&self, what: &'static str, total: u64) {
        *self.stage.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(what);
        self.done_bytes.store(0, Ordering::Relaxed);
        self.total_bytes.store(total, Ordering::Relaxed);
    }

    /// The stage started last, if any.
    pub fn stage(&self) -> Option<&'static str> {
        *self.stage.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Sets the bytes to process.
    pub fn set_total(&self, n: u64) {
        self.total_bytes.store(n, Ordering::Relaxed);
    }

    /// Adds bytes processed.
    pub fn add_done(&self, n: u64) {
        self.done_bytes.fetch_add(n, Ordering::Relaxed);
    }

    /// The fraction done, 0..=1.
    #[expect(clippy::cast_precision_loss, reason = "a progress bar")]
    pub fn fraction(&self) -> f32 {
        let total = self.total_bytes.load(Ordering::Relaxed);
        if total == 0 {
            return 0.0;
        }
        (self.done_bytes.load(Ordering::Relaxed) as f64 / total as f64).min(1.0) as f32
    }

    /// Asks the loader to stop.
    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::Relaxed);
    }

    /// True once [`Self::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }
}

/// A size in bytes for a message: "1.2 GB", "300 MB".
pub fn size(bytes: u64) -> String {
    #[expect(clippy::cast_precision_loss, reason = "display")]
    let b = bytes as f64;
    if b >= 1e9 {
        format!("{:.1} GB", b / 1e9)
    } else {
        format!("{:.0} MB", (b / 1e6).max(1.0))
    }
}
