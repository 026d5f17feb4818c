//! The live view's costs (`record --live`).
//!
//! 1. A snapshot by size: a journal of real chat chunks (the llama.cpp capture's, with top-3 logprobs) read whole by
//!    the live view's tail, made into a trace, and its findings; beside the same file loaded as a trace, the
//!    reference, in the same run.
//! 2. From a chunk's arrival to its token in a snapshot ready to draw, and to its token on screen (read by the
//!    window's reader of the journal's newest lines, drawn over the snapshot, or in a snapshot, whichever comes
//!    first), against the local replay server: 64 streams paced to 5,000 tokens/s in all, the recorder and the live
//!    view in this process, polled once a frame (60 Hz) as the app does.
//!
//! 3. Memory over the run: resident memory once a second; with `--rotate-every`, the recording is written as parts
//!    (as `record --live --rotate-every` does) and leaves memory as each is written.
//!
//! 4. The server's log joined with a snapshot: read whole, and read as it is written.
//! 5. With `--frames-seconds S`: the app's whole frame while live (CPU: egui's layout and tessellation), in each
//!    layout.
//!
//! `cargo bench --bench live [-- --tokens 10000,100000,500000 --seconds 8 --rotate-every 5 --frames-seconds 20]`
//! (`--tokens 0` leaves out the snapshots by size)

/// The allocator the command and the app run with (`src/main.rs`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "../tests/it/common/replay.rs"]
mod replay;

use std::io::Write;
use std::time::{Duration, Instant};

use tokenscope::analysis::findings::{Thresholds, find};
use tokenscope::analysis::summary::Slo;
use tokenscope::record::client::{Limits, Sampling};
use tokenscope::record::prompts::{Body, Prompt};
use tokenscope::record::tail::JournalTail;
use tokenscope::record::{RecordOptions, journal};
use tokenscope::ui::shell::live::{Live, LiveOptions};

const FRAME: Duration = Duration::from_micros(16_667);

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn chunk() -> String {
    let capture = std::fs::read_to_string("tests/data/record/chat_length.sse").unwrap_or_else(|e| panic!("{e}"));
    let data: Vec<&str> = capture.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
    data[1].to_owned()
}

/// A journal of `tokens` chunks over requests of 200 tokens each, 10 ms apart, every request ended.
fn write_journal(path: &std::path::Path, tokens: usize) {
    let data = chunk();
    let mut w = std::io::BufWriter::new(std::fs::File::create(path).unwrap_or_else(|e| panic!("{e}")));
    let t0 = 1_764_403_200_000_000_000_i64;
    let per = 200;
    for r in 0..tokens.div_ceil(per) {
        let id = format!("rec-{r:05}");
        let sent = t0 + i64::try_from(r).unwrap_or(0) * 50_000_000;
        let n = per.min(tokens - r * per);
        for k in 0..n {
            let at = sent + 100_000_000 + i64::try_from(k).unwrap_or(0) * 10_000_000;
            let line = serde_json::json!({"request_id": id, "sent_ns": sent, "events": [[at, data]]});
            writeln!(w, "{line}").unwrap_or_else(|e| panic!("{e}"));
        }
        let end = sent + 100_000_000 + i64::try_from(n).unwrap_or(0) * 10_000_000;
        let line =
            serde_json::json!({"request_id": id, "sent_ns": sent, "end_ns": end, "ending": "done", "events": []});
        writeln!(w, "{line}").unwrap_or_else(|e| panic!("{e}"));
    }
    w.flush().unwrap_or_else(|e| panic!("{e}"));
}

fn snapshot_costs(sizes: &[usize]) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    println!("snapshot by size (journal read whole; reference: the same file loaded as a trace)");
    println!(
        "{:>9} {:>9} {:>10} {:>10} {:>10} {:>10} {:>8} {:>12}",
        "tokens", "MiB", "read ms", "trace ms", "find ms", "load ms", "ratio", "UI swap ms"
    );
    for &n in sizes {
        let path = dir.path().join(format!("j{n}.jsonl"));
        write_journal(&path, n);
        let mib = std::fs::metadata(&path).map_or(0.0, |m| m.len() as f64 / f64::from(1 << 20));
        let start = Instant::now();
        let mut tail = JournalTail::new(&path);
        while tail.poll().unwrap_or_else(|e| panic!("{e}")).fresh > 0 {}
        let read = start.elapsed();
        let start = Instant::now();
        let loaded = tail.snapshot();
        let trace_t = start.elapsed();
        assert_eq!(loaded.trace.token_count(), n);
        let start = Instant::now();
        let findings = find(&loaded.trace, &Slo::DEFAULT, &Thresholds::default());
        let find_t = start.elapsed();
        // What the window's thread does with a snapshot: the view of the new trace (Session::retrace).
        let trace = std::sync::Arc::new(loaded.trace);
        let start = Instant::now();
        let view = tokenscope::view::TraceView::new(
            std::sync::Arc::clone(&trace),
            tokenscope::view::layout::TrackOrder::default(),
            &tokenscope::view::layout::TrackFilter::default(),
        );
        let swap_t = start.elapsed();
        assert_eq!(view.trace.token_count(), n);
        let start = Instant::now();
        let reference =
            tokenscope::load::load(&path, &tokenscope::ingest::Progress::default()).unwrap_or_else(|e| panic!("{e}"));
        let load_t = start.elapsed();
        assert_eq!(reference.trace.token_count(), n);
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        println!(
            "{n:>9} {mib:>9.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>7.2}x {:>12.2}   ({} findings)",
            ms(read),
            ms(trace_t),
            ms(find_t),
            ms(load_t),
            (ms(read) + ms(trace_t)) / ms(load_t),
            ms(swap_t),
            findings.len()
        );
    }
}

/// This process's resident memory, bytes (Linux; 0 elsewhere).
fn resident() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1).and_then(|p| p.parse::<u64>().ok()))
        .map_or(0, |pages| pages * 4096)
}

/// A live recording of the local replay server: 64 streams paced to 5,000 tokens/s in all for about `seconds`,
/// rotating every `rotate_every` seconds when given; the server, its directory, the options and the request count.
fn live_run(seconds: f64, rotate_every: Option<f64>) -> (replay::Server, tempfile::TempDir, LiveOptions, usize) {
    let streams = 64;
    // chat_length.sse: 42 token chunks; 5,000 tokens/s over 64 streams is one chunk per stream every 12.8 ms.
    let gap = Duration::from_micros(12_800);
    let capture = std::fs::read_to_string("tests/data/record/chat_length.sse").unwrap_or_else(|e| panic!("{e}"));
    let server = replay::start(replay::Behavior::replay(&capture, gap));
    let per_request = 44.0 * gap.as_secs_f64();
    let requests = (seconds / per_request).ceil() as usize * streams;
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let output = dir.path().join("live.parquet");
    let defaults = RecordOptions::to(&server.url, requests);
    let options = RecordOptions {
        concurrency: streams,
        sampling: Sampling {
            max_tokens: 42,
            top_logprobs: 3,
            ..defaults.sampling.clone()
        },
        eos_ids: vec![1],
        limits: Limits {
            idle: Duration::from_secs(30),
            ..defaults.limits
        },
        grace: Duration::from_secs(1),
        journal: Some(journal::path_for(&output)),
        ..defaults
    };
    // Rotating: the parts go to a directory, the journal in it, as `record --live --rotate-every` does.
    let (options, output) = match rotate_every {
        Some(every) => {
            let parts = dir.path().join("parts");
            std::fs::create_dir_all(&parts).unwrap_or_else(|e| panic!("{e}"));
            let options = RecordOptions {
                journal: Some(parts.join("journal.partial.jsonl")),
                rotate: Some(tokenscope::record::rotate::Rotation {
                    dir: parts.clone(),
                    every: Some(Duration::from_secs_f64(every)),
                    bytes: None,
                }),
                ..options
            };
            (options, parts)
        }
        None => (options, output),
    };
    let prompts = vec![Prompt {
        body: Body::Text("x".into()),
        max_tokens: None,
        app_id: None,
        user_id: None,
        at_ms: None,
    }];
    let live = LiveOptions {
        options,
        prompts,
        output,
        raw: None,
        server_log: None,
    };
    (server, dir, live, requests)
}

fn latency(seconds: f64, rotate_every: Option<f64>) {
    let rss0 = resident();
    let streams = 64;
    let (_server, _dir, options, requests) = live_run(seconds, rotate_every);
    let mut live = Live::start(options, None).unwrap_or_else(|e| panic!("{e}"));
    let now_ns = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
    };
    let mut delays: Vec<f64> = Vec::new();
    let mut builds: Vec<f64> = Vec::new();
    let mut seen_until = i64::MIN;
    // On screen: a token counts once, in the first frame that draws it, over the snapshot or in it (the newest
    // arrival drawn, per request). Over the snapshot, a token is a tick on its request's track, or on the row of a
    // request sent since, below the tracks, as the app draws them.
    let mut on_screen: Vec<f64> = Vec::new();
    let mut by_snapshot = 0usize;
    let mut drawn: std::collections::HashMap<String, i64> = std::collections::HashMap::new();
    let mut polls: Vec<f64> = Vec::new();
    let start = Instant::now();
    // Resident memory once a second: a bounded session levels off.
    let mut rss_seen: Vec<(f64, u64)> = Vec::new();
    while live.running() && start.elapsed() < Duration::from_secs_f64(seconds * 3.0 + 10.0) {
        if let Some(s) = live.poll(None, Slo::DEFAULT, Thresholds::default()) {
            let ready = now_ns();
            builds.push(s.took.as_secs_f64() * 1e3);
            let t = &s.loaded.trace;
            let mut newest = seen_until;
            for k in 0..t.token_count() {
                let at = t.tokens.emitted_ns[k];
                if at > seen_until {
                    delays.push((ready - at) as f64 / 1e6);
                    newest = newest.max(at);
                }
                let id = t.request_id(t.tokens.request[k]);
                let last = drawn.entry(id.to_owned()).or_insert(i64::MIN);
                if at > *last {
                    on_screen.push((ready - at) as f64 / 1e6);
                    by_snapshot += 1;
                    *last = at;
                }
            }
            seen_until = newest;
            // Shown, as the app does: what it holds leaves the tokens drawn over it.
            if s.is_final {
                live.fresh.end();
            } else {
                live.fresh.taken(s.progress.file, s.progress.lines_end);
            }
        }
        // The window's frame: the journal's newest lines, drawn over the snapshot.
        let polled = Instant::now();
        let _ = live.fresh.poll();
        polls.push(polled.elapsed().as_secs_f64() * 1e3);
        let now = now_ns();
        for token in live.fresh.tokens() {
            let last = drawn.entry(token.request_id.clone()).or_insert(i64::MIN);
            if token.at_ns > *last {
                on_screen.push((now - token.at_ns) as f64 / 1e6);
                *last = token.at_ns;
            }
        }
        let t = start.elapsed().as_secs_f64();
        if rss_seen.last().is_none_or(|(at, _)| t - at >= 1.0) {
            rss_seen.push((t, resident()));
        }
        std::thread::sleep(FRAME);
    }
    let elapsed = start.elapsed().as_secs_f64();
    if let tokenscope::ui::shell::live::Phase::Ended(what) = &live.phase {
        println!("\n{what}");
    }
    // Every token is first drawn once: the run's tokens (a rotating run's snapshots hold only the journal's).
    let tokens = on_screen.len();
    delays.sort_by(f64::total_cmp);
    builds.sort_by(f64::total_cmp);
    on_screen.sort_by(f64::total_cmp);
    polls.sort_by(f64::total_cmp);
    let pct = |v: &[f64], p: f64| {
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss
        )]
        let i = ((v.len() as f64 * p).ceil() as usize).clamp(1, v.len().max(1)) - 1;
        v.get(i).copied().unwrap_or(f64::NAN)
    };
    let frames = |ms: f64| ms / (FRAME.as_secs_f64() * 1e3);
    let rate = tokens as f64 / elapsed;
    println!(
        "\nchunk to snapshot, {streams} streams, {requests} requests, {tokens} tokens in {elapsed:.1} s ({rate:.0} tokens/s)"
    );
    println!(
        "  delay p50 {:.0} ms ({:.1} frames), p99 {:.0} ms ({:.1} frames); {} snapshots, build p50 {:.0} ms, max {:.0} ms",
        pct(&delays, 0.5),
        frames(pct(&delays, 0.5)),
        pct(&delays, 0.99),
        frames(pct(&delays, 0.99)),
        builds.len(),
        pct(&builds, 0.5),
        builds.last().copied().unwrap_or(f64::NAN)
    );
    println!(
        "  drawn (over the snapshot or in it, in the window's next frame): delay p50 {:.0} ms ({:.1} frames), p99 {:.0} ms ({:.1} frames), \
         {} tokens ({} first drawn by a snapshot); the frame's read of the journal p50 {:.2} ms, p99 {:.2} ms, max \
         {:.2} ms",
        pct(&on_screen, 0.5),
        frames(pct(&on_screen, 0.5)),
        pct(&on_screen, 0.99),
        frames(pct(&on_screen, 0.99)),
        on_screen.len(),
        by_snapshot,
        pct(&polls, 0.5),
        pct(&polls, 0.99),
        polls.last().copied().unwrap_or(f64::NAN)
    );
    let rss = resident();
    let curve: Vec<String> = rss_seen
        .iter()
        .step_by((rss_seen.len() / 8).max(1))
        .map(|(t, r)| format!("{t:.0} s {:.0}", r.saturating_sub(rss0) as f64 / f64::from(1 << 20)))
        .collect();
    println!(
        "  resident memory over the run, MiB more than before it{}: {}",
        rotate_every.map_or_else(String::new, |e| format!(" (a part every {e} s)")),
        curve.join(", ")
    );
    let per_token = rss.saturating_sub(rss0) as f64 / tokens.max(1) as f64;
    println!(
        "  memory: {:.0} MiB resident more than before the run, {per_token:.0} bytes a token over the run",
        rss.saturating_sub(rss0) as f64 / f64::from(1 << 20),
    );
    // Growth over the run's second half, by token: what an hour would add once the first parts are written.
    if let (Some(&(t_half, r_half)), Some(&(t_end, r_end))) = (rss_seen.get(rss_seen.len() / 2), rss_seen.last()) {
        let share = (t_end - t_half) / elapsed.max(1e-9);
        let per = r_end.saturating_sub(r_half) as f64 / (tokens as f64 * share).max(1.0);
        println!(
            "  over the run's second half ({t_half:.0} s to {t_end:.0} s): {:.0} MiB more, {per:.0} bytes a token; an \
             hour at 1,000 tokens/s at that rate: {:.2} GiB",
            r_end.saturating_sub(r_half) as f64 / f64::from(1 << 20),
            (per * 3.6e6 + r_half.saturating_sub(rss0) as f64) / f64::from(1 << 30)
        );
    }
    live.stop();
}

/// The app's whole frame while live (every panel laid out by egui and tessellated, headless: the CPU part of a
/// frame, as `benches/frame.rs` measures it), one a 60 Hz frame for `seconds` of the run at 5,000 tokens/s over 64
/// streams, findings panel open, in each layout; the pointer moving over the requests.
fn live_frames(seconds: f64) {
    use eframe::egui;
    println!("\nthe app's frame while live ({seconds} s at 5,000 tokens/s over 64 streams, 1400x860, findings open)");
    println!(
        "{:<8} {:>8} {:>9} {:>9} {:>9} {:>12} {:>10}",
        "layout", "frames", "p50 ms", "p99 ms", "max ms", "over 8 ms", "snapshots"
    );
    for (name, layout) in [
        ("tracks", tokenscope::view::lanes::TrackLayout::Tracks),
        ("lanes", tokenscope::view::lanes::TrackLayout::Lanes),
    ] {
        let (_server, _dir, options, _) = live_run(seconds, None);
        let mut app = tokenscope::ui::App::recording(options, None);
        let ctx = egui::Context::default();
        let screen = egui::Rect::from_min_size(egui::Pos2::ZERO, egui::vec2(1400.0, 860.0));
        let mut times = Vec::new();
        let mut snapshots = 0usize;
        let mut shown = None;
        let start = Instant::now();
        let mut f = 0u64;
        while start.elapsed() < Duration::from_secs_f64(seconds) {
            let frame_start = Instant::now();
            if let Some(s) = app.session_mut() {
                s.waterfall.layout = layout;
            }
            let x = 500.0 + (f % 100) as f32 * 8.0;
            let input = egui::RawInput {
                screen_rect: Some(screen),
                time: Some(start.elapsed().as_secs_f64()),
                events: vec![egui::Event::PointerMoved(egui::Pos2::new(x, 400.0))],
                ..egui::RawInput::default()
            };
            let t = Instant::now();
            let output = ctx.run_ui(input, |ui| app.ui(ui));
            let _meshes = ctx.tessellate(output.shapes, output.pixels_per_point);
            let took = t.elapsed().as_secs_f64() * 1e3;
            // The first frames install the fonts and open the window's panels: not a live frame's cost.
            if f >= 5 {
                times.push(took);
            }
            let now = app.session().map(|s| std::sync::Arc::as_ptr(&s.view.trace) as usize);
            if now != shown {
                snapshots += 1;
                shown = now;
            }
            f += 1;
            std::thread::sleep(FRAME.saturating_sub(frame_start.elapsed()));
        }
        if let Some(live) = app.live_mut() {
            live.stop();
        }
        drop(app);
        times.sort_by(f64::total_cmp);
        let pct = |p: f64| {
            #[allow(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                clippy::cast_precision_loss
            )]
            let i = ((times.len() as f64 * p).ceil() as usize).clamp(1, times.len().max(1)) - 1;
            times.get(i).copied().unwrap_or(f64::NAN)
        };
        println!(
            "{name:<8} {:>8} {:>9.2} {:>9.2} {:>9.2} {:>12} {:>10}",
            times.len(),
            pct(0.5),
            pct(0.99),
            times.last().copied().unwrap_or(f64::NAN),
            times.iter().filter(|&&t| t > 8.0).count(),
            snapshots
        );
    }
}

/// A snapshot's join with the server's log: the log read whole each time (as before), against the log read as it
/// is written (only its new lines parsed; the records made again of what was read), on the real llama-server log of
/// `tests/data/real/llamacpp` (1.2 MB, 5 requests), the same recording joined.
fn server_log_join() {
    use std::io::Read;
    let dir = "tests/data/real/llamacpp";
    let mut text = Vec::new();
    flate2::read::GzDecoder::new(
        std::fs::File::open(format!("{dir}/incident_server.log.gz")).unwrap_or_else(|e| panic!("{e}")),
    )
    .read_to_end(&mut text)
    .unwrap_or_else(|e| panic!("{e}"));
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let log = tmp.path().join("server.log");
    std::fs::write(&log, &text).unwrap_or_else(|e| panic!("{e}"));
    let client = || {
        tokenscope::load::load(
            std::path::Path::new(&format!("{dir}/incident_client.parquet")),
            &tokenscope::ingest::Progress::default(),
        )
        .unwrap_or_else(|e| panic!("{e}"))
    };
    let runs = 10;
    let mut whole = Vec::new();
    let mut live = Vec::new();
    let mut tail = tokenscope::record::server_tail::ServerLogTail::new(&log);
    tail.poll().unwrap_or_else(|e| panic!("{e}"));
    for _ in 0..runs {
        let c = client();
        let start = Instant::now();
        let (joined, _) = tokenscope::record::join_server_log(c, &log);
        whole.push(start.elapsed().as_secs_f64() * 1e3);
        assert_eq!(joined.trace.request_count(), 5);
        let c = client();
        // What a snapshot does with the log read as it is written: read what it gained (a line), make its records
        // again, join.
        std::fs::OpenOptions::new()
            .append(true)
            .open(&log)
            .and_then(|mut f| std::io::Write::write_all(&mut f, b"\n"))
            .unwrap_or_else(|e| panic!("{e}"));
        let start = Instant::now();
        tail.poll().unwrap_or_else(|e| panic!("{e}"));
        let server = tail.loaded().unwrap_or_else(|| panic!("the log was read"));
        let (joined, _) = tokenscope::record::join_loaded(c, server, &log);
        live.push(start.elapsed().as_secs_f64() * 1e3);
        assert_eq!(joined.trace.request_count(), 5);
    }
    whole.sort_by(f64::total_cmp);
    live.sort_by(f64::total_cmp);
    println!(
        "\nthe server's log joined with a snapshot (1.2 MB llama-server log, median of {runs}): read whole {:.1} ms, \
         read as written {:.1} ms ({:.2}x)",
        whole[runs / 2],
        live[runs / 2],
        live[runs / 2] / whole[runs / 2]
    );
}

fn main() {
    let sizes: Vec<usize> = arg("--tokens")
        .unwrap_or_else(|| "10000,100000,500000".to_owned())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .filter(|&n| n > 0)
        .collect();
    let seconds: f64 = arg("--seconds").and_then(|s| s.parse().ok()).unwrap_or(8.0);
    let rotate_every: Option<f64> = arg("--rotate-every").and_then(|s| s.parse().ok());
    println!(
        "machine: {} cores; {}",
        std::thread::available_parallelism().map_or(0, std::num::NonZero::get),
        std::env::consts::ARCH
    );
    if !sizes.is_empty() {
        snapshot_costs(&sizes);
    }
    server_log_join();
    if let Some(frame_seconds) = arg("--frames-seconds").and_then(|s| s.parse::<f64>().ok()) {
        live_frames(frame_seconds);
    }
    latency(seconds, rotate_every);
}
