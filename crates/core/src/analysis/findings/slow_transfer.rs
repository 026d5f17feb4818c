//! Slow KV transfer (disaggregated serving): requests whose KV cache took most of their time to first token to move
//! from the instance that prefilled them to the one that decoded them. It reads the requests, their stages and each
//! request's first token: it runs on a streamed trace too.

use super::words::{names, row_u32};
use super::{CRITICAL_DELAY_MS, Context, Detector, Finding, Kind, MAX_LISTED_REQUESTS, Severity};
use crate::analysis::metrics::ms;
use crate::analysis::stats::thousands;
use crate::trace::StageKind;

/// A transfer this share of its request's TTFT or more dominates it.
pub const DOMINANT_SHARE: f64 = 0.5;
/// A transfer shorter than this (ms) is no incident, whatever its share: a short prompt's TTFT is short too.
pub const MIN_TRANSFER_MS: f64 = 50.0;

/// The detector of [`Kind::SlowKvTransfer`].
pub(super) struct SlowKvTransfer;

/// A request's time in some of its stages: their total, tokens and span, against its TTFT.
pub(super) struct Spent {
    pub request: u32,
    pub ns: i64,
    pub tokens: Option<u64>,
    pub from_ns: i64,
    pub to_ns: i64,
    pub ttft_ns: i64,
}

/// The requests whose stages that `pick` chooses (rows of the request's explicit stages) took [`DOMINANT_SHARE`] of
/// their TTFT or more and `min_ms` or more, the longest first; and how many requests had such stages at all.
pub(super) fn dominating(cx: &Context<'_>, min_ms: f64, pick: impl Fn(u32) -> Vec<usize>) -> (Vec<Spent>, usize) {
    let st = &cx.trace.stages;
    let mut spent: Vec<Spent> = Vec::new();
    let mut having = 0usize;
    for r in 0..row_u32(cx.trace.request_count()) {
        let rows = pick(r);
        if rows.is_empty() {
            continue;
        }
        having += 1;
        let ns: i64 = rows.iter().map(|&s| (st.end_ns[s] - st.start_ns[s]).max(0)).sum();
        let Some(ttft_ns) = cx.metrics(r).ttft_ns.filter(|&t| t > 0) else {
            continue;
        };
        if ms(ns) < min_ms || (ns as f64) < DOMINANT_SHARE * ttft_ns as f64 {
            continue;
        }
        spent.push(Spent {
            request: r,
            ns,
            tokens: rows.iter().map(|&s| st.tokens[s].map(u64::from)).sum::<Option<u64>>(),
            from_ns: rows.iter().map(|&s| st.start_ns[s]).min().unwrap_or(0),
            to_ns: rows.iter().map(|&s| st.end_ns[s]).max().unwrap_or(0),
            ttft_ns,
        });
    }
    spent.sort_by_key(|m| (std::cmp::Reverse(m.ns), m.request));
    (spent, having)
}

/// The finding of `kind` over `spent` (the longest first) with `summary`: critical when the longest took a second or
/// more; its range the span of `spent` (at least a ns); the first listed requests, and the first token of each (the
/// longest's first, the others' in order).
pub(super) fn dominant_finding(cx: &Context<'_>, kind: Kind, spent: &[Spent], summary: String) -> Finding {
    let longest = spent.first().map_or(0, |m| m.ns);
    let severity = if ms(longest) >= CRITICAL_DELAY_MS {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let mut requests: Vec<u32> = spent.iter().map(|m| m.request).collect();
    requests.truncate(MAX_LISTED_REQUESTS);
    let from_ns = spent.iter().map(|m| m.from_ns).min().unwrap_or(0);
    let to_ns = spent.iter().map(|m| m.to_ns).max().unwrap_or(0).max(from_ns + 1);
    let mut tokens: Vec<usize> = requests
        .iter()
        .filter_map(|&r| {
            let t = cx.tokens.rows(r);
            (!t.is_empty()).then_some(t.start)
        })
        .collect();
    if let Some(rest) = tokens.get_mut(1..) {
        rest.sort_unstable();
    }
    Finding {
        kind,
        severity,
        summary,
        from_ns,
        to_ns,
        requests,
        steps: Vec::new(),
        tokens,
    }
}

impl Detector for SlowKvTransfer {
    fn kind(&self) -> Kind {
        Kind::SlowKvTransfer
    }

    /// The requests whose `kv_transfer` stages took [`DOMINANT_SHARE`] of their TTFT or more, and
    /// [`MIN_TRANSFER_MS`] or more, as one finding: the slowest first, with its tokens and their rate. Critical when
    /// the slowest took a second or more.
    fn detect(&self, cx: &Context<'_>) -> Vec<Finding> {
        let trace = cx.trace;
        let st = &trace.stages;
        let (moved, transferred) = dominating(cx, MIN_TRANSFER_MS, |r| {
            trace
                .explicit_stages_of(r)
                .filter(|&s| st.kind[s] == StageKind::KvTransfer)
                .collect()
        });
        let Some(worst) = moved.first() else {
            return Vec::new();
        };
        let route = format!(
            "{} -> {}",
            trace
                .label(trace.requests.source[worst.request as usize])
                .unwrap_or("?"),
            trace.label(trace.decode_source(worst.request)).unwrap_or("?")
        );
        let seconds = worst.ns as f64 / 1e9;
        // Its bytes, where the trace says: a rate in GB/s is what a link's bandwidth is compared with.
        let bytes: Option<u64> = trace
            .explicit_stages_of(worst.request)
            .filter(|&s| st.kind[s] == StageKind::KvTransfer)
            .map(|s| st.bytes[s])
            .sum();
        let size = bytes.map_or_else(String::new, |b| {
            format!(", {:.1} MB at {:.2} GB/s", b as f64 / 1e6, b as f64 / seconds / 1e9)
        });
        let what = match worst.tokens {
            Some(t) => format!(
                "moving the KV of {} tokens ({} tokens/s{size})",
                thousands(t),
                thousands((t as f64 / seconds).round() as u64)
            ),
            None if bytes.is_some() => format!("moving its KV ({})", size.trim_start_matches(", ")),
            None => "moving its KV (tokens not in the trace)".to_owned(),
        };
        let requests: Vec<u32> = moved.iter().map(|m| m.request).collect();
        let summary = format!(
            "{} of {transferred} requests handed from prefill to decode spent {:.0} % or more of their TTFT in the KV \
             transfer: {}; the slowest, {} ({route}), {:.1} ms of its {:.1} ms TTFT {what}",
            moved.len(),
            DOMINANT_SHARE * 100.0,
            names(trace, &requests),
            trace.request_id(worst.request),
            ms(worst.ns),
            ms(worst.ttft_ns),
        );
        vec![dominant_finding(cx, Kind::SlowKvTransfer, &moved, summary)]
    }
}
