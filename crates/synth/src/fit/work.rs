//! What each step of a real trace computed, as the cost model sees it ([`StepWork`]): read from the links between
//! a trace's steps, its prefill chunks and its tokens where the source gives them (a joined llama.cpp run, the
//! simulator's own traces), else from the steps' counts alone.

use crate::cost::StepWork;
use tokenscope_core::trace::{StageKind, Trace, opt_u8, opt_u32};

/// How a step's work was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Linkage {
    /// From the prefill chunks and tokens linked to the step: every term of the model can be fitted.
    Linked,
    /// From the step's own counts (prompt tokens, decoding requests): the context each decode reads and the
    /// attention of a chunk over earlier tokens are unknown, so those terms are not fitted.
    Counts,
}

/// The kind of a step, for the residuals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepKind {
    /// Prompt tokens only.
    Prefill,
    /// Decoding sequences only.
    Decode,
    /// Both in one step.
    Mixed,
}

impl StepKind {
    /// The kind of a step that did this work.
    pub fn of(work: &StepWork) -> Self {
        match (work.prefill_tokens > 0, work.decode_seqs > 0) {
            (true, false) => StepKind::Prefill,
            (false, true) => StepKind::Decode,
            _ => StepKind::Mixed,
        }
    }

    /// Its name in the report.
    pub fn name(self) -> &'static str {
        match self {
            StepKind::Prefill => "prefill only",
            StepKind::Decode => "decode only",
            StepKind::Mixed => "prefill + decode",
        }
    }
}

/// One step: what it computed and how long it took.
#[derive(Debug, Clone, PartialEq)]
pub struct StepSample {
    /// The work of the step.
    pub work: StepWork,
    /// Its duration, ms.
    pub duration_ms: f64,
    /// The wait since the same engine's previous step ended, ms (`None` for its first step).
    pub gap_ms: Option<f64>,
}

/// The steps of a trace that did known work, and how it was read.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceSteps {
    /// One per step with work and a positive duration.
    pub steps: Vec<StepSample>,
    /// How their work was read.
    pub linkage: Linkage,
    /// Steps of the trace left out: no work known, or no positive duration.
    pub skipped: usize,
}

/// The steps of `trace` with the work each did. When any token of the trace is linked to a step, the work is read
/// from the links: a prefill chunk of `n` tokens after `p` already computed tokens of its request (its cached
/// tokens and earlier chunks) adds `n` prompt tokens and `n·p + n(n+1)/2` attention pairs; a token sampled by a
/// step in which its request did not prefill is a decode over `input_tokens + index` context tokens, and the drafts
/// it names are verify tokens (a verify step's further tokens of that request add nothing: they came out of the same
/// pass). Otherwise the step's own counts give the prompt tokens, the decoding requests and the drafts verified.
pub fn trace_steps(trace: &Trace) -> TraceSteps {
    let n = trace.iterations.len();
    let linked = trace.tokens.iter_row.iter().any(|&r| opt_u32(r).is_some());
    let mut work = vec![StepWork::default(); n];
    let mut known = vec![false; n];
    if linked {
        let mut prefill_rows: Vec<u32> = Vec::new();
        for r in 0..trace.requests.len() {
            #[expect(clippy::cast_possible_truncation, reason = "row ids of a trace are u32")]
            let row = r as u32;
            prefill_rows.clear();
            let mut before = u64::from(trace.requests.cached_tokens.at(r).unwrap_or(0));
            for s in trace.explicit_stages_of(row) {
                if trace.stages.kind[s] != StageKind::Prefill {
                    continue;
                }
                let (Some(step), Some(tokens)) = (trace.stages.iter_row[s], trace.stages.tokens[s]) else {
                    continue;
                };
                let Some(w) = work.get_mut(step as usize) else {
                    continue;
                };
                w.add_prefill(u64::from(tokens), before);
                known[step as usize] = true;
                before += u64::from(tokens);
                prefill_rows.push(step);
            }
            let input = u64::from(trace.requests.input_tokens.at(r).unwrap_or(0));
            let mut last_step = None;
            for t in trace.tokens_of(row) {
                let Some(step) = opt_u32(trace.tokens.iter_row[t]) else {
                    continue;
                };
                // A verify step's other tokens came out of the same pass: one decoding sequence, its drafts
                // verified beside it (named on the step's first token of the request).
                let again = last_step.replace(step) == Some(step);
                if again || prefill_rows.contains(&step) {
                    continue; // the first token, sampled by the step that finished the prompt
                }
                if let Some(w) = work.get_mut(step as usize) {
                    let drafts = opt_u8(trace.tokens.spec_drafted[t]).map_or(0, u64::from);
                    w.add_verify(input + u64::from(trace.tokens.index[t]), drafts);
                    known[step as usize] = true;
                }
            }
        }
    } else {
        let it = &trace.iterations;
        for i in 0..n {
            let prefill = it.num_prefill_tokens.at(i).filter(|&t| t > 0);
            let decode = it.num_decode_reqs.at(i).or(it.num_decode_tokens.at(i));
            if prefill.is_none() && decode.is_none() {
                continue;
            }
            work[i].prefill_tokens = u64::from(prefill.unwrap_or(0));
            work[i].prefill_chunks = u64::from(it.num_prefill_reqs.at(i).unwrap_or(u32::from(prefill.is_some())));
            work[i].decode_seqs = u64::from(decode.unwrap_or(0));
            work[i].verify_tokens = u64::from(it.spec_drafted_tokens.at(i).unwrap_or(0));
            known[i] = work[i].prefill_tokens + work[i].decode_seqs > 0;
        }
    }
    let it = &trace.iterations;
    let mut steps = Vec::with_capacity(n);
    let mut skipped = 0;
    for i in 0..n {
        let duration = it.end_ns[i] - it.start_ns[i];
        if !known[i] || duration <= 0 {
            skipped += 1;
            continue;
        }
        let gap_ms = (i > 0 && it.source[i - 1] == it.source[i])
            .then(|| tokenscope_core::analysis::metrics::ms(it.start_ns[i] - it.end_ns[i - 1]))
            .filter(|g| *g >= 0.0);
        steps.push(StepSample {
            work: std::mem::take(&mut work[i]),
            duration_ms: tokenscope_core::analysis::metrics::ms(duration),
            gap_ms,
        });
    }
    TraceSteps {
        steps,
        linkage: if linked { Linkage::Linked } else { Linkage::Counts },
        skipped,
    }
}
