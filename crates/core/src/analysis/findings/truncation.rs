//! Truncation: answers cut at their token limit (`finish_reason = length`).

use super::words::{names, percent, row_u32};
use super::{Context, Detector, Finding, Kind, MAX_LISTED_REQUESTS, Severity, Thresholds};
use crate::analysis::stats::thousands;
use crate::analysis::summary::Slo;
use crate::trace::Trace;

/// The detector of [`Kind::Truncation`].
pub(super) struct Truncation;

impl Detector for Truncation {
    fn kind(&self) -> Kind {
        Kind::Truncation
    }

    /// The requests that stopped at their token limit (`finish_reason = length`), as one finding: longest answers
    /// first; each listed request's last token.
    fn detect(&self, cx: &Context<'_>) -> Vec<Finding> {
        let trace = cx.trace;
        let Some(length) = trace.labels.lookup("length") else {
            return Vec::new();
        };
        let mut cut: Vec<u32> = (0..row_u32(trace.request_count()))
            .filter(|&r| trace.requests.finish_reason[r as usize] == length)
            .collect();
        if cut.is_empty() {
            return Vec::new();
        }
        let (from_ns, to_ns) = cx.span_of(&cut);
        cut.sort_by_key(|&r| (std::cmp::Reverse(cx.output_tokens(r)), r));
        let n = trace.request_count();
        let subject = cut[0];
        let output = cx.output_tokens(subject);
        let tokens_word = if output == 1 { "token" } else { "tokens" };
        let summary = if cut.len() == 1 {
            format!(
                "{} stopped at its token limit (finish_reason length) after {} {tokens_word}",
                trace.request_id(subject),
                thousands(u64::from(output)),
            )
        } else {
            format!(
                "{} of {n} requests ({:.1} %) stopped at their token limit (finish_reason length): {}; the longest, {}, \
                 after {} {tokens_word}",
                cut.len(),
                percent(cut.len(), n),
                names(trace, &cut),
                trace.request_id(subject),
                thousands(u64::from(output)),
            )
        };
        cut.truncate(MAX_LISTED_REQUESTS);
        let tokens = cx.last_tokens(&cut);
        vec![Finding {
            kind: Kind::Truncation,
            severity: Severity::Info,
            summary,
            from_ns,
            to_ns,
            requests: cut,
            steps: Vec::new(),
            tokens,
        }]
    }
}

/// [`Kind::Truncation`]'s findings alone, unsorted.
pub fn truncation(trace: &Trace) -> Vec<Finding> {
    Truncation.detect(&Context::new(trace, &Slo::default(), &Thresholds::default()))
}
