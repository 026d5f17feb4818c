//! What a reference says of the tokens a run emitted (`tokenscope rescore`: the same model asked again for its
//! distribution at every position of a recorded answer, given the prompt and the answer before it): whether each
//! emitted token was the dice (a token the model gives a fair chance, drawn by sampling) or not the model at all (one
//! it gives almost none: a kernel, quantization or batching fault, or another model).
//!
//! The reference lists its `k` most probable tokens, and gives the emitted token's own probability where it can
//! (llama.cpp does, `record::rescore`): a token is judged by that probability, however far down it ranks. A token
//! the reference neither lists nor gives a probability for counts as off its distribution.

use crate::trace::{Reference, Trace};

/// An emitted token the reference gives less than this probability is off its distribution: at the temperatures
/// served (up to ~1), sampling draws such a token about once in a thousand positions at the very most.
pub const OFF_DISTRIBUTION_P: f64 = 1e-3;

/// `p` as a percentage with the digits it needs (62 %, 5.0 %, 0.034 %, 2.1e-6 %).
pub fn percent(p: f64) -> String {
    let pct = p * 100.0;
    if pct >= 10.0 {
        format!("{pct:.0} %")
    } else if pct >= 0.1 {
        format!("{pct:.1} %")
    } else if pct >= 0.001 {
        format!("{pct:.3} %")
    } else {
        format!("{pct:.1e} %")
    }
}

/// The reference's own first choice, as shown (`␣d`, `⟨EOS⟩`).
pub fn first_choice_text(trace: &Trace, r: &Reference) -> String {
    let special = if r.top_special == Some(true) {
        crate::trace::Flag::True
    } else {
        crate::trace::Flag::Null
    };
    crate::analysis::tokens::display_text(
        trace,
        r.top_token_id.unwrap_or(crate::trace::NULL_U32),
        trace.texts.get(r.top_text),
        special,
    )
}

/// What the reference makes of one emitted token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verdict {
    /// Its most probable token: what greedy decoding would emit.
    Top,
    /// A token it gives [`OFF_DISTRIBUTION_P`] or more, not its first: a draw of the dice.
    Sampled,
    /// A token it gives less (or neither lists nor gives a probability for): not the model's choice at any
    /// temperature served.
    OffDistribution,
}

impl Verdict {
    /// The verdict's name (`top`, `sampled`, `off-distribution`).
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Top => "top",
            Verdict::Sampled => "sampled",
            Verdict::OffDistribution => "off-distribution",
        }
    }
}

/// The verdict on a token from its reference.
pub fn verdict(r: &Reference) -> Verdict {
    match (r.rank, r.logprob) {
        (Some(1), _) => Verdict::Top,
        (_, Some(lp)) if lp.exp() >= OFF_DISTRIBUTION_P => Verdict::Sampled,
        _ => Verdict::OffDistribution,
    }
}

/// A run's re-scored tokens, counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct Counts {
    /// Tokens re-scored.
    pub tokens: usize,
    /// Of them, the reference's most probable.
    pub top: usize,
    /// A fair draw of the dice.
    pub sampled: usize,
    /// Off its distribution.
    pub off_distribution: usize,
    /// Requests with a token re-scored.
    pub requests: usize,
}

impl Counts {
    /// Counts one more token of request `request` (the references come by token, so a request's are together).
    fn add(&mut self, r: &Reference, last: &mut Option<u32>) {
        self.tokens += 1;
        match verdict(r) {
            Verdict::Top => self.top += 1,
            Verdict::Sampled => self.sampled += 1,
            Verdict::OffDistribution => self.off_distribution += 1,
        }
        if *last != Some(r.request) {
            self.requests += 1;
            *last = Some(r.request);
        }
    }
}

/// The counts over every re-scored token of `trace` (of `requests` only, when given).
pub fn counts(trace: &Trace, requests: Option<&[u32]>) -> Counts {
    let refs = &trace.references;
    let mut c = Counts::default();
    let mut last = None;
    for i in 0..refs.len() {
        let r = refs.row(i);
        if requests.is_none_or(|list| list.contains(&r.request)) {
            c.add(&r, &mut last);
        }
    }
    c
}

/// Each re-scored request's counts, in one pass: (request row, its counts), in the trace's order.
pub fn counts_by_request(trace: &Trace) -> Vec<(u32, Counts)> {
    let refs = &trace.references;
    let mut out: Vec<(u32, Counts)> = Vec::new();
    let mut last = None;
    for i in 0..refs.len() {
        let r = refs.row(i);
        if out.last().is_none_or(|(q, _)| *q != r.request) {
            out.push((r.request, Counts::default()));
        }
        if let Some((_, c)) = out.last_mut() {
            c.add(&r, &mut last);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::trace_of;

    #[test]
    fn each_emitted_token_is_the_models_choice_a_draw_or_off_its_distribution() {
        // r1 emitted three tokens: the reference's first (rank 1), a draw at p = e^-3 = 5.0 %, and one at
        // p = e^-8 = 0.034 %; r2's first token is not among the reference's 20 most probable and has no probability
        // given, its second is not among them either but at p = e^-4.8 = 0.82 % (a real draw at temperature 0.8).
        let t = trace_of(
            r#"{"kind":"request","request_id":"r1","arrival_ns":1764403200000000000}
{"kind":"request","request_id":"r2","arrival_ns":1764403200000000001}
{"kind":"token","request_id":"r1","index":0,"emitted_ns":1764403200100000000,"token_id":5}
{"kind":"token","request_id":"r1","index":1,"emitted_ns":1764403200200000000,"token_id":6}
{"kind":"token","request_id":"r1","index":2,"emitted_ns":1764403200300000000,"token_id":7}
{"kind":"token","request_id":"r2","index":0,"emitted_ns":1764403200400000000,"token_id":9}
{"kind":"token","request_id":"r2","index":1,"emitted_ns":1764403200500000000,"token_id":4}
{"kind":"reference","request_id":"r1","index":0,"logprob":-0.1,"rank":1,"top_k":20,"token_id":5,"text":"a","top_logprob":-0.1}
{"kind":"reference","request_id":"r1","index":1,"logprob":-3.0,"rank":4,"top_k":20,"token_id":8,"text":"b","top_logprob":-0.2}
{"kind":"reference","request_id":"r1","index":2,"logprob":-8.0,"rank":15,"top_k":20,"token_id":8,"text":"b","top_logprob":-0.05}
{"kind":"reference","request_id":"r2","index":0,"top_k":20,"token_id":3,"text":"c","top_logprob":-0.01}
{"kind":"reference","request_id":"r2","index":1,"logprob":-4.8,"top_k":20,"token_id":3,"text":"c","top_logprob":-2.1}
"#,
        );
        let verdicts: Vec<Verdict> = (0..t.references.len()).map(|i| verdict(&t.references.row(i))).collect();
        assert_eq!(
            verdicts,
            [
                Verdict::Top,
                Verdict::Sampled,
                Verdict::OffDistribution,
                Verdict::OffDistribution,
                Verdict::Sampled
            ]
        );
        // Each reference is on its token: r2's on token row 3.
        assert_eq!(t.reference_of(3).map(|r| r.top_token_id), Some(Some(3)));
        assert_eq!(
            counts(&t, None),
            Counts {
                tokens: 5,
                top: 1,
                sampled: 2,
                off_distribution: 2,
                requests: 2
            }
        );
        assert_eq!(counts(&t, Some(&[1])).tokens, 2);
        let by_request: Vec<(u32, usize, usize)> = counts_by_request(&t)
            .iter()
            .map(|(r, c)| (*r, c.tokens, c.off_distribution))
            .collect();
        assert_eq!(by_request, [(0, 3, 1), (1, 2, 1)]);
    }
}
