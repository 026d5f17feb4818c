//! The server's log read as it is written, for a live view's engine track and a watch. A llama-server log is read
//! line by line as it grows, only what was written since the last look ([`tokenscope_core::import::llamacpp_log::Incremental`]):
//! a snapshot's join costs the records made of what was read, not a read of the whole log, which grows by about 2 KB
//! a token at `-lv 5`. A vLLM or SGLang log is read line by line too, its lines held with their times ([`Held`]) and
//! made into a trace when it gained any; another file is read whole each time it grew.
//!
//! A log rotated (renamed away and made again) is read to its end before the new file is; a log emptied in place (an
//! operator's `> log`, logrotate's copytruncate) is read again from its start. Either way the server goes on, and so
//! does the reading. A llama-server's clock starts at its start: a new file whose first time is earlier than the last
//! read is a restarted server, its log read afresh and the restart counted ([`ServerLogTail::restarts`]). vLLM's and
//! SGLang's times are the wall clock's, so their lines go on across a restart; uvicorn's `Started server process`
//! line, which both print once at each start, counts it.

use std::path::{Path, PathBuf};

use std::collections::VecDeque;

use super::tail::{Got, Lines};
use tokenscope_core::import::llamacpp_log::{self, Incremental};
use tokenscope_core::import::{Kind, LivePart};
use tokenscope_core::load::Loaded;

/// Bytes read at most per look: a log far ahead is caught up over several snapshots.
const READ_AT_MOST: u64 = 64 << 20;
/// What is looked at to tell a llama-server log from another.
const HEAD: u64 = 64 << 10;

/// How the log is read.
#[derive(Debug)]
enum Reading {
    /// Not known yet (the file is empty or not there).
    Unknown,
    /// A llama-server log: line by line as it grows.
    Llamacpp(Lines, Follow),
    /// A vLLM or SGLang log: its lines held as they are read.
    Held(Lines, Box<Held>),
    /// Another file: read whole when it grew (its length when last read).
    Whole(Option<u64>),
    /// No log is followed.
    Absent,
}

/// A server's log being read as it is written.
#[derive(Debug)]
pub struct ServerLogTail {
    path: PathBuf,
    reading: Reading,
    /// Its trace as last made.
    last: Option<Loaded>,
    /// A whole read's trace, not yet taken into `last`.
    whole: Option<Loaded>,
}

/// Lines at most held while a made-again llama-server log has given no time yet (a log without timestamps gives
/// none): then it is taken for the same server's.
const UNDECIDED_AT_MOST: usize = 10_000;

/// A llama-server log's lines as they are read, across rotations and restarts.
#[derive(Debug, Default)]
struct Follow {
    log: Box<Incremental>,
    /// The lines of a file made again at the path, held until one says a time: whether the server went on or began
    /// again.
    undecided: Option<Vec<Vec<u8>>>,
    restarts: u32,
}

impl Follow {
    fn line(&mut self, raw: &[u8]) {
        let Some(held) = &mut self.undecided else {
            self.log.line(raw, 0);
            return;
        };
        held.push(raw.to_vec());
        let time = llamacpp_log::line_time_us(raw);
        if time.is_none() && held.len() < UNDECIDED_AT_MOST {
            return;
        }
        let held = std::mem::take(held);
        self.undecided = None;
        if let (Some(t), Some(last)) = (time, self.log.last_us())
            && t < last
        {
            *self.log = Incremental::default();
            self.restarts += 1;
        }
        for l in &held {
            self.log.line(l, 0);
        }
    }
}

/// The uvicorn line vLLM's and SGLang's servers print once at each start (once per API server process: lines of
/// one start come within [`ONE_START_S`] of each other).
const STARTED: &[u8] = b"Started server process";
const ONE_START_S: i64 = 10;

/// A vLLM or SGLang log's lines as they are read, each with the time of the last line that gave one (seconds of its
/// local clock, a year ahead past a New Year the log gives no year for), so that those older than a watch's window
/// can be forgotten.
#[derive(Debug)]
struct Held {
    kind: Kind,
    lines: VecDeque<(i64, Vec<u8>)>,
    /// The time of the last line that gave one, and its local time's month (a log without years runs on past
    /// December).
    last: Option<i64>,
    month: u32,
    years: i64,
    /// Starts of the server seen (`Started server process`), the time of the last, and those the log held when it
    /// was first read to its end (starts before the watch are not restarts).
    starts: u32,
    last_start: Option<i64>,
    starts_before: Option<u32>,
    /// The lines held, one after another, as the importer reads them; made again when lines came.
    text: Vec<u8>,
    stale: bool,
}

impl Held {
    fn new(kind: Kind) -> Self {
        Held {
            kind,
            lines: VecDeque::new(),
            last: None,
            month: 0,
            years: 0,
            starts: 0,
            last_start: None,
            starts_before: None,
            text: Vec::new(),
            stale: false,
        }
    }

    fn line(&mut self, raw: &[u8]) {
        use tokenscope_core::import::vllm_log::{LineTime, line_time};
        let form = if self.kind == Kind::SglangLog {
            LineTime::Sglang
        } else {
            LineTime::Vllm
        };
        if let Some(t) = line_time(raw, form) {
            // A log without years runs from December into January: its time goes on.
            if t.year.is_none() && t.month + 6 < self.month {
                self.years += 1;
            }
            self.month = t.month;
            let year = i64::from(t.year.unwrap_or(0)) + self.years;
            let s = ((year * 12 + i64::from(t.month) - 1) * 31 + i64::from(t.day) - 1) * 86_400
                + i64::from(t.second_of_day);
            self.last = Some(self.last.map_or(s, |l| l.max(s)));
        }
        if memchr::memmem::find(raw, STARTED).is_some() {
            let now = self.last.unwrap_or(i64::MIN);
            if self.last_start.is_none_or(|t| now.saturating_sub(t) > ONE_START_S) {
                self.starts += 1;
            }
            self.last_start = Some(now);
        }
        self.lines.push_back((self.last.unwrap_or(i64::MIN), raw.to_vec()));
        self.stale = true;
    }

    /// The log was read to its end: the starts it held so far were before the watch.
    fn caught_up(&mut self) {
        self.starts_before.get_or_insert(self.starts);
    }

    /// Starts of the server after its first and after the log was first read to its end: a watch begun while the
    /// server was still starting sees its start, not a restart. (A watch begun on a rotated log whose start line is
    /// in the file before takes the first restart for the start.)
    fn restarts(&self) -> u32 {
        self.starts_before
            .map_or(0, |before| self.starts.saturating_sub(before.max(1)))
    }

    /// Forgets the lines written more than `keep_s` before the last: the SGLang request timing lines among them.
    fn forget_before(&mut self, keep_s: f64) -> usize {
        let Some(last) = self.last else { return 0 };
        let cutoff = last - keep_s.ceil() as i64;
        let mut requests = 0;
        while self.lines.front().is_some_and(|(t, _)| *t < cutoff) {
            if let Some((_, line)) = self.lines.pop_front() {
                requests += usize::from(tokenscope_core::import::sglang_pd::is_time_stats(
                    &String::from_utf8_lossy(&line),
                ));
                self.stale = true;
            }
        }
        requests
    }

    /// The lines held, as one text.
    fn text(&mut self) -> &[u8] {
        if self.stale {
            self.text.clear();
            for (_, line) in &self.lines {
                self.text.extend_from_slice(line);
                self.text.push(b'\n');
            }
            self.stale = false;
        }
        &self.text
    }
}

impl ServerLogTail {
    /// A tail of the log at `path` (it need not exist yet).
    pub fn new(path: &Path) -> Self {
        ServerLogTail {
            path: path.to_owned(),
            reading: Reading::Unknown,
            last: None,
            whole: None,
        }
    }

    /// No log: the trace is made of what is given beside it ([`Self::poll_with`]: a receiver's spans).
    pub fn none() -> Self {
        let mut tail = Self::new(Path::new(""));
        tail.reading = Reading::Absent;
        tail
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The log's trace as last made, when it was.
    pub fn loaded(&self) -> Option<&Loaded> {
        self.last.as_ref()
    }

    /// The log's trace as last made, taken: `None` until it is made again (the log gained, or what is given beside
    /// it did).
    pub fn take_loaded(&mut self) -> Option<Loaded> {
        self.last.take()
    }

    /// Whether the log holds what was not read yet ([`Lines::behind`]); one not recognised yet, whether it has bytes.
    pub fn behind(&self) -> bool {
        let length = || std::fs::metadata(&self.path).ok().map(|m| m.len());
        match &self.reading {
            Reading::Llamacpp(lines, _) | Reading::Held(lines, _) => lines.behind(),
            Reading::Unknown => length().is_some_and(|l| l > 0),
            Reading::Whole(read) => length().is_some_and(|l| Some(l) != *read),
            Reading::Absent => false,
        }
    }

    /// How many times the server was seen to start again: a llama-server log whose clock went back, a vLLM or
    /// SGLang log's `Started server process` once the log was first read to its end.
    pub fn restarts(&self) -> u32 {
        match &self.reading {
            Reading::Llamacpp(_, follow) => follow.restarts,
            Reading::Held(_, held) => held.restarts(),
            _ => 0,
        }
    }

    /// Forgets what the log said of requests and steps that ended more than `keep_s` seconds before its last line
    /// (a llama-server task still running is kept; a vLLM or SGLang log's lines older than that): what a long watch
    /// holds is the last minutes. The trace is made again at the next read. Returns the requests forgotten.
    pub fn forget_older_than(&mut self, keep_s: f64) -> usize {
        match &mut self.reading {
            Reading::Llamacpp(_, follow) => {
                let Some(last) = follow.log.last_us() else {
                    return 0;
                };
                follow.log.forget_before(last - (keep_s * 1e6) as i64)
            }
            Reading::Held(_, held) => held.forget_before(keep_s),
            _ => 0,
        }
    }

    /// Reads what the log gained and makes its trace again when it did ([`Self::loaded`]).
    ///
    /// # Errors
    /// The log cannot be read, or is no server's log: why (the last trace made is kept).
    pub fn poll(&mut self) -> Result<(), String> {
        self.poll_with(&[], false)
    }

    /// [`Self::poll`], the trace made with `also` (an OTLP receiver's spans), again when the log gained anything or
    /// `also_gained`.
    ///
    /// # Errors
    /// As [`Self::poll`]; the trace is still made of `also` when it gained.
    pub fn poll_with(&mut self, also: &[LivePart<'_>], also_gained: bool) -> Result<(), String> {
        let gained = self.gather();
        if (gained.as_ref().is_ok_and(|&g| g) || also_gained)
            && let Some(loaded) = self.make(also)
        {
            self.last = Some(loaded);
        }
        gained.map(|_| ())
    }

    /// Reads what the log gained: whether its trace is to be made again (it gained, and was read to its end).
    fn gather(&mut self) -> Result<bool, String> {
        if matches!(self.reading, Reading::Unknown) {
            self.reading = match head(&self.path) {
                None => return Ok(false),
                Some(text) if llamacpp_log::looks_like(&text) => {
                    Reading::Llamacpp(Lines::new(&self.path), Follow::default())
                }
                Some(text) => match sniff(&text) {
                    Sniffed::Held(kind) => Reading::Held(Lines::new(&self.path), Box::new(Held::new(kind))),
                    Sniffed::Other => Reading::Whole(None),
                    // Nothing says yet (a server still starting has printed only its warnings): looked at again,
                    // unless its start is all that is looked at.
                    Sniffed::Unsaid if std::fs::metadata(&self.path).is_ok_and(|m| m.len() >= HEAD) => {
                        Reading::Whole(None)
                    }
                    Sniffed::Unsaid => return Ok(false),
                },
            };
        }
        let path = self.path.clone();
        let failed = |e: std::io::Error| format!("{}: {e}", path.display());
        match &mut self.reading {
            Reading::Unknown | Reading::Absent => Ok(false),
            Reading::Llamacpp(lines, follow) => {
                match lines.read(READ_AT_MOST, |line| follow.line(line)).map_err(failed)? {
                    // Made again (rotated, emptied, or a restarted server's): its lines held until one says which.
                    Got::Restarted => {
                        follow.undecided = Some(Vec::new());
                        lines.read(READ_AT_MOST, |line| follow.line(line)).map_err(failed)?;
                        Ok(true)
                    }
                    // Behind (a large log already written): its records are made once it is read to its end, when its
                    // last line's time and the file's last change give its clock, as a whole read's do.
                    Got::Lines { read, .. } => Ok(read > 0 && read < READ_AT_MOST),
                    Got::NotThere => Ok(false),
                }
            }
            Reading::Held(lines, held) => match lines.read(READ_AT_MOST, |line| held.line(line)).map_err(failed)? {
                // Rotated or emptied: the new file's lines follow the old's.
                Got::Restarted => {
                    lines.read(READ_AT_MOST, |line| held.line(line)).map_err(failed)?;
                    Ok(true)
                }
                Got::Lines { read, .. } => {
                    if read < READ_AT_MOST {
                        held.caught_up();
                    }
                    Ok(read > 0 && read < READ_AT_MOST)
                }
                Got::NotThere => Ok(false),
            },
            Reading::Whole(read_at) => {
                let len = std::fs::metadata(&path).map_or(0, |m| m.len());
                if *read_at == Some(len) {
                    return Ok(false);
                }
                *read_at = Some(len);
                let loaded = tokenscope_core::load::load(&path, &tokenscope_core::ingest::Progress::default())
                    .map_err(|e| e.to_string())?;
                self.whole = Some(loaded);
                Ok(true)
            }
        }
    }

    /// The trace of what the log holds, with `also`; `None` when there is nothing to make it of.
    fn make(&mut self, also: &[LivePart<'_>]) -> Option<Loaded> {
        let path = self.path.as_path();
        let own = match &mut self.reading {
            // A llama-server log alone: its look places only what changed.
            Reading::Llamacpp(_, follow) if also.is_empty() => {
                let (trace, report) = tokenscope_core::import::llamacpp_live(&mut follow.log, path);
                return Some(Loaded { trace, report });
            }
            Reading::Llamacpp(_, follow) => Some(LivePart::Llamacpp { log: &follow.log, path }),
            Reading::Held(_, held) => Some(LivePart::Bytes {
                kind: held.kind,
                path,
                bytes: held.text(),
            }),
            // A whole read's trace is taken as it is: an OTLP receiver's spans are joined only to a server's log.
            Reading::Whole(_) => {
                let mut whole = self.whole.take()?;
                if !also.is_empty() {
                    whole.report.notes.push(format!(
                        "{}: spans received are joined to a llama.cpp, vLLM or SGLang log only; this one is read whole",
                        path.display()
                    ));
                }
                return Some(whole);
            }
            Reading::Unknown | Reading::Absent => None,
        };
        if own.is_none() && also.is_empty() {
            return None;
        }
        let parts: Vec<LivePart<'_>> = own.into_iter().chain(also.iter().copied()).collect();
        let (trace, report) = tokenscope_core::import::live(&parts);
        Some(Loaded { trace, report })
    }
}

/// What the start of a log that is not llama-server's says of it.
enum Sniffed {
    /// A vLLM or SGLang log, held line by line (its lines timed as theirs are, even before a stats line says which).
    Held(Kind),
    /// Another file, read whole.
    Other,
    /// Nothing yet.
    Unsaid,
}

/// What the start of a log, `text`, says of it.
fn sniff(text: &str) -> Sniffed {
    use tokenscope_core::import::vllm_log::{LineTime, line_time};
    match tokenscope_core::import::sniff_bytes(text.as_bytes()) {
        Some(kind @ (Kind::VllmLog | Kind::SglangLog)) => return Sniffed::Held(kind),
        Some(_) => return Sniffed::Other,
        None => {}
    }
    for l in text.lines() {
        if line_time(l.as_bytes(), LineTime::Sglang).is_some() {
            return Sniffed::Held(Kind::SglangLog);
        }
        if line_time(l.as_bytes(), LineTime::Vllm).is_some() {
            return Sniffed::Held(Kind::VllmLog);
        }
    }
    Sniffed::Unsaid
}

/// The start of the file as text, when it has any.
fn head(path: &Path) -> Option<String> {
    use std::io::Read;
    let file = std::fs::File::open(path).ok()?;
    let mut bytes = Vec::new();
    file.take(HEAD).read_to_end(&mut bytes).ok()?;
    // Only whole lines: the last may be cut.
    let end = bytes.iter().rposition(|&b| b == b'\n')?;
    Some(String::from_utf8_lossy(&bytes[..end]).into_owned())
}
