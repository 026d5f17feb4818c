//! Emissions: the tokens of one request that came out together. A speculative engine's verify step emits several
//! tokens of a request at once (the drafts it accepted and its own token), and a stream may carry several tokens in
//! one chunk; inter-token latency is measured between emissions, one gap per emission, as vLLM's server and the
//! benchmark tools that time chunks measure it (`docs/SPECULATIVE.md` has the engines' definitions).

use super::tables::{NULL_I64, Tokens};

/// Two tokens of a request with no step between them (neither says its step, or one does not) and less than this
/// apart are one emission, ns. A client receives a verify step's tokens as chunks written back to back, microseconds
/// apart (llama-server sends one chunk per token); an engine's steps take a few ms at the least (a decode step of a
/// small model on a datacenter GPU, about 3 to 5 ms), so a gap under 1 ms is never a step of its own.
pub const BURST_NS: i64 = 1_000_000;

/// Whether a token came out with the request's token before it: the same step when both name theirs, else less than
/// [`BURST_NS`] after it. `prev_*` and `*` are the two tokens' `iteration` ([`NULL_I64`] when absent) and time.
pub fn same_emission(prev_iteration: i64, prev_ns: i64, iteration: i64, ns: i64) -> bool {
    if prev_iteration != NULL_I64 && iteration != NULL_I64 {
        prev_iteration == iteration
    } else {
        ns - prev_ns < BURST_NS
    }
}

/// Whether token row `t` starts an emission: the request's first token, a token after an index gap (what came
/// between is unknown), or one that did not come out with the token before it. `first` is the request's first
/// token row.
pub fn starts_emission(tokens: &Tokens, first: usize, t: usize) -> bool {
    t == first
        || tokens.index[t] != tokens.index[t - 1] + 1
        || !same_emission(
            tokens.iteration[t - 1],
            tokens.emitted_ns[t - 1],
            tokens.iteration[t],
            tokens.emitted_ns[t],
        )
}

/// The gap before each emission of a request's tokens but the first, ns: from the last token of the emission
/// before it, when the token before it is in the trace (after an index gap the latency is undefined). `rows` are
/// the request's token rows.
pub fn gaps_ns(tokens: &Tokens, rows: std::ops::Range<usize>) -> impl Iterator<Item = (usize, i64)> + '_ {
    let first = rows.start;
    let rows = rows.clone();
    gaps_of(
        &tokens.index[rows.clone()],
        &tokens.iteration[rows.clone()],
        &tokens.emitted_ns[rows],
    )
    .map(move |(k, gap)| (first + k, gap))
}

/// [`gaps_ns`] of one request's tokens given as their `index`, `iteration` and `emitted_ns` (in `index` order): the
/// gap before each emission but the first, as (position among them, ns).
pub fn gaps_of<'a>(
    index: &'a [u32],
    iteration: &'a [i64],
    emitted: &'a [i64],
) -> impl Iterator<Item = (usize, i64)> + 'a {
    (1..index.len()).filter_map(move |k| {
        let contiguous = index[k] == index[k - 1] + 1;
        let starts = !same_emission(iteration[k - 1], emitted[k - 1], iteration[k], emitted[k]);
        (contiguous && starts).then(|| (k, emitted[k] - emitted[k - 1]))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::tables::Token;

    fn tokens(rows: &[(u32, i64, i64)]) -> Tokens {
        let mut t = Tokens::default();
        for &(index, emitted_ns, iteration) in rows {
            t.push(Token {
                request: 0,
                index,
                emitted_ns,
                iteration,
                iter_row: crate::trace::NULL_U32,
                token_id: crate::trace::NULL_U32,
                text: crate::trace::NO_STR,
                special: crate::trace::tables::Flag::Null,
                logprob: f64::NAN,
                rank: crate::trace::NULL_U32,
                received_ns: NULL_I64,
                spec: crate::trace::SpecRole::Unknown,
                spec_drafted: crate::trace::NULL_U8,
            });
        }
        t
    }

    #[test]
    fn a_step_that_emits_three_tokens_is_one_gap() {
        // Steps 10, 11 (three tokens: two accepted drafts and the target's), 12, 30 ms apart, the burst's tokens
        // 40 µs apart as a client receives them.
        let ms = 1_000_000;
        let t = tokens(&[
            (0, 0, 10),
            (1, 30 * ms, 11),
            (2, 30 * ms + 40_000, 11),
            (3, 30 * ms + 80_000, 11),
            (4, 60 * ms, 12),
        ]);
        let gaps: Vec<(usize, i64)> = gaps_ns(&t, 0..5).collect();
        // Token 1 starts step 11's emission 30 ms after token 0; token 4 comes 60 - 30.08 = 29.92 ms after token 3.
        assert_eq!(gaps, [(1, 30 * ms), (4, 60 * ms - (30 * ms + 80_000))]);
    }

    #[test]
    fn without_steps_tokens_under_a_millisecond_apart_are_one_emission() {
        let ms = 1_000_000;
        // 0 ms; 30 ms and 30.5 ms (one chunk burst); 31.5 ms is 1 ms after: its own emission; an index gap at 5.
        let t = tokens(&[
            (0, 0, NULL_I64),
            (1, 30 * ms, NULL_I64),
            (2, 30 * ms + ms / 2, NULL_I64),
            (3, 31 * ms + ms / 2, NULL_I64),
            (5, 40 * ms, NULL_I64),
        ]);
        let starts: Vec<bool> = (0..5).map(|k| starts_emission(&t, 0, k)).collect();
        assert_eq!(starts, [true, true, false, true, true]);
        // The gap across the index gap is undefined: 2 gaps, not 3.
        let gaps: Vec<(usize, i64)> = gaps_ns(&t, 0..5).collect();
        assert_eq!(gaps, [(1, 30 * ms), (3, ms)]);
    }

    #[test]
    fn different_steps_are_different_emissions_however_close() {
        // Two steps 0.2 ms apart (a log's steps with their tokens read 200 µs apart): two emissions.
        assert!(!same_emission(7, 0, 8, 200_000));
        assert!(same_emission(7, 0, 7, 5_000_000));
        // One side without its step: time decides.
        assert!(same_emission(7, 0, NULL_I64, 200_000));
        assert!(!same_emission(NULL_I64, 0, 8, 2_000_000));
    }
}
