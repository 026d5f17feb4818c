//! Which batches gave a request its tokens, and when: prefill chunks, retractions, the overlap scheduler's shift.

use super::request::*;
use super::{RETRACT, Role, Slim};

/// When each of `batches` gave the request its token: its own result slices where they say it
/// ([`aligned_results`]), else the batch's end as its other members' slices say it.
pub(super) fn token_times(r: &RequestSpans<'_>, batches: &[&Scheduled], m: &Mapping<'_>) -> Vec<i64> {
    if flat(r) {
        // Each event is one of the request's own result slices ([`legacy_events`]), ending at its result.
        return batches.iter().filter_map(|e| e.step_end_ns).collect();
    }
    batches
        .iter()
        .zip(aligned_results(r, m.events, batches))
        .filter_map(|(e, own)| own.or_else(|| m.iteration_of.get(&(m.source, e.bid)).map(|&(_, end)| end)))
        .collect()
}

/// One prefill of a request and what followed it until a retraction (or the end): the batches of its chunks (the
/// last gives a token), then the batches it was a member of after.
pub(super) struct Episode<'e> {
    pub(super) chunks: Vec<&'e Scheduled>,
    pub(super) rest: Vec<&'e Scheduled>,
}

/// A request's batches split at its retractions: each part starts with as many prefill batches as its
/// `chunked_prefill` spans in that part (at least one). `None` for a request with no prefill here (a PD decode
/// node's).
pub(super) fn episodes<'e>(r: &RequestSpans<'_>, events: &'e [Scheduled]) -> Option<Vec<Episode<'e>>> {
    if !r.slices.iter().any(|s| s.role == Role::PrefillForward) {
        return None;
    }
    let mut retracts: Vec<i64> = r
        .slices
        .iter()
        .copied()
        .chain(r.scheduler)
        .chain(std::iter::once(r.root))
        .flat_map(|s| &s.events)
        .filter(|e| e.bid == RETRACT)
        .filter_map(|e| e.time_ns)
        .collect();
    retracts.sort_unstable();
    let chunk_starts: Vec<i64> = r
        .slices
        .iter()
        .filter(|s| s.role == Role::ChunkedPrefill)
        .filter_map(|s| s.start_ns)
        .collect();
    let bounds: Vec<i64> = std::iter::once(i64::MIN)
        .chain(retracts)
        .chain(std::iter::once(i64::MAX))
        .collect();
    let mut out = Vec::new();
    for window in bounds.windows(2) {
        let (from, to) = (window[0], window[1]);
        let mut part: Vec<&Scheduled> = events
            .iter()
            .filter(|e| !e.prebuilt && e.time_ns >= from && e.time_ns < to)
            .collect();
        let chunks = chunk_starts.iter().filter(|&&t| t >= from && t < to).count().max(1);
        if part.len() < chunks {
            continue; // retracted before its prefill ended, or a prefill still running when the trace ends
        }
        let rest = part.split_off(chunks);
        out.push(Episode { chunks: part, rest });
    }
    Some(out)
}

/// The batches that gave a request its tokens, in order: the last chunk of its prefill (token 0), then every batch
/// it was a member of after that, decode or mixed; after a retraction, the last chunk of its new prefill gives the
/// next token.
///
/// The overlap scheduler (SGLang's default) schedules a batch before the previous one's result is processed, so
/// membership runs ahead of tokens: a request that stops on EOS rides one more batch with no token, and the batch in
/// flight when a request is retracted gives it none. When the batches outnumber `completion_tokens` (the root's
/// count), those are taken out: first the batches in flight at a retraction, then the last ones. Without overlap
/// the counts agree and nothing is taken out.
pub(super) fn token_batches<'e>(
    r: &RequestSpans<'_>,
    events: &'e [Scheduled],
    completion: Option<i64>,
) -> Vec<&'e Scheduled> {
    if flat(r) {
        return legacy_token_batches(r, events);
    }
    let Some(episodes) = episodes(r, events) else {
        // No prefill here: every batch gives a token.
        return events.iter().filter(|e| !e.prebuilt).collect();
    };
    let mut tokens: Vec<&Scheduled> = Vec::new();
    let mut in_flight: Vec<usize> = Vec::new();
    let last = episodes.len().saturating_sub(1);
    for (k, episode) in episodes.iter().enumerate() {
        tokens.extend(episode.chunks.last());
        tokens.extend(&episode.rest);
        if k < last && !tokens.is_empty() {
            in_flight.push(tokens.len() - 1);
        }
    }
    if let Some(n) = completion.and_then(|n| usize::try_from(n).ok()) {
        while tokens.len() > n.max(1) {
            match in_flight.pop() {
                Some(i) => {
                    tokens.remove(i);
                }
                None => {
                    tokens.pop();
                }
            }
        }
    }
    tokens
}

/// When each of a request's token batches was processed, as its own slices say, where they say it. SGLang closes a
/// prefill (its last chunk, else its `prefill_forward`) and each `decode_loop` when it processes a batch's result:
/// the prefills' ends are the times of the tokens their last chunks gave, in order, and the `decode_loop`s' those of
/// the tokens of pure decode batches, in order. A decode in a mixed batch has no slice of its own: `None` there.
/// Under the overlap scheduler a batch's `schedule` event sits on the slice of the batch before, so these are used
/// rather than the slice that carries the event.
pub(super) fn aligned_results(r: &RequestSpans<'_>, events: &[Scheduled], tokens: &[&Scheduled]) -> Vec<Option<i64>> {
    let mut out = vec![None; tokens.len()];
    let Some(episodes) = episodes(r, events) else {
        return out;
    };
    let prefill_token_bids: Vec<u32> = episodes.iter().filter_map(|e| e.chunks.last()).map(|e| e.bid).collect();
    let mut forwards: Vec<&Slim> = r
        .slices
        .iter()
        .copied()
        .filter(|s| s.role == Role::PrefillForward)
        .collect();
    forwards.sort_by_key(|f| f.start_ns);
    let prefill_ends: Vec<i64> = forwards
        .iter()
        .filter_map(|f| {
            r.slices
                .iter()
                .filter(|s| s.role == Role::ChunkedPrefill && s.parent == f.id)
                .filter_map(|s| s.end_ns)
                .max()
                .or(f.end_ns)
        })
        .collect();
    let mut decode_ends: Vec<i64> = r
        .slices
        .iter()
        .filter(|s| s.role == Role::DecodeLoop)
        .filter_map(|s| s.end_ns)
        .collect();
    decode_ends.sort_unstable();
    // Each token batch takes the first result slice of its kind not taken yet that ends after it was scheduled:
    // a slice left over (the batch in flight at a retraction, the one more batch an EOS rode under overlap, a
    // writer that gives mixed batches a `decode_loop`) is passed by.
    // SGLang 0.5.9 gives a decode in a mixed batch a `prefill_forward` of its own (and its events say no
    // `forward_mode`): more prefills than prefill tokens. Then the result slices are taken in one list.
    let prefill_tokens = tokens.iter().filter(|e| prefill_token_bids.contains(&e.bid)).count();
    let all_ends: Vec<i64> = if prefill_ends.len() > prefill_tokens {
        let mut all: Vec<i64> = prefill_ends.iter().chain(&decode_ends).copied().collect();
        all.sort_unstable();
        all
    } else {
        Vec::new()
    };
    let (mut p, mut d) = (0, 0);
    for (k, e) in tokens.iter().enumerate() {
        let (ends, next) = if !all_ends.is_empty() {
            (&all_ends, &mut d)
        } else if prefill_token_bids.contains(&e.bid) {
            (&prefill_ends, &mut p)
        } else if e.extend {
            continue; // a decode in a mixed batch: no slice of its own
        } else {
            (&decode_ends, &mut d)
        };
        while ends.get(*next).is_some_and(|&end| end <= e.time_ns) {
            *next += 1;
        }
        if let Some(&end) = ends.get(*next) {
            out[k] = Some(end);
            *next += 1;
        }
    }
    out
}

/// SGLang 0.5.3 and 0.5.9 (slices flat under the scheduler): the request's prefill chunks, the prefill slices met
/// while it prefills (after each `process req`, until the last chunk of the run), as [`legacy_token_batches`] walks.
pub(super) fn prefill_chunks<'a>(r: &RequestSpans<'a>) -> Vec<&'a Slim> {
    let mut slices: Vec<&Slim> = r
        .slices
        .iter()
        .copied()
        .filter(|s| is_prefill(s.role) || is_decode(s.role) || s.role == Role::LegacyQueue)
        .collect();
    slices.sort_by_key(|s| (s.start_ns, s.end_ns));
    let mut out = Vec::new();
    let mut prefilling = true;
    for (k, s) in slices.iter().enumerate() {
        if s.role == Role::LegacyQueue {
            prefilling = true;
        } else if is_prefill(s.role) && prefilling {
            out.push(*s);
            prefilling = slices.get(k + 1).is_some_and(|n| is_prefill(n.role));
        }
    }
    out
}

/// SGLang 0.5.3 and 0.5.9 (slices flat under the scheduler): the batches that gave a request its tokens, from its
/// slices in time order. Taken into the
/// queue (`process req`: at first, and again after a retraction), a request prefills: its `prefill` chunks, the last
/// of which gives a token (a `decode loop` then, the batch a retraction cut, gives none). Once it has a token, every
/// batch it is in gives one: each `decode loop`, and each `prefill` slice, which is its decode row in a mixed batch.
fn legacy_token_batches<'e>(r: &RequestSpans<'_>, events: &'e [Scheduled]) -> Vec<&'e Scheduled> {
    let mut slices: Vec<&Slim> = r
        .slices
        .iter()
        .copied()
        .filter(|s| is_prefill(s.role) || is_decode(s.role) || s.role == Role::LegacyQueue)
        .collect();
    slices.sort_by_key(|s| (s.start_ns, s.end_ns));
    let event_of = |s: &Slim| {
        events
            .iter()
            .find(|e| Some(e.time_ns) == s.start_ns && e.step_end_ns == s.end_ns)
    };
    let mut out = Vec::new();
    let mut prefilling = true;
    for (k, s) in slices.iter().enumerate() {
        match s.role {
            Role::LegacyQueue => prefilling = true,
            role if is_prefill(role) && prefilling => {
                // The last chunk of the run gives the token.
                if !slices.get(k + 1).is_some_and(|n| is_prefill(n.role)) {
                    out.extend(event_of(s));
                    prefilling = false;
                }
            }
            role if is_decode(role) && prefilling => {} // cut by a retraction
            _ => out.extend(event_of(s)),
        }
    }
    out
}

/// When the batches of a request were processed, as its own slices say: `(bid, result time)` for its token batches
/// ([`aligned_results`]) and for each chunk of its prefills, from its `chunked_prefill` spans.
pub(super) fn results_of(r: &RequestSpans<'_>, events: &[Scheduled], completion: Option<i64>) -> Vec<(u32, i64)> {
    let tokens = token_batches(r, events, completion);
    let aligned = aligned_results(r, events, &tokens);
    let mut out: Vec<(u32, i64)> = tokens
        .iter()
        .zip(&aligned)
        .filter_map(|(e, end)| Some((e.bid, (*end)?)))
        .collect();
    // A batch after the last token (under overlap, the one more a finished request rode): its `decode_loop` is the
    // one left after the tokens'.
    if let (Some(last), Some(Some(last_end))) = (tokens.last(), aligned.last()) {
        let after = events.iter().find(|e| !e.prebuilt && e.time_ns > last.time_ns);
        let left = r
            .slices
            .iter()
            .filter(|s| s.role == Role::DecodeLoop)
            .filter_map(|s| s.end_ns)
            .filter(|end| end > last_end)
            .min();
        if let (Some(e), Some(end)) = (after, left) {
            out.push((e.bid, end));
        }
    }
    if let Some(episodes) = episodes(r, events) {
        let chunk_batches: Vec<&Scheduled> = episodes.iter().flat_map(|e| e.chunks.iter().copied()).collect();
        let mut chunks: Vec<(i64, i64)> = r
            .slices
            .iter()
            .filter(|s| s.role == Role::ChunkedPrefill)
            .filter_map(|s| Some((s.start_ns?, s.end_ns?)))
            .collect();
        chunks.sort_unstable();
        if chunks.len() == chunk_batches.len() {
            out.extend(chunk_batches.iter().map(|e| e.bid).zip(chunks.iter().map(|c| c.1)));
        }
    }
    out
}
