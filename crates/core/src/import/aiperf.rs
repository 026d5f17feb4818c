//! AIPerf's `profile_export.jsonl` (`--export-level records`, its default): one line per request, as AIPerf's
//! `MetricRecordInfo` writes it (`aiperf/common/models/record_models.py`): `metadata` (request id, send time),
//! `metrics` (`{tag: {value, unit}}`, times in ms) and `error`.
//!
//! A request becomes a request record; its streamed chunks become token records, chunk 0 at the first token
//! (send time + `ttft`) and each later one after its `inter_chunk_latency` gap. AIPerf measures on the client, so
//! every time is client-side, and a chunk is not always one token: the request's `output_tokens` is AIPerf's
//! `output_sequence_length` (content and reasoning tokens, from the tokenizer), and where chunks and tokens differ
//! the load report says so per request.
//!
//! `profile_export_raw.jsonl` (`--export-level raw`) has every streamed message of each request with its arrival
//! (`perf_ns`, a `perf_counter_ns` value: wall = `request_start_ns + perf_ns - start_perf_ns`), the server's chunks
//! whole: its tokens are read by the OpenAI stream reader, with their logprobs and candidates when the benchmark
//! asked for them.

use std::io::Read;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::{Sink, float_of, int_of, ns_from_ms, ok, record, text};
use crate::format::jsonl::for_each_line;
use crate::ingest::{LoadError, Progress};
use crate::trace::report::Problem;

/// One line of `profile_export.jsonl`.
#[derive(Debug, Deserialize)]
struct Line {
    #[serde(default)]
    metadata: Option<serde_json::Map<String, Value>>,
    #[serde(default)]
    metrics: Option<serde_json::Map<String, Value>>,
    #[serde(default)]
    error: Option<Value>,
}

/// A metric's `value`, when the metric is present: `{"value": 12.5, "unit": "ms"}`.
fn metric<'a>(metrics: &'a serde_json::Map<String, Value>, tag: &str) -> Option<&'a Value> {
    metrics.get(tag).and_then(|m| m.get("value"))
}

/// Reads `profile_export.jsonl`.
pub fn read(input: impl Read, path: &Path, sink: &mut Sink<'_>, progress: &Progress) -> Result<(), LoadError> {
    let file = sink.file;
    // Requests that streamed fewer chunks than their tokens, and more.
    let (mut fewer, mut more) = (0u64, 0u64);
    let mut requests = 0u64;
    for_each_line(input, path, file, sink.b, progress, |line, place, b| {
        let mut sink = Sink::new(b, file, super::Kind::Aiperf);
        match serde_json::from_slice::<Line>(line) {
            Ok(l) => {
                requests += 1;
                match map_line(&l, place.at, &mut sink) {
                    Some(std::cmp::Ordering::Less) => fewer += 1,
                    Some(std::cmp::Ordering::Greater) => more += 1,
                    _ => {}
                }
            }
            Err(e) => sink.reject(
                place.at,
                Problem::Malformed,
                None,
                format!(
                    "not an AIPerf record ({e}); each line must be one {{\"metadata\", \"metrics\", \"error\"}} object"
                ),
            ),
        }
    })?;
    sink.note(
        "AIPerf measures on the client: arrival is the send time, token times are chunk arrival times".to_owned(),
    );
    sink.note("no iterations, stages or candidates in an AIPerf export (its raw export carries logprobs)".to_owned());
    if fewer + more > 0 {
        let mut how = Vec::new();
        if fewer > 0 {
            how.push(format!("{fewer} fewer (a chunk carried several tokens)"));
        }
        if more > 0 {
            how.push(format!(
                "{more} more (a chunk whose text AIPerf counted as no token of its own)"
            ));
        }
        sink.note(format!(
            "{} of {requests} AIPerf requests streamed a number of chunks that is not their token count, {}: their \
             token records are chunks, their output_tokens AIPerf's token count",
            fewer + more,
            how.join(", ")
        ));
    }
    Ok(())
}

/// Maps one record; how its chunks compare with its token count, when it streamed and has one.
fn map_line(l: &Line, at: u64, sink: &mut Sink<'_>) -> Option<std::cmp::Ordering> {
    let Some(meta) = &l.metadata else {
        sink.reject(
            at,
            Problem::MissingField,
            Some("metadata"),
            "an AIPerf record needs its metadata".to_owned(),
        );
        return None;
    };
    let empty = serde_json::Map::new();
    let metrics = l.metrics.as_ref().unwrap_or(&empty);
    let id = meta
        .get("x_request_id")
        .and_then(Value::as_str)
        .map_or_else(|| format!("line-{at}"), str::to_owned);
    // AIPerf 0.2+ writes `timestamp_ns` (send time, epoch ns); older exports wrote `request_start_ns`.
    let Some(arrival) = meta
        .get("timestamp_ns")
        .or_else(|| meta.get("request_start_ns"))
        .and_then(int_of)
    else {
        sink.reject(
            at,
            Problem::MissingField,
            Some("metadata.timestamp_ns"),
            format!("request {id}: no send time (metadata.timestamp_ns or request_start_ns, epoch ns)"),
        );
        return None;
    };
    let ms = |tag: &str| metric(metrics, tag).and_then(float_of).and_then(ns_from_ms);
    let first_token = ms("ttft").or_else(|| ms("time_to_first_token")).map(|d| arrival + d);
    let finished = meta
        .get("request_end_ns")
        .and_then(int_of)
        .or_else(|| ms("request_latency").map(|d| arrival + d));
    let output_tokens = metric(metrics, "output_sequence_length")
        .or_else(|| metric(metrics, "output_token_count"))
        .and_then(int_of);
    let mut r = record("request");
    r.request_id = text(id.clone());
    r.arrival_ns = ok(arrival);
    r.first_token_ns = first_token.map(super::Val::Ok);
    r.finished_ns = finished.map(super::Val::Ok);
    r.input_tokens = metric(metrics, "input_sequence_length")
        .and_then(int_of)
        .map(super::Val::Ok);
    r.output_tokens = output_tokens.map(super::Val::Ok);
    let cancelled = meta.get("was_cancelled").and_then(Value::as_bool) == Some(true);
    if let Some(error) = l.error.as_ref().filter(|e| !e.is_null()) {
        let code = error.get("code").map(|c| c.to_string().trim_matches('"').to_owned());
        let kind = error.get("type").and_then(Value::as_str).unwrap_or("");
        let cancel = cancelled || kind.contains("Cancel") || code.as_deref() == Some("499");
        r.status = text(if cancel { "cancelled" } else { "error" });
        r.finish_reason = text(if cancel { "abort" } else { "error" });
        r.error_code = code.and_then(text);
    } else {
        r.status = text(if cancelled { "cancelled" } else { "ok" });
        if cancelled {
            r.finish_reason = text("abort");
        }
    }
    sink.add(&r, at);
    let first = first_token?;
    let gaps: Vec<f64> = metric(metrics, "inter_chunk_latency")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(float_of).collect())
        .unwrap_or_default();
    let mut emitted = first;
    let mut token = record("token");
    token.request_id = text(id);
    for (index, gap) in std::iter::once(0.0).chain(gaps.iter().copied()).enumerate() {
        emitted += ns_from_ms(gap).unwrap_or(0);
        token.index = ok(i64::try_from(index).unwrap_or(i64::MAX));
        token.emitted_ns = ok(emitted);
        sink.add(&token, at);
    }
    output_tokens.map(|n| i64::try_from(gaps.len() + 1).unwrap_or(i64::MAX).cmp(&n))
}

/// Reads `profile_export_aiperf.json`, the run's aggregate, for the model it names; the figures in it are
/// AIPerf's, recomputed by tokenscope from the records instead.
pub fn read_aggregate(mut input: impl Read, path: &Path, sink: &mut Sink<'_>) -> Result<(), LoadError> {
    let mut bytes = Vec::new();
    input.read_to_end(&mut bytes).map_err(|source| LoadError::Io {
        path: path.display().to_string(),
        source,
    })?;
    let doc: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => {
            sink.reject(
                1,
                Problem::Malformed,
                None,
                format!("not an AIPerf aggregate JSON document ({e})"),
            );
            return Ok(());
        }
    };
    let model = doc
        .pointer("/input_config/endpoint/model_names/0")
        .and_then(Value::as_str);
    sink.model = model.map(str::to_owned);
    Ok(())
}

/// Reads `profile_export_raw.jsonl`.
pub fn read_raw(input: impl Read, path: &Path, sink: &mut Sink<'_>, progress: &Progress) -> Result<(), LoadError> {
    let mut model = None;
    let mut first_ns: Option<i64> = None;
    let mut with_logprobs = 0u64;
    let mut eos_added = 0u64;
    super::for_each_json_line(input, path, sink, progress, "an AIPerf raw record", |v, place, sink| {
        let meta = v.get("metadata");
        let id = meta
            .and_then(|m| m.get("x_request_id"))
            .and_then(Value::as_str)
            .map_or_else(|| format!("line-{}", place.at), str::to_owned);
        let Some(start) = meta
            .and_then(|m| m.get("request_start_ns").or_else(|| m.get("timestamp_ns")))
            .and_then(int_of)
        else {
            sink.reject(
                place.at,
                Problem::MissingField,
                Some("metadata.request_start_ns"),
                format!("request {id}: no send time (metadata.request_start_ns, epoch ns)"),
            );
            return;
        };
        first_ns = Some(first_ns.map_or(start, |f: i64| f.min(start)));
        let start_perf = v.get("start_perf_ns").and_then(int_of);
        let wall = |perf: Option<i64>| Some(start + (perf? - start_perf?));
        let mut stream = super::openai::Stream::default();
        for resp in v.get("responses").and_then(Value::as_array).into_iter().flatten() {
            let Some(at) = wall(resp.get("perf_ns").and_then(int_of)) else {
                continue;
            };
            if let Some(packets) = resp.get("packets").and_then(Value::as_array) {
                for p in packets
                    .iter()
                    .filter(|p| p.get("name").and_then(Value::as_str) == Some("data"))
                {
                    stream.push(at, p.get("value").and_then(Value::as_str).unwrap_or_default());
                }
            } else if let Some(text) = resp.get("text").and_then(Value::as_str) {
                stream.push(at, text);
            }
        }
        if model.is_none() {
            model = v
                .pointer("/payload/model")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .or(stream.model.clone());
        }
        if stream.reconcile(None) {
            eos_added += 1;
        }
        if stream.has_logprobs() {
            with_logprobs += 1;
        }
        let mut r = record("request");
        r.request_id = text(id.clone());
        r.arrival_ns = ok(start);
        r.finished_ns = meta
            .and_then(|m| m.get("request_end_ns"))
            .and_then(int_of)
            .or(stream.last_ns)
            .map(super::Val::Ok);
        r.input_tokens = stream.prompt_tokens.map(super::Val::Ok);
        r.cached_tokens = stream.cached_tokens.map(super::Val::Ok);
        r.output_tokens = stream.completion_tokens.map(super::Val::Ok);
        r.finish_reason = stream.finish_reason.clone().and_then(text);
        let http = v.get("status").and_then(int_of);
        let cancelled = meta.and_then(|m| m.get("was_cancelled")).and_then(Value::as_bool) == Some(true);
        let error = v.get("error").filter(|e| !e.is_null());
        if cancelled {
            r.status = text("cancelled");
            r.finish_reason = text("abort");
        } else if error.is_some() || http.is_some_and(|s| s >= 400) {
            r.status = text("error");
            r.error_code = error
                .and_then(|e| e.get("code"))
                .map(|c| c.to_string().trim_matches('"').to_owned())
                .or(http.map(|h| h.to_string()))
                .and_then(text);
        } else {
            r.status = text("ok");
        }
        sink.add(&r, place.at);
        for m in &stream.malformed {
            sink.reject(
                place.at,
                Problem::Malformed,
                Some("responses"),
                format!("request {id}: {m}"),
            );
        }
        super::openai::add_tokens(&stream, &id, &[], sink, place.at);
    })?;
    if let Some(first) = first_ns {
        sink.saw_time(first);
    }
    sink.model = model;
    sink.note(
        "AIPerf measures on the client: arrival is the send time, token times are chunk arrival times".to_owned(),
    );
    if with_logprobs == 0 {
        sink.note("no candidates in this AIPerf raw export (the benchmark did not ask for logprobs)".to_owned());
    }
    if eos_added > 0 {
        sink.note(format!(
            "{eos_added} streams stopped without sending their end-of-sequence token, which usage counts: it was \
             added as a special token with no probability"
        ));
    }
    Ok(())
}
