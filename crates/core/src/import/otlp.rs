//! OpenTelemetry traces as OTLP JSON, as the OpenTelemetry Collector's file exporter writes them (one
//! `ExportTraceServiceRequest` per line, 64-bit integers as strings) or as one document, and as OTLP protobuf (the
//! published messages of `opentelemetry-proto`, decoded by prost: one message, or a stream of length-prefixed ones).
//! JSON is decoded into the same messages by the crate's serde mapping ([`json`], which also reads protobuf's own JSON
//! mapping: snake_case names, base64 ids, enums by name), so one mapping ([`pb::spans_of`]) makes the spans of both.
//!
//! This module decodes spans; [`vllm`] and [`sglang`] map them. A span whose name or attributes neither engine
//! writes is counted and left out, never guessed at.

mod json;
pub mod sglang;
pub mod vllm;

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use super::Sink;
use crate::format::jsonl::for_each_line;
use crate::ingest::{LoadError, Progress};
use crate::trace::report::Problem;

/// An attribute value of OTLP's `AnyValue`.
#[derive(Debug, Clone, PartialEq)]
pub enum Attr {
    /// `stringValue`.
    Str(String),
    /// `intValue` (a string or a number in JSON).
    Int(i64),
    /// `doubleValue`.
    Float(f64),
    /// `boolValue`.
    Bool(bool),
    /// `arrayValue`.
    List(Vec<Attr>),
    /// Anything else (`kvlistValue`, `bytesValue`, empty).
    Other,
}

impl Attr {
    /// The value as a float: doubles, and integers (the Go collector writes whole doubles as integers).
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            #[expect(clippy::cast_precision_loss, reason = "attribute values, far below 2^53")]
            Attr::Int(i) => Some(*i as f64),
            Attr::Float(f) => Some(*f),
            Attr::Str(s) => s.parse().ok(),
            _ => None,
        }
    }

    /// The value as an integer: integers, and whole doubles.
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Attr::Int(i) => Some(*i),
            #[expect(clippy::cast_possible_truncation, reason = "checked to be whole and in range")]
            Attr::Float(f) if f.fract() == 0.0 && f.abs() < 9e15 => Some(*f as i64),
            Attr::Str(s) => s.parse().ok(),
            _ => None,
        }
    }

    /// The value as a string: strings, and the first string of a list (finish reasons come as either).
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Attr::Str(s) => Some(s),
            Attr::List(items) => items.iter().find_map(Attr::as_str),
            _ => None,
        }
    }
}

/// A decoded span, with the place of the line it came from.
#[derive(Debug, Clone, Default)]
pub struct Span {
    /// 1-based line of the file (1 for a single document).
    pub line: u64,
    /// Hex trace id.
    pub trace_id: String,
    /// Hex span id.
    pub span_id: String,
    /// Hex parent span id, empty for a root.
    pub parent_span_id: String,
    /// The span's name.
    pub name: String,
    /// Start, Unix ns (`None` when absent or unreadable).
    pub start_ns: Option<i64>,
    /// End, Unix ns.
    pub end_ns: Option<i64>,
    /// Attributes.
    pub attributes: Vec<(String, Attr)>,
    /// Events.
    pub events: Vec<Event>,
    /// True when the span's status is ERROR (code 2).
    pub error: bool,
    /// The attributes of the resource that emitted it.
    pub resource: std::sync::Arc<Vec<(String, Attr)>>,
}

/// A span event.
#[derive(Debug, Clone, Default)]
pub struct Event {
    /// Its name.
    pub name: String,
    /// When, Unix ns.
    pub time_ns: Option<i64>,
    /// Its attributes.
    pub attributes: Vec<(String, Attr)>,
}

/// Finds an attribute by key.
pub fn attr<'a>(attributes: &'a [(String, Attr)], key: &str) -> Option<&'a Attr> {
    attributes.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

impl Span {
    /// The span's attribute `key`.
    pub fn attr(&self, key: &str) -> Option<&Attr> {
        attr(&self.attributes, key)
    }
}

/// The rest of a file, whole (a protobuf message, or a JSON document, cannot be read in parts).
fn read_rest(reader: &mut impl Read, path: &Path, progress: &Progress) -> Result<Vec<u8>, LoadError> {
    let mut bytes = Vec::new();
    reader.read_to_end(&mut bytes).map_err(|source| LoadError::Io {
        path: path.display().to_string(),
        source,
    })?;
    progress.add_done(bytes.len() as u64);
    Ok(bytes)
}

/// Calls `each` with every span of an OTLP file as it is read: JSON lines (one export per line, a bad line rejected
/// alone; one line's spans held at a time), one JSON document spread over many lines, or protobuf (read whole).
pub fn for_each_span(
    input: impl Read,
    path: &Path,
    sink: &mut Sink<'_>,
    progress: &Progress,
    mut each: impl FnMut(Span, &mut Sink<'_>),
) -> Result<(), LoadError> {
    let mut reader = BufReader::new(input);
    let head = reader.fill_buf().map_err(|source| LoadError::Io {
        path: path.display().to_string(),
        source,
    })?;
    // Not text: OTLP protobuf, read whole (a protobuf message cannot be read in parts).
    let compressed = crate::format::jsonl::Compression::sniff(head) != crate::format::jsonl::Compression::None;
    let binary = head.iter().take(4096).any(|&c| c < 0x09 || (0x0e..0x20).contains(&c));
    if binary && !compressed && !crate::import::looks_like_json(head) {
        let bytes = read_rest(&mut reader, path, progress)?;
        match pb::decode(&bytes) {
            Some(messages) => pb::spans(messages).into_iter().for_each(|s| each(s, sink)),
            None => sink.reject(
                1,
                Problem::Malformed,
                None,
                "neither OTLP JSON nor OTLP protobuf (ExportTraceServiceRequest, alone or length-delimited); \
                 truncated?"
                    .to_owned(),
            ),
        }
        return Ok(());
    }
    // A pretty-printed document opens with a lone brace on its first line.
    let first_line = head.split(|&c| c == b'\n').next().unwrap_or_default().trim_ascii();
    let mut spans = Vec::new();
    if first_line == b"{" || first_line == b"[" {
        let bytes = read_rest(&mut reader, path, progress)?;
        match json::decode(&bytes) {
            Ok(exports) => exports
                .into_iter()
                .for_each(|export| pb::spans_of(export, 1, &mut spans)),
            Err(e) => sink.reject(
                u64::try_from(e.line()).unwrap_or(1),
                Problem::Malformed,
                None,
                format!("not an OTLP JSON document ({e}); expected {{\"resourceSpans\": [...]}}"),
            ),
        }
        for s in spans {
            each(s, sink);
        }
        return Ok(());
    }
    let (file, kind) = (sink.file, sink.kind);
    for_each_line(reader, path, file, sink.b, progress, |line, place, b| {
        let mut sink = Sink::new(b, file, kind);
        match json::decode(line) {
            Ok(exports) => {
                for export in exports {
                    pb::spans_of(export, place.at, &mut spans);
                }
                spans.drain(..).for_each(|s| each(s, &mut sink));
            }
            Err(e) => sink.reject(
                place.at,
                Problem::Malformed,
                None,
                format!("not an OTLP JSON export ({e}); each line must be one {{\"resourceSpans\": [...]}} object"),
            ),
        }
    })
}

/// Reads an OTLP file and maps the spans of whichever engine wrote them: vLLM's `llm_request` spans at once,
/// SGLang's request trees into `collector`, mapped when every file of the load is read ([`finish`]): one request's
/// spans come from several processes and bodies, so several files. Both engines may be in one file (a collector
/// shared by two deployments).
pub fn read(
    input: impl Read,
    path: &Path,
    sink: &mut Sink<'_>,
    progress: &Progress,
    collector: &mut sglang::Collector,
) -> Result<(), LoadError> {
    let mut mapper = Mapper::new(sink, collector);
    for_each_span(input, path, sink, progress, |span, sink| {
        mapper.span(std::borrow::Cow::Owned(span), sink);
    })?;
    mapper.done(path, sink);
    Ok(())
}

/// The spans of one export an OTLP/HTTP exporter sent (`POST /v1/traces`): an `ExportTraceServiceRequest` in
/// protobuf, or in JSON when `json` (its `Content-Type` is `application/json`), each span at `line` (the export's
/// number).
///
/// # Errors
/// The body is not such an export: why, for the exporter's answer.
pub fn export_spans(body: &[u8], json: bool, line: u64) -> Result<Vec<Span>, String> {
    use prost::Message as _;
    let exports = if json {
        json::decode(body).map_err(|e| format!("not an OTLP JSON export ({e})"))?
    } else {
        vec![
            opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest::decode(body)
                .map_err(|e| format!("not an OTLP protobuf ExportTraceServiceRequest ({e})"))?,
        ]
    };
    let mut spans = Vec::new();
    for export in exports {
        pb::spans_of(export, line, &mut spans);
    }
    Ok(spans)
}

/// Maps spans already decoded (an OTLP receiver's), as [`read`] maps a file's.
pub fn read_spans<'s>(
    spans: impl IntoIterator<Item = &'s Span>,
    path: &Path,
    sink: &mut Sink<'_>,
    collector: &mut sglang::Collector,
) {
    let mut mapper = Mapper::new(sink, collector);
    for span in spans {
        mapper.span(std::borrow::Cow::Borrowed(span), sink);
    }
    mapper.done(path, sink);
}

/// Spans mapped one at a time, and what is said of them at the end.
struct Mapper<'c> {
    first: Option<i64>,
    vllm_count: usize,
    seen: vllm::Seen,
    before: usize,
    collector: &'c mut sglang::Collector,
}

impl<'c> Mapper<'c> {
    fn new(sink: &Sink<'_>, collector: &'c mut sglang::Collector) -> Self {
        collector.file = sink.file;
        Mapper {
            first: None,
            vllm_count: 0,
            seen: vllm::Seen::default(),
            before: collector.len(),
            collector,
        }
    }

    /// A span: a vLLM one mapped at once, an SGLang one kept for its request's tree (copied only then, when
    /// borrowed).
    fn span(&mut self, span: std::borrow::Cow<'_, Span>, sink: &mut Sink<'_>) {
        if let Some(t) = span.start_ns {
            self.first = Some(self.first.map_or(t, |f| f.min(t)));
        }
        if vllm::is_vllm(&span) {
            self.vllm_count += 1;
            vllm::map_one(&span, sink, &mut self.seen);
        } else {
            self.collector.push(span.into_owned());
        }
    }

    fn done(self, path: &Path, sink: &mut Sink<'_>) {
        if let Some(first) = self.first {
            sink.saw_time(first);
        }
        if self.vllm_count > 0 {
            vllm::note(sink);
        }
        if self.seen.sequences > 0 {
            sink.note(format!(
                "{} vLLM spans share their request id with another: the sequences of requests sampled n > 1 times, \
                 one span each; the second and later are named ID#2, ID#3, ...",
                self.seen.sequences
            ));
        }
        if self.vllm_count == 0 && self.collector.len() == self.before {
            sink.note(format!(
                "{} has no request spans tokenscope knows (vLLM's llm_request, SGLang's request spans with rid)",
                path.display()
            ));
        }
    }
}

/// Maps the SGLang spans gathered from every file of the load, and says what could not be.
pub fn finish(collector: sglang::Collector, sink: &mut Sink<'_>) {
    let mapped = collector.finish(sink);
    if mapped.orphans > 0 {
        sink.note(format!(
            "{} SGLang spans of {} requests were left out: their request's root span (written by the tokenizer \
             process) is in none of the files given; give every file of the export (SGLang 0.5.3 and 0.5.9 export \
             no root for a request aborted while queued)",
            mapped.orphans, mapped.orphan_traces
        ));
    }
    if mapped.ignored > 0 {
        sink.note(format!(
            "{} spans are neither vLLM's nor SGLang's and were left out",
            mapped.ignored
        ));
    }
}

/// OTLP protobuf: one `ExportTraceServiceRequest` (or `TracesData`, the same fields), or a stream of them each
/// preceded by its length, as the Collector's file exporter writes with `format: proto` (4 bytes, big-endian) or as
/// the OTLP file-exporter specification asks (a varint).
pub mod pb {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
    use prost::Message;

    use super::{Attr, Event, Span};

    /// Reads a message's length before it: (header length, message length).
    type Framing = fn(&[u8]) -> Option<(usize, usize)>;

    /// A 4-byte big-endian length (the Collector's file exporter): (header length, message length).
    fn fixed_frame(b: &[u8]) -> Option<(usize, usize)> {
        let n = u32::from_be_bytes(b.get(..4)?.try_into().ok()?) as usize;
        Some((4, n))
    }

    /// A varint length (protobuf's delimited messages): (header length, message length).
    fn varint_frame(b: &[u8]) -> Option<(usize, usize)> {
        let mut buf = b;
        let n = prost::encoding::decode_varint(&mut buf).ok()?;
        Some((b.len() - buf.len(), usize::try_from(n).ok()?))
    }

    /// The messages of a protobuf file, in the first framing that reads the whole file; `None` when none does.
    pub fn decode(bytes: &[u8]) -> Option<Vec<ExportTraceServiceRequest>> {
        let framings: [Framing; 2] = [fixed_frame, varint_frame];
        for framing in framings {
            let mut rest = bytes;
            let mut out = Vec::new();
            while !rest.is_empty() {
                let Some((head, len)) = framing(rest) else { break };
                // A corrupt length can be anything: past the end (or past usize) is no frame.
                let Some(end) = head.checked_add(len) else { break };
                let Some(body) = rest.get(head..end) else { break };
                let Ok(m) = ExportTraceServiceRequest::decode(body) else {
                    break;
                };
                out.push(m);
                rest = &rest[end..];
            }
            if rest.is_empty() && !out.is_empty() && out.iter().any(|m| !m.resource_spans.is_empty()) {
                return Some(out);
            }
        }
        ExportTraceServiceRequest::decode(bytes).ok().map(|m| vec![m])
    }

    fn attr(v: Option<&AnyValue>) -> Attr {
        match v.and_then(|v| v.value.as_ref()) {
            Some(any_value::Value::StringValue(s)) => Attr::Str(s.clone()),
            Some(any_value::Value::IntValue(i)) => Attr::Int(*i),
            Some(any_value::Value::DoubleValue(f)) => Attr::Float(*f),
            Some(any_value::Value::BoolValue(b)) => Attr::Bool(*b),
            Some(any_value::Value::ArrayValue(a)) => Attr::List(a.values.iter().map(|v| attr(Some(v))).collect()),
            _ => Attr::Other,
        }
    }

    fn attributes(kvs: &[KeyValue]) -> Vec<(String, Attr)> {
        kvs.iter().map(|kv| (kv.key.clone(), attr(kv.value.as_ref()))).collect()
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    fn time(ns: u64) -> Option<i64> {
        i64::try_from(ns).ok().filter(|&t| t > 0)
    }

    /// The spans of the messages, each at its 1-based number as its line.
    pub fn spans(messages: Vec<ExportTraceServiceRequest>) -> Vec<Span> {
        let mut out = Vec::new();
        for (n, m) in messages.into_iter().enumerate() {
            spans_of(m, n as u64 + 1, &mut out);
        }
        out
    }

    /// Flattens one export into spans, each at `line`.
    pub fn spans_of(m: ExportTraceServiceRequest, line: u64, out: &mut Vec<Span>) {
        for rs in m.resource_spans {
            let resource = std::sync::Arc::new(rs.resource.map(|r| attributes(&r.attributes)).unwrap_or_default());
            for ss in rs.scope_spans {
                for s in ss.spans {
                    out.push(Span {
                        line,
                        trace_id: hex(&s.trace_id),
                        span_id: hex(&s.span_id),
                        parent_span_id: hex(&s.parent_span_id),
                        name: s.name,
                        start_ns: time(s.start_time_unix_nano),
                        end_ns: time(s.end_time_unix_nano),
                        attributes: attributes(&s.attributes),
                        events: s
                            .events
                            .iter()
                            .map(|e| Event {
                                name: e.name.clone(),
                                time_ns: time(e.time_unix_nano),
                                attributes: attributes(&e.attributes),
                            })
                            .collect(),
                        error: s.status.is_some_and(|st| st.code == 2),
                        resource: resource.clone(),
                    });
                }
            }
        }
    }
}
