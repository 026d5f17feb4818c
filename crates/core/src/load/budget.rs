//! The memory budget of a load: before a record is read, the memory the trace would take is estimated from the
//! files (Parquet footers: each column's decoded size; other files: their size), and a load above the budget is
//! made with the candidates left on disk when that fits, and refused otherwise, with what to open instead. The
//! machine is never asked for more than it has: a trace too big is a message, not an out-of-memory kill.
//!
//! The factors are measured: resident memory after loading the `large` benchmark trace and a tenth of it, against
//! the sizes their footers give, with and without candidates (docs/RELIABILITY.md, "Memory budget").

use std::path::{Path, PathBuf};

use super::Format;
use crate::format::parquet::footer;
use crate::ingest::LoadError;
use crate::trace::report::Encoding;

/// Resident bytes of a load whatever its size: the process, the thread pool, the row groups being decoded.
pub const BASE: u64 = 150_000_000;
/// Resident bytes per decoded byte of the Parquet columns read, candidates aside. Measured on the `large` trace
/// (195 MB of columns by its footer: 1,069 MB resident after a load without candidates) and on a tenth of it
/// (19 MB: 208 MB).
const PER_COLUMN_BYTE: f64 = 5.2;
/// Resident bytes per decoded byte of the candidates column (`large`: 547 MB by the footer, 898 MB more resident
/// when they are read).
const PER_CANDIDATE_BYTE: f64 = 1.6;
/// Resident bytes per byte of a JSON-lines file, plain (a tenth of `large` as JSONL: 228 MB after loading 477 MB).
const PER_TEXT_BYTE: f64 = 0.4;
/// A compressed text file is taken to be five times its size uncompressed.
const COMPRESSION: f64 = 5.0;

/// The memory a load would take, bytes.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Estimate {
    /// Everything read.
    pub whole: u64,
    /// With the candidates of Parquet files left on disk (what the app and most commands load).
    pub without_candidates: u64,
}

#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_precision_loss
)] // estimates
fn scaled(bytes: u64, factor: f64) -> u64 {
    (bytes as f64 * factor) as u64
}

/// The share (0..1) of a load estimated at `need` bytes that fits in `budget`: the part above the fixed cost
/// ([`BASE`]) scales with the records read, so a window of about this share of the trace's time fits (with a tenth
/// kept spare: records are not spread evenly in time). `None` when not even the fixed cost fits.
#[expect(clippy::cast_precision_loss, reason = "estimates")]
pub fn share_that_fits(need: u64, budget: u64) -> Option<f64> {
    let (need, budget) = (need.saturating_sub(BASE), budget.checked_sub(BASE)?);
    (need > 0 && budget > 0).then(|| (0.9 * budget as f64 / need as f64).min(1.0))
}

/// `bytes` of a load with the part above the fixed cost ([`BASE`]) scaled by `share` (0..1): a window's.
#[allow(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    clippy::cast_precision_loss
)] // estimates
pub fn scaled_above_base(bytes: u64, share: f64) -> u64 {
    BASE + (bytes.saturating_sub(BASE) as f64 * share.clamp(0.0, 1.0)) as u64
}

/// The estimate for `files`.
///
/// # Errors
/// A Parquet footer cannot be read.
pub fn estimate(files: &[(PathBuf, Format)]) -> Result<Estimate, LoadError> {
    let mut e = Estimate {
        whole: BASE,
        without_candidates: BASE,
    };
    for (path, format) in files {
        if let Format::Native(Encoding::Parquet) = format {
            let f = footer(path)?;
            let base = scaled(f.columns, PER_COLUMN_BYTE);
            e.without_candidates += base;
            e.whole += base + scaled(f.candidates, PER_CANDIDATE_BYTE);
        } else {
            let size = std::fs::metadata(path).map_or(0, |m| m.len());
            let compressed = is_compressed(path);
            let bytes = scaled(
                size,
                if compressed {
                    PER_TEXT_BYTE * COMPRESSION
                } else {
                    PER_TEXT_BYTE
                },
            );
            // Text files are read whole, candidates included.
            e.without_candidates += bytes;
            e.whole += bytes;
        }
    }
    Ok(e)
}

fn is_compressed(path: &Path) -> bool {
    let name = path.to_string_lossy().to_ascii_lowercase();
    #[expect(
        clippy::case_sensitive_file_extension_comparisons,
        reason = "the name is lowercased above"
    )]
    let compressed = name.ends_with(".gz") || name.ends_with(".zst");
    compressed
}

/// This machine's memory, bytes (`None` where it cannot be told).
pub fn machine_memory() -> Option<u64> {
    let mut s = sysinfo::System::new().ok()?;
    s.refresh_memory();
    Some(s.total_memory()).filter(|&m| m > 0)
}

/// The default budget: half this machine's memory (no limit where it cannot be told).
pub fn default_budget() -> u64 {
    machine_memory().map_or(u64::MAX, |m| m / 2)
}

/// A size in bytes for a message: "1.2 GB", "300 MB".
pub use crate::ingest::size;

/// A size on the command line or in the settings: `4GB`, `500MB`, `2.5G`, `800M`, `4GiB`, or bytes (bytesize's
/// reading: SI units by `K`, `M`, `G`, `T` with or without `B`, binary ones by `KiB`, `MiB`, ...).
///
/// # Errors
/// Not a positive number with one of those units; the message names them.
pub fn parse_size(text: &str) -> Result<u64, String> {
    match text.trim().parse::<bytesize::ByteSize>() {
        Ok(size) if size.as_u64() > 0 => Ok(size.as_u64()),
        Ok(_) => Err(format!("{text}: write a size like 4GB, 500MB or 2.5G, more than zero")),
        Err(_) => Err(format!("{text}: write a size like 4GB, 500MB, 2.5G or 4GiB")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_and_written_as_people_do() {
        assert_eq!(parse_size("4GB"), Ok(4_000_000_000));
        assert_eq!(parse_size("2.5g"), Ok(2_500_000_000));
        assert_eq!(parse_size("500 MB"), Ok(500_000_000));
        assert_eq!(parse_size("1024"), Ok(1024));
        assert_eq!(parse_size("800M"), Ok(800_000_000));
        // Binary units too: 4 × 2^30.
        assert_eq!(parse_size("4GiB"), Ok(4_294_967_296));
        assert!(parse_size("lots").is_err_and(|e| e.contains("4GB")));
        assert!(parse_size("0GB").is_err_and(|e| e.contains("more than zero")));
        assert!(parse_size("-1GB").is_err());
        assert_eq!(size(1_834_000_000), "1.8 GB");
        assert_eq!(size(640_200_000), "640 MB");
    }

    #[test]
    fn this_machine_has_some_memory() {
        assert!(machine_memory().is_some_and(|m| m > 100_000_000));
        assert!(default_budget() > 50_000_000);
    }

    #[test]
    fn a_load_above_the_budget_is_refused_before_reading_and_says_what_fits() {
        use crate::ingest::Progress;
        use crate::load::{Format, LoadOptions, load_with};
        let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../sample_traces/demo.parquet");
        let e = estimate(&[(demo.clone(), Format::Native(Encoding::Parquet))]).unwrap_or_else(|e| panic!("{e}"));
        // The footer's sizes, by the factors: candidates are most of the demo.
        assert!(e.whole > e.without_candidates && e.without_candidates > BASE, "{e:?}");
        let load = |budget: u64, lazy: bool| {
            let options = LoadOptions {
                lazy_candidates: lazy,
                budget: Some(budget),
                ..LoadOptions::default()
            };
            load_with(&demo, &Progress::default(), options).map(|l| l.trace.request_count())
        };
        // Just below the whole estimate: refused with its candidates, loaded without them.
        let err = load(e.whole - 1, false).unwrap_err().to_string();
        assert!(
            err.contains("loading it would take about")
                && err.contains("without its candidates it takes about")
                && err.contains("--from-time and --to-time (it spans 2025-11-29T08:00:00 to 2025-11-29T08:01:40 UTC; ")
                && err.contains("--memory-budget"),
            "{err}"
        );
        // Which part fits, to the second: a tenth spare, 90 % of the 100.3 s span, 90.3 s (the budget is a byte short
        // of the whole: the share a hair under 0.9).
        assert!(
            err.contains("about its first 90 s fit: --from-time 2025-11-29T08:00:00 --to-time 2025-11-29T08:01:30"),
            "{err}"
        );
        // Every request of the demo, as a load without a budget reads it.
        let all = load_with(&demo, &Progress::default(), LoadOptions::default()).map(|l| l.trace.request_count());
        assert_eq!(load(e.whole - 1, true).ok(), all.ok());
        // And it does: that window, with its candidates, under the same budget.
        let window = crate::format::window::Window {
            from_ns: Some(1_764_403_200_000_000_000),
            to_ns: Some(1_764_403_289_000_000_000),
            filters: Vec::new(),
        };
        let options = LoadOptions {
            budget: Some(e.whole - 1),
            window: Some(std::sync::Arc::new(window)),
            ..LoadOptions::default()
        };
        assert!(load_with(&demo, &Progress::default(), options).is_ok());
        // Below even that: refused, with no word of candidates.
        let err = load(e.without_candidates - 1, true).unwrap_err().to_string();
        assert!(
            !err.contains("without its candidates") && err.contains("--where"),
            "{err}"
        );
    }
}
