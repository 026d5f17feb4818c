//! The detectors on the incident samples (each finds exactly its planted incident), on the clean `steady` scenario
//! (none of the three incident kinds fires), on `mixed` (all three), and on tiny hand-built traces whose figures are
//! checked by hand.

// Test helpers may unwrap: a panic here is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use tokenscope::analysis::findings::{
    Finding, Kind, Severity, Thresholds, chronic_interference, decode_interrupted, eos_mistrigger, find, find_kinds,
    kv_saturation, overload, preemption_bursts, prefill_monopoly, repetition_loops, slo_violations, token_mismatches,
    truncation,
};
use tokenscope::analysis::summary::{Slo, summarize_all};
use tokenscope::ingest::Progress;
use tokenscope::load::{LoadOptions, load, load_bytes, load_with};
use tokenscope::synth::arrivals::ReplayOptions;
use tokenscope::synth::{Scenario, SynthOptions, generate};
use tokenscope::trace::Trace;

fn sample(name: &str) -> Trace {
    let path = Path::new("sample_traces").join(name);
    load(&path, &Progress::default())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trace
}

fn ids(t: &Trace, rows: &[u32]) -> Vec<String> {
    rows.iter().map(|&r| t.request_id(r).to_owned()).collect()
}

/// The step numbers (`iteration`) of a finding's steps.
fn iterations(t: &Trace, f: &Finding) -> Vec<i64> {
    f.steps.iter().map(|&s| t.iterations.iteration[s as usize]).collect()
}

/// Request ids of the prefill chunks in a step row.
fn prefilled_in(t: &Trace, row: u32) -> Vec<String> {
    (0..t.stages.len())
        .filter(|&s| t.stages.iter_row[s] == Some(row))
        .map(|s| t.request_id(t.stages.request[s]).to_owned())
        .collect()
}

fn th() -> Thresholds {
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
            profile: tokenscope::synth::ProfileChoice::default(),
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

// ---------------------------------------------------------------------------------------------------------------
// Hand-built traces.

const T0: i64 = 1_764_403_200_000_000_000;

/// ns of `ms` milliseconds after the trace start.
fn at(ms: i64) -> i64 {
    T0 + ms * 1_000_000
}

fn trace_of(lines: &[String]) -> Trace {
    let text = lines.join("\n");
    let bytes: &'static [u8] = Box::leak(text.into_bytes().into_boxed_slice());
    let l = load_bytes("t.jsonl", bytes).unwrap();
    assert_eq!(l.report.rejected_count(), 0, "{:?}", l.report.rejected.first());
    l.trace
}

fn step(source: &str, n: i64, from_ms: i64, to_ms: i64, extra: &str) -> String {
    format!(
        r#"{{"kind":"iteration","source":"{source}","iteration":{n},"start_ns":{},"end_ns":{}{extra}}}"#,
        at(from_ms),
        at(to_ms)
    )
}

fn request(id: &str, arrival_ms: i64, extra: &str) -> String {
    format!(
        r#"{{"kind":"request","request_id":"{id}","source":"e","arrival_ns":{}{extra}}}"#,
        at(arrival_ms)
    )
}

fn token(id: &str, index: u32, emitted_ms: i64, extra: &str) -> String {
    format!(
        r#"{{"kind":"token","request_id":"{id}","index":{index},"emitted_ns":{}{extra}}}"#,
        at(emitted_ms)
    )
}

/// A prefill chunk of `id` in step `n`.
fn prefill_stage(id: &str, n: i64, from_ms: i64, to_ms: i64, tokens: u32) -> String {
    let (from, to) = (at(from_ms), at(to_ms));
    format!(
        r#"{{"kind":"stage","request_id":"{id}","stage":"prefill","iteration":{n},"start_ns":{from},"end_ns":{to},"#
    ) + &format!(r#""tokens":{tokens}}}"#)
}

/// A decoding request `v` on one unchunked engine: a 20 ms prefill step, ten 10 ms decode steps, then a
/// prefill-only step of `big` (`prompt` tokens, 500 ms) it sits out, then four more decode steps.
fn stalled_decode(prompt: u32, with_stages: bool) -> Trace {
    let mut l = vec![
        request("v", 0, r#","scheduled_ns":1764403200000000000,"output_tokens":15"#),
        request("big", 100, r#","scheduled_ns":1764403200120000000,"output_tokens":1"#),
        step("e", 0, 0, 20, r#","num_prefill_tokens":100"#),
        token("v", 0, 20, r#","iteration":0"#),
    ];
    for k in 1..=10 {
        l.push(step("e", k, 10 * k + 10, 10 * k + 20, r#","num_decode_tokens":1"#));
        l.push(token("v", k as u32, 10 * k + 20, &format!(r#","iteration":{k}"#)));
    }
    l.push(step("e", 11, 120, 620, &format!(r#","num_prefill_tokens":{prompt}"#)));
    l.push(token("big", 0, 620, r#","iteration":11"#));
    for k in 12..=15 {
        l.push(step("e", k, 10 * k + 500, 10 * k + 510, r#","num_decode_tokens":1"#));
        l.push(token("v", k as u32 - 1, 10 * k + 510, &format!(r#","iteration":{k}"#)));
    }
    if with_stages {
        l.push(prefill_stage("big", 11, 120, 620, prompt));
    }
    trace_of(&l)
}

#[test]
fn a_decode_that_sits_out_a_large_prefill_is_interrupted() {
    let t = stalled_decode(20_000, true);
    let found = decode_interrupted(&t, &th());
    assert_eq!(found.len(), 1, "{found:#?}");
    let f = &found[0];
    // v's ITLs: ten of 10 ms, one of 510 ms (120 -> 630 ms), three of 10 ms: median 10 ms, 51×.
    assert_eq!(
        f.summary,
        "v's token 11 waited 510.0 ms, 51× its median, while big prefilled 20,000 prompt tokens in 1 step on e: \
         without those prefills it would have taken about 10.0 ms, its median"
    );
    assert_eq!(ids(&t, &f.requests), ["v", "big"]);
    assert_eq!(iterations(&t, f), [11]);
    assert_eq!(t.tokens.index[f.tokens[0]], 11);
    assert_eq!((f.from_ns, f.to_ns), (at(120), at(630)));
    assert_eq!(f.severity, Severity::Warning, "under a second");

    // 10,000 prompt tokens are under the default 16,384, but the stall (510 ms) is past `stall_ms` (500) and 500 ms
    // of it is big's prefill-only step (98 %, over half): on this small trace it is an interruption all the same...
    assert_eq!(decode_interrupted(&stalled_decode(10_000, true), &th()).len(), 1);
    // ...not when a stall must last 600 ms...
    let patient = Thresholds {
        stall_ms: 600.0,
        ..th()
    };
    assert!(decode_interrupted(&stalled_decode(10_000, true), &patient).is_empty());
    // ...unless the count of prompt tokens is over a lower threshold.
    let low = Thresholds {
        large_prefill_tokens: 8_000,
        ..patient
    };
    assert_eq!(decode_interrupted(&stalled_decode(10_000, true), &low).len(), 1);
    // A stall under the ITL factor is not one: 510 ms is 51× the median.
    let lax = Thresholds {
        itl_factor: 60.0,
        ..th()
    };
    assert!(decode_interrupted(&t, &lax).is_empty());
}

#[test]
fn without_prefill_stages_the_steps_prefill_tokens_are_unattributed() {
    let t = stalled_decode(20_000, false);
    let found = decode_interrupted(&t, &th());
    assert_eq!(found.len(), 1);
    assert_eq!(
        found[0].summary,
        "v's token 11 waited 510.0 ms, 51× its median, while other requests prefilled 20,000 prompt tokens in 1 \
         step on e: without those prefills it would have taken about 10.0 ms, its median"
    );
    assert_eq!(ids(&t, &found[0].requests), ["v"]);
}

#[test]
fn repetition_loops_by_token_id_and_by_text() {
    let mut l = vec![request("loop", 0, ""), request("short", 0, ""), request("texts", 0, "")];
    // loop: 8 distinct tokens, the 3-gram (7, 8, 9) eight times (24 tokens), 8 distinct tokens.
    let mut ids_of_loop: Vec<u32> = (100..108).collect();
    for _ in 0..8 {
        ids_of_loop.extend([7, 8, 9]);
    }
    ids_of_loop.extend(200..208);
    let text = |id: u32| match id {
        7 => " a",
        8 => " b",
        9 => " c",
        _ => " w",
    };
    for (i, &id) in ids_of_loop.iter().enumerate() {
        let extra = format!(r#","token_id":{id},"text":"{}""#, text(id));
        l.push(token("loop", i as u32, 10 * i as i64, &extra));
    }
    // short: a 2-gram four times (8 tokens) inside 20: under the 16-token minimum.
    for i in 0..20u32 {
        let id = if (4..12).contains(&i) { 1 + i % 2 } else { 300 + i };
        l.push(token("short", i, i64::from(i), &format!(r#","token_id":{id}"#)));
    }
    // texts: no token ids; "x", "y" ten times.
    for i in 0..20u32 {
        let s = if i % 2 == 0 { "x" } else { "y" };
        l.push(token("texts", i, i64::from(i), &format!(r#","text":"{s}""#)));
    }
    let t = trace_of(&l);
    let found = repetition_loops(&t, &th());
    assert_eq!(found.len(), 2, "{found:#?}");
    let f = found.iter().find(|f| t.request_id(f.requests[0]) == "loop").unwrap();
    assert_eq!(
        f.summary,
        "loop repeated “␣a␣b␣c” (3-gram) 8 times from token 8: 24 tokens, 60 % of its output"
    );
    let first = t.tokens_of(f.requests[0]).start;
    assert_eq!(f.tokens, (first + 8..first + 32).collect::<Vec<_>>());
    assert_eq!((f.from_ns, f.to_ns), (at(80), at(310)));
    let g = found.iter().find(|f| t.request_id(f.requests[0]) == "texts").unwrap();
    assert_eq!(
        g.summary,
        "texts repeated “xy” (2-gram) 10 times from token 0: 20 tokens, 100 % of its output"
    );
    // Nine repeats asked: the 3-gram's eight fall short, the 2-gram's ten do not.
    let five = Thresholds {
        repetition_repeats: 9,
        ..th()
    };
    assert_eq!(ids(&t, &repetition_loops(&t, &five)[0].requests), ["texts"]);
}

#[test]
fn kv_saturation_is_one_finding_per_episode_of_full_steps() {
    // Steps of 400 ms every second on e (f stays at half): 95 % or more at steps 1, 2, 3 and 5; at 30 and 31, with
    // a preemption at 31; and at 60 alone.
    let usage = [0.5, 0.96, 0.97, 0.99, 0.8, 0.95, 0.5, 0.4];
    let mut l = vec![request("a", 0, "")];
    let mut add = |k: i64, u: f64, more: &str| {
        l.push(step(
            "e",
            k,
            1_000 * k,
            1_000 * k + 400,
            &format!(r#","kv_usage":{u}{more}"#),
        ));
        l.push(step("f", k, 1_000 * k, 1_000 * k + 400, r#","kv_usage":0.5"#));
    };
    for (k, u) in usage.iter().enumerate() {
        add(k as i64, *u, "");
    }
    add(30, 0.97, "");
    add(31, 0.96, r#","num_preempted":1"#);
    add(60, 0.96, "");
    let t = trace_of(&l);
    let found = kv_saturation(&t, &th());
    assert_eq!(found.len(), 2, "{found:#?}");
    // Steps 1-3 and 5 are one episode: the cache was under the line for 1.6 s between them (3.4 s to 5.0 s), less
    // than the 10 s that part two episodes. Four steps of 400 ms saturated, within 1.0 s to 5.4 s.
    assert_eq!(iterations(&t, &found[0]), [1, 2, 3, 5]);
    assert_eq!((found[0].from_ns, found[0].to_ns), (at(1_000), at(5_400)));
    assert_eq!(
        found[0].summary,
        "KV cache of e at 95 % or more for 4 steps (1.60 s within 4.40 s), peak 99.0 %"
    );
    // 24.6 s later: two steps in a row, 800 ms saturated, under the second an episode must last, but a request was
    // preempted: kept. Step 60, 400 ms alone with no preemption, is a brush with the limit: no finding.
    assert_eq!(iterations(&t, &found[1]), [30, 31]);
    assert_eq!(
        found[1].summary,
        "KV cache of e at 95 % or more for 2 steps (800.0 ms), peak 97.0 %; 1 preemptions"
    );
    // A stricter line: only step 3 (99 %), 400 ms, nothing preempted.
    let stricter = Thresholds {
        kv_saturation: 0.98,
        ..th()
    };
    assert!(kv_saturation(&t, &stricter).is_empty());
}

#[test]
fn preemption_bursts_cluster_close_preemptions_and_name_the_preempted() {
    let mut l = Vec::new();
    for (id, at_ms) in [("a", 0), ("b", 300), ("c", 600), ("d", 600), ("x", 5_000)] {
        l.push(request(id, 0, ""));
        l.push(format!(
            r#"{{"kind":"stage","request_id":"{id}","stage":"preempted","start_ns":{},"end_ns":{}}}"#,
            at(at_ms),
            at(at_ms + 50)
        ));
    }
    for (n, from, preempted) in [
        (0, 0, 1),
        (1, 300, 1),
        (2, 600, 2),
        (3, 700, 0),
        (4, 5_000, 1),
        (5, 5_500, 1),
    ] {
        l.push(step(
            "e",
            n,
            from,
            from + 40,
            &format!(r#","num_preempted":{preempted}"#),
        ));
    }
    let t = trace_of(&l);
    let found = preemption_bursts(&t, &th());
    assert_eq!(found.len(), 1, "{found:#?}");
    let f = &found[0];
    assert_eq!(iterations(&t, f), [0, 1, 2]);
    assert_eq!(ids(&t, &f.requests), ["a", "b", "c", "d"]);
    assert_eq!(
        f.summary,
        "4 preemptions in 3 steps of e within 640.0 ms: a, b and 2 others recomputed"
    );
    // Steps 300 ms apart are not within a 200 ms window; with 2 preemptions enough, 5.0-5.5 s is a burst too.
    let narrow = Thresholds {
        preemption_burst_window_ms: 200.0,
        ..th()
    };
    assert!(preemption_bursts(&t, &narrow).is_empty());
    let two = Thresholds {
        preemption_burst_count: 2,
        ..th()
    };
    let found = preemption_bursts(&t, &two);
    assert_eq!(found.len(), 2);
    assert_eq!(ids(&t, &found[1].requests), ["x"]);
}

#[test]
fn truncations_are_one_finding_longest_first() {
    let mut l = vec![
        request("a", 0, r#","finish_reason":"length","output_tokens":5"#),
        request("b", 10, r#","finish_reason":"length","output_tokens":9"#),
        request("c", 20, r#","finish_reason":"stop","output_tokens":2"#),
    ];
    for (id, n) in [("a", 5), ("b", 9), ("c", 2)] {
        for i in 0..n {
            l.push(token(id, i, 100 + i64::from(i), ""));
        }
    }
    let t = trace_of(&l);
    let found = truncation(&t);
    assert_eq!(found.len(), 1);
    let f = &found[0];
    assert_eq!(ids(&t, &f.requests), ["b", "a"]);
    assert_eq!(
        f.summary,
        "2 of 3 requests (66.7 %) stopped at their token limit (finish_reason length): b and a; the longest, b, \
         after 9 tokens"
    );
    let (a, b) = (t.request_row("a").unwrap(), t.request_row("b").unwrap());
    assert_eq!(f.tokens, [t.tokens_of(b).end - 1, t.tokens_of(a).end - 1]);
    assert_eq!((f.from_ns, f.to_ns), (at(0), at(108)));
    assert_eq!(f.severity, Severity::Info);
}

/// 20 requests of app "qa" answer 40 tokens; "short" answers 5. Every answer ends on the text `</s>`, with no
/// special flag, no `meta.eos_token_ids`, and no logprob unless `short_logprob` gives one.
fn answers(short_logprob: Option<f64>) -> Trace {
    let mut l = Vec::new();
    for r in 0..21 {
        let (id, n) = if r == 20 {
            ("short".to_owned(), 5)
        } else {
            (format!("q{r}"), 40)
        };
        l.push(request(&id, r, r#","app_id":"qa","model":"m","finish_reason":"stop""#));
        for i in 0..n {
            let last = i + 1 == n;
            let mut extra = format!(r#","text":"{}""#, if last { "</s>" } else { " w" });
            if let (true, true, Some(lp)) = (last, r == 20, short_logprob) {
                extra.push_str(&format!(r#","logprob":{lp}"#));
            }
            l.push(token(&id, i, 100 + r + i64::from(i), &extra));
        }
    }
    trace_of(&l)
}

#[test]
fn an_answer_far_shorter_than_its_apps_ends_early_when_logprobs_are_missing() {
    let t = answers(None);
    let found = eos_mistrigger(&t, &th());
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(ids(&t, &found[0].requests), ["short"]);
    assert_eq!(
        found[0].summary,
        "short ended at token 4 on </s> after 5 tokens, under 25 % of the median 40 of its app qa (21 requests)"
    );
    assert_eq!(found[0].severity, Severity::Warning);
    // With its probability recorded, a confident stop is the model's intent however short...
    assert!(eos_mistrigger(&answers(Some(-0.01)), &th()).is_empty());
    // ...and an unlikely one a mis-trigger (p = e^-1.2 = 0.301).
    let found = eos_mistrigger(&answers(Some(-1.2)), &th());
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].summary, "short ended at token 4 on </s> chosen with p = 0.301");
    // Too few peers for a median: nothing.
    let picky = Thresholds {
        early_eos_min_peers: 22,
        ..th()
    };
    assert!(eos_mistrigger(&t, &picky).is_empty());
}

#[test]
fn four_requests_by_hand_eos_slo_truncation_and_mismatch() {
    let t = sample("four_requests.jsonl");
    // r1 ends on 151645 (special, in meta.eos_token_ids), logprob -2.3 (p = 0.100), rank 2; the candidate ","
    // had logprob -0.2 (p = 0.819).
    let eos = eos_mistrigger(&t, &th());
    assert_eq!(eos.len(), 1);
    assert_eq!(
        eos[0].summary,
        "r1 ended at token 2 on ⟨EOS⟩ chosen with p = 0.100 (rank 2); the most likely token was “,” (p = 0.819)"
    );
    // TTFT: r1 150 ms, r2 200 ms, r3 500 ms, r4 60 ms. TPOT: r1 (250 - 150) / 2 = 50 ms, r3 (800 - 500) / 3 =
    // 100 ms, r4 (300 - 60) / 4 = 60 ms (output_tokens 5), r2 undefined.
    let slo = Slo {
        ttft_ms: Some(160.0),
        tpot_ms: Some(55.0),
    };
    let found = slo_violations(&t, &slo);
    assert_eq!(found.len(), 2);
    assert_eq!(
        found[0].summary,
        "2 of 4 requests (50.0 %) missed the TTFT objective of 160 ms; worst r3 (TTFT 500.0 ms)"
    );
    assert_eq!(ids(&t, &found[0].requests), ["r3", "r2"]);
    assert_eq!((found[0].from_ns, found[0].to_ns), (at(100), at(1_000)));
    assert_eq!(ids(&t, &found[1].requests), ["r3", "r4"]);
    assert!(
        found[1]
            .summary
            .starts_with("2 of 4 requests (50.0 %) missed the TPOT objective of 55 ms")
    );
    assert!(slo_violations(&t, &Slo::default()).is_empty());
    // r2 finished on length after its one token.
    let cut = truncation(&t);
    assert_eq!(
        cut[0].summary,
        "r2 stopped at its token limit (finish_reason length) after 1 token"
    );
    // r4 says 5 output tokens and has 4 records (index 3 is missing): the summary's count.
    let bad = token_mismatches(&t);
    assert_eq!(bad.len(), 1);
    assert_eq!(
        bad[0].summary,
        "output_tokens disagrees with the token records of 1 request: r4 says 5 and has 4 records"
    );
    assert_eq!(
        bad[0].requests.len() as u64,
        summarize_all(&t, Slo::default(), None).token_mismatches
    );
    // find gathers them, critical first.
    let all = find(&t, &slo, &th());
    let kinds: Vec<Kind> = all.iter().map(|f| f.kind).collect();
    assert_eq!(
        kinds,
        [
            Kind::EosMistrigger,
            Kind::SloViolations,
            Kind::SloViolations,
            Kind::Truncation,
            Kind::TokenMismatch
        ]
    );
}

#[test]
fn kinds_and_severities_have_stable_names() {
    for k in Kind::ALL {
        assert_eq!(Kind::from_name(k.name()), Some(k));
        assert!(!k.title().is_empty());
        assert_eq!(serde_json::to_value(k).unwrap(), k.name());
    }
    assert_eq!(Kind::DecodeInterrupted.name(), "decode-interrupted");
    assert!(Severity::Critical < Severity::Warning && Severity::Warning < Severity::Info);
    assert_eq!(serde_json::to_value(Severity::Critical).unwrap(), "critical");
    // Thresholds read back from partial JSON, the rest defaulted.
    let th: Thresholds = serde_json::from_str(r#"{"monopoly_steps": 4}"#).unwrap();
    assert_eq!(th.monopoly_steps, 4);
    assert_eq!(th.itl_factor, 3.0);
}

/// `find` on the benchmark trace when it has been generated (`cargo bench` writes it):
/// `cargo test --test integration findings:: -- --ignored --nocapture`.
#[test]
#[ignore = "needs target/bench-data/large-50000.parquet; prints timings"]
fn find_on_the_large_trace() {
    let path = Path::new("target/bench-data/large-50000.parquet");
    let t = load_with(
        path,
        &Progress::default(),
        LoadOptions {
            lazy_candidates: true,
            ..LoadOptions::default()
        },
    )
    .unwrap()
    .trace;
    let start = std::time::Instant::now();
    let found = find(&t, &Slo::default(), &th());
    println!(
        "{} tokens: {} findings in {:?}",
        t.token_count(),
        found.len(),
        start.elapsed()
    );
}

/// `long` prefills in steps `chunk_steps` of `e` (100 ms each from 0); `w` arrives at 50 ms and is scheduled at
/// 250 ms (or has no scheduled time); `num_waiting` is 1 in every step.
fn monopoly_trace(chunk_steps: &[i64], w_scheduled: bool) -> Trace {
    let mut l = vec![
        request("long", 0, r#","scheduled_ns":1764403200000000000"#),
        request(
            "w",
            50,
            if w_scheduled {
                r#","scheduled_ns":1764403200250000000"#
            } else {
                ""
            },
        ),
    ];
    for n in 0..5 {
        l.push(step("e", n, 100 * n, 100 * n + 100, r#","num_waiting":1"#));
    }
    for &n in chunk_steps {
        l.push(prefill_stage("long", n, 100 * n, 100 * n + 100, 8192));
    }
    trace_of(&l)
}

#[test]
fn a_prefill_monopoly_needs_consecutive_steps_and_someone_waiting() {
    let t = monopoly_trace(&[0, 1, 2], true);
    let found = prefill_monopoly(&t, &th());
    assert_eq!(found.len(), 1, "{found:#?}");
    let f = &found[0];
    assert_eq!(iterations(&t, f), [0, 1, 2]);
    assert_eq!(ids(&t, &f.requests), ["long", "w"]);
    // w waited 50 -> 250 ms, all inside the steps' 0-300 ms.
    assert_eq!(
        f.summary,
        "long's prefill of 24,576 prompt tokens took 3 consecutive steps of e (300.0 ms) while w waited: 200.0 ms of \
         added queue time"
    );
    assert_eq!(f.severity, Severity::Warning);
    // Chunks in steps 0, 1 and 3 are two runs, both under 3 steps.
    assert!(prefill_monopoly(&monopoly_trace(&[0, 1, 3], true), &th()).is_empty());
    // Two steps are enough when asked.
    let two = Thresholds {
        monopoly_steps: 2,
        ..th()
    };
    assert_eq!(prefill_monopoly(&monopoly_trace(&[0, 1, 3], true), &two).len(), 1);
    // Without a scheduled time, the steps' num_waiting says someone waited.
    let found = prefill_monopoly(&monopoly_trace(&[0, 1, 2], false), &th());
    assert_eq!(found.len(), 1);
    assert!(
        found[0].summary.ends_with("while up to 1 request was waiting"),
        "{}",
        found[0].summary
    );
}

#[test]
fn with_candidates_left_on_disk_the_eos_finding_gives_rank_and_p_only() {
    let lazy = load_with(
        Path::new("sample_traces/demo.parquet"),
        &Progress::default(),
        LoadOptions {
            lazy_candidates: true,
            ..LoadOptions::default()
        },
    )
    .unwrap()
    .trace;
    assert!(lazy.candidates.is_empty());
    let found = eos_mistrigger(&lazy, &th());
    assert_eq!(found.len(), 1);
    assert_eq!(
        found[0].summary,
        "med-question ended at token 37 on ⟨EOS⟩ chosen with p = 0.100 (rank 2)"
    );
}

#[test]
fn only_the_kinds_asked_for_run_and_every_run_sorts_alike() {
    // Two answers cut at their limit (one truncation finding), first tokens at 5 and 6 ms against a TTFT
    // objective of 1 ms (one SLO finding).
    let mut l = Vec::new();
    for (r, id) in ["a", "b"].into_iter().enumerate() {
        l.push(request(id, 0, r#","finish_reason":"length","output_tokens":2"#));
        let first = 5 + i64::try_from(r).unwrap();
        l.push(token(id, 0, first, ""));
        l.push(token(id, 1, first + 3, ""));
    }
    let t = trace_of(&l);
    let slo = Slo {
        ttft_ms: Some(1.0),
        tpot_ms: None,
    };
    let kinds = |only: &[Kind]| -> Vec<Kind> { find_kinds(&t, &slo, &th(), only).iter().map(|f| f.kind).collect() };
    assert_eq!(kinds(&Kind::ALL), [Kind::SloViolations, Kind::Truncation]);
    assert_eq!(kinds(&[Kind::Truncation]), [Kind::Truncation]);
    assert_eq!(kinds(&[Kind::EosMistrigger]), []);
    assert_eq!(find(&t, &slo, &th()), find_kinds(&t, &slo, &th(), &Kind::ALL));
    // The SLO finding counts both answers; the worst is the later first token.
    let found = find(&t, &slo, &th());
    assert!(
        found[0]
            .summary
            .starts_with("2 of 2 requests (100.0 %) missed the TTFT objective of 1 ms; worst b"),
        "{}",
        found[0].summary
    );
}

/// Twenty requests on one instance, one a second from 0 s, scheduled one every 2 s (request k at 2k s, its first
/// token 100 ms later): request k waits k s, the queue grows until the last arrival, then drains.
fn overloaded() -> Trace {
    let mut l = Vec::new();
    for k in 0..20i64 {
        let id = format!("q{k:02}");
        l.push(request(
            &id,
            1000 * k,
            &format!(r#","scheduled_ns":{},"output_tokens":1"#, at(2000 * k)),
        ));
        l.push(token(&id, 0, 2000 * k + 100, ""));
    }
    trace_of(&l)
}

#[test]
fn a_queue_that_grows_for_half_a_minute_is_overload_with_its_figures() {
    let t = overloaded();
    let found = overload(&t, &th());
    assert_eq!(found.len(), 1, "{found:#?}");
    let f = &found[0];
    // The queue holds someone from q01's arrival (1 s) to q19's scheduling (38 s): 37 s. Until the peak (q19's
    // arrival at 19 s: q10..q19 waiting) 19 arrived (q01..q19) and 9 were scheduled (q01..q09) in 18 s. Waits of
    // q01..q19: 1..19 s, median (nearest rank, 10th of 19) 10 s. TTFT of the first quarter (q01..q04: 1.1..4.1 s)
    // is 2.1 s (2nd of 4), of the last (q16..q19) 17.1 s. Served: 19 in 37 s; 18 first tokens fall inside (q19's is
    // at 38.1 s), 0.49 a second.
    assert_eq!(
        f.summary,
        "Overload on e for 37.00 s from 1.0 s: until the queue peaked at 10 waiting at 19.0 s, 1.06 requests/s \
         arrived and 0.50/s were scheduled; requests waited 10.00 s in the queue (median, 19.00 s at most) and TTFT \
         went from 2.10 s to 17.10 s. Served while saturated: 0.51 requests/s, 0.5 output tokens/s: the capacity \
         this trace shows"
    );
    assert_eq!(f.severity, Severity::Critical, "a median wait of 10 s");
    assert_eq!((f.from_ns, f.to_ns), (at(1000), at(38_000)));
    assert_eq!(
        ids(&t, &f.requests[..3]),
        ["q19", "q18", "q17"],
        "the longest waits first"
    );
    assert_eq!(f.requests.len(), 19);
    // Shorter than the threshold, or waits under it: none.
    let longer = Thresholds {
        overload_min_s: 38.0,
        ..th()
    };
    assert!(overload(&t, &longer).is_empty());
    // Only waits of 12 s or more count: q12..q19 waited 12..19 s, from 12 s to 38 s (26 s): still overload.
    let patient = Thresholds {
        overload_queue_ms: 12_000.0,
        ..th()
    };
    let found = overload(&t, &patient);
    assert_eq!(found.len(), 1);
    assert_eq!((found[0].from_ns, found[0].to_ns), (at(12_000), at(38_000)));
    // None waited 20 s: none.
    let more = Thresholds {
        overload_queue_ms: 20_000.0,
        ..th()
    };
    assert!(overload(&t, &more).is_empty());
}

/// One instance decoding `v` for `cycles` cycles of 90 ms: four decode-only steps of 10 ms, then one of 50 ms that
/// also computes another request's 512-token prompt (chunked prefill). `v` gets a token at the end of every step.
fn chronically_chunked(cycles: i64) -> Trace {
    let mut l = vec![request("v", 0, r#","scheduled_ns":1764403200000000000"#)];
    let mut t = 0i64;
    for k in 0..5 * cycles {
        let prefill = k % 5 == 4;
        let len = if prefill { 50 } else { 10 };
        let extra = if prefill {
            r#","num_prefill_tokens":512,"num_decode_reqs":1"#
        } else {
            r#","num_decode_reqs":1"#
        };
        l.push(step("e", k, t, t + len, extra));
        if prefill {
            let id = format!("p{k}");
            l.push(request(
                &id,
                t,
                &format!(r#","scheduled_ns":{},"output_tokens":1"#, at(t)),
            ));
            l.push(prefill_stage(&id, k, t, t + len, 512));
            l.push(token(&id, 0, t + len, &format!(r#","iteration":{k}"#)));
        }
        l.push(token(
            "v",
            u32::try_from(k).unwrap(),
            t + len,
            &format!(r#","iteration":{k}"#),
        ));
        t += len;
    }
    trace_of(&l)
}

#[test]
fn decodes_slowed_by_prefill_minute_after_minute_are_chronic_interference() {
    // 1,000 cycles: 90 s, 5,000 tokens of v, 4,999 ITLs from its first token (10 ms) to its last (90,000 ms).
    let t = chronically_chunked(1000);
    let found = chronic_interference(&t, &th());
    assert_eq!(found.len(), 1, "two windows of a minute, one episode: {found:#?}");
    let f = &found[0];
    // The 1,000 ITLs of 50 ms each owe 40 ms to the prompt computed in their step (a decode-only step takes 10 ms):
    // 40,000 of 89,990 ms, 44 %. v's TPOT: 89,990 ms / 4,999 = 18.0 ms.
    assert_eq!(
        f.summary,
        "Decodes on e spent 44 % of their time behind other requests' prefill for 89.99 s: 1,000 of 4,999 tokens \
         waited through a prompt's computation and took 50.0 ms (median) where a decode-only step takes 10.0 ms \
         (5.0×); the 1 request decoding had a TPOT of 18.0 ms (median) against about 10.0 ms without it. Prompts \
         were computed in the decodes' own steps (chunked prefill): a smaller token budget per step \
         (max_num_batched_tokens) trades some TTFT for TPOT; prefill/decode disaggregation removes the interference"
    );
    assert_eq!(ids(&t, &f.requests), ["v"]);
    assert_eq!((f.from_ns, f.to_ns), (at(10), at(90_000)));
    // A third of the time is the default; at half, nothing.
    let lax = Thresholds {
        chronic_prefill_share: 0.5,
        ..th()
    };
    assert!(chronic_interference(&t, &lax).is_empty());
    // The clean scenario: ordinary prompts at 1.5 requests/s an instance never make it chronic.
    let steady = generate(&SynthOptions {
        scenario: Scenario::Steady,
        seed: 1,
        requests: None,
        arrivals: None,
        replay: ReplayOptions::default(),
        sources: 1,
        prefix_cache_tokens: None,
        profile: tokenscope::synth::ProfileChoice::default(),
        chunked_prefill: None,
        plant: None,
    })
    .unwrap();
    assert!(chronic_interference(&steady, &th()).is_empty());
    assert!(overload(&steady, &th()).is_empty());
    // An incident is not a condition: the 24k-token prompt stalls a few tokens for long (a large share of a short
    // trace's decode time, under a tenth of its tokens), as the 96k-token one does.
    for name in ["prefill_interrupts_decode.jsonl", "long_prefill.jsonl"] {
        assert!(chronic_interference(&sample(name), &th()).is_empty(), "{name}");
    }
    // Every fifth token slowed: at a fifth the share holds, just above it does not.
    let fifth = Thresholds {
        chronic_token_share: 0.2,
        ..th()
    };
    assert_eq!(chronic_interference(&t, &fifth).len(), 1);
    let more = Thresholds {
        chronic_token_share: 0.21,
        ..th()
    };
    assert!(chronic_interference(&t, &more).is_empty());
}

#[test]
fn azure_conversations_replayed_twice_as_fast_on_one_instance_are_overload() {
    // Ten minutes of the real Azure conversation trace (2,867 requests), arrivals twice as fast, on one instance.
    let t = generate(&SynthOptions {
        scenario: Scenario::Replay,
        seed: 1,
        requests: None,
        arrivals: Some("tests/data/real/azure_conv_first_10min.csv".into()),
        replay: ReplayOptions {
            time_scale: 0.5,
            ..ReplayOptions::default()
        },
        sources: 1,
        prefix_cache_tokens: None,
        profile: tokenscope::synth::ProfileChoice::default(),
        chunked_prefill: None,
        plant: None,
    })
    .unwrap();
    assert_eq!(t.request_count(), 2867);
    let found = find(&t, &Slo::default(), &th());
    let over: Vec<&Finding> = found.iter().filter(|f| f.kind == Kind::Overload).collect();
    assert!(!over.is_empty(), "{found:#?}");
    // The figures of the longest episode, computed again here from the requests' own columns.
    let f = over.iter().max_by_key(|f| f.to_ns - f.from_ns).unwrap();
    let q = &t.requests;
    let inside: Vec<usize> = (0..t.request_count())
        .filter(|&r| (f.from_ns..=f.to_ns).contains(&q.arrival_ns[r]))
        .collect();
    let mut waits: Vec<i64> = inside
        .iter()
        .map(|&r| q.scheduled_ns[r].unwrap() - q.arrival_ns[r])
        .collect();
    waits.sort_unstable();
    // Nearest rank: the ceil(n / 2)-th smallest.
    let median = waits[waits.len().div_ceil(2) - 1];
    let longest = *waits.last().unwrap();
    let secs = |ns: i64| format!("{:.2} s", ns as f64 / 1e9);
    assert!(
        f.summary.contains(&format!(
            "requests waited {} in the queue (median, {} at most)",
            secs(median),
            secs(longest)
        )),
        "{}",
        f.summary
    );
    // The peak: the most requests waiting at any arrival, counted one by one.
    let peak = inside
        .iter()
        .map(|&a| {
            let at = q.arrival_ns[a];
            (0..t.request_count())
                .filter(|&r| q.arrival_ns[r] <= at && q.scheduled_ns[r].unwrap() > at)
                .count()
        })
        .max()
        .unwrap();
    assert!(
        f.summary.contains(&format!("the queue peaked at {peak} waiting")),
        "{}",
        f.summary
    );
    // Far beyond a second in the queue: a user waits before anything happens.
    assert!(median > 1_000_000_000, "median queue {median} ns");
    // Decodes there share their steps with the prompts of the requests pouring in: a condition too.
    assert!(found.iter().any(|f| f.kind == Kind::ChronicInterference), "{found:#?}");
    // The requests that waited longest are named first.
    let first = f.requests[0] as usize;
    assert_eq!(q.scheduled_ns[first].unwrap() - q.arrival_ns[first], longest);
}

#[test]
fn an_outsized_prompt_is_decided_at_the_factor_on_its_instance() {
    use tokenscope::analysis::findings::prefill_ratios;
    // The demo: rag-24k's prompt on vllm-0 (no chunked prefill) against that instance's ordinary prompts.
    let t = sample("demo.parquet");
    let rag = t.request_row("rag-24k").unwrap();
    let ratio = prefill_ratios(&t)[rag as usize].unwrap();
    assert!(ratio > 3.0, "outsized at the default of 3: {ratio}");
    let names_rag = |found: &[Finding]| found.iter().any(|f| f.requests.contains(&rag));
    // Just under its ratio it is outsized (its monopoly and the stall it caused are found), just over it is not.
    let under = Thresholds {
        outsized_prefill_factor: ratio * 0.99,
        ..th()
    };
    assert!(names_rag(&prefill_monopoly(&t, &under)));
    assert!(names_rag(&decode_interrupted(&t, &under)));
    let over = Thresholds {
        outsized_prefill_factor: ratio * 1.01,
        ..th()
    };
    assert!(!names_rag(&prefill_monopoly(&t, &over)));
    // The 6k prompts that followed it are ordinary there: the stalls they caused are not incidents alone.
    let six = t.request_row("rag-6k-1").unwrap();
    assert!(prefill_ratios(&t)[six as usize].unwrap() < ratio / 2.0);
}
