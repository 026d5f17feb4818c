//! `tokenscope watch --log FILE [--metrics URL] [--json] [--incidents DIR] [--before-s S] [--after-s S]
//! [--keep-s S] [--ring-bytes SIZE] [--part-s S] [--on-finding CMD] [--interval-s S] [--idle-exit S]`: follows what a
//! server already writes, sending it nothing but a read of its `/metrics`, and says each incident once, as it
//! happens; with `--incidents`, keeps the minutes around it as a trace of its own, and the last minutes as a ring.
//!
//! The log is read as it grows ([`crate::record::server_tail::ServerLogTail`]: a llama-server log line by line, from
//! where the last look stopped, across its rotations and emptyings, a restarted server's log afresh; another
//! server's log read again whole when it grew). What ended more than `--keep-s` before the log's last line is
//! forgotten, so a day's watch holds minutes. At each look the findings run on what is held; a finding not seen
//! before (its kind and its subject: first request, else start; the grouped checks by kind; a restarted server's
//! anew) is printed at once, and, unless it is only information, its incident file written: the range from
//! `--before-s` before it to now, every request alive in it whole, with the finding in the trace's note. The file is
//! written again, with what followed, until `--after-s` after the finding, so a Ctrl-C loses nothing said. The ring
//! ([`crate::record::ring::Ring`], `DIR/ring/`) holds the last minutes as parts of `--part-s`, within
//! `--ring-bytes`.

use std::collections::HashMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::json;

use super::Output;
use super::findings::finding_json;
use crate::analysis::findings::{Finding, Kind, Severity, Thresholds, find};
use crate::analysis::summary::Slo;
use crate::record::metrics::{Reading, Scraper, reading};
use crate::record::ring::Ring;
use crate::record::server_tail::ServerLogTail;
use crate::trace::Trace;

/// The arguments of `watch`.
#[derive(Debug, Clone, clap::Args)]
pub struct WatchArgs {
    /// The server's log to follow: llama-server's `--log-file` (at `-lv 5` every step and token), or a vLLM or SGLang
    /// log (read again whole when it grows). It need not exist yet.
    #[arg(long, value_name = "FILE")]
    pub log: PathBuf,
    /// Also read the server's Prometheus metrics at each look (llama-server started with --metrics:
    /// http://HOST:PORT/metrics; vLLM's, SGLang's): requests running and waiting, KV use and throughputs, as the
    /// samples of source `metrics` (what a server does not export stays absent).
    #[arg(long, value_name = "URL")]
    pub metrics: Option<String>,
    /// Print each finding as one JSON line (the fields of `findings --json`, and `incident`: its file) instead of
    /// text.
    #[arg(long)]
    pub json: bool,
    /// Keep the minutes around each critical or warning finding in this folder, as a trace with the finding in its
    /// note (`incident-NNN-KIND.parquet`).
    #[arg(long, value_name = "DIR")]
    pub incidents: Option<PathBuf>,
    /// Seconds of the log kept before a finding's start in its incident file.
    #[arg(long, value_name = "S", default_value_t = 120.0)]
    pub before_s: f64,
    /// Seconds after a finding during which its incident file is written again with what followed.
    #[arg(long, value_name = "S", default_value_t = 30.0)]
    pub after_s: f64,
    /// Run this command for each new finding, with its incident file (or "-") and the finding as JSON as its two
    /// arguments (for a pager or a chat hook).
    #[arg(long, value_name = "CMD")]
    pub on_finding: Option<String>,
    /// Look at the log every this many seconds.
    #[arg(long, value_name = "S", default_value_t = 1.0)]
    pub interval_s: f64,
    /// Stop when the log has said nothing new (no request, step, token or counter) for this many seconds, writing
    /// what is pending first (default: until interrupted). Lines of no request (a scrape of /metrics) are not news.
    #[arg(long, value_name = "S")]
    pub idle_exit: Option<f64>,
    /// Seconds of the log held in memory and judged by the findings: requests and steps that ended longer before
    /// the log's last line are forgotten (a request still running is kept).
    #[arg(long, value_name = "S", default_value_t = 600.0)]
    pub keep_s: f64,
    /// With --incidents: the most the ring of the last minutes (DIR/ring/) holds on disk (1GB, 500MB, 2GiB); its
    /// oldest parts are deleted beyond it, incident files never.
    #[arg(long, value_name = "SIZE", value_parser = crate::load::budget::parse_size, default_value = "1GB")]
    pub ring_bytes: u64,
    /// With --incidents: seconds of the log in each part of the ring.
    #[arg(long, value_name = "S", default_value_t = 60.0)]
    pub part_s: f64,
}

/// A finding said, and its incident file while it is still written again.
struct Said {
    number: usize,
    file: Option<PathBuf>,
    first_seen: Instant,
    /// The server's run it was seen in (its restarts before): a restarted server's trace never overwrites the
    /// incident of the run before.
    run: u32,
}

impl WatchArgs {
    /// Runs `watch` until the log stays still for `--idle-exit` seconds (or forever).
    pub fn run(&self) -> Output {
        for (name, v) in [
            ("--interval-s", self.interval_s),
            ("--before-s", self.before_s),
            ("--after-s", self.after_s),
            ("--keep-s", self.keep_s),
            ("--part-s", self.part_s),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Output::error(format!("{name} {v}: give a number of seconds, 0 or more"), 2);
            }
        }
        if let Some(dir) = &self.incidents
            && let Err(e) = std::fs::create_dir_all(dir)
        {
            return Output::error(format!("{}: cannot make the incidents folder: {e}", dir.display()), 1);
        }
        let mut ring = match &self.incidents {
            Some(dir) => match Ring::new(&dir.join("ring"), self.ring_bytes, self.part_s) {
                Ok(r) => Some(r),
                Err(e) => return Output::error(e, 1),
            },
            None => None,
        };
        let interval = Duration::from_secs_f64(self.interval_s.max(0.05));
        let mut tail = ServerLogTail::new(&self.log);
        let mut metrics = match &self.metrics {
            Some(url) => match Metrics::new(url, interval) {
                Ok(m) => Some(m),
                Err(e) => return Output::error(format!("--metrics {url}: {e}"), 1),
            },
            None => None,
        };
        let mut said: HashMap<(String, String), Said> = HashMap::new();
        let mut last_news = Instant::now();
        let mut seen: Option<(i64, u32)> = None;
        let (mut requests, mut forgotten) = (0usize, 0usize);
        eprintln!("watching {} (nothing is sent to the server)", self.log.display());
        loop {
            if let Err(e) = tail.poll() {
                eprintln!("watch: {e}");
            }
            let restarts = tail.restarts();
            // News: a later time in what the log said, or a server started again.
            let now = tail.loaded().map(|l| (latest_ns(&l.trace), restarts));
            if now != seen {
                if seen.is_some_and(|(_, r)| r < restarts) {
                    eprintln!(
                        "watch: the server started again (its log's clock went back); its new run is read afresh, \
                         what was kept of the last stays"
                    );
                }
                seen = now;
                last_news = Instant::now();
            }
            if let Some(m) = &mut metrics {
                m.scrape();
                m.forget_before(self.keep_s);
            }
            let idle = self
                .idle_exit
                .is_some_and(|idle| last_news.elapsed().as_secs_f64() >= idle);
            if let Some(loaded) = tail.loaded() {
                let joined = metrics
                    .as_ref()
                    .filter(|m| !m.samples.is_empty())
                    .map(|m| m.joined(&loaded.trace));
                let trace = joined.as_ref().unwrap_or(&loaded.trace);
                self.look(trace, restarts, &mut said);
                if let Some(ring) = &mut ring
                    && let Err(e) = ring.offer(trace, latest_ns(trace), idle)
                {
                    eprintln!("watch: ring: {e}");
                }
                requests = requests.max(trace.request_count());
            }
            if idle {
                break;
            }
            forgotten += tail.forget_older_than(self.keep_s);
            std::thread::sleep(interval);
        }
        let scraped = metrics.as_ref().map_or_else(String::new, |m| {
            format!("; {} metrics reading(s), {} failed", m.readings, m.failed)
        });
        let kept = ring.as_ref().map_or_else(String::new, |r| {
            format!(
                "; the ring holds {} part(s), {} bytes ({} deleted)",
                r.parts().count(),
                r.bytes(),
                r.deleted
            )
        });
        let restarted = match tail.restarts() {
            0 => String::new(),
            n => format!("; the server started again {n} time(s)"),
        };
        Output {
            stdout: String::new(),
            stderr: format!(
                "watched {}: {requests} requests held at most, {forgotten} forgotten past --keep-s{scraped}{kept}\
                 {restarted}, {} finding(s)\n",
                self.log.display(),
                said.len()
            ),
            code: 0,
        }
    }

    /// Runs the findings on what was read; says the new ones and writes their incident files (again, while within
    /// `--after-s` of them).
    fn look(&self, trace: &Trace, restarts: u32, said: &mut HashMap<(String, String), Said>) {
        let origin = trace.start_ns();
        let latest = latest_ns(trace);
        for f in find(trace, &Slo::DEFAULT, &Thresholds::default()) {
            // A restarted server's findings are its own: its task ids start again.
            let key = (f.kind.name().to_owned(), format!("{restarts}:{}", subject(trace, &f)));
            let next = said.len() + 1;
            let entry = said.entry(key);
            let new = matches!(entry, std::collections::hash_map::Entry::Vacant(_));
            let s = entry.or_insert_with(|| Said {
                number: next,
                // An information (a truncation) is said, not kept.
                file: self
                    .incidents
                    .as_ref()
                    .filter(|_| f.severity != Severity::Info)
                    .map(|dir| dir.join(format!("incident-{next:03}-{}.parquet", f.kind.name()))),
                first_seen: Instant::now(),
                run: restarts,
            });
            let keep_writing = s.run == restarts && s.first_seen.elapsed().as_secs_f64() <= self.after_s;
            if let Some(file) = &s.file
                && (new || keep_writing)
                && let Err(e) = write_incident(trace, &f, self.before_s, latest, file)
            {
                eprintln!("watch: {}: {e}", file.display());
            }
            if !new {
                continue;
            }
            let mut v = finding_json(trace, origin, &f);
            v["incident"] = s
                .file
                .as_ref()
                .map_or(serde_json::Value::Null, |p| json!(p.display().to_string()));
            let line = if self.json {
                v.to_string()
            } else {
                let place = s
                    .file
                    .as_ref()
                    .map_or_else(String::new, |p| format!("\n  kept in {}", p.display()));
                format!(
                    "{}  {}  [{}]  {}{place}",
                    f.severity.name().to_uppercase(),
                    f.kind.title(),
                    f.kind.name(),
                    f.summary
                )
            };
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
            eprintln!(
                "watch: finding {}: {} ({})",
                s.number,
                f.kind.title(),
                f.severity.name()
            );
            if let Some(cmd) = &self.on_finding {
                let file = s
                    .file
                    .as_ref()
                    .map_or_else(|| "-".to_owned(), |p| p.display().to_string());
                match std::process::Command::new(cmd).arg(&file).arg(v.to_string()).status() {
                    Ok(status) if !status.success() => eprintln!("watch: {cmd} exited with {status}"),
                    Ok(_) => {}
                    Err(e) => eprintln!("watch: cannot run {cmd}: {e}"),
                }
            }
        }
    }
}

/// The server's metrics, read at each look: its readings so far, and how many reads failed (counted, never fatal).
struct Metrics {
    url: String,
    scraper: Scraper,
    interval_ns: i64,
    samples: Vec<Reading>,
    times: Vec<i64>,
    /// Readings made in all (those forgotten past --keep-s included).
    readings: u64,
    failed: u64,
}

impl Metrics {
    fn new(url: &str, interval: Duration) -> Result<Self, String> {
        Ok(Metrics {
            url: url.to_owned(),
            scraper: Scraper::new(Duration::from_secs(2))?,
            interval_ns: i64::try_from(interval.as_nanos()).unwrap_or(i64::MAX),
            samples: Vec::new(),
            times: Vec::new(),
            readings: 0,
            failed: 0,
        })
    }

    /// Reads the page once; a failure is said on stderr the first time and counted.
    fn scrape(&mut self) {
        let now_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
        match self.scraper.fetch(&self.url).and_then(|text| reading(&text)) {
            Ok(r) => {
                self.samples.push(r);
                self.times.push(now_ns);
                self.readings += 1;
            }
            Err(e) => {
                if self.failed == 0 {
                    eprintln!("watch: metrics: {e} (counted; watch goes on)");
                }
                self.failed += 1;
            }
        }
    }

    /// Forgets the readings made more than `keep_s` before the last.
    fn forget_before(&mut self, keep_s: f64) {
        let Some(&last) = self.times.last() else {
            return;
        };
        let cutoff = last - (keep_s * 1e9) as i64;
        let gone = self.times.partition_point(|&t| t < cutoff);
        self.times.drain(..gone);
        self.samples.drain(..gone);
    }

    /// `trace` with the readings as samples of source `metrics`.
    fn joined(&self, trace: &Trace) -> Trace {
        let mut b = crate::trace::TraceBuilder::from_trace(trace.clone());
        let source = b.labels.intern("metrics");
        for (r, &time_ns) in self.samples.iter().zip(&self.times) {
            b.add_sample(crate::trace::Sample {
                source,
                time_ns,
                interval_ns: Some(self.interval_ns),
                num_running: r.running,
                num_waiting: r.waiting,
                num_swapped: None,
                kv_usage: r.kv_usage,
                kv_tokens: None,
                prompt_throughput: r.prompt_throughput,
                generation_throughput: r.generation_throughput,
                prefix_hit_rate: None,
                spec_accept_length: None,
                spec_accept_rate: None,
                num_prefill_reqs: None,
                num_prefill_tokens: None,
                cached_tokens: None,
                spec_drafted_tokens: None,
                spec_accepted_tokens: None,
            });
        }
        b.finish().0
    }
}

/// What makes a finding the same one at the next look, when more of the log has been read. The grouped checks are
/// one finding however many requests join them (truncations, token-count mismatches) or one per objective (SLO
/// violations); an incident is its subject request and token (a victim stalls at several tokens, one finding
/// each); a condition without a request is its start.
fn subject(trace: &Trace, f: &Finding) -> String {
    match f.kind {
        Kind::Truncation | Kind::TokenMismatch => String::new(),
        Kind::SloViolations if f.summary.contains("TTFT objective") => "ttft".to_owned(),
        Kind::SloViolations => "tpot".to_owned(),
        _ => match (f.requests.first(), f.tokens.first()) {
            (Some(&r), Some(&t)) => format!("{}[{}]", trace.request_id(r), trace.tokens.index[t]),
            (Some(&r), None) => trace.request_id(r).to_owned(),
            (None, _) => f.from_ns.to_string(),
        },
    }
}

/// The latest time the trace knows of (its counters' samples included).
fn latest_ns(trace: &Trace) -> i64 {
    let r = &trace.requests;
    r.arrival_ns
        .iter()
        .copied()
        .chain(r.finished_ns.iter().flatten().copied())
        .chain(trace.iterations.end_ns.iter().copied())
        .chain(trace.tokens.emitted_ns.iter().copied())
        .chain(trace.samples.time_ns.iter().copied())
        .max()
        .unwrap_or(0)
}

/// Writes the part of `trace` from `before_s` before the finding to `latest_ns` to `file` (through a temporary
/// file, so a reader never sees half of it), with the finding in the note.
fn write_incident(trace: &Trace, f: &Finding, before_s: f64, latest_ns: i64, file: &Path) -> Result<(), String> {
    let from_ns = f.from_ns.saturating_sub((before_s * 1e9) as i64);
    let mut part = crate::trace::slice::slice(trace, from_ns, latest_ns.max(f.to_ns), None);
    part.meta.note = Some(format!(
        "incident kept by tokenscope watch: {} [{}]: {}",
        f.kind.title(),
        f.kind.name(),
        f.summary
    ));
    let tmp = file.with_extension("tmp.parquet");
    crate::format::write(&part, &tmp).map_err(|e| e.to_string())?;
    std::fs::rename(&tmp, file).map_err(|e| e.to_string())
}
