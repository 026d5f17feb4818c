//! The least-squares fit of the step-cost model: `duration = Σ coefficient × term`, weighted so that every step's
//! error counts relative to its duration (a 20 ms decode step matters as much as a 7 s prefill), with a 95 %
//! confidence interval per coefficient. A term the steps never exercise is not fitted; a term whose estimate comes
//! out negative (no real work makes a step faster) is dropped and the rest refitted.

use nalgebra::{DMatrix, DVector};

use super::work::StepSample;
use crate::cost::{Regimes, StepWork};

/// A term of the step-cost model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Term {
    /// The fixed cost of a step, ms.
    BaseMs,
    /// Per prompt token computed, ms.
    PrefillTokenMs,
    /// Per prefill chunk (a sequence prefilling in the step), ms.
    PrefillChunkMs,
    /// Per decoding sequence, ms.
    DecodeSeqMs,
    /// Per draft token a speculative verify step checks, ms.
    VerifyTokenMs,
    /// Per context token a decoding sequence reads, ms.
    ContextTokenMs,
    /// Per attention pair of a prefill chunk, ms.
    AttentionPairMs,
    /// Fixed cost of a step in the large-batch regime (at least the knot's tokens), ms.
    LargeBatchMs,
    /// Per token of a step in the small-batch regime (under the knot's tokens), ms.
    SmallBatchTokenMs,
}

impl Term {
    /// Every term, in the model's order.
    pub const ALL: [Term; 9] = [
        Term::BaseMs,
        Term::PrefillTokenMs,
        Term::PrefillChunkMs,
        Term::DecodeSeqMs,
        Term::VerifyTokenMs,
        Term::ContextTokenMs,
        Term::AttentionPairMs,
        Term::LargeBatchMs,
        Term::SmallBatchTokenMs,
    ];

    /// Its name in the report and the profile file.
    pub fn name(self) -> &'static str {
        match self {
            Term::BaseMs => "base_ms",
            Term::PrefillTokenMs => "prefill_token_ms",
            Term::PrefillChunkMs => "prefill_chunk_ms",
            Term::DecodeSeqMs => "decode_seq_ms",
            Term::VerifyTokenMs => "verify_token_ms",
            Term::ContextTokenMs => "context_token_ms",
            Term::AttentionPairMs => "attention_pair_ms",
            Term::LargeBatchMs => "large_batch_ms",
            Term::SmallBatchTokenMs => "small_batch_token_ms",
        }
    }

    /// What it counts, for a person.
    pub fn per(self) -> &'static str {
        match self {
            Term::BaseMs => "per step (per pass when passes split)",
            Term::PrefillTokenMs => "per prompt token",
            Term::PrefillChunkMs => "per prefill chunk",
            Term::DecodeSeqMs => "per decoding sequence",
            Term::VerifyTokenMs => "per draft token verified",
            Term::ContextTokenMs => "per context token read by a decode",
            Term::AttentionPairMs => "per attention pair of a prefill chunk",
            Term::LargeBatchMs => "per pass of the large-batch regime",
            Term::SmallBatchTokenMs => "per token of a small-batch pass",
        }
    }

    /// The term's value for a step's work under the batch regimes `r`.
    #[expect(clippy::cast_precision_loss, reason = "token counts far below 2^53")]
    pub fn of(self, w: &StepWork, r: Regimes) -> f64 {
        match self {
            Term::BaseMs => w.passes(r).passes as f64,
            Term::LargeBatchMs => w.passes(r).large as f64,
            Term::SmallBatchTokenMs => w.passes(r).small_tokens as f64,
            Term::PrefillTokenMs => w.prefill_tokens as f64,
            Term::PrefillChunkMs => w.prefill_chunks as f64,
            Term::DecodeSeqMs => w.decode_seqs as f64,
            Term::VerifyTokenMs => w.verify_tokens as f64,
            Term::ContextTokenMs => w.decode_context_tokens as f64,
            Term::AttentionPairMs => w.attention_pairs as f64,
        }
    }
}

/// Whether and how a term was fitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Status {
    /// Estimated from the steps.
    Fitted,
    /// No step exercises it (or the source does not say how much of it a step did): taken as 0.
    NotInData,
    /// Its estimate was negative, which no real work can be: taken as 0 and the rest refitted.
    Negative,
    /// Every decoding sequence verified the same number of drafts: their cost cannot be told from the sequence's
    /// own and is inside `decode_seq_ms` (right for a simulation with that draft length).
    InDecode,
}

/// One coefficient of the fit.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Coefficient {
    /// The term.
    pub term: Term,
    /// Its estimate (0 when not fitted).
    pub value: f64,
    /// The 95 % confidence interval of the estimate, when fitted.
    pub ci95: Option<(f64, f64)>,
    /// Whether it was fitted.
    pub status: Status,
}

/// The fit: one coefficient per term, and the spread of the relative residuals.
#[derive(Debug, Clone, PartialEq)]
pub struct Regression {
    /// In the order of [`Term::ALL`].
    pub coefficients: Vec<Coefficient>,
    /// The standard deviation of `(measured - predicted) / measured` over the steps.
    pub relative_sigma: f64,
    /// The batch regimes the terms were read under.
    pub regimes: Regimes,
}

impl Regression {
    /// The value of a term.
    pub fn value(&self, term: Term) -> f64 {
        self.coefficients
            .iter()
            .find(|c| c.term == term)
            .map_or(0.0, |c| c.value)
    }

    /// The predicted duration of a step, ms.
    pub fn predict(&self, w: &StepWork) -> f64 {
        self.coefficients
            .iter()
            .map(|c| c.value * c.term.of(w, self.regimes))
            .sum()
    }
}

/// Why the steps could not be fitted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegressError {
    /// Fewer steps than the fit needs.
    #[error("{have} steps with known work; a fit of {terms} terms needs at least {need}")]
    TooFew {
        /// Steps given.
        have: usize,
        /// Terms the data exercises.
        terms: usize,
        /// Steps needed.
        need: usize,
    },
    /// The terms cannot be told apart (every step did the same mix of work).
    #[error(
        "the steps cannot tell the terms apart ({0}): every step did the same mix of work; fit on a run with \
         varied load"
    )]
    Singular(String),
}

/// Steps needed per fitted term, beyond the terms themselves: fewer leave the intervals meaningless.
pub const STEPS_PER_TERM: usize = 5;
/// The fewest steps a fit takes at all.
pub const MIN_STEPS: usize = 20;

/// True when every step verified the same number of drafts per decoding sequence: the verify tokens are then a
/// multiple of the decoding sequences, and the two terms cannot be told apart.
fn fixed_drafts(steps: &[StepSample]) -> bool {
    let mut ratio: Option<(u64, u64)> = None;
    steps.iter().filter(|s| s.work.decode_seqs > 0).all(|s| {
        let (v, d) = (s.work.verify_tokens, s.work.decode_seqs);
        let (v0, d0) = *ratio.get_or_insert((v, d));
        u128::from(v) * u128::from(d0) == u128::from(v0) * u128::from(d)
    })
}

/// Fits the terms the steps exercise (`allowed` says which the source can measure at all).
///
/// # Errors
/// Too few steps, or terms the steps cannot tell apart.
pub fn fit(steps: &[StepSample], allowed: &[Term], regimes: Regimes) -> Result<Regression, RegressError> {
    let mut status: Vec<Status> = Term::ALL
        .iter()
        .map(|t| {
            let some = steps.iter().any(|s| t.of(&s.work, regimes) > 0.0);
            let exercised = match t {
                Term::BaseMs => true,
                // Large-batch passes as many as the passes in every step are the base again.
                Term::LargeBatchMs => {
                    some && steps.iter().any(|s| {
                        let p = s.work.passes(regimes);
                        p.large != p.passes
                    })
                }
                _ => some,
            };
            if *t == Term::VerifyTokenMs && exercised && fixed_drafts(steps) {
                Status::InDecode
            } else if allowed.contains(t) && exercised {
                Status::Fitted
            } else {
                Status::NotInData
            }
        })
        .collect();
    loop {
        let active: Vec<Term> = Term::ALL
            .iter()
            .zip(&status)
            .filter(|(_, s)| **s == Status::Fitted)
            .map(|(t, _)| *t)
            .collect();
        let need = MIN_STEPS.max(active.len() * (STEPS_PER_TERM + 1));
        if steps.len() < need {
            return Err(RegressError::TooFew {
                have: steps.len(),
                terms: active.len(),
                need,
            });
        }
        let (beta, cov, sigma) = solve(steps, &active, regimes)?;
        // The most negative estimate, by its t-value, is dropped first; the rest are refitted without it.
        let worst = beta
            .iter()
            .enumerate()
            .filter(|(_, b)| **b < 0.0)
            .min_by(|(i, a), (j, b)| (**a / cov[(*i, *i)].sqrt()).total_cmp(&(**b / cov[(*j, *j)].sqrt())))
            .map(|(i, _)| active[i]);
        if let Some(term) = worst {
            let k = Term::ALL.iter().position(|t| *t == term).unwrap_or(0);
            status[k] = Status::Negative;
            continue;
        }
        let coefficients = Term::ALL
            .iter()
            .zip(&status)
            .map(|(t, s)| match active.iter().position(|a| a == t) {
                Some(i) => {
                    let half = 1.96 * cov[(i, i)].max(0.0).sqrt();
                    Coefficient {
                        term: *t,
                        value: beta[i],
                        ci95: Some((beta[i] - half, beta[i] + half)),
                        status: Status::Fitted,
                    }
                }
                None => Coefficient {
                    term: *t,
                    value: 0.0,
                    ci95: None,
                    status: *s,
                },
            })
            .collect();
        return Ok(Regression {
            coefficients,
            relative_sigma: sigma,
            regimes,
        });
    }
}

/// Weighted least squares of the active terms: each row divided by the step's duration, so the residuals are
/// relative. Columns are scaled to a largest value of 1 before the solve (prompt tokens and attention pairs differ
/// by six orders of magnitude) and the estimates scaled back. Returns the estimates, their covariance and the
/// standard deviation of the relative residuals.
fn solve(
    steps: &[StepSample],
    active: &[Term],
    regimes: Regimes,
) -> Result<(Vec<f64>, DMatrix<f64>, f64), RegressError> {
    let (n, p) = (steps.len(), active.len());
    let mut x = DMatrix::<f64>::zeros(n, p);
    for (i, s) in steps.iter().enumerate() {
        for (j, t) in active.iter().enumerate() {
            x[(i, j)] = t.of(&s.work, regimes) / s.duration_ms;
        }
    }
    let scale: Vec<f64> = (0..p)
        .map(|j| x.column(j).amax())
        .map(|m| if m > 0.0 { m } else { 1.0 })
        .collect();
    for (j, s) in scale.iter().enumerate() {
        x.column_mut(j).scale_mut(1.0 / s);
    }
    let y = DVector::<f64>::from_element(n, 1.0);
    let xtx = x.transpose() * &x;
    let names = || active.iter().map(|t| t.name()).collect::<Vec<_>>().join(", ");
    let inverse = xtx
        .clone()
        .try_inverse()
        .ok_or_else(|| RegressError::Singular(names()))?;
    // A near-singular system inverts to garbage: the condition number says whether the terms are apart.
    let eigen = xtx.symmetric_eigenvalues();
    let (lo, hi) = (eigen.min(), eigen.max());
    let apart = lo.is_finite() && hi.is_finite() && lo > hi * 1e-12;
    if !apart {
        return Err(RegressError::Singular(names()));
    }
    let scaled_beta = &inverse * x.transpose() * &y;
    let residuals = &y - &x * &scaled_beta;
    #[expect(clippy::cast_precision_loss, reason = "step counts far below 2^53")]
    let dof = (n - p).max(1) as f64;
    let sigma2 = residuals.norm_squared() / dof;
    let beta = (0..p).map(|j| scaled_beta[j] / scale[j]).collect();
    let mut cov = inverse * sigma2;
    for i in 0..p {
        for j in 0..p {
            cov[(i, j)] /= scale[i] * scale[j];
        }
    }
    Ok((beta, cov, sigma2.sqrt()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(prefill: u64, before: u64, decodes: &[u64], ms: f64) -> StepSample {
        let mut work = StepWork::default();
        if prefill > 0 {
            work.add_prefill(prefill, before);
        }
        for &c in decodes {
            work.add_decode(c);
        }
        StepSample {
            work,
            duration_ms: ms,
            gap_ms: None,
        }
    }

    #[test]
    fn recovers_the_coefficients_of_noiseless_steps() {
        // duration = 20 + 0.5 × prompt tokens + 8 × decodes + 0.001 × context + 2e-6 × pairs, exactly.
        let truth = |w: &StepWork| {
            20.0 + 0.5 * w.prefill_tokens as f64
                + 8.0 * w.decode_seqs as f64
                + 0.001 * w.decode_context_tokens as f64
                + 2e-6 * w.attention_pairs as f64
        };
        let mut steps = Vec::new();
        for i in 0..60u64 {
            let decodes: Vec<u64> = (0..i % 5).map(|k| 100 + 37 * k + 11 * i).collect();
            let prefill = if i % 3 == 0 { 16 + 29 * i } else { 0 };
            let mut s = step(prefill, (i % 4) * 200, &decodes, 0.0);
            s.duration_ms = truth(&s.work);
            steps.push(s);
        }
        let fit = fit(&steps, &Term::ALL, Regimes::default()).unwrap();
        for (term, want) in [
            (Term::BaseMs, 20.0),
            (Term::PrefillTokenMs, 0.5),
            (Term::DecodeSeqMs, 8.0),
            (Term::ContextTokenMs, 0.001),
            (Term::AttentionPairMs, 2e-6),
        ] {
            let got = fit.value(term);
            assert!((got - want).abs() <= want * 1e-6, "{}: {got} vs {want}", term.name());
        }
        assert!(fit.relative_sigma < 1e-9, "{}", fit.relative_sigma);
    }

    #[test]
    fn a_term_no_step_exercises_is_not_fitted_and_a_negative_one_is_dropped() {
        // Decode steps only: 10 + 5 × decodes ± a little. No prefill, so prefill and attention are not in the data;
        // context is pure noise around 0 here and must not come out negative.
        let mut steps = Vec::new();
        for i in 0..40u64 {
            let n = 1 + i % 4;
            let decodes: Vec<u64> = (0..n).map(|k| 50 + k + i).collect();
            let wobble = if i % 2 == 0 { 0.2 } else { -0.2 };
            steps.push(step(0, 0, &decodes, 10.0 + 5.0 * n as f64 + wobble));
        }
        let fit = fit(&steps, &Term::ALL, Regimes::default()).unwrap();
        let status = |t: Term| fit.coefficients.iter().find(|c| c.term == t).unwrap().status;
        assert_eq!(status(Term::PrefillTokenMs), Status::NotInData);
        assert_eq!(status(Term::AttentionPairMs), Status::NotInData);
        assert!(fit.value(Term::ContextTokenMs) >= 0.0);
        assert!(
            (fit.value(Term::DecodeSeqMs) - 5.0).abs() < 0.5,
            "{}",
            fit.value(Term::DecodeSeqMs)
        );
        let (lo, hi) = fit
            .coefficients
            .iter()
            .find(|c| c.term == Term::DecodeSeqMs)
            .unwrap()
            .ci95
            .unwrap();
        assert!(lo < fit.value(Term::DecodeSeqMs) && fit.value(Term::DecodeSeqMs) < hi);
    }

    #[test]
    fn too_few_steps_and_identical_steps_are_refused() {
        let few: Vec<_> = (0..10).map(|_| step(0, 0, &[10], 12.0)).collect();
        assert!(matches!(
            fit(&few, &Term::ALL, Regimes::default()),
            Err(RegressError::TooFew { have: 10, .. })
        ));
        // 40 steps, every one one decode over 10 tokens: base, decode and context are the same column.
        let same: Vec<_> = (0..40).map(|_| step(0, 0, &[10], 12.0)).collect();
        assert!(
            matches!(
                fit(&same, &Term::ALL, Regimes::default()),
                Err(RegressError::Singular(_))
            ),
            "{:?}",
            fit(&same, &Term::ALL, Regimes::default())
        );
    }
}
