//! What the detectors read of the tokens, behind [`TokenSource`]: a request's token rows and the times of its first
//! and last, every request's tokens handed over in turn (one pass that feeds every detector that reads them), and
//! the logprob, rank and candidates of the few tokens a detector names. A loaded [`Trace`] is one source; a trace
//! streamed from its files a row group at a time (`crate::load::stream::findings`) is another, so that the detectors
//! run on a trace of any size, with the same code and the same figures.

use std::ops::Range;

use rayon::prelude::*;

use super::Visitor;
use crate::analysis::facts::RequestFacts;
pub use crate::trace::TokenChoice;
use crate::trace::{Flag, Interner, OwnedCandidate, Trace};

/// One request's tokens, in `index` order, as a visit hands them over. Where a token is, is said by the request and
/// its position among these: a streamed trace knows its rows only once the pass is over
/// ([`TokenSource::rows`]).
#[derive(Debug, Clone, Copy)]
pub struct RequestTokens<'a> {
    /// The request's row.
    pub request: u32,
    /// `index` of each token.
    pub index: &'a [u32],
    /// `emitted_ns` of each token.
    pub emitted_ns: &'a [i64],
    /// `iteration` of each token as written ([`crate::trace::NULL_I64`] when absent).
    pub iteration: &'a [i64],
    /// The step row each token was computed in ([`crate::trace::NULL_U32`] when none is known).
    pub iter_row: &'a [u32],
    /// `token_id` of each token ([`crate::trace::NULL_U32`] when absent). Empty when the visit was not asked for texts.
    pub token_id: &'a [u32],
    /// Each token's text, as an id in `texts` ([`crate::trace::NO_STR`] when absent). Empty when the visit was not
    /// asked for texts.
    pub text: &'a [u32],
    /// Each token's `special` flag. Empty when the visit was not asked for texts.
    pub special: &'a [Flag],
    /// The texts `text` names.
    pub texts: Texts<'a>,
}

/// The texts a visit's `text` ids name.
#[derive(Debug, Clone, Copy)]
pub enum Texts<'a> {
    /// A loaded trace's texts, each once.
    Interned(&'a Interner),
    /// One request's own texts, as spans of `buf` (a streamed request's: interning each of a hundred million texts
    /// cost more than every detector that reads them). Id `k` is span `k`; equal texts of tokens without an id share
    /// the first's, so that ids compare as texts where they are compared.
    Spans {
        /// The texts, one after another.
        buf: &'a str,
        /// Each text's bytes in `buf`.
        spans: &'a [(u32, u32)],
    },
}

impl<'a> Texts<'a> {
    /// The text of id `id` (`None` for [`crate::trace::NO_STR`] or an id not given).
    pub fn get(&self, id: u32) -> Option<&'a str> {
        match *self {
            Texts::Interned(i) => i.get(id),
            Texts::Spans { buf, spans } => {
                let &(a, b) = spans.get(id as usize)?;
                buf.get(a as usize..b as usize)
            }
        }
    }
}

impl RequestTokens<'_> {
    /// How many tokens.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// True when it has none.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }
}

/// The tokens of a trace, as the detectors read them.
pub trait TokenSource: Sync {
    /// The rows of request `r`'s tokens in the loaded trace (empty when it has none). Known once [`Self::ready`].
    fn rows(&self, r: u32) -> Range<usize>;
    /// Token 0's `emitted_ns` (when its first token is token 0) and its last token's. Known once [`Self::ready`].
    fn ends(&self, r: u32) -> (Option<i64>, Option<i64>);
    /// How many of request `r`'s tokens were emitted before `at`, counted as a search in its tokens' times in
    /// `index` order counts them (the tokens it had when it was preempted at `at`). Known once [`Self::ready`].
    fn emitted_before(&self, r: u32, at: i64) -> u64;
    /// The earliest `emitted_ns` of the tokens when the trace's own [`Trace::start_ns`] does not count them (a trace
    /// loaded without its tokens); `None` for a loaded trace.
    fn earliest(&self) -> Option<i64> {
        None
    }
    /// True when the facts of every request's tokens are known ([`Self::rows`], [`Self::ends`]): always for a loaded
    /// trace; for a streamed one, once a visit has read them all.
    fn ready(&self) -> bool {
        true
    }
    /// Hands every request's tokens to `each`, request by request (requests without tokens are skipped): in row order
    /// for a loaded trace, in the files' order for a streamed one, so what a detector makes of them must not depend
    /// on the order. With `texts`, their ids, texts and special flags too.
    fn visit(&self, texts: bool, each: &mut (dyn FnMut(RequestTokens<'_>) + Send));
    /// Hands every request's tokens to each of `visitors`, in one visit (with texts when one of them reads them).
    fn visit_all<'c>(&self, visitors: &mut [Box<dyn Visitor<'c> + 'c>]) {
        let texts = visitors.iter().any(|v| v.texts());
        self.visit(texts, &mut |rt| {
            for v in visitors.iter_mut() {
                v.see(&rt);
            }
        });
    }
    /// The choice of each of the token rows `wanted` (known once [`Self::ready`]): their records' logprob and rank,
    /// and, `with_candidates`, their candidates (without, the rank is the one written, else absent). Rows that are not
    /// tokens of the trace are left out.
    fn choices(&self, wanted: &[usize], with_candidates: bool) -> Vec<(usize, TokenChoice)>;
}

impl TokenSource for Trace {
    fn rows(&self, r: u32) -> Range<usize> {
        self.tokens_of(r)
    }

    fn ends(&self, r: u32) -> (Option<i64>, Option<i64>) {
        let rows = self.tokens_of(r);
        let tk = &self.tokens;
        let token0 = (!rows.is_empty() && tk.index[rows.start] == 0).then(|| tk.emitted_ns[rows.start]);
        (token0, rows.last().map(|t| tk.emitted_ns[t]))
    }

    fn emitted_before(&self, r: u32, at: i64) -> u64 {
        self.tokens.emitted_ns[self.tokens_of(r)].partition_point(|&e| e < at) as u64
    }

    fn visit(&self, texts: bool, each: &mut (dyn FnMut(RequestTokens<'_>) + Send)) {
        let tk = &self.tokens;
        for r in 0..u32::try_from(self.request_count()).unwrap_or(u32::MAX) {
            let rows = self.tokens_of(r);
            if rows.is_empty() {
                continue;
            }
            let pick = |wanted: bool| if wanted { rows.clone() } else { rows.start..rows.start };
            each(RequestTokens {
                request: r,
                index: &tk.index[rows.clone()],
                emitted_ns: &tk.emitted_ns[rows.clone()],
                iteration: &tk.iteration[rows.clone()],
                iter_row: &tk.iter_row[rows.clone()],
                token_id: &tk.token_id[pick(texts)],
                text: &tk.text[pick(texts)],
                special: &tk.special[pick(texts)],
                texts: Texts::Interned(&self.texts),
            });
        }
    }

    /// In memory, each visitor walks the tokens on its own, all at once.
    fn visit_all<'c>(&self, visitors: &mut [Box<dyn Visitor<'c> + 'c>]) {
        visitors
            .par_iter_mut()
            .for_each(|v| self.visit(v.texts(), &mut |rt| v.see(&rt)));
    }

    fn choices(&self, wanted: &[usize], with_candidates: bool) -> Vec<(usize, TokenChoice)> {
        let (tk, c) = (&self.tokens, &self.candidates);
        wanted
            .iter()
            .filter(|&&t| t < tk.len())
            .map(|&t| {
                let listed = if with_candidates { self.candidates_of(t) } else { 0..0 };
                let candidates = listed
                    .map(|k| OwnedCandidate {
                        token_id: c.token_id[k],
                        text: self.texts.get(c.text[k]).map(str::to_owned),
                        logprob: c.logprob[k],
                        special: c.special[k],
                    })
                    .collect();
                (
                    t,
                    TokenChoice {
                        logprob: tk.logprob[t],
                        rank: tk.rank[t],
                        candidates,
                    },
                )
            })
            .collect()
    }
}

/// Request `r`'s record with its tokens' facts from `tokens`: what its figures (TTFT, TPOT, end) are computed from,
/// the same whether the trace is loaded or streamed.
pub fn facts_of(trace: &Trace, tokens: &dyn TokenSource, r: u32) -> RequestFacts {
    let q = &trace.requests;
    let i = r as usize;
    let (token0_ns, last_token_ns) = tokens.ends(r);
    RequestFacts {
        arrival_ns: q.arrival_ns[i],
        scheduled_ns: q.scheduled_ns.at(i),
        first_token_ns: q.first_token_ns.at(i),
        finished_ns: q.finished_ns.at(i),
        input_tokens: q.input_tokens.at(i),
        cached_tokens: q.cached_tokens.at(i),
        output_tokens: q.output_tokens.at(i),
        tokens: u32::try_from(tokens.rows(r).len()).unwrap_or(u32::MAX),
        token0_ns,
        last_token_ns,
        ..RequestFacts::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::metrics::request_metrics;
    use crate::test_support::trace_of;

    #[test]
    fn a_loaded_trace_gives_the_figures_of_its_requests() {
        // a: tokens 0..2 at +100, +150, +250 ms; b: tokens 1 and 2 only (token 0 missing); c: none.
        let t = trace_of(
            r#"{"kind":"request","request_id":"a","arrival_ns":1764403200000000000,"output_tokens":3}
{"kind":"request","request_id":"b","arrival_ns":1764403200010000000}
{"kind":"request","request_id":"c","arrival_ns":1764403200020000000}
{"kind":"token","request_id":"a","index":0,"emitted_ns":1764403200100000000}
{"kind":"token","request_id":"a","index":1,"emitted_ns":1764403200150000000}
{"kind":"token","request_id":"a","index":2,"emitted_ns":1764403200250000000}
{"kind":"token","request_id":"b","index":1,"emitted_ns":1764403200300000000}
{"kind":"token","request_id":"b","index":2,"emitted_ns":1764403200400000000}"#,
        );
        let row = |id: &str| t.request_row(id).unwrap_or_else(|| panic!("{id}"));
        let (a, b, c) = (row("a"), row("b"), row("c"));
        assert_eq!(
            t.ends(a),
            (Some(1_764_403_200_100_000_000), Some(1_764_403_200_250_000_000))
        );
        assert_eq!(t.ends(b), (None, Some(1_764_403_200_400_000_000)));
        assert_eq!(t.ends(c), (None, None));
        // a emitted 2 tokens before +200 ms, none before +100 ms (strictly before).
        assert_eq!(t.emitted_before(a, 1_764_403_200_200_000_000), 2);
        assert_eq!(t.emitted_before(a, 1_764_403_200_100_000_000), 0);
        // Its figures: TTFT 100 ms, TPOT (250 - 100) / 2 = 75 ms, as request_metrics says.
        let m = facts_of(&t, &t, a).metrics();
        assert_eq!(m.ttft_ns, Some(100_000_000));
        assert_eq!(m.tpot_ns, Some(75_000_000.0));
        for r in [a, b, c] {
            assert_eq!(facts_of(&t, &t, r).metrics(), request_metrics(&t, r));
        }
        // The visit: a then b (c has none), with their rows.
        let mut seen = Vec::new();
        t.visit(false, &mut |rt| {
            seen.push((rt.request, rt.index.to_vec(), rt.text.len()));
        });
        assert_eq!(seen, [(a, vec![0, 1, 2], 0), (b, vec![1, 2], 0)]);
        assert_eq!((t.rows(a), t.rows(b)), (0..3, 3..5));
    }
}
