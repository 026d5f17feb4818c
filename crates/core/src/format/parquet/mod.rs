//! Parquet through arrow-rs: one column per field, read with a projection of the known columns, row group by row
//! group (a corrupt row group costs its rows, not the file). Column types are normalised first (any integer width,
//! Timestamp for `_ns`, LargeUtf8 / Utf8View / dictionaries, Float32); a column of the wrong type turns into
//! per-record rejections that name the field and what it held.

//!
//! `columns` normalises, `read` reads row groups in parallel, `candidates` reads a trace's candidates per request,
//! `write` writes, `footer` reads what a file's footer says, `stream` hands a file's row groups over one window at a
//! time, in order, for figures computed without loading the trace.

mod candidates;
mod columns;
mod footer;
mod read;
pub mod stream;
mod write;

use std::path::Path;

use crate::ingest::LoadError;

pub use candidates::{CandidateReader, read_request_candidates};
pub use footer::{Footer, footer, footer_clock, footer_text_range};
pub use read::{outside, read_bytes, read_files, read_files_without_tokens};
pub use write::{TraceWriter, write, write_with_row_groups};

/// Rows per record batch when reading.
const READ_BATCH_ROWS: usize = 64 * 1024;
/// Rows per row group when writing: small enough that one request's tokens can be read without the rest.
pub const WRITE_ROW_GROUP_ROWS: usize = 64 * 1024;
/// Rows per data page when writing (best effort): the unit a read of one request's candidates decodes.
const WRITE_PAGE_ROWS: usize = 8192;

/// The footer of a Parquet file, decoded: a panic of the decoder on a corrupt footer is this file's error, said so.
fn decode_footer(
    reader: &impl parquet::file::reader::ChunkReader,
    path: &Path,
) -> Result<parquet::arrow::arrow_reader::ArrowReaderMetadata, LoadError> {
    use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ArrowReaderOptions};
    crate::ingest::quiet::catch(|| ArrowReaderMetadata::load(reader, ArrowReaderOptions::new()))
        .map_err(|why| parquet_error(path, format!("its footer cannot be decoded ({why})")))?
        .map_err(|e| parquet_error(path, e))
}

fn parquet_error(path: &Path, e: impl std::fmt::Display) -> LoadError {
    LoadError::Parquet {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}
