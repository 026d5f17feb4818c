//! `tokenscope record --url URL --prompts FILE [...] -o OUT`: records a token-level trace from an OpenAI-compatible
//! server (see [`crate::record`]).

use std::path::{Path, PathBuf};

use super::{Output, thousands};
use crate::record::{self, RecordOptions};

/// Parses `--header "Name: value"`. A mistake is said without the text given: a header usually carries a key.
pub fn parse_header(s: &str) -> Result<(String, String), String> {
    let (k, v) = s.split_once(':').ok_or_else(|| {
        format!(
            "--header: give it as \"Name: value\" (no ':' in the {} characters given, not shown: they may be a key)",
            s.chars().count()
        )
    })?;
    let k = k.trim();
    if k.is_empty() {
        return Err("--header: the name before ':' is empty".to_owned());
    }
    Ok((k.to_owned(), v.trim().to_owned()))
}

/// Parses `--extra-body '{...}'`: a JSON object.
pub fn parse_extra(s: &str) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    match serde_json::from_str::<serde_json::Value>(s) {
        Ok(serde_json::Value::Object(m)) => Ok(m),
        Ok(other) => Err(format!("--extra-body: {other} is not a JSON object")),
        Err(e) => Err(format!("--extra-body: not JSON ({e})")),
    }
}

/// The arguments of `record`.
#[derive(Debug, Clone, clap::Args)]
pub struct RecordArgs {
    /// The server's base URL (http://127.0.0.1:8080, with or without /v1).
    #[arg(long)]
    pub url: String,
    /// Prompts: JSON lines of {"prompt": ...} or {"messages": [...]} (optionally with max_tokens, app_id,
    /// user_id), or plain text, one prompt per line; cycled to --requests.
    #[arg(long, value_name = "FILE")]
    pub prompts: PathBuf,
    /// The API: chat (/v1/chat/completions), completions (/v1/completions), llamacpp (/completion).
    #[arg(long, value_enum, default_value = "chat")]
    pub api: crate::record::client::Api,
    /// Requests to send.
    #[arg(long, default_value_t = 16)]
    pub requests: usize,
    /// Requests in flight at most (closed loop without --rate).
    #[arg(long, default_value_t = 1)]
    pub concurrency: usize,
    /// Open loop: requests per second, Poisson arrivals (still at most --concurrency in flight).
    #[arg(long)]
    pub rate: Option<f64>,
    /// Output tokens per request, unless a prompt has its own max_tokens.
    #[arg(long, default_value_t = 128)]
    pub max_tokens: u32,
    /// Candidates per token (0: no logprobs).
    #[arg(long, default_value_t = 5)]
    pub top_logprobs: u32,
    /// Sampling temperature.
    #[arg(long)]
    pub temperature: Option<f64>,
    /// Sampling seed sent to the server.
    #[arg(long)]
    pub sampling_seed: Option<u64>,
    /// The model to ask for.
    #[arg(long)]
    pub model: Option<String>,
    /// JSON object of fields merged into every request body, e.g. '{"logit_bias": {"1": 3}}'.
    #[arg(long, value_name = "JSON", value_parser = parse_extra)]
    pub extra_body: Option<serde_json::Map<String, serde_json::Value>>,
    /// An HTTP header, "Name: value" (repeat for more).
    // Parsed after clap, which would echo a value it refuses: a header usually carries a key.
    #[arg(long = "header", value_name = "NAME: VALUE")]
    pub headers: Vec<String>,
    /// End-of-sequence token id, when the server does not say it (repeat for more).
    #[arg(long = "eos-id")]
    pub eos_ids: Vec<u32>,
    /// Seed of the open loop's arrivals.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Seconds without a chunk before a stream counts as stalled.
    #[arg(long, default_value_t = 60.0)]
    pub idle_timeout: f64,
    /// Seconds a whole request may take.
    #[arg(long, default_value_t = 600.0)]
    pub timeout: f64,
    /// After Ctrl-C, seconds the streams in flight may go on before they are cut.
    #[arg(long, default_value_t = 5.0)]
    pub grace: f64,
    /// Also write every streamed chunk with its arrival time (JSON lines; opens as kind openai-stream).
    #[arg(long, value_name = "FILE")]
    pub raw: Option<PathBuf>,
    /// The server's log of this run (llama-server --log-file PATH, best at -lv 5; or any server-side file
    /// tokenscope reads): read when the recording ends and joined with it, so the trace written has both halves.
    /// When the two do not join, the recording is written alone and the reason said.
    #[arg(long, value_name = "PATH")]
    pub server_log: Option<PathBuf>,
    /// The trace to write (.parquet, .jsonl).
    #[arg(short, long)]
    pub output: PathBuf,
    /// Write the run as parts, a new one every SECS seconds: OUTPUT is then a directory of part-00001.parquet, ...,
    /// which opens as one trace. The recorder holds one part's requests at most.
    #[arg(long, value_name = "SECS")]
    pub rotate_every: Option<f64>,
    /// Write the run as parts, a new one each time MB megabytes were received (see --rotate-every).
    #[arg(long, value_name = "MB")]
    pub rotate_mb: Option<f64>,
    /// Show the run in the app as it is recorded: request tracks growing, tokens in the high-power view, findings
    /// as their evidence comes. Closing the window (or Stop) ends the recording and writes OUTPUT. With
    /// --rotate-every or --rotate-mb, each part leaves memory as it is written and opens from the live bar.
    #[arg(long)]
    pub live: bool,
    // The date and zone of the times of the server log it joins (`--server-log`).
    #[command(flatten)]
    pub log: super::globals::LogClockArgs,
}

impl RecordArgs {
    /// Runs `record`.
    pub fn run(&self) -> Output {
        let secs = |name: &str, v: f64| {
            (v.is_finite() && v > 0.0)
                .then(|| std::time::Duration::from_secs_f64(v))
                .ok_or_else(|| format!("--{name} {v}: give a positive number of seconds"))
        };
        let limits = match (
            secs("idle-timeout", self.idle_timeout),
            secs("timeout", self.timeout),
            secs("grace", self.grace),
        ) {
            (Ok(idle), Ok(total), Ok(grace)) => (record::client::Limits { idle, total }, grace),
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return Output::error(e, 2),
        };
        if self.rate.is_some_and(|r| !(r.is_finite() && r > 0.0)) {
            return Output::error("--rate: give a positive number of requests per second", 2);
        }
        let headers = match self
            .headers
            .iter()
            .map(|h| parse_header(h))
            .collect::<Result<Vec<_>, _>>()
        {
            Ok(h) => h,
            Err(e) => return Output::error(e, 2),
        };
        let options = RecordOptions {
            url: self.url.clone(),
            api: self.api,
            requests: self.requests,
            concurrency: self.concurrency.max(1),
            rate: self.rate,
            sampling: record::client::Sampling {
                model: self.model.clone(),
                max_tokens: self.max_tokens,
                top_logprobs: self.top_logprobs,
                temperature: self.temperature,
                seed: self.sampling_seed,
                extra: self.extra_body.clone().unwrap_or_default(),
            },
            headers,
            eos_ids: self.eos_ids.clone(),
            limits: limits.0,
            grace: limits.1,
            seed: self.seed,
            journal: None,
            keep_raw: self.raw.is_some(),
            rotate: None,
            backlog: std::sync::Arc::default(),
        };
        if self.rotate_every.is_some() || self.rotate_mb.is_some() {
            return self.run_rotating(options);
        }
        if self.live {
            return match prepare(&options, &self.prompts, &self.output) {
                Ok((options, prompts, stderr)) => self.run_live(options, prompts, stderr),
                Err(e) => Output::error(e, 2),
            };
        }
        let progress = std::io::IsTerminal::is_terminal(&std::io::stderr());
        run(
            &options,
            &self.prompts,
            self.raw.as_ref(),
            self.server_log.as_deref(),
            &self.output,
            progress,
        )
    }
}

impl RecordArgs {
    /// `record --rotate-every` / `--rotate-mb`: the run written as parts in the output directory.
    fn run_rotating(&self, options: RecordOptions) -> Output {
        let refused = [
            (self.server_log.is_some(), "--server-log"),
            (self.raw.is_some(), "--raw"),
        ];
        if let Some((_, flag)) = refused.iter().find(|(given, _)| *given) {
            return Output::error(
                format!(
                    "{flag} needs the whole run at its end, which a rotating recording does not keep: record without \
                     rotation, or open the parts' directory with the server's log afterwards"
                ),
                2,
            );
        }
        let every = match self.rotate_every.map(|s| {
            (s.is_finite() && s > 0.0)
                .then(|| std::time::Duration::from_secs_f64(s))
                .ok_or_else(|| format!("--rotate-every {s}: give a positive number of seconds"))
        }) {
            Some(Err(e)) => return Output::error(e, 2),
            Some(Ok(d)) => Some(d),
            None => None,
        };
        let bytes = match self.rotate_mb {
            Some(mb) if !(mb.is_finite() && mb > 0.0) => {
                return Output::error(format!("--rotate-mb {mb}: give a positive number of megabytes"), 2);
            }
            #[expect(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "a positive size in MB"
            )]
            Some(mb) => Some((mb * 1e6) as u64),
            None => None,
        };
        let dir = &self.output;
        if crate::format::encoding_of(dir).is_some() || dir.is_file() {
            return Output::error(
                format!(
                    "{}: a rotating recording writes parts into a directory: give -o a directory (it is made when \
                     missing)",
                    dir.display()
                ),
                2,
            );
        }
        let prompts = match record::prompts::load(&self.prompts) {
            Ok(p) => p,
            Err(e) => return Output::error(e, 2),
        };
        if let Err(e) = std::fs::create_dir_all(dir) {
            return Output::error(format!("cannot make {}: {e}", dir.display()), 1);
        }
        let journal = dir.join("journal.partial.jsonl");
        let options = RecordOptions {
            journal: Some(journal.clone()),
            rotate: Some(record::rotate::Rotation {
                dir: dir.clone(),
                every,
                bytes,
            }),
            ..options
        };
        if self.live {
            let notes = prompt_notes(&prompts, &self.prompts);
            return self.run_live(options, prompts.prompts, notes);
        }
        let progress = std::io::IsTerminal::is_terminal(&std::io::stderr());
        let rec = match record::run_recording(&options, &prompts.prompts, progress, None) {
            Ok(r) => r,
            Err(e) => return Output::error(e, 1),
        };
        // Every request that ended is in a part: the journal has done its job.
        let _ = std::fs::remove_file(&journal);
        Output {
            stdout: format!(
                "wrote {} parts to {} ({} requests, {} tokens; it opens as one trace): {}\n",
                rec.parts.paths.len(),
                dir.display(),
                thousands(rec.parts.requests as u64),
                thousands(rec.parts.tokens as u64),
                record::summary_line(&rec)
            ),
            stderr: String::new(),
            code: 0,
        }
    }

    /// `record --live`: the app shows the recording as it is made (its journal, and its rotation when it rotates,
    /// set in `options`).
    fn run_live(&self, options: RecordOptions, prompts: Vec<record::prompts::Prompt>, stderr: String) -> Output {
        let rotating = options.rotate.is_some();
        let mut stderr = stderr;
        if !rotating {
            stderr.push_str(
                "note: a live recording without --rotate-every or --rotate-mb holds every token it shows (1.3 to 3.3 KB \
                 a token with candidates: 4.5 to 11 GB an hour at 1,000 tokens/s); for a run of hours, give -o a \
                 directory and --rotate-every: each part leaves memory as it is written\n",
            );
        }
        let live = crate::ui::shell::live::LiveOptions {
            options,
            prompts,
            output: self.output.clone(),
            raw: self.raw.clone(),
            server_log: self.server_log.clone(),
        };
        match crate::ui::run_live(live) {
            // Every request that ended is in a part and the journal removed, unless the recording failed: then the
            // journal is left beside the parts, and they open together.
            Ok(()) if rotating && self.output.join("journal.partial.jsonl").exists() => Output::error(
                format!(
                    "the recording did not end well (the window said why); what was recorded is in {}: its parts and \
                     its journal open together as one trace",
                    self.output.display()
                ),
                1,
            ),
            Ok(()) if rotating => Output {
                stdout: format!(
                    "wrote {} parts to {} (it opens as one trace)\n",
                    record::rotate::parts_in(&self.output).len(),
                    self.output.display()
                ),
                stderr,
                code: 0,
            },
            Ok(()) if self.output.exists() => Output {
                stdout: format!("wrote {}\n", self.output.display()),
                stderr,
                code: 0,
            },
            Ok(()) => Output::error(
                format!(
                    "{} was not written; what was recorded is in {}, which opens as a trace",
                    self.output.display(),
                    record::journal::path_for(&self.output).display()
                ),
                1,
            ),
            Err(e) => Output::error(
                format!(
                    "cannot open the window: {e}. On a machine without a display, run under Xvfb, or record without \
                     --live"
                ),
                1,
            ),
        }
    }
}

/// Runs a recording and writes its trace (and raw capture).
pub fn run(
    options: &RecordOptions,
    prompts_path: &Path,
    raw: Option<&PathBuf>,
    server_log: Option<&Path>,
    output: &Path,
    progress: bool,
) -> Output {
    let (options, prompts, mut stderr) = match prepare(options, prompts_path, output) {
        Ok(p) => p,
        Err(e) => return Output::error(e, 2),
    };
    let rec = match record::run_recording(&options, &prompts, progress, None) {
        Ok(r) => r,
        Err(e) => return Output::error(e, 2),
    };
    let finish = record::Finish {
        raw,
        server_log,
        output,
    };
    match finish.write(&rec) {
        Ok(written) => {
            stderr.push_str(&written.notes);
            written_output(&rec, &written, output, stderr)
        }
        Err(e) => Output::error(e, 1),
    }
}

/// What `record` and the app's live recording check before a recording starts: the output's name and the prompts.
/// The options to record with (writing their journal beside the output), the prompts, and notes of prompt lines
/// skipped.
///
/// # Errors
/// The output's name or the prompts' file, said.
pub fn prepare(
    options: &RecordOptions,
    prompts_path: &Path,
    output: &Path,
) -> Result<(RecordOptions, Vec<record::prompts::Prompt>, String), String> {
    if crate::format::encoding_of(output).is_none() {
        return Err(format!(
            "{}: give the output a .parquet, .jsonl, .jsonl.gz or .jsonl.zst name",
            output.display()
        ));
    }
    let prompts = record::prompts::load(prompts_path).map_err(|e| e.to_string())?;
    let notes = prompt_notes(&prompts, prompts_path);
    // What is received is written as it comes, beside the output: a killed recording leaves it, and it opens.
    let options = RecordOptions {
        journal: Some(record::journal::path_for(output)),
        ..options.clone()
    };
    Ok((options, prompts.prompts, notes))
}

/// The notes of prompt lines skipped, for standard error.
fn prompt_notes(prompts: &record::prompts::Prompts, path: &Path) -> String {
    prompts
        .rejected
        .iter()
        .map(|(line, why)| format!("note: {}:{line}: {why}; line skipped\n", path.display()))
        .collect()
}

/// What `record` prints once the trace is written.
pub fn written_output(rec: &record::Recording, written: &record::Written, output: &Path, stderr: String) -> Output {
    let failed = rec
        .outcomes
        .iter()
        .filter(|o| o.ending != record::client::Ending::Done)
        .count();
    let ok = rec.outcomes.len() - failed;
    Output {
        stdout: format!(
            "wrote {} ({} requests, {} tokens): {}\n",
            output.display(),
            thousands(written.trace.request_count() as u64),
            thousands(written.trace.token_count() as u64),
            record::summary_line(rec)
        ),
        stderr,
        code: i32::from(ok == 0 && !rec.outcomes.is_empty()),
    }
}
