//! The tests of `builder.rs`, figures worked out by hand.

use crate::test_support::trace_and_report;

const T0: i64 = 1_764_403_200_000_000_000;

fn ms(x: i64) -> i64 {
    T0 + x * 1_000_000
}

/// Records in the order a careless writer gives them: tokens before their requests and out of index order, a
/// step named by its number before it is read, a repeated token index, a token of no request.
fn jumbled() -> String {
    [
        format!(
            r#"{{"kind":"token","request_id":"b","index":1,"emitted_ns":{},"iteration":8}}"#,
            ms(30)
        ),
        format!(
            r#"{{"kind":"token","request_id":"b","index":0,"emitted_ns":{},"iteration":7}}"#,
            ms(20)
        ),
        format!(
            r#"{{"kind":"request","request_id":"b","source":"e","arrival_ns":{}}}"#,
            ms(5)
        ),
        format!(
            r#"{{"kind":"request","request_id":"a","source":"e","arrival_ns":{}}}"#,
            ms(5)
        ),
        format!(
            r#"{{"kind":"request","request_id":"c","source":"e","arrival_ns":{}}}"#,
            ms(1)
        ),
        format!(
            r#"{{"kind":"token","request_id":"a","index":0,"emitted_ns":{},"iteration":7}}"#,
            ms(21)
        ),
        format!(
            r#"{{"kind":"token","request_id":"a","index":0,"emitted_ns":{},"iteration":8}}"#,
            ms(31)
        ),
        format!(
            r#"{{"kind":"token","request_id":"nobody","index":0,"emitted_ns":{}}}"#,
            ms(40)
        ),
        format!(
            r#"{{"kind":"stage","request_id":"a","stage":"prefill","iteration":7,"start_ns":{},"end_ns":{}}}"#,
            ms(10),
            ms(20)
        ),
        format!(
            r#"{{"kind":"iteration","source":"e","iteration":8,"start_ns":{},"end_ns":{}}}"#,
            ms(20),
            ms(30)
        ),
        format!(
            r#"{{"kind":"iteration","source":"e","iteration":7,"start_ns":{},"end_ns":{}}}"#,
            ms(10),
            ms(20)
        ),
    ]
    .join("\n")
}

#[test]
fn records_in_any_order_make_the_same_rows_worked_out_by_hand() {
    let (t, report) = trace_and_report(&jumbled());
    // Requests by arrival, then id: c (1 ms), then a and b (both 5 ms) by id.
    let ids: Vec<&str> = (0..3).map(|r| t.request_id(r)).collect();
    assert_eq!(ids, ["c", "a", "b"]);
    // Steps by source, then start: 7 (10 ms) is row 0, 8 (20 ms) row 1.
    assert_eq!(t.iterations.iteration, [7, 8]);
    // Tokens by (request row, index): a's token 0 (the first of its two records), then b's 0 and 1; c has none.
    // The repeated index and the token of no request are rejected, one each.
    assert_eq!(t.tokens.request, [1, 2, 2]);
    assert_eq!(t.tokens.index, [0, 0, 1]);
    assert_eq!(t.tokens.emitted_ns, [ms(21), ms(20), ms(30)]);
    assert_eq!((t.tokens_of(0), t.tokens_of(1), t.tokens_of(2)), (0..0, 0..1, 1..3));
    // Each token's step row from its number on its request's source: 7 is row 0, 8 row 1.
    assert_eq!(t.tokens.iter_row, [0, 0, 1]);
    // The stage resolved to a's row and step 7's row.
    assert_eq!((t.stages.request[0], t.stages.iter_row[0]), (1, Some(0)));
    assert_eq!(report.rejected_count(), 2, "{:#?}", report.rejected);
    // Figures from the rows: b's TTFT 20 - 5 = 15 ms, its end 30 ms; a's TTFT 21 - 5 = 16 ms.
    assert_eq!(t.first_token_ns(2), Some(ms(20)));
    assert_eq!(t.finish_ns(2), Some(ms(30)));
    assert_eq!(t.first_token_ns(1), Some(ms(21)));
    assert_eq!(t.start_ns(), ms(1));
}

#[test]
fn a_window_keeps_the_requests_arriving_in_it_with_all_their_records() {
    let mut b = crate::trace::TraceBuilder {
        window: Some(crate::trace::window::Window {
            from_ns: Some(ms(3)),
            to_ns: Some(ms(6)),
            filters: Vec::new(),
        }),
        ..crate::trace::TraceBuilder::default()
    };
    let text = jumbled();
    if let Err(e) = crate::format::jsonl::read_from(
        text.as_bytes(),
        std::path::Path::new("t.jsonl"),
        0,
        &mut b,
        &crate::ingest::Progress::default(),
    ) {
        panic!("{e}");
    }
    let (t, report) = b.finish();
    // a and b arrive at 5 ms, in [3, 6) ms; c at 1 ms is left out. Their tokens stay, even those emitted after
    // the window; the steps starting in it (none: 10 and 20 ms) are left out, and the token of no request is
    // left out as outside, not rejected.
    let ids: Vec<&str> = (0..2).map(|r| t.request_id(r)).collect();
    assert_eq!(ids, ["a", "b"]);
    assert_eq!(t.tokens.index, [0, 0, 1]);
    assert!(t.iterations.is_empty());
    assert_eq!(
        report.rejected_count(),
        1,
        "the repeated index only: {:#?}",
        report.rejected
    );
}
