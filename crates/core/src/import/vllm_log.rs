//! vLLM's server log (`tests/data/import/vllm/logs/README.md` quotes the source of each line). Two kinds of line:
//!
//! - the stats every deployment writes, every 10 s by default (`vllm/v1/metrics/loggers.py`, `LoggingStatLogger`):
//!
//!   ```text
//!   (APIServer pid=4242) INFO 11-29 08:00:10 [loggers.py:123] Engine 000: Avg prompt throughput: 512.3 tokens/s,
//!     Avg generation throughput: 88.1 tokens/s, Running: 6 reqs, Waiting: 2 reqs, GPU KV cache usage: 41.5%,
//!     Prefix cache hit rate: 33.0%
//!   ```
//!
//!   with speculative decoding a `SpecDecoding metrics: Mean acceptance length: ..., Avg Draft acceptance rate: ...`
//!   line after it, and with a KV connector (disaggregated prefill and decode) a `KV Transfer metrics: Num successful
//!   transfers=N, Avg xfer time (ms)=...` line, each joining the same reading. The V0 engine (0.6 to 0.8) wrote `Running: N reqs, Swapped: N reqs,
//!   Pending: N reqs, GPU KV cache usage: ..., CPU KV cache usage: ...` and the prefix cache on a line of its own
//!   (`Prefix cache hit rate: GPU: x%, CPU: y%`). Each reading becomes a sample; throughputs are averages since the
//!   engine's previous line.
//! - with `--enable-logging-iteration-details` (vLLM 0.33, `LoggingStatLogger._log_iteration_details`), one line
//!   per engine step:
//!
//!   ```text
//!   (APIServer pid=4242) INFO 11-29 08:00:00 [loggers.py:199] Engine 000: Iteration(1): 1 context requests,
//!     256 context tokens, 1 generation requests, 1 generation tokens, iteration elapsed time: 25.00 ms,
//!     GPU KV cache usage: 0.3%
//!   ```
//!
//!   (older releases wrote it from the engine process without `Engine NNN:` or the KV use).
//!
//! Fields are read by name, so their order and the ones a release adds do not matter; every other line (requests'
//! access lines, warnings, start-up, progress bars) is skipped and counted. Terminal colours are stripped.
//!
//! The log's time has whole seconds, no year and no zone (vLLM's `%m-%d %H:%M:%S`), and no line names a request. So
//! the steps are placed by chaining their elapsed times from the second each was logged in (accurate to about a
//! second, in order), read as UTC (or `--log-tz`) in the year of `--log-date`, else of the trace's other files, else
//! of the log file's last change; `elapsed` is vLLM's wait for the step's model output, not the whole step.

use std::io::Read;
use std::path::Path;

use super::log_clock::LogClock;
use super::server_log::{Counters, LocalTime, LogSample, count, fraction, number, pieces, strip_ansi};
use super::{Sink, ns_from_ms, ok, record, text};
use crate::format::jsonl::for_each_line;
use crate::ingest::{LoadError, Progress};
use crate::trace::TraceBuilder;
use crate::trace::report::{Place, Problem};

/// True when the text has vLLM's stats or iteration lines.
pub fn looks_like(text: &str) -> bool {
    text.lines().any(|line| {
        (line.contains("Avg prompt throughput:") && line.contains("Avg generation throughput:"))
            || line.contains("SpecDecoding metrics: ")
            || line.contains(KV_TRANSFER)
    }) || text.lines().any(|line| {
        line.split_once("Iteration(")
            .is_some_and(|(_, rest)| rest.starts_with(|c: char| c.is_ascii_digit()))
            && line.contains("context requests")
            && line.contains("generation tokens")
    })
}

/// One iteration line, read but not yet placed in time.
#[derive(Debug, Clone)]
pub struct Parsed {
    place: Place,
    engine: u32,
    iteration: i64,
    month: u32,
    day: u32,
    second_of_day: u32,
    ctx_reqs: i64,
    ctx_tokens: i64,
    gen_reqs: i64,
    gen_tokens: i64,
    elapsed_ns: i64,
    kv_usage: Option<f64>,
}

/// Reads a server log: vLLM's stats and iteration lines and SGLang's batch lines, wherever they are in the file (one
/// server's log, or several servers' interleaved by a process manager: `docker compose logs` names each line's
/// server, `vllm-a  | ...`, and that name becomes its samples' source). The iterations are placed in time by
/// [`place`] and the samples by [`super::server_log::place`] once every file of the trace is read.
///
/// # Errors
/// The file cannot be read, or the load was cancelled.
pub fn read(input: impl Read, path: &Path, sink: &mut Sink<'_>, progress: &Progress) -> Result<(), LoadError> {
    let (file, kind) = (sink.file, sink.kind);
    let mut parsed = Vec::new();
    let mut dummies = 0u64;
    let mut skipped = 0u64;
    let mut samples: Vec<LogSample> = Vec::new();
    let mut times = Vec::new();
    let mut connector = false;
    let instance = super::sglang_pd::instance_name(path);
    for_each_line(input, path, file, sink.b, progress, |line, place, b| {
        let line = String::from_utf8_lossy(line);
        let line = strip_ansi(&line);
        let (server, line) = server_prefix(&line);
        let named = |mut s: LogSample| {
            if let Some(server) = server {
                s.source = Some(s.source.map_or_else(|| server.to_owned(), |e| format!("{server}/{e}")));
            }
            s
        };
        let mut reject = |what: &str, field: &'static str, reason: String| {
            Sink::new(b, file, kind).reject(place.at, Problem::Malformed, Some(field), format!("{what}: {reason}"));
        };
        if let Some((at, main)) = stats_at(line) {
            connector |= line.contains(KV_TRANSFER) || line.contains("External prefix cache hit rate");
            match parse_stats(line, at, main, place) {
                Ok(s) => add_stats(&mut samples, named(s), main),
                Err((field, reason)) => reject("vLLM stats line", field, reason),
            }
            return;
        }
        if super::sglang_pd::is_time_stats(line) {
            match super::sglang_pd::parse(line, place, &instance) {
                Ok(t) => times.push(t),
                Err((field, reason)) => reject("SGLang request timing line", field, reason),
            }
            return;
        }
        if super::sglang_log::is_batch_line(line) {
            match super::sglang_log::parse(line, place) {
                Ok(s) => samples.push(named(s)),
                Err((field, reason)) => reject("SGLang stats line", field, reason),
            }
            return;
        }
        let Some(at) = line.find("Iteration(") else {
            skipped += 1;
            return;
        };
        if line.contains("(dummy)") {
            dummies += 1;
            return;
        }
        match parse(line, at, place) {
            Ok(p) => parsed.push(p),
            Err((field, reason)) => reject("vLLM iteration line", field, reason),
        }
    })?;
    sink.vllm_iterations.extend(parsed);
    if !times.is_empty() || connector {
        // A server of a disaggregated deployment (SGLang's request timing lines, or vLLM's with a KV connector: its
        // transfer lines, its external prefix cache): its log file names it, its samples' instance too, so that the
        // prefill and the decode servers' logs opened together stay apart.
        for s in &mut samples {
            s.source = Some(match s.source.take() {
                Some(rank) => format!("{instance}/{rank}"),
                None => instance.clone(),
            });
        }
    }
    sink.log_samples.extend(samples);
    sink.sglang_times.extend(times);
    if skipped > 0 {
        sink.note(format!(
            "{skipped} line(s) of {} are not stats or iteration lines (requests, warnings, start-up) and were skipped",
            path.display()
        ));
    }
    if dummies > 0 {
        sink.note(format!(
            "{dummies} dummy iterations (data-parallel padding) in {} were left out",
            path.display()
        ));
    }
    Ok(())
}

/// The server a process manager named at the start of a line (`docker compose logs`: `vllm-a  | ...`), and the
/// line after it.
fn server_prefix(line: &str) -> (Option<&str>, &str) {
    if let Some((name, rest)) = line.split_once(" | ")
        && let name = name.trim_end()
        && !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return (Some(name), rest);
    }
    (None, line)
}

/// Where a stats message starts in the line, and whether it is a reading's main line (`Avg prompt throughput: ...`)
/// or a second line of it (speculative decoding, V0's prefix cache).
fn stats_at(line: &str) -> Option<(usize, bool)> {
    if let Some(at) = line.find("Avg prompt throughput:") {
        return Some((at, true));
    }
    for opener in ["SpecDecoding metrics: ", "Speculative metrics: ", KV_TRANSFER] {
        if let Some(at) = line.find(opener) {
            return Some((at + opener.len(), false));
        }
    }
    line.find("Prefix cache hit rate: GPU:").map(|at| (at, false))
}

/// A stats line: its time, engine and counters.
fn parse_stats(line: &str, at: usize, main: bool, place: Place) -> Result<LogSample, (&'static str, String)> {
    let (month, day, second_of_day) =
        prefix_time(&line[..at]).ok_or(("time", "no MM-DD HH:MM:SS time before the message".to_owned()))?;
    let engine: Option<u32> = line[..at]
        .rfind("Engine ")
        .and_then(|e| line[e + 7..at].trim().trim_end_matches(':').trim().parse().ok());
    let mut c = Counters::default();
    if line[..at].ends_with(KV_TRANSFER) {
        c = kv_transfer(&line[at..]);
    }
    for (label, value) in pieces(&line[at..]) {
        match label {
            "Avg prompt throughput" => c.prompt_throughput = number(value).map(|n| n.0),
            "Avg generation throughput" => c.generation_throughput = number(value).map(|n| n.0),
            "Running" => c.num_running = count(value),
            // V1 says Waiting, V0 Pending.
            "Waiting" | "Pending" => c.num_waiting = count(value),
            "Swapped" => c.num_swapped = count(value),
            // `GPU KV cache usage` (0.33 names the device: `XPU KV cache usage`); not V0's `CPU KV cache usage`.
            l if l.ends_with("KV cache usage") && !l.starts_with("CPU") => c.kv_usage = fraction(value),
            // V0: "Prefix cache hit rate: GPU: 12.00%, CPU: 0.00%".
            "Prefix cache hit rate" => c.prefix_hit_rate = fraction(value.trim_start_matches("GPU:")),
            "Mean acceptance length" => c.spec_accept_length = number(value).map(|n| n.0),
            // V1 in percent; the older "Draft acceptance rate: 0.800" a fraction.
            "Avg Draft acceptance rate" | "Draft acceptance rate" => c.spec_accept_rate = fraction(value),
            // V1's counts over the interval (`vllm/v1/spec_decode/metrics.py`): "Accepted: 310 tokens".
            "Accepted" if !line.contains("Speculative metrics") => c.spec_accepted_tokens = count(value),
            "Drafted" if !line.contains("Speculative metrics") => c.spec_drafted_tokens = count(value),
            _ => {}
        }
    }
    // 0.8.5 printed the mean acceptance length without the bonus token (accepted / drafts), later releases with it
    // (1 + accepted / drafts); the per-position rates on the same line tell which: they sum to accepted / drafts.
    if let (Some(mean), Some(by_position)) = (c.spec_accept_length, per_position(&line[at..])) {
        let sum: f64 = by_position.iter().sum();
        if (mean - sum).abs() < (mean - (1.0 + sum)).abs() {
            c.spec_accept_length = Some(mean + 1.0);
        }
    }
    if main && c.num_running.is_none() {
        return Err((
            "Running",
            "no \"Running: N reqs\" after the throughputs: the line is cut or of another form".to_owned(),
        ));
    }
    Ok(LogSample {
        place,
        local: LocalTime {
            year: None,
            month,
            day,
            second_of_day,
        },
        source: engine.filter(|&e| e > 0).map(|e| format!("engine-{e:03}")),
        series: 0,
        counters: c,
    })
}

/// What opens a KV connector's line (`vllm/distributed/kv_transfer/kv_connector/v1/metrics.py`,
/// `KVConnectorLogging.log`), written after its engine's stats line.
const KV_TRANSFER: &str = "KV Transfer metrics: ";

/// The counters of a KV connector's line: `key=value` pairs, the keys its stats' `reduce()` chose. NIXL's, Mooncake's
/// and MoRIIO's: `Num successful transfers=3, Avg xfer time (ms)=25.1, P90 xfer time (ms)=31.0, Avg MB per
/// transfer=96.0, Throughput (MB/s)=3824.7, ..., Num failed transfers=0`; NIXL's first release wrote
/// `num_successful_transfers=3` alone. An interval without a successful transfer prints its times and sizes as 0:
/// its times are absent (a mean of nothing), its bytes 0.
fn kv_transfer(message: &str) -> Counters {
    let mut c = Counters::default();
    let mut avg_mb = None;
    for pair in message.split(", ") {
        let Some((key, value)) = pair.split_once('=') else {
            continue;
        };
        let value = value.trim().trim_end_matches(['.', ',']);
        match key.trim() {
            "Num successful transfers" | "num_successful_transfers" => c.kv_transfers = count(value),
            "Num failed transfers" | "num_failed_transfers" => c.kv_transfers_failed = count(value),
            "Avg xfer time (ms)" => c.kv_transfer_ms = number(value).map(|n| n.0),
            "P90 xfer time (ms)" => c.kv_transfer_p90_ms = number(value).map(|n| n.0),
            "Avg MB per transfer" => avg_mb = number(value).map(|n| n.0),
            _ => {}
        }
    }
    match c.kv_transfers {
        Some(n) if n > 0 => {
            #[expect(clippy::cast_possible_truncation, reason = "bytes of a log's MB, well inside i64")]
            #[expect(clippy::cast_precision_loss, reason = "a count of transfers")]
            let bytes = avg_mb.map(|mb| (mb * n as f64 * 1_048_576.0).round() as i64);
            c.kv_transfer_bytes = bytes;
        }
        Some(_) => {
            // No transfer: nothing moved, and no time to average.
            c.kv_transfer_bytes = Some(0);
            c.kv_transfer_ms = None;
            c.kv_transfer_p90_ms = None;
        }
        None => {}
    }
    c
}

/// The server a reading's source names (`vllm-b` of `vllm-b/engine-001`, a compose log's service): `None` for a
/// log of one server, whose sources are its engines alone (`engine-001`, or none for engine 0).
fn server_of(source: Option<&str>) -> Option<&str> {
    let s = source?;
    match s.split_once('/') {
        Some((server, _)) => Some(server),
        None if s.starts_with("engine-") => None,
        None => Some(s),
    }
}

/// The per-position acceptance rates of a `SpecDecoding metrics` line ("Per-position acceptance rate: 0.812, 0.601,
/// 0.402, ..."): the list is itself comma-separated, up to the next `label: value` piece.
fn per_position(message: &str) -> Option<Vec<f64>> {
    let at = message.find("Per-position acceptance rate:")? + "Per-position acceptance rate:".len();
    let rates: Vec<f64> = message[at..]
        .split(", ")
        .map(str::trim)
        .take_while(|p| !p.contains(": "))
        .map_while(|p| p.trim_end_matches(['.', ',']).parse::<f64>().ok())
        .collect();
    (!rates.is_empty()).then_some(rates)
}

/// Adds a stats line's reading: a second line of a reading (speculative decoding, V0's prefix cache, written just
/// after the main one) goes into the last reading of its engine when that was written in the same second or the
/// one before, else stands alone.
fn add_stats(samples: &mut Vec<LogSample>, s: LogSample, main: bool) {
    // A second line names no engine (`SpecDecoding metrics:`): its engine's main line was written just before it, so
    // it goes with its server's last reading, whichever engine that was (with data parallelism, engine 001's line
    // would otherwise land on engine 000's reading); in a log of several servers, with its own server's.
    if !main
        && let Some(last) = samples
            .iter_mut()
            .rev()
            .find(|l| server_of(l.source.as_deref()) == server_of(s.source.as_deref()))
        && (last.local.month, last.local.day) == (s.local.month, s.local.day)
        && s.local.second_of_day.saturating_sub(last.local.second_of_day) <= 1
    {
        last.counters.absorb(&s.counters);
        return;
    }
    samples.push(s);
}

/// The number before `label` in a `", "`-separated list ("1536 context tokens").
fn count_before(pieces: &[&str], label: &str) -> Option<i64> {
    pieces
        .iter()
        .find_map(|p| p.strip_suffix(label).and_then(|n| n.trim().parse().ok()))
}

/// The value after `label` ("iteration elapsed time: 23.41 ms").
fn value_after<'a>(pieces: &[&'a str], label: &str) -> Option<&'a str> {
    pieces.iter().find_map(|p| p.strip_prefix(label)).map(str::trim)
}

fn parse(line: &str, at: usize, place: Place) -> Result<Parsed, (&'static str, String)> {
    let after = &line[at + "Iteration(".len()..];
    let close = after
        .find(')')
        .ok_or(("iteration", "no closing parenthesis after Iteration(".to_owned()))?;
    let iteration: i64 = after[..close]
        .trim()
        .parse()
        .map_err(|_| ("iteration", format!("Iteration({}) is not a number", &after[..close])))?;
    let engine = line[..at]
        .rfind("Engine ")
        .and_then(|e| line[e + 7..at].trim().trim_end_matches(':').parse().ok())
        .unwrap_or(0);
    let body = after[close + 1..].trim_start_matches(':').trim();
    let pieces: Vec<&str> = body.split(", ").map(str::trim).collect();
    let need =
        |label: &'static str| count_before(&pieces, label).ok_or((label, format!("no \"N {label}\" in the line")));
    let ctx_reqs = need(" context requests")?;
    let ctx_tokens = need(" context tokens")?;
    let gen_reqs = need(" generation requests")?;
    let gen_tokens = need(" generation tokens")?;
    let elapsed_ms: f64 = value_after(&pieces, "iteration elapsed time:")
        .and_then(|v| v.trim_end_matches("ms").trim().parse().ok())
        .ok_or(("elapsed", "no \"iteration elapsed time: X ms\"".to_owned()))?;
    let elapsed_ns = ns_from_ms(elapsed_ms)
        .filter(|&ns| ns >= 0)
        .ok_or(("elapsed", format!("elapsed time {elapsed_ms} ms is not a duration")))?;
    let kv_usage = value_after(&pieces, "GPU KV cache usage:")
        .and_then(|v| v.trim_end_matches('%').trim().parse::<f64>().ok())
        .map(|pct| pct / 100.0);
    let (month, day, second_of_day) =
        prefix_time(&line[..at]).ok_or(("time", "no MM-DD HH:MM:SS time before the message".to_owned()))?;
    Ok(Parsed {
        place,
        engine,
        iteration,
        month,
        day,
        second_of_day,
        ctx_reqs,
        ctx_tokens,
        gen_reqs,
        gen_tokens,
        elapsed_ns,
        kv_usage,
    })
}

/// The `MM-DD HH:MM:SS` of vLLM's log prefix: (month, day, second of the day).
fn prefix_time(prefix: &str) -> Option<(u32, u32, u32)> {
    let words: Vec<&str> = prefix.split_whitespace().collect();
    words.windows(2).find_map(|w| {
        let (md, hms) = (w[0], w[1]);
        let mut d = md.split('-').map(|x| x.parse::<u32>().ok());
        let (month, day) = (d.next()??, d.next()??);
        let mut t = hms.split(':').map(|x| x.parse::<u32>().ok());
        let (h, m, s) = (t.next()??, t.next()??, t.next()??);
        (md.len() == 5 && (1..=12).contains(&month) && (1..=31).contains(&day) && h < 24 && m < 60 && s < 61)
            .then_some((month, day, h * 3600 + m * 60 + s))
    })
}

/// How a server's log lines say their time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineTime {
    /// vLLM's: a level, then `MM-DD HH:MM:SS` (`INFO 11-03 14:05:00 [utils.py:325] ...`), no year.
    Vllm,
    /// SGLang's: `[YYYY-MM-DD HH:MM:SS ...]` at the start.
    Sglang,
}

/// The local time a vLLM or SGLang log line was written at, in `form`, past terminal colours and a process
/// manager's name; `None` for a line without one (a traceback's, a progress bar's) or with a time of the other form
/// (another tool's line in the same output).
pub fn line_time(line: &[u8], form: LineTime) -> Option<LocalTime> {
    // The time is at the line's start: its first bytes are enough (and a long line is not read whole).
    let head = String::from_utf8_lossy(&line[..line.len().min(200)]);
    let head = strip_ansi(&head);
    let (_, head) = server_prefix(&head);
    if form == LineTime::Sglang {
        return head
            .trim_start()
            .starts_with('[')
            .then(|| super::sglang_log::prefix(head))
            .flatten()
            .map(|(local, _)| local);
    }
    // vLLM's level, then its date and time, before the source file in brackets.
    let before = head.find(" [").map_or(head, |at| &head[..at]);
    let words: Vec<&str> = before.split_whitespace().collect();
    let at = words
        .iter()
        .position(|w| matches!(*w, "DEBUG" | "INFO" | "WARNING" | "ERROR" | "CRITICAL"))?;
    let date_time = words.get(at + 1..at + 3)?.join(" ");
    prefix_time(&date_time).map(|(month, day, second_of_day)| LocalTime {
        year: None,
        month,
        day,
        second_of_day,
    })
}

/// Places the iterations read in time and adds them: `year` is the trace's, when its other files gave one.
pub fn place(parsed: Vec<Parsed>, year: Option<i32>, fallback_year: i32, clock: &LogClock, b: &mut TraceBuilder) {
    use chrono::NaiveDate;
    let year = clock.year(year, fallback_year);
    let offset_ns = i64::from(clock.utc_offset_s.unwrap_or(0)) * 1_000_000_000;
    let mut cursor: Vec<(u32, i64)> = Vec::new();
    // A log that runs past New Year: its month goes back (December to January), its year on.
    let (mut rollover, mut previous_month) = (0, None);
    for p in &parsed {
        if previous_month.is_some_and(|m| p.month + 6 < m) {
            rollover += 1;
        }
        previous_month = Some(p.month);
        let Some(midnight) = NaiveDate::from_ymd_opt(year + rollover, p.month, p.day)
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .map(|t| t.and_utc().timestamp())
        else {
            continue;
        };
        let second_ns = (midnight + i64::from(p.second_of_day)) * 1_000_000_000 - offset_ns;
        let previous_end = cursor.iter().find(|(e, _)| *e == p.engine).map(|&(_, end)| end);
        let start = previous_end.map_or(second_ns, |end| end.max(second_ns));
        let end = start + p.elapsed_ns;
        match cursor.iter_mut().find(|(e, _)| *e == p.engine) {
            Some(c) => c.1 = end,
            None => cursor.push((p.engine, end)),
        }
        let mut it = record("iteration");
        if p.engine > 0 {
            it.source = text(format!("engine-{:03}", p.engine));
        }
        it.iteration = ok(p.iteration);
        it.start_ns = ok(start);
        it.end_ns = ok(end);
        it.forward_ns = ok(p.elapsed_ns);
        it.num_prefill_reqs = ok(p.ctx_reqs);
        it.num_prefill_tokens = ok(p.ctx_tokens);
        it.num_decode_reqs = ok(p.gen_reqs);
        it.num_decode_tokens = ok(p.gen_tokens);
        it.num_reqs = ok(p.ctx_reqs + p.gen_reqs);
        it.kv_usage = p.kv_usage.and_then(ok);
        crate::ingest::validate::ingest(&it, p.place, b);
    }
    if !parsed.is_empty() {
        b.report.notes.push(format!(
            "vLLM's iteration log gives whole seconds without year or zone: its {} steps are placed by chaining \
             their elapsed times from the second each was logged in, read in {year} {}; it names no requests, so \
             steps and requests are not linked",
            parsed.len(),
            clock.zone_text()
        ));
    }
}
