//! JSON lines: one record per line, plain or compressed (`.jsonl.gz`, `.jsonl.zst`, recognised by their magic
//! bytes too). A line that is not a JSON object is rejected with its line number and the parser's words; reading
//! goes on with the next line.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::Path;

use super::records::for_each_record;
use crate::ingest::raw::{Field, RawCandidate, RawRecord, Val};
use crate::ingest::validate::ingest;
use crate::ingest::{LoadError, Progress};
use crate::trace::report::{Place, Problem, Rejection};
use crate::trace::{Trace, TraceBuilder};

/// Compression of a JSONL file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// Plain text.
    None,
    /// gzip.
    Gzip,
    /// Zstandard.
    Zstd,
}

impl Compression {
    /// The compression a path's extension asks for.
    pub fn from_path(path: &Path) -> Self {
        match path.extension().and_then(|e| e.to_str()) {
            Some("gz") => Compression::Gzip,
            Some("zst" | "zstd") => Compression::Zstd,
            _ => Compression::None,
        }
    }

    /// The compression of a stream, from its first bytes.
    pub fn sniff(head: &[u8]) -> Self {
        match head {
            [0x1f, 0x8b, ..] => Compression::Gzip,
            [0x28, 0xb5, 0x2f, 0xfd, ..] => Compression::Zstd,
            _ => Compression::None,
        }
    }
}

/// Counts the bytes read from the file, for the progress bar.
struct Counting<'p, R> {
    inner: R,
    progress: &'p Progress,
}

impl<R: Read> Read for Counting<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.progress.add_done(n as u64);
        Ok(n)
    }
}

fn io_error(path: &Path, source: io::Error) -> LoadError {
    LoadError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Reads one JSONL file into the builder. Fatal only when the file cannot be opened.
pub fn read(path: &Path, file: u32, b: &mut TraceBuilder, progress: &Progress) -> Result<(), LoadError> {
    let f = File::open(path).map_err(|e| io_error(path, e))?;
    read_from(f, path, file, b, progress)
}

/// The longest line read as a record, bytes. A token with 100,000 candidates takes about 10 MB; a longer line is
/// no trace record, and is skipped to its end without being held (a 1 GB line would otherwise be read whole).
pub const MAX_LINE_BYTES: usize = 64 << 20;

/// How a line was read by [`read_line_capped`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Line {
    /// No more text.
    End,
    /// A line, appended to the buffer.
    Whole,
    /// A line longer than the cap, of this many bytes, skipped: nothing appended.
    TooLong(u64),
}

/// Appends the next line (with its `\n`) to `buf`, unless it is longer than `max` bytes: then reads it to its end
/// without holding it.
fn read_line_capped(reader: &mut dyn BufRead, buf: &mut Vec<u8>, max: usize) -> io::Result<Line> {
    let start = buf.len();
    let mut skipped: Option<u64> = None;
    loop {
        let available = match reader.fill_buf() {
            Ok(b) => b,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if available.is_empty() {
            return Ok(match skipped {
                Some(n) => Line::TooLong(n),
                None if buf.len() == start => Line::End,
                None => Line::Whole,
            });
        }
        let (n, ends) = match memchr::memchr(b'\n', available) {
            Some(i) => (i + 1, true),
            None => (available.len(), false),
        };
        match &mut skipped {
            Some(total) => *total += n as u64,
            None if buf.len() - start + n > max => {
                skipped = Some((buf.len() - start + n) as u64);
                buf.truncate(start);
            }
            None => buf.extend_from_slice(&available[..n]),
        }
        reader.consume(n);
        if ends {
            return Ok(skipped.map_or(Line::Whole, Line::TooLong));
        }
    }
}

/// The rejection of a line longer than `max` bytes.
fn too_long(place: Place, bytes: u64, max: usize) -> Rejection {
    Rejection {
        place,
        problem: Problem::Malformed,
        record: None,
        field: None,
        reason: format!(
            "a line of {bytes} bytes, over the {max} a record may take: skipped without being read into memory \
             (a record this long is not a trace record; is the file one JSON document rather than JSON lines?)"
        ),
    }
}

/// Bytes of whole lines parsed by one task: large enough that a task outweighs its merge, small enough that a window
/// of them stays a few tens of MB.
const CHUNK_BYTES: usize = 2 << 20;

/// Reads JSONL (plain or compressed) from any reader; `path` names it in messages. The text is cut into chunks of
/// whole lines as it is read (and decompressed, on this thread); the chunks are parsed and validated on all cores,
/// each into a builder of its own, and merged in file order, so the result is the one reading line by line gives,
/// duplicates and rejections included.
pub fn read_from(
    input: impl Read + Send,
    path: &Path,
    file: u32,
    b: &mut TraceBuilder,
    progress: &Progress,
) -> Result<(), LoadError> {
    read_chunked(input, path, file, b, progress, CHUNK_BYTES)
}

/// One line: what it holds goes into the builder, or is rejected with its place.
fn read_line(text: &[u8], place: Place, b: &mut TraceBuilder) {
    if text[0] != b'{' {
        b.report.records += 1;
        b.report.reject(Rejection {
            place,
            problem: Problem::Malformed,
            record: None,
            field: None,
            reason: "not a JSON object; each line must be one {\"kind\": ...} object".to_owned(),
        });
        return;
    }
    match serde_json::from_slice::<RawRecord<'_>>(text) {
        Ok(record) => ingest(&record, place, b),
        Err(e) => {
            b.report.records += 1;
            b.report.reject(malformed(text, &e, place));
        }
    }
}

/// Whole lines read in one piece, and the number of the first.
struct Chunk {
    first_line: u64,
    text: Vec<u8>,
}

impl Chunk {
    /// Parses its lines into a builder of its own.
    fn parse(&self, file: u32, progress: &Progress) -> Result<TraceBuilder, LoadError> {
        let mut b = TraceBuilder::default();
        let mut line_no = self.first_line;
        // Line ends found with memchr: a byte-by-byte split costs a twentieth of the parse.
        let ends = memchr::memchr_iter(b'\n', &self.text).chain(std::iter::once(self.text.len()));
        let lines = ends.scan(0usize, |start, end| {
            let line = &self.text[*start..end];
            *start = end + 1;
            Some(line)
        });
        for (k, line) in lines.enumerate() {
            if k > 0 {
                line_no += 1;
            }
            if k % 4096 == 4095 && progress.is_cancelled() {
                return Err(LoadError::Cancelled);
            }
            let text = line.trim_ascii();
            // A byte-order mark some editors put at the start of a UTF-8 file is not part of the first record.
            let text = if line_no == 1 {
                text.strip_prefix(b"\xef\xbb\xbf".as_slice()).unwrap_or(text)
            } else {
                text
            };
            if !text.is_empty() {
                read_line(text, Place { file, at: line_no }, &mut b);
            }
        }
        Ok(b)
    }
}

/// [`read_from`] with chunks of about `chunk_bytes` (tests make them tiny to cut the text everywhere).
pub fn read_chunked(
    input: impl Read + Send,
    path: &Path,
    file: u32,
    b: &mut TraceBuilder,
    progress: &Progress,
    chunk_bytes: usize,
) -> Result<(), LoadError> {
    read_capped(input, path, file, b, progress, chunk_bytes, MAX_LINE_BYTES)
}

/// [`read_chunked`] with lines longer than `max_line` bytes skipped and rejected (tests make it small).
fn read_capped(
    input: impl Read + Send,
    path: &Path,
    file: u32,
    b: &mut TraceBuilder,
    progress: &Progress,
    chunk_bytes: usize,
    max_line: usize,
) -> Result<(), LoadError> {
    use rayon::prelude::*;
    let mut reader = open_lines(input, path, progress)?;
    let window = 16 * rayon::current_num_threads() + 2;
    let mut next_line: u64 = 1;
    let mut broken: Option<Rejection> = None;
    let mut long_lines: Vec<Rejection> = Vec::new();
    let mut pending: Vec<Result<TraceBuilder, LoadError>> = Vec::new();
    // Reads a window of chunks of whole lines.
    let mut read_window = || -> Result<Vec<Chunk>, LoadError> {
        let mut chunks: Vec<Chunk> = Vec::new();
        while broken.is_none() && chunks.len() < window {
            if progress.is_cancelled() {
                return Err(LoadError::Cancelled);
            }
            let mut text = Vec::with_capacity(chunk_bytes.min(CHUNK_BYTES).saturating_add(4096));
            let first_line = next_line;
            while text.len() < chunk_bytes {
                match read_line_capped(&mut reader, &mut text, max_line) {
                    Ok(Line::End) => break,
                    Ok(Line::Whole) => next_line += 1,
                    Ok(Line::TooLong(bytes)) => {
                        long_lines.push(too_long(Place { file, at: next_line }, bytes, max_line));
                        // An empty line in its place keeps the lines after it numbered right.
                        text.push(b'\n');
                        next_line += 1;
                    }
                    Err(e) => {
                        // A truncated or corrupt compressed stream: keep what was read, report where it broke.
                        let read = next_line - 1;
                        broken = Some(Rejection {
                            place: Place { file, at: next_line },
                            problem: Problem::Malformed,
                            record: None,
                            field: None,
                            reason: format!("the file cannot be read past line {read}: {e} (truncated or corrupt?)"),
                        });
                        // A partial line is not a record.
                        if let Some(end) = text.iter().rposition(|&c| c == b'\n') {
                            text.truncate(end + 1);
                        } else {
                            text.clear();
                        }
                        break;
                    }
                }
            }
            if text.is_empty() {
                break;
            }
            if text.last() == Some(&b'\n') {
                text.pop();
            }
            chunks.push(Chunk { first_line, text });
        }
        Ok(chunks)
    };
    // A pipeline: while the cores parse one window of chunks, this thread merges the window before it and reads
    // the window after it.
    let mut chunks = read_window()?;
    loop {
        let done = chunks.is_empty();
        let previous = std::mem::take(&mut pending);
        let (merged_and_read, parsed) = rayon::join(
            || -> Result<Vec<Chunk>, LoadError> {
                for part in previous {
                    b.merge(part?);
                    progress.maybe_preview(b);
                }
                if done { Ok(Vec::new()) } else { read_window() }
            },
            || -> Vec<Result<TraceBuilder, LoadError>> { chunks.par_iter().map(|c| c.parse(file, progress)).collect() },
        );
        pending = parsed;
        chunks = merged_and_read?;
        if done {
            break;
        }
    }
    for part in pending {
        b.merge(part?);
    }
    for rejection in long_lines.into_iter().chain(broken) {
        b.report.records += 1;
        b.report.reject(rejection);
    }
    Ok(())
}

/// The text of a file, decompressed when its first bytes say gzip or zstd, counted into `progress` as read; it
/// can go to another thread when the file can. One per file: its size does not matter.
#[expect(clippy::large_enum_variant, reason = "one per file: its size does not matter")]
enum Lines<'a, R: Read> {
    Plain(BufReader<Counting<'a, R>>),
    Gzip(BufReader<flate2::bufread::MultiGzDecoder<BufReader<Counting<'a, R>>>>),
    Zstd(BufReader<zstd::stream::read::Decoder<'static, BufReader<Counting<'a, R>>>>),
}

impl<R: Read> Read for Lines<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Lines::Plain(r) => r.read(buf),
            Lines::Gzip(r) => r.read(buf),
            Lines::Zstd(r) => r.read(buf),
        }
    }
}

impl<R: Read> BufRead for Lines<'_, R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        match self {
            Lines::Plain(r) => r.fill_buf(),
            Lines::Gzip(r) => r.fill_buf(),
            Lines::Zstd(r) => r.fill_buf(),
        }
    }

    fn consume(&mut self, n: usize) {
        match self {
            Lines::Plain(r) => r.consume(n),
            Lines::Gzip(r) => r.consume(n),
            Lines::Zstd(r) => r.consume(n),
        }
    }
}

/// Opens the text of a file, telling gzip and zstd by its first bytes.
fn open_lines<'a, R: Read>(input: R, path: &Path, progress: &'a Progress) -> Result<Lines<'a, R>, LoadError> {
    let mut raw = BufReader::with_capacity(1 << 20, Counting { inner: input, progress });
    let head = raw.fill_buf().map_err(|e| io_error(path, e))?;
    Ok(match Compression::sniff(head) {
        Compression::None => Lines::Plain(raw),
        Compression::Gzip => Lines::Gzip(BufReader::with_capacity(
            1 << 20,
            flate2::bufread::MultiGzDecoder::new(raw),
        )),
        Compression::Zstd => {
            let dec = zstd::stream::read::Decoder::with_buffer(raw).map_err(|e| io_error(path, e))?;
            Lines::Zstd(BufReader::with_capacity(1 << 20, dec))
        }
    })
}

/// Calls `each` with every non-blank line of a text file (plain, gzip or zstd, told by its first bytes), trimmed,
/// and its place (1-based line). Stops with [`LoadError::Cancelled`] when asked; a stream that breaks (truncated,
/// corrupt) keeps what was read and is reported at the line where it broke. Shared by every line-based reader.
pub fn for_each_line(
    input: impl Read,
    path: &Path,
    file: u32,
    b: &mut TraceBuilder,
    progress: &Progress,
    mut each: impl FnMut(&[u8], Place, &mut TraceBuilder),
) -> Result<(), LoadError> {
    let mut reader = open_lines(input, path, progress)?;
    let mut line = Vec::with_capacity(4096);
    let mut line_no: u64 = 0;
    loop {
        if line_no.is_multiple_of(4096) && progress.is_cancelled() {
            return Err(LoadError::Cancelled);
        }
        line.clear();
        match read_line_capped(&mut reader, &mut line, MAX_LINE_BYTES) {
            Ok(Line::End) => break,
            Ok(Line::Whole) => {}
            Ok(Line::TooLong(bytes)) => {
                line_no += 1;
                b.report.records += 1;
                b.report
                    .reject(too_long(Place { file, at: line_no }, bytes, MAX_LINE_BYTES));
                continue;
            }
            Err(e) => {
                // A truncated or corrupt compressed stream: keep what was read, report where it broke.
                b.report.records += 1;
                b.report.reject(Rejection {
                    place: Place { file, at: line_no + 1 },
                    problem: Problem::Malformed,
                    record: None,
                    field: None,
                    reason: format!("the file cannot be read past line {line_no}: {e} (truncated or corrupt?)"),
                });
                break;
            }
        }
        line_no += 1;
        let text = line.trim_ascii();
        // A byte-order mark some editors put at the start of a UTF-8 file is not part of the first record.
        let text = if line_no == 1 {
            text.strip_prefix(b"\xef\xbb\xbf".as_slice()).unwrap_or(text)
        } else {
            text
        };
        if text.is_empty() {
            continue;
        }
        each(text, Place { file, at: line_no }, b);
    }
    Ok(())
}

/// The rejection of a line serde could not read: re-parses it to name the path of the bad field.
fn malformed(text: &[u8], e: &serde_json::Error, place: Place) -> Rejection {
    let mut de = serde_json::Deserializer::from_slice(text);
    let located = serde_path_to_error::deserialize::<_, RawRecord<'_>>(&mut de).err();
    let path = located
        .as_ref()
        .map(|l| l.path().to_string())
        .filter(|p| p != "." && !p.is_empty());
    let reason = match (&path, e.classify()) {
        (_, serde_json::error::Category::Syntax | serde_json::error::Category::Eof) => {
            format!("not valid JSON ({e}); each line must be one JSON object")
        }
        (Some(p), _) => {
            let inner = located.map_or_else(|| e.to_string(), |l| l.inner().to_string());
            format!(
                "field {p}: {}",
                inner.replace("struct RawCandidate", "a {token_id, text, logprob, special} object")
            )
        }
        (None, _) => {
            format!("not a record ({e}); each line must be one JSON object with a \"kind\"")
        }
    };
    let field = path.and_then(|p| {
        let top = p.split(['.', '[']).next().unwrap_or_default().to_owned();
        super::schema::SCALAR_FIELDS
            .iter()
            .map(|f| f.0)
            .chain([super::schema::CANDIDATES, super::schema::EOS_TOKEN_IDS])
            .find(|&name| name == top)
    });
    Rejection {
        place,
        problem: Problem::Malformed,
        record: None,
        field,
        reason,
    }
}

fn write_str(w: &mut impl Write, s: &str) -> io::Result<()> {
    serde_json::to_writer(w, s).map_err(io::Error::other)
}

fn write_f64(w: &mut impl Write, v: f64) -> io::Result<()> {
    serde_json::to_writer(w, &v).map_err(io::Error::other)
}

trait JsonValue {
    fn write_json(&self, w: &mut impl Write) -> io::Result<()>;
}

impl JsonValue for std::borrow::Cow<'_, str> {
    fn write_json(&self, w: &mut impl Write) -> io::Result<()> {
        write_str(w, self)
    }
}
impl JsonValue for i64 {
    fn write_json(&self, w: &mut impl Write) -> io::Result<()> {
        write!(w, "{self}")
    }
}
impl JsonValue for f64 {
    fn write_json(&self, w: &mut impl Write) -> io::Result<()> {
        write_f64(w, *self)
    }
}
impl JsonValue for bool {
    fn write_json(&self, w: &mut impl Write) -> io::Result<()> {
        w.write_all(if *self { b"true" } else { b"false" })
    }
}

/// Writes `,"name":value` when the field holds a value (the first field has no comma).
#[expect(clippy::ref_option, reason = "a record's field, written as the record holds it")]
fn write_field<T: JsonValue>(w: &mut impl Write, first: &mut bool, name: &str, v: &Field<T>) -> io::Result<()> {
    if let Some(Val::Ok(v)) = v {
        w.write_all(if *first { b"\"" } else { b",\"" })?;
        *first = false;
        w.write_all(name.as_bytes())?;
        w.write_all(b"\":")?;
        v.write_json(w)?;
    }
    Ok(())
}

fn write_candidates(w: &mut impl Write, list: &[RawCandidate<'_>]) -> io::Result<()> {
    w.write_all(b",\"candidates\":[")?;
    for (i, c) in list.iter().enumerate() {
        w.write_all(if i == 0 { b"{" } else { b",{" })?;
        let mut first = true;
        write_field(w, &mut first, "token_id", &c.token_id)?;
        write_field(w, &mut first, "text", &c.text)?;
        write_field(w, &mut first, "logprob", &c.logprob)?;
        write_field(w, &mut first, "special", &c.special)?;
        w.write_all(b"}")?;
    }
    w.write_all(b"]")
}

/// Writes one record as a JSON line.
pub fn write_record(w: &mut impl Write, r: &RawRecord<'_>) -> io::Result<()> {
    w.write_all(b"{")?;
    let mut first = true;
    macro_rules! write_fields {
        ($(($name:ident, $ty:ident)),* $(,)?) => {
            $( write_field(w, &mut first, stringify!($name), &r.$name)?; )*
        };
    }
    crate::scalar_fields!(write_fields);
    if let Some(Val::Ok(ids)) = &r.eos_token_ids {
        w.write_all(b",\"eos_token_ids\":[")?;
        for (i, id) in ids.iter().enumerate() {
            if let Val::Ok(id) = id {
                if i > 0 {
                    w.write_all(b",")?;
                }
                write!(w, "{id}")?;
            }
        }
        w.write_all(b"]")?;
    }
    if let Some(Val::Ok(list)) = &r.candidates {
        write_candidates(w, list)?;
    }
    w.write_all(b"}\n")
}

/// Writes a trace as JSONL, compressed when the path ends in `.gz` or `.zst`.
pub fn write(trace: &Trace, path: &Path) -> io::Result<()> {
    let file = BufWriter::with_capacity(1 << 20, File::create(path)?);
    match Compression::from_path(path) {
        Compression::None => write_to(trace, file)?.flush(),
        Compression::Gzip => {
            let enc = flate2::write::GzEncoder::new(file, flate2::Compression::default());
            write_to(trace, enc)?.finish()?.flush()
        }
        Compression::Zstd => {
            let enc = zstd::stream::write::Encoder::new(file, 3)?;
            write_to(trace, enc)?.finish()?.flush()
        }
    }
}

fn write_to<W: Write>(trace: &Trace, w: W) -> io::Result<W> {
    let mut w = BufWriter::with_capacity(1 << 20, w);
    for_each_record(trace, |r| write_record(&mut w, r))?;
    w.into_inner().map_err(io::IntoInnerError::into_error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::report::Report;

    /// A file with what a reader must keep in order: a byte-order mark, blank lines, a duplicate request (the first
    /// wins), lines that are not objects or not JSON, tokens before and after, CRLF endings.
    const TEXT: &str = "\u{feff}{\"kind\":\"meta\",\"format\":\"tokenscope\",\"version\":1}\n\
        {\"kind\":\"request\",\"request_id\":\"a\",\"arrival_ns\":1764403200000001000,\"output_tokens\":2}\n\
        \n\
        [1, 2]\n\
        {\"kind\":\"token\",\"request_id\":\"a\",\"index\":0,\"emitted_ns\":1764403200000002000}\r\n\
        {\"kind\":\"request\",\"request_id\":\"a\",\"arrival_ns\":1764403200000005000}\n\
        {\"kind\":\"request\",\"request_id\":\"b\",\"arrival_ns\":1764403200000001500,\n\
        {\"kind\":\"request\",\"request_id\":\"b\",\"arrival_ns\":1764403200000001500}\n\
        {\"kind\":\"token\",\"request_id\":\"a\",\"index\":1,\"emitted_ns\":1764403200000003000}\n\
        {\"kind\":\"token\",\"request_id\":\"b\",\"index\":0,\"emitted_ns\":\"soon\"}\n\
        \n";

    /// Reads `text` in chunks of `chunk_bytes`: the trace written back as JSONL, the report, the trace.
    fn read_text(text: &str, chunk_bytes: usize) -> (String, Report, Trace) {
        let mut b = TraceBuilder::default();
        read_chunked(
            text.as_bytes(),
            Path::new("t.jsonl"),
            0,
            &mut b,
            &Progress::default(),
            chunk_bytes,
        )
        .unwrap();
        let (trace, report) = b.finish();
        let written = write_to(&trace, Vec::new()).unwrap();
        (String::from_utf8(written).unwrap(), report, trace)
    }

    #[test]
    fn a_line_over_the_cap_is_skipped_unheld_and_the_lines_after_keep_their_numbers() {
        // Line 2 is 5,000 bytes against a cap of 1,000; lines 1 and 3 are records.
        let long = format!("{{\"kind\":\"request\",\"request_id\":\"{}\"}}", "x".repeat(4_970));
        let text = format!(
            "{{\"kind\":\"request\",\"request_id\":\"a\",\"arrival_ns\":1764403200000001000}}\n{long}\n\
             {{\"kind\":\"request\",\"request_id\":\"c\",\"arrival_ns\":1764403200000002000}}\n"
        );
        for chunk in [1, 64, 1 << 20] {
            let mut b = TraceBuilder::default();
            let p = Progress::default();
            read_capped(text.as_bytes(), Path::new("t.jsonl"), 0, &mut b, &p, chunk, 1_000).unwrap();
            let (trace, report) = b.finish();
            assert_eq!(trace.request_count(), 2, "chunks of {chunk} bytes");
            assert_eq!(report.records, 3);
            assert_eq!(report.rejected.len(), 1);
            let r = &report.rejected[0];
            assert_eq!(r.place.at, 2);
            assert!(
                r.reason
                    .starts_with(&format!("a line of {} bytes, over the 1000", long.len() + 1)),
                "{}",
                r.reason
            );
        }
        // Read whole under the real cap.
        let mut b = TraceBuilder::default();
        read_chunked(
            text.as_bytes(),
            Path::new("t.jsonl"),
            0,
            &mut b,
            &Progress::default(),
            1 << 20,
        )
        .unwrap();
        assert_eq!(
            b.finish().0.request_count(),
            2,
            "the long line has no arrival: rejected by the validator"
        );
    }

    #[test]
    fn tokens_candidates_and_stages_merged_from_chunks_are_those_of_one_reading() {
        // Token texts and candidate texts interned apart in each chunk's builder; a token before its request, tokens
        // out of order, a repeated index (the first kept), a token and a stage of an unknown request.
        let t = |ms: u64| 1_764_403_200_000_000_000 + ms * 1_000_000;
        let lines = [
            format!(
                r#"{{"kind":"token","request_id":"b","index":1,"emitted_ns":{},"text":"y","candidates":[{{"token_id":3,"text":"z","logprob":-0.1}},{{"token_id":4,"text":"y","logprob":-2.0}}]}}"#,
                t(9)
            ),
            format!(r#"{{"kind":"request","request_id":"a","arrival_ns":{}}}"#, t(1)),
            format!(
                r#"{{"kind":"token","request_id":"a","index":1,"emitted_ns":{},"text":"x"}}"#,
                t(4)
            ),
            format!(
                r#"{{"kind":"token","request_id":"a","index":0,"emitted_ns":{},"text":"y","candidates":[{{"token_id":1,"text":"w","logprob":-0.5}}]}}"#,
                t(3)
            ),
            format!(
                r#"{{"kind":"token","request_id":"ghost","index":0,"emitted_ns":{}}}"#,
                t(3)
            ),
            format!(r#"{{"kind":"request","request_id":"b","arrival_ns":{}}}"#, t(2)),
            format!(
                r#"{{"kind":"token","request_id":"a","index":1,"emitted_ns":{},"text":"again"}}"#,
                t(5)
            ),
            format!(
                r#"{{"kind":"stage","request_id":"b","stage":"prefill","start_ns":{},"end_ns":{}}}"#,
                t(2),
                t(8)
            ),
            format!(
                r#"{{"kind":"stage","request_id":"ghost","stage":"prefill","start_ns":{},"end_ns":{}}}"#,
                t(2),
                t(8)
            ),
            format!(
                r#"{{"kind":"token","request_id":"b","index":0,"emitted_ns":{},"text":"w"}}"#,
                t(8)
            ),
        ];
        let text = lines.join("\n");
        let read = |chunk_bytes: usize| read_text(&text, chunk_bytes);
        let (whole, report, trace) = read(usize::MAX);
        assert_eq!(trace.token_count(), 4);
        let a = trace.request_row("a").unwrap();
        let texts: Vec<&str> = trace
            .tokens_of(a)
            .filter_map(|k| trace.texts.get(trace.tokens.text[k]))
            .collect();
        assert_eq!(texts, ["y", "x"], "a's tokens by index, the repeated index 1 left out");
        let kinds: Vec<(u64, &str)> = report.rejected.iter().map(|r| (r.place.at, r.problem.name())).collect();
        assert_eq!(
            kinds,
            [(5, "unknown_request"), (7, "duplicate"), (9, "unknown_request")]
        );
        for size in [1, 40, 150, 400] {
            let (cut, cut_report, _) = read(size);
            assert_eq!(cut, whole, "chunks of {size} bytes");
            assert_eq!(cut_report.rejected, report.rejected, "chunks of {size} bytes");
        }
    }

    #[test]
    fn chunks_parsed_apart_give_what_one_reading_gives() {
        let (whole, report, _) = read_text(TEXT, usize::MAX);
        // 2 requests, 3 tokens kept; the duplicate of a, the array, the broken line and the bad time rejected, at
        // their lines (1-based, blank lines counted).
        assert!(whole.contains("\"request_id\":\"b\""), "{whole}");
        let lines: Vec<u64> = report.rejected.iter().map(|r| r.place.at).collect();
        assert_eq!(lines, [4, 6, 7, 10]);
        // A chunk a line, and chunks of a few lines: the same trace, the same rejections.
        for size in [1, 100, 300] {
            let (cut, cut_report, _) = read_text(TEXT, size);
            assert_eq!(cut, whole, "chunks of {size} bytes");
            assert_eq!(cut_report.rejected, report.rejected, "chunks of {size} bytes");
            assert_eq!(cut_report.records, report.records);
        }
    }
}
