//! Overload: requests arrived faster than an instance could schedule them, for long enough that requests kept
//! waiting a second or more in its queue. A condition that lasts, not an incident: one finding per episode, with the
//! arrival and service rates, the queue's growth and peak, the queue time and TTFT it caused, and the throughput the
//! instance kept up while saturated (the capacity the trace shows).
//!
//! The queue of a request is arrival to scheduling (`scheduled_ns`, else the server's own queue time); traces that
//! have neither (client-side recordings) cannot show it, and this detector says nothing of them.

use std::fmt::Write as _;

use rustc_hash::FxHashMap as HashMap;

use super::words::{duration, range, row_u32, thousands_f};
use super::{After, Context, Detector, Finding, Kind, MAX_LISTED_REQUESTS, RequestTokens, Severity, Visitor};
use crate::analysis::metrics::median;
use crate::trace::Trace;

/// Two stretches of a non-empty queue closer than this are one episode: a queue that empties for an instant
/// between two steps is not a queue that kept up.
const MERGE_GAP_NS: i64 = 1_000_000_000;

/// An episode whose requests waited this long in the queue (median) is critical: users wait before anything
/// happens.
const CRITICAL_MEDIAN_WAIT_NS: i64 = 10_000_000_000;

/// The detector of [`Kind::Overload`].
pub(super) struct Overload;

impl Detector for Overload {
    fn kind(&self) -> Kind {
        Kind::Overload
    }

    /// Per instance (source; one group when the trace names none): the stretches during which a request that waited
    /// `overload_queue_ms` or more was in the queue, stretches less than a second apart merged (a busy engine
    /// always has someone waiting a few ms; what matters is how long). One lasting `overload_min_s` or more, whose
    /// arrivals waited `overload_queue_ms` or more (median), is an episode, unless one request's prefill held the
    /// instance for half of it (the prefill monopoly's finding).
    fn visitor<'c>(&self, cx: &'c Context<'c>) -> Option<Box<dyn Visitor<'c> + 'c>> {
        let (trace, th) = (cx.trace, cx.th);
        #[expect(clippy::cast_possible_truncation, reason = "seconds and ms of a trace")]
        let (min_ns, wait_ns) = ((th.overload_min_s * 1e9) as i64, (th.overload_queue_ms * 1e6) as i64);
        // The episodes first, their findings once the tokens they served are counted (in the pass over the tokens).
        let spans = queue_spans(trace);
        let mut episodes: Vec<(usize, Span, i64)> = Vec::new();
        for (k, (source, waits)) in spans.iter().enumerate() {
            for (from, to) in busy_periods(waits, wait_ns) {
                if to - from < min_ns {
                    continue;
                }
                let mut queued: Vec<i64> = waits
                    .iter()
                    .filter(|w| (from..=to).contains(&w.arrival))
                    .map(|w| w.scheduled - w.arrival)
                    .collect();
                let Some(median_wait) = median(&mut queued) else {
                    continue;
                };
                if median_wait < wait_ns || held_by_one(trace, *source, from, to) {
                    // Short waits; or one prompt held the instance: the prefill monopoly's finding, not overload.
                    continue;
                }
                episodes.push((k, (from, to), median_wait));
            }
        }
        // Per source, its episodes' spans (disjoint, by start) and their places in `episodes`.
        let mut by_source: HashMap<u32, Vec<(Span, usize)>> = HashMap::default();
        for (e, &(k, span, _)) in episodes.iter().enumerate() {
            by_source.entry(spans[k].0).or_default().push((span, e));
        }
        for v in by_source.values_mut() {
            v.sort_unstable();
        }
        Some(Box::new(Served {
            cx,
            served: vec![0; episodes.len()],
            spans,
            episodes,
            by_source,
        }))
    }
}

/// The overload episodes, and the output tokens each episode's instance emitted during it (its requests' tokens
/// emitted in its span), counted in the pass over the tokens.
struct Served<'c> {
    cx: &'c Context<'c>,
    spans: Vec<(u32, Vec<Wait>)>,
    episodes: Vec<(usize, Span, i64)>,
    by_source: HashMap<u32, Vec<(Span, usize)>>,
    served: Vec<u64>,
}

impl<'c> Visitor<'c> for Served<'c> {
    fn see(&mut self, rt: &RequestTokens<'_>) {
        let Some(list) = self.by_source.get(&self.cx.trace.requests.source[rt.request as usize]) else {
            return;
        };
        for &t in rt.emitted_ns {
            // The last episode starting at or before `t`, when `t` is inside it.
            let k = list.partition_point(|((from, _), _)| *from <= t);
            if let Some(&((_, to), e)) = k.checked_sub(1).and_then(|k| list.get(k))
                && t <= to
            {
                self.served[e] += 1;
            }
        }
    }

    fn finish(self: Box<Self>) -> After<'c> {
        let Served {
            cx,
            spans,
            episodes,
            served,
            ..
        } = *self;
        let mut out: Vec<Finding> = episodes
            .iter()
            .zip(served)
            .map(|(&(k, span, median_wait), tokens)| {
                let (source, waits) = &spans[k];
                let inside: Vec<&Wait> = waits
                    .iter()
                    .filter(|w| (span.0..=span.1).contains(&w.arrival))
                    .collect();
                episode(cx, *source, waits, &inside, span, median_wait, tokens)
            })
            .collect();
        // Instances with counter samples but no steps (a server log): judged from the samples.
        out.extend(super::from_samples::overload(cx.trace, cx.th));
        After::Findings(out)
    }
}

/// [`Kind::Overload`]'s findings alone, unsorted.
pub fn overload(trace: &Trace, th: &super::Thresholds) -> Vec<Finding> {
    Overload.detect(&Context::new(trace, &crate::analysis::summary::Slo::default(), th))
}

/// One request's wait in the queue.
#[derive(Debug, Clone, Copy)]
struct Wait {
    request: u32,
    arrival: i64,
    scheduled: i64,
}

/// The queue waits of each source, by arrival.
fn queue_spans(trace: &Trace) -> Vec<(u32, Vec<Wait>)> {
    let q = &trace.requests;
    let mut by_source: HashMap<u32, Vec<Wait>> = HashMap::default();
    for r in 0..row_u32(trace.request_count()) {
        let ri = r as usize;
        let arrival = q.arrival_ns[ri];
        let scheduled = q
            .scheduled_ns
            .at(ri)
            .or_else(|| q.server_queue_ns.at(ri).map(|w| arrival + w.max(0)));
        if let Some(scheduled) = scheduled.filter(|&s| s >= arrival) {
            by_source.entry(q.source[ri]).or_default().push(Wait {
                request: r,
                arrival,
                scheduled,
            });
        }
    }
    let mut out: Vec<(u32, Vec<Wait>)> = by_source.into_iter().collect();
    for (_, v) in &mut out {
        v.sort_by_key(|w| (w.arrival, w.request));
    }
    out.sort_by_key(|(s, _)| *s);
    out
}

/// A stretch of time, `(from, to)` in ns.
type Span = (i64, i64);

/// True when one request's prefill took half of `[from, to]` or more on `source`: the queue grew behind one prompt.
fn held_by_one(trace: &Trace, source: u32, from: i64, to: i64) -> bool {
    let st = &trace.stages;
    let mut by_request: HashMap<u32, i64> = HashMap::default();
    for s in 0..st.len() {
        let r = st.request[s];
        if st.kind[s] == crate::trace::StageKind::Prefill && trace.requests.source.get(r as usize) == Some(&source) {
            let overlap = st.end_ns[s].min(to) - st.start_ns[s].max(from);
            if overlap > 0 {
                *by_request.entry(r).or_default() += overlap;
            }
        }
    }
    by_request.values().any(|&t| 2 * t >= to - from)
}

/// The stretches during which the queue held a request that waited `long` or more, those less than
/// [`MERGE_GAP_NS`] apart merged.
fn busy_periods(waits: &[Wait], long: i64) -> Vec<(i64, i64)> {
    // Waits sorted by arrival: a stretch grows while the next arrival comes before the stretch's last scheduling.
    let mut out: Vec<(i64, i64)> = Vec::new();
    for w in waits
        .iter()
        .filter(|w| w.scheduled > w.arrival && w.scheduled - w.arrival >= long)
    {
        match out.last_mut() {
            Some(last) if w.arrival <= last.1 + MERGE_GAP_NS => last.1 = last.1.max(w.scheduled),
            _ => out.push((w.arrival, w.scheduled)),
        }
    }
    out
}

/// The most requests waiting at once in `[from, to]`, and when.
fn peak_queue(waits: &[Wait], from: i64, to: i64) -> (usize, i64) {
    let mut events: Vec<(i64, i32)> = Vec::new();
    for w in waits
        .iter()
        .filter(|w| w.arrival <= to && w.scheduled >= from && w.scheduled > w.arrival)
    {
        events.push((w.arrival, 1));
        events.push((w.scheduled, -1));
    }
    // At equal times, schedule before arriving: a request taken at the instant another arrives does not add up.
    events.sort_unstable();
    let (mut n, mut peak, mut at) = (0i64, 0i64, from);
    for (t, d) in events {
        n += i64::from(d);
        if n > peak {
            (peak, at) = (n, t);
        }
    }
    (usize::try_from(peak).unwrap_or(0), at)
}

/// Seconds or minutes after the trace's start, for a sentence.
fn since_start(cx: &Context<'_>, ns: i64) -> String {
    #[expect(clippy::cast_precision_loss, reason = "seconds of a trace")]
    let s = (ns - cx.start_ns()) as f64 / 1e9;
    if s >= 120.0 {
        format!("{:.1} min", s / 60.0)
    } else {
        format!("{s:.1} s")
    }
}

/// The finding of one episode.
#[expect(clippy::cast_precision_loss, reason = "counts and ns far below 2^53")]
fn episode(
    cx: &Context<'_>,
    source: u32,
    waits: &[Wait],
    inside: &[&Wait],
    (from, to): (i64, i64),
    median_wait: i64,
    tokens: u64,
) -> Finding {
    let trace = cx.trace;
    let secs = (to - from) as f64 / 1e9;
    let arrived = inside.len();
    let scheduled = waits.iter().filter(|w| (from..=to).contains(&w.scheduled)).count();
    let (peak, peak_at) = peak_queue(waits, from, to);
    // Over the whole episode what arrived was scheduled (it ends when the queue empties): the rates that show the
    // overload are those of the growth, up to the peak.
    let grown = if peak_at > from { peak_at } else { to };
    let grow_secs = (grown - from) as f64 / 1e9;
    let arrived_growing = waits.iter().filter(|w| (from..=grown).contains(&w.arrival)).count();
    let scheduled_growing = waits.iter().filter(|w| (from..=grown).contains(&w.scheduled)).count();
    let longest = inside.iter().map(|w| w.scheduled - w.arrival).max().unwrap_or(0);
    // TTFT at the start and at the end: the median of the first and of the last quarter of the arrivals.
    let quarter = (arrived / 4).max(1);
    let ttft = |ws: &[&Wait]| {
        let mut v: Vec<i64> = ws
            .iter()
            .filter_map(|w| cx.first_token_ns(w.request).map(|t| t - w.arrival))
            .collect();
        median(&mut v)
    };
    let (ttft_start, ttft_end) = (ttft(&inside[..quarter]), ttft(&inside[arrived - quarter..]));
    let on = trace.label(source).map_or(String::new(), |s| format!(" on {s}"));
    let mut summary = format!(
        "Overload{on} for {} from {}: until the queue peaked at {peak} waiting at {}, {:.2} requests/s arrived and \
         {:.2}/s were scheduled; requests waited {} in the queue (median, {} at most)",
        duration(to - from),
        since_start(cx, from),
        since_start(cx, peak_at),
        arrived_growing as f64 / grow_secs,
        scheduled_growing as f64 / grow_secs,
        duration(median_wait),
        duration(longest),
    );
    if let (Some(a), Some(b)) = (ttft_start, ttft_end) {
        let _ = write!(summary, " and TTFT went from {} to {}", duration(a), duration(b));
    }
    let _ = write!(
        summary,
        ". Served while saturated: {:.2} requests/s",
        scheduled as f64 / secs
    );
    if tokens > 0 {
        let rate = tokens as f64 / secs;
        let rate = if rate < 100.0 {
            format!("{rate:.1}")
        } else {
            thousands_f(rate)
        };
        let _ = write!(summary, ", {rate} output tokens/s: the capacity this trace shows");
    }
    let mut hurt: Vec<&Wait> = inside.to_vec();
    hurt.sort_by_key(|w| (std::cmp::Reverse(w.scheduled - w.arrival), w.request));
    let requests: Vec<u32> = hurt.iter().take(MAX_LISTED_REQUESTS).map(|w| w.request).collect();
    let (from_ns, to_ns) = range(from, to);
    Finding {
        kind: Kind::Overload,
        severity: if median_wait >= CRITICAL_MEDIAN_WAIT_NS {
            Severity::Critical
        } else {
            Severity::Warning
        },
        summary,
        from_ns,
        to_ns,
        tokens: requests
            .first()
            .and_then(|&r| cx.tokens.rows(r).next())
            .into_iter()
            .collect(),
        requests,
        steps: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(request: u32, arrival_s: f64, scheduled_s: f64) -> Wait {
        let ns = |s: f64| (s * 1e9) as i64;
        Wait {
            request,
            arrival: ns(arrival_s),
            scheduled: ns(scheduled_s),
        }
    }

    #[test]
    fn a_queue_that_empties_for_under_a_second_is_one_stretch() {
        // 0-2 s, 2.5-4 s (0.5 s apart: merged), then 6-7 s (2 s later: its own); an instant wait makes none.
        let waits = [w(0, 0.0, 2.0), w(1, 2.5, 4.0), w(2, 5.0, 5.0), w(3, 6.0, 7.0)];
        assert_eq!(
            busy_periods(&waits, 1),
            [(0, 4_000_000_000), (6_000_000_000, 7_000_000_000)]
        );
        // Only waits of 1.5 s or more: 0-2 s and 2.5-4 s.
        assert_eq!(busy_periods(&waits, 1_500_000_000), [(0, 4_000_000_000)]);
    }

    #[test]
    fn the_peak_counts_requests_waiting_at_once() {
        // Waiting: r0 0-3 s, r1 1-2 s, r2 1.5-4 s: three at 1.5 s; r1 leaves at 2 s as r3 arrives (two then three).
        let waits = [w(0, 0.0, 3.0), w(1, 1.0, 2.0), w(2, 1.5, 4.0), w(3, 2.0, 2.5)];
        assert_eq!(peak_queue(&waits, 0, 4_000_000_000), (3, 1_500_000_000));
    }
}
