//! The time axis of the waterfall: which nanosecond sits under which horizontal point, and how zooming and panning
//! move it. Times stay `i64` ns and the scale `f64` ns per point, so a deep zoom far from the trace start keeps
//! its precision; conversion to screen `f32` happens only after culling.

/// Narrowest view: 1 point = 1 ns (a token's span is ~10 ms, so this is far past any need).
pub const MIN_NS_PER_POINT: f64 = 1.0;
/// Widest view: 1 point = 1 hour.
pub const MAX_NS_PER_POINT: f64 = 3.6e12;

/// A horizontal view onto time: `start_ns` at x = 0, `ns_per_point` nanoseconds per point to the right.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Viewport {
    /// Time at the left edge, ns since the Unix epoch.
    pub start_ns: i64,
    /// Nanoseconds per point.
    pub ns_per_point: f64,
    /// Width of the view, points.
    pub width: f64,
}

impl Viewport {
    /// A view showing `[from_ns, to_ns]` across `width` points (a zero-length range shows 1 ms).
    #[expect(clippy::cast_precision_loss, reason = "spans of a trace, far below 2^53 ns")]
    pub fn fit(from_ns: i64, to_ns: i64, width: f64) -> Self {
        let span = (to_ns - from_ns).max(1_000_000) as f64;
        Viewport {
            start_ns: from_ns,
            ns_per_point: (span / width.max(1.0)).clamp(MIN_NS_PER_POINT, MAX_NS_PER_POINT),
            width,
        }
    }

    /// Time at the right edge.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "clamped scale times a screen width: far below 2^63"
    )]
    pub fn end_ns(&self) -> i64 {
        self.start_ns
            .saturating_add((self.ns_per_point * self.width).round() as i64)
    }

    /// The x (points from the left edge) of a time; may lie outside `0..width`.
    #[expect(
        clippy::cast_precision_loss,
        reason = "the difference is taken in i64 first, then scaled"
    )]
    pub fn x_from_time(&self, t_ns: i64) -> f64 {
        t_ns.saturating_sub(self.start_ns) as f64 / self.ns_per_point
    }

    /// The time at x.
    pub fn time_from_x(&self, x: f64) -> i64 {
        self.start_ns.saturating_add((x * self.ns_per_point).round() as i64)
    }

    /// Zooms by `factor` (> 1 zooms in) keeping the time under `x` where it is.
    #[must_use]
    pub fn zoomed_at(&self, x: f64, factor: f64) -> Self {
        if !(factor.is_finite() && factor > 0.0) {
            return *self;
        }
        let anchor = self.time_from_x(x);
        let ns_per_point = (self.ns_per_point / factor).clamp(MIN_NS_PER_POINT, MAX_NS_PER_POINT);
        let start_ns = anchor.saturating_sub((x * ns_per_point).round() as i64);
        Viewport {
            start_ns,
            ns_per_point,
            width: self.width,
        }
    }

    /// Pans by `dx` points (positive moves the view right, towards later times).
    #[must_use]
    pub fn panned(&self, dx: f64) -> Self {
        let shift = (dx * self.ns_per_point).round() as i64;
        Viewport {
            start_ns: self.start_ns.saturating_add(shift),
            ..*self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_764_403_200_000_000_000;

    #[test]
    fn fit_maps_the_range_onto_the_width() {
        // 10 s over 1000 points: 10 ms per point.
        let v = Viewport::fit(T0, T0 + 10_000_000_000, 1000.0);
        assert_eq!(v.ns_per_point, 10_000_000.0);
        assert_eq!(v.x_from_time(T0), 0.0);
        assert_eq!(v.x_from_time(T0 + 2_500_000_000), 250.0);
        assert_eq!(v.time_from_x(1000.0), T0 + 10_000_000_000);
        assert_eq!(v.end_ns(), T0 + 10_000_000_000);
        // Outside the view: negative or beyond the width, not clamped.
        assert_eq!(v.x_from_time(T0 - 10_000_000), -1.0);
    }

    #[test]
    fn zoom_keeps_the_time_under_the_pointer() {
        let v = Viewport::fit(T0, T0 + 10_000_000_000, 1000.0);
        let anchor = v.time_from_x(300.0);
        let z = v.zoomed_at(300.0, 2.0);
        assert_eq!(z.ns_per_point, 5_000_000.0);
        assert_eq!(z.time_from_x(300.0), anchor);
        // 300 points left of the anchor at 5 ms per point: 1.5 s before it (3 s + 1.5 s after T0).
        assert_eq!(z.start_ns, T0 + 1_500_000_000);
        let back = z.zoomed_at(300.0, 0.5);
        assert_eq!(back, v);
    }

    #[test]
    fn zoom_stops_at_its_limits_and_ignores_nonsense() {
        let v = Viewport::fit(T0, T0 + 1_000_000, 1000.0); // 1 ms: 1000 ns per point
        assert_eq!(v.zoomed_at(0.0, 1e9).ns_per_point, MIN_NS_PER_POINT);
        assert_eq!(v.zoomed_at(0.0, 1e-30).ns_per_point, MAX_NS_PER_POINT);
        assert_eq!(v.zoomed_at(10.0, f64::NAN), v);
        assert_eq!(v.zoomed_at(10.0, 0.0), v);
    }

    #[test]
    fn far_from_the_epoch_a_deep_zoom_keeps_nanoseconds() {
        // 2025 in ns is ~1.76e18: an f32 of it would be off by minutes; the viewport keeps exact ns.
        let v = Viewport {
            start_ns: T0 + 123,
            ns_per_point: 1.0,
            width: 1000.0,
        };
        assert_eq!(v.x_from_time(T0 + 124), 1.0);
        assert_eq!(v.time_from_x(999.0), T0 + 1122);
    }

    #[test]
    fn pan_moves_by_points() {
        let v = Viewport::fit(T0, T0 + 10_000_000_000, 1000.0);
        assert_eq!(v.panned(100.0).start_ns, T0 + 1_000_000_000);
        assert_eq!(v.panned(-100.0).start_ns, T0 - 1_000_000_000);
    }
}
