//! Gathering spans as they are read, and mapping them once every file is read: requests, and each scheduler's
//! batches as its steps.

use std::collections::{BTreeMap, HashMap};

use super::emit::map_request;
use super::*;
use super::{Span, attr};
use super::{
    request::{
        Batch, Mapping, RequestSpans, Scheduled, finish_reason, gather, legacy_events, prefill_end_of, scheduled_of,
        whole_prefill_tokens,
    },
    tokens::results_of,
};
use crate::import::{Sink, ns_from_secs, ok, record, text};
use crate::trace::report::Problem;

impl Collector {
    /// Keeps what the mapping needs of one span.
    pub fn push(&mut self, s: Span) {
        let role = if is_root(&s) {
            Role::Root
        } else if is_scheduler(&s) {
            Role::Scheduler
        } else if s.attr("thread_label").is_some() || s.name.contains("(host:") {
            Role::Thread
        } else {
            match s.name.as_str() {
                "prefill_waiting" => Role::PrefillWaiting,
                "prefill_forward" => Role::PrefillForward,
                "chunked_prefill" => Role::ChunkedPrefill,
                "decode_loop" => Role::DecodeLoop,
                "prefill" => Role::LegacyPrefill,
                "decode loop" => Role::LegacyDecode,
                "process req" | "request_process" => Role::LegacyQueue,
                "spec_verify" => Role::SpecVerify,
                "tokenize" => Role::Tokenize,
                _ => Role::Other,
            }
        };
        let next = u32::try_from(self.trace_ids.len()).unwrap_or(u32::MAX);
        let trace = *self.traces.entry(s.trace_id.clone()).or_insert_with(|| {
            self.trace_ids.push(s.trace_id.clone());
            next
        });
        let mut events = Vec::new();
        for e in &s.events {
            let bid = match e.name.as_str() {
                "retract" => RETRACT,
                "schedule" => {
                    let Some(bid) = attr(&e.attributes, "bid").and_then(|a| a.as_str()) else {
                        continue;
                    };
                    let n = u32::try_from(self.bid_names.len()).unwrap_or(RETRACT - 1);
                    *self.bids.entry(bid.to_owned()).or_insert_with(|| {
                        self.bid_names.push(bid.to_owned());
                        n
                    })
                }
                _ => continue,
            };
            events.push(SlimEvent {
                bid,
                time_ns: e.time_ns,
                batch_size: attr(&e.attributes, "batch_size").and_then(super::super::Attr::as_i64),
                prebuilt: attr(&e.attributes, "forward_mode").and_then(|a| a.as_str()) == Some("prebuilt"),
                extend: attr(&e.attributes, "forward_mode").and_then(|a| a.as_str()) == Some("prefill"),
            });
        }
        let root = (role == Role::Root).then(|| {
            let secs = |key: &str| s.attr(key).and_then(super::super::Attr::as_f64).and_then(ns_from_secs);
            let int = |key: &str| s.attr(key).and_then(super::super::Attr::as_i64);
            let string = |key: &str| s.attr(key).and_then(|a| a.as_str()).map(str::to_owned);
            Box::new(RootInfo {
                rid: string("rid"),
                ttft_ns: secs("gen_ai.latency.time_to_first_token"),
                e2e_ns: secs("gen_ai.latency.e2e"),
                prompt: int("gen_ai.usage.prompt_tokens"),
                cached: int("gen_ai.usage.cached_tokens"),
                completion: int("gen_ai.usage.completion_tokens"),
                max_tokens: int("gen_ai.request.max_tokens"),
                top_k: int("gen_ai.request.top_k"),
                temperature: s
                    .attr("gen_ai.request.temperature")
                    .and_then(super::super::Attr::as_f64),
                top_p: s.attr("gen_ai.request.top_p").and_then(super::super::Attr::as_f64),
                model: string("gen_ai.response.model"),
                finish_reason: string("gen_ai.response.finish_reasons").and_then(|f| finish_reason(&f)),
            })
        });
        let scheduler = (role == Role::Scheduler).then(|| {
            let r = |k: &str| s.attr(k).and_then(super::super::Attr::as_i64).unwrap_or(0);
            Box::new((source_name(&s), (r("dp_rank"), r("pp_rank"), r("tp_rank"))))
        });
        self.spans.push(Slim {
            line: Line {
                file: self.file,
                at: s.line,
            },
            trace,
            id: id_of(&s.span_id),
            parent: id_of(&s.parent_span_id),
            role,
            start_ns: s.start_ns,
            end_ns: s.end_ns,
            events,
            error: s.error,
            root,
            scheduler,
        });
    }

    /// Maps every SGLang request gathered; the spans of traces without a request root are counted as ignored.
    pub fn finish(mut self, sink: &mut Sink<'_>) -> Mapped {
        let mut mapped = Mapped::default();
        self.spans.sort_by_key(|s| s.trace);
        let spans = &self.spans;
        let mut requests: Vec<RequestSpans<'_>> = Vec::new();
        for trace in spans.chunk_by(|a, b| a.trace == b.trace) {
            let roots: Vec<&Slim> = trace.iter().filter(|s| s.role == Role::Root).collect();
            let Some(&root) = roots.first() else {
                if trace.iter().any(|s| s.role != Role::Other) {
                    // SGLang's own spans whose request root is in none of the files given.
                    mapped.orphans += trace.len();
                    mapped.orphan_traces += 1;
                } else {
                    mapped.ignored += trace.len();
                }
                continue;
            };
            for extra in &roots[1..] {
                reject(
                    sink,
                    extra.line,
                    Problem::Duplicate,
                    Some("traceId"),
                    format!(
                        "a second SGLang request root (span {:016x}) in trace {}; the first was kept",
                        extra.id, self.trace_ids[extra.trace as usize]
                    ),
                );
            }
            requests.push(gather(root, trace));
        }
        // In the order of arrival, so that the records (and duplicates) come out the same whatever the file's order.
        requests.sort_by_key(|r| (r.root.start_ns, r.root.line));
        mapped.requests = requests.len();
        if requests.is_empty() {
            return mapped;
        }
        // SGLang 0.5.3 writes no `schedule` events: a request's tokens come from its own result slices,
        // and no batch is known.
        let mut bid_names = self.bid_names.clone();
        let legacy: Vec<Option<Vec<Scheduled>>> = requests.iter().map(|r| legacy_events(r, &mut bid_names)).collect();
        let is_legacy: Vec<bool> = legacy.iter().map(Option::is_some).collect();
        if is_legacy.iter().any(|&l| l) {
            sink.note(
                "SGLang 0.5.3 and 0.5.9 lay a request's slices flat under its scheduler: its tokens are at the ends of \
                 its own result slices; 0.5.3 names no batch, so its traces have no engine steps"
                    .to_owned(),
            );
        }
        let bid_names = &bid_names;
        let trace_ids = &self.trace_ids;

        // Every request's schedule events, and the batches of each scheduler.
        // The batches come from the `schedule` events; a request whose slices lie flat under its scheduler (0.5.3,
        // 0.5.9) finds its tokens in its own slices.
        let events: Vec<Vec<Scheduled>> = requests.iter().map(scheduled_of).collect();
        let token_events: Vec<Vec<Scheduled>> = legacy
            .into_iter()
            .zip(&events)
            .map(|(legacy, real)| legacy.unwrap_or_else(|| real.clone()))
            .collect();
        let prefill_end: Vec<Option<i64>> = requests.iter().map(prefill_end_of).collect();
        let whole_prefill: Vec<Option<i64>> = requests.iter().map(whole_prefill_tokens).collect();
        let sources: Vec<String> = requests
            .iter()
            .map(|r| {
                r.scheduler
                    .and_then(|s| s.scheduler.as_ref())
                    .map_or_else(|| crate::trace::DEFAULT_SOURCE.to_owned(), |s| s.0.clone())
            })
            .collect();
        // When each batch's result was processed, from the members whose own slices say it: under the overlap
        // scheduler the slice that carries a batch's `schedule` event ends with the batch before.
        let mut result_of: HashMap<(&str, u32), i64> = HashMap::new();
        for (i, r) in requests.iter().enumerate() {
            let completion = r.root.root.as_ref().and_then(|info| info.completion);
            if is_legacy[i] {
                continue; // its slices say when its tokens came, not which batch gave each
            }
            for (bid, end) in results_of(r, &events[i], completion) {
                let at = result_of.entry((sources[i].as_str(), bid)).or_insert(end);
                *at = (*at).min(end);
            }
        }
        let mut batches: BTreeMap<&str, HashMap<u32, Batch>> = BTreeMap::new();
        for (i, evs) in events.iter().enumerate() {
            for e in evs {
                let batch = batches
                    .entry(sources[i].as_str())
                    .or_default()
                    .entry(e.bid)
                    .or_insert_with(|| Batch {
                        start_ns: e.time_ns,
                        prefill_tokens: Some(0),
                        ..Batch::default()
                    });
                batch.start_ns = batch.start_ns.min(e.time_ns);
                batch.batch_size = batch.batch_size.max(e.batch_size);
                if let Some(end) = e.step_end_ns.filter(|&end| end > e.time_ns) {
                    batch.step_end_ns = Some(batch.step_end_ns.map_or(end, |b| b.min(end)));
                }
                let in_prefill = prefill_end[i].is_none_or(|end| e.time_ns < end);
                let members = if in_prefill {
                    &mut batch.prefill
                } else {
                    &mut batch.decode
                };
                if !members.contains(&i) {
                    members.push(i);
                    if in_prefill {
                        batch.prefill_tokens = match (batch.prefill_tokens, whole_prefill[i]) {
                            (Some(sum), Some(n)) => Some(sum + n),
                            _ => None,
                        };
                    }
                }
            }
        }
        // Number each scheduler's batches in time order; a batch without a step of its own ends at the next one.
        let mut iteration_of: HashMap<(&str, u32), (i64, i64)> = HashMap::new();
        for (source, source_batches) in &batches {
            let mut order: Vec<(u32, &Batch)> = source_batches.iter().map(|(bid, b)| (*bid, b)).collect();
            order.sort_by(|(x, a), (y, b)| {
                (a.start_ns, &bid_names[*x as usize]).cmp(&(b.start_ns, &bid_names[*y as usize]))
            });
            for (n, (bid, batch)) in order.iter().enumerate() {
                let next_start = order.get(n + 1).map(|(_, b)| b.start_ns);
                let members_end = batch
                    .prefill
                    .iter()
                    .chain(&batch.decode)
                    .filter_map(|&i| requests[i].root.end_ns)
                    .min();
                let end = result_of
                    .get(&(*source, *bid))
                    .copied()
                    .or(batch.step_end_ns)
                    .or(next_start)
                    .or(members_end)
                    .unwrap_or(batch.start_ns)
                    .max(batch.start_ns);
                let index = i64::try_from(n).unwrap_or(i64::MAX);
                iteration_of.insert((source, *bid), (index, end));
                let mut it = record("iteration");
                it.source = text(source.to_string());
                it.iteration = ok(index);
                it.start_ns = ok(batch.start_ns);
                it.end_ns = ok(end);
                let count = |v: &Vec<usize>| i64::try_from(v.len()).unwrap_or(i64::MAX);
                it.num_reqs = ok(batch.batch_size.unwrap_or(count(&batch.prefill) + count(&batch.decode)));
                it.num_prefill_reqs = ok(count(&batch.prefill));
                it.num_decode_reqs = ok(count(&batch.decode));
                it.num_decode_tokens = ok(count(&batch.decode));
                it.num_prefill_tokens = batch.prefill_tokens.and_then(ok);
                let line = batch
                    .prefill
                    .iter()
                    .chain(&batch.decode)
                    .map(|&i| requests[i].root.line)
                    .min()
                    .unwrap_or_default();
                add(sink, &it, line);
            }
        }

        for (i, r) in requests.iter().enumerate() {
            let at = Mapping {
                events: &token_events[i],
                prefill_end: prefill_end[i],
                source: &sources[i],
                iteration_of: &iteration_of,
                trace_id: &trace_ids[r.root.trace as usize],
            };
            map_request(r, &at, sink);
        }
        sink.note(
            "SGLang's trace has no token counts per batch: a batch's prefill tokens are known only when each of its \
             prefills ran whole in it (prompt minus cached tokens), not for chunked prefills; token times are the \
             ends of the batches each request decoded in"
                .to_owned(),
        );
        sink.note("no candidates in an SGLang trace (token ids, texts and logprobs are not traced)".to_owned());
        mapped
    }
}
