//! Slices and redaction of a trace, for incident reports: the records that touch a time range (whole requests,
//! their stages, tokens and candidates, and the engine steps in the range), and token texts replaced by hashes.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

use super::report::Place;
use super::{Interner, NO_STR, Trace, TraceBuilder};

/// The part of `trace` that touches `[from_ns, to_ns]`: every request alive in it (arrival to finish), or only
/// those of `only` when given; their stages, tokens and candidates whole; and the steps of every source that
/// overlap the range.
pub fn slice(trace: &Trace, from_ns: i64, to_ns: i64, only: Option<&[u32]>) -> Trace {
    slice_with(trace, from_ns, to_ns, only, None)
}

/// [`slice`], taking each request's candidates from `candidates` when given (a trace loaded with its candidates
/// left on disk: the caller reads them).
pub fn slice_with(
    trace: &Trace,
    from_ns: i64,
    to_ns: i64,
    only: Option<&[u32]>,
    candidates: Option<&dyn Fn(u32) -> Vec<Vec<super::OwnedCandidate>>>,
) -> Trace {
    let requests: Vec<u32> = (0..u32::try_from(trace.request_count()).unwrap_or(u32::MAX))
        .filter(|&r| {
            let arrival = trace.requests.arrival_ns[r as usize];
            let finish = trace.finish_ns(r).unwrap_or(arrival);
            match only {
                Some(list) => list.contains(&r),
                None => finish >= from_ns && arrival <= to_ns,
            }
        })
        .collect();
    let steps: Vec<usize> = trace
        .sources_with_iterations()
        .iter()
        .flat_map(|&(source, _)| trace.iterations_overlapping(source, from_ns, to_ns))
        .collect();
    let samples: Vec<usize> = (0..trace.samples.len())
        .filter(|&i| (from_ns..=to_ns).contains(&trace.samples.time_ns[i]))
        .collect();
    subset(trace, &requests, &steps, &samples, candidates)
}

/// The requests `requests` of `trace` (rows, ascending) with their stages, tokens and candidates whole, the steps
/// `steps` and the samples `samples` (rows), as a trace of their own with the same meta. Candidates come from
/// `candidates` when given (a trace loaded with its candidates left on disk: the caller reads them).
pub fn subset(
    trace: &Trace,
    requests: &[u32],
    steps: &[usize],
    samples: &[usize],
    candidates: Option<&dyn Fn(u32) -> Vec<Vec<super::OwnedCandidate>>>,
) -> Trace {
    let mut b = TraceBuilder::default();
    let label = |b: &mut TraceBuilder, id: u32| {
        if id == NO_STR {
            NO_STR
        } else {
            b.labels.intern(trace.labels.str_or_empty(id))
        }
    };
    let text = |b: &mut TraceBuilder, id: u32| {
        if id == NO_STR {
            NO_STR
        } else {
            b.texts.intern(trace.texts.str_or_empty(id))
        }
    };
    let place = Place::default();
    for &r in requests {
        let mut row = trace.requests.row(r as usize);
        row.map_labels(|id| label(&mut b, id));
        let id = row.id;
        b.add_request(row, place);
        for s in trace.explicit_stages_of(r) {
            let mut st = trace.stages.row(s);
            st.request = id;
            st.iter_row = None;
            b.add_stage(st, place);
        }
        let owned = candidates.map_or_else(|| trace.owned_candidates(r), |read| read(r));
        for (k, t) in trace.tokens_of(r).enumerate() {
            let mut tok = trace.tokens.row(t);
            tok.request = id;
            tok.iter_row = crate::trace::NULL_U32;
            tok.text = text(&mut b, tok.text);
            let cands: Vec<_> = owned
                .get(k)
                .map(Vec::as_slice)
                .unwrap_or_default()
                .iter()
                .map(|c| super::Candidate {
                    token_id: c.token_id,
                    text: c.text.as_deref().map_or(NO_STR, |t| b.texts.intern(t)),
                    logprob: c.logprob,
                    special: c.special,
                })
                .collect();
            b.add_token(tok, cands, place);
        }
    }
    for &i in steps {
        let mut it = trace.iterations.row(i);
        it.source = label(&mut b, it.source);
        b.add_iteration(it, place);
    }
    for &i in samples {
        let mut sa = trace.samples.row(i);
        sa.source = label(&mut b, sa.source);
        b.add_sample(sa);
    }
    if trace.meta.present {
        b.set_meta(trace.meta.clone(), place);
    }
    b.finish().0
}

/// Replaces every token and candidate text by a hash, `#` and 12 hex digits: the same text gets the same hash
/// within one call, so repetitions still show, but the hash is keyed afresh each time, so hashing a vocabulary
/// cannot reverse it. Empty texts and special-token markup (`<|...|>`) are kept: they carry no user content.
pub fn redact(trace: &mut Trace) {
    let key = RandomState::new();
    let mut texts = Interner::default();
    for id in 0..trace.texts.len() as u32 {
        let t = trace.texts.str_or_empty(id);
        let kept = t.is_empty() || (t.starts_with("<|") && t.ends_with("|>"));
        let new = if kept {
            t.to_owned()
        } else {
            format!("#{:012x}", key.hash_one(t) & 0xffff_ffff_ffff)
        };
        // Ids stay as they are: the new interner is filled in id order. Two texts hashing alike would share an id,
        // so a collision keeps the first (one in 2^48).
        let _ = texts.intern(&new);
        if texts.len() as u32 != id + 1 {
            texts.push_duplicate(&new);
        }
    }
    trace.texts = texts;
}
