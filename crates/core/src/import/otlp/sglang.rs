//! SGLang's request traces (`--enable-trace`; SGLang 0.5.23, `python/sglang/srt/observability/trace.py` and
//! `req_time_stats.py`). Each request is one OTLP trace: a root span (`module = "sglang::request"`, attribute
//! `rid`, and at finish `gen_ai.latency.*` in seconds, `gen_ai.usage.*`, finish reasons), a thread span per process
//! that handled it (the tokenizer, the scheduler of its TP/DP rank), and under those the slices of its life:
//! `prefill_waiting`, `prefill_forward` (with one `chunked_prefill` per chunk), `decode_waiting`, `decode_forward`
//! (with one `decode_loop` per decode step). Each batch the scheduler ran that carried the request is a `schedule`
//! event `{bid, batch_size, forward_mode}` on whichever slice (or the thread span) ended next.
//!
//! Mapping:
//! - every distinct `bid` of a scheduler is an iteration, starting at its `schedule` event; it ends where the
//!   slice carrying the event ends (a `decode_loop` or `chunked_prefill`, the step's result), else at the next
//!   batch of that scheduler. Its members are prefill members while their prefill had not ended, decode members
//!   after;
//! - the request's first token is at arrival + `time_to_first_token`; each later token at the end of a batch it
//!   decoded in (so a mixed prefill+decode batch, which writes no `decode_loop`, still yields its token);
//! - `prefill_waiting` is the queue, `prefill_forward` (or its chunks) the prefill, each scheduler a source.
//!
//! SGLang writes no token counts per batch or chunk: a batch's prefill tokens are known only when each of its
//! prefills ran whole in it (the request's prompt minus its cached tokens); with a chunked prefill they are absent.
//! With speculative decoding a step can carry several tokens: token records then number the steps.

use std::collections::{BTreeMap, HashMap};

use super::{Span, attr};
use crate::import::{Sink, ns_from_secs, ok, record, text};
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
enum Role {
    Root,
    Scheduler,
    Thread,
    PrefillWaiting,
    PrefillForward,
    ChunkedPrefill,
    DecodeLoop,
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
struct SlimEvent {
    bid: u32,
    time_ns: Option<i64>,
    batch_size: Option<i64>,
    prebuilt: bool,
    /// `forward_mode` "prefill": a prefill or mixed batch (a decode in it gets no `decode_loop`).
    extend: bool,
}

const RETRACT: u32 = u32::MAX;

/// What the root span of a request says (its attributes).
#[derive(Debug, Clone, Default)]
struct RootInfo {
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
struct Slim {
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
struct Line {
    file: u32,
    at: u64,
}

/// Adds a record read at `line` (of any file of the load).
fn add(sink: &mut Sink<'_>, r: &crate::ingest::raw::RawRecord<'_>, line: Line) {
    sink.file = line.file;
    sink.add(r, line.at);
}

/// Rejects a record read at `line` (of any file of the load).
fn reject(sink: &mut Sink<'_>, line: Line, problem: Problem, field: Option<&'static str>, reason: String) {
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
fn id_of(hex: &str) -> u64 {
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

fn is_root(s: &Span) -> bool {
    s.attr("module").and_then(|a| a.as_str()) == Some("sglang::request")
        || (s.attr("rid").is_some() && s.name.contains("Req "))
}

fn is_scheduler(s: &Span) -> bool {
    s.attr("thread_label").and_then(|a| a.as_str()) == Some("Scheduler") || s.name.starts_with("Scheduler")
}

/// A scheduler's source name: its thread span's name without the process id, which changes from run to run
/// ("Scheduler [TP 0] [PP 0] (host:4f1c2d3e | pid:4200)" -> "Scheduler [TP 0] [PP 0] @4f1c2d3e").
fn source_name(s: &Span) -> String {
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

impl Collector {
    /// Keeps what the mapping needs of one span.
    pub fn push(&mut self, s: Span) {
        let role = if is_root(&s) {
            Role::Root
        } else if is_scheduler(&s) {
            Role::Scheduler
        } else if s.attr("thread_label").is_some() || s.name.contains("(host:") {
            Role::Thread
        } else {
            match s.name.as_str() {
                "prefill_waiting" => Role::PrefillWaiting,
                "prefill_forward" => Role::PrefillForward,
                "chunked_prefill" => Role::ChunkedPrefill,
                "decode_loop" => Role::DecodeLoop,
                "spec_verify" => Role::SpecVerify,
                "tokenize" => Role::Tokenize,
                _ => Role::Other,
            }
        };
        let next = u32::try_from(self.trace_ids.len()).unwrap_or(u32::MAX);
        let trace = *self.traces.entry(s.trace_id.clone()).or_insert_with(|| {
            self.trace_ids.push(s.trace_id.clone());
            next
        });
        let mut events = Vec::new();
        for e in &s.events {
            let bid = match e.name.as_str() {
                "retract" => RETRACT,
                "schedule" => {
                    let Some(bid) = attr(&e.attributes, "bid").and_then(|a| a.as_str()) else {
                        continue;
                    };
                    let n = u32::try_from(self.bid_names.len()).unwrap_or(RETRACT - 1);
                    *self.bids.entry(bid.to_owned()).or_insert_with(|| {
                        self.bid_names.push(bid.to_owned());
                        n
                    })
                }
                _ => continue,
            };
            events.push(SlimEvent {
                bid,
                time_ns: e.time_ns,
                batch_size: attr(&e.attributes, "batch_size").and_then(|a| a.as_i64()),
                prebuilt: attr(&e.attributes, "forward_mode").and_then(|a| a.as_str()) == Some("prebuilt"),
                extend: attr(&e.attributes, "forward_mode").and_then(|a| a.as_str()) == Some("prefill"),
            });
        }
        let root = (role == Role::Root).then(|| {
            let secs = |key: &str| s.attr(key).and_then(|a| a.as_f64()).and_then(ns_from_secs);
            let int = |key: &str| s.attr(key).and_then(|a| a.as_i64());
            let string = |key: &str| s.attr(key).and_then(|a| a.as_str()).map(str::to_owned);
            Box::new(RootInfo {
                rid: string("rid"),
                ttft_ns: secs("gen_ai.latency.time_to_first_token"),
                e2e_ns: secs("gen_ai.latency.e2e"),
                prompt: int("gen_ai.usage.prompt_tokens"),
                cached: int("gen_ai.usage.cached_tokens"),
                completion: int("gen_ai.usage.completion_tokens"),
                max_tokens: int("gen_ai.request.max_tokens"),
                top_k: int("gen_ai.request.top_k"),
                temperature: s.attr("gen_ai.request.temperature").and_then(|a| a.as_f64()),
                top_p: s.attr("gen_ai.request.top_p").and_then(|a| a.as_f64()),
                model: string("gen_ai.response.model"),
                finish_reason: string("gen_ai.response.finish_reasons").and_then(|f| finish_reason(&f)),
            })
        });
        let scheduler = (role == Role::Scheduler).then(|| {
            let r = |k: &str| s.attr(k).and_then(|a| a.as_i64()).unwrap_or(0);
            Box::new((source_name(&s), (r("dp_rank"), r("pp_rank"), r("tp_rank"))))
        });
        self.spans.push(Slim {
            line: Line {
                file: self.file,
                at: s.line,
            },
            trace,
            id: id_of(&s.span_id),
            parent: id_of(&s.parent_span_id),
            role,
            start_ns: s.start_ns,
            end_ns: s.end_ns,
            events,
            error: s.error,
            root,
            scheduler,
        });
    }

    /// Maps every SGLang request gathered; the spans of traces without a request root are counted as ignored.
    pub fn finish(mut self, sink: &mut Sink<'_>) -> Mapped {
        let mut mapped = Mapped::default();
        self.spans.sort_by_key(|s| s.trace);
        let spans = &self.spans;
        let mut requests: Vec<RequestSpans<'_>> = Vec::new();
        for trace in spans.chunk_by(|a, b| a.trace == b.trace) {
            let roots: Vec<&Slim> = trace.iter().filter(|s| s.role == Role::Root).collect();
            let Some(&root) = roots.first() else {
                if trace.iter().any(|s| s.role != Role::Other) {
                    // SGLang's own spans whose request root is in none of the files given.
                    mapped.orphans += trace.len();
                    mapped.orphan_traces += 1;
                } else {
                    mapped.ignored += trace.len();
                }
                continue;
            };
            for extra in &roots[1..] {
                reject(
                    sink,
                    extra.line,
                    Problem::Duplicate,
                    Some("traceId"),
                    format!(
                        "a second SGLang request root (span {:016x}) in trace {}; the first was kept",
                        extra.id, self.trace_ids[extra.trace as usize]
                    ),
                );
            }
            requests.push(gather(root, trace));
        }
        // In the order of arrival, so that the records (and duplicates) come out the same whatever the file's order.
        requests.sort_by_key(|r| (r.root.start_ns, r.root.line));
        mapped.requests = requests.len();
        if requests.is_empty() {
            return mapped;
        }
        let bid_names = &self.bid_names;
        let trace_ids = &self.trace_ids;

        // Every request's schedule events, and the batches of each scheduler.
        let events: Vec<Vec<Scheduled>> = requests.iter().map(scheduled_of).collect();
        let prefill_end: Vec<Option<i64>> = requests.iter().map(prefill_end_of).collect();
        let whole_prefill: Vec<Option<i64>> = requests.iter().map(whole_prefill_tokens).collect();
        let sources: Vec<String> = requests
            .iter()
            .map(|r| {
                r.scheduler
                    .and_then(|s| s.scheduler.as_ref())
                    .map_or_else(|| crate::trace::DEFAULT_SOURCE.to_owned(), |s| s.0.clone())
            })
            .collect();
        // When each batch's result was processed, from the members whose own slices say it: under the overlap
        // scheduler the slice that carries a batch's `schedule` event ends with the batch before.
        let mut result_of: HashMap<(&str, u32), i64> = HashMap::new();
        for (i, r) in requests.iter().enumerate() {
            let completion = r.root.root.as_ref().and_then(|info| info.completion);
            for (bid, end) in results_of(r, &events[i], completion) {
                let at = result_of.entry((sources[i].as_str(), bid)).or_insert(end);
                *at = (*at).min(end);
            }
        }
        let mut batches: BTreeMap<&str, HashMap<u32, Batch>> = BTreeMap::new();
        for (i, evs) in events.iter().enumerate() {
            for e in evs {
                let batch = batches
                    .entry(sources[i].as_str())
                    .or_default()
                    .entry(e.bid)
                    .or_insert_with(|| Batch {
                        start_ns: e.time_ns,
                        prefill_tokens: Some(0),
                        ..Batch::default()
                    });
                batch.start_ns = batch.start_ns.min(e.time_ns);
                batch.batch_size = batch.batch_size.max(e.batch_size);
                if let Some(end) = e.step_end_ns.filter(|&end| end > e.time_ns) {
                    batch.step_end_ns = Some(batch.step_end_ns.map_or(end, |b| b.min(end)));
                }
                let in_prefill = prefill_end[i].is_none_or(|end| e.time_ns < end);
                let members = if in_prefill {
                    &mut batch.prefill
                } else {
                    &mut batch.decode
                };
                if !members.contains(&i) {
                    members.push(i);
                    if in_prefill {
                        batch.prefill_tokens = match (batch.prefill_tokens, whole_prefill[i]) {
                            (Some(sum), Some(n)) => Some(sum + n),
                            _ => None,
                        };
                    }
                }
            }
        }
        // Number each scheduler's batches in time order; a batch without a step of its own ends at the next one.
        let mut iteration_of: HashMap<(&str, u32), (i64, i64)> = HashMap::new();
        for (source, source_batches) in &batches {
            let mut order: Vec<(u32, &Batch)> = source_batches.iter().map(|(bid, b)| (*bid, b)).collect();
            order.sort_by(|(x, a), (y, b)| {
                (a.start_ns, &bid_names[*x as usize]).cmp(&(b.start_ns, &bid_names[*y as usize]))
            });
            for (n, (bid, batch)) in order.iter().enumerate() {
                let next_start = order.get(n + 1).map(|(_, b)| b.start_ns);
                let members_end = batch
                    .prefill
                    .iter()
                    .chain(&batch.decode)
                    .filter_map(|&i| requests[i].root.end_ns)
                    .min();
                let end = result_of
                    .get(&(*source, *bid))
                    .copied()
                    .or(batch.step_end_ns)
                    .or(next_start)
                    .or(members_end)
                    .unwrap_or(batch.start_ns)
                    .max(batch.start_ns);
                let index = i64::try_from(n).unwrap_or(i64::MAX);
                iteration_of.insert((source, *bid), (index, end));
                let mut it = record("iteration");
                it.source = text(source.to_string());
                it.iteration = ok(index);
                it.start_ns = ok(batch.start_ns);
                it.end_ns = ok(end);
                let count = |v: &Vec<usize>| i64::try_from(v.len()).unwrap_or(i64::MAX);
                it.num_reqs = ok(batch.batch_size.unwrap_or(count(&batch.prefill) + count(&batch.decode)));
                it.num_prefill_reqs = ok(count(&batch.prefill));
                it.num_decode_reqs = ok(count(&batch.decode));
                it.num_decode_tokens = ok(count(&batch.decode));
                it.num_prefill_tokens = batch.prefill_tokens.and_then(ok);
                let line = batch
                    .prefill
                    .iter()
                    .chain(&batch.decode)
                    .map(|&i| requests[i].root.line)
                    .min()
                    .unwrap_or_default();
                add(sink, &it, line);
            }
        }

        for (i, r) in requests.iter().enumerate() {
            let at = Mapping {
                events: &events[i],
                prefill_end: prefill_end[i],
                source: &sources[i],
                iteration_of: &iteration_of,
                trace_id: &trace_ids[r.root.trace as usize],
            };
            map_request(r, &at, sink);
        }
        sink.note(
            "SGLang's trace has no token counts per batch: a batch's prefill tokens are known only when each of its \
             prefills ran whole in it (prompt minus cached tokens), not for chunked prefills; token times are the \
             ends of the batches each request decoded in"
                .to_owned(),
        );
        sink.note("no candidates in an SGLang trace (token ids, texts and logprobs are not traced)".to_owned());
        mapped
    }
}

/// One `schedule` event as seen by one request.
#[derive(Debug, Clone)]
struct Scheduled {
    bid: u32,
    time_ns: i64,
    batch_size: Option<i64>,
    prebuilt: bool,
    /// A prefill or mixed batch.
    extend: bool,
    /// The end of the slice that carries it, when that slice is the step's own (not a thread span flushed at the
    /// request's end).
    step_end_ns: Option<i64>,
}

/// A request's spans, gathered before mapping.
struct RequestSpans<'a> {
    root: &'a Slim,
    scheduler: Option<&'a Slim>,
    slices: Vec<&'a Slim>,
    tokenize: Vec<&'a Slim>,
}

/// A batch of one scheduler, assembled from its members' events.
#[derive(Debug, Default)]
struct Batch {
    start_ns: i64,
    step_end_ns: Option<i64>,
    batch_size: Option<i64>,
    prefill: Vec<usize>,
    decode: Vec<usize>,
    /// The prompt tokens its prefill members computed, when each computed its whole prompt in it.
    prefill_tokens: Option<i64>,
}

/// The spans of one request (one trace): its root, its scheduler's thread span (the lowest rank's when several) and
/// the slices under it, and the tokenizer's slices.
fn gather<'a>(root: &'a Slim, trace: &'a [Slim]) -> RequestSpans<'a> {
    let children_of = |id: u64| -> Vec<&'a Slim> { trace.iter().filter(|s| s.parent == id && id != 0).collect() };
    let threads = children_of(root.id);
    let scheduler = threads
        .iter()
        .copied()
        .filter(|s| s.role == Role::Scheduler)
        .min_by_key(|s| s.scheduler.as_ref().map(|s| s.1));
    let descendants = |top: &'a Slim| {
        let mut out = Vec::new();
        // Each span once: a corrupt file's parent ids can form a cycle (found by the `import` fuzz target, which
        // made this walk grow without end).
        let mut seen = std::collections::HashSet::from([top.id]);
        let mut stack = vec![top.id];
        while let Some(id) = stack.pop() {
            for c in children_of(id) {
                if seen.insert(c.id) {
                    stack.push(c.id);
                    out.push(c);
                }
            }
        }
        out
    };
    let slices = scheduler.map(descendants).unwrap_or_default();
    let tokenize = threads
        .iter()
        .filter(|s| s.role != Role::Scheduler)
        .flat_map(|s| descendants(s))
        .filter(|s| s.role == Role::Tokenize)
        .collect();
    RequestSpans {
        root,
        scheduler,
        slices,
        tokenize,
    }
}

/// The `schedule` events of a request, on its scheduler's slices and thread span, in time order.
fn scheduled_of(r: &RequestSpans<'_>) -> Vec<Scheduled> {
    let mut out = Vec::new();
    for span in r.slices.iter().copied().chain(r.scheduler) {
        for e in span.events.iter().filter(|e| e.bid != RETRACT) {
            let Some(time_ns) = e.time_ns else {
                continue;
            };
            out.push(Scheduled {
                bid: e.bid,
                time_ns,
                batch_size: e.batch_size,
                prebuilt: e.prebuilt,
                extend: e.extend,
                step_end_ns: if span.role.is_step() { span.end_ns } else { None },
            });
        }
    }
    out.sort_by_key(|e| (e.time_ns, e.bid));
    out.dedup_by_key(|e| e.bid);
    out
}

/// The prompt tokens a request computed in its one prefill batch (prompt minus cached), when its prefill was not
/// chunked: then the whole count belongs to that batch. Chunks carry no counts, so a chunked prefill's are unknown.
fn whole_prefill_tokens(r: &RequestSpans<'_>) -> Option<i64> {
    let forwards = r.slices.iter().filter(|s| s.role == Role::PrefillForward).count();
    let chunked = r.slices.iter().any(|s| s.role == Role::ChunkedPrefill);
    if forwards != 1 || chunked {
        return None;
    }
    let info = r.root.root.as_ref()?;
    Some(info.prompt? - info.cached.unwrap_or(0)).filter(|&n| n >= 0)
}

/// When the request's prefill ended: the end of its last `prefill_forward`.
fn prefill_end_of(r: &RequestSpans<'_>) -> Option<i64> {
    r.slices
        .iter()
        .filter(|s| s.role == Role::PrefillForward)
        .filter_map(|s| s.end_ns)
        .max()
}

/// What a request's mapping needs of the whole trace.
struct Mapping<'a> {
    events: &'a [Scheduled],
    prefill_end: Option<i64>,
    source: &'a str,
    iteration_of: &'a HashMap<(&'a str, u32), (i64, i64)>,
    trace_id: &'a str,
}

fn map_request(r: &RequestSpans<'_>, m: &Mapping<'_>, sink: &mut Sink<'_>) {
    let root = r.root;
    let info = root.root.as_deref().cloned().unwrap_or_default();
    let id = info.rid.clone().unwrap_or_else(|| format!("span-{:016x}", root.id));
    let Some(arrival) = root.start_ns else {
        reject(
            sink,
            root.line,
            Problem::MissingField,
            Some("startTimeUnixNano"),
            format!(
                "SGLang request span {:016x} ({id}) has no start time, which is the request's arrival",
                root.id
            ),
        );
        return;
    };
    let finished = info.e2e_ns.map(|d| arrival + d).or(root.end_ns);
    // The batches that gave the request its tokens; the first token at the end of the first of them, on the
    // scheduler's clock as every later token (SGLang's own time to first token is the tokenizer's, which receives it
    // later: kept as the server's TTFT).
    let batches = token_batches(r, m.events, info.completion);
    let times = token_times(r, &batches, m);
    let scheduler_first = times.first().copied();
    let ttft_first = info.ttft_ns.map(|d| arrival + d);
    // A non-streaming request: the tokenizer sees only the final output, so SGLang's time to first token is the
    // end-to-end time (within a ms), not a first token's.
    let non_streaming =
        matches!((ttft_first, finished), (Some(f), Some(end)) if (end - f).abs() < 1_000_000) && batches.len() > 1;
    let first_token = scheduler_first
        .or(if non_streaming { m.prefill_end } else { ttft_first })
        .or(m.prefill_end);
    let scheduled = r
        .slices
        .iter()
        .filter(|s| s.role == Role::PrefillWaiting)
        .filter_map(|s| s.end_ns)
        .min();

    let mut req = record("request");
    req.request_id = text(id.clone());
    req.source = text(m.source.to_owned());
    req.trace_id = (!m.trace_id.is_empty()).then(|| text(m.trace_id.to_owned())).flatten();
    req.arrival_ns = ok(arrival);
    req.scheduled_ns = scheduled.and_then(ok);
    req.first_token_ns = first_token.and_then(ok);
    if !non_streaming {
        req.server_ttft_ns = info.ttft_ns.and_then(ok);
    }
    req.finished_ns = finished.and_then(ok);
    req.input_tokens = info.prompt.and_then(ok);
    req.cached_tokens = info.cached.and_then(ok);
    req.output_tokens = info.completion.and_then(ok);
    req.max_tokens = info.max_tokens.and_then(ok);
    req.top_k = info.top_k.and_then(ok);
    req.temperature = info.temperature.and_then(ok);
    req.top_p = info.top_p.and_then(ok);
    req.model = info.model.map(text).unwrap_or(None);
    req.finish_reason = info.finish_reason.map(text).unwrap_or(None);
    let retracts = r
        .slices
        .iter()
        .chain(std::iter::once(&root))
        .flat_map(|s| &s.events)
        .filter(|e| e.bid == RETRACT)
        .count();
    if retracts > 0 {
        req.num_preemptions = ok(i64::try_from(retracts).unwrap_or(i64::MAX));
    }
    if root.error || r.scheduler.is_some_and(|s| s.error) {
        req.status = text("error");
    }
    add(sink, &req, root.line);

    // Stages: the queue, the prefill (chunks when chunked), the tokenizer's work.
    let iteration_at = |bid: u32| m.iteration_of.get(&(m.source, bid)).map(|&(i, _)| i);
    let bid_on = |s: &Slim| {
        s.events
            .iter()
            .find(|e| e.bid != RETRACT)
            .and_then(|e| iteration_at(e.bid))
    };
    let has_chunks = r.slices.iter().any(|s| s.role == Role::ChunkedPrefill);
    for s in r.slices.iter().chain(&r.tokenize) {
        let stage = match s.role {
            Role::PrefillWaiting => "queue",
            Role::ChunkedPrefill => "prefill",
            Role::PrefillForward if !has_chunks => "prefill",
            Role::Tokenize => "tokenize",
            _ => continue,
        };
        let (Some(start), Some(end)) = (s.start_ns, s.end_ns) else {
            continue;
        };
        let mut st = record("stage");
        st.request_id = text(id.clone());
        st.stage = text(stage);
        st.start_ns = ok(start);
        st.end_ns = ok(end);
        st.iteration = bid_on(s).and_then(ok);
        if stage == "prefill" && !has_chunks {
            st.tokens = whole_prefill_tokens(r).and_then(ok);
        }
        add(sink, &st, s.line);
    }

    // Tokens: the first at TTFT, then one at the end of each later batch that gave the request a token.
    let Some(first) = first_token else {
        return;
    };
    let mut token = record("token");
    token.request_id = text(id);
    token.index = ok(0);
    token.emitted_ns = ok(first);
    token.iteration = batches.first().and_then(|e| iteration_at(e.bid)).and_then(ok);
    add(sink, &token, root.line);
    for (n, (e, &end)) in batches.iter().zip(&times).enumerate().skip(1) {
        token.index = ok(i64::try_from(n).unwrap_or(i64::MAX));
        token.emitted_ns = ok(end);
        token.iteration = iteration_at(e.bid).and_then(ok);
        add(sink, &token, root.line);
    }
}

/// When each of `batches` gave the request its token: its own result slices where they say it
/// ([`aligned_results`]), else the batch's end as its other members' slices say it.
fn token_times(r: &RequestSpans<'_>, batches: &[&Scheduled], m: &Mapping<'_>) -> Vec<i64> {
    batches
        .iter()
        .zip(aligned_results(r, m.events, batches))
        .filter_map(|(e, own)| own.or_else(|| m.iteration_of.get(&(m.source, e.bid)).map(|&(_, end)| end)))
        .collect()
}

/// One prefill of a request and what followed it until a retraction (or the end): the batches of its chunks (the
/// last gives a token), then the batches it was a member of after.
struct Episode<'e> {
    chunks: Vec<&'e Scheduled>,
    rest: Vec<&'e Scheduled>,
}

/// A request's batches split at its retractions: each part starts with as many prefill batches as its
/// `chunked_prefill` spans in that part (at least one). `None` for a request with no prefill here (a PD decode
/// node's).
fn episodes<'e>(r: &RequestSpans<'_>, events: &'e [Scheduled]) -> Option<Vec<Episode<'e>>> {
    if !r.slices.iter().any(|s| s.role == Role::PrefillForward) {
        return None;
    }
    let mut retracts: Vec<i64> = r
        .slices
        .iter()
        .copied()
        .chain(r.scheduler)
        .chain(std::iter::once(r.root))
        .flat_map(|s| &s.events)
        .filter(|e| e.bid == RETRACT)
        .filter_map(|e| e.time_ns)
        .collect();
    retracts.sort_unstable();
    let chunk_starts: Vec<i64> = r
        .slices
        .iter()
        .filter(|s| s.role == Role::ChunkedPrefill)
        .filter_map(|s| s.start_ns)
        .collect();
    let bounds: Vec<i64> = std::iter::once(i64::MIN)
        .chain(retracts)
        .chain(std::iter::once(i64::MAX))
        .collect();
    let mut out = Vec::new();
    for window in bounds.windows(2) {
        let (from, to) = (window[0], window[1]);
        let mut part: Vec<&Scheduled> = events
            .iter()
            .filter(|e| !e.prebuilt && e.time_ns >= from && e.time_ns < to)
            .collect();
        let chunks = chunk_starts.iter().filter(|&&t| t >= from && t < to).count().max(1);
        if part.len() < chunks {
            continue; // retracted before its prefill ended, or a prefill still running when the trace ends
        }
        let rest = part.split_off(chunks);
        out.push(Episode { chunks: part, rest });
    }
    Some(out)
}

/// The batches that gave a request its tokens, in order: the last chunk of its prefill (token 0), then every batch
/// it was a member of after that, decode or mixed; after a retraction, the last chunk of its new prefill gives the
/// next token.
///
/// The overlap scheduler (SGLang's default) schedules a batch before the previous one's result is processed, so
/// membership runs ahead of tokens: a request that stops on EOS rides one more batch with no token, and the batch in
/// flight when a request is retracted gives it none. When the batches outnumber `completion_tokens` (the root's
/// count), those are taken out: first the batches in flight at a retraction, then the last ones. Without overlap
/// the counts agree and nothing is taken out.
fn token_batches<'e>(r: &RequestSpans<'_>, events: &'e [Scheduled], completion: Option<i64>) -> Vec<&'e Scheduled> {
    let Some(episodes) = episodes(r, events) else {
        // No prefill here: every batch gives a token.
        return events.iter().filter(|e| !e.prebuilt).collect();
    };
    let mut tokens: Vec<&Scheduled> = Vec::new();
    let mut in_flight: Vec<usize> = Vec::new();
    let last = episodes.len().saturating_sub(1);
    for (k, episode) in episodes.iter().enumerate() {
        tokens.extend(episode.chunks.last());
        tokens.extend(&episode.rest);
        if k < last && !tokens.is_empty() {
            in_flight.push(tokens.len() - 1);
        }
    }
    if let Some(n) = completion.and_then(|n| usize::try_from(n).ok()) {
        while tokens.len() > n.max(1) {
            match in_flight.pop() {
                Some(i) => {
                    tokens.remove(i);
                }
                None => {
                    tokens.pop();
                }
            }
        }
    }
    tokens
}

/// When each of a request's token batches was processed, as its own slices say, where they say it. SGLang closes a
/// prefill (its last chunk, else its `prefill_forward`) and each `decode_loop` when it processes a batch's result:
/// the prefills' ends are the times of the tokens their last chunks gave, in order, and the `decode_loop`s' those of
/// the tokens of pure decode batches, in order. A decode in a mixed batch has no slice of its own: `None` there.
/// Under the overlap scheduler a batch's `schedule` event sits on the slice of the batch before, so these are used
/// rather than the slice that carries the event.
fn aligned_results(r: &RequestSpans<'_>, events: &[Scheduled], tokens: &[&Scheduled]) -> Vec<Option<i64>> {
    let mut out = vec![None; tokens.len()];
    let Some(episodes) = episodes(r, events) else {
        return out;
    };
    let prefill_token_bids: Vec<u32> = episodes.iter().filter_map(|e| e.chunks.last()).map(|e| e.bid).collect();
    let mut forwards: Vec<&Slim> = r
        .slices
        .iter()
        .copied()
        .filter(|s| s.role == Role::PrefillForward)
        .collect();
    forwards.sort_by_key(|f| f.start_ns);
    let prefill_ends: Vec<i64> = forwards
        .iter()
        .filter_map(|f| {
            r.slices
                .iter()
                .filter(|s| s.role == Role::ChunkedPrefill && s.parent == f.id)
                .filter_map(|s| s.end_ns)
                .max()
                .or(f.end_ns)
        })
        .collect();
    let mut decode_ends: Vec<i64> = r
        .slices
        .iter()
        .filter(|s| s.role == Role::DecodeLoop)
        .filter_map(|s| s.end_ns)
        .collect();
    decode_ends.sort_unstable();
    // Each token batch takes the first result slice of its kind not taken yet that ends after it was scheduled:
    // a slice left over (the batch in flight at a retraction, the one more batch an EOS rode under overlap, a
    // writer that gives mixed batches a `decode_loop`) is passed by.
    let (mut p, mut d) = (0, 0);
    for (k, e) in tokens.iter().enumerate() {
        let (ends, next) = if prefill_token_bids.contains(&e.bid) {
            (&prefill_ends, &mut p)
        } else if e.extend {
            continue; // a decode in a mixed batch: no slice of its own
        } else {
            (&decode_ends, &mut d)
        };
        while ends.get(*next).is_some_and(|&end| end <= e.time_ns) {
            *next += 1;
        }
        if let Some(&end) = ends.get(*next) {
            out[k] = Some(end);
            *next += 1;
        }
    }
    out
}

/// When the batches of a request were processed, as its own slices say: `(bid, result time)` for its token batches
/// ([`aligned_results`]) and for each chunk of its prefills, from its `chunked_prefill` spans.
fn results_of(r: &RequestSpans<'_>, events: &[Scheduled], completion: Option<i64>) -> Vec<(u32, i64)> {
    let tokens = token_batches(r, events, completion);
    let aligned = aligned_results(r, events, &tokens);
    let mut out: Vec<(u32, i64)> = tokens
        .iter()
        .zip(&aligned)
        .filter_map(|(e, end)| Some((e.bid, (*end)?)))
        .collect();
    // A batch after the last token (under overlap, the one more a finished request rode): its `decode_loop` is the
    // one left after the tokens'.
    if let (Some(last), Some(Some(last_end))) = (tokens.last(), aligned.last()) {
        let after = events.iter().find(|e| !e.prebuilt && e.time_ns > last.time_ns);
        let left = r
            .slices
            .iter()
            .filter(|s| s.role == Role::DecodeLoop)
            .filter_map(|s| s.end_ns)
            .filter(|end| end > last_end)
            .min();
        if let (Some(e), Some(end)) = (after, left) {
            out.push((e.bid, end));
        }
    }
    if let Some(episodes) = episodes(r, events) {
        let chunk_batches: Vec<&Scheduled> = episodes.iter().flat_map(|e| e.chunks.iter().copied()).collect();
        let mut chunks: Vec<(i64, i64)> = r
            .slices
            .iter()
            .filter(|s| s.role == Role::ChunkedPrefill)
            .filter_map(|s| Some((s.start_ns?, s.end_ns?)))
            .collect();
        chunks.sort_unstable();
        if chunks.len() == chunk_batches.len() {
            out.extend(chunk_batches.iter().map(|e| e.bid).zip(chunks.iter().map(|c| c.1)));
        }
    }
    out
}

/// The first finish reason of SGLang's `gen_ai.response.finish_reasons`, a string holding a JSON array
/// (`"[\"length\"]"`), or a plain string.
fn finish_reason(s: &str) -> Option<String> {
    let first = match serde_json::from_str::<serde_json::Value>(s) {
        Ok(serde_json::Value::Array(items)) => items.first().and_then(|v| match v {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Object(o) => o.get("type").and_then(|t| t.as_str()).map(str::to_owned),
            _ => None,
        }),
        Ok(serde_json::Value::String(s)) => Some(s),
        _ => Some(s.to_owned()),
    }?;
    Some(match first.as_str() {
        "stop" | "length" | "abort" | "error" => first,
        other if other.contains("abort") => "abort".to_owned(),
        _ => first,
    })
}
