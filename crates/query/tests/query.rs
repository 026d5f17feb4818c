//! SQL over the four-request sample, every expected figure worked out by hand from `sample_traces/four_requests.jsonl`
//! (times below are ms after r1's arrival):
//!
//! | request | app | model | arrival | scheduled | first token | finished | input | output |
//! |---|---|---|---|---|---|---|---|---|
//! | r1 | chat | qwen2.5-7b | 0 | 10 | 150 | 250 | 812 | 3 |
//! | r2 | search | qwen2.5-7b | 100 | 130 | 300 | 300 | 100 | 1 |
//! | r3 | chat | qwen2.5-7b | 200 | 400 | 700 | 1000 | 2000 | 4 |
//! | r4 | chat | llama-3-8b | 300 | 310 | 360 | 600 | 50 | 5 |

use std::path::Path;

use tokenscope_core::ingest::Progress;
use tokenscope_core::load::load;
use tokenscope_core::trace::Trace;
use tokenscope_query::{Cell, Rows, Table, run};

fn four() -> Trace {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../sample_traces/four_requests.jsonl");
    match load(&path, &Progress::default()) {
        Ok(l) => l.trace,
        Err(e) => panic!("{}: {e}", path.display()),
    }
}

fn query(trace: &Trace, sql: &str) -> Rows {
    match run(trace, sql) {
        Ok(df) => Rows::of(&df),
        Err(e) => panic!("{sql}: {e}"),
    }
}

fn text(s: &str) -> Cell {
    Cell::Text(s.to_owned())
}

fn f(x: f64) -> Cell {
    Cell::Float(x)
}

fn float_at(rows: &Rows, row: usize, col: &str) -> f64 {
    let c = rows
        .column(col)
        .unwrap_or_else(|| panic!("no column {col} in {:?}", rows.columns));
    match rows.rows[row][c].as_f64() {
        Some(v) => v,
        None => panic!("{col} of row {row} is {:?}", rows.rows[row][c]),
    }
}

#[test]
fn the_derived_figures_of_each_request() {
    let r = query(
        &four(),
        "SELECT request_id, queue_ms, ttft_ms, tpot_ms, e2e_ms, output_tokens FROM requests ORDER BY request_id",
    );
    assert_eq!(
        r.columns,
        [
            "request_id",
            "queue_ms",
            "ttft_ms",
            "tpot_ms",
            "e2e_ms",
            "output_tokens"
        ]
    );
    // TPOT = (E2E − TTFT) / (output − 1): r1 (250 − 150) / 2 = 50, r3 (800 − 500) / 3 = 100, r4 (300 − 60) / 4 = 60;
    // r2 has one output token, so none.
    assert_eq!(
        r.rows,
        vec![
            vec![text("r1"), f(10.0), f(150.0), f(50.0), f(250.0), Cell::UInt(3)],
            vec![text("r2"), f(30.0), f(200.0), Cell::Null, f(200.0), Cell::UInt(1)],
            vec![text("r3"), f(200.0), f(500.0), f(100.0), f(800.0), Cell::UInt(4)],
            vec![text("r4"), f(10.0), f(60.0), f(60.0), f(300.0), Cell::UInt(5)],
        ]
    );
}

#[test]
fn a_group_by_over_requests() {
    let r = query(
        &four(),
        "SELECT app_id, count(*) AS n, avg(ttft_ms) AS ttft, sum(output_tokens) AS out \
         FROM requests GROUP BY app_id ORDER BY app_id",
    );
    // chat: r1, r3, r4: TTFT (150 + 500 + 60) / 3 = 236.67, 3 + 4 + 5 = 12 tokens; search: r2 alone.
    assert_eq!(r.rows.len(), 2);
    assert_eq!(r.rows[0][0], text("chat"));
    assert_eq!(r.rows[0][1].as_f64(), Some(3.0));
    assert!((float_at(&r, 0, "ttft") - 710.0 / 3.0).abs() < 1e-9);
    assert_eq!(float_at(&r, 0, "out"), 12.0);
    assert_eq!(r.rows[1][0], text("search"));
    assert_eq!(float_at(&r, 1, "ttft"), 200.0);
}

#[test]
fn a_percentile_by_app_over_long_prompts_is_the_nearest_rank() {
    // Prompts over 500 tokens: r1 (812, chat) and r3 (2000, chat). Nearest-rank p99 of {150, 500}: rank
    // ceil(0.99 × 2) = 2, so 500; the median QUANTILE_DISC(., 0.5) is rank 1, 150. No search request qualifies.
    let r = query(
        &four(),
        "SELECT app_id, QUANTILE_DISC(ttft_ms, 0.99) AS p99, QUANTILE_DISC(ttft_ms, 0.5) AS p50 \
         FROM requests WHERE input_tokens > 500 GROUP BY app_id",
    );
    assert_eq!(r.rows, vec![vec![text("chat"), f(500.0), f(150.0)]]);
}

#[test]
fn the_last_stretch_of_a_trace_by_relative_time() {
    // Arrivals at 0, 0.1, 0.2 and 0.3 s: "the last 0.15 s" before the last arrival keeps r3 and r4.
    let r = query(
        &four(),
        "WITH last AS (SELECT max(arrival_s) AS t FROM requests) \
         SELECT request_id FROM requests CROSS JOIN last WHERE arrival_s >= t - 0.15 ORDER BY arrival_s",
    );
    assert_eq!(r.rows, vec![vec![text("r3")], vec![text("r4")]]);
}

#[test]
fn inter_token_latencies_skip_the_first_token_and_gaps() {
    // r1: 150, 200, 250 → 50, 50. r3: 700, 800, 900, 1000 → 100 × 3. r4: indices 0, 1, 2, 4 at 360, 420, 480,
    // 600 → 60, 60 and none across the gap. r2: one token, none.
    let r = query(
        &four(),
        "SELECT request_id, count(*) AS tokens, count(itl_ms) AS itls, sum(itl_ms) AS total \
         FROM tokens GROUP BY request_id ORDER BY request_id",
    );
    let got: Vec<(f64, f64, Option<f64>)> = r
        .rows
        .iter()
        .map(|row| {
            (
                row[1].as_f64().unwrap_or(-1.0),
                row[2].as_f64().unwrap_or(-1.0),
                row[3].as_f64(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (3.0, 2.0, Some(100.0)),
            (1.0, 0.0, None),
            (4.0, 3.0, Some(300.0)),
            (4.0, 2.0, Some(120.0)),
        ]
    );
}

#[test]
fn tokens_join_requests() {
    // Tokens per model: llama-3-8b has r4's 4 records; qwen2.5-7b has r1 (3) + r2 (1) + r3 (4) = 8.
    let r = query(
        &four(),
        "SELECT r.model, count(*) AS n FROM tokens t JOIN requests r ON t.request_id = r.request_id \
         GROUP BY r.model ORDER BY r.model",
    );
    assert_eq!(r.rows.len(), 2);
    assert_eq!(
        (r.rows[0][0].clone(), r.rows[0][1].as_f64()),
        (text("llama-3-8b"), Some(4.0))
    );
    assert_eq!(
        (r.rows[1][0].clone(), r.rows[1][1].as_f64()),
        (text("qwen2.5-7b"), Some(8.0))
    );
}

#[test]
fn steps_stages_and_candidates() {
    let t = four();
    // Steps 7, 8, 9: 812 + 36 + 0 prompt tokens, 0 + 1 + 1 output tokens; 136 + 35 + 40 ms.
    let r = query(
        &t,
        "SELECT count(*) AS n, sum(num_prefill_tokens) AS p, sum(num_decode_tokens) AS d, sum(duration_ms) AS ms \
         FROM steps",
    );
    assert_eq!(float_at(&r, 0, "n"), 3.0);
    assert_eq!(float_at(&r, 0, "p"), 848.0);
    assert_eq!(float_at(&r, 0, "d"), 2.0);
    assert!((float_at(&r, 0, "ms") - 211.0).abs() < 1e-9);
    // r1's explicit prefill (12 → 148 ms, 812 tokens) is in the stages table as written.
    let r = query(
        &t,
        "SELECT stage, duration_ms, tokens, derived FROM stages WHERE request_id = 'r1' AND stage = 'prefill'",
    );
    assert_eq!(
        r.rows,
        vec![vec![text("prefill"), f(136.0), Cell::UInt(812), Cell::Bool(false)]]
    );
    // r1's third token: the chosen one (151645, -2.3) is the second candidate; the first is "," at -0.2.
    let r = query(
        &t,
        "SELECT position, token_id, logprob FROM candidates WHERE request_id = 'r1' AND index = 2 ORDER BY position",
    );
    assert_eq!(
        r.rows,
        vec![
            vec![Cell::UInt(1), Cell::UInt(11), f(-0.2)],
            vec![Cell::UInt(2), Cell::UInt(151_645), f(-2.3)],
        ]
    );
}

#[test]
fn select_star_gives_every_documented_column() {
    let t = four();
    for table in Table::ALL {
        let r = query(&t, &format!("SELECT * FROM {} LIMIT 1", table.name()));
        let names: Vec<&str> = table.columns().iter().map(|c| c.name).collect();
        assert_eq!(r.columns, names, "{}", table.name());
    }
}

#[test]
fn errors_name_the_column_the_table_or_the_syntax() {
    let t = four();
    let err = |sql: &str| match run(&t, sql) {
        Ok(df) => panic!("{sql} gave {df:?}"),
        Err(e) => e.to_string(),
    };
    let e = err("SELECT ttft FROM requests");
    assert!(e.contains("no column \"ttft\" in requests"), "{e}");
    assert!(e.contains("did you mean ttft_ms?"), "{e}");
    assert!(e.contains("requests has request_id, source"), "{e}");
    let e = err("SELECT * FROM request");
    assert!(e.contains("no table \"request\""), "{e}");
    assert!(
        e.contains("requests, tokens, steps, stages, transfers, candidates, samples"),
        "{e}"
    );
    let e = err("SELEC ttft_ms FROM requests");
    assert!(e.starts_with("in the query:"), "{e}");
}

#[test]
fn only_the_columns_a_query_names_are_built() {
    let t = four();
    let source = tokenscope_query::tables::Source::new(&t);
    let df = match source.frame(Table::Tokens, |name| name == "itl_ms") {
        Ok(df) => df,
        Err(e) => panic!("{e}"),
    };
    assert_eq!((df.width(), df.height()), (1, 12));
    // None named: the first column alone, so that count(*) still has its rows.
    let df = match source.frame(Table::Requests, |_| false) {
        Ok(df) => df,
        Err(e) => panic!("{e}"),
    };
    assert_eq!((df.width(), df.height()), (1, 4));
}
