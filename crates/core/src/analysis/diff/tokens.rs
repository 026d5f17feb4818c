//! Two runs of the same prompts compared token by token: where each pair of answers parts, and how far the two
//! runs' distributions are apart where they still had the same context.
//!
//! The figures of a pair, over its *compared positions*: every position before the first divergence, and the
//! divergence itself when both runs emitted a token there (the context is the same up to it, so the two
//! distributions at it answer the same question). Past the divergence the contexts differ and nothing is compared.
//! - **top-1 agreement**: the share of compared positions where both runs' most probable candidate is the same token.
//! - **KL divergence** KL(A‖B) at a position: the candidates both runs listed, each with its own probability, plus one
//!   bucket for the rest of each run's probability (everything outside the shared candidates). Merging outcomes
//!   can only lower a KL divergence, so this is a lower bound of the full-vocabulary figure; it is 0 when the shared
//!   candidates have the same probabilities in both and the rest has the same mass. A position whose lists share no
//!   candidate is counted as disjoint and given no KL.
//! - **rank changes**: positions where A's emitted token does not have the same rank among B's candidates as among
//!   A's (a token missing from a top-k list ranks beyond it).
//!
//! Tokens are the same when their vocabulary ids are (their texts when either has no id).

use std::collections::HashMap;

use serde::Serialize;

use super::pairing::{Pairing, pair_requests};
use crate::trace::{NO_STR, NULL_U32, Trace};

/// Below this, a probability mass (the bucket of the rest) counts as this: candidate lists whose shown
/// probabilities sum to one or a little more leave no mass, and rounding must not make the KL infinite.
const MASS_FLOOR: f64 = 1e-6;

/// The default of `--kl-shift`: a pair whose mean KL over its compared positions is above this many nats has a
/// shifted distribution.
pub const DEFAULT_KL_SHIFT: f64 = 0.01;

/// A token or a candidate, as compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TokenView {
    /// Decoded text, when the source wrote it.
    pub text: Option<String>,
    /// Vocabulary id, when the source wrote it.
    pub token_id: Option<u32>,
    /// Natural-log probability, when known.
    pub logprob: Option<f64>,
    /// Marked special (or one of the trace's EOS ids).
    pub special: bool,
}

/// One side of a divergence: the token a run emitted there and its candidates.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Emitted {
    /// The token.
    pub token: TokenView,
    /// Its 1-based rank among this run's candidates (`None`: not among them, or no candidates).
    pub rank: Option<u32>,
    /// Its rank among the other run's candidates at the same position.
    pub rank_in_other: Option<u32>,
    /// This run's candidates there, most probable first.
    pub candidates: Vec<TokenView>,
}

/// Where two answers part.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Divergence {
    /// A's token there; `None` when A's answer ended there.
    pub a: Option<Emitted>,
    /// B's token there; `None` when B's answer ended there.
    pub b: Option<Emitted>,
}

/// A compared position where A's emitted token ranks differently among B's candidates.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RankChange {
    /// The position.
    pub index: u32,
    /// A's emitted token.
    pub token: TokenView,
    /// Its rank in A (`None`: beyond A's list).
    pub rank_a: Option<u32>,
    /// Its rank in B (`None`: beyond B's list).
    pub rank_b: Option<u32>,
}

/// What a pair is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PairVerdict {
    /// The same tokens, and distributions no further apart than the threshold (or not compared).
    Identical,
    /// The answers part, but the distributions up to the divergence are within the threshold: the dice (or a near
    /// tie broken the other way), not the model.
    Sampling,
    /// The mean KL over the compared positions is above the threshold: the model's distribution moved.
    Shifted,
    /// The answers part and neither run has candidates at the compared positions: whether the distribution moved is
    /// unknown.
    Parted,
}

impl PairVerdict {
    /// Words for the output.
    pub fn name(self) -> &'static str {
        match self {
            PairVerdict::Identical => "identical",
            PairVerdict::Sampling => "sampling",
            PairVerdict::Shifted => "shifted",
            PairVerdict::Parted => "parted",
        }
    }
}

/// One pair of requests compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TokenPair {
    /// Row in A.
    #[serde(skip)]
    pub row_a: u32,
    /// Row in B.
    #[serde(skip)]
    pub row_b: u32,
    /// Tokens in A's answer.
    pub length_a: u32,
    /// Tokens in B's answer.
    pub length_b: u32,
    /// The first position where the answers differ; the shorter's length when one is a prefix of the other;
    /// `None` when they are the same.
    pub first_divergence: Option<u32>,
    /// The two tokens there, with their candidates.
    pub divergence: Option<Divergence>,
    /// Positions compared (see the module's doc).
    pub positions_compared: u32,
    /// Of those, the ones where both runs had candidates.
    pub positions_with_candidates: u32,
    /// Share of positions with candidates whose most probable candidate is the same in both.
    pub top1_agreement: Option<f64>,
    /// Mean KL(A‖B) over the positions with shared candidates, in nats.
    pub kl_mean: Option<f64>,
    /// The largest, and where.
    pub kl_max: Option<f64>,
    /// Position of `kl_max`.
    pub kl_max_at: Option<u32>,
    /// Positions whose candidate lists share no token.
    pub disjoint_positions: u32,
    /// Positions where A's emitted token ranks differently in B.
    pub rank_changes: Vec<RankChange>,
    /// Special tokens A emitted that B did not (by count), as texts (or ids).
    pub special_only_a: Vec<String>,
    /// Special tokens B emitted that A did not.
    pub special_only_b: Vec<String>,
    /// What the pair is.
    pub verdict: PairVerdict,
}

/// Figures over all pairs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Overall {
    /// Pairs compared.
    pub pairs: usize,
    /// Pairs by verdict.
    pub identical: usize,
    /// See [`PairVerdict::Sampling`].
    pub sampling: usize,
    /// See [`PairVerdict::Shifted`].
    pub shifted: usize,
    /// See [`PairVerdict::Parted`].
    pub parted: usize,
    /// The first divergence of the pairs that part: smallest, median, largest.
    pub first_divergence_min: Option<u32>,
    /// Median (the lower middle of an even count).
    pub first_divergence_p50: Option<u32>,
    /// Largest.
    pub first_divergence_max: Option<u32>,
    /// Top-1 agreement over every compared position with candidates, pooled.
    pub top1_agreement: Option<f64>,
    /// Mean KL over every position with shared candidates, pooled.
    pub kl_mean: Option<f64>,
    /// The pairs' mean KLs: median, 90th percentile (nearest rank), largest.
    pub pair_kl_mean_p50: Option<f64>,
    /// 90th percentile.
    pub pair_kl_mean_p90: Option<f64>,
    /// Largest.
    pub pair_kl_mean_max: Option<f64>,
    /// The largest KL at any position.
    pub kl_max: Option<f64>,
    /// Compared positions, all pairs.
    pub positions_compared: u64,
    /// Positions whose lists share no token.
    pub disjoint_positions: u64,
}

/// The token-by-token comparison of two traces.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenDiff {
    /// How the requests were paired.
    pub pairing: Pairing,
    /// One entry per pair with tokens on both sides, in A's arrival order.
    pub pairs: Vec<TokenPair>,
    /// Pairs left out because one side has no tokens.
    pub without_tokens: usize,
    /// Over all pairs.
    pub overall: Overall,
    /// The threshold the verdicts used.
    pub kl_shift: f64,
}

/// True when two tokens, `(id, text)` in their traces, are the same token.
fn same(a: (u32, u32), ta: &Trace, b: (u32, u32), tb: &Trace) -> bool {
    let ((ida, xa), (idb, xb)) = (a, b);
    if ida != NULL_U32 && idb != NULL_U32 {
        return ida == idb;
    }
    match (ta.texts.get(xa), tb.texts.get(xb)) {
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}

/// One position of one run: its emitted token and its candidates (id, text, logprob), most probable first.
struct Position<'t> {
    trace: &'t Trace,
    token: usize,
    cands: Vec<(u32, u32, f64)>,
}

impl<'t> Position<'t> {
    fn of(trace: &'t Trace, token: usize) -> Self {
        let mut cands: Vec<(u32, u32, f64)> = trace
            .candidates_of(token)
            .map(|c| {
                (
                    trace.candidates.token_id[c],
                    trace.candidates.text[c],
                    trace.candidates.logprob[c],
                )
            })
            .filter(|c| c.2.is_finite())
            .collect();
        cands.sort_by(|x, y| y.2.total_cmp(&x.2));
        Position { trace, token, cands }
    }

    fn emitted(&self) -> (u32, u32) {
        (
            self.trace.tokens.token_id[self.token],
            self.trace.tokens.text[self.token],
        )
    }

    /// The 1-based rank of `(id, text)` of `other` among this position's candidates.
    fn rank_of(&self, t: (u32, u32), other: &Trace) -> Option<u32> {
        self.cands
            .iter()
            .position(|&(id, text, _)| same((id, text), self.trace, t, other))
            .and_then(|i| u32::try_from(i + 1).ok())
    }

    fn view(&self) -> TokenView {
        let t = &self.trace.tokens;
        let i = self.token;
        TokenView {
            text: self.trace.texts.get(t.text[i]).map(str::to_owned),
            token_id: (t.token_id[i] != NULL_U32).then_some(t.token_id[i]),
            logprob: t.logprob[i].is_finite().then_some(t.logprob[i]),
            special: self.trace.is_special_token(t.token_id[i], t.special[i]),
        }
    }

    fn candidate_views(&self) -> Vec<TokenView> {
        self.cands
            .iter()
            .map(|&(id, text, lp)| TokenView {
                text: self.trace.texts.get(text).map(str::to_owned),
                token_id: (id != NULL_U32).then_some(id),
                logprob: Some(lp),
                special: id != NULL_U32 && self.trace.is_special_token(id, crate::trace::Flag::Null),
            })
            .collect()
    }

    /// Its own rank: as written, else from its candidates.
    fn own_rank(&self) -> Option<u32> {
        let r = self.trace.tokens.rank[self.token];
        if r == NULL_U32 {
            self.rank_of(self.emitted(), self.trace)
        } else {
            Some(r)
        }
    }

    fn emitted_view(&self, other: &Position<'_>) -> Emitted {
        Emitted {
            token: self.view(),
            rank: self.own_rank(),
            rank_in_other: other.rank_of(self.emitted(), self.trace),
            candidates: self.candidate_views(),
        }
    }
}

/// KL(A‖B) over the candidates both list plus one bucket for the rest; `None` when they share none.
fn kl(a: &Position<'_>, b: &Position<'_>) -> Option<f64> {
    let (mut shared_a, mut shared_b, mut sum, mut any) = (0.0f64, 0.0f64, 0.0f64, false);
    let mut taken = vec![false; b.cands.len()];
    for &(id, text, lp) in &a.cands {
        let Some(j) =
            (0..b.cands.len()).find(|&j| !taken[j] && same((id, text), a.trace, (b.cands[j].0, b.cands[j].1), b.trace))
        else {
            continue;
        };
        taken[j] = true;
        any = true;
        let (p, q) = (lp.exp(), b.cands[j].2.exp());
        shared_a += p;
        shared_b += q;
        sum += p * (lp - b.cands[j].2);
    }
    if !any {
        return None;
    }
    let (rest_a, rest_b) = ((1.0 - shared_a).max(MASS_FLOOR), (1.0 - shared_b).max(MASS_FLOOR));
    Some((sum + rest_a * (rest_a / rest_b).ln()).max(0.0))
}

fn specials(trace: &Trace, tokens: std::ops::Range<usize>) -> HashMap<String, usize> {
    let mut out = HashMap::new();
    for i in tokens {
        let (id, flag) = (trace.tokens.token_id[i], trace.tokens.special[i]);
        if trace.is_special_token(id, flag) {
            let name = trace
                .texts
                .get(trace.tokens.text[i])
                .filter(|s| !s.is_empty())
                .map_or_else(|| format!("id {id}"), str::to_owned);
            *out.entry(name).or_default() += 1;
        }
    }
    out
}

fn only_in(x: &HashMap<String, usize>, y: &HashMap<String, usize>) -> Vec<String> {
    let mut out: Vec<String> = x
        .iter()
        .flat_map(|(name, &n)| std::iter::repeat_n(name.clone(), n.saturating_sub(y.get(name).copied().unwrap_or(0))))
        .collect();
    out.sort();
    out
}

fn compare_pair(a: &Trace, ra: u32, b: &Trace, rb: u32, kl_shift: f64) -> TokenPair {
    let (ta, tb) = (a.tokens_of(ra), b.tokens_of(rb));
    let (na, nb) = (ta.len(), tb.len());
    let shared = na.min(nb);
    let divergence_at = (0..shared)
        .find(|&i| {
            let (x, y) = (ta.start + i, tb.start + i);
            !same(
                (a.tokens.token_id[x], a.tokens.text[x]),
                a,
                (b.tokens.token_id[y], b.tokens.text[y]),
                b,
            )
        })
        .or((na != nb).then_some(shared));
    // Positions compared: before the divergence, and the divergence itself when both have a token there.
    let compared = divergence_at.map_or(shared, |d| (d + 1).min(shared));
    let (mut with_cands, mut agree, mut disjoint) = (0u32, 0u32, 0u32);
    let (mut kls, mut rank_changes) = (Vec::new(), Vec::new());
    for i in 0..compared {
        let (pa, pb) = (Position::of(a, ta.start + i), Position::of(b, tb.start + i));
        let index = u32::try_from(i).unwrap_or(u32::MAX);
        if pa.cands.is_empty() || pb.cands.is_empty() {
            continue;
        }
        with_cands += 1;
        let (top_a, top_b) = (pa.cands[0], pb.cands[0]);
        agree += u32::from(same((top_a.0, top_a.1), a, (top_b.0, top_b.1), b));
        match kl(&pa, &pb) {
            Some(k) => kls.push((index, k)),
            None => disjoint += 1,
        }
        let (rank_a, rank_b) = (pa.own_rank(), pb.rank_of(pa.emitted(), a));
        if rank_a != rank_b {
            rank_changes.push(RankChange {
                index,
                token: pa.view(),
                rank_a,
                rank_b,
            });
        }
    }
    let divergence = divergence_at.map(|d| {
        let side = |t: &Trace, r: &std::ops::Range<usize>, other: &Trace, ro: &std::ops::Range<usize>| {
            (d < r.len()).then(|| {
                let this = Position::of(t, r.start + d);
                let there = if d < ro.len() {
                    Position::of(other, ro.start + d)
                } else {
                    Position {
                        trace: other,
                        token: ro.start,
                        cands: Vec::new(),
                    }
                };
                this.emitted_view(&there)
            })
        };
        Divergence {
            a: side(a, &ta, b, &tb),
            b: side(b, &tb, a, &ta),
        }
    });
    let kl_mean = (!kls.is_empty()).then(|| kls.iter().map(|k| k.1).sum::<f64>() / kls.len() as f64);
    let max = kls.iter().copied().max_by(|x, y| x.1.total_cmp(&y.1));
    let verdict = match (divergence_at, kl_mean) {
        (_, Some(k)) if k > kl_shift => PairVerdict::Shifted,
        (None, _) => PairVerdict::Identical,
        (Some(_), Some(_)) => PairVerdict::Sampling,
        (Some(_), None) => PairVerdict::Parted,
    };
    let (sa, sb) = (specials(a, ta.clone()), specials(b, tb.clone()));
    let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    TokenPair {
        row_a: ra,
        row_b: rb,
        length_a: count(na),
        length_b: count(nb),
        first_divergence: divergence_at.map(count),
        divergence,
        positions_compared: count(compared),
        positions_with_candidates: with_cands,
        top1_agreement: (with_cands > 0).then(|| f64::from(agree) / f64::from(with_cands)),
        kl_mean,
        kl_max: max.map(|m| m.1),
        kl_max_at: max.map(|m| m.0),
        disjoint_positions: disjoint,
        rank_changes,
        special_only_a: only_in(&sa, &sb),
        special_only_b: only_in(&sb, &sa),
        verdict,
    }
}

/// The nearest-rank percentile `q` (0..1) of sorted values.
fn nearest_rank<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )]
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    Some(sorted[rank - 1])
}

fn overall(pairs: &[TokenPair]) -> Overall {
    let count = |v: PairVerdict| pairs.iter().filter(|p| p.verdict == v).count();
    let mut firsts: Vec<u32> = pairs.iter().filter_map(|p| p.first_divergence).collect();
    firsts.sort_unstable();
    let mut means: Vec<f64> = pairs.iter().filter_map(|p| p.kl_mean).collect();
    means.sort_by(f64::total_cmp);
    let with_cands: u64 = pairs.iter().map(|p| u64::from(p.positions_with_candidates)).sum();
    let agree: f64 = pairs
        .iter()
        .filter_map(|p| p.top1_agreement.map(|t| t * f64::from(p.positions_with_candidates)))
        .sum();
    let kl_positions: u64 = pairs
        .iter()
        .filter(|p| p.kl_mean.is_some())
        .map(|p| u64::from(p.positions_with_candidates - p.disjoint_positions))
        .sum();
    let kl_sum: f64 = pairs
        .iter()
        .filter_map(|p| {
            p.kl_mean
                .map(|k| k * f64::from(p.positions_with_candidates - p.disjoint_positions))
        })
        .sum();
    #[allow(clippy::cast_precision_loss)]
    Overall {
        pairs: pairs.len(),
        identical: count(PairVerdict::Identical),
        sampling: count(PairVerdict::Sampling),
        shifted: count(PairVerdict::Shifted),
        parted: count(PairVerdict::Parted),
        first_divergence_min: firsts.first().copied(),
        first_divergence_p50: nearest_rank(&firsts, 0.5),
        first_divergence_max: firsts.last().copied(),
        top1_agreement: (with_cands > 0).then(|| agree / with_cands as f64),
        kl_mean: (kl_positions > 0).then(|| kl_sum / kl_positions as f64),
        pair_kl_mean_p50: nearest_rank(&means, 0.5),
        pair_kl_mean_p90: nearest_rank(&means, 0.9),
        pair_kl_mean_max: means.last().copied(),
        kl_max: pairs.iter().filter_map(|p| p.kl_max).max_by(f64::total_cmp),
        positions_compared: pairs.iter().map(|p| u64::from(p.positions_compared)).sum(),
        disjoint_positions: pairs.iter().map(|p| u64::from(p.disjoint_positions)).sum(),
    }
}

/// Pairs by the prompt's hash when both traces carry one for at least half of the smaller trace's requests (the
/// k-th request of a prompt in A with the k-th of the same prompt in B); else as [`pair_requests`] does.
pub fn pair_by_prompt(a: &Trace, b: &Trace) -> Pairing {
    fn hashes(t: &Trace) -> Vec<Option<&str>> {
        t.requests
            .prompt_hash
            .iter()
            .map(|&h| if h == NO_STR { None } else { t.labels.get(h) })
            .collect()
    }
    let (ha, hb) = (hashes(a), hashes(b));
    let mut queue: HashMap<&str, std::collections::VecDeque<u32>> = HashMap::new();
    for (rb, h) in hb.iter().enumerate() {
        if let (Some(h), Ok(rb)) = (h, u32::try_from(rb)) {
            queue.entry(h).or_default().push_back(rb);
        }
    }
    let pairs: Vec<(u32, u32)> = ha
        .iter()
        .enumerate()
        .filter_map(|(ra, h)| {
            let rb = queue.get_mut((*h)?)?.pop_front()?;
            Some((u32::try_from(ra).ok()?, rb))
        })
        .collect();
    let smaller = a.request_count().min(b.request_count());
    if smaller > 0 && pairs.len() * 2 >= smaller {
        Pairing {
            by: super::PairedBy::Prompt,
            only_a: a.request_count() - pairs.len(),
            only_b: b.request_count() - pairs.len(),
            pairs,
        }
    } else {
        pair_requests(a, b)
    }
}

/// Compares A and B token by token; `kl_shift` is the mean KL (nats) above which a pair's distribution shifted.
pub fn compare_tokens(a: &Trace, b: &Trace, kl_shift: f64) -> TokenDiff {
    let pairing = pair_by_prompt(a, b);
    let mut without_tokens = 0;
    let pairs: Vec<TokenPair> = pairing
        .pairs
        .iter()
        .filter_map(|&(ra, rb)| {
            if a.tokens_of(ra).is_empty() || b.tokens_of(rb).is_empty() {
                without_tokens += 1;
                return None;
            }
            Some(compare_pair(a, ra, b, rb, kl_shift))
        })
        .collect();
    TokenDiff {
        overall: overall(&pairs),
        pairing,
        pairs,
        without_tokens,
        kl_shift,
    }
}
