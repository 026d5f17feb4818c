//! The findings a trace too large to load can still have, in memory set by its requests and steps, not its tokens.
//!
//! The trace is read without its tokens ([`crate::format::parquet::read_files_without_tokens`]): its requests,
//! steps, stages and samples, resolved as a load resolves them, so that every row number is the load's. Its tokens
//! stay in the files and are streamed a window of row groups at a time, behind
//! [`crate::analysis::findings::TokenSource`]:
//! - a first pass keeps each request's token count and the times of its first and last token (and, for the
//!   requests preempted, their tokens' times);
//! - each detector that visits the tokens streams them again, handed over one request at a time;
//! - a last pass finds the `index` of the tokens the findings name.
//!
//! The detectors are those of [`STREAMABLE`]: the same code as on a loaded trace, so the same findings. A request's
//! tokens must be together and in `index` order (the writer's order); a file that breaks it is
//! [`StreamError::Unordered`] and must be loaded. Token rows are checked by the rules of the fields read (the
//! request, `index`, `emitted_ns`, `token_id`), as a load checks them; the format's other rules are `tokenscope
//! validate`'s.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use rustc_hash::FxHashMap;

use super::StreamError;
use crate::analysis::findings::{
    Context, Finding, Kind, RequestTokens, STREAMABLE, Thresholds, TokenSource, find_kinds_over,
};
use crate::analysis::summary::Slo;
use crate::format::parquet::read_files_without_tokens;
use crate::format::parquet::stream::{At, Columns, StreamFile, stream};
use crate::format::window::Window;
use crate::ingest::Progress;
use crate::ingest::validate::is_epoch_ns;
use crate::trace::report::{Encoding, Report, SourceFile};
use crate::trace::{Flag, Interner, NO_STR, NULL_I64, NULL_U32, StageKind, Trace, TraceBuilder};

/// The columns of a token pass, `kind` first; a pass without texts reads the first six.
const COLUMNS: [&str; 8] = [
    "kind",
    "request_id",
    "index",
    "emitted_ns",
    "iteration",
    "token_id",
    "text",
    "special",
];
const WITHOUT_TEXTS: usize = 6;

/// Not a request of the trace (an orphan, or outside the window): its tokens are not the trace's.
const NOT_KEPT: u32 = u32::MAX;

/// The findings of a streamed trace.
pub struct StreamedFindings {
    /// The trace without its tokens: the requests, steps and stages the findings name by row.
    pub trace: Trace,
    /// What reading it found to reject (its token rows are not checked here).
    pub report: Report,
    /// The findings of the [`STREAMABLE`] kinds asked for, sorted as a load's are.
    pub findings: Vec<Finding>,
    /// The request row and `index` of each token row the findings name.
    pub token_index: FxHashMap<usize, (u32, u32)>,
    /// The start of the trace, its tokens counted ([`Trace::start_ns`] of the loaded trace).
    pub start_ns: i64,
    /// Passes over the token rows.
    pub passes: u32,
    /// Token rows left out for breaking a rule of the fields read.
    pub incomplete_tokens: u64,
}

/// The findings of the kinds of `kinds` that are [`STREAMABLE`], on the Parquet `files` of one trace (those in
/// `window`), its tokens streamed.
///
/// # Errors
/// A file cannot be read ([`StreamError::Load`]); a request's tokens are not together and in `index` order
/// ([`StreamError::Unordered`]).
pub fn find(
    files: &[PathBuf],
    window: Option<&Window>,
    slo: &Slo,
    th: &Thresholds,
    kinds: &[Kind],
) -> Result<StreamedFindings, StreamError> {
    let window = window.filter(|w| !w.is_all());
    refuse_halves(files)?;
    let (trace, report) = skeleton(files, window)?;
    let streamed = Files::open(files, &trace)?;
    let findings = find_kinds_over(&trace, &streamed, slo, th, kinds);
    streamed.failed()?;
    let mut wanted: Vec<usize> = findings.iter().flat_map(|f| f.tokens.iter().copied()).collect();
    wanted.sort_unstable();
    wanted.dedup();
    let token_index = streamed.indexes_of(&wanted);
    streamed.failed()?;
    let start_ns = Context::over(&trace, &streamed, slo, th).start_ns();
    Ok(StreamedFindings {
        passes: streamed.passes.load(Ordering::Relaxed),
        incomplete_tokens: streamed.incomplete,
        trace,
        report,
        findings,
        token_index,
        start_ns,
    })
}

/// Files that hold both halves of one run (a client's recording and the server's side) are joined by a load, each
/// half on its own clock: refused here, as a load would read them.
fn refuse_halves(files: &[PathBuf]) -> Result<(), StreamError> {
    if files.len() > crate::load::MIXED_FILES {
        return Ok(());
    }
    let parquet = crate::load::Format::Native(Encoding::Parquet);
    let sides: Vec<crate::load::Side> = files.iter().map(|p| crate::load::sniff::side_of(p, parquet)).collect();
    if sides.contains(&crate::load::Side::Client) && sides.contains(&crate::load::Side::Server) {
        return Err(StreamError::Unordered(
            "the files are a client's recording and a server's side of one run: their join needs the trace loaded"
                .to_owned(),
        ));
    }
    Ok(())
}

/// The kinds that need the trace loaded: those not [`STREAMABLE`].
pub fn needing_a_load() -> Vec<Kind> {
    Kind::ALL.into_iter().filter(|k| !STREAMABLE.contains(k)).collect()
}

/// The trace of `files` without its tokens, resolved and checked as a load would.
fn skeleton(files: &[PathBuf], window: Option<&Window>) -> Result<(Trace, Report), StreamError> {
    let mut b = TraceBuilder::default();
    b.window = window.cloned();
    for p in files {
        b.report.files.push(SourceFile {
            path: p.display().to_string(),
            encoding: Encoding::Parquet,
        });
    }
    let parts: Vec<(&Path, u32)> = files
        .iter()
        .enumerate()
        .map(|(i, p)| (p.as_path(), u32::try_from(i).unwrap_or(u32::MAX)))
        .collect();
    read_files_without_tokens(&parts, &mut b, &Progress::default(), window)?;
    Ok(b.finish())
}

/// The token rows of a trace, in its files.
struct Files<'a> {
    /// The trace without its tokens.
    trace: &'a Trace,
    files: Vec<StreamFile>,
    /// Per request row: `start[r]..start[r + 1]` are its token rows in the loaded trace.
    start: Vec<usize>,
    /// Per request row: token 0's time (when its first token is token 0) and its last token's.
    ends: Vec<(Option<i64>, Option<i64>)>,
    /// Per request row: its first token's `index`, when its tokens' indexes follow one another with no gap (the
    /// `index` of each of its rows is then known without reading them again).
    gapless: Vec<Option<u32>>,
    /// The tokens' times of each request with a preempted stage, in `index` order.
    preempted: FxHashMap<u32, Vec<i64>>,
    earliest: Option<i64>,
    /// (source, iteration) to step row.
    steps: FxHashMap<(u32, i64), u32>,
    /// Token rows left out (first pass).
    incomplete: u64,
    passes: AtomicU32,
    /// The first failure of a pass: the detectors' visits cannot return one, so it is kept and said at the end.
    error: Mutex<Option<StreamError>>,
}

/// Consecutive token rows of one request in a batch, decoded.
#[derive(Default)]
struct Piece {
    request: u32,
    index: Vec<u32>,
    emitted: Vec<i64>,
    iteration: Vec<i64>,
    token_id: Vec<u32>,
    /// Each token's text as a range of `buf` (`None`: no text).
    text: Vec<Option<Range<u32>>>,
    buf: String,
    special: Vec<Flag>,
}

/// A batch's pieces, in row order.
struct Batch {
    pieces: Vec<Piece>,
    incomplete: u64,
    /// The first token out of `index` order within a piece.
    unordered: Option<String>,
}

/// One request's tokens being gathered across batches.
#[derive(Default)]
struct Open {
    request: u32,
    index: Vec<u32>,
    emitted: Vec<i64>,
    iter_row: Vec<u32>,
    token_id: Vec<u32>,
    text: Vec<u32>,
    special: Vec<Flag>,
    texts: Interner,
}

impl<'a> Files<'a> {
    /// The footers of `files`, and the first pass: each request's token rows and ends.
    fn open(files: &[PathBuf], trace: &'a Trace) -> Result<Self, StreamError> {
        let files = files
            .iter()
            .map(|p| StreamFile::open(p))
            .collect::<Result<Vec<_>, _>>()?;
        let n = trace.request_count();
        let it = &trace.iterations;
        let steps = (0..it.len())
            .map(|i| ((it.source[i], it.iteration[i]), u32::try_from(i).unwrap_or(NULL_U32)))
            .collect();
        let mut preempted: FxHashMap<u32, Vec<i64>> = FxHashMap::default();
        for s in 0..trace.stages.len() {
            if trace.stages.kind[s] == StageKind::Preempted {
                preempted.entry(trace.stages.request[s]).or_default();
            }
        }
        let mut f = Files {
            trace,
            files,
            start: Vec::new(),
            ends: vec![(None, None); n],
            gapless: vec![None; n],
            preempted,
            earliest: None,
            steps,
            incomplete: 0,
            passes: AtomicU32::new(0),
            error: Mutex::new(None),
        };
        let mut counts = vec![0usize; n];
        let mut ends = std::mem::take(&mut f.ends);
        let mut gapless = std::mem::take(&mut f.gapless);
        let mut preempted = std::mem::take(&mut f.preempted);
        let mut earliest: Option<i64> = None;
        let incomplete = f.pass(false, &mut |r, t: &Open| {
            let i = r as usize;
            counts[i] = t.index.len();
            ends[i] = (
                (t.index.first() == Some(&0)).then(|| t.emitted[0]),
                t.emitted.last().copied(),
            );
            if let (Some(&a), Some(&b)) = (t.index.first(), t.index.last())
                && (b - a) as usize + 1 == t.index.len()
            {
                gapless[i] = Some(a);
            }
            if let Some(v) = preempted.get_mut(&r) {
                v.clone_from(&t.emitted);
            }
            let lo = t.emitted.iter().copied().min();
            earliest = match (earliest, lo) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        })?;
        f.start = Vec::with_capacity(n + 1);
        let mut total = 0usize;
        f.start.push(0);
        for c in counts {
            total += c;
            f.start.push(total);
        }
        f.ends = ends;
        f.gapless = gapless;
        f.preempted = preempted;
        f.earliest = earliest;
        f.incomplete = incomplete;
        Ok(f)
    }

    /// The first failure of a visit, if any.
    fn failed(&self) -> Result<(), StreamError> {
        match self.error.lock().map(|mut e| e.take()) {
            Ok(Some(e)) => Err(e),
            Ok(None) => Ok(()),
            Err(_) => Err(StreamError::Unordered("a pass over the tokens failed".to_owned())),
        }
    }

    /// The request and `index` of each of the token rows `wanted` (sorted): from the first pass's facts for the
    /// requests whose indexes have no gap, else in one more pass.
    fn indexes_of(&self, wanted: &[usize]) -> FxHashMap<usize, (u32, u32)> {
        let mut out = FxHashMap::default();
        let mut left: Vec<usize> = Vec::new();
        for &w in wanted {
            // The request whose rows hold `w`: the last whose first row is at or before it.
            let r = self.start.partition_point(|&s| s <= w).saturating_sub(1);
            let rows = self.rows(u32::try_from(r).unwrap_or(u32::MAX));
            match self.gapless.get(r).copied().flatten() {
                Some(first) if rows.contains(&w) => {
                    let offset = u32::try_from(w - rows.start).unwrap_or(u32::MAX);
                    out.insert(w, (u32::try_from(r).unwrap_or(u32::MAX), first.saturating_add(offset)));
                }
                _ => left.push(w),
            }
        }
        if left.is_empty() {
            return out;
        }
        let wanted = &left;
        self.visit(false, &mut |rt| {
            let rows = rt.first_row..rt.first_row + rt.len();
            let from = wanted.partition_point(|&w| w < rows.start);
            for &w in wanted[from..].iter().take_while(|&&w| w < rows.end) {
                out.insert(w, (rt.request, rt.index[w - rows.start]));
            }
        });
        out
    }

    /// Streams the token rows, handing each kept request's tokens to `each` once whole (with their texts when
    /// `texts`). Returns the token rows left out for breaking a rule of the fields read.
    fn pass(&self, texts: bool, each: &mut (dyn FnMut(u32, &Open) + Send)) -> Result<u64, StreamError> {
        self.passes.fetch_add(1, Ordering::Relaxed);
        let columns = if texts { &COLUMNS[..] } else { &COLUMNS[..WITHOUT_TEXTS] };
        let paths: Vec<String> = self.files.iter().map(|f| f.path().display().to_string()).collect();
        let mut open: Option<Open> = None;
        let trace = self.trace;
        let mut done = vec![false; trace.request_count()];
        let mut incomplete = 0u64;
        // Why the files break the order a stream relies on: said as such, not as an unreadable file.
        let mut unordered: Option<String> = None;
        let wanted =
            |kind: Option<&str>, _: &parquet::file::metadata::RowGroupMetaData| matches!(kind, None | Some("token"));
        let result = stream(
            &self.files,
            columns,
            wanted,
            |c, at| decode(c, at, trace, texts),
            |batch: Batch, at: At| {
                incomplete += batch.incomplete;
                if let Some(why) = batch.unordered {
                    unordered = Some(format!("{}: {why}", paths[at.file]));
                    return Err(String::new());
                }
                for piece in batch.pieces {
                    let continues = open.as_ref().is_some_and(|o| o.request == piece.request);
                    if !continues {
                        close(&mut open, each);
                        if piece.request == NOT_KEPT {
                            continue;
                        }
                        let seen = &mut done[piece.request as usize];
                        if *seen {
                            let id = trace.request_id(piece.request);
                            unordered = Some(format!(
                                "{}: row group {} (from row {}): more tokens of request {id} after those of another \
                                 request (a request's tokens must be together, in index order)",
                                paths[at.file], at.row_group, at.first_row
                            ));
                            return Err(String::new());
                        }
                        *seen = true;
                        open = Some(Open {
                            request: piece.request,
                            ..Open::default()
                        });
                    }
                    let Some(o) = open.as_mut() else { continue };
                    if let (Some(&last), Some(&first)) = (o.index.last(), piece.index.first())
                        && first <= last
                    {
                        unordered = Some(format!(
                            "{}: row group {} (from row {}): token {first} of request {} repeats or comes after its \
                             token {last} (a request's tokens must be in index order, each once)",
                            paths[at.file],
                            at.row_group,
                            at.first_row,
                            trace.request_id(o.request)
                        ));
                        return Err(String::new());
                    }
                    self.append(o, piece);
                }
                Ok(())
            },
        );
        if let Some(why) = unordered {
            return Err(StreamError::Unordered(why));
        }
        result?;
        close(&mut open, each);
        Ok(incomplete)
    }
}

/// Hands the request being gathered, if any, to `each`.
fn close(open: &mut Option<Open>, each: &mut (dyn FnMut(u32, &Open) + Send)) {
    if let Some(t) = open.take() {
        each(t.request, &t);
    }
}

impl Files<'_> {
    /// Adds a piece to the request's tokens being gathered.
    fn append(&self, o: &mut Open, piece: Piece) {
        let source = self
            .trace
            .requests
            .source
            .get(o.request as usize)
            .copied()
            .unwrap_or(NO_STR);
        o.iter_row.extend(piece.iteration.iter().map(|&n| {
            if n == NULL_I64 {
                NULL_U32
            } else {
                self.steps.get(&(source, n)).copied().unwrap_or(NULL_U32)
            }
        }));
        o.index.extend_from_slice(&piece.index);
        o.emitted.extend_from_slice(&piece.emitted);
        o.token_id.extend_from_slice(&piece.token_id);
        o.special.extend_from_slice(&piece.special);
        for t in &piece.text {
            let id = t
                .as_ref()
                .and_then(|r| piece.buf.get(r.start as usize..r.end as usize))
                .map_or(NO_STR, |s| o.texts.intern(s));
            o.text.push(id);
        }
    }

    /// Keeps a visit's failure, the first only.
    fn fail(&self, e: StreamError) {
        if let Ok(mut slot) = self.error.lock()
            && slot.is_none()
        {
            *slot = Some(e);
        }
    }
}

/// Decodes a batch's token rows into pieces of consecutive rows of one request.
fn decode(c: &Columns, at: At, trace: &Trace, texts: bool) -> Result<Batch, String> {
    c.check_from(0, &["string", "string", "int", "int", "int", "int"])?;
    if texts {
        c.check_from(6, &["string", "boolean"])?;
    }
    let mut out = Batch {
        pieces: Vec::new(),
        incomplete: 0,
        unordered: None,
    };
    let mut id: Option<&str> = None;
    for i in 0..c.rows() {
        if c.kind(i) != Some("token") {
            continue;
        }
        // The rules a load checks of the fields read: a request, a count for `index`, epoch ns, a token id.
        let token_id = c.int(5, i);
        let (Some(rid), Some(index), Some(emitted), true) = (
            c.str(1, i),
            c.int(2, i)
                .and_then(|n| u32::try_from(n).ok())
                .filter(|&n| n < NULL_U32),
            c.int(3, i).filter(|&t| is_epoch_ns(t)),
            token_id.is_none_or(|n| (0..i64::from(NULL_U32)).contains(&n)),
        ) else {
            out.incomplete += 1;
            continue;
        };
        if id != Some(rid) || out.pieces.is_empty() {
            id = Some(rid);
            out.pieces.push(Piece {
                request: trace.request_row(rid).unwrap_or(NOT_KEPT),
                ..Piece::default()
            });
        }
        let Some(p) = out.pieces.last_mut() else { continue };
        if p.request == NOT_KEPT {
            continue;
        }
        if let Some(&last) = p.index.last()
            && index <= last
        {
            out.unordered = Some(format!(
                "row {}: token {index} of request {rid} repeats or comes after its token {last} (a request's tokens \
                 must be in index order, each once)",
                at.first_row + i as u64
            ));
            return Ok(out);
        }
        p.index.push(index);
        p.emitted.push(emitted);
        p.iteration.push(c.int(4, i).unwrap_or(NULL_I64));
        p.token_id
            .push(token_id.and_then(|n| u32::try_from(n).ok()).unwrap_or(NULL_U32));
        if texts {
            let text = c.str(6, i).map(|s| {
                let from = u32::try_from(p.buf.len()).unwrap_or(u32::MAX);
                p.buf.push_str(s);
                from..u32::try_from(p.buf.len()).unwrap_or(u32::MAX)
            });
            p.text.push(text);
            p.special.push(Flag::from_opt(c.flag(7, i)));
        }
    }
    Ok(out)
}

impl TokenSource for Files<'_> {
    fn rows(&self, r: u32) -> Range<usize> {
        let i = r as usize;
        match (self.start.get(i), self.start.get(i + 1)) {
            (Some(&a), Some(&b)) => a..b,
            _ => 0..0,
        }
    }

    fn ends(&self, r: u32) -> (Option<i64>, Option<i64>) {
        self.ends.get(r as usize).copied().unwrap_or((None, None))
    }

    fn emitted_before(&self, r: u32, at: i64) -> u64 {
        self.preempted
            .get(&r)
            .map_or(0, |v| v.partition_point(|&e| e < at) as u64)
    }

    fn earliest(&self) -> Option<i64> {
        self.earliest
    }

    fn visit(&self, texts: bool, each: &mut (dyn FnMut(RequestTokens<'_>) + Send)) {
        if self.error.lock().is_ok_and(|e| e.is_some()) {
            return;
        }
        let result = self.pass(texts, &mut |r, t: &Open| {
            each(RequestTokens {
                request: r,
                first_row: self.rows(r).start,
                index: &t.index,
                emitted_ns: &t.emitted,
                iter_row: &t.iter_row,
                token_id: if texts { &t.token_id } else { &[] },
                text: &t.text,
                special: &t.special,
                texts: &t.texts,
            });
        });
        if let Err(e) = result {
            self.fail(e);
        }
    }
}
