//! The `samples` table's columns: an engine's counters as its periodic stats lines report them.

use super::*;

pub(super) static SAMPLES: &[Col] = &[
    col!("source", "str", "engine instance", |s| labels(
        s,
        "source",
        &s.trace.samples.source
    )),
    col!(
        "time_ns",
        "i64",
        "when the counters were read (ns since the Unix epoch)",
        |s| { Series::new("time_ns".into(), &s.trace.samples.time_ns) }
    ),
    col!("time_s", "f64", "the same, seconds since the trace's start", |s| {
        let v: Vec<f64> = s.trace.samples.time_ns.iter().map(|&t| s.seconds(t)).collect();
        Series::new("time_s".into(), v)
    }),
    col!(
        "interval_s",
        "f64",
        "the window the rates and averages cover, ending at time_ns",
        |s| {
            #[expect(clippy::cast_precision_loss, reason = "durations far below 2^53 ns")]
            let v: Vec<Option<f64>> = s
                .trace
                .samples
                .interval_ns
                .iter()
                .map(|v| v.map(|ns| ns as f64 / 1e9))
                .collect();
            Series::new("interval_s".into(), v)
        }
    ),
    col!("running", "u32", "requests running", |s| {
        Series::new("running".into(), &s.trace.samples.num_running)
    }),
    col!("waiting", "u32", "requests waiting in the queue", |s| {
        Series::new("waiting".into(), &s.trace.samples.num_waiting)
    }),
    col!("swapped", "u32", "requests swapped out to CPU memory (vLLM V0)", |s| {
        Series::new("swapped".into(), &s.trace.samples.num_swapped)
    }),
    col!("kv_usage", "f64", "KV-cache use, 0..1", |s| {
        Series::new("kv_usage".into(), &s.trace.samples.kv_usage)
    }),
    col!("kv_tokens", "u32", "KV-cache tokens in use", |s| {
        Series::new("kv_tokens".into(), &s.trace.samples.kv_tokens)
    }),
    col!(
        "prompt_throughput",
        "f64",
        "prompt tokens computed per second over the interval",
        |s| { Series::new("prompt_throughput".into(), &s.trace.samples.prompt_throughput) }
    ),
    col!(
        "generation_throughput",
        "f64",
        "output tokens per second over the interval",
        |s| { Series::new("generation_throughput".into(), &s.trace.samples.generation_throughput) }
    ),
    col!(
        "prefix_hit_rate",
        "f64",
        "share of prompt tokens served from the prefix cache, 0..1",
        |s| { Series::new("prefix_hit_rate".into(), &s.trace.samples.prefix_hit_rate) }
    ),
    col!(
        "spec_accept_length",
        "f64",
        "speculative decoding: tokens accepted per step, the bonus included",
        |s| { Series::new("spec_accept_length".into(), &s.trace.samples.spec_accept_length) }
    ),
    col!(
        "spec_accept_rate",
        "f64",
        "speculative decoding: share of drafted tokens accepted, 0..1",
        |s| { Series::new("spec_accept_rate".into(), &s.trace.samples.spec_accept_rate) }
    ),
    col!(
        "spec_drafted_tokens",
        "u32",
        "speculative decoding: draft tokens proposed over the interval",
        |s| Series::new("spec_drafted_tokens".into(), &s.trace.samples.spec_drafted_tokens)
    ),
    col!(
        "spec_accepted_tokens",
        "u32",
        "speculative decoding: of those, the ones accepted",
        |s| Series::new("spec_accepted_tokens".into(), &s.trace.samples.spec_accepted_tokens)
    ),
    col!("num_prefill_reqs", "u32", "a prefill batch's new sequences", |s| {
        Series::new("num_prefill_reqs".into(), &s.trace.samples.num_prefill_reqs)
    }),
    col!(
        "num_prefill_tokens",
        "u32",
        "a prefill batch's prompt tokens computed",
        |s| { Series::new("num_prefill_tokens".into(), &s.trace.samples.num_prefill_tokens) }
    ),
    col!(
        "cached_tokens",
        "u32",
        "a prefill batch's prompt tokens from the prefix cache",
        |s| { Series::new("cached_tokens".into(), &s.trace.samples.cached_tokens) }
    ),
    col!(
        "kv_transfers",
        "u32",
        "KV transfers that succeeded over the interval (vLLM's KV connector line)",
        |s| { Series::new("kv_transfers".into(), &s.trace.samples.kv_transfers) }
    ),
    col!(
        "kv_transfers_failed",
        "u32",
        "KV transfers that failed over the interval",
        |s| { Series::new("kv_transfers_failed".into(), &s.trace.samples.kv_transfers_failed) }
    ),
    col!(
        "kv_transfer_ms",
        "f64",
        "mean time of a KV transfer over the interval, ms; null without one",
        |s| { Series::new("kv_transfer_ms".into(), &s.trace.samples.kv_transfer_ms) }
    ),
    col!(
        "kv_transfer_p90_ms",
        "f64",
        "90th percentile of a KV transfer's time over the interval, ms",
        |s| { Series::new("kv_transfer_p90_ms".into(), &s.trace.samples.kv_transfer_p90_ms) }
    ),
    col!(
        "kv_transfer_bytes",
        "u64",
        "bytes the interval's KV transfers moved",
        |s| { Series::new("kv_transfer_bytes".into(), &s.trace.samples.kv_transfer_bytes) }
    ),
    col!(
        "bootstrapping",
        "u32",
        "disaggregated prefill instance: requests in their bootstrap handshake",
        |s| { Series::new("bootstrapping".into(), &s.trace.samples.num_bootstrapping) }
    ),
    col!(
        "prealloc",
        "u32",
        "disaggregated decode instance: requests waiting for room for their KV cache",
        |s| { Series::new("prealloc".into(), &s.trace.samples.num_prealloc) }
    ),
    col!(
        "transferring",
        "u32",
        "disaggregated decode instance: requests receiving their KV cache",
        |s| { Series::new("transferring".into(), &s.trace.samples.num_transferring) }
    ),
    col!(
        "inflight",
        "u32",
        "disaggregated prefill instance: requests whose KV cache is being sent",
        |s| { Series::new("inflight".into(), &s.trace.samples.num_inflight) }
    ),
    col!("retracted", "u32", "requests retracted to make room", |s| {
        Series::new("retracted".into(), &s.trace.samples.num_retracted)
    }),
];
