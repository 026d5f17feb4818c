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

/// What [`map`] did with its spans.
#[derive(Debug, Default)]
pub struct Mapped {
    /// Requests found.
    pub requests: usize,
    /// Spans that belong to no SGLang request.
    pub ignored: usize,
}

/// One `schedule` event as seen by one request.
#[derive(Debug, Clone)]
struct Scheduled {
    bid: String,
    time_ns: i64,
    batch_size: Option<i64>,
    forward_mode: Option<String>,
    /// The end of the slice that carries it, when that slice is the step's own (not a thread span flushed at the
    /// request's end).
    step_end_ns: Option<i64>,
}

/// A request's spans, gathered before mapping.
struct RequestSpans<'a> {
    root: &'a Span,
    scheduler: Option<&'a Span>,
    slices: Vec<&'a Span>,
    tokenize: Vec<&'a Span>,
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

/// Slices whose end is the end of the step that carries a `schedule` event.
fn is_step_slice(name: &str) -> bool {
    matches!(
        name,
        "decode_loop" | "chunked_prefill" | "prefill_forward" | "spec_verify"
    )
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

/// Maps every SGLang request found among `spans`; the rest are counted as ignored.
pub fn map(spans: Vec<Span>, sink: &mut Sink<'_>) -> Mapped {
    let mut by_trace: HashMap<&str, Vec<&Span>> = HashMap::new();
    for s in &spans {
        by_trace.entry(s.trace_id.as_str()).or_default().push(s);
    }
    let mut mapped = Mapped::default();
    let mut requests: Vec<RequestSpans<'_>> = Vec::new();
    for (_, trace) in by_trace {
        let roots: Vec<&Span> = trace.iter().copied().filter(|s| is_root(s)).collect();
        let [root] = roots[..] else {
            if roots.is_empty() {
                mapped.ignored += trace.len();
            } else {
                for extra in &roots[1..] {
                    sink.reject(
                        extra.line,
                        Problem::Duplicate,
                        Some("traceId"),
                        format!(
                            "span {} is a second SGLang request root in trace {}; the first was kept",
                            extra.span_id, extra.trace_id
                        ),
                    );
                }
            }
            if roots.len() > 1 {
                requests.push(gather(roots[0], &trace));
            }
            continue;
        };
        requests.push(gather(root, &trace));
    }
    // In the order of arrival, so that the records (and duplicates) come out the same whatever the file's order.
    requests.sort_by_key(|r| (r.root.start_ns, r.root.line));
    mapped.requests = requests.len();
    if requests.is_empty() {
        return mapped;
    }

    // Every request's schedule events, and the batches of each scheduler.
    let events: Vec<Vec<Scheduled>> = requests.iter().map(scheduled_of).collect();
    let prefill_end: Vec<Option<i64>> = requests.iter().map(prefill_end_of).collect();
    let whole_prefill: Vec<Option<i64>> = requests.iter().map(whole_prefill_tokens).collect();
    let sources: Vec<String> = requests
        .iter()
        .map(|r| {
            r.scheduler
                .map_or_else(|| crate::trace::DEFAULT_SOURCE.to_owned(), source_name)
        })
        .collect();
    let mut batches: BTreeMap<&str, HashMap<&str, Batch>> = BTreeMap::new();
    for (i, evs) in events.iter().enumerate() {
        for e in evs {
            let batch = batches
                .entry(sources[i].as_str())
                .or_default()
                .entry(e.bid.as_str())
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
    let mut iteration_of: HashMap<(&str, &str), (i64, i64)> = HashMap::new();
    for (source, source_batches) in &batches {
        let mut order: Vec<(&str, &Batch)> = source_batches.iter().map(|(bid, b)| (*bid, b)).collect();
        order.sort_by_key(|(bid, b)| (b.start_ns, *bid));
        for (n, (bid, batch)) in order.iter().enumerate() {
            let next_start = order.get(n + 1).map(|(_, b)| b.start_ns);
            let members_end = batch
                .prefill
                .iter()
                .chain(&batch.decode)
                .filter_map(|&i| requests[i].root.end_ns)
                .min();
            let end = batch
                .step_end_ns
                .or(next_start)
                .or(members_end)
                .unwrap_or(batch.start_ns)
                .max(batch.start_ns);
            let index = i64::try_from(n).unwrap_or(i64::MAX);
            iteration_of.insert((source, bid), (index, end));
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
                .unwrap_or(0);
            sink.add(&it, line);
        }
    }

    for (i, r) in requests.iter().enumerate() {
        map_request(r, &events[i], prefill_end[i], &sources[i], &iteration_of, sink);
    }
    sink.note(
        "SGLang's trace has no token counts per batch: a batch's prefill tokens are known only when each of its \
         prefills ran whole in it (prompt minus cached tokens), not for chunked prefills; token times are the ends \
         of the batches each request decoded in"
            .to_owned(),
    );
    sink.note("no candidates in an SGLang trace (token ids, texts and logprobs are not traced)".to_owned());
    mapped
}

/// The spans of one request: its root, its scheduler's thread span (the lowest rank's when several) and the
/// slices under it, and the tokenizer's slices.
fn gather<'a>(root: &'a Span, trace: &[&'a Span]) -> RequestSpans<'a> {
    let children_of = |id: &str| -> Vec<&'a Span> {
        trace
            .iter()
            .copied()
            .filter(|s| s.parent_span_id == id && !id.is_empty())
            .collect()
    };
    let threads = children_of(&root.span_id);
    let rank = |s: &Span| {
        let r = |k: &str| s.attr(k).and_then(|a| a.as_i64()).unwrap_or(0);
        (r("dp_rank"), r("pp_rank"), r("tp_rank"))
    };
    let scheduler = threads
        .iter()
        .copied()
        .filter(|s| is_scheduler(s))
        .min_by_key(|s| rank(s));
    let descendants = |top: &'a Span| {
        let mut out = Vec::new();
        let mut stack = vec![top.span_id.as_str()];
        while let Some(id) = stack.pop() {
            for c in children_of(id) {
                stack.push(c.span_id.as_str());
                out.push(c);
            }
        }
        out
    };
    let slices = scheduler.map(descendants).unwrap_or_default();
    let tokenize = threads
        .iter()
        .filter(|s| !is_scheduler(s))
        .flat_map(|s| descendants(s))
        .filter(|s| s.name == "tokenize")
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
    let carriers = r.slices.iter().copied().chain(r.scheduler);
    for span in carriers {
        for e in span.events.iter().filter(|e| e.name == "schedule") {
            let (Some(bid), Some(time_ns)) = (attr(&e.attributes, "bid").and_then(|a| a.as_str()), e.time_ns) else {
                continue;
            };
            out.push(Scheduled {
                bid: bid.to_owned(),
                time_ns,
                batch_size: attr(&e.attributes, "batch_size").and_then(|a| a.as_i64()),
                forward_mode: attr(&e.attributes, "forward_mode")
                    .and_then(|a| a.as_str())
                    .map(str::to_owned),
                step_end_ns: if is_step_slice(&span.name) { span.end_ns } else { None },
            });
        }
    }
    out.sort_by(|a, b| (a.time_ns, &a.bid).cmp(&(b.time_ns, &b.bid)));
    out.dedup_by(|a, b| a.bid == b.bid);
    out
}

/// The prompt tokens a request computed in its one prefill batch (prompt minus cached), when its prefill was not
/// chunked: then the whole count belongs to that batch. Chunks carry no counts, so a chunked prefill's are unknown.
fn whole_prefill_tokens(r: &RequestSpans<'_>) -> Option<i64> {
    let forwards = r.slices.iter().filter(|s| s.name == "prefill_forward").count();
    let chunked = r.slices.iter().any(|s| s.name == "chunked_prefill");
    if forwards != 1 || chunked {
        return None;
    }
    let int = |key: &str| r.root.attr(key).and_then(|a| a.as_i64());
    Some(int("gen_ai.usage.prompt_tokens")? - int("gen_ai.usage.cached_tokens").unwrap_or(0)).filter(|&n| n >= 0)
}

/// When the request's prefill ended: the end of its last `prefill_forward`.
fn prefill_end_of(r: &RequestSpans<'_>) -> Option<i64> {
    r.slices
        .iter()
        .filter(|s| s.name == "prefill_forward")
        .filter_map(|s| s.end_ns)
        .max()
}

fn map_request(
    r: &RequestSpans<'_>,
    events: &[Scheduled],
    prefill_end: Option<i64>,
    source: &str,
    iteration_of: &HashMap<(&str, &str), (i64, i64)>,
    sink: &mut Sink<'_>,
) {
    let root = r.root;
    let id = root
        .attr("rid")
        .and_then(|a| a.as_str())
        .map_or_else(|| format!("span-{}", root.span_id), str::to_owned);
    let Some(arrival) = root.start_ns else {
        sink.reject(
            root.line,
            Problem::MissingField,
            Some("startTimeUnixNano"),
            format!(
                "SGLang request span {} ({id}) has no start time, which is the request's arrival",
                root.span_id
            ),
        );
        return;
    };
    let secs = |key: &str| root.attr(key).and_then(|a| a.as_f64()).and_then(ns_from_secs);
    let int = |key: &str| root.attr(key).and_then(|a| a.as_i64());
    let first_token = secs("gen_ai.latency.time_to_first_token")
        .map(|d| arrival + d)
        .or(prefill_end);
    let finished = secs("gen_ai.latency.e2e").map(|d| arrival + d).or(root.end_ns);
    let waiting: Vec<&&Span> = r.slices.iter().filter(|s| s.name == "prefill_waiting").collect();
    let scheduled = waiting.iter().filter_map(|s| s.end_ns).min();

    let mut req = record("request");
    req.request_id = text(id.clone());
    req.source = text(source.to_owned());
    req.trace_id = (!root.trace_id.is_empty())
        .then(|| text(root.trace_id.clone()))
        .flatten();
    req.arrival_ns = ok(arrival);
    req.scheduled_ns = scheduled.and_then(ok);
    req.first_token_ns = first_token.and_then(ok);
    req.finished_ns = finished.and_then(ok);
    req.input_tokens = int("gen_ai.usage.prompt_tokens").and_then(ok);
    req.cached_tokens = int("gen_ai.usage.cached_tokens").and_then(ok);
    req.output_tokens = int("gen_ai.usage.completion_tokens").and_then(ok);
    req.max_tokens = int("gen_ai.request.max_tokens").and_then(ok);
    req.top_k = int("gen_ai.request.top_k").and_then(ok);
    req.temperature = root
        .attr("gen_ai.request.temperature")
        .and_then(|a| a.as_f64())
        .and_then(ok);
    req.top_p = root.attr("gen_ai.request.top_p").and_then(|a| a.as_f64()).and_then(ok);
    req.model = root
        .attr("gen_ai.response.model")
        .and_then(|a| a.as_str())
        .map(|m| text(m.to_owned()))
        .unwrap_or(None);
    req.finish_reason = root
        .attr("gen_ai.response.finish_reasons")
        .and_then(|a| a.as_str())
        .and_then(finish_reason)
        .map(text)
        .unwrap_or(None);
    let retracts = r
        .slices
        .iter()
        .chain(std::iter::once(&root))
        .flat_map(|s| &s.events)
        .filter(|e| e.name == "retract")
        .count();
    if retracts > 0 {
        req.num_preemptions = ok(i64::try_from(retracts).unwrap_or(i64::MAX));
    }
    if root.error || r.scheduler.is_some_and(|s| s.error) {
        req.status = text("error");
    }
    sink.add(&req, root.line);

    // Stages: the queue, the prefill (chunks when chunked), the tokenizer's work.
    let iteration_at = |bid: &str| iteration_of.get(&(source, bid)).map(|&(i, _)| i);
    let bid_on = |s: &Span| {
        s.events
            .iter()
            .find(|e| e.name == "schedule")
            .and_then(|e| attr(&e.attributes, "bid"))
            .and_then(|a| a.as_str())
            .and_then(iteration_at)
    };
    let has_chunks = r.slices.iter().any(|s| s.name == "chunked_prefill");
    for s in r.slices.iter().chain(&r.tokenize) {
        let stage = match s.name.as_str() {
            "prefill_waiting" => "queue",
            "chunked_prefill" => "prefill",
            "prefill_forward" if !has_chunks => "prefill",
            "tokenize" => "tokenize",
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
        sink.add(&st, s.line);
    }

    // Tokens: the first at TTFT, one per batch the request decoded in.
    let Some(first) = first_token else {
        return;
    };
    let last_prefill = events
        .iter()
        .rfind(|e| prefill_end.is_none_or(|end| e.time_ns < end))
        .and_then(|e| iteration_at(&e.bid));
    let mut token = record("token");
    token.request_id = text(id);
    token.index = ok(0);
    token.emitted_ns = ok(first);
    token.iteration = last_prefill.and_then(ok);
    sink.add(&token, root.line);
    let decode_steps = events
        .iter()
        .filter(|e| prefill_end.is_some_and(|end| e.time_ns >= end))
        .filter(|e| e.forward_mode.as_deref() != Some("prebuilt"))
        .filter_map(|e| iteration_of.get(&(source, e.bid.as_str())));
    for (n, &(iteration, end)) in decode_steps.enumerate() {
        token.index = ok(i64::try_from(n + 1).unwrap_or(i64::MAX));
        token.emitted_ns = ok(end);
        token.iteration = ok(iteration);
        sink.add(&token, root.line);
    }
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
