//! The parallel row-group reader: projection of the known columns, window pruning by row-group statistics, a corrupt
//! row group costing its rows, the required columns checked per kind.

use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ParquetRecordBatchReaderBuilder};
use parquet::file::reader::ChunkReader;
use rayon::prelude::*;

use crate::format::schema::{self, CANDIDATES, EOS_TOKEN_IDS, KIND, SCALAR_FIELDS};
use crate::format::window::{self, Window};
use crate::ingest::raw::{RawRecord, Val};
use crate::ingest::validate::ingest;
use crate::ingest::{LoadError, Progress};
use crate::trace::TraceBuilder;
use crate::trace::report::{Place, Problem, Rejection};

use super::READ_BATCH_ROWS;
use super::columns::*;

/// Reads Parquet files into the builder. Fatal when a file is not readable Parquet, when it has no `kind` column,
/// or when it has records of a kind whose required column is absent. The row groups of all the files are decoded in
/// parallel (rayon) and merged in file order. With `lazy_candidates`, the `candidates` column is not read (see
/// [`read_request_candidates`]).
///
/// With a window, row groups its statistics show to hold none of its records are not read (see [`outside`]).
pub fn read_files(
    files: &[(&Path, u32)],
    b: &mut TraceBuilder,
    progress: &Progress,
    lazy_candidates: bool,
    window: Option<&Window>,
) -> Result<(), LoadError> {
    let parts = files
        .iter()
        // A fresh open per reader, not `try_clone`: clones share one file offset, and the workers seek concurrently.
        .map(|&(path, file)| Part::open(move || File::open(path), path, file, lazy_candidates))
        .collect::<Result<Vec<_>, _>>()?;
    read_parts(&parts, b, progress, window)
}

/// Reads Parquet files into the builder as [`read_files`] does, but for their tokens: row groups of tokens alone
/// (by their statistics) are not read, and the token rows of the others are passed over. For a trace whose tokens
/// are streamed ([`crate::load::stream`]): its requests, steps, stages and samples, resolved as a load resolves
/// them, in memory set by them and not by the tokens. The candidates are never read.
pub fn read_files_without_tokens(
    files: &[(&Path, u32)],
    b: &mut TraceBuilder,
    progress: &Progress,
    window: Option<&Window>,
) -> Result<(), LoadError> {
    let parts = files
        .iter()
        .map(|&(path, file)| {
            Part::open(move || File::open(path), path, file, true).map(|mut p| {
                p.skip_tokens = true;
                p
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    read_parts(&parts, b, progress, window)
}

/// Whether a row group holds no record of the window, by its statistics alone: all its rows of one kind, and
/// - requests: arrivals all outside the window, or a label of one value the filters exclude;
/// - steps: starts all outside the window, or one source the filters exclude;
/// - samples: times all outside the window, or one source the filters exclude;
/// - tokens: all emitted before the window's start (a request emits no token before it arrives, so they are the
///   tokens of requests that arrived before it).
///
/// Anything else (several kinds, stages, the meta, missing statistics) is read. The writer writes records kind by
/// kind, requests by arrival and tokens by request, so a window late in a long file skips most of it.
pub fn outside(rg: &parquet::file::metadata::RowGroupMetaData, w: &Window) -> bool {
    use parquet::file::statistics::Statistics;
    let stats = |name: &str| {
        rg.columns()
            .iter()
            .find(|c| c.column_path().string() == name)
            .and_then(|c| c.statistics())
    };
    // The one value of a column in the group, when its statistics say all rows have it.
    let only = |name: &str| super::stream::only_value(rg, name);
    let range = |name: &str| match stats(name) {
        Some(Statistics::Int64(s)) => s.min_opt().copied().zip(s.max_opt().copied()),
        _ => None,
    };
    let disjoint = |(lo, hi): (i64, i64)| w.from_ns.is_some_and(|f| hi < f) || w.to_ns.is_some_and(|t| lo >= t);
    let excluded = |labels: &[&str]| labels.iter().any(|&k| only(k).is_some_and(|v| !w.allows(k, &v)));
    match only(KIND).as_deref() {
        Some("request") => range("arrival_ns").is_some_and(disjoint) || excluded(&window::LABELS),
        Some("iteration") => range("start_ns").is_some_and(disjoint) || excluded(&["source"]),
        Some("sample") => range("time_ns").is_some_and(disjoint) || excluded(&["source"]),
        Some("token") => range("emitted_ns").is_some_and(|(_, hi)| w.from_ns.is_some_and(|f| hi < f)),
        _ => false,
    }
}

/// Reads Parquet held in memory into the builder; `name` stands for its path in messages.
pub fn read_bytes(bytes: Bytes, name: &Path, file: u32, b: &mut TraceBuilder) -> Result<(), LoadError> {
    let progress = Progress::default();
    let part = Part::open(|| Ok(bytes.clone()), name, file, false)?;
    read_parts(&[part], b, &progress, None)
}

/// Decodes the row groups of `parts` on rayon's threads, each into a builder of its own, and merges them in file
/// order, so the result is the same as reading them in turn (duplicates keep the first, the first fatal error in
/// file order is the one reported).
///
/// The row groups go in windows of eight per thread: while one window decodes, the previous one is merged, so at
/// most two windows of decoded row groups are held. A fatal error stops every row group after it at its next batch;
/// a cancel stops them all. Nothing waits by sleeping.
pub(super) fn read_parts<R, O>(
    parts: &[Part<'_, O>],
    b: &mut TraceBuilder,
    progress: &Progress,
    window: Option<&Window>,
) -> Result<(), LoadError>
where
    R: ChunkReader + 'static,
    O: Fn() -> std::io::Result<R> + Sync,
{
    let mut units: Vec<Unit> = parts
        .iter()
        .enumerate()
        .flat_map(|(part, p)| (0..p.first_rows.len()).map(move |rg| Unit { part, rg }))
        .collect();
    // Row groups of tokens alone, when the tokens are not wanted: counted as read at once.
    units.retain(|u| {
        let p = &parts[u.part];
        let rg = p.meta.metadata().row_group(u.rg);
        let skip = p.skip_tokens && super::stream::only_value(rg, KIND).as_deref() == Some("token");
        if skip {
            progress.add_done(u64::try_from(rg.compressed_size()).unwrap_or(0));
        }
        !skip
    });
    if let Some(w) = window {
        // Row groups outside the window count as read at once, so that the progress still reaches its end.
        let all = units.len();
        units.retain(|u| {
            let rg = parts[u.part].meta.metadata().row_group(u.rg);
            let skip = outside(rg, w);
            if skip {
                progress.add_done(u64::try_from(rg.compressed_size()).unwrap_or(0));
            }
            !skip
        });
        if units.len() < all {
            b.report.notes.push(format!(
                "{} of {all} row groups not read: their statistics show no record of the window",
                all - units.len()
            ));
        }
    }
    // At most a token per row: the token columns grow once, not by doubling (each doubling copies them and touches
    // twice their pages). Capped at the most tokens a trace can index; room reserved and never used is address space,
    // not memory, and a reservation that fails is skipped.
    let rows: u64 = units.iter().map(|u| parts[u.part].rows_of(u.rg)).sum();
    b.reserve_tokens(usize::try_from(rows.min(u64::from(u32::MAX))).unwrap_or(0));
    // Eight row groups a thread: each window ends when its slowest row group does, with the other threads idle
    // meanwhile; wider windows wait less often (10 % of the load of xlarge on two cores, against windows of 2 a
    // thread), for two windows of decoded row groups held (about 64 MB a thread without candidates).
    // Without the tokens (a streamed trace, whose memory is its requests and steps), one row group a thread: the
    // row groups left are those of requests, steps and stages, each of which a builder holds whole until merged.
    let skipping = parts.iter().any(|p| p.skip_tokens);
    let window = if skipping { 1 } else { 8 } * rayon::current_num_threads() + usize::from(!skipping) * 2;
    // The index in `units` of the first fatal error found so far: the units after it need not finish.
    let first_fatal = AtomicUsize::new(usize::MAX);
    let decode = |offset: usize, chunk: &[Unit]| -> Vec<Result<TraceBuilder, LoadError>> {
        chunk
            .par_iter()
            .enumerate()
            .map(|(i, u)| {
                let index = offset + i;
                let stop = || progress.is_cancelled() || first_fatal.load(Ordering::Relaxed) < index;
                let result = parts[u.part].read_row_group_guarded(u.rg, &stop);
                if result.is_err() {
                    first_fatal.fetch_min(index, Ordering::Relaxed);
                }
                result
            })
            .collect()
    };
    let merge = |b: &mut TraceBuilder, offset: usize, decoded: Vec<Result<TraceBuilder, LoadError>>| {
        for (i, result) in decoded.into_iter().enumerate() {
            if progress.is_cancelled() {
                return Err(LoadError::Cancelled);
            }
            b.merge(result?);
            let u = &units[offset + i];
            let meta = parts[u.part].meta.metadata();
            progress.add_done(u64::try_from(meta.row_group(u.rg).compressed_size()).unwrap_or(0));
            progress.maybe_preview(b);
        }
        Ok(())
    };
    let mut decoded = (0, Vec::new());
    for (w, chunk) in units.chunks(window).enumerate() {
        let offset = w * window;
        let previous = std::mem::take(&mut decoded);
        let (merged, next) = rayon::join(|| merge(b, previous.0, previous.1), || decode(offset, chunk));
        merged?;
        decoded = (offset, next);
    }
    merge(b, decoded.0, decoded.1)
}

/// A row group of one of the files being read.
pub(super) struct Unit {
    pub(super) part: usize,
    pub(super) rg: usize,
}

/// One Parquet file being read: how to open a fresh reader of it, its metadata and the projection of the columns
/// tokenscope knows.
pub(super) struct Part<'a, O> {
    open: O,
    meta: ArrowReaderMetadata,
    mask: ProjectionMask,
    present: Vec<String>,
    path: &'a Path,
    file: u32,
    /// The first row of each row group, counted from the file's first row.
    first_rows: Vec<u64>,
    /// Token rows are passed over ([`read_files_without_tokens`]).
    skip_tokens: bool,
}

impl<'a, R, O> Part<'a, O>
where
    R: ChunkReader + 'static,
    O: Fn() -> std::io::Result<R>,
{
    /// Reads the file's metadata and checks that it has a `kind` column.
    fn open(open: O, path: &'a Path, file: u32, lazy_candidates: bool) -> Result<Self, LoadError> {
        let io = |e| LoadError::Io {
            path: path.display().to_string(),
            source: e,
        };
        let reader = open().map_err(io)?;
        // A corrupt footer can make the decoder panic: that is this file's error, not a crash.
        let meta = super::decode_footer(&reader, path)?;
        let present: Vec<String> = meta.schema().fields().iter().map(|f| f.name().clone()).collect();
        if !present.iter().any(|p| p == KIND) {
            return Err(LoadError::MissingColumn {
                path: path.display().to_string(),
                column: KIND.to_owned(),
                detail: "every row needs a kind (meta, request, iteration, stage or token); add a string column \
                         \"kind\""
                    .to_owned(),
            });
        }
        let known = |name: &str| {
            name == EOS_TOKEN_IDS
                || (name == CANDIDATES && !lazy_candidates)
                || SCALAR_FIELDS.iter().any(|f| f.0 == name)
        };
        let roots: Vec<usize> = present
            .iter()
            .enumerate()
            .filter(|(_, n)| known(n))
            .map(|(i, _)| i)
            .collect();
        let mask = ProjectionMask::roots(meta.metadata().file_metadata().schema_descr(), roots);
        let mut first_rows = Vec::with_capacity(meta.metadata().num_row_groups());
        let mut rows = 0u64;
        for rg in meta.metadata().row_groups() {
            first_rows.push(rows);
            rows += u64::try_from(rg.num_rows()).unwrap_or(0);
        }
        Ok(Self {
            open,
            meta,
            mask,
            present,
            path,
            file,
            first_rows,
            skip_tokens: false,
        })
    }

    /// Checks the page headers of row group `rg`'s decoded columns ([`crate::format::page_headers`]).
    fn check_page_headers(&self, rg: usize) -> Result<(), String> {
        let reader = (self.open)().map_err(|e| e.to_string())?;
        for (i, column) in self.meta.metadata().row_group(rg).columns().iter().enumerate() {
            if !self.mask.leaf_included(i) {
                continue;
            }
            let (start, len) = column.byte_range();
            crate::format::page_headers::check_chunk(&reader, start, len)
                .map_err(|e| format!("column {}: {e}", column.column_path()))?;
        }
        Ok(())
    }

    fn rows_of(&self, rg: usize) -> u64 {
        u64::try_from(self.meta.metadata().row_group(rg).num_rows()).unwrap_or(0)
    }

    /// [`Self::read_row_group`], with a panic inside the decoder (a bug a corrupt file can reach) turned into the
    /// rejection of the row group instead of a crash.
    fn read_row_group_guarded(&self, rg: usize, stop: &impl Fn() -> bool) -> Result<TraceBuilder, LoadError> {
        // A panic in the decoder is this row group's problem, said in the report, not printed on the terminal.
        crate::ingest::quiet::catch(|| self.read_row_group(rg, stop)).unwrap_or_else(|why| {
            let mut b = TraceBuilder::default();
            let (first_row, rows) = (self.first_rows[rg], self.rows_of(rg));
            reject_rest_of_row_group(
                &mut b,
                self.file,
                rg,
                first_row,
                0,
                rows,
                &format!("the decoder failed ({why})"),
            );
            Ok(b)
        })
    }

    /// Decodes and validates row group `rg` into a builder of its own. `stop` is asked before each batch: when it
    /// says so (a cancel, or a fatal error earlier in the files), the work is given up as [`LoadError::Cancelled`].
    fn read_row_group(&self, rg: usize, stop: &impl Fn() -> bool) -> Result<TraceBuilder, LoadError> {
        let mut b = TraceBuilder::default();
        let (first_row, rows) = (self.first_rows[rg], self.rows_of(rg));
        // The page headers of the columns decoded, walked with bounded counts first: a corrupt one can keep
        // parquet-rs's Thrift decoder busy for minutes.
        if let Err(e) = self.check_page_headers(rg) {
            reject_rest_of_row_group(&mut b, self.file, rg, first_row, 0, rows, &e);
            return Ok(b);
        }
        let reader = (self.open)().map_err(|e| e.to_string()).and_then(|f| {
            ParquetRecordBatchReaderBuilder::new_with_metadata(f, self.meta.clone())
                .with_projection(self.mask.clone())
                .with_row_groups(vec![rg])
                .with_batch_size(READ_BATCH_ROWS)
                .build()
                .map_err(|e| e.to_string())
        });
        let reader = match reader {
            Ok(r) => r,
            Err(e) => {
                reject_rest_of_row_group(&mut b, self.file, rg, first_row, 0, rows, &e);
                return Ok(b);
            }
        };
        let mut checked_kinds: Vec<String> = Vec::new();
        let mut done = 0u64;
        for batch in reader {
            if stop() {
                return Err(LoadError::Cancelled);
            }
            let batch = match batch {
                Ok(batch) => batch,
                Err(e) => {
                    reject_rest_of_row_group(&mut b, self.file, rg, first_row, done, rows, &e.to_string());
                    break;
                }
            };
            let cols = Cols::of(&batch);
            let mut row = RowBuffer::default();
            for i in 0..batch.num_rows() {
                cols.fill(i, &mut row);
                if self.skip_tokens && matches!(&row.record.kind, Some(Val::Ok(k)) if k == "token") {
                    continue;
                }
                let place = Place {
                    file: self.file,
                    at: first_row + done + i as u64,
                };
                check_required(&row.record, &self.present, &mut checked_kinds, self.path, place.at)?;
                ingest(&row.record, place, &mut b);
            }
            done += batch.num_rows() as u64;
        }
        Ok(b)
    }
}

/// Counts the rows of a row group that could not be decoded as rejected, with one detailed entry.
pub(super) fn reject_rest_of_row_group(
    b: &mut TraceBuilder,
    file: u32,
    rg: usize,
    row0: u64,
    done: u64,
    rows: u64,
    e: &str,
) {
    let lost = rows.saturating_sub(done);
    if lost == 0 {
        return;
    }
    b.report.records += lost;
    b.report.reject(Rejection {
        place: Place { file, at: row0 + done },
        problem: Problem::Malformed,
        record: None,
        field: None,
        reason: format!(
            "row group {rg} (rows {}..{}) cannot be decoded: {e}; its {lost} remaining rows are lost",
            row0 + done,
            row0 + rows
        ),
    });
    *b.report.rejected_by_problem.entry(Problem::Malformed).or_default() += lost - 1;
}

/// The first record of each kind checks that the file has the columns that kind requires.
pub(super) fn check_required(
    record: &RawRecord<'_>,
    present: &[String],
    checked: &mut Vec<String>,
    path: &Path,
    row: u64,
) -> Result<(), LoadError> {
    let Some(Val::Ok(kind)) = &record.kind else {
        return Ok(());
    };
    if checked.iter().any(|k| k == kind) {
        return Ok(());
    }
    checked.push(kind.to_string());
    if let Some(column) = schema::required_fields(kind)
        .iter()
        .find(|c| !present.iter().any(|p| p == *c))
    {
        return Err(LoadError::MissingColumn {
            path: path.display().to_string(),
            column: (*column).to_owned(),
            detail: format!(
                "the file has {kind} records (the first at row {row}) and every {kind} record needs {column}; \
                 add the column{}",
                if schema::is_time_field(column) {
                    " (Int64, nanoseconds since the Unix epoch)"
                } else {
                    ""
                }
            ),
        });
    }
    Ok(())
}
