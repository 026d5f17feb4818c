//! The Chrome Trace Event format (JSON), which Perfetto UI and chrome://tracing open: one process per engine
//! instance with a thread of engine steps, counters (batch size, KV use, waiting, and a server log's sampled
//! counters), and a thread per request with its stages as slices and its tokens as instant events carrying their
//! text, logprob and rank.

use std::io::{self, Write};
use std::path::Path;

use serde_json::{Value, json};

use crate::trace::{Trace, opt_f64, opt_i64, opt_u32};

/// Microseconds from the trace's origin, as the format wants them (fractions allowed).
#[expect(clippy::cast_precision_loss, reason = "offsets within a trace")]
fn us(t_ns: i64, origin_ns: i64) -> f64 {
    (t_ns - origin_ns) as f64 / 1e3
}

/// The trace's events.
pub fn events(trace: &Trace) -> Vec<Value> {
    let origin = trace
        .requests
        .arrival_ns
        .iter()
        .chain(trace.iterations.start_ns.iter())
        .chain(trace.samples.time_ns.iter())
        .copied()
        .min()
        .unwrap_or(0);
    // A process per source: requests' sources and iterations' sources, in label order.
    let mut sources: Vec<u32> = trace
        .requests
        .source
        .iter()
        .chain(trace.iterations.source.iter())
        .chain(trace.samples.source.iter())
        .copied()
        .collect();
    sources.sort_unstable();
    sources.dedup();
    let pid_of = |s: u32| sources.iter().position(|&x| x == s).map_or(1, |p| p + 1);
    let mut out = Vec::new();
    for &s in &sources {
        let pid = pid_of(s);
        out.push(json!({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
            "args": {"name": trace.label(s).unwrap_or("engine")}}));
        out.push(json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": 0, "args": {"name": "engine steps"}}));
    }
    let it = &trace.iterations;
    for i in 0..it.len() {
        let pid = pid_of(it.source[i]);
        let ts = us(it.start_ns[i], origin);
        out.push(
            json!({"ph": "X", "name": format!("step {}", it.iteration[i]), "cat": "engine", "pid": pid,
            "tid": 0, "ts": ts, "dur": us(it.end_ns[i], it.start_ns[i]),
            "args": {"prefill_tokens": it.num_prefill_tokens.at(i), "decode_tokens": it.num_decode_tokens.at(i),
                     "num_reqs": it.num_reqs.at(i), "num_waiting": it.num_waiting.at(i), "kv_usage": it.kv_usage.at(i)}}),
        );
        for (name, value) in [
            ("batch size", it.num_reqs.at(i).map(f64::from)),
            ("KV use", it.kv_usage.at(i)),
            ("waiting", it.num_waiting.at(i).map(f64::from)),
        ] {
            if let Some(v) = value {
                out.push(json!({"ph": "C", "name": name, "pid": pid, "tid": 0, "ts": ts, "args": {"value": v}}));
            }
        }
    }
    // The engine's sampled counters (a server log's stats lines), each a counter track of its instance.
    let sa = &trace.samples;
    for i in 0..sa.len() {
        let row = sa.row(i);
        let (pid, ts) = (pid_of(row.source), us(row.time_ns, origin));
        for (name, value) in [
            ("running", row.num_running.map(f64::from)),
            ("waiting", row.num_waiting.map(f64::from)),
            ("KV use", row.kv_usage),
            ("generation tok/s", row.generation_throughput),
            ("prompt tok/s", row.prompt_throughput),
            ("prefix hit rate", row.prefix_hit_rate),
            ("spec. accept length", row.spec_accept_length),
        ] {
            if let Some(v) = value {
                out.push(json!({"ph": "C", "name": name, "pid": pid, "tid": 0, "ts": ts, "args": {"value": v}}));
            }
        }
    }
    for r in 0..trace.request_count() as u32 {
        let pid = pid_of(trace.requests.source[r as usize]);
        let tid = 1 + r as usize;
        let id = trace.request_id(r);
        out.push(json!({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": id}}));
        for s in trace.stages_of(r) {
            out.push(
                json!({"ph": "X", "name": s.kind.name(), "cat": "request", "pid": pid, "tid": tid,
                "ts": us(s.start_ns, origin), "dur": us(s.end_ns, s.start_ns),
                "args": {"request_id": id, "iteration": s.iteration, "tokens": s.tokens, "derived": s.derived}}),
            );
        }
        for t in trace.tokens_of(r) {
            let tok = trace.tokens.row(t);
            out.push(
                json!({"ph": "i", "s": "t", "name": format!("token {}", tok.index), "cat": "token",
                "pid": pid, "tid": tid, "ts": us(tok.emitted_ns, origin),
                "args": {"text": trace.texts.get(tok.text), "token_id": opt_u32(tok.token_id),
                         "logprob": opt_f64(tok.logprob), "rank": opt_u32(tok.rank),
                         "iteration": opt_i64(tok.iteration)}}),
            );
        }
    }
    out
}

/// Writes the trace as a Chrome Trace Event JSON file.
pub fn write(trace: &Trace, path: &Path) -> io::Result<()> {
    let doc = json!({"traceEvents": events(trace), "displayTimeUnit": "ms",
        "otherData": {"producer": "tokenscope", "version": env!("CARGO_PKG_VERSION")}});
    let mut w = io::BufWriter::new(std::fs::File::create(path)?);
    serde_json::to_writer(&mut w, &doc).map_err(io::Error::other)?;
    w.flush()
}
