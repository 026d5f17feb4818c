//! A Parquet trace streamed row group by row group: only the columns asked for, the row groups decoded on rayon's
//! threads a window at a time and handed over in file order, so memory holds two windows of decoded row groups
//! whatever the size of the file. Nothing is validated here: the caller reads the values it needs and says what it
//! cannot vouch for.

use std::fs::File;
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use arrow_schema::DataType;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ParquetRecordBatchReaderBuilder};
use parquet::file::metadata::RowGroupMetaData;
use parquet::file::statistics::Statistics;
use rayon::prelude::*;

use super::columns::Col;
use super::{READ_BATCH_ROWS, parquet_error};
use crate::format::schema::KIND;
use crate::ingest::LoadError;

/// One Parquet file of a trace, its footer read.
pub struct StreamFile {
    path: PathBuf,
    meta: ArrowReaderMetadata,
}

impl StreamFile {
    /// Reads the footer of `path`.
    ///
    /// # Errors
    /// The file cannot be opened, its footer cannot be decoded, or it has no `kind` column.
    pub fn open(path: &Path) -> Result<Self, LoadError> {
        let file = File::open(path).map_err(|e| LoadError::Io {
            path: path.display().to_string(),
            source: e,
        })?;
        let meta = super::decode_footer(&file, path)?;
        if meta.schema().field_with_name(KIND).is_err() {
            return Err(LoadError::MissingColumn {
                path: path.display().to_string(),
                column: KIND.to_owned(),
                detail: "every row needs a kind (meta, request, iteration, sample, stage or token); add a string \
                         column \"kind\""
                    .to_owned(),
            });
        }
        Ok(Self {
            path: path.to_owned(),
            meta,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Refuses, from the file's schema and before a row is read, a column of `wanted` (name, type: `"string"`,
    /// `"int"`, `"float"` or `"boolean"`, as [`Columns::check`] names them) that has another type: the error a pass
    /// would meet at its first row group, met before the first pass.
    ///
    /// # Errors
    /// The first column of another type, named with the file and the fix.
    pub fn check_types(&self, wanted: &[(&str, &str)]) -> Result<(), LoadError> {
        for &(name, want) in wanted {
            let Ok(field) = self.meta.schema().field_with_name(name) else {
                continue;
            };
            let found = match field.data_type() {
                DataType::Null => continue,
                DataType::Dictionary(_, v) if super::columns::type_name(v) == "string" => "string",
                t if t.is_integer() || matches!(t, DataType::Timestamp(..)) => "int",
                t => super::columns::type_name(t),
            };
            if found != want && !(want == "float" && found == "int") {
                return Err(super::parquet_error(
                    &self.path,
                    format!("column {name} is {found}, not {want}: write it as the format says (docs/TRACE_FORMAT.md)"),
                ));
            }
        }
        Ok(())
    }

    /// The rows of the row groups a stream of `kind`'s rows reads: those whose statistics show that kind alone, or
    /// no single kind.
    pub fn rows_of_kind(&self, kind: &str) -> u64 {
        self.meta
            .metadata()
            .row_groups()
            .iter()
            .filter(|rg| only_value(rg, KIND).is_none_or(|k| k == kind))
            .map(|rg| u64::try_from(rg.num_rows()).unwrap_or(0))
            .sum()
    }

    /// Whether the file has a column of this name.
    pub fn has_column(&self, name: &str) -> bool {
        self.meta.schema().field_with_name(name).is_ok()
    }

    /// Whether some row has a value in this column: present, and not null throughout by every row group's
    /// statistics (a row group without them may have values).
    pub fn has_values(&self, name: &str) -> bool {
        self.has_column(name)
            && self.meta.metadata().row_groups().iter().any(|rg| {
                let nulls = rg
                    .columns()
                    .iter()
                    .find(|c| c.column_path().string() == name)
                    .and_then(|c| c.statistics())
                    .and_then(Statistics::null_count_opt);
                nulls != Some(u64::try_from(rg.num_rows()).unwrap_or(0))
            })
    }
}

/// The one value of a string column in a row group, when its statistics show no null and min = max.
pub(super) fn only_value(rg: &RowGroupMetaData, name: &str) -> Option<String> {
    let stats = rg
        .columns()
        .iter()
        .find(|c| c.column_path().string() == name)
        .and_then(|c| c.statistics());
    match stats {
        Some(Statistics::ByteArray(s)) if s.null_count_opt() == Some(0) => match (s.min_opt(), s.max_opt()) {
            (Some(a), Some(b)) if a == b => a.as_utf8().ok().map(str::to_owned),
            _ => None,
        },
        _ => None,
    }
}

/// Where a batch comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct At {
    /// Index of the file among those streamed.
    pub file: usize,
    /// Row group within the file.
    pub row_group: usize,
    /// The batch's first row, 0-based within the file.
    pub first_row: u64,
}

/// The columns asked for of one batch of rows, in the order asked. A column the file lacks reads as null
/// throughout; a column of a type its field cannot have is an error naming it when it is read
/// ([`Columns::check`]).
pub struct Columns {
    rows: usize,
    cols: Vec<Col>,
    names: Vec<&'static str>,
    /// The kind of every row, when the row group's statistics say so (its `kind` column is then not read).
    kind: Option<String>,
}

impl Columns {
    /// Rows in the batch.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Row `i`'s kind.
    pub fn kind(&self, i: usize) -> Option<&str> {
        match &self.kind {
            Some(k) => Some(k),
            None => self.str(0, i),
        }
    }

    /// Column `c` at row `i`, when it is a string.
    pub fn str(&self, c: usize, i: usize) -> Option<&str> {
        match &self.cols[c] {
            Col::Str(a) if !arrow_array::Array::is_null(a, i) => Some(a.value(i)),
            _ => None,
        }
    }

    /// Column `c` at row `i`, when it is an integer.
    pub fn int(&self, c: usize, i: usize) -> Option<i64> {
        match &self.cols[c] {
            Col::Int(a) if !arrow_array::Array::is_null(a, i) => Some(a.value(i)),
            _ => None,
        }
    }

    /// Column `c` at row `i`, when it is a number.
    #[expect(clippy::cast_precision_loss, reason = "an integer in a float field: small values")]
    pub fn float(&self, c: usize, i: usize) -> Option<f64> {
        match &self.cols[c] {
            Col::Float(a) if !arrow_array::Array::is_null(a, i) => Some(a.value(i)),
            Col::Int(a) if !arrow_array::Array::is_null(a, i) => Some(a.value(i) as f64),
            _ => None,
        }
    }

    /// Column `c` at row `i`, when it is a boolean.
    pub fn flag(&self, c: usize, i: usize) -> Option<bool> {
        match &self.cols[c] {
            Col::Bool(a) if !arrow_array::Array::is_null(a, i) => Some(a.value(i)),
            _ => None,
        }
    }

    /// Whether column `c` has a value at row `i`, whatever its type.
    pub fn is_set(&self, c: usize, i: usize) -> bool {
        !self.cols[c].is_null(i)
    }

    /// Checks the columns from `first` on against `wanted`, one type each, in order (see [`Self::check`]).
    ///
    /// # Errors
    /// The first column of another type, named, with the fix.
    pub fn check_from(&self, first: usize, wanted: &[&str]) -> Result<(), String> {
        wanted
            .iter()
            .enumerate()
            .try_for_each(|(k, w)| self.check(first + k, w))
    }

    /// Refuses a column whose type is not the one its field has (`"string"`, `"int"` or `"float"`), naming it.
    ///
    /// # Errors
    /// The column's type, and what it should be.
    pub fn check(&self, c: usize, wanted: &str) -> Result<(), String> {
        let found = match &self.cols[c] {
            Col::Absent => return Ok(()),
            Col::Str(_) => "string",
            Col::Int(_) => "int",
            Col::Float(_) => "float",
            Col::Bool(_) => "boolean",
            Col::Other(_, t) => t,
        };
        if found == wanted || (wanted == "float" && found == "int") {
            Ok(())
        } else {
            Err(format!(
                "column {} is {found}, not {wanted}: write it as the format says (docs/TRACE_FORMAT.md)",
                self.names[c]
            ))
        }
    }
}

/// A row group to stream.
struct Unit {
    file: usize,
    rg: usize,
    first_row: u64,
    kind: Option<String>,
}

/// Streams the row groups of `files` that `wanted` keeps (it is given a row group's single kind when its statistics
/// show one, and its metadata), reading `columns` (`kind` first), and hands each batch to `decode` on rayon's threads; `merge` then
/// takes the decoded batches in file and row order. While one window of row groups decodes, the previous one is
/// merged.
///
/// # Errors
/// A file cannot be read, a row group cannot be decoded, or `decode` or `merge` fails: the first error in file
/// order, naming the file and row group.
pub fn stream<P, D, M>(
    files: &[StreamFile],
    columns: &[&'static str],
    wanted: impl Fn(Option<&str>, &RowGroupMetaData) -> bool,
    decode: D,
    mut merge: M,
) -> Result<(), LoadError>
where
    P: Send,
    D: Fn(&Columns, At) -> Result<P, String> + Sync,
    M: FnMut(P, At) -> Result<(), String> + Send,
{
    let mut units = Vec::new();
    for (file, f) in files.iter().enumerate() {
        let mut first_row = 0u64;
        for (rg, meta) in f.meta.metadata().row_groups().iter().enumerate() {
            let kind = only_value(meta, KIND);
            if wanted(kind.as_deref(), meta) {
                units.push(Unit {
                    file,
                    rg,
                    first_row,
                    kind,
                });
            }
            first_row += u64::try_from(meta.num_rows()).unwrap_or(0);
        }
    }
    let fail = |u: &Unit, e: String| {
        parquet_error(
            files[u.file].path(),
            format!("row group {} (from row {}): {e}", u.rg, u.first_row),
        )
    };
    let decode_unit = |u: &Unit| -> Result<Vec<(P, At)>, LoadError> {
        crate::ingest::quiet::catch(|| read_unit(&files[u.file], u, columns, &decode))
            .unwrap_or_else(|why| Err(format!("the decoder failed ({why})")))
            .map_err(|e| fail(u, e))
    };
    // Two row groups a thread per window: a token row group of the columns a figure needs is a few MB decoded.
    let window = 2 * rayon::current_num_threads().max(1);
    let mut previous: Vec<Result<Vec<(P, At)>, LoadError>> = Vec::new();
    for chunk in units.chunks(window) {
        let done = std::mem::take(&mut previous);
        let (merged, next) = rayon::join(
            || -> Result<(), LoadError> {
                for decoded in done {
                    for (p, at) in decoded? {
                        merge(p, at).map_err(|e| merge_error(files, at, e))?;
                    }
                }
                Ok(())
            },
            || chunk.par_iter().map(decode_unit).collect::<Vec<_>>(),
        );
        merged?;
        previous = next;
    }
    for decoded in previous {
        for (p, at) in decoded? {
            merge(p, at).map_err(|e| merge_error(files, at, e))?;
        }
    }
    Ok(())
}

fn merge_error(files: &[StreamFile], at: At, e: String) -> LoadError {
    parquet_error(
        files[at.file].path(),
        format!("row group {} (from row {}): {e}", at.row_group, at.first_row),
    )
}

/// Decodes one row group's batches.
fn read_unit<P>(
    file: &StreamFile,
    u: &Unit,
    columns: &[&'static str],
    decode: &(impl Fn(&Columns, At) -> Result<P, String> + Sync),
) -> Result<Vec<(P, At)>, String> {
    let schema = file.meta.schema();
    let descr = file.meta.metadata().file_metadata().schema_descr();
    // The columns read: those the file has, but not `kind` when the statistics gave it.
    let read: Vec<&str> = columns
        .iter()
        .copied()
        .filter(|&c| schema.field_with_name(c).is_ok() && !(c == KIND && u.kind.is_some()))
        .collect();
    let roots: Vec<usize> = read.iter().filter_map(|c| schema.index_of(c).ok()).collect();
    let mask = ProjectionMask::roots(descr, roots);
    // The page headers of the columns read, walked with bounded counts first (as a load does): a corrupt one can
    // keep parquet-rs's Thrift decoder busy for minutes.
    let headers = File::open(&file.path).map_err(|e| e.to_string())?;
    for (i, column) in file.meta.metadata().row_group(u.rg).columns().iter().enumerate() {
        if mask.leaf_included(i) {
            let (start, len) = column.byte_range();
            crate::format::page_headers::check_chunk(&headers, start, len)
                .map_err(|e| format!("column {}: {e}", column.column_path()))?;
        }
    }
    let reader = File::open(&file.path).map_err(|e| e.to_string()).and_then(|f| {
        ParquetRecordBatchReaderBuilder::new_with_metadata(f, file.meta.clone())
            .with_projection(mask)
            .with_row_groups(vec![u.rg])
            .with_batch_size(READ_BATCH_ROWS)
            .build()
            .map_err(|e| e.to_string())
    })?;
    let mut out = Vec::new();
    let mut first_row = u.first_row;
    for batch in reader {
        let batch: RecordBatch = batch.map_err(|e| e.to_string())?;
        let cols = Columns {
            rows: batch.num_rows(),
            cols: columns.iter().map(|c| Col::of(batch.column_by_name(c))).collect(),
            names: columns.to_vec(),
            kind: u.kind.clone(),
        };
        let at = At {
            file: u.file,
            row_group: u.rg,
            first_row,
        };
        out.push((decode(&cols, at)?, at));
        first_row += batch.num_rows() as u64;
    }
    Ok(out)
}
