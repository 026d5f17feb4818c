//! The server's log read as it is written, for a live view's engine track. A llama-server log is read line by line
//! as it grows, only what was written since the last look ([`tokenscope_core::import::llamacpp_log::Incremental`]):
//! a snapshot's join costs the records made of what was read, not a read of the whole log, which grows by about 2 KB
//! a token at `-lv 5`. Another server's log is read whole each time it grew.

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
    Llamacpp(Lines, Box<Incremental>),
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
                    Reading::Llamacpp(Lines::new(&self.path), Box::default())
                }
                Some(_) => Reading::Whole(None),
            };
        }
        let path = self.path.clone();
        match &mut self.reading {
            Reading::Unknown => Ok(None),
            Reading::Llamacpp(lines, log) => {
                let got = lines.read(READ_AT_MOST, |line| log.line(line, 0));
                match got.map_err(|e| format!("{}: {e}", path.display()))? {
                    // Made again from its start (a restarted server writing the same file): read again.
                    Got::Restarted => {
                        **log = Incremental::default();
                        lines
                            .read(READ_AT_MOST, |line| log.line(line, 0))
                            .map_err(|e| format!("{}: {e}", path.display()))?;
                    }
                    // Behind (a large log already written): its records are made once it is read to its end, when
                    // its last line's time and the file's last change give its clock, as a whole read's do.
                    Got::Lines { read, .. } if read >= READ_AT_MOST => return Ok(None),
                    Got::Lines { read, .. } if read > 0 => {}
                    Got::NotThere | Got::Lines { .. } => return Ok(None),
                }
                let (trace, report) = crate::import::llamacpp_live(log, &path);
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
