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
use tokenscope_core::analysis::summary::Slo;
use tokenscope_core::ingest::Progress;
use tokenscope_core::load::load;
use tokenscope_core::synth::arrivals::ReplayOptions;
use tokenscope_core::synth::{Scenario, SynthOptions, generate};
use tokenscope_core::trace::Trace;

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

// ---------------------------------------------------------------------------------------------------------------
// The incident samples.

#[test]
fn prefill_interrupts_decode_is_one_episode_naming_chat_victim_and_its_culprits() {
    let t = sample("prefill_interrupts_decode.jsonl");
    let found = decode_interrupted(&t, &th());
    assert_eq!(found.len(), 1, "{found:#?}");
    let f = &found[0];
    let who = ids(&t, &f.requests);
    // Three requests were decoding when the prefills arrived; each waited through the same steps. The subject is
    // the worst stalled: req-00002 and chat-victim both waited 3.683 s, req-00002 at the larger multiple of its
    // median (350× 10.5 ms). rag-24k stalled too: its token 1 waited behind the 6k prompts.
    assert_eq!(who[..3], ["req-00002", "chat-victim", "rag-24k"], "{who:?}");
    // Then the culprits, most prompt tokens first.
    assert_eq!(who[3..7], ["rag-6k-1", "rag-6k-2", "rag-6k-3", "rag-6k-4"], "{who:?}");
    // The steps: the 24k prompt alone (iteration 214, 3.35-5.14 s), the four 6k prompts with two 16-token
    // remainders of background prompts (215, 5.14-6.82 s), then three background prompts (216, 6.82-7.02 s), all
    // prefill-only steps (chunked prefill off) ahead of the stalled decode.
    assert_eq!(iterations(&t, f), [214, 215, 216]);
    assert_eq!(prefilled_in(&t, f.steps[0]), ["rag-24k"]);
    assert_eq!(
        prefilled_in(&t, f.steps[1]),
        ["req-00003", "rag-6k-1", "rag-6k-2", "req-00004", "rag-6k-3", "rag-6k-4"]
    );
    // chat-victim's stalled token (index 28) is among the tokens; the subject's first.
    let victim = t.request_row("chat-victim").unwrap();
    let stalled: Vec<usize> = f
        .tokens
        .iter()
        .copied()
        .filter(|&k| t.tokens.request[k] == victim)
        .collect();
    assert_eq!(stalled.len(), 1);
    assert_eq!(t.tokens.index[stalled[0]], 28);
    assert_eq!(
        t.tokens.emitted_ns[stalled[0]] - t.tokens.emitted_ns[stalled[0] - 1],
        3_682_954_766
    );
    assert_eq!(t.request_id(t.tokens.request[f.tokens[0]]), "req-00002");
    assert_eq!(f.severity, Severity::Critical, "a 3.7 s freeze");
    assert_eq!(
        f.summary,
        "req-00002's token 188 waited 3.68 s, 350× its median, while rag-24k, rag-6k-1, rag-6k-2, rag-6k-3 and \
         rag-6k-4 with 5 smaller prompts prefilled 51,060 prompt tokens in 3 steps on vllm-0: without those \
         prefills it would have taken about 10.5 ms, its median; chat-victim and rag-24k stalled too"
    );
    // From the first stalled token's predecessor to the last stalled token.
    assert!(f.from_ns < t.iterations.start_ns[f.steps[0] as usize]);
    assert!(f.to_ns > t.iterations.end_ns[f.steps[2] as usize]);
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
    assert_eq!(t.tokens.iteration[k], 149);
    assert_eq!(iterations(&t, f), [149]);
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
    // Five consecutive steps, 142-146, each with a chunk of doc-96k (4 × 20,479 + 14,297 = 96,213).
    assert_eq!(iterations(&t, f), [142, 143, 144, 145, 146]);
    assert!(f.steps.windows(2).all(|w| w[1] == w[0] + 1));
    assert!(
        f.steps
            .iter()
            .all(|&s| prefilled_in(&t, s).contains(&"doc-96k".to_owned()))
    );
    // short-700 waited longest: from its arrival (3.05 s) to the fifth step's start (11.58 s), 8.53 s.
    let who = ids(&t, &f.requests);
    assert_eq!(who[1], "short-700", "{who:?}");
    assert_eq!(who.len(), 7);
    assert_eq!(
        f.summary,
        "doc-96k's prefill of 96,213 prompt tokens took 5 consecutive steps of vllm-0 (11.11 s) while short-700, \
         req-00003 and 4 others waited: 28.96 s of added queue time in all, 8.53 s for short-700"
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
            profile: tokenscope_core::synth::ProfileChoice::default(),
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
