//! Token-count mismatches: `output_tokens` that disagrees with the token records.

use super::words::row_u32;
use super::{Context, Detector, Finding, Kind, MAX_LISTED_REQUESTS, Severity, Thresholds};
use crate::analysis::summary::Slo;
use crate::trace::Trace;

/// The detector of [`Kind::TokenMismatch`].
pub(super) struct TokenMismatch;

impl Detector for TokenMismatch {
    fn kind(&self) -> Kind {
        Kind::TokenMismatch
    }

    /// The requests whose `output_tokens` disagrees with their token records (as `tokenscope summary` counts them),
    /// as one finding: the largest differences first.
    fn detect(&self, cx: &Context<'_>) -> Vec<Finding> {
        let trace = cx.trace;
        let mut bad: Vec<(u32, u32, usize)> = (0..row_u32(trace.request_count()))
            .filter_map(|r| {
                crate::analysis::summary::mismatch(trace.requests.output_tokens.at(r as usize), cx.tokens.rows(r).len())
                    .map(|(u, k)| (r, u, k))
            })
            .collect();
        if bad.is_empty() {
            return Vec::new();
        }
        bad.sort_by_key(|&(r, u, k)| (std::cmp::Reverse((u as usize).abs_diff(k)), r));
        let rows: Vec<u32> = bad.iter().map(|b| b.0).collect();
        let (from_ns, to_ns) = cx.span_of(&rows);
        let (subject, usage, records) = bad[0];
        let summary = format!(
            "output_tokens disagrees with the token records of {} request{}: {} says {usage} and has {records} record{}",
            bad.len(),
            if bad.len() == 1 { "" } else { "s" },
            trace.request_id(subject),
            if records == 1 { "" } else { "s" },
        );
        let mut requests = rows;
        requests.truncate(MAX_LISTED_REQUESTS);
        let tokens = cx.last_tokens(&requests);
        vec![Finding {
            kind: Kind::TokenMismatch,
            severity: Severity::Info,
            summary,
            from_ns,
            to_ns,
            requests,
            steps: Vec::new(),
            tokens,
        }]
    }
}

/// [`Kind::TokenMismatch`]'s findings alone, unsorted.
pub fn token_mismatches(trace: &Trace) -> Vec<Finding> {
    TokenMismatch.detect(&Context::new(trace, &Slo::default(), &Thresholds::default()))
}
