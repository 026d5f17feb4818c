//! The figures of an engine's counter samples (`kind = "sample"`: a server log's periodic stats lines): how many,
//! how often, and the distribution of each counter the source gives. A counter no sample carries is absent from the
//! figures, never zero.

use serde::Serialize;

use super::metrics::Distribution;
use crate::trace::{Sample, Trace};

/// One counter over the samples that carry it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Counter {
    /// The counter's name, as the format and the `samples` table spell it.
    pub name: &'static str,
    /// What it is, with its unit.
    pub label: &'static str,
    /// Its values (fractions as percentages, so the figures read as the logs print them).
    pub values: Distribution,
}

/// The samples of a trace, summed up.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SampleFigures {
    /// Number of samples.
    pub samples: u64,
    /// Engine instances (sources) that have samples.
    pub instances: usize,
    /// From the first sample to the last, in ms.
    pub span_ms: f64,
    /// The median gap between consecutive samples of one instance, in ms: how often the counters were read.
    /// `None` with fewer than two samples on every instance.
    pub every_ms: Option<f64>,
    /// Samples that are prefill batches (they count the batch's new tokens).
    pub prefill_batches: u64,
    /// Every counter some sample carries, in a fixed order.
    pub counters: Vec<Counter>,
}

type Getter = fn(&Sample) -> Option<f64>;

/// The counters, in the order they are listed: name, label, value of a sample.
const COUNTERS: [(&str, &str, Getter); 12] = [
    ("num_running", "running requests", |s| s.num_running.map(f64::from)),
    ("num_waiting", "waiting requests", |s| s.num_waiting.map(f64::from)),
    ("num_swapped", "swapped requests", |s| s.num_swapped.map(f64::from)),
    ("kv_usage", "KV use (%)", |s| s.kv_usage.map(|v| v * 100.0)),
    ("kv_tokens", "KV tokens in use", |s| s.kv_tokens.map(f64::from)),
    ("prompt_throughput", "prompt tok/s", |s| s.prompt_throughput),
    ("generation_throughput", "generation tok/s", |s| s.generation_throughput),
    ("prefix_hit_rate", "prefix cache hits (%)", |s| {
        s.prefix_hit_rate.map(|v| v * 100.0)
    }),
    ("spec_accept_length", "spec. accept length", |s| s.spec_accept_length),
    ("spec_accept_rate", "spec. accept rate (%)", |s| {
        s.spec_accept_rate.map(|v| v * 100.0)
    }),
    ("num_prefill_tokens", "prefill batch: new tokens", |s| {
        s.num_prefill_tokens.map(f64::from)
    }),
    ("cached_tokens", "prefill batch: cached tokens", |s| {
        s.cached_tokens.map(f64::from)
    }),
];

/// The figures of the trace's samples; `None` when it has none.
pub fn sample_figures(trace: &Trace) -> Option<SampleFigures> {
    let sa = &trace.samples;
    if sa.is_empty() {
        return None;
    }
    let rows: Vec<Sample> = (0..sa.len()).map(|i| sa.row(i)).collect();
    let first = sa.time_ns.iter().copied().min()?;
    let last = sa.time_ns.iter().copied().max()?;
    // Rows are sorted by source, then time: gaps within one source.
    #[expect(clippy::cast_precision_loss, reason = "ns gaps far below 2^53")]
    let mut gaps: Vec<f64> = rows
        .windows(2)
        .filter(|w| w[0].source == w[1].source)
        .map(|w| (w[1].time_ns - w[0].time_ns) as f64 / 1e6)
        .collect();
    let every_ms = Distribution::of(&mut gaps).p50;
    let mut instances: Vec<u32> = sa.source.clone();
    instances.dedup();
    let counters = COUNTERS
        .iter()
        .filter_map(|&(name, label, get)| {
            let mut values: Vec<f64> = rows.iter().filter_map(get).collect();
            (!values.is_empty()).then(|| Counter {
                name,
                label,
                values: Distribution::of(&mut values),
            })
        })
        .collect();
    let span_ms = (last - first) as f64 / 1e6;
    Some(SampleFigures {
        samples: sa.len() as u64,
        instances: instances.len(),
        span_ms,
        every_ms,
        prefill_batches: sa.num_prefill_tokens.iter().filter(|v| v.is_some()).count() as u64,
        counters,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::trace_of;

    #[test]
    fn counters_absent_from_every_sample_are_left_out_and_gaps_are_per_instance() {
        // Two instances: a at 0, 10, 20 s; b at 5, 15 s. Gaps 10, 10 (a) and 10 (b): every 10 s, not 5.
        let t0 = 1_764_403_200_000_000_000_i64;
        let s = 1_000_000_000_i64;
        let lines = [
            format!(r#"{{"kind":"sample","source":"a","time_ns":{t0},"num_running":4,"kv_usage":0.5}}"#),
            format!(
                r#"{{"kind":"sample","source":"a","time_ns":{},"num_running":6,"kv_usage":0.7}}"#,
                t0 + 10 * s
            ),
            format!(
                r#"{{"kind":"sample","source":"a","time_ns":{},"num_running":8,"kv_usage":0.9}}"#,
                t0 + 20 * s
            ),
            format!(
                r#"{{"kind":"sample","source":"b","time_ns":{},"num_waiting":3}}"#,
                t0 + 5 * s
            ),
            format!(
                r#"{{"kind":"sample","source":"b","time_ns":{},"num_waiting":1}}"#,
                t0 + 15 * s
            ),
        ];
        let trace = trace_of(&lines.join("\n"));
        let f = sample_figures(&trace).unwrap();
        assert_eq!((f.samples, f.instances), (5, 2));
        assert_eq!(f.span_ms, 20_000.0);
        assert_eq!(f.every_ms, Some(10_000.0));
        let names: Vec<&str> = f.counters.iter().map(|c| c.name).collect();
        assert_eq!(names, ["num_running", "num_waiting", "kv_usage"]);
        let running = &f.counters[0].values;
        assert_eq!((running.count, running.mean, running.max), (3, Some(6.0), Some(8.0)));
        // KV use in percent: 50, 70, 90; the median 70.
        assert_eq!(f.counters[2].values.p50, Some(70.0));
        assert_eq!(f.prefill_batches, 0);
    }

    #[test]
    fn a_trace_without_samples_has_no_sample_figures() {
        let trace = trace_of(r#"{"kind":"request","request_id":"r","arrival_ns":1764403200000000000}"#);
        assert_eq!(sample_figures(&trace), None);
    }
}
