//! `tokenscope rescore TRACE --prompts FILE --url URL [--request ID].. [--top-k K] [--api chat|completions] -o OUT
//! [--json]`: each recorded answer re-scored by a server running the same model (`record::rescore`): what the model
//! itself gives every token the recording emitted, written as the trace's `reference` records, with how many were
//! its first choice, a fair draw of the dice, or off its distribution, and the findings that follow
//! (off-distribution tokens, sampling accidents at a stop token).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use super::{Output, validate};
use crate::analysis::findings::{Kind, Thresholds, find_kinds};
use crate::analysis::reference::{Counts, counts, counts_by_request};
use crate::analysis::summary::Slo;
use crate::load::LoadOptions;
use crate::record::client::Api;
use crate::record::prompts::{self, Prompt};
use crate::record::rescore::{Options, RescoreError, Rescorer};
use crate::trace::report::Place;
use crate::trace::{Trace, TraceBuilder};

/// The arguments of `rescore`.
#[derive(Debug, Clone, clap::Args)]
pub struct RescoreArgs {
    /// The recording (from `tokenscope record`: its requests name their prompt by `prompt_hash`, its tokens have
    /// ids).
    pub trace: PathBuf,
    /// The prompts file the recording was made with (`record --prompts`): each request's prompt is found in it by
    /// its hash.
    #[arg(long, value_name = "FILE")]
    pub prompts: PathBuf,
    /// The reference server's base URL: llama.cpp's llama-server running the model to compare with (the same
    /// model at full precision and alone, or the same server to check itself).
    #[arg(long)]
    pub url: String,
    /// Only these requests (repeat for more; default: all).
    #[arg(long = "request", value_name = "ID")]
    pub requests: Vec<String>,
    /// Candidates asked for at each position: an emitted token not among them is off the reference's distribution.
    #[arg(long, default_value_t = 20)]
    pub top_k: u32,
    /// How the recording sent its prompts: chat (the server's chat template applied) or completions (the text).
    #[arg(long, value_enum, default_value_t = Api::Chat)]
    pub api: Api,
    /// Let each position reuse the server's prompt cache (one token's work a position instead of the whole prompt
    /// and answer before it): faster, but its figures are computed in other batch shapes, which moves near ties.
    #[arg(long)]
    pub cache_prompt: bool,
    /// Seconds one request to the server may take.
    #[arg(long, default_value_t = 60.0)]
    pub timeout: f64,
    /// Where to write the trace with its references (.parquet or .jsonl).
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub reading: super::globals::GlobalArgs,
}

impl RescoreArgs {
    /// Runs the command.
    pub fn run(&self) -> Output {
        if self.top_k == 0 || self.top_k > 1_000 {
            return Output::error("--top-k: give a number of candidates from 1 to 1000", 2);
        }
        if !(self.timeout.is_finite() && self.timeout > 0.0) {
            return Output::error("--timeout: give seconds, more than 0", 2);
        }
        let loaded = match super::load(&[self.trace.as_path()], LoadOptions::default()) {
            Ok(l) => l,
            Err(e) => return validate::fatal(&e, self.json),
        };
        let prompts = match prompts::load(&self.prompts) {
            Ok(p) => p,
            Err(e) => return Output::error(e, 2),
        };
        let rescorer = match Rescorer::new(Options {
            url: self.url.clone(),
            api: self.api,
            top_k: self.top_k,
            timeout: Duration::from_secs_f64(self.timeout),
            cache_prompt: self.cache_prompt,
        }) {
            Ok(r) => r,
            Err(e) => return Output::error(e, 1),
        };
        let trace = &loaded.trace;
        let rows = match self.chosen(trace) {
            Ok(rows) => rows,
            Err(e) => return Output::error(e, 2),
        };
        let by_hash: HashMap<String, &Prompt> = prompts.prompts.iter().map(|p| (p.body.hash(), p)).collect();
        let mut notes: Vec<String> = Vec::new();
        let mut made = Vec::new();
        let total: usize = rows.iter().map(|&r| trace.tokens_of(r).len()).sum();
        let mut done = 0usize;
        // Progress on a terminal only (indicatif draws nothing elsewhere).
        let bar = indicatif::ProgressBar::new(total as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template("re-scoring {msg} {bar:30} {pos}/{len} tokens, {eta} left")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        for &r in &rows {
            let id = trace.request_id(r);
            let Some(prompt) = trace
                .label(trace.requests.prompt_hash[r as usize])
                .and_then(|h| by_hash.get(h))
            else {
                notes.push(format!(
                    "{id}: its prompt is not in {} (no prompt_hash, or another prompts file): not re-scored",
                    self.prompts.display()
                ));
                continue;
            };
            bar.set_message(id.to_owned());
            match rescorer.rescore(trace, r, prompt, |i| bar.set_position((done + i) as u64)) {
                Ok(rescored) => {
                    if let Some(n) = trace.requests.input_tokens.at(r as usize)
                        && n as usize != rescored.prompt_tokens
                    {
                        notes.push(format!(
                            "{id}: the server makes its prompt {} tokens where the recording says {n}: another chat \
                             template or tokenizer, and its references may not be comparable",
                            rescored.prompt_tokens
                        ));
                    }
                    done += rescored.references.len();
                    made.push(rescored);
                }
                Err(RescoreError::Skipped(why)) => notes.push(why),
                Err(RescoreError::Server(why)) => {
                    return Output::error(format!("the reference server: {why}"), 1);
                }
            }
        }
        bar.finish_and_clear();
        // The references join the trace's records; the trace is made again with them.
        // A builder names a request by the label id of its request_id: the trace's own labels, which it keeps.
        let ids = &trace.requests.id;
        let references: Vec<_> = made
            .into_iter()
            .flat_map(|rescored| rescored.references)
            .map(|(mut reference, text)| {
                reference.request = ids[reference.request as usize];
                (reference, text)
            })
            .collect();
        let mut b = TraceBuilder::from_trace(loaded.trace);
        for (mut reference, text) in references {
            reference.top_text = b.intern_token_text(reference.top_token_id, &text);
            b.add_reference(reference, Place::default());
        }
        let (out, report) = b.finish();
        if report.rejected_count() > 0 {
            return Output::error(
                format!(
                    "{} reference(s) could not join the trace: {:?}",
                    report.rejected_count(),
                    report.rejected
                ),
                1,
            );
        }
        if let Err(e) = crate::format::write(&out, &self.output) {
            return Output::error(format!("{}: {e}", self.output.display()), 1);
        }
        let c = counts(&out, None);
        let findings = find_kinds(
            &out,
            &Slo::default(),
            &Thresholds::default(),
            &[Kind::OffDistribution, Kind::SamplingAccident],
        );
        let stdout = if self.json {
            let origin = out.start_ns();
            format!(
                "{:#}\n",
                json!({
                    "output": self.output.display().to_string(),
                    "counts": c,
                    "requests": per_request(&out),
                    "findings": findings.iter().map(|f| super::findings::finding_json(&out, origin, f)).collect::<Vec<_>>(),
                    "notes": notes,
                })
            )
        } else {
            let mut s = text(&out, &c, &self.output);
            if !findings.is_empty() {
                s.push('\n');
                s.push_str(&super::findings::findings_text(
                    &out,
                    out.start_ns(),
                    &findings,
                    "re-scored",
                ));
            }
            s
        };
        let stderr: String = notes.iter().map(|n| format!("note: {n}\n")).collect();
        Output {
            stdout,
            stderr,
            code: 0,
        }
    }

    /// The request rows to re-score: those named, else every one.
    fn chosen(&self, trace: &Trace) -> Result<Vec<u32>, String> {
        if self.requests.is_empty() {
            return Ok((0..u32::try_from(trace.request_count()).unwrap_or(u32::MAX)).collect());
        }
        self.requests
            .iter()
            .map(|id| {
                trace
                    .request_row(id)
                    .ok_or_else(|| format!("--request {id}: no such request in {}", self.trace.display()))
            })
            .collect()
    }
}

/// Each re-scored request's counts, in the trace's order.
fn per_request(trace: &Trace) -> Vec<serde_json::Value> {
    counts_by_request(trace)
        .into_iter()
        .map(|(r, c)| {
            json!({"request": trace.request_id(r), "tokens": c.tokens, "top": c.top, "sampled": c.sampled,
                   "off_distribution": c.off_distribution})
        })
        .collect()
}

/// The text output: the counts over all, then per request.
fn text(trace: &Trace, c: &Counts, output: &Path) -> String {
    let pct = |n: usize| {
        if c.tokens == 0 {
            0.0
        } else {
            n as f64 * 100.0 / c.tokens as f64
        }
    };
    let mut s = format!(
        "re-scored {} tokens of {} requests: {} the reference's first choice ({:.1} %), {} a draw of the dice \
         ({:.1} %), {} off its distribution ({:.1} %)\nwrote {}\n",
        c.tokens,
        c.requests,
        c.top,
        pct(c.top),
        c.sampled,
        pct(c.sampled),
        c.off_distribution,
        pct(c.off_distribution),
        output.display()
    );
    for r in per_request(trace) {
        let _ = writeln!(
            s,
            "  {}: {} tokens, {} first choice, {} sampled, {} off-distribution",
            r["request"].as_str().unwrap_or(""),
            r["tokens"],
            r["top"],
            r["sampled"],
            r["off_distribution"]
        );
    }
    s
}
