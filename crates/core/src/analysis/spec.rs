//! Speculative decoding's figures of a trace: drafted and accepted draft tokens, the acceptance rate, tokens per
//! verify step and acceptance by draft position, each from the finest record that says it (`docs/SPECULATIVE.md`).

use serde::Serialize;

use crate::trace::{SpecRole, Trace, opt_u8};

/// Where the drafted and accepted counts came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SpecSource {
    /// The requests' totals (a server log's task lines, a response's figures).
    Requests,
    /// The tokens' roles: each verify step's drafts on its first token, its accepted drafts marked.
    Tokens,
    /// The engine steps' totals (iteration statistics).
    Steps,
    /// The engine's counters over intervals (a server's periodic log line).
    Samples,
}

/// Speculative decoding over a set of requests (or a whole trace).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpecFigures {
    /// Where `drafted` and `accepted` come from.
    pub from: SpecSource,
    /// Draft tokens proposed.
    pub drafted_tokens: u64,
    /// Draft tokens accepted.
    pub accepted_tokens: u64,
    /// accepted / drafted; `None` when nothing was drafted.
    pub acceptance_rate: Option<f64>,
    /// Verify steps of a request, counted from the tokens (a step's first token names its drafts); `None` where the
    /// tokens do not say.
    pub verify_steps: Option<u64>,
    /// Tokens emitted per verify step (its accepted drafts and the bonus token), from the tokens.
    pub acceptance_length: Option<f64>,
    /// Acceptance at draft position k = 1, 2, ...: among the verify steps that proposed k drafts or more, the share
    /// that accepted k or more; empty where the tokens do not say.
    pub acceptance_by_position: Vec<f64>,
}

/// One verify step of one request, read from its tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VerifyStep {
    /// The token row that names the step's drafts (the first it emitted).
    pub first: usize,
    /// Drafts proposed.
    pub drafted: u32,
    /// Drafts accepted.
    pub accepted: u32,
    /// Tokens emitted: the accepted drafts and the bonus.
    pub emitted: u32,
}

/// The verify steps of request rows `requests`, from their tokens (the tokens from one that names its step's drafts
/// up to the next such, or the next token of another role), by request then time.
pub fn verify_steps_of(trace: &Trace, requests: &[u32]) -> Vec<VerifyStep> {
    let tk = &trace.tokens;
    let mut out = Vec::new();
    for &r in requests {
        let rows = trace.tokens_of(r);
        let mut current: Option<VerifyStep> = None;
        for t in rows {
            if let Some(drafted) = opt_u8(tk.spec_drafted[t]) {
                out.extend(current.take());
                current = Some(VerifyStep {
                    first: t,
                    drafted: u32::from(drafted),
                    accepted: 0,
                    emitted: 0,
                });
            }
            match (tk.spec[t], current.as_mut()) {
                (SpecRole::Draft, Some(c)) => {
                    c.accepted += 1;
                    c.emitted += 1;
                }
                (SpecRole::Bonus, Some(c)) => {
                    c.emitted += 1;
                    out.extend(current.take());
                }
                _ => out.extend(current.take()),
            }
        }
        out.extend(current);
    }
    out
}

/// The verify steps of request rows `requests` as (drafts proposed, drafts accepted, tokens emitted).
pub fn verify_steps(trace: &Trace, requests: &[u32]) -> Vec<(u32, u32, u32)> {
    verify_steps_of(trace, requests)
        .into_iter()
        .map(|v| (v.drafted, v.accepted, v.emitted))
        .collect()
}

/// Acceptance at draft position k = 1, 2, ... of `steps` (drafts proposed, accepted): among those that proposed k
/// drafts or more, the share that accepted k or more.
#[expect(clippy::cast_precision_loss, reason = "step counts far below 2^53")]
pub fn acceptance_by_position(steps: impl Iterator<Item = (u32, u32)> + Clone) -> Vec<f64> {
    let longest = steps.clone().map(|s| s.0).max().unwrap_or(0);
    (1..=longest)
        .map(|k| {
            let proposed = steps.clone().filter(|s| s.0 >= k).count();
            let accepted = steps.clone().filter(|s| s.0 >= k && s.1 >= k).count();
            accepted as f64 / proposed as f64
        })
        .collect()
}

/// Speculative decoding's figures of request rows `requests` (their steps and samples when the requests do not
/// say); `None` when nothing in the trace speaks of speculation.
pub fn spec_figures(trace: &Trace, requests: &[u32]) -> Option<SpecFigures> {
    let q = &trace.requests;
    // The drafted and accepted tokens summed over the rows that say both.
    let sum = |pairs: &mut dyn Iterator<Item = (Option<u32>, Option<u32>)>| {
        let mut any = false;
        let (mut drafted, mut accepted) = (0u64, 0u64);
        for pair in pairs {
            if let (Some(dr), Some(ac)) = pair {
                any = true;
                drafted += u64::from(dr);
                accepted += u64::from(ac);
            }
        }
        any.then_some((drafted, accepted))
    };
    let all_requests = requests.len() == trace.request_count();
    let steps = verify_steps(trace, requests);
    let (from, (drafted, accepted)) = if let Some(t) = sum(&mut requests.iter().map(|&r| {
        let r = r as usize;
        (q.spec_drafted_tokens.at(r), q.spec_accepted_tokens.at(r))
    })) {
        (SpecSource::Requests, t)
    } else if !steps.is_empty() {
        let drafted = steps.iter().map(|s| u64::from(s.0)).sum();
        let accepted = steps.iter().map(|s| u64::from(s.1)).sum();
        (SpecSource::Tokens, (drafted, accepted))
    } else if !all_requests {
        // A group of requests: the steps and samples are the instances', not the group's.
        return None;
    } else if let Some(t) = sum(&mut trace
        .iterations
        .spec_drafted_tokens
        .iter()
        .zip(trace.iterations.spec_accepted_tokens.iter()))
    {
        (SpecSource::Steps, t)
    } else {
        let s = &trace.samples;
        (
            SpecSource::Samples,
            sum(&mut s
                .spec_drafted_tokens
                .iter()
                .copied()
                .zip(s.spec_accepted_tokens.iter().copied()))?,
        )
    };
    let n = steps.len() as u64;
    let emitted: u64 = steps.iter().map(|s| u64::from(s.2)).sum();
    let acceptance_by_position = acceptance_by_position(steps.iter().map(|s| (s.0, s.1)));
    Some(SpecFigures {
        from,
        drafted_tokens: drafted,
        accepted_tokens: accepted,
        acceptance_rate: (drafted > 0).then(|| accepted as f64 / drafted as f64),
        verify_steps: (n > 0).then_some(n),
        acceptance_length: (n > 0).then(|| emitted as f64 / n as f64),
        acceptance_by_position,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::raw::Val;
    use crate::trace::TraceBuilder;

    /// One request with two verify steps written by hand: step 7 proposed 3 drafts and accepted 2 (tokens 1, 2) plus
    /// its bonus (3); step 8 proposed 3 and accepted none (token 4 is the bonus). Token 0 came from the prefill.
    fn trace(request_totals: bool) -> Trace {
        let mut b = TraceBuilder::default();
        let mut req = crate::import::record("request");
        req.request_id = crate::import::text("r");
        req.arrival_ns = crate::import::ok(1_764_403_200_000_000_000);
        if request_totals {
            req.spec_drafted_tokens = crate::import::ok(6);
            req.spec_accepted_tokens = crate::import::ok(2);
        }
        crate::ingest::validate::ingest(&req, crate::trace::report::Place::default(), &mut b);
        let roles = [
            ("plain", None, 6),
            ("draft", Some(3), 7),
            ("draft", None, 7),
            ("bonus", None, 7),
            ("bonus", Some(3), 8),
        ];
        for (k, (role, drafted, step)) in roles.into_iter().enumerate() {
            let mut t = crate::import::record("token");
            t.request_id = crate::import::text("r");
            t.index = crate::import::ok(k as i64);
            t.emitted_ns = crate::import::ok(1_764_403_200_000_000_000 + 10_000_000 * step);
            t.iteration = crate::import::ok(step);
            t.spec = crate::import::text(role);
            t.spec_drafted_tokens = drafted.map(Val::Ok);
            crate::ingest::validate::ingest(&t, crate::trace::report::Place::default(), &mut b);
        }
        b.finish().0
    }

    #[test]
    fn verify_steps_are_read_from_the_tokens_roles() {
        let t = trace(true);
        assert_eq!(verify_steps(&t, &[0]), [(3, 2, 3), (3, 0, 1)]);
    }

    #[test]
    fn figures_of_two_verify_steps_worked_by_hand() {
        let f = spec_figures(&trace(true), &[0]).unwrap();
        assert_eq!(f.from, SpecSource::Requests);
        assert_eq!((f.drafted_tokens, f.accepted_tokens), (6, 2));
        // 2 of 6 drafts accepted.
        assert_eq!(f.acceptance_rate, Some(2.0 / 6.0));
        // 4 tokens out of 2 verify steps: (2 accepted + 1 bonus) + (0 + 1 bonus).
        assert_eq!((f.verify_steps, f.acceptance_length), (Some(2), Some(2.0)));
        // Position 1: both steps proposed it, one accepted it; position 2: one of two; position 3: none of two.
        assert_eq!(f.acceptance_by_position, [0.5, 0.5, 0.0]);
    }

    #[test]
    fn a_trace_that_says_nothing_of_speculation_has_no_figures() {
        let mut t = trace(false);
        t.tokens.spec.iter_mut().for_each(|r| *r = SpecRole::Unknown);
        t.tokens
            .spec_drafted
            .iter_mut()
            .for_each(|d| *d = crate::trace::NULL_U8);
        assert_eq!(spec_figures(&t, &[0]), None);
    }
}
