use super::*;
use crate::trace::Trace;
use crate::trace::report::Report;

/// Ingests JSON lines (line numbers from 1) and finishes the trace.
fn build(lines: &[&str]) -> (Trace, Report) {
    let mut b = TraceBuilder::default();
    for (i, line) in lines.iter().enumerate() {
        let raw: RawRecord<'_> = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
        ingest(
            &raw,
            Place {
                file: 0,
                at: i as u64 + 1,
            },
            &mut b,
        );
    }
    b.finish()
}

fn problems(report: &Report) -> Vec<(u64, Problem, &'static str)> {
    report
        .rejected
        .iter()
        .map(|r| (r.place.at, r.problem, r.field.unwrap_or("")))
        .collect()
}

#[test]
fn unit_guesses_follow_the_magnitude() {
    assert_eq!(unit_guess(1_764_403_200).0, "seconds");
    assert_eq!(unit_guess(1_764_403_200_123).0, "milliseconds");
    assert_eq!(unit_guess(1_764_403_200_123_456).0, "microseconds");
    assert!(opt_time("t", &Some(Val::Ok(1_764_403_200_123_456_789))).is_ok());
    let err = opt_time("t", &Some(Val::Ok(5_000_000_000_000_000_000)))
        .err()
        .map(|b| b.problem);
    assert_eq!(err, Some(Problem::OutOfRange), "year 2128");
}

#[test]
fn tokens_out_of_order_are_sorted_with_their_candidates() {
    let (t, report) = build(&[
        r#"{"kind":"token","request_id":"a","index":1,"emitted_ns":1764403200200000000,"token_id":7,"candidates":[{"token_id":7,"logprob":-0.1}]}"#,
        r#"{"kind":"token","request_id":"a","index":0,"emitted_ns":1764403200100000000,"token_id":5,"candidates":[{"token_id":5,"logprob":-0.5},{"token_id":6,"logprob":-1.5}]}"#,
        r#"{"kind":"request","request_id":"a","arrival_ns":1764403200000000000}"#,
    ]);
    assert_eq!(report.rejected_count(), 0);
    let a = t.request_row("a").unwrap_or_else(|| panic!("a"));
    let toks = t.tokens_of(a);
    assert_eq!(t.tokens.index[toks.clone()], [0, 1]);
    assert_eq!(t.tokens.token_id[toks.clone()], [5, 7]);
    let c0 = t.candidates_of(toks.start);
    assert_eq!(
        t.candidates.token_id[c0],
        [5, 6],
        "token 0 keeps its own two candidates"
    );
    let c1 = t.candidates_of(toks.start + 1);
    assert_eq!(t.candidates.logprob[c1], [-0.1]);
}

#[test]
fn a_repeated_token_index_keeps_the_first() {
    let (t, report) = build(&[
        r#"{"kind":"request","request_id":"a","arrival_ns":1764403200000000000}"#,
        r#"{"kind":"token","request_id":"a","index":0,"emitted_ns":1764403200100000000,"token_id":1}"#,
        r#"{"kind":"token","request_id":"a","index":0,"emitted_ns":1764403200200000000,"token_id":2}"#,
    ]);
    assert_eq!(problems(&report), [(3, Problem::Duplicate, "index")]);
    assert_eq!(t.tokens.token_id, [1]);
}

#[test]
fn field_rules() {
    let (_, report) = build(&[
        r#"{"kind":"request","request_id":"a","arrival_ns":1764403200000000000,"input_tokens":10,"cached_tokens":11}"#,
        r#"{"kind":"request","request_id":"b","arrival_ns":1764403200000000000,"output_tokens":-3}"#,
        r#"{"kind":"request","request_id":"c","arrival_ns":1764403200000000000,"finished_ns":1764403200100000000,"first_token_ns":1764403200200000000}"#,
        r#"{"kind":"token","request_id":"x","index":0,"emitted_ns":1764403200000000000,"rank":0}"#,
        r#"{"kind":"iteration","iteration":3,"start_ns":1764403200000000000,"end_ns":1764403200100000000,"forward_ns":1.5}"#,
        r#"{"kind":"meta","eos_token_ids":[2,-1]}"#,
        r#"{"kind":"request","request_id":"d","arrival_ns":1764403200000000000,"temperature":"hot"}"#,
    ]);
    assert_eq!(
        problems(&report),
        [
            (1, Problem::OutOfRange, "cached_tokens"),
            (2, Problem::OutOfRange, "output_tokens"),
            (3, Problem::NegativeDuration, "finished_ns"),
            (4, Problem::OutOfRange, "rank"),
            (5, Problem::FloatTime, "forward_ns"),
            (6, Problem::OutOfRange, "eos_token_ids"),
            (7, Problem::WrongType, "temperature"),
        ]
    );
}

#[test]
fn a_second_meta_and_a_repeated_iteration_are_duplicates() {
    let (t, report) = build(&[
        r#"{"kind":"meta","engine":"vllm"}"#,
        r#"{"kind":"meta","engine":"sglang"}"#,
        r#"{"kind":"iteration","iteration":3,"start_ns":1764403200000000000,"end_ns":1764403200100000000}"#,
        r#"{"kind":"iteration","iteration":3,"source":"other","start_ns":1764403200000000000,"end_ns":1764403200100000000}"#,
        r#"{"kind":"iteration","iteration":3,"start_ns":1764403200200000000,"end_ns":1764403200300000000}"#,
    ]);
    assert_eq!(
        problems(&report),
        [(2, Problem::Duplicate, "kind"), (5, Problem::Duplicate, "iteration")]
    );
    assert_eq!(t.meta.engine.as_deref(), Some("vllm"));
    assert_eq!(
        t.iterations.len(),
        2,
        "the same step number on another source is another step"
    );
}

#[test]
fn validation_reads_exactly_the_fields_of_each_kind() {
    // Readers may skip fields outside `fields_of_kind` (the Parquet reader does): check that validation reads
    // every listed field (an object in it is rejected) and no other (an object there is ignored).
    let t = "1764403200000000000";
    let bases = [
        ("meta", r#"{"kind":"meta""#.to_owned()),
        (
            "request",
            format!(r#"{{"kind":"request","request_id":"a","arrival_ns":{t}"#),
        ),
        (
            "iteration",
            format!(r#"{{"kind":"iteration","iteration":1,"start_ns":{t},"end_ns":{t}"#),
        ),
        (
            "stage",
            format!(r#"{{"kind":"stage","request_id":"a","stage":"queue","start_ns":{t},"end_ns":{t}"#),
        ),
        (
            "token",
            format!(r#"{{"kind":"token","request_id":"a","index":0,"emitted_ns":{t}"#),
        ),
    ];
    for (kind, base) in &bases {
        let listed = crate::format::schema::fields_of_kind(kind);
        for &(field, _) in crate::format::schema::SCALAR_FIELDS.iter().filter(|f| f.0 != "kind") {
            let line = if base.contains(&format!("\"{field}\":")) {
                let start = base.find(&format!("\"{field}\":")).unwrap_or(0);
                let rest = &base[start..];
                let end = rest.find(',').map_or(base.len(), |e| start + e);
                format!("{}\"{field}\":{{\"x\":1}}{}}}", &base[..start], &base[end..])
            } else {
                format!("{base},\"{field}\":{{\"x\":1}}}}")
            };
            let raw: RawRecord<'_> = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line}: {e}"));
            let mut b = TraceBuilder::default();
            ingest(&raw, Place::default(), &mut b);
            let rejected = b.report.rejected_count() == 1;
            assert_eq!(rejected, listed.contains(&field), "{kind}.{field}: {line}");
        }
    }
}
