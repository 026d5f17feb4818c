//! A Parquet trace's figures without loading it: its row groups streamed a window at a time
//! ([`crate::format::parquet::stream`]), keeping a few facts per request ([`RequestFacts`]) and per step, never a
//! row per token. Memory is set by the number of requests and steps and by a window of row groups, not by the file.
//!
//! The passes:
//! 1. [`Streamed::open`]: the requests (and, when asked, the steps and counter samples), from the row groups that
//!    may hold them (a row group whose statistics show only tokens is not read).
//! 2. [`Streamed::read_tokens`]: the tokens, from the row groups that may hold them: each request's count, token 0's
//!    time and its last token's; the inter-token latencies counted per bucket ([`crate::analysis::exact`]).
//! 3. When more latencies came than memory keeps, the same rows again for the values in the buckets that hold the
//!    percentiles ([`Streamed::read_itl_again`]); for a timeline, the tokens per request and time bucket
//!    ([`Streamed::count_tokens`]).
//!
//! What the format guarantees is relied on and checked: a request's tokens are together and in `index` order
//! (the writer's order). A file that breaks it is [`StreamError::Unordered`]: it must be loaded. Records are
//! checked for the rules of the fields read (required fields, times in epoch ns and in order, counts), duplicates
//! and tokens without a request: those rows are counted and left out, as a load rejects them; the format's other
//! rules are `tokenscope validate`'s.

pub mod findings;
mod pieces;
mod step_rows;
mod tokens;

use std::path::PathBuf;

use rustc_hash::FxHashMap;

use crate::analysis::exact::{Outcome, Tally};
use crate::analysis::facts::{RequestFacts, StepFigures};
use crate::analysis::metrics::{Distribution, RequestMetrics};
use crate::analysis::summary::{NO_LABEL, Slo, Summary, Totals};
use parquet::file::metadata::RowGroupMetaData;

use crate::format::parquet::outside;
use crate::format::parquet::stream::{At, Columns, StreamFile, stream};
use crate::format::window::Window;
use crate::ingest::LoadError;
use crate::ingest::validate::is_epoch_ns;
use crate::trace::{DEFAULT_SOURCE, Interner};

pub use tokens::TokenCount;

/// Inter-token latencies a first pass keeps before it counts them per bucket instead (8 M: 64 MB), as the
/// dataset path does.
pub const KEEP: usize = 1 << 23;

/// Why a trace's figures could not be streamed.
#[derive(Debug, thiserror::Error)]
pub enum StreamError {
    /// A file could not be read.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The file breaks an order streaming relies on, or holds what only a load computes: it must be loaded.
    #[error("{0}")]
    Unordered(String),
}

/// Rows left out, by reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Skipped {
    /// Request rows without `request_id` or `arrival_ns`, or breaking a rule a load checks of the fields read
    /// (times in epoch ns and in order, counts, cached within input).
    pub incomplete_requests: u64,
    /// Request rows whose `request_id` an earlier row has (the first is kept, as a load keeps it).
    pub duplicate_requests: u64,
    /// Requests outside the window (or its filters).
    pub outside_window: u64,
    /// Token rows without `request_id`, `index` or `emitted_ns`, or with a negative index or a time that is not
    /// epoch ns.
    pub incomplete_tokens: u64,
    /// Token rows of no request record (not counted with a window, which leaves such tokens out as a load does).
    pub orphan_tokens: u64,
    /// Step or sample rows without their times (or a step ending before it starts).
    pub incomplete_steps: u64,
}

impl Skipped {
    /// Rows left out for breaking a rule checked here (the window's aside). A load checks more rules (`tokenscope
    /// validate` lists what breaks them).
    pub fn rejected(&self) -> u64 {
        self.incomplete_requests
            + self.duplicate_requests
            + self.incomplete_tokens
            + self.incomplete_steps
            + self.orphan_tokens
    }
}

/// A step's (or, for an instance without steps, a counter sample's) figures of a timeline.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct StepFacts {
    /// Its source, as a label.
    pub source: u32,
    /// `start_ns` (a sample's `time_ns`).
    pub start_ns: i64,
    /// `num_waiting`.
    pub num_waiting: Option<i64>,
    /// `kv_usage`.
    pub kv_usage: Option<f64>,
    /// `num_preempted` (a sample has none).
    pub num_preempted: Option<i64>,
    /// `end_ns` (a sample has none).
    pub end_ns: Option<i64>,
    /// `num_prefill_tokens` and `num_decode_tokens`.
    pub tokens: (Option<u32>, Option<u32>),
    /// Speculative decoding: `spec_drafted_tokens` and `spec_accepted_tokens`.
    pub spec: (Option<u32>, Option<u32>),
    /// A counter sample rather than a step.
    pub sample: bool,
}

/// A trace being streamed: its requests' facts, read so far.
pub struct Streamed {
    files: Vec<StreamFile>,
    /// Request id to its index in `requests`.
    ids: FxHashMap<Box<str>, u32>,
    /// The requests kept (in the window), in file order.
    pub requests: Vec<RequestFacts>,
    /// The labels the facts name.
    pub labels: Interner,
    /// Steps and counter samples, when asked for.
    pub steps: Vec<StepFacts>,
    /// Rows left out.
    pub skipped: Skipped,
    /// The earliest and latest `emitted_ns` of the kept requests' tokens (after [`Self::read_tokens`]).
    pub token_extent: Option<(i64, i64)>,
    /// Passes over the rows so far.
    pub passes: u32,
    /// Counter samples read (in the window), before those of instances with steps are set aside.
    pub samples: u64,
    /// The earliest start of a step or sample read (in the window), those set aside included.
    pub first_step_ns: Option<i64>,
    /// The window, for choosing the token row groups to read.
    window: Option<Window>,
}

/// The columns of the first pass, `kind` first.
const REQUEST_COLUMNS: [&str; 24] = [
    "kind",
    "request_id",
    "arrival_ns",
    "scheduled_ns",
    "first_token_ns",
    "finished_ns",
    "input_tokens",
    "cached_tokens",
    "output_tokens",
    "finish_reason",
    "source",
    "model",
    "app_id",
    "user_id",
    "start_ns",
    "time_ns",
    "num_waiting",
    "kv_usage",
    "num_preempted",
    "end_ns",
    "num_prefill_tokens",
    "num_decode_tokens",
    "spec_drafted_tokens",
    "spec_accepted_tokens",
];
const LABEL_COLUMNS: [usize; 4] = [10, 11, 12, 13];

/// A request row as decoded, before its labels are interned.
struct RequestRow {
    id: Box<str>,
    facts: RequestFacts,
    reason: Option<Box<str>>,
    labels: [Option<Box<str>>; 4],
}

/// A step or sample row as decoded.
struct StepRow {
    source: Option<Box<str>>,
    facts: StepFacts,
}

#[derive(Default)]
struct FirstPass {
    requests: Vec<RequestRow>,
    steps: Vec<StepRow>,
    incomplete_requests: u64,
    incomplete_steps: u64,
}

fn u32_of(v: Option<i64>) -> Option<u32> {
    v.and_then(|v| u32::try_from(v).ok())
}

impl Streamed {
    /// Pass 1 over the Parquet `files` of one trace: its requests (those in `window`), and its steps and samples
    /// when `steps` is set.
    ///
    /// # Errors
    /// A file cannot be read or a column has the wrong type ([`StreamError::Load`]); the trace is a joined one,
    /// whose delivery figures need it loaded, or has no times ([`StreamError::Unordered`]).
    pub fn open(files: &[PathBuf], window: Option<&Window>, steps: bool) -> Result<Self, StreamError> {
        let files = files
            .iter()
            .map(|p| StreamFile::open(p))
            .collect::<Result<Vec<_>, _>>()?;
        for f in &files {
            refuse_what_needs_a_load(f)?;
        }
        let mut s = Streamed {
            files,
            ids: FxHashMap::default(),
            requests: Vec::new(),
            labels: Interner::default(),
            steps: Vec::new(),
            skipped: Skipped::default(),
            token_extent: None,
            passes: 1,
            samples: 0,
            first_step_ns: None,
            window: None,
        };
        let window = window.filter(|w| !w.is_all());
        // Row groups of requests the window's statistics rule out are not read: their rows count as outside.
        let pruned = std::cell::Cell::new(0u64);
        let wanted = |kind: Option<&str>, rg: &RowGroupMetaData| {
            let kind_wanted = match kind {
                None | Some("request") => true,
                Some("iteration" | "sample") => steps,
                Some(_) => false,
            };
            let ruled_out = window.is_some_and(|w| outside(rg, w));
            if kind_wanted && ruled_out && kind == Some("request") {
                pruned.set(pruned.get() + u64::try_from(rg.num_rows()).unwrap_or(0));
            }
            kind_wanted && !ruled_out
        };
        let Streamed {
            files,
            ids,
            requests,
            labels,
            steps: step_facts,
            skipped,
            ..
        } = &mut s;
        stream(
            files,
            &REQUEST_COLUMNS,
            wanted,
            |c, _| decode_first(c, steps),
            |p: FirstPass, _at: At| {
                skipped.incomplete_requests += p.incomplete_requests;
                skipped.incomplete_steps += p.incomplete_steps;
                for r in p.requests {
                    if ids.contains_key(&r.id) {
                        skipped.duplicate_requests += 1;
                        continue;
                    }
                    let mut facts = r.facts;
                    let source = r.labels[0].as_deref().unwrap_or(DEFAULT_SOURCE);
                    if let Some(w) = window {
                        let inside = w.contains(facts.arrival_ns)
                            && w.allows("source", source)
                            && w.allows_label("model", r.labels[1].as_deref())
                            && w.allows_label("app_id", r.labels[2].as_deref())
                            && w.allows_label("user_id", r.labels[3].as_deref());
                        if !inside {
                            skipped.outside_window += 1;
                            // Its tokens are left out as a window leaves them: not counted as orphans.
                            ids.insert(r.id, tokens::OUTSIDE);
                            continue;
                        }
                    }
                    facts.finish_reason = r.reason.as_deref().map(|t| labels.intern(t));
                    facts.labels = [
                        Some(labels.intern(source)),
                        r.labels[1].as_deref().map(|t| labels.intern(t)),
                        r.labels[2].as_deref().map(|t| labels.intern(t)),
                        r.labels[3].as_deref().map(|t| labels.intern(t)),
                    ];
                    let index = u32::try_from(requests.len()).map_err(|_| "more than 4 billion requests".to_owned())?;
                    ids.insert(r.id, index);
                    requests.push(facts);
                }
                for st in p.steps {
                    let source = st.source.as_deref().unwrap_or(DEFAULT_SOURCE);
                    if window.is_some_and(|w| !(w.contains(st.facts.start_ns) && w.allows("source", source))) {
                        continue;
                    }
                    step_facts.push(StepFacts {
                        source: labels.intern(source),
                        ..st.facts
                    });
                }
                Ok(())
            },
        )?;
        s.skipped.outside_window += pruned.get();
        s.samples = s.steps.iter().filter(|st| st.sample).count() as u64;
        // A load's start counts every step and sample, those set aside below too.
        s.first_step_ns = s.steps.iter().map(|st| st.start_ns).min();
        s.window = window.cloned();
        if steps {
            // As a load: a source with steps shows its steps' queue and KV use, not its counter samples'.
            let stepped: rustc_hash::FxHashSet<u32> =
                s.steps.iter().filter(|st| !st.sample).map(|st| st.source).collect();
            s.steps.retain(|st| !st.sample || !stepped.contains(&st.source));
        }
        Ok(s)
    }

    /// The label with this index.
    pub fn label(&self, id: u32) -> &str {
        self.labels.get(id).unwrap_or(NO_LABEL)
    }
}

/// A joined trace's delivery figures, and an untimed trace's figures, are the load's: refused here.
fn refuse_what_needs_a_load(f: &StreamFile) -> Result<(), StreamError> {
    if crate::format::parquet::footer_clock(f.path()).as_deref() == Some("untimed") {
        return Err(StreamError::Unordered(format!(
            "{}: the trace has no times (clock \"untimed\"); its figures of time are unknown",
            f.path().display()
        )));
    }
    for column in ["sent_ns", "received_ns"] {
        if f.has_values(column) {
            return Err(StreamError::Unordered(format!(
                "{}: a joined trace (it has {column}): its delivery figures need it loaded",
                f.path().display()
            )));
        }
    }
    Ok(())
}

/// Decodes the requests (and steps and samples) of a batch.
fn decode_first(c: &Columns, steps: bool) -> Result<FirstPass, String> {
    let (int, string) = ("int", "string");
    c.check_from(
        0,
        &[
            string, string, int, int, int, int, int, int, int, string, string, string, string, string,
        ],
    )?;
    if steps {
        c.check_from(14, &[int, int, int, "float", int, int, int, int, int, int])?;
    }
    let text = |col: usize, i: usize| c.str(col, i).map(Box::from);
    let mut out = FirstPass::default();
    for i in 0..c.rows() {
        match c.kind(i) {
            Some("request") => {
                let (Some(id), Some(arrival_ns)) = (c.str(1, i), c.int(2, i)) else {
                    out.incomplete_requests += 1;
                    continue;
                };
                if !follows_the_rules(c, i) {
                    out.incomplete_requests += 1;
                    continue;
                }
                out.requests.push(RequestRow {
                    id: Box::from(id),
                    facts: RequestFacts {
                        arrival_ns,
                        scheduled_ns: c.int(3, i),
                        first_token_ns: c.int(4, i),
                        finished_ns: c.int(5, i),
                        input_tokens: u32_of(c.int(6, i)),
                        cached_tokens: u32_of(c.int(7, i)),
                        output_tokens: u32_of(c.int(8, i)),
                        ..RequestFacts::default()
                    },
                    reason: text(9, i),
                    labels: LABEL_COLUMNS.map(|col| text(col, i)),
                });
            }
            Some(kind @ ("iteration" | "sample")) if steps => {
                let sample = kind == "sample";
                let Some(start_ns) = c.int(if sample { 15 } else { 14 }, i).filter(|&t| is_epoch_ns(t)) else {
                    out.incomplete_steps += 1;
                    continue;
                };
                let end_ns = c.int(19, i).filter(|&t| is_epoch_ns(t) && t >= start_ns);
                if !sample && end_ns.is_none() {
                    out.incomplete_steps += 1;
                    continue;
                }
                out.steps.push(StepRow {
                    source: text(10, i),
                    facts: StepFacts {
                        source: 0,
                        start_ns,
                        num_waiting: c.int(16, i),
                        kv_usage: c.float(17, i),
                        num_preempted: if sample { None } else { c.int(18, i) },
                        end_ns: if sample { None } else { end_ns },
                        tokens: (u32_of(c.int(20, i)), u32_of(c.int(21, i))),
                        spec: (u32_of(c.int(22, i)), u32_of(c.int(23, i))),
                        sample,
                    },
                });
            }
            _ => {}
        }
    }
    Ok(out)
}

/// Whether request row `i` keeps the rules a load checks of the fields read here: its times in epoch ns and in
/// order (arrival, scheduled, first token, finished), its counts counts, its cached tokens within its input.
fn follows_the_rules(c: &Columns, i: usize) -> bool {
    let mut last = i64::MIN;
    for col in [2, 3, 4, 5] {
        if let Some(t) = c.int(col, i) {
            if !is_epoch_ns(t) || t < last {
                return false;
            }
            last = t;
        }
    }
    let count = |col| c.int(col, i).is_none_or(|n| (0..i64::from(u32::MAX)).contains(&n));
    let within = match (c.int(6, i), c.int(7, i)) {
        (Some(input), Some(cached)) => cached <= input,
        _ => true,
    };
    count(6) && count(7) && count(8) && within
}

/// The summary of a streamed trace, and how it was computed.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamedSummary {
    /// The figures of `tokenscope summary` (no cost, no delivery: a joined trace is refused).
    pub summary: Summary,
    /// Passes over the rows: 2, or 3 when the inter-token latencies' percentiles needed a second look.
    pub passes: u32,
    /// Rows left out.
    pub skipped: Skipped,
    /// The engine steps' line.
    pub steps: Option<StepFigures>,
    /// Counter samples read.
    pub samples: u64,
}

/// The summary of the trace in the Parquet `files`, streamed: on a valid trace, the figures a load gives (every
/// count, percentile, maximum and total exactly; means summed in another order when more than [`KEEP`] latencies
/// came). Of the rows a load rejects, those breaking the rules checked here are left out too.
///
/// # Errors
/// As [`Streamed::open`] and [`Streamed::read_tokens`].
pub fn summarize(files: &[PathBuf], window: Option<&Window>, slo: Slo) -> Result<StreamedSummary, StreamError> {
    summarize_keeping(files, window, slo, KEEP)
}

/// [`summarize`], keeping at most `keep` inter-token latencies before counting them per bucket.
///
/// # Errors
/// As [`summarize`].
pub fn summarize_keeping(
    files: &[PathBuf],
    window: Option<&Window>,
    slo: Slo,
    keep: usize,
) -> Result<StreamedSummary, StreamError> {
    summarized(files, window, slo, keep).map(|(summary, _)| summary)
}

/// Each request's latency figures, by its id.
pub type MetricsById = FxHashMap<Box<str>, RequestMetrics>;

/// [`summarize`], and each request's latency figures by its id (what `diff` pairs and compares).
///
/// # Errors
/// As [`summarize`].
pub fn summarize_requests(
    files: &[PathBuf],
    window: Option<&Window>,
    slo: Slo,
) -> Result<(StreamedSummary, MetricsById), StreamError> {
    let (summary, s) = summarized(files, window, slo, KEEP)?;
    let mut by_id = FxHashMap::default();
    by_id.reserve(s.requests.len());
    for (id, row) in s.ids {
        if let Some(f) = s.requests.get(row as usize) {
            by_id.insert(id, f.metrics());
        }
    }
    Ok((summary, by_id))
}

/// The summary of a streamed trace, and the trace as streamed.
fn summarized(
    files: &[PathBuf],
    window: Option<&Window>,
    slo: Slo,
    keep: usize,
) -> Result<(StreamedSummary, Streamed), StreamError> {
    let mut s = Streamed::open(files, window, true)?;
    let tally = s.read_tokens(Some(keep))?.unwrap_or_else(|| Tally::new(keep));
    let itl = match tally.finish() {
        Outcome::Done(d) => d,
        Outcome::Second(second) => s.read_itl_again(second)?,
    };
    let steps = StepFigures::of(s.steps.iter().filter(|st| !st.sample).map(|st| {
        (
            st.source,
            st.start_ns,
            st.end_ns.unwrap_or(st.start_ns),
            st.tokens.0,
            st.tokens.1,
        )
    }));
    let summary = StreamedSummary {
        summary: s.summary(slo, itl),
        passes: s.passes,
        skipped: s.skipped,
        steps,
        samples: s.samples,
    };
    Ok((summary, s))
}

impl Streamed {
    /// The summary of the requests read, with the inter-token latencies' distribution.
    pub fn summary(&self, slo: Slo, itl: Distribution) -> Summary {
        let mut totals = Totals::new(slo, self.requests.len());
        for f in &self.requests {
            totals.add(&f.metrics(), &f.counts(|l| self.label(l)));
        }
        totals.finish(itl)
    }
}

#[cfg(test)]
mod tests;
