//! The detectors on tiny hand-built traces whose figures are checked by hand (the samples' planted incidents are
//! `findings.rs`', the windowed detectors' workloads `findings_windowed.rs`').

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers may unwrap: a panic here is a failed test"
)]

use std::path::Path;

use tokenscope_core::analysis::findings::{
    Kind, Severity, Thresholds, decode_interrupted, eos_mistrigger, find, find_kinds, kv_saturation, preemption_bursts,
    prefill_monopoly, repetition_loops, slo_violations, token_mismatches, truncation,
};
use tokenscope_core::analysis::summary::{Slo, summarize_all};
use tokenscope_core::ingest::Progress;
use tokenscope_core::load::{LoadOptions, load_bytes, load_with};
use tokenscope_core::trace::Trace;

use crate::findings::{ids, iterations, sample, th};

const T0: i64 = 1_764_403_200_000_000_000;

/// ns of `ms` milliseconds after the trace start.
pub(crate) fn at(ms: i64) -> i64 {
    T0 + ms * 1_000_000
}

pub(crate) fn trace_of(lines: &[String]) -> Trace {
    let text = lines.join("\n");
    let bytes: &'static [u8] = Box::leak(text.into_bytes().into_boxed_slice());
    let l = load_bytes("t.jsonl", bytes).unwrap();
    assert_eq!(l.report.rejected_count(), 0, "{:?}", l.report.rejected.first());
    l.trace
}

pub(crate) fn step(source: &str, n: i64, from_ms: i64, to_ms: i64, extra: &str) -> String {
    format!(
        r#"{{"kind":"iteration","source":"{source}","iteration":{n},"start_ns":{},"end_ns":{}{extra}}}"#,
        at(from_ms),
        at(to_ms)
    )
}

pub(crate) fn request(id: &str, arrival_ms: i64, extra: &str) -> String {
    format!(
        r#"{{"kind":"request","request_id":"{id}","source":"e","arrival_ns":{}{extra}}}"#,
        at(arrival_ms)
    )
}

pub(crate) fn token(id: &str, index: u32, emitted_ms: i64, extra: &str) -> String {
    format!(
        r#"{{"kind":"token","request_id":"{id}","index":{index},"emitted_ns":{}{extra}}}"#,
        at(emitted_ms)
    )
}

/// A prefill chunk of `id` in step `n`.
pub(crate) fn prefill_stage(id: &str, n: i64, from_ms: i64, to_ms: i64, tokens: u32) -> String {
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
        &crate::common::repo("sample_traces/demo.parquet"),
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

/// Speculative decoding by hand: five requests whose drafts were accepted 70 of 100 and one, `slow`, 10 of 100,
/// each with 21 output tokens from 100 ms; the five decode at 20 ms a token (finish at 500 ms), `slow` at 50 ms
/// (finish at 1,100 ms). And steps of `e` that say their drafts: 10 s of windows at 70 % then one of 10 %.
pub(crate) fn collapsed_speculation() -> Trace {
    let mut l = Vec::new();
    for (id, accepted, finish_ms) in [
        ("a", 70, 500),
        ("b", 70, 500),
        ("c", 70, 500),
        ("d", 70, 500),
        ("f", 70, 500),
    ]
    .into_iter()
    .chain([("slow", 10, 1_100)])
    {
        l.push(request(
            id,
            0,
            &format!(
                r#","first_token_ns":{},"finished_ns":{},"output_tokens":21,"spec_drafted_tokens":100,"spec_accepted_tokens":{accepted}"#,
                at(100),
                at(finish_ms)
            ),
        ));
    }
    // One step a second for 40 s: 40 drafts each; accepted 28 (70 %) but for seconds 30 to 39: 4 (10 %).
    for k in 0..40 {
        let accepted = if k >= 30 { 4 } else { 28 };
        l.push(step(
            "e",
            k,
            1_000 * k,
            1_000 * k + 500,
            &format!(r#","spec_drafted_tokens":40,"spec_accepted_tokens":{accepted}"#),
        ));
    }
    trace_of(&l)
}

#[test]
fn an_acceptance_collapse_is_named_for_the_request_and_for_the_stretch_of_steps() {
    let t = collapsed_speculation();
    let found = find_kinds(&t, &Slo::default(), &th(), &[Kind::AcceptanceCollapse]);
    assert_eq!(found.len(), 2, "{found:#?}");
    // The requests: 360 of 600 over the run (60 %); slow's 10 % is under half of it. TPOT: (1,100 − 100) / 20 =
    // 50 ms against (500 − 100) / 20 = 20 ms, 2.5 times: a warning.
    let requests = found.iter().find(|f| !f.requests.is_empty()).unwrap();
    assert_eq!(
        requests.summary,
        "slow's drafts were accepted 10 % of the time (10 of 100) against 60 % over the run; their TPOT 50.0 ms \
         (median) against 20.0 ms for the other requests"
    );
    assert_eq!(requests.severity, Severity::Warning);
    // The steps: 30 × 28 + 10 × 4 = 880 of 1,600 (55 %); the window from 30 s, 40 of 400 (10 %), is under half.
    let steps = found.iter().find(|f| f.requests.is_empty()).unwrap();
    assert_eq!(steps.steps.len(), 10);
    assert!(
        steps
            .summary
            .starts_with("drafts on e were accepted 10 % of the time (40 of 400) from 30.0 s to 40.0 s against 55 %"),
        "{}",
        steps.summary
    );
    // The healthy rest: none.
    let healthy: Vec<String> = (0..30)
        .map(|k| {
            step(
                "e",
                k,
                1_000 * k,
                1_000 * k + 500,
                r#","spec_drafted_tokens":40,"spec_accepted_tokens":28"#,
            )
        })
        .collect();
    assert!(find_kinds(&trace_of(&healthy), &Slo::default(), &th(), &[Kind::AcceptanceCollapse]).is_empty());
}

#[test]
fn a_kv_transfer_that_dominates_its_ttft_is_named_with_its_rate() {
    // Three requests prefilled on p and decoded on d, arriving at 0 ms, first token at 1,000, 60 and 1,000 ms:
    // r1's transfer 300 -> 900 ms (600 ms of 1,000: 60 %) moves 8,000 tokens: 13,333 tokens/s;
    // r2's 10 -> 50 ms is 67 % of its 60 ms but 40 ms, under the 50 ms that makes an incident;
    // r3's 700 -> 900 ms is 20 % of its TTFT.
    let mut lines = Vec::new();
    for (id, first_ms, (from, to), tokens) in [
        ("r1", 1_000, (300, 900), 8_000),
        ("r2", 60, (10, 50), 100),
        ("r3", 1_000, (700, 900), 2_000),
    ] {
        lines.push(format!(
            r#"{{"kind":"request","request_id":"{id}","source":"p","decode_source":"d","arrival_ns":{},"first_token_ns":{},"finished_ns":{}}}"#,
            at(0),
            at(first_ms),
            at(first_ms + 100)
        ));
        lines.push(format!(
            r#"{{"kind":"stage","request_id":"{id}","stage":"kv_transfer","start_ns":{},"end_ns":{},"tokens":{tokens}}}"#,
            at(from),
            at(to)
        ));
        lines.push(format!(
            r#"{{"kind":"token","request_id":"{id}","index":0,"emitted_ns":{}}}"#,
            at(first_ms)
        ));
    }
    let t = trace_of(&lines);
    let found = find_kinds(&t, &Slo::default(), &th(), &[Kind::SlowKvTransfer]);
    let [f] = found.as_slice() else { panic!("{found:#?}") };
    assert_eq!(f.severity, Severity::Warning, "600 ms, under a second");
    assert_eq!(ids(&t, &f.requests), ["r1"]);
    assert_eq!(
        f.summary,
        "1 of 3 requests handed from prefill to decode spent 50 % or more of their TTFT in the KV transfer: r1; the \
         slowest, r1 (p -> d), 600.0 ms of its 1000.0 ms TTFT moving the KV of 8,000 tokens (13,333 tokens/s)"
    );
    assert_eq!((f.from_ns, f.to_ns), (at(300), at(900)));
    assert_eq!(f.tokens, [t.tokens_of(t.request_row("r1").unwrap()).start]);
    // With r1's bytes (8,000 tokens of 131,072 bytes: 1,048,576,000 bytes, 1,048.6 MB) the rate of the link too:
    // 1,048,576,000 bytes / 0.6 s = 1.75 GB/s.
    let sized: Vec<String> = lines
        .iter()
        .map(|l| {
            if l.contains(r#""request_id":"r1","stage":"kv_transfer""#) {
                l.replace(r#""tokens":8000"#, r#""tokens":8000,"bytes":1048576000"#)
            } else {
                l.clone()
            }
        })
        .collect();
    let found = find_kinds(&trace_of(&sized), &Slo::default(), &th(), &[Kind::SlowKvTransfer]);
    let [f] = found.as_slice() else { panic!("{found:#?}") };
    assert!(
        f.summary
            .ends_with("moving the KV of 8,000 tokens (13,333 tokens/s, 1048.6 MB at 1.75 GB/s)"),
        "{}",
        f.summary
    );
    // The same trace with no transfer: nothing to say.
    let plain: Vec<String> = lines.iter().filter(|l| !l.contains("kv_transfer")).cloned().collect();
    assert!(find_kinds(&trace_of(&plain), &Slo::default(), &th(), &[Kind::SlowKvTransfer]).is_empty());
}

#[test]
fn a_wait_on_the_prefill_instance_that_dominates_its_ttft_is_named_with_its_instance() {
    // Requests prefilled on p and decoded on d (r4 on one instance, not disaggregated), each arriving at 0 ms:
    // r1 queued 0 -> 700 ms, prefilled 700 -> 900, first token at 1,000: 700 ms of 1,000 (70 %);
    // r2 queued 0 -> 80 ms, first token at 150: 53 %, but 80 ms, under the 100 ms that make an incident;
    // r3 queued 0 -> 200 ms, first token at 1,000: 20 %;
    // r4 queued 0 -> 900 ms on one instance: a plain queue, not this finding's.
    let mut lines = Vec::new();
    for (id, decode, queue_ms, prefill_ms, first_ms) in [
        ("r1", Some("d"), 700, 900, 1_000),
        ("r2", Some("d"), 80, 100, 150),
        ("r3", Some("d"), 200, 800, 1_000),
        ("r4", None, 900, 950, 1_000),
    ] {
        let decode = decode.map_or_else(String::new, |d| format!(r#","decode_source":"{d}""#));
        lines.push(format!(
            r#"{{"kind":"request","request_id":"{id}","source":"p"{decode},"arrival_ns":{},"first_token_ns":{},"finished_ns":{}}}"#,
            at(0),
            at(first_ms),
            at(first_ms + 100)
        ));
        for (stage, from, to) in [("queue", 0, queue_ms), ("prefill", queue_ms, prefill_ms)] {
            lines.push(format!(
                r#"{{"kind":"stage","request_id":"{id}","stage":"{stage}","start_ns":{},"end_ns":{}}}"#,
                at(from),
                at(to)
            ));
        }
    }
    let t = trace_of(&lines);
    let found = find_kinds(&t, &Slo::default(), &th(), &[Kind::PrefillQueueing]);
    let [f] = found.as_slice() else { panic!("{found:#?}") };
    assert_eq!(f.severity, Severity::Warning, "700 ms, under a second");
    assert_eq!(ids(&t, &f.requests), ["r1"]);
    assert_eq!(
        f.summary,
        "1 of 3 requests handed from prefill to decode waited on their prefill instance for 50 % or more of their TTFT \
         before their prefill began: r1; the longest, r1 on p, 700.0 ms of its 1000.0 ms TTFT (more prefill \
         instances, or a larger prefill budget per step, would take it)"
    );
    assert_eq!((f.from_ns, f.to_ns), (at(0), at(700)));
    // The same requests on one instance each: nothing to say.
    let single: Vec<String> = lines.iter().map(|l| l.replace(r#","decode_source":"d""#, "")).collect();
    assert!(find_kinds(&trace_of(&single), &Slo::default(), &th(), &[Kind::PrefillQueueing]).is_empty());
}

/// Two instances of one server read every 10 s: `a` has requests waiting at 20 and 30 s (3, then 5) while `b` read
/// idle at 20 s and then logged nothing (an idle vLLM engine's lines go to DEBUG); at 50 s one more reading of `a`
/// with 2 waiting, alone.
pub(crate) fn imbalanced() -> Trace {
    let sample = |source: &str, s: i64, running: u32, waiting: u32| {
        format!(
            r#"{{"kind":"sample","source":"{source}","time_ns":{},"interval_ns":10000000000,"num_running":{running},"num_waiting":{waiting}}}"#,
            at(s * 1000)
        )
    };
    trace_of(&[
        sample("a", 10, 4, 0),
        sample("b", 10, 3, 0),
        sample("a", 20, 8, 3),
        sample("b", 20, 0, 0),
        sample("a", 30, 8, 5),
        sample("a", 40, 6, 0),
        sample("a", 50, 6, 2),
        sample("a", 60, 6, 0),
    ])
}

#[test]
fn requests_waiting_beside_an_idle_instance_for_two_readings_are_a_rank_imbalance() {
    let t = imbalanced();
    let found = find_kinds(&t, &Slo::default(), &th(), &[Kind::RankImbalance]);
    // 20 s and 30 s make the episode: from the start of the 20 s reading's interval (10 s) to 30 s. The 50 s
    // reading is one reading alone: a moment, not a condition.
    let [f] = found.as_slice() else { panic!("{found:#?}") };
    assert_eq!(
        f.summary,
        "a had requests waiting (up to 5) in 2 readings over 20 s while instance b of the same server was idle \
         (nothing running or waiting): the load was not spread over its ranks"
    );
    assert_eq!((f.from_ns, f.to_ns), (at(10_000), at(30_000)));
    assert_eq!(f.severity, Severity::Warning);
}
