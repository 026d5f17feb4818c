//! The core figures on a trace small enough to compute by hand: `sample_traces/four_requests.jsonl`.
//!
//! Times are ms after T0 = 2025-11-29 08:00:00 UTC.
//!
//! | req | arrival | scheduled | first token | finished | output_tokens | token records (emitted)   |
//! |-----|---------|-----------|-------------|----------|---------------|---------------------------|
//! | r1  | 0       | 10        | 150         | 250      | 3             | 150, 200, 250             |
//! | r2  | 100     | 130       | 300         | 300      | 1             | 300                       |
//! | r3  | 200     | 400       | 700         | 1000     | 4             | 700, 800, 900, 1000       |
//! | r4  | 300     | 310       | 360         | 600      | 5             | idx 0,1,2,4: 360,420,480,600 |
//!
//! queue = scheduled − arrival:  r1 10, r2 30, r3 200, r4 10
//! TTFT  = first − arrival:      r1 150, r2 200, r3 500, r4 60
//! E2E   = finished − arrival:   r1 250, r2 200, r3 800, r4 300
//! TPOT  = (E2E − TTFT)/(n − 1): r1 100/2 = 50, r2 undefined (1 token), r3 300/3 = 100, r4 240/4 = 60
//!        (r4 uses output_tokens = 5, not its 4 records: usage wins, the disagreement is a mismatch)
//! ITL   = emitted_i − emitted_{i−1}: r1 50, 50; r3 100, 100, 100; r4 60, 60 (index 4's predecessor, index 3, is
//!         missing, so its ITL is undefined)

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers may unwrap: a panic here is a failed test"
)]

use tokenscope_core::analysis::metrics::request_metrics;
use tokenscope_core::analysis::summary::{GroupBy, Slo, summarize_all, summarize_by};
use tokenscope_core::ingest::Progress;
use tokenscope_core::load::load;

fn four_requests() -> tokenscope_core::load::Loaded {
    match load(
        &crate::common::repo("sample_traces/four_requests.jsonl"),
        &Progress::default(),
    ) {
        Ok(l) => l,
        Err(e) => panic!("the sample trace loads: {e}"),
    }
}

#[test]
fn per_request_figures() {
    let l = four_requests();
    let t = &l.trace;
    let row = |id: &str| t.request_row(id).unwrap_or_else(|| panic!("request {id}"));
    let m1 = request_metrics(t, row("r1"));
    assert_eq!(m1.queue_ns, Some(10_000_000));
    assert_eq!(m1.ttft_ns, Some(150_000_000));
    assert_eq!(m1.e2e_ns, Some(250_000_000));
    assert_eq!(m1.tpot_ns, Some(50_000_000.0));
    let m2 = request_metrics(t, row("r2"));
    assert_eq!(m2.output_tokens, 1);
    assert_eq!(m2.tpot_ns, None, "TPOT is undefined for a single output token");
    let m4 = request_metrics(t, row("r4"));
    assert_eq!(m4.output_tokens, 5, "usage wins over the 4 token records");
    assert_eq!(m4.tpot_ns, Some(60_000_000.0));
}

#[test]
fn summary_figures_match_the_hand_computation() {
    let l = four_requests();
    let s = summarize_all(&l.trace, Slo::default(), None);
    assert_eq!(s.requests, 4);
    assert_eq!(s.input_tokens, 812 + 100 + 2000 + 50);
    assert_eq!(s.cached_tokens, Some(64 + 1000));
    assert_eq!(s.output_tokens, 3 + 1 + 4 + 5);
    // Span: first arrival 0 ms to last finish 1000 ms; throughput 13 tokens / 1 s.
    assert_eq!(s.span_ms, Some(1000.0));
    assert_eq!(s.throughput_tok_s, Some(13.0));

    // TTFT sorted 60, 150, 200, 500: mean 910/4 = 227.5; p50 rank ceil(2) = 2 -> 150; p90 rank ceil(3.6) = 4 -> 500.
    assert_eq!(s.ttft_ms.count, 4);
    assert_eq!(s.ttft_ms.mean, Some(227.5));
    assert_eq!(s.ttft_ms.p50, Some(150.0));
    assert_eq!(s.ttft_ms.p90, Some(500.0));
    assert_eq!(s.ttft_ms.p99, Some(500.0));
    assert_eq!(s.ttft_ms.max, Some(500.0));
    // TPOT sorted 50, 60, 100 (r2 has none): mean 70; p50 rank ceil(1.5) = 2 -> 60; p90 rank ceil(2.7) = 3 -> 100.
    assert_eq!(s.tpot_ms.count, 3);
    assert_eq!(s.tpot_ms.mean, Some(70.0));
    assert_eq!(s.tpot_ms.p50, Some(60.0));
    assert_eq!(s.tpot_ms.p90, Some(100.0));
    // E2E sorted 200, 250, 300, 800: mean 1550/4 = 387.5; p50 -> 250; p95 rank ceil(3.8) = 4 -> 800.
    assert_eq!(s.e2e_ms.mean, Some(387.5));
    assert_eq!(s.e2e_ms.p50, Some(250.0));
    assert_eq!(s.e2e_ms.p95, Some(800.0));
    // Queue sorted 10, 10, 30, 200: mean 250/4 = 62.5; p50 -> 10; p90 -> 200.
    assert_eq!(s.queue_ms.mean, Some(62.5));
    assert_eq!(s.queue_ms.p50, Some(10.0));
    assert_eq!(s.queue_ms.p90, Some(200.0));
    // ITL sorted 50, 50, 60, 60, 100, 100, 100: mean 520/7; p50 rank ceil(3.5) = 4 -> 60; p90 rank ceil(6.3) = 7
    // -> 100.
    assert_eq!(s.itl_ms.count, 7);
    assert!((s.itl_ms.mean.unwrap() - 520.0 / 7.0).abs() < 1e-9);
    assert_eq!(s.itl_ms.p50, Some(60.0));
    assert_eq!(s.itl_ms.p90, Some(100.0));
    assert_eq!(s.itl_ms.max, Some(100.0));
    assert_eq!(s.finish_reasons.get("stop"), Some(&3));
    assert_eq!(s.finish_reasons.get("length"), Some(&1));
    assert_eq!(s.token_mismatches, 1, "r4: output_tokens 5, 4 token records");
    assert!(s.slo.is_none());
}

#[test]
fn slo_attainment_and_goodput() {
    let l = four_requests();
    // TTFT <= 200 ms and TPOT <= 55 ms:
    //   r1 150 / 50  -> met (3 tokens)
    //   r2 200 / -   -> met: TTFT at the limit, TPOT undefined (1 token)
    //   r3 500       -> TTFT missed
    //   r4 60 / 60   -> TPOT missed
    // attainment 2/4 = 0.5; goodput (3 + 1) tokens / 1 s = 4 tok/s.
    let s = summarize_all(
        &l.trace,
        Slo {
            ttft_ms: Some(200.0),
            tpot_ms: Some(55.0),
        },
        None,
    );
    let slo = s.slo.unwrap_or_else(|| panic!("SLO result"));
    assert_eq!(slo.attainment, Some(0.5));
    assert_eq!(slo.goodput_tok_s, Some(4.0));
    // TTFT alone, 100 ms: only r4 (60 ms) meets it: 1/4, goodput 5 tok/s.
    let s = summarize_all(
        &l.trace,
        Slo {
            ttft_ms: Some(100.0),
            tpot_ms: None,
        },
        None,
    );
    let slo = s.slo.unwrap_or_else(|| panic!("SLO result"));
    assert_eq!(slo.attainment, Some(0.25));
    assert_eq!(slo.goodput_tok_s, Some(5.0));
}

#[test]
fn slo_misses_name_the_objective_and_the_figure() {
    let l = four_requests();
    let t = &l.trace;
    let slo = Slo {
        ttft_ms: Some(200.0),
        tpot_ms: Some(55.0),
    };
    let misses = |id: &str| slo.misses(&request_metrics(t, t.request_row(id).unwrap()));
    assert!(misses("r1").is_empty());
    assert_eq!(misses("r3"), ["TTFT 500.0 ms > 200 ms", "TPOT 100.0 ms > 55 ms"]);
    assert_eq!(misses("r4"), ["TPOT 60.0 ms > 55 ms"]);
    assert!(
        misses("r2").is_empty(),
        "TTFT exactly at the limit meets it; one token has no TPOT"
    );
}

#[test]
fn groups_split_the_figures() {
    let l = four_requests();
    let groups = summarize_by(&l.trace, GroupBy::AppId, Slo::default(), None);
    let keys: Vec<&str> = groups.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["chat", "search"]);
    let chat = &groups[0].1;
    // chat = r1, r3, r4: outputs 3 + 4 + 5 = 12; span 0 .. 1000 ms.
    assert_eq!(chat.requests, 3);
    assert_eq!(chat.output_tokens, 12);
    assert_eq!(chat.throughput_tok_s, Some(12.0));
    // search = r2 alone: span 100 .. 300 ms = 0.2 s, 1 token -> 5 tok/s.
    let search = &groups[1].1;
    assert_eq!(search.span_ms, Some(200.0));
    assert_eq!(search.throughput_tok_s, Some(5.0));
}

#[test]
fn stages_are_derived_where_the_trace_has_none() {
    let l = four_requests();
    let t = &l.trace;
    let r1 = t.request_row("r1").unwrap_or_else(|| panic!("r1"));
    let kinds: Vec<(&str, bool)> = t.stages_of(r1).iter().map(|s| (s.kind.name(), s.derived)).collect();
    // queue derived (0..10 ms), prefill explicit (12..148 ms, iteration 7), decode derived for tokens 1 and 2 from
    // iterations 8 (160..195) and 9 (205..245).
    assert_eq!(
        kinds,
        [("queue", true), ("prefill", false), ("decode", true), ("decode", true)]
    );
    let stages = t.stages_of(r1);
    let t0 = 1_764_403_200_000_000_000_i64;
    assert_eq!(
        (stages[2].start_ns - t0, stages[2].end_ns - t0),
        (160_000_000, 195_000_000)
    );
    assert_eq!(stages[3].iteration, Some(9));
    // r3 has no prefill stage and no iterations: prefill from scheduled (400) to first token (700), decodes between
    // consecutive tokens.
    let r3 = t.request_row("r3").unwrap_or_else(|| panic!("r3"));
    let stages = t.stages_of(r3);
    assert_eq!(stages[1].kind.name(), "prefill");
    assert_eq!(
        (stages[1].start_ns - t0, stages[1].end_ns - t0),
        (400_000_000, 700_000_000)
    );
    assert_eq!(stages.len(), 2 + 3);
    assert_eq!(
        (stages[4].start_ns - t0, stages[4].end_ns - t0),
        (900_000_000, 1_000_000_000)
    );
}

#[test]
fn eos_is_recognised_by_meta_even_with_empty_text() {
    let l = four_requests();
    let t = &l.trace;
    let r1 = t.request_row("r1").unwrap_or_else(|| panic!("r1"));
    let last = t.tokens_of(r1).end - 1;
    assert_eq!(t.texts.get(t.tokens.text[last]), Some(""));
    assert!(t.is_special_token(t.tokens.token_id[last], t.tokens.special[last]));
    assert_eq!(t.tokens.rank[last], 2);
    let cands = t.candidates_of(last);
    assert_eq!(cands.len(), 2);
    assert_eq!(t.candidates.logprob[cands.start], -0.2);
}

#[test]
fn cost_by_price_table_with_cache_savings() {
    let l = four_requests();
    let prices = tokenscope_core::analysis::cost::Prices::from_json(
        r#"{"default": {"input": 1, "cached_input": 0.5, "output": 2},
            "models": {"llama-3-8b": {"input": 10, "cached_input": 5, "output": 20}}}"#,
    )
    .unwrap();
    // Per 1 M tokens: uncached input x input price + cached x cached price + output x output price.
    //   r1 qwen   812 in, 0 cached, 3 out:      812 x 1 +    0 x 0.5 + 3 x 2  =   818
    //   r2 qwen   100 in, 64 cached, 1 out:      36 x 1 +   64 x 0.5 + 1 x 2  =    70
    //   r3 qwen  2000 in, 1000 cached, 4 out:  1000 x 1 + 1000 x 0.5 + 4 x 2  = 1,508
    //   r4 llama   50 in, no cached, 5 out:      50 x 10              + 5 x 20 =   600
    // total 2,996 / 1e6; savings: cached tokens at (input - cached) price: (64 + 1000) x 0.5 = 532 / 1e6.
    let s = summarize_all(&l.trace, Slo::default(), Some(&prices));
    let c = s.cost.unwrap();
    assert!((c.total - 2996e-6).abs() < 1e-12, "{}", c.total);
    assert!((c.input - (812.0 + 36.0 + 1000.0 + 500.0) * 1e-6).abs() < 1e-12);
    assert!((c.cached_input - 532e-6).abs() < 1e-12);
    assert!((c.output - (6.0 + 2.0 + 8.0 + 100.0) * 1e-6).abs() < 1e-12);
    assert!((c.cache_savings - 532e-6).abs() < 1e-12);
    // By app: chat = r1 + r3 + r4 = 2,926; search = r2 = 70.
    let groups = summarize_by(&l.trace, GroupBy::AppId, Slo::default(), Some(&prices));
    let by: Vec<(&str, f64)> = groups
        .iter()
        .map(|(k, g)| (k.as_str(), g.cost.unwrap().total * 1e6))
        .collect();
    assert_eq!(by.len(), 2);
    assert_eq!(by[0].0, "chat");
    assert!((by[0].1 - 2926.0).abs() < 1e-6);
    assert!((by[1].1 - 70.0).abs() < 1e-6);
    // Without a price table there is no cost.
    assert!(summarize_all(&l.trace, Slo::default(), None).cost.is_none());
}
