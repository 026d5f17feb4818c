//! `tokenscope fit`: the simulator's step-cost model and scheduler fitted on a real server's own steps, so that a
//! replay predicts that server, with the error measured on runs the fit did not see.
//!
//! - [`work`]: what each step of a trace computed (from the links of a joined run, or the steps' counts);
//! - [`regress`]: the weighted least squares of the cost terms, with confidence intervals;
//! - [`profile`]: the profile file `synth --profile FILE` takes, with its measured error.

pub mod profile;
pub mod regress;
pub mod work;

use std::path::Path;

use rayon::prelude::*;

use crate::cost::Regimes;
use crate::engine_config::KV_BLOCK_TOKENS;
use crate::fidelity::{self, Tolerance};
use crate::from_trace::infer_engines;
pub use profile::{FittedProfile, PROFILE_FORMAT, ProfileFileError, Residuals, Scheduler, Validation};
use regress::{RegressError, Term};
use tokenscope_core::analysis::metrics::nearest_rank;
use tokenscope_core::trace::Trace;
use work::{Linkage, StepKind, StepSample, trace_steps};

/// Why no profile could be fitted.
#[derive(Debug, thiserror::Error)]
pub enum FitError {
    /// No trace given.
    #[error("no trace to fit on")]
    NoTrace,
    /// A trace has no engine steps.
    #[error(
        "{0}: no engine steps to fit on (a recording, a request-level export or a server's periodic stats have \
         none). Join a recording with the server's log (`tokenscope record --server-log`, or `tokenscope convert \
         RECORDING SERVER_LOG -o joined.parquet`), or fit on an engine trace with steps (SGLang, TensorRT-LLM \
         iteration statistics, a vLLM log with iteration details)"
    )]
    NoSteps(String),
    /// The traces' steps do not say what work they did.
    #[error(
        "{0}: its steps carry no work (no prompt-token or decoding-request counts, no tokens linked to them), so \
         there is nothing to fit their durations against"
    )]
    NoWork(String),
    /// The traces mix steps read from links and from counts.
    #[error(
        "the traces' steps were read differently ({0}): fit on traces of one kind (all joined runs, or all engine \
         traces)"
    )]
    MixedLinkage(String),
    /// The regression failed.
    #[error("{0}")]
    Regress(#[from] RegressError),
}

/// Fits a profile on `traces` (each with the name it is reported by).
///
/// # Errors
/// No trace, a trace without steps or without work, or too few steps to fit.
pub fn fit(traces: &[(String, &Trace)], name: &str) -> Result<FittedProfile, FitError> {
    if traces.is_empty() {
        return Err(FitError::NoTrace);
    }
    let mut steps: Vec<StepSample> = Vec::new();
    let mut linkages = Vec::new();
    let mut skipped = 0;
    for (file, trace) in traces {
        if trace.iterations.is_empty() {
            return Err(FitError::NoSteps(file.clone()));
        }
        let read = trace_steps(trace);
        if read.steps.is_empty() {
            return Err(FitError::NoWork(file.clone()));
        }
        linkages.push((file.as_str(), read.linkage));
        skipped += read.skipped;
        steps.extend(read.steps);
    }
    let linkage = linkages[0].1;
    if linkages.iter().any(|(_, l)| *l != linkage) {
        let which: Vec<String> = linkages.iter().map(|(f, l)| format!("{f}: {l:?}")).collect();
        return Err(FitError::MixedLinkage(which.join(", ")));
    }
    let allowed: &[Term] = match linkage {
        Linkage::Linked => &Term::ALL,
        Linkage::Counts => &[
            Term::BaseMs,
            Term::PrefillTokenMs,
            Term::PrefillChunkMs,
            Term::DecodeSeqMs,
            Term::VerifyTokenMs,
            Term::LargeBatchMs,
            Term::SmallBatchTokenMs,
        ],
    };
    let regression = best_regimes(&steps, allowed)?;
    let residuals = residuals(&steps, &regression);
    let step_gap_ms = step_gap_ms(&steps);
    let engine = traces.iter().find_map(|(_, t)| {
        let m = &t.meta;
        let parts: Vec<&str> = [m.engine.as_deref(), m.engine_version.as_deref(), m.model.as_deref()]
            .into_iter()
            .flatten()
            .collect();
        (!parts.is_empty()).then(|| parts.join(" "))
    });
    Ok(FittedProfile {
        format: PROFILE_FORMAT.to_owned(),
        name: name.to_owned(),
        fitted_on: traces.iter().map(|(f, _)| f.clone()).collect(),
        engine,
        linkage,
        steps: steps.len(),
        skipped_steps: skipped,
        coefficients: regression.coefficients.clone(),
        batch_knot: regression.regimes.knot,
        split_passes: regression.regimes.split_passes,
        step_gap_ms,
        noise: regression.relative_sigma.min(0.25),
        residuals,
        scheduler: scheduler(traces),
        validation: Vec::new(),
    })
}

/// The largest batch-regime knot tried, tokens: kernels switch at small batches (llama.cpp's CPU kernels at 4).
pub const MAX_KNOT: u32 = 32;
/// How much batch regimes or split passes must lower the residuals' spread to be kept (0.95: by 5 %).
const REGIMES_MUST_EARN: f64 = 0.95;

/// The fit with one pass and one batch regime per step, or, when they lower the spread of the residuals by at least
/// 5 %, with split passes (each prefill chunk a pass of its own) and two regimes switching at a knot between 2 and
/// [`MAX_KNOT`] tokens: the combination that lowers it most.
fn best_regimes(steps: &[StepSample], allowed: &[Term]) -> Result<regress::Regression, RegressError> {
    let one = regress::fit(steps, allowed, Regimes::default())?;
    let fitted = |r: &regress::Regression, t: Term| {
        r.coefficients
            .iter()
            .any(|c| c.term == t && c.status == regress::Status::Fitted)
    };
    let shapes: Vec<Regimes> = [false, true]
        .into_iter()
        .flat_map(|split_passes| {
            std::iter::once(0)
                .chain(2..=MAX_KNOT)
                .map(move |knot| Regimes { knot, split_passes })
        })
        .filter(|r| *r != Regimes::default())
        .collect();
    // Each shape is a fit of its own: on all cores, the best kept (the first of equals, so the choice is the same
    // on any number of cores).
    let best = shapes
        .par_iter()
        .filter_map(|&regimes| regress::fit(steps, allowed, regimes).ok())
        // A knot whose large-batch term could not be fitted is one regime under another name.
        .filter(|r| r.regimes.knot == 0 || fitted(r, Term::LargeBatchMs))
        .collect::<Vec<_>>()
        .into_iter()
        .min_by(|a, b| a.relative_sigma.total_cmp(&b.relative_sigma));
    Ok(match best {
        Some(best) if best.relative_sigma < one.relative_sigma * REGIMES_MUST_EARN => best,
        _ => one,
    })
}

/// The residuals of the fit, by kind of step.
fn residuals(steps: &[StepSample], fit: &regress::Regression) -> Vec<Residuals> {
    let mut by_kind: std::collections::BTreeMap<StepKind, Vec<f64>> = std::collections::BTreeMap::new();
    for s in steps {
        let r = (s.duration_ms - fit.predict(&s.work)) / s.duration_ms * 100.0;
        by_kind.entry(StepKind::of(&s.work)).or_default().push(r);
    }
    by_kind
        .into_iter()
        .map(|(kind, signed)| {
            #[expect(clippy::cast_precision_loss, reason = "step counts far below 2^53")]
            let bias = signed.iter().sum::<f64>() / signed.len() as f64;
            let mut abs: Vec<f64> = signed.iter().map(|r| r.abs()).collect();
            abs.sort_unstable_by(f64::total_cmp);
            Residuals {
                kind,
                steps: signed.len(),
                bias_pct: bias,
                p50_abs_pct: nearest_rank(&abs, 50).unwrap_or(0.0),
                p90_abs_pct: nearest_rank(&abs, 90).unwrap_or(0.0),
            }
        })
        .collect()
}

/// The longest wait between two steps that still counts as back to back: a longer one is an idle engine waiting
/// for work, not the engine's own overhead.
const BACK_TO_BACK_MS: f64 = 5.0;

/// The median wait between back-to-back steps (0 when the traces have none).
fn step_gap_ms(steps: &[StepSample]) -> f64 {
    let mut gaps: Vec<f64> = steps
        .iter()
        .filter_map(|s| s.gap_ms)
        .filter(|g| *g <= BACK_TO_BACK_MS)
        .collect();
    gaps.sort_unstable_by(f64::total_cmp);
    nearest_rank(&gaps, 50).unwrap_or(0.0)
}

/// The scheduler of the traces' engine: chunked prefill and the step budget as the replay infers them, the
/// sequence cap from the largest step (exact when a request waited through a step that ran that many), the KV
/// cache assumed large enough for the cap's sequences at the longest context seen.
fn scheduler(traces: &[(String, &Trace)]) -> Scheduler {
    let mut read = Vec::new();
    let mut assumed = Vec::new();
    let inferred: Vec<_> = traces.iter().flat_map(|(_, t)| infer_engines(t)).collect();
    let chunked = inferred.iter().any(|e| e.config.chunked_prefill);
    let mixed = inferred.iter().any(|e| e.why.contains("mixed prefill and decode"));
    if mixed || !chunked {
        read.push(format!(
            "chunked prefill {}: {}",
            if chunked { "on" } else { "off" },
            if chunked {
                "steps mixed prefill and decode"
            } else {
                "prefill-only steps ran while requests decoded"
            }
        ));
    } else {
        assumed.push("chunked prefill on: the steps never show it either way".to_owned());
    }
    let chunks = prefill_chunks(traces);
    let prefill_tail = tail_of(&chunks, &mut read);
    let budget = if let Some((cut, times)) = cut_at(&chunks, prefill_tail) {
        let largest = traces
            .iter()
            .flat_map(|(_, t)| {
                let it = &t.iterations;
                (0..it.len())
                    .map(|i| it.num_prefill_tokens.at(i).unwrap_or(0) + it.num_decode_tokens.at(i).unwrap_or(0))
            })
            .max()
            .unwrap_or(cut)
            .max(cut);
        read.push(format!(
            "step budget {largest} tokens: {times} prompts were cut at {cut} tokens, and the largest step had \
             {largest} with its decodes"
        ));
        largest
    } else {
        let budget = inferred
            .iter()
            .map(|e| e.config.max_num_batched_tokens)
            .max()
            .unwrap_or(2048);
        assumed.push(format!(
            "step budget {budget} tokens: no prompt was cut at one size, so the largest step's tokens are only a                  lower bound"
        ));
        budget
    };
    let mut largest = 0u32;
    let mut binding: Option<String> = None;
    let mut longest_context = 0u32;
    for (file, t) in traces {
        let it = &t.iterations;
        let cap = (0..it.len()).filter_map(|i| it.num_reqs.at(i)).max().unwrap_or(0);
        largest = largest.max(cap);
        let r = &t.requests;
        for q in 0..r.len() {
            let context = r
                .input_tokens
                .at(q)
                .unwrap_or(0)
                .saturating_add(r.output_tokens.at(q).unwrap_or(0));
            longest_context = longest_context.max(context);
            let Some(scheduled) = r.scheduled_ns.at(q) else {
                continue;
            };
            if binding.is_some() {
                continue;
            }
            let waited = (0..it.len()).find(|&i| {
                it.num_reqs.at(i) == Some(cap) && it.start_ns[i] > r.arrival_ns[q] && it.end_ns[i] < scheduled
            });
            if let Some(i) = waited {
                binding = Some(format!(
                    "{cap} sequences: {} of {file} waited through step {} that ran {cap}",
                    t.request_id(u32::try_from(q).unwrap_or(0)),
                    it.iteration[i]
                ));
            }
        }
    }
    let max_num_seqs = largest.max(1);
    match binding {
        Some(why) => read.push(why),
        None => assumed.push(format!(
            "{max_num_seqs} sequences: the largest step ran {largest}, and no request waited through a full step, \
             so the cap may be higher"
        )),
    }
    let per_seq = longest_context.max(1).div_ceil(KV_BLOCK_TOKENS);
    let kv_blocks = per_seq.saturating_mul(max_num_seqs).max(1);
    assumed.push(format!(
        "KV cache {kv_blocks} blocks of {KV_BLOCK_TOKENS} tokens: room for {max_num_seqs} sequences of the longest \
         context seen ({longest_context} tokens); the traces do not say its size"
    ));
    Scheduler {
        max_num_seqs,
        max_num_batched_tokens: budget,
        chunked_prefill: chunked,
        kv_blocks,
        prefill_tail,
        read,
        assumed,
    }
}

/// Writes every step the fit used, with its work, measured and predicted durations and relative residual, as CSV.
///
/// # Errors
/// The writer fails.
pub fn write_steps_csv(
    traces: &[(String, &Trace)],
    profile: &FittedProfile,
    out: impl std::io::Write,
) -> Result<(), csv::Error> {
    let mut w = csv::Writer::from_writer(out);
    w.write_record([
        "trace",
        "kind",
        "prefill_tokens",
        "decode_seqs",
        "decode_context_tokens",
        "attention_pairs",
        "measured_ms",
        "predicted_ms",
        "residual_pct",
    ])?;
    for (name, trace) in traces {
        for s in trace_steps(trace).steps {
            let predicted = profile_cost_without_gap(profile, &s.work);
            w.write_record([
                name.clone(),
                StepKind::of(&s.work).name().to_owned(),
                s.work.prefill_tokens.to_string(),
                s.work.decode_seqs.to_string(),
                s.work.decode_context_tokens.to_string(),
                s.work.attention_pairs.to_string(),
                format!("{:.3}", s.duration_ms),
                format!("{predicted:.3}"),
                format!("{:.1}", (s.duration_ms - predicted) / s.duration_ms * 100.0),
            ])?;
        }
    }
    w.flush()?;
    Ok(())
}

/// The prefill chunks of every request of the traces with more than one, in order (from their explicit stages).
fn prefill_chunks(traces: &[(String, &Trace)]) -> Vec<Vec<u32>> {
    let mut all = Vec::new();
    for (_, t) in traces {
        for r in 0..t.requests.len() {
            let row = u32::try_from(r).unwrap_or(u32::MAX);
            let chunks: Vec<u32> = t
                .explicit_stages_of(row)
                .filter(|&s| t.stages.kind[s] == tokenscope_core::trace::StageKind::Prefill)
                .filter_map(|s| t.stages.tokens[s])
                .collect();
            if chunks.len() > 1 {
                all.push(chunks);
            }
        }
    }
    all
}

/// The largest tail a prompt's last chunk is taken for, tokens.
const MAX_TAIL: u32 = 64;
/// The share of cut prompts that must end on the same small chunk for it to be the engine's rule.
const TAIL_SHARE: f64 = 0.8;

/// The size of the chunk most cut prompts end with, when at least 80 % of them end with the same one of at most
/// [`MAX_TAIL`] tokens (llama.cpp with a sliding-window model ends every prompt with a 4-token chunk); else 0.
fn tail_of(chunks: &[Vec<u32>], read: &mut Vec<String>) -> u32 {
    let mut counts: std::collections::BTreeMap<u32, usize> = std::collections::BTreeMap::new();
    for c in chunks {
        if let Some(&last) = c.last() {
            *counts.entry(last).or_default() += 1;
        }
    }
    let Some((&tail, &n)) = counts.iter().max_by_key(|(_, n)| **n) else {
        return 0;
    };
    #[expect(clippy::cast_precision_loss, reason = "request counts far below 2^53")]
    let share = n as f64 / chunks.len() as f64;
    if tail <= MAX_TAIL && share >= TAIL_SHARE {
        read.push(format!(
            "prefill tail {tail} tokens: {n} of {} prompts run in several chunks end with a chunk of {tail}",
            chunks.len()
        ));
        tail
    } else {
        0
    }
}

/// The size prompts were cut at, when the largest chunk other than a tail occurs at least twice: the budget's
/// share of prompt tokens. With how many prompts were cut at it.
fn cut_at(chunks: &[Vec<u32>], tail: u32) -> Option<(u32, usize)> {
    let body = |c: &Vec<u32>| {
        let n = c.len() - usize::from(tail > 0 && c.last() == Some(&tail));
        c[..n].to_vec()
    };
    let cut_prompts: Vec<Vec<u32>> = chunks.iter().map(body).filter(|b| b.len() > 1).collect();
    let largest = cut_prompts.iter().flatten().copied().max()?;
    let times = cut_prompts.iter().filter(|b| b.contains(&largest)).count();
    (times >= 2).then_some((largest, times))
}

/// The fitted terms' prediction of a step, without the gap between steps.
fn profile_cost_without_gap(profile: &FittedProfile, w: &crate::cost::StepWork) -> f64 {
    let mut cost = profile.cost();
    cost.base_ms = profile
        .coefficients
        .iter()
        .find(|c| c.term == Term::BaseMs)
        .map_or(0.0, |c| c.value);
    cost.expected_ms(w)
}

/// The file name of a path, for reports (the directories are the user's, not the profile's).
pub fn file_name(path: &Path) -> String {
    path.file_name()
        .map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned())
}

/// Replays `held_out` with `profile` and compares the replay with it.
///
/// # Errors
/// The replay could not run (no request in the trace).
pub fn validate(
    profile: &FittedProfile,
    held_out: &Trace,
    name: &str,
    tolerance: Tolerance,
    seed: u64,
) -> Result<Validation, crate::SynthError> {
    let replay = crate::replay_with_profile(held_out, profile, seed)?;
    Ok(Validation {
        trace: name.to_owned(),
        fidelity: fidelity::compare(held_out, &replay.trace, tolerance),
    })
}

/// A coefficient with 4 significant digits, in plain notation where it reads well (3.117, 0.006064, 14.87).
pub fn sig(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        return "0".to_owned();
    }
    if !(1e-4..1e5).contains(&a) {
        return format!("{v:.3e}");
    }
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "log10 of 1e-4..1e5 is -4..5"
    )]
    let decimals = (3 - a.log10().floor() as i32).max(0) as usize;
    format!("{v:.decimals$}")
}

/// The fit as text: the coefficients with their intervals, the residuals by kind of step, and the scheduler.
pub fn report(p: &FittedProfile) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "profile {:?} fitted on {} ({} steps{}; work read {})",
        p.name,
        p.fitted_on.join(", "),
        p.steps,
        if p.skipped_steps > 0 {
            format!(", {} without known work left out", p.skipped_steps)
        } else {
            String::new()
        },
        match p.linkage {
            Linkage::Linked => "from the tokens and prefill chunks linked to each step",
            Linkage::Counts => "from the steps' counts: context and attention terms not fitted",
        }
    );
    if let Some(engine) = &p.engine {
        let _ = writeln!(out, "engine  {engine}");
    }
    let _ = writeln!(
        out,
        "{:<20} {:>10} {:>26}  charged",
        "term (ms)", "estimate", "95 % interval"
    );
    for c in &p.coefficients {
        let (value, interval) = match (c.status, c.ci95) {
            (regress::Status::Fitted, Some((lo, hi))) => (sig(c.value), format!("{} .. {}", sig(lo), sig(hi))),
            (regress::Status::InDecode, _) => (
                "-".to_owned(),
                "in decode_seq_ms: every step verified as many drafts".to_owned(),
            ),
            (regress::Status::NotInData, _) if c.term == Term::VerifyTokenMs => {
                ("-".to_owned(), "no drafts: a prompt token's".to_owned())
            }
            (regress::Status::NotInData, _) => ("-".to_owned(), "not in the data".to_owned()),
            (regress::Status::Negative, _) => ("0".to_owned(), "negative estimate, dropped".to_owned()),
            (_, None) => ("-".to_owned(), String::new()),
        };
        let _ = writeln!(
            out,
            "{:<20} {value:>10} {interval:>26}  {}",
            c.term.name(),
            c.term.per()
        );
    }
    let _ = writeln!(
        out,
        "batch regimes        {}",
        match (p.batch_knot, p.split_passes) {
            (0, false) => "one pass per step, one regime".to_owned(),
            (0, true) => "each prefill chunk a pass of its own, the decodes one more; one regime".to_owned(),
            (k, false) => format!("one pass per step; large-batch kernels from {k} tokens"),
            (k, true) => format!(
                "each prefill chunk a pass of its own, the decodes one more; large-batch kernels from {k} tokens"
            ),
        }
    );
    let _ = writeln!(
        out,
        "step gap             {:>10}  ms, the median wait between back-to-back steps (the simulator waits 0.2 ms; \
         more is added to base_ms)",
        sig(p.step_gap_ms)
    );
    let _ = writeln!(
        out,
        "noise                {:>10}  the spread of the relative residuals",
        sig(p.noise)
    );
    let _ = writeln!(out, "residuals (measured - predicted, % of measured)");
    let _ = writeln!(
        out,
        "{:<20} {:>6} {:>8} {:>9} {:>9}",
        "steps", "count", "bias", "p50 |r|", "p90 |r|"
    );
    for r in &p.residuals {
        let _ = writeln!(
            out,
            "{:<20} {:>6} {:>+7.1}% {:>8.1}% {:>8.1}%",
            r.kind.name(),
            r.steps,
            r.bias_pct,
            r.p50_abs_pct,
            r.p90_abs_pct
        );
    }
    let s = &p.scheduler;
    let _ = writeln!(
        out,
        "scheduler            {} sequences, budget {} tokens, chunked prefill {}, {} KV blocks",
        s.max_num_seqs,
        s.max_num_batched_tokens,
        if s.chunked_prefill { "on" } else { "off" },
        s.kv_blocks
    );
    for r in &s.read {
        let _ = writeln!(out, "  read     {r}");
    }
    for a in &s.assumed {
        let _ = writeln!(out, "  assumed  {a}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::regress::Status;
    use super::*;
    use crate::{Overrides, Profile, ProfileChoice, Scenario, SynthOptions, generate_with};

    fn simulated(profile: Profile, requests: usize, seed: u64) -> Trace {
        let options = SynthOptions {
            scenario: Scenario::EosMistrigger,
            seed,
            requests: Some(requests),
            profile: ProfileChoice::Named(profile),
            ..SynthOptions::replay_defaults()
        };
        generate_with(&options, &Overrides::default()).unwrap()
    }

    #[test]
    fn the_fit_finds_the_simulators_own_constants_again() {
        // The simulator's l4-8b steps: 55 ms + 0.4 ms per prompt token + 0.2 ms per decode + 4.4e-4 ms per context
        // token + 4.3e-6 ms per attention pair, times a 3 % noise. The fit must put each constant inside its 95 %
        // interval, and read the noise back.
        let trace = simulated(Profile::L4, 150, 3);
        let p = fit(&[("l4.parquet".to_owned(), &trace)], "l4-again").unwrap();
        assert_eq!(p.linkage, Linkage::Linked);
        let truth = Profile::L4.cost();
        for (term, want) in [
            (Term::BaseMs, truth.base_ms),
            (Term::PrefillTokenMs, truth.prefill_token_ms),
            (Term::DecodeSeqMs, truth.decode_seq_ms),
            (Term::ContextTokenMs, truth.context_token_ms),
            (Term::AttentionPairMs, truth.attention_pair_ms),
        ] {
            let c = p.coefficients.iter().find(|c| c.term == term).unwrap();
            assert_eq!(c.status, Status::Fitted, "{term:?}");
            let (lo, hi) = c.ci95.unwrap();
            assert!(
                lo <= want && want <= hi,
                "{}: {want} outside {lo} .. {hi} (estimate {})",
                term.name(),
                c.value
            );
        }
        assert!((p.noise - 0.03).abs() < 0.01, "noise {}", p.noise);
        // The simulator leaves 0.2 ms between back-to-back steps (the CPU's turn).
        assert!((p.step_gap_ms - 0.2).abs() < 1e-9, "{}", p.step_gap_ms);
        assert!(p.scheduler.chunked_prefill);
    }

    #[test]
    fn the_fit_learns_a_verify_steps_cost_from_speculative_runs() {
        // The l4-8b steps verify drafts at 0.4 ms each (a prompt token's cost). One run drafting 2 tokens a step,
        // one drafting 4 (the drafter free, so that every millisecond of a step is the model's): the two draft
        // lengths tell a draft's cost from a sequence's. On the first run alone they cannot be told apart, and
        // the fit says the drafts' cost is inside the decode's.
        let run = |drafts: u32, seed: u64| {
            let options = SynthOptions {
                scenario: Scenario::EosMistrigger,
                seed,
                requests: Some(100),
                profile: ProfileChoice::Named(Profile::L4),
                ..SynthOptions::replay_defaults()
            };
            let set = Overrides::from_settings(&[
                crate::Setting::SpecDraftTokens(drafts),
                crate::Setting::SpecAcceptance(vec![0.6]),
                crate::Setting::SpecDraftMs(0.0),
            ]);
            generate_with(&options, &set).unwrap()
        };
        let (two, four) = (run(2, 3), run(4, 4));
        let p = fit(&[("k2".to_owned(), &two), ("k4".to_owned(), &four)], "spec").unwrap();
        let c = p.coefficients.iter().find(|c| c.term == Term::VerifyTokenMs).unwrap();
        assert_eq!(c.status, Status::Fitted);
        let (lo, hi) = c.ci95.unwrap();
        assert!(
            lo <= 0.4 && 0.4 <= hi,
            "0.4 outside {lo} .. {hi} (estimate {})",
            c.value
        );
        assert!((p.cost().verify_token_ms - c.value).abs() < 1e-12);
        let alone = fit(&[("k2".to_owned(), &two)], "k2").unwrap();
        assert_eq!(alone.status(Term::VerifyTokenMs), Some(Status::InDecode));
        assert!(report(&alone).contains("in decode_seq_ms"), "{}", report(&alone));
        assert!(alone.cost().verify_token_ms.abs() < 1e-12);
        // Its decode term carries a sequence's own cost and its 2 drafts': 0.2 + 2 × 0.4 = 1.0 ms.
        let d = alone.coefficients.iter().find(|c| c.term == Term::DecodeSeqMs).unwrap();
        let (lo, hi) = d.ci95.unwrap();
        assert!(
            lo <= 1.0 && 1.0 <= hi,
            "1.0 outside {lo} .. {hi} (estimate {})",
            d.value
        );
    }

    #[test]
    fn a_trace_without_steps_or_with_too_few_is_refused_with_the_reason() {
        let mut b = tokenscope_core::trace::TraceBuilder::default();
        b.labels.intern("nothing");
        let (empty, _) = b.finish();
        let err = fit(&[("rec.parquet".to_owned(), &empty)], "x").unwrap_err();
        assert!(matches!(err, FitError::NoSteps(ref f) if f == "rec.parquet"), "{err}");
        assert!(err.to_string().contains("--server-log"), "{err}");
        // Three requests make a few dozen steps: too few for five terms (36 steps needed).
        let small = simulated(Profile::Cpu, 0, 1);
        let steps = trace_steps(&small).steps.len();
        match fit(&[("small".to_owned(), &small)], "x") {
            Err(FitError::Regress(RegressError::TooFew { have, need, .. })) => {
                assert_eq!(have, steps);
                assert!(have < need);
            }
            other => assert!(steps >= 36, "{steps} steps: {other:?}"),
        }
    }

    #[test]
    fn a_replay_on_the_fitted_profile_reproduces_the_run_it_was_fitted_on() {
        let trace = simulated(Profile::Cpu, 80, 5);
        let p = fit(&[("cpu.parquet".to_owned(), &trace)], "cpu-again").unwrap();
        let v = validate(&p, &trace, "cpu.parquet", Tolerance::default(), 9).unwrap();
        let ttft = v.fidelity.get("TTFT", 50).unwrap();
        assert!(ttft.error_pct.unwrap().abs() < 10.0, "{ttft:?}");
        let itl = v.fidelity.get("ITL", 50).unwrap();
        assert!(itl.error_pct.unwrap().abs() < 10.0, "{itl:?}");
        let mut p = p;
        assert!(p.error_note().contains("never validated"), "{}", p.error_note());
        p.validation.push(v);
        let note = p.error_note();
        assert!(
            note.contains("measured against 1 held-out run(s) (cpu.parquet): TTFT p50/p95 within"),
            "{note}"
        );
    }
}
