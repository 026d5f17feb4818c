//! `tokenscope diff A B`, run as a user runs it, on two traces written here whose figures are worked out by hand.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers may unwrap: a panic here is a failed test"
)]

use std::path::{Path, PathBuf};

use crate::common::{assert_json_close, tokenscope};
use serde_json::Value;

const T0: i64 = 1_764_403_200_000_000_000;

/// A request record: arrival, first token and finish in ms after T0; prompt and output tokens.
fn request(id: &str, at: i64, first: i64, done: i64, input: u32, output: u32, app: &str) -> String {
    format!(
        r#"{{"kind":"request","request_id":"{id}","app_id":"{app}","arrival_ns":{},"first_token_ns":{},"finished_ns":{},"input_tokens":{input},"output_tokens":{output},"finish_reason":"stop"}}"#,
        T0 + at * 1_000_000,
        T0 + first * 1_000_000,
        T0 + done * 1_000_000
    )
}

fn write(dir: &Path, name: &str, lines: &[String]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, lines.join("\n")).unwrap();
    p
}

/// Before: r1 TTFT 1,500 ms (misses the default 1,000 ms objective), TPOT (2,500 − 1,500) / 10 = 100 ms; r2 TTFT
/// 200 ms, TPOT (650 − 250) / 4 = 100 ms; r4 (A only). After: r1 TTFT 300 ms, TPOT (800 − 300) / 10 = 50 ms; r2
/// TTFT 50 ms, TPOT (250 − 100) / 4 = 37.5 ms; r3 (B only) TTFT 10 ms, TPOT 10 ms.
fn traces(dir: &Path) -> (PathBuf, PathBuf) {
    let a = write(
        dir,
        "before.jsonl",
        &[
            request("r1", 0, 1500, 2500, 500, 11, "chat"),
            request("r2", 50, 250, 650, 800, 5, "search"),
            request("r4", 100, 150, 250, 60, 3, "chat"),
        ],
    );
    let b = write(
        dir,
        "after.jsonl",
        &[
            request("r1", 0, 300, 800, 500, 11, "chat"),
            request("r2", 50, 100, 250, 800, 5, "search"),
            request("r3", 1000, 1010, 1020, 40, 2, "chat"),
        ],
    );
    (a, b)
}

fn figure<'a>(v: &'a Value, key: &str) -> &'a Value {
    v["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["key"] == key)
        .unwrap_or_else(|| panic!("no figure {key}"))
}

/// The figures of [`traces`]' diff, worked out by hand.
fn assert_hand_figures(v: &Value) {
    // TTFT: A [1500, 200, 50] -> p50 rank 2 of sorted [50, 200, 1500] = 200; B [300, 50, 10] -> sorted [10, 50, 300],
    // p50 = 50. Change −150 ms, −75 %.
    let p50 = figure(v, "ttft_p50_ms");
    assert_eq!((p50["a"].as_f64(), p50["b"].as_f64()), (Some(200.0), Some(50.0)));
    assert_eq!(p50["change"].as_f64(), Some(-150.0));
    assert_eq!(p50["relative"].as_f64(), Some(-0.75));
    assert_eq!(p50["verdict"], "better");
    // Mean TTFT: (1500 + 200 + 50) / 3 = 583.33 -> (300 + 50 + 10) / 3 = 120.
    let mean = figure(v, "ttft_mean_ms");
    assert!((mean["a"].as_f64().unwrap() - 1750.0 / 3.0).abs() < 1e-9);
    assert!((mean["b"].as_f64().unwrap() - 120.0).abs() < 1e-9);
    // Default objectives (TTFT 1 s, TPOT 50 ms): A meets none with TPOT 100 ms... r4's TPOT (250 − 150) / 2 = 50 ms
    // meets it: 1 of 3. B: r1 TPOT 50 (met), r2 37.5 (met), r3 10 (met): 3 of 3.
    let met = figure(v, "slo_attainment");
    assert!((met["a"].as_f64().unwrap() - 1.0 / 3.0).abs() < 1e-12, "{met}");
    assert_eq!(met["b"].as_f64(), Some(1.0));
    assert_eq!(met["verdict"], "better");
    assert_eq!(v["slo"]["defaults"], true);
    // Requests 3 -> 3, the same.
    assert_eq!(figure(v, "requests")["verdict"], "same");
    // The SLO-violation finding of A (r1's TTFT and the TPOTs) is gone in B.
    let gone = v["findings"]["only_a"].as_array().unwrap();
    assert!(gone.iter().any(|f| f["kind"] == "slo-violations"), "{gone:?}");
    assert!(v["findings"]["only_b"].as_array().unwrap().is_empty());
    // Paired by id: r1 and r2; r4 only in A, r3 only in B.
    let p = &v["pairing"];
    assert_eq!(p["by"], "request_id");
    assert_eq!(
        (p["pairs"].as_u64(), p["only_a"].as_u64(), p["only_b"].as_u64()),
        (Some(2), Some(1), Some(1))
    );
    // r1's TTFT fell 1,200 ms, r2's 150 ms: r1 first.
    let top = p["most_changed_ttft"].as_array().unwrap();
    assert_eq!(top[0]["request_a"], "r1");
    assert_eq!(top[0]["change_ms"].as_f64(), Some(-1200.0));
    assert_eq!(top[1]["change_ms"].as_f64(), Some(-150.0));
    assert_eq!(p["ttft"]["faster"], 2);
    assert_eq!(p["ttft"]["slower"], 0);
    // TPOT: r1 100 -> 50, r2 100 -> 37.5; the median change (nearest rank of [−62.5, −50]) is −62.5.
    assert_eq!(p["tpot"]["median_change_ms"].as_f64(), Some(-62.5));
}

/// Two Parquet traces are diffed streamed, neither loaded, by themselves: the same figures, findings and pairs as
/// worked out by hand, and as the diff of the traces loaded (`--in-memory`).
#[test]
fn a_diff_of_two_parquet_traces_streams_them_and_gives_what_the_load_gives() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = traces(dir.path());
    let parquet = |p: &Path| {
        let out = p.with_extension("parquet");
        let (code, _, err) = tokenscope(&["convert", p.to_str().unwrap(), "-o", out.to_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
        out
    };
    let (a, b) = (parquet(&a), parquet(&b));
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let (code, out, err) = tokenscope(&["diff", a, b, "--json", "--verbose"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("both traces were streamed, neither loaded"), "{err}");
    let streamed: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(streamed["computed_by"], "streamed");
    assert_hand_figures(&streamed);
    let (code, out, err) = tokenscope(&["diff", a, b, "--json", "--in-memory", "--verbose"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("both traces were loaded whole: --in-memory"), "{err}");
    let mut loaded: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(loaded["computed_by"], "loaded");
    loaded["computed_by"] = streamed["computed_by"].clone();
    assert_eq!(streamed, loaded);
    // --by needs the traces loaded, and says so.
    let (code, _, err) = tokenscope(&["diff", a, b, "--by", "app_id", "--verbose"]);
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("--by needs the traces loaded"), "{err}");
}

#[test]
fn diff_json_gives_each_figure_its_change_the_findings_gone_and_the_pairs() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = traces(dir.path());
    let (code, out, err) = tokenscope(&[
        "diff",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--json",
        "--by",
        "app_id",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["computed_by"], "loaded");
    assert_hand_figures(&v);
    // Per app: chat holds r1 and r4 in A, r1 and r3 in B; search r2 in both.
    let groups = v["groups"].as_array().unwrap();
    let keys: Vec<&str> = groups.iter().map(|g| g["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["chat", "search"]);
    let search_p50 = groups[1]["figures"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["key"] == "ttft_p50_ms")
        .unwrap();
    assert_eq!(search_p50["change"].as_f64(), Some(-150.0));
}

#[test]
fn diff_text_shows_the_figures_side_by_side_and_names_the_requests() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = traces(dir.path());
    let (code, out, err) = tokenscope(&[
        "diff",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--slo-ttft-ms",
        "1000",
    ]);
    assert_eq!(code, 0, "{err}");
    let line = out.lines().find(|l| l.starts_with("TTFT p50 ms")).unwrap();
    let cells: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(cells[3..], ["200.0", "50.0", "-150.0", "-75.0", "%", "better"]);
    assert!(out.contains("objectives: TTFT <= 1000 ms\n"), "{out}");
    assert!(
        out.contains("requests paired by request_id: 2 pairs, 1 only in A, 1 only in B"),
        "{out}"
    );
    assert!(out.contains("gone  WARNING  SLO violations [slo-violations]"), "{out}");
    let r1 = out.lines().find(|l| l.starts_with("r1 ")).unwrap();
    assert_eq!(
        r1.split_whitespace().collect::<Vec<_>>(),
        ["r1", "1500.0", "300.0", "-1200.0"]
    );
}

#[test]
fn diff_of_a_missing_trace_says_which_and_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let (a, _) = traces(dir.path());
    let missing = dir.path().join("nope.parquet");
    let (code, out, err) = tokenscope(&["diff", a.to_str().unwrap(), missing.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(out.is_empty());
    assert!(err.contains("nope.parquet"), "{err}");
}

/// The stall a prefill planted in A (chunked prefill off) and its copy in B (on), streamed: the findings name the
/// same requests and tokens (token rows found through the stream's index) as the diff of the traces loaded.
#[test]
fn a_streamed_diff_names_the_findings_tokens_as_the_loaded_diff_does() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("off.parquet"), dir.path().join("on.parquet"));
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    for (out, chunked) in [(a, "off"), (b, "on")] {
        let args = [
            "synth",
            "--scenario",
            "prefill-interrupts-decode",
            "--seed",
            "3",
            "--chunked-prefill",
            chunked,
        ];
        let (code, _, err) = tokenscope(&[&args[..], &["-o", out]].concat());
        assert_eq!(code, 0, "{err}");
    }
    let (code, out, err) = tokenscope(&["diff", a, b, "--json"]);
    assert_eq!(code, 0, "{err}");
    let streamed: Value = serde_json::from_str(&out).unwrap();
    let (code, out, err) = tokenscope(&["diff", a, b, "--json", "--in-memory"]);
    assert_eq!(code, 0, "{err}");
    let loaded: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (&streamed["computed_by"], &loaded["computed_by"]),
        (&"streamed".into(), &"loaded".into())
    );
    let both = streamed["findings"]["both"].as_array().unwrap();
    assert!(
        both.iter()
            .any(|f| f["a"]["kind"] == "decode-interrupted" && f["a"]["tokens"][0]["request"] == "chat-victim"),
        "{both:?}"
    );
    assert_eq!(streamed["findings"], loaded["findings"]);
    for key in ["pairing", "figures", "a", "b"] {
        assert_json_close(&streamed[key], &loaded[key], key);
    }
}
