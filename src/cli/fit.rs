//! `tokenscope fit TRACE.. [-o PROFILE.json] [--validate HELD_OUT]..  [--report]`: fits the simulator's step costs
//! and scheduler on a real server's steps, checks the fit by replaying held-out runs, and writes the profile that
//! `synth --profile FILE` takes.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::Output;
use crate::load::LoadOptions;
use crate::synth::fidelity::{self, Tolerance};
use crate::synth::fit::{self, FitError, file_name};
use crate::trace::Trace;

/// The arguments of `fit`.
#[derive(Debug, Clone, clap::Args)]
pub struct FitArgs {
    /// Traces of one server with engine steps: joined runs (`record --server-log`), SGLang traces, TensorRT-LLM
    /// iteration statistics, vLLM logs with iteration details.
    #[arg(required = true, num_args = 1..)]
    pub traces: Vec<PathBuf>,
    /// Write the profile here (JSON), for `synth --profile FILE` and `--set profile=FILE`.
    #[arg(short, long, value_name = "PROFILE.json")]
    pub output: Option<PathBuf>,
    /// The profile's name (default: the output file's stem, else the first trace's).
    #[arg(long)]
    pub name: Option<String>,
    /// A run of the same server the fit does not see: replayed with the fitted profile (its arrivals, prompt and
    /// output lengths) and compared percentile by percentile; the errors are stored in the profile. Repeat for
    /// several.
    #[arg(long, value_name = "TRACE")]
    pub validate: Vec<PathBuf>,
    /// Print the residuals by kind of step, the scheduler's evidence and every held-out figure.
    #[arg(long)]
    pub report: bool,
    /// A held-out figure is reproduced within this many % of the real one.
    #[arg(long, value_name = "PCT", default_value_t = 10.0)]
    pub tolerance: f64,
    /// ... or within this many ms of it (small figures: a queue of 3 ms predicted as 5 ms).
    #[arg(long, value_name = "MS", default_value_t = 5.0)]
    pub floor_ms: f64,
    /// Write every fitted step to this CSV: its work, its measured and predicted durations and the residual, to
    /// see where the model is weak.
    #[arg(long, value_name = "FILE")]
    pub steps_csv: Option<PathBuf>,
    /// Seed of the validation replays' noise.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    // The part of the trace to read, the memory budget, the importer, a server log's clock.
    #[command(flatten)]
    pub reading: super::globals::GlobalArgs,
}

fn load_one(path: &Path) -> Result<Trace, Output> {
    let options = LoadOptions {
        lazy_candidates: true,
        ..LoadOptions::default()
    };
    super::load(&[path], options)
        .map(|l| l.trace)
        .map_err(|e| super::validate::fatal(&e, false))
}

impl FitArgs {
    /// Runs `fit`.
    pub fn run(&self) -> Output {
        if !(self.tolerance.is_finite() && self.tolerance > 0.0 && self.floor_ms.is_finite() && self.floor_ms >= 0.0) {
            return Output::error("--tolerance must be above 0 and --floor-ms at least 0", 2);
        }
        let tolerance = Tolerance {
            pct: self.tolerance,
            floor_ms: self.floor_ms,
        };
        let mut traces = Vec::new();
        for path in &self.traces {
            match load_one(path) {
                Ok(t) => traces.push((file_name(path), t)),
                Err(out) => return out,
            }
        }
        let name = self.name.clone().unwrap_or_else(|| {
            self.output
                .as_deref()
                .or(self.traces.first().map(PathBuf::as_path))
                .and_then(Path::file_stem)
                .map_or_else(|| "fitted".to_owned(), |s| s.to_string_lossy().into_owned())
        });
        let borrowed: Vec<(String, &Trace)> = traces.iter().map(|(n, t)| (n.clone(), t)).collect();
        let mut profile = match fit::fit(&borrowed, &name) {
            Ok(p) => p,
            Err(e @ (FitError::NoTrace | FitError::MixedLinkage(_))) => return Output::error(e, 2),
            Err(e) => return Output::error(format!("cannot fit: {e}"), 1),
        };
        if let Some(csv) = &self.steps_csv {
            let written = match std::fs::File::create(csv) {
                Ok(f) => fit::write_steps_csv(&borrowed, &profile, f).map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            if let Err(e) = written {
                return Output::error(format!("{}: {e}", csv.display()), 1);
            }
        }
        let mut text = if self.report {
            fit::report(&profile)
        } else {
            brief(&profile)
        };
        for path in &self.validate {
            let held = match load_one(path) {
                Ok(t) => t,
                Err(out) => return out,
            };
            let held_name = file_name(path);
            match fit::validate(&profile, &held, &held_name, tolerance, self.seed) {
                Ok(v) => {
                    if self.report {
                        text.push('\n');
                        text.push_str(&fidelity::render(&v.fidelity, &held_name, "the replay"));
                    } else {
                        let (compared, within) = v.fidelity.score();
                        let _ = writeln!(
                            text,
                            "held out {held_name}: {within} of {compared} figures within {} % or {} ms{}",
                            tolerance.pct,
                            tolerance.floor_ms,
                            headline(&v.fidelity)
                        );
                    }
                    profile.validation.push(v);
                }
                Err(e) => return Output::error(format!("{held_name}: cannot replay it: {e}"), 1),
            }
        }
        if let Some(out) = &self.output {
            if let Err(e) = profile.write(out) {
                return Output::error(e, 1);
            }
            let _ = writeln!(text, "wrote {}", out.display());
        }
        Output {
            stdout: text,
            stderr: String::new(),
            code: 0,
        }
    }
}

/// The fit in a few lines: the coefficients and the scheduler.
fn brief(p: &fit::FittedProfile) -> String {
    let mut text = String::new();
    let _ = writeln!(
        text,
        "profile {:?} fitted on {} steps of {}",
        p.name,
        p.steps,
        p.fitted_on.join(", ")
    );
    for c in &p.coefficients {
        if let Some((lo, hi)) = c.ci95 {
            let _ = writeln!(
                text,
                "  {:<20} {:>10} ms  (95 %: {} .. {})",
                c.term.name(),
                fit::sig(c.value),
                fit::sig(lo),
                fit::sig(hi)
            );
        } else {
            let why = match c.status {
                fit::regress::Status::Negative => "its estimate was negative",
                _ => "no step exercises it",
            };
            let _ = writeln!(text, "  {:<20} not fitted: {why}", c.term.name());
        }
    }
    let s = &p.scheduler;
    let _ = writeln!(
        text,
        "  scheduler            {} sequences, budget {} tokens, chunked prefill {}",
        s.max_num_seqs,
        s.max_num_batched_tokens,
        if s.chunked_prefill { "on" } else { "off" }
    );
    text
}

/// `: TTFT p50 +3.1 %, p95 -8.0 %; ITL ...` for the figures a reader asks first.
fn headline(f: &fidelity::Fidelity) -> String {
    let mut parts = Vec::new();
    for figure in ["TTFT", "ITL"] {
        let at = |p| {
            f.get(figure, p)
                .and_then(|r| r.error_pct)
                .map_or_else(|| "-".to_owned(), |e| format!("{e:+.1} %"))
        };
        parts.push(format!("{figure} p50 {}, p95 {}", at(50), at(95)));
    }
    format!(" ({})", parts.join("; "))
}
