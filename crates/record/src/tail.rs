//! Reading a recording's journal as it grows: what a live view shows. Each [`JournalTail::poll`] reads the lines
//! written since the last (a line still being written waits for its end), and [`JournalTail::snapshot`] makes the
//! trace of everything read so far, the requests still streaming shown up to their last chunk.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use tokenscope_core::import::recording::{Capture, Unfinished};
use tokenscope_core::import::{Kind, Sink};
use tokenscope_core::load::Loaded;
use tokenscope_core::trace::TraceBuilder;
use tokenscope_core::trace::report::{Encoding, Problem, SourceFile};

/// Bytes read at most per poll: a journal far ahead is caught up over several polls, each snapshot showing more.
const READ_AT_MOST: u64 = 64 << 20;

/// What a read of a growing file found.
pub enum Got {
    /// The file is not there yet.
    NotThere,
    /// The file was made again (another file in its place, or shorter than what was read): to be read again from its
    /// start.
    Restarted,
    /// The file's length, and the bytes this read took.
    Lines {
        /// The file's length.
        written: u64,
        /// Bytes this read took.
        read: u64,
    },
}

/// A file's lines as they are written: each read hands on the lines whose end was written since the last.
#[derive(Debug)]
pub struct Lines {
    path: PathBuf,
    /// Bytes of the file read.
    offset: u64,
    /// The start of a line whose end has not been written yet.
    partial: Vec<u8>,
    /// The file the offsets are in: a journal written again without a rotation's part is put in place by a
    /// rename, and can be longer than what was read of the old one.
    identity: Option<FileId>,
    /// The file last read, kept open: while it is, its inode cannot be freed and given to the next file at the
    /// path, so a file system without birth times tells the two apart too.
    held: Option<std::fs::File>,
    /// Passing over a line longer than the loader's longest ([`MAX_LINE`]) up to its end (a file that is no journal
    /// or log, or a writer gone wrong): memory stays bounded.
    passing: bool,
    /// The file's first bytes as read (up to [`HEAD`]): a file emptied and written again past what was read, in
    /// place (an operator's `> log`, logrotate's copytruncate), is told by its start.
    head: Vec<u8>,
}

/// Bytes of a file's start kept to tell it was written again in place.
const HEAD: usize = 64;

use tokenscope_core::format::jsonl::MAX_LINE_BYTES as MAX_LINE;

/// Which file is at a path: its device and inode (on Unix) and its birth time (where the file system keeps it, so an
/// inode freed by a rename and given to the next file is told apart; a file system that keeps none, where a reader
/// misses two rotations in a row and the inode comes back, is not). Two readers of one journal compare theirs to
/// know whether their offsets are in the same file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FileId {
    device: u64,
    inode: u64,
    born: Option<std::time::SystemTime>,
}

impl FileId {
    fn of(meta: &std::fs::Metadata) -> Self {
        #[cfg(unix)]
        let (device, inode) = {
            use std::os::unix::fs::MetadataExt;
            (meta.dev(), meta.ino())
        };
        // Elsewhere the birth time alone (Windows keeps it).
        #[cfg(not(unix))]
        let (device, inode) = (0, 0);
        FileId {
            device,
            inode,
            born: meta.created().ok(),
        }
    }
}

impl Lines {
    pub fn new(path: &Path) -> Self {
        Lines {
            path: path.to_owned(),
            offset: 0,
            partial: Vec::new(),
            identity: None,
            held: None,
            passing: false,
            head: Vec::new(),
        }
    }

    /// The file the offsets are in, once read.
    pub fn identity(&self) -> Option<FileId> {
        self.identity
    }

    /// Whether the file at the path holds what was not read: it is longer or shorter than what was read, or another
    /// file took its place. One `stat`, cheap enough to ask many times a second; a file not there holds nothing.
    pub fn behind(&self) -> bool {
        std::fs::metadata(&self.path)
            .is_ok_and(|meta| meta.len() != self.offset || self.identity.is_some_and(|id| id != FileId::of(&meta)))
    }

    /// The end of the last whole line read: where the next line starts.
    pub fn lines_end(&self) -> u64 {
        self.offset - self.partial.len() as u64
    }

    /// Reads at most `at_most` bytes written since the last read and calls `each` with every line they end (without
    /// its newline).
    ///
    /// A file replaced at the path (a rename's rotation) is first read to its end through the handle kept open, so
    /// what was written to it after the last read is not lost; then [`Got::Restarted`] says the next read starts
    /// the new file. A file emptied in place (shorter than what was read, or its start changed) cannot be read
    /// further: what was written to it between the last read and its emptying is gone with it.
    pub fn read(&mut self, at_most: u64, mut each: impl FnMut(&[u8])) -> std::io::Result<Got> {
        let file = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Got::NotThere),
            Err(e) => return Err(e),
        };
        let meta = file.metadata()?;
        let (written, now) = (meta.len(), Some(FileId::of(&meta)));
        let replaced = self.identity.is_some() && now != self.identity;
        if replaced && let Some(old) = self.held.take() {
            self.take(&old, u64::MAX, &mut each)?;
            if !self.partial.is_empty() && !self.passing {
                // The old file's last line, ended by its rotation.
                each(&std::mem::take(&mut self.partial));
            }
        }
        if written < self.offset || replaced || !self.same_start(&file)? {
            *self = Lines::new(&self.path);
            return Ok(Got::Restarted);
        }
        self.identity = now;
        let read = self.take(&file, at_most, &mut each)?;
        self.held = Some(file);
        Ok(Got::Lines { written, read })
    }

    /// Whether `file` starts as the file read so far did.
    fn same_start(&self, file: &std::fs::File) -> std::io::Result<bool> {
        let want = usize::try_from(self.offset).map_or(HEAD, |o| o.min(HEAD));
        if self.head.len() >= want {
            let mut file = file;
            let mut start = Vec::with_capacity(want);
            file.seek(SeekFrom::Start(0))?;
            file.take(want as u64).read_to_end(&mut start)?;
            return Ok(start == self.head[..want]);
        }
        Ok(true)
    }

    /// Reads at most `at_most` bytes of `file` from the offset, handing on each line they end.
    fn take(&mut self, file: &std::fs::File, at_most: u64, each: &mut impl FnMut(&[u8])) -> std::io::Result<u64> {
        let mut file = file;
        file.seek(SeekFrom::Start(self.offset))?;
        let mut bytes = Vec::new();
        let read = file.take(at_most).read_to_end(&mut bytes)?;
        // The start kept only when this read begins where the kept start ends (not after a skip).
        if self.head.len() < HEAD && self.offset == self.head.len() as u64 {
            let more = (HEAD - self.head.len()).min(bytes.len());
            self.head.extend_from_slice(&bytes[..more]);
        }
        self.offset += read as u64;
        let mut start = 0;
        while let Some(n) = bytes[start..].iter().position(|&b| b == b'\n') {
            let end = start + n;
            if self.passing {
                // The end of a line too long to be one of a journal or a log: passed over.
                self.passing = false;
            } else if self.partial.is_empty() {
                each(&bytes[start..end]);
            } else {
                let mut line = std::mem::take(&mut self.partial);
                line.extend_from_slice(&bytes[start..end]);
                each(&line);
            }
            start = end + 1;
        }
        if !self.passing {
            self.partial.extend_from_slice(&bytes[start..]);
        }
        if self.partial.len() > MAX_LINE {
            self.partial = Vec::new();
            self.passing = true;
        }
        Ok(read as u64)
    }

    /// Goes on from `offset`, the end of a whole line of `file` (what another reader has read up to); the file is
    /// taken for this reader's when it has read none.
    pub fn skip_to(&mut self, offset: u64, file: Option<FileId>) {
        if self.identity.is_none() {
            self.identity = file;
        }
        if offset > self.offset {
            self.offset = offset;
            self.partial.clear();
            self.passing = false;
        }
    }
}

impl Parsed {
    fn take_line(&mut self, line: &[u8]) {
        self.lines += 1;
        if line.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let why = match serde_json::from_slice::<serde_json::Value>(line) {
            Ok(v) => self.capture.line(&v, self.lines).err().map(str::to_owned),
            Err(e) => Some(format!("not a recorded stream ({e})")),
        };
        if let Some(why) = why {
            self.rejected_count += 1;
            if self.rejected.len() < 20 {
                self.rejected.push((self.lines, why));
            }
        }
    }
}

/// A journal being read as it is written.
#[derive(Debug)]
pub struct JournalTail {
    path: PathBuf,
    reader: Lines,
    read: Parsed,
}

/// What the lines read so far told.
#[derive(Debug, Default)]
struct Parsed {
    /// Lines read (the next line's number is `lines + 1`).
    lines: u64,
    capture: Capture,
    /// Lines that were not a capture's, with their line number and why (the first few), and how many.
    rejected: Vec<(u64, String)>,
    rejected_count: u64,
}

/// How far the reading is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    /// The journal's file the offsets are in (a rotation puts a new one in place).
    pub file: Option<FileId>,
    /// Bytes of the journal read.
    pub read: u64,
    /// The end of the last whole line read: everything before it is in the snapshot made now.
    pub lines_end: u64,
    /// Bytes written to it when it was last looked at.
    pub written: u64,
    /// Bytes this poll read.
    pub fresh: u64,
    /// Requests seen, and how many of them are still streaming.
    pub requests: usize,
    /// Requests whose end has not been read.
    pub streaming: usize,
    /// Chunks read.
    pub chunks: u64,
}

impl JournalTail {
    /// A tail of the journal at `path`, from its start (the file need not exist yet).
    pub fn new(path: &Path) -> Self {
        JournalTail {
            path: path.to_owned(),
            reader: Lines::new(path),
            read: Parsed::default(),
        }
    }

    /// The journal's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads what was written since the last poll; how far the reading is. A journal not created yet reads as
    /// empty.
    ///
    /// # Errors
    /// The journal exists but cannot be read.
    pub fn poll(&mut self) -> std::io::Result<Progress> {
        let mut got = self.reader.read(READ_AT_MOST, |line| self.read.take_line(line))?;
        if matches!(got, Got::Restarted) {
            // A journal made again from the start (a new recording to the same output) is read again from its start.
            self.read = Parsed::default();
            got = self.reader.read(READ_AT_MOST, |line| self.read.take_line(line))?;
        }
        Ok(match got {
            Got::Lines { written, read } => self.progress(written, read),
            Got::NotThere | Got::Restarted => self.progress(0, 0),
        })
    }

    fn progress(&self, written: u64, fresh: u64) -> Progress {
        Progress {
            file: self.reader.identity(),
            read: self.reader.offset,
            lines_end: self.reader.lines_end(),
            written: written.max(self.reader.offset),
            fresh,
            requests: self.read.capture.requests(),
            streaming: self.read.capture.unfinished(),
            chunks: self.read.capture.chunks(),
        }
    }

    /// The latest time read (a send, a chunk's arrival, an end), Unix ns.
    pub fn latest_ns(&self) -> Option<i64> {
        self.read.capture.latest_ns()
    }

    /// The trace of everything read so far; requests still streaming have no end or status yet.
    pub fn snapshot(&self) -> Loaded {
        let mut b = TraceBuilder::default();
        b.report.files.push(SourceFile {
            path: self.path.display().to_string(),
            encoding: Encoding::Jsonl,
        });
        let mut sink = Sink::new(&mut b, 0, Kind::OpenaiStream);
        let Parsed {
            capture,
            rejected,
            rejected_count,
            ..
        } = &self.read;
        for (line, why) in rejected {
            sink.reject(*line, Problem::Malformed, None, why.clone());
        }
        capture.add_to(&mut sink, Unfinished::InFlight);
        if *rejected_count > rejected.len() as u64 {
            sink.note(format!(
                "{} lines of the journal were not a recorded stream (the first {} are listed)",
                rejected_count,
                rejected.len()
            ));
        }
        let (trace, report) = b.finish();
        Loaded { trace, report }
    }
}

#[cfg(test)]
pub mod tests {
    use std::io::Write;

    use super::*;

    pub const T0: i64 = 1_764_403_200_000_000_000;

    /// A journal's line of one chunk of `id`, `at_ms` after [`T0`], with `text`.
    pub fn chunk(id: &str, at_ms: i64, text: &str) -> String {
        let data = serde_json::json!({"choices": [{"index": 0, "delta": {"content": text}}]}).to_string();
        serde_json::json!({"request_id": id, "sent_ns": T0, "events": [[T0 + at_ms * 1_000_000, data]]}).to_string()
    }

    #[test]
    fn lines_are_read_as_they_are_written_and_a_half_written_line_waits_for_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.parquet.partial.jsonl");
        let mut tail = JournalTail::new(&path);
        // Not created yet: empty.
        assert_eq!(tail.poll().unwrap().requests, 0);

        let mut f = std::fs::File::create(&path).unwrap();
        let (a1, b1) = (chunk("a", 10, "Hel"), chunk("b", 20, "Hi"));
        write!(f, "{a1}\n{}", &b1[..15]).unwrap();
        f.flush().unwrap();
        let p = tail.poll().unwrap();
        assert_eq!((p.requests, p.streaming, p.chunks), (1, 1, 1));
        assert_eq!(p.read, p.written);

        writeln!(f, "{}", &b1[15..]).unwrap();
        writeln!(f, "not json").unwrap();
        let end = serde_json::json!({"request_id": "a", "sent_ns": T0, "end_ns": T0 + 30_000_000, "ending": "done",
            "events": []});
        writeln!(f, "{end}").unwrap();
        f.flush().unwrap();
        let p = tail.poll().unwrap();
        assert_eq!((p.requests, p.streaming, p.chunks), (2, 1, 2));
        assert_eq!(tail.latest_ns(), Some(T0 + 30_000_000));

        let loaded = tail.snapshot();
        let t = &loaded.trace;
        assert_eq!((t.request_count(), t.token_count()), (2, 2));
        let b = t.request_row("b").unwrap() as usize;
        assert_eq!(t.requests.finished_ns.at(b), None);
        // The line that was not JSON is counted against its number, 3.
        assert_eq!(loaded.report.rejected_count(), 1);
        assert_eq!(loaded.report.rejected[0].place.at, 3);
    }

    #[test]
    fn a_file_is_behind_what_was_read_when_it_grew_was_emptied_or_replaced_and_not_when_read_to_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.log");
        let mut lines = Lines::new(&path);
        // Not there: nothing to read.
        assert!(!lines.behind());
        std::fs::write(&path, "one\ntwo\n").unwrap();
        assert!(lines.behind());
        let read = |lines: &mut Lines| {
            let mut got = Vec::new();
            lines
                .read(u64::MAX, |l| got.push(String::from_utf8_lossy(l).into_owned()))
                .unwrap();
            got
        };
        assert_eq!(read(&mut lines), ["one", "two"]);
        assert!(!lines.behind());
        // Half a line is news: its bytes are not read yet.
        let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
        write!(f, "thr").unwrap();
        assert!(lines.behind());
        assert!(read(&mut lines).is_empty());
        assert!(!lines.behind(), "the half line is read, held until its end");
        // Emptied in place: shorter than what was read.
        f.set_len(0).unwrap();
        assert!(lines.behind());
        read(&mut lines);
        read(&mut lines);
        assert!(!lines.behind());
        // Replaced by a file of the same length (a rotation by rename): another file at the path.
        std::fs::write(&path, "four\n").unwrap();
        read(&mut lines);
        assert!(!lines.behind());
        let next = dir.path().join("server.log.new");
        std::fs::write(&next, "five\n").unwrap();
        std::fs::rename(&next, &path).unwrap();
        assert!(lines.behind());
    }
}
