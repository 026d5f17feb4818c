//! A llama-server log's records made of what its lines said ([`Log`]): a request, its tokens and its prefill chunks
//! per task, an iteration per step, the notes of what the log lacks. A whole read places everything once; a watch's
//! look places what is not kept from the look before ([`super::frozen`]).

use std::path::Path;

use super::{DraftTotals, Log, SOURCE, Task, chunk_tokens};
use crate::import::{Sink, ok, record, text};
use crate::ingest::raw::Val;
use crate::trace::report::Problem;

/// What placing a task's or a step's record needs of the whole log: each held step's end, its prefill chunks per
/// task and its drafts and accepted drafts.
pub(super) struct Layout {
    /// A step ends where its last sampled token was read (or its decode returned), and never after the next step
    /// starts.
    ends: Vec<i64>,
    /// Each held step's prefill chunks of held tasks: (task, tokens).
    prefill: Vec<Vec<(i64, i64)>>,
    /// Each held step's (drafted, accepted) over held tasks; empty when no slot speculated.
    spec: Vec<(u32, u32)>,
}

impl Layout {
    pub(super) fn of(log: &Log) -> Self {
        let ends = log
            .steps
            .iter()
            .enumerate()
            .map(|(i, s)| match log.steps.get(i + 1) {
                Some(next) => s.end_us.min(next.start_us).max(s.start_us),
                None => s.end_us,
            })
            .collect();
        let mut prefill: Vec<Vec<(i64, i64)>> = vec![Vec::new(); log.steps.len()];
        for (&id, t) in &log.tasks {
            for (step, tokens) in chunk_tokens(t) {
                if let Some(k) = held(log, step) {
                    prefill[k].push((id, tokens));
                }
            }
        }
        let mut spec = vec![(0, 0); if log.speculative { log.steps.len() } else { 0 }];
        for t in log.tasks.values() {
            for &(step, drafted, accepted) in &t.verified {
                if let Some(e) = held(log, step).and_then(|k| spec.get_mut(k)) {
                    *e = (e.0 + drafted, e.1 + accepted);
                }
            }
        }
        Layout { ends, prefill, spec }
    }
}

/// The place of step `step` among the steps held (a chunk may name one forgotten, or the one still to come).
fn held(log: &Log, step: u64) -> Option<usize> {
    step.checked_sub(log.first_step)
        .and_then(|k| usize::try_from(k).ok())
        .filter(|&k| k < log.steps.len())
}

/// Adds the log's records, its times moved by `anchor_us`.
pub(super) fn place(log: &Log, anchor_us: i64, path: &Path, sink: &mut Sink<'_>) {
    place_meta(sink);
    let layout = Layout::of(log);
    for (&id, t) in &log.tasks {
        place_task(log, &layout, anchor_us, id, t, sink);
    }
    place_steps(log, &layout, anchor_us, log.first_step..u64::MAX, sink);
    place_notes(log, path, sink);
}

/// Adds what a watch's look does not keep from the look before: the tasks `kept` does not hold, the steps from
/// `steps_from` on, and the notes.
pub(super) fn place_rest(
    log: &Log,
    layout: &Layout,
    anchor_us: i64,
    path: &Path,
    sink: &mut Sink<'_>,
    kept: impl Fn(i64) -> bool,
    steps_from: u64,
) {
    for (&id, t) in log.tasks.iter().filter(|(id, _)| !kept(**id)) {
        place_task(log, layout, anchor_us, id, t, sink);
    }
    place_steps(log, layout, anchor_us, steps_from..u64::MAX, sink);
    place_notes(log, path, sink);
}

/// The trace's engine and clock.
pub(super) fn place_meta(sink: &mut Sink<'_>) {
    let mut meta = record("meta");
    meta.engine = text("llama.cpp");
    meta.clock = text(crate::trace::CLOCK_ANCHORED);
    meta.eos_token_ids = None;
    sink.add(&meta, 0);
    sink.b.report.records -= 1;
}

/// Adds task `id`'s request, tokens and prefill chunks (none for a posting never launched).
pub(super) fn place_task(log: &Log, layout: &Layout, anchor_us: i64, id: i64, t: &Task, sink: &mut Sink<'_>) {
    let ns = |us: i64| (anchor_us + us).saturating_mul(1_000);
    let Some(launched) = t.launched_us else {
        return; // a posting never launched: the loop's own tasks, or a request still queued when the log ends
    };
    let rid = format!("task-{id}");
    let mut r = record("request");
    r.request_id = text(rid.as_str());
    r.source = text(SOURCE);
    let arrival = t.posted_us.unwrap_or(launched).min(launched);
    r.arrival_ns = ok(ns(arrival));
    let first_chunk_step = t.chunks.first().map(|&(_, s)| s).and_then(|s| log.step(s));
    let scheduled = first_chunk_step.map_or(launched, |s| s.start_us).max(arrival);
    // Without the posting (the default level logs none) nor a step, the arrival is the launch itself: the time
    // queued before it is unknown, not zero.
    if t.posted_us.is_some() || first_chunk_step.is_some() {
        r.scheduled_ns = ok(ns(scheduled));
    }
    let first_token_us = t
        .tokens
        .iter()
        .find(|tok| tok.0 == 1)
        .map(|tok| tok.3)
        .or_else(|| {
            // The default log: the first token comes at the end of the prompt's processing.
            t.prompt_ms.map(|ms| launched + (ms * 1e3).round() as i64)
        })
        .map(|f| f.max(scheduled));
    r.first_token_ns = first_token_us.map(|f| Val::Ok(ns(f)));
    let finished = t
        .released_us
        .or_else(|| t.tokens.last().map(|tok| tok.3))
        .map(|f| f.max(first_token_us.unwrap_or(scheduled)));
    r.finished_ns = finished.map(|f| Val::Ok(ns(f)));
    let n_gen = t.n_gen.or_else(|| t.tokens.iter().map(|tok| tok.0).max());
    let input = t.input_tokens.or_else(|| {
        // `stop processing: n_tokens` holds the prompt and every output token but the last.
        t.stop_n_tokens.zip(n_gen).map(|(n, g)| n - g + 1).filter(|&i| i > 0)
    });
    r.input_tokens = input.map(Val::Ok);
    // The cache's share: the first chunk's start (`-lv 4`), else the prompt less what was computed.
    let cached = t
        .cached_tokens
        .or_else(|| input.zip(t.prompt_computed).map(|(i, c)| i - c))
        .filter(|&c| c >= 0 && input.is_none_or(|i| c <= i));
    r.cached_tokens = cached.map(Val::Ok);
    r.output_tokens = n_gen.map(Val::Ok);
    r.finish_reason = if t.cancelled && t.prompt_ms.is_none() {
        text("abort")
    } else {
        t.stop.and_then(text)
    };
    r.server_ttft_ns = t.prompt_ms.and_then(crate::import::ns_from_ms).map(Val::Ok);
    r.server_decode_ns = t.eval_ms.and_then(crate::import::ns_from_ms).map(Val::Ok);
    // Speculation: the task's totals as its end line says them, else summed over its verify steps.
    if let Some((accepted, drafted)) = t.draft_totals.or((!t.verified.is_empty()).then(|| summed(t))) {
        r.spec_accepted_tokens = ok(i64::from(accepted));
        r.spec_drafted_tokens = ok(i64::from(drafted));
    }
    sink.add(&r, t.place.at);
    let roles = spec_roles(&t.tokens, &t.verified, log.speculative);
    // One record for all the task's tokens, each field set anew, its strings borrowed: a watch places every
    // task still running at each look.
    let mut k = record("token");
    k.request_id = text(rid.as_str());
    for ((n, id_tok, piece, us, step), (role, drafted)) in t.tokens.iter().zip(roles) {
        k.index = ok(n - 1);
        k.emitted_ns = ok(ns(*us));
        k.iteration = step.map(|s| Val::Ok(s as i64));
        k.token_id = ok(*id_tok);
        k.text = text(piece.as_str());
        k.spec = role.and_then(text);
        k.spec_drafted_tokens = drafted.map(|d| Val::Ok(i64::from(d)));
        sink.add(&k, t.place.at);
    }
    let mut st = record("stage");
    st.request_id = text(rid.as_str());
    st.stage = text("prefill");
    for &(_, step) in &t.chunks {
        let (Some(s), Some(k)) = (log.step(step), held(log, step)) else {
            continue;
        };
        let Some(&(_, tokens)) = layout.prefill[k].iter().find(|(task, _)| *task == id) else {
            continue;
        };
        st.start_ns = ok(ns(s.start_us));
        st.end_ns = ok(ns(layout.ends[k]));
        st.iteration = ok(step as i64);
        st.tokens = ok(tokens);
        sink.add(&st, s.place.at);
    }
}

/// A task's (accepted, drafted) summed over its verify steps.
fn summed(t: &Task) -> DraftTotals {
    t.verified
        .iter()
        .fold((0, 0), |(a, d), &(_, drafted, accepted)| (a + accepted, d + drafted))
}

/// Adds the held steps numbered in `numbers`, one record for all of them, each field set anew: a record is a few
/// kilobytes, and a watch places steps at each look.
pub(super) fn place_steps(
    log: &Log,
    layout: &Layout,
    anchor_us: i64,
    numbers: std::ops::Range<u64>,
    sink: &mut Sink<'_>,
) {
    let ns = |us: i64| (anchor_us + us).saturating_mul(1_000);
    let i64_of = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
    let mut it = record("iteration");
    it.source = text(SOURCE);
    let skip = usize::try_from(numbers.start.saturating_sub(log.first_step)).unwrap_or(usize::MAX);
    for (k, s) in log.steps.iter().enumerate().skip(skip) {
        let i = log.first_step + k as u64;
        if i >= numbers.end {
            break;
        }
        let chunks = layout.prefill[k].as_slice();
        it.iteration = ok(i64::try_from(i).unwrap_or(i64::MAX));
        it.start_ns = ok(ns(s.start_us));
        it.end_ns = ok(ns(layout.ends[k]));
        // A speculating slot feeds its own token and its drafts: all are decode tokens the step computes.
        let fed: u64 = s.decode_tasks.iter().map(|&(_, d)| 1 + u64::from(d)).sum();
        it.num_decode_reqs = ok(i64_of(s.decode_tasks.len()));
        it.num_decode_tokens = ok(i64::try_from(fed).unwrap_or(i64::MAX));
        if log.speculative {
            let (drafted, accepted) = layout.spec[k];
            it.spec_drafted_tokens = ok(i64::from(drafted + s.gone.drafted));
            it.spec_accepted_tokens = ok(i64::from(accepted + s.gone.accepted));
        }
        let prefill_reqs = chunks.len() + s.gone.prefill_reqs as usize;
        it.num_prefill_reqs = ok(i64_of(prefill_reqs));
        it.num_prefill_tokens = ok(chunks.iter().map(|c| c.1).sum::<i64>() + s.gone.prefill_tokens);
        it.num_reqs = ok(i64_of(s.decode_tasks.len() + prefill_reqs));
        sink.add(&it, s.place.at);
    }
}

/// The notes of what the log lacks and how it was timed, and its rejection when it gave nothing.
fn place_notes(log: &Log, path: &Path, sink: &mut Sink<'_>) {
    let name = path.display();
    let requests = log.tasks.values().filter(|t| t.launched_us.is_some()).count();
    let has_steps = !log.steps.is_empty();
    if log.lines > 0 && requests == 0 && !has_steps {
        sink.reject(
            0,
            Problem::Malformed,
            None,
            format!(
                "{name}: no request or step in {} lines of llama-server's log; it needs the default level at least \
                 (`processing task`, `stop processing`)",
                log.lines
            ),
        );
    }
    if log.untimed > 0 && requests == 0 {
        sink.note(format!(
            "{name}: {} lines have no timestamp: start llama-server without --no-log-timestamps",
            log.untimed
        ));
    }
    if !has_steps && requests > 0 {
        sink.note(format!(
            "{name}: llama-server's log at its default level gives requests but no steps, and no time queued \
             before a slot took them; run it with -lv 5 (or -v) for every batch, prefill chunk and token"
        ));
    }
    if log.skipped > 0 {
        sink.note(format!(
            "{name}: {} lines that are not llama-server's request and batch lines were skipped",
            log.skipped
        ));
    }
    // Tasks whose end line's draft totals differ from the sum of their verify steps.
    let mut mismatched = log.tasks.iter().filter_map(|(&id, t)| {
        let sum = summed(t);
        t.draft_totals
            .filter(|&line| t.launched_us.is_some() && !t.verified.is_empty() && line != sum)
            .map(|line| (id, line, sum))
    });
    if let Some((id, (la, ld), (sa, sd))) = mismatched.next() {
        sink.note(format!(
            "{name}: {} tasks' draft totals (`draft acceptance`) differ from the sum of their verify steps (`add \
             accepted tokens`), e.g. task-{id}: {la} accepted of {ld} against {sa} of {sd}; the totals are the task \
             lines'",
            mismatched.count() + 1
        ));
    }
    sink.note(format!(
        "{name}: llama-server counts time from its start; placed on the wall clock at the file's last change. Joined \
         with a recording of the same run, the pairs place it exactly"
    ));
}

/// What each of a task's tokens was in speculative decoding, with the drafts of its step on the step's first token:
/// in a verify step, the first `accepted` tokens are accepted drafts and the next the target's own (the bonus; a
/// step cut by a stop has fewer tokens); a token of a step that verified nothing is plain. Unknown for all when the
/// server never speculated (`speculative` false).
fn spec_roles(
    tokens: &[(i64, i64, String, i64, Option<u64>)],
    verified: &[(u64, u32, u32)],
    speculative: bool,
) -> Vec<(Option<&'static str>, Option<u32>)> {
    if !speculative {
        return vec![(None, None); tokens.len()];
    }
    let mut out = Vec::with_capacity(tokens.len());
    let mut k = 0;
    while k < tokens.len() {
        let step = tokens[k].4;
        let end = tokens[k..]
            .iter()
            .position(|tok| tok.4 != step || step.is_none())
            .map_or(tokens.len(), |n| k + n.max(1));
        let outcome = step.and_then(|s| verified.iter().find(|v| v.0 == s));
        for (j, _) in tokens[k..end].iter().enumerate() {
            let role = match outcome {
                Some(&(_, _, accepted)) if (j as u32) < accepted => "draft",
                Some(_) => "bonus",
                None => "plain",
            };
            let drafted = outcome.filter(|_| j == 0).map(|&(_, d, _)| d);
            out.push((Some(role), drafted));
        }
        k = end;
    }
    out
}
