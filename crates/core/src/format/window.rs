//! A part of a dataset to open: a time window and `key=value` filters. Folders of a hive-partitioned dataset
//! (`date=`, `hour=`, `source=`, any `key=value`) that cannot hold records of the window are never read, nor are
//! row groups whose statistics show none (`parquet::outside`); then the records are chosen (by the trace builder): a request (with all its records) when it arrives within the window and its labels match, a
//! step when it starts within the window and its source matches.
//!
//! A filter on a request label (`source`, `model`, `app_id`, `user_id`) chooses records as well as folders; one on
//! another folder key (`date`, `hour`, or a key of the user's own) chooses folders only.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use chrono::{NaiveDate, NaiveDateTime, TimeZone, Utc};

pub use crate::trace::window::{ABSENT, LABELS, Window};

const HOUR_NS: i64 = 3_600_000_000_000;
const DAY_NS: i64 = 24 * HOUR_NS;

/// A time on the command line: RFC 3339 (`2025-11-29T08:15:00Z`, `2025-11-29T09:15:00+01:00`), a UTC date and time
/// (`2025-11-29T08:15`, `2025-11-29 08:15:30`), a UTC date (`2025-11-29`), or ns since the Unix epoch.
///
/// # Errors
/// None of those forms; the message shows them.
pub fn parse_time(text: &str) -> Result<i64, String> {
    let t = text.trim();
    let ns = |dt: chrono::DateTime<Utc>| {
        dt.timestamp_nanos_opt()
            .ok_or_else(|| format!("{t}: outside the years 1677 to 2262 that ns since 1970 can hold"))
    };
    if let Ok(dt) = chrono::DateTime::parse_from_rfc3339(t) {
        return ns(dt.with_timezone(&Utc));
    }
    for form in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(dt) = NaiveDateTime::parse_from_str(t, form) {
            return ns(Utc.from_utc_datetime(&dt));
        }
    }
    if let Ok(d) = NaiveDate::parse_from_str(t, "%Y-%m-%d") {
        return ns(Utc.from_utc_datetime(&d.and_time(chrono::NaiveTime::MIN)));
    }
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return t.parse::<i64>().map_err(|e| format!("{t}: {e}"));
    }
    Err(format!(
        "{t}: not a time; write 2025-11-29T08:15:00Z (RFC 3339), 2025-11-29T08:15 (UTC), 2025-11-29 (UTC midnight) \
         or ns since 1970"
    ))
}

/// A filter on the command line: `key=value`.
///
/// # Errors
/// No `=`, or an empty key.
pub fn parse_filter(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.to_owned())),
        _ => Err(format!(
            "{text}: write a filter as key=value, a label (source=vllm-0, model=..., app_id=..., user_id=...) or a \
             folder key of the dataset (date=2025-11-29, hour=08)"
        )),
    }
}

/// The `key=value` folders of `file` below `root`, values unescaped.
pub fn folder_keys(root: &Path, file: &Path) -> Vec<(String, String)> {
    let Ok(rel) = file.strip_prefix(root) else {
        return Vec::new();
    };
    let mut parts: Vec<_> = rel.components().collect();
    parts.pop(); // the file itself
    parts
        .iter()
        .filter_map(|c| c.as_os_str().to_str()?.split_once('='))
        .map(|(k, v)| (k.to_owned(), unescape(v)))
        .collect()
}

/// Undoes [`super::partition::escape`]: `%XX` is the byte XX.
pub fn unescape(value: &str) -> String {
    if value == "__empty__" {
        return String::new();
    }
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The time a folder's `date=` and `hour=` keys give its records, `[start, end)` ns; `None` when they say nothing.
fn folder_span(keys: &[(String, String)]) -> Option<(i64, i64)> {
    let day = |v: &str| {
        NaiveDate::parse_from_str(v, "%Y-%m-%d").ok().and_then(|d| {
            Utc.from_utc_datetime(&d.and_time(chrono::NaiveTime::MIN))
                .timestamp_nanos_opt()
        })
    };
    let date = keys.iter().find(|(k, _)| k == "date").and_then(|(_, v)| day(v));
    let hour = keys.iter().find(|(k, _)| k == "hour").map(|(_, v)| v.as_str());
    match (date, hour) {
        (Some(d), Some(h)) => h.parse::<i64>().ok().filter(|h| (0..24).contains(h)).map(|h| {
            let start = d + h * HOUR_NS;
            (start, start + HOUR_NS)
        }),
        (Some(d), None) => Some((d, d + DAY_NS)),
        (None, Some(h)) => {
            // `hour=2025-11-29T08`, as written without a date key.
            let (d, hh) = h.split_once('T')?;
            let hh = hh.parse::<i64>().ok().filter(|h| (0..24).contains(h))?;
            day(d).map(|d| (d + hh * HOUR_NS, d + (hh + 1) * HOUR_NS))
        }
        (None, None) => None,
    }
}

impl Window {
    /// Whether a file whose folders are `keys` can hold records of the window.
    pub fn keeps_folder(&self, keys: &[(String, String)]) -> bool {
        let filters_hold = keys.iter().all(|(k, v)| self.allows(k, v));
        let times_meet = folder_span(keys)
            .is_none_or(|(start, end)| self.from_ns.is_none_or(|f| end > f) && self.to_ns.is_none_or(|e| start < e));
        filters_hold && times_meet
    }

    /// The files of `files` (below `root`) the window needs.
    ///
    /// # Errors
    /// A filter names a key that is neither a request label nor a folder key of the files; or no file is left.
    pub fn choose_files(&self, root: &Path, files: Vec<PathBuf>) -> Result<Vec<PathBuf>, String> {
        if self.is_all() {
            return Ok(files);
        }
        let survey = Survey::of_folders(root, &files);
        for (k, _) in &self.filters {
            if !LABELS.contains(&k.as_str()) && !survey.keys.contains_key(k) {
                let mut known: Vec<&str> = LABELS.to_vec();
                known.extend(survey.keys.keys().map(String::as_str).filter(|k| !LABELS.contains(k)));
                return Err(format!(
                    "no key \"{k}\" to filter {} by: the request labels and the dataset's folder keys are {}",
                    root.display(),
                    known.join(", ")
                ));
            }
        }
        let kept: Vec<PathBuf> = files
            .into_iter()
            .filter(|f| self.keeps_folder(&folder_keys(root, f)))
            .collect();
        if kept.is_empty() {
            return Err(format!(
                "no file of {} can hold records of {}; the dataset has {}",
                root.display(),
                self.describe(),
                survey.describe()
            ));
        }
        Ok(kept)
    }
}

/// What a dataset holds, from its folder names and its files' Parquet footers, without reading a record.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Survey {
    /// Files.
    pub files: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Each folder key, with its values and how many files each has.
    pub keys: BTreeMap<String, BTreeMap<String, usize>>,
    /// Each file's `key=value` folders and bytes, in the order given.
    pub by_file: Vec<(Vec<(String, String)>, u64)>,
    /// Records, by the footers (0 when not read).
    pub records: u64,
    /// The earliest and latest time the footers' statistics give (arrivals, step starts, emissions), ns.
    pub first_ns: Option<i64>,
    pub last_ns: Option<i64>,
}

impl Survey {
    /// The folder keys and sizes of `files` below `root`.
    pub fn of_folders(root: &Path, files: &[PathBuf]) -> Survey {
        let mut s = Survey {
            files: files.len(),
            ..Survey::default()
        };
        for f in files {
            let bytes = std::fs::metadata(f).map_or(0, |m| m.len());
            let keys = folder_keys(root, f);
            s.bytes += bytes;
            let mut seen = BTreeSet::new();
            for (k, v) in &keys {
                if seen.insert(k.clone()) {
                    *s.keys.entry(k.clone()).or_default().entry(v.clone()).or_insert(0) += 1;
                }
            }
            s.by_file.push((keys, bytes));
        }
        s
    }

    /// Adds what a file's footer says: its records and the times its statistics span.
    pub fn add_footer(&mut self, footer: &super::parquet::Footer) {
        self.records += footer.rows;
        self.first_ns = footer.first_ns.into_iter().chain(self.first_ns).min();
        self.last_ns = footer.last_ns.into_iter().chain(self.last_ns).max();
    }

    /// The keys in words: `2 file(s), keys hour (1 value: 2025-11-29T08), source (2 values: vllm-0, vllm-1)`.
    pub fn describe(&self) -> String {
        let mut out = format!("{} file(s)", self.files);
        if !self.keys.is_empty() {
            let keys: Vec<String> = self
                .keys
                .iter()
                .map(|(k, values)| {
                    let shown: Vec<&str> = values.keys().take(6).map(String::as_str).collect();
                    let more = if values.len() > 6 { ", ..." } else { "" };
                    let n = values.len();
                    let plural = if n == 1 { "" } else { "s" };
                    format!("{k} ({n} value{plural}: {}{more})", shown.join(", "))
                })
                .collect();
            out.push_str(&format!(", keys {}", keys.join(", ")));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_in_every_form_the_help_names() {
        let at_8 = 1_764_403_200_000_000_000; // 2025-11-29T08:00:00Z
        assert_eq!(parse_time("2025-11-29T08:00:00Z"), Ok(at_8));
        assert_eq!(parse_time("2025-11-29T09:00:00+01:00"), Ok(at_8));
        assert_eq!(parse_time("2025-11-29T08:00"), Ok(at_8));
        assert_eq!(parse_time("2025-11-29 08:00:00.5"), Ok(at_8 + 500_000_000));
        assert_eq!(parse_time("2025-11-29"), Ok(at_8 - 8 * HOUR_NS));
        assert_eq!(parse_time("1764403200000000000"), Ok(at_8));
        assert!(parse_time("yesterday").is_err_and(|e| e.contains("RFC 3339")));
        assert_eq!(parse_filter("source=vllm-0"), Ok(("source".into(), "vllm-0".into())));
        assert!(parse_filter("=x").is_err() && parse_filter("source").is_err());
    }

    #[test]
    fn folders_are_kept_when_they_can_hold_the_window() {
        let root = Path::new("/d");
        let keys = |p: &str| folder_keys(root, &root.join(p));
        let f = keys("date=2025-11-29/hour=08/source=vllm%2F0/part-0.parquet");
        assert_eq!(
            f,
            [
                ("date".to_owned(), "2025-11-29".to_owned()),
                ("hour".to_owned(), "08".to_owned()),
                ("source".to_owned(), "vllm/0".to_owned())
            ]
        );
        let at = |t: &str| parse_time(t).ok();
        // 08:30 to 09:00 meets the 08 hour; 09:00 to 10:00 does not (the end of a window is excluded, and so is
        // the folder's).
        let w = |from: &str, to: &str| Window {
            from_ns: at(from),
            to_ns: at(to),
            filters: Vec::new(),
        };
        assert!(w("2025-11-29T08:30", "2025-11-29T09:00").keeps_folder(&f));
        assert!(!w("2025-11-29T09:00", "2025-11-29T10:00").keeps_folder(&f));
        assert!(!w("2025-11-28T00:00", "2025-11-29T08:00").keeps_folder(&f));
        // An hour alone names its date; a date alone spans its day.
        assert!(!w("2025-11-29T09:00", "2025-11-30").keeps_folder(&keys("hour=2025-11-29T08/x.parquet")));
        assert!(w("2025-11-29T23:59", "2025-11-30").keeps_folder(&keys("date=2025-11-29/x.parquet")));
        // Filters compare the unescaped value; a key the folder lacks says nothing.
        let only = |k: &str, v: &str| Window {
            filters: vec![(k.to_owned(), v.to_owned())],
            ..Window::default()
        };
        assert!(only("source", "vllm/0").keeps_folder(&f));
        assert!(!only("source", "vllm-1").keeps_folder(&f));
        assert!(only("model", "llama").keeps_folder(&f));
        // Values of one key are alternatives; keys must all hold.
        let either = Window {
            filters: vec![
                ("source".into(), "vllm-1".into()),
                ("source".into(), "vllm/0".into()),
                ("hour".into(), "08".into()),
            ],
            ..Window::default()
        };
        assert!(either.keeps_folder(&f));
        assert_eq!(either.describe(), "where source=vllm-1|vllm/0 and hour=08");
    }

    #[test]
    fn a_filter_on_an_unknown_key_or_an_empty_choice_is_explained() {
        let root = Path::new("/d");
        let files = vec![root.join("hour=2025-11-29T08/source=a/p.parquet")];
        let w = Window {
            filters: vec![("region".into(), "eu".into())],
            ..Window::default()
        };
        let err = w.choose_files(root, files.clone()).unwrap_err();
        assert!(
            err.contains("no key \"region\"") && err.contains("source, model, app_id, user_id, hour"),
            "{err}"
        );
        let w = Window {
            filters: vec![("source".into(), "b".into())],
            ..Window::default()
        };
        let err = w.choose_files(root, files).unwrap_err();
        assert!(
            err.contains("where source=b") && err.contains("hour (1 value: 2025-11-29T08), source (1 value: a)"),
            "{err}"
        );
    }

    #[test]
    fn a_window_late_in_a_file_skips_the_row_groups_before_it_and_keeps_its_records_whole() {
        use crate::format::parquet::write_with_row_groups;
        use crate::ingest::Progress;
        use crate::load::{LoadOptions, load, load_with};
        let demo_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../sample_traces/demo.parquet");
        let demo = load(&demo_path, &Progress::default()).map_or_else(|e| panic!("{e}"), |l| l.trace);
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let file = dir.path().join("small-groups.parquet");
        write_with_row_groups(&demo, &file, 2_000).unwrap_or_else(|e| panic!("{e}"));
        // The last 40 s of the demo's 100, on vllm-1.
        let from = demo.start_ns() + 60_000_000_000;
        let w = Window {
            from_ns: Some(from),
            to_ns: None,
            filters: vec![("source".into(), "vllm-1".into())],
        };
        let options = LoadOptions {
            window: Some(std::sync::Arc::new(w)),
            ..LoadOptions::default()
        };
        let loaded = load_with(&file, &Progress::default(), options).unwrap_or_else(|e| panic!("{e}"));
        // What a filter written here keeps, from the whole trace.
        let vllm1 = demo.labels.lookup("vllm-1").unwrap_or(u32::MAX);
        let kept: Vec<u32> = (0..u32::try_from(demo.request_count()).unwrap_or(0))
            .filter(|&r| demo.requests.arrival_ns[r as usize] >= from && demo.requests.source[r as usize] == vllm1)
            .collect();
        let tokens: usize = kept.iter().map(|&r| demo.tokens_of(r).len()).sum();
        let steps = (0..demo.iterations.len())
            .filter(|&i| demo.iterations.start_ns[i] >= from && demo.iterations.source[i] == vllm1)
            .count();
        let t = &loaded.trace;
        assert!(kept.len() > 20, "{}", kept.len());
        assert_eq!(
            (t.request_count(), t.token_count(), t.iterations.len()),
            (kept.len(), tokens, steps)
        );
        let candidates =
            |tr: &crate::trace::Trace, r: u32| tr.tokens_of(r).map(|k| tr.candidates_of(k).len()).sum::<usize>();
        let kept_candidates: usize = kept.iter().map(|&r| candidates(&demo, r)).sum();
        let read_candidates: usize = (0..u32::try_from(t.request_count()).unwrap_or(0))
            .map(|r| candidates(t, r))
            .sum();
        assert_eq!(read_candidates, kept_candidates);
        // Nothing of the file is wrong: records outside the window are left out, not rejected.
        assert_eq!(loaded.report.rejected_count(), 0, "{:?}", loaded.report.rejected);
        let skipped = loaded.report.notes.iter().find(|n| n.contains("row groups not read"));
        assert!(
            skipped.is_some_and(|n| !n.starts_with("0 ")),
            "{:?}",
            loaded.report.notes
        );
    }
}
