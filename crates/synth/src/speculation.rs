//! Speculative decoding in the simulator: a drafter proposes `draft_tokens` tokens for each decoding sequence, one
//! verify step of the target model checks them with the sequence's own token, accepts a prefix of them and adds its
//! bonus token (`docs/SPECULATIVE.md`). What a step costs: its decodes, plus each draft verified at
//! [`super::cost::StepCost::verify_token_ms`], plus the drafter's passes (`draft_ms` per draft position, one pass
//! for the whole batch). How many drafts a step accepts: drawn per sequence and step from the acceptance by draft
//! position, the figure engines report (`Per-position acceptance rate` in vLLM's log).

use rand::RngExt;

/// The most draft tokens a step may propose per sequence (`--set spec_draft_tokens` accepts): engines draft a few
/// tokens (vLLM's EAGLE examples 3 to 5, llama.cpp's `--spec-draft-n-max` 16 by default).
pub const MAX_DRAFT_TOKENS: u32 = 32;

/// The drafter's cost per draft position and step when not given, ms: one pass of an EAGLE head or a small draft
/// model over the batch, a tenth of the 8 B target's 10 ms step.
pub const DEFAULT_DRAFT_MS: f64 = 1.0;

/// The acceptance of each draft position when only a draft length is given: each draft accepted with probability
/// 0.7 after the one before it was (0.7, 0.49, 0.34, ...), near what EAGLE reports on chat traffic.
pub const DEFAULT_CONDITIONAL_ACCEPTANCE: f64 = 0.7;

/// A speculative configuration of an engine.
#[derive(Debug, Clone, PartialEq)]
pub struct Speculation {
    /// Drafts proposed per decoding sequence and step.
    pub draft_tokens: u32,
    /// Acceptance at draft position k = 1..=`draft_tokens`: among the steps that proposed k drafts, the share that
    /// accepted k or more; non-increasing, in 0..=1.
    pub acceptance: Vec<f64>,
    /// The drafter's cost per draft position and step, ms.
    pub draft_ms: f64,
}

impl Speculation {
    /// `draft_tokens` drafts accepted by position as `acceptance` says: a list of one value per position, or one
    /// value p for every position's chance after the one before (position k then p^k); none: p = 0.7.
    ///
    /// # Errors
    /// No drafts or too many, a value outside 0..=1, a list of the wrong length or that grows with the position
    /// (a step accepts a prefix of its drafts, so position k+1 is never accepted more often than k).
    pub fn new(draft_tokens: u32, acceptance: Option<&[f64]>, draft_ms: f64) -> Result<Self, String> {
        if !(1..=MAX_DRAFT_TOKENS).contains(&draft_tokens) {
            return Err(format!(
                "spec_draft_tokens={draft_tokens}: give 1 to {MAX_DRAFT_TOKENS} draft tokens per step"
            ));
        }
        if !(draft_ms.is_finite() && draft_ms >= 0.0) {
            return Err(format!("spec_draft_ms={draft_ms}: give a cost of 0 ms or more"));
        }
        let given = acceptance.unwrap_or(&[DEFAULT_CONDITIONAL_ACCEPTANCE]);
        if let Some(bad) = given.iter().find(|p| !(0.0..=1.0).contains(*p)) {
            return Err(format!("spec_acceptance: {bad} is not a share from 0 to 1"));
        }
        let acceptance: Vec<f64> = match given {
            [p] => (1..=draft_tokens)
                .map(|k| p.powi(i32::try_from(k).unwrap_or(i32::MAX)))
                .collect(),
            list if list.len() == draft_tokens as usize => list.to_vec(),
            list => {
                return Err(format!(
                    "spec_acceptance: {} values for {draft_tokens} draft tokens; give one per position, or one value \
                     for each draft's chance after the one before",
                    list.len()
                ));
            }
        };
        if let Some(k) = acceptance.windows(2).position(|w| w[1] > w[0]) {
            return Err(format!(
                "spec_acceptance: position {} ({}) above position {} ({}): a step accepts a prefix of its drafts, \
                 so a later position is accepted at most as often",
                k + 2,
                acceptance[k + 1],
                k + 1,
                acceptance[k]
            ));
        }
        Ok(Speculation {
            draft_tokens,
            acceptance,
            draft_ms,
        })
    }

    /// The drafts one verify step accepts, drawn: position k is accepted, once k − 1 were, with probability
    /// acceptance(k) / acceptance(k − 1).
    pub fn accepted(&self, rng: &mut impl RngExt) -> u32 {
        let mut before = 1.0;
        let mut accepted = 0;
        for &a in &self.acceptance {
            let p = if before > 0.0 { a / before } else { 0.0 };
            if rng.random::<f64>() >= p {
                break;
            }
            accepted += 1;
            before = a;
        }
        accepted
    }

    /// Tokens a verify step emits on average: its bonus and the expected accepted drafts (the sum of the
    /// acceptance by position).
    pub fn mean_tokens_per_step(&self) -> f64 {
        1.0 + self.acceptance.iter().sum::<f64>()
    }

    /// `draft_tokens=N acceptance=a1,a2,... draft_ms=X`, as `synth` reports it.
    pub fn describe(&self) -> String {
        let acceptance: Vec<String> = self.acceptance.iter().map(|a| format!("{a:.3}")).collect();
        format!(
            "{} drafts per step, accepted by position {}, drafter {} ms a position ({:.2} tokens per verify step)",
            self.draft_tokens,
            acceptance.join(", "),
            self.draft_ms,
            self.mean_tokens_per_step()
        )
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand_pcg::Pcg64Mcg;

    use super::*;

    #[test]
    fn one_value_is_each_drafts_chance_after_the_one_before() {
        let s = Speculation::new(3, Some(&[0.5]), 1.0).unwrap();
        assert_eq!(s.acceptance, [0.5, 0.25, 0.125]);
        // 1 + 0.5 + 0.25 + 0.125 tokens per verify step.
        assert!((s.mean_tokens_per_step() - 1.875).abs() < 1e-12);
        let d = Speculation::new(2, None, 1.0).unwrap();
        assert!((d.acceptance[1] - 0.49).abs() < 1e-12, "{:?}", d.acceptance);
    }

    #[test]
    fn drawn_acceptance_matches_the_positions_shares() {
        // 0.8, 0.6, 0.3 by position: of 100,000 steps, ~80,000 accept the first draft, ~60,000 two or more,
        // ~30,000 all three; within 1 % (the binomial's spread is ~0.15 %).
        let s = Speculation::new(3, Some(&[0.8, 0.6, 0.3]), 1.0).unwrap();
        let mut rng = Pcg64Mcg::seed_from_u64(7);
        let mut at_least = [0u32; 4];
        for _ in 0..100_000 {
            let a = s.accepted(&mut rng);
            for slot in at_least.iter_mut().take(a as usize + 1) {
                *slot += 1;
            }
        }
        assert_eq!(at_least[0], 100_000);
        for (k, want) in [(1, 0.8), (2, 0.6), (3, 0.3)] {
            let got = f64::from(at_least[k]) / 100_000.0;
            assert!((got - want).abs() < 0.01, "position {k}: {got}");
        }
    }

    #[test]
    fn impossible_settings_say_what_to_give() {
        let e = Speculation::new(3, Some(&[0.5, 0.6, 0.1]), 1.0).unwrap_err();
        assert!(e.contains("position 2 (0.6) above position 1 (0.5)"), "{e}");
        let e = Speculation::new(3, Some(&[0.5, 0.4]), 1.0).unwrap_err();
        assert!(e.contains("2 values for 3 draft tokens"), "{e}");
        assert!(Speculation::new(0, None, 1.0).unwrap_err().contains("1 to 32"));
        assert!(
            Speculation::new(2, Some(&[1.5]), 1.0)
                .unwrap_err()
                .contains("1.5 is not a share")
        );
        assert!(Speculation::new(2, None, -1.0).is_err());
    }
}
