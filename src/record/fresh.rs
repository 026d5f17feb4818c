//! The tokens written to a recording's journal since the snapshot on screen: drawn over it, so a token shows the frame
//! after its chunk is written rather than at the next snapshot (which makes the whole trace again: tens of ms at
//! 100,000 tokens, and it shares two cores with the recorder and the server). Only the lines after what the
//! snapshot read are read, only their chunks are parsed, and only their tokens' text and time are kept: what is held
//! is bounded by the time between two snapshots.

use std::path::Path;

use serde_json::Value;

use super::tail::{Got, Lines};
use crate::import::openai::Stream;

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

/// The journal's tokens and sends since the snapshot on screen.
#[derive(Debug)]
pub struct Fresh {
    lines: Lines,
    tokens: Vec<FreshToken>,
    sends: Vec<FreshSend>,
    /// The recording's own trace is on screen: it holds everything, nothing more is read.
    ended: bool,
}

impl Fresh {
    /// Reads the journal at `path` from its start (it need not exist yet).
    pub fn new(path: &Path) -> Self {
        Fresh {
            lines: Lines::new(path),
            tokens: Vec::new(),
            sends: Vec::new(),
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
        if matches!(self.read()?, Got::Restarted) {
            // A journal made again from its start: what was read of the old one is gone.
            self.clear();
            self.read()?;
        }
        Ok(self.tokens.len().saturating_sub(before))
    }

    fn read(&mut self) -> std::io::Result<Got> {
        let mut end = self.lines.lines_end();
        let (tokens, sends) = (&mut self.tokens, &mut self.sends);
        self.lines.read(READ_PER_POLL, |line| {
            end += line.len() as u64 + 1;
            take_line(line, end, tokens, sends);
        })
    }

    /// A snapshot that read the journal up to `lines_end` (the end of its last whole line) is on screen: the tokens
    /// it holds are forgotten, and a reader behind it goes on from there.
    pub fn taken(&mut self, lines_end: u64) {
        self.tokens.retain(|t| t.line_end > lines_end);
        self.sends.retain(|t| t.line_end > lines_end);
        self.lines.skip_to(lines_end);
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

/// The tokens of one journal line (a chunk's line), or its send (a line with no chunk and no ending). A line that is
/// not one of the journal's is passed over: the snapshot reports it.
fn take_line(line: &[u8], line_end: u64, tokens: &mut Vec<FreshToken>, sends: &mut Vec<FreshSend>) {
    let Ok(v) = serde_json::from_slice::<Value>(line) else {
        return;
    };
    let Some(id) = v.get("request_id").and_then(Value::as_str) else {
        return;
    };
    let events = v.get("events").and_then(Value::as_array);
    if events.is_none_or(Vec::is_empty) && v.get("ending").is_none() {
        if let Some(sent_ns) = v.get("sent_ns").and_then(Value::as_i64) {
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

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;
    use crate::record::tail::JournalTail;
    use crate::record::tail::tests::{T0, chunk};

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
        fresh.taken(p.lines_end);
        assert!(fresh.tokens().is_empty() && fresh.sends().is_empty());

        writeln!(f, "{}", &b1[15..]).unwrap();
        writeln!(f, "{}", chunk("a", 30, "lo")).unwrap();
        f.flush().unwrap();
        assert_eq!(fresh.poll().unwrap(), 2);
        assert_eq!(texts(&fresh), [("b", 20, "Hi"), ("a", 30, "lo")]);
        // A snapshot that read b's line but not a's second: only a's second stays.
        fresh.taken(p.lines_end + (b1.len() + 1) as u64);
        assert_eq!(texts(&fresh), [("a", 30, "lo")]);
    }

    #[test]
    fn a_reader_behind_the_snapshot_goes_on_from_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.parquet.partial.jsonl");
        let lines: Vec<String> = (0..3).map(|k| chunk("a", k, "x")).collect();
        std::fs::write(&path, format!("{}\n", lines.join("\n"))).unwrap();
        let mut fresh = Fresh::new(&path);
        // The snapshot has read the first two lines before this reader read any.
        fresh.taken((lines[0].len() + lines[1].len() + 2) as u64);
        assert_eq!(fresh.poll().unwrap(), 1);
        assert_eq!(texts(&fresh), [("a", 2, "x")]);
    }
}
