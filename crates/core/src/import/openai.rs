//! The streamed answer of an OpenAI-compatible server, chunk by chunk, turned into tokens: one reader for every
//! place such streams are found (AIPerf's raw export, `tokenscope record`).
//!
//! What servers send differs, and each form is read:
//! - chat chunks: `choices[0].logprobs.content[] = {token, logprob, bytes, top_logprobs[], id?}` (llama.cpp adds
//!   `id`; vLLM writes `"token_id:N"` as the token with `return_tokens_as_token_ids`, and `choices[0].token_ids`
//!   with `return_token_ids`), one or several tokens per chunk;
//! - completions chunks: `choices[0].logprobs = {tokens[], token_logprobs[], top_logprobs[{text: logprob}]}`;
//! - llama.cpp's native `/completion` stream: `{content, tokens[], completion_probabilities[{id, token, logprob,
//!   top_logprobs[]}], stop, stop_type, timings}`;
//! - without logprobs, a chunk's text (`delta.content`, reasoning content, `text`, `content`) is one token: a chunk,
//!   which the caller says.
//!
//! The final chunks carry `usage` (prompt, completion and cached tokens) and, from llama.cpp, `timings`.

use serde_json::Value;

/// One alternative of a token.
#[derive(Debug, Clone, PartialEq)]
pub struct Alternative {
    /// Vocabulary id, when the server says it.
    pub token_id: Option<u32>,
    /// Text.
    pub text: String,
    /// Natural-log probability.
    pub logprob: f64,
}

/// One token (or, without logprobs, one chunk of text) as the client received it.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamToken {
    /// When its chunk arrived, Unix ns.
    pub emitted_ns: i64,
    /// Vocabulary id, when the server says it.
    pub token_id: Option<u32>,
    /// Text.
    pub text: String,
    /// Its logprob, when sent.
    pub logprob: Option<f64>,
    /// Top alternatives, most probable first.
    pub candidates: Vec<Alternative>,
    /// True when this is a chunk of text without per-token detail (no logprobs sent).
    pub is_chunk: bool,
    /// True for an end-of-sequence token the stream did not send but usage counts (added by [`Stream::reconcile`]).
    pub added_eos: bool,
}

/// Everything read from one stream.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stream {
    /// Tokens (or chunks) in order.
    pub tokens: Vec<StreamToken>,
    /// `usage.prompt_tokens`.
    pub prompt_tokens: Option<i64>,
    /// `usage.completion_tokens`.
    pub completion_tokens: Option<i64>,
    /// `usage.prompt_tokens_details.cached_tokens` (or llama.cpp's `timings.cache_n`).
    pub cached_tokens: Option<i64>,
    /// The finish reason (`stop`, `length`, ...); llama.cpp's `stop_type` `eos`/`word` read as `stop`, `limit` as
    /// `length`.
    pub finish_reason: Option<String>,
    /// The model the server named.
    pub model: Option<String>,
    /// The response's `id` (its first chunk's: older TensorRT-LLM gave every chunk a new one).
    pub response_id: Option<String>,
    /// llama.cpp's `timings` of the last chunk that had them.
    pub timings: Option<Value>,
    /// vLLM's per-request `metrics` (with `--enable-per-request-metrics`).
    pub metrics: Option<Value>,
    /// True once `[DONE]` (or llama.cpp's `stop: true`) arrived.
    pub done: bool,
    /// Chunks that were not JSON, with the reason: the caller reports them.
    pub malformed: Vec<String>,
    /// Time of the last chunk, Unix ns.
    pub last_ns: Option<i64>,
}

fn token_id_of(v: Option<&Value>) -> Option<u32> {
    v.and_then(Value::as_u64).and_then(|i| u32::try_from(i).ok())
}

/// A token text, or vLLM's `"token_id:N"` form: (id, text).
fn text_and_id(token: &str) -> (Option<u32>, String) {
    match token.strip_prefix("token_id:").and_then(|n| n.parse().ok()) {
        Some(id) => (Some(id), String::new()),
        None => (None, token.to_owned()),
    }
}

/// A plain probability as a natural log (llama.cpp's `prob` with `post_sampling_probs`, its older `probs[]`);
/// `None` outside 0..=1.
fn ln_of(p: Option<&Value>) -> Option<f64> {
    p.and_then(Value::as_f64)
        .filter(|p| (0.0..=1.0).contains(p))
        .map(f64::ln)
}

/// One `{token, logprob, id?, bytes?}` entry (chat `content[]`, llama.cpp `completion_probabilities[]`), or
/// llama.cpp's plain-probability forms: `{id, token, prob}` (`post_sampling_probs`) and `{tok_str, prob}` (before
/// its OpenAI-style logprobs).
fn entry(v: &Value) -> Option<(Option<u32>, String, Option<f64>)> {
    let token = v.get("token").or_else(|| v.get("tok_str")).and_then(Value::as_str)?;
    let (mut id, text) = text_and_id(token);
    id = token_id_of(v.get("id")).or(id);
    let logprob = v
        .get("logprob")
        .and_then(Value::as_f64)
        .or_else(|| ln_of(v.get("prob")));
    Some((id, text, logprob))
}

fn alternatives(list: Option<&Value>) -> Vec<Alternative> {
    let Some(list) = list else {
        return Vec::new();
    };
    match list {
        // [{token, logprob, id?}, ...]
        Value::Array(items) => items
            .iter()
            .filter_map(|c| {
                let (token_id, text, logprob) = entry(c)?;
                Some(Alternative {
                    token_id,
                    text,
                    logprob: logprob?,
                })
            })
            .collect(),
        // completions: {text: logprob, ...}
        Value::Object(map) => {
            let mut alts: Vec<Alternative> = map
                .iter()
                .filter_map(|(k, v)| {
                    let (token_id, text) = text_and_id(k);
                    Some(Alternative {
                        token_id,
                        text,
                        logprob: v.as_f64()?,
                    })
                })
                .collect();
            alts.sort_by(|a, b| b.logprob.total_cmp(&a.logprob));
            alts
        }
        _ => Vec::new(),
    }
}

impl Stream {
    /// Reads one `data:` payload that arrived at `time_ns`.
    pub fn push(&mut self, time_ns: i64, data: &str) {
        let data = data.trim();
        if data.is_empty() {
            return;
        }
        self.last_ns = Some(time_ns);
        if data == "[DONE]" {
            self.done = true;
            return;
        }
        match serde_json::from_str::<Value>(data) {
            Ok(v) => self.push_json(time_ns, &v),
            Err(e) => self
                .malformed
                .push(format!("a chunk is not JSON ({e}): {}", truncate(data, 80))),
        }
    }

    /// Reads one chunk already parsed (also a whole non-streamed response).
    pub fn push_json(&mut self, time_ns: i64, v: &Value) {
        self.last_ns = Some(time_ns);
        if let Some(model) = v.get("model").and_then(Value::as_str) {
            self.model = Some(model.to_owned());
        }
        if self.response_id.is_none()
            && let Some(id) = v.get("id").and_then(Value::as_str).filter(|id| !id.is_empty())
        {
            self.response_id = Some(id.to_owned());
        }
        if let Some(usage) = v.get("usage").filter(|u| u.is_object()) {
            self.prompt_tokens = usage
                .get("prompt_tokens")
                .and_then(Value::as_i64)
                .or(self.prompt_tokens);
            self.completion_tokens = usage
                .get("completion_tokens")
                .and_then(Value::as_i64)
                .or(self.completion_tokens);
            self.cached_tokens = usage
                .pointer("/prompt_tokens_details/cached_tokens")
                .and_then(Value::as_i64)
                .or(self.cached_tokens);
        }
        if let Some(t) = v.get("timings").filter(|t| t.is_object()) {
            self.timings = Some(t.clone());
            if self.cached_tokens.is_none() {
                self.cached_tokens = t.get("cache_n").and_then(Value::as_i64);
            }
        }
        if let Some(m) = v.get("metrics").filter(|m| m.is_object()) {
            self.metrics = Some(m.clone());
        }
        match v.get("choices").and_then(Value::as_array) {
            Some(choices) => {
                if let Some(choice) = choices.first() {
                    self.push_choice(time_ns, choice);
                }
            }
            None => self.push_native(time_ns, v),
        }
    }

    fn push_token(
        &mut self,
        time_ns: i64,
        id: Option<u32>,
        text: String,
        logprob: Option<f64>,
        alts: Vec<Alternative>,
    ) {
        self.tokens.push(StreamToken {
            emitted_ns: time_ns,
            token_id: id,
            text,
            logprob,
            candidates: alts,
            is_chunk: false,
            added_eos: false,
        });
    }

    fn push_chunk(&mut self, time_ns: i64, text: &str) {
        if text.is_empty() {
            return;
        }
        self.tokens.push(StreamToken {
            emitted_ns: time_ns,
            token_id: None,
            text: text.to_owned(),
            logprob: None,
            candidates: Vec::new(),
            is_chunk: true,
            added_eos: false,
        });
    }

    fn push_choice(&mut self, time_ns: i64, choice: &Value) {
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(reason.to_owned());
        }
        let ids: Vec<u32> = choice
            .get("token_ids")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(|i| token_id_of(Some(i))).collect())
            .unwrap_or_default();
        let before = self.tokens.len();
        let logprobs = choice.get("logprobs").filter(|l| !l.is_null());
        if let Some(content) = logprobs.and_then(|l| l.get("content")).and_then(Value::as_array) {
            // Chat: one entry per token.
            for e in content {
                if let Some((id, text, logprob)) = entry(e) {
                    let alts = alternatives(e.get("top_logprobs"));
                    self.push_token(time_ns, id, text, logprob, alts);
                }
            }
        } else if let Some(tokens) = logprobs.and_then(|l| l.get("tokens")).and_then(Value::as_array) {
            // Completions: parallel arrays.
            let lps = logprobs.and_then(|l| l.get("token_logprobs")).and_then(Value::as_array);
            let tops = logprobs.and_then(|l| l.get("top_logprobs")).and_then(Value::as_array);
            for (i, t) in tokens.iter().enumerate() {
                let (id, text) = text_and_id(t.as_str().unwrap_or_default());
                let logprob = lps.and_then(|l| l.get(i)).and_then(Value::as_f64);
                let alts = alternatives(tops.and_then(|t| t.get(i)));
                self.push_token(time_ns, id, text, logprob, alts);
            }
        } else {
            // No logprobs: the chunk's text is one unit.
            let delta = choice.get("delta");
            let text = delta
                .and_then(|d| d.get("content").and_then(Value::as_str))
                .filter(|s| !s.is_empty())
                .or_else(|| delta.and_then(|d| d.get("reasoning_content").and_then(Value::as_str)))
                .or_else(|| delta.and_then(|d| d.get("reasoning").and_then(Value::as_str)))
                .or_else(|| choice.get("text").and_then(Value::as_str))
                .or_else(|| choice.pointer("/message/content").and_then(Value::as_str))
                .unwrap_or_default()
                .to_owned();
            self.push_chunk(time_ns, &text);
        }
        // vLLM's return_token_ids: the chunk's ids, in order, for the tokens it added.
        if ids.len() == self.tokens.len() - before {
            for (t, id) in self.tokens[before..].iter_mut().zip(ids) {
                t.token_id = t.token_id.or(Some(id));
            }
        }
    }

    /// llama.cpp's native `/completion` stream chunk.
    fn push_native(&mut self, time_ns: i64, v: &Value) {
        if let Some(stop_type) = v.get("stop_type").and_then(Value::as_str) {
            let reason = match stop_type {
                "eos" | "word" => "stop",
                "limit" => "length",
                "none" => "",
                other => other,
            };
            if !reason.is_empty() {
                self.finish_reason = Some(reason.to_owned());
            }
        }
        if v.get("stop").and_then(Value::as_bool) == Some(true) {
            self.done = true;
            self.prompt_tokens = v.get("tokens_evaluated").and_then(Value::as_i64).or(self.prompt_tokens);
            self.completion_tokens = v
                .get("tokens_predicted")
                .and_then(Value::as_i64)
                .or(self.completion_tokens);
        }
        let probs = v
            .get("completion_probabilities")
            .or_else(|| v.get("probs"))
            .and_then(Value::as_array);
        let ids: Vec<u32> = v
            .get("tokens")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(|i| token_id_of(Some(i))).collect())
            .unwrap_or_default();
        if let Some(probs) = probs.filter(|p| !p.is_empty()) {
            for (i, p) in probs.iter().enumerate() {
                if let Some((id, text, logprob)) = entry(p) {
                    let alts = alternatives(p.get("top_logprobs").or_else(|| p.get("top_probs")));
                    self.push_token(time_ns, id.or(ids.get(i).copied()), text, logprob, alts);
                } else if let Some(text) = p.get("content").and_then(Value::as_str) {
                    // llama.cpp before its OpenAI-style logprobs: `{content, probs: [{tok_str, prob}]}`, plain
                    // probabilities; the chosen token's is its own entry's among them, when listed.
                    let alts = alternatives(p.get("probs"));
                    let logprob = alts.iter().find(|a| a.text == text).map(|a| a.logprob);
                    self.push_token(time_ns, ids.get(i).copied(), text.to_owned(), logprob, alts);
                }
            }
        } else {
            let text = v.get("content").and_then(Value::as_str).unwrap_or_default();
            if let [id] = ids[..] {
                self.push_token(time_ns, Some(id), text.to_owned(), None, Vec::new());
            } else {
                self.push_chunk(time_ns, text);
            }
        }
    }

    /// Makes the token records agree with usage where a server leaves the end-of-sequence token out: a stream that
    /// stopped (`finish_reason = stop`), sent per-token detail, and counts one token more than it streamed gets that
    /// token added, at the time of the last chunk, with `eos_id` when known and no probability. True when added.
    pub fn reconcile(&mut self, eos_id: Option<u32>) -> bool {
        // Per-token detail on some tokens at least: the server streams a token a chunk (llama.cpp under speculative
        // decoding sends the verify steps' tokens without logprobs, one a chunk all the same).
        let detailed = self.tokens.iter().any(|t| !t.is_chunk);
        let streamed = i64::try_from(self.tokens.len()).unwrap_or(i64::MAX);
        let stopped = self.finish_reason.as_deref() == Some("stop");
        if detailed && stopped && self.completion_tokens == Some(streamed + 1) {
            let at = self.last_ns.or(self.tokens.last().map(|t| t.emitted_ns)).unwrap_or(0);
            self.tokens.push(StreamToken {
                emitted_ns: at,
                token_id: eos_id,
                text: String::new(),
                logprob: None,
                candidates: Vec::new(),
                is_chunk: false,
                added_eos: true,
            });
            return true;
        }
        false
    }

    /// The id of the token a stream ended on when it looks like an end-of-sequence token the server did not name:
    /// the stream stopped (`finish_reason = stop`) on a token with per-token detail and empty text. Servers without
    /// llama.cpp's `/props` (vLLM, SGLang, TGI, a proxy) stream their EOS so from `/v1/completions`.
    pub fn unnamed_eos(&self) -> Option<u32> {
        let last = self.tokens.last()?;
        let detailed = last.logprob.is_some() || last.token_id.is_some();
        (self.finish_reason.as_deref() == Some("stop")
            && detailed
            && !last.is_chunk
            && !last.added_eos
            && last.text.is_empty())
        .then_some(last.token_id)
        .flatten()
    }

    /// True when the stream carried per-token logprobs.
    pub fn has_logprobs(&self) -> bool {
        self.tokens.iter().any(|t| t.logprob.is_some())
    }
}

fn truncate(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ending {
    /// The stream ended as it should (`[DONE]`, or llama.cpp's `stop`).
    Done,
    /// The server could not be reached, or answered with an HTTP error.
    Failed,
    /// The stream broke before its end.
    Cut,
    /// The server stopped sending for longer than the idle timeout, or the request outlasted its timeout.
    TimedOut,
    /// Ctrl-C: the recording stopped before the stream ended.
    Interrupted,
}

/// What a client knew of one request besides its stream.
#[derive(Debug, Clone, Default)]
pub struct Exchange<'a> {
    /// The request's id in the trace.
    pub id: &'a str,
    /// When it was sent, Unix ns.
    pub sent_ns: i64,
    /// When it ended, Unix ns.
    pub end_ns: i64,
    /// How it ended.
    pub ending: Option<Ending>,
    /// HTTP status or what failed (`connect`, `stream_cut`, `idle_timeout`, `timeout`, `interrupted`).
    pub error_code: Option<&'a str>,
    /// The model.
    pub model: Option<&'a str>,
    /// Attribution labels.
    pub app_id: Option<&'a str>,
    /// Attribution labels.
    pub user_id: Option<&'a str>,
    /// The output limit asked for.
    pub max_tokens: Option<i64>,
    /// The temperature asked for.
    pub temperature: Option<f64>,
    /// The W3C trace id the request carried.
    pub trace_id: Option<&'a str>,
    /// A hash of the prompt sent.
    pub prompt_hash: Option<&'a str>,
    /// Still streaming (a live view's snapshot): no end, status or finish reason yet, and usage not reconciled.
    pub in_flight: bool,
}

/// Adds one streamed request (its request record and its tokens), reconciling a left-out EOS against usage when
/// the stream ended as it should; true when an EOS was added.
pub fn add_exchange(
    stream: &mut Stream,
    x: &Exchange<'_>,
    eos_ids: &[u32],
    sink: &mut super::Sink<'_>,
    at: u64,
) -> bool {
    use super::{ok, record, text};
    use crate::ingest::raw::Val;
    let ending = x.ending.unwrap_or(Ending::Done);
    let added = ending == Ending::Done && !x.in_flight && stream.reconcile(eos_ids.first().copied());
    let mut r = record("request");
    r.request_id = text(x.id);
    r.trace_id = x.trace_id.and_then(text);
    r.prompt_hash = x.prompt_hash.and_then(text);
    r.server_request_id = stream.response_id.as_deref().and_then(text);
    r.arrival_ns = ok(x.sent_ns);
    r.first_token_ns = stream.tokens.first().map(|t| Val::Ok(t.emitted_ns));
    r.finished_ns = (!x.in_flight).then_some(Val::Ok(x.end_ns));
    r.input_tokens = stream.prompt_tokens.map(Val::Ok);
    r.cached_tokens = stream.cached_tokens.map(Val::Ok);
    r.output_tokens = stream.completion_tokens.map(Val::Ok);
    r.model = x.model.or(stream.model.as_deref()).and_then(text);
    r.app_id = x.app_id.and_then(text);
    r.user_id = x.user_id.and_then(text);
    r.max_tokens = x.max_tokens.map(Val::Ok);
    r.temperature = x.temperature.map(Val::Ok);
    r.finish_reason = match ending {
        _ if x.in_flight => None,
        Ending::Done => stream.finish_reason.as_deref().and_then(text),
        Ending::Interrupted => text("abort"),
        _ => text("error"),
    };
    r.status = match ending {
        _ if x.in_flight => None,
        Ending::Done => text("ok"),
        Ending::TimedOut => text("timeout"),
        _ if x.error_code == Some("429") => text("rate_limited"),
        _ => text("error"),
    };
    r.error_code = x.error_code.and_then(text);
    // The server's own timings, when it sends them: llama.cpp's `timings` (prompt processing, generation), vLLM's
    // per-request `metrics` (queue, TTFT, generation), all in ms.
    let ms = |v: Option<&Value>, key: &str| {
        v.and_then(|m| m.get(key))
            .and_then(Value::as_f64)
            .and_then(super::ns_from_ms)
    };
    let (timings, metrics) = (stream.timings.as_ref(), stream.metrics.as_ref());
    r.server_queue_ns = ms(metrics, "queue_time_ms").map(Val::Ok);
    r.server_ttft_ns = ms(metrics, "time_to_first_token_ms")
        .or_else(|| ms(timings, "prompt_ms"))
        .map(Val::Ok);
    r.server_decode_ns = ms(metrics, "generation_time_ms")
        .or_else(|| ms(timings, "predicted_ms"))
        .map(Val::Ok);
    // Speculative decoding, where the server says it per request: llama.cpp's `timings.draft_n` and
    // `draft_n_accepted` (tools/server/server-common.cpp), vLLM's `metrics.speculative_decoding` with
    // `--per-request-spec-decode-metrics` (`num_draft_tokens`, `num_accepted_draft_tokens`).
    let count = |v: Option<&Value>, key: &str| v.and_then(|m| m.get(key)).and_then(Value::as_i64).filter(|n| *n >= 0);
    let vllm_spec = metrics.and_then(|m| m.get("speculative_decoding"));
    r.spec_drafted_tokens = count(vllm_spec, "num_draft_tokens")
        .or_else(|| count(timings, "draft_n"))
        .map(Val::Ok);
    r.spec_accepted_tokens = count(vllm_spec, "num_accepted_draft_tokens")
        .or_else(|| count(timings, "draft_n_accepted"))
        .map(Val::Ok);
    sink.add(&r, at);
    for m in &stream.malformed {
        sink.reject(
            at,
            crate::trace::report::Problem::Malformed,
            Some("stream"),
            format!("{}: {m}", x.id),
        );
    }
    add_tokens(stream, x.id, eos_ids, sink, at);
    added
}

/// Adds the stream's tokens as token records of `request_id`, their candidates with them; `eos_ids` mark the
/// special ones (an added end-of-sequence token is special whatever its id).
pub fn add_tokens(stream: &Stream, request_id: &str, eos_ids: &[u32], sink: &mut super::Sink<'_>, at: u64) {
    use crate::ingest::raw::{RawCandidate, Val};
    for (index, t) in stream.tokens.iter().enumerate() {
        let mut r = super::record("token");
        r.request_id = super::text(request_id.to_owned());
        r.index = super::ok(i64::try_from(index).unwrap_or(i64::MAX));
        r.emitted_ns = super::ok(t.emitted_ns);
        r.token_id = t.token_id.map(|id| Val::Ok(i64::from(id)));
        if !t.is_chunk || !t.text.is_empty() {
            r.text = super::text(t.text.as_str());
        }
        let special = t.added_eos || t.token_id.is_some_and(|id| eos_ids.contains(&id));
        if special {
            r.special = super::ok(true);
        }
        r.logprob = t.logprob.map(Val::Ok);
        if !t.candidates.is_empty() {
            r.candidates = super::ok(
                t.candidates
                    .iter()
                    .map(|c| RawCandidate {
                        token_id: c.token_id.map(|id| Val::Ok(i64::from(id))),
                        text: super::text(c.text.as_str()),
                        logprob: super::ok(c.logprob),
                        special: c.token_id.filter(|id| eos_ids.contains(id)).map(|_| Val::Ok(true)),
                    })
                    .collect(),
            );
        }
        sink.add(&r, at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_that_stops_on_an_empty_token_names_its_eos() {
        let chunk = |id: u32, text: &str| {
            format!(
                r#"{{"id":"cmpl-1","choices":[{{"text":"{text}","token_ids":[{id}],"logprobs":{{"tokens":["{text}"],"token_logprobs":[-0.5],"top_logprobs":[{{"{text}":-0.5}}]}}}}]}}"#
            )
        };
        let mut s = Stream::default();
        s.push(1, &chunk(42, "Hi"));
        s.push(2, &chunk(2, ""));
        s.push(3, r#"{"choices":[{"text":"","finish_reason":"stop"}]}"#);
        s.push(4, "[DONE]");
        assert_eq!(s.tokens.len(), 2);
        assert_eq!(s.tokens[1].text, "");
        assert_eq!(s.response_id.as_deref(), Some("cmpl-1"));
        assert_eq!(s.unnamed_eos(), Some(2));
        // The same stream stopped by its length limit: an empty last token is not an EOS.
        s.finish_reason = Some("length".to_owned());
        assert_eq!(s.unnamed_eos(), None);
    }

    #[test]
    fn chat_chunks_with_logprobs_and_ids() {
        let mut s = Stream::default();
        s.push(
            1,
            r#"{"choices":[{"delta":{"role":"assistant","content":""},"logprobs":null}]}"#,
        );
        s.push(
            2,
            r#"{"choices":[{"delta":{"content":"Hi"},"logprobs":{"content":[{"id":42,"token":"Hi","logprob":-0.5,"top_logprobs":[{"id":42,"token":"Hi","logprob":-0.5},{"id":7,"token":"Yo","logprob":-1.25}]}]}}]}"#,
        );
        s.push(3, r#"{"choices":[{"delta":{},"finish_reason":"stop"}]}"#);
        s.push(4, r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2}}"#);
        s.push(5, "[DONE]");
        assert_eq!(s.tokens.len(), 1, "the role chunk is no token");
        let t = &s.tokens[0];
        assert_eq!(
            (t.emitted_ns, t.token_id, t.text.as_str(), t.logprob),
            (2, Some(42), "Hi", Some(-0.5))
        );
        assert_eq!(
            t.candidates[1],
            Alternative {
                token_id: Some(7),
                text: "Yo".into(),
                logprob: -1.25
            }
        );
        assert!(s.done);
        // Usage counts 2, one streamed, the stream stopped: the EOS is added at the last chunk's time.
        assert!(s.reconcile(Some(1)));
        assert_eq!(s.tokens[1].token_id, Some(1));
        assert_eq!(s.tokens[1].emitted_ns, 5);
        assert!(s.tokens[1].added_eos && s.tokens[1].logprob.is_none());
    }

    #[test]
    fn completions_logprobs_and_vllm_token_ids() {
        let mut s = Stream::default();
        s.push(
            10,
            r#"{"choices":[{"text":" a b","logprobs":{"tokens":["token_id:5","token_id:6"],"token_logprobs":[-0.1,-0.2],"top_logprobs":[{"token_id:5":-0.1,"token_id:9":-3.0},null]}}]}"#,
        );
        assert_eq!(s.tokens.len(), 2);
        assert_eq!((s.tokens[0].token_id, s.tokens[1].token_id), (Some(5), Some(6)));
        assert_eq!(s.tokens[0].candidates.len(), 2);
        assert_eq!(s.tokens[0].candidates[1].token_id, Some(9));
        assert!(s.tokens[1].candidates.is_empty());
    }

    #[test]
    fn llamacpp_native_stream() {
        let mut s = Stream::default();
        s.push(
            1,
            r#"{"content":"Hello","tokens":[9259],"stop":false,"completion_probabilities":[{"id":9259,"token":"Hello","logprob":-0.3,"top_logprobs":[{"id":9259,"token":"Hello","logprob":-0.3}]}]}"#,
        );
        s.push(
            2,
            r#"{"content":"","tokens":[1],"stop":false,"completion_probabilities":[{"id":1,"token":"","logprob":-0.01,"top_logprobs":[]}]}"#,
        );
        s.push(3, r#"{"content":"","stop":true,"stop_type":"eos","tokens_predicted":2,"tokens_evaluated":4,"timings":{"prompt_n":4,"predicted_n":2}}"#);
        assert_eq!(
            s.tokens.iter().map(|t| t.token_id).collect::<Vec<_>>(),
            [Some(9259), Some(1)]
        );
        assert_eq!(s.finish_reason.as_deref(), Some("stop"));
        assert_eq!((s.prompt_tokens, s.completion_tokens), (Some(4), Some(2)));
        assert!(s.done && s.timings.is_some());
        assert!(!s.reconcile(Some(1)), "the EOS was sent: nothing to add");
    }

    #[test]
    fn chunks_without_logprobs_are_not_reconciled() {
        let mut s = Stream::default();
        s.push(1, r#"{"choices":[{"delta":{"content":"Sure"}}]}"#);
        s.push(
            2,
            r#"{"choices":[{"delta":{"content":" thing."},"finish_reason":"stop"}]}"#,
        );
        s.push(3, r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":3}}"#);
        s.push(4, "not json");
        assert_eq!(s.tokens.len(), 2);
        assert!(s.tokens.iter().all(|t| t.is_chunk));
        assert!(!s.reconcile(None));
        assert_eq!(s.malformed.len(), 1);
    }
}
