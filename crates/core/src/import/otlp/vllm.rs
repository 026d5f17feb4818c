//! vLLM's `llm_request` span (vLLM 0.33, `vllm/v1/engine/output_processor.py`, `OutputProcessor.do_tracing`): one
//! span per finished request, started at the request's arrival (API server wall clock), with its latencies as
//! float seconds (`gen_ai.latency.*`), its usage and its id. It has no per-token times and no batch membership:
//! an L1 trace, which the iteration log of the same run completes with the engine's steps.

use super::{Span, attr};
use crate::import::{Sink, ns_from_secs, ok, record, text};
use crate::trace::report::Problem;

/// True for a span vLLM's tracer writes per request.
pub fn is_vllm(span: &Span) -> bool {
    span.name == "llm_request"
}

/// Says what vLLM's spans cannot give, once per file that had them.
pub fn note(sink: &mut Sink<'_>) {
    sink.note(
        "vLLM's llm_request spans give request timings only: no per-token times, batches or candidates \
         (open the iteration log of the same run beside them for the engine's steps)"
            .to_owned(),
    );
    sink.note(
        "vLLM's queue time is measured on the engine's monotonic clock: scheduled = arrival + time_in_queue \
         is placed on the API server's wall clock, off by the hand-over between the two processes"
            .to_owned(),
    );
}

/// The request ids of a file's `llm_request` spans, to tell a sequence of an `n > 1` request (its own span, the
/// same `gen_ai.request.id`) from the same span given twice.
#[derive(Debug, Default)]
pub struct Seen {
    spans: std::collections::HashMap<String, Vec<String>>,
    /// Spans that share their request id with another: sequences of one request sampled `n > 1` times.
    pub sequences: usize,
}

/// Maps one `llm_request` span to a request record.
pub fn map_one(span: &Span, sink: &mut Sink<'_>, seen: &mut Seen) {
    let given = span
        .attr("gen_ai.request.id")
        .and_then(|a| a.as_str())
        .map_or_else(|| format!("span-{}", span.span_id), str::to_owned);
    // vLLM gives each sequence of a request sampled n > 1 times its own span, all with the request's id (and
    // `gen_ai.request.n` 1): the second and later are named ID#2, ID#3, ... A span seen again (same span id) keeps
    // its name, and is rejected as a duplicate downstream.
    let spans = seen.spans.entry(given.clone()).or_default();
    let k = if let Some(k) = spans.iter().position(|s| *s == span.span_id) {
        k
    } else {
        spans.push(span.span_id.clone());
        spans.len() - 1
    };
    let id = if k == 0 {
        given
    } else {
        seen.sequences += 1;
        format!("{given}#{}", k + 1)
    };
    let Some(arrival) = span.start_ns else {
        sink.reject(
            span.line,
            Problem::MissingField,
            Some("startTimeUnixNano"),
            format!(
                "llm_request span {} ({id}) has no start time, which is the request's arrival",
                span.span_id
            ),
        );
        return;
    };
    let secs = |key: &str| span.attr(key).and_then(super::Attr::as_f64).and_then(ns_from_secs);
    let int = |key: &str| span.attr(key).and_then(super::Attr::as_i64);
    let mut r = record("request");
    r.request_id = text(id);
    r.trace_id = (!span.trace_id.is_empty())
        .then(|| text(span.trace_id.clone()))
        .flatten();
    r.arrival_ns = ok(arrival);
    let completion = int("gen_ai.usage.completion_tokens");
    // A request aborted before it produced a token (vLLM 0.16+ writes a span for each request it drops when paused
    // or shut down): its time to first token is its end-to-end time and its queue time 0, neither of them real.
    let produced = completion != Some(0);
    r.first_token_ns = secs("gen_ai.latency.time_to_first_token")
        .filter(|_| produced)
        .and_then(|d| ok(arrival + d));
    // The span ends after the output processor's bookkeeping; e2e is the request's own figure.
    r.finished_ns = secs("gen_ai.latency.e2e")
        .map(|d| arrival + d)
        .or(span.end_ns)
        .and_then(ok);
    r.scheduled_ns = secs("gen_ai.latency.time_in_queue")
        .filter(|_| produced)
        .and_then(|d| ok(arrival + d));
    r.input_tokens = int("gen_ai.usage.prompt_tokens").and_then(ok);
    r.output_tokens = completion.and_then(ok);
    r.max_tokens = int("gen_ai.request.max_tokens").and_then(ok);
    r.temperature = span
        .attr("gen_ai.request.temperature")
        .and_then(super::Attr::as_f64)
        .and_then(ok);
    r.top_p = span
        .attr("gen_ai.request.top_p")
        .and_then(super::Attr::as_f64)
        .and_then(ok);
    r.model = attr(&span.attributes, "gen_ai.response.model")
        .and_then(|a| a.as_str())
        .and_then(|m| text(m.to_owned()));
    if span.error {
        r.status = text("error");
    }
    sink.add(&r, span.line);
}
