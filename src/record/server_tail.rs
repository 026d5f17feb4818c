//! The server's log read as it is written, for a live view's engine track. A llama-server log is read line by line
//! as it grows, only what was written since the last look ([`tokenscope_core::import::llamacpp_log::Incremental`]):
//! a snapshot's join costs the records made of what was read, not a read of the whole log, which grows by about 2 KB
//! a token at `-lv 5`. Another server's log is read whole each time it grew.
//!
//! A llama-server log rotated (renamed away and made again) is read to its end before the new file is; a log emptied
//! in place (an operator's `> log`, logrotate's copytruncate) is read again from its start. Either way the server
//! goes on, and so does the reading: the new file's first time, later than the last read, says so. A first time
//! earlier than the last read is a restarted server (its clock starts at its start): its log is read afresh and
//! the restart counted ([`ServerLogTail::restarts`]).

use std::path::{Path, PathBuf};

use super::tail::{Got, Lines};
use crate::import::llamacpp_log::{self, Incremental};
use crate::load::Loaded;

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
    /// Another server's: read whole when it grew (its length when last read).
    Whole(Option<u64>),
}

/// A server's log being read as it is written.
#[derive(Debug)]
pub struct ServerLogTail {
    path: PathBuf,
    reading: Reading,
    /// Its trace as last read.
    last: Option<Loaded>,
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

impl ServerLogTail {
    /// A tail of the log at `path` (it need not exist yet).
    pub fn new(path: &Path) -> Self {
        ServerLogTail {
            path: path.to_owned(),
            reading: Reading::Unknown,
            last: None,
        }
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The log's trace as last read, when it was.
    pub fn loaded(&self) -> Option<&Loaded> {
        self.last.as_ref()
    }

    /// How many times the server was seen to start again (a llama-server log whose clock went back).
    pub fn restarts(&self) -> u32 {
        match &self.reading {
            Reading::Llamacpp(_, follow) => follow.restarts,
            _ => 0,
        }
    }

    /// Forgets what a llama-server log said of requests and steps that ended more than `keep_s` seconds before its
    /// last line (a task still running is kept): what a long watch holds is the last minutes. The trace is made
    /// again at the next read. Returns the requests forgotten.
    pub fn forget_older_than(&mut self, keep_s: f64) -> usize {
        let Reading::Llamacpp(_, follow) = &mut self.reading else {
            return 0;
        };
        let Some(last) = follow.log.last_us() else {
            return 0;
        };
        follow.log.forget_before(last - (keep_s * 1e6) as i64)
    }

    /// Reads what the log gained and makes its trace again when it did ([`Self::loaded`]).
    ///
    /// # Errors
    /// The log cannot be read, or is no server's log: why (the last trace read is kept).
    pub fn poll(&mut self) -> Result<(), String> {
        if let Some(loaded) = self.read()? {
            self.last = Some(loaded);
        }
        Ok(())
    }

    /// The log's trace when it gained anything since the last read.
    fn read(&mut self) -> Result<Option<Loaded>, String> {
        if matches!(self.reading, Reading::Unknown) {
            self.reading = match head(&self.path) {
                None => return Ok(None),
                Some(text) if llamacpp_log::looks_like(&text) => {
                    Reading::Llamacpp(Lines::new(&self.path), Follow::default())
                }
                Some(_) => Reading::Whole(None),
            };
        }
        let path = self.path.clone();
        match &mut self.reading {
            Reading::Unknown => Ok(None),
            Reading::Llamacpp(lines, follow) => {
                let got = lines.read(READ_AT_MOST, |line| follow.line(line));
                match got.map_err(|e| format!("{}: {e}", path.display()))? {
                    // Made again (rotated, emptied, or a restarted server's): its lines held until one says which.
                    Got::Restarted => {
                        follow.undecided = Some(Vec::new());
                        lines
                            .read(READ_AT_MOST, |line| follow.line(line))
                            .map_err(|e| format!("{}: {e}", path.display()))?;
                    }
                    // Behind (a large log already written): its records are made once it is read to its end, when
                    // its last line's time and the file's last change give its clock, as a whole read's do.
                    Got::Lines { read, .. } if read >= READ_AT_MOST => return Ok(None),
                    Got::Lines { read, .. } if read > 0 => {}
                    Got::NotThere | Got::Lines { .. } => return Ok(None),
                }
                let (trace, report) = crate::import::llamacpp_live(&follow.log, &path);
                Ok(Some(Loaded { trace, report }))
            }
            Reading::Whole(read_at) => {
                let len = std::fs::metadata(&path).map_or(0, |m| m.len());
                if *read_at == Some(len) {
                    return Ok(None);
                }
                *read_at = Some(len);
                crate::load::load(&path, &crate::ingest::Progress::default())
                    .map(Some)
                    .map_err(|e| e.to_string())
            }
        }
    }
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
