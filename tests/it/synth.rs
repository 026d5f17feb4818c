//! The simulator's scenarios contain their incidents, measured from the written trace with the model's own
//! metrics (not from simulator internals); replays keep the real trace's lengths and gaps; same seed, same bytes.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers may unwrap: a panic here is a failed test"
)]

use std::path::Path;

use tokenscope::analysis::metrics::{itl_ns, request_metrics};
use tokenscope::format::write;
use tokenscope::ingest::Progress;
use tokenscope::load::load;
use tokenscope::synth::arrivals::ReplayOptions;
use tokenscope::synth::scenarios::{
    BIG_PREFILL_ID, LONG_ID, LONG_INPUT, MISTRIGGER_AT, MISTRIGGER_ID, SHORT_ID, T0_NS, VICTIM_ID,
};
use tokenscope::synth::{Scenario, SynthOptions, generate};
use tokenscope::trace::{StageKind, Trace};

fn options(scenario: Scenario) -> SynthOptions {
    SynthOptions {
        scenario,
        seed: 1,
        requests: None,
        arrivals: None,
        replay: ReplayOptions::default(),
        sources: 1,
        prefix_cache_tokens: None,
        profile: tokenscope::synth::ProfileChoice::default(),
        chunked_prefill: None,
        plant: None,
    }
}

/// Generates a scenario, writes it as JSONL, and loads it back: what a user would open.
fn written(scenario: Scenario) -> Trace {
    let trace = generate(&options(scenario)).unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let path = dir.path().join("t.jsonl");
    write(&trace, &path).unwrap_or_else(|e| panic!("{e}"));
    let loaded = load(&path, &Progress::default()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        loaded.report.rejected_count(),
        0,
        "{:?}",
        loaded.report.rejected.first()
    );
    assert_eq!(loaded.report.warning_count(), 0, "{:?}", loaded.report.warnings.first());
    loaded.trace
}

fn row(t: &Trace, id: &str) -> u32 {
    t.request_row(id)
        .unwrap_or_else(|| panic!("request {id} is in the trace"))
}

fn median(mut v: Vec<i64>) -> i64 {
    v.sort_unstable();
    v[v.len() / 2]
}

/// Decode interrupted by prefill: the victim's ITL is ~12 ms in ordinary steps, its TPOT is over 50 ms, and one
/// token waits over a second while the 24k-token prompt is prefilled.
fn assert_prefill_interrupts_decode(t: &Trace) {
    let victim = row(t, VICTIM_ID);
    let itl: Vec<i64> = itl_ns(t, victim).collect();
    let med = median(itl.clone());
    assert!((8_000_000..20_000_000).contains(&med), "median ITL {med} ns");
    let m = request_metrics(t, victim);
    let tpot_ms = m.tpot_ns.unwrap_or(0.0) / 1e6;
    assert!(tpot_ms >= 50.0, "TPOT {tpot_ms} ms");
    let (slow, &gap) = itl.iter().enumerate().max_by_key(|(_, g)| **g).unwrap_or((0, &0));
    assert!(gap >= 1_000_000_000, "the longest wait is {gap} ns");
    // That wait spans the big prompt's prefill: its prefill stage lies between the two tokens.
    let toks = t.tokens_of(victim);
    let (before, after) = (
        t.tokens.emitted_ns[toks.start + slow],
        t.tokens.emitted_ns[toks.start + slow + 1],
    );
    let big = row(t, BIG_PREFILL_ID);
    let prefill = t.stages_of(big).into_iter().find(|s| s.kind == StageKind::Prefill);
    let prefill = prefill.unwrap_or_else(|| panic!("{BIG_PREFILL_ID} has a prefill stage"));
    assert!(
        before <= prefill.start_ns && prefill.end_ns <= after,
        "prefill {prefill:?} inside [{before}, {after}]"
    );
    // And the victim has no token in that step: the step is prefill-only.
    let it = prefill
        .iter_row
        .unwrap_or_else(|| panic!("the prefill names its iteration")) as usize;
    assert_eq!(t.iterations.num_decode_reqs.at(it), Some(0));
}

/// EOS mis-trigger: the answer ends at index 37 on a stop token whose text is empty, with rank 2 and p ~ 10 %.
fn assert_eos_mistrigger(t: &Trace) {
    let r = row(t, MISTRIGGER_ID);
    let toks = t.tokens_of(r);
    assert_eq!(toks.len() as u32, MISTRIGGER_AT.0 + 1);
    let last = toks.end - 1;
    assert!(t.is_special_token(t.tokens.token_id[last], t.tokens.special[last]));
    assert_eq!(t.texts.get(t.tokens.text[last]), Some(""));
    assert_eq!(t.tokens.rank[last], 2);
    let p = t.tokens.logprob[last].exp();
    assert!((p - MISTRIGGER_AT.1).abs() < 0.005, "p = {p}");
    // The candidates show what lost: a more probable ordinary token first, the stop token second.
    let cands = t.candidates_of(last);
    assert!(t.candidates.logprob[cands.start] > t.tokens.logprob[last]);
    assert_eq!(t.candidates.token_id[cands.start + 1], t.tokens.token_id[last]);
    assert_eq!(t.label(t.requests.finish_reason[r as usize]), Some("stop"));
}

/// A long request monopolises prefill: five consecutive prefill steps of the 96k prompt; the 700-token request
/// behind it waits over 2 s to be scheduled and has a TTFT over 7 s.
fn assert_long_prefill(t: &Trace) {
    let long = row(t, LONG_ID);
    assert_eq!(t.requests.input_tokens.at(long as usize), Some(LONG_INPUT));
    let chunks: Vec<i64> = t
        .stages_of(long)
        .into_iter()
        .filter(|s| s.kind == StageKind::Prefill)
        .filter_map(|s| s.iteration)
        .collect();
    assert!(chunks.len() >= 5, "{chunks:?}");
    assert!(
        chunks.windows(2).all(|w| w[1] == w[0] + 1),
        "consecutive steps: {chunks:?}"
    );
    let short = request_metrics(t, row(t, SHORT_ID));
    let queue_ms = short.queue_ns.unwrap_or(0) / 1_000_000;
    let ttft_ms = short.ttft_ns.unwrap_or(0) / 1_000_000;
    assert!(queue_ms >= 2_000, "queue {queue_ms} ms");
    assert!(ttft_ms > 7_000, "TTFT {ttft_ms} ms");
}

#[test]
fn prefill_interrupts_decode_scenario() {
    assert_prefill_interrupts_decode(&written(Scenario::PrefillInterruptsDecode));
}

#[test]
fn eos_mistrigger_scenario() {
    assert_eos_mistrigger(&written(Scenario::EosMistrigger));
}

#[test]
fn long_prefill_scenario() {
    assert_long_prefill(&written(Scenario::LongPrefill));
}

#[test]
fn mixed_contains_all_three_incidents_among_hundreds_of_requests() {
    let t = written(Scenario::Mixed);
    assert!(t.request_count() >= 300, "{}", t.request_count());
    assert_eq!(t.sources_with_iterations().len(), 2);
    assert_prefill_interrupts_decode(&t);
    assert_eos_mistrigger(&t);
    assert_long_prefill(&t);
    // Ordinary traffic shows the usual signs too: prefix-cache hits and truncated answers.
    let cached: u32 = t.requests.cached_tokens.iter().flatten().sum();
    assert!(cached > 0);
    let truncated = (0..t.request_count() as u32)
        .filter(|&r| t.label(t.requests.finish_reason[r as usize]) == Some("length"))
        .count();
    assert!(truncated > 0);
}

#[test]
fn same_seed_same_bytes_other_seed_other_bytes() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let bytes = |seed: u64, name: &str| {
        let mut o = options(Scenario::EosMistrigger);
        o.seed = seed;
        let path = dir.path().join(name);
        write(&generate(&o).unwrap_or_else(|e| panic!("{e}")), &path).unwrap_or_else(|e| panic!("{e}"));
        std::fs::read(&path).unwrap_or_else(|e| panic!("{e}"))
    };
    assert_eq!(bytes(7, "a.parquet"), bytes(7, "b.parquet"));
    assert_eq!(bytes(7, "a.jsonl"), bytes(7, "b.jsonl"));
    assert_ne!(bytes(7, "a.jsonl"), bytes(8, "c.jsonl"));
}

#[derive(serde::Deserialize)]
struct MooncakeRow {
    timestamp: i64,
    input_length: u32,
    output_length: u32,
    hash_ids: Vec<u64>,
}

#[test]
fn replaying_mooncake_keeps_lengths_gaps_and_shared_prefixes() {
    let path = Path::new("tests/data/real/mooncake_conversation_first_2min.jsonl");
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{e}"));
    let rows: Vec<MooncakeRow> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let mut o = options(Scenario::Replay);
    o.arrivals = Some(path.to_path_buf());
    // The first two minutes on one instance, played at a fifth of the speed, with a 4M-token prefix cache standing
    // for Mooncake's KV pool in CPU memory: a conversation's next turn comes minutes after the last, long after a
    // GPU-sized cache would have evicted it. (On several instances a next turn may also land where its prefix is
    // not cached: the caches are per instance.)
    o.replay = ReplayOptions {
        time_scale: 5.0,
        limit: None,
        window_s: Some((0.0, 120.0)),
    };
    o.prefix_cache_tokens = Some(4_000_000);
    let t = generate(&o).unwrap_or_else(|e| panic!("{e}"));
    let n_rows = rows.len();
    assert_eq!(t.request_count(), n_rows);
    for (n, src) in rows.iter().enumerate() {
        let r = row(&t, &format!("replay-{n:06}")) as usize;
        assert_eq!(t.requests.input_tokens.at(r), Some(src.input_length), "request {n}");
        assert_eq!(t.requests.output_tokens.at(r), Some(src.output_length), "request {n}");
        // Arrival gaps are the file's (ms), times the time scale.
        assert_eq!(
            t.requests.arrival_ns[r] - T0_NS,
            5 * src.timestamp * 1_000_000,
            "request {n}"
        );
    }
    // Prefix-cache hits where hash_ids repeat: a request can hit at most the leading blocks it shares with
    // earlier requests, and most requests share at least the first block (the system prompt).
    let mut best_shared = Vec::with_capacity(n_rows);
    for (n, src) in rows.iter().enumerate() {
        let shared = rows[..n]
            .iter()
            .map(|p| p.hash_ids.iter().zip(&src.hash_ids).take_while(|(a, b)| a == b).count())
            .max()
            .unwrap_or(0);
        best_shared.push(shared as u32);
        let cached = t
            .requests
            .cached_tokens
            .at(row(&t, &format!("replay-{n:06}")) as usize)
            .unwrap_or(0);
        assert!(
            cached <= shared as u32 * 512,
            "request {n}: cached {cached}, shares {shared} blocks"
        );
        assert!(
            cached.is_multiple_of(512) || cached == src.input_length - 1,
            "request {n}: cached {cached}"
        );
    }
    let hits =
        (0..n_rows).filter(|&n| t.requests.cached_tokens.at(row(&t, &format!("replay-{n:06}")) as usize) > Some(0));
    assert!(
        hits.count() > n_rows / 2,
        "most requests hit the shared system-prompt block"
    );
    let deep = (0..n_rows).find(|&n| {
        let cached = t
            .requests
            .cached_tokens
            .at(row(&t, &format!("replay-{n:06}")) as usize)
            .unwrap_or(0);
        best_shared[n] >= 3 && cached >= 3 * 512
    });
    assert!(
        deep.is_some(),
        "a conversation turn reuses its earlier turns' prefix (>= 3 blocks)"
    );
}

#[test]
fn replaying_azure_reads_its_timestamps_and_lengths() {
    let path = Path::new("tests/data/real/azure_conv_first_200.csv");
    let mut o = options(Scenario::Replay);
    o.arrivals = Some(path.to_path_buf());
    o.replay = ReplayOptions {
        time_scale: 1.0,
        limit: Some(20),
        window_s: None,
    };
    let t = generate(&o).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(t.request_count(), 20);
    // Rows 1 and 2: 18:15:46.6805900 (374 -> 44 tokens), 18:15:50.9951690 (396 -> 109): 4,314,579,000 ns apart.
    let (a, b) = (row(&t, "replay-000000") as usize, row(&t, "replay-000001") as usize);
    assert_eq!(t.requests.input_tokens.at(a), Some(374));
    assert_eq!(t.requests.output_tokens.at(b), Some(109));
    assert_eq!(t.requests.arrival_ns[b] - t.requests.arrival_ns[a], 4_314_579_000);
}

fn load_sample(path: &str) -> Trace {
    let l = load(Path::new(path), &Progress::default()).unwrap_or_else(|e| panic!("{path}: {e}"));
    assert_eq!(l.report.rejected_count(), 0, "{path}");
    l.trace
}

#[test]
fn committed_samples_contain_their_incidents() {
    assert_prefill_interrupts_decode(&load_sample("sample_traces/prefill_interrupts_decode.jsonl"));
    assert_eos_mistrigger(&load_sample("sample_traces/eos_mistrigger.jsonl"));
    assert_long_prefill(&load_sample("sample_traces/long_prefill.jsonl"));
    let demo = load_sample("sample_traces/demo.parquet");
    assert_prefill_interrupts_decode(&demo);
    assert_eos_mistrigger(&demo);
    assert_long_prefill(&demo);
    // The app's demo is made by the simulator at start: the same trace as the committed file, row for row.
    let made = tokenscope::synth::demo();
    assert_eq!(made.request_count(), demo.request_count());
    assert_eq!(made.requests.arrival_ns, demo.requests.arrival_ns);
    assert_eq!(made.tokens.emitted_ns, demo.tokens.emitted_ns);
    assert_eq!(made.tokens.token_id, demo.tokens.token_id);
    assert_eq!(made.iterations.start_ns, demo.iterations.start_ns);
    assert_eq!(made.candidates.len(), demo.candidates.len());
}

#[test]
fn committed_samples_are_what_synth_writes_today() {
    // When the simulator changes on purpose, regenerate them (sample_traces/README.md has the commands).
    let dir = tempfile::tempdir().unwrap();
    for (scenario, file) in [
        (Scenario::Mixed, "demo.parquet"),
        (Scenario::PrefillInterruptsDecode, "prefill_interrupts_decode.jsonl"),
        (Scenario::EosMistrigger, "eos_mistrigger.jsonl"),
        (Scenario::LongPrefill, "long_prefill.jsonl"),
    ] {
        let fresh = dir.path().join(file);
        write(&generate(&options(scenario)).unwrap(), &fresh).unwrap();
        let committed = std::fs::read(Path::new("sample_traces").join(file)).unwrap();
        assert!(
            std::fs::read(&fresh).unwrap() == committed,
            "sample_traces/{file} is stale: regenerate it"
        );
    }
}
