//! `tokenscope watch` (issue 50): a real llama-server's log, written a piece at a time as the server wrote it, is
//! followed with nothing sent to any server; each incident is said once, as it happens, and kept.

use std::io::Read as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use eframe::egui;
use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use serde_json::Value;
use tokenscope::analysis::findings::Kind;
use tokenscope::record::watcher::WatchOptions;
use tokenscope::trace::StageKind;
use tokenscope::ui::{App, TraceSource};

/// The real incident run's server log (`tests/data/real/llamacpp/`): three answers decoding when a 2,574-token
/// prompt arrives; its own findings name a decode interruption of task-0 by task-54 and task-54's prefill monopoly.
fn incident_log() -> Vec<u8> {
    gunzip("tests/data/real/llamacpp/incident_server.log.gz")
}

fn gunzip(path: &str) -> Vec<u8> {
    let gz = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut text = Vec::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_end(&mut text)
        .unwrap_or_else(|e| panic!("{path}: {e}"));
    text
}

/// The ends of `pieces` pieces of `text`, each cut at a line end.
fn piece_ends(text: &[u8], pieces: usize) -> Vec<usize> {
    (1..=pieces)
        .map(|k| {
            let at = text.len() * k / pieces;
            text[at..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(text.len(), |p| at + p + 1)
        })
        .collect()
}

/// The decode interruptions a whole read of the log `text` finds (it is written to `dir`): each stalled request
/// and token.
fn stalls_of_whole(text: &[u8], dir: &Path) -> Vec<(String, u64)> {
    let path = dir.join("whole.server.log");
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("{e}"));
    let t = tokenscope::load::load(&path, &tokenscope::ingest::Progress::default())
        .unwrap_or_else(|e| panic!("{e}"))
        .trace;
    tokenscope::analysis::findings::find_kinds(
        &t,
        &tokenscope::analysis::summary::Slo::DEFAULT,
        &tokenscope::analysis::findings::Thresholds::default(),
        &[Kind::DecodeInterrupted],
    )
    .iter()
    .map(|f| {
        (
            t.request_id(f.requests[0]).to_owned(),
            u64::from(t.tokens.index[f.tokens[0]]),
        )
    })
    .collect()
}

/// Waits until the process `pid` has read the file at `path` to its present end: the offset of its open handle on it,
/// as Linux's `/proc/PID/fdinfo` says (a minute at most). What a test does next to the file then comes after what
/// the watch read, however busy the machine.
fn read_to_end_by(pid: u32, path: &Path) {
    let len = std::fs::metadata(path).map_or(0, |m| m.len());
    let deadline = Instant::now() + Duration::from_mins(1);
    while Instant::now() < deadline {
        let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap_or_else(|e| panic!("{e}"));
        for fd in fds.filter_map(Result::ok) {
            if std::fs::read_link(fd.path()).is_ok_and(|to| to == path) {
                let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{}", fd.file_name().to_string_lossy()))
                    .unwrap_or_default();
                let pos = info
                    .lines()
                    .find_map(|l| l.strip_prefix("pos:"))
                    .and_then(|p| p.trim().parse::<u64>().ok());
                if pos.is_some_and(|p| p >= len) {
                    return;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!(
        "the watch did not read {} to its end ({len} bytes) in a minute",
        path.display()
    );
}

/// Appends `bytes` to the file at `path` (made when missing).
fn append(path: &Path, bytes: &[u8]) {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap_or_else(|e| panic!("{e}"));
    std::io::Write::write_all(&mut f, bytes).unwrap_or_else(|e| panic!("{e}"));
}

/// Starts `watch --json` on `log`, a look every 0.2 s, its incidents in `kept`, stopping after `idle_exit` seconds
/// without news.
fn spawn_watch(log: &Path, kept: &Path, idle_exit: &str) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_tokenscope"))
        .args([
            "watch",
            "--json",
            "--interval-s",
            "0.2",
            "--idle-exit",
            idle_exit,
            "--log",
        ])
        .arg(log)
        .arg("--incidents")
        .arg(kept)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Waits for `child` to stop by itself (never a hang) and gives its stdout and stderr.
fn stopped(child: std::process::Child) -> (String, String) {
    let mut child = child;
    let started = Instant::now();
    while child.try_wait().ok().flatten().is_none() {
        assert!(started.elapsed() < Duration::from_mins(3), "watch did not stop");
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    (String::from_utf8_lossy(&out.stdout).into_owned(), stderr)
}

/// What makes a finding said by `watch --json` the same one: its kind, and its first request and token, or, for
/// the grouped checks, the objective missed (SLO violations) or nothing (truncations: one for all).
fn said_as(f: &Value) -> (String, String, Option<u64>) {
    let kind = f["kind"].as_str().unwrap_or("").to_owned();
    let summary = f["summary"].as_str().unwrap_or("");
    match kind.as_str() {
        "slo-violations" if summary.contains("TTFT objective") => (kind, "ttft".to_owned(), None),
        "slo-violations" => (kind, "tpot".to_owned(), None),
        "truncation" => (kind, String::new(), None),
        _ => (
            kind,
            f["requests"][0].as_str().unwrap_or("").to_owned(),
            f["tokens"][0]["index"].as_u64(),
        ),
    }
}

#[test]
fn watch_says_each_incident_of_a_growing_log_once_and_keeps_the_minutes_around_it() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let log = dir.path().join("server.log");
    let kept = dir.path().join("incidents");
    let child = spawn_watch(&log, &kept, "2");
    // The log does not exist yet; then it grows in ten pieces, cut at line ends, 0.3 s apart.
    std::thread::sleep(Duration::from_millis(400));
    let text = incident_log();
    let mut written = 0;
    for end in piece_ends(&text, 10) {
        append(&log, &text[written..end]);
        written = end;
        std::thread::sleep(Duration::from_millis(300));
    }
    // It stops by itself 2 s after the log said nothing new; never a hang.
    let (stdout, stderr) = stopped(child);
    let said: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let kinds: Vec<&str> = said.iter().map(|f| f["kind"].as_str().unwrap_or("")).collect();
    // Each once: the monopoly, the two SLO objectives missed, the truncations (one finding for all), and every stall
    // the whole log gives (a stall seen half-read could add one that the rest of the log unsays).
    let count = |k: &str| kinds.iter().filter(|&&x| x == k).count();
    assert_eq!(
        (count("prefill-monopoly"), count("slo-violations"), count("truncation")),
        (1, 2, 1),
        "{kinds:?}\n{stderr}"
    );
    let stalled: Vec<(&str, u64)> = said
        .iter()
        .filter(|f| f["kind"] == "decode-interrupted")
        .map(|f| {
            (
                f["requests"][0].as_str().unwrap_or(""),
                f["tokens"][0]["index"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    let whole = stalls_of_whole(&text, dir.path());
    assert!(whole.len() >= 2, "{whole:?}");
    assert!(
        whole.iter().all(|(r, i)| stalled.contains(&(r.as_str(), *i))),
        "{stalled:?} against the whole log's {whole:?}"
    );
    let mut once = stalled.clone();
    once.sort_unstable();
    once.dedup();
    assert_eq!(once.len(), stalled.len(), "a stall said twice: {stalled:?}");
    let first = |k: &str| said.iter().find(|f| f["kind"] == k).unwrap_or_else(|| panic!("{k}"));
    let interrupted = first("decode-interrupted");
    // The first said is the earliest stall.
    let earliest = whole.iter().min_by_key(|(_, i)| *i).unwrap();
    assert_eq!(interrupted["requests"][0], earliest.0.as_str());
    assert_eq!(interrupted["tokens"][0]["index"], earliest.1);
    assert!(
        interrupted["summary"]
            .as_str()
            .unwrap_or("")
            .contains("while task-54 prefilled")
    );
    assert_eq!(first("prefill-monopoly")["requests"][0], "task-54");
    // Only information: said, not kept.
    assert_eq!(first("truncation")["incident"], Value::Null);
    // The decode interruption's file: the requests alive around it, whole, and the finding in its note.
    let file = interrupted["incident"]
        .as_str()
        .unwrap_or_else(|| panic!("{interrupted}"));
    assert!(file.contains("-decode-interrupted.parquet"), "{file}");
    let trace = tokenscope::load::load(Path::new(file), &tokenscope::ingest::Progress::default())
        .unwrap_or_else(|e| panic!("{file}: {e}"))
        .trace;
    let note = trace.meta.note.clone().unwrap_or_default();
    assert!(
        note.contains("[decode-interrupted]") && note.contains("task-0's token 50"),
        "{note}"
    );
    for id in ["task-0", "task-54"] {
        let r = trace.request_row(id).unwrap_or_else(|| panic!("{id} kept"));
        assert!(!trace.tokens_of(r).is_empty(), "{id}'s tokens kept");
    }
    assert!(!trace.iterations.is_empty(), "the engine's steps kept");
    // Nothing else was written there but the ring's folder: one file per critical or warning finding, no temporary
    // file left.
    let mut names: Vec<String> = std::fs::read_dir(&kept)
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let kept_files = said.iter().filter(|f| !f["incident"].is_null()).count();
    assert_eq!(names.len(), kept_files, "{names:?}");
    assert_eq!(kept_files, said.len() - 1, "all but the truncations");
    assert!(
        names.iter().all(|n| n.starts_with("incident-") && !n.contains(".tmp")),
        "{names:?}"
    );
}

/// Runs `tokenscope watch` on a log written whole, with `--metrics URL`, until it stops by itself.
fn watch_with_metrics(log: &Path, kept: &Path, url: &str) -> (String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tokenscope"))
        .args([
            "watch",
            "--json",
            "--interval-s",
            "0.2",
            // Long enough for several readings however slow a look is on a busy machine (the test counts three).
            "--idle-exit",
            "3",
            "--metrics",
            url,
            "--log",
        ])
        .arg(log)
        .arg("--incidents")
        .arg(kept)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    (String::from_utf8_lossy(&out.stdout).into_owned(), stderr)
}

#[test]
fn watch_reads_the_servers_metrics_into_its_incidents_and_counts_a_metrics_page_it_cannot_read() {
    use crate::record::replay::{Behavior, start};
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let log = dir.path().join("server.log");
    std::fs::write(&log, incident_log()).unwrap_or_else(|e| panic!("{e}"));
    // A real llama-server's /metrics with two requests running and two deferred (tests/data/record/PROVENANCE.md).
    let page = std::fs::read_to_string("tests/data/record/llamacpp-metrics-busy.txt").unwrap_or_else(|e| panic!("{e}"));
    let server = start(Behavior::Page(page));
    let kept = dir.path().join("incidents");
    let (stdout, stderr) = watch_with_metrics(&log, &kept, &format!("{}/metrics", server.url));
    assert!(stderr.contains("metrics reading(s), 0 failed"), "{stderr}");
    let file = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|f| f["kind"] == "prefill-monopoly")
        .and_then(|f| f["incident"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("{stdout}"));
    let trace = tokenscope::load::load(Path::new(&file), &tokenscope::ingest::Progress::default())
        .unwrap_or_else(|e| panic!("{file}: {e}"))
        .trace;
    assert!(trace.request_row("task-54").is_some());
    // A reading at each look (every 0.2 s for the second the log stays still, and before): read and parsed, none
    // failed. (Their times are the watch's, today; the log's are the run's, a week ago: a live log's incident file
    // holds both, this one the log's alone.)
    let readings: u64 = stderr
        .split(" metrics reading(s)")
        .next()
        .and_then(|before| before.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(readings >= 3, "{stderr}");
    // Nothing listens there: each read fails, is counted, and the watch goes on to say the incidents.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let closed = format!(
        "http://{}/metrics",
        listener.local_addr().map(|a| a.to_string()).unwrap_or_default()
    );
    drop(listener);
    let (stdout, stderr) = watch_with_metrics(&log, &dir.path().join("again"), &closed);
    assert!(
        stderr.contains("watch: metrics: ") && stderr.contains("counted; watch goes on"),
        "{stderr}"
    );
    assert!(stderr.contains("0 metrics reading(s)"), "{stderr}");
    assert!(stdout.contains("\"prefill-monopoly\""), "{stdout}");
}

/// The real watch run (`tests/data/real/llamacpp-runs/`, `watch`): `tokenscope watch` followed a real llama-server's
/// log and `/metrics` while a separate `tokenscope record` sent the incident prompts; what it said is
/// `watch.findings.jsonl`, and the decode interruption's incident file is committed as it wrote it.
const WATCH_RUN: &str = "tests/data/real/llamacpp-runs/watch";

#[test]
fn the_real_watch_runs_incident_file_opens_with_the_engines_steps_and_the_requests_stages() {
    let file = format!("{WATCH_RUN}.incident-002-decode-interrupted.parquet");
    let trace = tokenscope::load::load(Path::new(&file), &tokenscope::ingest::Progress::default())
        .unwrap_or_else(|e| panic!("{file}: {e}"))
        .trace;
    let note = trace.meta.note.clone().unwrap_or_default();
    // Its finding is one a whole read of the run's log finds.
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let whole = stalls_of_whole(&gunzip(&format!("{WATCH_RUN}.server.log.gz")), dir.path());
    let kept = whole
        .iter()
        .find(|(r, i)| note.contains(&format!("{r}'s token {i} waited")))
        .unwrap_or_else(|| panic!("{note}: none of {whole:?}"));
    assert!(note.contains("[decode-interrupted]"), "{note}");
    // The engine's steps, and the 2,583-token prompt's prefill in the five chunks the log's `cached n_tokens`
    // lines give: 0, 1, 2,046, 2,067 and 2,579 tokens cached before each, 2,583 in all.
    assert!(trace.iterations.len() > 60, "{} steps", trace.iterations.len());
    let long = trace.request_row("task-66").unwrap_or_else(|| panic!("task-66 kept"));
    let chunks: Vec<u32> = trace
        .stages_of(long)
        .iter()
        .filter(|s| s.kind == StageKind::Prefill)
        .filter_map(|s| s.tokens)
        .collect();
    assert_eq!(chunks, [1, 2045, 21, 512, 4]);
    // The three answers it stalled are kept whole, each with its queue, prefill and decode.
    for id in ["task-17", "task-11", "task-1"] {
        let r = trace.request_row(id).unwrap_or_else(|| panic!("{id} kept"));
        assert!(
            trace.tokens_of(r).len() >= 60,
            "{id}: {} tokens",
            trace.tokens_of(r).len()
        );
        let kinds: Vec<StageKind> = trace.stages_of(r).iter().map(|s| s.kind).collect();
        for k in [StageKind::Queue, StageKind::Prefill, StageKind::Decode] {
            assert!(kinds.contains(&k), "{id}: {kinds:?}");
        }
    }
    // The finding the live watch said for it names the same file and the same token.
    let live = std::fs::read_to_string(format!("{WATCH_RUN}.findings.jsonl")).unwrap_or_else(|e| panic!("{e}"));
    let it: Value = live
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|f| {
            f["incident"]
                .as_str()
                .is_some_and(|p| p.ends_with("incident-002-decode-interrupted.parquet"))
        })
        .unwrap_or_else(|| panic!("{live}"));
    assert_eq!(
        said_as(&it),
        ("decode-interrupted".to_owned(), kept.0.clone(), Some(kept.1))
    );
}

#[test]
fn a_log_rotated_emptied_and_restarted_under_watch_loses_nothing_and_says_each_run_once() {
    let text = gunzip(&format!("{WATCH_RUN}.server.log.gz"));
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let log = dir.path().join("server.log");
    let kept = dir.path().join("incidents");
    let child = spawn_watch(&log, &kept, "4");
    let rotated = dir.path().join("server.log.1");
    let mut written = 0;
    for (k, end) in piece_ends(&text, 9).into_iter().enumerate() {
        if k == 3 {
            // Rotated as logrotate does by default: the file renamed away; the server writes this piece to it, the
            // file it still has open, before it opens a new one at the path. Only the watch's open handle reads it.
            std::fs::rename(&log, &rotated).unwrap_or_else(|e| panic!("{e}"));
        }
        if k == 6 {
            // Emptied in place (copytruncate, or `> server.log`) once the watch has read it, the server writing on.
            read_to_end_by(child.id(), &log);
            std::fs::File::create(&log).unwrap_or_else(|e| panic!("{e}"));
        }
        append(if k == 3 { &rotated } else { &log }, &text[written..end]);
        written = end;
        std::thread::sleep(Duration::from_millis(300));
    }
    // Then the server restarts, once the watch has read the run: its log begins again from its start, its clock
    // from 0.
    read_to_end_by(child.id(), &log);
    std::fs::write(&log, &text).unwrap_or_else(|e| panic!("{e}"));
    let (stdout, stderr) = stopped(child);
    assert!(stderr.contains("the server started again"), "{stderr}");
    let said: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    // What the live watch said of the run, said here once for the run and once for its restart.
    let live: Vec<(String, String, Option<u64>)> = std::fs::read_to_string(format!("{WATCH_RUN}.findings.jsonl"))
        .unwrap_or_else(|e| panic!("{e}"))
        .lines()
        .map(|l| said_as(&serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))))
        .collect();
    let here: Vec<(String, String, Option<u64>)> = said.iter().map(said_as).collect();
    for f in &live {
        let times = here.iter().filter(|&h| h == f).count();
        assert_eq!(times, 2, "{f:?} said {times} times: {here:?}\n{stderr}");
    }
    // Nothing lost or read twice: the first incident file, written again until the restart, holds every request
    // and token of the whole log read at once.
    let whole_log = dir.path().join("whole.log");
    std::fs::write(&whole_log, &text).unwrap_or_else(|e| panic!("{e}"));
    let whole = tokenscope::load::load(&whole_log, &tokenscope::ingest::Progress::default())
        .unwrap_or_else(|e| panic!("{e}"))
        .trace;
    let first = said
        .iter()
        .find(|f| f["kind"] == "decode-interrupted")
        .and_then(|f| f["incident"].as_str())
        .unwrap_or_else(|| panic!("{stdout}"));
    let kept_run = tokenscope::load::load(Path::new(first), &tokenscope::ingest::Progress::default())
        .unwrap_or_else(|e| panic!("{first}: {e}"))
        .trace;
    assert_eq!(kept_run.request_count(), whole.request_count());
    for r in 0..whole.request_count() {
        let id = whole.request_id(r as u32);
        let k = kept_run.request_row(id).unwrap_or_else(|| panic!("{id} lost"));
        assert_eq!(
            kept_run.tokens_of(k).len(),
            whole.tokens_of(r as u32).len(),
            "{id}'s tokens"
        );
    }
    assert_eq!(kept_run.iterations.len(), whole.iterations.len(), "steps");
    // The ring holds the last minutes; no temporary file is left anywhere.
    let ring: Vec<String> = std::fs::read_dir(kept.join("ring"))
        .unwrap_or_else(|e| panic!("{e}"))
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        !ring.is_empty() && ring.iter().all(|n| n.starts_with("part-") && !n.contains(".tmp")),
        "{ring:?}\n{stderr}"
    );
}

/// Steps frames, 50 ms apart, until `done` (at most 60 s: the watch runs in real time).
fn step_until(h: &mut Harness<'static, App>, what: &str, mut done: impl FnMut(&App) -> bool) {
    let start = Instant::now();
    while !done(h.state()) {
        assert!(start.elapsed() < Duration::from_mins(1), "waited a minute for {what}");
        std::thread::sleep(Duration::from_millis(50));
        h.step();
    }
}

#[test]
fn gui_the_app_watching_a_growing_log_shows_its_requests_and_findings_and_says_where_each_incident_was_kept() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let log = dir.path().join("server.log");
    let kept = dir.path().join("incidents");
    let options = WatchOptions {
        incidents: Some(kept.clone()),
        interval: Duration::from_millis(100),
        ..WatchOptions::of(&log)
    };
    let mut h = Harness::builder()
        .with_size(egui::vec2(1400.0, 860.0))
        .build_ui_state(|ui, app: &mut App| app.ui(ui), App::watching_in(options, None, None));
    h.step();
    h.get_by_label_contains("nothing is sent to the server");
    // The real incident run's log, written in five pieces while the window runs.
    let text = incident_log();
    let mut written = 0;
    for end in piece_ends(&text, 5) {
        append(&log, &text[written..end]);
        written = end;
        std::thread::sleep(Duration::from_millis(200));
        h.step();
    }
    let whole_log = dir.path().join("whole.log");
    std::fs::write(&whole_log, &text).unwrap_or_else(|e| panic!("{e}"));
    let whole = tokenscope::load::load(&whole_log, &tokenscope::ingest::Progress::default())
        .unwrap_or_else(|e| panic!("{e}"))
        .trace;
    // The watch's trace on screen grows to the whole log's requests and tokens, with its findings: task-0's stall
    // behind task-54's prefill among them.
    step_until(&mut h, "every request and token of the log", |a| {
        a.session().is_some_and(|s| {
            s.view.trace.request_count() == whole.request_count() && s.view.trace.token_count() == whole.token_count()
        })
    });
    step_until(&mut h, "the interruption among the findings", |a| {
        a.session()
            .and_then(|s| s.findings.findings.as_ref())
            .is_some_and(|f| f.iter().any(|f| f.kind == Kind::DecodeInterrupted))
    });
    let s = h.state().session().unwrap_or_else(|| panic!("a session"));
    assert_eq!(s.source, TraceSource::Watch { log: log.clone() });
    // The bar says each finding once, with the file it was kept in, and the file is there.
    step_until(&mut h, "the bar to say the interruption", |a| {
        a.watching().is_some_and(|w| {
            w.said
                .iter()
                .any(|l| l.contains("Decode interrupted by prefill (critical), kept in"))
        })
    });
    let w = h.state().watching().unwrap_or_else(|| panic!("watching"));
    let monopolies = w.said.iter().filter(|l| l.contains("Prefill monopoly")).count();
    assert_eq!(monopolies, 1, "{:?}", w.said);
    let file = w
        .said
        .iter()
        .find_map(|l| {
            l.split_once("Decode interrupted by prefill (critical), kept in ")
                .map(|(_, f)| f.to_owned())
        })
        .unwrap_or_default();
    assert!(
        Path::new(&file).starts_with(&kept) && Path::new(&file).exists(),
        "{file}"
    );
    // The bar shows the latest things said.
    let latest = w.said.last().cloned().unwrap_or_default();
    h.step();
    h.get_by_label(&latest);
    // Another trace opened over the watch stays on screen as the watch goes on; Show the watch brings it back.
    let other = TraceSource::Path(whole_log.clone());
    h.state_mut().open(other.clone());
    step_until(&mut h, "the other trace on screen", |a| {
        a.session().is_some_and(|s| s.source == other)
    });
    for _ in 0..5 {
        std::thread::sleep(Duration::from_millis(120));
        h.step();
    }
    assert!(h.state().session().is_some_and(|s| s.source == other));
    h.get_by_label("Show the watch").click();
    step_until(&mut h, "the watch on screen again", |a| {
        a.session()
            .is_some_and(|s| matches!(s.source, TraceSource::Watch { .. }))
    });
    // Stop: the watch's last look, then no more.
    h.get_by_label("Stop watching").click();
    step_until(&mut h, "the watch to stop", |a| {
        a.watching().is_some_and(|w| !w.running())
    });
    assert!(
        kept.join("ring").read_dir().is_ok_and(|mut d| d.next().is_some()),
        "the ring's part written at the stop"
    );
}

/// What a trace's samples say, reading by reading: source, time, requests running and the throughput of prompts.
fn readings(trace: &tokenscope::trace::Trace) -> Vec<(String, i64, Option<u32>, Option<u64>)> {
    let s = &trace.samples;
    (0..s.time_ns.len())
        .map(|i| {
            (
                trace.labels.get(s.source[i]).unwrap_or("").to_owned(),
                s.time_ns[i],
                s.num_running[i],
                // Throughputs are printed with one decimal: compared in tenths.
                s.prompt_throughput[i].map(|t| (t * 10.0).round() as u64),
            )
        })
        .collect()
}

/// A vLLM or SGLang log followed as a server writes it: in six pieces, renamed away after the first (the server
/// writing the second to the renamed file, the third to a new one) and emptied in place before the fourth. The
/// trace made of what was followed holds every reading of the whole log once; a second uvicorn start is a restart;
/// and what is older than the window is forgotten.
#[test]
fn a_vllm_or_sglang_log_followed_across_rotation_and_emptying_reads_every_line_once() {
    // Each log's last line is at its last reading's second (vLLM's 17:02:13, SGLang's 00:00:09); the window kept at
    // the end holds that and the readings of the seconds before it.
    for (fixture, keep_s) in [
        ("tests/data/import/vllm/logs/0.15.1-dp2-spec.log", 25),
        ("tests/data/import/sglang/logs/0.5.23-dp2.log", 3),
    ] {
        let text = std::fs::read(fixture).unwrap_or_else(|e| panic!("{fixture}: {e}"));
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let log = dir.path().join("server.log");
        let whole_log = dir.path().join("whole.log");
        std::fs::write(&whole_log, &text).unwrap_or_else(|e| panic!("{e}"));
        let whole = tokenscope::load::load(&whole_log, &tokenscope::ingest::Progress::default())
            .unwrap_or_else(|e| panic!("{fixture}: {e}"))
            .trace;
        assert!(
            whole.samples.time_ns.len() >= 10,
            "{fixture}: {} readings",
            whole.samples.time_ns.len()
        );
        let mut tail = tokenscope::record::server_tail::ServerLogTail::new(&log);
        let ends = piece_ends(&text, 6);
        let piece = |k: usize| &text[if k == 0 { 0 } else { ends[k - 1] }..ends[k]];
        // What a server started under nohup writes first, before its own lines: nothing says which log it is yet.
        append(&log, b"nohup: ignoring input\n");
        tail.poll().unwrap_or_else(|e| panic!("{e}"));
        assert!(tail.loaded().is_none(), "{fixture}: a trace of nothing");
        append(&log, piece(0));
        tail.poll().unwrap_or_else(|e| panic!("{e}"));
        let first = tail.loaded().map_or(0, |l| l.trace.samples.time_ns.len());
        assert!(
            first < whole.samples.time_ns.len(),
            "{fixture}: {first} readings of the first piece"
        );
        std::fs::rename(&log, dir.path().join("server.log.1")).unwrap_or_else(|e| panic!("{e}"));
        append(&dir.path().join("server.log.1"), piece(1));
        append(&log, piece(2));
        tail.poll().unwrap_or_else(|e| panic!("{e}"));
        std::fs::File::create(&log).unwrap_or_else(|e| panic!("{e}"));
        for k in 3..6 {
            append(&log, piece(k));
            tail.poll().unwrap_or_else(|e| panic!("{e}"));
        }
        let followed = &tail.loaded().unwrap_or_else(|| panic!("{fixture}: no trace")).trace;
        assert_eq!(readings(followed), readings(&whole), "{fixture}");
        assert_eq!(tail.restarts(), 0, "{fixture}");

        // The server started again, appending to its log: counted once however many API servers say so, what it
        // said before kept.
        append(
            &log,
            b"INFO:     Started server process [4243]\nINFO:     Started server process [4244]\n",
        );
        tail.poll().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(tail.restarts(), 1, "{fixture}");

        // Forgetting all but the last seconds of the log: the readings older than that go at the next read.
        let last_ns = *whole.samples.time_ns.iter().max().unwrap_or(&0);
        tail.forget_older_than(f64::from(keep_s));
        append(&log, b"INFO:     a line of no time\n");
        tail.poll().unwrap_or_else(|e| panic!("{e}"));
        let kept = readings(&tail.loaded().unwrap_or_else(|| panic!("no trace")).trace);
        let want: Vec<_> = readings(&whole)
            .into_iter()
            .filter(|r| r.1 >= last_ns - i64::from(keep_s) * 1_000_000_000)
            .collect();
        assert!(
            !want.is_empty() && want.len() < whole.samples.time_ns.len(),
            "{fixture}"
        );
        assert_eq!(kept, want, "{fixture}");
    }
}

/// The requests of a trace: id, arrival and end.
fn requests_of(trace: &tokenscope::trace::Trace) -> Vec<(String, i64, Option<i64>)> {
    let mut out: Vec<_> = (0..trace.request_count())
        .map(|r| {
            let r32 = u32::try_from(r).unwrap_or(u32::MAX);
            (
                trace.request_id(r32).to_owned(),
                trace.requests.arrival_ns[r],
                trace.requests.finished_ns.at(r),
            )
        })
        .collect();
    out.sort();
    out
}

/// Spans sent to a watch's receiver as vLLM's and SGLang's exporters send them (gRPC, their default; OTLP/HTTP in
/// protobuf, gzip or not; OTLP/HTTP JSON) make the requests that reading the same exports from files makes; a body
/// that is no export, and a request for another path, are refused, answered with why and counted.
#[test]
fn the_otlp_receiver_takes_grpc_and_http_exports_and_refuses_what_is_none() {
    use std::io::Write as _;
    let vllm = "tests/data/import/vllm/engine/0.15.1/long_prompt/000.pb";
    let sglang = [
        "tests/data/import/sglang/engine/0.5.23/mixed/001.pb",
        "tests/data/import/sglang/engine/0.5.23/mixed/002.pb",
    ];
    let json = "tests/data/import/vllm/otlp_small.jsonl";
    let read = |p: &str| std::fs::read(p).unwrap_or_else(|e| panic!("{p}: {e}"));
    let mut receiver = tokenscope::record::receiver::Receiver::start("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let base = format!("http://{}", receiver.addr());
    let runtime = tokio::runtime::Runtime::new().unwrap_or_else(|e| panic!("{e}"));
    let answers = runtime.block_on(async {
        let h2 = reqwest::Client::builder()
            .http2_prior_knowledge()
            .build()
            .unwrap_or_else(|e| panic!("{e}"));
        let h1 = reqwest::Client::new();
        let mut answers = Vec::new();
        // gRPC: the message in its 5-byte frame (not compressed, its length big-endian).
        let message = read(vllm);
        let mut frame = vec![0u8];
        frame.extend_from_slice(&u32::try_from(message.len()).unwrap_or(0).to_be_bytes());
        frame.extend_from_slice(&message);
        let grpc = h2
            .post(format!(
                "{base}/opentelemetry.proto.collector.trace.v1.TraceService/Export"
            ))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(frame)
            .send()
            .await
            .unwrap_or_else(|e| panic!("gRPC: {e}"));
        answers.push((
            grpc.status().as_u16(),
            grpc.headers()["content-type"].to_str().unwrap_or("").to_owned(),
        ));
        // OTLP/HTTP protobuf, the first gzipped.
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(&read(sglang[0])).unwrap_or_else(|e| panic!("{e}"));
        let zipped = gz.finish().unwrap_or_else(|e| panic!("{e}"));
        for (body, encoding) in [(zipped, Some("gzip")), (read(sglang[1]), None)] {
            let mut post = h1
                .post(format!("{base}/v1/traces"))
                .header("content-type", "application/x-protobuf")
                .body(body);
            if let Some(e) = encoding {
                post = post.header("content-encoding", e);
            }
            let a = post.send().await.unwrap_or_else(|e| panic!("{e}"));
            answers.push((a.status().as_u16(), String::new()));
        }
        // OTLP/HTTP JSON: each line of the file one export.
        for line in String::from_utf8(read(json)).unwrap_or_default().lines() {
            let a = h1
                .post(format!("{base}/v1/traces"))
                .header("content-type", "application/json")
                .body(line.to_owned())
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            answers.push((a.status().as_u16(), a.text().await.unwrap_or_default()));
        }
        // No export, and not the path.
        let garbage = h1
            .post(format!("{base}/v1/traces"))
            .header("content-type", "application/x-protobuf")
            .body(vec![0xff_u8; 40])
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        answers.push((garbage.status().as_u16(), String::new()));
        let elsewhere = h1
            .get(format!("{base}/v1/metrics"))
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        answers.push((elsewhere.status().as_u16(), String::new()));
        answers
    });
    assert_eq!(
        answers,
        vec![
            (200, "application/grpc".to_owned()),
            (200, String::new()),
            (200, String::new()),
            (200, "{}".to_owned()),
            (200, "{}".to_owned()),
            (400, String::new()),
            (404, String::new()),
        ]
    );
    let (came, troubles) = receiver.take();
    assert!(came);
    assert_eq!((receiver.received, receiver.refused), (5, 2));
    assert_eq!(troubles.len(), 2, "{troubles:?}");
    assert!(troubles[0].contains("not an OTLP protobuf"), "{troubles:?}");
    assert!(troubles[1].contains("only POST /v1/traces"), "{troubles:?}");

    let (live, _) = tokenscope::import::live(&[receiver.part()]);
    let files: Vec<&Path> = [vllm, sglang[0], sglang[1], json]
        .iter()
        .map(|p| Path::new(*p))
        .collect();
    let loaded = tokenscope::load::load_many(
        &files,
        &tokenscope::ingest::Progress::default(),
        tokenscope::load::LoadOptions::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"))
    .trace;
    // vLLM's long prompt (1), SGLang's mixed batch (its requests), the hand-written vLLM pair (2).
    assert!(loaded.request_count() >= 4, "{}", loaded.request_count());
    assert_eq!(requests_of(&live), requests_of(&loaded));
}

/// `watch --otlp` without a log: the spans a server exports are what is watched. The receiver's address (port 0:
/// a free one) is said on stderr; an export sent there is counted and its requests held; with neither a log nor a
/// receiver, watch says the log is needed.
#[test]
fn watch_with_only_a_receiver_takes_the_spans_exported_to_it() {
    use std::io::BufRead as _;
    let mut child = Command::new(env!("CARGO_BIN_EXE_tokenscope"))
        .args([
            "watch",
            "--json",
            "--interval-s",
            "0.2",
            // Time for the test to make its client and send the export, however busy the machine.
            "--idle-exit",
            "6",
            "--otlp",
            "127.0.0.1:0",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap_or_else(|| panic!("no stderr")));
    let mut said = String::new();
    let url = loop {
        let mut line = String::new();
        assert!(
            stderr.read_line(&mut line).unwrap_or(0) > 0,
            "watch ended before saying its address: {said}"
        );
        said.push_str(&line);
        if let Some(url) = line.trim().strip_prefix("receiving spans on ") {
            break url.to_owned();
        }
    };
    assert!(said.contains("watching the spans received on 127.0.0.1:0"), "{said}");
    assert_eq!(post_vllm_export(&url), 200);
    let started = Instant::now();
    while child.try_wait().ok().flatten().is_none() {
        assert!(started.elapsed() < Duration::from_mins(1), "watch did not stop");
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut rest = String::new();
    stderr.read_to_string(&mut rest).unwrap_or_else(|e| panic!("{e}"));
    // vLLM 0.33's long-prompt scenario: two requests, one export.
    assert!(
        rest.contains("2 requests held at most") && rest.contains("1 OTLP export(s) received"),
        "{rest}"
    );
    let (code, _, err) = crate::common::tokenscope(&["watch", "--json"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("required arguments were not provided") && err.contains("--log"),
        "{err}"
    );
}

/// A look hands out what it read before it is judged, and what it judged before its incident files are written
/// (the window shows each without waiting for the next); the files come with `write_due`, and a plain `look` does
/// all three.
#[test]
fn a_look_is_handed_out_read_then_judged_then_its_incident_files_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let (log, kept) = (dir.path().join("server.log"), dir.path().join("kept"));
    std::fs::write(&log, incident_log()).unwrap();
    let mut options = WatchOptions::of(&log);
    options.incidents = Some(kept.clone());
    let mut watcher = tokenscope::record::watcher::Watcher::new(options).unwrap();
    // Read: the trace the window shows first, not judged yet.
    assert!(watcher.read(false).is_empty());
    assert!(watcher.trace().is_some_and(|t| t.request_count() == 5));
    assert!(watcher.findings().is_empty());
    let (new, notes) = watcher.judge();
    assert!(notes.is_empty(), "{notes:?}");
    assert!(!watcher.findings().is_empty());
    // The incident run's interruption and monopoly (its own findings, `incident_log`): each kept in a file...
    let files: Vec<std::path::PathBuf> = new.iter().filter_map(|n| n.file.clone()).collect();
    assert!(
        new.iter().any(|n| n.finding.kind == Kind::DecodeInterrupted),
        "{:?}",
        new.iter().map(|n| n.finding.kind).collect::<Vec<_>>()
    );
    assert!(!files.is_empty());
    // ...not written yet: the look is the window's first.
    assert!(files.iter().all(|f| !f.exists()), "{files:?}");
    assert!(watcher.trace().is_some_and(|t| t.request_count() > 0));
    // Then written, each a trace of the minutes around its finding.
    assert!(watcher.write_due().is_empty());
    for f in &files {
        let t = tokenscope::load::load(f, &tokenscope::ingest::Progress::default())
            .unwrap()
            .trace;
        assert!(t.request_count() > 0 && !t.iterations.is_empty(), "{}", f.display());
    }
    // Nothing is due twice.
    for f in &files {
        std::fs::remove_file(f).unwrap();
    }
    assert!(watcher.write_due().is_empty());
    assert!(files.iter().all(|f| !f.exists()));
}

/// vLLM 0.33's long-prompt export (two requests) posted as its exporter posts it to `url`; the answer's status.
fn post_vllm_export(url: &str) -> u16 {
    let body =
        std::fs::read("tests/data/import/vllm/engine/0.33.0/long_prompt/000.pb").unwrap_or_else(|e| panic!("{e}"));
    let runtime = tokio::runtime::Runtime::new().unwrap_or_else(|e| panic!("{e}"));
    runtime.block_on(async {
        reqwest::Client::new()
            .post(url)
            .header("content-type", "application/x-protobuf")
            .body(body)
            .send()
            .await
            .map_or_else(|e| panic!("{e}"), |r| r.status().as_u16())
    })
}

/// Waits for the watch's next look, `stop` saying stop after `asks` askings (it is asked every 10 ms while the watch
/// waits): how many times it was asked, which says why the wait ended (more than `asks`: it was stopped).
fn wait_asking(watcher: &tokenscope::record::watcher::Watcher, asks: usize) -> usize {
    let asked = std::cell::Cell::new(0);
    watcher.wait(|| {
        asked.set(asked.get() + 1);
        asked.get() > asks
    });
    asked.get()
}

/// A watch looks again as soon as its log grows, not at the interval (a line waits a tenth of a second to be read,
/// not a second), and waits out the interval when the log is still; the server's metrics are read at the interval
/// whatever the pace of the looks.
#[test]
fn a_watch_looks_again_as_soon_as_its_log_grows_and_reads_the_metrics_at_the_interval() {
    use crate::record::replay::{Behavior, start};
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server.log");
    let text = incident_log();
    let ends = piece_ends(&text, 4);
    std::fs::write(&log, &text[..ends[0]]).unwrap();
    let page = std::fs::read_to_string("tests/data/record/llamacpp-metrics-busy.txt").unwrap();
    let server = start(Behavior::Page(page));
    let options = WatchOptions {
        // Longer than the test: the looks it sees come from the log's growth.
        interval: Duration::from_mins(10),
        metrics: Some(format!("{}/metrics", server.url)),
        ..WatchOptions::of(&log)
    };
    let mut watcher = tokenscope::record::watcher::Watcher::new(options).unwrap();
    let mut look_began = Instant::now();
    let (_, notes) = watcher.look(false);
    assert!(notes.is_empty(), "{notes:?}");
    // Read to its end and still: the wait goes on until told to stop (20 asks, some 200 ms).
    assert_eq!(wait_asking(&watcher, 20), 21);
    for (k, pair) in ends.windows(2).enumerate() {
        append(&log, &text[pair[0]..pair[1]]);
        // Grown: the wait ends by itself, long before the interval (a minute of asks is far more than it takes)...
        assert!(
            wait_asking(&watcher, 6_000) <= 6_000,
            "piece {k}: the wait did not end when the log grew"
        );
        // ...but not sooner than a tenth of a second after the last look began.
        assert!(look_began.elapsed() >= Duration::from_millis(100), "piece {k}");
        look_began = Instant::now();
        let (_, notes) = watcher.look(false);
        assert!(notes.is_empty(), "{notes:?}");
    }
    // Four looks in all; the metrics read once, at the first: the interval has not passed since.
    assert!(
        watcher.summary().contains("; 1 metrics reading(s), 0 failed"),
        "{}",
        watcher.summary()
    );
    // Every line read: the whole log's tokens.
    let whole = dir.path().join("whole.log");
    std::fs::write(&whole, &text).unwrap();
    let whole = tokenscope::load::load(&whole, &tokenscope::ingest::Progress::default())
        .unwrap()
        .trace;
    assert_eq!(
        watcher.trace().map(tokenscope::trace::Trace::token_count),
        Some(whole.token_count())
    );
}

/// A watch of spans alone looks as soon as an export comes, not at the interval.
#[test]
fn a_watch_of_spans_looks_again_as_soon_as_an_export_comes() {
    let options = WatchOptions {
        otlp: Some("127.0.0.1:0".to_owned()),
        interval: Duration::from_mins(10),
        log: None,
        ..WatchOptions::of(Path::new(""))
    };
    let mut watcher = tokenscope::record::watcher::Watcher::new(options).unwrap();
    let url = format!(
        "http://{}/v1/traces",
        watcher.otlp_addr().unwrap_or_else(|| panic!("a receiver"))
    );
    let _ = watcher.look(false);
    // Nothing came: the wait goes on until told to stop.
    assert_eq!(wait_asking(&watcher, 20), 21);
    assert_eq!(post_vllm_export(&url), 200);
    // An export came: the wait ends by itself, and the look takes it (vLLM 0.33's long prompt: two requests).
    assert!(
        wait_asking(&watcher, 6_000) <= 6_000,
        "the wait did not end when an export came"
    );
    let _ = watcher.look(false);
    assert_eq!(watcher.trace().map(tokenscope::trace::Trace::request_count), Some(2));
}
