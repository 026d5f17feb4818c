//! Level of detail for one track: which spans of a time-sorted track are visible, and which are too narrow to draw
//! alone and merge into one item with a count (as Tracy folds runs of spans under a few pixels). Frame cost then
//! grows with the pixels of the track, not with its spans.

use std::ops::Range;

use super::viewport::Viewport;

/// Spans narrower than this (points) merge with their narrow neighbours: below ~3 px a span's colour cannot be
/// told apart from its neighbours', and drawing thousands of them costs more than it shows.
pub const MERGE_THRESHOLD_POINTS: f64 = 3.0;

/// A span of a track: a time range and a style class (stage kind, say) chosen by the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// Start, ns since the Unix epoch.
    pub start_ns: i64,
    /// End (>= start).
    pub end_ns: i64,
    /// The caller's style class.
    pub class: u8,
}

/// What to draw for a track.
#[derive(Debug, Clone, PartialEq)]
pub enum RenderItem {
    /// One span, wide enough to draw alone.
    Span {
        /// Its index in the track.
        index: usize,
        /// Left edge, points (may be < 0 when the span starts before the view).
        x0: f64,
        /// Right edge, points.
        x1: f64,
    },
    /// A run of narrow spans drawn as one.
    Merged {
        /// Indices of the merged spans in the track.
        spans: Range<usize>,
        /// Left edge, points.
        x0: f64,
        /// Right edge, points (at least [`MERGE_THRESHOLD_POINTS`] past `x0`, so it stays visible).
        x1: f64,
        /// Sum of the spans' durations, ns.
        total_ns: i64,
        /// The longest span, ns.
        max_ns: i64,
        /// The class covering the most time in the run.
        class: u8,
    },
}

/// The indices of the spans overlapping the view. `spans` must be sorted by start and must not overlap each other
/// (true of one request's stages and of one engine's steps), so their ends are sorted too.
pub fn visible(spans: &[Span], vp: &Viewport) -> Range<usize> {
    let (from, to) = (vp.start_ns, vp.end_ns());
    let first = spans.partition_point(|s| s.end_ns < from);
    let last = spans.partition_point(|s| s.start_ns <= to);
    first..last.max(first)
}

/// A run of narrow spans being merged.
struct Run {
    spans: Range<usize>,
    x0: f64,
    x1: f64,
    total_ns: i64,
    max_ns: i64,
    /// Time covered per class.
    by_class: [i64; 256],
}

impl Run {
    fn start(index: usize, s: Span, x0: f64, x1: f64) -> Self {
        let mut run = Run {
            spans: index..index,
            x0,
            x1,
            total_ns: 0,
            max_ns: 0,
            by_class: [0; 256],
        };
        run.add(index, s, x1);
        run
    }

    fn add(&mut self, index: usize, s: Span, x1: f64) {
        let d = s.end_ns - s.start_ns;
        self.spans.end = index + 1;
        self.x1 = self.x1.max(x1);
        self.total_ns += d;
        self.max_ns = self.max_ns.max(d);
        self.by_class[s.class as usize] += d;
    }

    /// A lone narrow span stays a span, widened to one point; a longer run becomes one merged item.
    fn into_item(self) -> RenderItem {
        if self.spans.len() == 1 {
            return RenderItem::Span {
                index: self.spans.start,
                x0: self.x0,
                x1: self.x1.max(self.x0 + 1.0),
            };
        }
        let class = self
            .by_class
            .iter()
            .enumerate()
            .max_by_key(|(_, t)| **t)
            .map_or(0, |(c, _)| c);
        RenderItem::Merged {
            spans: self.spans,
            x0: self.x0,
            x1: self.x1.max(self.x0 + MERGE_THRESHOLD_POINTS),
            total_ns: self.total_ns,
            max_ns: self.max_ns,
            class: u8::try_from(class).unwrap_or(0),
        }
    }
}

/// The items that draw the visible part of a track: wide spans alone, runs of narrow spans merged.
pub fn compute_render_items(spans: &[Span], vp: &Viewport) -> Vec<RenderItem> {
    let mut items = Vec::new();
    let mut run: Option<Run> = None;
    for i in visible(spans, vp) {
        let s = spans[i];
        let (x0, x1) = (vp.x_from_time(s.start_ns), vp.x_from_time(s.end_ns));
        let narrow = x1 - x0 < MERGE_THRESHOLD_POINTS;
        match run.as_mut() {
            Some(r) if narrow && x0 - r.x1 < MERGE_THRESHOLD_POINTS => r.add(i, s, x1),
            _ => {
                items.extend(run.take().map(Run::into_item));
                if narrow {
                    run = Some(Run::start(i, s, x0, x1));
                } else {
                    items.push(RenderItem::Span { index: i, x0, x1 });
                }
            }
        }
    }
    items.extend(run.map(Run::into_item));
    items
}

/// The busy fraction of each of `buckets` equal columns of the view: how much of the column's time the track's
/// spans cover. What a track shows when zoomed far out: a density strip.
#[expect(clippy::cast_precision_loss, reason = "fractions of a column")]
pub fn density(spans: &[Span], vp: &Viewport, buckets: usize) -> Vec<f32> {
    let mut busy = vec![0i64; buckets];
    if buckets == 0 {
        return Vec::new();
    }
    let (from, to) = (vp.start_ns, vp.end_ns());
    let width_ns = ((to - from) as f64 / buckets as f64).max(1.0);
    for s in &spans[visible(spans, vp)] {
        let (a, b) = (s.start_ns.max(from), s.end_ns.min(to));
        if b <= a {
            continue;
        }
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "clamped to 0..buckets"
        )]
        let bucket = |t: i64| (((t - from) as f64 / width_ns) as usize).min(buckets - 1);
        for (k, slot) in busy.iter_mut().enumerate().take(bucket(b) + 1).skip(bucket(a)) {
            let (c0, c1) = (
                from + (k as f64 * width_ns) as i64,
                from + ((k + 1) as f64 * width_ns) as i64,
            );
            *slot += b.min(c1) - a.max(c0);
        }
    }
    busy.into_iter()
        .map(|t| (t as f64 / width_ns).clamp(0.0, 1.0) as f32)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_764_403_200_000_000_000;
    const MS: i64 = 1_000_000;

    /// A view of 0..1000 ms over 1000 points: 1 ms per point.
    fn view() -> Viewport {
        Viewport::fit(T0, T0 + 1000 * MS, 1000.0)
    }

    fn span(start_ms: i64, end_ms: i64, class: u8) -> Span {
        Span {
            start_ns: T0 + start_ms * MS,
            end_ns: T0 + end_ms * MS,
            class,
        }
    }

    #[test]
    fn wide_spans_are_drawn_alone_at_their_x() {
        let spans = [span(100, 200, 0), span(300, 350, 1)];
        let items = compute_render_items(&spans, &view());
        assert_eq!(
            items,
            [
                RenderItem::Span {
                    index: 0,
                    x0: 100.0,
                    x1: 200.0
                },
                RenderItem::Span {
                    index: 1,
                    x0: 300.0,
                    x1: 350.0
                }
            ]
        );
    }

    #[test]
    fn spans_outside_the_view_are_culled() {
        let spans = [
            span(-500, -10, 0),
            span(-5, 5, 0),
            span(500, 600, 0),
            span(1001, 1100, 0),
            span(2000, 2001, 0),
        ];
        assert_eq!(visible(&spans, &view()), 1..3);
        let items = compute_render_items(&spans, &view());
        assert_eq!(items.len(), 2);
        assert_eq!(
            items[0],
            RenderItem::Span {
                index: 1,
                x0: -5.0,
                x1: 5.0
            },
            "a span crossing the edge stays"
        );
    }

    #[test]
    fn two_consecutive_narrow_spans_merge() {
        // Two 1-ms spans 1 ms apart: 1 point wide each, 1 point apart.
        let spans = [span(10, 11, 0), span(12, 13, 0)];
        let items = compute_render_items(&spans, &view());
        assert_eq!(
            items,
            [RenderItem::Merged {
                spans: 0..2,
                x0: 10.0,
                x1: 13.0,
                total_ns: 2 * MS,
                max_ns: MS,
                class: 0
            }]
        );
    }

    #[test]
    fn narrow_spans_far_apart_do_not_merge() {
        let spans = [span(10, 11, 0), span(50, 51, 0)];
        let items = compute_render_items(&spans, &view());
        // Each stays a span of its own, widened to one point so it is still drawn.
        assert_eq!(
            items,
            [
                RenderItem::Span {
                    index: 0,
                    x0: 10.0,
                    x1: 11.0
                },
                RenderItem::Span {
                    index: 1,
                    x0: 50.0,
                    x1: 51.0
                }
            ]
        );
    }

    #[test]
    fn a_wide_span_breaks_a_run() {
        let spans = [
            span(10, 11, 0),
            span(12, 13, 0),
            span(14, 100, 1),
            span(101, 102, 0),
            span(103, 104, 0),
        ];
        let items = compute_render_items(&spans, &view());
        assert_eq!(items.len(), 3);
        assert!(matches!(items[0], RenderItem::Merged { ref spans, .. } if *spans == (0..2)));
        assert_eq!(
            items[1],
            RenderItem::Span {
                index: 2,
                x0: 14.0,
                x1: 100.0
            }
        );
        assert!(matches!(items[2], RenderItem::Merged { ref spans, .. } if *spans == (3..5)));
    }

    #[test]
    fn a_merged_run_takes_the_class_with_the_most_time_and_stays_visible() {
        // Ten thousand 10-µs spans in 0..100 ms at 1 ms per point: one item, not ten thousand.
        let us = 1_000;
        let spans: Vec<Span> = (0..10_000)
            .map(|k| Span {
                start_ns: T0 + k * 10 * us,
                end_ns: T0 + k * 10 * us + if k % 4 == 0 { 8 } else { 2 } * us,
                class: u8::from(k % 4 == 0),
            })
            .collect();
        let items = compute_render_items(&spans, &view());
        assert_eq!(items.len(), 1);
        let RenderItem::Merged {
            spans: merged,
            total_ns,
            max_ns,
            class,
            x0,
            x1,
        } = items[0].clone()
        else {
            panic!("{items:?}")
        };
        assert_eq!(merged, 0..10_000);
        // 2,500 spans of 8 µs (class 1) = 20 ms; 7,500 of 2 µs (class 0) = 15 ms.
        assert_eq!(total_ns, 35 * MS);
        assert_eq!(max_ns, 8 * us);
        assert_eq!(class, 1);
        assert_eq!(x0, 0.0);
        assert!(x1 >= 99.9);
    }

    #[test]
    fn density_is_the_busy_fraction_per_column() {
        // 4 columns of 250 ms: the span 0..125 ms fills half of column 0; 200..500 ms covers 50 ms of column 0 and
        // all of column 1; nothing in columns 2 and 3.
        let spans = [span(0, 125, 0), span(200, 500, 0)];
        let d = density(&spans, &view(), 4);
        assert_eq!(d, [0.7, 1.0, 0.0, 0.0]);
        assert!(density(&spans, &view(), 0).is_empty());
    }
}
