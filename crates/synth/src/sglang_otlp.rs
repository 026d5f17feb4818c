//! Writes a trace the way SGLang 0.5.23 traces a run (`--enable-trace`, an OpenTelemetry Collector's file exporter in
//! front): per request an OTLP trace with its root span, its scheduler's thread span, and the slices
//! `prefill_waiting`, `prefill_forward` (with `chunked_prefill` children when the prefill took several steps),
//! `decode_waiting`, `decode_forward` and one `decode_loop` per decode step, each step's `schedule` event
//! `{bid, batch_size, forward_mode}` on the slice it ran in. See `tests/data/import/sglang/README.md` for the
//! layout this follows.
//!
//! The simulator's traces become SGLang-shaped files to test the importer against (a round trip must give the same
//! requests, steps and times), to measure it on a million spans, and to show the app on an SGLang trace.

use std::io::{self, Write};

use serde_json::{Value, json};

use tokenscope_core::trace::{StageKind, Trace};

/// Requests per line: the Collector batches spans into one export per flush.
pub const REQUESTS_PER_LINE: usize = 64;

fn s(v: impl Into<String>) -> Value {
    json!({ "stringValue": v.into() })
}

fn i(v: i64) -> Value {
    json!({ "intValue": v.to_string() })
}

#[expect(clippy::cast_precision_loss, reason = "latencies in seconds, as SGLang writes them")]
fn secs(ns: i64) -> Value {
    json!({ "doubleValue": ns as f64 / 1e9 })
}

fn kv(key: &str, value: Value) -> Value {
    json!({ "key": key, "value": value })
}

/// Span ids of one request's trace, numbered from 1.
struct Ids {
    trace_id: String,
    next: u64,
}

impl Ids {
    fn next(&mut self) -> String {
        self.next += 1;
        format!("{:016x}", self.next)
    }
}

fn span(ids: &Ids, span_id: &str, parent: &str, name: &str, start: i64, end: i64) -> serde_json::Map<String, Value> {
    let mut m = serde_json::Map::new();
    m.insert("traceId".into(), json!(ids.trace_id));
    m.insert("spanId".into(), json!(span_id));
    if !parent.is_empty() {
        m.insert("parentSpanId".into(), json!(parent));
    }
    m.insert("name".into(), json!(name));
    m.insert("kind".into(), json!(1));
    m.insert("startTimeUnixNano".into(), json!(start.to_string()));
    m.insert("endTimeUnixNano".into(), json!(end.max(start).to_string()));
    m
}

/// Writes `trace` as SGLang's OTLP JSON lines.
pub fn write(trace: &Trace, out: &mut impl Write) -> io::Result<()> {
    // One 8-hex batch id per (source, iteration), as SGLang's uuid4().hex[:8] would give each batch.
    let bid = |row: usize| format!("{:08x}", (row as u64).wrapping_mul(0x9e37_79b9) as u32 ^ 0x5eed_0000);
    let mut spans: Vec<Value> = Vec::new();
    let model = trace.meta.model.clone().unwrap_or_default();
    for r in 0..trace.request_count() {
        let row = r as u32;
        let req = trace.requests.row(r);
        let rid = trace.request_id(row).to_owned();
        let Some(finished) = trace.finish_ns(row) else { continue };
        let arrival = req.arrival_ns;
        let mut ids = Ids {
            trace_id: format!("{:016x}{:016x}", 0, r + 1),
            next: 0,
        };
        let root_id = ids.next();
        let sched_id = ids.next();
        let source = trace.label(req.source).unwrap_or("engine");
        let host = format!("{:08x}", req.source);
        // The step rows of this request: its prefill chunks, then the steps of its tokens.
        let prefills: Vec<(i64, i64, Option<u32>)> = trace
            .explicit_stages_of(row)
            .filter(|&st| trace.stages.kind[st] == StageKind::Prefill)
            .map(|st| {
                (
                    trace.stages.start_ns[st],
                    trace.stages.end_ns[st],
                    trace.stages.iter_row[st],
                )
            })
            .collect();
        let tokens: Vec<usize> = trace.tokens_of(row).collect();
        let event = |iter_row: u32, at: i64| -> Value {
            let it = trace.iterations.row(iter_row as usize);
            let mode = if it.num_prefill_tokens.unwrap_or(0) > 0 {
                "prefill"
            } else {
                "decode"
            };
            json!({
                "timeUnixNano": at.to_string(),
                "name": "schedule",
                "attributes": [
                    kv("bid", s(bid(iter_row as usize))),
                    kv("batch_size", i(i64::from(it.num_reqs.unwrap_or(1)))),
                    kv("forward_mode", s(mode)),
                ],
            })
        };

        let mut root = span(
            &ids,
            &root_id,
            "",
            &format!(" Req {}", rid.chars().take(8).collect::<String>()),
            arrival,
            finished,
        );
        let first_token = trace.first_token_ns(row);
        let mut attrs = vec![kv("rid", s(rid.clone())), kv("module", s("sglang::request"))];
        if let Some(ft) = first_token {
            attrs.push(kv("gen_ai.latency.time_to_first_token", secs(ft - arrival)));
        }
        attrs.push(kv("gen_ai.latency.e2e", secs(finished - arrival)));
        if let Some(n) = req.input_tokens {
            attrs.push(kv("gen_ai.usage.prompt_tokens", i(i64::from(n))));
        }
        attrs.push(kv(
            "gen_ai.usage.cached_tokens",
            i(i64::from(req.cached_tokens.unwrap_or(0))),
        ));
        attrs.push(kv(
            "gen_ai.usage.completion_tokens",
            i(i64::from(trace.output_tokens(row))),
        ));
        if !model.is_empty() {
            attrs.push(kv("gen_ai.response.model", s(model.clone())));
        }
        if let Some(reason) = trace.label(req.finish_reason) {
            attrs.push(kv("gen_ai.response.finish_reasons", s(format!("[\"{reason}\"]"))));
        }
        root.insert("attributes".into(), Value::Array(attrs));

        let mut sched = span(
            &ids,
            &sched_id,
            &root_id,
            &format!("Scheduler [TP 0]  [PP 0] (host:{host} | pid:{})", 4200 + req.source),
            arrival,
            finished,
        );
        sched.insert(
            "attributes".into(),
            json!([
                kv("tp_rank", i(0)),
                kv("pp_rank", i(0)),
                kv("host_id", s(format!("{host}{source:>24}"))),
                kv("pid", i(4200 + i64::from(req.source))),
                kv("thread_label", s("Scheduler")),
            ]),
        );
        let mut out_spans = vec![Value::Object(root), Value::Object(sched)];
        let scheduled = prefills.first().map_or(req.scheduled_ns.unwrap_or(arrival), |p| p.0);
        let waiting_id = ids.next();
        out_spans.push(Value::Object(span(
            &ids,
            &waiting_id,
            &sched_id,
            "prefill_waiting",
            arrival,
            scheduled,
        )));
        let prefill_end = prefills.last().map_or(scheduled, |p| p.1);
        if !prefills.is_empty() {
            let forward_id = ids.next();
            let mut forward = span(&ids, &forward_id, &sched_id, "prefill_forward", scheduled, prefill_end);
            if let [(start, _, Some(it))] = prefills[..] {
                forward.insert("events".into(), json!([event(it, start)]));
            } else {
                for &(start, end, it) in &prefills {
                    let chunk_id = ids.next();
                    let mut chunk = span(&ids, &chunk_id, &forward_id, "chunked_prefill", start, end);
                    if let Some(it) = it {
                        chunk.insert("events".into(), json!([event(it, start)]));
                    }
                    out_spans.push(Value::Object(chunk));
                }
            }
            out_spans.push(Value::Object(forward));
        }
        // Decode steps: the steps of tokens 1.. (token 0 came out of the last prefill step).
        let decode_steps: Vec<u32> = tokens
            .iter()
            .skip(1)
            .filter_map(|&t| tokenscope_core::trace::opt_u32(trace.tokens.iter_row[t]))
            .collect();
        if let Some(&first_step) = decode_steps.first() {
            let first_start = trace.iterations.start_ns[first_step as usize];
            let waiting_id = ids.next();
            out_spans.push(Value::Object(span(
                &ids,
                &waiting_id,
                &sched_id,
                "decode_waiting",
                prefill_end,
                first_start,
            )));
            let forward_id = ids.next();
            for (ct, &step) in decode_steps.iter().enumerate() {
                let it = trace.iterations.row(step as usize);
                let loop_id = ids.next();
                let mut l = span(&ids, &loop_id, &forward_id, "decode_loop", it.start_ns, it.end_ns);
                l.insert("attributes".into(), json!([kv("decode_ct", i(ct as i64))]));
                l.insert("events".into(), json!([event(step, it.start_ns)]));
                out_spans.push(Value::Object(l));
            }
            out_spans.push(Value::Object(span(
                &ids,
                &forward_id,
                &sched_id,
                "decode_forward",
                first_start,
                finished,
            )));
        }
        spans.extend(out_spans);
        if (r + 1) % REQUESTS_PER_LINE == 0 {
            write_line(out, &mut spans)?;
        }
    }
    if !spans.is_empty() {
        write_line(out, &mut spans)?;
    }
    Ok(())
}

fn write_line(out: &mut impl Write, spans: &mut Vec<Value>) -> io::Result<()> {
    let export = json!({
        "resourceSpans": [{
            "resource": { "attributes": [kv("service.name", s("sglang"))] },
            "scopeSpans": [{ "scope": { "name": "sglang server" }, "spans": std::mem::take(spans) }],
        }]
    });
    serde_json::to_writer(&mut *out, &export)?;
    out.write_all(b"\n")
}
