//! Exact nearest-rank percentiles of more values than memory should hold, in at most two passes over them.
//!
//! The first pass counts the values per narrow bucket (the value's sign, exponent and top 16 bits of mantissa: a
//! bucket is 1/65,536 of its value wide) and keeps the values themselves only while they are few. If they stayed
//! few, the figures come from them, sorted. Otherwise the counts say which bucket holds each asked rank, and the
//! second pass counts, within those buckets only, each distinct value: the rank's value is then found exactly. What
//! stays in memory is a count per occupied bucket (a few hundred thousand for latencies spanning microseconds to
//! minutes) and, in the second pass, a count per distinct value of at most four buckets, whatever the number of
//! values.
//!
//! The figures are those of [`Distribution::of`] over the same values: nearest rank (the value at 1-based rank
//! ceil(p × n / 100)), values ordered by `f64::total_cmp`.

use super::metrics::Distribution;
use rustc_hash::FxHashMap;

/// The percentiles a [`Distribution`] has.
const PERCENTILES: [u32; 4] = [50, 90, 95, 99];

/// Bits of a value's order key below its bucket: a bucket keeps the sign, the exponent and 16 bits of mantissa.
const SHIFT: u32 = 36;

/// A key whose unsigned order is `f64::total_cmp`'s order of the values.
fn key(v: f64) -> u64 {
    let bits = v.to_bits();
    if bits >> 63 == 1 { !bits } else { bits | (1 << 63) }
}

fn value(key: u64) -> f64 {
    f64::from_bits(if key >> 63 == 1 { key & !(1 << 63) } else { !key })
}

/// The first pass over one figure's values.
#[derive(Debug, Clone)]
pub struct Tally {
    count: u64,
    sum: f64,
    max: Option<f64>,
    /// The values, while there are at most `keep` of them.
    kept: Option<Vec<f64>>,
    keep: usize,
    buckets: FxHashMap<u64, u64>,
    /// Bits of a value's order key below its bucket ([`SHIFT`] unless made coarser).
    shift: u32,
}

/// What the first pass leaves to do.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// The figures are known.
    Done(Distribution),
    /// A second pass over the same values is needed: give them to [`Second::add`].
    Second(Second),
}

impl Tally {
    /// A tally that keeps up to `keep` values before falling back to counting per bucket.
    pub fn new(keep: usize) -> Self {
        Tally {
            count: 0,
            sum: 0.0,
            max: None,
            kept: Some(Vec::new()),
            keep,
            buckets: FxHashMap::default(),
            shift: SHIFT,
        }
    }

    /// A tally whose buckets keep `mantissa_bits` bits of mantissa (at most 16, the default's) rather than 16: each
    /// is wider, so many tallies held at once count fewer buckets, and the second pass meets more distinct values in
    /// the buckets it counts. The figures are as exact.
    pub fn coarse(keep: usize, mantissa_bits: u32) -> Self {
        Tally {
            shift: 52 - mantissa_bits.min(52 - SHIFT),
            ..Tally::new(keep)
        }
    }

    /// Counts a value (NaN is not a latency: ignored).
    pub fn add(&mut self, v: f64) {
        if v.is_nan() {
            return;
        }
        self.count += 1;
        self.sum += v;
        self.max = Some(self.max.map_or(v, |m| if v.total_cmp(&m).is_gt() { v } else { m }));
        *self.buckets.entry(key(v) >> self.shift).or_insert(0) += 1;
        if let Some(kept) = &mut self.kept {
            if kept.len() < self.keep {
                kept.push(v);
            } else {
                self.kept = None;
            }
        }
    }

    /// Adds the values another tally counted (of other rows of the same figure, in buckets of the same width).
    pub fn merge(&mut self, other: Tally) {
        debug_assert_eq!(self.shift, other.shift, "tallies of buckets of different widths");
        self.count += other.count;
        self.sum += other.sum;
        if let Some(m) = other.max {
            self.max = Some(self.max.map_or(m, |x| if m.total_cmp(&x).is_gt() { m } else { x }));
        }
        for (bucket, n) in other.buckets {
            *self.buckets.entry(bucket).or_insert(0) += n;
        }
        self.kept = match (self.kept.take(), other.kept) {
            (Some(mut a), Some(b)) if a.len() + b.len() <= self.keep => {
                a.extend(b);
                Some(a)
            }
            _ => None,
        };
    }

    /// Number of values counted.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The figures, or the second pass that finds them.
    pub fn finish(self) -> Outcome {
        let mean = self.mean();
        if let Some(mut kept) = self.kept {
            // Every figure as a loaded trace's, the mean too (summed in the same, sorted, order).
            return Outcome::Done(Distribution::of(&mut kept));
        }
        let mut buckets: Vec<(u64, u64)> = self.buckets.into_iter().collect();
        buckets.sort_unstable();
        let mut wanted = Vec::with_capacity(PERCENTILES.len());
        for p in PERCENTILES {
            // Integer arithmetic, as `nearest_rank`: rank ceil(p × n / 100), at least 1.
            let rank = (u64::from(p) * self.count).div_ceil(100).clamp(1, self.count);
            let mut before = 0;
            for &(bucket, n) in &buckets {
                if before + n >= rank {
                    wanted.push((p, bucket, rank - before));
                    break;
                }
                before += n;
            }
        }
        Outcome::Second(Second {
            base: Distribution {
                count: self.count,
                mean,
                max: self.max,
                ..Distribution::default()
            },
            values: wanted.iter().map(|&(_, b, _)| (b, FxHashMap::default())).collect(),
            wanted,
            shift: self.shift,
        })
    }

    #[expect(clippy::cast_precision_loss, reason = "counts far below 2^53")]
    fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum / self.count as f64)
    }
}

/// The second pass: counts of each distinct value in the buckets that hold the asked ranks.
#[derive(Debug, Clone, PartialEq)]
pub struct Second {
    base: Distribution,
    /// (percentile, bucket, rank within the bucket).
    wanted: Vec<(u32, u64, u64)>,
    values: FxHashMap<u64, FxHashMap<u64, u64>>,
    /// The first pass's bucket width ([`Tally::shift`]).
    shift: u32,
}

impl Second {
    /// Whether the second pass needs this value (it lies in a bucket that holds an asked rank).
    pub fn wants(&self, v: f64) -> bool {
        !v.is_nan() && self.values.contains_key(&(key(v) >> self.shift))
    }

    /// Counts a value, given again in the second pass.
    pub fn add(&mut self, v: f64) {
        if v.is_nan() {
            return;
        }
        let k = key(v);
        if let Some(counts) = self.values.get_mut(&(k >> self.shift)) {
            *counts.entry(k).or_insert(0) += 1;
        }
    }

    /// The figures.
    pub fn finish(self) -> Distribution {
        let mut d = self.base;
        for (p, bucket, rank) in self.wanted {
            let mut found = None;
            if let Some(counts) = self.values.get(&bucket) {
                let mut distinct: Vec<(u64, u64)> = counts.iter().map(|(&k, &n)| (k, n)).collect();
                distinct.sort_unstable();
                let mut before = 0;
                for (k, n) in distinct {
                    if before + n >= rank {
                        found = Some(value(k));
                        break;
                    }
                    before += n;
                }
            }
            match p {
                50 => d.p50 = found,
                90 => d.p90 = found,
                95 => d.p95 = found,
                _ => d.p99 = found,
            }
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn both_ways(values: &[f64]) -> (Distribution, Distribution) {
        let direct = Distribution::of(&mut values.to_vec());
        let mut t = Tally::new(2);
        for &v in values {
            t.add(v);
        }
        let Outcome::Second(mut second) = t.finish() else {
            panic!("more values than kept: a second pass");
        };
        for &v in values {
            second.add(v);
        }
        (second.finish(), direct)
    }

    #[test]
    fn the_order_key_orders_as_total_cmp() {
        let mut v = [3.5, -0.0, 0.0, -2.0, 1e300, -1e-300, f64::INFINITY, 7.0];
        let mut by_key = v;
        v.sort_unstable_by(f64::total_cmp);
        by_key.sort_unstable_by_key(|&x| key(x));
        assert_eq!(v.map(f64::to_bits), by_key.map(f64::to_bits));
        for x in v {
            assert_eq!(value(key(x)).to_bits(), x.to_bits());
        }
    }

    #[test]
    fn coarse_buckets_find_the_same_percentiles_by_hand() {
        // 1,000 latencies 10.000, 10.001, ... 10.999 ms (ns), given out of order; 4 bits of mantissa make buckets
        // 1/16 of 8.4 ms wide, so a bucket holds hundreds of them. Ranks ceil(p × 1,000 / 100): p50 → the 500th
        // (10.499 ms), p90 → the 900th (10.899 ms), p95 → 10.949 ms, p99 → 10.989 ms.
        let values: Vec<f64> = (0..1_000u32)
            .map(|k| f64::from(10_000_000 + (k * 7) % 1_000 * 1_000))
            .collect();
        let mut t = Tally::coarse(0, 4);
        for &v in &values {
            t.add(v);
        }
        let Outcome::Second(mut second) = t.finish() else {
            panic!("nothing kept: a second pass");
        };
        for &v in &values {
            second.add(v);
        }
        let d = second.finish();
        assert_eq!(
            (d.count, d.p50, d.p90, d.p95, d.p99, d.max),
            (
                1_000,
                Some(10_499_000.0),
                Some(10_899_000.0),
                Some(10_949_000.0),
                Some(10_989_000.0),
                Some(10_999_000.0)
            )
        );
    }

    #[test]
    fn ten_values_by_hand_in_two_passes() {
        // Sorted: 1 2 3 4 5 6 7 8 9 10; ranks ceil(p × 10 / 100): p50 → 5th, p90 → 9th, p95 and p99 → 10th.
        let values = [7.0, 3.0, 10.0, 1.0, 9.0, 2.0, 8.0, 4.0, 6.0, 5.0];
        let (two, direct) = both_ways(&values);
        assert_eq!(
            (two.count, two.p50, two.p90, two.p95, two.p99, two.max, two.mean),
            (10, Some(5.0), Some(9.0), Some(10.0), Some(10.0), Some(10.0), Some(5.5))
        );
        assert_eq!(two, direct);
    }

    #[test]
    fn values_closer_than_a_bucket_and_repeated_are_told_apart() {
        // 1,000,000 and 1,000,001 ns fall in one bucket (2^-16 of 10^6 is about 15); ties are counted, not lost.
        let mut values = vec![1_000_001.0; 60];
        values.extend(std::iter::repeat_n(1_000_000.0, 40));
        values.push(5e9);
        // 101 values: p50 is the 51st (1,000,001), p90 the 91st (1,000,001), p99 the 100th (1,000,001).
        let (two, direct) = both_ways(&values);
        assert_eq!(two.p50, Some(1_000_001.0));
        assert_eq!(two.p99, Some(1_000_001.0));
        assert_eq!(two.max, Some(5e9));
        assert_eq!(
            (two.count, two.p50, two.p90, two.p95, two.p99, two.max),
            (direct.count, direct.p50, direct.p90, direct.p95, direct.p99, direct.max)
        );
        // A negative gap (a clock step) ranks first: sorted -3, 2, 10^6, 10^6 + 1; p50 is the 2nd, p90 the 4th.
        let (two, _) = both_ways(&[-3.0, 1_000_000.0, 1_000_001.0, 2.0]);
        assert_eq!((two.p50, two.p90), (Some(2.0), Some(1_000_001.0)));
    }

    #[test]
    fn few_values_need_one_pass_and_none_give_no_figures() {
        let mut t = Tally::new(10);
        for v in [4.0, 2.0, f64::NAN] {
            t.add(v);
        }
        assert_eq!(t.count(), 2);
        match t.finish() {
            Outcome::Done(d) => assert_eq!((d.p50, d.p99, d.mean), (Some(2.0), Some(4.0), Some(3.0))),
            Outcome::Second(_) => panic!("two values are kept"),
        }
        match Tally::new(0).finish() {
            Outcome::Done(d) => assert_eq!(d, Distribution::default()),
            Outcome::Second(_) => panic!("nothing to rank"),
        }
    }

    #[test]
    fn a_million_random_values_rank_as_sorting_them() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_pcg::Pcg64::seed_from_u64(7);
        let values: Vec<f64> = (0..1_000_000)
            .map(|_| (rng.random::<f64>() * 40.0).exp().round())
            .collect();
        let (two, direct) = both_ways(&values);
        assert_eq!(
            (two.count, two.p50, two.p90, two.p95, two.p99, two.max),
            (direct.count, direct.p50, direct.p90, direct.p95, direct.p99, direct.max)
        );
    }
}
