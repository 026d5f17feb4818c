//! `tokenscope watch` over a long run (issue 50's targets): a llama-server log at `-lv 5` written at 2,000 lines/s for
//! a simulated hour, watched as `watch --json --incidents` watches it (the flight recorder's loop, a look per second
//! of log), its lines made from the real watch run's (`tests/data/real/llamacpp-runs/watch.server.log.gz`: five
//! requests, one a 2,583-token prompt stalling the others), repeated with their times moved on and their task ids
//! renumbered, so that every request, step and token is one llama-server wrote.
//!
//! Printed: resident memory (now and peak) and the ring's bytes against its budget at each simulated ten minutes; a
//! look's time to the window (read: the trace made of what the log gained, as the app's window gets it; p50, p99,
//! max) at the steady state, in frames of 60 Hz, beside the time to read the same second of log alone (the
//! reference: what any reader pays), measured in the same run; then its judging (the findings, handed to the window
//! after the trace), then the incident files and the ring's part it found due. The log is written a second of it at
//! a time, as fast as the look allows: the hour takes what its looks take. Then `--real-s` seconds in real time,
//! twice: the log written as a server writes it (a few lines every 5 ms) while the watch's loop runs as the app's
//! does, paced by the interval slept (the reference, as before) and by `Watcher::wait`: a line's time from its write
//! to its trace handed to the window (the worst line of each look), and the share of the wall time the looks took.
//!
//! `cargo bench --bench watch [-- --minutes 60 --lines-per-s 2000 --keep-s 600 --ring-mb 256 --real-s 30]`

mod common;

use std::io::{Read as _, Write as _};
use std::time::Instant;

use tokenscope::record::watcher::{WatchOptions, Watcher};

const FRAME_MS: f64 = 1000.0 / 60.0;

/// The real run's lines from its first request to its last release, each split into its time (µs since the
/// server's start) and the rest.
fn real_lines() -> Vec<(i64, String)> {
    let gz = std::fs::read("tests/data/real/llamacpp-runs/watch.server.log.gz").unwrap_or_else(|e| panic!("{e}"));
    let mut text = String::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_string(&mut text)
        .unwrap_or_else(|e| panic!("{e}"));
    let lines: Vec<(i64, String)> = text
        .lines()
        .filter_map(|l| {
            let time = tokenscope::import::llamacpp_log::line_time_us(l.as_bytes())?;
            Some((time, l.split_once(' ')?.1.to_owned()))
        })
        .collect();
    let first = lines
        .iter()
        .position(|(_, l)| l.contains("processing task, is_child"))
        .unwrap_or(0);
    let last = lines
        .iter()
        .rposition(|(_, l)| l.contains("stop processing"))
        .unwrap_or(lines.len() - 1);
    lines[first..=last].to_vec()
}

/// `M.SS.mmm.uuu` of `us`.
fn stamp(us: i64) -> String {
    let (m, rest) = (us / 60_000_000, us % 60_000_000);
    format!(
        "{m}.{:02}.{:03}.{:03}",
        rest / 1_000_000,
        rest / 1_000 % 1_000,
        rest % 1_000
    )
}

/// `line` with every task id in it moved on by `by` (`task 17`, `id = 17`, `id_task = 17`, `task id = 17`).
fn renumber(line: &str, by: i64) -> String {
    let mut out = String::with_capacity(line.len() + 8);
    let mut rest = line;
    while let Some(at) = ["task ", "id = ", "id_task = ", "task id = "]
        .iter()
        .filter_map(|k| rest.find(k).map(|i| (i, k.len())))
        .min()
    {
        let (i, klen) = at;
        out.push_str(&rest[..i + klen]);
        rest = &rest[i + klen..];
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        match rest[..digits].parse::<i64>() {
            Ok(n) if digits > 0 => out.push_str(&(n + by).to_string()),
            _ => out.push_str(&rest[..digits]),
        }
        rest = &rest[digits..];
    }
    out.push_str(rest);
    out
}

/// The real run's lines as a log written at a rate: cycle after cycle, their times scaled and moved on, their task
/// ids renumbered.
struct Cycles {
    lines: Vec<(i64, String)>,
    /// The first line's time, and the scale from the run's times to the log's.
    t0: i64,
    scale: f64,
    /// One cycle's length in the log, µs.
    cycle_us: i64,
    cycle: i64,
    next: usize,
}

impl Cycles {
    fn new(lines: Vec<(i64, String)>, rate: f64) -> Self {
        let (t0, t1) = (lines[0].0, lines[lines.len() - 1].0);
        // The cycle's lines at the chosen rate: its times scaled so that its lines come at `rate` a second.
        let cycle_us = (lines.len() as f64 / rate * 1e6) as i64;
        let scale = cycle_us as f64 / (t1 - t0).max(1) as f64;
        Cycles {
            lines,
            t0,
            scale,
            cycle_us,
            cycle: 0,
            next: 0,
        }
    }

    /// Every line of the log before `until_us` (µs since the server's start) not given yet.
    fn until(&mut self, until_us: i64) -> String {
        let mut text = String::new();
        loop {
            let (t, l) = &self.lines[self.next];
            let at = 1_000_000 + self.cycle * self.cycle_us + ((t - self.t0) as f64 * self.scale) as i64;
            if at >= until_us {
                return text;
            }
            text.push_str(&stamp(at));
            text.push(' ');
            text.push_str(&renumber(l, self.cycle * 1000));
            text.push('\n');
            self.next += 1;
            if self.next == self.lines.len() {
                self.next = 0;
                self.cycle += 1;
            }
        }
    }
}

/// `p` of sorted `s`.
fn q(s: &[f64], p: f64) -> f64 {
    s.get(((s.len() as f64 * p).ceil() as usize).saturating_sub(1))
        .copied()
        .unwrap_or(0.0)
}

/// `seconds` of wall time after the simulated ones (the log's clock at `from_s`), the log written as a server writes
/// it, a few lines every 5 ms, and watched as the app watches it: read (to the window), judged, the files due
/// written, then the wait for the next look: [`Watcher::wait`] (`paced`) or, as before it, the interval slept.
/// Returns, for each look, the time from the write of the oldest line it read to its trace handed to the window, ms,
/// sorted; and the share of the wall time the looks took.
fn in_real_time(
    watcher: &mut Watcher,
    file: &std::fs::File,
    cycles: &mut Cycles,
    from_s: i64,
    seconds: f64,
    paced: bool,
) -> (Vec<f64>, f64) {
    let written: std::sync::Mutex<std::collections::VecDeque<Instant>> = std::sync::Mutex::default();
    let done = std::sync::atomic::AtomicBool::new(false);
    let start = Instant::now();
    let (mut waited, mut busy) = (Vec::new(), 0.0);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut file = file;
            while start.elapsed().as_secs_f64() < seconds {
                let now_us = from_s * 1_000_000 + i64::try_from(start.elapsed().as_micros()).unwrap_or(i64::MAX);
                let text = cycles.until(now_us);
                if !text.is_empty() {
                    file.write_all(text.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
                    written
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push_back(Instant::now());
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            done.store(true, std::sync::atomic::Ordering::Relaxed);
        });
        while !done.load(std::sync::atomic::Ordering::Relaxed) {
            let began = Instant::now();
            let _ = watcher.read(false);
            let handed = Instant::now();
            // The writes this look read: those made before it began, not read before.
            let oldest = {
                let mut w = written.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                let read = w.partition_point(|&t| t <= began);
                w.drain(..read).next()
            };
            if let Some(oldest) = oldest {
                waited.push(handed.duration_since(oldest).as_secs_f64() * 1e3);
            }
            let _ = watcher.judge();
            let _ = watcher.write_due();
            busy += began.elapsed().as_secs_f64();
            if paced {
                watcher.wait(|| done.load(std::sync::atomic::Ordering::Relaxed));
            } else {
                std::thread::sleep(watcher.options().interval);
            }
        }
    });
    waited.sort_by(f64::total_cmp);
    (waited, busy / start.elapsed().as_secs_f64())
}

fn main() {
    let minutes = common::flag("--minutes", 60.0);
    let real_s = common::flag("--real-s", 30.0);
    let rate = common::flag("--lines-per-s", 2000.0);
    let keep_s = common::flag("--keep-s", 600.0);
    let ring_mb = common::flag("--ring-mb", 256.0);
    let lines = real_lines();
    let (t0, t1) = (lines[0].0, lines[lines.len() - 1].0);
    let mut cycles = Cycles::new(lines, rate);
    let cycle_us = cycles.cycle_us;
    eprintln!(
        "a cycle of {} real lines (5 requests, {:.1} s as written), replayed in {:.2} s: {rate} lines/s for {minutes} \
         min",
        cycles.lines.len(),
        (t1 - t0) as f64 / 1e6,
        cycle_us as f64 / 1e6
    );
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let log = dir.path().join("server.log");
    let incidents = dir.path().join("incidents");
    let mut watcher = Watcher::new(WatchOptions {
        incidents: Some(incidents.clone()),
        keep_s,
        ring_bytes: (ring_mb * 1e6) as u64,
        ..WatchOptions::of(&log)
    })
    .unwrap_or_else(|e| panic!("{e}"));
    let mut file = std::fs::File::create(&log).unwrap_or_else(|e| panic!("{e}"));
    // The server's start-up lines, then the cycles.
    writeln!(file, "0.00.000.100 I srv          main: starting the main loop").unwrap_or_else(|e| panic!("{e}"));
    let total_s = (minutes * 60.0) as i64;
    let (mut looks, mut reads, mut writes): (Vec<f64>, Vec<f64>, Vec<f64>) = (Vec::new(), Vec::new(), Vec::new());
    let mut judged: Vec<f64> = Vec::new();
    let started = Instant::now();
    for second in 1..=total_s {
        // Every line of this second of log.
        let text = cycles.until(second * 1_000_000);
        file.write_all(text.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        // The reference: this second's lines read by the log's own reader, alone.
        let r = Instant::now();
        let mut alone = tokenscope::import::llamacpp_log::Incremental::default();
        for l in text.lines() {
            alone.line(l.as_bytes(), 0);
        }
        reads.push(r.elapsed().as_secs_f64() * 1e3);
        // A look as the app's window gets it (read: the trace to show), then judged, then the incident files and
        // the ring's part it found due.
        let l = Instant::now();
        let _ = watcher.read(false);
        looks.push(l.elapsed().as_secs_f64() * 1e3);
        let j = Instant::now();
        let _ = watcher.judge();
        judged.push(j.elapsed().as_secs_f64() * 1e3);
        let w = Instant::now();
        let _ = watcher.write_due();
        writes.push(w.elapsed().as_secs_f64() * 1e3);
        if second % 600 == 0 || second == total_s {
            let ring: u64 = std::fs::read_dir(incidents.join("ring")).map_or(0, |d| {
                d.filter_map(Result::ok)
                    .filter_map(|e| e.metadata().ok())
                    .map(|m| m.len())
                    .sum()
            });
            eprintln!(
                "{:>3} min of log ({:.0} s to run): {} requests held, {} forgotten; RSS {:.0} MiB (peak {:.0}); ring \
                 {:.1} MB of {ring_mb} MB; log {:.0} MB",
                second / 60,
                started.elapsed().as_secs_f64(),
                watcher.trace().map_or(0, tokenscope::trace::Trace::request_count),
                watcher.forgotten,
                common::status_mib("VmRSS:"),
                common::status_mib("VmHWM:"),
                ring as f64 / 1e6,
                common::size_mib(&log) * 1.048_576
            );
        }
    }
    // The steady state: the looks after the first keep_s of log (the window full).
    let steady = |v: &[f64]| -> Vec<f64> {
        let mut s: Vec<f64> = v.iter().copied().skip(keep_s as usize).collect();
        s.sort_by(f64::total_cmp);
        s
    };
    let (l, r, w, jd) = (steady(&looks), steady(&reads), steady(&writes), steady(&judged));
    let both: Vec<f64> = looks.iter().zip(&judged).map(|(a, b)| a + b).collect();
    let both = steady(&both);
    let slowest = looks
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(b.1))
        .map_or(0, |(i, _)| i + 1);
    println!("the slowest look: at {slowest} s of log of {total_s}");
    println!(
        "a look at the steady state, read to the window: p50 {:.1} ms ({:.2} frames), p99 {:.1} ms ({:.2} frames), \
         max {:.1} ms; reading its second of log alone: p50 {:.1} ms, p99 {:.1} ms (look / read at p99: {:.1}x)",
        q(&l, 0.5),
        q(&l, 0.5) / FRAME_MS,
        q(&l, 0.99),
        q(&l, 0.99) / FRAME_MS,
        l.last().copied().unwrap_or(0.0),
        q(&r, 0.5),
        q(&r, 0.99),
        q(&l, 0.99) / q(&r, 0.99).max(1e-9)
    );
    println!(
        "then judged (its findings, to the window after it): p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        q(&jd, 0.5),
        q(&jd, 0.99),
        jd.last().copied().unwrap_or(0.0)
    );
    println!(
        "then the incident files and the ring's part due: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        q(&w, 0.5),
        q(&w, 0.99),
        w.last().copied().unwrap_or(0.0)
    );
    println!(
        "read and judged together (what a window waited for when they were one): p50 {:.1} ms, p99 {:.1} ms",
        q(&both, 0.5),
        q(&both, 0.99)
    );
    // Then in real time: a line written to the window, the look paced by the log's growth against the interval
    // slept, as before.
    let mut from_s = total_s;
    for (paced, name) in [(false, "the interval slept (before)"), (true, "Watcher::wait (now)")] {
        let (waited, busy) = in_real_time(&mut watcher, &file, &mut cycles, from_s, real_s, paced);
        from_s += real_s.ceil() as i64 + 1;
        println!(
            "a line written to its trace in the window, {real_s} s in real time, {name}: p50 {:.0} ms, p99 {:.0} ms, \
             max {:.0} ms over {} looks; the looks took {:.0} % of the wall time",
            q(&waited, 0.5),
            q(&waited, 0.99),
            waited.last().copied().unwrap_or(0.0),
            waited.len(),
            busy * 100.0
        );
    }
    // The last look: what is pending written.
    let _ = watcher.read(true);
    let _ = watcher.judge();
    let _ = watcher.write_due();
    println!(
        "after {minutes} min at {rate} lines/s: peak resident {:.0} MiB, now {:.0} MiB; {} incident file(s)",
        common::status_mib("VmHWM:"),
        common::status_mib("VmRSS:"),
        std::fs::read_dir(&incidents).map_or(0, |d| d.filter_map(Result::ok).filter(|e| e.path().is_file()).count())
    );
}
