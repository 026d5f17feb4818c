//! What the detectors share to write their sentences: figures as people write them, ranges of time.

use crate::analysis::metrics::ms;
use crate::trace::Trace;

/// A row index as the model's `u32` row id.
pub(super) fn row_u32(i: usize) -> u32 {
    u32::try_from(i).unwrap_or(u32::MAX)
}

/// A rate or count with thousands separators, rounded: "5,210".
#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "rounded, clamped at 0"
)]
pub(super) fn thousands_f(x: f64) -> String {
    crate::analysis::stats::thousands(x.max(0.0).round() as u64)
}

/// A duration for a sentence: "3.71 s" from one second, else "12.6 ms".
pub(super) fn duration(ns: i64) -> String {
    let m = ms(ns);
    if m.abs() >= 1_000.0 {
        format!("{:.2} s", m / 1_000.0)
    } else if m.abs() >= 10.0 {
        format!("{m:.1} ms")
    } else {
        format!("{m:.2} ms")
    }
}

/// A multiple for a sentence: "3.4" under ten, else "350".
pub(super) fn multiple(x: f64) -> String {
    if x < 10.0 { format!("{x:.1}") } else { format!("{x:.0}") }
}

/// "a", "a and b", "a, b and c", "a, b and 5 others": at most three names.
pub(super) fn names(trace: &Trace, rows: &[u32]) -> String {
    let name = |r: u32| trace.request_id(r).to_owned();
    match rows {
        [] => String::new(),
        [a] => name(*a),
        [a, b] => format!("{} and {}", name(*a), name(*b)),
        [a, b, c] => format!("{}, {} and {}", name(*a), name(*b), name(*c)),
        [a, b, rest @ ..] => format!("{}, {} and {} others", name(*a), name(*b), rest.len()),
    }
}

/// `part / whole` as a percentage with one decimal.
#[expect(clippy::cast_precision_loss, reason = "request counts far below 2^53")]
pub(super) fn percent(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

/// The range between two times, at least 1 ns long (`from < to`).
pub(super) fn range(a_ns: i64, b_ns: i64) -> (i64, i64) {
    let (from, to) = (a_ns.min(b_ns), a_ns.max(b_ns));
    (from, to.max(from + 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::stats::thousands;

    #[test]
    fn figures_read_as_people_write_them() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(48_000), "48,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(duration(3_682_954_766), "3.68 s");
        assert_eq!(duration(10_500_000), "10.5 ms");
        assert_eq!(duration(1_250_000), "1.25 ms");
        assert_eq!(multiple(3.44), "3.4");
        assert_eq!(multiple(350.2), "350");
        assert_eq!(range(5, 10), (5, 10));
        assert_eq!(range(10, 5), (5, 10));
        assert_eq!(range(7, 7), (7, 8));
    }
}
