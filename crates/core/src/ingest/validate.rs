//! The format's rules for one record: required fields, types, units and ranges. A record that breaks one is
//! rejected with its place, field and a reason that says how to fix it; a record that passes goes to the builder.

#![expect(
    clippy::ref_option,
    reason = "a record's fields are `Option<Val<T>>`, read in place by one helper per type"
)]

use std::borrow::Cow;

use super::raw::KINDS;
use super::raw::{Field, Found, RawCandidate, RawRecord, Val};
use crate::trace::report::{Place, Problem, Rejection};
use crate::trace::{
    Candidate, Flag, Iteration, Meta, NO_STR, NULL_F64, NULL_I64, NULL_U8, NULL_U32, OwnedCandidate, Reference,
    Request, Sample, SpecRole, Stage, StageKind, Token, TokenChoice, TraceBuilder,
};

/// Smallest accepted epoch time: 1973-03-03 in ns. Anything below is seconds, ms or µs (or a relative clock).
const MIN_EPOCH_NS: i64 = 100_000_000_000_000_000;
/// Largest accepted epoch time: 2100-01-01 in ns.
const MAX_EPOCH_NS: i64 = 4_102_444_800_000_000_000;
/// Whether `t` is a time the format accepts: integer ns since the Unix epoch, between 1973 and 2100 (what
/// [`ingest`] checks of every `_ns` time; streamed figures check it of the times they read).
pub fn is_epoch_ns(t: i64) -> bool {
    (MIN_EPOCH_NS..=MAX_EPOCH_NS).contains(&t)
}

/// Largest count accepted for token and request counts (fits the model's `u32` columns with room for a sentinel).
const MAX_COUNT: i64 = u32::MAX as i64 - 1;

/// A field-level failure, before it is placed.
struct Bad {
    problem: Problem,
    field: &'static str,
    reason: String,
}

type Check<T> = Result<T, Bad>;

fn wrong(field: &'static str, found: Found, expected: &str) -> Bad {
    Bad {
        problem: Problem::WrongType,
        field,
        reason: format!("{field} is {found}; expected {expected}"),
    }
}

fn missing(field: &'static str, record: &str, what: &str) -> Bad {
    Bad {
        problem: Problem::MissingField,
        field,
        reason: format!("missing required field {field}: every {record} record needs {what}"),
    }
}

fn out_of_range(field: &'static str, reason: String) -> Bad {
    Bad {
        problem: Problem::OutOfRange,
        field,
        reason,
    }
}

fn opt_str<'r>(field: &'static str, v: &'r Field<Cow<'_, str>>) -> Check<Option<&'r str>> {
    match v {
        None => Ok(None),
        Some(Val::Ok(s)) => Ok(Some(s)),
        Some(Val::Wrong(found)) => Err(wrong(field, *found, "a string; quote it")),
    }
}

fn req_str<'r>(field: &'static str, v: &'r Field<Cow<'_, str>>, record: &str, what: &str) -> Check<&'r str> {
    opt_str(field, v)?.ok_or_else(|| missing(field, record, what))
}

/// What an integer that is too small for epoch nanoseconds most likely is.
fn unit_guess(v: i64) -> (&'static str, &'static str) {
    if v < 100_000_000_000 {
        ("seconds", "1000000000")
    } else if v < 100_000_000_000_000 {
        ("milliseconds", "1000000")
    } else {
        ("microseconds", "1000")
    }
}

/// An absolute time: integer nanoseconds since the Unix epoch.
fn opt_time(field: &'static str, v: &Field<i64>) -> Check<Option<i64>> {
    match v {
        None => Ok(None),
        Some(Val::Wrong(Found::Float(f))) => Err(Bad {
            problem: Problem::FloatTime,
            field,
            reason: format!(
                "{field} is a float ({f}); times are integer nanoseconds since the Unix epoch: write \
                 round(seconds * 1e9) as an integer"
            ),
        }),
        Some(Val::Wrong(found)) => Err(wrong(field, *found, "integer nanoseconds since the Unix epoch")),
        Some(Val::Ok(t)) if *t < 0 => Err(out_of_range(
            field,
            format!("{field} = {t} is negative; times are nanoseconds since the Unix epoch"),
        )),
        Some(Val::Ok(t)) if *t < MIN_EPOCH_NS => {
            let (unit, factor) = unit_guess(*t);
            Err(Bad {
                problem: Problem::TimeUnit,
                field,
                reason: format!(
                    "{field} = {t} looks like {unit} since the epoch, not nanoseconds (~1.7e18 today): \
                     multiply by {factor}"
                ),
            })
        }
        Some(Val::Ok(t)) if *t > MAX_EPOCH_NS => Err(out_of_range(
            field,
            format!("{field} = {t} is after the year 2100; times are nanoseconds since the Unix epoch"),
        )),
        Some(Val::Ok(t)) => Ok(Some(*t)),
    }
}

fn req_time(field: &'static str, v: &Field<i64>, record: &str) -> Check<i64> {
    opt_time(field, v)?.ok_or_else(|| missing(field, record, "it (integer nanoseconds since the Unix epoch)"))
}

/// A duration inside a record: non-negative integer nanoseconds.
fn opt_duration(field: &'static str, v: &Field<i64>) -> Check<Option<i64>> {
    match v {
        None => Ok(None),
        Some(Val::Wrong(Found::Float(f))) => Err(Bad {
            problem: Problem::FloatTime,
            field,
            reason: format!("{field} is a float ({f}); durations are integer nanoseconds: write round(seconds * 1e9)"),
        }),
        Some(Val::Wrong(found)) => Err(wrong(field, *found, "integer nanoseconds")),
        Some(Val::Ok(d)) if *d < 0 => Err(Bad {
            problem: Problem::NegativeDuration,
            field,
            reason: format!("{field} = {d} is negative; durations are >= 0 nanoseconds"),
        }),
        Some(Val::Ok(d)) => Ok(Some(*d)),
    }
}

fn opt_int(field: &'static str, v: &Field<i64>) -> Check<Option<i64>> {
    match v {
        None => Ok(None),
        Some(Val::Ok(i)) => Ok(Some(*i)),
        Some(Val::Wrong(found)) => Err(wrong(field, *found, "an integer")),
    }
}

/// A count of tokens, requests or steps: an integer in `0..=MAX_COUNT`.
fn opt_count(field: &'static str, v: &Field<i64>) -> Check<Option<u32>> {
    match opt_int(field, v)? {
        None => Ok(None),
        Some(n) if !(0..=MAX_COUNT).contains(&n) => Err(out_of_range(
            field,
            format!("{field} = {n} is not a count (0 to {MAX_COUNT})"),
        )),
        Some(n) => Ok(u32::try_from(n).ok()),
    }
}

/// A size in bytes: a non-negative integer.
fn opt_bytes(field: &'static str, v: &Field<i64>) -> Check<Option<u64>> {
    match opt_int(field, v)? {
        None => Ok(None),
        Some(n) => u64::try_from(n)
            .map(Some)
            .map_err(|_| out_of_range(field, format!("{field} = {n} is negative; sizes are bytes, >= 0"))),
    }
}

/// A token id: an integer in `0..u32::MAX`.
fn opt_token_id(field: &'static str, v: &Field<i64>) -> Check<Option<u32>> {
    match opt_int(field, v)? {
        None => Ok(None),
        Some(n) if !(0..i64::from(NULL_U32)).contains(&n) => Err(out_of_range(
            field,
            format!("{field} = {n} is not a token id (0 to {})", NULL_U32 - 1),
        )),
        Some(n) => Ok(u32::try_from(n).ok()),
    }
}

fn opt_float(field: &'static str, v: &Field<f64>) -> Check<Option<f64>> {
    match v {
        None => Ok(None),
        Some(Val::Ok(f)) if !f.is_finite() => Err(out_of_range(field, format!("{field} = {f} is not finite"))),
        Some(Val::Ok(f)) => Ok(Some(*f)),
        Some(Val::Wrong(found)) => Err(wrong(field, *found, "a number")),
    }
}

/// A natural-log probability: finite and <= 0.
fn opt_logprob(field: &'static str, v: &Field<f64>) -> Check<Option<f64>> {
    match opt_float(field, v)? {
        Some(lp) if lp > 0.0 => Err(out_of_range(
            field,
            format!("{field} = {lp} is above 0; logprobs are natural logs of probabilities (write ln(p), not p)"),
        )),
        other => Ok(other),
    }
}

fn opt_bool(field: &'static str, v: &Field<bool>) -> Check<Option<bool>> {
    match v {
        None => Ok(None),
        Some(Val::Ok(b)) => Ok(Some(*b)),
        Some(Val::Wrong(found)) => Err(wrong(field, *found, "true or false")),
    }
}

/// `end` must not precede `start`.
fn ordered(start_field: &'static str, start: i64, end_field: &'static str, end: i64) -> Check<()> {
    if end < start {
        #[expect(clippy::cast_precision_loss, reason = "a readable figure in a message")]
        let ms = (start - end) as f64 / 1e6;
        return Err(Bad {
            problem: Problem::NegativeDuration,
            field: end_field,
            reason: format!("{end_field} is {ms:.3} ms before {start_field}; a span cannot end before it starts"),
        });
    }
    Ok(())
}

fn intern_opt(b: &mut TraceBuilder, s: Option<&str>) -> u32 {
    s.map_or(NO_STR, |s| b.labels.intern(s))
}

fn meta(r: &RawRecord<'_>) -> Check<Meta> {
    let eos_token_ids = match &r.eos_token_ids {
        None => None,
        Some(Val::Wrong(found)) => {
            return Err(wrong("eos_token_ids", *found, "a list of integer token ids"));
        }
        Some(Val::Ok(ids)) => {
            let mut out = Vec::with_capacity(ids.len());
            for id in ids {
                let id = opt_token_id("eos_token_ids", &Some(id.clone()))?;
                out.extend(id);
            }
            Some(out)
        }
    };
    Ok(Meta {
        present: true,
        format: opt_str("format", &r.format)?.map(str::to_owned),
        version: opt_int("version", &r.version)?,
        engine: opt_str("engine", &r.engine)?.map(str::to_owned),
        engine_version: opt_str("engine_version", &r.engine_version)?.map(str::to_owned),
        model: opt_str("model", &r.model)?.map(str::to_owned),
        eos_token_ids,
        created_ns: opt_time("created_ns", &r.created_ns)?,
        clock: opt_str("clock", &r.clock)?.map(str::to_owned),
        note: opt_str("note", &r.note)?.map(str::to_owned),
    })
}

fn request(r: &RawRecord<'_>, b: &mut TraceBuilder) -> Check<Request> {
    let id = req_str(
        "request_id",
        &r.request_id,
        "request",
        "a request_id unique within the trace",
    )?;
    let id = b.labels.intern(id);
    let arrival_ns = req_time("arrival_ns", &r.arrival_ns, "request")?;
    let scheduled_ns = opt_time("scheduled_ns", &r.scheduled_ns)?;
    let first_token_ns = opt_time("first_token_ns", &r.first_token_ns)?;
    let finished_ns = opt_time("finished_ns", &r.finished_ns)?;
    let mut last = ("arrival_ns", arrival_ns);
    for (name, t) in [
        ("scheduled_ns", scheduled_ns),
        ("first_token_ns", first_token_ns),
        ("finished_ns", finished_ns),
    ] {
        if let Some(t) = t {
            ordered(last.0, last.1, name, t)?;
            last = (name, t);
        }
    }
    let source = match opt_str("source", &r.source)? {
        Some(s) => b.labels.intern(s),
        None => b.default_source(),
    };
    let input_tokens = opt_count("input_tokens", &r.input_tokens)?;
    let cached_tokens = opt_count("cached_tokens", &r.cached_tokens)?;
    if let (Some(i), Some(c)) = (input_tokens, cached_tokens)
        && c > i
    {
        return Err(out_of_range(
            "cached_tokens",
            format!("cached_tokens = {c} exceeds input_tokens = {i}"),
        ));
    }
    let temperature = opt_float("temperature", &r.temperature)?;
    let top_p = opt_float("top_p", &r.top_p)?;
    let top_k = opt_int("top_k", &r.top_k)?;
    let max_tokens = opt_int("max_tokens", &r.max_tokens)?;
    let seed = opt_int("seed", &r.seed)?;
    let context_tokens = opt_count("context_tokens", &r.context_tokens)?;
    let output_tokens = opt_count("output_tokens", &r.output_tokens)?;
    let num_preemptions = opt_count("num_preemptions", &r.num_preemptions)?;
    let server_queue_ns = opt_duration("server_queue_ns", &r.server_queue_ns)?;
    let server_ttft_ns = opt_duration("server_ttft_ns", &r.server_ttft_ns)?;
    let server_decode_ns = opt_duration("server_decode_ns", &r.server_decode_ns)?;
    let sent_ns = opt_time("sent_ns", &r.sent_ns)?;
    let (spec_drafted_tokens, spec_accepted_tokens) = spec_counts(r)?;
    let labels = [
        opt_str("trace_id", &r.trace_id)?,
        opt_str("model", &r.model)?,
        opt_str("app_id", &r.app_id)?,
        opt_str("user_id", &r.user_id)?,
        opt_str("finish_reason", &r.finish_reason)?,
        opt_str("status", &r.status)?,
        opt_str("error_code", &r.error_code)?,
        opt_str("prompt_hash", &r.prompt_hash)?,
        opt_str("server_request_id", &r.server_request_id)?,
        opt_str("decode_source", &r.decode_source)?,
    ];
    let [
        trace_id,
        model,
        app_id,
        user_id,
        finish_reason,
        status,
        error_code,
        prompt_hash,
        server_request_id,
        decode_source,
    ] = labels.map(|s| intern_opt(b, s));
    Ok(Request {
        id,
        source,
        trace_id,
        model,
        app_id,
        user_id,
        arrival_ns,
        scheduled_ns,
        first_token_ns,
        finished_ns,
        input_tokens,
        cached_tokens,
        context_tokens,
        output_tokens,
        finish_reason,
        status,
        error_code,
        temperature,
        top_p,
        top_k,
        max_tokens,
        seed,
        num_preemptions,
        prompt_hash,
        server_queue_ns,
        server_ttft_ns,
        server_decode_ns,
        sent_ns,
        server_request_id,
        spec_drafted_tokens,
        spec_accepted_tokens,
        // The instance it prefilled on, named again, is no other instance.
        decode_source: if decode_source == source { NO_STR } else { decode_source },
    })
}

/// Drafted and accepted draft tokens (a request's, a step's, an interval's): counts, the accepted ones no more than
/// the drafted.
fn spec_counts(r: &RawRecord<'_>) -> Check<(Option<u32>, Option<u32>)> {
    let drafted = opt_count("spec_drafted_tokens", &r.spec_drafted_tokens)?;
    let accepted = opt_count("spec_accepted_tokens", &r.spec_accepted_tokens)?;
    if let (Some(d), Some(a)) = (drafted, accepted)
        && a > d
    {
        return Err(out_of_range(
            "spec_accepted_tokens",
            format!(
                "spec_accepted_tokens = {a} exceeds spec_drafted_tokens = {d}: only drafted tokens can be accepted"
            ),
        ));
    }
    Ok((drafted, accepted))
}

fn iteration(r: &RawRecord<'_>, b: &mut TraceBuilder) -> Check<Iteration> {
    let iteration = opt_int("iteration", &r.iteration)?
        .ok_or_else(|| missing("iteration", "iteration", "its step number, unique per source"))?;
    let start_ns = req_time("start_ns", &r.start_ns, "iteration")?;
    let end_ns = req_time("end_ns", &r.end_ns, "iteration")?;
    ordered("start_ns", start_ns, "end_ns", end_ns)?;
    let kv_usage = opt_float("kv_usage", &r.kv_usage)?;
    if let Some(kv) = kv_usage
        && !(0.0..=1.0).contains(&kv)
    {
        return Err(out_of_range(
            "kv_usage",
            format!("kv_usage = {kv} is not a fraction in 0..1 (write 0.42, not 42)"),
        ));
    }
    let source = match opt_str("source", &r.source)? {
        Some(s) => b.labels.intern(s),
        None => b.default_source(),
    };
    let (spec_drafted_tokens, spec_accepted_tokens) = spec_counts(r)?;
    Ok(Iteration {
        source,
        iteration,
        start_ns,
        end_ns,
        schedule_ns: opt_duration("schedule_ns", &r.schedule_ns)?,
        forward_ns: opt_duration("forward_ns", &r.forward_ns)?,
        sample_ns: opt_duration("sample_ns", &r.sample_ns)?,
        num_reqs: opt_count("num_reqs", &r.num_reqs)?,
        num_prefill_reqs: opt_count("num_prefill_reqs", &r.num_prefill_reqs)?,
        num_decode_reqs: opt_count("num_decode_reqs", &r.num_decode_reqs)?,
        num_prefill_tokens: opt_count("num_prefill_tokens", &r.num_prefill_tokens)?,
        num_decode_tokens: opt_count("num_decode_tokens", &r.num_decode_tokens)?,
        num_waiting: opt_count("num_waiting", &r.num_waiting)?,
        kv_usage,
        num_preempted: opt_count("num_preempted", &r.num_preempted)?,
        spec_drafted_tokens,
        spec_accepted_tokens,
    })
}

fn stage(r: &RawRecord<'_>, request: u32) -> Check<Stage> {
    let name = req_str("stage", &r.stage, "stage", "its stage name")?;
    let kind = StageKind::parse(name).ok_or_else(|| Bad {
        problem: Problem::UnknownStage,
        field: "stage",
        reason: format!(
            "stage {name:?} is not one of queue, prefill, decode, preempted, kv_transfer, tokenize, detokenize, \
             other, waiting; use \"other\" for anything else"
        ),
    })?;
    let start_ns = req_time("start_ns", &r.start_ns, "stage")?;
    let end_ns = req_time("end_ns", &r.end_ns, "stage")?;
    ordered("start_ns", start_ns, "end_ns", end_ns)?;
    Ok(Stage {
        request,
        kind,
        start_ns,
        end_ns,
        iteration: opt_int("iteration", &r.iteration)?,
        iter_row: None,
        tokens: opt_count("tokens", &r.tokens)?,
        bytes: opt_bytes("bytes", &r.bytes)?,
        retries: opt_count("retries", &r.retries)?,
    })
}

fn candidate(c: &RawCandidate<'_>, b: &mut TraceBuilder) -> Check<Candidate> {
    let logprob = opt_logprob("candidates.logprob", &c.logprob)?
        .ok_or_else(|| missing("candidates.logprob", "candidate", "its logprob"))?;
    let token_id = opt_token_id("candidates.token_id", &c.token_id)?;
    Ok(Candidate {
        token_id: token_id.unwrap_or(NULL_U32),
        text: opt_str("candidates.text", &c.text)?.map_or(NO_STR, |s| b.intern_token_text(token_id, s)),
        logprob,
        special: Flag::from_opt(opt_bool("candidates.special", &c.special)?),
    })
}

/// Validates a token and its candidates into `candidates` (cleared first; a buffer reused across tokens).
fn token(r: &RawRecord<'_>, request: u32, b: &mut TraceBuilder, candidates: &mut Vec<Candidate>) -> Check<Token> {
    let index =
        opt_count("index", &r.index)?.ok_or_else(|| missing("index", "token", "its 0-based position in the output"))?;
    let emitted_ns = req_time("emitted_ns", &r.emitted_ns, "token")?;
    let rank = match opt_int("rank", &r.rank)? {
        None => NULL_U32,
        Some(k) if !(1..=MAX_COUNT).contains(&k) => {
            return Err(out_of_range("rank", format!("rank = {k} is not a 1-based rank")));
        }
        Some(k) => u32::try_from(k).unwrap_or(NULL_U32),
    };
    candidates.clear();
    match &r.candidates {
        None => {}
        Some(Val::Wrong(found)) => {
            return Err(wrong(
                "candidates",
                *found,
                "a list of {token_id, text, logprob, special} objects",
            ));
        }
        Some(Val::Ok(list)) => {
            for c in list {
                candidates.push(candidate(c, b)?);
            }
        }
    }
    let token_id = opt_token_id("token_id", &r.token_id)?;
    let logprob = opt_logprob("logprob", &r.logprob)?.unwrap_or(NULL_F64);
    let rank = if rank == NULL_U32 {
        rank_among(token_id, logprob, candidates)
    } else {
        rank
    };
    let spec = match opt_str("spec", &r.spec)? {
        None => SpecRole::Unknown,
        Some(name) => SpecRole::parse(name).ok_or_else(|| Bad {
            problem: Problem::OutOfRange,
            field: "spec",
            reason: format!(
                "spec {name:?} is not one of draft (an accepted draft token), bonus (the target model's own token \
                 ending a verify step), plain (a token of a step that verified no draft)"
            ),
        })?,
    };
    let spec_drafted = match opt_count("spec_drafted_tokens", &r.spec_drafted_tokens)? {
        None => NULL_U8,
        Some(n) => u8::try_from(n).ok().filter(|&n| n != NULL_U8).ok_or_else(|| {
            out_of_range(
                "spec_drafted_tokens",
                format!("spec_drafted_tokens = {n} on a token: a verify step proposes at most 254 drafts"),
            )
        })?,
    };
    Ok(Token {
        request,
        index,
        emitted_ns,
        iteration: opt_int("iteration", &r.iteration)?.unwrap_or(NULL_I64),
        iter_row: NULL_U32,
        token_id: token_id.unwrap_or(NULL_U32),
        text: opt_str("text", &r.text)?.map_or(NO_STR, |s| b.intern_token_text(token_id, s)),
        special: Flag::from_opt(opt_bool("special", &r.special)?),
        logprob,
        rank,
        received_ns: opt_time("received_ns", &r.received_ns)?.unwrap_or(NULL_I64),
        spec,
        spec_drafted,
    })
}

/// The choice a token record states (its logprob, its rank or the one its candidates give, its candidates), checked
/// as a load checks the token; `None` when the record breaks a rule (a load rejects it). `b` interns the candidates'
/// texts (a scratch builder, kept across records).
pub fn choice_of(r: &RawRecord<'_>, b: &mut TraceBuilder) -> Option<TokenChoice> {
    let mut candidates = Vec::new();
    let t = token(r, 0, b, &mut candidates).ok()?;
    Some(TokenChoice {
        logprob: t.logprob,
        rank: t.rank,
        candidates: candidates
            .iter()
            .map(|c| OwnedCandidate {
                token_id: c.token_id,
                text: b.texts.get(c.text).map(str::to_owned),
                logprob: c.logprob,
                special: c.special,
            })
            .collect(),
    })
}

/// The rank of the chosen token derived from its candidates (the format's rule for an absent `rank`): 1 + the
/// candidates more probable than it, when it is among them (by token id); [`NULL_U32`] when it
/// is not, since its rank is then only known to exceed their count.
fn rank_among(token_id: Option<u32>, logprob: f64, candidates: &[Candidate]) -> u32 {
    let chosen = match token_id {
        Some(id) => candidates.iter().find(|c| c.token_id == id),
        None => None,
    };
    let Some(chosen) = chosen else {
        return NULL_U32;
    };
    let lp = if logprob.is_nan() { chosen.logprob } else { logprob };
    let above = candidates
        .iter()
        .filter(|c| c.token_id != chosen.token_id && c.logprob > lp)
        .count();
    u32::try_from(above + 1).unwrap_or(NULL_U32)
}

/// The request label of a stage or token record, required.
/// A fraction in 0..1 (KV use, hit and acceptance rates).
fn opt_fraction(field: &'static str, v: &Field<f64>) -> Check<Option<f64>> {
    match opt_float(field, v)? {
        Some(x) if !(0.0..=1.0).contains(&x) => Err(out_of_range(
            field,
            format!("{field} = {x} is not a fraction in 0..1 (write 0.42, not 42)"),
        )),
        other => Ok(other),
    }
}

/// A rate or an average that cannot be negative (tokens per second, tokens per step).
fn opt_nonnegative(field: &'static str, v: &Field<f64>) -> Check<Option<f64>> {
    match opt_float(field, v)? {
        Some(x) if x < 0.0 => Err(out_of_range(field, format!("{field} = {x} is negative"))),
        other => Ok(other),
    }
}

fn sample(r: &RawRecord<'_>, b: &mut TraceBuilder) -> Check<Sample> {
    let time_ns = req_time("time_ns", &r.time_ns, "sample")?;
    let source = match opt_str("source", &r.source)? {
        Some(s) => b.labels.intern(s),
        None => b.default_source(),
    };
    let (spec_drafted_tokens, spec_accepted_tokens) = spec_counts(r)?;
    Ok(Sample {
        source,
        time_ns,
        interval_ns: opt_duration("interval_ns", &r.interval_ns)?,
        num_running: opt_count("num_running", &r.num_running)?,
        num_waiting: opt_count("num_waiting", &r.num_waiting)?,
        num_swapped: opt_count("num_swapped", &r.num_swapped)?,
        kv_usage: opt_fraction("kv_usage", &r.kv_usage)?,
        kv_tokens: opt_count("kv_tokens", &r.kv_tokens)?,
        prompt_throughput: opt_nonnegative("prompt_throughput", &r.prompt_throughput)?,
        generation_throughput: opt_nonnegative("generation_throughput", &r.generation_throughput)?,
        prefix_hit_rate: opt_fraction("prefix_hit_rate", &r.prefix_hit_rate)?,
        spec_accept_length: opt_nonnegative("spec_accept_length", &r.spec_accept_length)?,
        spec_accept_rate: opt_fraction("spec_accept_rate", &r.spec_accept_rate)?,
        num_prefill_reqs: opt_count("num_prefill_reqs", &r.num_prefill_reqs)?,
        num_prefill_tokens: opt_count("num_prefill_tokens", &r.num_prefill_tokens)?,
        cached_tokens: opt_count("cached_tokens", &r.cached_tokens)?,
        spec_drafted_tokens,
        spec_accepted_tokens,
        kv_transfers: opt_count("kv_transfers", &r.kv_transfers)?,
        kv_transfers_failed: opt_count("kv_transfers_failed", &r.kv_transfers_failed)?,
        kv_transfer_ms: opt_nonnegative("kv_transfer_ms", &r.kv_transfer_ms)?,
        kv_transfer_p90_ms: opt_nonnegative("kv_transfer_p90_ms", &r.kv_transfer_p90_ms)?,
        kv_transfer_bytes: opt_bytes("kv_transfer_bytes", &r.kv_transfer_bytes)?,
        num_bootstrapping: opt_count("num_bootstrapping", &r.num_bootstrapping)?,
        num_prealloc: opt_count("num_prealloc", &r.num_prealloc)?,
        num_transferring: opt_count("num_transferring", &r.num_transferring)?,
        num_inflight: opt_count("num_inflight", &r.num_inflight)?,
        num_retracted: opt_count("num_retracted", &r.num_retracted)?,
    })
}

/// A reference's record: what a re-scoring said of a token (its request's, at its index).
fn reference(r: &RawRecord<'_>, request: u32, b: &mut TraceBuilder) -> Check<Reference> {
    let index = opt_count("index", &r.index)?
        .ok_or_else(|| missing("index", "reference", "the 0-based position of the token it is of"))?;
    let rank = match opt_int("rank", &r.rank)? {
        None => None,
        Some(k) if !(1..=MAX_COUNT).contains(&k) => {
            return Err(out_of_range("rank", format!("rank = {k} is not a 1-based rank")));
        }
        Some(k) => u32::try_from(k).ok(),
    };
    let listed = opt_count("top_k", &r.top_k)?;
    if let (Some(k), Some(n)) = (rank, listed)
        && k > n
    {
        return Err(out_of_range(
            "rank",
            format!("rank = {k} beyond the {n} tokens listed (top_k): leave rank out for a token not listed"),
        ));
    }
    let top_token_id = opt_token_id("token_id", &r.token_id)?;
    Ok(Reference {
        request,
        index,
        token: NULL_U32,
        logprob: opt_logprob("logprob", &r.logprob)?,
        rank,
        listed,
        top_token_id,
        top_text: opt_str("text", &r.text)?.map_or(NO_STR, |s| b.intern_token_text(top_token_id, s)),
        top_special: opt_bool("special", &r.special)?,
        top_logprob: opt_logprob("top_logprob", &r.top_logprob)?,
    })
}

fn request_of(r: &RawRecord<'_>, record: &'static str, b: &mut TraceBuilder) -> Check<u32> {
    let id = req_str("request_id", &r.request_id, record, "the request_id of its request")?;
    Ok(b.intern_request_id(id))
}

/// Validates one record and adds it to the builder, or records why it was rejected.
pub fn ingest(r: &RawRecord<'_>, place: Place, b: &mut TraceBuilder) {
    b.report.records += 1;
    let kind = match opt_str("kind", &r.kind) {
        Ok(Some(k)) => KINDS.iter().find(|&&known| known == k).copied(),
        _ => None,
    };
    let Some(kind) = kind else {
        let reason = match &r.kind {
            None => "missing field kind: every record needs kind = meta, request, iteration, stage, token or sample"
                .to_owned(),
            Some(Val::Ok(k)) => format!("kind {k:?} is not one of meta, request, iteration, stage, token, sample"),
            Some(Val::Wrong(found)) => format!("kind is {found}; expected one of \"request\", \"token\", ..."),
        };
        b.report.reject(Rejection {
            place,
            problem: Problem::UnknownKind,
            record: None,
            field: Some("kind"),
            reason,
        });
        return;
    };
    let result: Check<()> = match kind {
        "meta" => meta(r).map(|m| b.set_meta(m, place)),
        "request" => match request(r, b) {
            Ok(row) => {
                b.add_request(row, place);
                Ok(())
            }
            Err(bad) => {
                if let Ok(Some(id)) = opt_str("request_id", &r.request_id) {
                    let id = b.labels.intern(id);
                    b.note_rejected_request(id, place);
                }
                Err(bad)
            }
        },
        "iteration" => iteration(r, b).map(|row| b.add_iteration(row, place)),
        "sample" => sample(r, b).map(|row| b.add_sample(row)),
        "stage" => request_of(r, "stage", b)
            .and_then(|req| stage(r, req))
            .map(|row| b.add_stage(row, place)),
        "reference" => request_of(r, "reference", b)
            .and_then(|req| reference(r, req, b))
            .map(|row| b.add_reference(row, place)),
        _ => {
            let mut candidates = std::mem::take(&mut b.candidate_buffer);
            let result = request_of(r, "token", b)
                .and_then(|req| token(r, req, b, &mut candidates))
                .map(|row| b.add_token(row, candidates.drain(..), place));
            b.candidate_buffer = candidates;
            result
        }
    };
    if let Err(bad) = result {
        b.report.reject(Rejection {
            place,
            problem: bad.problem,
            record: Some(kind),
            field: Some(bad.field),
            reason: bad.reason,
        });
    }
}

#[cfg(test)]
mod tests;
