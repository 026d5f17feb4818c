//! The comparison, on traces written by hand.

use super::*;
use crate::analysis::findings::{Kind, Severity};

const T0: i64 = 1_764_403_200_000_000_000;

/// A request record: arrival, first token and finish in ms after T0, prompt and output tokens.
fn request(id: &str, at: i64, first: i64, done: i64, input: u32, output: u32) -> String {
    format!(
        r#"{{"kind":"request","request_id":"{id}","arrival_ns":{},"first_token_ns":{},"finished_ns":{},"input_tokens":{input},"output_tokens":{output},"finish_reason":"stop"}}"#,
        T0 + at * 1_000_000,
        T0 + first * 1_000_000,
        T0 + done * 1_000_000
    )
}

fn trace(lines: &[String]) -> Trace {
    let mut file = match tempfile::Builder::new().suffix(".jsonl").tempfile() {
        Ok(f) => f,
        Err(e) => panic!("{e}"),
    };
    std::io::Write::write_all(&mut file, lines.join("\n").as_bytes()).unwrap();
    crate::load::load(file.path(), &crate::ingest::Progress::default())
        .unwrap()
        .trace
}

/// A: r1 TTFT 100 ms, TPOT (1100 − 100) / 10 = 100 ms; r2 TTFT 200, TPOT (650 − 250) / 4 = 100.
fn before() -> Trace {
    trace(&[
        request("r1", 0, 100, 1100, 500, 11),
        request("r2", 50, 250, 650, 800, 5),
    ])
}

/// B: r1 TTFT 300, TPOT (800 − 300) / 10 = 50; r2 TTFT 50, TPOT (250 − 100) / 4 = 37.5; r3 (B only) TTFT 10.
fn after() -> Trace {
    trace(&[
        request("r1", 0, 300, 800, 500, 11),
        request("r2", 50, 100, 250, 800, 5),
        request("r3", 1000, 1010, 1020, 40, 2),
    ])
}

#[test]
fn figures_change_with_their_verdicts() {
    let slo = Slo {
        ttft_ms: Some(250.0),
        tpot_ms: Some(120.0),
    };
    let c = compare(
        &before(),
        &after(),
        &CompareOptions {
            slo,
            ..CompareOptions::default()
        },
    );
    let get = |key: &str| *c.change(key).unwrap();
    // TTFT p50: A [100, 200] -> rank 1 = 100; B [10, 50, 300] -> rank ceil(1.5) = 2 = 50.
    let p50 = get("ttft_p50_ms");
    assert_eq!((p50.a, p50.b, p50.change), (Some(100.0), Some(50.0), Some(-50.0)));
    assert_eq!(p50.relative, Some(-0.5));
    assert_eq!(p50.verdict, Verdict::Better);
    // TTFT max 200 -> 300: worse by half.
    let max = get("ttft_max_ms");
    assert_eq!(
        (max.change, max.relative, max.verdict),
        (Some(100.0), Some(0.5), Verdict::Worse)
    );
    // Requests 2 -> 3: changed, neither better nor worse.
    assert_eq!(get("requests").verdict, Verdict::Changed);
    // Span 1.1 s -> 1.02 s; throughput 16 / 1.1 -> 18 / 1.02 tok/s.
    let tput = get("throughput_tok_s");
    assert!((tput.a.unwrap() - 16.0 / 1.1).abs() < 1e-9);
    assert!((tput.b.unwrap() - 18.0 / 1.02).abs() < 1e-9);
    assert_eq!(tput.verdict, Verdict::Better);
    // Attainment 2/2 -> 2/3 (r1's TTFT 300 ms misses 250 ms); goodput 16 / 1.1 -> (5 + 2) / 1.02.
    let met = get("slo_attainment");
    assert_eq!(met.a, Some(1.0));
    assert!((met.b.unwrap() - 2.0 / 3.0).abs() < 1e-12);
    assert_eq!(met.verdict, Verdict::Worse);
    assert!((get("goodput_tok_s").b.unwrap() - 7.0 / 1.02).abs() < 1e-9);
    // No price table: no cost row.
    assert!(c.change("cost").is_none());
}

#[test]
fn requests_pair_by_id_and_their_changes_rank_by_size() {
    let c = compare(&before(), &after(), &CompareOptions::default());
    assert_eq!(c.pairing.by, PairedBy::RequestId);
    assert_eq!((c.pairing.pairs.len(), c.pairing.only_a, c.pairing.only_b), (2, 0, 1));
    // r1 TTFT +200 ms, r2 TTFT −150 ms: r1 first.
    let top = most_changed(&c.deltas, Metric::Ttft, 5);
    assert_eq!(top.len(), 2);
    assert_eq!(top[0].change(Metric::Ttft), Some(200.0));
    assert_eq!(top[1].change(Metric::Ttft), Some(-150.0));
    let ttft = c.shift(Metric::Ttft);
    assert_eq!((ttft.pairs, ttft.faster, ttft.slower), (2, 1, 1));
    // Sorted changes [−150, 200]: nearest-rank median = the first.
    assert_eq!(ttft.median_change_ms, Some(-150.0));
    assert_eq!((ttft.best_change_ms, ttft.worst_change_ms), (Some(-150.0), Some(200.0)));
    // TPOT −50 and −62.5 ms: both faster.
    let tpot = c.shift(Metric::Tpot);
    assert_eq!((tpot.faster, tpot.slower), (2, 0));
    assert_eq!(
        most_changed(&c.deltas, Metric::Tpot, 1)[0].change(Metric::Tpot),
        Some(-62.5)
    );
}

#[test]
fn requests_without_shared_ids_pair_by_arrival_and_prompt_length() {
    // B's ids differ. x1 arrives 30 ms later than r1 with r1's prompt length: a twin. x2 has r2's length
    // but arrives 200 ms later (beyond 100 ms): no twin. x3 arrives with r3 but with another length: no twin.
    let a = trace(&[
        request("r1", 0, 100, 200, 500, 2),
        request("r2", 50, 150, 250, 800, 2),
        request("r3", 400, 450, 500, 100, 2),
    ]);
    let b = trace(&[
        request("x0", 0, 10, 20, 7, 2),
        request("x1", 30, 130, 230, 500, 2),
        request("x2", 250, 350, 450, 800, 2),
        request("x3", 400, 450, 500, 101, 2),
    ]);
    // One pair of three: less than half of the smaller trace, so not reported.
    let p = pair_requests(&a, &b);
    assert_eq!(p.by, PairedBy::Unpaired);
    assert!(p.pairs.is_empty());
    assert_eq!((p.only_a, p.only_b), (3, 4));
    // With r3's length matched, two of three pair.
    let b = trace(&[
        request("x0", 0, 10, 20, 7, 2),
        request("x1", 30, 130, 230, 500, 2),
        request("x2", 250, 350, 450, 800, 2),
        request("x3", 400, 450, 500, 100, 2),
    ]);
    let p = pair_requests(&a, &b);
    assert_eq!(p.by, PairedBy::ArrivalAndPrompt);
    let named: Vec<(&str, &str)> = p
        .pairs
        .iter()
        .map(|&(x, y)| (a.request_id(x), b.request_id(y)))
        .collect();
    assert_eq!(named, [("r1", "x1"), ("r3", "x3")]);
    assert_eq!((p.only_a, p.only_b), (1, 2));
}

fn finding(kind: Kind, from_ms: i64, to_ms: i64, requests: Vec<u32>) -> Finding {
    Finding {
        kind,
        severity: Severity::Warning,
        summary: String::new(),
        from_ns: T0 + from_ms * 1_000_000,
        to_ns: T0 + to_ms * 1_000_000,
        requests,
        steps: Vec::new(),
        tokens: Vec::new(),
    }
}

#[test]
fn findings_match_by_kind_and_paired_request_by_objective_or_by_time() {
    let (a, b) = (before(), after());
    let pairing = pair_requests(&a, &b);
    let (r1a, r2a) = (a.request_row("r1").unwrap(), a.request_row("r2").unwrap());
    let (r1b, r3b) = (b.request_row("r1").unwrap(), b.request_row("r3").unwrap());
    let slo = |objective: &str, requests| {
        let mut f = finding(Kind::SloViolations, 0, 100, requests);
        f.summary = format!("1 of 3 requests (33.3 %) missed the {objective} objective of 50 ms; worst r1");
        f
    };
    let fa = vec![
        slo("TPOT", vec![r2a, r1a]),
        finding(Kind::KvSaturation, 100, 300, vec![]),
        finding(Kind::Truncation, 0, 10, vec![r1a]),
        finding(Kind::PreemptionBurst, 1_000, 2_000, vec![r2a]),
        finding(Kind::RepetitionLoop, 0, 10, vec![r2a]),
    ];
    let fb = vec![
        // r1 in both, but about TTFT: another finding than A's TPOT one.
        slo("TTFT", vec![r1b]),
        // Overlaps 100..300 ms: the same saturation.
        finding(Kind::KvSaturation, 250, 400, vec![]),
        // r1 again, but another kind: new in B.
        finding(Kind::RepetitionLoop, 0, 10, vec![r1b]),
        // The TPOT finding, naming other requests: the same objective, so the same finding.
        slo("TPOT", vec![r3b]),
        // A burst at the same time without a request named: the same burst as A's.
        finding(Kind::PreemptionBurst, 1_500, 1_600, vec![]),
    ];
    let d = match_findings(&fa, &fb, &pairing, 0);
    assert_eq!(d.both, [(0, 3), (1, 1), (3, 4)]);
    assert_eq!(d.only_a, [2, 4], "truncation and r2's loop are gone");
    assert_eq!(d.only_b, [0, 2]);
    // B's clock 10 s later (a replay of a later window): its saturation at 10.25 s is A's at 0.25 s.
    let late = vec![finding(Kind::KvSaturation, 10_250, 10_400, vec![])];
    assert_eq!(
        match_findings(&fa[1..2], &late, &pairing, 10_000_000_000).both,
        [(0, 0)]
    );
    assert_eq!(match_findings(&fa[1..2], &late, &pairing, 0).both, []);
    // The same finding, critical in A and a warning in B, eased; the other way, worse.
    let mut critical = fa[2].clone();
    critical.severity = Severity::Critical;
    assert_eq!(SeverityChange::of(&critical, &fa[2]), SeverityChange::Eased);
    assert_eq!(SeverityChange::of(&fa[2], &critical), SeverityChange::Worsened);
    assert_eq!(SeverityChange::of(&fa[2], &fa[2]), SeverityChange::Same);
}

#[test]
fn shared_ids_with_other_prompts_are_other_requests() {
    // A benchmark numbering its requests 0..N: run 2 shares the ids but not the prompts; its requests arrive with
    // run 1's lengths 20 ms later, in another order of ids.
    let a = trace(&[
        request("0", 0, 10, 20, 100, 2),
        request("1", 500, 510, 520, 200, 2),
        request("2", 900, 910, 920, 300, 2),
    ]);
    let b = trace(&[
        request("2", 20, 30, 40, 100, 2),
        request("0", 520, 530, 540, 200, 2),
        request("1", 920, 930, 940, 300, 2),
    ]);
    let p = pair_requests(&a, &b);
    assert_eq!(p.by, PairedBy::ArrivalAndPrompt);
    let named: Vec<(&str, &str)> = p
        .pairs
        .iter()
        .map(|&(x, y)| (a.request_id(x), b.request_id(y)))
        .collect();
    assert_eq!(named, [("0", "2"), ("1", "0"), ("2", "1")]);
    // B's clock: 20 ms later (the median of the pairs' gaps).
    assert_eq!(offset_ns(&a, &b, &p), 20_000_000);
}

#[test]
fn a_burst_of_equal_prompts_pairs_nearest_first_and_unknown_lengths_never() {
    // 2,000 requests of one length in one millisecond in both: each finds its twin in order, in n log n.
    let lines = |shift: i64| -> Vec<String> {
        (0..2_000)
            .map(|k| request(&format!("q{k}-{shift}"), shift, shift + 5, shift + 9, 64, 2))
            .collect()
    };
    let (a, b) = (trace(&lines(0)), trace(&lines(1)));
    let p = pair_requests(&a, &b);
    assert_eq!((p.by, p.pairs.len()), (PairedBy::ArrivalAndPrompt, 2_000));
    // Without input_tokens, nothing pairs by arrival.
    let bare = |id: &str| {
        format!(
            r#"{{"kind":"request","request_id":"{id}","arrival_ns":{T0},"first_token_ns":{},"finished_ns":{}}}"#,
            T0 + 1,
            T0 + 2
        )
    };
    let (a, b) = (trace(&[bare("x")]), trace(&[bare("y")]));
    assert_eq!(pair_requests(&a, &b).by, PairedBy::Unpaired);
}

#[test]
fn a_change_within_one_percent_is_the_same() {
    let mut a = summarize_all(&before(), Slo::default(), None);
    let mut b = a.clone();
    a.ttft_ms.p99 = Some(1000.0);
    b.ttft_ms.p99 = Some(1009.0);
    let f = FIGURES.iter().find(|f| f.key == "ttft_p99_ms").unwrap();
    assert_eq!(Change::of(f, &a, &b).verdict, Verdict::Same);
    b.ttft_ms.p99 = Some(1011.0);
    assert_eq!(Change::of(f, &a, &b).verdict, Verdict::Worse);
    b.ttft_ms.p99 = None;
    assert_eq!(Change::of(f, &a, &b).verdict, Verdict::Undefined);
}
