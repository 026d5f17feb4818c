//! What a file's footer says without reading a record: rows, sizes, times, and the values of text columns.

use std::fs::File;
use std::path::Path;

use crate::format::schema::CANDIDATES;
use crate::ingest::LoadError;

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
    let meta = super::decode_footer(&f, path).ok()?;
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
    let meta = super::decode_footer(&f, path)?;
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
