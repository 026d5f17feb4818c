//! The token-by-token comparison, on answers written by hand; every figure worked out below.

use super::*;
use crate::test_support::trace_of;

const T0: i64 = 1_764_403_200_000_000_000;

fn request(id: &str, hash: Option<&str>) -> String {
    let hash = hash.map_or_else(String::new, |h| format!(r#","prompt_hash":"{h}""#));
    format!(r#"{{"kind":"request","request_id":"{id}","arrival_ns":{T0},"input_tokens":10{hash}}}"#)
}

/// A token `(id, text)` at `index` with its probability `p` and its candidates `(id, text, probability)`.
fn token(req: &str, index: u32, (id, text): (u32, &str), p: f64, cands: &[(u32, &str, f64)]) -> String {
    let cands: Vec<String> = cands
        .iter()
        .map(|&(i, t, q)| format!(r#"{{"token_id":{i},"text":"{t}","logprob":{}}}"#, q.ln()))
        .collect();
    format!(
        r#"{{"kind":"token","request_id":"{req}","index":{index},"emitted_ns":{},"token_id":{id},"text":"{text}","logprob":{},"candidates":[{}]}}"#,
        T0 + i64::from(index + 1) * 1_000_000,
        p.ln(),
        cands.join(",")
    )
}

fn bare(req: &str, index: u32, id: u32, text: &str, special: bool) -> String {
    format!(
        r#"{{"kind":"token","request_id":"{req}","index":{index},"emitted_ns":{},"token_id":{id},"text":"{text}","special":{special}}}"#,
        T0 + i64::from(index + 1) * 1_000_000
    )
}

/// A: r1 "The cat sat", r2 "x y" without candidates, r3 "p q <eos>".
fn run_a() -> Trace {
    trace_of(
        &[
            request("r1", None),
            token("r1", 0, (1, "The"), 0.6, &[(1, "The", 0.6), (2, "A", 0.3)]),
            token("r1", 1, (3, " cat"), 0.5, &[(3, " cat", 0.5), (4, " dog", 0.4)]),
            token("r1", 2, (5, " sat"), 0.9, &[(5, " sat", 0.9)]),
            request("r2", None),
            bare("r2", 0, 7, "x", false),
            bare("r2", 1, 8, " y", false),
            request("r3", None),
            bare("r3", 0, 10, "p", false),
            bare("r3", 1, 11, " q", false),
            bare("r3", 2, 99, "<eos>", true),
        ]
        .join("\n"),
    )
}

/// B: r1 "The dog ran" (the cat and the dog swap their probabilities at position 1), r2 the same, r3 "p q" (it
/// stopped without the end-of-sequence token).
fn run_b() -> Trace {
    trace_of(
        &[
            request("r1", None),
            token("r1", 0, (1, "The"), 0.6, &[(1, "The", 0.6), (2, "A", 0.3)]),
            token("r1", 1, (4, " dog"), 0.5, &[(4, " dog", 0.5), (3, " cat", 0.4)]),
            token("r1", 2, (6, " ran"), 0.7, &[(6, " ran", 0.7)]),
            request("r2", None),
            bare("r2", 0, 7, "x", false),
            bare("r2", 1, 8, " y", false),
            request("r3", None),
            bare("r3", 0, 10, "p", false),
            bare("r3", 1, 11, " q", false),
        ]
        .join("\n"),
    )
}

fn close(x: Option<f64>, want: f64) -> bool {
    x.is_some_and(|x| (x - want).abs() < 1e-9)
}

#[test]
fn a_pair_parts_where_its_tokens_first_differ_and_is_measured_up_to_there() {
    let (a, b) = (run_a(), run_b());
    let d = compare_tokens(&a, &b, DEFAULT_KL_SHIFT);
    assert_eq!(d.pairing.by, PairedBy::RequestId);
    let r1 = &d.pairs[0];
    assert_eq!((a.request_id(r1.row_a), b.request_id(r1.row_b)), ("r1", "r1"));
    assert_eq!(r1.first_divergence, Some(1));
    // Positions 0 and 1 are compared (the divergence itself has the same context), not 2.
    assert_eq!((r1.positions_compared, r1.positions_with_candidates), (2, 2));
    // Position 0: the same top token; position 1: " cat" in A, " dog" in B.
    assert!(close(r1.top1_agreement, 0.5));
    // Position 0: the same probabilities, and the rest (0.1) the same: KL 0. Position 1: shared " cat" (0.5 in A,
    // 0.4 in B) and " dog" (0.4, 0.5), the rest 0.1 in both:
    // 0.5 ln(0.5/0.4) + 0.4 ln(0.4/0.5) = 0.1 ln 1.25 = 0.0223144.
    let kl1 = 0.1 * 1.25f64.ln();
    assert!(close(r1.kl_max, kl1));
    assert_eq!(r1.kl_max_at, Some(1));
    assert!(close(r1.kl_mean, kl1 / 2.0));
    // 0.0112 nats on average is above the default 0.01: the distribution moved.
    assert_eq!(r1.verdict, PairVerdict::Shifted);
    // " cat" is first in A and second in B.
    assert_eq!(r1.rank_changes.len(), 1);
    let change = &r1.rank_changes[0];
    assert_eq!((change.index, change.rank_a, change.rank_b), (1, Some(1), Some(2)));
    assert_eq!(change.token.text.as_deref(), Some(" cat"));
    let div = r1.divergence.as_ref().unwrap();
    let (da, db) = (div.a.as_ref().unwrap(), div.b.as_ref().unwrap());
    assert_eq!(
        (da.token.token_id, da.rank, da.rank_in_other),
        (Some(3), Some(1), Some(2))
    );
    assert_eq!(
        (db.token.token_id, db.rank, db.rank_in_other),
        (Some(4), Some(1), Some(2))
    );
    assert_eq!(da.candidates.len(), 2);
    assert!(close(db.candidates[1].logprob, 0.4f64.ln()));
}

#[test]
fn identical_answers_a_prefix_and_a_special_token_in_one_run_only() {
    let (a, b) = (run_a(), run_b());
    let d = compare_tokens(&a, &b, DEFAULT_KL_SHIFT);
    let r2 = &d.pairs[1];
    assert_eq!((r2.first_divergence, r2.verdict), (None, PairVerdict::Identical));
    assert_eq!((r2.positions_compared, r2.positions_with_candidates), (2, 0));
    assert_eq!((r2.top1_agreement, r2.kl_mean), (None, None));
    // B's answer is A's without its last token: they part at B's length, 2, where only A has a token.
    let r3 = &d.pairs[2];
    assert_eq!((r3.length_a, r3.length_b, r3.first_divergence), (3, 2, Some(2)));
    assert_eq!(r3.positions_compared, 2);
    let div = r3.divergence.as_ref().unwrap();
    assert!(div.b.is_none());
    assert_eq!(div.a.as_ref().unwrap().token.text.as_deref(), Some("<eos>"));
    assert_eq!(r3.special_only_a, ["<eos>"]);
    assert!(r3.special_only_b.is_empty());
    // No candidates: where they part is known, whether the distribution moved is not.
    assert_eq!(r3.verdict, PairVerdict::Parted);
}

#[test]
fn the_overall_figures_pool_the_pairs() {
    let d = compare_tokens(&run_a(), &run_b(), DEFAULT_KL_SHIFT);
    let o = &d.overall;
    assert_eq!((o.pairs, o.identical, o.sampling, o.shifted, o.parted), (3, 1, 0, 1, 1));
    // Divergences at 1 and 2: the lower middle is 1.
    assert_eq!(
        (o.first_divergence_min, o.first_divergence_p50, o.first_divergence_max),
        (Some(1), Some(1), Some(2))
    );
    assert_eq!(o.positions_compared, 6);
    // Only r1 has candidates: one of its two positions agrees; its KLs are 0 and 0.1 ln 1.25.
    assert!(close(o.top1_agreement, 0.5));
    assert!(close(o.kl_mean, 0.05 * 1.25f64.ln()));
    assert!(close(o.kl_max, 0.1 * 1.25f64.ln()));
}

#[test]
fn a_higher_threshold_calls_the_same_divergence_sampling() {
    let d = compare_tokens(&run_a(), &run_b(), 0.05);
    assert_eq!(d.pairs[0].verdict, PairVerdict::Sampling);
    assert_eq!(d.overall.sampling, 1);
}

#[test]
fn the_rest_of_the_probability_is_one_bucket() {
    // A gives the shared token 0.8 and the rest 0.2; B gives it 0.4 and the rest 0.6:
    // 0.8 ln(0.8/0.4) + 0.2 ln(0.2/0.6) = 0.8 ln 2 − 0.2 ln 3.
    let a = trace_of(&[request("r", None), token("r", 0, (1, "a"), 0.8, &[(1, "a", 0.8)])].join("\n"));
    let b = trace_of(
        &[
            request("r", None),
            token("r", 0, (1, "a"), 0.4, &[(1, "a", 0.4), (2, "b", 0.35)]),
        ]
        .join("\n"),
    );
    let d = compare_tokens(&a, &b, DEFAULT_KL_SHIFT);
    assert!(close(d.pairs[0].kl_mean, 0.8 * 2f64.ln() - 0.2 * 3f64.ln()));
    assert_eq!(
        d.pairs[0].verdict,
        PairVerdict::Shifted,
        "0.33 nats, with the same token chosen"
    );
    // Lists that share nothing give no KL: the position is disjoint.
    let c = trace_of(&[request("r", None), token("r", 0, (1, "a"), 0.8, &[(3, "c", 0.9)])].join("\n"));
    let d = compare_tokens(&a, &c, DEFAULT_KL_SHIFT);
    assert_eq!((d.pairs[0].disjoint_positions, d.pairs[0].kl_mean), (1, None));
    assert!(close(d.pairs[0].top1_agreement, 0.0));
}

#[test]
fn requests_pair_by_prompt_before_id() {
    // The ids are different runs' own; the prompts say which is which, the second use of a prompt with the second.
    let a = trace_of(
        &[
            request("a1", Some("p")),
            bare("a1", 0, 1, "one", false),
            request("a2", Some("q")),
            bare("a2", 0, 2, "two", false),
            request("a3", Some("p")),
            bare("a3", 0, 3, "three", false),
        ]
        .join("\n"),
    );
    let b = trace_of(
        &[
            request("b1", Some("q")),
            bare("b1", 0, 2, "two", false),
            request("b2", Some("p")),
            bare("b2", 0, 1, "one", false),
            request("b3", Some("p")),
            bare("b3", 0, 3, "three", false),
        ]
        .join("\n"),
    );
    let d = compare_tokens(&a, &b, DEFAULT_KL_SHIFT);
    assert_eq!(d.pairing.by, PairedBy::Prompt);
    let names: Vec<(&str, &str)> = d
        .pairs
        .iter()
        .map(|p| (a.request_id(p.row_a), b.request_id(p.row_b)))
        .collect();
    assert_eq!(names, [("a1", "b2"), ("a2", "b1"), ("a3", "b3")]);
    assert_eq!(d.overall.identical, 3);
}
