//! The tokens written to a recording's journal since the snapshot on screen: drawn over it, so a token shows the frame
//! after its chunk is written rather than at the next snapshot (which makes the whole trace again: tens of ms at
//! 100,000 tokens, and it shares two cores with the recorder and the server). Only the lines after what the
//! snapshot read are read, only their chunks are parsed, and only their tokens' text and time are kept: what is held
//! is bounded by the time between two snapshots.

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

use super::tail::{FileId, Got, Lines};
use tokenscope_core::import::openai::Stream;

/// Bytes read at most per poll (about 300 chunks with candidates): a frame's share of the work stays small, and a
/// reader further behind is caught up by the next snapshot ([`Fresh::taken`]).
const READ_PER_POLL: u64 = 256 << 10;

/// A token read from the journal, not yet in the snapshot on screen.
#[derive(Debug, Clone, PartialEq)]
pub struct FreshToken {
    /// Its request's id in the recording.
    pub request_id: String,
    /// When its chunk arrived, Unix ns.
    pub at_ns: i64,
    /// Its text.
    pub text: String,
    /// Where its journal line ends: a snapshot that read that far holds it.
    line_end: u64,
}

/// A request sent since the snapshot on screen was read: its journal line, before any token.
#[derive(Debug, Clone, PartialEq)]
pub struct FreshSend {
    /// Its id in the recording.
    pub request_id: String,
    /// When it was sent, Unix ns.
    pub sent_ns: i64,
    line_end: u64,
}

/// Bytes read at most per poll while a journal written again by a rotation is read again: its lines read already
/// are passed over by their request id and time alone (about 0.1 µs a line, no JSON parsed), so it is caught up in
/// a frame.
const READ_AGAIN_PER_POLL: u64 = 32 << 20;

/// The journal's tokens and sends since the snapshot on screen.
#[derive(Debug)]
pub struct Fresh {
    lines: Lines,
    tokens: Vec<FreshToken>,
    sends: Vec<FreshSend>,
    /// What was read of the journal's file: the newest token time of each request (`i64::MIN` for a send alone).
    read: Read,
    /// The recording's own trace is on screen: it holds everything, nothing more is read.
    ended: bool,
}

/// The newest token time of each request read, in the file being read and, while a journal written again is read
/// again, in the one before: what is older was read already (a rotation writes the journal again with the lines
/// of the requests still streaming, which were drawn already, over the snapshot or in it).
#[derive(Debug, Default)]
struct Read {
    newest: HashMap<String, i64>,
    before: Option<HashMap<String, i64>>,
}

impl Read {
    /// True when a token of `id` at `at_ns` was read already (in the file before this one).
    fn seen(&self, id: &str, at_ns: i64) -> bool {
        self.before
            .as_ref()
            .and_then(|b| b.get(id))
            .is_some_and(|&t| at_ns <= t)
    }

    fn saw(&mut self, id: &str, at_ns: i64) {
        match self.newest.get_mut(id) {
            Some(t) => *t = (*t).max(at_ns),
            None => {
                self.newest.insert(id.to_owned(), at_ns);
            }
        }
    }
}

impl Fresh {
    /// Reads the journal at `path` from its start (it need not exist yet).
    pub fn new(path: &Path) -> Self {
        Fresh {
            lines: Lines::new(path),
            tokens: Vec::new(),
            sends: Vec::new(),
            read: Read::default(),
            ended: false,
        }
    }

    /// Reads the lines written since the last poll; how many tokens they held.
    ///
    /// # Errors
    /// The journal exists but cannot be read.
    pub fn poll(&mut self) -> std::io::Result<usize> {
        if self.ended {
            return Ok(0);
        }
        let before = self.tokens.len();
        let again = self.read.before.is_some();
        let at_most = if again { READ_AGAIN_PER_POLL } else { READ_PER_POLL };
        match self.read_lines(at_most)? {
            Got::Restarted => {
                // A journal made again (by a rotation, or a new recording to the same output): read again from its
                // start, passing over the tokens read in the old one. Those still drawn over the snapshot stay until
                // a snapshot of the new file is on screen (its first `taken` forgets them).
                for t in &mut self.tokens {
                    t.line_end = 0;
                }
                for s in &mut self.sends {
                    s.line_end = 0;
                }
                self.read.before = Some(std::mem::take(&mut self.read.newest));
                self.read_lines(READ_AGAIN_PER_POLL)?;
            }
            // Caught up with the file written again: what was read of the old one is no longer needed.
            Got::Lines { read, .. } if again && read < at_most => {
                self.read.before = None;
            }
            Got::Lines { .. } | Got::NotThere => {}
        }
        Ok(self.tokens.len().saturating_sub(before))
    }

    fn read_lines(&mut self, at_most: u64) -> std::io::Result<Got> {
        let mut end = self.lines.lines_end();
        let (tokens, sends, read) = (&mut self.tokens, &mut self.sends, &mut self.read);
        self.lines.read(at_most, |line| {
            end += line.len() as u64 + 1;
            take_line(line, end, (tokens, sends), read);
        })
    }

    /// A snapshot that read the journal `file` up to `lines_end` (the end of its last whole line) is on screen: the
    /// tokens it holds are forgotten, and a reader behind it goes on from there. A snapshot of another file than
    /// the one this reader reads (the journal was written again by a rotation, and one of the two readers has not
    /// seen it yet) changes nothing: its offsets are not this reader's.
    pub fn taken(&mut self, file: Option<FileId>, lines_end: u64) {
        if self.lines.identity().is_some() && file != self.lines.identity() {
            return;
        }
        self.tokens.retain(|t| t.line_end > lines_end);
        self.sends.retain(|t| t.line_end > lines_end);
        self.lines.skip_to(lines_end, file);
    }

    /// Forgets every token and send.
    pub fn clear(&mut self) {
        self.tokens.clear();
        self.sends.clear();
    }

    /// The recording's own trace, with everything, is on screen: forgets all and reads no more.
    pub fn end(&mut self) {
        self.clear();
        self.ended = true;
    }

    /// True once [`Self::end`] was called.
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// The tokens, in the order they were written.
    pub fn tokens(&self) -> &[FreshToken] {
        &self.tokens
    }

    /// The sends, in the order they were written.
    pub fn sends(&self) -> &[FreshSend] {
        &self.sends
    }
}

/// The tokens of one journal line (a chunk's line), or its send (a line with no chunk and no ending), unless read
/// already. A line that is not one of the journal's is passed over: the snapshot reports it.
fn take_line(
    line: &[u8],
    line_end: u64,
    (tokens, sends): (&mut Vec<FreshToken>, &mut Vec<FreshSend>),
    read: &mut Read,
) {
    if read.before.is_some()
        && let Some((id, at_ns)) = quick_key(line)
        && read.seen(id, at_ns)
    {
        read.saw(id, at_ns);
        return;
    }
    let Ok(v) = serde_json::from_slice::<Value>(line) else {
        return;
    };
    let Some(id) = v.get("request_id").and_then(Value::as_str) else {
        return;
    };
    let events = v.get("events").and_then(Value::as_array);
    if events.is_none_or(Vec::is_empty) && v.get("ending").is_none() {
        if let Some(sent_ns) = v.get("sent_ns").and_then(Value::as_i64)
            && !read.seen(id, i64::MIN)
        {
            read.saw(id, i64::MIN);
            sends.push(FreshSend {
                request_id: id.to_owned(),
                sent_ns,
                line_end,
            });
        }
        return;
    }
    for e in events.into_iter().flatten() {
        if let (Some(t), Some(data)) = (e.get(0).and_then(Value::as_i64), e.get(1).and_then(Value::as_str)) {
            read.saw(id, t);
            if read.seen(id, t) {
                continue;
            }
            let mut stream = Stream::default();
            stream.push(t, data);
            tokens.extend(stream.tokens.into_iter().map(|token| FreshToken {
                request_id: id.to_owned(),
                at_ns: token.emitted_ns,
                text: token.text,
                line_end,
            }));
        }
    }
}

/// A chunk's line's request id and arrival time, read without parsing it (`{"events":[[t_ns,"data"]],...,
/// "request_id":"rec-00001",...}`, its keys in any order); `None` for any other line, which is then parsed. Inside
/// the chunk's text every quote is escaped, so the keys found are the line's own.
fn quick_key(line: &[u8]) -> Option<(&str, i64)> {
    let events = br#""events":[["#;
    let from = memchr::memmem::find(line, events)? + events.len();
    let digits = line[from..].iter().position(|&b| b == b',')?;
    let at_ns = std::str::from_utf8(&line[from..from + digits]).ok()?.parse().ok()?;
    Some((super::journal::request_id_of(line)?, at_ns))
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;
    use crate::tail::JournalTail;
    use crate::tail::tests::{T0, chunk};

    fn texts(f: &Fresh) -> Vec<(&str, i64, &str)> {
        f.tokens()
            .iter()
            .map(|t| (t.request_id.as_str(), (t.at_ns - T0) / 1_000_000, t.text.as_str()))
            .collect()
    }

    #[test]
    fn tokens_show_as_written_and_leave_when_a_snapshot_holds_them() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.parquet.partial.jsonl");
        let mut fresh = Fresh::new(&path);
        let mut tail = JournalTail::new(&path);
        // Not created yet: nothing.
        assert_eq!(fresh.poll().unwrap(), 0);

        let mut f = std::fs::File::create(&path).unwrap();
        let send = serde_json::json!({"request_id": "a", "sent_ns": T0, "events": []}).to_string();
        let (a1, b1) = (chunk("a", 10, "Hel"), chunk("b", 20, "Hi"));
        write!(f, "{send}\n{a1}\n{}", &b1[..15]).unwrap();
        f.flush().unwrap();
        // The send has no token; b's line is half written: only a's token.
        assert_eq!(fresh.poll().unwrap(), 1);
        assert_eq!(texts(&fresh), [("a", 10, "Hel")]);
        let sends: Vec<(&str, i64)> = fresh
            .sends()
            .iter()
            .map(|s| (s.request_id.as_str(), s.sent_ns))
            .collect();
        assert_eq!(sends, [("a", T0)]);

        // A snapshot reads as far: a's token is in it, so it leaves; b's half line is not.
        let p = tail.poll().unwrap();
        assert_eq!(p.lines_end, (send.len() + 1 + a1.len() + 1) as u64);
        fresh.taken(p.file, p.lines_end);
        assert!(fresh.tokens().is_empty() && fresh.sends().is_empty());

        writeln!(f, "{}", &b1[15..]).unwrap();
        writeln!(f, "{}", chunk("a", 30, "lo")).unwrap();
        f.flush().unwrap();
        assert_eq!(fresh.poll().unwrap(), 2);
        assert_eq!(texts(&fresh), [("b", 20, "Hi"), ("a", 30, "lo")]);
        // A snapshot that read b's line but not a's second: only a's second stays.
        fresh.taken(p.file, p.lines_end + (b1.len() + 1) as u64);
        assert_eq!(texts(&fresh), [("a", 30, "lo")]);
    }

    #[test]
    fn a_chunk_line_is_known_by_its_id_and_time_without_parsing_it() {
        let line = chunk("rec-00007", 12, "say \"request_id\":\"x\"");
        assert_eq!(quick_key(line.as_bytes()), Some(("rec-00007", T0 + 12_000_000)));
        let send = serde_json::json!({"request_id": "a", "sent_ns": T0, "events": []}).to_string();
        assert_eq!(quick_key(send.as_bytes()), None);
        assert_eq!(quick_key(b"{\"events\":[[12,"), None);
    }

    #[test]
    fn a_reader_behind_the_snapshot_goes_on_from_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.parquet.partial.jsonl");
        let lines: Vec<String> = (0..3).map(|k| chunk("a", k, "x")).collect();
        std::fs::write(&path, format!("{}\n", lines.join("\n"))).unwrap();
        let mut fresh = Fresh::new(&path);
        // The snapshot has read the first two lines before this reader read any.
        let mut tail = JournalTail::new(&path);
        let file = tail.poll().unwrap().file;
        fresh.taken(file, (lines[0].len() + lines[1].len() + 2) as u64);
        assert_eq!(fresh.poll().unwrap(), 1);
        assert_eq!(texts(&fresh), [("a", 2, "x")]);
    }

    #[test]
    fn a_journal_written_again_by_a_rotation_is_read_again_without_what_was_read_and_an_older_snapshot_changes_nothing()
    {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.partial.jsonl");
        let (a1, b1) = (chunk("a", 10, "A"), chunk("b", 20, "B"));
        std::fs::write(&path, format!("{a1}\n{b1}\n")).unwrap();
        let mut fresh = Fresh::new(&path);
        let mut tail = JournalTail::new(&path);
        assert_eq!(fresh.poll().unwrap(), 2);
        let before = tail.poll().unwrap();
        assert_eq!(before.requests, 2);

        // The rotation wrote a's request to a part: the journal is written again without it, then b's tokens go on,
        // longer than what was read of the old file.
        let (b2, b3) = (chunk("b", 30, "C"), chunk("b", 40, "D"));
        let tmp = dir.path().join(".journal.tmp");
        std::fs::write(&tmp, format!("{b1}\n{b2}\n{b3}\n")).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        assert!(std::fs::metadata(&path).unwrap().len() > before.read);

        // Read again from its start, passing over b's token read already; those read of the old file stay drawn
        // until a snapshot of the new one is on screen.
        assert_eq!(fresh.poll().unwrap(), 2);
        assert_eq!(
            texts(&fresh),
            [("a", 10, "A"), ("b", 20, "B"), ("b", 30, "C"), ("b", 40, "D")]
        );
        let b4 = chunk("b", 50, "E");
        std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap()
            .write_all(format!("{b4}\n").as_bytes())
            .unwrap();
        assert_eq!(fresh.poll().unwrap(), 1);
        assert_eq!(fresh.tokens().len(), 5);
        // The snapshot on screen was made of the old file: its offsets are not the new file's.
        fresh.taken(before.file, before.lines_end);
        assert_eq!(fresh.tokens().len(), 5);
        let after = tail.poll().unwrap();
        assert_ne!(after.file, before.file);
        assert_eq!((after.requests, after.chunks), (1, 4));
        // A snapshot of the new file takes what it holds, and those read of the old file.
        fresh.taken(after.file, after.lines_end);
        assert!(fresh.tokens().is_empty());
    }
}
