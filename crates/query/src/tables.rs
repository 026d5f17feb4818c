//! The trace's tables as polars frames: `requests`, `tokens`, `steps`, `stages`, `transfers`, `candidates` and
//! `samples`, each column declared once with its type and meaning (`docs/QUERY.md` is checked against these declarations).
//!
//! A table is built with only the columns a query names: a `SELECT count(*) FROM tokens` over ten million tokens does
//! not copy their texts. Times are kept as the trace writes them (ns since the Unix epoch, `*_ns`) and also as seconds
//! since the trace's first arrival (`*_s`), which is what "the last ten minutes" needs; latencies are in ms.

use std::sync::OnceLock;

use polars::prelude::*;
use tokenscope_core::analysis::metrics::{RequestMetrics, request_metrics};
use tokenscope_core::trace::{Nullable, StageSpan, Trace, opt_f64, opt_i64, opt_u8, opt_u32};

/// A table of the trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Table {
    /// One row per request, with its latency figures.
    Requests,
    /// One row per generated token.
    Tokens,
    /// One row per engine step (the format's iterations).
    Steps,
    /// One row per stage span of a request, derived ones included (what the waterfall draws).
    Stages,
    /// One row per KV-cache transfer between instances (disaggregated serving).
    Transfers,
    /// One row per alternative of a token (top-k), when the trace's candidates are in memory.
    Candidates,
    /// One row per reading of an engine's counters (a server log's stats line).
    Samples,
}

impl Table {
    /// Every table.
    pub const ALL: [Table; 7] = [
        Table::Requests,
        Table::Tokens,
        Table::Steps,
        Table::Stages,
        Table::Transfers,
        Table::Candidates,
        Table::Samples,
    ];

    /// The table's name in SQL.
    pub fn name(self) -> &'static str {
        match self {
            Table::Requests => "requests",
            Table::Tokens => "tokens",
            Table::Steps => "steps",
            Table::Stages => "stages",
            Table::Transfers => "transfers",
            Table::Candidates => "candidates",
            Table::Samples => "samples",
        }
    }

    /// What one row is.
    pub fn about(self) -> &'static str {
        match self {
            Table::Requests => "one row per request, with its latency figures",
            Table::Tokens => "one row per generated token",
            Table::Steps => "one row per engine step (the format's iterations)",
            Table::Stages => "one row per stage span of a request, derived spans included (what the waterfall draws)",
            Table::Transfers => {
                "one row per KV-cache transfer of a request from the instance that prefilled it to the one that \
                 decoded it (disaggregated serving)"
            }
            Table::Candidates => "one row per alternative (top-k candidate) of a token",
            Table::Samples => "one row per reading of an engine's counters (a server log's periodic stats line)",
        }
    }

    /// The table's columns.
    pub fn columns(self) -> &'static [Col] {
        match self {
            Table::Requests => REQUESTS,
            Table::Tokens => TOKENS,
            Table::Steps => STEPS,
            Table::Stages => STAGES,
            Table::Transfers => TRANSFERS,
            Table::Candidates => CANDIDATES,
            Table::Samples => SAMPLES,
        }
    }

    /// The column called `name`.
    pub fn column(self, name: &str) -> Option<&'static Col> {
        self.columns().iter().find(|c| c.name == name)
    }
}

/// The tables and their columns as the Markdown of `docs/QUERY.md` (a test keeps the two equal).
pub fn markdown() -> String {
    let mut out = String::new();
    for t in Table::ALL {
        out.push_str(&format!(
            "### `{}`\n\n{}.\n\n| column | type | meaning |\n|---|---|---|\n",
            t.name(),
            capitalised(t.about())
        ));
        for c in t.columns() {
            out.push_str(&format!("| `{}` | {} | {} |\n", c.name, c.ty, c.about));
        }
        out.push('\n');
    }
    out
}

fn capitalised(s: &str) -> String {
    let mut chars = s.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// One column: its name, SQL type and meaning, and how it is built from the trace.
pub struct Col {
    /// Name in SQL.
    pub name: &'static str,
    /// Type, as `docs/QUERY.md` writes it.
    pub ty: &'static str,
    /// Meaning.
    pub about: &'static str,
    build: fn(&Source<'_>) -> Series,
}

impl std::fmt::Debug for Col {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Col").field("name", &self.name).finish_non_exhaustive()
    }
}

/// The trace a table is built from, with what several columns share, computed once.
pub struct Source<'a> {
    trace: &'a Trace,
    start_ns: i64,
    metrics: OnceLock<Vec<RequestMetrics>>,
    stages: OnceLock<Vec<(u32, StageSpan)>>,
    /// The request row of every token (tokens are sorted by request).
    token_request: OnceLock<Vec<u32>>,
    /// The token row of every candidate.
    candidate_token: OnceLock<Vec<u32>>,
}

impl<'a> Source<'a> {
    /// A source over `trace`.
    pub fn new(trace: &'a Trace) -> Self {
        Source {
            trace,
            start_ns: trace.start_ns(),
            metrics: OnceLock::new(),
            stages: OnceLock::new(),
            token_request: OnceLock::new(),
            candidate_token: OnceLock::new(),
        }
    }

    fn metrics(&self) -> &[RequestMetrics] {
        self.metrics.get_or_init(|| {
            (0..self.trace.request_count())
                .map(|r| request_metrics(self.trace, row_u32(r)))
                .collect()
        })
    }

    fn stages(&self) -> &[(u32, StageSpan)] {
        self.stages.get_or_init(|| {
            (0..self.trace.request_count())
                .flat_map(|r| {
                    let r = row_u32(r);
                    self.trace.stages_of(r).into_iter().map(move |s| (r, s))
                })
                .collect()
        })
    }

    fn token_request(&self) -> &[u32] {
        self.token_request.get_or_init(|| {
            let mut out = Vec::with_capacity(self.trace.token_count());
            for r in 0..self.trace.request_count() {
                let r = row_u32(r);
                out.extend(std::iter::repeat_n(r, self.trace.tokens_of(r).len()));
            }
            out
        })
    }

    fn candidate_token(&self) -> &[u32] {
        self.candidate_token.get_or_init(|| {
            let mut out = Vec::with_capacity(self.trace.candidates.len());
            for t in 0..self.trace.tokens.len() {
                out.extend(std::iter::repeat_n(row_u32(t), self.trace.candidates_of(t).len()));
            }
            out
        })
    }

    /// Seconds since the trace's start.
    #[expect(clippy::cast_precision_loss, reason = "ns offsets within a trace are far below 2^53")]
    fn seconds(&self, ns: i64) -> f64 {
        (ns - self.start_ns) as f64 / 1e9
    }

    /// Builds `table` with the columns `wanted` says yes to (at least one, so the frame has its height).
    pub fn frame(&self, table: Table, wanted: impl Fn(&str) -> bool) -> PolarsResult<DataFrame> {
        let cols = table.columns();
        let mut chosen: Vec<&Col> = cols.iter().filter(|c| wanted(c.name)).collect();
        if chosen.is_empty() {
            chosen.extend(cols.first());
        }
        let columns: Vec<Column> = chosen.iter().map(|c| (c.build)(self).into_column()).collect();
        DataFrame::new_infer_height(columns)
    }
}

#[expect(clippy::cast_possible_truncation, reason = "rows of a trace are u32 by construction")]
fn row_u32(i: usize) -> u32 {
    i as u32
}

fn ms(ns: i64) -> f64 {
    tokenscope_core::analysis::metrics::ms(ns)
}

/// A label column (ids in `Trace::labels`) as strings, null where absent.
fn labels(s: &Source<'_>, name: &str, ids: &[u32]) -> Series {
    let v: Vec<Option<&str>> = ids.iter().map(|&id| s.trace.label(id)).collect();
    Series::new(name.into(), v)
}

fn texts(s: &Source<'_>, name: &str, ids: &[u32]) -> Series {
    let v: Vec<Option<&str>> = ids.iter().map(|&id| s.trace.texts.get(id)).collect();
    Series::new(name.into(), v)
}

fn request_ids(s: &Source<'_>, name: &str, rows: impl Iterator<Item = u32>) -> Series {
    let v: Vec<&str> = rows.map(|r| s.trace.request_id(r)).collect();
    Series::new(name.into(), v)
}

macro_rules! col {
    ($name:literal, $ty:literal, $about:literal, $build:expr) => {
        Col {
            name: $name,
            ty: $ty,
            about: $about,
            build: $build,
        }
    };
}

mod candidates;
mod samples;
mod spans;

use candidates::CANDIDATES;
use samples::SAMPLES;
use spans::{STAGES, TRANSFERS};

fn opt_ns_ms(v: &Nullable<i64>) -> Vec<Option<f64>> {
    v.iter().map(|x| x.map(ms)).collect()
}

static REQUESTS: &[Col] = &[
    col!("request_id", "str", "the request's id", |s| {
        request_ids(s, "request_id", 0..row_u32(s.trace.request_count()))
    }),
    col!("source", "str", "engine instance", |s| labels(
        s,
        "source",
        &s.trace.requests.source
    )),
    col!("model", "str", "model label", |s| labels(
        s,
        "model",
        &s.trace.requests.model
    )),
    col!("app_id", "str", "application label", |s| labels(
        s,
        "app_id",
        &s.trace.requests.app_id
    )),
    col!("user_id", "str", "user label", |s| labels(
        s,
        "user_id",
        &s.trace.requests.user_id
    )),
    col!("trace_id", "str", "W3C trace id", |s| labels(
        s,
        "trace_id",
        &s.trace.requests.trace_id
    )),
    col!(
        "arrival_ns",
        "i64",
        "when the engine received it (ns since the Unix epoch)",
        |s| { Series::new("arrival_ns".into(), &s.trace.requests.arrival_ns) }
    ),
    col!(
        "arrival_s",
        "f64",
        "arrival, seconds since the trace's first arrival",
        |s| {
            let v: Vec<f64> = s.trace.requests.arrival_ns.iter().map(|&t| s.seconds(t)).collect();
            Series::new("arrival_s".into(), v)
        }
    ),
    col!("scheduled_ns", "i64", "end of queueing", |s| {
        Series::new("scheduled_ns".into(), s.trace.requests.scheduled_ns.to_options())
    }),
    col!(
        "first_token_ns",
        "i64",
        "first output token (the record's, else token 0's time)",
        |s| {
            let v: Vec<Option<i64>> = (0..row_u32(s.trace.request_count()))
                .map(|r| s.trace.first_token_ns(r))
                .collect();
            Series::new("first_token_ns".into(), v)
        }
    ),
    col!(
        "finished_ns",
        "i64",
        "finish (the record's, else the last token's time)",
        |s| {
            let v: Vec<Option<i64>> = (0..row_u32(s.trace.request_count()))
                .map(|r| s.trace.finish_ns(r))
                .collect();
            Series::new("finished_ns".into(), v)
        }
    ),
    col!("queue_ms", "f64", "scheduled − arrival", |s| {
        let v: Vec<Option<f64>> = s.metrics().iter().map(|m| m.queue_ns.map(ms)).collect();
        Series::new("queue_ms".into(), v)
    }),
    col!("ttft_ms", "f64", "time to first token: first token − arrival", |s| {
        let v: Vec<Option<f64>> = s.metrics().iter().map(|m| m.ttft_ns.map(ms)).collect();
        Series::new("ttft_ms".into(), v)
    }),
    col!(
        "tpot_ms",
        "f64",
        "time per output token: (E2E − TTFT) / (output tokens − 1); null below 2 tokens",
        |s| {
            let v: Vec<Option<f64>> = s.metrics().iter().map(|m| m.tpot_ns.map(|t| t / 1e6)).collect();
            Series::new("tpot_ms".into(), v)
        }
    ),
    col!("e2e_ms", "f64", "end to end: finish − arrival", |s| {
        let v: Vec<Option<f64>> = s.metrics().iter().map(|m| m.e2e_ns.map(ms)).collect();
        Series::new("e2e_ms".into(), v)
    }),
    col!("input_tokens", "u32", "prompt tokens", |s| {
        Series::new("input_tokens".into(), s.trace.requests.input_tokens.to_options())
    }),
    col!(
        "cached_tokens",
        "u32",
        "prompt tokens served from the prefix cache",
        |s| { Series::new("cached_tokens".into(), s.trace.requests.cached_tokens.to_options()) }
    ),
    col!(
        "context_tokens",
        "u32",
        "prompt tokens that are conversation history",
        |s| { Series::new("context_tokens".into(), s.trace.requests.context_tokens.to_options()) }
    ),
    col!(
        "output_tokens",
        "u32",
        "generated tokens (the record's usage, else its token records)",
        |s| {
            let v: Vec<u32> = s.metrics().iter().map(|m| m.output_tokens).collect();
            Series::new("output_tokens".into(), v)
        }
    ),
    col!("finish_reason", "str", "stop, length, abort, error", |s| {
        labels(s, "finish_reason", &s.trace.requests.finish_reason)
    }),
    col!("status", "str", "ok, timeout, rate_limited, error", |s| labels(
        s,
        "status",
        &s.trace.requests.status
    )),
    col!("error_code", "str", "the engine's error code", |s| {
        labels(s, "error_code", &s.trace.requests.error_code)
    }),
    col!("temperature", "f64", "sampling temperature", |s| {
        Series::new("temperature".into(), s.trace.requests.temperature.to_options())
    }),
    col!("top_p", "f64", "nucleus sampling threshold", |s| Series::new(
        "top_p".into(),
        s.trace.requests.top_p.to_options()
    )),
    col!("top_k", "i64", "top-k sampling", |s| Series::new(
        "top_k".into(),
        s.trace.requests.top_k.to_options()
    )),
    col!("max_tokens", "i64", "output limit", |s| Series::new(
        "max_tokens".into(),
        s.trace.requests.max_tokens.to_options()
    )),
    col!("seed", "i64", "sampling seed", |s| Series::new(
        "seed".into(),
        s.trace.requests.seed.to_options()
    )),
    col!("num_preemptions", "u32", "times the request was preempted", |s| {
        Series::new("num_preemptions".into(), s.trace.requests.num_preemptions.to_options())
    }),
    col!("prompt_hash", "str", "a hash of the prompt", |s| {
        labels(s, "prompt_hash", &s.trace.requests.prompt_hash)
    }),
    col!(
        "server_queue_ms",
        "f64",
        "the server's own queue time, when it reports one",
        |s| { Series::new("server_queue_ms".into(), opt_ns_ms(&s.trace.requests.server_queue_ns)) }
    ),
    col!("server_ttft_ms", "f64", "the server's own time to first token", |s| {
        Series::new("server_ttft_ms".into(), opt_ns_ms(&s.trace.requests.server_ttft_ns))
    }),
    col!(
        "server_decode_ms",
        "f64",
        "the server's own generation time after the first token",
        |s| { Series::new("server_decode_ms".into(), opt_ns_ms(&s.trace.requests.server_decode_ns)) }
    ),
    col!(
        "sent_ns",
        "i64",
        "a joined trace: when the client sent it (arrival_ns is then the server's, on the client's clock)",
        |s| Series::new("sent_ns".into(), s.trace.requests.sent_ns.to_options())
    ),
    col!(
        "client_ttft_ms",
        "f64",
        "a joined trace: the client's time to first token, from the send to the first token received",
        |s| {
            let t = s.trace;
            let v: Vec<Option<f64>> = (0..t.request_count())
                .map(|r| {
                    let sent = t.requests.sent_ns.at(r)?;
                    let k = t.tokens_of(u32::try_from(r).ok()?).next()?;
                    opt_i64(t.tokens.received_ns[k]).map(|f| ms(f - sent))
                })
                .collect();
            Series::new("client_ttft_ms".into(), v)
        }
    ),
    col!(
        "server_request_id",
        "str",
        "the id the server answered with (the response's id), in a recording",
        |s| labels(s, "server_request_id", &s.trace.requests.server_request_id)
    ),
    col!(
        "decode_source",
        "str",
        "disaggregated serving: the instance that decoded it, when not `source` (which then prefilled it)",
        |s| labels(s, "decode_source", &s.trace.requests.decode_source)
    ),
    col!(
        "spec_drafted_tokens",
        "u32",
        "speculative decoding: draft tokens proposed for the request",
        |s| Series::new(
            "spec_drafted_tokens".into(),
            s.trace.requests.spec_drafted_tokens.to_options()
        )
    ),
    col!(
        "spec_accepted_tokens",
        "u32",
        "speculative decoding: of those, the ones accepted",
        |s| Series::new(
            "spec_accepted_tokens".into(),
            s.trace.requests.spec_accepted_tokens.to_options()
        )
    ),
];

static TOKENS: &[Col] = &[
    col!("request_id", "str", "the request that generated it", |s| {
        request_ids(s, "request_id", s.token_request().iter().copied())
    }),
    col!("index", "u32", "0-based position in the output", |s| Series::new(
        "index".into(),
        &s.trace.tokens.index
    )),
    col!(
        "emitted_ns",
        "i64",
        "when the engine produced it (ns since the Unix epoch)",
        |s| { Series::new("emitted_ns".into(), &s.trace.tokens.emitted_ns) }
    ),
    col!(
        "emitted_s",
        "f64",
        "emitted, seconds since the trace's first arrival",
        |s| {
            let v: Vec<f64> = s.trace.tokens.emitted_ns.iter().map(|&t| s.seconds(t)).collect();
            Series::new("emitted_s".into(), v)
        }
    ),
    col!(
        "itl_ms",
        "f64",
        "inter-token latency, on the first token of each emission (the tokens of one request that came out \
         together: one step's, or under 1 ms apart): emitted − the previous token's emitted; null for index 0, after \
         an index gap and for the other tokens of an emission (docs/SPECULATIVE.md)",
        |s| {
            let t = &s.trace.tokens;
            let req = s.token_request();
            let v: Vec<Option<f64>> = (0..t.len())
                .map(|i| {
                    (i > 0
                        && req[i - 1] == req[i]
                        && t.index[i] == t.index[i - 1] + 1
                        && !tokenscope_core::trace::emission::same_emission(
                            t.iteration[i - 1],
                            t.emitted_ns[i - 1],
                            t.iteration[i],
                            t.emitted_ns[i],
                        ))
                    .then(|| ms(t.emitted_ns[i] - t.emitted_ns[i - 1]))
                })
                .collect();
            Series::new("itl_ms".into(), v)
        }
    ),
    col!(
        "emission",
        "u32",
        "0-based count of the request's emissions before the token's own: tokens of one emission share it",
        |s| {
            let t = &s.trace.tokens;
            let req = s.token_request();
            let mut n = 0u32;
            let v: Vec<u32> = (0..t.len())
                .map(|i| {
                    if i == 0 || req[i - 1] != req[i] {
                        n = 0;
                    } else if t.index[i] != t.index[i - 1] + 1
                        || !tokenscope_core::trace::emission::same_emission(
                            t.iteration[i - 1],
                            t.emitted_ns[i - 1],
                            t.iteration[i],
                            t.emitted_ns[i],
                        )
                    {
                        n += 1;
                    }
                    n
                })
                .collect();
            Series::new("emission".into(), v)
        }
    ),
    col!(
        "spec",
        "str",
        "speculative decoding: draft (an accepted draft), bonus (the target's own token ending a verify step), \
         plain (a step that verified nothing); null where the source does not say",
        |s| {
            let v: Vec<Option<&str>> = s.trace.tokens.spec.iter().map(|r| r.name()).collect();
            Series::new("spec".into(), v)
        }
    ),
    col!(
        "spec_drafted",
        "u32",
        "speculative decoding, on a verify step's first token of the request: the drafts the step proposed for it",
        |s| {
            let v: Vec<Option<u32>> = s
                .trace
                .tokens
                .spec_drafted
                .iter()
                .map(|&d| opt_u8(d).map(u32::from))
                .collect();
            Series::new("spec_drafted".into(), v)
        }
    ),
    col!("iteration", "i64", "the engine step that produced it", |s| {
        let v: Vec<Option<i64>> = s.trace.tokens.iteration.iter().map(|&i| opt_i64(i)).collect();
        Series::new("iteration".into(), v)
    }),
    col!("token_id", "u32", "vocabulary id", |s| {
        let v: Vec<Option<u32>> = s.trace.tokens.token_id.iter().map(|&i| opt_u32(i)).collect();
        Series::new("token_id".into(), v)
    }),
    col!("text", "str", "decoded text", |s| texts(
        s,
        "text",
        &s.trace.tokens.text
    )),
    col!("special", "bool", "marked special by the producer", |s| {
        let v: Vec<Option<bool>> = s.trace.tokens.special.iter().map(|f| f.get()).collect();
        Series::new("special".into(), v)
    }),
    col!("logprob", "f64", "natural-log probability of the chosen token", |s| {
        let v: Vec<Option<f64>> = s.trace.tokens.logprob.iter().map(|&l| opt_f64(l)).collect();
        Series::new("logprob".into(), v)
    }),
    col!(
        "rank",
        "u32",
        "1-based rank of the chosen token among the candidates",
        |s| {
            let v: Vec<Option<u32>> = s.trace.tokens.rank.iter().map(|&r| opt_u32(r)).collect();
            Series::new("rank".into(), v)
        }
    ),
    col!(
        "received_ns",
        "i64",
        "a joined trace: when the client received it (emitted_ns is then the server's, on the client's clock)",
        |s| {
            let v: Vec<Option<i64>> = s.trace.tokens.received_ns.iter().map(|&r| opt_i64(r)).collect();
            Series::new("received_ns".into(), v)
        }
    ),
    col!(
        "delivery_ms",
        "f64",
        "a joined trace: received − emitted, the token's way from the server to the client",
        |s| {
            let t = &s.trace.tokens;
            let v: Vec<Option<f64>> = (0..t.len())
                .map(|i| opt_i64(t.received_ns[i]).map(|r| ms(r - t.emitted_ns[i])))
                .collect();
            Series::new("delivery_ms".into(), v)
        }
    ),
];

static STEPS: &[Col] = &[
    col!("source", "str", "engine instance", |s| labels(
        s,
        "source",
        &s.trace.iterations.source
    )),
    col!("iteration", "i64", "step counter, unique per source", |s| {
        Series::new("iteration".into(), &s.trace.iterations.iteration)
    }),
    col!("start_ns", "i64", "start (ns since the Unix epoch)", |s| {
        Series::new("start_ns".into(), &s.trace.iterations.start_ns)
    }),
    col!("end_ns", "i64", "end", |s| Series::new(
        "end_ns".into(),
        &s.trace.iterations.end_ns
    )),
    col!(
        "start_s",
        "f64",
        "start, seconds since the trace's first arrival",
        |s| {
            let v: Vec<f64> = s.trace.iterations.start_ns.iter().map(|&t| s.seconds(t)).collect();
            Series::new("start_s".into(), v)
        }
    ),
    col!("duration_ms", "f64", "end − start", |s| {
        let it = &s.trace.iterations;
        let v: Vec<f64> = it.start_ns.iter().zip(&it.end_ns).map(|(a, b)| ms(b - a)).collect();
        Series::new("duration_ms".into(), v)
    }),
    col!("schedule_ms", "f64", "time scheduling inside the step", |s| {
        Series::new("schedule_ms".into(), opt_ns_ms(&s.trace.iterations.schedule_ns))
    }),
    col!("forward_ms", "f64", "time in the model's forward pass", |s| {
        Series::new("forward_ms".into(), opt_ns_ms(&s.trace.iterations.forward_ns))
    }),
    col!("sample_ms", "f64", "time sampling and detokenizing", |s| {
        Series::new("sample_ms".into(), opt_ns_ms(&s.trace.iterations.sample_ns))
    }),
    col!("num_reqs", "u32", "requests in the batch", |s| Series::new(
        "num_reqs".into(),
        s.trace.iterations.num_reqs.to_options()
    )),
    col!("num_prefill_reqs", "u32", "requests prefilling", |s| {
        Series::new(
            "num_prefill_reqs".into(),
            s.trace.iterations.num_prefill_reqs.to_options(),
        )
    }),
    col!("num_decode_reqs", "u32", "requests decoding", |s| {
        Series::new(
            "num_decode_reqs".into(),
            s.trace.iterations.num_decode_reqs.to_options(),
        )
    }),
    col!("num_prefill_tokens", "u32", "prompt tokens computed", |s| {
        Series::new(
            "num_prefill_tokens".into(),
            s.trace.iterations.num_prefill_tokens.to_options(),
        )
    }),
    col!("num_decode_tokens", "u32", "output tokens computed", |s| {
        Series::new(
            "num_decode_tokens".into(),
            s.trace.iterations.num_decode_tokens.to_options(),
        )
    }),
    col!("num_waiting", "u32", "requests waiting at the step's start", |s| {
        Series::new("num_waiting".into(), s.trace.iterations.num_waiting.to_options())
    }),
    col!("kv_usage", "f64", "KV-cache use, 0..1", |s| Series::new(
        "kv_usage".into(),
        s.trace.iterations.kv_usage.to_options()
    )),
    col!("num_preempted", "u32", "requests preempted in the step", |s| {
        Series::new("num_preempted".into(), s.trace.iterations.num_preempted.to_options())
    }),
    col!(
        "spec_drafted_tokens",
        "u32",
        "speculative decoding: draft tokens the step verified",
        |s| Series::new(
            "spec_drafted_tokens".into(),
            s.trace.iterations.spec_drafted_tokens.to_options()
        )
    ),
    col!(
        "spec_accepted_tokens",
        "u32",
        "speculative decoding: of those, the ones it accepted",
        |s| Series::new(
            "spec_accepted_tokens".into(),
            s.trace.iterations.spec_accepted_tokens.to_options()
        )
    ),
];
