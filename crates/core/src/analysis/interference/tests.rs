use super::*;

fn sample(name: &str) -> Trace {
    crate::test_support::sample(name)
}

const T0: i64 = 1_764_403_200_000_000_000;

#[test]
fn the_96k_prompt_held_the_engine_during_its_prefill() {
    let t = sample("long_prefill.jsonl");
    // 3.0 s .. 12 s: the first four of its five prefill steps.
    let x = interference(&t, T0 + 3_000_000_000, T0 + 12_000_000_000);
    let top = x.top_holder().unwrap();
    assert_eq!(t.request_id(top), "doc-96k");
    let h = &x.holders[0];
    assert!(h.share > 0.9, "{h:?}");
    assert!(h.delayed >= Some(1), "short-700 waited behind it: {h:?}");
    let short = t.request_row("short-700").unwrap();
    let w = x.waiting.iter().find(|w| w.request == short).unwrap();
    assert!(w.waited_ms > 8_000.0, "{w:?}");
    assert!(x.steps.max_ms > 1_500.0);
    let text = x.to_text(&t);
    assert!(text.contains("doc-96k"), "{text}");
}

#[test]
fn the_victims_stall_is_named_and_blamed_on_the_big_prompt() {
    let t = sample("prefill_interrupts_decode.jsonl");
    // 3.3 s .. 5.2 s: the 24k-token prompt's prefill step.
    let x = interference(&t, T0 + 3_300_000_000, T0 + 5_200_000_000);
    assert_eq!(t.request_id(x.top_holder().unwrap()), "rag-24k");
    let victim = t.request_row("chat-victim").unwrap();
    let d = x.decoding.iter().find(|d| d.request == victim).unwrap();
    assert!(d.stalled, "{d:?}");
    assert!(d.max_itl_ms > 1_000.0 && d.median_itl_ms < 20.0, "{d:?}");
    assert!(x.holders[0].delayed >= Some(1));
}

#[test]
fn hand_computed_range_of_four_requests() {
    // four_requests.jsonl: iterations 7 (12..148 ms, prefill 812), 8 (160..195 ms, prefill 36 + decode 1),
    // 9 (205..245 ms, decode 1). Range 100..200 ms overlaps steps 7 and 8.
    let t = sample("four_requests.jsonl");
    let x = interference(&t, T0 + 100_000_000, T0 + 200_000_000);
    assert_eq!(x.steps.count, 2);
    assert_eq!(x.steps.prefill_tokens, 812 + 36);
    assert_eq!(x.steps.decode_tokens, 1);
    // Mean of 136 ms and 35 ms; busy time inside the range: 48 ms of step 7 + 35 ms of step 8.
    assert!((x.steps.mean_ms - 85.5).abs() < 1e-9, "{:?}", x.steps);
    assert!((x.steps.busy_ms - 83.0).abs() < 1e-9, "{:?}", x.steps);
    // r1's explicit prefill chunk is in step 7: 812 tokens, all of the step's tokens, 48 ms inside the range.
    let r1 = t.request_row("r1").unwrap();
    let h = x.holders.iter().find(|h| h.request == r1).unwrap();
    assert_eq!(h.tokens, 812);
    assert!((h.held_ms - 48.0).abs() < 1e-9, "{h:?}");
    // r2 (arrived 100 ms, scheduled 130 ms) waited 30 ms of the range; r3 (arrived 200 ms) 0 ms.
    let r2 = t.request_row("r2").unwrap();
    assert_eq!(
        x.waiting.iter().find(|w| w.request == r2).map(|w| w.waited_ms),
        Some(30.0)
    );
}

#[test]
fn the_first_k_are_those_a_full_sort_puts_first() {
    // 200 waits of 10 distinct lengths: many ties, broken by request.
    let all: Vec<Waiting> = (0..200u32)
        .map(|r| Waiting {
            request: (r * 7919) % 200,
            waited_ms: f64::from(r % 10),
        })
        .collect();
    for k in [1, 5, 20, 199, 200, 500] {
        let mut sorted = all.clone();
        sorted.sort_by(by_wait);
        sorted.truncate(k);
        let mut top = all.clone();
        top_k(&mut top, k, by_wait);
        assert_eq!(top, sorted, "k = {k}");
    }
}

#[test]
fn the_index_gives_the_figures_of_a_walk_of_every_request() {
    let mut compared = 0;
    for name in [
        "four_requests.jsonl",
        "long_prefill.jsonl",
        "prefill_interrupts_decode.jsonl",
        "eos_mistrigger.jsonl",
        "demo.parquet",
        "llamacpp_gemma3_270m.parquet",
    ] {
        let t = sample(name);
        let index = RangeIndex::build(&t);
        let t0 = t.start_ns();
        let t1 = (0..t.request_count() as u32)
            .filter_map(|r| t.finish_ns(r))
            .chain(t.iterations.end_ns.iter().copied())
            .max()
            .unwrap_or(t0);
        let span = (t1 - t0).max(1);
        // The whole trace and beyond, each tenth, ranges of a thousandth to a half at odd places, an instant,
        // a range before the trace.
        let mut ranges = vec![(t0 - span, t1 + span), (t0, t1), (t0, t0), (t0 - 1_000, t0 - 1)];
        for k in 0..10 {
            ranges.push((t0 + span * k / 10, t0 + span * (k + 1) / 10));
        }
        for (a, w) in [(0.13, 0.001), (0.37, 0.02), (0.5, 0.5), (0.71, 0.004), (0.9, 0.2)] {
            let from = t0 + (span as f64 * a) as i64;
            ranges.push((from, from + (span as f64 * w) as i64));
        }
        for (from, to) in ranges {
            let label = format!("{name} {}..{} ms", (from - t0) / 1_000_000, (to - t0) / 1_000_000);
            let (a, b) = (
                interference_indexed(&t, &index, from, to),
                interference_by_walk(&t, from, to),
            );
            if let Err(e) = a.same_figures(&b) {
                panic!("{label}: {e}");
            }
            compared += 1;
        }
    }
    assert_eq!(compared, 6 * 19);
}
