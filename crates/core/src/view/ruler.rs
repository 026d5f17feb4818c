//! The time ruler: tick marks at round intervals of the time since the trace start, and their labels.

use super::viewport::Viewport;

/// The tick interval: the smallest 1, 2 or 5 x 10^k ns giving ticks at least `min_spacing` points apart.
pub fn tick_step_ns(vp: &Viewport, min_spacing: f64) -> i64 {
    let want = (vp.ns_per_point * min_spacing).max(1.0);
    let mut decade: i64 = 1;
    loop {
        for m in [1, 2, 5] {
            let step = decade.saturating_mul(m);
            if step as f64 >= want || step == i64::MAX {
                return step;
            }
        }
        decade = decade.saturating_mul(10);
    }
}

/// The ticks in view: times (ns since the Unix epoch) at multiples of `step_ns` after `origin_ns`.
pub fn ticks(vp: &Viewport, origin_ns: i64, step_ns: i64) -> Vec<i64> {
    if step_ns <= 0 {
        return Vec::new();
    }
    let first = (vp.start_ns - origin_ns).div_euclid(step_ns);
    let last = (vp.end_ns() - origin_ns).div_euclid(step_ns) + 1;
    (first..=last)
        .map(|k| origin_ns + k * step_ns)
        .filter(|&t| t >= vp.start_ns && t <= vp.end_ns())
        .collect()
}

/// A relative time in the unit the tick interval calls for: "1.25 s", "350 ms", "12.5 µs".
pub fn format_relative(ns: i64, step_ns: i64) -> String {
    let (unit, scale) = match step_ns.abs() {
        s if s >= 1_000_000_000 => ("s", 1e9),
        s if s >= 1_000_000 => ("ms", 1e6),
        s if s >= 1_000 => ("µs", 1e3),
        _ => ("ns", 1.0),
    };
    // Enough decimals to tell neighbouring ticks apart.
    let decimals = match step_ns.abs() as f64 / scale {
        x if x >= 1.0 => 0,
        x if x >= 0.1 => 1,
        x if x >= 0.01 => 2,
        _ => 3,
    };
    format!("{:.*} {unit}", decimals, ns as f64 / scale)
}

/// An absolute time in UTC with its zone, to the microsecond: "2025-11-29 08:00:03.250000 UTC".
pub fn format_utc(ns: i64) -> String {
    chrono::DateTime::from_timestamp_nanos(ns)
        .format("%Y-%m-%d %H:%M:%S%.6f UTC")
        .to_string()
}

/// A duration with a unit that suits it: "840 ns", "12.3 µs", "45.6 ms", "2.250 s".
pub fn format_duration(ns: i64) -> String {
    let a = ns.abs() as f64;
    if a >= 1e9 {
        format!("{:.3} s", ns as f64 / 1e9)
    } else if a >= 1e6 {
        format!("{:.1} ms", ns as f64 / 1e6)
    } else if a >= 1e3 {
        format!("{:.1} µs", ns as f64 / 1e3)
    } else {
        format!("{ns} ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_764_403_200_000_000_000;

    #[test]
    fn ticks_fall_on_round_intervals_at_least_min_spacing_apart() {
        // 10 s over 1000 points = 10 ms per point; 80 points apart = 800 ms at least: the next 1-2-5 step is 1 s.
        let vp = Viewport::fit(T0, T0 + 10_000_000_000, 1000.0);
        assert_eq!(tick_step_ns(&vp, 80.0), 1_000_000_000);
        let t = ticks(&vp, T0, 1_000_000_000);
        assert_eq!(t.len(), 11);
        assert_eq!(t[3], T0 + 3_000_000_000);
        // 2 ms over 1000 points: 2 µs per point -> at least 160 µs -> 200 µs.
        let vp = Viewport::fit(T0, T0 + 2_000_000, 1000.0);
        assert_eq!(tick_step_ns(&vp, 80.0), 200_000);
    }

    #[test]
    fn ticks_count_from_the_trace_start_not_the_view() {
        let vp = Viewport {
            start_ns: T0 + 1_250_000_000,
            ns_per_point: 10_000_000.0,
            width: 100.0,
        };
        assert_eq!(ticks(&vp, T0, 500_000_000), [T0 + 1_500_000_000, T0 + 2_000_000_000]);
        assert!(ticks(&vp, T0, 0).is_empty());
    }

    #[test]
    fn labels_name_their_units() {
        assert_eq!(format_relative(3_000_000_000, 1_000_000_000), "3 s");
        assert_eq!(format_relative(1_500_000_000, 500_000_000), "1500 ms");
        assert_eq!(format_relative(1_250_000, 250_000), "1250 µs");
        assert_eq!(format_relative(150_000_000, 50_000_000), "150 ms");
        assert_eq!(format_utc(T0 + 3_250_000_000), "2025-11-29 08:00:03.250000 UTC");
        assert_eq!(format_duration(2_250_000_000), "2.250 s");
        assert_eq!(format_duration(45_600_000), "45.6 ms");
        assert_eq!(format_duration(840), "840 ns");
    }
}
