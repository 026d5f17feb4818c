//! `tokenscope fit`, `synth --profile FILE` and `diff --fidelity` on the committed llama.cpp runs of
//! `tests/data/fidelity/` (docs/FIDELITY.md says how they were recorded).

use serde_json::Value;

use crate::common::tokenscope;

const DATA: &str = "tests/data/fidelity";

fn run(name: &str) -> String {
    format!("{DATA}/{name}.parquet")
}

/// The median time to first token of a run's requests, in ms: the nearest rank (the ceil(n / 2)-th smallest).
fn ttft_p50_ms(path: &str) -> f64 {
    let t = tokenscope::load::load(std::path::Path::new(path), &tokenscope::ingest::Progress::default())
        .unwrap()
        .trace;
    let mut ttft: Vec<i64> = (0..t.request_count())
        .filter_map(|r| t.first_token_ns(r as u32).map(|f| f - t.requests.arrival_ns[r]))
        .collect();
    ttft.sort_unstable();
    assert!(!ttft.is_empty(), "{path}: no request with a first token");
    ttft[ttft.len().div_ceil(2) - 1] as f64 / 1e6
}

/// The held-out figures judged: each may reach the |error| in % the committed profile measured (its validation,
/// docs/FIDELITY.md's tables) plus 3 points. If the simulator or the fit changes and an error grows past it, this
/// fails.
const JUDGED: &[(&str, &str, u32)] = &[
    ("low-a.parquet", "TTFT", 50),
    ("low-a.parquet", "TTFT", 95),
    ("low-a.parquet", "ITL", 50),
    ("low-a.parquet", "ITL", 95),
    ("low-b.parquet", "TTFT", 50),
    ("low-b.parquet", "TTFT", 95),
    ("low-b.parquet", "ITL", 50),
    ("low-b.parquet", "ITL", 95),
    ("mid-b.parquet", "TTFT", 50),
    ("mid-b.parquet", "TTFT", 95),
    ("mid-b.parquet", "ITL", 50),
    ("mid-b.parquet", "ITL", 95),
    ("high-a.parquet", "TTFT", 50),
    ("high-a.parquet", "TTFT", 95),
    ("high-a.parquet", "ITL", 50),
    ("high-a.parquet", "ITL", 95),
    ("high-b.parquet", "TTFT", 50),
    ("high-b.parquet", "TTFT", 95),
    ("high-b.parquet", "ITL", 50),
    ("high-b.parquet", "ITL", 95),
];

fn error_of(profile: &Value, trace: &str, figure: &str, p: u32) -> f64 {
    let v = profile["validation"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["trace"] == trace)
        .unwrap_or_else(|| panic!("no validation on {trace}"));
    let row = v["fidelity"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["figure"] == figure && r["percentile"] == p)
        .unwrap();
    row["error_pct"].as_f64().unwrap()
}

#[test]
fn the_fit_on_one_run_predicts_the_held_out_runs_within_the_pinned_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("profile.json");
    let mut args = vec!["fit".to_owned(), run("mid-a")];
    for held in ["low-a", "low-b", "mid-b", "high-a", "high-b"] {
        args.extend(["--validate".to_owned(), run(held)]);
    }
    args.extend(["--name", "llamacpp-gemma3-270m-2cpu", "-o", out.to_str().unwrap()].map(str::to_owned));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, stdout, stderr) = tokenscope(&args);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("held out high-a.parquet: "), "{stdout}");
    let profile: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let committed: Value =
        serde_json::from_str(&std::fs::read_to_string(format!("{DATA}/profile.json")).unwrap()).unwrap();
    for &(trace, figure, p) in JUDGED {
        let (e, measured) = (
            error_of(&profile, trace, figure, p),
            error_of(&committed, trace, figure, p).abs(),
        );
        assert!(
            e.abs() <= measured + 3.0,
            "{trace} {figure} p{p}: {e:+.1} % (committed {measured:.1} + 3)"
        );
    }
    // What the fit reads off the server: 4 slots, prompts cut at 512 with their decodes (515), a 4-token tail,
    // llama.cpp's CPU kernels switching at 4 tokens, and each prefill chunk a pass of its own.
    let s = &profile["scheduler"];
    assert_eq!(
        (s["max_num_seqs"].as_u64(), s["max_num_batched_tokens"].as_u64()),
        (Some(4), Some(515))
    );
    assert_eq!(s["prefill_tail"].as_u64(), Some(4));
    assert_eq!(
        (profile["batch_knot"].as_u64(), profile["split_passes"].as_bool()),
        (Some(4), Some(true))
    );
    // docs/FIDELITY.md's figures come from the committed profile: it must be what the fit writes today
    // (scripts/fidelity/report.sh regenerates both).
    for (a, b) in profile["coefficients"]
        .as_array()
        .unwrap()
        .iter()
        .zip(committed["coefficients"].as_array().unwrap())
    {
        let (x, y) = (a["value"].as_f64().unwrap(), b["value"].as_f64().unwrap());
        assert!(
            (x - y).abs() <= 1e-9 * y.abs().max(1e-12),
            "{a} vs committed {b}: run scripts/fidelity/report.sh"
        );
    }
    for &(trace, figure, p) in JUDGED {
        let (now, then) = (
            error_of(&profile, trace, figure, p),
            error_of(&committed, trace, figure, p),
        );
        assert!(
            (now - then).abs() < 0.05,
            "{trace} {figure} p{p}: {now} vs committed {then}: run scripts/fidelity/report.sh"
        );
    }
}

#[test]
fn fit_on_an_engine_trace_finds_the_constants_it_was_made_with() {
    // The SGLang sample is the simulator's run on its h100-8b profile written as SGLang's OTLP spans, which link
    // each token to its step. The profile's constants (crates/synth/src/cost.rs): 10 ms per step, 0.065 ms per
    // prompt token, 0.06 ms per decode, 4e-5 ms per context token, 9.5e-7 ms per attention pair, 3 % noise. Each
    // must fall inside the interval the fit gives it.
    let (code, stdout, stderr) = tokenscope(&[
        "fit",
        "sample_traces/engines/sglang/prefill_interrupts_decode.otlp.jsonl.gz",
        "--report",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("work read from the tokens and prefill chunks linked to each step"),
        "{stdout}"
    );
    for (term, truth) in [
        ("base_ms", 10.0),
        ("prefill_token_ms", 0.065),
        ("decode_seq_ms", 0.06),
        ("context_token_ms", 4e-5),
        ("attention_pair_ms", 9.5e-7),
    ] {
        let line = stdout.lines().find(|l| l.starts_with(term)).unwrap();
        let words: Vec<&str> = line.split_whitespace().collect();
        let (lo, hi): (f64, f64) = (words[2].parse().unwrap(), words[4].parse().unwrap());
        assert!(
            lo <= truth && truth <= hi,
            "{term}: {truth} outside {lo} .. {hi}\n{stdout}"
        );
    }
    assert!(
        stdout.contains("large_batch_ms                -            not in the data"),
        "{stdout}"
    );
    let noise = stdout.lines().find(|l| l.starts_with("noise")).unwrap();
    let noise: f64 = noise.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!((noise - 0.03).abs() < 0.005, "{noise}");
}

#[test]
fn fit_refuses_a_recording_without_steps_and_too_few_steps_with_the_reason() {
    let (code, _, stderr) = tokenscope(&["fit", "sample_traces/llamacpp_gemma3_270m.parquet"]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("llamacpp_gemma3_270m.parquet: no engine steps to fit on"),
        "{stderr}"
    );
    assert!(stderr.contains("tokenscope record --server-log"), "{stderr}");
    // Ten steps of an engine trace (counts only): five terms could be fitted, 30 steps are needed.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ten.jsonl");
    let mut text = String::from("{\"kind\":\"meta\",\"format\":\"tokenscope\",\"version\":1}\n");
    for i in 0..10i64 {
        let start = 1_764_403_200_000_000_000 + i * 100_000_000;
        text.push_str(&format!(
            "{{\"kind\":\"iteration\",\"source\":\"e\",\"iteration\":{i},\"start_ns\":{start},\"end_ns\":{},\
             \"num_prefill_tokens\":{},\"num_prefill_reqs\":1,\"num_decode_reqs\":{}}}\n",
            start + 20_000_000 + i * 1_000_000,
            16 * (i + 1),
            i % 3
        ));
    }
    std::fs::write(&path, text).unwrap();
    let (code, _, stderr) = tokenscope(&["fit", path.to_str().unwrap()]);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("cannot fit: 10 steps with known work; a fit of"),
        "{stderr}"
    );
    assert!(stderr.contains("needs at least"), "{stderr}");
}

#[test]
fn a_replay_says_which_profile_it_ran_on_and_its_measured_error() {
    let dir = tempfile::tempdir().unwrap();
    let sim = dir.path().join("sim.parquet");
    let profile = format!("{DATA}/profile.json");
    let (code, stdout, stderr) = tokenscope(&[
        "synth",
        "--scenario",
        "replay",
        "--from-trace",
        &run("high-b"),
        "--profile",
        &profile,
        "-o",
        sim.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stdout.contains("overrides: profile=llamacpp-gemma3-270m-2cpu"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "note: profile llamacpp-gemma3-270m-2cpu measured against 5 held-out run(s) (low-a.parquet, \
             low-b.parquet, mid-b.parquet, high-a.parquet, high-b.parquet): TTFT p50/p95 within"
        ),
        "{stdout}"
    );
    // The trace written says it too, in its meta record's note, and `summary` shows it.
    let (code, stdout, _) = tokenscope(&["summary", sim.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(
        stdout.contains(
            "note              a replay of a trace by tokenscope's simulator: profile llamacpp-gemma3-270m-2cpu \
             measured against 5 held-out run(s)"
        ),
        "{stdout}"
    );
    // The replay of a named profile says its error is unknown.
    let (code, stdout, _) = tokenscope(&[
        "synth",
        "--scenario",
        "replay",
        "--from-trace",
        &run("low-a"),
        "--set",
        "profile=cpu-270m",
        "-o",
        sim.to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    assert!(
        stdout.contains("profile cpu-270m is a roofline model that was never validated"),
        "{stdout}"
    );
    // A file that is not a profile is refused, naming the file and what is wrong.
    let (code, _, stderr) = tokenscope(&[
        "synth",
        "--scenario",
        "replay",
        "--from-trace",
        &run("low-a"),
        "--profile",
        &run("low-a"),
        "-o",
        "x.parquet",
    ]);
    assert_eq!(code, 2);
    assert!(stderr.contains("low-a.parquet: not a tokenscope profile"), "{stderr}");
    let (code, _, stderr) = tokenscope(&[
        "synth",
        "--scenario",
        "steady",
        "--profile",
        "no-such.json",
        "-o",
        "x.parquet",
    ]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("\"no-such.json\" is neither a profile name"),
        "{stderr}"
    );
}

#[test]
fn diff_fidelity_gives_each_figure_its_signed_error_and_verdict() {
    let (code, stdout, stderr) = tokenscope(&["diff", &run("high-a"), &run("high-b"), "--fidelity"]);
    assert_eq!(code, 0, "{stderr}");
    // TTFT p50 of each run worked out here from its requests (first token less arrival, the nearest rank
    // ceil(n / 2) of the sorted values), its signed error (B - A) / A, OFF beyond the 10 % tolerance.
    let (a, b) = (ttft_p50_ms(&run("high-a")), ttft_p50_ms(&run("high-b")));
    let pct = (b - a) / a * 100.0;
    assert!(pct.abs() > 10.0, "the two runs' loads differ: {pct}");
    assert!(
        stdout.contains(&format!(
            "TTFT     p50 {a:>10.1} {b:>10.1} {:>9}  OFF",
            format!("{pct:+.1} %")
        )),
        "{stdout}"
    );
    let (code, stdout, _) = tokenscope(&["diff", &run("high-a"), &run("high-b"), "--fidelity", "--json"]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["rows"].as_array().unwrap().len(), 20);
    assert_eq!(v["tolerance"]["pct"], 10.0);
    // The CDFs of both runs as a PNG: 1,400 x 232 points at 2 pixels per point.
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("cdf.png");
    let (code, stdout, stderr) = tokenscope(&[
        "diff",
        &run("high-a"),
        &run("high-b"),
        "--fidelity",
        "--png",
        png.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("(the CDFs of TTFT, ITL, TPOT and E2E, A and B)"),
        "{stdout}"
    );
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[1..4], b"PNG");
    let dim = |at: usize| u32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    assert_eq!((dim(16), dim(20)), (2800, 464));
    // --png without --fidelity is refused by the command line.
    let (code, _, stderr) = tokenscope(&["diff", &run("high-a"), &run("high-b"), "--png", "x.png"]);
    assert_eq!(code, 2);
    assert!(stderr.contains("--fidelity"), "{stderr}");
}
