//! One request's spans gathered, and mapped to its request, stage and token records.

use super::*;

/// One `schedule` event as seen by one request.
#[derive(Debug, Clone)]
pub(super) struct Scheduled {
    pub(super) bid: u32,
    pub(super) time_ns: i64,
    pub(super) batch_size: Option<i64>,
    pub(super) prebuilt: bool,
    /// A prefill or mixed batch.
    pub(super) extend: bool,
    /// The end of the slice that carries it, when that slice is the step's own (not a thread span flushed at the
    /// request's end).
    pub(super) step_end_ns: Option<i64>,
}

/// A request's spans, gathered before mapping.
pub(super) struct RequestSpans<'a> {
    pub(super) root: &'a Slim,
    pub(super) scheduler: Option<&'a Slim>,
    pub(super) slices: Vec<&'a Slim>,
    pub(super) tokenize: Vec<&'a Slim>,
}

/// A batch of one scheduler, assembled from its members' events.
#[derive(Debug, Default)]
pub(super) struct Batch {
    pub(super) start_ns: i64,
    pub(super) step_end_ns: Option<i64>,
    pub(super) batch_size: Option<i64>,
    pub(super) prefill: Vec<usize>,
    pub(super) decode: Vec<usize>,
    /// The prompt tokens its prefill members computed, when each computed its whole prompt in it.
    pub(super) prefill_tokens: Option<i64>,
}

/// The spans of one request (one trace): its root, its scheduler's thread span (the lowest rank's when several) and
/// the slices under it, and the tokenizer's slices.
pub(super) fn gather<'a>(root: &'a Slim, trace: &'a [Slim]) -> RequestSpans<'a> {
    let children_of = |id: u64| -> Vec<&'a Slim> { trace.iter().filter(|s| s.parent == id && id != 0).collect() };
    let threads = children_of(root.id);
    let scheduler = threads
        .iter()
        .copied()
        .filter(|s| s.role == Role::Scheduler)
        .min_by_key(|s| s.scheduler.as_ref().map(|s| s.1));
    let descendants = |top: &'a Slim| {
        let mut out = Vec::new();
        // Each span once: a corrupt file's parent ids can form a cycle (found by the `import` fuzz target, which
        // made this walk grow without end).
        let mut seen = std::collections::HashSet::from([top.id]);
        let mut stack = vec![top.id];
        while let Some(id) = stack.pop() {
            for c in children_of(id) {
                if seen.insert(c.id) {
                    stack.push(c.id);
                    out.push(c);
                }
            }
        }
        out
    };
    let slices = scheduler.map(descendants).unwrap_or_default();
    let tokenize = threads
        .iter()
        .filter(|s| s.role != Role::Scheduler)
        .flat_map(|s| descendants(s))
        .filter(|s| s.role == Role::Tokenize)
        .collect();
    RequestSpans {
        root,
        scheduler,
        slices,
        tokenize,
    }
}

/// The `schedule` events of a request, on its scheduler's slices and thread span, in time order.
pub(super) fn scheduled_of(r: &RequestSpans<'_>) -> Vec<Scheduled> {
    let mut out = Vec::new();
    for span in r.slices.iter().copied().chain(r.scheduler) {
        for e in span.events.iter().filter(|e| e.bid != RETRACT) {
            let Some(time_ns) = e.time_ns else {
                continue;
            };
            out.push(Scheduled {
                bid: e.bid,
                time_ns,
                batch_size: e.batch_size,
                prebuilt: e.prebuilt,
                extend: e.extend,
                step_end_ns: if span.role.is_step() { span.end_ns } else { None },
            });
        }
    }
    out.sort_by_key(|e| (e.time_ns, e.bid));
    out.dedup_by_key(|e| e.bid);
    out
}

/// A slice that ends with a prefill chunk's result (SGLang 0.5.3's `prefill`; later, `chunked_prefill` and
/// `prefill_forward`).
pub(super) fn is_prefill(role: Role) -> bool {
    matches!(role, Role::LegacyPrefill | Role::ChunkedPrefill | Role::PrefillForward)
}

/// A slice that ends with a decode batch's result.
pub(super) fn is_decode(role: Role) -> bool {
    matches!(role, Role::LegacyDecode | Role::DecodeLoop)
}

/// Whether a request's slices lie flat under its scheduler thread span, as SGLang 0.5.3 and 0.5.9 lay them (0.5.10
/// and later nest the chunks under `prefill_forward` and the decode steps under `decode_forward`).
pub(super) fn flat(r: &RequestSpans<'_>) -> bool {
    let scheduler = r.scheduler.map(|s| s.id);
    r.slices.iter().any(|s| {
        s.role == Role::LegacyPrefill
            || (matches!(s.role, Role::ChunkedPrefill | Role::DecodeLoop) && Some(s.parent) == scheduler)
    })
}

/// A request traced as SGLang 0.5.3 does (no `schedule` events; `process req`, `prefill` and `decode loop`
/// slices): one event per result slice, at its start and ending at its end, so that its tokens are found as for
/// later releases. Those releases name no batch, and each member of a batch reads the clock for itself as the
/// scheduler walks the batch (hundreds of µs to ms apart): the events are the request's own, in no batch. `None` for
/// a request of a later release.
pub(super) fn legacy_events(r: &RequestSpans<'_>, bid_names: &mut Vec<String>) -> Option<Vec<Scheduled>> {
    if !flat(r) {
        return None;
    }
    let mut slices: Vec<&Slim> = r
        .slices
        .iter()
        .copied()
        .filter(|s| is_prefill(s.role) || is_decode(s.role))
        .collect();
    slices.sort_by_key(|s| (s.start_ns, s.end_ns));
    let mut out = Vec::new();
    for s in slices {
        let (Some(start), Some(end)) = (s.start_ns, s.end_ns) else {
            continue;
        };
        let bid = u32::try_from(bid_names.len()).unwrap_or(RETRACT - 1);
        bid_names.push(format!("slice-{:016x}", s.id));
        out.push(Scheduled {
            bid,
            time_ns: start,
            batch_size: None,
            prebuilt: false,
            extend: is_prefill(s.role),
            step_end_ns: Some(end),
        });
    }
    Some(out)
}

/// The prompt tokens a request computed in its one prefill batch (prompt minus cached), when its prefill was not
/// chunked: then the whole count belongs to that batch. Chunks carry no counts, so a chunked prefill's are unknown.
pub(super) fn whole_prefill_tokens(r: &RequestSpans<'_>) -> Option<i64> {
    let forwards = r.slices.iter().filter(|s| s.role == Role::PrefillForward).count();
    let chunked = r.slices.iter().any(|s| s.role == Role::ChunkedPrefill);
    if forwards != 1 || chunked {
        return None;
    }
    let info = r.root.root.as_ref()?;
    Some(info.prompt? - info.cached.unwrap_or(0)).filter(|&n| n >= 0)
}

/// When the request's prefill ended: the end of its last `prefill_forward`.
pub(super) fn prefill_end_of(r: &RequestSpans<'_>) -> Option<i64> {
    r.slices
        .iter()
        .filter(|s| matches!(s.role, Role::PrefillForward | Role::LegacyPrefill))
        .filter_map(|s| s.end_ns)
        .max()
}

/// What a request's mapping needs of the whole trace.
pub(super) struct Mapping<'a> {
    pub(super) events: &'a [Scheduled],
    pub(super) prefill_end: Option<i64>,
    pub(super) source: &'a str,
    pub(super) iteration_of: &'a HashMap<(&'a str, u32), (i64, i64)>,
    pub(super) trace_id: &'a str,
}

/// The first finish reason of SGLang's `gen_ai.response.finish_reasons`, a string holding a JSON array
/// (`"[\"length\"]"`), or a plain string.
pub(super) fn finish_reason(s: &str) -> Option<String> {
    let first = match serde_json::from_str::<serde_json::Value>(s) {
        Ok(serde_json::Value::Array(items)) => items.first().and_then(|v| match v {
            serde_json::Value::String(s) => Some(s.clone()),
            serde_json::Value::Object(o) => o.get("type").and_then(|t| t.as_str()).map(str::to_owned),
            _ => None,
        }),
        Ok(serde_json::Value::String(s)) => Some(s),
        _ => Some(s.to_owned()),
    }?;
    Some(match first.as_str() {
        "stop" | "length" | "abort" | "error" => first,
        other if other.contains("abort") => "abort".to_owned(),
        _ => first,
    })
}
