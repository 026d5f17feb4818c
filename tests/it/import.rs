//! Importers: what engines and tools write opens as a trace, with figures worked out by hand (or, for the real AIPerf
//! export, checked against AIPerf's own aggregate of the same run).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers may unwrap: a panic here is a failed test"
)]

use crate::common;

use std::path::Path;

use tokenscope::analysis::metrics::request_metrics;
use tokenscope::analysis::summary::{Slo, summarize_all};
use tokenscope::import::{Kind, sniff};
use tokenscope::ingest::Progress;
use tokenscope::load::{Loaded, load};
use tokenscope::trace::report::Problem;

fn must_load(path: &str) -> Loaded {
    load(Path::new(path), &Progress::default()).unwrap_or_else(|e| panic!("{path} loads: {e}"))
}

const AIPERF_REAL: &str = "tests/data/import/aiperf/gpt-oss-20b";

#[test]
fn aiperf_files_are_recognised_by_content() {
    assert_eq!(
        sniff(Path::new(&format!("{AIPERF_REAL}/profile_export.jsonl"))),
        Some(Kind::Aiperf)
    );
    assert_eq!(
        sniff(Path::new(&format!("{AIPERF_REAL}/profile_export_aiperf.json"))),
        Some(Kind::AiperfAggregate)
    );
    assert_eq!(
        sniff(Path::new("sample_traces/four_requests.jsonl")),
        None,
        "a native trace is no import"
    );
}

#[test]
#[expect(
    clippy::unreadable_literal,
    reason = "AIPerf's figures as its own report prints them"
)]
fn the_real_aiperf_export_matches_aiperfs_own_aggregate() {
    // The directory: profile_export.jsonl (100 records) and the aggregate, which gives the model.
    let l = must_load(AIPERF_REAL);
    let t = &l.trace;
    assert_eq!(l.report.rejected_count(), 0, "{:?}", l.report.rejected.first());
    assert_eq!(t.request_count(), 100);
    assert_eq!(t.meta.model.as_deref(), Some("openai/gpt-oss-20b"));

    let s = summarize_all(t, Slo::default(), None);
    // AIPerf: request_count 89, error_request_count 11 (code 499, cancelled).
    assert_eq!(s.finish_reasons.get("abort"), Some(&11));
    // AIPerf: total_isl 48,950 (89 x 550); total_osl 21,624 (output + reasoning tokens). The cancelled requests
    // carry no counts.
    assert_eq!(s.input_tokens, 48_950);
    assert_eq!(s.output_tokens, 21_624);
    // TTFT over the 89 completed requests. AIPerf: avg 2343.219436988764, min 464.664101, max 3853.857423,
    // p50 2369.317693. Our p50 is the nearest rank, ceil(0.5 x 89) = 45th value, which for an odd count is
    // numpy's median too; times go through whole nanoseconds, hence the 1e-6 ms tolerance.
    let close = |a: Option<f64>, b: f64| a.is_some_and(|a| (a - b).abs() < 1e-5);
    assert_eq!(s.ttft_ms.count, 89);
    assert!(close(s.ttft_ms.mean, 2343.219436988764), "{:?}", s.ttft_ms.mean);
    assert!(close(s.ttft_ms.max, 3853.857423), "{:?}", s.ttft_ms.max);
    assert!(close(s.ttft_ms.p50, 2369.317693), "{:?}", s.ttft_ms.p50);
    // request_latency. AIPerf: avg 9059.654633033708, max 9299.772642, p50 9097.345015.
    assert_eq!(s.e2e_ms.count, 89);
    assert!(close(s.e2e_ms.mean, 9059.654633033708), "{:?}", s.e2e_ms.mean);
    assert!(close(s.e2e_ms.max, 9299.772642), "{:?}", s.e2e_ms.max);
    assert!(close(s.e2e_ms.p50, 9097.345015), "{:?}", s.e2e_ms.p50);
    // inter_chunk_latency: AIPerf counts 21,537 gaps with avg 27.755153106189347 ms and max 164.617523 ms; our ITL
    // is the gap between consecutive token records, which here are the chunks.
    assert_eq!(s.itl_ms.count, 21_537);
    assert!(
        s.itl_ms.mean.is_some_and(|m| (m - 27.755153106189347).abs() < 1e-4),
        "{:?}",
        s.itl_ms.mean
    );
    assert!(close(s.itl_ms.max, 164.617523), "{:?}", s.itl_ms.max);
    // Requests whose chunks are not their token count (output_sequence_length), counted in the export: one chunk
    // before the first gap, one after each. Four: one chunk fewer than its tokens, three more (247 chunks, 246
    // tokens). The report says so instead of pretending.
    let export = std::fs::read_to_string("sample_traces/engines/aiperf/profile_export.jsonl").unwrap();
    let (mut fewer, mut more) = (0u64, 0u64);
    for line in export.lines() {
        let m = &serde_json::from_str::<serde_json::Value>(line).unwrap()["metrics"];
        if let (Some(gaps), Some(tokens)) = (
            m["inter_chunk_latency"]["value"].as_array(),
            m["output_sequence_length"]["value"].as_u64(),
        ) {
            let chunks = gaps.len() as u64 + 1;
            fewer += u64::from(chunks < tokens);
            more += u64::from(chunks > tokens);
        }
    }
    assert_eq!((fewer, more), (1, 3), "the export as committed");
    assert_eq!(s.token_mismatches, fewer + more);
    let note = format!(
        "{} of 100 AIPerf requests streamed a number of chunks that is not their token count, {fewer} fewer",
        fewer + more
    );
    assert!(
        l.report
            .notes
            .iter()
            .any(|n| n.starts_with(&note) && n.contains(&format!("{more} more"))),
        "{:?}",
        l.report.notes
    );
    assert!(
        l.report.notes.iter().any(|n| n.contains("client")),
        "{:?}",
        l.report.notes
    );
}

#[test]
fn one_aiperf_request_worked_by_hand() {
    // The first completed record (line 5 of the file... the first with error null): x_request_id 1ed40a0d-...,
    // timestamp_ns 1759522419159192408, ttft 1680.543782 ms, request_latency 7936.968269 ms, 192 chunk gaps,
    // output_sequence_length 193, input 550.
    let l = must_load(&format!("{AIPERF_REAL}/profile_export.jsonl"));
    let t = &l.trace;
    let r = t.request_row("1ed40a0d-e708-434d-bb8e-fb1b44cb8717").unwrap();
    let m = request_metrics(t, r);
    assert_eq!(t.requests.arrival_ns[r as usize], 1_759_522_419_159_192_408);
    // 1680.543782 ms = 1,680,543,782 ns exactly.
    assert_eq!(m.ttft_ns, Some(1_680_543_782));
    assert_eq!(m.e2e_ns, Some(7_936_968_269));
    assert_eq!(m.output_tokens, 193);
    assert_eq!(t.tokens_of(r).len(), 193, "193 chunks: one per token here");
    // The last chunk arrives at AIPerf's max_response_timestamp, 1759522427096160677, to within 1 us.
    let last = t.tokens.emitted_ns[t.tokens_of(r).end - 1];
    assert!((last - 1_759_522_427_096_160_677).abs() <= 1000, "{last}");
}

#[test]
fn a_cancelled_aiperf_request_is_an_abort_with_its_code() {
    let l = must_load(&format!("{AIPERF_REAL}/profile_export.jsonl"));
    let t = &l.trace;
    let r = t.request_row("c087da26-5552-4785-958a-cad75c7b22de").unwrap();
    let m = request_metrics(t, r);
    assert_eq!(
        m.ttft_ns, None,
        "a request cancelled before its first chunk has no TTFT, not a zero"
    );
    assert_eq!(t.tokens_of(r).len(), 0);
    let label = |col: &[u32]| t.label(col[r as usize]).map(str::to_owned);
    assert_eq!(label(&t.requests.finish_reason).as_deref(), Some("abort"));
    assert_eq!(label(&t.requests.error_code).as_deref(), Some("499"));
}

#[test]
fn bad_aiperf_lines_are_rejected_by_line_and_the_rest_kept() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("profile_export.jsonl");
    let good = r#"{"metadata":{"x_request_id":"a","timestamp_ns":1759522419159192408},"metrics":{"ttft":{"value":10.0,"unit":"ms"},"request_latency":{"value":30.0,"unit":"ms"},"inter_chunk_latency":{"value":[10.0,10.0],"unit":"ms"},"output_sequence_length":{"value":3,"unit":"tokens"}},"error":null}"#;
    let no_time = r#"{"metadata":{"x_request_id":"b"},"metrics":{},"error":null}"#;
    let text = format!("{good}\n{{\"metadata\": truncated\n{no_time}\n");
    std::fs::write(&p, text).unwrap();
    let l = load(&p, &Progress::default()).unwrap();
    assert_eq!(l.trace.request_count(), 1);
    let got: Vec<(u64, Problem, Option<&str>)> = l
        .report
        .rejected
        .iter()
        .map(|r| (r.place.at, r.problem, r.field))
        .collect();
    assert_eq!(
        got,
        [
            (2, Problem::Malformed, None),
            (3, Problem::MissingField, Some("metadata.timestamp_ns"))
        ]
    );
    let m = request_metrics(&l.trace, 0);
    // ttft 10 ms, then chunks 10 ms apart: E2E 30 ms, TPOT (30 - 10) / 2 = 10 ms.
    assert_eq!(m.ttft_ns, Some(10_000_000));
    assert_eq!(m.tpot_ns, Some(10_000_000.0));
}

/// ms after T0 = 2025-11-29 08:00:00 UTC (1764403200 s), in ns.
fn at_ms(ms: i64) -> i64 {
    1_764_403_200_000_000_000 + ms * 1_000_000
}

#[test]
fn sglang_otlp_gives_requests_batches_as_iterations_and_tokens() {
    // tests/data/import/sglang/otlp_small.jsonl: two requests on one scheduler, worked out in expected.md beside it.
    let path = "tests/data/import/sglang/otlp_small.jsonl";
    assert_eq!(sniff(Path::new(path)), Some(Kind::SglangOtlp));
    let l = must_load(path);
    let t = &l.trace;
    assert_eq!(l.report.rejected_count(), 0, "{:?}", l.report.rejected.first());
    assert_eq!(t.meta.engine.as_deref(), Some("sglang"));
    assert_eq!(t.request_count(), 2);
    let a = t.request_row("a1b2c3d4e5f6a7b8").unwrap();
    let b = t.request_row("ffee00112233aabb").unwrap();
    // A: arrival 0, E2E 0.098 s; 120 prompt tokens, 4 output. B: arrival 25, E2E 97. The first token is the
    // scheduler's, at the end of the prefill (A's prefill_forward ends at 20, B's last chunk at 96): TTFT 20 and 71.
    // SGLang's own time to first token is the tokenizer's (0.021 s, 0.073 s), kept as the server's TTFT.
    let ma = request_metrics(t, a);
    assert_eq!(t.requests.arrival_ns[a as usize], at_ms(0));
    assert_eq!(
        (ma.ttft_ns, ma.e2e_ns, ma.output_tokens),
        (Some(20_000_000), Some(98_000_000), 4)
    );
    assert_eq!(t.requests.server_ttft_ns.at(a as usize), Some(21_000_000));
    let mb = request_metrics(t, b);
    assert_eq!(t.requests.arrival_ns[b as usize], at_ms(25));
    assert_eq!(
        (mb.ttft_ns, mb.e2e_ns, mb.output_tokens),
        (Some(71_000_000), Some(97_000_000), 3)
    );
    assert_eq!(t.requests.server_ttft_ns.at(b as usize), Some(73_000_000));
    // Queue: prefill_waiting A 4->5, B 32->33: scheduled at 5 and 33.
    assert_eq!(t.requests.scheduled_ns.at(a as usize), Some(at_ms(5)));
    assert_eq!(t.requests.scheduled_ns.at(b as usize), Some(at_ms(33)));
    assert_eq!(t.label(t.requests.finish_reason[a as usize]), Some("length"));

    // Six distinct bids, one scheduler: six iterations in time order, starting at their schedule events
    // (6, 22, 34, 66, 100, 111) and ending where the step slice carrying them ends (20, 30, 64, 96, 110, 120).
    let source = t.label(t.requests.source[a as usize]).unwrap();
    assert_eq!(source, "Scheduler [TP 0] [PP 0] @4f1c2d3e");
    let its = &t.iterations;
    assert_eq!(its.len(), 6);
    let starts: Vec<i64> = (0..6).map(|i| its.start_ns[i]).collect();
    let ends: Vec<i64> = (0..6).map(|i| its.end_ns[i]).collect();
    assert_eq!(starts, [6, 22, 34, 66, 100, 111].map(at_ms));
    assert_eq!(ends, [20, 30, 64, 96, 110, 120].map(at_ms));
    // Members: the mixed batches (34, 66) carry B's prefill chunks and A's decode.
    let prefill: Vec<u32> = (0..6).map(|i| its.num_prefill_reqs.at(i).unwrap()).collect();
    let decode: Vec<u32> = (0..6).map(|i| its.num_decode_reqs.at(i).unwrap()).collect();
    assert_eq!(prefill, [1, 0, 1, 1, 0, 0]);
    assert_eq!(decode, [0, 1, 1, 1, 1, 1]);
    assert_eq!(
        (0..6).map(|i| its.num_reqs.at(i).unwrap()).collect::<Vec<_>>(),
        [1, 1, 2, 2, 1, 1]
    );

    // Prefill tokens: A's 120-token prompt ran whole in the first batch; B's 2,000 were chunked over the mixed
    // batches, and SGLang says nothing of the split: absent, not guessed. Decode-only batches: none.
    let prefill_tokens: Vec<Option<u32>> = (0..6).map(|i| its.num_prefill_tokens.at(i)).collect();
    assert_eq!(prefill_tokens, [Some(120), Some(0), None, None, Some(0), Some(0)]);

    // Tokens: A's first at 20 (the end of its prefill_forward), then the ends of the batches it decoded in: 30, 64,
    // 96 (the two mixed steps write no decode_loop, and still gave A a token each). B: 96 (the end of its last
    // chunk), then 110 and 120.
    let emitted = |r: u32| t.tokens_of(r).map(|i| t.tokens.emitted_ns[i]).collect::<Vec<_>>();
    assert_eq!(emitted(a), [20, 30, 64, 96].map(at_ms));
    assert_eq!(emitted(b), [96, 110, 120].map(at_ms));
    // B's prefill is its two chunks (33->64, 64->96), in the iterations of the mixed batches.
    let stages: Vec<(i64, i64)> = t
        .explicit_stages_of(b)
        .filter(|&s| t.stages.kind[s] == tokenscope::trace::StageKind::Prefill)
        .map(|s| (t.stages.start_ns[s], t.stages.end_ns[s]))
        .collect();
    assert_eq!(stages, [(at_ms(33), at_ms(64)), (at_ms(64), at_ms(96))]);
    assert!(
        l.report.notes.iter().any(|n| n.contains("no token counts per batch")),
        "{:?}",
        l.report.notes
    );
    // The prefill-interrupts-decode incident, written as SGLang traces it (chunked prefill off): the detector finds
    // it from the imported batches alone.
    let incident = must_load("sample_traces/engines/sglang/prefill_interrupts_decode.otlp.jsonl.gz");
    let thresholds = tokenscope::analysis::findings::Thresholds::default();
    let findings = tokenscope::analysis::findings::find(&incident.trace, &Slo::default(), &thresholds);
    let kinds: Vec<_> = findings.iter().map(|f| f.kind).collect();
    assert!(
        kinds.contains(&tokenscope::analysis::findings::Kind::DecodeInterrupted),
        "{kinds:?}"
    );
}

#[test]
fn vllm_spans_and_iteration_log_of_one_run_open_as_one_trace() {
    // tests/data/import/vllm/: three llm_request spans and nine iteration lines, worked out in expected.md.
    let dir = "tests/data/import/vllm";
    assert_eq!(
        sniff(Path::new(&format!("{dir}/otlp_small.jsonl"))),
        Some(Kind::VllmOtlp)
    );
    assert_eq!(
        sniff(Path::new(&format!("{dir}/iterations_small.log"))),
        Some(Kind::VllmLog)
    );
    let l = must_load(dir);
    let t = &l.trace;
    assert_eq!(l.report.rejected_count(), 0, "{:?}", l.report.rejected.first());
    assert_eq!(t.meta.engine.as_deref(), Some("vllm"));
    assert_eq!(t.request_count(), 3);
    // R1: arrival 250 ms, TTFT 0.05 s, E2E 0.115 s (the attribute, not the span's 115.05 ms), queue 2 ms.
    let r1 = t.request_row("chatcmpl-00000000000000a1").unwrap();
    let m1 = request_metrics(t, r1);
    assert_eq!(t.requests.arrival_ns[r1 as usize], at_ms(250));
    assert_eq!(
        (m1.ttft_ns, m1.e2e_ns, m1.queue_ns),
        (Some(50_000_000), Some(115_000_000), Some(2_000_000))
    );
    assert_eq!(
        (m1.output_tokens, t.requests.input_tokens.at(r1 as usize)),
        (4, Some(512))
    );
    // R2: one output token, so no TPOT.
    let r2 = t.request_row("chatcmpl-00000000000000a2").unwrap();
    assert_eq!(request_metrics(t, r2).tpot_ns, None);
    // R3: TTFT 30 ms, E2E 90 ms, 5 tokens: TPOT (90 - 30) / 4 = 15 ms.
    let r3 = t.request_row("cmpl-00000000000000a3-0").unwrap();
    assert_eq!(request_metrics(t, r3).tpot_ns, Some(15_000_000.0));

    // Nine iterations; context tokens 512, 256, 0, 0, 128, 0..., sum 896 = the prompts' sum.
    let its = &t.iterations;
    assert_eq!(its.len(), 9);
    let ctx: Vec<u32> = (0..9).map(|i| its.num_prefill_tokens.at(i).unwrap()).collect();
    assert_eq!(ctx, [512, 256, 0, 0, 128, 0, 0, 0, 0]);
    let gen_tokens: u32 = (0..9).map(|i| its.num_decode_tokens.at(i).unwrap()).sum();
    assert_eq!(gen_tokens, 7);
    // Iteration 1 carried one context and one generation request; its elapsed 25 ms is its length.
    assert_eq!(
        (
            its.num_prefill_reqs.at(1),
            its.num_decode_reqs.at(1),
            its.num_reqs.at(1)
        ),
        (Some(1), Some(1), Some(2))
    );
    assert_eq!(its.end_ns[1] - its.start_ns[1], 25_000_000);
    // KV use 0.3 %.
    assert!((its.kv_usage.at(1).unwrap() - 0.003).abs() < 1e-9);
    // Placed from whole seconds: iterations 0-3 in 08:00:00, 4-5 in 08:00:01, 6-8 in 08:00:02, in order.
    let second = |i: usize| (its.start_ns[i] - at_ms(0)).div_euclid(1_000_000_000);
    assert_eq!((0..9).map(second).collect::<Vec<_>>(), [0, 0, 0, 0, 1, 1, 2, 2, 2]);
    assert!(
        (1..9).all(|i| its.start_ns[i] >= its.end_ns[i - 1]),
        "steps in order, not overlapping"
    );
    assert!(
        l.report.notes.iter().any(|n| n.contains("whole seconds")),
        "{:?}",
        l.report.notes
    );
}

#[test]
fn trtllm_iteration_stats_log_and_perf_metrics_open_together() {
    // tests/data/import/trtllm/: six IterationStats with requestStats, the same six as print_iter_log lines, and
    // /perf_metrics for the two requests; worked out in expected.md beside them.
    let dir = "tests/data/import/trtllm";
    for (file, kind) in [
        ("iteration_stats_small.json", Kind::TrtllmIterations),
        ("iter_log_small.log", Kind::TrtllmIterations),
        ("perf_metrics_small.json", Kind::TrtllmPerf),
    ] {
        assert_eq!(sniff(Path::new(&format!("{dir}/{file}"))), Some(kind), "{file}");
    }
    let l = must_load(dir);
    let t = &l.trace;
    assert_eq!(l.report.rejected_count(), 0, "{:?}", l.report.rejected.first());
    assert_eq!(t.meta.engine.as_deref(), Some("trtllm"));
    // Six iterations, from the JSON (the log's six are the same and give way).
    let its = &t.iterations;
    assert_eq!(its.len(), 6);
    assert_eq!(
        (0..6).map(|i| its.start_ns[i]).collect::<Vec<_>>(),
        [0, 40, 50, 60, 140, 150].map(at_ms)
    );
    assert_eq!(
        (0..6).map(|i| its.end_ns[i]).collect::<Vec<_>>(),
        [40, 50, 60, 140, 150, 160].map(at_ms)
    );
    let ctx: Vec<u32> = (0..6).map(|i| its.num_prefill_tokens.at(i).unwrap()).collect();
    assert_eq!(ctx, [512, 0, 0, 1024, 0, 0]);
    assert!(
        l.report
            .notes
            .iter()
            .any(|n| n.starts_with("6 iterations of the TensorRT-LLM log")),
        "{:?}",
        l.report.notes
    );
    assert!(
        l.report.notes.iter().any(|n| n.contains("2 of 2 (100 %)")),
        "{:?}",
        l.report.notes
    );

    // Request 1: perf arrival 999.995 s steady, first scheduled 1000.000 in iteration 1 (which starts at 0 ms):
    // arrival -5 ms, TTFT 1000.040 - 999.995 = 45 ms, E2E 1000.140 - 999.995 = 145 ms, queue 5 ms.
    let r1 = t.request_row("1").unwrap();
    let m1 = request_metrics(t, r1);
    assert_eq!(t.requests.arrival_ns[r1 as usize], at_ms(-5));
    assert_eq!(
        (m1.ttft_ns, m1.e2e_ns, m1.queue_ns),
        (Some(45_000_000), Some(145_000_000), Some(5_000_000))
    );
    // Its tokens: one at the end of each iteration that counted one (1, 2, 3, 4): 40, 50, 60, 140 ms, so its ITLs
    // are 10, 10 and 80 ms, the last one behind request 2's 1,024-token prefill.
    let emitted = |r: u32| t.tokens_of(r).map(|i| t.tokens.emitted_ns[i]).collect::<Vec<_>>();
    assert_eq!(emitted(r1), [40, 50, 60, 140].map(at_ms));
    assert_eq!(
        (m1.output_tokens, t.requests.input_tokens.at(r1 as usize)),
        (4, Some(512))
    );
    // Request 2: arrival 1000.055 -> 55 ms; TTFT 85 ms, E2E 105 ms; tokens at 140, 150, 160; prefill in iteration 4.
    let r2 = t.request_row("2").unwrap();
    let m2 = request_metrics(t, r2);
    assert_eq!(t.requests.arrival_ns[r2 as usize], at_ms(55));
    assert_eq!((m2.ttft_ns, m2.e2e_ns), (Some(85_000_000), Some(105_000_000)));
    assert_eq!(emitted(r2), [140, 150, 160].map(at_ms));
    let prefill: Vec<(i64, i64, Option<i64>)> = t
        .explicit_stages_of(r2)
        .map(|s| (t.stages.start_ns[s], t.stages.end_ns[s], t.stages.iteration[s]))
        .collect();
    assert_eq!(prefill, [(at_ms(60), at_ms(140), Some(4))]);
}

#[test]
fn trtllm_iteration_log_alone_gives_iterations() {
    let l = must_load("tests/data/import/trtllm/iter_log_small.log");
    let its = &l.trace.iterations;
    assert_eq!(l.report.rejected_count(), 0, "{:?}", l.report.rejected.first());
    assert_eq!(its.len(), 6);
    // All six logged in 08:00:00 (whole seconds): chained from it by host_step_time 40, 10, 10, 80, 10, 10 ms.
    assert_eq!(
        (0..6).map(|i| its.start_ns[i]).collect::<Vec<_>>(),
        [0, 40, 50, 60, 140, 150].map(at_ms)
    );
    assert_eq!(its.num_prefill_tokens.at(3), Some(1024));
    assert!((its.kv_usage.at(3).unwrap() - 0.033).abs() < 1e-9);
    assert_eq!(l.trace.request_count(), 0, "the log names no requests");
}

#[test]
fn aiperf_raw_export_gives_tokens_with_their_candidates() {
    // tests/data/import/aiperf/profile_export_raw_small.jsonl, worked out in expected.md beside it.
    let path = "tests/data/import/aiperf/profile_export_raw_small.jsonl";
    assert_eq!(sniff(Path::new(path)), Some(Kind::AiperfRaw));
    let l = must_load(path);
    let t = &l.trace;
    assert_eq!(l.report.rejected_count(), 0, "{:?}", l.report.rejected.first());
    assert_eq!(t.meta.model.as_deref(), Some("tiny-chat"));
    // req-0001: sent at W0; content chunks at 50, 60, 70, 80 ms (the role chunk at 20 is no token); [DONE] at 83.
    let r1 = t.request_row("req-0001").unwrap();
    let m1 = request_metrics(t, r1);
    assert_eq!(
        (m1.ttft_ns, m1.e2e_ns, m1.output_tokens),
        (Some(50_000_000), Some(83_000_000), 4)
    );
    let tokens: Vec<usize> = t.tokens_of(r1).collect();
    let texts: Vec<&str> = tokens
        .iter()
        .map(|&i| t.texts.get(t.tokens.text[i]).unwrap_or(""))
        .collect();
    assert_eq!(texts, ["Hello", ",", " world", "!"]);
    assert_eq!(
        tokens.iter().map(|&i| t.tokens.emitted_ns[i]).collect::<Vec<_>>(),
        [50, 60, 70, 80].map(at_ms)
    );
    assert_eq!(t.tokens.logprob[tokens[2]], -0.125);
    // Two candidates each, the chosen one first: " world" -0.125, " there" -2.25.
    let cands = t.candidates_of(tokens[2]);
    assert_eq!(cands.len(), 2);
    assert_eq!(t.texts.get(t.candidates.text[cands.start + 1]), Some(" there"));
    assert_eq!(t.candidates.logprob[cands.start + 1], -2.25);
    // req-0002: no logprobs; chunks at 190, 210, 230 ms after W0 (90, 110, 130 after its send at 100); ITL 20 ms.
    let r2 = t.request_row("req-0002").unwrap();
    let m2 = request_metrics(t, r2);
    assert_eq!(
        (m2.ttft_ns, m2.e2e_ns, m2.tpot_ns),
        (Some(90_000_000), Some(132_000_000), Some(21_000_000.0))
    );
    assert_eq!(t.label(t.requests.finish_reason[r2 as usize]), Some("stop"));
}

#[test]
fn convert_from_names_the_importer_and_unknown_files_list_the_kinds() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sglang.parquet");
    let out = out.to_str().unwrap();
    let (code, stdout, stderr) = common::tokenscope(&[
        "convert",
        "tests/data/import/sglang/otlp_small.jsonl",
        "--from",
        "sglang-otlp",
        "-o",
        out,
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    // The converted trace is format v1 and keeps what was imported: 2 requests, 6 iterations, 7 tokens.
    let back = must_load(out);
    assert_eq!(back.trace.request_count(), 2);
    assert_eq!(back.trace.iterations.len(), 6);
    assert_eq!(back.trace.token_count(), 7);
    assert_eq!(back.trace.meta.engine.as_deref(), Some("sglang"));

    let unknown = dir.path().join("notes.txt");
    std::fs::write(&unknown, "nothing a tool wrote\n").unwrap();
    let (code, _, stderr) = common::tokenscope(&["summary", unknown.to_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(stderr.contains("sglang-otlp") && stderr.contains("--from"), "{stderr}");
}

/// The OTLP JSON of the SGLang fixture re-encoded as protobuf messages, through the published OpenTelemetry types.
fn otlp_json_to_proto(
    json_lines: &str,
) -> Vec<opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest> {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
    use opentelemetry_proto::tonic::resource::v1::Resource;
    use opentelemetry_proto::tonic::trace::v1::{ResourceSpans, ScopeSpans, Span, span};
    use serde_json::Value;
    let int = |v: &Value| {
        v.as_str()
            .map_or_else(|| v.as_u64().unwrap_or(0), |s| s.parse().unwrap())
    };
    let hex = |v: &Value| {
        let s = v.as_str().unwrap_or("");
        (0..s.len() / 2)
            .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
            .collect::<Vec<u8>>()
    };
    fn any(v: &Value) -> AnyValue {
        let o = v.as_object().unwrap();
        let value = if let Some(s) = o.get("stringValue") {
            any_value::Value::StringValue(s.as_str().unwrap().to_owned())
        } else if let Some(i) = o.get("intValue") {
            any_value::Value::IntValue(i.as_str().map_or_else(|| i.as_i64().unwrap(), |s| s.parse().unwrap()))
        } else if let Some(d) = o.get("doubleValue") {
            any_value::Value::DoubleValue(d.as_f64().unwrap())
        } else {
            any_value::Value::BoolValue(o["boolValue"].as_bool().unwrap())
        };
        AnyValue { value: Some(value) }
    }
    let kvs = |v: &Value| -> Vec<KeyValue> {
        v.as_array()
            .into_iter()
            .flatten()
            .map(|kv| KeyValue {
                key: kv["key"].as_str().unwrap().to_owned(),
                value: Some(any(&kv["value"])),
                ..Default::default()
            })
            .collect()
    };
    json_lines
        .lines()
        .map(|line| {
            let doc: Value = serde_json::from_str(line).unwrap();
            ExportTraceServiceRequest {
                resource_spans: doc["resourceSpans"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|rs| ResourceSpans {
                        resource: Some(Resource {
                            attributes: kvs(&rs["resource"]["attributes"]),
                            ..Default::default()
                        }),
                        scope_spans: rs["scopeSpans"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .map(|ss| ScopeSpans {
                                spans: ss["spans"]
                                    .as_array()
                                    .unwrap()
                                    .iter()
                                    .map(|s| Span {
                                        trace_id: hex(&s["traceId"]),
                                        span_id: hex(&s["spanId"]),
                                        parent_span_id: hex(&s["parentSpanId"]),
                                        name: s["name"].as_str().unwrap().to_owned(),
                                        start_time_unix_nano: int(&s["startTimeUnixNano"]),
                                        end_time_unix_nano: int(&s["endTimeUnixNano"]),
                                        attributes: kvs(&s["attributes"]),
                                        events: s["events"]
                                            .as_array()
                                            .into_iter()
                                            .flatten()
                                            .map(|e| span::Event {
                                                time_unix_nano: int(&e["timeUnixNano"]),
                                                name: e["name"].as_str().unwrap().to_owned(),
                                                attributes: kvs(&e["attributes"]),
                                                ..Default::default()
                                            })
                                            .collect(),
                                        ..Default::default()
                                    })
                                    .collect(),
                                ..Default::default()
                            })
                            .collect(),
                        ..Default::default()
                    })
                    .collect(),
            }
        })
        .collect()
}

#[test]
fn otlp_protobuf_gives_the_same_trace_as_its_json() {
    use prost::Message;
    let json_path = "tests/data/import/sglang/otlp_small.jsonl";
    let messages = otlp_json_to_proto(&std::fs::read_to_string(json_path).unwrap());
    assert_eq!(messages.len(), 3);
    let dir = tempfile::tempdir().unwrap();
    // The Collector's file exporter (`format: proto`): each message after its length, 4 bytes big-endian.
    let mut framed = Vec::new();
    for m in &messages {
        let body = m.encode_to_vec();
        framed.extend_from_slice(&u32::try_from(body.len()).unwrap().to_be_bytes());
        framed.extend_from_slice(&body);
    }
    let collector = dir.path().join("traces.pb");
    std::fs::write(&collector, &framed).unwrap();
    // The specification's delimited messages (a varint length each).
    let mut delimited = Vec::new();
    for m in &messages {
        m.encode_length_delimited(&mut delimited).unwrap();
    }
    let spec = dir.path().join("traces.binpb");
    std::fs::write(&spec, &delimited).unwrap();
    let from_json = must_load(json_path);
    let text = |l: &Loaded| {
        let mut out = Vec::new();
        tokenscope::format::records::for_each_record(&l.trace, |r| {
            tokenscope::format::jsonl::write_record(&mut out, r)
        })
        .unwrap();
        String::from_utf8(out).unwrap()
    };
    for path in [&collector, &spec] {
        assert_eq!(sniff(path), Some(Kind::SglangOtlp), "{}", path.display());
        let l = load(path, &Progress::default()).unwrap();
        assert_eq!(l.report.rejected_count(), 0, "{:?}", l.report.rejected.first());
        assert_eq!(text(&l), text(&from_json), "{}", path.display());
    }
    // A truncated protobuf file is reported, not a panic.
    let cut = dir.path().join("cut.pb");
    std::fs::write(&cut, &framed[..framed.len() / 2]).unwrap();
    assert!(matches!(
        load(&cut, &Progress::default()),
        Err(tokenscope::ingest::LoadError::UnknownFormat { .. })
    ));
    let options = tokenscope::load::LoadOptions {
        from: Some(Kind::SglangOtlp),
        ..Default::default()
    };
    // Read as SGLang's spans, it gives nothing: the load is refused, with the rejection that says why.
    let e = tokenscope::load::load_with(&cut, &Progress::default(), options)
        .unwrap_err()
        .to_string();
    assert!(e.contains("nothing was read as sglang-otlp"), "{e}");
    assert!(e.contains("1 rejected"), "{e}");
    assert!(e.contains("truncated?"), "{e}");
}

#[test]
fn a_simulated_run_written_as_sglang_traces_it_imports_back_to_the_same_requests_and_steps() {
    // long_prefill: doc-96k prefilled in five chunks, short-700 waiting behind it; written as SGLang's OTLP JSON
    // (synth --as sglang-otlp), then imported.
    let original = must_load("sample_traces/long_prefill.jsonl").trace;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long_prefill_sglang.jsonl");
    let mut out = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    tokenscope::synth::sglang_otlp::write(&original, &mut out).unwrap();
    drop(out);
    assert_eq!(sniff(&path), Some(Kind::SglangOtlp));
    let l = load(&path, &Progress::default()).unwrap();
    assert_eq!(l.report.rejected_count(), 0, "{:?}", l.report.rejected.first());
    let t = &l.trace;
    assert_eq!(t.request_count(), original.request_count());
    for r in 0..original.request_count() as u32 {
        let id = original.request_id(r);
        let back = t.request_row(id).unwrap();
        let (a, b) = (request_metrics(&original, r), request_metrics(t, back));
        assert_eq!(
            t.requests.arrival_ns[back as usize], original.requests.arrival_ns[r as usize],
            "{id}"
        );
        assert_eq!((a.e2e_ns, a.output_tokens), (b.e2e_ns, b.output_tokens), "{id}");
        // SGLang's time to first token (the tokenizer's) is kept as the server's TTFT; the first token itself is
        // the scheduler's, at its prefill step's end.
        assert_eq!(t.requests.server_ttft_ns.at(back as usize), a.ttft_ns, "{id}");
        // One token record per step, as the original had, each at its step's end, which the simulator's tokens
        // leave within 0.2 ms of (sampling and detokenizing).
        let (ta, tb): (Vec<usize>, Vec<usize>) = (original.tokens_of(r).collect(), t.tokens_of(back).collect());
        assert_eq!(ta.len(), tb.len(), "{id}");
        for (&x, &y) in ta.iter().zip(&tb) {
            let lag = original.tokens.emitted_ns[x] - t.tokens.emitted_ns[y];
            assert!(
                (0..=200_000).contains(&lag),
                "{id}: token {} lags its step's end by {lag} ns",
                original.tokens.index[x]
            );
        }
    }
    // Every step that carried a request is a batch, with its span.
    let spans = |tr: &tokenscope::trace::Trace| {
        let mut v: Vec<(i64, i64)> = (0..tr.iterations.len())
            .map(|i| (tr.iterations.start_ns[i], tr.iterations.end_ns[i]))
            .collect();
        v.sort_unstable();
        v
    };
    assert_eq!(spans(t), spans(&original));
    // doc-96k's five prefill chunks come back as five prefill stages.
    let doc = t.request_row("doc-96k").unwrap();
    let chunks = t
        .explicit_stages_of(doc)
        .filter(|&s| t.stages.kind[s] == tokenscope::trace::StageKind::Prefill)
        .count();
    assert_eq!(chunks, 5);
}
