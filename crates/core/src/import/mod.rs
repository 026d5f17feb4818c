//! Importers: what engines and benchmark tools already write (AIPerf exports, SGLang and vLLM OpenTelemetry traces,
//! vLLM's iteration log, TensorRT-LLM's iteration statistics), mapped to the trace model of format v1.
//!
//! Each importer turns its source into format records ([`RawRecord`]s built in memory, never text) and hands them to
//! the format's one validator ([`ingest`]), so an imported trace obeys the same rules as a native one and every
//! rejected record is reported with its place, field and reason. `docs/IMPORT.md` maps each source's fields.

pub mod aiperf;
pub mod llamacpp_log;
pub mod log_clock;
pub mod openai;
pub mod otlp;
pub mod recording;
pub mod server_log;
pub mod sglang_log;
pub mod sglang_pd;
pub mod sse;
pub mod trtllm;
pub mod vllm_log;

use std::borrow::Cow;
use std::io::Read;
use std::path::Path;

use crate::ingest::raw::{Field, RawRecord, Val};
use crate::ingest::validate::ingest;
use crate::ingest::{LoadError, Progress};
use crate::trace::TraceBuilder;
use crate::trace::report::{Place, Problem, Rejection};

/// A source tokenscope imports, as named by `convert --from`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, clap::ValueEnum)]
pub enum Kind {
    /// SGLang `--enable-trace`: OTLP JSON (collector file exporter, one request per line, or one document).
    SglangOtlp,
    /// vLLM `--otlp-traces-endpoint`: the `llm_request` spans as OTLP JSON.
    VllmOtlp,
    /// vLLM's server log: the stats every 10 s (running, waiting, KV use, throughput, prefix-cache hits,
    /// speculative acceptance), and with `--enable-logging-iteration-details` one line per engine step.
    #[value(alias = "vllm-iterations")]
    VllmLog,
    /// SGLang's server log: a `Prefill batch` line per prefill batch, a `Decode batch` line every 40 decode steps.
    SglangLog,
    /// TensorRT-LLM: the `/metrics` IterationStats JSON (array or lines) or the `print_iter_log` lines.
    TrtllmIterations,
    /// TensorRT-LLM: the `/perf_metrics` JSON, per-request timings.
    TrtllmPerf,
    /// AIPerf `profile_export.jsonl`: one line per request with its chunk latencies.
    Aiperf,
    /// AIPerf `profile_export_raw.jsonl`: every streamed chunk of each request, with the server's logprobs.
    AiperfRaw,
    /// AIPerf `profile_export_aiperf.json`: the run's aggregate; gives the model name only.
    AiperfAggregate,
    /// The raw capture of `tokenscope record --raw`: every SSE chunk of every request with its arrival time.
    OpenaiStream,
    /// A saved stream: the `data:` lines of one or more streamed responses as they came, without times.
    SseStream,
    /// llama.cpp's `llama-server` log: requests at its default level, every step and token at `-lv 5`.
    LlamacppLog,
}

impl Kind {
    /// Every kind, in the order they are listed to users.
    pub const ALL: [Kind; 12] = [
        Kind::SglangOtlp,
        Kind::VllmOtlp,
        Kind::VllmLog,
        Kind::SglangLog,
        Kind::TrtllmIterations,
        Kind::TrtllmPerf,
        Kind::Aiperf,
        Kind::AiperfRaw,
        Kind::AiperfAggregate,
        Kind::OpenaiStream,
        Kind::SseStream,
        Kind::LlamacppLog,
    ];

    /// The name `--from` takes.
    pub fn name(self) -> &'static str {
        match self {
            Kind::SglangOtlp => "sglang-otlp",
            Kind::VllmOtlp => "vllm-otlp",
            Kind::VllmLog => "vllm-log",
            Kind::SglangLog => "sglang-log",
            Kind::TrtllmIterations => "trtllm-iterations",
            Kind::TrtllmPerf => "trtllm-perf",
            Kind::Aiperf => "aiperf",
            Kind::AiperfRaw => "aiperf-raw",
            Kind::AiperfAggregate => "aiperf-aggregate",
            Kind::OpenaiStream => "openai-stream",
            Kind::SseStream => "sse-stream",
            Kind::LlamacppLog => "llamacpp-log",
        }
    }

    /// How the places of its files are counted: items of TensorRT-LLM's JSON documents, else lines.
    pub fn encoding(self) -> crate::trace::report::Encoding {
        match self {
            Kind::TrtllmIterations | Kind::TrtllmPerf => crate::trace::report::Encoding::Items,
            _ => crate::trace::report::Encoding::Jsonl,
        }
    }

    /// The engine the kind comes from, for the trace's meta.
    pub fn engine(self) -> Option<&'static str> {
        match self {
            Kind::SglangOtlp | Kind::SglangLog => Some("sglang"),
            Kind::VllmOtlp | Kind::VllmLog => Some("vllm"),
            Kind::TrtllmIterations | Kind::TrtllmPerf => Some("trtllm"),
            Kind::LlamacppLog => Some("llama.cpp"),
            Kind::Aiperf | Kind::AiperfRaw | Kind::AiperfAggregate | Kind::OpenaiStream | Kind::SseStream => None,
        }
    }

    /// The names of every kind, for messages: "sglang-otlp, vllm-otlp, ...".
    pub fn names() -> String {
        Self::ALL.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
    }
}

/// How much of a file [`sniff`] reads to recognise it.
const SNIFF_BYTES: usize = 64 * 1024;

/// Recognises an engine's or tool's file by its content (its first 64 KiB, decompressed), or `None`: a native
/// trace, or nothing tokenscope knows.
pub fn sniff(path: &Path) -> Option<Kind> {
    let name = path.file_name()?.to_str()?.to_ascii_lowercase();
    if [".pb", ".binpb", ".otlp", ".proto.bin"]
        .iter()
        .any(|e| name.ends_with(e))
    {
        return otlp_pb_kind(path);
    }
    let file = std::fs::File::open(path).ok()?;
    let mut head = Vec::with_capacity(SNIFF_BYTES);
    let mut raw = std::io::BufReader::new(file);
    let mut magic = [0u8; 4];
    let n = raw.read(&mut magic).ok()?;
    let chained = std::io::Read::chain(&magic[..n], raw);
    let reader: Box<dyn Read> = match crate::format::jsonl::Compression::sniff(&magic[..n]) {
        crate::format::jsonl::Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(chained)),
        crate::format::jsonl::Compression::Zstd => Box::new(zstd::stream::read::Decoder::new(chained).ok()?),
        crate::format::jsonl::Compression::None => Box::new(chained),
    };
    reader.take(SNIFF_BYTES as u64).read_to_end(&mut head).ok()?;
    sniff_bytes(&head)
}

/// The kind of an OTLP protobuf file, by the spans it decodes to.
fn otlp_pb_kind(path: &Path) -> Option<Kind> {
    let bytes = std::fs::read(path).ok()?;
    let spans = otlp::pb::spans(otlp::pb::decode(&bytes)?);
    if spans.is_empty() {
        return None;
    }
    Some(if spans.iter().any(otlp::vllm::is_vllm) {
        Kind::VllmOtlp
    } else {
        Kind::SglangOtlp
    })
}

/// [`sniff`] on bytes already read.
pub fn sniff_bytes(head: &[u8]) -> Option<Kind> {
    let text = String::from_utf8_lossy(head);
    let has = |s: &str| text.contains(s);
    if llamacpp_log::looks_like(&text) {
        return Some(Kind::LlamacppLog);
    }
    if vllm_log::looks_like(&text) {
        return Some(Kind::VllmLog);
    }
    if sglang_log::looks_like(&text) {
        return Some(Kind::SglangLog);
    }
    if trtllm::looks_like_iter_log(&text) {
        return Some(Kind::TrtllmIterations);
    }
    if sse::looks_like(&text) {
        return Some(Kind::SseStream);
    }
    if !looks_like_json(head) {
        return None;
    }
    if has("resourceSpans") || has("resource_spans") {
        if has("\"llm_request\"") || has("vllm.llm_engine") || has("vllm.tracing") {
            Some(Kind::VllmOtlp)
        } else {
            Some(Kind::SglangOtlp)
        }
    } else if has("\"kind\"") {
        None
    } else if has("\"iterLatencyMS\"") || has("\"inflightBatchingStats\"") {
        Some(Kind::TrtllmIterations)
    } else if has("\"perf_metrics\"") || has("\"timing_metrics\"") {
        Some(Kind::TrtllmPerf)
    } else if has("\"request_id\"") && has("\"sent_ns\"") && has("\"events\"") {
        Some(Kind::OpenaiStream)
    } else if has("\"start_perf_ns\"") && has("\"responses\"") {
        Some(Kind::AiperfRaw)
    } else if has("\"metadata\"") && (has("\"metrics\"") || has("\"error\"")) && has("x_request_id") {
        Some(Kind::Aiperf)
    } else if has("\"input_config\"") && has("\"records\"") {
        Some(Kind::AiperfAggregate)
    } else {
        None
    }
}

/// True when the bytes open a JSON object, or an array of objects (not a log line that starts with `[date]`).
pub fn looks_like_json(head: &[u8]) -> bool {
    let mut rest = head
        .strip_prefix(b"\xef\xbb\xbf".as_slice())
        .unwrap_or(head)
        .trim_ascii_start();
    if let Some(inner) = rest.strip_prefix(b"[") {
        rest = inner.trim_ascii_start();
        return matches!(rest.first(), Some(b'{' | b']') | None);
    }
    rest.first() == Some(&b'{')
}

/// What the imported files of one trace say of it as a whole, gathered file by file and written as its meta.
#[derive(Debug, Default)]
pub struct Imported {
    first_file: Option<u32>,
    kinds: Vec<Kind>,
    model: Option<String>,
    /// The earliest absolute time an importer read, which dates sources that give no year.
    first_ns: Option<i64>,
    /// vLLM iteration lines, placed in time once every file is read; with the year of their log file's last change.
    vllm_iterations: Vec<(Vec<vllm_log::Parsed>, i32)>,
    /// Server logs' stats lines, placed in time likewise: with the file's kind and the year of its last change.
    log_samples: Vec<(Vec<server_log::LogSample>, Kind, i32)>,
    /// SGLang's per-request timing lines of every file (a disaggregated request's two are in two files), with the
    /// year of the last file's change.
    sglang_times: Vec<sglang_pd::TimeStats>,
    sglang_times_year: i32,
    /// TensorRT-LLM statistics and perf metrics, joined once every file is read.
    trtllm: trtllm::Pending,
    /// SGLang's spans, mapped once every file is read (a request's spans are spread over files), and the first
    /// file that held any.
    sglang: otlp::sglang::Collector,
    sglang_file: Option<u32>,
    /// The user's date and zone for logs whose times lack them.
    clock: log_clock::LogClock,
}

impl Imported {
    /// Runs `read` with the SGLang spans' collector, noting `file` as the first that held any.
    fn collecting_sglang<R>(&mut self, file: u32, read: impl FnOnce(&mut otlp::sglang::Collector) -> R) -> R {
        let before = self.sglang.len();
        let out = read(&mut self.sglang);
        if self.sglang.len() > before {
            self.sglang_file.get_or_insert(file);
        }
        out
    }

    /// What the files of a trace will say, read with the user's date and zone for logs.
    pub fn with_clock(clock: log_clock::LogClock) -> Self {
        Self {
            clock,
            ..Self::default()
        }
    }

    /// Adds the trace's meta record (engine and model) unless a native file gave one.
    pub fn finish(self, b: &mut TraceBuilder) {
        let Some(file) = self.first_file else {
            return;
        };
        let year = self.first_ns.map(|ns| {
            use chrono::Datelike;
            chrono::DateTime::from_timestamp_nanos(ns).year()
        });
        if let Some(sglang_file) = self.sglang_file.filter(|_| !self.sglang.is_empty()) {
            let mut sink = Sink::new(b, sglang_file, Kind::SglangOtlp);
            otlp::finish(self.sglang, &mut sink);
        }
        let clock = self.clock;
        for (parsed, fallback_year) in self.vllm_iterations {
            vllm_log::place(parsed, year, fallback_year, &clock, b);
        }
        for (samples, kind, fallback_year) in self.log_samples {
            let placed = server_log::place(&samples, year, fallback_year, &clock, b);
            if placed > 0 {
                let engine = if kind == Kind::SglangLog { "SGLang" } else { "vLLM" };
                let year_text = if kind == Kind::SglangLog {
                    String::new()
                } else {
                    format!(" in {}", clock.year(year, fallback_year))
                };
                let requests = if kind == Kind::SglangLog && !self.sglang_times.is_empty() {
                    "its batch lines name no request; its request timing lines give the requests"
                } else {
                    "it names no request, so it gives no request's latency"
                };
                let note = format!(
                    "{engine}'s log: {placed} stats line(s) read as samples; its times (whole seconds, no zone) were \
                     read{year_text} {}; {requests}",
                    clock.zone_text()
                );
                if !b.report.notes.contains(&note) {
                    b.report.notes.push(note);
                }
            }
        }
        if !self.sglang_times.is_empty() {
            let y = self.sglang_times_year;
            let (joined, alone) = sglang_pd::place(&self.sglang_times, &clock, y, b);
            let mut instances: Vec<&str> = self.sglang_times.iter().map(|s| s.instance.as_str()).collect();
            instances.sort_unstable();
            instances.dedup();
            b.report.notes.push(format!(
                "SGLang's request timing lines: {joined} request(s) joined across prefill and decode servers by \
                 bootstrap_room, {alone} on one server only (warm-ups, or the other server's log not given); instances \
                 named by their log files: {}",
                instances.join(", ")
            ));
        }
        if !self.trtllm.is_empty() {
            trtllm::map(self.trtllm, b);
        }
        if b.has_meta() {
            return;
        }
        let mut engines: Vec<&str> = self.kinds.iter().filter_map(|k| k.engine()).collect();
        engines.dedup();
        let mut meta = record("meta");
        if let [engine] = engines[..] {
            meta.engine = text(engine);
        }
        meta.model = self.model.and_then(text);
        if self.kinds.iter().all(|k| {
            matches!(
                k,
                Kind::Aiperf | Kind::AiperfRaw | Kind::OpenaiStream | Kind::AiperfAggregate
            )
        }) {
            meta.clock = text("client");
        }
        if self.kinds.iter().all(|k| *k == Kind::SseStream) {
            meta.clock = text(sse::UNTIMED);
        }
        // Not a record of the files: not counted among the records read.
        ingest(&meta, Place { file, at: 0 }, b);
        b.report.records -= 1;
    }
}

/// Reads one file of a source into the builder.
pub fn read(
    kind: Kind,
    path: &Path,
    file: u32,
    b: &mut TraceBuilder,
    progress: &Progress,
    imported: &mut Imported,
) -> Result<(), LoadError> {
    let input = std::fs::File::open(path).map_err(|source| LoadError::Io {
        path: path.display().to_string(),
        source,
    })?;
    read_from(kind, input, path, file, b, progress, imported)
}

/// [`read`] of what is already open or held: `path` names it in messages and dates a log that gives no year.
///
/// # Errors
/// The input cannot be read, or the load was cancelled.
pub fn read_from(
    kind: Kind,
    input: impl std::io::Read,
    path: &Path,
    file: u32,
    b: &mut TraceBuilder,
    progress: &Progress,
    imported: &mut Imported,
) -> Result<(), LoadError> {
    let mut sink = Sink::new(b, file, kind);
    match kind {
        Kind::SglangOtlp | Kind::VllmOtlp => {
            imported.collecting_sglang(file, |collector| {
                otlp::read(input, path, &mut sink, progress, collector)
            })?;
        }
        // One reader for both engines' stats lines, wherever they are (a proxy's log can hold both).
        Kind::VllmLog | Kind::SglangLog => vllm_log::read(input, path, &mut sink, progress)?,
        Kind::TrtllmIterations => trtllm::read_iterations(input, path, &mut sink, progress)?,
        Kind::TrtllmPerf => trtllm::read_perf(input, path, &mut sink, progress)?,
        Kind::Aiperf => aiperf::read(input, path, &mut sink, progress)?,
        Kind::AiperfRaw => aiperf::read_raw(input, path, &mut sink, progress)?,
        Kind::AiperfAggregate => aiperf::read_aggregate(input, path, &mut sink)?,
        Kind::OpenaiStream => recording::read_capture(input, path, &mut sink, progress)?,
        Kind::SseStream => sse::read(input, path, &mut sink, progress)?,
        Kind::LlamacppLog => llamacpp_log::read(input, path, &mut sink, progress)?,
    }
    imported.took(sink, path);
    Ok(())
}

/// A source of a trace made while it is written (a watch, a live view), held in memory as it is read.
#[derive(Debug, Clone, Copy)]
pub enum LivePart<'a> {
    /// A llama-server log read line by line.
    Llamacpp {
        log: &'a llamacpp_log::Incremental,
        path: &'a Path,
    },
    /// What was read of a source of `kind` (the lines held of a vLLM or SGLang log, the exports an OTLP receiver
    /// was sent): `path` names it in messages (and, when it is a file, its last change dates a log with no year).
    Bytes {
        kind: Kind,
        path: &'a Path,
        bytes: &'a [u8],
    },
    /// Spans an OTLP receiver was sent, decoded: each export's.
    Spans {
        path: &'a Path,
        exports: &'a [Vec<otlp::Span>],
    },
}

/// The trace of sources read as they are written, as [`crate::load::load`] would make it of their files.
pub fn live(parts: &[LivePart<'_>]) -> (crate::trace::Trace, crate::trace::report::Report) {
    let mut b = TraceBuilder::default();
    let mut imported = Imported::default();
    for (file, part) in parts.iter().enumerate() {
        let file = u32::try_from(file).unwrap_or(u32::MAX);
        let (path, encoding) = match *part {
            LivePart::Llamacpp { path, .. } | LivePart::Spans { path, .. } => {
                (path, crate::trace::report::Encoding::Jsonl)
            }
            LivePart::Bytes { kind, path, .. } => (path, kind.encoding()),
        };
        b.report.files.push(crate::trace::report::SourceFile {
            path: path.display().to_string(),
            encoding,
        });
        match *part {
            LivePart::Llamacpp { log, path } => {
                let mut sink = Sink::new(&mut b, file, Kind::LlamacppLog);
                log.place_into(path, &mut sink);
                imported.took(sink, path);
            }
            LivePart::Bytes { kind, path, bytes } => {
                // Reading memory fails only when cancelled, and nothing cancels this read.
                if let Err(e) = read_from(kind, bytes, path, file, &mut b, &Progress::default(), &mut imported) {
                    b.report.notes.push(format!("{}: {e}", path.display()));
                }
            }
            LivePart::Spans { path, exports } => {
                let spans = || exports.iter().flatten();
                let kind = if spans().any(otlp::vllm::is_vllm) {
                    Kind::VllmOtlp
                } else {
                    Kind::SglangOtlp
                };
                let mut sink = Sink::new(&mut b, file, kind);
                imported.collecting_sglang(file, |collector| otlp::read_spans(spans(), path, &mut sink, collector));
                imported.took(sink, path);
            }
        }
    }
    imported.finish(&mut b);
    b.finish()
}

/// The trace of a llama-server log read as it is written (`llamacpp_log::Incremental`), as [`crate::load::load`]
/// would make it of the file: what no line can change any more placed once and kept by `log` from call to call
/// (a watch's looks), the rest placed anew.
pub fn llamacpp_live(
    log: &mut llamacpp_log::Incremental,
    path: &Path,
) -> (crate::trace::Trace, crate::trace::report::Report) {
    let mut b = log.builder_of_look(path);
    let mut imported = Imported::default();
    imported.took(Sink::new(&mut b, 0, Kind::LlamacppLog), path);
    imported.finish(&mut b);
    b.finish()
}

impl Imported {
    /// Takes what a file's reader left in its sink beside the records: its kind, model, earliest time, and what is
    /// placed once every file is read.
    fn took(&mut self, mut sink: Sink<'_>, path: &Path) {
        let (file, kind) = (sink.file, sink.kind);
        self.first_file.get_or_insert(file);
        self.kinds.push(kind);
        if self.model.is_none() {
            self.model = sink.model;
        }
        self.first_ns = match (self.first_ns, sink.first_ns) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.trtllm.absorb(std::mem::take(&mut sink.trtllm));
        if !sink.vllm_iterations.is_empty() || !sink.log_samples.is_empty() || !sink.sglang_times.is_empty() {
            let modified_year = std::fs::metadata(path).and_then(|m| m.modified()).map_or(1970, |t| {
                use chrono::Datelike;
                chrono::DateTime::<chrono::Utc>::from(t).year()
            });
            if !sink.vllm_iterations.is_empty() {
                self.vllm_iterations.push((sink.vllm_iterations, modified_year));
            }
            if !sink.log_samples.is_empty() {
                self.log_samples.push((sink.log_samples, kind, modified_year));
            }
            if !sink.sglang_times.is_empty() {
                self.sglang_times.append(&mut sink.sglang_times);
                self.sglang_times_year = modified_year;
            }
        }
    }
}

/// Where an importer puts what it read: the builder, the file's index, and the engine its records come from.
pub struct Sink<'b> {
    /// The trace being built.
    pub b: &'b mut TraceBuilder,
    /// The file's index in the report.
    pub file: u32,
    /// The source kind.
    pub kind: Kind,
    /// The served model, when the source names it.
    pub model: Option<String>,
    /// The earliest absolute time read (Unix ns), to date sources that give no year.
    pub first_ns: Option<i64>,
    /// vLLM iteration lines read, to be placed in time when every file is read.
    pub vllm_iterations: Vec<vllm_log::Parsed>,
    /// Server logs' stats lines read, to be placed in time when every file is read.
    pub log_samples: Vec<server_log::LogSample>,
    /// SGLang's per-request timing lines, joined across a disaggregated deployment's logs when every file is read.
    pub sglang_times: Vec<sglang_pd::TimeStats>,
    /// TensorRT-LLM statistics read, to be joined when every file is read.
    pub trtllm: trtllm::Pending,
}

impl<'b> Sink<'b> {
    /// A sink adding to `b` the records of file `file`, read as `kind`.
    pub fn new(b: &'b mut TraceBuilder, file: u32, kind: Kind) -> Self {
        Self {
            b,
            file,
            kind,
            model: None,
            first_ns: None,
            vllm_iterations: Vec::new(),
            log_samples: Vec::new(),
            sglang_times: Vec::new(),
            trtllm: trtllm::Pending::default(),
        }
    }

    /// The place of a line or item of this file.
    pub fn place(&self, at: u64) -> Place {
        Place { file: self.file, at }
    }

    /// Notes an absolute time read from the source.
    pub fn saw_time(&mut self, ns: i64) {
        self.first_ns = Some(self.first_ns.map_or(ns, |t| t.min(ns)));
    }

    /// Validates and adds a record.
    pub fn add(&mut self, r: &RawRecord<'_>, at: u64) {
        ingest(r, self.place(at), self.b);
    }

    /// Rejects an input record that cannot be mapped, naming the field at fault and what to do.
    pub fn reject(&mut self, at: u64, problem: Problem, field: Option<&'static str>, reason: String) {
        self.b.report.records += 1;
        self.b.report.reject(Rejection {
            place: self.place(at),
            problem,
            record: None,
            field,
            reason,
        });
    }

    /// Adds a note to the load report (what the source cannot give, how it was joined, its clock).
    pub fn note(&mut self, note: String) {
        if !self.b.report.notes.contains(&note) {
            self.b.report.notes.push(note);
        }
    }
}

/// Calls `each` with every line of a JSON-lines file parsed as a JSON value; a line that is not JSON is rejected
/// with its number, naming `what` a line should be.
pub fn for_each_json_line(
    input: impl Read,
    path: &Path,
    sink: &mut Sink<'_>,
    progress: &Progress,
    what: &str,
    mut each: impl FnMut(serde_json::Value, Place, &mut Sink<'_>),
) -> Result<(), LoadError> {
    let (file, kind) = (sink.file, sink.kind);
    crate::format::jsonl::for_each_line(input, path, file, sink.b, progress, |line, place, b| {
        let mut sink = Sink::new(b, file, kind);
        match serde_json::from_slice(line) {
            Ok(v) => each(v, place, &mut sink),
            Err(e) => sink.reject(place.at, Problem::Malformed, None, format!("not {what} ({e})")),
        }
    })
}

/// A present field of the expected type.
pub fn ok<T>(v: T) -> Field<T> {
    Some(Val::Ok(v))
}

/// A present string field.
pub fn text<'a>(s: impl Into<Cow<'a, str>>) -> Field<Cow<'a, str>> {
    Some(Val::Ok(s.into()))
}

/// A record of `kind` with nothing else set.
pub fn record(kind: &'static str) -> RawRecord<'static> {
    RawRecord {
        kind: text(kind),
        ..RawRecord::default()
    }
}

/// Milliseconds (a float, as the tools write them) to whole nanoseconds, rounded; `None` when not finite.
pub fn ns_from_ms(ms: f64) -> Option<i64> {
    ns_from_secs(ms / 1e3)
}

/// Seconds (a float) to whole nanoseconds, rounded; `None` when not finite or beyond i64.
#[expect(clippy::cast_possible_truncation, reason = "checked against i64's range first")]
pub fn ns_from_secs(secs: f64) -> Option<i64> {
    let ns = (secs * 1e9).round();
    (ns.is_finite() && ns.abs() < 9.2e18).then_some(ns as i64)
}

/// A JSON integer that may come as a number or as a string (OTLP JSON writes 64-bit integers as strings).
pub fn int_of(v: &serde_json::Value) -> Option<i64> {
    match v {
        serde_json::Value::Number(n) => n.as_i64().or_else(|| n.as_u64().and_then(|u| i64::try_from(u).ok())),
        serde_json::Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A JSON number that may come as a number or a string.
pub fn float_of(v: &serde_json::Value) -> Option<f64> {
    match v {
        serde_json::Value::Number(n) => n.as_f64(),
        serde_json::Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}
