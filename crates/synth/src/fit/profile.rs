//! A fitted profile: the step costs and scheduler of a real server, as `tokenscope fit` writes them to a JSON file
//! that `synth --profile FILE` (and `--set profile=FILE`) accepts wherever a profile name is accepted.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::regress::{Coefficient, Status, Term};
use super::work::{Linkage, StepKind};
use crate::cost::StepCost;
use crate::engine_config::STEP_GAP_NS;
use crate::fidelity::Fidelity;

/// The `format` of the profile files this version writes and reads.
pub const PROFILE_FORMAT: &str = "tokenscope-profile/1";

/// The residuals of one kind of step: `(measured - predicted) / measured`, in %.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Residuals {
    /// The kind of step.
    pub kind: StepKind,
    /// Steps of the kind.
    pub steps: usize,
    /// Mean signed residual: positive when the model predicts these steps too short.
    pub bias_pct: f64,
    /// Median of the absolute residuals.
    pub p50_abs_pct: f64,
    /// 90th percentile of the absolute residuals.
    pub p90_abs_pct: f64,
}

/// The scheduler the fitted server ran, each setting read from its traces or assumed (and why).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scheduler {
    /// Most sequences in a step (llama.cpp's slots, vLLM's `max_num_seqs`).
    pub max_num_seqs: u32,
    /// Token budget of a step (llama.cpp's `n_batch`, vLLM's `max_num_batched_tokens`).
    pub max_num_batched_tokens: u32,
    /// Prefill and decode in one step.
    pub chunked_prefill: bool,
    /// KV-cache blocks of 16 tokens.
    pub kv_blocks: u32,
    /// A prompt's last this many tokens run in a step of their own (0: none).
    #[serde(default)]
    pub prefill_tail: u32,
    /// Settings read from the traces, with the evidence.
    pub read: Vec<String>,
    /// Settings assumed, with the reason.
    pub assumed: Vec<String>,
}

/// How far the simulator with this profile was from a real run it was not fitted on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Validation {
    /// The held-out trace (its file name).
    pub trace: String,
    /// The figures, percentile by percentile.
    pub fidelity: Fidelity,
}

/// A step-cost model and scheduler fitted on real traces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FittedProfile {
    /// [`PROFILE_FORMAT`].
    pub format: String,
    /// The name replays and reports give it.
    pub name: String,
    /// The traces it was fitted on (file names).
    pub fitted_on: Vec<String>,
    /// The engine that served them, as their meta says.
    pub engine: Option<String>,
    /// How the steps' work was read.
    pub linkage: Linkage,
    /// Steps fitted.
    pub steps: usize,
    /// Steps of the traces left out (no work known).
    pub skipped_steps: usize,
    /// One per term of the model.
    pub coefficients: Vec<Coefficient>,
    /// The batch regimes' knot, tokens (0: one regime).
    #[serde(default)]
    pub batch_knot: u32,
    /// Each prefill chunk runs in a pass of its own, the decodes in one more.
    #[serde(default)]
    pub split_passes: bool,
    /// The median wait between two back-to-back steps of a busy engine, ms: what exceeds the simulator's own gap
    /// is added to every simulated step.
    pub step_gap_ms: f64,
    /// The spread of the relative residuals: the simulated steps' noise.
    pub noise: f64,
    /// Residuals by kind of step.
    pub residuals: Vec<Residuals>,
    /// The scheduler.
    pub scheduler: Scheduler,
    /// Held-out runs it was checked against (empty: never validated).
    #[serde(default)]
    pub validation: Vec<Validation>,
}

/// Why a profile file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ProfileFileError {
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// Not a profile.
    #[error(
        "{path}: not a tokenscope profile ({reason}); write one with `tokenscope fit TRACE -o {path}`, or give a \
         profile name (h100-8b, l4-8b, cpu-270m)"
    )]
    NotAProfile {
        /// The file.
        path: String,
        /// What was wrong, with its place in the file.
        reason: String,
    },
}

impl FittedProfile {
    /// The step costs the simulator runs with: the fitted terms, and the server's gap between steps beyond the
    /// simulator's own ([`STEP_GAP_NS`]) folded into the fixed cost.
    pub fn cost(&self) -> StepCost {
        let value = |t: Term| self.coefficients.iter().find(|c| c.term == t).map_or(0.0, |c| c.value);
        let extra_gap = (self.step_gap_ms - tokenscope_core::analysis::metrics::ms(STEP_GAP_NS)).max(0.0);
        StepCost {
            base_ms: value(Term::BaseMs) + extra_gap,
            prefill_token_ms: value(Term::PrefillTokenMs),
            prefill_chunk_ms: value(Term::PrefillChunkMs),
            decode_seq_ms: value(Term::DecodeSeqMs),
            // A run without speculation says nothing of a verify token: it costs what a prompt token costs. A run
            // whose decodes all drafted alike has it inside the decode's cost.
            verify_token_ms: match self.status(Term::VerifyTokenMs) {
                Some(Status::Fitted) => value(Term::VerifyTokenMs),
                Some(Status::InDecode) => 0.0,
                _ => value(Term::PrefillTokenMs),
            },
            context_token_ms: value(Term::ContextTokenMs),
            attention_pair_ms: value(Term::AttentionPairMs),
            noise: self.noise,
            batch_knot: self.batch_knot,
            large_batch_ms: value(Term::LargeBatchMs),
            small_batch_token_ms: value(Term::SmallBatchTokenMs),
            split_passes: self.split_passes,
        }
    }

    /// How `term` was fitted, when the profile names it.
    pub fn status(&self, term: Term) -> Option<Status> {
        self.coefficients.iter().find(|c| c.term == term).map(|c| c.status)
    }

    /// The largest error, in % of the real figure, over every held-out figure; `None` when never validated.
    pub fn worst_error_pct(&self) -> Option<f64> {
        self.validation
            .iter()
            .flat_map(|v| v.fidelity.rows.iter())
            .filter_map(|r| r.error_pct)
            .map(f64::abs)
            .max_by(f64::total_cmp)
    }

    /// One sentence on its measured error, for a replay's output and its trace's notes.
    pub fn error_note(&self) -> String {
        if self.validation.is_empty() {
            return format!(
                "profile {} was never validated against a held-out run: its error is unknown (give \
                 `tokenscope fit --validate TRACE`)",
                self.name
            );
        }
        let held: Vec<&str> = self.validation.iter().map(|v| v.trace.as_str()).collect();
        let figure = |name: &str| {
            self.validation
                .iter()
                .flat_map(|v| v.fidelity.rows.iter())
                .filter(|r| r.figure == name && (r.percentile == 50 || r.percentile == 95))
                .filter_map(|r| r.error_pct)
                .map(f64::abs)
                .max_by(f64::total_cmp)
        };
        let part = |name: &str| figure(name).map(|e| format!("{name} p50/p95 within {e:.1} %"));
        let parts: Vec<String> = ["TTFT", "ITL", "E2E"].iter().filter_map(|f| part(f)).collect();
        format!(
            "profile {} measured against {} held-out run(s) ({}): {}",
            self.name,
            held.len(),
            held.join(", "),
            if parts.is_empty() {
                "no figure compared".to_owned()
            } else {
                parts.join(", ")
            }
        )
    }

    /// Reads a profile file.
    ///
    /// # Errors
    /// The file cannot be read, or is not a profile of this format.
    pub fn read(path: &Path) -> Result<Self, ProfileFileError> {
        let shown = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|source| ProfileFileError::Io {
            path: shown.clone(),
            source,
        })?;
        let text = String::from_utf8(bytes).map_err(|_| ProfileFileError::NotAProfile {
            path: shown.clone(),
            reason: "not text; a profile is JSON".to_owned(),
        })?;
        let mut de = serde_json::Deserializer::from_str(&text);
        let profile: FittedProfile =
            serde_path_to_error::deserialize(&mut de).map_err(|e| ProfileFileError::NotAProfile {
                path: shown.clone(),
                reason: format!("at {}: {}", e.path(), e.inner()),
            })?;
        if profile.format != PROFILE_FORMAT {
            return Err(ProfileFileError::NotAProfile {
                path: shown,
                reason: format!("format {:?}, this version reads {PROFILE_FORMAT:?}", profile.format),
            });
        }
        let cost = profile.cost();
        let finite = [
            cost.base_ms,
            cost.prefill_token_ms,
            cost.prefill_chunk_ms,
            cost.decode_seq_ms,
            cost.context_token_ms,
            cost.attention_pair_ms,
            cost.noise,
            cost.large_batch_ms,
            cost.small_batch_token_ms,
        ];
        if finite.iter().any(|v| !v.is_finite() || *v < 0.0) || profile.scheduler.max_num_seqs == 0 {
            return Err(ProfileFileError::NotAProfile {
                path: shown,
                reason: "a coefficient is negative or not a number, or max_num_seqs is 0".to_owned(),
            });
        }
        Ok(profile)
    }

    /// Writes the profile as pretty JSON.
    ///
    /// # Errors
    /// The file cannot be written.
    pub fn write(&self, path: &Path) -> Result<(), ProfileFileError> {
        let text = serde_json::to_string_pretty(self).map_err(|e| ProfileFileError::Io {
            path: path.display().to_string(),
            source: std::io::Error::other(e),
        })?;
        std::fs::write(path, text + "\n").map_err(|source| ProfileFileError::Io {
            path: path.display().to_string(),
            source,
        })
    }
}
