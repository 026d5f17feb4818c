//! Replaying a tokenscope trace (`synth --scenario replay --from-trace TRACE`): its requests become arrivals with
//! the same ids, times and lengths, and its steps say how its engines were configured, so the same traffic can be
//! served again under a changed configuration and the two traces compared (`tokenscope diff A B`).

use rustc_hash::FxHashMap as HashMap;

use super::arrivals::{Arrival, PREFIX_BLOCK_TOKENS, ReplayOptions};
use super::engine_config::{EngineConfig, KV_BLOCK_TOKENS};
use tokenscope_core::analysis::stats::thousands;
use tokenscope_core::trace::{DEFAULT_SOURCE, Trace};

/// The most prompt or output tokens a replayed request keeps. No served model takes a million tokens in one
/// request; beyond it a corrupt count would only cost memory (a prefix block per 512 prompt tokens) and time (a
/// simulated step per output token).
pub const MAX_REPLAY_TOKENS: u32 = 1 << 20;
/// The smallest step budget inferred: below it, a trace's steps were only small, not its budget.
pub const MIN_INFERRED_BUDGET: u32 = 2048;
/// vLLM's default step budget, taken when the steps give no token counts.
pub const DEFAULT_BUDGET: u32 = 8192;
/// vLLM's default sequence cap; the inferred one is at least this.
pub const DEFAULT_MAX_SEQS: u32 = 256;
/// The largest inferred budget and sequence cap (a step of a corrupt trace may claim billions of tokens).
const MAX_INFERRED: u32 = super::engine_config::MAX_BATCHED_TOKENS;

/// An engine instance of the replayed trace, configured as its steps suggest.
#[derive(Debug, Clone, PartialEq)]
pub struct InferredEngine {
    /// The configuration: `name` is the source label, KV cache and step costs those of the default profile.
    pub config: EngineConfig,
    /// The source's label id in the replayed trace.
    pub source: u32,
    /// What was inferred and from what, for a person: `vllm-0: chunked prefill off (412 prefill-only steps ...)`.
    pub why: String,
}

/// How many requests had a figure replaced so the simulation can run them (see [`arrivals`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Clamped {
    /// Requests without `input_tokens`: replayed with a one-token prompt.
    pub no_input: usize,
    /// Requests with a zero-token prompt: replayed with one token.
    pub zero_input: usize,
    /// Requests with no output token (errors, aborts): replayed with one.
    pub zero_output: usize,
    /// Prompts or outputs above [`MAX_REPLAY_TOKENS`], cut to it.
    pub too_long: usize,
    /// Requests of a source that has no instance in the replay: routed least-loaded instead of pinned.
    pub unpinned: usize,
}

impl Clamped {
    /// One sentence per kind of replacement made, for the command's output.
    pub fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        let mut note = |n: usize, what: &str| {
            if n > 0 {
                let noun = if n == 1 { "request" } else { "requests" };
                notes.push(format!("{} {noun} {what}", thousands(n as u64)));
            }
        };
        note(self.no_input, "without input_tokens replayed with a 1-token prompt");
        note(self.zero_input, "with a 0-token prompt replayed with 1 token");
        note(self.zero_output, "without output tokens replayed with 1");
        note(
            self.too_long,
            &format!(
                "with more than {} prompt or output tokens cut to it",
                thousands(u64::from(MAX_REPLAY_TOKENS))
            ),
        );
        note(self.unpinned, "of a source without steps routed least-loaded");
        notes
    }
}

/// A short, stable hash of a label (FNV-1a), for prefix block ids that do not depend on the order of a load.
fn label_hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Shared prefix blocks have this bit set; unique ones count up from 2^40, far below it.
const SHARED_BLOCK: u64 = 1 << 62;

/// The arrivals of `trace`'s requests, in arrival order, for a replay.
///
/// Each keeps its `request_id`, its arrival time, its prompt length (`input_tokens`) and its output length as the
/// summary counts it (usage `output_tokens`, else its token records), with `max_tokens` equal to it so generation
/// stops exactly there (a request that finished on `length` is given one more natural token, so it finishes on
/// `length` again); its `app_id` and `user_id` (`replay` when absent). With `pins` (the source label id of
/// each instance, in order) a request goes to the instance of its own source; without, it is routed freely.
///
/// `options` keeps working as for a request trace, relative to the first arrival: a window of seconds after it, a
/// limit, and a time scale that stretches the gaps from the first kept arrival (at 1, arrival times are the trace's
/// own; a later diff pairs the requests by id and lines the two clocks up on them).
///
/// Prefix blocks are an approximation: a trace says how many prompt tokens each request found in the prefix
/// cache (`cached_tokens`), not which. The common cause of hits is a system prompt shared by one application, so
/// requests of the same `app_id` with `cached_tokens > 0` share their first `cached_tokens / 512` blocks (ids from
/// the app label and the block index), and every other block is unique. The replay's cache then serves those
/// blocks once a request of the app has put them there: the first such request of an app on an instance misses
/// where the original may have hit (the request that filled the original cache had `cached_tokens = 0`, so it
/// carries no shared block here), and prefixes shared across apps or by a conversation's turns are not seen.
///
/// Figures the simulation cannot take are replaced and counted in the returned [`Clamped`]: a missing or zero
/// prompt becomes 1 token, no output 1 token, anything above [`MAX_REPLAY_TOKENS`] is cut to it.
pub fn arrivals(trace: &Trace, pins: Option<&[u32]>, options: ReplayOptions) -> (Vec<Arrival>, Clamped) {
    let mut clamped = Clamped::default();
    let r = &trace.requests;
    let mut rows: Vec<usize> = (0..r.len()).collect();
    rows.sort_by_key(|&i| r.arrival_ns[i]);
    let origin = rows.first().map_or(0, |&i| r.arrival_ns[i]);
    if let Some((from, to)) = options.window_s {
        #[expect(
            clippy::cast_possible_truncation,
            reason = "seconds of a trace, clamped to the i64 range by the cast"
        )]
        let (from, to) = ((from * 1e9) as i64, (to * 1e9) as i64);
        rows.retain(|&i| (from..to).contains(&r.arrival_ns[i].saturating_sub(origin)));
    }
    if let Some(limit) = options.limit {
        rows.truncate(limit);
    }
    let first = rows.first().map_or(0, |&i| r.arrival_ns[i]);
    let mut unique_block: u64 = 1 << 40;
    let arrivals = rows
        .into_iter()
        .map(|i| {
            #[expect(clippy::cast_possible_truncation, reason = "row ids of a trace are u32")]
            let row = i as u32;
            let input = match r.input_tokens.at(i) {
                None => {
                    clamped.no_input += 1;
                    1
                }
                Some(0) => {
                    clamped.zero_input += 1;
                    1
                }
                Some(n) => n,
            };
            let output = match trace.output_tokens(row) {
                0 => {
                    clamped.zero_output += 1;
                    1
                }
                n => n,
            };
            if input > MAX_REPLAY_TOKENS || output > MAX_REPLAY_TOKENS {
                clamped.too_long += 1;
            }
            let (input, output) = (input.min(MAX_REPLAY_TOKENS), output.min(MAX_REPLAY_TOKENS));
            let app = trace.label(r.app_id[i]).unwrap_or("replay");
            let cached = r.cached_tokens.at(i).unwrap_or(0);
            let blocks = input.div_ceil(PREFIX_BLOCK_TOKENS);
            let shared = (cached / PREFIX_BLOCK_TOKENS).min(blocks);
            let app_key = (label_hash(app) & ((1 << 40) - 1)) << 20;
            let prefix_blocks = (0..blocks)
                .map(|b| {
                    if b < shared {
                        SHARED_BLOCK | app_key | u64::from(b)
                    } else {
                        unique_block += 1;
                        unique_block
                    }
                })
                .collect();
            let source = pins.and_then(|p| {
                let found = p.iter().position(|&s| s == r.source[i]);
                if found.is_none() {
                    clamped.unpinned += 1;
                }
                found
            });
            Arrival {
                id: trace.request_id(row).to_owned(),
                at_ns: scaled(first, r.arrival_ns[i], options.time_scale),
                input_tokens: input,
                output_tokens: if trace.label(r.finish_reason[i]) == Some("length") {
                    output.saturating_add(1)
                } else {
                    output
                },
                max_tokens: output,
                prefix_blocks,
                app_id: app.to_owned(),
                user_id: trace.label(r.user_id[i]).unwrap_or("replay").to_owned(),
                source,
                mistrigger: None,
            }
        })
        .collect();
    (arrivals, clamped)
}

/// `at` with its distance from `first` multiplied by `scale` (exactly `at` at scale 1).
#[expect(
    clippy::float_cmp,
    reason = "1 exactly: the scale given by default, which must keep times bit for bit"
)]
fn scaled(first: i64, at: i64, scale: f64) -> i64 {
    if scale == 1.0 {
        return at;
    }
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_precision_loss,
        reason = "ns gaps; the cast saturates"
    )]
    let gap = (at.saturating_sub(first) as f64 * scale) as i64;
    first.saturating_add(gap)
}

/// What the steps of one source say.
#[derive(Debug, Default)]
struct StepEvidence {
    /// Steps that prefilled and decoded together.
    mixed: u64,
    /// Prefill-only steps during which a request of the source was decoding.
    prefill_only_while_decoding: u64,
    /// Steps with a token count.
    with_tokens: u64,
    /// The largest prefill + decode tokens of a step.
    largest_tokens: u64,
    /// The largest `num_reqs` of a step.
    largest_reqs: Option<u32>,
}

/// Reads the steps `rows` (sorted by start) of a source whose requests decoded over `decoding` (first token, end).
fn evidence(trace: &Trace, rows: std::ops::Range<usize>, decoding: &mut [(i64, i64)]) -> StepEvidence {
    let it = &trace.iterations;
    decoding.sort_unstable();
    let mut ev = StepEvidence::default();
    let mut next = 0;
    // The latest end of the decodes that started before the current step: one still runs past the step's end
    // exactly when it is later than that end (steps of one source run one after another, so starts and ends rise).
    let mut latest_end = i64::MIN;
    for s in rows {
        while next < decoding.len() && decoding[next].0 < it.start_ns[s] {
            latest_end = latest_end.max(decoding[next].1);
            next += 1;
        }
        let prefill = it.num_prefill_tokens.at(s);
        let decode = it.num_decode_tokens.at(s).or(it.num_decode_reqs.at(s));
        if prefill.is_some() || decode.is_some() {
            ev.with_tokens += 1;
            ev.largest_tokens = ev
                .largest_tokens
                .max(u64::from(prefill.unwrap_or(0)) + u64::from(decode.unwrap_or(0)));
        }
        if let Some(n) = it.num_reqs.at(s) {
            ev.largest_reqs = Some(ev.largest_reqs.map_or(n, |m| m.max(n)));
        }
        match (prefill.unwrap_or(0), decode) {
            (1.., Some(1..)) => ev.mixed += 1,
            (1.., Some(0)) if latest_end > it.end_ns[s] => ev.prefill_only_while_decoding += 1,
            _ => {}
        }
    }
    ev
}

/// `n` and the noun, singular for 1.
fn steps(n: u64, one: &str, many: &str) -> String {
    format!("{} {}", thousands(n), if n == 1 { one } else { many })
}

/// The configuration of one source from what its steps say (see [`infer_engines`]).
fn engine_of(name: &str, source: u32, ev: &StepEvidence) -> InferredEngine {
    let mut config = EngineConfig::new(name);
    let chunked = if ev.mixed > 0 {
        config.chunked_prefill = true;
        format!(
            "chunked prefill on ({} mixed prefill and decode)",
            steps(ev.mixed, "step", "steps")
        )
    } else if ev.prefill_only_while_decoding > 0 {
        config.chunked_prefill = false;
        format!(
            "chunked prefill off ({} while requests were decoding, none mixed)",
            steps(
                ev.prefill_only_while_decoding,
                "prefill-only step",
                "prefill-only steps"
            )
        )
    } else {
        "chunked prefill on (vLLM's default: the steps do not say)".to_owned()
    };
    let budget = if ev.with_tokens == 0 {
        config.max_num_batched_tokens = DEFAULT_BUDGET;
        format!(
            "budget {} tokens (vLLM's default: no step counts its tokens)",
            thousands(u64::from(DEFAULT_BUDGET))
        )
    } else {
        let largest = u32::try_from(ev.largest_tokens).unwrap_or(u32::MAX);
        config.max_num_batched_tokens = largest.clamp(MIN_INFERRED_BUDGET, MAX_INFERRED);
        let b = thousands(u64::from(config.max_num_batched_tokens));
        if largest < MIN_INFERRED_BUDGET {
            format!(
                "budget {b} tokens (the floor; the largest step had {})",
                thousands(ev.largest_tokens)
            )
        } else if largest > MAX_INFERRED {
            format!(
                "budget {b} tokens (the ceiling; the largest step claims {})",
                thousands(ev.largest_tokens)
            )
        } else {
            format!("budget {b} tokens (largest step)")
        }
    };
    config.max_num_seqs = ev
        .largest_reqs
        .unwrap_or(0)
        .clamp(DEFAULT_MAX_SEQS, super::engine_config::MAX_SEQS);
    let seqs = match ev.largest_reqs {
        Some(n) if n > DEFAULT_MAX_SEQS => {
            format!("{} sequences (largest step)", thousands(u64::from(config.max_num_seqs)))
        }
        Some(n) => format!("{DEFAULT_MAX_SEQS} sequences (vLLM's default; largest step {n})"),
        None => format!("{DEFAULT_MAX_SEQS} sequences (vLLM's default)"),
    };
    let why = format!(
        "{name}: {chunked}, {budget}, {seqs}; KV cache and step costs of {} ({} blocks of {KV_BLOCK_TOKENS} tokens), \
         assumed",
        super::Profile::default().name(),
        thousands(u64::from(config.kv_blocks))
    );
    InferredEngine { config, source, why }
}

/// The engine configuration of a trace: one instance per source that has steps (per source of requests when the
/// trace has none; at least one), in the trace's order of sources.
///
/// - Chunked prefill is on when a step of the source prefilled and decoded together; off when it never did but
///   ran prefill-only steps while one of its requests was decoding (between its first token and its end): a
///   chunked-prefill scheduler schedules the running decodes first, so only a prefill-first one leaves them out;
///   otherwise vLLM's default, on.
/// - The budget (`max_num_batched_tokens`) is the largest step's prefill + decode tokens: a lower bound of the
///   real one (exact when a long prompt was chunked), at least [`MIN_INFERRED_BUDGET`]; [`DEFAULT_BUDGET`] when the
///   steps give no token counts.
/// - The sequence cap is the largest step's `num_reqs`, at least [`DEFAULT_MAX_SEQS`].
/// - The KV cache and the step costs are the default profile's: a trace does not say what hardware served it.
/// - Speculative decoding, when the trace's tokens name verify steps ([`infer_speculation`]), on every instance.
pub fn infer_engines(trace: &Trace) -> Vec<InferredEngine> {
    let mut engines = infer_schedulers(trace);
    if let Some((spec, why)) = infer_speculation(trace) {
        for e in &mut engines {
            e.config.speculation = Some(spec.clone());
            e.why.push_str(&why);
        }
    }
    engines
}

/// The speculative decoding of a trace whose tokens name their verify steps: its longest draft, its acceptance by
/// draft position (made non-increasing: a share measured over fewer steps may exceed the one before), the
/// drafter's default cost; and the words saying so.
pub fn infer_speculation(trace: &Trace) -> Option<(super::speculation::Speculation, String)> {
    let all: Vec<u32> = (0..u32::try_from(trace.request_count()).unwrap_or(u32::MAX)).collect();
    let figures = tokenscope_core::analysis::spec::spec_figures(trace, &all)?;
    let mut acceptance = figures.acceptance_by_position;
    for k in 1..acceptance.len() {
        acceptance[k] = acceptance[k].min(acceptance[k - 1]);
    }
    let k = u32::try_from(acceptance.len())
        .ok()?
        .min(super::speculation::MAX_DRAFT_TOKENS);
    acceptance.truncate(k as usize);
    let spec = super::speculation::Speculation::new(k, Some(&acceptance), super::speculation::DEFAULT_DRAFT_MS).ok()?;
    let why = format!(
        "; speculative decoding as its {} verify steps: {} (the drafter's cost assumed)",
        thousands(figures.verify_steps.unwrap_or(0)),
        spec.describe()
    );
    Some((spec, why))
}

/// The scheduler of each instance (see [`infer_engines`]).
fn infer_schedulers(trace: &Trace) -> Vec<InferredEngine> {
    let mut decoding: HashMap<u32, Vec<(i64, i64)>> = HashMap::default();
    for r in 0..trace.requests.len() {
        #[expect(clippy::cast_possible_truncation, reason = "row ids of a trace are u32")]
        let row = r as u32;
        if let (Some(first), Some(end)) = (trace.first_token_ns(row), trace.finish_ns(row))
            && end > first
        {
            decoding.entry(trace.decode_source(row)).or_default().push((first, end));
        }
    }
    let with_steps = trace.sources_with_iterations();
    if !with_steps.is_empty() {
        return with_steps
            .iter()
            .map(|(source, rows)| {
                let rows = rows.start as usize..rows.end as usize;
                let mut spans = decoding.remove(source).unwrap_or_default();
                let ev = evidence(trace, rows, &mut spans);
                engine_of(trace.labels.str_or_empty(*source), *source, &ev)
            })
            .collect();
    }
    // Every instance a request names: where it arrived, then where it decoded (a disaggregated trace's decode
    // instances).
    let mut seen = std::collections::HashSet::new();
    let sources: Vec<u32> = trace
        .requests
        .source
        .iter()
        .chain(
            trace
                .requests
                .decode_source
                .iter()
                .filter(|&&d| d != tokenscope_core::trace::NO_STR),
        )
        .copied()
        .filter(|s| seen.insert(*s))
        .collect();
    if sources.is_empty() {
        return vec![engine_of(
            DEFAULT_SOURCE,
            tokenscope_core::trace::NO_STR,
            &StepEvidence::default(),
        )];
    }
    sources
        .into_iter()
        .map(|s| engine_of(trace.labels.str_or_empty(s), s, &StepEvidence::default()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokenscope_core::trace::report::Place;
    use tokenscope_core::trace::{Iteration, NO_STR, Request, TraceBuilder};

    /// 2025-11-29 08:00:00 UTC, ns.
    const T0: i64 = 1_764_403_200_000_000_000;

    fn ms(v: i64) -> i64 {
        T0 + v * 1_000_000
    }

    struct Req<'a> {
        id: &'a str,
        source: &'a str,
        app: Option<&'a str>,
        at_ms: i64,
        input: Option<u32>,
        cached: u32,
        output: Option<u32>,
        /// First token and end, ms.
        decode_ms: Option<(i64, i64)>,
        finish: Option<&'a str>,
    }

    fn req<'a>(id: &'a str, source: &'a str, at_ms: i64, input: u32, cached: u32, output: u32) -> Req<'a> {
        Req {
            id,
            source,
            app: Some("chat"),
            at_ms,
            input: Some(input),
            cached,
            output: Some(output),
            decode_ms: None,
            finish: None,
        }
    }

    /// A step: source, start and end ms, prefill and decode tokens, requests.
    type Step<'a> = (&'a str, i64, i64, Option<u32>, Option<u32>, Option<u32>);

    fn trace(reqs: &[Req], steps: &[Step]) -> Trace {
        let mut b = TraceBuilder::default();
        for r in reqs {
            let row = Request {
                id: b.labels.intern(r.id),
                source: b.labels.intern(r.source),
                trace_id: NO_STR,
                model: NO_STR,
                app_id: r.app.map_or(NO_STR, |a| b.labels.intern(a)),
                user_id: b.labels.intern("u1"),
                arrival_ns: ms(r.at_ms),
                scheduled_ns: None,
                first_token_ns: r.decode_ms.map(|d| ms(d.0)),
                finished_ns: r.decode_ms.map(|d| ms(d.1)),
                input_tokens: r.input,
                cached_tokens: Some(r.cached),
                context_tokens: None,
                output_tokens: r.output,
                finish_reason: r.finish.map_or(NO_STR, |f| b.labels.intern(f)),
                status: NO_STR,
                error_code: NO_STR,
                temperature: None,
                top_p: None,
                top_k: None,
                max_tokens: None,
                seed: None,
                num_preemptions: None,
                prompt_hash: NO_STR,
                server_queue_ns: None,
                server_ttft_ns: None,
                server_decode_ns: None,
                sent_ns: None,
                server_request_id: NO_STR,
                spec_drafted_tokens: None,
                spec_accepted_tokens: None,
                decode_source: NO_STR,
            };
            b.add_request(row, Place::default());
        }
        for (k, &(source, start, end, prefill, decode, reqs)) in steps.iter().enumerate() {
            let source = b.labels.intern(source);
            b.add_iteration(
                Iteration {
                    source,
                    iteration: k as i64,
                    start_ns: ms(start),
                    end_ns: ms(end),
                    schedule_ns: None,
                    forward_ns: None,
                    sample_ns: None,
                    num_reqs: reqs,
                    num_prefill_reqs: None,
                    num_decode_reqs: None,
                    num_prefill_tokens: prefill,
                    num_decode_tokens: decode,
                    num_waiting: None,
                    kv_usage: None,
                    num_preempted: None,
                    spec_drafted_tokens: None,
                    spec_accepted_tokens: None,
                },
                Place::default(),
            );
        }
        b.finish().0
    }

    #[test]
    fn arrivals_keep_ids_times_lengths_and_labels() {
        let mut c = req("c", "e0", 250, 0, 0, 0);
        c.app = None;
        c.input = None;
        c.output = None;
        let mut b = req("b", "e1", 100, 700, 0, 12);
        b.finish = Some("length");
        let t = trace(&[b, req("a", "e0", 0, 300, 0, 5), c], &[]);
        let (a, clamped) = arrivals(&t, None, ReplayOptions::default());
        let ids: Vec<&str> = a.iter().map(|x| x.id.as_str()).collect();
        assert_eq!(ids, ["a", "b", "c"], "arrival order");
        assert_eq!(a[1].at_ns, ms(100), "the original clock");
        assert_eq!((a[0].input_tokens, a[0].output_tokens, a[0].max_tokens), (300, 5, 5));
        // "b" was cut at its max_tokens: it would have said more, and stops at 12 on "length" again.
        assert_eq!((a[1].input_tokens, a[1].output_tokens, a[1].max_tokens), (700, 13, 12));
        // 700 tokens: two blocks of 512, no cached tokens, so none shared.
        assert_eq!(a[1].prefix_blocks.len(), 2);
        assert!(a[1].prefix_blocks.iter().all(|&b| b & SHARED_BLOCK == 0));
        assert_eq!((a[1].app_id.as_str(), a[1].user_id.as_str()), ("chat", "u1"));
        assert_eq!(a[1].source, None, "no pins: routed freely");
        // "c" has no prompt length, no output, no app: 1 and 1, counted; app "replay".
        assert_eq!(
            (a[2].input_tokens, a[2].output_tokens, a[2].app_id.as_str()),
            (1, 1, "replay")
        );
        assert_eq!(
            clamped,
            Clamped {
                no_input: 1,
                zero_output: 1,
                ..Clamped::default()
            }
        );
        assert_eq!(
            clamped.notes(),
            [
                "1 request without input_tokens replayed with a 1-token prompt",
                "1 request without output tokens replayed with 1"
            ]
        );
        // Pinned to the instance of their source: e0 is instance 1 here, e1 instance 0.
        let (e0, e1) = (t.labels.lookup("e0").unwrap(), t.labels.lookup("e1").unwrap());
        let (a, _) = arrivals(&t, Some(&[e1, e0]), ReplayOptions::default());
        let sources: Vec<Option<usize>> = a.iter().map(|x| x.source).collect();
        assert_eq!(sources, [Some(1), Some(0), Some(1)]);
        // The output as the summary counts it: usage first, else the token records (none here).
        assert_eq!(a[0].output_tokens, t.output_tokens(t.request_row("a").unwrap()));
    }

    #[test]
    fn window_limit_and_scale_count_from_the_first_arrival() {
        let reqs: Vec<Req> = ["r0", "r1", "r2", "r3"]
            .iter()
            .zip([0, 1_000, 2_000, 4_000])
            .map(|(id, at)| req(id, "e", at, 100, 0, 10))
            .collect();
        let t = trace(&reqs, &[]);
        // Window 0.5..3 s keeps r1 (1 s) and r2 (2 s); at half speed r2 comes 0.5 s after r1, which keeps its time.
        let options = ReplayOptions {
            time_scale: 0.5,
            limit: None,
            window_s: Some((0.5, 3.0)),
        };
        let (a, _) = arrivals(&t, None, options);
        let at: Vec<(&str, i64)> = a.iter().map(|x| (x.id.as_str(), x.at_ns)).collect();
        assert_eq!(at, [("r1", ms(1_000)), ("r2", ms(1_500))]);
        let (a, _) = arrivals(
            &t,
            None,
            ReplayOptions {
                limit: Some(3),
                ..ReplayOptions::default()
            },
        );
        assert_eq!(a.len(), 3);
    }

    #[test]
    fn cached_tokens_become_blocks_shared_by_the_app() {
        // x: 1,300 tokens, 1,100 cached -> 3 blocks, the first 2 shared. y: 600 tokens, 512 cached -> 2 blocks, 1
        // shared. z: another app, 1,024 cached of 1,024 -> 2 blocks, both shared, but not with chat's.
        let mut z = req("z", "e", 3, 1_024, 1_024, 4);
        z.app = Some("code");
        let t = trace(
            &[
                req("x", "e", 0, 1_300, 1_100, 4),
                req("y", "e", 1, 600, 512, 4),
                req("w", "e", 2, 1_300, 0, 4),
                z,
            ],
            &[],
        );
        let (a, _) = arrivals(&t, None, ReplayOptions::default());
        let [x, y, w, z] = [&a[0], &a[1], &a[2], &a[3]];
        assert_eq!(
            (x.prefix_blocks.len(), y.prefix_blocks.len(), z.prefix_blocks.len()),
            (3, 2, 2)
        );
        assert_eq!(x.prefix_blocks[0], y.prefix_blocks[0], "the app's first block, shared");
        assert_ne!(x.prefix_blocks[1], y.prefix_blocks[1], "y's second block is its own");
        assert!(x.prefix_blocks[1] & SHARED_BLOCK != 0 && x.prefix_blocks[2] & SHARED_BLOCK == 0);
        assert!(
            w.prefix_blocks.iter().all(|b| !x.prefix_blocks.contains(b)),
            "no cached tokens, nothing shared"
        );
        assert!(
            z.prefix_blocks.iter().all(|b| !x.prefix_blocks.contains(b)),
            "another app's prefix"
        );
        let all: Vec<u64> = a.iter().flat_map(|r| r.prefix_blocks.iter().copied()).collect();
        let mut unique = all.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(all.len() - unique.len(), 1, "only x's and y's first block coincide");
    }

    #[test]
    fn absurd_lengths_are_cut_and_counted() {
        // u32::MAX itself is a column's "absent": the largest count it holds is one less.
        let absurd = u32::MAX - 1;
        let t = trace(&[req("big", "e", 0, absurd, absurd, absurd)], &[]);
        let (a, clamped) = arrivals(&t, None, ReplayOptions::default());
        assert_eq!(
            (a[0].input_tokens, a[0].output_tokens),
            (MAX_REPLAY_TOKENS, MAX_REPLAY_TOKENS)
        );
        assert_eq!(
            a[0].prefix_blocks.len(),
            (MAX_REPLAY_TOKENS / PREFIX_BLOCK_TOKENS) as usize
        );
        assert_eq!(clamped.too_long, 1);
    }

    #[test]
    fn mixed_steps_mean_chunked_prefill_on_and_the_largest_step_is_the_budget() {
        // Source "on": one step prefilled 3,000 tokens with 4 decodes (mixed): on, budget 3,004.
        let mut d = req("d", "on", 0, 100, 0, 50);
        d.decode_ms = Some((10, 900));
        let steps = [
            ("on", 0, 10, Some(100), Some(0), Some(1)),
            ("on", 20, 60, Some(3_000), Some(4), Some(5)),
            ("on", 70, 80, Some(0), Some(5), Some(5)),
        ];
        let e = infer_engines(&trace(&[d], &steps));
        assert_eq!(e.len(), 1);
        assert!(e[0].config.chunked_prefill);
        assert_eq!(e[0].config.max_num_batched_tokens, 3_004);
        assert_eq!(e[0].config.max_num_seqs, 256);
        assert!(
            e[0].why
                .starts_with("on: chunked prefill on (1 step mixed prefill and decode)"),
            "{}",
            e[0].why
        );
        assert!(e[0].why.contains("budget 3,004 tokens (largest step)"), "{}", e[0].why);
    }

    #[test]
    fn prefill_only_steps_over_a_decode_mean_chunked_prefill_off() {
        // "a" decodes from 10 ms to 500 ms. Steps: its prefill (0-10), a decode (20-30), a 6,000-token
        // prefill-only step (40-300) while it decodes: off. The prefill-only step at 600-700 comes after it ended and
        // says nothing. Budget 6,000; 300 requests in one step: the cap is 300.
        let mut a = req("a", "off", 0, 100, 0, 40);
        a.decode_ms = Some((10, 500));
        let steps = [
            ("off", 0, 10, Some(100), Some(0), Some(1)),
            ("off", 20, 30, Some(0), Some(1), Some(1)),
            ("off", 40, 300, Some(6_000), Some(0), Some(300)),
            ("off", 600, 700, Some(500), Some(0), Some(1)),
        ];
        let e = infer_engines(&trace(&[a], &steps));
        assert!(!e[0].config.chunked_prefill);
        assert_eq!(
            (e[0].config.max_num_batched_tokens, e[0].config.max_num_seqs),
            (6_000, 300)
        );
        assert!(
            e[0].why
                .contains("chunked prefill off (1 prefill-only step while requests were decoding, none mixed)"),
            "{}",
            e[0].why
        );
    }

    #[test]
    fn steps_that_do_not_say_give_the_defaults() {
        // Only prefill-only steps with nobody decoding, all small: chunked on (default), budget at the floor 2,048.
        let e = infer_engines(&trace(
            &[req("a", "s", 0, 100, 0, 1)],
            &[("s", 0, 10, Some(100), Some(0), None)],
        ));
        assert!(e[0].config.chunked_prefill);
        assert_eq!(e[0].config.max_num_batched_tokens, MIN_INFERRED_BUDGET);
        assert!(e[0].why.contains("the steps do not say"), "{}", e[0].why);
        assert!(e[0].why.contains("the floor; the largest step had 100"), "{}", e[0].why);
        // Steps without token counts: vLLM's 8,192.
        let e = infer_engines(&trace(
            &[req("a", "s", 0, 100, 0, 1)],
            &[("s", 0, 10, None, None, None)],
        ));
        assert_eq!(e[0].config.max_num_batched_tokens, DEFAULT_BUDGET);
        // No steps at all: one instance per source of requests, in order.
        let e = infer_engines(&trace(
            &[req("a", "s1", 0, 100, 0, 1), req("b", "s0", 1, 100, 0, 1)],
            &[],
        ));
        let names: Vec<&str> = e.iter().map(|x| x.config.name.as_str()).collect();
        assert_eq!(names, ["s1", "s0"]);
        // An empty trace: one default instance.
        assert_eq!(infer_engines(&trace(&[], &[])).len(), 1);
    }

    #[test]
    fn the_mixed_demo_infers_its_two_engines() {
        // The demo's engines: vllm-0 chunked prefill off with a 32,768 budget, vllm-1 on with 20,480 (scenarios.rs).
        let t = super::super::generate(&super::super::SynthOptions {
            scenario: super::super::Scenario::Mixed,
            seed: 1,
            requests: None,
            arrivals: None,
            replay: ReplayOptions::default(),
            sources: 1,
            prefix_cache_tokens: None,
            profile: super::super::ProfileChoice::default(),
            chunked_prefill: None,
            plant: None,
        })
        .unwrap();
        let largest = |name: &str| {
            let rows = t.iterations_of_source(t.labels.lookup(name).unwrap());
            rows.map(|s| t.iterations.num_prefill_tokens.at(s).unwrap() + t.iterations.num_decode_tokens.at(s).unwrap())
                .max()
                .unwrap()
        };
        let e = infer_engines(&t);
        let names: Vec<&str> = e.iter().map(|x| x.config.name.as_str()).collect();
        assert_eq!(names, ["vllm-0", "vllm-1"]);
        assert!(!e[0].config.chunked_prefill, "{}", e[0].why);
        assert!(e[1].config.chunked_prefill, "{}", e[1].why);
        // vllm-0's budget is only bounded from below: its largest step took the 24k prompt whole (prefill-first
        // steps take whole prompts), less than its 32,768.
        assert_eq!(e[0].config.max_num_batched_tokens, largest("vllm-0"));
        assert!((24_000..=32_768).contains(&e[0].config.max_num_batched_tokens));
        // vllm-1 chunked the 96k prompt: those steps fill the budget exactly.
        assert_eq!(e[1].config.max_num_batched_tokens, largest("vllm-1"));
        assert_eq!(e[1].config.max_num_batched_tokens, 20_480);
    }
}
