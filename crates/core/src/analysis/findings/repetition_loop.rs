//! Repetition loops: an answer that repeats an n-gram back to back.

use super::words::{percent, range};
use super::{After, Context, Detector, Finding, Kind, RequestTokens, Severity, Thresholds, Visitor};
use crate::analysis::summary::Slo;
use crate::analysis::tokens::display_text;
use crate::trace::{NO_STR, NULL_U32, Trace};

/// The detector of [`Kind::RepetitionLoop`].
pub(super) struct RepetitionLoop;

impl Detector for RepetitionLoop {
    fn kind(&self) -> Kind {
        Kind::RepetitionLoop
    }

    /// Answers that repeat an n-gram of their tokens (token ids, else texts) back to back: `repetition_repeats` times
    /// or more, over `repetition_min_tokens` tokens or more, for n from 1 to `repetition_ngram`. One finding per
    /// request, on its longest loop; the loop's first token is the one to select.
    fn visitor<'c>(&self, cx: &'c Context<'c>) -> Option<Box<dyn Visitor<'c> + 'c>> {
        Some(Box::new(Loops {
            cx,
            keys: Vec::new(),
            found: Vec::new(),
        }))
    }
}

/// The loops found so far: each finding with its request and its loop's tokens (first, count) among the request's.
struct Loops<'c> {
    cx: &'c Context<'c>,
    keys: Vec<u64>,
    found: Vec<(Finding, u32, usize, usize)>,
}

impl<'c> Visitor<'c> for Loops<'c> {
    fn texts(&self) -> bool {
        true
    }

    fn see(&mut self, rt: &RequestTokens<'_>) {
        let (trace, th) = (self.cx.trace, self.cx.th);
        let max_n = th.repetition_ngram.max(1) as usize;
        let repeats = th.repetition_repeats.max(2) as usize;
        let min_tokens = (th.repetition_min_tokens as usize).max(repeats);
        if rt.len() < min_tokens {
            return;
        }
        let keys = &mut self.keys;
        keys.clear();
        keys.extend((0..rt.len()).map(|k| {
            if rt.token_id[k] != NULL_U32 {
                u64::from(rt.token_id[k])
            } else if rt.text[k] != NO_STR {
                1 << 32 | u64::from(rt.text[k])
            } else {
                2 << 32 | k as u64 // unknown: equal to nothing else
            }
        }));
        let Some((start, span, n)) = longest_loop(keys, max_n, repeats, min_tokens) else {
            return;
        };
        let gram: String = (start..start + n)
            .map(|k| display_text(trace, rt.token_id[k], rt.texts.get(rt.text[k]), rt.special[k]))
            .collect();
        let gram = if gram.chars().count() > 40 {
            format!("{}…", gram.chars().take(40).collect::<String>())
        } else {
            gram
        };
        let r = rt.request;
        let summary = format!(
            "{} repeated “{gram}” ({n}-gram) {} times from token {}: {span} tokens, {:.0} % of its output",
            trace.request_id(r),
            span / n,
            rt.index[start],
            percent(span, rt.len()),
        );
        let (from_ns, to_ns) = range(rt.emitted_ns[start], rt.emitted_ns[start + span - 1]);
        let finding = Finding {
            kind: Kind::RepetitionLoop,
            severity: Severity::Warning,
            summary,
            from_ns,
            to_ns,
            requests: vec![r],
            steps: Vec::new(),
            tokens: Vec::new(),
        };
        self.found.push((finding, r, start, span));
    }

    fn finish(self: Box<Self>) -> After<'c> {
        let cx = self.cx;
        let mut out: Vec<Finding> = self
            .found
            .into_iter()
            .map(|(mut f, r, start, span)| {
                let first = cx.tokens.rows(r).start + start;
                f.tokens = (first..first + span).collect();
                f
            })
            .collect();
        // By request row, whatever order the requests were visited in.
        out.sort_by_key(|f| f.requests.first().copied());
        After::Findings(out)
    }
}

/// [`Kind::RepetitionLoop`]'s findings alone, unsorted.
pub fn repetition_loops(trace: &Trace, th: &Thresholds) -> Vec<Finding> {
    RepetitionLoop.detect(&Context::new(trace, &Slo::default(), th))
}

/// The longest stretch of `keys` that repeats an n-gram (n = 1 to `max_n`) back to back at least `repeats` times
/// and spans at least `min_tokens`: (start, length, n), the smallest n among the longest stretches.
fn longest_loop(keys: &[u64], max_n: usize, repeats: usize, min_tokens: usize) -> Option<(usize, usize, usize)> {
    let mut best: Option<(usize, usize, usize)> = None;
    for n in 1..=max_n.min(keys.len() / 2) {
        // run = consecutive positions i with keys[i] == keys[i - n]; the stretch is run + n tokens of period n.
        let mut run = 0usize;
        for i in n..=keys.len() {
            if i < keys.len() && keys[i] == keys[i - n] {
                run += 1;
                continue;
            }
            let span = run + n;
            if run > 0 && span >= min_tokens && span / n >= repeats && best.is_none_or(|b| span > b.1) {
                best = Some((i - span, span, n));
            }
            run = 0;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loop_is_the_longest_back_to_back_repetition() {
        // 1 2 3 (a b)×6 4: the 2-gram repeats 6 times over 12 tokens from position 3.
        let mut keys = vec![1, 2, 3];
        for _ in 0..6 {
            keys.extend([10, 11]);
        }
        keys.push(4);
        assert_eq!(longest_loop(&keys, 8, 4, 8), Some((3, 12, 2)));
        // Asked for 7 repeats, or 13 tokens: none.
        assert_eq!(longest_loop(&keys, 8, 7, 8), None);
        assert_eq!(longest_loop(&keys, 8, 4, 13), None);
        // Only 1-grams checked: none.
        assert_eq!(longest_loop(&keys, 1, 4, 8), None);
        // A loop running to the end, of a 1-gram.
        let mut tail = vec![5, 6];
        tail.extend([9; 10]);
        assert_eq!(longest_loop(&tail, 8, 4, 8), Some((2, 10, 1)));
        // A partial last repeat counts in the span: (1 2 3)×3 then 1 2 is 11 tokens of period 3.
        let partial = [1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2];
        assert_eq!(longest_loop(&partial, 8, 3, 8), Some((0, 11, 3)));
        assert_eq!(longest_loop(&[], 8, 4, 8), None);
    }
}
