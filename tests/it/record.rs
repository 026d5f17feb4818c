//! `tokenscope record` against a local server that replays streams captured from a real llama.cpp server
//! (`tests/data/record/`, see its PROVENANCE.md), and that misbehaves on purpose: an HTTP 500, a stream cut midway,
//! a server that stops sending, a port where nothing listens, a Ctrl-C mid-stream.

// Test helpers may unwrap (a panic here is a failed test) and start threads (a stopper, a watchdog).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use crate::common;
#[path = "common/replay.rs"]
pub(crate) mod replay;

use std::time::Duration;

use replay::{Behavior, start};
use tokenscope::record::client::{Api, Ending, Limits, Sampling};
use tokenscope::record::prompts::{Body, Prompt};
use tokenscope::record::{RecordOptions, Recording, run_recording};
use tokenscope::trace::Trace;

fn capture(name: &str) -> String {
    std::fs::read_to_string(format!("tests/data/record/{name}")).unwrap()
}

fn options(url: &str, api: Api, requests: usize) -> RecordOptions {
    let defaults = RecordOptions::to(url, requests);
    RecordOptions {
        api,
        concurrency: 2,
        sampling: Sampling {
            max_tokens: 30,
            top_logprobs: 3,
            temperature: Some(0.0),
            ..defaults.sampling.clone()
        },
        eos_ids: vec![1],
        limits: Limits {
            idle: Duration::from_secs(5),
            total: Duration::from_secs(30),
        },
        grace: Duration::from_millis(200),
        keep_raw: true,
        ..defaults
    }
}

fn prompts() -> Vec<Prompt> {
    vec![Prompt {
        body: Body::Text("Name a color.".into()),
        max_tokens: None,
        app_id: Some("chat".into()),
        user_id: None,
        at_ms: None,
    }]
}

fn record(options: &RecordOptions) -> Recording {
    // A stop signal that never comes (the tests do not install a Ctrl-C handler).
    let (keep, stop) = tokio::sync::watch::channel(false);
    let rec = run_recording(options, &prompts(), false, Some(stop)).unwrap();
    drop(keep);
    rec
}

fn texts(t: &Trace, r: u32) -> Vec<String> {
    t.tokens_of(r)
        .map(|i| t.texts.get(t.tokens.text[i]).unwrap_or("").to_owned())
        .collect()
}

#[test]
fn chat_stream_that_leaves_out_its_eos_gets_it_back_from_usage() {
    // chat_eos_omitted.sse: 5 content tokens ("Name", " a", " color", ".", "で購入"), finish "stop", usage says 6.
    let server = start(Behavior::replay(
        &capture("chat_eos_omitted.sse"),
        Duration::from_millis(5),
    ));
    let rec = record(&options(&server.url, Api::Chat, 2));
    let t = &rec.trace;
    assert_eq!(rec.outcomes.iter().filter(|o| o.ending == Ending::Done).count(), 2);
    assert_eq!(t.request_count(), 2);
    assert_eq!(rec.report.rejected_count(), 0, "{:?}", rec.report.rejected.first());
    for r in 0..2u32 {
        let tokens: Vec<usize> = t.tokens_of(r).collect();
        assert_eq!(tokens.len(), 6, "token records equal usage");
        assert_eq!(texts(t, r)[..5], ["Name", " a", " color", ".", "で購入"]);
        // The EOS added: id 1 (--eos-id), special, no probability.
        let eos = tokens[5];
        assert_eq!(t.tokens.token_id[eos], 1);
        assert!(t.is_special_token(1, t.tokens.special[eos]));
        assert!(t.tokens.logprob[eos].is_nan());
        // Candidates with their ids: "Name" (1567) first among 3.
        let c = t.candidates_of(tokens[0]);
        assert_eq!(c.len(), 3);
        assert_eq!(t.candidates.token_id[c.start], 1567);
        assert_eq!(t.tokens.token_id[tokens[0]], 1567);
        // Arrival times increase (chunks 5 ms apart); the first is after the send.
        let times: Vec<i64> = tokens.iter().map(|&i| t.tokens.emitted_ns[i]).collect();
        assert!(times[..5].windows(2).all(|w| w[1] > w[0]), "{times:?}");
        assert!(times[0] > t.requests.arrival_ns[r as usize]);
        assert_eq!(t.label(t.requests.finish_reason[r as usize]), Some("stop"));
        assert_eq!(t.label(t.requests.app_id[r as usize]), Some("chat"));
        // llama.cpp's own timings of the request: prompt_ms 48.725, predicted_ms 114.971.
        assert_eq!(t.requests.server_ttft_ns.at(r as usize), Some(48_725_000));
        assert_eq!(t.requests.server_decode_ns.at(r as usize), Some(114_971_000));
    }
    assert_eq!(t.meta.clock.as_deref(), Some("client"));
    assert!(
        rec.report
            .notes
            .iter()
            .any(|n| n.starts_with("2 streams stopped without")),
        "{:?}",
        rec.report.notes
    );
}

#[test]
fn completions_and_native_streams_send_the_eos_with_its_logprob() {
    for (file, api) in [
        ("completions_eos.sse", Api::Completions),
        ("native_eos.sse", Api::Llamacpp),
    ] {
        let server = start(Behavior::replay(&capture(file), Duration::from_millis(2)));
        let rec = record(&options(&server.url, api, 1));
        let t = &rec.trace;
        let tokens: Vec<usize> = t.tokens_of(0).collect();
        // 6 tokens, the last the EOS (id 1) as the server sent it, with its logprob; usage 6.
        assert_eq!(tokens.len(), 6, "{file}");
        assert_eq!(t.output_tokens(0), 6, "{file}");
        let eos = tokens[5];
        assert_eq!(t.tokens.token_id[eos], 1, "{file}");
        assert!(t.is_special_token(1, t.tokens.special[eos]), "{file}");
        assert!(t.tokens.logprob[eos] < 0.0, "{file}: the EOS's own logprob");
        assert_eq!(t.label(t.requests.finish_reason[0]), Some("stop"), "{file}");
        assert!(
            !rec.report.notes.iter().any(|n| n.contains("stopped without")),
            "{file}: nothing added"
        );
    }
}

#[test]
fn a_cut_stream_keeps_its_tokens_and_says_it_was_cut() {
    // chat_length.sse: a role chunk, 40 token chunks, the finish, usage, [DONE]. Cut after 11 chunks: 10 tokens.
    let Behavior::Stream { events, gap, .. } = Behavior::replay(&capture("chat_length.sse"), Duration::from_millis(1))
    else {
        unreachable!()
    };
    let server = start(Behavior::Stream {
        events,
        gap,
        cut_after: Some(11),
        stall_after: None,
    });
    let rec = record(&options(&server.url, Api::Chat, 1));
    let o = &rec.outcomes[0];
    assert_eq!(o.ending, Ending::Cut);
    assert_eq!(o.error_code.as_deref(), Some("stream_cut"));
    let t = &rec.trace;
    assert_eq!(t.tokens_of(0).len(), 10);
    assert_eq!(t.label(t.requests.status[0]), Some("error"));
    assert_eq!(t.label(t.requests.error_code[0]), Some("stream_cut"));
    assert!(tokenscope::record::summary_line(&rec).contains("1 cut"));
}

#[test]
fn a_server_that_stops_sending_times_out_and_the_run_goes_on() {
    let server = start(Behavior::stalling(&capture("chat_length.sse"), 4));
    let mut o = options(&server.url, Api::Chat, 2);
    // Long enough that a busy machine does not take a late chunk for silence; the server is silent for good.
    o.limits.idle = Duration::from_millis(1_500);
    let rec = record(&o);
    // Both requests: 3 tokens (chunks 1-3), then silence past the idle limit.
    assert_eq!(rec.outcomes.len(), 2);
    for out in &rec.outcomes {
        assert_eq!(out.ending, Ending::TimedOut);
        assert_eq!(out.error_code.as_deref(), Some("idle_timeout"));
        assert_eq!(out.stream.tokens.len(), 3);
    }
    assert_eq!(rec.trace.label(rec.trace.requests.status[0]), Some("timeout"));
}

#[test]
fn http_errors_and_refused_connections_end_each_request_with_its_error() {
    let server = start(Behavior::Status(500, "{\"error\": \"model crashed\"}".into()));
    let rec = record(&options(&server.url, Api::Chat, 3));
    assert_eq!(rec.outcomes.len(), 3);
    assert!(
        rec.outcomes
            .iter()
            .all(|o| o.ending == Ending::Failed && o.error_code.as_deref() == Some("500"))
    );
    assert!(rec.outcomes[0].error.as_deref().unwrap().contains("model crashed"));
    assert_eq!(rec.trace.token_count(), 0);
    assert!(tokenscope::record::summary_line(&rec).starts_with("3 requests: 0 ok, 3 failed"));

    // A port where nothing listens (a server started and stopped).
    let url = start(Behavior::Status(200, String::new())).url.clone();
    let rec = record(&options(&url, Api::Chat, 2));
    assert!(
        rec.outcomes.iter().all(|o| o.error_code.as_deref() == Some("connect")),
        "{:?}",
        rec.outcomes[0].error
    );
}

#[test]
fn a_stop_mid_stream_keeps_what_was_recorded_and_marks_it() {
    // The server sends each stream's first five chunks (the role, then four tokens) and holds it there; the stop
    // comes once the journal shows both streams five chunks in (a signal, not a clock), the grace is 200 ms: each
    // stream is cut with its four tokens, and no request starts after the stop.
    let server = start(Behavior::stalling(&capture("chat_length.sse"), 5));
    let dir = tempfile::tempdir().unwrap();
    let journal = dir.path().join("rec.parquet.partial.jsonl");
    let mut o = options(&server.url, Api::Chat, 6);
    o.concurrency = 2;
    o.journal = Some(journal.clone());
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let stopper = std::thread::spawn(move || {
        let chunks = |id: &str| {
            std::fs::read_to_string(&journal)
                .unwrap_or_default()
                .lines()
                .filter(|l| l.contains(id) && l.contains("\"events\":[["))
                .count()
        };
        let deadline = std::time::Instant::now() + Duration::from_mins(1);
        while chunks("rec-00000") < 5 || chunks("rec-00001") < 5 {
            assert!(std::time::Instant::now() < deadline, "the streams never started");
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = stop_tx.send(true);
    });
    let rec = run_recording(&o, &prompts(), false, Some(stop)).unwrap();
    stopper.join().unwrap();
    assert!(rec.interrupted);
    assert_eq!(rec.outcomes.len(), 2, "only the two in flight when the stop came");
    for out in &rec.outcomes {
        assert_eq!(out.ending, Ending::Interrupted);
        assert_eq!(out.stream.tokens.len(), 4);
    }
    assert_eq!(rec.trace.label(rec.trace.requests.finish_reason[0]), Some("abort"));
}

#[test]
fn the_raw_capture_opens_as_the_same_trace() {
    let server = start(Behavior::replay(
        &capture("chat_eos_omitted.sse"),
        Duration::from_millis(1),
    ));
    let mut o = options(&server.url, Api::Chat, 3);
    o.eos_ids = Vec::new();
    let rec = record(&o);
    let dir = tempfile::tempdir().unwrap();
    let raw = dir.path().join("capture.jsonl");
    tokenscope::record::write_raw(&rec.outcomes, &raw).unwrap();
    assert_eq!(
        tokenscope::import::sniff(&raw),
        Some(tokenscope::import::Kind::OpenaiStream)
    );
    let back = tokenscope::load::load(&raw, &tokenscope::ingest::Progress::default()).unwrap();
    assert_eq!(back.trace.request_count(), 3);
    assert_eq!(back.trace.token_count(), rec.trace.token_count());
    let times = |t: &Trace| (0..t.token_count()).map(|i| t.tokens.emitted_ns[i]).collect::<Vec<_>>();
    assert_eq!(times(&back.trace), times(&rec.trace));
}

#[test]
fn the_command_line_writes_the_trace_and_rejects_bad_arguments() {
    let server = start(Behavior::replay(
        &capture("chat_eos_omitted.sse"),
        Duration::from_millis(1),
    ));
    let dir = tempfile::tempdir().unwrap();
    let prompts = dir.path().join("prompts.jsonl");
    std::fs::write(&prompts, "{\"prompt\": \"Name a color.\"}\nnot json\n").unwrap();
    let out = dir.path().join("rec.parquet");
    let (p, o) = (prompts.to_str().unwrap(), out.to_str().unwrap());
    let (code, stdout, stderr) = common::tokenscope(&[
        "record",
        "--url",
        &server.url,
        "--prompts",
        p,
        "--requests",
        "4",
        "--concurrency",
        "2",
        "--eos-id",
        "1",
        "-o",
        o,
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("4 requests: 4 ok"), "{stdout}");
    assert!(
        stderr.contains(":2: not JSON"),
        "the bad prompt line is named: {stderr}"
    );
    let back = tokenscope::load::load(&out, &tokenscope::ingest::Progress::default()).unwrap();
    assert_eq!(back.trace.token_count(), 4 * 6);
    // Written whole, the journal of what was received as it came is gone.
    assert!(!dir.path().join("rec.parquet.partial.jsonl").exists());
    assert_eq!(back.trace.meta.eos_token_ids.as_deref(), Some(&[1][..]));

    for bad in [["--rate", "-1"], ["--timeout", "0"]] {
        let (code, _, stderr) =
            common::tokenscope(&["record", "--url", &server.url, "--prompts", p, bad[0], bad[1], "-o", o]);
        assert_eq!(code, 2, "{bad:?}: {stderr}");
    }
    let (code, _, stderr) = common::tokenscope(&[
        "record",
        "--url",
        &server.url,
        "--prompts",
        "/nonexistent/p.txt",
        "-o",
        o,
    ]);
    assert_eq!(code, 2);
    assert!(stderr.contains("cannot read the prompts file"), "{stderr}");
}

#[test]
fn keys_given_to_record_reach_no_trace_capture_note_or_message() {
    let server = start(Behavior::replay(
        &capture("chat_eos_omitted.sse"),
        Duration::from_millis(1),
    ));
    // A key in a header, and a password in the URL's user part.
    let with_password = server.url.replacen("http://", "http://user:SECRET-PASSWORD@", 1);
    let mut o = options(&with_password, Api::Chat, 2);
    o.headers = vec![("Authorization".into(), "Bearer SECRET-HEADER".into())];
    let rec = record(&o);
    assert_eq!(rec.trace.request_count(), 2);
    let dir = tempfile::tempdir().unwrap();
    let (trace, raw) = (dir.path().join("t.jsonl"), dir.path().join("raw.jsonl"));
    tokenscope::format::write(&rec.trace, &trace).unwrap();
    tokenscope::record::write_raw(&rec.outcomes, &raw).unwrap();
    let written = std::fs::read_to_string(&trace).unwrap() + &std::fs::read_to_string(&raw).unwrap();
    let said = format!("{:?} {:?}", rec.report, rec.outcomes);
    for text in [&written, &said] {
        assert!(!text.contains("SECRET"), "{text}");
    }
    assert!(format!("{:?}", rec.report.notes).contains("recorded from http://127.0.0.1:"));
    // A refused connection's message names the server without the password.
    let closed = start(Behavior::Status(200, String::new())).url.clone();
    let rec = record(&options(
        &closed.replacen("http://", "http://user:SECRET-PASSWORD@", 1),
        Api::Chat,
        1,
    ));
    let error = rec.outcomes[0].error.clone().unwrap();
    assert!(!error.contains("SECRET") && error.contains("127.0.0.1"), "{error}");
    // A header mistyped on the command line is refused without being echoed.
    let (code, _, stderr) = common::tokenscope(&[
        "record",
        "--url",
        &server.url,
        "--prompts",
        "p.txt",
        "--header",
        "Bearer SECRET-NO-COLON",
        "-o",
        "x.parquet",
    ]);
    assert_eq!(code, 2);
    assert!(!stderr.contains("SECRET") && stderr.contains("Name: value"), "{stderr}");
    assert_eq!(
        tokenscope::record::shown_url("https://u:p@api.example.com/v1?api_key=k#f"),
        "https://api.example.com/v1?…"
    );
}

#[test]
fn every_request_carries_its_ids_and_the_servers_answer_is_kept() {
    let server = start(Behavior::replay(
        &capture("chat_eos_omitted.sse"),
        Duration::from_millis(1),
    ));
    let rec = record(&options(&server.url, Api::Chat, 2));
    let t = &rec.trace;
    let mut seen = server.seen.lock().unwrap().clone();
    seen.sort();
    assert_eq!(seen.len(), 2);
    for (k, (id, traceparent)) in seen.iter().enumerate() {
        // X-Request-Id is the recording's id; traceparent carries the trace id kept on the request.
        let id = id.as_deref().unwrap();
        assert_eq!(id, format!("rec-{k:05}"));
        let r = t.request_row(id).unwrap() as usize;
        let trace_id = t.label(t.requests.trace_id[r]).unwrap();
        assert_eq!(trace_id.len(), 32);
        assert_eq!(
            traceparent.as_deref(),
            Some(format!("00-{trace_id}-0000000000000001-01").as_str())
        );
        // The id the server answered with (the capture's chunks carry llama.cpp's).
        assert_eq!(
            t.label(t.requests.server_request_id[r]),
            Some("chatcmpl-SEPJArJHmZDarebrSpMAuIXNYL1CsZSd")
        );
    }
}

#[test]
fn a_server_log_of_another_run_is_not_joined_and_the_recording_is_kept() {
    let server = start(Behavior::replay(
        &capture("chat_eos_omitted.sse"),
        Duration::from_millis(1),
    ));
    let dir = tempfile::tempdir().unwrap();
    let prompts = dir.path().join("prompts.jsonl");
    std::fs::write(&prompts, "{\"prompt\": \"Name a color.\"}\n").unwrap();
    let out = dir.path().join("rec.parquet");
    let (code, stdout, stderr) = common::tokenscope(&[
        "record",
        "--url",
        &server.url,
        "--prompts",
        prompts.to_str().unwrap(),
        "--requests",
        "2",
        "--server-log",
        "tests/data/real/llamacpp/incident_server.log.gz",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(
        stderr.contains("the server's log was not joined, the recording is written alone: cannot join"),
        "{stderr}"
    );
    let back = tokenscope::load::load(&out, &tokenscope::ingest::Progress::default()).unwrap();
    assert_eq!(back.trace.request_count(), 2);
    assert_eq!(back.trace.meta.clock.as_deref(), Some("client"));
}

/// `tokenscope record` of 6 requests 2 at a time from a server whose chunks come 150 ms apart (a stream of 9 chunks
/// takes over a second), run as a process with `args` added, its output's standard streams set by `stdio`.
struct SlowRecording {
    _server: replay::Server,
    _dir: tempfile::TempDir,
    out: std::path::PathBuf,
    journal: std::path::PathBuf,
    child: std::process::Child,
}

impl SlowRecording {
    /// Streams after the first `free` are held by the server (open, without a payload) for as long as it runs.
    fn start(args: &[&str], stdio: fn() -> std::process::Stdio, free: usize) -> Self {
        let server = replay::start_holding(
            Behavior::replay(&capture("chat_eos_omitted.sse"), Duration::from_millis(150)),
            free,
        );
        let dir = tempfile::tempdir().unwrap();
        let prompts = dir.path().join("prompts.jsonl");
        std::fs::write(&prompts, "{\"prompt\": \"Name a color.\"}\n").unwrap();
        let out = dir.path().join("rec.parquet");
        let journal = dir.path().join("rec.parquet.partial.jsonl");
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_tokenscope"))
            .args(["record", "--url", &server.url, "--prompts"])
            .arg(&prompts)
            .args(["--requests", "6", "--concurrency", "2"])
            .args(args)
            .arg("-o")
            .arg(&out)
            .stdout(stdio())
            .stderr(stdio())
            .spawn()
            .unwrap();
        SlowRecording {
            _server: server,
            _dir: dir,
            out,
            journal,
            child,
        }
    }

    /// Waits, on what the journal says (never on a clock), for two requests ended and a third begun.
    fn wait_for_two_ended_and_a_third(&self) {
        let deadline = std::time::Instant::now() + Duration::from_mins(1);
        loop {
            let text = std::fs::read_to_string(&self.journal).unwrap_or_default();
            let ended = text.lines().filter(|l| l.contains("\"ending\"")).count();
            let third = text.lines().any(|l| l.contains("rec-00002") || l.contains("rec-00003"));
            if ended >= 2 && third {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the journal never showed progress: {text}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

#[test]
fn a_recording_killed_mid_run_leaves_what_it_received_on_disk() {
    let run = SlowRecording::start(&[], std::process::Stdio::null, usize::MAX);
    run.wait_for_two_ended_and_a_third();
    let (mut child, out, journal) = (run.child, run.out, run.journal);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(
        !out.exists(),
        "killed before the end: no trace written, only the journal"
    );

    let loaded = tokenscope::load::load(&journal, &tokenscope::ingest::Progress::default()).unwrap();
    let t = &loaded.trace;
    assert!(t.request_count() >= 3, "{}", t.request_count());
    let mut finished = 0;
    let mut cut = 0;
    for r in 0..u32::try_from(t.request_count()).unwrap() {
        let ri = r as usize;
        #[expect(
            clippy::single_match_else,
            reason = "the two kinds of request a killed recording leaves"
        )]
        match t.label(t.requests.status[ri]) {
            // A request that ended is exact: its 5 streamed tokens and the EOS usage counts.
            Some("ok") => {
                finished += 1;
                assert_eq!(texts(t, r)[..5], ["Name", " a", " color", ".", "で購入"]);
                assert_eq!(t.tokens_of(r).len(), 6);
            }
            // One in flight: kept up to its last chunk, marked cut.
            _ => {
                cut += 1;
                assert_eq!(t.label(t.requests.error_code[ri]), Some("recorder_stopped"));
                assert!(t.tokens_of(r).len() <= 5);
            }
        }
    }
    assert!(finished >= 2 && cut >= 1, "finished {finished}, cut {cut}");
    let notes = loaded.report.notes.join("\n");
    assert!(notes.contains("the recording was interrupted"), "{notes}");
}

#[cfg(unix)]
#[test]
fn a_recording_sent_sigterm_stops_as_ctrl_c_does_and_writes_everything() {
    // The fourth request held by the server: in flight when the signal comes, however late the signal is.
    let run = SlowRecording::start(&["--grace", "0.1"], std::process::Stdio::piped, 3);
    // Then SIGTERM, as a process manager or `kill` sends it.
    run.wait_for_two_ended_and_a_third();
    let (child, out, journal) = (run.child, run.out, run.journal);
    let killed = std::process::Command::new("sh")
        .args(["-c", &format!("kill -TERM {}", child.id())])
        .status()
        .unwrap();
    assert!(killed.success());
    let done = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&done.stdout);
    assert!(
        done.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&done.stderr)
    );
    assert!(stdout.contains("(stopped)"), "{stdout}");
    // Written whole: the journal did its job; the requests that ended are exact, the ones in flight cut after the
    // grace period, none sent after the signal.
    assert!(!journal.exists());
    let loaded = tokenscope::load::load(&out, &tokenscope::ingest::Progress::default()).unwrap();
    let t = &loaded.trace;
    assert!((3..6).contains(&t.request_count()), "{}", t.request_count());
    let ok = (0..u32::try_from(t.request_count()).unwrap())
        .filter(|&r| t.label(t.requests.status[r as usize]) == Some("ok"))
        .inspect(|&r| assert_eq!(t.tokens_of(r).len(), 6))
        .count();
    assert!(ok >= 2 && ok < t.request_count(), "{ok} of {}", t.request_count());
    // The held one: sent, no token received, cut by the stop (the recorder's own code for a stream it stopped).
    let held = t.request_row("rec-00003").expect("the held request is written");
    assert_eq!(t.tokens_of(held).len(), 0);
    assert_eq!(t.label(t.requests.error_code[held as usize]), Some("interrupted"));
}

#[test]
fn a_rotating_recording_writes_parts_that_open_as_one_trace_and_survive_a_kill() {
    // Chunks 25 ms apart: a request of 9 chunks takes about 0.23 s; 16 requests 2 at a time about 1.9 s.
    let server = start(Behavior::replay(
        &capture("chat_eos_omitted.sse"),
        Duration::from_millis(25),
    ));
    let dir = tempfile::tempdir().unwrap();
    let prompts = dir.path().join("prompts.jsonl");
    std::fs::write(&prompts, "{\"prompt\": \"Name a color.\"}\n").unwrap();
    let run = |out: &std::path::Path, requests: &str| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_tokenscope"));
        c.args(["record", "--url", &server.url, "--prompts"])
            .arg(&prompts)
            .args([
                "--requests",
                requests,
                "--concurrency",
                "2",
                "--rotate-every",
                "0.4",
                "-o",
            ])
            .arg(out);
        c
    };

    // Whole: a part every 0.4 s; the directory opens as one trace of every request, each exact, none twice.
    let parts = dir.path().join("parts");
    let done = run(&parts, "16").output().unwrap();
    let stdout = String::from_utf8_lossy(&done.stdout);
    assert!(
        done.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&done.stderr)
    );
    let written: Vec<String> = std::fs::read_dir(&parts)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(written.len() >= 2, "{written:?}");
    assert!(
        written
            .iter()
            .all(|n| n.starts_with("part-") && n.ends_with(".parquet")),
        "{written:?}"
    );
    assert!(
        stdout.starts_with(&format!("wrote {} parts to ", written.len())),
        "{stdout}"
    );
    let loaded = tokenscope::load::load(&parts, &tokenscope::ingest::Progress::default()).unwrap();
    let t = &loaded.trace;
    assert_eq!(t.request_count(), 16);
    assert_eq!(
        loaded.report.rejected_count(),
        0,
        "{:?}",
        loaded.report.rejected.first()
    );
    for r in 0..16u32 {
        assert_eq!(t.tokens_of(r).len(), 6, "{}", t.request_id(r));
        assert_eq!(texts(t, r)[..5], ["Name", " a", " color", ".", "で購入"]);
    }
    assert!(stdout.contains("16 requests, 96 tokens"), "{stdout}");

    // Killed once a part is written: the parts and the journal left beside them open as one trace; every request in
    // a part is exact, the ones in flight are cut.
    let killed = dir.path().join("killed");
    let mut child = run(&killed, "200")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let journal = killed.join("journal.partial.jsonl");
    let deadline = std::time::Instant::now() + Duration::from_mins(1);
    while !(killed.join("part-00002.parquet").exists()
        && std::fs::read_to_string(&journal).is_ok_and(|j| j.contains("\"events\":[[")))
    {
        assert!(std::time::Instant::now() < deadline, "no second part within 60 s");
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let in_parts: usize = ["part-00001.parquet", "part-00002.parquet"]
        .iter()
        .map(|p| {
            tokenscope::load::load(&killed.join(p), &tokenscope::ingest::Progress::default())
                .unwrap()
                .trace
                .request_count()
        })
        .sum();
    let loaded = tokenscope::load::load(&killed, &tokenscope::ingest::Progress::default()).unwrap();
    let t = &loaded.trace;
    assert!(
        t.request_count() > in_parts,
        "{} requests, {in_parts} in two parts",
        t.request_count()
    );
    let (mut exact, mut cut) = (0, 0);
    for r in 0..u32::try_from(t.request_count()).unwrap() {
        if let Some("ok") = t.label(t.requests.status[r as usize]) {
            exact += 1;
            assert_eq!(t.tokens_of(r).len(), 6, "{}", t.request_id(r));
        } else {
            cut += 1;
            assert_eq!(t.label(t.requests.error_code[r as usize]), Some("recorder_stopped"));
        }
    }
    assert!(exact >= in_parts && cut >= 1, "exact {exact}, cut {cut}");
}

#[test]
fn an_open_loop_sends_at_the_seeded_poisson_times() {
    // --rate 20 with seed 1: the gaps are the first 40 draws of Exp(20) from Pcg64 seeded with 1, as the recorder
    // draws them; a fast server and 40 in flight at most, so nothing but the schedule holds a request back.
    use rand::SeedableRng;
    use rand_distr::Distribution;
    let server = start(Behavior::replay(
        &capture("chat_eos_omitted.sse"),
        Duration::from_millis(1),
    ));
    let mut o = options(&server.url, Api::Chat, 40);
    o.concurrency = 40;
    o.rate = Some(20.0);
    o.seed = 1;
    let before_ns = i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos(),
    )
    .unwrap();
    let rec = record(&o);
    let mut rng = rand_pcg::Pcg64::seed_from_u64(1);
    let exp = rand_distr::Exp::new(20.0).unwrap();
    let mut due = 0.0_f64;
    let due_s: Vec<f64> = (0..40)
        .map(|_| {
            due += exp.sample(&mut rng);
            due
        })
        .collect();
    let sent: Vec<i64> = rec.outcomes.iter().map(|o| o.sent_ns).collect();
    assert_eq!(sent.len(), 40);
    // A request is sent at its due time after the run's start, or later when the machine is busy, never before:
    // so each send is at least its due time after this test's clock read before the run, however loaded the machine
    // (1 ms allowed for the wall clock's and the timer's granularity). Unpaced, the last sends would come about two
    // seconds early (40 gaps of 50 ms on average).
    assert!(due_s[39] - due_s[0] > 1.0, "{due_s:?}");
    for (k, (&s, &due)) in sent.iter().zip(&due_s).enumerate() {
        let after_s = (s - before_ns) as f64 / 1e9;
        assert!(
            after_s >= due - 1e-3,
            "request {k} sent {after_s:.3} s into the run, before its due time {due:.3} s"
        );
    }
}
