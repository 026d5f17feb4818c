//! Parquet through arrow-rs: one column per field, read with a projection of the known columns, row group by row
//! group (a corrupt row group costs its rows, not the file). Column types are normalised first (any integer width,
//! Timestamp for `_ns`, LargeUtf8 / Utf8View / dictionaries, Float32); a column of the wrong type turns into
//! per-record rejections that name the field and what it held.

use std::borrow::Cow;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use arrow::array::{
    Array, ArrayBuilder, ArrayRef, AsArray, BooleanArray, BooleanBuilder, Float64Array, Float64Builder, Int64Array,
    Int64Builder, ListArray, RecordBatch, StringArray, StringBuilder, StructArray,
};
use arrow::buffer::{NullBuffer, OffsetBuffer};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Fields, Float64Type, Int64Type, TimeUnit};
use bytes::Bytes;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowSelection, RowSelector,
};
use parquet::arrow::{ArrowWriter, ProjectionMask};
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::PageIndexPolicy;
use parquet::file::properties::WriterProperties;
use parquet::file::reader::ChunkReader;
use rayon::prelude::*;

use super::records::for_each_record;
use super::schema::{self, CANDIDATE_FIELDS, CANDIDATES, EOS_TOKEN_IDS, KIND, SCALAR_FIELDS};
use super::window::{self, Window};
use crate::ingest::raw::{Field, Found, RawCandidate, RawRecord, Val};
use crate::ingest::validate::ingest;
use crate::ingest::{LoadError, Progress};
use crate::trace::report::{Place, Problem, Rejection};
use crate::trace::{Flag, NULL_U32, OwnedCandidate, Trace, TraceBuilder};

/// Rows per record batch when reading.
const READ_BATCH_ROWS: usize = 64 * 1024;
/// Rows per row group when writing: small enough that one request's tokens can be read without the rest.
pub const WRITE_ROW_GROUP_ROWS: usize = 64 * 1024;
/// Rows per data page when writing (best effort): the unit a read of one request's candidates decodes.
const WRITE_PAGE_ROWS: usize = 8192;

/// A column normalised to one of the four scalar types, or kept as is when it is none of them.
enum Col {
    Absent,
    Str(StringArray),
    Int(Int64Array),
    Float(Float64Array),
    Bool(BooleanArray),
    Other(ArrayRef, &'static str),
}

fn type_name(t: &DataType) -> &'static str {
    match t {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "string",
        DataType::Float16 | DataType::Float32 | DataType::Float64 => "float",
        DataType::Boolean => "boolean",
        DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..) | DataType::ListView(_) => "list",
        DataType::Struct(_) => "struct",
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView | DataType::FixedSizeBinary(_) => "binary",
        DataType::Date32 | DataType::Date64 => "date",
        DataType::Decimal32(..) | DataType::Decimal64(..) | DataType::Decimal128(..) | DataType::Decimal256(..) => {
            "decimal"
        }
        _ => "unsupported",
    }
}

impl Col {
    fn of(array: Option<&ArrayRef>) -> Col {
        let Some(a) = array else { return Col::Absent };
        let dt = a.data_type();
        if *dt == DataType::Null {
            // An all-null column (pyarrow writes one for a field that is None throughout): no values.
            return Col::Absent;
        }
        let converted = match dt {
            DataType::Utf8 => a.as_string_opt::<i32>().cloned().map(Col::Str),
            DataType::LargeUtf8 | DataType::Utf8View | DataType::Dictionary(..) => cast(a, &DataType::Utf8)
                .ok()
                .and_then(|c| c.as_string_opt::<i32>().cloned())
                .map(Col::Str),
            DataType::Int64 => a.as_primitive_opt::<Int64Type>().cloned().map(Col::Int),
            DataType::Int8
            | DataType::Int16
            | DataType::Int32
            | DataType::UInt8
            | DataType::UInt16
            | DataType::UInt32
            | DataType::UInt64 => cast(a, &DataType::Int64)
                .ok()
                .and_then(|c| c.as_primitive_opt::<Int64Type>().cloned())
                .map(Col::Int),
            DataType::Timestamp(_, tz) => cast(a, &DataType::Timestamp(TimeUnit::Nanosecond, tz.clone()))
                .and_then(|c| cast(&c, &DataType::Int64))
                .ok()
                .and_then(|c| c.as_primitive_opt::<Int64Type>().cloned())
                .map(Col::Int),
            DataType::Float64 => a.as_primitive_opt::<Float64Type>().cloned().map(Col::Float),
            DataType::Float16 | DataType::Float32 => cast(a, &DataType::Float64)
                .ok()
                .and_then(|c| c.as_primitive_opt::<Float64Type>().cloned())
                .map(Col::Float),
            DataType::Boolean => a.as_boolean_opt().cloned().map(Col::Bool),
            _ => None,
        };
        converted.unwrap_or_else(|| Col::Other(Arc::clone(a), type_name(dt)))
    }

    fn is_null(&self, i: usize) -> bool {
        match self {
            Col::Absent => true,
            Col::Str(a) => a.is_null(i),
            Col::Int(a) => a.is_null(i),
            Col::Float(a) => a.is_null(i),
            Col::Bool(a) => a.is_null(i),
            Col::Other(a, _) => a.is_null(i),
        }
    }

    /// What a non-null value of this column is, for a field expecting another type.
    fn found(&self, i: usize) -> Found {
        match self {
            Col::Int(a) => Found::Int(a.value(i)),
            Col::Float(a) => Found::Float(a.value(i)),
            Col::Str(_) => Found::Str,
            Col::Bool(_) => Found::Bool,
            Col::Absent => Found::Column("absent"),
            Col::Other(_, t) => Found::Column(t),
        }
    }

    // The accessors below test the column's type once, then its null bit: they run for every field of every row.

    #[inline]
    fn str_at(&self, i: usize) -> Field<Cow<'_, str>> {
        match self {
            Col::Str(a) => (!a.is_null(i)).then(|| Val::Ok(Cow::Borrowed(a.value(i)))),
            _ => self.wrong(i),
        }
    }

    #[inline]
    fn int_at(&self, i: usize) -> Field<i64> {
        match self {
            Col::Int(a) => (!a.is_null(i)).then(|| Val::Ok(a.value(i))),
            _ => self.wrong(i),
        }
    }

    #[inline]
    #[allow(clippy::cast_precision_loss)] // an integer in a float field: small values (logprob, temperature)
    fn float_at(&self, i: usize) -> Field<f64> {
        match self {
            Col::Float(a) => (!a.is_null(i)).then(|| Val::Ok(a.value(i))),
            Col::Int(a) => (!a.is_null(i)).then(|| Val::Ok(a.value(i) as f64)),
            _ => self.wrong(i),
        }
    }

    #[inline]
    fn bool_at(&self, i: usize) -> Field<bool> {
        match self {
            Col::Bool(a) => (!a.is_null(i)).then(|| Val::Ok(a.value(i))),
            _ => self.wrong(i),
        }
    }

    /// A field read from a column of another type: absent when null, else what the column holds.
    #[cold]
    fn wrong<T>(&self, i: usize) -> Field<T> {
        (!self.is_null(i)).then(|| Val::Wrong(self.found(i)))
    }
}

macro_rules! at {
    (Str, $c:expr, $i:expr) => {
        $c.str_at($i)
    };
    (Int, $c:expr, $i:expr) => {
        $c.int_at($i)
    };
    (Float, $c:expr, $i:expr) => {
        $c.float_at($i)
    };
    (Bool, $c:expr, $i:expr) => {
        $c.bool_at($i)
    };
}

/// A list column: offsets into a child column, or a column of another type.
enum ListCol<C> {
    Absent,
    List {
        offsets: Vec<usize>,
        nulls: Option<NullBuffer>,
        child: C,
    },
    Other(ArrayRef, &'static str),
}

impl<C> ListCol<C> {
    fn of(array: Option<&ArrayRef>, child: impl FnOnce(&ArrayRef) -> Option<C>) -> Self {
        let Some(a) = array else {
            return ListCol::Absent;
        };
        let parts = match a.data_type() {
            DataType::List(_) => a.as_list_opt::<i32>().map(|l| {
                let offsets = l
                    .value_offsets()
                    .iter()
                    .map(|&o| usize::try_from(o).unwrap_or(0))
                    .collect();
                (offsets, l.nulls().cloned(), Arc::clone(l.values()))
            }),
            DataType::LargeList(_) => a.as_list_opt::<i64>().map(|l| {
                let offsets = l
                    .value_offsets()
                    .iter()
                    .map(|&o| usize::try_from(o).unwrap_or(0))
                    .collect();
                (offsets, l.nulls().cloned(), Arc::clone(l.values()))
            }),
            _ => None,
        };
        match parts.and_then(|(offsets, nulls, values)| child(&values).map(|c| (offsets, nulls, c))) {
            Some((offsets, nulls, child)) => ListCol::List { offsets, nulls, child },
            None => ListCol::Other(Arc::clone(a), type_name(a.data_type())),
        }
    }

    /// The child rows of row `i`, or what the column is when not a readable list.
    fn at(&self, i: usize) -> Option<Result<(&C, std::ops::Range<usize>), Found>> {
        match self {
            ListCol::Absent => None,
            ListCol::List { offsets, nulls, child } => {
                if nulls.as_ref().is_some_and(|n| n.is_null(i)) {
                    return None;
                }
                Some(Ok((child, offsets[i]..offsets[i + 1])))
            }
            ListCol::Other(a, t) => (!a.is_null(i)).then_some(Err(Found::Column(t))),
        }
    }
}

struct CandidateCols {
    token_id: Col,
    text: Col,
    logprob: Col,
    special: Col,
}

macro_rules! columns {
    ($(($name:ident, $ty:ident)),* $(,)?) => {
        /// A scalar field, to read only the fields of a record's kind.
        #[allow(non_camel_case_types)]
        #[derive(Debug, Clone, Copy)]
        enum FieldId { $( $name, )* }

        impl FieldId {
            fn from_name(name: &str) -> Option<Self> {
                match name {
                    $( stringify!($name) => Some(FieldId::$name), )*
                    _ => None,
                }
            }
        }

        /// The normalised columns of one batch.
        struct Cols {
            $( $name: Col, )*
            eos_token_ids: ListCol<Col>,
            candidates: ListCol<CandidateCols>,
            /// For each kind of [`schema::KINDS`], the fields of that kind that this batch has.
            fields_by_kind: Vec<Vec<FieldId>>,
        }

        impl Cols {
            fn of(batch: &RecordBatch) -> Self {
                let fields_by_kind = schema::KINDS
                    .iter()
                    .map(|kind| {
                        schema::fields_of_kind(kind)
                            .iter()
                            .filter(|name| batch.column_by_name(name).is_some())
                            .filter_map(|name| FieldId::from_name(name))
                            .collect()
                    })
                    .collect();
                Cols {
                    $( $name: Col::of(batch.column_by_name(stringify!($name))), )*
                    eos_token_ids: ListCol::of(batch.column_by_name(EOS_TOKEN_IDS), |v| Some(Col::of(Some(v)))),
                    candidates: ListCol::of(batch.column_by_name(CANDIDATES), |v| {
                        let s: &StructArray = v.as_struct_opt()?;
                        Some(CandidateCols {
                            token_id: Col::of(s.column_by_name(CANDIDATE_FIELDS[0])),
                            text: Col::of(s.column_by_name(CANDIDATE_FIELDS[1])),
                            logprob: Col::of(s.column_by_name(CANDIDATE_FIELDS[2])),
                            special: Col::of(s.column_by_name(CANDIDATE_FIELDS[3])),
                        })
                    }),
                    fields_by_kind,
                }
            }

            fn set<'a>(&'a self, field: FieldId, i: usize, r: &mut RawRecord<'a>) {
                match field {
                    $( FieldId::$name => r.$name = at!($ty, self.$name, i), )*
                }
            }

            fn clear(field: FieldId, r: &mut RawRecord<'_>) {
                match field {
                    $( FieldId::$name => r.$name = None, )*
                }
            }

            /// The kind of row `i` (index into `schema::KINDS`), when it is one.
            #[inline]
            fn kind_at(&self, i: usize) -> Option<usize> {
                match &self.kind {
                    Col::Str(a) if !a.is_null(i) => {
                        let k = a.value(i);
                        schema::KINDS.iter().position(|&known| known == k)
                    }
                    _ => None,
                }
            }

            /// Fills `buf` with row `i`: the fields of its kind (validation reads no others). Only the fields the
            /// previous row set are cleared, and a token's candidate list reuses the previous one's allocation.
            fn fill<'a>(&'a self, i: usize, buf: &mut RowBuffer<'a>) {
                let r = &mut buf.record;
                // The kind's fields are all set below: those of another kind are cleared, those of a row of the
                // same kind (most rows follow one of their kind) are overwritten.
                let kind = self.kind_at(i);
                if let Some(prev) = buf.kind.take().filter(|&prev| Some(prev) != kind) {
                    for &field in &self.fields_by_kind[prev] {
                        Self::clear(field, r);
                    }
                }
                r.eos_token_ids = None;
                if let Some(Val::Ok(mut list)) = r.candidates.take() {
                    list.clear();
                    buf.spare = list;
                }
                r.kind = self.kind.str_at(i);
                let Some(kind) = kind else { return };
                buf.kind = Some(kind);
                for &field in &self.fields_by_kind[kind] {
                    self.set(field, i, r);
                }
                match schema::KINDS[kind] {
                    "meta" => {
                        r.eos_token_ids = self.eos_token_ids.at(i).map(|l| match l {
                            Ok((c, rows)) => Val::Ok(
                                rows.map(|j| c.int_at(j).unwrap_or(Val::Wrong(Found::Column("null")))).collect(),
                            ),
                            Err(found) => Val::Wrong(found),
                        });
                    }
                    "token" => {
                        r.candidates = self.candidates.at(i).map(|l| match l {
                            Ok((c, rows)) => {
                                let mut list = std::mem::take(&mut buf.spare);
                                list.extend(rows.map(|j| RawCandidate {
                                    token_id: c.token_id.int_at(j),
                                    text: c.text.str_at(j),
                                    logprob: c.logprob.float_at(j),
                                    special: c.special.bool_at(j),
                                }));
                                Val::Ok(list)
                            }
                            Err(found) => Val::Wrong(found),
                        });
                    }
                    _ => {}
                }
            }
        }
    };
}

/// One row at a time, reused from row to row of a batch (a record is ~2 KB of mostly absent fields).
#[derive(Default)]
struct RowBuffer<'a> {
    record: RawRecord<'a>,
    /// The kind of the row in `record` (index into `schema::KINDS`).
    kind: Option<usize>,
    /// A cleared candidate list, kept for the next token.
    spare: Vec<RawCandidate<'a>>,
}
crate::scalar_fields!(columns);

fn parquet_error(path: &Path, e: impl std::fmt::Display) -> LoadError {
    LoadError::Parquet {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

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

/// Whether a row group holds no record of the window, by its statistics alone: all its rows of one kind, and
/// - requests: arrivals all outside the window, or a label of one value the filters exclude;
/// - steps: starts all outside the window, or one source the filters exclude;
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
    let only = |name: &str| match stats(name) {
        Some(Statistics::ByteArray(s)) if s.null_count_opt() == Some(0) => match (s.min_opt(), s.max_opt()) {
            (Some(a), Some(b)) if a == b => a.as_utf8().ok().map(str::to_owned),
            _ => None,
        },
        _ => None,
    };
    let range = |name: &str| match stats(name) {
        Some(Statistics::Int64(s)) => s.min_opt().copied().zip(s.max_opt().copied()),
        _ => None,
    };
    let disjoint = |(lo, hi): (i64, i64)| w.from_ns.is_some_and(|f| hi < f) || w.to_ns.is_some_and(|t| lo >= t);
    let excluded = |labels: &[&str]| labels.iter().any(|&k| only(k).is_some_and(|v| !w.allows(k, &v)));
    match only(KIND).as_deref() {
        Some("request") => range("arrival_ns").is_some_and(disjoint) || excluded(&window::LABELS),
        Some("iteration") => range("start_ns").is_some_and(disjoint) || excluded(&["source"]),
        Some("token") => range("emitted_ns").is_some_and(|(_, hi)| w.from_ns.is_some_and(|f| hi < f)),
        _ => false,
    }
}

/// Reads Parquet held in memory (the embedded demo) into the builder; `name` stands for its path in messages.
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
fn read_parts<R, O>(
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
    let window = 8 * rayon::current_num_threads() + 2;
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
struct Unit {
    part: usize,
    rg: usize,
}

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

impl CandidateReader {
    /// A reader for the trace's files; `None` when its candidates are in memory.
    pub fn open(trace: &Trace) -> Result<Option<Self>, LoadError> {
        let Some(disk) = &trace.candidates_on_disk else {
            return Ok(None);
        };
        let options = ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Optional);
        let files = disk
            .files
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
        Ok(Some(CandidateReader { files }))
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
        let reader = self.rows(path, meta, groups, selectors)?;
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
    /// A reader of the columns that place a candidate (kind, request id, index, candidates) in row groups `groups`
    /// of `path`, rows `selectors` of them; the page headers of those columns walked with bounded counts first.
    fn rows(
        &self,
        path: &Path,
        meta: &ArrowReaderMetadata,
        groups: Vec<usize>,
        selectors: Vec<RowSelector>,
    ) -> Result<parquet::arrow::arrow_reader::ParquetRecordBatchReader, LoadError> {
        let f = File::open(path).map_err(|e| LoadError::Io {
            path: path.display().to_string(),
            source: e,
        })?;
        let wanted = [KIND, "request_id", "index", CANDIDATES];
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
                    super::page_headers::check_chunk(&f, start, len).map_err(|e| {
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
            let (mut groups, mut selectors, mut row0, mut k) = (Vec::new(), Vec::new(), 0u64, 0usize);
            let to_usize = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
            for rg in 0..meta.metadata().num_row_groups() {
                let n = u64::try_from(meta.metadata().row_group(rg).num_rows()).unwrap_or(0);
                let mut at = row0;
                while k < rows.len() && rows[k].0 < row0 + n {
                    selectors.push(RowSelector::skip(to_usize(rows[k].0 - at)));
                    selectors.push(RowSelector::select(1));
                    at = rows[k].0 + 1;
                    k += 1;
                }
                if at > row0 {
                    groups.push(rg);
                    selectors.push(RowSelector::skip(to_usize(row0 + n - at)));
                }
                row0 += n;
            }
            let mut next = rows.iter();
            for batch in self.rows(path, meta, groups, selectors)? {
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

/// A candidate read on demand, when it follows the format's rules.
fn owned_candidate(c: &RawCandidate<'_>) -> Option<OwnedCandidate> {
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

/// One Parquet file being read: how to open a fresh reader of it, its metadata and the projection of the columns
/// tokenscope knows.
struct Part<'a, O> {
    open: O,
    meta: ArrowReaderMetadata,
    mask: ProjectionMask,
    present: Vec<String>,
    path: &'a Path,
    file: u32,
    /// The first row of each row group, counted from the file's first row.
    first_rows: Vec<u64>,
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
        let meta = super::quiet::catch(|| ArrowReaderMetadata::load(&reader, ArrowReaderOptions::new()))
            .map_err(|why| parquet_error(path, format!("its footer cannot be decoded ({why})")))?
            .map_err(|e| parquet_error(path, e))?;
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
        })
    }

    /// Checks the page headers of row group `rg`'s decoded columns ([`super::page_headers`]).
    fn check_page_headers(&self, rg: usize) -> Result<(), String> {
        let reader = (self.open)().map_err(|e| e.to_string())?;
        for (i, column) in self.meta.metadata().row_group(rg).columns().iter().enumerate() {
            if !self.mask.leaf_included(i) {
                continue;
            }
            let (start, len) = column.byte_range();
            super::page_headers::check_chunk(&reader, start, len)
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
        super::quiet::catch(|| self.read_row_group(rg, stop)).unwrap_or_else(|why| {
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
fn reject_rest_of_row_group(b: &mut TraceBuilder, file: u32, rg: usize, row0: u64, done: u64, rows: u64, e: &str) {
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
fn check_required(
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

macro_rules! builders {
    ($(($name:ident, $ty:ident)),* $(,)?) => {
        /// Column builders for one batch of records.
        struct Builders {
            $( $name: builder!($ty), )*
            eos_offsets: Vec<i32>,
            eos_valid: Vec<bool>,
            eos_values: Int64Builder,
            cand_offsets: Vec<i32>,
            cand_valid: Vec<bool>,
            cand_token_id: Int64Builder,
            cand_text: StringBuilder,
            cand_logprob: Float64Builder,
            cand_special: BooleanBuilder,
            rows: usize,
        }

        impl Builders {
            fn new() -> Self {
                Builders {
                    $( $name: <builder!($ty)>::new(), )*
                    eos_offsets: vec![0],
                    eos_valid: Vec::new(),
                    eos_values: Int64Builder::new(),
                    cand_offsets: vec![0],
                    cand_valid: Vec::new(),
                    cand_token_id: Int64Builder::new(),
                    cand_text: StringBuilder::new(),
                    cand_logprob: Float64Builder::new(),
                    cand_special: BooleanBuilder::new(),
                    rows: 0,
                }
            }

            fn push(&mut self, r: &RawRecord<'_>) {
                $( self.$name.append_option(value!($ty, &r.$name)); )*
                match &r.eos_token_ids {
                    Some(Val::Ok(ids)) => {
                        for id in ids {
                            self.eos_values.append_option(if let Val::Ok(v) = id { Some(*v) } else { None });
                        }
                        self.eos_valid.push(true);
                    }
                    _ => self.eos_valid.push(false),
                }
                self.eos_offsets.push(i32::try_from(self.eos_values.len()).unwrap_or(i32::MAX));
                match &r.candidates {
                    Some(Val::Ok(list)) => {
                        for c in list {
                            self.cand_token_id.append_option(value!(Int, &c.token_id));
                            self.cand_text.append_option(value!(Str, &c.text));
                            self.cand_logprob.append_option(value!(Float, &c.logprob));
                            self.cand_special.append_option(value!(Bool, &c.special));
                        }
                        self.cand_valid.push(true);
                    }
                    _ => self.cand_valid.push(false),
                }
                self.cand_offsets.push(i32::try_from(self.cand_token_id.len()).unwrap_or(i32::MAX));
                self.rows += 1;
            }

            fn finish(&mut self) -> Result<RecordBatch, arrow::error::ArrowError> {
                let mut columns: Vec<ArrayRef> = vec![ $( Arc::new(self.$name.finish()), )* ];
                let eos = ListArray::try_new(
                    schema::list_item(DataType::Int64),
                    OffsetBuffer::new(std::mem::replace(&mut self.eos_offsets, vec![0]).into()),
                    Arc::new(self.eos_values.finish()),
                    Some(NullBuffer::from(std::mem::take(&mut self.eos_valid))),
                )?;
                columns.push(Arc::new(eos));
                let DataType::Struct(fields) = schema::candidate_struct() else {
                    return Err(arrow::error::ArrowError::SchemaError("candidate type".into()));
                };
                let fields: Fields = fields;
                let cands = StructArray::try_new(
                    fields,
                    vec![
                        Arc::new(self.cand_token_id.finish()),
                        Arc::new(self.cand_text.finish()),
                        Arc::new(self.cand_logprob.finish()),
                        Arc::new(self.cand_special.finish()),
                    ],
                    None,
                )?;
                let list = ListArray::try_new(
                    schema::list_item(schema::candidate_struct()),
                    OffsetBuffer::new(std::mem::replace(&mut self.cand_offsets, vec![0]).into()),
                    Arc::new(cands),
                    Some(NullBuffer::from(std::mem::take(&mut self.cand_valid))),
                )?;
                columns.push(Arc::new(list));
                self.rows = 0;
                RecordBatch::try_new(schema::arrow_schema(), columns)
            }
        }
    };
}

macro_rules! builder {
    (Str) => {
        StringBuilder
    };
    (Int) => {
        Int64Builder
    };
    (Float) => {
        Float64Builder
    };
    (Bool) => {
        BooleanBuilder
    };
}

macro_rules! value {
    (Str, $v:expr) => {
        match $v {
            Some(Val::Ok(s)) => Some(&**s),
            _ => None,
        }
    };
    ($other:ident, $v:expr) => {
        match $v {
            Some(Val::Ok(x)) => Some(*x),
            _ => None,
        }
    };
}

crate::scalar_fields!(builders);

/// Writes a trace as one Parquet file (zstd, row groups of [`WRITE_ROW_GROUP_ROWS`] rows).
pub fn write(trace: &Trace, path: &Path) -> Result<(), parquet::errors::ParquetError> {
    write_with_row_groups(trace, path, WRITE_ROW_GROUP_ROWS)
}

/// Writes a trace as one Parquet file with row groups of `rows_per_group` rows (tests use small ones).
pub fn write_with_row_groups(
    trace: &Trace,
    path: &Path,
    rows_per_group: usize,
) -> Result<(), parquet::errors::ParquetError> {
    let mut w = TraceWriter::create(path, rows_per_group)?;
    w.append(trace)?;
    w.close()
}

/// A Parquet trace written a part at a time (`synth --scenario xlarge`): each part's records after the last's, the
/// meta record of the first only, so memory holds one part and a row group.
pub struct TraceWriter {
    writer: ArrowWriter<File>,
    builders: Builders,
    rows_per_group: usize,
    parts: usize,
}

impl TraceWriter {
    /// Creates the file (zstd, row groups of `rows_per_group` rows).
    ///
    /// # Errors
    /// The file cannot be created.
    pub fn create(path: &Path, rows_per_group: usize) -> Result<Self, parquet::errors::ParquetError> {
        let rows_per_group = rows_per_group.max(1);
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::try_new(3)?))
            .set_max_row_group_row_count(Some(rows_per_group))
            // Small pages, so reading one request's candidates decodes a few thousand rows, not a row group's worth.
            .set_data_page_row_count_limit(WRITE_PAGE_ROWS)
            .build();
        let file = File::create(path)?;
        Ok(TraceWriter {
            writer: ArrowWriter::try_new(file, schema::arrow_schema(), Some(props))?,
            builders: Builders::new(),
            rows_per_group,
            parts: 0,
        })
    }

    /// Writes the records of `trace` (its meta record only if it is the first part).
    ///
    /// # Errors
    /// The writer failed.
    pub fn append(&mut self, trace: &Trace) -> Result<(), parquet::errors::ParquetError> {
        let first = self.parts == 0;
        self.parts += 1;
        let (writer, builders, rows_per_group) = (&mut self.writer, &mut self.builders, self.rows_per_group);
        for_each_record(trace, |r| {
            if !first && matches!(&r.kind, Some(Val::Ok(k)) if k == "meta") {
                return Ok(());
            }
            builders.push(r);
            if builders.rows >= rows_per_group {
                writer.write(&builders.finish()?)?;
            }
            Ok::<(), parquet::errors::ParquetError>(())
        })
    }

    /// Writes what is left and the footer.
    ///
    /// # Errors
    /// The writer failed.
    pub fn close(mut self) -> Result<(), parquet::errors::ParquetError> {
        if self.builders.rows > 0 {
            self.writer.write(&self.builders.finish()?)?;
        }
        self.writer.close()?;
        Ok(())
    }
}

/// The meta record's `clock` as the footer's statistics give it (the column's largest value over the row groups),
/// without reading a record: `client` for a recording. `None` when the file has no such column or statistics, or
/// cannot be read (the load then says why).
pub fn footer_clock(path: &Path) -> Option<String> {
    footer_text_range(path, "clock").map(|(_, hi)| hi)
}

/// The least and greatest value of a text column in a file, by its footer's statistics alone (no record read):
/// for the fields only the meta record writes (`engine`, `engine_version`, `clock`), their value.
pub fn footer_text_range(path: &Path, column: &str) -> Option<(String, String)> {
    use parquet::file::statistics::Statistics;
    let f = File::open(path).ok()?;
    let meta = super::quiet::catch(|| ArrowReaderMetadata::load(&f, ArrowReaderOptions::new()))
        .ok()?
        .ok()?;
    let mut found: Option<(String, String)> = None;
    for rg in meta.metadata().row_groups() {
        for c in rg.columns().iter().filter(|c| c.column_path().string() == column) {
            if let Some(Statistics::ByteArray(s)) = c.statistics()
                && let (Some(lo), Some(hi)) = (s.min_opt(), s.max_opt())
                && let (Ok(lo), Ok(hi)) = (std::str::from_utf8(lo.data()), std::str::from_utf8(hi.data()))
            {
                found = Some(match found {
                    None => (lo.to_owned(), hi.to_owned()),
                    Some((a, b)) => (a.min(lo.to_owned()), b.max(hi.to_owned())),
                });
            }
        }
    }
    found
}

/// What a file's footer says, without reading a record.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Footer {
    /// Rows.
    pub rows: u64,
    /// The earliest and latest time the statistics give (`arrival_ns`, `start_ns`, `emitted_ns`), ns.
    pub first_ns: Option<i64>,
    pub last_ns: Option<i64>,
    /// Decoded bytes of the columns other than the candidates, and of the candidates.
    pub columns: u64,
    pub candidates: u64,
}

/// The footer of the Parquet file at `path`.
///
/// # Errors
/// The file cannot be opened or its footer read.
pub fn footer(path: &Path) -> Result<Footer, LoadError> {
    use parquet::file::statistics::Statistics;
    let f = File::open(path).map_err(|e| LoadError::Io {
        path: path.display().to_string(),
        source: e,
    })?;
    let meta = super::quiet::catch(|| ArrowReaderMetadata::load(&f, ArrowReaderOptions::new()))
        .map_err(|why| parquet_error(path, format!("its footer cannot be decoded ({why})")))?
        .map_err(|e| parquet_error(path, e))?;
    let mut out = Footer::default();
    for rg in meta.metadata().row_groups() {
        out.rows += u64::try_from(rg.num_rows()).unwrap_or(0);
        for c in rg.columns() {
            let bytes = u64::try_from(c.uncompressed_size()).unwrap_or(0);
            if c.column_path().parts().first().is_some_and(|p| p == CANDIDATES) {
                out.candidates += bytes;
            } else {
                out.columns += bytes;
            }
            if !matches!(
                c.column_path().string().as_str(),
                "arrival_ns" | "start_ns" | "emitted_ns"
            ) {
                continue;
            }
            if let Some(Statistics::Int64(s)) = c.statistics() {
                if let Some(&lo) = s.min_opt() {
                    out.first_ns = Some(out.first_ns.map_or(lo, |f| f.min(lo)));
                }
                if let Some(&hi) = s.max_opt() {
                    out.last_ns = Some(out.last_ns.map_or(hi, |l| l.max(hi)));
                }
            }
        }
    }
    Ok(out)
}
