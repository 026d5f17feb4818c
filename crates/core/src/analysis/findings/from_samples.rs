//! Overload and KV pressure judged from an engine's sampled counters alone (a server log's stats lines: vLLM's every
//! 10 s, SGLang's per batch), for the instances whose trace has no steps to judge them by. A reading every few
//! seconds sees neither a request's wait nor what happened between two readings, so each finding says how often the
//! counters were read and what that leaves unknown.

use super::words::range;
use super::{Finding, Kind, Severity, Thresholds};
use crate::analysis::metrics::median;
use crate::trace::{Sample, Trace};

/// Fewest consecutive readings that make an episode: one reading is a moment, not a condition.
const MIN_READINGS: usize = 3;

/// Generation throughput that stays within this share of its episode's median counts as flat: the engine was not
/// producing more while the queue grew.
const FLAT_SHARE: f64 = 0.25;

/// The samples of each source that has samples but no steps, in time order: (source, rows).
fn sources_to_judge(trace: &Trace) -> Vec<(u32, Vec<Sample>)> {
    let with_steps: Vec<u32> = trace.sources_with_iterations().iter().map(|&(s, _)| s).collect();
    let sa = &trace.samples;
    let mut out: Vec<(u32, Vec<Sample>)> = Vec::new();
    for i in 0..sa.len() {
        let row = sa.row(i);
        if with_steps.contains(&row.source) {
            continue;
        }
        match out.last_mut() {
            Some((s, rows)) if *s == row.source => rows.push(row),
            _ => out.push((row.source, vec![row])),
        }
    }
    out
}

/// The median gap between readings, in seconds, for the words of a finding.
#[expect(clippy::cast_precision_loss, reason = "ns gaps far below 2^53")]
fn every_s(rows: &[Sample]) -> Option<f64> {
    let mut gaps: Vec<i64> = rows.windows(2).map(|w| w[1].time_ns - w[0].time_ns).collect();
    median(&mut gaps).map(|g| g as f64 / 1e9)
}

/// Runs of consecutive rows for which `hot` holds, at least [`MIN_READINGS`] long.
fn runs(rows: &[Sample], hot: impl Fn(&Sample) -> bool) -> Vec<&[Sample]> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, r) in rows.iter().enumerate() {
        match (hot(r), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                if i - s >= MIN_READINGS {
                    out.push(&rows[s..i]);
                }
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start
        && rows.len() - s >= MIN_READINGS
    {
        out.push(&rows[s..]);
    }
    out
}

/// " of vllm-1", or nothing for the trace's one unnamed instance.
fn of_source(trace: &Trace, source: u32) -> String {
    trace
        .label(source)
        .filter(|&s| s != crate::trace::DEFAULT_SOURCE)
        .map_or(String::new(), |s| format!(" of {s}"))
}

fn sampled(every: Option<f64>, n: usize) -> String {
    every.map_or_else(
        || format!("judged from {n} counter readings"),
        |e| format!("judged from {n} counter readings taken every {e:.0} s"),
    )
}

/// A finding of counters: a time range, and no request, step or token it could name.
fn counters_finding(kind: Kind, severity: Severity, summary: String, (from_ns, to_ns): (i64, i64)) -> Finding {
    Finding {
        kind,
        severity,
        summary,
        from_ns,
        to_ns,
        requests: Vec::new(),
        steps: Vec::new(),
        tokens: Vec::new(),
    }
}

/// KV pressure: runs of [`MIN_READINGS`] or more consecutive readings with the cache at `kv_saturation` or more.
pub fn kv_saturation(trace: &Trace, th: &Thresholds) -> Vec<Finding> {
    let mut out = Vec::new();
    for (source, rows) in sources_to_judge(trace) {
        let every = every_s(&rows);
        for run in runs(&rows, |r| r.kv_usage.is_some_and(|u| u >= th.kv_saturation)) {
            let (Some(first), Some(last)) = (run.first(), run.last()) else {
                continue;
            };
            let peak = run.iter().filter_map(|r| r.kv_usage).fold(0.0, f64::max);
            let (from_ns, to_ns) = range(first.time_ns, last.time_ns);
            let span_s = (last.time_ns - first.time_ns) as f64 / 1e9;
            let summary = format!(
                "KV cache{} at {:.0} % or more in {} consecutive readings over {span_s:.0} s, peak {:.1} % ({}; \
                 the cache between two readings is not known)",
                of_source(trace, source),
                100.0 * th.kv_saturation,
                run.len(),
                100.0 * peak,
                sampled(every, run.len())
            );
            out.push(counters_finding(
                Kind::KvSaturation,
                Severity::Warning,
                summary,
                (from_ns, to_ns),
            ));
        }
    }
    out
}

/// Overload: runs of readings with requests waiting in which the queue grew, over `overload_min_s` or more, from its
/// first reading to its peak (the peak at least twice the first) while the generation throughput stayed flat (within
/// [`FLAT_SHARE`] of its median) or the KV cache was at `kv_saturation`: the engine was neither keeping up nor
/// speeding up. Judged from the first reading to the peak; what followed (the queue draining) is said after.
pub fn overload(trace: &Trace, th: &Thresholds) -> Vec<Finding> {
    let mut out = Vec::new();
    for (source, rows) in sources_to_judge(trace) {
        let every = every_s(&rows);
        for run in runs(&rows, |r| r.num_waiting.is_some_and(|w| w > 0)) {
            let waiting = |r: &Sample| r.num_waiting.unwrap_or(0);
            let Some(first) = run.first() else {
                continue;
            };
            // The first reading at the peak: the growth ends there.
            let peak = run.iter().map(waiting).max().unwrap_or(0);
            let Some(top) = run.iter().position(|r| waiting(r) == peak) else {
                continue;
            };
            let growth = &run[..=top];
            let (w0, at_peak) = (waiting(first), &run[top]);
            let span_s = (at_peak.time_ns - first.time_ns) as f64 / 1e9;
            if span_s < th.overload_min_s || peak < 2 * w0.max(1) {
                continue;
            }
            let generation: Vec<f64> = growth.iter().filter_map(|r| r.generation_throughput).collect();
            let generation_median = {
                let mut sorted = generation.clone();
                sorted.sort_unstable_by(f64::total_cmp);
                sorted.get(sorted.len() / 2).copied()
            };
            let flat = generation_median
                .is_some_and(|m| m > 0.0 && generation.iter().all(|g| (g - m).abs() <= FLAT_SHARE * m));
            let kv_peak = growth.iter().filter_map(|r| r.kv_usage).fold(f64::NAN, f64::max);
            let kv_full = kv_peak >= th.kv_saturation;
            if !flat && !kv_full {
                continue;
            }
            let mut summary = format!(
                "Queue{} grew from {w0} to {peak} waiting requests over {span_s:.0} s",
                of_source(trace, source)
            );
            if let Some(m) = generation_median.filter(|_| flat) {
                summary.push_str(&format!(" while generation stayed at about {m:.0} tok/s"));
            }
            if kv_full {
                summary.push_str(&format!(
                    "{} the KV cache reached {:.1} %",
                    if flat { " and" } else { " while" },
                    100.0 * kv_peak
                ));
            }
            if let Some(last) = run.last().filter(|_| top + 1 < run.len()) {
                summary.push_str(&format!("; then {} waiting", waiting(last)));
            }
            summary.push_str(&format!(
                " ({}; no request's wait is known from counters alone)",
                sampled(every, growth.len())
            ));
            let (from_ns, to_ns) = range(first.time_ns, at_peak.time_ns);
            let critical = peak >= 4 * w0.max(1) && kv_full;
            let severity = if critical {
                Severity::Critical
            } else {
                Severity::Warning
            };
            out.push(counters_finding(Kind::Overload, severity, summary, (from_ns, to_ns)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::trace_of;

    /// 2025-11-29T08:00:00Z.
    const T: i64 = 1_764_403_200_000_000_000;
    const S: i64 = 1_000_000_000;

    fn readings(rows: &[(i64, u32, f64, f64)]) -> Trace {
        let lines: Vec<String> = rows
            .iter()
            .map(|&(t, waiting, kv, generation)| {
                format!(
                    r#"{{"kind":"sample","source":"vllm","time_ns":{},"num_running":8,"num_waiting":{waiting},"kv_usage":{kv},"generation_throughput":{generation}}}"#,
                    T + t * S
                )
            })
            .collect();
        trace_of(&lines.join("\n"))
    }

    #[test]
    fn a_growing_queue_with_flat_throughput_and_a_full_cache_is_overload() {
        // Every 10 s for 60 s: the queue 2, 4, 9, 15, 22, 30, 41; generation 800..880 tok/s (median 840: flat);
        // KV 0.90..0.99.
        let rows: Vec<(i64, u32, f64, f64)> = [2, 4, 9, 15, 22, 30, 41]
            .iter()
            .enumerate()
            .map(|(i, &w)| (10 * i as i64, w, 0.90 + 0.015 * i as f64, 800.0 + 13.0 * i as f64))
            .collect();
        let trace = readings(&rows);
        let th = Thresholds::default();
        let f = overload(&trace, &th);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].severity, Severity::Critical);
        assert_eq!((f[0].from_ns, f[0].to_ns), (T, T + 60 * S));
        let s = &f[0].summary;
        assert!(
            s.starts_with("Queue of vllm grew from 2 to 41 waiting requests over 60 s"),
            "{s}"
        );
        // The generation throughput read, 800 + 13 i for i = 0..6: its mean is 800 + 13 x 3 = 839 tok/s.
        assert!(s.contains("about 839 tok/s"), "{s}");
        assert!(s.contains("7 counter readings taken every 10 s"), "{s}");
        // KV at 95 % or more: the readings at 0.96, 0.975, 0.99 (the last three): one episode of three.
        let kv = kv_saturation(&trace, &th);
        assert_eq!(kv.len(), 1, "{kv:?}");
        assert!(
            kv[0].summary.contains("3 consecutive readings over 20 s, peak 99.0 %"),
            "{}",
            kv[0].summary
        );
    }

    #[test]
    fn a_queue_that_drains_or_an_engine_speeding_up_is_not_overload() {
        let th = Thresholds::default();
        // The queue shrinks: 20, 15, 9, 3.
        let draining = readings(&[
            (0, 20, 0.5, 800.0),
            (10, 15, 0.5, 800.0),
            (20, 9, 0.5, 800.0),
            (30, 3, 0.5, 800.0),
        ]);
        assert!(overload(&draining, &th).is_empty());
        // The queue grows to 20 over 30 s at a flat 1,000 tok/s, then drains: judged to its peak, the rest said.
        let burst = readings(&[
            (0, 5, 0.5, 1000.0),
            (10, 9, 0.5, 1010.0),
            (20, 14, 0.5, 990.0),
            (30, 20, 0.5, 1000.0),
            (40, 3, 0.5, 1600.0),
        ]);
        let f = overload(&burst, &th);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(
            (f[0].from_ns, f[0].to_ns, f[0].severity),
            (T, T + 30 * S, Severity::Warning)
        );
        assert!(f[0].summary.contains("grew from 5 to 20 waiting requests over 30 s while generation stayed at about 1000 tok/s; then 3 waiting (judged from 4 counter readings"), "{}", f[0].summary);
        // The queue grows but generation doubles and the cache has room: the engine is ramping up.
        let ramping = readings(&[
            (0, 2, 0.3, 200.0),
            (10, 5, 0.4, 400.0),
            (20, 8, 0.5, 800.0),
            (30, 9, 0.6, 900.0),
        ]);
        assert!(overload(&ramping, &th).is_empty());
    }
}
