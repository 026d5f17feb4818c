//! Timeline buckets on a hand-built trace, every figure worked out by hand, and the nearest-rank percentiles checked
//! against `summary`'s on a bigger trace.

use std::path::Path;

use tokenscope_core::analysis::summary::{GroupBy, Slo, summarize_all};
use tokenscope_core::ingest::Progress;
use tokenscope_core::load::{load, load_bytes};
use tokenscope_core::trace::Trace;
use tokenscope_query::{Cell, Rows, TimelineOptions, auto_every, timeline};

/// Three requests and three steps; times in seconds after the first arrival (t0 = 2025-11-29 08:00 UTC).
///
/// | request | app | arrival | tokens emitted | TTFT | E2E | TPOT |
/// |---|---|---|---|---|---|---|
/// | a1 | chat | 0.0 | 0.5, 0.85, 1.2 | 500 ms | 1200 ms | (1200 − 500) / 2 = 350 ms |
/// | a2 | chat | 0.4 | 0.6, 0.7 | 200 ms | 300 ms | 100 ms |
/// | a3 | code | 1.5 | 2.1, 2.3, 2.5, 2.7 | 600 ms | 1200 ms | 200 ms |
///
/// Steps start at 0.1 (2 waiting, KV 0.2, 0 preempted), 0.6 (0 waiting, KV 0.4, 1 preempted), 1.6 (1 waiting,
/// KV 0.1, 0 preempted).
const HAND: &str = r#"{"kind":"request","request_id":"a1","app_id":"chat","arrival_ns":1764403200000000000}
{"kind":"request","request_id":"a2","app_id":"chat","arrival_ns":1764403200400000000}
{"kind":"request","request_id":"a3","app_id":"code","arrival_ns":1764403201500000000}
{"kind":"token","request_id":"a1","index":0,"emitted_ns":1764403200500000000}
{"kind":"token","request_id":"a1","index":1,"emitted_ns":1764403200850000000}
{"kind":"token","request_id":"a1","index":2,"emitted_ns":1764403201200000000}
{"kind":"token","request_id":"a2","index":0,"emitted_ns":1764403200600000000}
{"kind":"token","request_id":"a2","index":1,"emitted_ns":1764403200700000000}
{"kind":"token","request_id":"a3","index":0,"emitted_ns":1764403202100000000}
{"kind":"token","request_id":"a3","index":1,"emitted_ns":1764403202300000000}
{"kind":"token","request_id":"a3","index":2,"emitted_ns":1764403202500000000}
{"kind":"token","request_id":"a3","index":3,"emitted_ns":1764403202700000000}
{"kind":"iteration","iteration":1,"start_ns":1764403200100000000,"end_ns":1764403200150000000,"num_waiting":2,"kv_usage":0.2,"num_preempted":0}
{"kind":"iteration","iteration":2,"start_ns":1764403200600000000,"end_ns":1764403200650000000,"num_waiting":0,"kv_usage":0.4,"num_preempted":1}
{"kind":"iteration","iteration":3,"start_ns":1764403201600000000,"end_ns":1764403201650000000,"num_waiting":1,"kv_usage":0.1,"num_preempted":0}
"#;

fn hand() -> Trace {
    match load_bytes("hand.jsonl", HAND.as_bytes()) {
        Ok(l) => {
            assert_eq!(l.report.rejected_count(), 0, "{:?}", l.report);
            l.trace
        }
        Err(e) => panic!("{e}"),
    }
}

/// TTFT within 550 ms and TPOT within 300 ms: a1 misses (TPOT 350), a3 misses (TTFT 600), a2 meets both.
const SLO: Slo = Slo {
    ttft_ms: Some(550.0),
    tpot_ms: Some(300.0),
};

fn rows(trace: &Trace, every_ns: i64, by: Option<GroupBy>) -> Rows {
    match timeline(trace, &TimelineOptions { every_ns, by, slo: SLO }) {
        Ok(df) => Rows::of(&df),
        Err(e) => panic!("{e}"),
    }
}

fn column(r: &Rows, name: &str) -> Vec<Option<f64>> {
    let c = r.column(name).unwrap_or_else(|| panic!("no {name} in {:?}", r.columns));
    r.rows.iter().map(|row| row[c].as_f64()).collect()
}

#[test]
fn one_second_buckets_of_the_whole_trace() {
    let r = rows(&hand(), 1_000_000_000, None);
    let mut expected = vec!["t_s"];
    expected.extend(tokenscope_query::timeline::SERIES);
    assert_eq!(r.columns, expected);
    // Buckets [0, 1), [1, 2), [2, 3): the last event is a3's last token at 2.7 s.
    assert_eq!(column(&r, "t_s"), [Some(0.0), Some(1.0), Some(2.0)]);
    // Arrivals: a1, a2 | a3 | none.
    assert_eq!(column(&r, "requests"), [Some(2.0), Some(1.0), Some(0.0)]);
    assert_eq!(column(&r, "request_rate"), [Some(2.0), Some(1.0), Some(0.0)]);
    // Tokens: 0.5, 0.85, 0.6, 0.7 | 1.2 | 2.1, 2.3, 2.5, 2.7.
    assert_eq!(column(&r, "output_tok_s"), [Some(4.0), Some(1.0), Some(4.0)]);
    // Goodput counts the tokens of requests that met both objectives when they are emitted: a2's two, at 0.6 and
    // 0.7; a1 and a3 each missed one.
    assert_eq!(column(&r, "goodput_tok_s"), [Some(2.0), Some(0.0), Some(0.0)]);
    // First tokens: a1 (500) and a2 (200) at 0.5 and 0.6 | none | a3 (600). Nearest rank of {200, 500}: p50 is rank
    // ceil(0.5 × 2) = 1, 200 ms; p95 and p99 rank 2, 500 ms.
    assert_eq!(column(&r, "ttft_p50_ms"), [Some(200.0), None, Some(600.0)]);
    assert_eq!(column(&r, "ttft_p99_ms"), [Some(500.0), None, Some(600.0)]);
    // Finishes: a2 (TPOT 100) | a1 (350) | a3 (200).
    assert_eq!(column(&r, "tpot_p50_ms"), [Some(100.0), Some(350.0), Some(200.0)]);
    // Steps: 0.1 and 0.6 (waiting 2 and 0, KV 0.2 and 0.4, 1 preempted) | 1.6 | none.
    assert_eq!(column(&r, "queue_len"), [Some(1.0), Some(1.0), None]);
    let kv = column(&r, "kv_usage");
    assert!(
        (kv[0].unwrap_or(0.0) - 0.3).abs() < 1e-12 && kv[1] == Some(0.1) && kv[2].is_none(),
        "{kv:?}"
    );
    assert_eq!(column(&r, "preemptions"), [Some(1.0), Some(0.0), None]);
}

#[test]
fn by_app_each_label_has_every_bucket_and_no_step_series() {
    let r = rows(&hand(), 1_000_000_000, Some(GroupBy::AppId));
    assert_eq!(&r.columns[..2], ["t_s", "app_id"]);
    let apps: Vec<Cell> = r.rows.iter().map(|row| row[1].clone()).collect();
    let chat = Cell::Text("chat".into());
    let code = Cell::Text("code".into());
    assert_eq!(
        apps,
        [chat.clone(), chat.clone(), chat, code.clone(), code.clone(), code]
    );
    assert_eq!(
        column(&r, "requests"),
        [Some(2.0), Some(0.0), Some(0.0), Some(0.0), Some(1.0), Some(0.0)]
    );
    assert_eq!(
        column(&r, "output_tok_s"),
        [Some(4.0), Some(1.0), Some(0.0), Some(0.0), Some(0.0), Some(4.0)]
    );
    assert_eq!(
        column(&r, "tpot_p99_ms"),
        [Some(100.0), Some(350.0), None, None, None, Some(200.0)]
    );
    // Steps have no app: their series are empty, not the engine's figures repeated under each app.
    assert!(column(&r, "queue_len").iter().all(Option::is_none));
}

#[test]
fn half_second_buckets_split_the_rates() {
    // Buckets of 0.5 s: [0, 0.5) holds a1 and a2's arrivals, so 2 requests in half a second, 4 per second.
    let r = rows(&hand(), 500_000_000, None);
    assert_eq!(column(&r, "t_s").len(), 6);
    assert_eq!(column(&r, "request_rate")[0], Some(4.0));
    // [0.5, 1.0) holds the tokens at 0.5, 0.6, 0.7 and 0.85: 8 per second.
    assert_eq!(column(&r, "output_tok_s")[1], Some(8.0));
}

#[test]
fn a_bucket_of_the_whole_trace_has_summarys_percentiles() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../sample_traces/demo.parquet");
    let trace = match load(&path, &Progress::default()) {
        Ok(l) => l.trace,
        Err(e) => panic!("{e}"),
    };
    let s = summarize_all(&trace, Slo::default(), None);
    assert!(s.ttft_ms.count > 100, "a trace big enough for the ranks to matter");
    let r = rows(&trace, 1_000_000_000_000_000, None);
    assert_eq!(r.rows.len(), 1);
    assert_eq!(column(&r, "ttft_p50_ms")[0], s.ttft_ms.p50);
    assert_eq!(column(&r, "ttft_p95_ms")[0], s.ttft_ms.p95);
    assert_eq!(column(&r, "ttft_p99_ms")[0], s.ttft_ms.p99);
    assert_eq!(column(&r, "tpot_p50_ms")[0], s.tpot_ms.p50);
    assert_eq!(column(&r, "tpot_p99_ms")[0], s.tpot_ms.p99);
    // Goodput is the part of throughput whose requests met the objectives, bucket by bucket.
    let r = rows(&trace, 5_000_000_000, None);
    let output = column(&r, "output_tok_s");
    let good = column(&r, "goodput_tok_s");
    assert!(output.iter().zip(&good).all(|(o, g)| g <= o), "{output:?} {good:?}");
    assert!(good.iter().any(|g| g.is_some_and(|g| g > 0.0)));
}

#[test]
fn automatic_buckets_are_round() {
    // 10 minutes in at most 100 buckets: 6 s wanted, 10 s given; 3 s in 100: 30 ms wanted, 100 ms given.
    assert_eq!(auto_every(600_000_000_000, 100), 10_000_000_000);
    assert_eq!(auto_every(3_000_000_000, 100), 100_000_000);
    // A day in 10 buckets: 2.4 h wanted, 3 h given.
    assert_eq!(auto_every(86_400_000_000_000, 10), 3 * 3_600_000_000_000);
}

#[test]
fn a_width_of_zero_is_refused() {
    let e = timeline(
        &hand(),
        &TimelineOptions {
            every_ns: 0,
            by: None,
            slo: SLO,
        },
    );
    assert!(
        matches!(e, Err(ref e) if e.to_string().contains("must be positive")),
        "{e:?}"
    );
}

/// The same rows: labels and counts exactly, every figure to 1e-12 (a mean over steps may sum in another order).
fn assert_same_rows(a: &Rows, b: &Rows, what: &str) {
    assert_eq!(a.columns, b.columns, "{what}");
    assert_eq!(a.rows.len(), b.rows.len(), "{what}");
    for (x, y) in a.rows.iter().zip(&b.rows) {
        for ((cx, cy), name) in x.iter().zip(y).zip(&a.columns) {
            match (cx.as_f64(), cy.as_f64()) {
                (Some(p), Some(q)) => assert!((p - q).abs() <= 1e-12 * p.abs().max(1.0), "{what} {name}: {x:?} {y:?}"),
                _ => assert_eq!(cx, cy, "{what} {name}"),
            }
        }
    }
}

#[test]
fn out_of_core_the_timeline_of_the_files_is_the_loaded_traces() {
    use tokenscope_core::format::partition::{PartitionKey, write_partitioned};
    use tokenscope_core::format::write;
    use tokenscope_core::load::parquet_files;
    use tokenscope_query::dataset::timeline_files;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // The hand-built trace as one Parquet file, in half seconds, whole and by app.
    let trace = hand();
    let file = dir.path().join("hand.parquet");
    write(&trace, &file).unwrap_or_else(|e| panic!("{e}"));
    for by in [None, Some(GroupBy::AppId), Some(GroupBy::Source)] {
        let options = TimelineOptions {
            every_ns: 500_000_000,
            by,
            slo: SLO,
        };
        let (df, every) =
            timeline_files(std::slice::from_ref(&file), None, &options, None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(every, 500_000_000);
        assert_same_rows(
            &Rows::of(&df),
            &rows(&trace, 500_000_000, by),
            &format!("hand by {by:?}"),
        );
    }
    // The same cut into row groups of 1, 3 and 7 rows: a request's tokens across row groups, the same rows.
    for size in [1, 3, 7] {
        let cut = dir.path().join(format!("hand-{size}.parquet"));
        tokenscope_core::format::parquet::write_with_row_groups(&trace, &cut, size).unwrap_or_else(|e| panic!("{e}"));
        let options = TimelineOptions {
            every_ns: 500_000_000,
            by: Some(GroupBy::Source),
            slo: SLO,
        };
        let (df, _) = timeline_files(&[cut], None, &options, None).unwrap_or_else(|e| panic!("{e}"));
        assert_same_rows(
            &Rows::of(&df),
            &rows(&trace, 500_000_000, Some(GroupBy::Source)),
            &format!("hand in row groups of {size}"),
        );
    }
    // The demo cut by hour and source into two files: its 100 s in buckets of the width the CLI picks (at most 60).
    let demo = match load(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../sample_traces/demo.parquet"),
        &Progress::default(),
    ) {
        Ok(l) => l.trace,
        Err(e) => panic!("{e}"),
    };
    let out = dir.path().join("demo");
    write_partitioned(&demo, &out, &[PartitionKey::Hour, PartitionKey::Source], None).unwrap_or_else(|e| panic!("{e}"));
    let files = parquet_files(&out).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(files.len(), 2);
    let end = (0..u32::try_from(demo.request_count()).unwrap_or(0))
        .filter_map(|r| demo.finish_ns(r))
        .max()
        .unwrap_or(0);
    let every_ns = auto_every(end - demo.start_ns(), 60);
    assert_eq!(every_ns, 2_000_000_000, "100-odd seconds in at most 60 buckets: 2 s");
    for by in [None, Some(GroupBy::Source), Some(GroupBy::Model)] {
        let options = TimelineOptions {
            every_ns: 1,
            by,
            slo: Slo::DEFAULT,
        };
        let (df, every) = timeline_files(&files, None, &options, Some(60)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(every, every_ns);
        let memory = timeline(&demo, &TimelineOptions { every_ns, ..options }).unwrap_or_else(|e| panic!("{e}"));
        let (a, b) = (Rows::of(&df), Rows::of(&memory));
        assert!(b.rows.len() >= 50, "{}", b.rows.len());
        assert_same_rows(&a, &b, &format!("demo by {by:?}"));
    }
}

#[test]
fn too_narrow_a_width_for_the_span_is_refused_not_allocated() {
    // The hand-built trace spans 2.7 s: in 1 ns buckets that would be 2.7 billion rows.
    let err = timeline(
        &hand(),
        &TimelineOptions {
            every_ns: 1,
            by: None,
            slo: SLO,
        },
    )
    .map(|_| ())
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("2700000001 buckets of 1 ns") && err.contains("spans 2.7 s") && err.contains("--every"),
        "{err}"
    );
}

#[test]
fn draft_acceptance_per_bucket_is_accepted_over_drafted_of_its_steps() {
    // Four speculative steps, two a second: 8 drafts with 6 accepted and 8 with 2 in the first second (8 of 16:
    // 0.5), 8 with 8 accepted and no draft in the second (8 of 8: 1.0); a third second with a step that verified
    // nothing says nothing (null, not zero).
    let step = |n: i64, at_ms: i64, extra: &str| {
        format!(
            r#"{{"kind":"iteration","iteration":{n},"start_ns":{},"end_ns":{}{extra}}}"#,
            1_764_403_200_000_000_000 + at_ms * 1_000_000,
            1_764_403_200_000_000_000 + (at_ms + 10) * 1_000_000
        )
    };
    let lines = [
        step(1, 100, r#","spec_drafted_tokens":8,"spec_accepted_tokens":6"#),
        step(2, 600, r#","spec_drafted_tokens":8,"spec_accepted_tokens":2"#),
        step(3, 1_100, r#","spec_drafted_tokens":8,"spec_accepted_tokens":8"#),
        step(4, 1_600, r#","spec_drafted_tokens":0,"spec_accepted_tokens":0"#),
        step(5, 2_100, ""),
    ];
    let text: &'static str = Box::leak(lines.join("\n").into_boxed_str());
    let trace = load_bytes("spec.jsonl", text.as_bytes())
        .unwrap_or_else(|e| panic!("{e}"))
        .trace;
    let r = rows(&trace, 1_000_000_000, None);
    assert_eq!(column(&r, "accept_rate"), [Some(0.5), Some(1.0), None]);
}

#[test]
fn tokens_per_verify_step_and_acceptance_by_draft_position_per_bucket() {
    // One request's verify steps read from its tokens (each step's first token names its drafts; accepted drafts
    // then the bonus). First second: step A proposed 3 and accepted 2 (3 tokens), step B proposed 3 and accepted 0
    // (1 token). Second second: step C proposed 2 and accepted 2 (3 tokens).
    // Tokens per verify step: (3 + 1) / 2 = 2.0, then 3.0. Draft 1: A of A, B (0.5), then C (1.0); draft 2: A of
    // A, B (0.5), then C (1.0); draft 3: neither A nor B (0.0), then none proposed (null).
    let t0 = 1_764_403_200_000_000_000_i64;
    let token = |i: u32, at_ms: i64, spec: &str, drafted: Option<u32>| {
        let drafted = drafted.map_or_else(String::new, |d| format!(r#","spec_drafted_tokens":{d}"#));
        format!(
            r#"{{"kind":"token","request_id":"r","index":{i},"emitted_ns":{},"spec":"{spec}"{drafted}}}"#,
            t0 + at_ms * 1_000_000
        )
    };
    let lines = [
        format!(r#"{{"kind":"request","request_id":"r","arrival_ns":{t0}}}"#),
        token(0, 100, "plain", None),
        token(1, 200, "draft", Some(3)),
        token(2, 200, "draft", None),
        token(3, 200, "bonus", None),
        token(4, 600, "bonus", Some(3)),
        token(5, 1_300, "draft", Some(2)),
        token(6, 1_300, "draft", None),
        token(7, 1_300, "bonus", None),
    ];
    let text: &'static str = Box::leak(lines.join("\n").into_boxed_str());
    let trace = load_bytes("verify.jsonl", text.as_bytes())
        .unwrap_or_else(|e| panic!("{e}"))
        .trace;
    let r = rows(&trace, 1_000_000_000, None);
    assert_eq!(column(&r, "accept_length"), [Some(2.0), Some(3.0)]);
    assert_eq!(column(&r, "accept_pos_1"), [Some(0.5), Some(1.0)]);
    assert_eq!(column(&r, "accept_pos_2"), [Some(0.5), Some(1.0)]);
    assert_eq!(column(&r, "accept_pos_3"), [Some(0.0), None]);
    assert!(r.column("accept_pos_4").is_none(), "no step proposed a fourth draft");
}
