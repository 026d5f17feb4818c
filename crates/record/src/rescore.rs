//! `tokenscope rescore`: a recorded answer re-scored by a server. For every position of the answer the server is
//! asked for its own distribution of the next token, given the prompt and the answer before that position, and what
//! it gives the token the recording emitted there becomes the token's reference (`kind = "reference"`).
//!
//! llama.cpp (`llama-server`) has no prompt logprobs, so each position is one request to its native `/completion`:
//! the prompt as token ids (the chat template applied by its `/apply-template`, tokenized by its `/tokenize`, as its
//! chat endpoint does) followed by the answer's first tokens, one token asked for at temperature 0 with `n_probs` of
//! the model's own probabilities before sampling (`tools/server/server-context.cpp`, `populate_token_probs`
//! without `post_sampling_probs`). A `logit_bias` makes the token asked for the recorded one, whose own probability
//! the server then gives too, from the same softmax over the whole vocabulary: known however far down the list it
//! is (a token the list leaves out is not off the distribution for that alone: at temperature 0.8 a real run drew
//! " Poland" at 0.82 %, below the first 20). Each position is computed afresh by default; `cache_prompt` (`--cache-prompt`)
//! lets it reuse the one before's KV cache, one token's forward a position, at the price of figures computed in
//! other batch shapes.

use std::time::Duration;

use serde_json::{Value, json};

use super::client::Api;
use super::prompts::Prompt;
use tokenscope_core::trace::{Flag, NO_STR, Reference, Trace};

/// What the re-scoring asks of the server.
#[derive(Debug, Clone)]
pub struct Options {
    /// The server's base URL (`http://127.0.0.1:8080`).
    pub url: String,
    /// How the recording sent its prompts: chat (the template applied) or a text completion.
    pub api: Api,
    /// Candidates asked for at each position.
    pub top_k: u32,
    /// How long one request may take.
    pub timeout: Duration,
    /// Let each position reuse the server's cache of the one before (one token's work a position, where the
    /// default recomputes the prompt and the answer before it each time). Measured on Gemma 3 270M: reused, the
    /// cache's different batch shapes moved flat positions' figures by up to 0.34 nats and changed the first choice at
    /// 6 of 768 greedy tokens; recomputed, at none.
    pub cache_prompt: bool,
}

/// One request's answer re-scored: a reference per position (`request` the trace's row, `token` unset, `top_text`
/// unset: the first choice's text is beside it, for the trace's texts to take).
#[derive(Debug, Clone, Default)]
pub struct Rescored {
    /// The references, by position, each with its first choice's text.
    pub references: Vec<(Reference, String)>,
    /// The prompt's length as the server tokenized it.
    pub prompt_tokens: usize,
}

/// Why a request could not be re-scored, or the server misbehaved.
#[derive(Debug, thiserror::Error)]
pub enum RescoreError {
    /// The request cannot be re-scored (no token ids, no prompt): the reason, for a note; others go on.
    #[error("{0}")]
    Skipped(String),
    /// The server did not answer as llama.cpp does: the URL and what was wrong; nothing more is asked.
    #[error("{0}")]
    Server(String),
}

/// A client of one server.
pub struct Rescorer {
    runtime: tokio::runtime::Runtime,
    client: reqwest::Client,
    options: Options,
}

impl Rescorer {
    /// A client for `options`.
    ///
    /// # Errors
    /// The runtime or the HTTP client cannot be made.
    pub fn new(options: Options) -> Result<Self, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let client = reqwest::Client::builder()
            .timeout(options.timeout)
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Rescorer {
            runtime,
            client,
            options,
        })
    }

    /// POSTs `body` to `path` and reads the answer as JSON.
    fn post(&self, path: &str, body: &Value) -> Result<Value, RescoreError> {
        let url = format!("{}{path}", self.options.url.trim_end_matches('/'));
        self.runtime.block_on(async {
            let response = self
                .client
                .post(&url)
                .json(body)
                .send()
                .await
                .map_err(|e| RescoreError::Server(format!("{url}: {e}")))?;
            let status = response.status();
            let text = response
                .text()
                .await
                .map_err(|e| RescoreError::Server(format!("{url}: {e}")))?;
            if !status.is_success() {
                let head: String = text.chars().take(300).collect();
                return Err(RescoreError::Server(format!("{url}: HTTP {status}: {head}")));
            }
            serde_json::from_str(&text)
                .map_err(|e| RescoreError::Server(format!("{url}: the answer is not JSON ({e})")))
        })
    }

    /// The prompt's token ids, as the server's chat or completion endpoint would make them.
    fn prompt_ids(&self, prompt: &Prompt) -> Result<Vec<u32>, RescoreError> {
        let text = match self.options.api {
            Api::Chat => {
                let answer = self.post("/apply-template", &json!({ "messages": prompt.body.as_messages() }))?;
                answer
                    .get("prompt")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .ok_or_else(|| {
                        RescoreError::Server(
                            "/apply-template: no \"prompt\" in the answer (is the server llama.cpp's llama-server?)"
                                .to_owned(),
                        )
                    })?
            }
            Api::Completions | Api::Llamacpp => prompt.body.as_text(),
        };
        let answer = self.post(
            "/tokenize",
            &json!({ "content": text, "add_special": true, "parse_special": true }),
        )?;
        ids(answer.get("tokens"))
            .ok_or_else(|| RescoreError::Server("/tokenize: no \"tokens\" list of ids in the answer".to_owned()))
    }

    /// The references of request `r`'s answer: one per token, in order.
    ///
    /// # Errors
    /// [`RescoreError::Skipped`] when the request has no token ids; [`RescoreError::Server`] when the server fails.
    pub fn rescore(
        &self,
        trace: &Trace,
        r: u32,
        prompt: &Prompt,
        mut progress: impl FnMut(usize),
    ) -> Result<Rescored, RescoreError> {
        let rows = trace.tokens_of(r);
        let answer: Vec<u32> = rows
            .clone()
            .map(|t| tokenscope_core::trace::opt_u32(trace.tokens.token_id[t]))
            .collect::<Option<_>>()
            .ok_or_else(|| {
                RescoreError::Skipped(format!(
                    "{}: its tokens have no ids (a recording with --top-logprobs, of a server that streams them, has \
                     them)",
                    trace.request_id(r)
                ))
            })?;
        let mut context = self.prompt_ids(prompt)?;
        let prompt_tokens = context.len();
        let mut references = Vec::with_capacity(answer.len());
        for (i, &emitted) in answer.iter().enumerate() {
            let body = json!({
                "prompt": context,
                "n_predict": 1,
                "n_probs": self.options.top_k,
                "temperature": 0,
                "cache_prompt": self.options.cache_prompt,
                "stream": false,
                // The recorded token made the one sampled, so that its own probability comes back.
                "logit_bias": [[emitted, FORCE_BIAS]],
            });
            let reply = self.post("/completion", &body)?;
            let listed = reply
                .get("completion_probabilities")
                .and_then(|p| p.get(0))
                .and_then(|p| p.get("top_logprobs"))
                .and_then(Value::as_array)
                .ok_or_else(|| {
                    RescoreError::Server(
                        "/completion: no completion_probabilities[0].top_logprobs in the answer (llama-server with \
                         n_probs and without post_sampling_probs gives them)"
                            .to_owned(),
                    )
                })?;
            let candidates: Vec<(u32, String, f64)> = listed
                .iter()
                .filter_map(|c| {
                    let id = u32::try_from(c.get("id")?.as_u64()?).ok()?;
                    let text = c.get("token").and_then(Value::as_str).unwrap_or("").to_owned();
                    let lp = c.get("logprob")?.as_f64().filter(|x| x.is_finite() && *x <= 0.0)?;
                    Some((id, text, lp))
                })
                .collect();
            let at = candidates.iter().position(|c| c.0 == emitted);
            // The sampled token's own probability, when the bias made it the recorded one.
            let own = reply
                .get("completion_probabilities")
                .and_then(|p| p.get(0))
                .filter(|p| p.get("id").and_then(Value::as_u64) == Some(u64::from(emitted)))
                .and_then(|p| p.get("logprob"))
                .and_then(Value::as_f64)
                .filter(|x| x.is_finite() && *x <= 0.0);
            let top = candidates.first();
            let reference = Reference {
                request: r,
                index: u32::try_from(i).unwrap_or(u32::MAX),
                token: tokenscope_core::trace::NULL_U32,
                logprob: own.or_else(|| at.map(|k| candidates[k].2)),
                rank: at.and_then(|k| u32::try_from(k + 1).ok()),
                listed: u32::try_from(candidates.len()).ok(),
                top_token_id: top.map(|c| c.0),
                top_text: NO_STR,
                top_special: top.map(|c| trace.is_special_token(c.0, Flag::Null)),
                top_logprob: top.map(|c| c.2),
            };
            references.push((reference, top.map(|c| c.1.clone()).unwrap_or_default()));
            context.push(emitted);
            progress(i + 1);
        }
        Ok(Rescored {
            references,
            prompt_tokens,
        })
    }
}

/// The logit bias that makes the recorded token the one sampled at temperature 0 (the probabilities reported are
/// the model's own, before any bias).
const FORCE_BIAS: f64 = 1000.0;

/// A JSON list of token ids.
fn ids(v: Option<&Value>) -> Option<Vec<u32>> {
    v?.as_array()?
        .iter()
        .map(|x| x.as_u64().and_then(|n| u32::try_from(n).ok()))
        .collect()
}
