//! The tokenscope trace format v1 (`docs/TRACE_FORMAT.md`): readers for Parquet and JSONL (plain, gzip, zstd),
//! writers for both, and validation. [`load`] is the entry point: a file or a directory of files in, a
//! [`Loaded`] trace with its report out.

pub mod budget;
pub mod chrome;
pub mod jsonl;
pub mod page_headers;
pub mod parquet;
pub mod partition;
pub mod quiet;
pub mod raw;
pub mod records;
pub mod schema;
pub mod validate;
pub mod window;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::import::Kind;
use crate::trace::report::{Encoding, Report, SourceFile};
use crate::trace::{Trace, TraceBuilder};

/// Why a trace could not be loaded at all. Record-level problems are not errors: they are in the [`Report`].
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
         those, name it: tokenscope convert FILE --from KIND -o OUT.parquet",
        kinds = crate::import::Kind::names()
    )]
    UnknownFormat {
        /// The path.
        path: String,
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
        budget::size(*need),
        budget::size(*budget)
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
    /// A window or filter that cannot be applied (`--from-time`, `--to-time`, `--where`).
    #[error("{path}: {message}")]
    Window {
        /// The path.
        path: String,
        /// What is wrong and what the dataset has.
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
}

/// Who hears of previews during a load, and how often.
struct Previews {
    /// Called with each preview.
    sink: Box<dyn Fn(Arc<Trace>) + Send + Sync>,
    /// The least time between two previews.
    every: std::time::Duration,
    /// When the last was made, and what it took.
    last: std::sync::Mutex<Option<(std::time::Instant, std::time::Duration)>>,
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress")
            .field("fraction", &self.fraction())
            .field("cancelled", &self.is_cancelled())
            .field("previews", &self.previews.is_some())
            .finish()
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
                every,
                last: std::sync::Mutex::new(None),
            }),
            ..Progress::default()
        }
    }

    /// Makes a preview of `b` and hands it on, when previews are asked for and one is due.
    pub(crate) fn maybe_preview(&self, b: &TraceBuilder) {
        let Some(p) = &self.previews else { return };
        let mut last = p.last.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if last.is_some_and(|(at, took)| at.elapsed() < p.every.max(4 * took)) || !b.has_requests() {
            return;
        }
        let start = std::time::Instant::now();
        let preview = Arc::new(b.skeleton());
        *last = Some((std::time::Instant::now(), start.elapsed()));
        drop(last);
        (p.sink)(preview);
    }

    /// Adds bytes processed.
    pub fn add_done(&self, n: u64) {
        self.done_bytes.fetch_add(n, Ordering::Relaxed);
    }

    /// The fraction done, 0..=1.
    #[allow(clippy::cast_precision_loss)] // a progress bar
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

/// A loaded trace and what loading found wrong.
#[derive(Debug)]
pub struct Loaded {
    /// The trace.
    pub trace: Trace,
    /// Rejections and warnings.
    pub report: Report,
}

/// The encoding of a trace file by its name, if it is one.
pub fn encoding_of(path: &Path) -> Option<Encoding> {
    let name = path.file_name()?.to_str()?.to_ascii_lowercase();
    if name.ends_with(".parquet") || name.ends_with(".pq") {
        Some(Encoding::Parquet)
    } else if [
        ".jsonl",
        ".jsonl.gz",
        ".jsonl.zst",
        ".ndjson",
        ".ndjson.gz",
        ".ndjson.zst",
    ]
    .iter()
    .any(|ext| name.ends_with(ext))
    {
        Some(Encoding::Jsonl)
    } else {
        None
    }
}

/// How a file of a trace is read: a native encoding, or an importer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Trace format v1.
    Native(Encoding),
    /// An engine's or tool's own output.
    Import(Kind),
}

impl Format {
    /// How places in the file are counted.
    pub fn encoding(self) -> Encoding {
        match self {
            Format::Native(enc) => enc,
            Format::Import(Kind::TrtllmIterations | Kind::TrtllmPerf) => Encoding::Items,
            Format::Import(_) => Encoding::Jsonl,
        }
    }
}

/// The format of one file: by its name for native traces, else by its content; `from` forces an importer.
fn format_of(path: &Path, from: Option<Kind>) -> Result<Option<Format>, LoadError> {
    if let Some(kind) = from {
        return Ok(Some(Format::Import(kind)));
    }
    if let Some(kind) = crate::import::sniff(path) {
        return Ok(Some(Format::Import(kind)));
    }
    if let Some(enc) = encoding_of(path) {
        return Ok(Some(Format::Native(enc)));
    }
    // Unknown extension: trust the content when it looks like Parquet or JSON.
    let mut head = [0u8; 4];
    let n = std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
        .map_err(|source| LoadError::Io {
            path: path.display().to_string(),
            source,
        })?;
    let head = &head[..n];
    if head == b"PAR1" {
        Ok(Some(Format::Native(Encoding::Parquet)))
    } else if head.first() == Some(&b'{') || jsonl::Compression::sniff(head) != jsonl::Compression::None {
        Ok(Some(Format::Native(Encoding::Jsonl)))
    } else {
        Ok(None)
    }
}

/// The trace files of a directory, and those of its `key=value` folders (a hive-partitioned dataset), at any
/// depth; hidden files and other folders are left out.
fn trace_files_in(dir: &Path, from: Option<Kind>, files: &mut Vec<(PathBuf, Format)>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let p = entry?.path();
        let Some(name) = p.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if name.starts_with('.') {
            continue;
        }
        if p.is_dir() {
            if name.contains('=') {
                trace_files_in(&p, from, files)?;
            }
        } else if p.is_file() {
            let format = match encoding_of(&p) {
                Some(Encoding::Parquet) => Some(Format::Native(Encoding::Parquet)),
                _ => format_of(&p, from).ok().flatten(),
            };
            if let Some(format) = format {
                files.push((p, format));
            }
        }
    }
    Ok(())
}

/// The files of a trace path with their formats: the file itself, or a directory's trace files sorted by name
/// (the files of one run: partitions of a trace, or an engine's outputs to be opened together).
fn files_of(path: &Path, from: Option<Kind>) -> Result<Vec<(PathBuf, Format)>, LoadError> {
    let io = |e| LoadError::Io {
        path: path.display().to_string(),
        source: e,
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if meta.is_dir() {
        let mut files = Vec::new();
        trace_files_in(path, from, &mut files).map_err(io)?;
        files.sort_by(|a, b| a.0.cmp(&b.0));
        if files.is_empty() {
            return Err(LoadError::EmptyDirectory {
                path: path.display().to_string(),
            });
        }
        return Ok(files);
    }
    match format_of(path, from)? {
        Some(format) => Ok(vec![(path.to_path_buf(), format)]),
        None => Err(LoadError::UnknownFormat {
            path: path.display().to_string(),
        }),
    }
}

/// The Parquet files of a trace path, in the order a load reads them: the file itself, or a directory's files and
/// those of its `key=value` folders (a hive-partitioned dataset).
///
/// # Errors
/// The path cannot be read, holds no trace file, or holds one that is not Parquet.
pub fn parquet_files(path: &Path) -> Result<Vec<PathBuf>, LoadError> {
    files_of(path, None)?
        .into_iter()
        .map(|(p, format)| match format {
            Format::Native(Encoding::Parquet) => Ok(p),
            _ => Err(LoadError::NotParquet {
                path: p.display().to_string(),
            }),
        })
        .collect()
}

/// What the dataset at `path` (a directory of Parquet files, hive-partitioned or not, or one file) holds, from its
/// folder names and its files' footers, without reading a record: for choosing a window before loading.
///
/// # Errors
/// The path cannot be read, holds no trace file or one that is not Parquet, or a footer cannot be read.
pub fn survey(path: &Path) -> Result<window::Survey, LoadError> {
    let files = parquet_files(path)?;
    let root = if path.is_dir() {
        path
    } else {
        path.parent().unwrap_or(path)
    };
    let mut s = window::Survey::of_folders(root, &files);
    for f in &files {
        s.add_footer(&parquet::footer(f)?);
    }
    Ok(s)
}

/// How to load.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LoadOptions {
    /// Leave the candidates of Parquet traces on disk, to be read per request with
    /// [`parquet::read_request_candidates`] (the app does: they are most of a trace's bytes). Their fields are then
    /// checked when read, not at load. JSONL traces are always read whole.
    pub lazy_candidates: bool,
    /// Read every file with this importer instead of recognising it (`convert --from`).
    pub from: Option<Kind>,
    /// Only this part of the trace: folders of a dataset outside it are not read, records outside it are dropped.
    pub window: Option<std::sync::Arc<window::Window>>,
    /// Refuse, before reading a record, a load estimated to take more memory than this (bytes): see [`budget`].
    pub budget: Option<u64>,
}

/// Loads a trace file or directory, candidates included. `progress` reports bytes read and can cancel.
pub fn load(path: &Path, progress: &Progress) -> Result<Loaded, LoadError> {
    load_with(path, progress, LoadOptions::default())
}

/// Loads a trace file or directory with options.
pub fn load_with(path: &Path, progress: &Progress, options: LoadOptions) -> Result<Loaded, LoadError> {
    load_many(&[path], progress, options)
}

/// Loads several files or directories as one trace (the outputs of one run: an engine's spans and its iteration
/// log, say), in the order given.
pub fn load_many(paths: &[&Path], progress: &Progress, options: LoadOptions) -> Result<Loaded, LoadError> {
    let mut files = Vec::new();
    let window = options.window.as_deref().filter(|w| !w.is_all());
    for path in paths {
        let mut listed = files_of(path, options.from)?;
        if let Some(w) = window {
            let failed = |message| LoadError::Window {
                path: path.display().to_string(),
                message,
            };
            if path.is_dir() {
                let chosen: std::collections::HashSet<PathBuf> = w
                    .choose_files(path, listed.iter().map(|(p, _)| p.clone()).collect())
                    .map_err(failed)?
                    .into_iter()
                    .collect();
                listed.retain(|(p, _)| chosen.contains(p));
            } else if let Some((k, _)) = w.filters.iter().find(|(k, _)| !window::LABELS.contains(&k.as_str())) {
                return Err(failed(format!(
                    "a file has no folder key \"{k}\"; filter a file by a request label: {}",
                    window::LABELS.join(", ")
                )));
            }
        }
        files.extend(listed);
    }
    let total: u64 = files
        .iter()
        .filter_map(|(p, _)| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum();
    progress.total_bytes.store(total, Ordering::Relaxed);
    let mut b = TraceBuilder::default();
    b.window = window.cloned();
    let all_parquet = files
        .iter()
        .all(|(_, format)| *format == Format::Native(Encoding::Parquet));
    let lazy = options.lazy_candidates && all_parquet;
    if let Some(budget) = options.budget {
        check_budget(paths, &files, lazy, all_parquet, budget, window)?;
    }
    if lazy {
        b.lazy_candidate_files = Some(files.iter().map(|(p, _)| p.clone()).collect());
    }
    for (p, format) in &files {
        b.report.files.push(SourceFile {
            path: p.display().to_string(),
            encoding: format.encoding(),
        });
    }
    // Runs of Parquet files are read together, so their row groups share the threads (a directory of one-row-group
    // partitions loads on every core); other files in turn. Either way, in the order of the names.
    let numbered: Vec<(&Path, u32, Format)> = files
        .iter()
        .enumerate()
        .map(|(i, (p, format))| (p.as_path(), u32::try_from(i).unwrap_or(u32::MAX), *format))
        .collect();
    let parquet = Format::Native(Encoding::Parquet);
    let mut imported = crate::import::Imported::default();
    for run in numbered.chunk_by(|a, b| a.2 == parquet && b.2 == parquet) {
        let (first, file, format) = run[0];
        match format {
            Format::Native(Encoding::Parquet) => {
                let parts: Vec<(&Path, u32)> = run.iter().map(|&(p, file, _)| (p, file)).collect();
                parquet::read_files(&parts, &mut b, progress, lazy, window)?;
            }
            Format::Native(_) => jsonl::read(first, file, &mut b, progress)?,
            Format::Import(kind) => crate::import::read(kind, first, file, &mut b, progress, &mut imported)?,
        }
    }
    imported.finish(&mut b);
    let (trace, report) = b.finish();
    Ok(Loaded { trace, report })
}

/// Refuses a load whose estimated memory is above `budget`, saying what can be opened instead.
fn check_budget(
    paths: &[&Path],
    files: &[(PathBuf, Format)],
    lazy: bool,
    all_parquet: bool,
    budget: u64,
    window: Option<&window::Window>,
) -> Result<(), LoadError> {
    let e = budget::estimate(files)?;
    let need = if lazy { e.without_candidates } else { e.whole };
    if need <= budget {
        return Ok(());
    }
    let mut advice = Vec::new();
    if !lazy && all_parquet && e.without_candidates <= budget {
        advice.push(format!(
            "without its candidates it takes about {}: the app, summary, timeline and query leave them on disk",
            budget::size(e.without_candidates)
        ));
    }
    // What it spans, so that a window can be chosen.
    let parquet: Vec<PathBuf> = files
        .iter()
        .filter(|(_, f)| *f == Format::Native(Encoding::Parquet))
        .map(|(p, _)| p.clone())
        .collect();
    let root = paths.first().copied().unwrap_or(Path::new("."));
    let mut survey = window::Survey::of_folders(if root.is_dir() { root } else { Path::new("") }, &parquet);
    for footer in parquet.iter().filter_map(|f| parquet::footer(f).ok()) {
        survey.add_footer(&footer);
    }
    let time = |ns: i64| {
        chrono::DateTime::from_timestamp_nanos(ns)
            .format("%Y-%m-%dT%H:%M:%S")
            .to_string()
    };
    let mut part = String::from("open a part of it with --from-time and --to-time");
    if let (Some(a), Some(b)) = (survey.first_ns, survey.last_ns) {
        part.push_str(&format!(" (it spans {} to {} UTC)", time(a), time(b)));
    }
    if !survey.keys.is_empty() {
        let keys: Vec<&str> = survey.keys.keys().map(String::as_str).collect();
        part.push_str(&format!(" or --where on its folder keys ({})", keys.join(", ")));
    } else {
        part.push_str(" or --where source=..., model=...");
    }
    if window.is_some() {
        part = format!("choose a narrower window ({part})");
    }
    advice.push(part);
    advice.push(match budget::machine_memory() {
        Some(m) => format!(
            "or raise the budget with --memory-budget (this machine has {})",
            budget::size(m)
        ),
        None => "or raise the budget with --memory-budget".to_owned(),
    });
    Err(LoadError::OverBudget {
        path: paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        need,
        budget,
        advice: advice.join("; "),
    })
}

/// The source of the candidates a lazy load left on disk (`None` when they are in memory or absent). It reads the
/// files' metadata once, here, rather than at the first request asked for.
///
/// # Errors
/// A file of the trace can no longer be opened, or its metadata read.
pub fn open_candidates(trace: &Trace) -> Result<Option<std::sync::Arc<dyn crate::trace::CandidateSource>>, LoadError> {
    Ok(parquet::CandidateReader::open(trace)?
        .map(|r| std::sync::Arc::new(r) as std::sync::Arc<dyn crate::trace::CandidateSource>))
}

/// Loads a trace held in memory (the embedded demo); `name` gives its encoding (by extension) and stands for its
/// path in messages.
pub fn load_bytes(name: &str, bytes: &'static [u8]) -> Result<Loaded, LoadError> {
    let path = Path::new(name);
    let encoding = encoding_of(path).ok_or_else(|| LoadError::UnknownFormat { path: name.to_owned() })?;
    let mut b = TraceBuilder::default();
    b.report.files.push(SourceFile {
        path: name.to_owned(),
        encoding,
    });
    match encoding {
        Encoding::Jsonl => jsonl::read_from(bytes, path, 0, &mut b, &Progress::default())?,
        Encoding::Parquet => parquet::read_bytes(bytes::Bytes::from_static(bytes), path, 0, &mut b)?,
        Encoding::Items => return Err(LoadError::UnknownFormat { path: name.to_owned() }),
    }
    let (trace, report) = b.finish();
    Ok(Loaded { trace, report })
}

/// Why a trace could not be written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// A file system error.
    #[error("cannot write {path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The system's reason.
        source: std::io::Error,
    },
    /// A dataset cannot be partitioned as asked.
    #[error("cannot partition {path}: {reason}")]
    Partition {
        /// The dataset's folder.
        path: String,
        /// Why.
        reason: String,
    },
    /// The Parquet writer failed.
    #[error("cannot write {path}: {source}")]
    Parquet {
        /// The path.
        path: String,
        /// The writer's reason.
        source: ::parquet::errors::ParquetError,
    },
    /// The extension names no format.
    #[error("{path}: give the output a .parquet, .jsonl, .jsonl.gz or .jsonl.zst name")]
    UnknownFormat {
        /// The path.
        path: String,
    },
}

/// Writes a trace to a file, in the encoding its name asks for.
pub fn write(trace: &Trace, path: &Path) -> Result<(), WriteError> {
    let name = path.display().to_string();
    match encoding_of(path) {
        Some(Encoding::Parquet) => {
            parquet::write(trace, path).map_err(|source| WriteError::Parquet { path: name, source })
        }
        Some(Encoding::Jsonl) => jsonl::write(trace, path).map_err(|source| WriteError::Io { path: name, source }),
        Some(Encoding::Items) | None => Err(WriteError::UnknownFormat { path: name }),
    }
}
