//! The detectors on the incident samples (each finds exactly its planted incident), on the clean `steady` scenario
//! (none of the three incident kinds fires), on `mixed` (all three), and on tiny hand-built traces whose figures are
//! checked by hand.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers may unwrap: a panic here is a failed test"
)]

use tokenscope_core::analysis::findings::{
    Finding, Kind, Severity, Thresholds, decode_interrupted, eos_mistrigger, find, kv_saturation, preemption_bursts,
    prefill_monopoly, repetition_loops,
};
use tokenscope_core::analysis::stats::thousands;
use tokenscope_core::analysis::summary::Slo;
use tokenscope_core::ingest::Progress;
use tokenscope_core::load::load;
use tokenscope_core::trace::{StageKind, Trace};
use tokenscope_synth::arrivals::ReplayOptions;
use tokenscope_synth::{Scenario, SynthOptions, generate};

pub(crate) fn sample(name: &str) -> Trace {
    let path = crate::common::repo("sample_traces").join(name);
    load(&path, &Progress::default())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trace
}

pub(crate) fn ids(t: &Trace, rows: &[u32]) -> Vec<String> {
    rows.iter().map(|&r| t.request_id(r).to_owned()).collect()
}

/// The step numbers (`iteration`) of a finding's steps.
pub(crate) fn iterations(t: &Trace, f: &Finding) -> Vec<i64> {
    f.steps.iter().map(|&s| t.iterations.iteration[s as usize]).collect()
}

/// Request ids of the prefill chunks in a step row.
fn prefilled_in(t: &Trace, row: u32) -> Vec<String> {
    (0..t.stages.len())
        .filter(|&s| t.stages.iter_row[s] == Some(row))
        .map(|s| t.request_id(t.stages.request[s]).to_owned())
        .collect()
}

pub(crate) fn th() -> Thresholds {
    Thresholds::default()
}

/// A duration as the findings write one of a second or more.
fn secs(ns: i64) -> String {
    format!("{:.2} s", ns as f64 / 1e9)
}

/// The steps of `source` lying wholly in `[from, to]`, in order.
fn steps_within(t: &Trace, source: u32, from: i64, to: i64) -> Vec<u32> {
    let it = &t.iterations;
    (0..it.len())
        .filter(|&s| it.source[s] == source && it.start_ns[s] >= from && it.end_ns[s] <= to)
        .map(|s| s as u32)
        .collect()
}

/// The gaps between a request's consecutive tokens, ns, each with the index of the later token.
fn gaps(t: &Trace, request: u32) -> Vec<(u32, i64)> {
    let rows = t.tokens_of(request);
    rows.clone()
        .skip(1)
        .map(|k| (t.tokens.index[k], t.tokens.emitted_ns[k] - t.tokens.emitted_ns[k - 1]))
        .collect()
}

/// The median of a request's token gaps, ns (the mean of the two middle ones for an even count).
fn median_gap(t: &Trace, request: u32) -> f64 {
    let mut g: Vec<i64> = gaps(t, request).iter().map(|&(_, d)| d).collect();
    g.sort_unstable();
    let n = g.len();
    if n % 2 == 1 {
        g[n / 2] as f64
    } else {
        (g[n / 2 - 1] + g[n / 2]) as f64 / 2.0
    }
}

/// Every request's time waiting (queued, or preempted) on `source` inside `[from, to]`, longest first, `except`
/// left out: read from the requests' stages, queue stages derived from arrival and scheduling where none is written.
fn waited_within(t: &Trace, source: u32, from: i64, to: i64, except: u32) -> Vec<(String, i64)> {
    let mut out: Vec<(String, i64)> = (0..t.request_count() as u32)
        .filter(|&r| r != except && t.requests.source[r as usize] == source)
        .map(|r| {
            let waited: i64 = t
                .stages_of(r)
                .iter()
                .filter(|s| matches!(s.kind, StageKind::Queue | StageKind::Preempted))
                .map(|s| (s.end_ns.min(to) - s.start_ns.max(from)).max(0))
                .sum();
            (t.request_id(r).to_owned(), waited)
        })
        .filter(|w| w.1 > 0)
        .collect();
    out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    out
}

// ---------------------------------------------------------------------------------------------------------------
// The incident samples.

#[test]
fn prefill_interrupts_decode_is_one_episode_naming_chat_victim_and_its_culprits() {
    let t = sample("prefill_interrupts_decode.jsonl");
    let found = decode_interrupted(&t, &th());
    assert_eq!(found.len(), 1, "{found:#?}");
    let f = &found[0];
    let who = ids(&t, &f.requests);
    // Every figure below is read from the trace's rows, not from the detector. chat-victim's token 28 is the stalled
    // one (planted).
    let victim = t.request_row("chat-victim").unwrap();
    let victim_tokens = t.tokens_of(victim);
    let stalled = victim_tokens.start + 28;
    assert_eq!(t.tokens.index[stalled], 28);
    let source = t.requests.source[victim as usize];
    let (before, at) = (t.tokens.emitted_ns[stalled - 1], t.tokens.emitted_ns[stalled]);
    // The steps between its tokens 27 and 28, but the one that computed token 28.
    let mut steps = steps_within(&t, source, before, at);
    steps.retain(|&s| s != t.tokens.iter_row[stalled]);
    assert_eq!(f.steps, steps);
    // Prefill-only steps (chunked prefill off): every step holds prefill chunks and none decodes.
    let prefilled: Vec<Vec<String>> = steps.iter().map(|&s| prefilled_in(&t, s)).collect();
    assert!(prefilled.iter().all(|p| !p.is_empty()), "{prefilled:?}");
    assert_eq!(prefilled[0], ["rag-24k"]);
    // The stalled requests: those with a gap between two tokens that holds a step prefilling a planted prompt
    // (rag-*: the outsized ones) and is over `itl_factor` times their median gap; the subject is the one whose gap
    // is the largest multiple of its median.
    let it = &t.iterations;
    let planted_steps: Vec<u32> = steps
        .iter()
        .copied()
        .filter(|&s| prefilled_in(&t, s).iter().any(|id| id.starts_with("rag-")))
        .collect();
    let holds_a_step = |a: i64, b: i64| {
        planted_steps
            .iter()
            .any(|&s| a <= it.start_ns[s as usize] && it.end_ns[s as usize] <= b)
    };
    let mut stalls: Vec<(f64, u32, u32, i64)> = (0..t.request_count() as u32)
        .filter_map(|r| {
            let rows = t.tokens_of(r);
            let k = rows
                .clone()
                .skip(1)
                .find(|&k| holds_a_step(t.tokens.emitted_ns[k - 1], t.tokens.emitted_ns[k]))?;
            let gap = t.tokens.emitted_ns[k] - t.tokens.emitted_ns[k - 1];
            let multiple = gap as f64 / median_gap(&t, r);
            (multiple > th().itl_factor).then_some((multiple, r, t.tokens.index[k], gap))
        })
        .collect();
    stalls.sort_by(|a, b| b.0.total_cmp(&a.0));
    let stalled_ids: Vec<String> = stalls.iter().map(|s| t.request_id(s.1).to_owned()).collect();
    assert_eq!(who[..stalls.len()], stalled_ids[..], "{who:?}");
    assert_eq!(stalled_ids, ["req-00002", "chat-victim", "rag-24k"]);
    let (multiple, subject, index, wait) = stalls[0];
    // Then the culprits, most prompt tokens first: the planted 6k prompts after the 24k one.
    assert_eq!(who[3..7], ["rag-6k-1", "rag-6k-2", "rag-6k-3", "rag-6k-4"], "{who:?}");
    // The prompt tokens computed in those steps, and the prompts beyond the five named.
    let st = &t.stages;
    let in_steps =
        |s: usize| st.iter_row[s].is_some_and(|row| steps.contains(&row)) && st.kind[s] == StageKind::Prefill;
    let prompt_tokens: u64 = (0..st.len())
        .filter(|&s| in_steps(s))
        .map(|s| u64::from(st.tokens[s].unwrap()))
        .sum();
    let mut prompts: Vec<u32> = (0..st.len()).filter(|&s| in_steps(s)).map(|s| st.request[s]).collect();
    prompts.sort_unstable();
    prompts.dedup();
    let median = median_gap(&t, subject);
    assert_eq!(
        f.summary,
        format!(
            "{}'s token {index} waited {}, {:.0}× its median, while rag-24k, rag-6k-1, rag-6k-2, rag-6k-3 and \
             rag-6k-4 with {} smaller prompts prefilled {} prompt tokens in {} steps on vllm-0: without those \
             prefills it would have taken about {:.1} ms, its median; chat-victim and rag-24k stalled too",
            t.request_id(subject),
            secs(wait),
            multiple,
            prompts.len() - 5,
            thousands(prompt_tokens),
            steps.len(),
            median / 1e6,
        )
    );
    // chat-victim's stalled token is among the tokens; the subject's first.
    let named: Vec<usize> = f
        .tokens
        .iter()
        .copied()
        .filter(|&k| t.tokens.request[k] == victim)
        .collect();
    assert_eq!(named, [stalled]);
    assert_eq!(t.request_id(t.tokens.request[f.tokens[0]]), "req-00002");
    assert!(wait > 3_000_000_000, "a freeze of seconds: {}", secs(wait));
    assert_eq!(f.severity, Severity::Critical);
    // From the first stalled token's predecessor to the last stalled token.
    assert!(f.from_ns < t.iterations.start_ns[f.steps[0] as usize]);
    assert!(f.to_ns > t.iterations.end_ns[*f.steps.last().unwrap() as usize]);
    // The other two incident kinds do not fire here.
    assert!(eos_mistrigger(&t, &th()).is_empty());
    assert!(prefill_monopoly(&t, &th()).is_empty());
}

#[test]
fn eos_mistrigger_finds_med_question_at_token_37_and_nothing_else() {
    let t = sample("eos_mistrigger.jsonl");
    let found = eos_mistrigger(&t, &th());
    assert_eq!(found.len(), 1, "{found:#?}");
    let f = &found[0];
    assert_eq!(ids(&t, &f.requests), ["med-question"]);
    assert_eq!(f.tokens.len(), 1);
    let k = f.tokens[0];
    assert_eq!(t.tokens.index[k], 37);
    // The step is the one that computed that token.
    assert_eq!(iterations(&t, f), [t.tokens.iteration[k]]);
    // logprob ln 0.1 -> p = 0.100, rank 2; the candidate "5" had p = e^-0.2877 = 0.750.
    assert_eq!(
        f.summary,
        "med-question ended at token 37 on ⟨EOS⟩ chosen with p = 0.100 (rank 2); the most likely token was “5” \
         (p = 0.750)"
    );
    assert_eq!(f.severity, Severity::Critical);
    assert!(f.from_ns < t.tokens.emitted_ns[k] && f.to_ns == t.tokens.emitted_ns[k]);
    assert!(decode_interrupted(&t, &th()).is_empty());
    assert!(prefill_monopoly(&t, &th()).is_empty());
}

#[test]
fn long_prefill_is_doc_96k_holding_five_steps_while_short_700_waits() {
    let t = sample("long_prefill.jsonl");
    let found = prefill_monopoly(&t, &th());
    assert_eq!(found.len(), 1, "{found:#?}");
    let f = &found[0];
    let doc = t.request_row("doc-96k").unwrap();
    assert_eq!(f.requests[0], doc);
    // Read from the trace's rows: the steps holding doc-96k's prefill chunks, all of its prompt, five of them in a
    // row; the requests waiting on the instance meanwhile, and for how long inside those steps.
    let chunks: Vec<usize> = (0..t.stages.len())
        .filter(|&s| t.stages.request[s] == doc && t.stages.kind[s] == StageKind::Prefill)
        .collect();
    let rows: Vec<u32> = chunks.iter().map(|&s| t.stages.iter_row[s].unwrap()).collect();
    assert_eq!(f.steps, rows);
    assert_eq!(rows.len(), 5);
    assert!(f.steps.windows(2).all(|w| w[1] == w[0] + 1));
    let prompt: u64 = chunks.iter().map(|&s| u64::from(t.stages.tokens[s].unwrap())).sum();
    let d = doc as usize;
    let uncached = t
        .requests
        .input_tokens
        .at(d)
        .map(|n| u64::from(n - t.requests.cached_tokens.at(d).unwrap_or(0)));
    assert_eq!(Some(prompt), uncached);
    let (from, to) = (
        t.iterations.start_ns[rows[0] as usize],
        t.iterations.end_ns[rows[4] as usize],
    );
    let source = t.iterations.source[rows[0] as usize];
    let waited = waited_within(&t, source, from, to, doc);
    let who = ids(&t, &f.requests);
    let waited_ids: Vec<String> = waited.iter().map(|w| w.0.clone()).collect();
    assert_eq!(who[1..], waited_ids[..], "{who:?}");
    assert_eq!(who[1], "short-700", "the 700-token prompt waited longest");
    let total: i64 = waited.iter().map(|w| w.1).sum();
    assert_eq!(
        f.summary,
        format!(
            "doc-96k's prefill of {} prompt tokens took 5 consecutive steps of vllm-0 ({}) while {}, {} and {} \
             others waited: {} of added queue time in all, {} for short-700",
            thousands(prompt),
            secs(to - from),
            waited[0].0,
            waited[1].0,
            waited.len() - 2,
            secs(total),
            secs(waited[0].1)
        )
    );
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(f.from_ns, t.iterations.start_ns[f.steps[0] as usize]);
    assert_eq!(f.to_ns, t.iterations.end_ns[f.steps[4] as usize]);
    assert_eq!(f.tokens, [t.tokens_of(doc).start], "doc-96k's first token");
    assert!(eos_mistrigger(&t, &th()).is_empty());
}

#[test]
fn mixed_yields_all_three_kinds_naming_the_planted_requests() {
    let t = sample("demo.parquet");
    let all = find(&t, &Slo::default(), &th());
    let of = |k: Kind| all.iter().filter(|f| f.kind == k).collect::<Vec<_>>();

    let interrupted = of(Kind::DecodeInterrupted);
    let with_victim: Vec<_> = interrupted
        .iter()
        .filter(|f| ids(&t, &f.requests).contains(&"chat-victim".to_owned()))
        .collect();
    assert_eq!(with_victim.len(), 1, "{interrupted:#?}");
    let f = with_victim[0];
    assert!(
        f.summary.contains("rag-24k") && f.summary.contains("chat-victim"),
        "{}",
        f.summary
    );
    assert_eq!(f.steps.len(), 2, "the 24k step and the 6k step");
    assert_eq!(prefilled_in(&t, f.steps[0]), ["rag-24k"]);
    // The other episode is doc-96k's chunks stalling a decode on vllm-1.
    assert_eq!(interrupted.len(), 2);

    let eos = of(Kind::EosMistrigger);
    assert_eq!(eos.len(), 1, "{eos:#?}");
    assert_eq!(ids(&t, &eos[0].requests), ["med-question"]);
    assert_eq!(t.tokens.index[eos[0].tokens[0]], 37);

    // Two prompts held their instance while others waited: rag-24k in one step of vllm-0 (no chunked prefill: the
    // 6k prompts behind it queued), doc-96k in five chunks of vllm-1.
    let monopoly = of(Kind::PrefillMonopoly);
    assert_eq!(monopoly.len(), 2, "{monopoly:#?}");
    assert_eq!(t.request_id(monopoly[0].requests[0]), "rag-24k");
    assert_eq!(monopoly[0].steps.len(), 1);
    assert!(
        monopoly[0].summary.contains("took a whole step of vllm-0"),
        "{}",
        monopoly[0].summary
    );
    assert_eq!(t.request_id(monopoly[1].requests[0]), "doc-96k");
    assert_eq!(monopoly[1].steps.len(), 5);
    assert_eq!(t.request_id(monopoly[1].requests[1]), "short-700");

    // Sorted by severity, then start.
    assert!(
        all.windows(2)
            .all(|w| (w[0].severity, w[0].from_ns, w[0].kind) <= (w[1].severity, w[1].from_ns, w[1].kind))
    );
    assert!(all.iter().all(|f| f.from_ns < f.to_ns));
}

#[test]
fn steady_traffic_sets_off_none_of_the_incident_detectors() {
    // `mixed`'s engines and ordinary traffic without its planted requests: chunked and unchunked prefill mixing,
    // prefix-cache hits, a few truncations. Several seeds, so the margin is not luck.
    for seed in 1..=4 {
        let t = generate(&SynthOptions {
            scenario: Scenario::Steady,
            seed,
            requests: None,
            arrivals: None,
            replay: ReplayOptions::default(),
            sources: 1,
            prefix_cache_tokens: None,
            profile: tokenscope_synth::ProfileChoice::default(),
            chunked_prefill: None,
            plant: None,
        })
        .unwrap();
        assert_eq!(t.request_count(), 300);
        for (kind, found) in [
            (Kind::DecodeInterrupted, decode_interrupted(&t, &th())),
            (Kind::EosMistrigger, eos_mistrigger(&t, &th())),
            (Kind::PrefillMonopoly, prefill_monopoly(&t, &th())),
        ] {
            assert!(found.is_empty(), "seed {seed}: {}: {found:#?}", kind.name());
        }
        // Nor do the resource detectors: the KV cache is far from full at 3 requests/s.
        assert!(kv_saturation(&t, &th()).is_empty());
        assert!(preemption_bursts(&t, &th()).is_empty());
        assert!(repetition_loops(&t, &th()).is_empty());
    }
}
