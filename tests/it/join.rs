//! Both halves of a real run, joined: the recording of `tokenscope record` and llama-server's own log of the same
//! five requests (`tests/data/real/llamacpp/PROVENANCE.md`). Every figure below is read off the log by hand.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers may unwrap: a panic here is a failed test"
)]

use std::path::Path;

use tokenscope::analysis::delivery::delivery;
use tokenscope::analysis::findings::{Kind, Thresholds, find_kinds};
use tokenscope::analysis::summary::Slo;
use tokenscope::ingest::Progress;
use tokenscope::load::{LoadOptions, load_many};
use tokenscope::trace::{StageKind, opt_i64};

const DIR: &str = "tests/data/real/llamacpp";

fn joined() -> tokenscope::load::Loaded {
    let client = Path::new(DIR).join("incident_client.parquet");
    let server = Path::new(DIR).join("incident_server.log.gz");
    load_many(&[&client, &server], &Progress::default(), LoadOptions::default()).unwrap()
}

#[test]
fn a_recording_and_the_servers_log_are_one_trace() {
    let loaded = joined();
    let t = &loaded.trace;
    assert_eq!(t.meta.clock.as_deref(), Some("joined"));
    assert_eq!(
        t.request_count(),
        5,
        "the server's requests are the client's: none left alone"
    );
    let notes = loaded.report.notes.join("\n");
    assert!(
        notes.contains(
            "Joined 5 of 5 client requests with the server's: 0 by id, 5 by prompt and output length and time."
        ),
        "{notes}"
    );
    // The band the pairs leave for the offset: "± X ms", under 4 ms wide on this run (loopback).
    let band: f64 = notes
        .split(" ± ")
        .nth(1)
        .and_then(|r| r.split(" ms").next())
        .and_then(|x| x.parse().ok())
        .unwrap();
    assert!(band < 4.0, "{notes}");

    // rec-00003 is task 54: a 2,583-token prompt (`new prompt ... task.n_tokens = 2583`), prefilled in five chunks
    // whose `cached n_tokens` positions are 0, 1, 2046, 2067 and 2579.
    let r = t.request_row("rec-00003").unwrap();
    assert_eq!(t.requests.input_tokens.at(r as usize), Some(2_583));
    let chunks: Vec<u32> = t
        .stages_of(r)
        .iter()
        .filter(|s| s.kind == StageKind::Prefill && !s.derived)
        .filter_map(|s| s.tokens)
        .collect();
    assert_eq!(chunks, [1, 2_045, 21, 512, 4]);
    // Each of its tokens was produced by a step of the server, and received by the client after it.
    for k in t.tokens_of(r) {
        assert!(opt_i64(t.tokens.iteration[k]).is_some());
        let received = opt_i64(t.tokens.received_ns[k]).unwrap();
        assert!(
            received >= t.tokens.emitted_ns[k] - 4_000_000,
            "within the offset's band"
        );
    }
    // The client sent every request before the server received it (on one clock now), to within the band.
    for q in 0..5u32 {
        let sent = t.requests.sent_ns.at(q as usize).unwrap();
        assert!(t.requests.arrival_ns[q as usize] >= sent - 4_000_000);
    }
}

#[test]
fn the_stall_and_its_culprit_on_a_real_engine() {
    let loaded = joined();
    let t = &loaded.trace;
    // The step that held rec-00003's 2,045-token chunk: from its decode line (4.749 s) to the next pass (11.793 s).
    let source = t.labels.lookup("llama-server").unwrap();
    let rows = t.iterations_of_source(source);
    let big = rows
        .clone()
        .find(|&i| t.iterations.num_prefill_tokens.at(i) == Some(2_045))
        .unwrap();
    let took = t.iterations.end_ns[big] - t.iterations.start_ns[big];
    assert!((7_000_000_000..7_100_000_000).contains(&took), "{took}");
    // Three answers were decoding: their tokens fed into that step.
    assert_eq!(t.iterations.num_decode_tokens.at(big), Some(3));

    let found = find_kinds(
        t,
        &Slo::default(),
        &Thresholds::default(),
        &[Kind::DecodeInterrupted, Kind::PrefillMonopoly],
    );
    let interrupted: Vec<_> = found.iter().filter(|f| f.kind == Kind::DecodeInterrupted).collect();
    assert!(!interrupted.is_empty());
    let worst = interrupted[0];
    // rec-00000's first token after that step began waited for it: the gap from the token before, as emitted.
    let r0 = t.tokens_of(t.request_row("rec-00000").unwrap());
    let k = r0
        .clone()
        .find(|&k| t.tokens.emitted_ns[k] > t.iterations.start_ns[big])
        .unwrap();
    let waited_s = (t.tokens.emitted_ns[k] - t.tokens.emitted_ns[k - 1]) as f64 / 1e9;
    let stalled = format!("rec-00000's token {} waited {waited_s:.2} s", t.tokens.index[k]);
    assert!(
        worst.summary.starts_with(&stalled)
            && worst
                .summary
                .contains("while rec-00003 prefilled 2,045 prompt tokens in 1 step on llama-server"),
        "{stalled}: {}",
        worst.summary
    );
    let monopoly = found.iter().find(|f| f.kind == Kind::PrefillMonopoly).unwrap();
    assert!(
        monopoly
            .summary
            .starts_with("rec-00003's prefill of 2,583 prompt tokens"),
        "{}",
        monopoly.summary
    );
    assert!(monopoly.requests.contains(&t.request_row("rec-00004").unwrap()));
}

#[test]
fn the_gap_between_server_and_client_is_a_figure() {
    let loaded = joined();
    let t = &loaded.trace;
    let all: Vec<u32> = (0..5).collect();
    let d = delivery(t, &all).unwrap();
    assert_eq!(d.requests, 5);
    // Every token the client recorded was produced by a step of the server.
    let client = tokenscope::load::load(&Path::new(DIR).join("incident_client.parquet"), &Progress::default()).unwrap();
    assert_eq!(
        d.token_ms.count,
        client.trace.token_count() as u64,
        "every token was received by the client and produced by a step"
    );
    // On loopback, a token reaches the client within a few ms of the server sampling it.
    let p50 = d.token_ms.p50.unwrap();
    assert!((0.0..10.0).contains(&p50), "{p50}");
}

#[test]
fn halves_of_different_runs_are_refused() {
    // The recording with another run's server side (a simulated llama-server-like trace) pairs with nothing.
    let client = Path::new(DIR).join("incident_client.parquet");
    let other = Path::new("sample_traces/long_prefill.jsonl");
    let e = load_many(&[&client, other], &Progress::default(), LoadOptions::default()).unwrap_err();
    let e = e.to_string();
    assert!(
        e.starts_with(
            "cannot join tests/data/real/llamacpp/incident_client.parquet with sample_traces/long_prefill.jsonl"
        ),
        "{e}"
    );
}

#[test]
fn the_default_log_of_llama_server_joins_its_recording_too() {
    // llama-server's log at its default level: a launch, the timings and a release per request, nothing per step.
    let dir = Path::new("sample_traces/engines/llamacpp");
    let loaded = load_many(&[dir], &Progress::default(), LoadOptions::default()).unwrap();
    let t = &loaded.trace;
    assert_eq!(t.request_count(), 4);
    assert!(t.iterations.is_empty(), "the default level writes no step");
    let notes = loaded.report.notes.join("\n");
    assert!(notes.contains("Joined 4 of 4 client requests"), "{notes}");
    assert!(notes.contains("-lv 5"), "the notes say how to get the steps: {notes}");
    // rec-00002 is task 29: `stop processing: n_tokens = 40` holds the prompt and every output token but the
    // last (24 generated): a 17-token prompt, of which `prompt eval time = 704.16 ms / 16 tokens` computed 16: one
    // came from the cache. The recording's usage says the same (prompt 17, cached 1).
    let r = t.request_row("rec-00002").unwrap() as usize;
    assert_eq!(t.requests.input_tokens.at(r), Some(17));
    assert_eq!(t.requests.cached_tokens.at(r), Some(1));
    // llama.cpp's own prompt time, as its stream's `timings.prompt_ms` gave it (704.159 ms; the log rounds it to
    // 704.16).
    assert_eq!(t.requests.server_ttft_ns.at(r), Some(704_159_000));
    assert_eq!(t.requests.output_tokens.at(r), Some(24));
    // The log times no token, so the tokens keep the client's times: the client's TTFT is a figure (the
    // recording's own TTFTs: 526.8, 695.6, 751.3 and 842.3 ms; nearest-rank p50 is the 2nd), token delivery is
    // absent, not zero.
    let all: Vec<u32> = (0..4).collect();
    let d = delivery(t, &all).unwrap();
    assert_eq!(d.client_ttft_ms.count, 4);
    let p50 = d.client_ttft_ms.p50.unwrap();
    assert!((p50 - 695.6).abs() < 0.1, "{p50}");
    assert_eq!(d.token_ms.count, 0);
    assert_eq!(d.token_ms.p50, None);
    // The log alone: it has no posting line, so the time each request queued before its slot is unknown, and
    // shown as unknown (it was 0.0 ms for all four before).
    let log = Path::new("sample_traces/engines/llamacpp/llama-server-default.log");
    let alone = load_many(&[log], &Progress::default(), LoadOptions::default()).unwrap();
    assert_eq!(alone.trace.request_count(), 4);
    assert!(alone.trace.requests.scheduled_ns.iter().all(|v| v.is_none()));
    let s = tokenscope::analysis::summary::summarize_all(&alone.trace, Slo::default(), None);
    assert_eq!(s.queue_ms.count, 0);
}

/// The server's log read as it is written (a live view's engine track), a piece at a time, cut anywhere in a line:
/// the same trace as the whole file read at once, and the same join with the recording.
#[test]
fn a_servers_log_read_as_it_is_written_is_the_log_read_whole() {
    use std::io::{Read, Write};
    let mut text = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(Path::new(DIR).join("incident_server.log.gz")).unwrap())
        .read_to_end(&mut text)
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("server.log");
    let mut file = std::fs::File::create(&path).unwrap();
    let mut tail = tokenscope::record::server_tail::ServerLogTail::new(&path);
    // Not written yet: nothing.
    tail.poll().unwrap();
    assert!(tail.loaded().is_none());
    // Seven pieces of uneven size, each ending mid-line (the first is more than the 64 KiB that tell the kind).
    let cuts = [70_001, 200_003, 333_337, 600_011, 900_001, 1_100_009, text.len()];
    let mut from = 0;
    for &to in &cuts {
        file.write_all(&text[from..to]).unwrap();
        file.flush().unwrap();
        from = to;
        tail.poll().unwrap();
        // What was written so far, read whole: the same requests, steps and tokens (the log's first 333 KB are the
        // server starting and the first prompt's prefill, with no step yet).
        let prefix = dir.path().join("prefix.log");
        std::fs::write(&prefix, &text[..to]).unwrap();
        let counts = |t: &tokenscope::trace::Trace| (t.request_count(), t.iterations.start_ns.len(), t.token_count());
        let whole = tokenscope::load::load(&prefix, &Progress::default()).map(|l| counts(&l.trace));
        let live = tail.loaded().map(|l| counts(&l.trace));
        match whole {
            Ok(c) => assert_eq!(live, Some(c), "{to} bytes"),
            // Nothing yet that is a trace: nothing to join (the live view says so).
            Err(_) => assert!(live.is_none_or(|c| c.0 == 0 && c.1 == 0), "{to} bytes: {live:?}"),
        }
    }
    // Every step of the log: one a `llama_decode` (172).
    let steps = crate::common::llamacpp_log_steps(&Path::new(DIR).join("incident_server.log.gz"));
    assert!(steps > 100, "{steps}");
    assert_eq!(tail.loaded().map(|l| l.trace.iterations.start_ns.len()), Some(steps));
    let live = tail.loaded().unwrap();
    let whole = tokenscope::load::load(&path, &Progress::default()).unwrap();
    let (a, b) = (&live.trace, &whole.trace);
    assert_eq!(
        (a.request_count(), a.iterations.start_ns.len(), a.token_count()),
        (b.request_count(), b.iterations.start_ns.len(), b.token_count())
    );
    assert_eq!(a.requests.arrival_ns, b.requests.arrival_ns);
    assert_eq!(a.iterations.start_ns, b.iterations.start_ns);
    assert_eq!(a.tokens.emitted_ns, b.tokens.emitted_ns);
    assert_eq!(live.report.notes, whole.report.notes);
    // Joined with the recording, as the whole log joins.
    let client =
        || tokenscope::load::load(&Path::new(DIR).join("incident_client.parquet"), &Progress::default()).unwrap();
    let (joined, alone) = tokenscope::record::join_loaded(client(), live, &path);
    assert_eq!(alone, None);
    let (reference, _) = tokenscope::record::join_server_log(client(), &path);
    assert_eq!(joined.trace.request_count(), 5);
    assert_eq!(joined.trace.iterations.start_ns, reference.trace.iterations.start_ns);
    assert_eq!(joined.trace.tokens.emitted_ns, reference.trace.tokens.emitted_ns);
    assert_eq!(joined.report.notes, reference.report.notes);
}
