//! A trace as a sequence of format records, in the order writers should emit them: meta, requests, iterations,
//! samples, stages, then tokens grouped by request in index order. Both writers consume this, so they cannot disagree.

use std::borrow::Cow;

use super::schema::{FORMAT_NAME, FORMAT_VERSION};
use crate::ingest::raw::{Field, RawCandidate, RawRecord, Val};
use crate::trace::{Flag, NO_STR, Trace, opt_f64, opt_i64, opt_u8, opt_u32};

#[expect(
    clippy::unnecessary_wraps,
    reason = "a record's field as the readers give it: present and valid"
)]
fn s(v: &str) -> Field<Cow<'_, str>> {
    Some(Val::Ok(Cow::Borrowed(v)))
}

fn label(trace: &Trace, id: u32) -> Field<Cow<'_, str>> {
    if id == NO_STR {
        None
    } else {
        trace.labels.get(id).and_then(s)
    }
}

fn text(trace: &Trace, id: u32) -> Field<Cow<'_, str>> {
    if id == NO_STR {
        None
    } else {
        trace.texts.get(id).and_then(s)
    }
}

fn int(v: Option<i64>) -> Field<i64> {
    v.map(Val::Ok)
}

fn count(v: Option<u32>) -> Field<i64> {
    v.map(|n| Val::Ok(i64::from(n)))
}

fn bytes(v: Option<u64>) -> Field<i64> {
    v.and_then(|n| i64::try_from(n).ok()).map(Val::Ok)
}

fn float(v: Option<f64>) -> Field<f64> {
    v.map(Val::Ok)
}

fn flag(v: Flag) -> Field<bool> {
    v.get().map(Val::Ok)
}

/// The meta record: the trace's own, or a minimal one naming the format.
pub fn meta_record(trace: &Trace) -> RawRecord<'_> {
    let m = &trace.meta;
    RawRecord {
        kind: s("meta"),
        format: s(m.format.as_deref().unwrap_or(FORMAT_NAME)),
        version: Some(Val::Ok(m.version.unwrap_or(FORMAT_VERSION))),
        engine: m.engine.as_deref().and_then(s),
        engine_version: m.engine_version.as_deref().and_then(s),
        model: m.model.as_deref().and_then(s),
        eos_token_ids: m
            .eos_token_ids
            .as_ref()
            .map(|ids| Val::Ok(ids.iter().map(|&id| Val::Ok(i64::from(id))).collect())),
        created_ns: int(m.created_ns),
        clock: m.clock.as_deref().and_then(s),
        note: m.note.as_deref().and_then(s),
        ..RawRecord::default()
    }
}

/// The record of request row `r`.
pub fn request_record(trace: &Trace, r: usize) -> RawRecord<'_> {
    let q = trace.requests.row(r);
    RawRecord {
        kind: s("request"),
        request_id: label(trace, q.id),
        source: label(trace, q.source),
        trace_id: label(trace, q.trace_id),
        model: label(trace, q.model),
        app_id: label(trace, q.app_id),
        user_id: label(trace, q.user_id),
        arrival_ns: Some(Val::Ok(q.arrival_ns)),
        scheduled_ns: int(q.scheduled_ns),
        first_token_ns: int(q.first_token_ns),
        finished_ns: int(q.finished_ns),
        input_tokens: count(q.input_tokens),
        cached_tokens: count(q.cached_tokens),
        context_tokens: count(q.context_tokens),
        output_tokens: count(q.output_tokens),
        finish_reason: label(trace, q.finish_reason),
        status: label(trace, q.status),
        error_code: label(trace, q.error_code),
        temperature: float(q.temperature),
        top_p: float(q.top_p),
        top_k: int(q.top_k),
        max_tokens: int(q.max_tokens),
        seed: int(q.seed),
        num_preemptions: count(q.num_preemptions),
        prompt_hash: label(trace, q.prompt_hash),
        server_queue_ns: int(q.server_queue_ns),
        server_ttft_ns: int(q.server_ttft_ns),
        server_decode_ns: int(q.server_decode_ns),
        sent_ns: int(q.sent_ns),
        server_request_id: label(trace, q.server_request_id),
        spec_drafted_tokens: count(q.spec_drafted_tokens),
        spec_accepted_tokens: count(q.spec_accepted_tokens),
        decode_source: label(trace, q.decode_source),
        ..RawRecord::default()
    }
}

/// The record of iteration row `i`.
pub fn iteration_record(trace: &Trace, i: usize) -> RawRecord<'_> {
    let it = trace.iterations.row(i);
    RawRecord {
        kind: s("iteration"),
        source: label(trace, it.source),
        iteration: Some(Val::Ok(it.iteration)),
        start_ns: Some(Val::Ok(it.start_ns)),
        end_ns: Some(Val::Ok(it.end_ns)),
        schedule_ns: int(it.schedule_ns),
        forward_ns: int(it.forward_ns),
        sample_ns: int(it.sample_ns),
        num_reqs: count(it.num_reqs),
        num_prefill_reqs: count(it.num_prefill_reqs),
        num_decode_reqs: count(it.num_decode_reqs),
        num_prefill_tokens: count(it.num_prefill_tokens),
        num_decode_tokens: count(it.num_decode_tokens),
        num_waiting: count(it.num_waiting),
        kv_usage: float(it.kv_usage),
        num_preempted: count(it.num_preempted),
        spec_drafted_tokens: count(it.spec_drafted_tokens),
        spec_accepted_tokens: count(it.spec_accepted_tokens),
        ..RawRecord::default()
    }
}

/// The record of sample row `i`.
pub fn sample_record(trace: &Trace, i: usize) -> RawRecord<'_> {
    let sa = trace.samples.row(i);
    RawRecord {
        kind: s("sample"),
        source: label(trace, sa.source),
        time_ns: Some(Val::Ok(sa.time_ns)),
        interval_ns: int(sa.interval_ns),
        num_running: count(sa.num_running),
        num_waiting: count(sa.num_waiting),
        num_swapped: count(sa.num_swapped),
        kv_usage: float(sa.kv_usage),
        kv_tokens: count(sa.kv_tokens),
        prompt_throughput: float(sa.prompt_throughput),
        generation_throughput: float(sa.generation_throughput),
        prefix_hit_rate: float(sa.prefix_hit_rate),
        spec_accept_length: float(sa.spec_accept_length),
        spec_accept_rate: float(sa.spec_accept_rate),
        num_prefill_reqs: count(sa.num_prefill_reqs),
        num_prefill_tokens: count(sa.num_prefill_tokens),
        cached_tokens: count(sa.cached_tokens),
        spec_drafted_tokens: count(sa.spec_drafted_tokens),
        spec_accepted_tokens: count(sa.spec_accepted_tokens),
        kv_transfers: count(sa.kv_transfers),
        kv_transfers_failed: count(sa.kv_transfers_failed),
        kv_transfer_ms: float(sa.kv_transfer_ms),
        kv_transfer_p90_ms: float(sa.kv_transfer_p90_ms),
        kv_transfer_bytes: bytes(sa.kv_transfer_bytes),
        num_bootstrapping: count(sa.num_bootstrapping),
        num_prealloc: count(sa.num_prealloc),
        num_transferring: count(sa.num_transferring),
        num_inflight: count(sa.num_inflight),
        num_retracted: count(sa.num_retracted),
        ..RawRecord::default()
    }
}

/// The record of explicit stage row `i`.
pub fn stage_record(trace: &Trace, i: usize) -> RawRecord<'_> {
    let st = trace.stages.row(i);
    RawRecord {
        kind: s("stage"),
        request_id: s(trace.request_id(st.request)),
        stage: s(st.kind.name()),
        start_ns: Some(Val::Ok(st.start_ns)),
        end_ns: Some(Val::Ok(st.end_ns)),
        iteration: int(st.iteration),
        tokens: count(st.tokens),
        bytes: bytes(st.bytes),
        retries: count(st.retries),
        ..RawRecord::default()
    }
}

/// The record of token row `t`, with its candidates.
pub fn token_record(trace: &Trace, t: usize) -> RawRecord<'_> {
    let tok = trace.tokens.row(t);
    let cands = trace.candidates_of(t);
    let candidates = (!cands.is_empty()).then(|| {
        Val::Ok(
            cands
                .map(|c| {
                    let c = trace.candidates.row(c);
                    RawCandidate {
                        token_id: count(opt_u32(c.token_id)),
                        text: text(trace, c.text),
                        logprob: Some(Val::Ok(c.logprob)),
                        special: flag(c.special),
                    }
                })
                .collect(),
        )
    });
    RawRecord {
        kind: s("token"),
        request_id: s(trace.request_id(tok.request)),
        index: Some(Val::Ok(i64::from(tok.index))),
        emitted_ns: Some(Val::Ok(tok.emitted_ns)),
        iteration: int(opt_i64(tok.iteration)),
        token_id: count(opt_u32(tok.token_id)),
        text: text(trace, tok.text),
        special: flag(tok.special),
        logprob: float(opt_f64(tok.logprob)),
        rank: count(opt_u32(tok.rank)),
        received_ns: int(opt_i64(tok.received_ns)),
        spec: tok.spec.name().and_then(s),
        spec_drafted_tokens: opt_u8(tok.spec_drafted).map(|n| Val::Ok(i64::from(n))),
        candidates,
        ..RawRecord::default()
    }
}

/// The record of reference row `i`.
pub fn reference_record(trace: &Trace, i: usize) -> RawRecord<'_> {
    let r = trace.references.row(i);
    RawRecord {
        kind: s("reference"),
        request_id: s(trace.request_id(r.request)),
        index: Some(Val::Ok(i64::from(r.index))),
        logprob: float(r.logprob),
        rank: count(r.rank),
        top_k: count(r.listed),
        token_id: count(r.top_token_id),
        text: text(trace, r.top_text),
        special: r.top_special.map(Val::Ok),
        top_logprob: float(r.top_logprob),
        ..RawRecord::default()
    }
}

/// Calls `f` with every record of the trace in writing order; stops at the first error.
pub fn for_each_record<E>(trace: &Trace, mut f: impl FnMut(&RawRecord<'_>) -> Result<(), E>) -> Result<(), E> {
    f(&meta_record(trace))?;
    for r in 0..trace.requests.len() {
        f(&request_record(trace, r))?;
    }
    for i in 0..trace.iterations.len() {
        f(&iteration_record(trace, i))?;
    }
    for i in 0..trace.samples.len() {
        f(&sample_record(trace, i))?;
    }
    for i in 0..trace.stages.len() {
        f(&stage_record(trace, i))?;
    }
    for t in 0..trace.tokens.len() {
        f(&token_record(trace, t))?;
    }
    for i in 0..trace.references.len() {
        f(&reference_record(trace, i))?;
    }
    Ok(())
}
