//! Loading, above every reader: the files a path stands for and the reader of each ([`sniff`]), the memory budget
//! ([`budget`]), then the native readers (`format/`) and the importers (`import/`) feeding one `TraceBuilder`.
//! [`load`] is the entry point: files or directories in, a [`Loaded`] trace with its report out.

pub mod budget;
pub mod join;
pub mod sniff;
pub mod stream;

use std::path::{Path, PathBuf};

pub use crate::ingest::{LoadError, Progress};
pub use sniff::{Format, Side};

use crate::format::{encoding_of, jsonl, parquet, window};
use crate::import::Kind;
use crate::trace::report::{Encoding, Report, SourceFile};
use crate::trace::{Trace, TraceBuilder};
use sniff::files_of;

/// A loaded trace and what loading found wrong.
#[derive(Debug)]
pub struct Loaded {
    /// The trace.
    pub trace: Trace,
    /// Rejections and warnings.
    pub report: Report,
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
    /// The date and zone of server logs whose times lack them (`--log-date`, `--log-tz`).
    pub log_clock: crate::import::log_clock::LogClock,
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
    progress.set_total(total);
    let all_parquet = files
        .iter()
        .all(|(_, format)| *format == Format::Native(Encoding::Parquet));
    let lazy = options.lazy_candidates && all_parquet;
    if let Some(budget) = options.budget {
        check_budget(paths, &files, lazy, all_parquet, budget, window)?;
    }
    let numbered: Vec<(&Path, u32, Format)> = files
        .iter()
        .enumerate()
        .map(|(i, (p, format))| (p.as_path(), u32::try_from(i).unwrap_or(u32::MAX), *format))
        .collect();
    // Halves are looked for among several paths, beside an engine's or tool's file, or in a folder of a few files;
    // a dataset's partitions are one side, and their footers are not read again for it.
    let mixed =
        paths.len() > 1 || files.len() <= MIXED_FILES || files.iter().any(|(_, f)| matches!(f, Format::Import(_)));
    let sides: Vec<Side> = if mixed {
        files.iter().map(|(p, format)| sniff::side_of(p, *format)).collect()
    } else {
        Vec::new()
    };
    if sides.contains(&Side::Client) && sides.contains(&Side::Server) {
        // Two halves of one run: each read on its own (its records keep their own clock and ids), then joined.
        let half = |side: Side| -> Vec<(&Path, u32, Format)> {
            numbered
                .iter()
                .zip(&sides)
                .filter(|(_, s)| **s == side)
                .map(|(f, _)| *f)
                .collect()
        };
        let (client_files, server_files) = (half(Side::Client), half(Side::Server));
        let names = |half: &[(&Path, u32, Format)]| {
            half.iter()
                .map(|(p, _, _)| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let (client, client_report) = read_files(&client_files, &files, window, false, &options, progress)?;
        let (server, server_report) = read_files(&server_files, &files, window, false, &options, progress)?;
        let join = join::pair(&client, &server, (&names(&client_files), &names(&server_files)))?;
        let mut report = client_report;
        report.absorb(server_report);
        let (trace, report) = join::build(client, &server, &join, report);
        return Ok(Loaded { trace, report });
    }
    let (trace, report) = read_files(&numbered, &files, window, lazy, &options, progress)?;
    if let Some(kind) = options.from
        && !trace.has_records()
    {
        return Err(not_that_kind(paths, kind, &report));
    }
    Ok(Loaded { trace, report })
}

/// Why files read as `kind` gave nothing: what was read and rejected, and what their content looks like instead.
fn not_that_kind(paths: &[&Path], kind: Kind, report: &Report) -> LoadError {
    let sniffed: Vec<String> = paths
        .iter()
        .filter_map(|p| match sniff::format_of(p, None) {
            Ok(Some(Format::Import(k))) => Some(format!("{} looks like {}", p.display(), k.name())),
            Ok(Some(Format::Native(_))) => Some(format!("{} is a tokenscope trace", p.display())),
            _ => None,
        })
        .collect();
    let first = report.rejected.first().map_or_else(String::new, |r| {
        format!("; the first rejected: {}: {}", report.describe(r.place), r.reason)
    });
    let hint = if sniffed.is_empty() {
        format!("give the kind the files are ({}), or leave out --from", Kind::names())
    } else {
        format!("{}: leave out --from, or give that kind", sniffed.join(", "))
    };
    LoadError::NotThatKind {
        path: paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        kind: kind.name().to_owned(),
        detail: format!(
            "no request, step, sample or token in {} record(s), {} rejected{first}; {hint}",
            report.records,
            report.rejected_count()
        ),
    }
}

/// A folder of at most this many files may hold both halves of a run (a recording and the server's files); one of
/// more is taken for a dataset's partitions, all of one side.
pub(crate) const MIXED_FILES: usize = 16;

/// Reads `these` files (numbered among all the load's `files`) into one trace. Runs of Parquet files are read
/// together, so their row groups share the threads (a directory of one-row-group partitions loads on every core);
/// other files in turn. Either way, in the order of the names.
fn read_files(
    these: &[(&Path, u32, Format)],
    files: &[(PathBuf, Format)],
    window: Option<&window::Window>,
    lazy: bool,
    options: &LoadOptions,
    progress: &Progress,
) -> Result<(Trace, Report), LoadError> {
    let mut b = TraceBuilder::default();
    b.window = window.cloned();
    if lazy {
        b.lazy_candidate_files = Some(files.iter().map(|(p, _)| p.clone()).collect());
    }
    for (p, format) in files {
        b.report.files.push(SourceFile {
            path: p.display().to_string(),
            encoding: format.encoding(),
        });
    }
    let parquet = Format::Native(Encoding::Parquet);
    let mut imported = crate::import::Imported::with_clock(options.log_clock);
    for run in these.chunk_by(|a, b| a.2 == parquet && b.2 == parquet) {
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
    Ok(b.finish())
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
    // What it spans, so that a window can be weighed and chosen.
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
    // A window keeps about its share of the files' time span (records are read, then the window's kept).
    let in_window = |bytes: u64| match (window, survey.first_ns, survey.last_ns) {
        (Some(w), Some(a), Some(b)) if b > a => {
            let (from, to) = (w.from_ns.unwrap_or(a).max(a), w.to_ns.unwrap_or(b).min(b));
            #[allow(
                clippy::cast_precision_loss,
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss
            )]
            let kept = ((to - from).max(0) as f64 / (b - a) as f64).min(1.0);
            budget::scaled_above_base(bytes, kept)
        }
        _ => bytes,
    };
    let need = in_window(if lazy { e.without_candidates } else { e.whole });
    if need <= budget {
        return Ok(());
    }
    let mut advice = Vec::new();
    if !lazy && all_parquet && in_window(e.without_candidates) <= budget {
        advice.push(format!(
            "without its candidates it takes about {}: the app, summary, timeline and query leave them on disk",
            budget::size(in_window(e.without_candidates))
        ));
    }
    let time = |ns: i64| {
        chrono::DateTime::from_timestamp_nanos(ns)
            .format("%Y-%m-%dT%H:%M:%S")
            .to_string()
    };
    let mut part = String::from("open a part of it with --from-time and --to-time");
    if let (Some(a), Some(b)) = (survey.first_ns, survey.last_ns) {
        part.push_str(&format!(" (it spans {} to {} UTC", time(a), time(b)));
        // Which part fits: about the budget's share of the span, from its start.
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_precision_loss,
            reason = "a time within the span"
        )]
        if let Some(share) = budget::share_that_fits(need, budget).filter(|&s| s < 1.0 && b > a) {
            let end = a + ((b - a) as f64 * share) as i64;
            let minutes = (end - a) as f64 / 60e9;
            part.push_str(&format!(
                "; about its first {} fit: --from-time {} --to-time {}",
                if minutes >= 10.0 {
                    format!("{:.0} min", minutes.floor())
                } else {
                    format!("{:.0} s", (minutes * 60.0).floor())
                },
                time(a),
                time(end.max(a + 1_000_000_000))
            ));
        }
        part.push(')');
    }
    if survey.keys.is_empty() {
        part.push_str(" or --where source=..., model=...");
    } else {
        let keys: Vec<&str> = survey.keys.keys().map(String::as_str).collect();
        part.push_str(&format!(" or --where on its folder keys ({})", keys.join(", ")));
    }
    if window.is_some() {
        part = format!("choose a narrower window ({part})");
    }
    if budget <= budget::BASE {
        // No part fits: the program itself takes about this much, whatever it loads.
        part = format!(
            "no part of it fits: any load takes about {} (the program, its threads, the pages being decoded)",
            budget::size(budget::BASE)
        );
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

/// Loads a trace held in memory; `name` gives its encoding (by extension) and stands for its
/// path in messages.
pub fn load_bytes(name: &str, bytes: &'static [u8]) -> Result<Loaded, LoadError> {
    let path = Path::new(name);
    let encoding = encoding_of(path).ok_or_else(|| LoadError::UnknownFormat {
        path: name.to_owned(),
        kinds: Kind::names(),
    })?;
    let mut b = TraceBuilder::default();
    b.report.files.push(SourceFile {
        path: name.to_owned(),
        encoding,
    });
    match encoding {
        Encoding::Jsonl => jsonl::read_from(bytes, path, 0, &mut b, &Progress::default())?,
        Encoding::Parquet => parquet::read_bytes(bytes::Bytes::from_static(bytes), path, 0, &mut b)?,
        Encoding::Items => {
            return Err(LoadError::UnknownFormat {
                path: name.to_owned(),
                kinds: Kind::names(),
            });
        }
    }
    let (trace, report) = b.finish();
    Ok(Loaded { trace, report })
}
