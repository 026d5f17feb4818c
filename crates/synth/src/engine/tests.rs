//! The tests of `engine.rs`, figures worked out by hand.

use super::*;
use crate::cost::StepCost;
use crate::speculation::Speculation;

const T0: i64 = 1_764_403_200_000_000_000;

fn arrival(id: &str, at_ms: i64, input: u32, output: u32) -> Arrival {
    Arrival {
        id: id.to_owned(),
        at_ns: T0 + at_ms * 1_000_000,
        input_tokens: input,
        output_tokens: output,
        max_tokens: output,
        prefix_blocks: vec![u64::from(input); 1],
        app_id: "t".into(),
        user_id: "t".into(),
        source: None,
        mistrigger: None,
    }
}

fn small_engine(kv_blocks: u32) -> SimConfig {
    SimConfig {
        engines: vec![EngineConfig {
            kv_blocks,
            ..EngineConfig::new("e")
        }],
        routing: Routing::RoundRobin,
        top_k: 3,
        model: "m".into(),
        seed: 1,
        first_iteration: 0,
        disaggregation: None,
        roles: Vec::new(),
    }
}

#[test]
fn a_request_that_cannot_fit_is_refused_and_the_rest_still_finish() {
    // 100 blocks of 16 = 1,600 tokens of KV. "big" needs 1,000 + 1,000; "ok" needs 300 + 20.
    let arrivals = [arrival("big", 0, 1_000, 1_000), arrival("ok", 1, 300, 20)];
    let t = simulate(&small_engine(100), &arrivals);
    let big = t.request_row("big").unwrap() as usize;
    assert_eq!(t.label(t.requests.status[big]), Some("error"));
    assert_eq!(t.label(t.requests.error_code[big]), Some("context_length_exceeded"));
    assert_eq!(t.tokens_of(big as u32).len(), 0);
    let ok = t.request_row("ok").unwrap();
    assert_eq!(t.tokens_of(ok).len(), 20);
}

#[test]
fn memory_pressure_preempts_and_every_request_still_finishes() {
    // 40 blocks = 640 tokens; three 150-token prompts generating 100 tokens each cannot all stay resident.
    let arrivals = [
        arrival("a", 0, 150, 100),
        arrival("b", 0, 150, 100),
        arrival("c", 0, 150, 100),
    ];
    let t = simulate(&small_engine(40), &arrivals);
    for id in ["a", "b", "c"] {
        let r = t.request_row(id).unwrap();
        assert_eq!(t.tokens_of(r).len(), 100, "{id} finished its answer");
    }
    let preemptions: u32 = t.requests.num_preemptions.iter().flatten().sum();
    assert!(preemptions > 0);
    let preempted_stages = (0..t.stages.len())
        .filter(|&s| t.stages.kind[s] == StageKind::Preempted)
        .count();
    assert_eq!(
        preempted_stages as u32, preemptions,
        "each preemption is a stage, of non-zero length"
    );
    assert!((0..t.stages.len()).all(|s| t.stages.end_ns[s] > t.stages.start_ns[s]));
    let preempted: u32 = t.iterations.num_preempted.iter().flatten().sum();
    assert_eq!(preempted, preemptions);
}

#[test]
fn two_requests_on_one_engine_step_as_worked_out_by_hand() {
    // Costs chosen to be exact in binary: 10 ms a step, 0.125 ms a prompt token, 1 ms a decoding sequence,
    // nothing else, no noise; a 64-token budget, chunked prefill, no prefix cache.
    let cfg = SimConfig {
        engines: vec![EngineConfig {
            max_num_batched_tokens: 64,
            kv_blocks: 1_000,
            prefix_cache_blocks: 0,
            cost: StepCost {
                base_ms: 10.0,
                prefill_token_ms: 0.125,
                decode_seq_ms: 1.0,
                ..StepCost::ONE_REGIME
            },
            ..EngineConfig::new("e")
        }],
        ..small_engine(1_000)
    };
    // a: 100 prompt tokens, 3 out, at 0 ms; b: 30 prompt tokens, 2 out, at 5 ms.
    let t = simulate(&cfg, &[arrival("a", 0, 100, 3), arrival("b", 5, 30, 2)]);
    // Step 0 at 0 ms: a's first 64 prompt tokens: 10 + 64 × 0.125 = 18 ms.
    // Step 1 at 18.2 ms (a 0.2 ms gap): a's other 36, then b's first 28 (the budget's rest): 18 ms; a's prompt is
    //   done, its token 0 leaves 0.05 ms after the step.
    // Step 2 at 36.4 ms: a decodes, b's last 2 prompt tokens: 10 + 2 × 0.125 + 1 = 11.25 ms; a's token 1 and
    //   b's token 0 (b leaves 0.07 ms after: 0.05 + 20 µs for the second request).
    // Step 3 at 47.85 ms: both decode: 10 + 2 = 12 ms; a's token 2 and b's token 1, their last.
    let ms = |x: f64| T0 + (x * 1e6).round() as i64;
    let it = &t.iterations;
    assert_eq!(it.start_ns, [ms(0.0), ms(18.2), ms(36.4), ms(47.85)]);
    assert_eq!(it.end_ns, [ms(18.0), ms(36.2), ms(47.65), ms(59.85)]);
    assert_eq!(it.num_prefill_tokens, [Some(64), Some(64), Some(2), Some(0)]);
    assert_eq!(it.num_decode_tokens, [Some(0), Some(0), Some(1), Some(2)]);
    assert_eq!(it.num_waiting, [Some(1), Some(1), Some(0), Some(0)]);
    // KV blocks of 16 tokens: a holds 4 after step 0, 7 from step 1 (101 and 102 tokens still fit 7); b 2.
    assert_eq!(it.kv_usage, [Some(0.004), Some(0.009), Some(0.009), Some(0.009)]);
    let (a, b) = (t.request_row("a").unwrap(), t.request_row("b").unwrap());
    let emitted = |r: u32| t.tokens.emitted_ns[t.tokens_of(r)].to_vec();
    assert_eq!(emitted(a), [ms(36.25), ms(47.70), ms(59.90)]);
    assert_eq!(emitted(b), [ms(47.72), ms(59.92)]);
    let steps_of = |r: u32| t.tokens.iteration[t.tokens_of(r)].to_vec();
    assert_eq!(steps_of(a), [1, 2, 3]);
    assert_eq!(steps_of(b), [2, 3]);
    let q = &t.requests;
    assert_eq!(q.scheduled_ns.at(b as usize), Some(ms(18.2)), "b waited 13.2 ms");
    assert_eq!(q.first_token_ns.at(a as usize), Some(ms(36.25)));
    assert_eq!(q.finished_ns.at(a as usize), Some(ms(59.90)));
    assert_eq!(
        (q.cached_tokens.at(a as usize), q.output_tokens.at(b as usize)),
        (Some(0), Some(2))
    );
    assert_eq!(t.label(q.finish_reason[a as usize]), Some("stop"));
    // The prefill chunks, by request then start: a 64 then 36, b 28 then 2, in the steps that computed them.
    let chunks: Vec<(u32, i64, u32)> = (0..t.stages.len())
        .filter(|&s| t.stages.kind[s] == StageKind::Prefill)
        .map(|s| {
            (
                t.stages.request[s],
                t.stages.iteration[s].unwrap(),
                t.stages.tokens[s].unwrap(),
            )
        })
        .collect();
    assert_eq!(chunks, [(a, 0, 64), (a, 1, 36), (b, 1, 28), (b, 2, 2)]);
    // The figures the summary reads: a's TTFT 36.25 ms and TPOT (59.90 - 36.25) / 2 = 11.825 ms; b's TTFT
    // 47.72 - 5 = 42.72 ms.
    let m = tokenscope_core::analysis::metrics::request_metrics(&t, a);
    assert_eq!(m.ttft_ns, Some(36_250_000));
    assert!((m.tpot_ns.unwrap() - 11_825_000.0).abs() < 1e-6);
    assert_eq!(
        tokenscope_core::analysis::metrics::request_metrics(&t, b).ttft_ns,
        Some(42_720_000)
    );
}

#[test]
fn a_disaggregated_pair_prefills_transfers_and_decodes_as_worked_out_by_hand() {
    // The engine of the test above (10 ms a step, 0.125 ms a prompt token, 1 ms a decoding sequence, a 64-token
    // budget), as one prefill and one decode instance; a transfer costs 0.5 ms plus 10,000 bytes a token at 1 GB/s
    // (10 µs a token).
    let transfer = super::super::disagg::TransferCost {
        bytes_per_token: 10_000,
        bytes_per_s: 1e9,
        latency_ns: 500_000,
    };
    let cfg = SimConfig {
        engines: vec![EngineConfig {
            max_num_batched_tokens: 64,
            kv_blocks: 1_000,
            prefix_cache_blocks: 0,
            cost: StepCost {
                base_ms: 10.0,
                prefill_token_ms: 0.125,
                decode_seq_ms: 1.0,
                ..StepCost::ONE_REGIME
            },
            ..EngineConfig::new("e")
        }],
        disaggregation: Some(Disaggregation {
            prefill: 1,
            decode: 1,
            transfer,
        }),
        ..small_engine(1_000)
    };
    // a: 100 prompt tokens, 3 out, at 0 ms; b: 30 prompt tokens, 2 out, at 5 ms.
    let t = simulate(&cfg, &[arrival("a", 0, 100, 3), arrival("b", 5, 30, 2)]);
    // Prefill instance: step 0 at 0 ms, a's first 64 tokens, 18 ms; step 1 at 18.2 ms, a's other 36 and b's first
    //   28, 18 ms: a's prompt is done at 36.2 ms and its 100 tokens' KV moves in 0.5 + 1.0 = 1.5 ms, to 37.7 ms;
    //   step 2 at 36.4 ms, b's last 2 tokens, 10.25 ms: b's 30 tokens' KV moves 46.65 -> 47.45 ms (0.5 + 0.3).
    // Decode instance: step 0 at 37.7 ms, a alone, 11 ms (a's token 0 leaves 0.05 ms after its end); b arrives at
    //   47.45 ms and waits for step 1 at 48.9 ms: a and b, 12 ms (b's token leaves 0.02 ms after a's); step 2 at
    //   61.1 ms, the same two, 12 ms, their last tokens.
    let ms = |x: f64| T0 + (x * 1e6).round() as i64;
    let (prefill, decode) = (
        t.labels.lookup("e-prefill").unwrap(),
        t.labels.lookup("e-decode").unwrap(),
    );
    let it = &t.iterations;
    let steps_of = |source: u32| -> Vec<(i64, i64)> {
        (0..it.len())
            .filter(|&i| it.source[i] == source)
            .map(|i| (it.start_ns[i], it.end_ns[i]))
            .collect()
    };
    assert_eq!(
        steps_of(prefill),
        [(ms(0.0), ms(18.0)), (ms(18.2), ms(36.2)), (ms(36.4), ms(46.65))]
    );
    assert_eq!(
        steps_of(decode),
        [(ms(37.7), ms(48.7)), (ms(48.9), ms(60.9)), (ms(61.1), ms(73.1))]
    );
    let (a, b) = (t.request_row("a").unwrap(), t.request_row("b").unwrap());
    for r in [a, b] {
        assert_eq!(t.requests.source[r as usize], prefill);
        assert_eq!(t.requests.decode_source[r as usize], decode);
        assert_eq!(t.decode_source(r), decode);
    }
    let emitted = |r: u32| t.tokens.emitted_ns[t.tokens_of(r)].to_vec();
    assert_eq!(emitted(a), [ms(48.75), ms(60.95), ms(73.15)]);
    assert_eq!(emitted(b), [ms(60.97), ms(73.17)]);
    // Every token names a step of the decode instance, numbered from 0 there as on the prefill instance.
    for r in [a, b] {
        for k in t.tokens_of(r) {
            let row = t.tokens.iter_row[k] as usize;
            assert_eq!(it.source[row], decode, "token {k}");
            assert_eq!(it.iteration[row], t.tokens.iteration[k]);
        }
    }
    assert_eq!(t.tokens.iteration[t.tokens_of(b)].to_vec(), [1, 2]);
    // The explicit spans: prefill chunks on the prefill instance, the transfer, and b's queues on each instance
    // (5 -> 18.2 ms on the first, 47.45 -> 48.9 ms on the second).
    let spans = |r: u32| -> Vec<(StageKind, i64, i64, Option<u32>)> {
        t.explicit_stages_of(r)
            .map(|s| {
                let st = &t.stages;
                (st.kind[s], st.start_ns[s], st.end_ns[s], st.tokens[s])
            })
            .collect()
    };
    assert_eq!(
        spans(a),
        [
            (StageKind::Prefill, ms(0.0), ms(18.0), Some(64)),
            (StageKind::Prefill, ms(18.2), ms(36.2), Some(36)),
            (StageKind::KvTransfer, ms(36.2), ms(37.7), Some(100)),
        ]
    );
    assert_eq!(
        spans(b),
        [
            (StageKind::Queue, ms(5.0), ms(18.2), None),
            (StageKind::Prefill, ms(18.2), ms(36.2), Some(28)),
            (StageKind::Prefill, ms(36.4), ms(46.65), Some(2)),
            (StageKind::KvTransfer, ms(46.65), ms(47.45), Some(30)),
            (StageKind::Queue, ms(47.45), ms(48.9), None),
        ]
    );
    // The prefill chunks name the prefill instance's steps.
    for s in t.explicit_stages_of(b) {
        if t.stages.kind[s] == StageKind::Prefill {
            assert_eq!(it.source[t.stages.iter_row[s].unwrap() as usize], prefill);
        }
    }
    // TTFT: a 48.75 ms; b 60.97 - 5 = 55.97 ms.
    assert_eq!(
        tokenscope_core::analysis::metrics::request_metrics(&t, b).ttft_ns,
        Some(55_970_000)
    );
}

#[test]
fn a_speculating_engine_verifies_drafts_as_worked_out_by_hand() {
    // 10 ms a step, 0.125 ms a prompt token, 1 ms a decoding sequence, 0.5 ms a draft verified, no noise; two
    // drafts a step, both always accepted, the drafter 1 ms a draft position.
    let cfg = SimConfig {
        engines: vec![EngineConfig {
            prefix_cache_blocks: 0,
            cost: StepCost {
                base_ms: 10.0,
                prefill_token_ms: 0.125,
                decode_seq_ms: 1.0,
                verify_token_ms: 0.5,
                ..StepCost::ONE_REGIME
            },
            speculation: Some(Speculation::new(2, Some(&[1.0, 1.0]), 1.0).unwrap()),
            ..EngineConfig::new("e")
        }],
        ..small_engine(1_000)
    };
    // One request: 10 prompt tokens, 5 out.
    let t = simulate(&cfg, &[arrival("a", 0, 10, 5)]);
    // Step 0 at 0 ms: the prompt, 10 + 10 × 0.125 = 11.25 ms; token 0 leaves at 11.30, a plain token.
    // Step 1 at 11.45 ms: one decode verifying 2 drafts: 10 + 1 + 2 × 0.5 = 12 ms, then the drafter's 2 × 1 ms:
    //   14 ms; tokens 1 and 2 (the accepted drafts) and 3 (the bonus) leave together at 25.50.
    // Step 2 at 25.65 ms: the same 14 ms; token 4, a draft, is the stop token: the rest of the burst is dropped.
    let ms = |x: f64| T0 + (x * 1e6).round() as i64;
    let it = &t.iterations;
    assert_eq!(it.start_ns, [ms(0.0), ms(11.45), ms(25.65)]);
    assert_eq!(it.end_ns, [ms(11.25), ms(25.45), ms(39.65)]);
    assert_eq!(it.spec_drafted_tokens, [Some(0), Some(2), Some(2)]);
    assert_eq!(it.spec_accepted_tokens, [Some(0), Some(2), Some(2)]);
    let rows = t.tokens_of(0);
    assert_eq!(
        t.tokens.emitted_ns[rows.clone()],
        [ms(11.30), ms(25.50), ms(25.50), ms(25.50), ms(39.70)]
    );
    assert_eq!(
        t.tokens.spec[rows.clone()],
        [
            SpecRole::Plain,
            SpecRole::Draft,
            SpecRole::Draft,
            SpecRole::Bonus,
            SpecRole::Draft
        ]
    );
    assert_eq!(
        t.tokens.spec_drafted[rows],
        [
            tokenscope_core::trace::NULL_U8,
            2,
            tokenscope_core::trace::NULL_U8,
            tokenscope_core::trace::NULL_U8,
            2
        ]
    );
    assert_eq!(
        (
            t.requests.spec_drafted_tokens.at(0),
            t.requests.spec_accepted_tokens.at(0)
        ),
        (Some(4), Some(4))
    );
    assert_eq!(t.label(t.requests.finish_reason[0]), Some("stop"));
    // TPOT per token: (39.70 - 11.30) / 4 = 7.1 ms, though each verify step took 14 ms.
    let m = tokenscope_core::analysis::metrics::request_metrics(&t, 0);
    assert!((m.tpot_ns.unwrap() - 7_100_000.0).abs() < 1e-6, "{:?}", m.tpot_ns);
}
