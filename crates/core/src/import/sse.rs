//! A saved stream: the body of one or more streamed responses as they came (`curl -N ... > stream.sse`, a proxy's
//! capture): `data: {...}` lines, with or without `data: [DONE]`, from an OpenAI-compatible server's chat or
//! completions endpoint, or llama.cpp's native `/completion`. Every form [`super::openai`] reads is read here:
//! tokens with their texts, logprobs, ids and candidates, `usage` on every chunk or the last, byte-fallback tokens,
//! llama.cpp's plain probabilities, lmdeploy's repeated `role`.
//!
//! A saved body has **no times**: no one wrote down when a chunk came. The trace says so (`clock = "untimed"`) and
//! its times are only an order: response k at k minutes after the file's last change, its tokens 1 ms apart. Every
//! figure that would read them (TTFT, ITL, E2E, throughput, time-based findings) is then shown as absent.
//!
//! A response ends at `[DONE]`, at llama.cpp's `"stop": true`, or, when neither was saved, where a chunk with
//! another `id` follows one that gave a finish reason.

use std::io::Read;
use std::path::Path;

use serde_json::Value;

use super::Sink;
use super::openai::{Exchange, Stream, add_exchange};
use crate::format::jsonl::for_each_line;
use crate::ingest::{LoadError, Progress};

/// The clock of a trace whose source wrote no times.
pub const UNTIMED: &str = "untimed";

/// The spacing of a saved stream's made-up times: tokens 1 ms apart, responses a minute apart.
const TOKEN_NS: i64 = 1_000_000;
const RESPONSE_NS: i64 = 60_000_000_000;

/// The JSON of a `data:` line, when it is one.
fn payload(line: &str) -> Option<&str> {
    line.strip_prefix("data:").map(str::trim)
}

/// True when the text is a saved stream: its first lines that say anything are `data:` lines whose JSON is a
/// completion chunk (`choices`, or llama.cpp's `content`).
pub fn looks_like(text: &str) -> bool {
    let mut seen = 0;
    for line in text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with(':'))
    {
        if line.starts_with("event:") || line.starts_with("id:") || line.starts_with("retry:") {
            continue;
        }
        let Some(data) = payload(line) else {
            return false;
        };
        if data == "[DONE]" {
            return seen > 0;
        }
        let Ok(v) = serde_json::from_str::<Value>(data) else {
            // The 64 KiB head may end inside a line.
            return seen > 0;
        };
        if v.get("choices").is_none() && v.get("content").is_none() && v.get("completion_probabilities").is_none() {
            return false;
        }
        seen += 1;
        if seen >= 2 {
            return true;
        }
    }
    seen > 0
}

/// Reads the responses of a saved stream, one request each (`stream-1`, `stream-2`, ...).
///
/// # Errors
/// The file cannot be read, or the load was cancelled.
pub fn read(input: impl Read, path: &Path, sink: &mut Sink<'_>, progress: &Progress) -> Result<(), LoadError> {
    let file = sink.file;
    let anchor = std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .and_then(|d| i64::try_from(d.as_nanos()).ok())
        // Before 1973 is not a time the format takes: then 2000-01-01, as good a placeholder as any.
        .filter(|&ns| ns > 100_000_000_000_000_000)
        .unwrap_or(946_684_800_000_000_000);
    let mut responses: Vec<(u64, Stream)> = Vec::new();
    let mut current: Option<(u64, Stream)> = None;
    let mut skipped = 0u64;
    for_each_line(input, path, file, sink.b, progress, |raw, place, _b| {
        let line = String::from_utf8_lossy(raw);
        let Some(data) = payload(line.trim()) else {
            skipped += u64::from(!line.trim().is_empty());
            return;
        };
        let chunk_id = serde_json::from_str::<Value>(data)
            .ok()
            .and_then(|v| v.get("id").and_then(Value::as_str).map(str::to_owned));
        // A chunk of another response after one that finished, with no [DONE] between.
        if let Some((_, s)) = &current
            && s.finish_reason.is_some()
            && chunk_id.is_some()
            && chunk_id != s.response_id
            && let Some((at, s)) = current.take()
        {
            responses.push((at, s));
        }
        let (_, stream) = current.get_or_insert_with(|| (place.at, Stream::default()));
        let k = i64::try_from(responses.len()).unwrap_or(i64::MAX);
        let t = anchor + k * RESPONSE_NS + i64::try_from(stream.tokens.len() + 1).unwrap_or(0) * TOKEN_NS;
        stream.push(t, data);
        if stream.done
            && let Some((at, s)) = current.take()
        {
            responses.push((at, s));
        }
    })?;
    let cut = current.is_some();
    if let Some((at, s)) = current {
        responses.push((at, s));
    }
    let mut eos_added = 0;
    for (k, (at, mut stream)) in responses.into_iter().enumerate() {
        let id = format!("stream-{}", k + 1);
        let sent = anchor + i64::try_from(k).unwrap_or(i64::MAX) * RESPONSE_NS;
        let end = stream.tokens.last().map_or(sent, |t| t.emitted_ns) + TOKEN_NS;
        sink.model = sink.model.take().or_else(|| stream.model.clone());
        let x = Exchange {
            id: &id,
            sent_ns: sent,
            end_ns: end,
            ..Exchange::default()
        };
        eos_added += usize::from(add_exchange(&mut stream, &x, &[], sink, at));
    }
    sink.note(format!(
        "{} is a saved stream: it has no times, so its tokens are in order but no latency is known (TTFT, ITL and \
         throughput are shown as absent){}",
        path.display(),
        if cut {
            "; its last response has no end ([DONE]): it was cut, or saved before it ended"
        } else {
            ""
        }
    ));
    if skipped > 0 {
        sink.note(format!(
            "{skipped} line(s) of {} are not data: lines and were skipped",
            path.display()
        ));
    }
    if eos_added > 0 {
        sink.note(format!(
            "{eos_added} response(s) count one token more in usage than they streamed: the end-of-sequence token, \
             added without text"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saved_stream_is_recognised_by_its_data_lines() {
        let chat = "data: {\"id\":\"a\",\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n\
                    data: {\"id\":\"a\",\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: [DONE]\n";
        assert!(looks_like(chat));
        let native = "data: {\"content\":\"Hi\",\"stop\":false}\n\ndata: {\"content\":\"\",\"stop\":true}\n";
        assert!(looks_like(native));
        assert!(!looks_like("{\"kind\":\"request\"}\n"));
        assert!(!looks_like("data: {\"event\":\"ping\"}\n"));
        assert!(!looks_like("INFO 11-03 15:00:00 something\n"));
    }
}
