//! The stages of one request, explicit and derived as the format says: `queue` from arrival to scheduling, one
//! `decode` per output token after the first (from its iteration, else from the previous token), and one `prefill`
//! from scheduling to the first token when the trace has no prefill stage; `waiting` from arrival to the first token
//! when the trace has neither a scheduling time nor a queue or prefill stage (a client-side trace: the wait is
//! known, its split is not). Explicit stages win over derived ones.
//! Derived stages are computed on demand, never stored: ten million tokens would otherwise mean ten million rows.

use super::tables::{StageKind, opt_u32};
use super::{NULL_I64, Trace};

/// A span of a request, explicit or derived.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StageSpan {
    /// What the span is.
    pub kind: StageKind,
    /// Start (ns since the Unix epoch).
    pub start_ns: i64,
    /// End.
    pub end_ns: i64,
    /// Engine step number, when known.
    pub iteration: Option<i64>,
    /// Row of that step in `Trace::iterations`.
    pub iter_row: Option<u32>,
    /// Tokens computed in the span.
    pub tokens: Option<u32>,
    /// For a derived decode span, the row of the token it produced.
    pub token: Option<u32>,
    /// True when derived rather than written in the trace.
    pub derived: bool,
}

impl Trace {
    /// The stages of a request sorted by start: explicit ones, plus derived ones for kinds it has none of.
    pub fn stages_of(&self, request: u32) -> Vec<StageSpan> {
        let r = request as usize;
        let explicit = self.explicit_stages_of(request);
        let mut has = [false; StageKind::ALL.len()];
        let mut out: Vec<StageSpan> = Vec::with_capacity(explicit.len() + 2);
        for i in explicit {
            let kind = self.stages.kind[i];
            has[kind as usize] = true;
            out.push(StageSpan {
                kind,
                start_ns: self.stages.start_ns[i],
                end_ns: self.stages.end_ns[i],
                iteration: self.stages.iteration[i],
                iter_row: self.stages.iter_row[i],
                tokens: self.stages.tokens[i],
                token: None,
                derived: false,
            });
        }
        let arrival = self.requests.arrival_ns[r];
        let scheduled = self.requests.scheduled_ns.at(r);
        let tokens = self.tokens_of(request);
        let derived = |kind, start_ns, end_ns| StageSpan {
            kind,
            start_ns,
            end_ns,
            iteration: None,
            iter_row: None,
            tokens: None,
            token: None,
            derived: true,
        };
        if !has[StageKind::Queue as usize]
            && let Some(s) = scheduled
        {
            out.push(derived(StageKind::Queue, arrival, s));
        }
        if !has[StageKind::Prefill as usize] {
            let first = self.first_token_ns(request);
            if let (Some(s), Some(f)) = (scheduled, first)
                && f >= s
            {
                out.push(derived(StageKind::Prefill, s, f));
            }
        }
        if scheduled.is_none()
            && !has[StageKind::Queue as usize]
            && !has[StageKind::Prefill as usize]
            && let Some(f) = self.first_token_ns(request).filter(|&f| f > arrival)
        {
            out.push(derived(StageKind::Waiting, arrival, f));
        }
        if !has[StageKind::Decode as usize] {
            for t in tokens.clone().skip(1) {
                let iter_row = opt_u32(self.tokens.iter_row[t]);
                let (start_ns, end_ns) = match iter_row {
                    Some(it) => (
                        self.iterations.start_ns[it as usize],
                        self.iterations.end_ns[it as usize],
                    ),
                    None => (self.tokens.emitted_ns[t - 1], self.tokens.emitted_ns[t]),
                };
                let n = self.tokens.iteration[t];
                out.push(StageSpan {
                    kind: StageKind::Decode,
                    start_ns,
                    end_ns,
                    iteration: (n != NULL_I64).then_some(n),
                    iter_row,
                    tokens: Some(1),
                    token: Some(t as u32),
                    derived: true,
                });
            }
        }
        out.sort_by_key(|s| (s.start_ns, s.end_ns));
        out
    }
}
