//! The windowed detectors (overload, chronic interference, outsized prompts) on hand-built workloads whose figures
//! are worked out in each test, and on a replay of real conversations.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers may unwrap: a panic here is a failed test"
)]

use tokenscope_core::analysis::findings::{
    Finding, Kind, Severity, Thresholds, chronic_interference, decode_interrupted, find, overload, prefill_monopoly,
};
use tokenscope_core::analysis::summary::Slo;
use tokenscope_core::trace::Trace;
use tokenscope_synth::arrivals::ReplayOptions;
use tokenscope_synth::{Scenario, SynthOptions, generate};

use crate::findings::{ids, sample, th};
use crate::findings_by_hand::{at, prefill_stage, request, step, token, trace_of};

/// Twenty requests on one instance, one a second from 0 s, scheduled one every 2 s (request k at 2k s, its first
/// token 100 ms later): request k waits k s, the queue grows until the last arrival, then drains.
pub(crate) fn overloaded() -> Trace {
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
pub(crate) fn chronically_chunked(cycles: i64) -> Trace {
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
        profile: tokenscope_synth::ProfileChoice::default(),
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
        arrivals: Some(crate::common::repo("tests/data/real/azure_conv_first_10min.csv")),
        replay: ReplayOptions {
            time_scale: 0.5,
            ..ReplayOptions::default()
        },
        sources: 1,
        prefix_cache_tokens: None,
        profile: tokenscope_synth::ProfileChoice::default(),
        chunked_prefill: None,
        plant: None,
    })
    .unwrap();
    // One request per row of the CSV, its header left out.
    let csv = std::fs::read_to_string(crate::common::repo("tests/data/real/azure_conv_first_10min.csv")).unwrap();
    assert_eq!(t.request_count(), csv.lines().count() - 1);
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
        .map(|&r| q.scheduled_ns.at(r).unwrap() - q.arrival_ns[r])
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
                .filter(|&r| q.arrival_ns[r] <= at && q.scheduled_ns.at(r).unwrap() > at)
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
    assert_eq!(q.scheduled_ns.at(first).unwrap() - q.arrival_ns[first], longest);
}

#[test]
fn an_outsized_prompt_is_decided_at_the_factor_on_its_instance() {
    use tokenscope_core::analysis::findings::prefill_ratios;
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
