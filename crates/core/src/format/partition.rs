//! Hive-partitioned datasets: a trace written as `key=value/` folders of Parquet files (`date=2025-11-29/hour=08/
//! source=vllm-0/part-0.parquet`), the layout Spark, polars, DuckDB and Athena read as one table with the keys as
//! columns. Each file is a whole trace of its own (its requests with all their records, the steps of its source and
//! hour, and the meta), so any subset of the folders opens as a valid trace.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::WriteError;
use crate::trace::Trace;
use crate::trace::slice::subset;

/// What a dataset is partitioned by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PartitionKey {
    /// The UTC day a request arrived (a step started): `date=2025-11-29`.
    Date,
    /// The UTC hour a request arrived (a step started): `hour=08` (with `date`, or alone `hour=2025-11-29T08`).
    Hour,
    /// The engine instance: `source=vllm-0`.
    Source,
}

impl PartitionKey {
    /// The key's name in folder names.
    pub fn name(self) -> &'static str {
        match self {
            PartitionKey::Date => "date",
            PartitionKey::Hour => "hour",
            PartitionKey::Source => "source",
        }
    }
}

/// A folder-safe value: characters other than ASCII letters, digits, `.`, `_` and `-` are written `%XX` as Hive
/// escapes them (a `/` in a label never makes a folder, a label never climbs out of the dataset).
pub fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    if out.is_empty() || out.chars().all(|c| c == '.') {
        // "", "." and ".." are no folder names of their own.
        out = value.bytes().map(|b| format!("%{b:02X}")).collect();
        if out.is_empty() {
            out.push_str("__empty__");
        }
    }
    out
}

fn time_value(key: PartitionKey, ns: i64, with_date: bool) -> String {
    let t = chrono::DateTime::from_timestamp_nanos(ns);
    match (key, with_date) {
        (PartitionKey::Date, _) => t.format("%Y-%m-%d").to_string(),
        (PartitionKey::Hour, true) => t.format("%H").to_string(),
        (PartitionKey::Hour, false) => t.format("%Y-%m-%dT%H").to_string(),
        (PartitionKey::Source, _) => String::new(),
    }
}

/// The folder of a record: `key=value` per key, in the order given.
fn folder(keys: &[PartitionKey], time_ns: i64, source: &str) -> Vec<String> {
    let with_date = keys.contains(&PartitionKey::Date);
    keys.iter()
        .map(|&k| {
            let v = match k {
                PartitionKey::Source => escape(source),
                _ => time_value(k, time_ns, with_date),
            };
            format!("{}={v}", k.name())
        })
        .collect()
}

/// The rows of one partition: requests, steps and samples.
type Rows = (Vec<u32>, Vec<usize>, Vec<usize>);

/// Writes `trace` under `dir` partitioned by `keys` (in that order, outermost first): a request goes where its
/// arrival and source put it, with its stages, tokens and candidates; a step where its start and source put it.
/// Returns each file written with its requests and steps. Candidates of a trace loaded lazily come from
/// `candidates`.
///
/// # Errors
/// A folder cannot be made or a file written; `keys` is empty or repeats a key.
pub fn write_partitioned(
    trace: &Trace,
    dir: &Path,
    keys: &[PartitionKey],
    candidates: Option<&dyn Fn(u32) -> Vec<Vec<crate::trace::OwnedCandidate>>>,
) -> Result<Vec<(PathBuf, usize, usize)>, WriteError> {
    let name = dir.display().to_string();
    let mut seen = Vec::new();
    for k in keys {
        if seen.contains(k) {
            return Err(WriteError::Partition {
                path: name,
                reason: format!("{} is given twice", k.name()),
            });
        }
        seen.push(*k);
    }
    if keys.is_empty() {
        return Err(WriteError::Partition {
            path: name,
            reason: "no key to partition by (date, hour, source)".to_owned(),
        });
    }
    let mut parts: BTreeMap<Vec<String>, Rows> = BTreeMap::new();
    for r in 0..u32::try_from(trace.request_count()).unwrap_or(u32::MAX) {
        let ri = r as usize;
        let source = trace.label(trace.requests.source[ri]).unwrap_or("engine");
        let f = folder(keys, trace.requests.arrival_ns[ri], source);
        parts.entry(f).or_default().0.push(r);
    }
    for i in 0..trace.iterations.len() {
        let source = trace.label(trace.iterations.source[i]).unwrap_or("engine");
        let f = folder(keys, trace.iterations.start_ns[i], source);
        parts.entry(f).or_default().1.push(i);
    }
    for i in 0..trace.samples.len() {
        let source = trace.label(trace.samples.source[i]).unwrap_or("engine");
        let f = folder(keys, trace.samples.time_ns[i], source);
        parts.entry(f).or_default().2.push(i);
    }
    let mut written = Vec::with_capacity(parts.len());
    for (folders, (requests, steps, samples)) in parts {
        let mut path = dir.to_path_buf();
        path.extend(&folders);
        std::fs::create_dir_all(&path).map_err(|source| WriteError::Io {
            path: path.display().to_string(),
            source,
        })?;
        path.push("part-0.parquet");
        let part = subset(trace, &requests, &steps, &samples, candidates);
        super::write(&part, &path)?;
        written.push((path, requests.len(), steps.len()));
    }
    Ok(written)
}

/// The `key=value` pairs of a file's folders below a dataset's root, in order (`date=2025-11-29/hour=08/x.parquet`
/// gives date and hour); folders of another form are not keys.
pub fn keys_of(root: &Path, file: &Path) -> Vec<(String, String)> {
    let Ok(rel) = file.strip_prefix(root) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if let Some(parent) = rel.parent() {
        for c in parent.components() {
            if let Some((k, v)) = c.as_os_str().to_str().and_then(|s| s.split_once('=')) {
                out.push((k.to_owned(), v.to_owned()));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_escaped_as_hive_does() {
        assert_eq!(escape("vllm-0"), "vllm-0");
        assert_eq!(escape("a/b=c d"), "a%2Fb%3Dc%20d");
        assert_eq!(escape(".."), "%2E%2E");
        assert_eq!(escape(""), "__empty__");
    }

    #[test]
    fn a_records_folder_follows_the_keys_in_order() {
        // 2025-11-29 08:59:59.5 UTC.
        let t = 1_764_406_799_500_000_000;
        let keys = [PartitionKey::Date, PartitionKey::Hour, PartitionKey::Source];
        assert_eq!(
            folder(&keys, t, "vllm-0"),
            ["date=2025-11-29", "hour=08", "source=vllm-0"]
        );
        assert_eq!(
            folder(&[PartitionKey::Hour, PartitionKey::Source], t, "x"),
            ["hour=2025-11-29T08", "source=x"]
        );
    }

    #[test]
    fn keys_are_read_from_the_folders_below_the_root() {
        let root = Path::new("/data/traces");
        let file = Path::new("/data/traces/date=2025-11-29/misc/source=vllm-0/part-0.parquet");
        assert_eq!(
            keys_of(root, file),
            [
                ("date".to_owned(), "2025-11-29".to_owned()),
                ("source".to_owned(), "vllm-0".to_owned())
            ]
        );
    }
}
