//! A Parquet trace too big for the memory budget, opened without its tokens: its requests, steps and stages are
//! read (drawn as they come, as a load's are), then its tokens are streamed once through every detector
//! (`load::stream::findings`), and the trace opens with those findings. What needs the tokens in memory (the
//! microscope's tokens, the statistics' inter-token latencies) is absent, and a notice says why.

use crate::analysis::findings::{Finding, STREAMABLE, Thresholds};
use crate::analysis::summary::Slo;
use crate::ingest::{LoadError, Progress};
use crate::load::Loaded;
use crate::load::stream::StreamError;
use crate::load::stream::findings::find_reporting;
use crate::ui::shell::session::TraceSource;

/// A trace opened without its tokens: the findings of a stream of them, and what to tell the user.
pub struct WithoutTokens {
    pub findings: Vec<Finding>,
    pub notice: String,
    /// What they were judged with.
    pub slo: Slo,
    pub thresholds: Thresholds,
}

/// The trace of `source` without its tokens and its streamed findings, when `over` (the load's refusal) is a
/// Parquet trace's budget; else `over` itself, or why the stream failed.
pub fn open(
    source: &TraceSource,
    over: LoadError,
    progress: &Progress,
    slo: Slo,
    thresholds: &Thresholds,
) -> Result<(Loaded, WithoutTokens), LoadError> {
    let LoadError::OverBudget { need, budget, .. } = &over else {
        return Err(over);
    };
    let (path, window) = match source {
        TraceSource::Path(p) => (p, None),
        TraceSource::Part(p, w) => (p, Some(w)),
        _ => return Err(over),
    };
    let Ok(files) = crate::load::parquet_files(path) else {
        return Err(over);
    };
    let (need, budget) = (*need, *budget);
    let done = match find_reporting(&files, window, &slo, thresholds, &STREAMABLE, progress) {
        Ok(d) => d,
        Err(StreamError::Load(e)) => return Err(e),
        // A trace whose tokens cannot be streamed is refused as the load refused it.
        Err(StreamError::Unordered(_)) => return Err(over),
    };
    let size = crate::ingest::size;
    let notice = format!(
        "Opened without its tokens: loaded, it would take about {}, over the memory budget of {}. Its findings come \
         from a stream of its tokens on disk; the tokens are not shown, nor figures the requests do not state.",
        size(need),
        size(budget),
    );
    // The findings' token rows are the stream's, not rows of this trace (it has none).
    let findings = done
        .findings
        .into_iter()
        .map(|mut f| {
            f.tokens.clear();
            f
        })
        .collect();
    let loaded = Loaded {
        trace: done.trace,
        report: done.report,
    };
    Ok((
        loaded,
        WithoutTokens {
            findings,
            notice,
            slo,
            thresholds: *thresholds,
        },
    ))
}
