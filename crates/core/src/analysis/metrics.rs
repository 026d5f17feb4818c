//! Per-request latency figures as the format defines them ("Derived figures" in `docs/TRACE_FORMAT.md`), and
//! nearest-rank percentiles.

use rayon::prelude::*;
use serde::Serialize;

use crate::trace::Trace;

/// The latency figures of one request, in nanoseconds. `None` when the trace lacks what defines them.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct RequestMetrics {
    /// scheduled − arrival.
    pub queue_ns: Option<i64>,
    /// first token − arrival (first token: `first_token_ns`, else token 0's `emitted_ns`).
    pub ttft_ns: Option<i64>,
    /// finish − arrival (finish: `finished_ns`, else the last token's `emitted_ns`).
    pub e2e_ns: Option<i64>,
    /// (E2E − TTFT) / (output tokens − 1); undefined for fewer than 2 output tokens.
    pub tpot_ns: Option<f64>,
    /// Output tokens: `output_tokens`, else the number of token records.
    pub output_tokens: u32,
}

/// When a request finished: `finished_ns`, else its last token's `emitted_ns`.
pub fn finish_ns(trace: &Trace, request: u32) -> Option<i64> {
    trace.finish_ns(request)
}

/// When a request produced its first token: `first_token_ns`, else token 0's `emitted_ns`.
pub fn first_token_ns(trace: &Trace, request: u32) -> Option<i64> {
    trace.first_token_ns(request)
}

/// The latency figures of a request.
pub fn request_metrics(trace: &Trace, request: u32) -> RequestMetrics {
    let r = request as usize;
    let arrival = trace.requests.arrival_ns[r];
    let ttft_ns = first_token_ns(trace, request).map(|t| t - arrival);
    let e2e_ns = finish_ns(trace, request).map(|t| t - arrival);
    let output_tokens = trace.output_tokens(request);
    let tpot_ns = match (ttft_ns, e2e_ns) {
        (Some(ttft), Some(e2e)) if output_tokens >= 2 => {
            #[expect(clippy::cast_precision_loss, reason = "ns differences far below 2^53")]
            let decode = (e2e - ttft) as f64;
            Some(decode / f64::from(output_tokens - 1))
        }
        _ => None,
    };
    RequestMetrics {
        queue_ns: trace.requests.scheduled_ns.at(r).map(|s| s - arrival),
        ttft_ns,
        e2e_ns,
        tpot_ns,
        output_tokens,
    }
}

/// Inter-token latencies of a request, one per emission after the first (the tokens that came out together: one
/// step's, a speculative verify step's several among them; `trace::emission`): the gap from the token before the
/// emission, when that token is in the trace too (across an index gap the latency is undefined).
pub fn itl_ns(trace: &Trace, request: u32) -> impl Iterator<Item = i64> + '_ {
    crate::trace::emission::gaps_ns(&trace.tokens, trace.tokens_of(request)).map(|(_, gap)| gap)
}

/// Count, mean, nearest-rank percentiles and max of a set of values (all in the same unit).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Default)]
pub struct Distribution {
    /// Number of values.
    pub count: u64,
    /// Arithmetic mean.
    pub mean: Option<f64>,
    /// Median (nearest rank).
    pub p50: Option<f64>,
    /// 90th percentile.
    pub p90: Option<f64>,
    /// 95th percentile.
    pub p95: Option<f64>,
    /// 99th percentile.
    pub p99: Option<f64>,
    /// Largest value.
    pub max: Option<f64>,
}

/// The `p`-th percentile (0 < p <= 100) of sorted values by nearest rank: the value at 1-based rank
/// ceil(p / 100 × n). `None` for no values.
pub fn nearest_rank(sorted: &[f64], p: u32) -> Option<f64> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    // Integer arithmetic: ceil(p × n / 100) without floating-point rounding at exact ranks.
    let rank = (p as usize * n).div_ceil(100).clamp(1, n);
    Some(sorted[rank - 1])
}

/// The median by nearest rank, the format's one definition (the value at 1-based rank ceil(n / 2), so the lower of
/// the two middle values for an even count): the same figure as [`Distribution::p50`]. Reorders `values`; `None`
/// for none.
pub fn median<T: Ord + Copy>(values: &mut [T]) -> Option<T> {
    let n = values.len();
    if n == 0 {
        return None;
    }
    Some(*values.select_nth_unstable(n.div_ceil(2) - 1).1)
}

impl Distribution {
    /// The distribution of `values` (sorted in place).
    pub fn of(values: &mut [f64]) -> Self {
        // Millions of inter-token gaps sort on every core.
        if values.len() > 100_000 {
            values.par_sort_unstable_by(f64::total_cmp);
        } else {
            values.sort_unstable_by(f64::total_cmp);
        }
        if values.is_empty() {
            return Self::default();
        }
        let mean = values.iter().sum::<f64>() / values.len() as f64;
        Distribution {
            count: values.len() as u64,
            mean: Some(mean),
            p50: nearest_rank(values, 50),
            p90: nearest_rank(values, 90),
            p95: nearest_rank(values, 95),
            p99: nearest_rank(values, 99),
            max: values.last().copied(),
        }
    }
}

/// Nanoseconds to milliseconds.
#[expect(clippy::cast_precision_loss, reason = "durations far below 2^53 ns")]
pub fn ms(ns: i64) -> f64 {
    ns as f64 / 1e6
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_on_ten_values() {
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        // ceil(0.5 × 10) = 5 -> 5; ceil(0.9 × 10) = 9 -> 9; ceil(0.95 × 10) = 10 -> 10; ceil(0.99 × 10) = 10.
        assert_eq!(nearest_rank(&v, 50), Some(5.0));
        assert_eq!(nearest_rank(&v, 90), Some(9.0));
        assert_eq!(nearest_rank(&v, 95), Some(10.0));
        assert_eq!(nearest_rank(&v, 99), Some(10.0));
        assert_eq!(nearest_rank(&[], 50), None);
    }

    #[test]
    fn nearest_rank_exact_boundary_is_not_rounded_up() {
        // n = 20, p95: rank ceil(19.0) = 19 exactly (floating point would risk 19.000000000000004 -> 20).
        let v: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(nearest_rank(&v, 95), Some(19.0));
        // n = 1: every percentile is the value.
        assert_eq!(nearest_rank(&[7.0], 1), Some(7.0));
    }

    #[test]
    fn distribution_of_unsorted_values() {
        let mut v = vec![30.0, 10.0, 20.0, 40.0];
        let d = Distribution::of(&mut v);
        assert_eq!(d.count, 4);
        assert_eq!(d.mean, Some(25.0));
        assert_eq!(d.p50, Some(20.0)); // rank ceil(2.0) = 2
        assert_eq!(d.p90, Some(40.0)); // rank ceil(3.6) = 4
        assert_eq!(d.max, Some(40.0));
        assert_eq!(Distribution::of(&mut []).mean, None);
    }

    #[test]
    fn the_median_is_the_nearest_rank_p50() {
        // 4 values: rank ceil(4 / 2) = 2 -> the lower middle, 20; 5 values: rank 3 -> 30.
        assert_eq!(median(&mut [40, 10, 30, 20]), Some(20));
        assert_eq!(median(&mut [50, 40, 10, 30, 20]), Some(30));
        assert_eq!(median::<i64>(&mut []), None);
        let mut f = [40.0, 10.0, 30.0, 20.0];
        assert_eq!(Distribution::of(&mut f).p50, Some(20.0), "the same figure as p50");
    }
}
