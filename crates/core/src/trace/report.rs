//! The load report: every rejected record and every warning, with the file, line or row, field and reason.
//!
//! Errors are data: loading keeps every valid record and lists what it rejected. Only the first
//! [`MAX_DETAILED`] rejections and warnings are kept in full; all are counted, by problem.

use std::collections::BTreeMap;
use std::fmt;

/// Rejections (and warnings) kept with their full detail; the rest are only counted.
pub const MAX_DETAILED: usize = 1000;

/// How a file of the trace is encoded, which decides whether places are lines or rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// JSON lines, or any line-based text (an engine's log): places are 1-based line numbers.
    Jsonl,
    /// Parquet, places are 0-based row numbers.
    Parquet,
    /// One JSON document holding a list (TensorRT-LLM's `/metrics` array): places are 1-based items of the list.
    Items,
}

/// Where a record is: a file of the trace (index into [`Report::files`]) and a line or row in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Place {
    /// Index into [`Report::files`].
    pub file: u32,
    /// 1-based line (JSONL) or 0-based row (Parquet).
    pub at: u64,
}

/// What is wrong with a rejected record; the stable names appear in `validate --json` as `kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Problem {
    /// The line is not a JSON object, or a Parquet row group could not be decoded.
    Malformed,
    /// A required field is absent or null.
    MissingField,
    /// A field holds a value of the wrong type.
    WrongType,
    /// A `_ns` field holds a float.
    FloatTime,
    /// A `_ns` field holds a value that looks like seconds, milliseconds or microseconds.
    TimeUnit,
    /// A value outside what the field can mean (a negative count, a logprob above 0, a year 2200 time).
    OutOfRange,
    /// An end before its start.
    NegativeDuration,
    /// `kind` is absent or not one of the format's kinds.
    UnknownKind,
    /// `stage` is not one of the format's stages.
    UnknownStage,
    /// A stage or token names a request that has no request record.
    UnknownRequest,
    /// A stage or token belongs to a request whose own record was rejected.
    RequestRejected,
    /// A second record with the same identity (request id, source + iteration, request + token index, meta).
    Duplicate,
}

impl Problem {
    /// The stable machine-readable name.
    pub fn name(self) -> &'static str {
        match self {
            Problem::Malformed => "malformed",
            Problem::MissingField => "missing_field",
            Problem::WrongType => "wrong_type",
            Problem::FloatTime => "float_time",
            Problem::TimeUnit => "time_unit",
            Problem::OutOfRange => "out_of_range",
            Problem::NegativeDuration => "negative_duration",
            Problem::UnknownKind => "unknown_kind",
            Problem::UnknownStage => "unknown_stage",
            Problem::UnknownRequest => "unknown_request",
            Problem::RequestRejected => "request_rejected",
            Problem::Duplicate => "duplicate",
        }
    }
}

/// A rejected record.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejection {
    /// Where it is.
    pub place: Place,
    /// What is wrong.
    pub problem: Problem,
    /// The record's kind, when known.
    pub record: Option<&'static str>,
    /// The field at fault, when one is.
    pub field: Option<&'static str>,
    /// A sentence saying what is wrong and how to fix it.
    pub reason: String,
}

/// What a warning is about; warnings never drop a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Concern {
    /// A request's token indices skip values.
    IndexGap,
    /// A request's `output_tokens` disagrees with its token records.
    TokenMismatch,
    /// A token or stage names an iteration that is not in the trace.
    UnknownIteration,
    /// A request's tokens are not in time order.
    TimeOrder,
    /// The meta record names a format or version this build does not know.
    FormatVersion,
}

impl Concern {
    /// The stable machine-readable name.
    pub fn name(self) -> &'static str {
        match self {
            Concern::IndexGap => "index_gap",
            Concern::TokenMismatch => "token_mismatch",
            Concern::UnknownIteration => "unknown_iteration",
            Concern::TimeOrder => "time_order",
            Concern::FormatVersion => "format_version",
        }
    }
}

/// A warning: something questionable that loading kept.
#[derive(Debug, Clone, PartialEq)]
pub struct Warning {
    /// What it is about.
    pub concern: Concern,
    /// The request concerned, when one is.
    pub request_id: Option<String>,
    /// A sentence with the figures.
    pub message: String,
}

/// A file of the trace.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceFile {
    /// Its path as given.
    pub path: String,
    /// Its encoding.
    pub encoding: Encoding,
}

/// Everything loading found wrong, plus the record counts.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// The files read.
    pub files: Vec<SourceFile>,
    /// Records read (kept + rejected).
    pub records: u64,
    /// Rejections in full, the first [`MAX_DETAILED`].
    pub rejected: Vec<Rejection>,
    /// All rejections, counted by problem.
    pub rejected_by_problem: BTreeMap<Problem, u64>,
    /// Warnings in full, the first [`MAX_DETAILED`].
    pub warnings: Vec<Warning>,
    /// All warnings, counted by concern.
    pub warnings_by_concern: BTreeMap<Concern, u64>,
    /// What an importer says of its source: what it cannot give, how files were joined, which clock it used.
    pub notes: Vec<String>,
}

impl Report {
    /// Records a rejection.
    pub fn reject(&mut self, r: Rejection) {
        *self.rejected_by_problem.entry(r.problem).or_default() += 1;
        if self.rejected.len() < MAX_DETAILED {
            self.rejected.push(r);
        }
    }

    /// Records a warning.
    pub fn warn(&mut self, w: Warning) {
        *self.warnings_by_concern.entry(w.concern).or_default() += 1;
        if self.warnings.len() < MAX_DETAILED {
            self.warnings.push(w);
        }
    }

    /// Adds what another report of a later part of the same trace counted and kept (its files excepted).
    pub fn absorb(&mut self, other: Report) {
        self.records += other.records;
        for (problem, n) in other.rejected_by_problem {
            *self.rejected_by_problem.entry(problem).or_default() += n;
        }
        for (concern, n) in other.warnings_by_concern {
            *self.warnings_by_concern.entry(concern).or_default() += n;
        }
        let room = MAX_DETAILED.saturating_sub(self.rejected.len());
        self.rejected.extend(other.rejected.into_iter().take(room));
        let room = MAX_DETAILED.saturating_sub(self.warnings.len());
        self.warnings.extend(other.warnings.into_iter().take(room));
        for note in other.notes {
            if !self.notes.contains(&note) {
                self.notes.push(note);
            }
        }
    }

    /// Number of rejected records.
    pub fn rejected_count(&self) -> u64 {
        self.rejected_by_problem.values().sum()
    }

    /// Number of warnings.
    pub fn warning_count(&self) -> u64 {
        self.warnings_by_concern.values().sum()
    }

    /// Records kept.
    pub fn kept(&self) -> u64 {
        self.records.saturating_sub(self.rejected_count())
    }

    /// The file of a place.
    pub fn file_of(&self, place: Place) -> Option<&SourceFile> {
        self.files.get(place.file as usize)
    }

    /// "file:line 12" or "file row 12".
    pub fn describe(&self, place: Place) -> PlaceText<'_> {
        PlaceText { report: self, place }
    }
}

/// Displays a place with its file name and line or row.
pub struct PlaceText<'a> {
    report: &'a Report,
    place: Place,
}

impl fmt::Display for PlaceText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.report.file_of(self.place) {
            Some(SourceFile {
                path,
                encoding: Encoding::Jsonl,
            }) => write!(f, "{path}:{}", self.place.at),
            Some(SourceFile {
                path,
                encoding: Encoding::Parquet,
            }) => write!(f, "{path} row {}", self.place.at),
            Some(SourceFile {
                path,
                encoding: Encoding::Items,
            }) => write!(f, "{path} item {}", self.place.at),
            None => write!(f, "record {}", self.place.at),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_everything_but_keeps_detail_bounded() {
        let mut r = Report {
            records: 2000,
            ..Report::default()
        };
        for i in 0..1500 {
            r.reject(Rejection {
                place: Place { file: 0, at: i },
                problem: if i % 2 == 0 {
                    Problem::FloatTime
                } else {
                    Problem::Malformed
                },
                record: None,
                field: None,
                reason: String::new(),
            });
        }
        assert_eq!(r.rejected.len(), MAX_DETAILED);
        assert_eq!(r.rejected_count(), 1500);
        assert_eq!(r.rejected_by_problem[&Problem::FloatTime], 750);
        assert_eq!(r.kept(), 500);
    }

    #[test]
    fn places_name_lines_or_rows() {
        let r = Report {
            files: vec![
                SourceFile {
                    path: "a.jsonl".into(),
                    encoding: Encoding::Jsonl,
                },
                SourceFile {
                    path: "b.parquet".into(),
                    encoding: Encoding::Parquet,
                },
            ],
            ..Report::default()
        };
        assert_eq!(r.describe(Place { file: 0, at: 7 }).to_string(), "a.jsonl:7");
        assert_eq!(r.describe(Place { file: 1, at: 0 }).to_string(), "b.parquet row 0");
    }
}
