//! `tokenscope record`: drives an OpenAI-compatible server with real prompts and writes what came back as a
//! token-level trace: per request its send time, first token, finish, usage, finish reason and status; per token
//! its arrival time at the client, id, text, logprob and candidates.
//!
//! Load is a closed loop (`concurrency` requests in flight) or an open loop (Poisson arrivals at `rate` per
//! second, at most `concurrency` in flight). Times are the client's: a token's time is when its chunk arrived.
//! Streams that leave out the end-of-sequence token that usage counts (llama.cpp's chat stream) get it added as a
//! special token with no probability, and the load report says so.

pub mod client;
mod finish;
pub mod fresh;
pub mod journal;
pub mod metrics;
pub mod prompts;
pub mod receiver;
pub mod rescore;
pub mod ring;
pub mod rotate;
pub mod server_tail;
pub mod tail;
pub mod watcher;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use rand::SeedableRng;
use rand_distr::Distribution;
use serde_json::Value;
use tokio::sync::watch;

use client::{Api, Clock, Ending, Limits, Outcome, Phase, Sampling};
pub use finish::{Finish, Written, join_loaded, join_server_log};
use prompts::Prompt;
use tokenscope_core::import::{Kind, Sink, ok, openai, text};
use tokenscope_core::ingest::raw::Val;
use tokenscope_core::trace::report::{Encoding, SourceFile};
use tokenscope_core::trace::{Trace, TraceBuilder};

/// What to record.
#[derive(Debug, Clone)]
pub struct RecordOptions {
    /// The server's base URL (`http://127.0.0.1:8080`, with or without `/v1`).
    pub url: String,
    /// The API to use.
    pub api: Api,
    /// Requests to send (the prompts are cycled).
    pub requests: usize,
    /// Requests in flight at most.
    pub concurrency: usize,
    /// Open loop: requests per second (Poisson arrivals); `None` is a closed loop.
    pub rate: Option<f64>,
    /// Sampling settings.
    pub sampling: Sampling,
    /// Extra HTTP headers (`Authorization: Bearer ...`).
    pub headers: Vec<(String, String)>,
    /// End-of-sequence token ids, when the server does not say them.
    pub eos_ids: Vec<u32>,
    /// Longest wait for a chunk, and for a whole request.
    pub limits: Limits,
    /// After Ctrl-C, how long streams in flight may go on.
    pub grace: Duration,
    /// Seed of the open loop's arrivals.
    pub seed: u64,
    /// Where to write what is received as it comes (see [`journal`]); `None` keeps it in memory only.
    pub journal: Option<std::path::PathBuf>,
    /// Keep every chunk's text with the outcomes, for `--raw` (about 1 KB a token with candidates); off, a long
    /// recording holds the tokens it read and no more.
    pub keep_raw: bool,
    /// Write the requests that ended as parts of the run, by time or size (see [`rotate`]); `None` writes one trace.
    pub rotate: Option<rotate::Rotation>,
    /// What waits for the journal's disk, for a live view to say (shared by the options' clones).
    pub backlog: Arc<journal::Backlog>,
}

impl RecordOptions {
    /// A closed loop of `requests` one at a time to `url` on the chat API, with `record`'s defaults otherwise (128
    /// output tokens, 5 candidates, the server's sampling, 60 s idle and 600 s whole-request limits, 5 s of grace,
    /// no journal). Callers change what they need with `..RecordOptions::to(url, n)`.
    pub fn to(url: &str, requests: usize) -> Self {
        RecordOptions {
            url: url.to_owned(),
            api: Api::Chat,
            requests,
            concurrency: 1,
            rate: None,
            sampling: Sampling {
                model: None,
                max_tokens: 128,
                top_logprobs: 5,
                temperature: None,
                seed: None,
                extra: serde_json::Map::new(),
            },
            headers: Vec::new(),
            eos_ids: Vec::new(),
            limits: Limits {
                idle: Duration::from_mins(1),
                total: Duration::from_mins(10),
            },
            grace: Duration::from_secs(5),
            seed: 1,
            journal: None,
            keep_raw: false,
            rotate: None,
            backlog: Arc::default(),
        }
    }
}

/// What a recording gives: the trace, and the raw captures.
#[derive(Debug)]
pub struct Recording {
    /// The trace, with its load report (notes, and any record the format rejected).
    pub trace: Trace,
    /// The report.
    pub report: tokenscope_core::trace::report::Report,
    /// Every request as recorded, in order.
    pub outcomes: Vec<Outcome>,
    /// True when it was stopped (Ctrl-C, SIGTERM, or the caller's stop), even once every request was sent: the
    /// streams in flight were then cut after the grace period.
    pub interrupted: bool,
    /// A rotating recording's parts (its requests are there, not in `trace`; their outcomes keep no tokens).
    pub parts: rotate::Parts,
}

/// Why a recording could not start.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// A header is not valid in HTTP: its name, never its value (a key).
    #[error("--header {0}: not a valid HTTP header name or value (the value is not shown: it may be a key)")]
    Header(String),
    /// The HTTP client could not be built.
    #[error("cannot start the HTTP client: {0}")]
    Client(String),
    /// The async runtime could not start.
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
    /// A part of a rotating recording could not be written.
    #[error("cannot write a part of the recording: {0}")]
    Part(String),
    /// The journal (what is received, written as it comes) cannot be written.
    #[error("cannot write the recording's journal {0}: {1}; give an output in a writable directory")]
    Journal(String, std::io::Error),
}

/// What the server says of itself before the run: its name and version, the model, its EOS ids.
#[derive(Debug, Default, Clone)]
pub struct ServerInfo {
    /// `llama.cpp`, `vllm`, or unknown.
    pub engine: Option<String>,
    /// Its version or build.
    pub version: Option<String>,
    /// The model it serves.
    pub model: Option<String>,
    /// End-of-sequence token ids it names.
    pub eos_ids: Vec<u32>,
}

/// Asks the server what it is: llama.cpp's `/props` (and `/tokenize` for its EOS token's id), vLLM's `/version`, and
/// `/v1/models`. Every question may go unanswered.
async fn server_info(client: &reqwest::Client, base: &str) -> ServerInfo {
    let root = base.trim_end_matches('/').trim_end_matches("/v1").to_owned();
    let get = |path: &str| {
        let url = format!("{root}{path}");
        async move {
            let r = client.get(url).timeout(Duration::from_secs(5)).send().await.ok()?;
            if !r.status().is_success() {
                return None;
            }
            r.json::<Value>().await.ok()
        }
    };
    let mut info = ServerInfo::default();
    if let Some(props) = get("/props").await {
        info.engine = Some("llama.cpp".to_owned());
        info.version = props.get("build_info").and_then(Value::as_str).map(str::to_owned);
        info.model = props
            .get("model_alias")
            .or_else(|| props.get("model_path"))
            .and_then(Value::as_str)
            .map(|m| m.rsplit('/').next().unwrap_or(m).to_owned());
        if let Some(eos) = props.get("eos_token").and_then(Value::as_str) {
            let url = format!("{root}/tokenize");
            let body = serde_json::json!({"content": eos, "parse_special": true});
            let ids = async {
                let r = client
                    .post(url)
                    .json(&body)
                    .timeout(Duration::from_secs(5))
                    .send()
                    .await
                    .ok()?;
                r.json::<Value>().await.ok()
            }
            .await;
            info.eos_ids = ids
                .as_ref()
                .and_then(|v| v.get("tokens"))
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|t| t.as_u64().and_then(|t| u32::try_from(t).ok()))
                        .collect()
                })
                .unwrap_or_default();
        }
    } else if let Some(v) = get("/version").await {
        info.engine = Some("vllm".to_owned());
        info.version = v.get("version").and_then(Value::as_str).map(str::to_owned);
    }
    if info.model.is_none()
        && let Some(models) = get("/v1/models").await
    {
        info.model = models.pointer("/data/0/id").and_then(Value::as_str).map(str::to_owned);
    }
    info
}

/// Live counters for the progress bar.
#[derive(Debug, Default)]
struct Counters {
    done: AtomicUsize,
    tokens: AtomicU64,
    errors: AtomicUsize,
}

/// Runs a recording on its own runtime, with a progress bar on standard error when `progress` is set; `stop`, when
/// given, stands for Ctrl-C.
pub fn run_recording(
    options: &RecordOptions,
    prompts: &[Prompt],
    progress: bool,
    stop: Option<watch::Receiver<bool>>,
) -> Result<Recording, RecordError> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("record")
        .enable_all()
        .build()
        .map_err(RecordError::Runtime)?;
    runtime.block_on(run(options, prompts, progress, stop))
}

async fn run(
    options: &RecordOptions,
    prompts: &[Prompt],
    progress: bool,
    stop: Option<watch::Receiver<bool>>,
) -> Result<Recording, RecordError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut headers = reqwest::header::HeaderMap::new();
    for (k, v) in &options.headers {
        let name = reqwest::header::HeaderName::from_bytes(k.as_bytes()).map_err(|_| RecordError::Header(k.clone()))?;
        let value = reqwest::header::HeaderValue::from_str(v).map_err(|_| RecordError::Header(k.clone()))?;
        headers.insert(name, value);
    }
    let client = reqwest::Client::builder()
        .default_headers(headers)
        .connect_timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| RecordError::Client(e.to_string()))?;
    let info = server_info(&client, &options.url).await;
    let url = options.api.url(&options.url);
    let clock = Clock::default();
    let (phase_tx, phase_rx) = watch::channel(Phase::Running);
    let counters = Arc::new(Counters::default());
    let bar = progress.then(|| {
        let bar = indicatif::ProgressBar::new(options.requests as u64);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} requests {msg} [{elapsed}]")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    });

    // Ctrl-C or SIGTERM (or the caller's stop): no new requests, then after the grace period the streams in flight
    // are cut.
    let interrupted = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let phase_tx = phase_tx.clone();
        let interrupted = Arc::clone(&interrupted);
        let grace = options.grace;
        let mut stop = stop;
        tokio::spawn(async move {
            // A caller's stop (the app's live recording) is the only one: its window listens for the signals.
            match stop.as_mut() {
                Some(rx) => {
                    let _ = rx.wait_for(|s| *s).await;
                }
                None => signal().await,
            }
            interrupted.store(true, Ordering::Relaxed);
            let _ = phase_tx.send(Phase::Draining);
            tokio::time::sleep(grace).await;
            let _ = phase_tx.send(Phase::Stopped);
        })
    };

    // What is received goes to the journal as it comes: a killed recording leaves it on disk.
    let (journal, writer) = match &options.journal {
        Some(path) => {
            let (j, w) = journal::Journal::create(path, Arc::clone(&options.backlog))
                .map_err(|e| RecordError::Journal(path.display().to_string(), e))?;
            (Some(j), Some(w))
        }
        None => (None, None),
    };
    // A rotating recording hands every request that ends to the rotation, which writes the parts.
    let (ended, rotation) = match &options.rotate {
        Some(r) => {
            let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
            let context = rotate::Context {
                options: options.clone(),
                prompts: prompts.to_vec(),
                info: info.clone(),
                url: url.clone(),
            };
            (
                Some(tx),
                Some(tokio::spawn(rotate::run(r.clone(), context, journal.clone(), rx))),
            )
        }
        None => (None, None),
    };
    let next = Arc::new(AtomicUsize::new(0));
    let semaphore = Arc::new(tokio::sync::Semaphore::new(options.concurrency.max(1)));
    let mut set = tokio::task::JoinSet::new();
    let mut rng = rand_pcg::Pcg64::seed_from_u64(options.seed);
    let gaps = options
        .rate
        .filter(|r| r.is_finite() && *r > 0.0)
        .and_then(|r| rand_distr::Exp::new(r).ok());
    let started = tokio::time::Instant::now();
    let nonce = u64::try_from(clock.now_ns()).unwrap_or(1) | 1;
    let mut due = started;
    loop {
        if *phase_rx.borrow() != Phase::Running {
            break;
        }
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= options.requests {
            break;
        }
        let scripted = prompts
            .get(i % prompts.len().max(1))
            .and_then(|p| p.at_ms)
            .filter(|_| i < prompts.len());
        if let Some(at_ms) = scripted {
            let at = started + Duration::from_secs_f64(at_ms / 1e3);
            let mut phase = phase_rx.clone();
            tokio::select! {
                () = tokio::time::sleep_until(at) => {}
                _ = phase.wait_for(|p| *p != Phase::Running) => break,
            }
        } else if let Some(exp) = &gaps {
            due += Duration::from_secs_f64(exp.sample(&mut rng));
            let mut phase = phase_rx.clone();
            tokio::select! {
                () = tokio::time::sleep_until(due) => {}
                _ = phase.wait_for(|p| *p != Phase::Running) => break,
            }
        }
        let permit = {
            let mut phase = phase_rx.clone();
            tokio::select! {
                p = Arc::clone(&semaphore).acquire_owned() => p,
                _ = phase.wait_for(|p| *p != Phase::Running) => break,
            }
        };
        let Ok(permit) = permit else { break };
        let p = i % prompts.len().max(1);
        let Some(prompt) = prompts.get(p) else { break };
        let body = client::body(options.api, prompt, &options.sampling);
        let (client, url, phase, counters, bar, journal, ended) = (
            client.clone(),
            url.clone(),
            phase_rx.clone(),
            Arc::clone(&counters),
            bar.clone(),
            journal.clone(),
            ended.clone(),
        );
        let (limits, keep_raw) = (options.limits, options.keep_raw);
        set.spawn(async move {
            let ids = client::RequestIds::new(nonce, i);
            let out = client::run_one(
                &client,
                &url,
                &body,
                clock,
                limits,
                phase,
                (i, p, &ids, journal.as_ref(), keep_raw),
            )
            .await;
            drop(permit);
            counters.done.fetch_add(1, Ordering::Relaxed);
            counters
                .tokens
                .fetch_add(out.stream.tokens.len() as u64, Ordering::Relaxed);
            if out.ending != Ending::Done {
                counters.errors.fetch_add(1, Ordering::Relaxed);
            }
            if let Some(bar) = &bar {
                #[expect(clippy::cast_precision_loss, reason = "a rate on a progress bar")]
                let rate = counters.tokens.load(Ordering::Relaxed) as f64 / started.elapsed().as_secs_f64().max(1e-3);
                bar.set_position(counters.done.load(Ordering::Relaxed) as u64);
                bar.set_message(format!(
                    "· {rate:.0} tok/s · {} errors",
                    counters.errors.load(Ordering::Relaxed)
                ));
            }
            // Rotating: the request goes to the next part; what is kept here only counts it (its tokens and chunks
            // are not copied).
            match &ended {
                Some(tx) => {
                    let mut kept = out;
                    let whole = Outcome {
                        stream: std::mem::take(&mut kept.stream),
                        events: std::mem::take(&mut kept.events),
                        ..kept.clone()
                    };
                    let _ = tx.send(whole);
                    kept
                }
                None => out,
            }
        });
    }
    let mut outcomes = Vec::with_capacity(options.requests);
    while let Some(done) = set.join_next().await {
        if let Ok(out) = done {
            outcomes.push(out);
        }
    }
    drop(ended);
    let parts = match rotation {
        Some(task) => match task.await {
            Ok(Ok(parts)) => parts,
            Ok(Err(e)) => return Err(RecordError::Part(e)),
            Err(e) => return Err(RecordError::Part(e.to_string())),
        },
        None => rotate::Parts::default(),
    };
    drop(journal);
    if let Some(w) = writer {
        w.finish().await.map_err(|e| {
            RecordError::Journal(
                options
                    .journal
                    .as_ref()
                    .map_or_else(String::new, |p| p.display().to_string()),
                e,
            )
        })?;
    }
    watcher.abort();
    if let Some(bar) = &bar {
        bar.finish();
    }
    outcomes.sort_by_key(|o| o.index);
    let (trace, report) = build_trace(options, prompts, &info, &url, &outcomes);
    Ok(Recording {
        trace,
        report,
        outcomes,
        interrupted: interrupted.load(Ordering::Relaxed),
        parts,
    })
}

/// Waits for Ctrl-C or, on Unix, SIGTERM (what a process manager, `kill` or a container's stop sends); forever when
/// neither can be listened for.
pub async fn signal() {
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        r = tokio::signal::ctrl_c() => {
            if r.is_err() {
                std::future::pending::<()>().await;
            }
        }
        () = term => {}
    }
}

/// The request id of the `i`-th request of a recording.
pub fn request_id(i: usize) -> String {
    format!("rec-{i:05}")
}

/// A URL as a trace, a note or a message may show it: without its user, password, query or fragment, which can carry
/// keys (`?api_key=`, `user:token@`); a query left out shows as `?…`.
pub fn shown_url(url: &str) -> String {
    #[expect(
        clippy::single_match_else,
        reason = "a URL that parses and one that does not, side by side"
    )]
    match reqwest::Url::parse(url) {
        Ok(mut u) => {
            let had_query = u.query().is_some();
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.set_fragment(None);
            let mut s = u.to_string();
            if had_query {
                s.push_str("?…");
            }
            s
        }
        // Not a URL the client would send to: what comes after an `@`, a `?` or a `#` is left out.
        Err(_) => {
            let end = url.find(['?', '#']).unwrap_or(url.len());
            let host = &url[..end];
            host.rsplit_once('@').map_or(host, |(_, h)| h).to_owned()
        }
    }
}

/// The trace of a recording: its requests, their tokens and candidates, a meta record naming the server.
pub fn build_trace(
    options: &RecordOptions,
    prompts: &[Prompt],
    info: &ServerInfo,
    url: &str,
    outcomes: &[Outcome],
) -> (Trace, tokenscope_core::trace::report::Report) {
    let mut b = TraceBuilder::default();
    let url = &shown_url(url);
    b.report.files.push(SourceFile {
        path: url.clone(),
        encoding: Encoding::Jsonl,
    });
    let mut eos_ids: Vec<u32> = if options.eos_ids.is_empty() {
        info.eos_ids.clone()
    } else {
        options.eos_ids.clone()
    };
    // A server that names no EOS (no llama.cpp `/props`, no --eos-id): the token streams stopped on with empty text.
    let mut inferred: Vec<u32> = Vec::new();
    let mut inferred_streams = 0usize;
    if eos_ids.is_empty() {
        for id in outcomes.iter().filter_map(|o| o.stream.unnamed_eos()) {
            inferred_streams += 1;
            if !inferred.contains(&id) {
                inferred.push(id);
            }
        }
        inferred.sort_unstable();
        eos_ids.clone_from(&inferred);
    }
    let mut meta = tokenscope_core::import::record("meta");
    meta.engine = info.engine.clone().and_then(text);
    meta.engine_version = info.version.clone().and_then(text);
    let model = options
        .sampling
        .model
        .clone()
        .or_else(|| info.model.clone())
        .or_else(|| outcomes.iter().find_map(|o| o.stream.model.clone()));
    meta.model = model.clone().and_then(text);
    if !eos_ids.is_empty() {
        meta.eos_token_ids = ok(eos_ids.iter().map(|&id| Val::Ok(i64::from(id))).collect());
    }
    meta.created_ns = ok(Clock::default().now_ns());
    meta.clock = text("client");
    tokenscope_core::ingest::validate::ingest(&meta, tokenscope_core::trace::report::Place { file: 0, at: 0 }, &mut b);
    b.report.records -= 1;

    let mut added_eos = 0usize;
    let mut chunks = 0usize;
    // Streams that sent logprobs for some tokens only, and those tokens without (llama.cpp under speculative
    // decoding sends none for a verify step's tokens).
    let (mut partial, mut without) = (0usize, 0usize);
    let mut sink = Sink::new(&mut b, 0, Kind::OpenaiStream);
    for o in outcomes {
        let mut stream = o.stream.clone();
        let chunked = stream.tokens.iter().filter(|t| t.is_chunk).count();
        if chunked > 0 && chunked == stream.tokens.len() {
            chunks += 1;
        } else if chunked > 0 {
            partial += 1;
            without += chunked;
        }
        let id = request_id(o.index);
        let prompt = prompts.get(o.prompt);
        let hash = prompt.map(|p| p.body.hash());
        let x = openai::Exchange {
            id: &id,
            sent_ns: o.sent_ns,
            end_ns: o.end_ns,
            ending: Some(o.ending),
            error_code: o.error_code.as_deref(),
            model: model.as_deref(),
            app_id: prompt.and_then(|p| p.app_id.as_deref()),
            user_id: prompt.and_then(|p| p.user_id.as_deref()),
            max_tokens: Some(i64::from(
                prompt.and_then(|p| p.max_tokens).unwrap_or(options.sampling.max_tokens),
            )),
            temperature: options.sampling.temperature,
            trace_id: Some(&o.trace_id),
            prompt_hash: hash.as_deref(),
            in_flight: false,
        };
        if openai::add_exchange(&mut stream, &x, &eos_ids, &mut sink, o.index as u64 + 1) {
            added_eos += 1;
        }
    }
    sink.note(format!(
        "recorded from {url}: times are the client's (arrival is the send time, a token's time is when its chunk \
         arrived){}",
        info.engine
            .as_ref()
            .map(|e| format!(
                "; server {e}{}",
                info.version.as_ref().map(|v| format!(" {v}")).unwrap_or_default()
            ))
            .unwrap_or_default()
    ));
    if added_eos > 0 {
        sink.note(format!(
            "{added_eos} streams stopped without sending their end-of-sequence token, which usage counts: it was \
             added as a special token with no probability{}",
            if eos_ids.is_empty() {
                " and no id (give --eos-id)"
            } else {
                ""
            }
        ));
    }
    if !inferred.is_empty() {
        let ids: Vec<String> = inferred.iter().map(u32::to_string).collect();
        sink.note(format!(
            "the server names no end-of-sequence token: {} stream(s) stopped on token id {} with empty text, taken as \
             EOS (marked special, in meta.eos_token_ids); --eos-id overrides",
            inferred_streams,
            ids.join(", ")
        ));
    }
    let retried = outcomes.iter().filter(|o| o.retried).count();
    if retried > 0 {
        sink.note(format!(
            "{retried} requests were sent twice: the first send failed at once on a connection the server had closed"
        ));
    }
    if chunks > 0 {
        sink.note(format!(
            "{chunks} streams carried no logprobs: their token records are chunks of text (ask for --top-logprobs)"
        ));
    }
    if partial > 0 {
        sink.note(format!(
            "{partial} streams carried logprobs for some tokens only: {without} chunks came without them, each a token \
             record with its text and no id or candidates (llama.cpp sends none for the tokens of a speculative verify \
             step; the server's log gives their ids)"
        ));
    }
    b.finish()
}

/// The one-line summary of a recording.
pub fn summary_line(rec: &Recording) -> String {
    let count = |e: Ending| rec.outcomes.iter().filter(|o| o.ending == e).count();
    let tokens: usize = rec.outcomes.iter().map(|o| o.stream.tokens.len()).sum::<usize>() + rec.parts.tokens;
    format!(
        "{} requests: {} ok, {} failed, {} cut, {} timed out, {} interrupted; {} tokens{}",
        rec.outcomes.len(),
        count(Ending::Done),
        count(Ending::Failed),
        count(Ending::Cut),
        count(Ending::TimedOut),
        count(Ending::Interrupted),
        tokens,
        if rec.interrupted { " (stopped)" } else { "" }
    )
}

/// Where a raw capture of every stream goes: one JSON line per request, `{request_id, sent_ns, end_ns, ending,
/// error_code, events: [[t_ns, data], ...]}`, which `tokenscope` opens as kind `openai-stream`.
pub fn write_raw(outcomes: &[Outcome], path: &PathBuf) -> std::io::Result<()> {
    use std::io::Write;
    let mut w = std::io::BufWriter::new(std::fs::File::create(path)?);
    for o in outcomes {
        let line = serde_json::json!({
            "request_id": request_id(o.index),
            "trace_id": o.trace_id,
            "sent_ns": o.sent_ns,
            "end_ns": o.end_ns,
            "ending": o.ending,
            "error_code": o.error_code,
            "error": o.error,
            "events": o.events,
        });
        serde_json::to_writer(&mut w, &line)?;
        w.write_all(b"\n")?;
    }
    w.flush()
}
