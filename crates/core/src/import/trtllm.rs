//! TensorRT-LLM (trtllm-serve, PyTorch backend): iteration statistics and per-request perf metrics.
//!
//! - `GET /metrics` (with `enable_iter_perf_stats`, and `enable_iter_req_stats` for `requestStats`) returns a JSON
//!   array of IterationStats (`cpp/tensorrt_llm/executor/jsonSerialization.cpp`; the Python worker appends
//!   `requestStats`). A dump is that array, or several (one per poll), or one object per line.
//! - `print_iter_log: true` writes one line per iteration: `iter = N, ..., host_step_time = Xms, ...,
//!   timestamp = YYYY-MM-DD HH:MM:SS, states = {'num_ctx_requests': N, 'num_ctx_tokens': N,
//!   'num_generation_tokens': N}` (`tensorrt_llm/_torch/pyexecutor/py_executor.py`), read by field name.
//! - `GET /perf_metrics` (with `return_perf_metrics`) returns `[{request_id, perf_metrics: {first_iter, last_iter,
//!   timing_metrics: {arrival_time, first_scheduled_time, first_token_time, last_token_time, ...}}}]`, seconds on
//!   the server's steady clock (`tensorrt_llm/serve/openai_server.py`).
//!
//! IterationStats become iterations (start at `timestamp`, local time read as UTC; length `iterLatencyMS`); their
//! `requestStats` give each request's life: first seen (its arrival, to within a step), prefill progress
//! (`contextPrefillPosition`, a prefill stage per step that advanced it), tokens (`numGeneratedTokens`, each
//! increase a token at the step's end) and completion. Perf metrics, when their ids match, give the request's own
//! times, placed on the wall clock by the step each was first scheduled in (`first_iter`).

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::Path;

use serde_json::Value;

use super::{Sink, float_of, int_of, ns_from_ms, ns_from_secs, ok, record, text};
use crate::format::jsonl::for_each_line;
use crate::ingest::{LoadError, Progress};
use crate::trace::TraceBuilder;
use crate::trace::report::{Place, Problem, Rejection};

/// True when the text has `print_iter_log` lines.
pub fn looks_like_iter_log(text: &str) -> bool {
    text.lines().any(|l| {
        l.contains("iter = ") && (l.contains("host_step_time") || l.contains("elapsed_time")) && l.contains("states")
    })
}

/// One iteration as read, before requests are resolved.
#[derive(Debug, Clone)]
pub struct Step {
    place: Place,
    iter: i64,
    start_ns: i64,
    latency_ns: i64,
    ctx_reqs: Option<i64>,
    ctx_tokens: Option<i64>,
    gen_reqs: Option<i64>,
    scheduled: Option<i64>,
    queued: Option<i64>,
    kv_usage: Option<f64>,
    /// Rank (attention DP) when several ranks write stats.
    rank: Option<i64>,
    /// Speculative decoding (`specDecodingStats`): the iteration's draft tokens and accepted ones.
    spec: Option<(i64, i64)>,
    requests: Vec<RequestStat>,
    /// True when read from the log (whole-second times), false from the JSON.
    from_log: bool,
}

/// One entry of `requestStats`.
#[derive(Debug, Clone)]
struct RequestStat {
    id: String,
    stage: String,
    prefill_position: i64,
    generated: i64,
}

/// One entry of `/perf_metrics`.
#[derive(Debug, Clone)]
pub struct Perf {
    place: Place,
    id: String,
    first_iter: Option<i64>,
    arrival: Option<f64>,
    first_scheduled: Option<f64>,
    first_token: Option<f64>,
    last_token: Option<f64>,
}

/// What the TensorRT-LLM files of a trace held, mapped once all are read.
#[derive(Debug, Default)]
pub struct Pending {
    steps: Vec<Step>,
    perf: Vec<Perf>,
    /// The modification time of the perf file (Unix ns), to place steady-clock times with nothing else.
    perf_modified_ns: Option<i64>,
}

impl Pending {
    /// True when nothing was read.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty() && self.perf.is_empty()
    }

    /// Adds what another file held.
    pub fn absorb(&mut self, other: Pending) {
        self.steps.extend(other.steps);
        self.perf.extend(other.perf);
        self.perf_modified_ns = self.perf_modified_ns.or(other.perf_modified_ns);
    }
}

/// Calls `each` with every JSON item of a document that is an array of objects, several of them (one per poll), or
/// one object per line; the place is the item's 1-based number. A document that stops parsing is reported where.
fn for_each_item(
    input: impl Read,
    path: &Path,
    sink: &mut Sink<'_>,
    progress: &Progress,
    mut each: impl FnMut(&Value, Place, &mut Sink<'_>),
) -> Result<(), LoadError> {
    let reader = std::io::BufReader::new(Counting { inner: input, progress });
    let mut n = 0u64;
    for value in serde_json::Deserializer::from_reader(reader).into_iter::<Value>() {
        if progress.is_cancelled() {
            return Err(LoadError::Cancelled);
        }
        match value {
            Ok(Value::Array(items)) => {
                for item in &items {
                    n += 1;
                    each(item, sink.place(n), sink);
                }
            }
            Ok(item) => {
                n += 1;
                each(&item, sink.place(n), sink);
            }
            Err(e) => {
                sink.reject(
                    n + 1,
                    Problem::Malformed,
                    None,
                    format!(
                        "{} stops being JSON at line {}, column {} ({e}); the {n} items before it are kept",
                        path.display(),
                        e.line(),
                        e.column()
                    ),
                );
                break;
            }
        }
    }
    Ok(())
}

/// Counts bytes read for the progress bar.
struct Counting<'p, R> {
    inner: R,
    progress: &'p Progress,
}

impl<R: Read> Read for Counting<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress.add_done(n as u64);
        Ok(n)
    }
}

/// The `timestamp` of IterationStats, `"%m-%d-%Y %H:%M:%S.%f"` in the server's local time, read as UTC.
fn stats_time(s: &str) -> Option<i64> {
    chrono::NaiveDateTime::parse_from_str(s.trim(), "%m-%d-%Y %H:%M:%S%.f")
        .or_else(|_| chrono::NaiveDateTime::parse_from_str(s.trim(), "%Y-%m-%d %H:%M:%S%.f"))
        .ok()?
        .and_utc()
        .timestamp_nanos_opt()
}

/// Reads IterationStats JSON, or `print_iter_log` lines.
pub fn read_iterations(
    input: impl Read,
    path: &Path,
    sink: &mut Sink<'_>,
    progress: &Progress,
) -> Result<(), LoadError> {
    let mut input = std::io::BufReader::new(input);
    let head = std::io::BufRead::fill_buf(&mut input).map_err(|source| LoadError::Io {
        path: path.display().to_string(),
        source,
    })?;
    if !super::looks_like_json(head) {
        return read_iter_log(input, path, sink, progress);
    }
    let mut steps = Vec::new();
    for_each_item(input, path, sink, progress, |item, place, sink| {
        match step_of(item, place) {
            Ok(step) => steps.push(step),
            Err((field, reason)) => sink.reject(place.at, Problem::MissingField, Some(field), reason),
        }
    })?;
    if let Some(first) = steps.iter().map(|s| s.start_ns).min() {
        sink.saw_time(first);
    }
    sink.trtllm.steps.extend(steps);
    Ok(())
}

fn step_of(item: &Value, place: Place) -> Result<Step, (&'static str, String)> {
    let iter = item.get("iter").and_then(int_of).ok_or((
        "iter",
        "an IterationStats object needs iter, the iteration counter".to_owned(),
    ))?;
    let start_ns = item
        .get("timestamp")
        .and_then(Value::as_str)
        .and_then(stats_time)
        .ok_or((
            "timestamp",
            format!("iteration {iter}: timestamp is absent or not \"MM-DD-YYYY HH:MM:SS.ffffff\""),
        ))?;
    let latency_ns = item
        .get("iterLatencyMS")
        .and_then(float_of)
        .and_then(ns_from_ms)
        .filter(|&ns| ns >= 0)
        .ok_or((
            "iterLatencyMS",
            format!("iteration {iter}: iterLatencyMS is absent or negative"),
        ))?;
    let ifb = item.get("inflightBatchingStats");
    let ifb_int = |key: &str| ifb.and_then(|s| s.get(key)).and_then(int_of);
    let kv = item.get("kvCacheStats");
    let kv_int = |key: &str| kv.and_then(|s| s.get(key)).and_then(int_of);
    #[expect(clippy::cast_precision_loss, reason = "block counts")]
    let kv_usage = match (kv_int("usedNumBlocks"), kv_int("maxNumBlocks")) {
        (Some(used), Some(max)) if max > 0 => Some(used as f64 / max as f64),
        _ => None,
    };
    let requests = item
        .get("requestStats")
        .and_then(Value::as_array)
        .map(|rs| {
            rs.iter()
                .filter_map(|r| {
                    Some(RequestStat {
                        id: match r.get("id")? {
                            Value::String(s) => s.clone(),
                            other => other.to_string(),
                        },
                        stage: r.get("stage").and_then(Value::as_str).unwrap_or("").to_owned(),
                        prefill_position: r.get("contextPrefillPosition").and_then(int_of).unwrap_or(0),
                        generated: r.get("numGeneratedTokens").and_then(int_of).unwrap_or(0),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(Step {
        place,
        iter,
        start_ns,
        latency_ns,
        ctx_reqs: ifb_int("numContextRequests"),
        ctx_tokens: ifb_int("numCtxTokens"),
        gen_reqs: ifb_int("numGenRequests"),
        scheduled: ifb_int("numScheduledRequests"),
        queued: item.get("numQueuedRequests").and_then(int_of),
        kv_usage,
        rank: item.get("attentionDpRank").and_then(int_of),
        // `specDecodingStats{numDraftTokens, numAcceptedTokens, ...}` (cpp/include/tensorrt_llm/executor/types.h):
        // this iteration's counts.
        spec: item.get("specDecodingStats").and_then(|s| {
            Some((
                s.get("numDraftTokens").and_then(int_of)?,
                s.get("numAcceptedTokens").and_then(int_of)?,
            ))
        }),
        requests,
        from_log: false,
    })
}

/// `key = value` pairs of a `print_iter_log` line, and the `states = {...}` dict's `'key': value` pairs.
fn log_field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let mut rest = line;
    while let Some(i) = rest.find(key) {
        let before = rest[..i].chars().next_back();
        let after = rest[i + key.len()..].trim_start();
        let boundary = before.is_none_or(|c| !c.is_ascii_alphanumeric() && c != '_');
        if boundary && let Some(v) = after.strip_prefix('=').or_else(|| after.strip_prefix(':')) {
            let v = v.trim_start();
            let end = v.find([',', '}']).unwrap_or(v.len());
            return Some(v[..end].trim());
        }
        rest = &rest[i + key.len()..];
    }
    None
}

fn read_iter_log(input: impl Read, path: &Path, sink: &mut Sink<'_>, progress: &Progress) -> Result<(), LoadError> {
    let file = sink.file;
    let mut steps = Vec::new();
    for_each_line(input, path, file, sink.b, progress, |line, place, b| {
        let line = String::from_utf8_lossy(line);
        if !line.contains("iter = ") {
            return;
        }
        let int = |k: &str| log_field(&line, k).and_then(|v| v.trim_matches('\'').parse::<i64>().ok());
        let ms = |k: &str| {
            log_field(&line, k).and_then(|v| {
                let v = v.trim();
                match v.strip_suffix("ms") {
                    Some(ms) => ms.trim().parse::<f64>().ok().and_then(ns_from_ms),
                    None => v.strip_suffix('s')?.trim().parse::<f64>().ok().and_then(ns_from_secs),
                }
            })
        };
        let step = (|| {
            let iter = int("iter").ok_or(("iter", "no iter = N".to_owned()))?;
            let latency_ns = ms("host_step_time")
                .or_else(|| ms("elapsed_time"))
                .ok_or(("host_step_time", format!("iteration {iter}: no host_step_time = Xms")))?;
            let start_ns = log_field(&line, "timestamp")
                .and_then(|t| chrono::NaiveDateTime::parse_from_str(t, "%Y-%m-%d %H:%M:%S").ok())
                .and_then(|t| t.and_utc().timestamp_nanos_opt())
                .ok_or((
                    "timestamp",
                    format!("iteration {iter}: no timestamp = YYYY-MM-DD HH:MM:SS"),
                ))?;
            let scheduled = int("num_scheduled_requests");
            let ctx_reqs = int("'num_ctx_requests'");
            let gen_tokens = int("'num_generation_tokens'");
            Ok::<_, (&'static str, String)>(Step {
                place,
                iter,
                start_ns,
                latency_ns,
                ctx_reqs,
                ctx_tokens: int("'num_ctx_tokens'"),
                gen_reqs: gen_tokens,
                scheduled,
                queued: None,
                kv_usage: log_field(&line, "kv_cache_util").and_then(|v| v.parse().ok()),
                // The log's rank is the process's (TP) rank, not the attention-DP rank that splits the statistics.
                rank: None,
                spec: None,
                requests: Vec::new(),
                from_log: true,
            })
        })();
        match step {
            Ok(s) => steps.push(s),
            Err((field, reason)) => Sink::new(b, file, super::Kind::TrtllmIterations).reject(
                place.at,
                Problem::Malformed,
                Some(field),
                format!("TensorRT-LLM iteration log line: {reason}"),
            ),
        }
    })?;
    if let Some(first) = steps.iter().map(|s| s.start_ns).min() {
        sink.saw_time(first);
    }
    sink.trtllm.steps.extend(steps);
    Ok(())
}

/// Reads `/perf_metrics` JSON.
pub fn read_perf(input: impl Read, path: &Path, sink: &mut Sink<'_>, progress: &Progress) -> Result<(), LoadError> {
    let mut perf = Vec::new();
    for_each_item(input, path, sink, progress, |item, place, sink| {
        let id = match item.get("request_id") {
            Some(Value::String(s)) => s.clone(),
            Some(v @ Value::Number(_)) => v.to_string(),
            _ => {
                sink.reject(
                    place.at,
                    Problem::MissingField,
                    Some("request_id"),
                    "a /perf_metrics entry needs its request_id".to_owned(),
                );
                return;
            }
        };
        let pm = item.get("perf_metrics");
        let timing = pm.and_then(|p| p.get("timing_metrics"));
        let secs = |k: &str| timing.and_then(|t| t.get(k)).and_then(float_of);
        perf.push(Perf {
            place,
            id,
            first_iter: pm.and_then(|p| p.get("first_iter")).and_then(int_of),
            arrival: secs("arrival_time"),
            first_scheduled: secs("first_scheduled_time"),
            first_token: secs("first_token_time"),
            last_token: secs("last_token_time"),
        });
    })?;
    sink.trtllm.perf_modified_ns = std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| chrono::DateTime::<chrono::Utc>::from(t).timestamp_nanos_opt());
    sink.trtllm.perf.extend(perf);
    Ok(())
}

/// A request's life as the iteration statistics saw it.
#[derive(Debug, Default)]
struct Life {
    first_seen: Option<(i64, Place)>,
    rank: Option<i64>,
    scheduled_ns: Option<i64>,
    prefill_position: i64,
    generated: i64,
    finished_ns: Option<i64>,
    prefills: Vec<(i64, i64, i64, i64)>,
    tokens: Vec<(i64, i64)>,
}

/// Maps everything read: iterations, the requests their `requestStats` follow, and the perf metrics joined to
/// them by request id.
pub fn map(pending: Pending, b: &mut TraceBuilder) {
    let Pending {
        mut steps,
        perf,
        perf_modified_ns,
    } = pending;
    // The JSON's iterations win over the log's same iterations.
    let from_json: std::collections::HashSet<(Option<i64>, i64)> =
        steps.iter().filter(|s| !s.from_log).map(|s| (s.rank, s.iter)).collect();
    let before = steps.len();
    steps.retain(|s| !s.from_log || !from_json.contains(&(s.rank, s.iter)));
    let log_duplicates = before - steps.len();
    steps.sort_by_key(|s| (s.rank, s.iter, s.from_log));

    // Log lines give whole seconds: chain them by their step times, as vLLM's.
    let mut cursor: HashMap<Option<i64>, i64> = HashMap::new();
    for s in steps.iter_mut().filter(|s| s.from_log) {
        let prev = cursor.get(&s.rank).copied();
        s.start_ns = prev.map_or(s.start_ns, |end| end.max(s.start_ns));
        cursor.insert(s.rank, s.start_ns + s.latency_ns);
    }

    let source_of = |rank: Option<i64>| rank.map(|r| format!("rank-{r}"));
    let mut lives: BTreeMap<String, Life> = BTreeMap::new();
    let mut iteration_span: HashMap<i64, (i64, i64)> = HashMap::new();
    for s in &steps {
        let end_ns = s.start_ns + s.latency_ns;
        iteration_span.entry(s.iter).or_insert((s.start_ns, end_ns));
        let mut it = record("iteration");
        if let Some(source) = source_of(s.rank) {
            it.source = text(source);
        }
        it.iteration = ok(s.iter);
        it.start_ns = ok(s.start_ns);
        it.end_ns = ok(end_ns);
        it.num_prefill_reqs = s.ctx_reqs.and_then(ok);
        it.num_prefill_tokens = s.ctx_tokens.and_then(ok);
        it.num_decode_reqs = s.gen_reqs.and_then(ok);
        it.num_decode_tokens = s.gen_reqs.and_then(ok);
        it.num_reqs = s.scheduled.and_then(ok);
        it.num_waiting = s.queued.and_then(ok);
        it.kv_usage = s.kv_usage.and_then(ok);
        if let Some((drafted, accepted)) = s.spec {
            it.spec_drafted_tokens = ok(drafted);
            it.spec_accepted_tokens = ok(accepted);
        }
        crate::ingest::validate::ingest(&it, s.place, b);
        for r in &s.requests {
            let life = lives.entry(r.id.clone()).or_default();
            if life.first_seen.is_none() {
                life.first_seen = Some((s.start_ns, s.place));
                life.rank = s.rank;
            }
            let running = r.stage != "QUEUED";
            if running && life.scheduled_ns.is_none() {
                life.scheduled_ns = Some(s.start_ns);
            }
            if r.prefill_position > life.prefill_position {
                life.prefills
                    .push((s.start_ns, end_ns, s.iter, r.prefill_position - life.prefill_position));
                life.prefill_position = r.prefill_position;
            }
            for _ in life.generated..r.generated {
                life.tokens.push((end_ns, s.iter));
            }
            life.generated = life.generated.max(r.generated);
            if r.stage == "GENERATION_COMPLETE" && life.finished_ns.is_none() {
                life.finished_ns = Some(end_ns);
            }
        }
    }

    // Steady-clock perf times onto the wall clock: the offset that puts each request's first scheduling at the
    // start of its first iteration (the median over requests), else the perf file's last change at the last token.
    // Anchors are (wall ns, steady s) pairs; the one of median offset is used, and times are placed relative to it
    // so that no precision is lost to f64 seconds since 1970.
    let mut anchors: Vec<(i64, f64)> = perf
        .iter()
        .filter_map(|p| Some((iteration_span.get(&p.first_iter?)?.0, p.first_scheduled?)))
        .collect();
    #[expect(clippy::cast_precision_loss, reason = "ordering only")]
    anchors.sort_by(|a, b| (a.0 as f64 / 1e9 - a.1).total_cmp(&(b.0 as f64 / 1e9 - b.1)));
    let anchored = !anchors.is_empty();
    let anchor = anchors.get(anchors.len() / 2).copied().or_else(|| {
        let last = perf
            .iter()
            .filter_map(|p| p.last_token.or(p.first_token))
            .reduce(f64::max)?;
        Some((perf_modified_ns?, last))
    });
    let wall = |steady: Option<f64>| -> Option<i64> {
        let (anchor_ns, anchor_steady) = anchor?;
        Some(anchor_ns + ns_from_secs(steady? - anchor_steady)?)
    };

    let perf_by_id: HashMap<&str, &Perf> = perf.iter().map(|p| (p.id.as_str(), p)).collect();
    let joined = perf.iter().filter(|p| lives.contains_key(&p.id)).count();
    for (id, life) in &lives {
        let p = perf_by_id.get(id.as_str()).copied();
        let Some((first_seen, place)) = life.first_seen else {
            continue;
        };
        let mut r = record("request");
        r.request_id = text(id.clone());
        if let Some(source) = source_of(life.rank) {
            r.source = text(source);
        }
        r.arrival_ns = ok(p.and_then(|p| wall(p.arrival)).unwrap_or(first_seen));
        r.scheduled_ns = p
            .and_then(|p| wall(p.first_scheduled))
            .or(life.scheduled_ns)
            .and_then(ok);
        r.first_token_ns = p
            .and_then(|p| wall(p.first_token))
            .or(life.tokens.first().map(|t| t.0))
            .and_then(ok);
        r.finished_ns = p.and_then(|p| wall(p.last_token)).or(life.finished_ns).and_then(ok);
        r.input_tokens = (life.prefill_position > 0)
            .then_some(life.prefill_position)
            .and_then(ok);
        r.output_tokens = ok(life.generated);
        crate::ingest::validate::ingest(&r, place, b);
        for &(start, end, iter, tokens) in &life.prefills {
            let mut st = record("stage");
            st.request_id = text(id.clone());
            st.stage = text("prefill");
            st.start_ns = ok(start);
            st.end_ns = ok(end);
            st.iteration = ok(iter);
            st.tokens = ok(tokens);
            crate::ingest::validate::ingest(&st, place, b);
        }
        let mut token = record("token");
        token.request_id = text(id.clone());
        for (index, &(emitted, iter)) in life.tokens.iter().enumerate() {
            token.index = ok(i64::try_from(index).unwrap_or(i64::MAX));
            token.emitted_ns = ok(emitted);
            token.iteration = ok(iter);
            crate::ingest::validate::ingest(&token, place, b);
        }
    }
    // Perf entries of requests the iteration statistics never named are requests of their own (L1).
    for p in perf.iter().filter(|p| !lives.contains_key(&p.id)) {
        let Some(arrival) = wall(p.arrival) else {
            b.report.records += 1;
            b.report.reject(Rejection {
                place: p.place,
                problem: Problem::MissingField,
                record: Some("request"),
                field: Some("timing_metrics.arrival_time"),
                reason: format!("perf metrics of request {}: no arrival_time to place it", p.id),
            });
            continue;
        };
        let mut r = record("request");
        r.request_id = text(p.id.clone());
        r.arrival_ns = ok(arrival);
        r.scheduled_ns = wall(p.first_scheduled).and_then(ok);
        r.first_token_ns = wall(p.first_token).and_then(ok);
        r.finished_ns = wall(p.last_token).and_then(ok);
        crate::ingest::validate::ingest(&r, p.place, b);
    }

    let notes = &mut b.report.notes;
    if !steps.is_empty() {
        notes.push(
            "TensorRT-LLM's iteration timestamps are the server's local time without a zone, read as UTC; \
             requests are first seen in the step whose statistics list them (arrival to within a step), tokens \
             at the end of the step that counted them"
                .to_owned(),
        );
        if lives.is_empty() {
            notes.push(
                "no requestStats in the iteration statistics (enable_iter_req_stats is off): iterations only"
                    .to_owned(),
            );
        }
    }
    if log_duplicates > 0 {
        notes.push(format!(
            "{log_duplicates} iterations of the TensorRT-LLM log were also in its JSON statistics; the JSON's were kept"
        ));
    }
    if !perf.is_empty() {
        #[expect(clippy::cast_precision_loss, reason = "counts")]
        let rate = 100.0 * joined as f64 / perf.len() as f64;
        notes.push(format!(
            "TensorRT-LLM perf metrics joined to the iteration statistics by request id: {joined} of {} ({rate:.0} %)",
            perf.len()
        ));
        notes.push(if anchored {
            "TensorRT-LLM perf times are on the server's steady clock: placed by the iteration each request was \
             first scheduled in"
                .to_owned()
        } else {
            "TensorRT-LLM perf times are on the server's steady clock and nothing places them: times are relative, \
             shown as if the last token came at the perf file's last change"
                .to_owned()
        });
    }
    notes.push("no candidates in TensorRT-LLM statistics (logprobs come only through its OpenAI API)".to_owned());
}
