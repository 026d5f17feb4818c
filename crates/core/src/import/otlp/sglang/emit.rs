//! A request's records, written from its spans: the request record, its stages, and its tokens at the times the
//! batches that produced them give (`tokens`).

use super::request::*;
use super::tokens::{prefill_chunks, token_batches, token_times};
use super::{RETRACT, Role, Slim, add, reject};
use crate::import::{Sink, ok, record, text};
use crate::trace::report::Problem;

/// Writes the records of one request.
pub(super) fn map_request(r: &RequestSpans<'_>, m: &Mapping<'_>, sink: &mut Sink<'_>) {
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
        .min()
        .or_else(|| {
            // SGLang 0.5.3: no `prefill_waiting`; the first chunk starts when the request is scheduled.
            r.slices
                .iter()
                .filter(|s| s.role == Role::LegacyPrefill)
                .filter_map(|s| s.start_ns)
                .min()
        });

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
    req.model = info.model.and_then(text);
    req.finish_reason = info.finish_reason.and_then(text);
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
    // Flat slices (0.5.3, 0.5.9): the prefill chunks are the prefill slices of each prefill, not a decode's in a
    // mixed batch.
    let flat_chunks: Option<Vec<u64>> = flat(r).then(|| prefill_chunks(r).iter().map(|s| s.id).collect());
    for s in r.slices.iter().chain(&r.tokenize) {
        #[expect(
            clippy::match_same_arms,
            reason = "one arm per role and slicing, as the mapping is documented"
        )]
        let stage = match (s.role, &flat_chunks) {
            (Role::PrefillWaiting, _) => "queue",
            (Role::Tokenize, _) => "tokenize",
            (_, Some(chunks)) if chunks.contains(&s.id) => "prefill",
            (_, Some(_)) => continue,
            (Role::ChunkedPrefill, None) => "prefill",
            (Role::PrefillForward, None) if !has_chunks => "prefill",
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
