//! The sampler: a synthetic vocabulary (ordinary words, whitespace, punctuation and special tokens) and, for every
//! generated token, seeded logits over a shortlist of candidates, their softmax, the top-k written to the trace and
//! the chosen token drawn from the distribution, so a chosen token of rank 2, 3 or beyond k happens at realistic
//! rates. End of generation is planned by the caller: a natural stop puts the stop token on top, a mis-trigger
//! gives it a low probability and a rank of 2 and picks it anyway.

use rand::RngExt;
use rand_distr::{Distribution, Normal};

/// `<|endoftext|>`: end of sequence, decoded as an empty string.
pub const EOS_ID: u32 = 0;
/// `<|im_start|>`: start of a chat turn.
pub const BOS_ID: u32 = 1;
/// `<|im_end|>`: end of a chat turn, the usual stop token; decoded as an empty string.
pub const IM_END_ID: u32 = 2;
/// Token ids that end generation.
pub const STOP_IDS: [u32; 2] = [EOS_ID, IM_END_ID];
/// The first ordinary token id.
const FIRST_WORD_ID: u32 = 3;

/// Ordinary tokens: frequent English word pieces, whitespace and punctuation, as a tokenizer would emit them.
const WORDS: &[&str] = &[
    " the",
    " of",
    " and",
    " to",
    " a",
    " in",
    " is",
    " that",
    " for",
    " it",
    " as",
    " with",
    " be",
    " on",
    " not",
    " this",
    " are",
    " by",
    " or",
    " can",
    " from",
    " at",
    " which",
    " an",
    " have",
    " you",
    " your",
    " will",
    " if",
    " more",
    " when",
    " may",
    " should",
    " also",
    " each",
    " other",
    " than",
    " some",
    " these",
    " time",
    " used",
    " first",
    " model",
    " data",
    " request",
    " token",
    " cache",
    " batch",
    " memory",
    " latency",
    " result",
    " patient",
    " dose",
    " symptoms",
    " treatment",
    " risk",
    " blood",
    " pressure",
    " heart",
    " doctor",
    " function",
    " return",
    " value",
    " list",
    " array",
    " string",
    " number",
    " loop",
    " index",
    " error",
    " example",
    " answer",
    " question",
    " step",
    " case",
    " way",
    " part",
    " system",
    " process",
    " point",
    " important",
    " different",
    " common",
    " possible",
    " usually",
    " however",
    " because",
    " before",
    " after",
    " between",
    " during",
    " without",
    " within",
    " about",
    " into",
    " over",
    " under",
    " through",
    " only",
    "ing",
    "ed",
    "ly",
    "s",
    "er",
    "tion",
    "al",
    "ment",
    "ness",
    "ity",
    ",",
    ".",
    ":",
    ";",
    "?",
    "!",
    "(",
    ")",
    "-",
    "\"",
    "'",
    "`",
    "**",
    "##",
    " 1",
    " 2",
    " 3",
    "0",
    "5",
    "%",
    "\n",
    "\n\n",
    " ",
    "  ",
    "\t",
    "\n-",
    "\n1.",
    "\n2.",
    "\n3.",
    "```",
];

/// One entry of the vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VocabEntry {
    /// Decoded text (empty for the stop tokens, as detokenizers skip special tokens).
    pub text: &'static str,
    /// A special token.
    pub special: bool,
}

/// The vocabulary entry of an id.
pub fn vocab(id: u32) -> VocabEntry {
    match id {
        EOS_ID | IM_END_ID => VocabEntry {
            text: "",
            special: true,
        },
        BOS_ID => VocabEntry {
            text: "<|im_start|>",
            special: true,
        },
        _ => VocabEntry {
            text: WORDS.get((id - FIRST_WORD_ID) as usize).copied().unwrap_or("?"),
            special: false,
        },
    }
}

/// Number of ordinary tokens.
#[expect(clippy::cast_possible_truncation, reason = "a short const table")]
const WORD_COUNT: u32 = WORDS.len() as u32;

/// Candidates drawn per token before the top-k is cut; the mass beyond them is the rest of the vocabulary.
const SHORTLIST: usize = 16;

/// A sampled token with its top-k alternatives.
#[derive(Debug, Clone, PartialEq)]
pub struct Sampled {
    /// The chosen token id.
    pub token_id: u32,
    /// Natural-log probability of the chosen token.
    pub logprob: f64,
    /// 1-based rank of the chosen token in the distribution.
    pub rank: u32,
    /// The top-k as (token id, logprob), most probable first.
    pub top: Vec<(u32, f64)>,
}

impl Sampled {
    /// True when the chosen token ends generation.
    pub fn is_stop(&self) -> bool {
        STOP_IDS.contains(&self.token_id)
    }
}

/// What the caller wants at this position.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Intent {
    /// An ordinary token, drawn from the distribution (stop tokens excluded).
    Continue,
    /// The natural end: the stop token on top with high probability, and chosen.
    Stop,
    /// A mis-triggered stop: the stop token at probability `p` and rank 2, chosen anyway.
    Mistrigger {
        /// Its probability.
        p: f64,
    },
}

/// Draws tokens; holds nothing but the top-k size.
#[derive(Debug, Clone, Copy)]
pub struct Sampler {
    /// Candidates written per token.
    pub top_k: usize,
}

impl Sampler {
    /// Samples one token.
    pub fn sample(&self, intent: Intent, rng: &mut impl rand::Rng) -> Sampled {
        debug_assert!(!matches!(intent, Intent::Mistrigger { p } if !(0.0..0.25).contains(&p)));
        // Logits of a shortlist of distinct ordinary tokens: a confident head most of the time, a flat one sometimes.
        let base = rng.random_range(0..WORD_COUNT);
        let confident = matches!(intent, Intent::Mistrigger { .. }) || rng.random_bool(0.7);
        let (margin, spread) = if confident {
            (rng.random_range(2.0..6.0), 0.6)
        } else {
            (rng.random_range(0.0..1.2), 0.35)
        };
        let noise = Normal::new(0.0, 0.3).ok();
        let mut logits: Vec<(u32, f64)> = (0..SHORTLIST)
            .map(|k| {
                let id = FIRST_WORD_ID + (base + 7 * k as u32) % WORD_COUNT;
                let jitter = noise.map_or(0.0, |n| n.sample(rng));
                let l = if k == 0 { margin } else { -(k as f64) * spread + jitter };
                (id, l)
            })
            .collect();
        // The rest of the vocabulary, as one lump of logit mass that is never chosen nor listed.
        let tail_logit = -1.0;
        let stop_id = IM_END_ID;
        match intent {
            Intent::Continue => {}
            Intent::Stop => logits[0] = (stop_id, margin.max(2.5) + 1.0),
            Intent::Mistrigger { p } => {
                // The top token keeps 75 %, the stop token gets exactly p, the rest of the shortlist and the tail
                // share what is left: solve the two logits against the others' mass R, with Z = R / (1 - p - q).
                let q = 0.75;
                let rest: f64 =
                    logits[1..SHORTLIST - 1].iter().map(|&(_, l)| l.exp()).sum::<f64>() + f64::exp(tail_logit);
                let z = rest / (1.0 - p - q);
                logits[0].1 = (q * z).ln();
                logits[SHORTLIST - 1] = (stop_id, (p * z).ln());
            }
        }
        let z: f64 = logits.iter().map(|&(_, l)| l.exp()).sum::<f64>() + f64::exp(tail_logit);
        let log_z = z.ln();
        let mut ranked: Vec<(u32, f64)> = logits.iter().map(|&(id, l)| (id, l - log_z)).collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1));
        let chosen = match intent {
            Intent::Stop | Intent::Mistrigger { .. } => ranked.iter().position(|&(id, _)| id == stop_id).unwrap_or(0),
            Intent::Continue => {
                // Inverse-CDF draw over the shortlist (renormalised: the tail lump is not a token).
                let total: f64 = ranked.iter().map(|&(_, lp)| lp.exp()).sum();
                let mut u = rng.random_range(0.0..total);
                ranked
                    .iter()
                    .position(|&(_, lp)| {
                        u -= lp.exp();
                        u <= 0.0
                    })
                    .unwrap_or(0)
            }
        };
        let (token_id, logprob) = ranked[chosen];
        Sampled {
            token_id,
            logprob,
            rank: u32::try_from(chosen + 1).unwrap_or(u32::MAX),
            top: ranked.into_iter().take(self.top_k).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_pcg::Pcg64Mcg;

    #[test]
    fn stop_tokens_decode_to_empty_text_and_are_special() {
        assert_eq!(
            vocab(EOS_ID),
            VocabEntry {
                text: "",
                special: true
            }
        );
        assert_eq!(vocab(IM_END_ID).text, "");
        assert!(!vocab(FIRST_WORD_ID).special);
        assert_eq!(vocab(FIRST_WORD_ID).text, " the");
    }

    #[test]
    fn a_mistrigger_is_rank_2_at_the_asked_probability() {
        let mut rng = Pcg64Mcg::seed_from_u64(7);
        let s = Sampler { top_k: 5 }.sample(Intent::Mistrigger { p: 0.10 }, &mut rng);
        assert!(s.is_stop());
        assert_eq!(s.rank, 2);
        assert!((s.logprob.exp() - 0.10).abs() < 1e-9, "{}", s.logprob.exp());
        assert_eq!(s.top[1], (IM_END_ID, s.logprob));
    }

    #[test]
    fn ranks_beyond_one_happen_at_realistic_rates() {
        let mut rng = Pcg64Mcg::seed_from_u64(1);
        let sampler = Sampler { top_k: 5 };
        let n = 20_000;
        let mut ranks = [0usize; 3]; // rank 1, 2..=5, > 5
        for _ in 0..n {
            let s = sampler.sample(Intent::Continue, &mut rng);
            assert!(!s.is_stop());
            assert_eq!(s.top.len(), 5);
            assert!(s.top.windows(2).all(|w| w[0].1 >= w[1].1), "most probable first");
            match s.rank {
                1 => ranks[0] += 1,
                2..=5 => ranks[1] += 1,
                _ => ranks[2] += 1,
            }
        }
        // Most tokens are the top choice, a sizeable minority are not, and a few fall outside the top 5.
        let share = |c: usize| c as f64 / f64::from(n);
        assert!(share(ranks[0]) > 0.6 && share(ranks[0]) < 0.9, "{ranks:?}");
        assert!(share(ranks[1]) > 0.1, "{ranks:?}");
        assert!(ranks[2] > 0 && share(ranks[2]) < 0.05, "{ranks:?}");
    }
}
