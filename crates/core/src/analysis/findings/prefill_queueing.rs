//! Prefill-instance queueing (disaggregated serving): requests that waited on their prefill instance for most of
//! their time to first token, before their prefill began: the prefill instances are too few (or their prefill budget
//! too small) for the traffic, whatever the decode instances do. It reads the requests and their stages: it runs on a
//! streamed trace too.

use super::slow_transfer::{DOMINANT_SHARE, dominant_finding, dominating};
use super::words::names;
use super::{Context, Detector, Finding, Kind};
use crate::analysis::metrics::ms;
use crate::trace::StageKind;

/// A wait shorter than this (ms) is no incident, whatever its share of TTFT.
pub const MIN_QUEUE_MS: f64 = 100.0;

/// The detector of [`Kind::PrefillQueueing`].
pub(super) struct PrefillQueueing;

impl Detector for PrefillQueueing {
    fn kind(&self) -> Kind {
        Kind::PrefillQueueing
    }

    /// The requests handed from a prefill instance to another (decode) instance whose `queue` stages before their
    /// first prefill stage took [`DOMINANT_SHARE`] of their TTFT or more, and [`MIN_QUEUE_MS`] or more, as one
    /// finding, the longest wait first with its instance. Critical when it took a second or more.
    fn detect(&self, cx: &Context<'_>) -> Vec<Finding> {
        let trace = cx.trace;
        let st = &trace.stages;
        let (waited, handed) = dominating(cx, MIN_QUEUE_MS, |r| {
            if trace.decode_source(r) == trace.requests.source[r as usize] {
                return Vec::new();
            }
            let rows: Vec<usize> = trace.explicit_stages_of(r).collect();
            let Some(prefill) = rows
                .iter()
                .filter(|&&s| st.kind[s] == StageKind::Prefill)
                .map(|&s| st.start_ns[s])
                .min()
            else {
                return Vec::new();
            };
            rows.into_iter()
                .filter(|&s| st.kind[s] == StageKind::Queue && st.end_ns[s] <= prefill)
                .collect()
        });
        let Some(worst) = waited.first() else {
            return Vec::new();
        };
        let requests: Vec<u32> = waited.iter().map(|m| m.request).collect();
        let summary = format!(
            "{} of {handed} requests handed from prefill to decode waited on their prefill instance for {:.0} % or \
             more of their TTFT before their prefill began: {}; the longest, {} on {}, {:.1} ms of its {:.1} ms TTFT \
             (more prefill instances, or a larger prefill budget per step, would take it)",
            waited.len(),
            DOMINANT_SHARE * 100.0,
            names(trace, &requests),
            trace.request_id(worst.request),
            trace
                .label(trace.requests.source[worst.request as usize])
                .unwrap_or("?"),
            ms(worst.ns),
            ms(worst.ttft_ns),
        );
        vec![dominant_finding(cx, Kind::PrefillQueueing, &waited, summary)]
    }
}
