//! The findings a trace too large to load can still have, in memory set by its requests and steps, not its tokens.
//!
//! The trace is read without its tokens ([`crate::format::parquet::read_files_without_tokens`]): its requests,
//! steps, stages and samples, resolved as a load resolves them, so that every row number is the load's. Its tokens
//! stay in the files and are streamed a window of row groups at a time, behind
//! [`crate::analysis::findings::TokenSource`], in one pass that hands each request's tokens, whole, to every
//! detector that reads them and learns, at the same time, what the others need of them: each request's token count,
//! the times of its first and last token, where its tokens are, and (for the requests preempted) their times. The
//! few tokens the findings name are then read again, alone (the stop tokens' logprob, rank and candidates). Chronic
//! interference alone reads the tokens of its episodes' instances once more, when it found one.
//!
//! The detectors are those of [`STREAMABLE`]: the same code as on a loaded trace, so the same findings. A request's
//! tokens must be together and in `index` order (the writer's order); a file that breaks it is
//! [`StreamError::Unordered`] and must be loaded. Token rows are checked by the rules of the fields read (the
//! request, `index`, `emitted_ns`, `iteration`, `token_id`), as a load checks them; the format's other rules are
//! `tokenscope validate`'s.

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};

use rayon::prelude::*;
use rustc_hash::FxHashMap;

use super::StreamError;
use super::pieces::{Batch, COLUMNS, NOT_KEPT, Piece, TYPES, WITHOUT_TEXTS, decode};
use super::step_rows::StepRows;
use crate::analysis::findings::{
    Context, Finding, Kind, RequestTokens, STREAMABLE, Texts, Thresholds, TokenChoice, TokenSource, Visitor,
    find_kinds_over,
};
use crate::analysis::summary::Slo;
use crate::format::parquet::CandidateReader;
use crate::format::parquet::read_files_without_tokens;
use crate::format::parquet::stream::{At, StreamFile, stream};
use crate::format::window::Window;
use crate::ingest::Progress;
use crate::trace::report::{Encoding, Report, SourceFile};
use crate::trace::{Flag, NO_STR, NULL_U32, StageKind, Trace, TraceBuilder};

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
    find_reporting(files, window, slo, th, kinds, &Progress::default())
}

/// [`find`], reported to `progress` and cancelled by it: the reading of the requests and steps (the app draws them as
/// they come), then each pass over the tokens (a stage of its own).
///
/// # Errors
/// As [`find`].
pub fn find_reporting(
    files: &[PathBuf],
    window: Option<&Window>,
    slo: &Slo,
    th: &Thresholds,
    kinds: &[Kind],
    progress: &Progress,
) -> Result<StreamedFindings, StreamError> {
    let window = window.filter(|w| !w.is_all());
    refuse_halves(files)?;
    let (trace, report) = skeleton(files, window, progress)?;
    if !trace.references.is_empty() && kinds.iter().any(|k| !STREAMABLE.contains(k)) {
        return Err(StreamError::Unordered(
            "a re-scored run's verdicts (off-distribution, sampling-accident) are judged on the trace loaded"
                .to_owned(),
        ));
    }
    let streamed = Files::open(files, &trace, progress)?;
    let findings = find_kinds_over(&trace, &streamed, slo, th, kinds);
    streamed.failed()?;
    let mut wanted: Vec<usize> = findings.iter().flat_map(|f| f.tokens.iter().copied()).collect();
    wanted.sort_unstable();
    wanted.dedup();
    let token_index = streamed.indexes_of(&wanted);
    let start_ns = Context::over(&trace, &streamed, slo, th).start_ns();
    Ok(StreamedFindings {
        passes: streamed.passes.load(Ordering::Relaxed),
        incomplete_tokens: streamed.facts.get().map_or(0, |f| f.incomplete),
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
fn skeleton(files: &[PathBuf], window: Option<&Window>, progress: &Progress) -> Result<(Trace, Report), StreamError> {
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
    read_files_without_tokens(&parts, &mut b, progress, window)?;
    Ok(b.finish())
}

/// The token rows of a trace, in its files.
struct Files<'a> {
    /// The trace without its tokens.
    trace: &'a Trace,
    /// Told of each pass's rows as they are read; a pass stops when it is cancelled.
    progress: &'a Progress,
    paths: Vec<PathBuf>,
    files: Vec<StreamFile>,
    /// (source, iteration) to step row.
    steps: StepRows,
    /// What the first pass learnt of each request's tokens.
    facts: OnceLock<Facts>,
    passes: AtomicU32,
    /// The reader of the tokens' choices, opened by the first read of them.
    choices: OnceLock<CandidateReader>,
    /// The first failure of a pass: the detectors' visits cannot return one, so it is kept and said at the end.
    error: Mutex<Option<StreamError>>,
}

/// Where a request's tokens are in the files: (file, row) of its first token and of its last (a request may go on
/// into the next file).
type Where = ((u32, u64), (u32, u64));

/// What the first pass learns of each request's tokens, for what the detectors ask once it is over.
#[derive(Default)]
struct Facts {
    /// Per request row: `start[r]..start[r + 1]` are its token rows in the loaded trace.
    start: Vec<usize>,
    /// Per request row: token 0's time (when its first token is token 0) and its last token's.
    ends: Vec<(Option<i64>, Option<i64>)>,
    /// Per request row: its first token's `index`, when its tokens' indexes follow one another with no gap (the
    /// `index` of each of its rows is then known without keeping them).
    gapless: Vec<Option<u32>>,
    /// The requests whose indexes have gaps: where each run of consecutive indexes starts (its place among the
    /// request's tokens, its first `index`); memory set by the gaps, not the tokens.
    gappy: FxHashMap<u32, Vec<(u32, u32)>>,
    /// Per request row: where its tokens are (the file and row of its first token, and of its last).
    at: Vec<Option<Where>>,
    /// The tokens' times of each request with a preempted stage, in `index` order.
    preempted: FxHashMap<u32, Vec<i64>>,
    earliest: Option<i64>,
    /// Token rows left out for breaking a rule of the fields read.
    incomplete: u64,
}

impl Facts {
    /// Before the pass: room for `n` requests, and the requests preempted.
    fn new(trace: &Trace) -> Self {
        let n = trace.request_count();
        let mut preempted: FxHashMap<u32, Vec<i64>> = FxHashMap::default();
        for s in 0..trace.stages.len() {
            if trace.stages.kind[s] == StageKind::Preempted {
                preempted.entry(trace.stages.request[s]).or_default();
            }
        }
        Facts {
            start: vec![0; n],
            ends: vec![(None, None); n],
            gapless: vec![None; n],
            at: vec![None; n],
            preempted,
            ..Facts::default()
        }
    }

    /// Request `r`'s tokens, whole (`start[r]` holds their count until [`Self::finish`]).
    fn add(&mut self, r: u32, t: &Open) {
        let i = r as usize;
        self.start[i] = t.index.len();
        self.ends[i] = (
            (t.index.first() == Some(&0)).then(|| t.emitted[0]),
            t.emitted.last().copied(),
        );
        match (t.index.first(), t.index.last()) {
            (Some(&a), Some(&b)) if (b - a) as usize + 1 == t.index.len() => self.gapless[i] = Some(a),
            _ => {
                let runs: Vec<(u32, u32)> = (0..t.index.len())
                    .filter(|&k| k == 0 || t.index[k] != t.index[k - 1] + 1)
                    .map(|k| (u32::try_from(k).unwrap_or(u32::MAX), t.index[k]))
                    .collect();
                self.gappy.insert(r, runs);
            }
        }
        self.at[i] = t.at;
        if let Some(v) = self.preempted.get_mut(&r) {
            v.clone_from(&t.emitted);
        }
        let lo = t.emitted.iter().copied().min();
        self.earliest = match (self.earliest, lo) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }

    /// After the pass: the counts made rows.
    fn finish(&mut self, incomplete: u64) {
        let mut total = 0usize;
        for c in &mut self.start {
            let n = *c;
            *c = total;
            total += n;
        }
        self.start.push(total);
        self.incomplete = incomplete;
    }

    /// The rows of request `r`'s tokens.
    fn rows(&self, r: u32) -> Range<usize> {
        let i = r as usize;
        match (self.start.get(i), self.start.get(i + 1)) {
            (Some(&a), Some(&b)) => a..b,
            _ => 0..0,
        }
    }

    /// The request of token row `w`, and its place among the request's tokens.
    fn place(&self, w: usize) -> Option<(u32, usize)> {
        // The request whose rows hold `w`: the last whose first row is at or before it.
        let r = self.start.partition_point(|&s| s <= w).checked_sub(1)?;
        let r = u32::try_from(r).ok()?;
        let rows = self.rows(r);
        rows.contains(&w).then(|| (r, w - rows.start))
    }

    /// The `index` of token row `w`, with its request.
    fn index_of(&self, w: usize) -> Option<(u32, u32)> {
        let (r, k) = self.place(w)?;
        let k = u32::try_from(k).ok()?;
        let index = if let Some(first) = self.gapless.get(r as usize).copied().flatten() {
            first.saturating_add(k)
        } else {
            // The run the token is in: the last that starts at or before it.
            let runs = self.gappy.get(&r)?;
            let (start, first) = runs[runs.partition_point(|&(s, _)| s <= k).checked_sub(1)?];
            first.saturating_add(k - start)
        };
        Some((r, index))
    }
}

/// One request's tokens being gathered across batches.
#[derive(Default)]
struct Open {
    request: u32,
    /// Where its tokens are.
    at: Option<Where>,
    index: Vec<u32>,
    emitted: Vec<i64>,
    iteration: Vec<i64>,
    iter_row: Vec<u32>,
    token_id: Vec<u32>,
    /// Each token's text: an id of [`Texts::Spans`] over `text_buf` and `spans`.
    text: Vec<u32>,
    special: Vec<Flag>,
    text_buf: String,
    spans: Vec<(u32, u32)>,
    /// The ids of the texts of tokens without an id, each text once.
    unnamed: FxHashMap<Box<str>, u32>,
}

impl<'a> Files<'a> {
    /// The footers of `files`; the tokens are read by the first visit.
    fn open(paths: &[PathBuf], trace: &'a Trace, progress: &'a Progress) -> Result<Self, StreamError> {
        let files = paths
            .iter()
            .map(|p| StreamFile::open(p))
            .collect::<Result<Vec<_>, _>>()?;
        // A token column of the wrong type is said now, not at the end of a pass.
        let types: Vec<(&str, &str)> = COLUMNS.into_iter().zip(TYPES).collect();
        for f in &files {
            f.check_types(&types)?;
        }
        let steps = StepRows::of(trace);
        Ok(Files {
            trace,
            progress,
            paths: paths.to_vec(),
            files,
            steps,
            facts: OnceLock::new(),
            passes: AtomicU32::new(0),
            choices: OnceLock::new(),
            error: Mutex::new(None),
        })
    }

    /// The first failure of a visit, if any.
    fn failed(&self) -> Result<(), StreamError> {
        match self.error.lock().map(|mut e| e.take()) {
            Ok(Some(e)) => Err(e),
            Ok(None) => Ok(()),
            Err(_) => Err(StreamError::Unordered("a pass over the tokens failed".to_owned())),
        }
    }

    /// The request and `index` of each of the token rows `wanted`, from what the first pass learnt.
    fn indexes_of(&self, wanted: &[usize]) -> FxHashMap<usize, (u32, u32)> {
        let Some(facts) = self.facts.get() else {
            return FxHashMap::default();
        };
        wanted.iter().filter_map(|&w| Some((w, facts.index_of(w)?))).collect()
    }

    /// Streams the token rows, handing each kept request's tokens to `each` once whole (with their texts when
    /// `texts`). Returns the token rows left out for breaking a rule of the fields read.
    fn pass(&self, texts: bool, each: &mut (dyn FnMut(Open) + Send)) -> Result<u64, StreamError> {
        self.passes.fetch_add(1, Ordering::Relaxed);
        let columns = if texts { &COLUMNS[..] } else { &COLUMNS[..WITHOUT_TEXTS] };
        let paths: Vec<String> = self.files.iter().map(|f| f.path().display().to_string()).collect();
        let mut open: Option<Open> = None;
        let trace = self.trace;
        let mut done = vec![false; trace.request_count()];
        let mut incomplete = 0u64;
        // Why the files break the order a stream relies on: said as such, not as an unreadable file.
        let mut unordered: Option<String> = None;
        let progress = self.progress;
        let rows = self.files.iter().map(|f| f.rows_of_kind("token")).sum();
        progress.start_stage("Finding incidents in its tokens", rows);
        let mut cancelled = false;
        let wanted =
            |kind: Option<&str>, _: &parquet::file::metadata::RowGroupMetaData| matches!(kind, None | Some("token"));
        let result = stream(
            &self.files,
            columns,
            wanted,
            |c, at| decode(c, at, trace, texts),
            |batch: Batch, at: At| {
                if progress.is_cancelled() {
                    cancelled = true;
                    return Err(String::new());
                }
                progress.add_done(batch.rows);
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
                    self.append(o, piece, at.file);
                }
                Ok(())
            },
        );
        if cancelled {
            return Err(StreamError::Load(crate::ingest::LoadError::Cancelled));
        }
        if let Some(why) = unordered {
            return Err(StreamError::Unordered(why));
        }
        result?;
        close(&mut open, each);
        Ok(incomplete)
    }
}

/// Hands the request being gathered, if any, to `each`.
fn close(open: &mut Option<Open>, each: &mut (dyn FnMut(Open) + Send)) {
    if let Some(t) = open.take() {
        each(t);
    }
}

/// A request's tokens gathered, as a visit hands them over (their ids, texts and flags when `texts`).
fn tokens_of(t: &Open, texts: bool) -> RequestTokens<'_> {
    RequestTokens {
        request: t.request,
        index: &t.index,
        emitted_ns: &t.emitted,
        iteration: &t.iteration,
        iter_row: &t.iter_row,
        token_id: if texts { &t.token_id } else { &[] },
        text: &t.text,
        special: &t.special,
        texts: Texts::Spans {
            buf: &t.text_buf,
            spans: &t.spans,
        },
    }
}

/// Tokens whose choice is read at once (`TokenSource::choices`).
const CHOICES_AT_ONCE: usize = 1 << 16;

/// Tokens of requests gathered before the visitors see them, together: each visitor walks the batch on its own
/// core, while the next row groups decode.
const BATCH_TOKENS: usize = 1 << 16;

impl Files<'_> {
    /// Adds a piece to the request's tokens being gathered.
    fn append(&self, o: &mut Open, piece: Piece, file: usize) {
        let file = u32::try_from(file).unwrap_or(u32::MAX);
        o.at = Some(match o.at {
            Some((first, _)) => (first, (file, piece.rows.1)),
            None => ((file, piece.rows.0), (file, piece.rows.1)),
        });
        // A token's step is on the instance that decoded it, as a load resolves it.
        let source = if (o.request as usize) < self.trace.request_count() {
            self.trace.decode_source(o.request)
        } else {
            NO_STR
        };
        let steps = self.steps.of_source(source);
        o.iter_row.extend(piece.iteration.iter().map(|&n| steps.row(n)));
        o.index.extend_from_slice(&piece.index);
        o.emitted.extend_from_slice(&piece.emitted);
        o.iteration.extend_from_slice(&piece.iteration);
        o.token_id.extend_from_slice(&piece.token_id);
        o.special.extend_from_slice(&piece.special);
        // The piece's texts are one after another in its buffer: they follow the request's, moved by its length.
        let shift = u32::try_from(o.text_buf.len()).unwrap_or(u32::MAX);
        o.text_buf.push_str(&piece.buf);
        for (t, &token_id) in piece.text.iter().zip(&piece.token_id) {
            let Some(r) = t else {
                o.text.push(NO_STR);
                continue;
            };
            let span = (r.start.saturating_add(shift), r.end.saturating_add(shift));
            let fresh = u32::try_from(o.spans.len()).unwrap_or(NO_STR);
            let id = if token_id == NULL_U32 {
                // Without an id, a token is told from another by its text: equal texts, one id.
                let text = o.text_buf.get(span.0 as usize..span.1 as usize).unwrap_or_default();
                *o.unnamed.entry(text.into()).or_insert(fresh)
            } else {
                fresh
            };
            if id == fresh {
                o.spans.push(span);
            }
            o.text.push(id);
        }
    }

    /// One pass over the tokens, handing requests' tokens to `each` a batch at a time; the first pass learns each
    /// request's facts as it goes.
    fn visit_batches(&self, texts: bool, each: &mut (dyn FnMut(&[Open]) + Send)) {
        if self.error.lock().is_ok_and(|e| e.is_some()) {
            return;
        }
        let mut facts = self.facts.get().is_none().then(|| Facts::new(self.trace));
        let (mut batch, mut tokens): (Vec<Open>, usize) = (Vec::new(), 0);
        let result = self.pass(texts, &mut |t: Open| {
            if let Some(f) = facts.as_mut() {
                f.add(t.request, &t);
            }
            tokens += t.index.len();
            batch.push(t);
            if tokens >= BATCH_TOKENS {
                each(&batch);
                batch.clear();
                tokens = 0;
            }
        });
        match result {
            Ok(incomplete) => {
                each(&batch);
                if let Some(mut f) = facts {
                    f.finish(incomplete);
                    let _ = self.facts.set(f);
                }
            }
            Err(e) => self.fail(e),
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

impl TokenSource for Files<'_> {
    fn rows(&self, r: u32) -> Range<usize> {
        self.facts.get().map_or(0..0, |f| f.rows(r))
    }

    fn ends(&self, r: u32) -> (Option<i64>, Option<i64>) {
        self.facts
            .get()
            .and_then(|f| f.ends.get(r as usize).copied())
            .unwrap_or((None, None))
    }

    fn emitted_before(&self, r: u32, at: i64) -> u64 {
        self.facts
            .get()
            .and_then(|f| f.preempted.get(&r))
            .map_or(0, |v| v.partition_point(|&e| e < at) as u64)
    }

    fn earliest(&self) -> Option<i64> {
        self.facts.get().and_then(|f| f.earliest)
    }

    fn ready(&self) -> bool {
        self.facts.get().is_some()
    }

    fn visit(&self, texts: bool, each: &mut (dyn FnMut(RequestTokens<'_>) + Send)) {
        self.visit_batches(texts, &mut |batch| {
            for t in batch {
                each(tokens_of(t, texts));
            }
        });
    }

    fn visit_all<'c>(&self, visitors: &mut [Box<dyn Visitor<'c> + 'c>]) {
        let texts = visitors.iter().any(|v| v.texts());
        self.visit_batches(texts, &mut |batch| {
            visitors.par_iter_mut().for_each(|v| {
                for t in batch {
                    v.see(&tokens_of(t, texts));
                }
            });
        });
    }

    fn choices(&self, wanted: &[usize], with_candidates: bool) -> Vec<(usize, TokenChoice)> {
        let Some(facts) = self.facts.get() else {
            return Vec::new();
        };
        // Per file: (its row, request id, index, token row), by row.
        let mut by_file: FxHashMap<u32, Vec<(u64, &str, u32, usize)>> = FxHashMap::default();
        for &w in wanted {
            let (Some((r, k)), Some((_, index))) = (facts.place(w), facts.index_of(w)) else {
                continue;
            };
            let Some((first, last)) = facts.at.get(r as usize).copied().flatten() else {
                continue;
            };
            // The last token's place is known; the others follow the first (tokenscope writes a request's tokens
            // together), and a row that is not the token is not taken for it.
            let (file, row) = if k + 1 == facts.rows(r).len() {
                last
            } else {
                (first.0, first.1 + k as u64)
            };
            by_file
                .entry(file)
                .or_default()
                .push((row, self.trace.request_id(r), index, w));
        }
        if by_file.is_empty() {
            return Vec::new();
        }
        let reader = if let Some(r) = self.choices.get() {
            r
        } else {
            match CandidateReader::of_files(&self.paths) {
                Ok(r) => self.choices.get_or_init(|| r),
                Err(e) => {
                    self.fail(e.into());
                    return Vec::new();
                }
            }
        };
        let mut out = Vec::new();
        for (file, mut rows) in by_file {
            rows.sort_unstable();
            // A chunk of rows at a time: the selection and what is read of it stay small whatever the answers.
            for chunk in rows.chunks(CHOICES_AT_ONCE) {
                let asked: Vec<(u64, &str, u32)> = chunk.iter().map(|&(row, id, index, _)| (row, id, index)).collect();
                match reader.read_choices(file as usize, &asked, with_candidates) {
                    Ok(found) => out.extend(chunk.iter().zip(found).filter_map(|(&(.., w), c)| Some((w, c?)))),
                    Err(e) => {
                        self.fail(e.into());
                        return out;
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::LoadError;

    #[test]
    fn a_pass_over_the_tokens_is_told_to_the_progress_and_stops_when_cancelled() {
        // Requests a and b, 3 tokens each, written in row groups of 2 rows.
        const T0: i64 = 1_764_403_200_000_000_000;
        let mut lines = Vec::new();
        for id in ["a", "b"] {
            lines.push(format!(r#"{{"kind":"request","request_id":"{id}","arrival_ns":{T0}}}"#));
            for k in 0..3 {
                let at = T0 + (k + 1) * 1_000_000;
                lines.push(format!(
                    r#"{{"kind":"token","request_id":"{id}","index":{k},"emitted_ns":{at},"token_id":{k}}}"#
                ));
            }
        }
        let dir = tempfile::tempdir().expect("a temporary directory");
        let path = dir.path().join("t.parquet");
        crate::format::parquet::write_with_row_groups(&crate::test_support::trace_of(&lines.join("\n")), &path, 2)
            .expect("written");
        let paths = [path];
        let (trace, _) = skeleton(&paths, None, &Progress::default()).expect("read");
        let progress = Progress::default();
        let files = Files::open(&paths, &trace, &progress).expect("opened");
        let mut tokens = 0;
        files.visit(false, &mut |t| tokens += t.len());
        assert_eq!(tokens, 6);
        assert_eq!(progress.stage(), Some("Finding incidents in its tokens"));
        assert!(
            (progress.fraction() - 1.0).abs() < f32::EPSILON,
            "{}",
            progress.fraction()
        );
        // Cancelled (another file opened): the next pass stops at its first batch, and says why.
        progress.cancel();
        let mut tokens = 0;
        files.visit(false, &mut |t| tokens += t.len());
        assert_eq!(tokens, 0);
        assert!(matches!(files.failed(), Err(StreamError::Load(LoadError::Cancelled))));
    }
}
