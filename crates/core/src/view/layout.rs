//! Which rows the waterfall shows and in what order, which of them are on screen, and the spans each track draws:
//! an engine track's steps classed by their prefill share, a request track's stages classed by kind.

use std::ops::Range;

use super::lod::Span;
use crate::analysis::metrics::request_metrics;
use crate::trace::{NO_STR, StageKind, Trace};

/// The order of request tracks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum TrackOrder {
    /// By arrival (the trace's order).
    #[default]
    Arrival,
    /// Slowest time to first token first.
    Ttft,
    /// Slowest end-to-end first.
    E2e,
    /// Longest queueing first.
    Queue,
    /// By source, then arrival.
    Source,
}

impl TrackOrder {
    /// Every order with its label.
    pub const ALL: [(TrackOrder, &'static str); 5] = [
        (TrackOrder::Arrival, "arrival"),
        (TrackOrder::Ttft, "TTFT (slowest first)"),
        (TrackOrder::E2e, "E2E (slowest first)"),
        (TrackOrder::Queue, "queue time (longest first)"),
        (TrackOrder::Source, "source"),
    ];
}

/// Which requests to show. Label filters hold label ids ([`NO_STR`] = any).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrackFilter {
    /// `model` label id, or [`NO_STR`].
    pub model: u32,
    /// `app_id` label id, or [`NO_STR`].
    pub app_id: u32,
    /// `user_id` label id, or [`NO_STR`].
    pub user_id: u32,
    /// `finish_reason` label id, or [`NO_STR`].
    pub finish_reason: u32,
    /// Request ids containing this text (case-insensitive); empty = any.
    pub search: String,
}

impl Default for TrackFilter {
    fn default() -> Self {
        TrackFilter {
            model: NO_STR,
            app_id: NO_STR,
            user_id: NO_STR,
            finish_reason: NO_STR,
            search: String::new(),
        }
    }
}

impl TrackFilter {
    fn accepts(&self, trace: &Trace, r: usize) -> bool {
        let q = &trace.requests;
        let label_ok = |want: u32, have: u32| want == NO_STR || want == have;
        label_ok(self.model, q.model[r])
            && label_ok(self.app_id, q.app_id[r])
            && label_ok(self.user_id, q.user_id[r])
            && label_ok(self.finish_reason, q.finish_reason[r])
            && (self.search.is_empty()
                || trace
                    .request_id(r as u32)
                    .to_lowercase()
                    .contains(&self.search.to_lowercase()))
    }
}

/// The request rows to show, in order.
pub fn track_rows(trace: &Trace, order: TrackOrder, filter: &TrackFilter) -> Vec<u32> {
    let mut rows: Vec<u32> = (0..trace.request_count() as u32)
        .filter(|&r| filter.accepts(trace, r as usize))
        .collect();
    let metric = |f: fn(&crate::analysis::metrics::RequestMetrics) -> Option<i64>| {
        move |&r: &u32| std::cmp::Reverse(f(&request_metrics(trace, r)).unwrap_or(i64::MIN))
    };
    match order {
        TrackOrder::Arrival => {}
        TrackOrder::Ttft => rows.sort_by_cached_key(metric(|m| m.ttft_ns)),
        TrackOrder::E2e => rows.sort_by_cached_key(metric(|m| m.e2e_ns)),
        TrackOrder::Queue => rows.sort_by_cached_key(metric(|m| m.queue_ns)),
        TrackOrder::Source => rows.sort_by_key(|&r| (trace.label(trace.requests.source[r as usize]), r)),
    }
    rows
}

/// The rows of height `row_height` that a view of height `view_height`, scrolled down by `scroll`, shows (one row
/// of margin each side, clamped to `rows`).
#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "row counts of a screen"
)]
pub fn visible_rows(scroll: f32, row_height: f32, view_height: f32, rows: usize) -> Range<usize> {
    if rows == 0 || row_height <= 0.0 {
        return 0..0;
    }
    let first = (scroll.max(0.0) / row_height).floor() as usize;
    let last = ((scroll.max(0.0) + view_height.max(0.0)) / row_height).ceil() as usize + 1;
    first.saturating_sub(1).min(rows)..last.min(rows)
}

/// Classes of engine-step spans: `0..=PREFILL_CLASSES`, the step's prefill share of its tokens in tenths.
pub const PREFILL_CLASSES: u8 = 10;

/// What step `i` did, as (prefill, decode) weights for its colour: its prefill and decode tokens; or, when it has
/// prefilling requests but no prefill token count (SGLang's chunks give none), its prefilling and decoding requests,
/// rather than a step with no prefill at all.
pub fn prefill_mix(trace: &Trace, i: usize) -> (u64, u64) {
    let it = &trace.iterations;
    match (it.num_prefill_tokens.at(i), it.num_prefill_reqs.at(i)) {
        (None, Some(r)) if r > 0 => (
            u64::from(r),
            u64::from(it.num_decode_reqs.at(i).or(it.num_decode_tokens.at(i)).unwrap_or(0)),
        ),
        (p, _) => (
            u64::from(p.unwrap_or(0)),
            u64::from(it.num_decode_tokens.at(i).unwrap_or(0)),
        ),
    }
}

/// The steps of a source as spans, classed by prefill share (0 = all decode, 10 = all prefill).
pub fn engine_spans(trace: &Trace, source: u32) -> Vec<Span> {
    let it = &trace.iterations;
    trace
        .iterations_of_source(source)
        .map(|i| {
            let (p, d) = prefill_mix(trace, i);
            let class = (p * u64::from(PREFILL_CLASSES))
                .checked_div(p + d)
                .map_or(0, |c| u8::try_from(c).unwrap_or(0));
            Span {
                start_ns: it.start_ns[i],
                end_ns: it.end_ns[i],
                class,
            }
        })
        .collect()
}

/// The stages of a request as spans, classed by [`StageKind`] (`kind as u8`), sorted and clipped so they do not
/// overlap (a derived decode step can start before the previous one ends when steps are taken from iterations).
pub fn request_spans(trace: &Trace, request: u32) -> Vec<Span> {
    let mut spans: Vec<Span> = trace
        .stages_of(request)
        .into_iter()
        .map(|s| Span {
            start_ns: s.start_ns,
            end_ns: s.end_ns,
            class: s.kind as u8,
        })
        .collect();
    let mut last_end = i64::MIN;
    for s in &mut spans {
        s.start_ns = s.start_ns.max(last_end);
        s.end_ns = s.end_ns.max(s.start_ns);
        last_end = s.end_ns;
    }
    spans
}

/// The stage kind of a request-span class.
pub fn stage_of_class(class: u8) -> StageKind {
    StageKind::ALL.get(class as usize).copied().unwrap_or(StageKind::Other)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn four() -> Trace {
        crate::test_support::sample("four_requests.jsonl")
    }

    #[test]
    fn a_step_of_prefill_chunks_without_a_token_count_is_drawn_as_prefill() {
        // SGLang's chunked prefill: a step with one prefilling request and no prefill token count; a mixed step with
        // one prefill and one decode request; a decode step; a step that counts its prefill tokens.
        let t0 = 1_764_403_200_000_000_000_i64;
        let step = |i: i64, fields: &str| {
            format!(
                r#"{{"kind":"iteration","source":"s","iteration":{i},"start_ns":{},"end_ns":{}{fields}}}"#,
                t0 + i * 1_000_000,
                t0 + i * 1_000_000 + 500_000
            )
        };
        let trace = crate::test_support::trace_of(
            &[
                step(0, r#","num_prefill_reqs":1,"num_decode_reqs":0,"num_decode_tokens":0"#),
                step(1, r#","num_prefill_reqs":1,"num_decode_reqs":1,"num_decode_tokens":1"#),
                step(2, r#","num_prefill_reqs":0,"num_decode_reqs":4,"num_decode_tokens":4"#),
                step(3, r#","num_prefill_tokens":300,"num_decode_tokens":100"#),
            ]
            .join("\n"),
        );
        let source = trace.sources_with_iterations()[0].0;
        let classes: Vec<u8> = engine_spans(&trace, source).iter().map(|s| s.class).collect();
        // All prefill; half by requests; all decode; 300 of 400 tokens.
        assert_eq!(classes, [10, 5, 0, 7]);
    }

    #[test]
    fn rows_on_screen_with_a_margin() {
        // 20-point rows, scrolled by 50 in a 100-point view: rows 2..=7 are (partly) visible; one row of margin.
        assert_eq!(visible_rows(50.0, 20.0, 100.0, 1000), 1..9);
        assert_eq!(visible_rows(0.0, 20.0, 100.0, 3), 0..3);
        assert_eq!(visible_rows(10_000.0, 20.0, 100.0, 3), 3..3);
        assert_eq!(visible_rows(0.0, 0.0, 100.0, 3), 0..0);
    }

    #[test]
    fn orders_and_filters() {
        let t = four();
        let ids = |rows: Vec<u32>| rows.into_iter().map(|r| t.request_id(r).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            ids(track_rows(&t, TrackOrder::Arrival, &TrackFilter::default())),
            ["r1", "r2", "r3", "r4"]
        );
        // TTFT: r3 500, r2 200, r1 150, r4 60 ms.
        assert_eq!(
            ids(track_rows(&t, TrackOrder::Ttft, &TrackFilter::default())),
            ["r3", "r2", "r1", "r4"]
        );
        // Queue: r3 200, r2 30, then r1 and r4 10 ms each (stable: arrival order).
        assert_eq!(
            ids(track_rows(&t, TrackOrder::Queue, &TrackFilter::default())),
            ["r3", "r2", "r1", "r4"]
        );
        let chat = TrackFilter {
            app_id: t.labels.lookup("chat").unwrap(),
            ..TrackFilter::default()
        };
        assert_eq!(ids(track_rows(&t, TrackOrder::Arrival, &chat)), ["r1", "r3", "r4"]);
        let search = TrackFilter {
            search: "R4".into(),
            ..TrackFilter::default()
        };
        assert_eq!(ids(track_rows(&t, TrackOrder::Arrival, &search)), ["r4"]);
    }

    #[test]
    fn engine_steps_are_classed_by_prefill_share() {
        let t = four();
        let spans = engine_spans(&t, t.labels.lookup("engine").unwrap());
        // Step 7: 812 prefill, 0 decode -> 10; step 8: 36 prefill, 1 decode -> 36 * 10 / 37 = 9; step 9: 0 -> 0.
        assert_eq!(spans.iter().map(|s| s.class).collect::<Vec<_>>(), [10, 9, 0]);
    }

    #[test]
    fn request_spans_do_not_overlap() {
        let t = four();
        let spans = request_spans(&t, t.request_row("r1").unwrap());
        assert!(spans.windows(2).all(|w| w[0].end_ns <= w[1].start_ns));
        assert_eq!(
            spans.iter().map(|s| stage_of_class(s.class)).collect::<Vec<_>>(),
            [
                StageKind::Queue,
                StageKind::Prefill,
                StageKind::Decode,
                StageKind::Decode
            ]
        );
    }
}
