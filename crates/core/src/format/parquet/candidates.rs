//! The lazy candidate reader: a Parquet trace's candidates left on disk and read per request, page by page.

use std::fs::File;
use std::path::Path;

use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowSelection, RowSelector,
};
use parquet::file::metadata::PageIndexPolicy;

use crate::format::schema::{CANDIDATES, KIND};
use crate::ingest::LoadError;
use crate::ingest::raw::{RawCandidate, Val};
use crate::trace::{Flag, NULL_U32, OwnedCandidate, TokenChoice, Trace};

use super::columns::*;
use super::{READ_BATCH_ROWS, parquet_error};

impl crate::trace::CandidateSource for CandidateReader {
    fn candidates(
        &self,
        trace: &Trace,
        request: u32,
    ) -> Result<Vec<Vec<OwnedCandidate>>, crate::trace::CandidateError> {
        self.read(trace, request)
            .map_err(|e| crate::trace::CandidateError(e.to_string()))
    }
}

/// Reads the candidates of one request at a time from the Parquet files a lazily loaded trace left them in. Holds
/// each file's metadata with its offset index, so a read decodes only the pages holding the request's rows.
pub struct CandidateReader {
    files: Vec<(std::path::PathBuf, ArrowReaderMetadata)>,
}

/// The columns that place a candidate: its token's kind, request and index, and the candidates.
const PLACED: [&str; 4] = [KIND, "request_id", "index", CANDIDATES];
/// The columns of a token's choice: those that place it, its id, logprob and rank, and its time (a token's record
/// is checked whole, as a load checks it, and a token needs one).
const CHOSEN: [&str; 8] = [
    KIND,
    "request_id",
    "index",
    "emitted_ns",
    "token_id",
    "logprob",
    "rank",
    CANDIDATES,
];

impl CandidateReader {
    /// A reader for the trace's files; `None` when its candidates are in memory.
    pub fn open(trace: &Trace) -> Result<Option<Self>, LoadError> {
        let Some(disk) = &trace.candidates_on_disk else {
            return Ok(None);
        };
        Self::of_files(&disk.files).map(Some)
    }

    /// A reader for these Parquet files.
    pub fn of_files(paths: &[std::path::PathBuf]) -> Result<Self, LoadError> {
        let disk_files = paths;
        // The offset index places the pages a selection of rows needs; the column index (each page's minimum and
        // maximum) is not read: nothing is filtered by value.
        let options = ArrowReaderOptions::new()
            .with_offset_index_policy(PageIndexPolicy::Optional)
            .with_column_index_policy(PageIndexPolicy::Skip);
        let files = disk_files
            .iter()
            .map(|path| {
                let f = File::open(path).map_err(|e| LoadError::Io {
                    path: path.display().to_string(),
                    source: e,
                })?;
                let meta = ArrowReaderMetadata::load(&f, options.clone()).map_err(|e| parquet_error(path, e))?;
                Ok((path.clone(), meta))
            })
            .collect::<Result<Vec<_>, LoadError>>()?;
        Ok(CandidateReader { files })
    }

    /// The choice of the tokens at rows `wanted` of file `file` (its row, its request id and its index, sorted by
    /// row), with their candidates or not (the rank is then the one written): `None` for a row that is not that token,
    /// or whose record breaks the format's rules.
    ///
    /// # Errors
    /// The file cannot be read any more.
    pub fn read_choices(
        &self,
        file: usize,
        wanted: &[(u64, &str, u32)],
        with_candidates: bool,
    ) -> Result<Vec<Option<TokenChoice>>, LoadError> {
        let mut out = vec![None; wanted.len()];
        let Some((path, meta)) = self.files.get(file) else {
            return Ok(out);
        };
        // Rows past the file's end, or repeated, are not read (and stay `None`).
        let (groups, selectors, picked) = single_rows(meta, wanted.iter().map(|w| w.0));
        let mut next = picked.into_iter();
        let columns = if with_candidates {
            &CHOSEN[..]
        } else {
            &CHOSEN[..CHOSEN.len() - 1]
        };
        let mut scratch = crate::trace::TraceBuilder::default();
        for batch in self.rows(path, meta, groups, selectors, columns)? {
            let batch = batch.map_err(|e| parquet_error(path, e))?;
            let cols = Cols::of(&batch);
            let mut row = RowBuffer::default();
            for i in 0..batch.num_rows() {
                let Some(k) = next.next() else { break };
                cols.fill(i, &mut row);
                let r = &row.record;
                let (_, id, index) = wanted[k];
                if let (Some(Val::Ok(rid)), Some(Val::Ok(ix))) = (&r.request_id, &r.index)
                    && rid.as_ref() == id
                    && *ix == i64::from(index)
                {
                    out[k] = crate::ingest::validate::choice_of(r, &mut scratch);
                }
            }
        }
        Ok(out)
    }

    /// The candidates of every token of `request`, in index order: only the rows of its tokens, only the columns
    /// that place a candidate. Candidates that break the format's rules (no logprob, logprob above 0) are left out.
    pub fn read(&self, trace: &Trace, request: u32) -> Result<Vec<Vec<OwnedCandidate>>, LoadError> {
        let tokens = trace.tokens_of(request);
        let mut out = vec![Vec::new(); tokens.len()];
        let Some(disk) = &trace.candidates_on_disk else {
            return Ok(trace.owned_candidates(request));
        };
        let Some(Some((file, first, last))) = disk.rows.get(request as usize) else {
            return Ok(out);
        };
        let Some((path, meta)) = self.files.get(*file as usize) else {
            return Ok(out);
        };
        let (mut groups, mut selectors, mut row0) = (Vec::new(), Vec::new(), 0u64);
        for rg in 0..meta.metadata().num_row_groups() {
            let n = u64::try_from(meta.metadata().row_group(rg).num_rows()).unwrap_or(0);
            let (a, b) = (row0.max(*first), (row0 + n).min(*last + 1));
            if a < b {
                groups.push(rg);
                let to_usize = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
                selectors.push(RowSelector::skip(to_usize(a - row0)));
                selectors.push(RowSelector::select(to_usize(b - a)));
                selectors.push(RowSelector::skip(to_usize(row0 + n - b)));
            }
            row0 += n;
        }
        let reader = self.rows(path, meta, groups, selectors, &PLACED)?;
        let id = trace.request_id(request);
        let index = &trace.tokens.index[tokens.clone()];
        for batch in reader {
            let batch = batch.map_err(|e| parquet_error(path, e))?;
            let cols = Cols::of(&batch);
            let mut row = RowBuffer::default();
            for i in 0..batch.num_rows() {
                cols.fill(i, &mut row);
                let r = &row.record;
                let (Some(Val::Ok(rid)), Some(Val::Ok(k)), Some(Val::Ok(list))) =
                    (&r.request_id, &r.index, &r.candidates)
                else {
                    continue;
                };
                let Ok(k) = u32::try_from(*k) else { continue };
                if rid.as_ref() != id {
                    continue;
                }
                let Ok(pos) = index.binary_search(&k) else { continue };
                out[pos] = list.iter().filter_map(owned_candidate).collect();
            }
        }
        Ok(out)
    }
    /// A reader of the columns `wanted` (those that place a candidate, [`PLACED`], or a token's choice, [`CHOSEN`])
    /// in row groups `groups` of `path`, rows `selectors` of them; the page headers of those columns walked with bounded counts first.
    #[expect(
        clippy::unused_self,
        reason = "one of the reader's steps, called as its siblings are"
    )]
    fn rows(
        &self,
        path: &Path,
        meta: &ArrowReaderMetadata,
        groups: Vec<usize>,
        selectors: Vec<RowSelector>,
        wanted: &[&str],
    ) -> Result<parquet::arrow::arrow_reader::ParquetRecordBatchReader, LoadError> {
        let f = File::open(path).map_err(|e| LoadError::Io {
            path: path.display().to_string(),
            source: e,
        })?;
        let roots: Vec<usize> = meta
            .schema()
            .fields()
            .iter()
            .enumerate()
            .filter(|(_, f)| wanted.contains(&f.name().as_str()))
            .map(|(i, _)| i)
            .collect();
        let mask = ProjectionMask::roots(meta.metadata().file_metadata().schema_descr(), roots);
        for &rg in &groups {
            for (i, column) in meta.metadata().row_group(rg).columns().iter().enumerate() {
                if mask.leaf_included(i) {
                    let (start, len) = column.byte_range();
                    crate::format::page_headers::check_chunk(&f, start, len).map_err(|e| {
                        parquet_error(path, format!("row group {rg}, column {}: {e}", column.column_path()))
                    })?;
                }
            }
        }
        ParquetRecordBatchReaderBuilder::new_with_metadata(f, meta.clone())
            .with_projection(mask)
            .with_row_groups(groups)
            .with_row_selection(RowSelection::from(selectors))
            .with_batch_size(READ_BATCH_ROWS)
            .build()
            .map_err(|e| parquet_error(path, e))
    }

    /// The candidates of the tokens `wanted` (token rows), read in one pass per file: each token is looked for at
    /// the row its request's order puts it (tokenscope writes a request's tokens in index order), and a token not
    /// found there is read with its request's rows. Tokens without candidates are left out.
    ///
    /// # Errors
    /// The files cannot be read any more.
    pub fn read_tokens(&self, trace: &Trace, wanted: &[u32]) -> Result<Vec<(u32, Vec<OwnedCandidate>)>, LoadError> {
        let Some(disk) = &trace.candidates_on_disk else {
            return Ok(Vec::new());
        };
        let mut by_file: Vec<Vec<(u64, u32)>> = vec![Vec::new(); self.files.len()];
        for &t in wanted {
            let r = trace.tokens.request[t as usize];
            if let Some(Some((file, first, _))) = disk.rows.get(r as usize)
                && let Some(rows) = by_file.get_mut(*file as usize)
            {
                rows.push((first + u64::from(t) - trace.tokens_of(r).start as u64, t));
            }
        }
        let (mut found, mut missed) = (Vec::new(), Vec::new());
        for (file, mut rows) in by_file.into_iter().enumerate() {
            if rows.is_empty() {
                continue;
            }
            rows.sort_unstable();
            let mut seen = std::collections::HashSet::new();
            rows.retain(|&(row, t)| {
                seen.insert(row) || {
                    missed.push(t);
                    false
                }
            });
            let (path, meta) = &self.files[file];
            // The rows are distinct: those read are the first, in order (the rest are past the file's end).
            let (groups, selectors, _) = single_rows(meta, rows.iter().map(|r| r.0));
            let mut next = rows.iter();
            for batch in self.rows(path, meta, groups, selectors, &PLACED)? {
                let batch = batch.map_err(|e| parquet_error(path, e))?;
                let cols = Cols::of(&batch);
                let mut row = RowBuffer::default();
                for i in 0..batch.num_rows() {
                    let Some(&(_, t)) = next.next() else { break };
                    cols.fill(i, &mut row);
                    let r = &row.record;
                    let request = trace.tokens.request[t as usize];
                    match (&r.request_id, &r.index, &r.candidates) {
                        (Some(Val::Ok(rid)), Some(Val::Ok(k)), list)
                            if rid.as_ref() == trace.request_id(request)
                                && *k == i64::from(trace.tokens.index[t as usize]) =>
                        {
                            if let Some(Val::Ok(list)) = list {
                                found.push((t, list.iter().filter_map(owned_candidate).collect()));
                            }
                        }
                        _ => missed.push(t),
                    }
                }
            }
            missed.extend(next.map(|&(_, t)| t));
        }
        // Tokens elsewhere in their request's rows: read with the request.
        missed.sort_by_key(|&t| trace.tokens.request[t as usize]);
        for group in missed.chunk_by(|&a, &b| trace.tokens.request[a as usize] == trace.tokens.request[b as usize]) {
            let r = trace.tokens.request[group[0] as usize];
            let all = self.read(trace, r)?;
            let start = trace.tokens_of(r).start;
            for &t in group {
                if let Some(list) = all.get(t as usize - start).filter(|l| !l.is_empty()) {
                    found.push((t, list.clone()));
                }
            }
        }
        Ok(found)
    }
}

/// The selection of single rows of a file, `rows` sorted: the row groups that hold them, the selectors of those
/// groups' rows, and the places in `rows` of those selected (a row repeated, or past the file's end, is not).
fn single_rows(
    meta: &ArrowReaderMetadata,
    rows: impl IntoIterator<Item = u64>,
) -> (Vec<usize>, Vec<RowSelector>, Vec<usize>) {
    let to_usize = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
    let (mut groups, mut selectors, mut picked) = (Vec::new(), Vec::new(), Vec::new());
    let mut rows = rows.into_iter().enumerate().peekable();
    let mut row0 = 0u64;
    for rg in 0..meta.metadata().num_row_groups() {
        let n = u64::try_from(meta.metadata().row_group(rg).num_rows()).unwrap_or(0);
        let mut at = row0;
        while let Some(&(k, row)) = rows.peek()
            && row < row0 + n
        {
            if row >= at {
                selectors.push(RowSelector::skip(to_usize(row - at)));
                selectors.push(RowSelector::select(1));
                at = row + 1;
                picked.push(k);
            }
            rows.next();
        }
        if at > row0 {
            groups.push(rg);
            selectors.push(RowSelector::skip(to_usize(row0 + n - at)));
        }
        row0 += n;
    }
    (groups, selectors, picked)
}

/// A candidate read on demand, when it follows the format's rules.
pub(super) fn owned_candidate(c: &RawCandidate<'_>) -> Option<OwnedCandidate> {
    let logprob = match c.logprob {
        Some(Val::Ok(lp)) if lp.is_finite() && lp <= 0.0 => lp,
        _ => return None,
    };
    Some(OwnedCandidate {
        token_id: match c.token_id {
            Some(Val::Ok(t)) => u32::try_from(t).unwrap_or(NULL_U32),
            _ => NULL_U32,
        },
        text: match &c.text {
            Some(Val::Ok(t)) => Some(t.to_string()),
            _ => None,
        },
        logprob,
        special: match c.special {
            Some(Val::Ok(b)) => Flag::from_opt(Some(b)),
            _ => Flag::Null,
        },
    })
}

/// Reads one request's candidates from the files a lazily loaded trace left them in (opens a [`CandidateReader`]
/// for the one read; keep one to read many).
pub fn read_request_candidates(trace: &Trace, request: u32) -> Result<Vec<Vec<OwnedCandidate>>, LoadError> {
    match CandidateReader::open(trace)? {
        Some(reader) => reader.read(trace, request),
        None => Ok(trace.owned_candidates(request)),
    }
}
