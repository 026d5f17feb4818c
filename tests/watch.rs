//! `tokenscope watch` (issue 50): a real llama-server's log, written a piece at a time as the server wrote it, is
//! followed with nothing sent to any server; each incident is said once, as it happens, and kept.

use std::io::Read as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The real incident run's server log (`tests/data/real/llamacpp/`): three answers decoding when a 2,574-token
/// prompt arrives; its own findings name a decode interruption of task-0 by task-54 and task-54's prefill monopoly.
fn incident_log() -> Vec<u8> {
    let gz = std::fs::read("tests/data/real/llamacpp/incident_server.log.gz").unwrap_or_else(|e| panic!("{e}"));
    let mut text = Vec::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_end(&mut text)
        .unwrap_or_else(|e| panic!("{e}"));
    text
}

#[test]
fn watch_says_each_incident_of_a_growing_log_once_and_keeps_the_minutes_around_it() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let log = dir.path().join("server.log");
    let kept = dir.path().join("incidents");
    let mut child = Command::new(env!("CARGO_BIN_EXE_tokenscope"))
        .args(["watch", "--json", "--interval-s", "0.2", "--idle-exit", "2", "--log"])
        .arg(&log)
        .arg("--incidents")
        .arg(&kept)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    // The log does not exist yet; then it grows in ten pieces, cut at line ends, 0.3 s apart.
    std::thread::sleep(Duration::from_millis(400));
    let text = incident_log();
    let ends: Vec<usize> = (1..=10)
        .map(|k| {
            let at = text.len() * k / 10;
            text[at..]
                .iter()
                .position(|&b| b == b'\n')
                .map_or(text.len(), |p| at + p + 1)
        })
        .collect();
    let mut written = 0;
    for end in ends {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .unwrap_or_else(|e| panic!("{e}"));
        std::io::Write::write_all(&mut f, &text[written..end]).unwrap_or_else(|e| panic!("{e}"));
        written = end;
        std::thread::sleep(Duration::from_millis(300));
    }
    // It stops by itself 2 s after the log stopped growing; never a hang.
    let started = Instant::now();
    while child.try_wait().ok().flatten().is_none() {
        assert!(started.elapsed() < Duration::from_mins(2), "watch did not stop");
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap_or_else(|e| panic!("{e}"));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(out.status.success(), "{stderr}");
    let said: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let kinds: Vec<&str> = said.iter().map(|f| f["kind"].as_str().unwrap_or("")).collect();
    // Each once: the monopoly, the two SLO objectives missed, the truncations (one finding for all), and the two
    // stalls of task-0 (tokens 50 and 52; a stall seen half-read could add one that the rest of the log unsays).
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
    assert!(
        stalled.contains(&("task-0", 50)) && stalled.contains(&("task-0", 52)),
        "{stalled:?}"
    );
    let mut once = stalled.clone();
    once.sort_unstable();
    once.dedup();
    assert_eq!(once.len(), stalled.len(), "a stall said twice: {stalled:?}");
    let first = |k: &str| said.iter().find(|f| f["kind"] == k).unwrap_or_else(|| panic!("{k}"));
    let interrupted = first("decode-interrupted");
    assert_eq!(interrupted["requests"][0], "task-0");
    assert_eq!(interrupted["tokens"][0]["index"], 50);
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
    // Nothing else was written there: one file per critical or warning finding, no temporary file left.
    let mut names: Vec<String> = std::fs::read_dir(&kept)
        .unwrap_or_else(|e| panic!("{e}"))
        .map(|e| {
            e.map(|e| e.file_name().to_string_lossy().into_owned())
                .unwrap_or_default()
        })
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
            "--idle-exit",
            "1",
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
