//! The flight recorder's loop, shared by `tokenscope watch` and the app's File > Watch: a server's log followed as it
//! is written ([`ServerLogTail`]: line by line, across its rotations and emptyings, a restarted llama-server's
//! afresh; a look as soon as it grows, [`Watcher::wait`]), its `/metrics` read every interval and the spans it
//! exported received ([`Receiver`]) at each look, what ended more than `keep_s` before the log's last line forgotten,
//! and the findings run on what is held. A finding not seen before (its kind and subject: [`subject`]) is handed out
//! once, and, unless it is only information, kept as an incident file: from `before_s` before it to the latest time
//! read, every request alive in it whole, the finding in the trace's note, written again until `after_s` after it.
//! The ring ([`Ring`], `DIR/ring/`) holds the last minutes within its budget. Nothing is sent to the server but the
//! read of its metrics (and the answers to its exports).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::metrics::{Reading, Scraper, reading};
use crate::receiver::Receiver;
use crate::ring::Ring;
use crate::server_tail::ServerLogTail;
use tokenscope_core::analysis::findings::{Finding, Kind, Severity, Thresholds, find};
use tokenscope_core::analysis::summary::Slo;
use tokenscope_core::trace::Trace;

/// What a watch follows and keeps.
#[derive(Debug, Clone, PartialEq)]
pub struct WatchOptions {
    /// The server's log (none: its spans alone are received).
    pub log: Option<PathBuf>,
    /// Its Prometheus page, read every `interval`.
    pub metrics: Option<String>,
    /// Where to receive its spans (OTLP/HTTP), `HOST:PORT`.
    pub otlp: Option<String>,
    /// Where incident files and the ring go.
    pub incidents: Option<PathBuf>,
    /// Seconds kept before a finding in its incident file.
    pub before_s: f64,
    /// Seconds after a finding during which its file is written again.
    pub after_s: f64,
    /// Seconds of the log held and judged.
    pub keep_s: f64,
    /// The ring's budget, bytes.
    pub ring_bytes: u64,
    /// Seconds of the log in each part of the ring.
    pub part_s: f64,
    /// The longest time between two looks (a log that grows is read sooner: [`Watcher::wait`]), and between two
    /// reads of the metrics.
    pub interval: Duration,
    /// The objectives and thresholds the findings are computed with.
    pub slo: Slo,
    pub thresholds: Thresholds,
}

impl WatchOptions {
    /// What is watched, for messages and titles: the log, else where spans are received.
    pub fn watched(&self) -> String {
        match (&self.log, &self.otlp) {
            (Some(log), _) => log.display().to_string(),
            (None, Some(addr)) => format!("the spans received on {addr}"),
            (None, None) => "nothing".to_owned(),
        }
    }

    /// A watch of `log` with the defaults of `tokenscope watch`: no metrics, no incident files, 120 s before and 30 s
    /// after a finding, 600 s held, a ring of 1 GB in parts of 60 s, a look a second.
    pub fn of(log: &Path) -> Self {
        WatchOptions {
            log: Some(log.to_owned()),
            metrics: None,
            otlp: None,
            incidents: None,
            before_s: 120.0,
            after_s: 30.0,
            keep_s: 600.0,
            ring_bytes: 1_000_000_000,
            part_s: 60.0,
            interval: Duration::from_secs(1),
            slo: Slo::DEFAULT,
            thresholds: Thresholds::default(),
        }
    }
}

/// A finding handed out for the first time.
#[derive(Debug, Clone)]
pub struct New {
    /// Its number in this watch, from 1.
    pub number: usize,
    pub finding: Finding,
    /// Its incident file (none for information, or without an incidents folder).
    pub file: Option<PathBuf>,
}

/// What a look found besides new findings: said on stderr by the command, in the status bar by the app.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Note {
    /// The server started again (its log's clock went back).
    Restarted,
    /// Something could not be read or written (counted, never fatal): what and why.
    Trouble(String),
}

/// A finding said, and its incident file while it is still written again.
#[derive(Debug)]
struct Said {
    number: usize,
    /// The finding as last seen, to write its file a last time when its run ends.
    finding: Finding,
    file: Option<PathBuf>,
    first_seen: Instant,
    /// The server's run it was seen in (its restarts before): a restarted server's trace never overwrites the
    /// incident of the run before.
    run: u32,
    /// When its file was last written, and whether the write after `after_s` was made (the last one).
    written: Option<Instant>,
    closed: bool,
}

/// The least time between two writes of one incident file while what follows it is added.
const REWRITE_EVERY: Duration = Duration::from_secs(5);

/// The least time from one look's start to the next when the log grows: a line written waits at most this, and the
/// look, to be read, where it waited `interval`; a look is also never begun sooner than four times what the last
/// took after it began (a log written fast costs the watch a quarter of a core at most).
const SOONEST: Duration = Duration::from_millis(100);

/// How often [`Watcher::wait`] asks whether the log grew (one `stat`) or spans came.
const ASK_EVERY: Duration = Duration::from_millis(10);

/// A watch in progress.
pub struct Watcher {
    options: WatchOptions,
    tail: ServerLogTail,
    metrics: Option<Metrics>,
    receiver: Option<Receiver>,
    ring: Option<Ring>,
    said: HashMap<(String, String), Said>,
    /// The latest time read and the restarts seen at the last news, and when it came.
    seen: Option<(i64, u32)>,
    last_news: Instant,
    /// When the last look began (its read).
    look_began: Instant,
    /// The most requests held at once, and how many were forgotten past `keep_s`.
    pub requests: usize,
    pub forgotten: usize,
    /// What the last look judged (the log's trace with the metrics' readings), and its findings.
    trace: Option<Trace>,
    /// With metrics, the log's trace alone as last made (its readings are joined to it at each look); the latest
    /// time it holds and its report.
    log_trace: Option<Trace>,
    log_latest_ns: Option<i64>,
    report: Option<tokenscope_core::trace::report::Report>,
    /// Whether the ring's pending part is written with the next files due (the last look).
    flush_ring: bool,
    /// Whether `trace` is still to be judged, and whether the last read was the last look.
    to_judge: bool,
    flush: bool,
    findings: Vec<Finding>,
    /// The incident files due to be written from `trace` ([`Self::write_due`]), and the finding each keeps.
    due: Vec<(PathBuf, Finding)>,
}

impl Watcher {
    /// A watch of `options.log` (it need not exist yet) and of the spans received.
    ///
    /// # Errors
    /// Neither a log nor a receiver is given; the incidents folder or its ring cannot be made, or the metrics client
    /// or the receiver cannot start: why.
    pub fn new(options: WatchOptions) -> Result<Self, String> {
        if options.log.is_none() && options.otlp.is_none() {
            return Err("nothing to watch: give the server's log (--log), or receive its spans (--otlp)".to_owned());
        }
        let ring = match &options.incidents {
            Some(dir) => {
                std::fs::create_dir_all(dir)
                    .map_err(|e| format!("{}: cannot make the incidents folder: {e}", dir.display()))?;
                Some(Ring::new(&dir.join("ring"), options.ring_bytes, options.part_s)?)
            }
            None => None,
        };
        let metrics = match &options.metrics {
            Some(url) => Some(Metrics::new(url, options.interval).map_err(|e| format!("--metrics {url}: {e}"))?),
            None => None,
        };
        let receiver = match &options.otlp {
            Some(addr) => Some(Receiver::start(addr).map_err(|e| format!("--otlp {addr}: {e}"))?),
            None => None,
        };
        Ok(Watcher {
            tail: options
                .log
                .as_deref()
                .map_or_else(ServerLogTail::none, ServerLogTail::new),
            options,
            metrics,
            receiver,
            ring,
            said: HashMap::new(),
            seen: None,
            last_news: Instant::now(),
            look_began: Instant::now(),
            requests: 0,
            forgotten: 0,
            trace: None,
            log_trace: None,
            log_latest_ns: None,
            report: None,
            flush_ring: false,
            to_judge: false,
            flush: false,
            findings: Vec::new(),
            due: Vec::new(),
        })
    }

    /// The options it runs with.
    pub fn options(&self) -> &WatchOptions {
        &self.options
    }

    /// Reads what the log and the metrics gained, runs the findings, writes incident files and the ring's part when
    /// due, then forgets what is past `keep_s`. `flush` (the last look): the ring's pending part and every incident
    /// file still open are written now.
    pub fn look(&mut self, flush: bool) -> (Vec<New>, Vec<Note>) {
        let (new, mut notes) = self.read_and_judge(flush);
        notes.extend(self.write_due());
        (new, notes)
    }

    /// [`Self::look`] but for the incident files due, which [`Self::write_due`] writes: [`Self::read`], then
    /// [`Self::judge`].
    pub fn read_and_judge(&mut self, flush: bool) -> (Vec<New>, Vec<Note>) {
        let mut notes = self.read(flush);
        let (new, judged) = self.judge();
        notes.extend(judged);
        (new, notes)
    }

    /// Reads what the log, its metrics and its spans gained and makes what is to be judged ([`Self::trace`]): a
    /// window shows it before it is judged, and the incident files after (writing a few minutes around an
    /// incident takes up to 200 ms). Then forgets what is past `keep_s`. `flush`: the last look.
    pub fn read(&mut self, flush: bool) -> Vec<Note> {
        self.look_began = Instant::now();
        let mut notes = Vec::new();
        let spans_came = self.receiver.as_mut().is_some_and(|r| {
            let (came, troubles) = r.take();
            notes.extend(troubles.into_iter().map(Note::Trouble));
            came
        });
        // No spans yet: no part (an empty one would name an engine the log is not).
        let spans: Vec<_> = self
            .receiver
            .iter()
            .filter(|r| r.has_spans())
            .map(Receiver::part)
            .collect();
        if let Err(e) = self.tail.poll_with(&spans, spans_came) {
            notes.push(Note::Trouble(e));
        }
        let restarts = self.tail.restarts();
        // The log's trace, when made again since the last look: taken, not copied.
        let fresh = self.tail.take_loaded().map(|l| {
            self.log_latest_ns = Some(latest_ns(&l.trace));
            self.report = Some(l.report);
            l.trace
        });
        // News: a later time in what the log said, or a server started again.
        let now = self.log_latest_ns.map(|t| (t, restarts));
        if now != self.seen {
            if let Some((_, before)) = self.seen.filter(|&(_, r)| r < restarts) {
                // The run before ended: its incidents written a last time with all it said.
                if let Some(trace) = self.trace.take() {
                    self.close(&trace, before, &mut notes);
                }
                notes.push(Note::Restarted);
            }
            self.seen = now;
            self.last_news = Instant::now();
        }
        // What is judged: the log's trace with the metrics' readings, made again at each look (a reading came), or
        // the log's trace alone, the last one judged again when the log said nothing new.
        let trace = if let Some(m) = &mut self.metrics {
            if m.due(self.look_began, self.options.interval)
                && let Some(e) = m.scrape(self.look_began)
            {
                notes.push(Note::Trouble(format!("metrics: {e} (counted; watch goes on)")));
            }
            m.forget_before(self.options.keep_s);
            if let Some(t) = fresh {
                self.log_trace = Some(t);
            }
            self.log_trace
                .as_ref()
                .map(|t| if m.samples.is_empty() { t.clone() } else { m.joined(t) })
        } else {
            fresh.or_else(|| self.trace.take())
        };
        if let Some(trace) = trace {
            self.trace = Some(trace);
            self.findings.clear();
            self.to_judge = true;
        }
        self.flush = flush;
        self.forgotten += self.tail.forget_older_than(self.options.keep_s);
        if let Some(r) = &mut self.receiver {
            r.forget_before(self.options.keep_s);
        }
        notes
    }

    /// Runs the findings on what [`Self::read`] made, hands out those not said before and queues their incident
    /// files ([`Self::write_due`]); on the last look, writes every incident file still open.
    pub fn judge(&mut self) -> (Vec<New>, Vec<Note>) {
        let mut notes = Vec::new();
        if !std::mem::take(&mut self.to_judge) {
            return (Vec::new(), notes);
        }
        let Some(trace) = self.trace.take() else {
            return (Vec::new(), notes);
        };
        let restarts = self.tail.restarts();
        let findings = find(&trace, &self.options.slo, &self.options.thresholds);
        let new = self.keep(&trace, &findings, restarts);
        if self.flush {
            self.close(&trace, restarts, &mut notes);
        }
        self.flush_ring = self.flush;
        self.requests = self.requests.max(trace.request_count());
        self.trace = Some(trace);
        self.findings = findings;
        (new, notes)
    }

    /// Where its OTLP receiver listens, when it has one.
    pub fn otlp_addr(&self) -> Option<std::net::SocketAddr> {
        self.receiver.as_ref().map(Receiver::addr)
    }

    /// Waits until the next look is due: the log holds what was not read yet (it grew, was emptied or replaced) or
    /// an export of spans came, but not sooner than [`SOONEST`] after the last look began nor than four times what
    /// it took; or `interval` after it began; or `stop` says to stop. Call it after a look.
    pub fn wait(&self, stop: impl Fn() -> bool) {
        let began = self.look_began;
        let soonest = began + SOONEST.max(began.elapsed() * 4);
        let latest = began + self.options.interval;
        loop {
            let now = Instant::now();
            let news = || self.tail.behind() || self.receiver.as_ref().is_some_and(Receiver::waiting);
            if stop() || now >= latest || (now >= soonest && news()) {
                return;
            }
            std::thread::sleep(ASK_EVERY.min(latest - now));
        }
    }

    /// How long since the log last said something new.
    pub fn quiet_for(&self) -> Duration {
        self.last_news.elapsed()
    }

    /// What reading the log found wrong, and the importer's notes, as of the last read.
    pub fn report(&self) -> Option<&tokenscope_core::trace::report::Report> {
        self.report.as_ref()
    }

    /// What the last look judged, and its findings.
    pub fn trace(&self) -> Option<&Trace> {
        self.trace.as_ref()
    }

    pub fn findings(&self) -> &[Finding] {
        &self.findings
    }

    /// Findings said so far.
    pub fn said(&self) -> usize {
        self.said.len()
    }

    /// How the watch goes, in one line after the log's name: requests held and forgotten, metrics read, the ring,
    /// restarts, findings.
    pub fn summary(&self) -> String {
        let scraped = self.metrics.as_ref().map_or_else(String::new, |m| {
            format!("; {} metrics reading(s), {} failed", m.readings, m.failed)
        });
        let kept = self.ring.as_ref().map_or_else(String::new, |r| {
            format!(
                "; the ring holds {} part(s), {} bytes ({} deleted)",
                r.parts().count(),
                r.bytes(),
                r.deleted
            )
        });
        let received = self.receiver.as_ref().map_or_else(String::new, |r| {
            format!(
                "; {} OTLP export(s) received on {}, {} refused",
                r.received,
                r.addr(),
                r.refused
            )
        });
        let restarted = match self.tail.restarts() {
            0 => String::new(),
            n => format!("; the server started again {n} time(s)"),
        };
        format!(
            "{}: {} requests held at most, {} forgotten past --keep-s{scraped}{received}{kept}{restarted}, {} finding(s)",
            self.options.watched(),
            self.requests,
            self.forgotten,
            self.said.len()
        )
    }

    /// Writes the incident files the last look found due, and the ring's part when one is, from its trace; what
    /// could not be written.
    pub fn write_due(&mut self) -> Vec<Note> {
        let mut notes = Vec::new();
        let due = std::mem::take(&mut self.due);
        if let Some(trace) = &self.trace {
            let latest = latest_ns(trace);
            for (file, finding) in &due {
                if let Err(e) = write_incident(trace, finding, self.options.before_s, latest, file) {
                    notes.push(Note::Trouble(format!("{}: {e}", file.display())));
                }
            }
            if let Some(ring) = &mut self.ring
                && let Err(e) = ring.offer(trace, latest, self.flush_ring)
            {
                notes.push(Note::Trouble(format!("ring: {e}")));
            }
        }
        notes
    }

    /// Writes the incident files of `run` still open a last time, from `trace`.
    fn close(&mut self, trace: &Trace, run: u32, notes: &mut Vec<Note>) {
        let latest = latest_ns(trace);
        for s in self.said.values_mut().filter(|s| s.run == run && !s.closed) {
            if let Some(file) = &s.file {
                // Written here, with all the run said: not again from the next look's trace.
                self.due.retain(|(due, _)| due != file);
                if let Err(e) = write_incident(trace, &s.finding, self.options.before_s, latest, file) {
                    notes.push(Note::Trouble(format!("{}: {e}", file.display())));
                }
            }
            s.closed = true;
        }
    }

    /// Hands out the findings not said before and queues the incident files due ([`Self::write_due`]).
    fn keep(&mut self, trace: &Trace, findings: &[Finding], restarts: u32) -> Vec<New> {
        let mut out = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for f in findings {
            // A restarted server's findings are its own: its task ids start again.
            let key = (f.kind.name().to_owned(), format!("{restarts}:{}", subject(trace, f)));
            seen.insert(key.clone());
            let next = self.said.len() + 1;
            let entry = self.said.entry(key);
            let new = matches!(entry, std::collections::hash_map::Entry::Vacant(_));
            let incidents = self.options.incidents.as_ref();
            let s = entry.or_insert_with(|| Said {
                number: next,
                finding: f.clone(),
                // An information (a truncation) is said, not kept.
                file: incidents
                    .filter(|_| f.severity != Severity::Info)
                    .map(|dir| dir.join(format!("incident-{next:03}-{}.parquet", f.kind.name()))),
                first_seen: Instant::now(),
                run: restarts,
                written: None,
                closed: false,
            });
            // Written at once, then again with what followed at most every few seconds, and a last time once
            // `after_s` passed: a look's cost does not grow with the incidents of the last `after_s`.
            let after = s.first_seen.elapsed().as_secs_f64() > self.options.after_s;
            let due = s.written.is_none_or(|w| w.elapsed() >= REWRITE_EVERY);
            let write = s.run == restarts && !s.closed && (new || due || after);
            s.finding = f.clone();
            if write && let Some(file) = &s.file {
                self.due.retain(|(due, _)| due != file);
                self.due.push((file.clone(), f.clone()));
                s.written = Some(Instant::now());
                s.closed = after;
            }
            if new {
                out.push(New {
                    number: s.number,
                    finding: f.clone(),
                    file: s.file.clone(),
                });
            }
        }
        // A finding no longer found (its requests forgotten past keep_s, or a stall the rest of the log unsaid) keeps
        // its file as last written: what is read now would not hold it.
        for (key, s) in &mut self.said {
            if s.run == restarts && !seen.contains(key) {
                s.closed = true;
            }
        }
        out
    }
}

/// The server's metrics, read at each look: its readings so far, and how many reads failed (counted, never fatal).
struct Metrics {
    url: String,
    scraper: Scraper,
    interval_ns: i64,
    samples: Vec<Reading>,
    times: Vec<i64>,
    /// The look whose start the last read was made at.
    read_at: Option<Instant>,
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
            read_at: None,
            readings: 0,
            failed: 0,
        })
    }

    /// Whether the page is to be read at the look begun at `look`: an `interval` or more after the look of the last
    /// read (looks come sooner when the log grows; the page is read at its own pace).
    fn due(&self, look: Instant, interval: Duration) -> bool {
        self.read_at.is_none_or(|at| look.duration_since(at) >= interval)
    }

    /// Reads the page once, at the look begun at `look`; a failure is counted, and given back the first time.
    fn scrape(&mut self, look: Instant) -> Option<String> {
        self.read_at = Some(look);
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
                self.failed += 1;
                return (self.failed == 1).then_some(e);
            }
        }
        None
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
        let mut b = tokenscope_core::trace::TraceBuilder::from_trace(trace.clone());
        let source = b.labels.intern("metrics");
        for (r, &time_ns) in self.samples.iter().zip(&self.times) {
            b.add_sample(tokenscope_core::trace::Sample {
                interval_ns: Some(self.interval_ns),
                num_running: r.running,
                num_waiting: r.waiting,
                kv_usage: r.kv_usage,
                prompt_throughput: r.prompt_throughput,
                generation_throughput: r.generation_throughput,
                ..tokenscope_core::trace::Sample::at(source, time_ns)
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
pub fn latest_ns(trace: &Trace) -> i64 {
    let r = &trace.requests;
    r.arrival_ns
        .iter()
        .copied()
        .chain(r.finished_ns.iter().flatten())
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
    let mut part = tokenscope_core::trace::slice::slice(trace, from_ns, latest_ns.max(f.to_ns), None);
    part.meta.note = Some(format!(
        "incident kept by tokenscope watch: {} [{}]: {}",
        f.kind.title(),
        f.kind.name(),
        f.summary
    ));
    let tmp = file.with_extension("tmp.parquet");
    tokenscope_core::format::write(&part, &tmp).map_err(|e| e.to_string())?;
    std::fs::rename(&tmp, file).map_err(|e| e.to_string())
}
