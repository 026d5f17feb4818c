//! Captures of `tokenscope record`, read as a trace (kind `openai-stream`): the raw capture of `--raw` (one JSON line
//! per request, `{request_id, trace_id, sent_ns, end_ns, ending, error_code, events: [[t_ns, data], ...]}`), or a
//! recording's journal (the same fields over several lines of one request: its chunks as they came, then a line with
//! its ending). [`Capture`] takes the lines one at a time, so a live view can read a journal as it grows and show
//! it at any moment; [`read_capture`] reads a whole file.

use std::collections::HashMap;

use serde_json::Value;

use super::openai::{Ending, Exchange, Stream, add_exchange};

/// How a request ended, as its last line said.
#[derive(Debug, Clone)]
struct End {
    end_ns: Option<i64>,
    ending: Option<Ending>,
    error_code: Option<String>,
}

/// One request of a capture as its lines told it so far; its stream is read as the lines come.
#[derive(Debug)]
struct Captured {
    id: String,
    /// The line it was first seen on.
    at: u64,
    sent_ns: i64,
    trace_id: Option<String>,
    stream: Stream,
    /// `None` until a line says how it ended.
    end: Option<End>,
}

/// What a request whose lines never said how it ended is taken to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unfinished {
    /// The recorder stopped (was killed) mid-stream: kept up to its last chunk, marked cut.
    Cut,
    /// Still streaming (a live view): kept up to its last chunk, with no end, status or finish reason yet.
    InFlight,
}

/// The requests of a capture, as its lines tell them.
#[derive(Debug, Default)]
pub struct Capture {
    requests: Vec<Captured>,
    by_id: HashMap<String, usize>,
    /// The latest time any line carried, Unix ns.
    latest_ns: Option<i64>,
    /// Chunks taken, over every request.
    chunks: u64,
}

impl Capture {
    /// Takes one line of a capture, found at line (or record) `at`.
    ///
    /// # Errors
    /// The line lacks `request_id` or `sent_ns`: the reason, to report against the line.
    pub fn line(&mut self, v: &Value, at: u64) -> Result<(), &'static str> {
        let (Some(id), Some(sent_ns)) = (
            v.get("request_id").and_then(Value::as_str),
            v.get("sent_ns").and_then(Value::as_i64),
        ) else {
            return Err("a recorded stream needs request_id and sent_ns");
        };
        let k = if let Some(&k) = self.by_id.get(id) {
            k
        } else {
            self.requests.push(Captured {
                id: id.to_owned(),
                at,
                sent_ns,
                trace_id: None,
                stream: Stream::default(),
                end: None,
            });
            self.by_id.insert(id.to_owned(), self.requests.len() - 1);
            self.requests.len() - 1
        };
        let c = &mut self.requests[k];
        // A send tried again says its new time in the lines after.
        c.sent_ns = sent_ns;
        if c.trace_id.is_none() {
            c.trace_id = v.get("trace_id").and_then(Value::as_str).map(str::to_owned);
        }
        let mut latest = sent_ns;
        for e in v.get("events").and_then(Value::as_array).into_iter().flatten() {
            if let (Some(t), Some(data)) = (e.get(0).and_then(Value::as_i64), e.get(1).and_then(Value::as_str)) {
                c.stream.push(t, data);
                self.chunks += 1;
                latest = latest.max(t);
            }
        }
        if let Some(ending) = v.get("ending") {
            let end_ns = v.get("end_ns").and_then(Value::as_i64);
            latest = latest.max(end_ns.unwrap_or(latest));
            c.end = Some(End {
                end_ns,
                ending: serde_json::from_value(ending.clone()).ok(),
                error_code: v.get("error_code").and_then(Value::as_str).map(str::to_owned),
            });
        }
        self.latest_ns = Some(self.latest_ns.map_or(latest, |l| l.max(latest)));
        Ok(())
    }

    /// Requests seen.
    pub fn requests(&self) -> usize {
        self.requests.len()
    }

    /// Requests whose lines have not said how they ended.
    pub fn unfinished(&self) -> usize {
        self.requests.iter().filter(|c| c.end.is_none()).count()
    }

    /// Chunks taken.
    pub fn chunks(&self) -> u64 {
        self.chunks
    }

    /// The latest time a line carried (a send, a chunk's arrival, an end), Unix ns.
    pub fn latest_ns(&self) -> Option<i64> {
        self.latest_ns
    }

    /// Adds every request taken so far to `sink`, with its tokens; the capture goes on taking lines.
    pub fn add_to(&self, sink: &mut super::Sink<'_>, unfinished: Unfinished) {
        self.add(sink, unfinished, |c| c.stream.clone());
    }

    /// [`Capture::add_to`], giving the streams away.
    pub fn finish(mut self, sink: &mut super::Sink<'_>, unfinished: Unfinished) {
        let mut streams: Vec<Stream> = self
            .requests
            .iter_mut()
            .map(|c| std::mem::take(&mut c.stream))
            .collect();
        let mut next = streams.iter_mut();
        self.add(sink, unfinished, |_| {
            next.next().map(std::mem::take).unwrap_or_default()
        });
    }

    fn add(&self, sink: &mut super::Sink<'_>, unfinished: Unfinished, mut stream_of: impl FnMut(&Captured) -> Stream) {
        let mut added = 0u64;
        let mut open = 0u64;
        if let Some(first) = self.requests.iter().map(|c| c.sent_ns).min() {
            sink.saw_time(first);
        }
        for c in &self.requests {
            let mut stream = stream_of(c);
            let (end_ns, ending, error_code, in_flight) = match (&c.end, unfinished) {
                (Some(e), _) => (e.end_ns, e.ending, e.error_code.clone(), false),
                (None, Unfinished::Cut) => {
                    open += 1;
                    (None, Some(Ending::Cut), Some("recorder_stopped".to_owned()), false)
                }
                (None, Unfinished::InFlight) => {
                    open += 1;
                    (None, None, None, true)
                }
            };
            let x = Exchange {
                id: &c.id,
                sent_ns: c.sent_ns,
                end_ns: end_ns.or(stream.last_ns).unwrap_or(c.sent_ns),
                ending,
                error_code: error_code.as_deref(),
                trace_id: c.trace_id.as_deref(),
                prompt_hash: None,
                in_flight,
                ..Exchange::default()
            };
            if add_exchange(&mut stream, &x, &[], sink, c.at) {
                added += 1;
            }
        }
        sink.note("a recorded stream: times are the client's (send time, chunk arrival times)".to_owned());
        if open > 0 {
            sink.note(match unfinished {
                Unfinished::Cut => format!(
                    "the recording was interrupted: {open} {} in flight when it stopped (its journal has no end for \
                     {}); {} kept up to {} last chunk and marked cut (status error, error_code recorder_stopped)",
                    if open == 1 { "request was" } else { "requests were" },
                    if open == 1 { "it" } else { "them" },
                    if open == 1 { "it is" } else { "they are" },
                    if open == 1 { "its" } else { "their" },
                ),
                Unfinished::InFlight => format!(
                    "live: {open} {} still streaming, shown up to {} last chunk with no end, status or finish reason \
                     yet",
                    if open == 1 { "request is" } else { "requests are" },
                    if open == 1 { "its" } else { "their" },
                ),
            });
        }
        if added > 0 {
            sink.note(format!(
                "{added} streams left out the end-of-sequence token usage counts: added, with no id or probability"
            ));
        }
    }
}

/// Reads a whole capture file (see the module's text): each stream is read again as it arrived; a request whose
/// lines never said how it ended (the recorder was killed mid-stream) is kept up to its last chunk and marked cut.
///
/// # Errors
/// The input cannot be read, or the load was cancelled.
pub fn read_capture(
    input: impl std::io::Read,
    path: &std::path::Path,
    sink: &mut super::Sink<'_>,
    progress: &crate::ingest::Progress,
) -> Result<(), crate::ingest::LoadError> {
    use crate::trace::report::Problem;
    let mut capture = Capture::default();
    super::for_each_json_line(input, path, sink, progress, "a recorded stream", |v, place, sink| {
        if let Err(why) = capture.line(&v, place.at) {
            sink.reject(place.at, Problem::MissingField, Some("request_id"), why.to_owned());
        }
    })?;
    capture.finish(sink, Unfinished::Cut);
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::import::{Kind, Sink};
    use crate::trace::TraceBuilder;

    const T0: i64 = 1_764_403_200_000_000_000;

    fn chunk(id: &str, at_ms: i64, text: &str) -> Value {
        let data = json!({"choices": [{"index": 0, "delta": {"content": text}}]}).to_string();
        json!({"request_id": id, "sent_ns": T0, "events": [[T0 + at_ms * 1_000_000, data]]})
    }

    fn end(id: &str, at_ms: i64) -> Value {
        json!({"request_id": id, "sent_ns": T0, "end_ns": T0 + at_ms * 1_000_000, "ending": "done", "events": []})
    }

    fn build(c: &Capture, unfinished: Unfinished) -> crate::trace::Trace {
        let mut b = TraceBuilder::default();
        c.add_to(&mut Sink::new(&mut b, 0, Kind::OpenaiStream), unfinished);
        b.finish().0
    }

    #[test]
    fn a_growing_journal_shows_finished_and_streaming_requests_at_every_moment() {
        let mut c = Capture::default();
        for (i, v) in [chunk("a", 100, "Hel"), chunk("b", 150, "Hi"), chunk("a", 120, "lo")]
            .iter()
            .enumerate()
        {
            c.line(v, i as u64 + 1).unwrap();
        }
        // Both streaming: no end, no status yet, their chunks so far.
        let t = build(&c, Unfinished::InFlight);
        assert_eq!((t.request_count(), t.token_count()), (2, 3));
        let a = t.request_row("a").unwrap() as usize;
        assert_eq!(t.requests.finished_ns.at(a), None);
        assert_eq!(t.requests.first_token_ns.at(a), Some(T0 + 100_000_000));
        assert_eq!((c.requests(), c.unfinished(), c.chunks()), (2, 2, 3));
        assert_eq!(c.latest_ns(), Some(T0 + 150_000_000));

        // a ends; the capture goes on, and a snapshot now shows it finished, b still open.
        c.line(&end("a", 130), 4).unwrap();
        c.line(&chunk("b", 160, " there"), 5).unwrap();
        let t = build(&c, Unfinished::InFlight);
        let (a, b) = (
            t.request_row("a").unwrap() as usize,
            t.request_row("b").unwrap() as usize,
        );
        assert_eq!(t.requests.finished_ns.at(a), Some(T0 + 130_000_000));
        assert_eq!(t.requests.finished_ns.at(b), None);
        assert_eq!(t.token_count(), 4);
        assert_eq!(c.unfinished(), 1);

        // The same lines read after a kill: b is cut.
        let t = build(&c, Unfinished::Cut);
        let b = t.request_row("b").unwrap() as usize;
        assert_eq!(t.requests.finished_ns.at(b), Some(T0 + 160_000_000));
        assert_eq!(t.labels.get(t.requests.error_code[b]), Some("recorder_stopped"));
    }

    #[test]
    fn a_line_without_an_id_is_refused_and_nothing_is_taken() {
        let mut c = Capture::default();
        assert!(c.line(&json!({"sent_ns": T0, "events": []}), 1).is_err());
        assert_eq!(c.requests(), 0);
    }
}
