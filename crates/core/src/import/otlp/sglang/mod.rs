//! SGLang's request traces (`--enable-trace`; SGLang 0.5.10 to 0.5.23, `python/sglang/srt/observability/trace.py`
//! and `req_time_stats.py`). Each request is one OTLP trace: a root span (`module = "sglang::request"`, attribute
//! `rid`, and at finish `gen_ai.latency.*` in seconds, `gen_ai.usage.*`, finish reasons), a thread span per process
//! that handled it (the tokenizer, the scheduler of its TP/DP rank), and under those the slices of its life:
//! `prefill_waiting`, `prefill_forward` (with one `chunked_prefill` per chunk), `decode_waiting`, `decode_forward`
//! (with one `decode_loop` per decode step). Each batch the scheduler ran that carried the request is a `schedule`
//! event `{bid, batch_size, forward_mode}` on whichever slice (or the thread span) ended next.
//!
//! Mapping:
//! - every distinct `bid` of a scheduler is an iteration, starting at its `schedule` event and ending when its result
//!   was processed: the end of a member's own result slice for it (`tokens`), else of the slice carrying the event,
//!   else at the next batch of that scheduler. Its members are prefill members while their prefill had not ended,
//!   decode members after;
//! - a request's tokens come from the batches that gave them (`tokens`: the last chunk of each prefill, then each
//!   later batch, bounded by `completion_tokens` under the overlap scheduler), each at that batch's result; SGLang's
//!   own time to first token (the tokenizer's) is kept as the server's TTFT;
//! - `prefill_waiting` is the queue, `prefill_forward` (or its chunks) the prefill, each scheduler a source.
//!
//! SGLang writes no token counts per batch or chunk: a batch's prefill tokens are known only when each of its
//! prefills ran whole in it (the request's prompt minus its cached tokens); with a chunked prefill they are absent.
//! With speculative decoding a step can carry several tokens: token records then number the steps.
//!
//! `map` gathers the spans and maps them, `request` maps one request, `tokens` says which batches gave its tokens.

mod emit;
mod map;
mod request;
mod tokens;

use std::collections::HashMap;

use super::{Span, attr};
use crate::import::Sink;
use crate::trace::report::Problem;

/// What [`Collector::finish`] did with its spans.
#[derive(Debug, Default)]
pub struct Mapped {
    /// Requests found.
    pub requests: usize,
    /// Spans that belong to no SGLang request.
    pub ignored: usize,
    /// SGLang's spans whose request root is in none of the files (an export given in part), and their traces.
    pub orphans: usize,
    /// The traces of those spans.
    pub orphan_traces: usize,
}

/// What a span is to the mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Role {
    Root,
    Scheduler,
    Thread,
    PrefillWaiting,
    PrefillForward,
    ChunkedPrefill,
    DecodeLoop,
    /// SGLang 0.5.3: a `prefill` slice, one per chunk, ending when the chunk's result was processed.
    LegacyPrefill,
    /// SGLang 0.5.3: a `decode loop` slice, one per decode batch, ending with its result.
    LegacyDecode,
    /// SGLang 0.5.3: `process req`, the scheduler taking the request into its queue (again after a
    /// retraction).
    LegacyQueue,
    SpecVerify,
    Tokenize,
    Other,
}

impl Role {
    /// Slices whose end is the end of the step that carries a `schedule` event.
    fn is_step(self) -> bool {
        matches!(
            self,
            Role::DecodeLoop | Role::ChunkedPrefill | Role::PrefillForward | Role::SpecVerify
        )
    }
}

/// A `schedule` event (or, with `bid` [`RETRACT`], a `retract`) as kept: its batch id interned.
#[derive(Debug, Clone, Copy)]
pub(super) struct SlimEvent {
    bid: u32,
    time_ns: Option<i64>,
    batch_size: Option<i64>,
    prebuilt: bool,
    /// `forward_mode` "prefill": a prefill or mixed batch (a decode in it gets no `decode_loop`).
    extend: bool,
}

pub(super) const RETRACT: u32 = u32::MAX;

/// What the root span of a request says (its attributes).
#[derive(Debug, Clone, Default)]
pub(super) struct RootInfo {
    rid: Option<String>,
    ttft_ns: Option<i64>,
    e2e_ns: Option<i64>,
    prompt: Option<i64>,
    cached: Option<i64>,
    completion: Option<i64>,
    max_tokens: Option<i64>,
    top_k: Option<i64>,
    temperature: Option<f64>,
    top_p: Option<f64>,
    model: Option<String>,
    finish_reason: Option<String>,
}

/// A scheduler's source name and its (DP, PP, TP) rank.
type SchedulerInfo = (String, (i64, i64, i64));

/// A span as kept until every span of the file is read: a hundred bytes or so instead of its whole JSON, so that a
/// file of a million spans holds tens of MB, not a GB.
#[derive(Debug, Clone)]
pub(super) struct Slim {
    line: Line,
    trace: u32,
    id: u64,
    parent: u64,
    role: Role,
    start_ns: Option<i64>,
    end_ns: Option<i64>,
    events: Vec<SlimEvent>,
    error: bool,
    /// Roots: their attributes; schedulers: their source name and rank.
    root: Option<Box<RootInfo>>,
    scheduler: Option<Box<SchedulerInfo>>,
}

/// Where a span was read: the file (its index in the load) and the line or message in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub(super) struct Line {
    file: u32,
    at: u64,
}

/// Adds a record read at `line` (of any file of the load).
pub(super) fn add(sink: &mut Sink<'_>, r: &crate::ingest::raw::RawRecord<'_>, line: Line) {
    sink.file = line.file;
    sink.add(r, line.at);
}

/// Rejects a record read at `line` (of any file of the load).
pub(super) fn reject(sink: &mut Sink<'_>, line: Line, problem: Problem, field: Option<&'static str>, reason: String) {
    sink.file = line.file;
    sink.reject(line.at, problem, field, reason);
}

/// Gathers SGLang's spans as they are read, from every file of the load (an export is split across the processes
/// that write it and the bodies they post: a request's spans are in several files), and maps them once all are
/// read.
#[derive(Debug, Default)]
pub struct Collector {
    /// The file whose spans are being pushed.
    pub file: u32,
    traces: HashMap<String, u32>,
    trace_ids: Vec<String>,
    bids: HashMap<String, u32>,
    bid_names: Vec<String>,
    spans: Vec<Slim>,
}

impl Collector {
    /// How many spans were gathered.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Whether no span was gathered.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }
}

/// A span id as a number (16 hex digits); anything else by its hash.
pub(super) fn id_of(hex: &str) -> u64 {
    if hex.is_empty() {
        return 0;
    }
    u64::from_str_radix(hex, 16).unwrap_or_else(|_| {
        use std::hash::{Hash, Hasher};
        let mut h = rustc_hash::FxHasher::default();
        hex.hash(&mut h);
        h.finish() | 1
    })
}

pub(super) fn is_root(s: &Span) -> bool {
    s.attr("module").and_then(|a| a.as_str()) == Some("sglang::request")
        || (s.attr("rid").is_some() && s.name.contains("Req "))
}

pub(super) fn is_scheduler(s: &Span) -> bool {
    s.attr("thread_label").and_then(|a| a.as_str()) == Some("Scheduler") || s.name.starts_with("Scheduler")
}

/// A scheduler's source name: its thread span's name without the process id, which changes from run to run
/// ("Scheduler [TP 0] [PP 0] (host:4f1c2d3e | pid:4200)" -> "Scheduler [TP 0] [PP 0] @4f1c2d3e").
pub(super) fn source_name(s: &Span) -> String {
    let label = s.name.split("(host:").next().unwrap_or(&s.name);
    let label = label.split_whitespace().collect::<Vec<_>>().join(" ");
    let host = s
        .name
        .split("(host:")
        .nth(1)
        .and_then(|h| h.split(['|', ')']).next())
        .map(str::trim)
        .filter(|h| !h.is_empty());
    match host {
        Some(h) => format!("{label} @{h}"),
        None => label,
    }
}
