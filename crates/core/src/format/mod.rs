//! The tokenscope trace format v1 (`docs/TRACE_FORMAT.md`): readers for Parquet and JSONL (plain, gzip, zstd),
//! writers for both. The loader (`load/`) decides which files are read by these readers and which by an importer.

pub mod jsonl;
pub mod page_headers;
pub mod parquet;
pub mod partition;
pub mod records;
pub mod schema;
pub mod window;

use std::path::Path;

use crate::trace::Trace;
use crate::trace::report::Encoding;

/// The encoding of a trace file by its name, if it is one.
pub fn encoding_of(path: &Path) -> Option<Encoding> {
    let name = path.file_name()?.to_str()?.to_ascii_lowercase();
    #[expect(
        clippy::case_sensitive_file_extension_comparisons,
        reason = "the name is lowercased above"
    )]
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
