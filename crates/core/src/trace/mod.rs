//! The in-memory model of a trace: columnar tables, interned strings and the indexes every view needs.
//!
//! A [`Trace`] is built once by [`TraceBuilder`] (which the format readers feed) and is immutable afterwards;
//! consumers share it as `Arc<Trace>`. It knows nothing of files or of the GUI.

mod builder;
pub mod column;
pub mod emission;
pub mod instances;
pub mod report;
pub mod slice;
mod stages;
pub mod strings;
pub mod tables;
pub mod window;

use rustc_hash::FxHashMap as HashMap;
use std::ops::Range;

pub use builder::TraceBuilder;
pub use column::Nullable;
pub use stages::StageSpan;
pub use strings::{Interner, NO_STR};
pub use tables::{
    Candidate, Candidates, Flag, Iteration, Iterations, NULL_F64, NULL_I64, NULL_U8, NULL_U32, Reference, References,
    Request, Requests, Sample, Samples, SpecRole, Stage, StageKind, Stages, Token, Tokens, opt_f64, opt_i64, opt_u8,
    opt_u32,
};

/// The source name of records that give none.
pub const DEFAULT_SOURCE: &str = "engine";

/// `meta.clock` of a trace whose times are the engine's own, placed on the wall clock by a guess (llama.cpp's log).
pub const CLOCK_ANCHORED: &str = "anchored";

/// The trace-wide `meta` record.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Meta {
    /// True when the trace had a meta record.
    pub present: bool,
    /// `"tokenscope"`.
    pub format: Option<String>,
    /// Format version.
    pub version: Option<i64>,
    /// `vllm`, `sglang`, `trtllm`, ...
    pub engine: Option<String>,
    /// The engine's version.
    pub engine_version: Option<String>,
    /// The served model.
    pub model: Option<String>,
    /// Token ids that end generation.
    pub eos_token_ids: Option<Vec<u32>>,
    /// When the dump was written.
    pub created_ns: Option<i64>,
    /// Whose clock the times are: `engine` (the default) or `client` (a recording, a benchmark tool's export).
    pub clock: Option<String>,
    /// What the writer wants a reader to know about the whole trace (a replay: the profile it ran on and its
    /// measured error).
    pub note: Option<String>,
}

/// Where the candidates of a trace loaded without them are: the Parquet files, and for each request the file and
/// the first and last row of its token records (a writer groups a request's tokens, so the range is tight).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CandidatesOnDisk {
    /// The files, as indexed by [`report::Place::file`].
    pub files: Vec<std::path::PathBuf>,
    /// Per request row: (file, first row, last row) of its tokens; `None` without token records.
    pub rows: Vec<Option<(u32, u64, u64)>>,
}

/// A candidate with its own text, for candidates read on demand (they are not interned into the trace).
#[derive(Debug, Clone, PartialEq)]
pub struct OwnedCandidate {
    /// Vocabulary id, or [`NULL_U32`].
    pub token_id: u32,
    /// Decoded text, when written.
    pub text: Option<String>,
    /// Natural-log probability.
    pub logprob: f64,
    /// Special flag as written.
    pub special: Flag,
}

/// What a token's record says of its choice, for the few tokens a detector names when the trace is not in memory:
/// its logprob and rank (as a load makes them: the rank derived from the candidates when not written), and its
/// candidates.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct TokenChoice {
    /// `logprob` (NaN when absent).
    pub logprob: f64,
    /// `rank` ([`NULL_U32`] when absent).
    pub rank: u32,
    /// The candidates, as written.
    pub candidates: Vec<OwnedCandidate>,
}

/// Where the candidates of a trace loaded without them are read, one request at a time. The format's reader of the
/// files the load left them in implements it (`load::open_candidates`); the app and the CLI know this trait, not
/// the file format.
pub trait CandidateSource: Send + Sync {
    /// The candidates of every token of `request`, in index order.
    ///
    /// # Errors
    /// The files cannot be read any more (moved, truncated, rewritten since the load).
    fn candidates(&self, trace: &Trace, request: u32) -> Result<Vec<Vec<OwnedCandidate>>, CandidateError>;
}

/// Why the candidates of a request could not be read: the reader's own message, naming the file.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct CandidateError(pub String);

/// A loaded trace. Row ids are `u32`; times are `i64` nanoseconds since the Unix epoch (UTC).
#[derive(Debug, Clone, Default)]
pub struct Trace {
    /// The meta record.
    pub meta: Meta,
    /// Request ids, sources and attribution labels.
    pub labels: Interner,
    /// Token and candidate texts.
    pub texts: Interner,
    /// Requests, sorted by arrival.
    pub requests: Requests,
    /// Engine steps, sorted by source then start.
    pub iterations: Iterations,
    /// Explicit stage records, sorted by request then start.
    pub stages: Stages,
    /// Counter readings of the engine instances, sorted by source then time.
    pub samples: Samples,
    /// Output tokens, sorted by request then index.
    pub tokens: Tokens,
    /// Top-k candidates of every token, flattened in token order (empty when they were left on disk).
    pub candidates: Candidates,
    /// Where the candidates are when they were left on disk, to be read per request.
    pub candidates_on_disk: Option<CandidatesOnDisk>,
    /// What a reference said of re-scored tokens (`tokenscope rescore`), sorted by token row; empty when none was.
    pub references: References,
    /// `token_start[r]..token_start[r + 1]` are the tokens of request `r`.
    token_start: Vec<u32>,
    /// `stage_start[r]..stage_start[r + 1]` are the explicit stages of request `r`.
    stage_start: Vec<u32>,
    /// `cand_start[t]..cand_start[t + 1]` are the candidates of token `t`.
    cand_start: Vec<u32>,
    /// Request row by the label id of its `request_id`.
    request_by_id: HashMap<u32, u32>,
    /// For each source (label id), its rows in `iterations`, sorted by start.
    source_iterations: Vec<(u32, Range<u32>)>,
}

fn range_of(starts: &[u32], i: usize) -> Range<usize> {
    match (starts.get(i), starts.get(i + 1)) {
        (Some(&a), Some(&b)) => a as usize..b as usize,
        _ => 0..0,
    }
}

impl Trace {
    /// True when the trace has candidates, in memory or left on disk.
    pub fn has_candidates(&self) -> bool {
        !self.candidates.is_empty() || self.candidates_on_disk.is_some()
    }

    /// Number of requests.
    pub fn request_count(&self) -> usize {
        self.requests.len()
    }

    /// The row of the request with this `request_id`.
    pub fn request_row(&self, request_id: &str) -> Option<u32> {
        let label = self.labels.lookup(request_id)?;
        self.request_by_id.get(&label).copied()
    }

    /// The `request_id` of a request row.
    pub fn request_id(&self, row: u32) -> &str {
        self.requests
            .id
            .get(row as usize)
            .map_or("", |&id| self.labels.str_or_empty(id))
    }

    /// A label (source, model, ...) by id; `None` for [`NO_STR`].
    pub fn label(&self, id: u32) -> Option<&str> {
        self.labels.get(id)
    }

    /// The instance a request decoded on: its `decode_source` when it was handed over after its prefill
    /// (disaggregated serving), else its `source`.
    pub fn decode_source(&self, request: u32) -> u32 {
        let r = request as usize;
        match self.requests.decode_source[r] {
            NO_STR => self.requests.source[r],
            d => d,
        }
    }

    /// True when some request decoded on another instance than the one that prefilled it.
    pub fn is_disaggregated(&self) -> bool {
        self.requests.decode_source.iter().any(|&d| d != NO_STR)
    }

    /// The token rows of a request, in index order.
    pub fn tokens_of(&self, request: u32) -> Range<usize> {
        range_of(&self.token_start, request as usize)
    }

    /// The explicit stage rows of a request, by start time.
    pub fn explicit_stages_of(&self, request: u32) -> Range<usize> {
        range_of(&self.stage_start, request as usize)
    }

    /// What the reference said of token row `token`, when it was re-scored.
    pub fn reference_of(&self, token: usize) -> Option<Reference> {
        let t = u32::try_from(token).ok()?;
        let k = self.references.token.binary_search(&t).ok()?;
        Some(self.references.row(k))
    }

    /// The candidate rows of a token, most probable first as written.
    pub fn candidates_of(&self, token: usize) -> Range<usize> {
        range_of(&self.cand_start, token)
    }

    /// Puts candidates read from disk into memory for the tokens given (`(token row, its candidates)`), after any
    /// the token has: a lazily loaded trace then answers `candidates_of` for them as a whole load would.
    pub fn attach_candidates(&mut self, mut found: Vec<(u32, Vec<OwnedCandidate>)>) {
        if found.is_empty() {
            return;
        }
        found.sort_by_key(|f| f.0);
        let n = self.tokens.len();
        let mut cands = Candidates::default();
        let mut starts = Vec::with_capacity(n + 1);
        starts.push(0u32);
        let mut next = found.into_iter().peekable();
        for t in 0..n {
            for c in self.candidates_of(t) {
                cands.push(self.candidates.row(c));
            }
            while let Some((_, list)) = next.next_if(|f| f.0 as usize == t) {
                for c in list {
                    let text = c.text.as_deref().map_or(NO_STR, |s| self.texts.intern(s));
                    cands.push(Candidate {
                        token_id: c.token_id,
                        text,
                        logprob: c.logprob,
                        special: c.special,
                    });
                }
            }
            starts.push(u32::try_from(cands.len()).unwrap_or(u32::MAX));
        }
        self.candidates = cands;
        self.cand_start = starts;
    }

    /// The candidates of every token of a request held in memory, with their texts.
    pub fn owned_candidates(&self, request: u32) -> Vec<Vec<OwnedCandidate>> {
        self.tokens_of(request)
            .map(|t| {
                self.candidates_of(t)
                    .map(|c| OwnedCandidate {
                        token_id: self.candidates.token_id[c],
                        text: self.texts.get(self.candidates.text[c]).map(str::to_owned),
                        logprob: self.candidates.logprob[c],
                        special: self.candidates.special[c],
                    })
                    .collect()
            })
            .collect()
    }

    /// The sources that have iterations, with their iteration rows (sorted by start).
    pub fn sources_with_iterations(&self) -> &[(u32, Range<u32>)] {
        &self.source_iterations
    }

    /// The iteration rows of a source (label id), sorted by start.
    pub fn iterations_of_source(&self, source: u32) -> Range<usize> {
        self.source_iterations
            .iter()
            .find(|(s, _)| *s == source)
            .map_or(0..0, |(_, r)| r.start as usize..r.end as usize)
    }

    /// The iteration rows of a source that overlap `[from_ns, to_ns)`.
    pub fn iterations_overlapping(&self, source: u32, from_ns: i64, to_ns: i64) -> Range<usize> {
        let rows = self.iterations_of_source(source);
        let starts = &self.iterations.start_ns[rows.clone()];
        let ends = &self.iterations.end_ns[rows.clone()];
        // Steps of one source run one after another, so ends are sorted like starts.
        let first = ends.partition_point(|&e| e <= from_ns);
        let last = starts.partition_point(|&s| s < to_ns);
        rows.start + first..rows.start + last.max(first)
    }

    /// Output tokens of a request as the format defines them: `output_tokens` when present, else its token records.
    pub fn output_tokens(&self, request: u32) -> u32 {
        let r = request as usize;
        self.requests
            .output_tokens
            .get(r)
            .unwrap_or_else(|| u32::try_from(self.tokens_of(request).len()).unwrap_or(u32::MAX))
    }

    /// When a request produced its first token: `first_token_ns`, else token 0's `emitted_ns` (not a later token's:
    /// with token 0 missing, the first token's time is unknown).
    pub fn first_token_ns(&self, request: u32) -> Option<i64> {
        let r = request as usize;
        let tokens = self.tokens_of(request);
        self.requests.first_token_ns.get(r).or_else(|| {
            let first = tokens.start;
            (!tokens.is_empty() && self.tokens.index[first] == 0).then(|| self.tokens.emitted_ns[first])
        })
    }

    /// When a request finished: `finished_ns`, else its last token's `emitted_ns`.
    pub fn finish_ns(&self, request: u32) -> Option<i64> {
        let tokens = self.tokens_of(request);
        self.requests
            .finished_ns
            .get(request as usize)
            .or_else(|| tokens.last().map(|t| self.tokens.emitted_ns[t]))
    }

    /// True when a token is special: marked so, or its id is one of `meta.eos_token_ids`.
    pub fn is_special_token(&self, token_id: u32, special: Flag) -> bool {
        special == Flag::True
            || (token_id != NULL_U32
                && self
                    .meta
                    .eos_token_ids
                    .as_ref()
                    .is_some_and(|ids| ids.contains(&token_id)))
    }

    /// False when the trace's source wrote no times (`clock = "untimed"`: a saved stream): its times are only an
    /// order, and no latency, rate or time-based finding may be read from them.
    pub fn has_times(&self) -> bool {
        self.meta.clock.as_deref() != Some("untimed")
    }

    /// True when the trace holds a request, a step, a sample or a token: something read, not only a meta.
    pub fn has_records(&self) -> bool {
        self.request_count() > 0 || !self.iterations.is_empty() || !self.samples.is_empty() || self.token_count() > 0
    }

    /// The trace's start: its earliest arrival, step start, sample or token, ns (0 for an empty trace). The
    /// waterfall's ruler counts from it, and the command line's `--from-ms` / `--to-ms` are ms after it.
    pub fn start_ns(&self) -> i64 {
        let arrivals = self.requests.arrival_ns.iter();
        let steps = self.iterations.start_ns.iter();
        let samples = self.samples.time_ns.iter();
        let tokens = self.tokens.emitted_ns.iter();
        arrivals
            .chain(steps)
            .chain(samples)
            .chain(tokens)
            .copied()
            .min()
            .unwrap_or(0)
    }

    /// The time `ms` milliseconds after [`Self::start_ns`], ns; saturates instead of overflowing.
    #[expect(clippy::cast_possible_truncation, reason = "clamped into the i64 range first")]
    pub fn at_ms(&self, ms: f64) -> i64 {
        let ns = (ms * 1e6).clamp(i64::MIN as f64, i64::MAX as f64);
        self.start_ns().saturating_add(ns as i64)
    }

    /// Total output-token records in the trace.
    pub fn token_count(&self) -> usize {
        self.tokens.len()
    }

    /// Bytes held by the columns, string tables excluded (their text is counted by [`Interner::heap_bytes`]).
    pub fn column_bytes(&self) -> usize {
        self.requests.heap_bytes()
            + self.iterations.heap_bytes()
            + self.stages.heap_bytes()
            + self.samples.heap_bytes()
            + self.tokens.heap_bytes()
            + self.candidates.heap_bytes()
            + 4 * (self.token_start.len() + self.stage_start.len() + self.cand_start.len())
            + self.labels.heap_bytes()
            + self.texts.heap_bytes()
    }
}
