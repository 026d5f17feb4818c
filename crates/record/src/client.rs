//! One streamed request to an OpenAI-compatible server: the body each API takes, the send, and the stream read
//! chunk by chunk (SSE through `eventsource-stream`) into an [`openai::Stream`], with the client's arrival time of
//! every chunk. Whatever the server does (refuse, answer an HTTP error, cut the stream, stall, send garbage), the
//! request ends with a status and the chunks that did arrive.

use std::time::{Duration, Instant};

use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use serde_json::{Value, json};
use tokio::sync::watch;

use super::prompts::Prompt;
pub use tokenscope_core::import::openai::Ending;
use tokenscope_core::import::openai::Stream;

/// The API a recording talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Api {
    /// `/v1/chat/completions`.
    Chat,
    /// `/v1/completions`.
    Completions,
    /// llama.cpp's native `/completion` (token ids and the EOS token always sent).
    Llamacpp,
}

impl Api {
    /// The endpoint's path after the server's base URL.
    pub fn path(self) -> &'static str {
        match self {
            Api::Chat => "/v1/chat/completions",
            Api::Completions => "/v1/completions",
            Api::Llamacpp => "/completion",
        }
    }

    /// The endpoint's URL from a base URL given with or without `/v1`.
    pub fn url(self, base: &str) -> String {
        let base = base.trim_end_matches('/');
        match base.strip_suffix("/v1") {
            Some(root) if self == Api::Llamacpp => format!("{root}{}", self.path()),
            Some(_) => format!("{base}{}", self.path().trim_start_matches("/v1")),
            None => format!("{base}{}", self.path()),
        }
    }
}

/// Sampling and output settings shared by every request.
#[derive(Debug, Clone, PartialEq)]
pub struct Sampling {
    /// The model to ask for (servers with one model ignore it).
    pub model: Option<String>,
    /// Output limit, unless the prompt has its own.
    pub max_tokens: u32,
    /// Candidates per token (0: logprobs off).
    pub top_logprobs: u32,
    /// Sampling temperature.
    pub temperature: Option<f64>,
    /// Sampling seed.
    pub seed: Option<u64>,
    /// Fields merged into every request body as given (`{"logit_bias": {"1": 3}}`), over the ones above.
    pub extra: serde_json::Map<String, Value>,
}

/// The JSON body of one request.
pub fn body(api: Api, prompt: &Prompt, s: &Sampling) -> Value {
    let max_tokens = prompt.max_tokens.unwrap_or(s.max_tokens);
    let mut b = match api {
        Api::Chat => {
            let mut b = json!({
                "messages": prompt.body.as_messages(),
                "stream": true,
                "max_tokens": max_tokens,
                "stream_options": {"include_usage": true},
            });
            if s.top_logprobs > 0 {
                b["logprobs"] = json!(true);
                b["top_logprobs"] = json!(s.top_logprobs);
            }
            b
        }
        Api::Completions => {
            let mut b = json!({
                "prompt": prompt.body.as_text(),
                "stream": true,
                "max_tokens": max_tokens,
                "stream_options": {"include_usage": true},
            });
            if s.top_logprobs > 0 {
                b["logprobs"] = json!(s.top_logprobs);
            }
            b
        }
        Api::Llamacpp => json!({
            "prompt": prompt.body.as_text(),
            "stream": true,
            "n_predict": max_tokens,
            "n_probs": s.top_logprobs,
            "return_tokens": true,
        }),
    };
    if let Some(m) = &s.model {
        b["model"] = json!(m);
    }
    if let Some(t) = s.temperature {
        b["temperature"] = json!(t);
    }
    if let Some(seed) = s.seed {
        b["seed"] = json!(seed);
    }
    for (k, v) in &s.extra {
        b[k.as_str()] = v.clone();
    }
    b
}

/// Wall-clock time from a monotonic clock: one reading of the wall clock at the start, steady time after.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    wall0_ns: i64,
    t0: Instant,
}

impl Default for Clock {
    fn default() -> Self {
        let wall0_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
        Self {
            wall0_ns,
            t0: Instant::now(),
        }
    }
}

impl Clock {
    /// Now, Unix ns.
    pub fn now_ns(&self) -> i64 {
        self.wall0_ns + i64::try_from(self.t0.elapsed().as_nanos()).unwrap_or(i64::MAX)
    }
}

/// One request as recorded.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Position in the run (0-based), which names the request.
    pub index: usize,
    /// The prompt sent (index into the prompts).
    pub prompt: usize,
    /// When it was sent, Unix ns (client clock).
    pub sent_ns: i64,
    /// When it ended, Unix ns.
    pub end_ns: i64,
    /// The stream as read.
    pub stream: Stream,
    /// Every SSE payload with its arrival time (the raw capture).
    pub events: Vec<(i64, String)>,
    /// How it ended.
    pub ending: Ending,
    /// An error code: the HTTP status, or `connect`, `stream_cut`, `idle_timeout`, `timeout`, `interrupted`.
    pub error_code: Option<String>,
    /// What went wrong, in words.
    pub error: Option<String>,
    /// True when the first send failed on a stale connection and was tried again.
    pub retried: bool,
    /// The W3C trace id sent in `traceparent`: a server with tracing on puts it on its spans.
    pub trace_id: String,
}

/// The ids a request carries to the server, so that its side of the run can be joined with the recording's:
/// `X-Request-Id` (vLLM takes it as its request id and answers `chatcmpl-<id>`) and a W3C `traceparent` (vLLM,
/// SGLang and TensorRT-LLM put its trace id on their spans when tracing is on). No body field is sent: SGLang's
/// `rid` would make TensorRT-LLM refuse the request (its request models forbid unknown fields).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestIds {
    /// The recording's request id (`rec-00001`).
    pub request_id: String,
    /// 32 hex digits, never all zero.
    pub trace_id: String,
}

impl RequestIds {
    /// The ids as the journal's lines carry them.
    pub fn journal(&self) -> super::journal::Ids<'_> {
        super::journal::Ids {
            request_id: &self.request_id,
            trace_id: &self.trace_id,
        }
    }

    /// The ids of request `index` of a run whose ids start from `nonce` (a run's start time: two runs differ).
    pub fn new(nonce: u64, index: usize) -> Self {
        RequestIds {
            request_id: super::request_id(index),
            trace_id: format!("{nonce:016x}{:016x}", index as u64 + 1),
        }
    }

    /// The `traceparent` header: version 00, the trace id, a span id, sampled.
    pub fn traceparent(&self) -> String {
        format!("00-{}-{:016x}-01", self.trace_id, 1u64)
    }
}

/// Phases of a recording, which every request watches: Ctrl-C moves it to `Draining` (no new requests) and, after
/// a grace period, to `Stopped` (streams still open are cut and kept).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Sending.
    Running,
    /// No new requests; streams in flight go on.
    Draining,
    /// Streams in flight end now.
    Stopped,
}

/// Limits on one request.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Longest wait for the next chunk.
    pub idle: Duration,
    /// Longest a whole request may take.
    pub total: Duration,
}

/// Sends one request and reads its stream to the end, whatever happens.
pub async fn run_one(
    client: &reqwest::Client,
    url: &str,
    body: &Value,
    clock: Clock,
    limits: Limits,
    mut phase: watch::Receiver<Phase>,
    (index, prompt, ids, journal, keep_raw): (usize, usize, &RequestIds, Option<&super::journal::Journal>, bool),
) -> Outcome {
    let sent_ns = clock.now_ns();
    let mut out = Outcome {
        index,
        prompt,
        sent_ns,
        end_ns: sent_ns,
        stream: Stream::default(),
        events: Vec::new(),
        ending: Ending::Done,
        error_code: None,
        error: None,
        retried: false,
        trace_id: ids.trace_id.clone(),
    };
    if let Some(j) = journal {
        j.sent(ids.journal(), sent_ns).await;
    }
    let deadline = tokio::time::Instant::now() + limits.total;
    let fail = |out: &mut Outcome, ending: Ending, code: &str, why: String| {
        out.ending = ending;
        out.error_code = Some(code.to_owned());
        out.error = Some(why);
        out.end_ns = clock.now_ns();
    };
    // A pooled connection the server closed while idle fails at once, before the server saw the request: such a
    // send is tried once more on a fresh connection (the send time is the second try's).
    let mut response = None;
    for attempt in 0..2 {
        let r = tokio::select! {
            r = tokio::time::timeout_at(deadline, client
                .post(url)
                .header("x-request-id", &ids.request_id)
                .header("traceparent", ids.traceparent())
                .json(body)
                .send()) => r,
            _ = phase.wait_for(|p| *p == Phase::Stopped) => {
                fail(&mut out, Ending::Interrupted, "interrupted", "stopped before the server answered".to_owned());
                return out;
            }
        };
        let stale = matches!(&r, Ok(Err(e)) if e.is_request() && !e.is_connect() && !e.is_timeout());
        if attempt == 0 && stale {
            out.retried = true;
            out.sent_ns = clock.now_ns();
            continue;
        }
        response = Some(r);
        break;
    }
    let Some(response) = response else {
        fail(
            &mut out,
            Ending::Failed,
            "request",
            "the request could not be sent".to_owned(),
        );
        return out;
    };
    let response = match response {
        Err(_) => {
            fail(
                &mut out,
                Ending::TimedOut,
                "timeout",
                format!("no answer within {:?}", limits.total),
            );
            return out;
        }
        Ok(Err(e)) => {
            let code = if e.is_connect() { "connect" } else { "request" };
            // The whole chain: reqwest's own words hide the cause ("connection closed before message completed"). The
            // URL is said once, as shown (a key in its query or user part stays out of the trace).
            let e = e.without_url();
            let mut why = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                why.push_str(&format!(": {s}"));
                source = s.source();
            }
            fail(
                &mut out,
                Ending::Failed,
                code,
                format!("{}: {why}", super::shown_url(url)),
            );
            return out;
        }
        Ok(Ok(r)) => r,
    };
    let status = response.status();
    if !status.is_success() {
        let text = tokio::time::timeout_at(deadline, response.text())
            .await
            .ok()
            .and_then(Result::ok);
        let snippet: String = text.unwrap_or_default().chars().take(300).collect();
        fail(
            &mut out,
            Ending::Failed,
            status.as_str(),
            format!("HTTP {status}: {}", snippet.trim()),
        );
        return out;
    }
    let mut events = response.bytes_stream().eventsource();
    loop {
        let next = tokio::select! {
            e = tokio::time::timeout(limits.idle, events.next()) => e,
            () = tokio::time::sleep_until(deadline) => {
                fail(&mut out, Ending::TimedOut, "timeout", format!("the stream outlasted {:?}", limits.total));
                break;
            }
            _ = phase.wait_for(|p| *p == Phase::Stopped) => {
                fail(&mut out, Ending::Interrupted, "interrupted", "the recording stopped mid-stream".to_owned());
                break;
            }
        };
        match next {
            Err(_) => {
                fail(
                    &mut out,
                    Ending::TimedOut,
                    "idle_timeout",
                    format!("the server sent nothing for {:?}", limits.idle),
                );
                break;
            }
            Ok(None) => {
                if !out.stream.done {
                    fail(
                        &mut out,
                        Ending::Cut,
                        "stream_cut",
                        "the stream ended before its last chunk".to_owned(),
                    );
                }
                break;
            }
            Ok(Some(Err(e))) => {
                fail(&mut out, Ending::Cut, "stream_cut", format!("the stream broke: {e}"));
                break;
            }
            Ok(Some(Ok(event))) => {
                let at = clock.now_ns();
                if let Some(j) = journal {
                    j.chunk(ids.journal(), out.sent_ns, at, &event.data).await;
                }
                out.stream.push(at, &event.data);
                if keep_raw {
                    out.events.push((at, event.data));
                }
                if out.stream.done {
                    break;
                }
            }
        }
    }
    if out.ending == Ending::Done {
        out.end_ns = out.stream.last_ns.unwrap_or_else(|| clock.now_ns());
    }
    if let Some(j) = journal {
        let ended = super::journal::Ended {
            sent_ns: out.sent_ns,
            end_ns: out.end_ns,
            ending: out.ending,
            error_code: out.error_code.as_deref(),
            error: out.error.as_deref(),
        };
        j.end(ids.journal(), ended).await;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompts::Body;

    #[test]
    fn urls_with_or_without_v1() {
        assert_eq!(Api::Chat.url("http://h:8080"), "http://h:8080/v1/chat/completions");
        assert_eq!(Api::Chat.url("http://h:8080/v1/"), "http://h:8080/v1/chat/completions");
        assert_eq!(Api::Completions.url("http://h/v1"), "http://h/v1/completions");
        assert_eq!(Api::Llamacpp.url("http://h:8080/v1"), "http://h:8080/completion");
    }

    #[test]
    fn bodies_ask_for_logprobs_the_way_each_api_does() {
        let p = Prompt {
            body: Body::Text("Hi".into()),
            max_tokens: Some(7),
            app_id: None,
            user_id: None,
            at_ms: None,
        };
        let s = Sampling {
            model: Some("m".into()),
            max_tokens: 64,
            top_logprobs: 5,
            temperature: Some(0.0),
            seed: None,
            extra: serde_json::from_str(r#"{"logit_bias": {"1": 3}}"#).unwrap(),
        };
        let chat = body(Api::Chat, &p, &s);
        assert_eq!(
            (chat["logprobs"].clone(), chat["top_logprobs"].clone()),
            (json!(true), json!(5))
        );
        assert_eq!(chat["max_tokens"], 7, "the prompt's own limit wins");
        assert_eq!(chat["messages"][0]["content"], "Hi");
        assert_eq!(chat["stream_options"]["include_usage"], true);
        assert_eq!(body(Api::Completions, &p, &s)["logprobs"], 5);
        assert_eq!(chat["logit_bias"]["1"], 3, "extra fields pass through");
        let native = body(Api::Llamacpp, &p, &s);
        assert_eq!(
            (native["n_probs"].clone(), native["n_predict"].clone()),
            (json!(5), json!(7))
        );
        let off = body(
            Api::Chat,
            &p,
            &Sampling {
                top_logprobs: 0,
                ..s.clone()
            },
        );
        assert!(off.get("logprobs").is_none());
    }
}
