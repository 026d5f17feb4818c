//! llama.cpp's `llama-server` log (the llama.cpp of llama-cpp-python 0.3.36; every line traced to its source in
//! `tests/data/import/llamacpp/README.md`): the server's side of a run, as engine steps and per-request stages.
//!
//! Every line llama-server writes starts `M.SS.mmm.uuu L ` (minutes, seconds, ms and µs since the process started;
//! the level letter), then a 19-character tag (`slot launch_slot_: `, `srv        decode: `), and for a slot
//! `id S | task T | `. What each verbosity gives:
//! - **default** (`-lv 3`): a request's launch on a slot (`processing task`), its prompt and generation times
//!   (`prompt eval time`, `eval time`), its release (`stop processing`). Requests, with the first token placed at
//!   the end of the prompt's processing; no steps.
//! - **`-lv 4`**: the prompt's length (`new prompt ... task.n_tokens`), the tokens found in the prompt cache and
//!   each prefill chunk's position (`cached n_tokens = C`), the last chunk (`init sampler`).
//! - **`-lv 5`** (`-v`): every `llama_decode` (`srv decode: n_batch (effective)`), the token each decoding slot
//!   feeds (`slot decode token`), each token sampled (`n_gen = G, ... next token: ID 'piece'`), the queue
//!   (`new task, id = T`) and each pass of the main loop (`update slots`). Then every step is an iteration with
//!   its prefill and decode tokens, every prefill chunk a stage, every token a record with its step.
//!
//! The times count from the process's start, so they are placed on the wall clock at the log file's last change
//! (the last line written then) and the trace says so (`clock = "anchored"`): joined with a recording of the same
//! run, the pairs place them exactly. Colour codes (a log written from a terminal) are stripped; lines that are
//! not llama-server's (start-up dumps, other programs) are skipped and counted.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;

use super::server_log::strip_ansi;
use super::{Sink, ok, record, text};
use crate::format::jsonl::for_each_line;
use crate::ingest::raw::Val;
use crate::ingest::{LoadError, Progress};
use crate::trace::report::{Place, Problem};

/// The source name of the steps and requests of a llama-server log.
pub const SOURCE: &str = "llama-server";

/// True when the text has llama-server's prefixed lines (`0.01.234.567 I slot ...`).
pub fn looks_like(text: &str) -> bool {
    text.lines()
        .take(2_000)
        .filter_map(|l| parse_line(&strip_ansi(l)).map(|(_, _, m)| m.tag))
        .any(|tag| matches!(tag, Tag::Slot(..) | Tag::Srv | Tag::Que))
}

/// The tag after the time and level.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tag {
    /// `slot <func>: id S | task T | `.
    Slot(u32, i64),
    /// `srv  <func>: `.
    Srv,
    /// `que  <func>: `.
    Que,
    /// `res  <func>: `.
    Res,
    /// `spec <func>: `: speculative decoding's drafting (draft candidates, statistics); read, not used.
    Spec,
}

/// A line's message after its tag.
struct Message<'a> {
    tag: Tag,
    text: &'a str,
}

/// `M.SS.mmm.uuu` to µs.
fn parse_time(s: &str) -> Option<i64> {
    let mut parts = s.split('.');
    let (m, sec, ms, us) = (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || sec.len() != 2 || ms.len() != 3 || us.len() != 3 {
        return None;
    }
    let n = |x: &str| {
        x.bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| x.parse::<i64>().ok())
            .flatten()
    };
    let (m, sec, ms, us) = (n(m)?, n(sec)?, n(ms)?, n(us)?);
    (sec < 60).then_some(((m * 60 + sec) * 1_000 + ms) * 1_000 + us)
}

/// A line split into (µs since start, level, message); `None` for a line that is not llama-server's.
fn parse_line(line: &str) -> Option<(Option<i64>, char, Message<'_>)> {
    let line = line.trim_end_matches(['\r', '\n']);
    let (time, rest) = match line.split_once(' ') {
        Some((t, rest)) if t.contains('.') => (Some(parse_time(t)?), rest),
        _ => (None, line),
    };
    let mut chars = rest.chars();
    let level = chars.next().filter(|c| matches!(c, 'I' | 'W' | 'E' | 'D'))?;
    let rest = rest.get(2..)?;
    let (tag, after) = if let Some(r) = rest.strip_prefix("slot ") {
        let (_, r) = split_func(r)?;
        let r = r.strip_prefix("id ")?.trim_start();
        let (slot, r) = r.split_once(" | task ")?;
        let (task, r) = r.split_once(" | ")?;
        (Tag::Slot(slot.trim().parse().ok()?, task.trim().parse().ok()?), r)
    } else if let Some(r) = rest.strip_prefix("srv  ") {
        (Tag::Srv, split_func(r)?.1)
    } else if let Some(r) = rest.strip_prefix("que  ") {
        (Tag::Que, split_func(r)?.1)
    } else if let Some(r) = rest.strip_prefix("res  ") {
        (Tag::Res, split_func(r)?.1)
    } else if let Some(r) = rest.strip_prefix("spec ") {
        (Tag::Spec, split_func(r)?.1)
    } else {
        return None;
    };
    Some((time, level, Message { tag, text: after }))
}

/// Splits the 12-column function name (right-aligned, cut to 12) from the message after it.
fn split_func(r: &str) -> Option<(&str, &str)> {
    let (func, rest) = r.split_once(": ")?;
    (func.len() <= 12 && !func.trim().is_empty()).then_some((func.trim(), rest))
}

/// The integer after `key` (`"n_tokens = "`), up to the next non-digit.
fn int_after(text: &str, key: &str) -> Option<i64> {
    let at = text.find(key)? + key.len();
    let rest = text[at..].trim_start();
    let end = rest
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || (i == 0 && c == '-')))
        .map_or(rest.len(), |(i, _)| i);
    rest[..end].parse().ok()
}

/// A task's speculative totals: (accepted, drafted) draft tokens.
type DraftTotals = (u32, u32);

/// One request (a task on a slot) as the log tells it.
#[derive(Debug, Default, Clone)]
struct Task {
    slot: u32,
    place: Place,
    posted_us: Option<i64>,
    launched_us: Option<i64>,
    input_tokens: Option<i64>,
    cached_tokens: Option<i64>,
    /// The slot's token count before each chunk, with the step it went into.
    chunks: Vec<(i64, u64)>,
    /// The step of the last chunk (`init sampler`), with the prompt's length.
    last_chunk: Option<(u64, i64)>,
    /// (n_gen, token id, piece, µs, step) of each sampled token.
    tokens: Vec<(i64, i64, String, i64, Option<u64>)>,
    /// Speculative decoding, per verify step: (step, drafted, accepted), from `add accepted tokens`.
    verified: Vec<(u64, u32, u32)>,
    /// Speculative decoding: the task's totals at its end (`draft acceptance = ... (A accepted / D generated)`).
    draft_totals: Option<DraftTotals>,
    prompt_ms: Option<f64>,
    /// Prompt tokens computed (`prompt eval time = X ms / N tokens`): the prompt less what the cache held.
    prompt_computed: Option<i64>,
    eval_ms: Option<f64>,
    n_gen: Option<i64>,
    stop_n_tokens: Option<i64>,
    released_us: Option<i64>,
    stop: Option<&'static str>,
    cancelled: bool,
}

/// One `llama_decode` call.
#[derive(Debug, Default, Clone)]
struct Step {
    place: Place,
    start_us: i64,
    end_us: i64,
    /// The decoding slots' tasks (`slot decode token`, or `generate_draft` when the slot speculates), with the
    /// drafts each fed beside its own token.
    decode_tasks: Vec<(i64, u32)>,
}

/// What the reader gathers while reading the lines.
#[derive(Debug, Default, Clone)]
struct Log {
    tasks: BTreeMap<i64, Task>,
    /// The steps from `first_step` on (those before were forgotten: [`Incremental::forget_before`]).
    steps: Vec<Step>,
    first_step: u64,
    /// Tasks whose `slot decode token` (or `generate_draft`) line came in the current pass, before its decode, with
    /// their drafts.
    pending_feeds: Vec<(i64, u32)>,
    /// When the current pass began drafting (its first yield before its decode), while no step is open.
    drafting_since: Option<i64>,
    /// Whether any slot speculated (a `generate_draft` line).
    speculative: bool,
    /// The step the last decode line opened.
    current_step: Option<u64>,
    last_us: i64,
    lines: u64,
    skipped: u64,
    untimed: u64,
    /// The text of a `next token` line still open at a line break (its piece holds a newline).
    open_piece: Option<i64>,
}

impl Log {
    /// The number the next step gets.
    fn next_step(&self) -> u64 {
        self.first_step + self.steps.len() as u64
    }

    /// Step `i`, unless forgotten.
    fn step(&self, i: u64) -> Option<&Step> {
        i.checked_sub(self.first_step)
            .and_then(|k| self.steps.get(usize::try_from(k).ok()?))
    }

    fn task(&mut self, id: i64, slot: u32, place: Place) -> &mut Task {
        self.tasks.entry(id).or_insert_with(|| Task {
            slot,
            place,
            ..Task::default()
        })
    }

    fn line(&mut self, raw: &str, place: Place) {
        self.lines += 1;
        let line = strip_ansi(raw);
        let Some((time, _level, m)) = parse_line(&line) else {
            // A piece that holds a newline continues on the next physical line.
            if let Some(task) = self.open_piece
                && let Some(t) = self.tasks.get_mut(&task).and_then(|t| t.tokens.last_mut())
            {
                t.2.push('\n');
                t.2.push_str(line.trim_end_matches(['\r', '\n']));
                if line.trim_end().ends_with('\'') {
                    t.2.pop();
                    self.open_piece = None;
                }
                return;
            }
            self.skipped += 1;
            return;
        };
        self.open_piece = None;
        let Some(us) = time else {
            self.untimed += 1;
            return;
        };
        self.last_us = self.last_us.max(us);
        let text = m.text;
        match m.tag {
            Tag::Slot(slot, task) if task >= 0 => self.slot_line(slot, task, text, us, place),
            Tag::Srv => {
                if text.starts_with("n_batch (effective) =") {
                    let decode_tasks = std::mem::take(&mut self.pending_feeds);
                    // A verify step begins with its drafting (the draft model runs before the target's decode).
                    let drafted = decode_tasks.iter().any(|&(_, d)| d > 0);
                    let start_us = match self.drafting_since.take() {
                        Some(since) if drafted => since,
                        _ => us,
                    };
                    let step = Step {
                        place,
                        start_us,
                        end_us: us,
                        decode_tasks,
                    };
                    self.current_step = Some(self.next_step());
                    self.steps.push(step);
                } else if let Some(task) = text
                    .strip_prefix("stop: cancel task, id_task = ")
                    .and_then(|t| t.trim().parse::<i64>().ok())
                    && let Some(t) = self.tasks.get_mut(&task)
                {
                    t.cancelled = true;
                }
            }
            Tag::Que => {
                if let Some(rest) = text.strip_prefix("new task, id = ") {
                    let id: Option<i64> = rest.split(['/', ',']).next().and_then(|t| t.trim().parse().ok());
                    // The main loop's own NEXT_RESPONSE task is posted with the single-task form and never launched:
                    // it stays a posting with no request.
                    if let Some(id) = id {
                        self.tasks.entry(id).or_insert_with(|| Task {
                            place,
                            ..Task::default()
                        });
                        if let Some(t) = self.tasks.get_mut(&id) {
                            t.posted_us.get_or_insert(us);
                        }
                    }
                } else if text.starts_with("done yielding to queue") {
                    self.extend_step(us);
                } else if text.starts_with("yielding to queue") && self.current_step.is_none() {
                    self.drafting_since.get_or_insert(us);
                } else if text.starts_with("update slots") {
                    self.current_step = None;
                    self.pending_feeds.clear();
                    self.drafting_since = None;
                }
            }
            Tag::Res | Tag::Spec | Tag::Slot(..) => {}
        }
    }

    fn extend_step(&mut self, us: i64) {
        let first = self.first_step;
        if let Some(s) = self
            .current_step
            .and_then(|i| i.checked_sub(first))
            .and_then(|k| self.steps.get_mut(usize::try_from(k).ok()?))
        {
            s.end_us = s.end_us.max(us);
        }
    }

    fn slot_line(&mut self, slot: u32, task: i64, text: &str, us: i64, place: Place) {
        let step = self.current_step;
        if text.starts_with("processing task") {
            let t = self.task(task, slot, place);
            t.slot = slot;
            t.place = place;
            t.launched_us.get_or_insert(us);
        } else if text.starts_with("new prompt,") {
            self.task(task, slot, place).input_tokens = int_after(text, "task.n_tokens =");
        } else if text.starts_with("cached n_tokens =") {
            let c = int_after(text, "cached n_tokens =");
            // The chunk goes into the decode this pass makes next: the step after the last one opened.
            let next = self.next_step();
            let t = self.task(task, slot, place);
            if let Some(c) = c {
                if t.chunks.is_empty() && t.cached_tokens.is_none() {
                    t.cached_tokens = Some(c);
                }
                t.chunks.push((c, next));
            }
        } else if text.starts_with("init sampler") {
            let total = int_after(text, "total =");
            let next = self.next_step();
            let t = self.task(task, slot, place);
            if let Some(total) = total {
                t.last_chunk = Some((next, total));
                t.input_tokens.get_or_insert(total);
            }
        } else if text.starts_with("slot decode token") {
            self.pending_feeds.push((task, 0));
        } else if text.starts_with("generate_draft:") {
            // The slot feeds its last token and `#draft` drafts to the pass's decode.
            let drafted = int_after(text, "#draft=")
                .and_then(|n| u32::try_from(n).ok())
                .unwrap_or(0);
            self.speculative = true;
            self.pending_feeds.push((task, drafted));
        } else if text.starts_with("add accepted tokens:") {
            // The verify step's outcome, printed before its tokens (so also for a task's last step): `ids.size`
            // tokens come out, the accepted drafts and the target's own.
            let ids = int_after(text, "ids.size=").and_then(|n| u32::try_from(n).ok());
            let drafted = int_after(text, "n_draft=").and_then(|n| u32::try_from(n).ok());
            if let (Some(step), Some(ids), Some(drafted)) = (step, ids, drafted) {
                let accepted = ids.saturating_sub(1).min(drafted);
                self.task(task, slot, place).verified.push((step, drafted, accepted));
            }
        } else if let Some(rest) = text.trim_start().strip_prefix("draft acceptance =") {
            // `draft acceptance = R (A accepted / D generated), mean len = L`: the task's totals ("generated" are the
            // drafted tokens).
            let accepted = int_after(rest, "(").and_then(|n| u32::try_from(n).ok());
            let drafted = int_after(rest, "accepted /").and_then(|n| u32::try_from(n).ok());
            if let (Some(a), Some(d)) = (accepted, drafted) {
                self.task(task, slot, place).draft_totals = Some((a, d));
            }
        } else if text.starts_with("n_gen =") && text.contains("next token:") {
            let n_gen = int_after(text, "n_gen =");
            let rest = text.split_once("next token:").map_or("", |(_, r)| r).trim_start();
            let (id, piece) = rest.split_once(' ').unwrap_or((rest, ""));
            let piece = piece.trim_start();
            let closed = piece.len() >= 2 && piece.ends_with('\'');
            let piece = piece.strip_prefix('\'').unwrap_or(piece);
            let piece = if closed { &piece[..piece.len() - 1] } else { piece };
            let id: Option<i64> = id.trim().parse().ok();
            self.extend_step(us);
            let t = self.task(task, slot, place);
            if let (Some(n), Some(id)) = (n_gen, id) {
                t.tokens.push((n, id, piece.to_owned(), us, step));
            }
            if !closed {
                self.open_piece = Some(task);
            }
        } else if text.starts_with("stopped by EOS") {
            self.task(task, slot, place).stop = Some("stop");
        } else if text.starts_with("stopped by limit") || text.starts_with("stopped due to running out") {
            self.task(task, slot, place).stop = Some("length");
        } else if text.starts_with("stopped by") {
            self.task(task, slot, place).stop = Some("stop");
        } else if let Some(rest) = text.trim_start().strip_prefix("prompt eval time =") {
            let t = self.task(task, slot, place);
            t.prompt_ms = rest.split_whitespace().next().and_then(|v| v.parse().ok());
            t.prompt_computed = int_after(rest, "/");
        } else if let Some(rest) = text.trim_start().strip_prefix("eval time =") {
            let t = self.task(task, slot, place);
            t.eval_ms = rest.split_whitespace().next().and_then(|v| v.parse().ok());
            t.n_gen = int_after(rest, "/");
        } else if text.starts_with("stop processing:") {
            let t = self.task(task, slot, place);
            t.stop_n_tokens = int_after(text, "n_tokens =");
            t.released_us.get_or_insert(us);
        }
        // `prompt processing, ... progress = ...` (a long prompt, after 3 s) is not read: the chunks say it.
    }
}

/// Reads a llama-server log into requests, steps, prefill chunks and tokens.
///
/// # Errors
/// The file cannot be read.
pub fn read(input: impl Read, path: &Path, sink: &mut Sink<'_>, progress: &Progress) -> Result<(), LoadError> {
    let file = sink.file;
    let mut log = Log::default();
    for_each_line(input, path, file, sink.b, progress, |line, place, _| {
        log.line(&String::from_utf8_lossy(line), place);
    })?;
    let anchor_us = anchor_us(path, log.last_us);
    place(&log, anchor_us, path, sink);
    Ok(())
}

/// A llama-server log read as it is written (a live view's engine track): its lines fed as they come, the records
/// of what was read made when asked, as [`read`] makes them of the whole file, without reading it again.
#[derive(Debug, Default, Clone)]
pub struct Incremental {
    log: Log,
    /// Lines fed (the next line's number is one more).
    lines: u64,
}

impl Incremental {
    /// The next line of the log (without its newline), of file `file` of the trace; as [`read`] reads them:
    /// trimmed, empty ones counted and passed over.
    pub fn line(&mut self, raw: &[u8], file: u32) {
        self.lines += 1;
        let text = raw.trim_ascii();
        let text = if self.lines == 1 {
            text.strip_prefix(b"\xef\xbb\xbf".as_slice()).unwrap_or(text)
        } else {
            text
        };
        if !text.is_empty() {
            self.log
                .line(&String::from_utf8_lossy(text), Place { file, at: self.lines });
        }
    }

    /// The latest time a line said, µs since the server's start; `None` before the first timed line.
    pub fn last_us(&self) -> Option<i64> {
        (self.log.last_us > 0).then_some(self.log.last_us)
    }

    /// Forgets what ended before `cutoff_us` (µs since the server's start): the tasks whose last sign of life (posted,
    /// launched, a prefill chunk, a token, released) came before it, and the steps before it that no task kept
    /// refers to. A task that spoke since is kept whole however long it has run; the steps keep their numbers.
    /// What a long watch keeps in memory is then the last minutes, not the day. Returns the requests forgotten (the
    /// tasks that were launched; the server's own, a `/metrics` read, are not counted).
    pub fn forget_before(&mut self, cutoff_us: i64) -> usize {
        let log = &mut self.log;
        let (steps, first) = (&log.steps, log.first_step);
        let step_end = |i: u64| {
            i.checked_sub(first)
                .and_then(|k| steps.get(usize::try_from(k).ok()?))
                .map(|s| s.end_us)
        };
        let mut forgotten = 0;
        log.tasks.retain(|_, t| {
            let chunk = t.chunks.last().and_then(|&(_, s)| step_end(s));
            let token = t.tokens.last().map(|k| k.3);
            let keep = [t.posted_us, t.launched_us, t.released_us, chunk, token]
                .into_iter()
                .flatten()
                .max()
                .is_none_or(|last| last >= cutoff_us);
            // Requests are counted; the server's own tasks (a /metrics read, NEXT_RESPONSE) are not.
            forgotten += usize::from(!keep && t.launched_us.is_some());
            keep
        });
        let referred = log
            .tasks
            .values()
            .flat_map(|t| {
                // Each list is in the order of its steps: its first is its earliest.
                let chunk = t.chunks.first().map(|&(_, s)| s);
                let last = t.last_chunk.map(|(s, _)| s);
                let token = t.tokens.iter().find_map(|k| k.4);
                let verified = t.verified.first().map(|v| v.0);
                [chunk, last, token, verified].into_iter().flatten()
            })
            .chain(log.current_step)
            .min()
            .unwrap_or(u64::MAX);
        let gone = log
            .steps
            .iter()
            .enumerate()
            .take_while(|&(k, s)| first + (k as u64) < referred && s.end_us < cutoff_us)
            .count();
        log.steps.drain(..gone);
        log.first_step += gone as u64;
        forgotten
    }

    /// Adds the records of the lines fed so far, timed as [`read`] times the file at `path`.
    pub fn place_into(&self, path: &Path, sink: &mut Sink<'_>) {
        place(&self.log, anchor_us(path, self.log.last_us), path, sink);
    }
}

/// The time a line of a llama-server log says, µs since the server's start; `None` for a line without one.
pub fn line_time_us(raw: &[u8]) -> Option<i64> {
    let text = String::from_utf8_lossy(raw.trim_ascii());
    let line = strip_ansi(&text);
    parse_line(&line).and_then(|(time, _, _)| time)
}

/// The wall-clock time of the process's start, µs since the Unix epoch: the file's last change less the last
/// line's time.
fn anchor_us(path: &Path, last_us: i64) -> i64 {
    let modified = std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(0));
    modified - last_us
}

/// Adds the log's records, its times moved by `anchor_us`.
fn place(log: &Log, anchor_us: i64, path: &Path, sink: &mut Sink<'_>) {
    let ns = |us: i64| (anchor_us + us).saturating_mul(1_000);
    let name = path.display();
    let mut meta = record("meta");
    meta.engine = text("llama.cpp");
    meta.clock = text(crate::trace::CLOCK_ANCHORED);
    meta.eos_token_ids = None;
    sink.add(&meta, 0);
    sink.b.report.records -= 1;

    let has_steps = !log.steps.is_empty();
    // Steps: a step ends where its last sampled token was read (or its decode returned), and never after the next
    // step starts.
    let ends: Vec<i64> = log
        .steps
        .iter()
        .enumerate()
        .map(|(i, s)| match log.steps.get(i + 1) {
            Some(next) => s.end_us.min(next.start_us).max(s.start_us),
            None => s.end_us,
        })
        .collect();
    // The place of step `step` among the steps held (a chunk may name one forgotten, or the one still to come).
    let held = |step: u64| {
        step.checked_sub(log.first_step)
            .and_then(|k| usize::try_from(k).ok())
            .filter(|&k| k < log.steps.len())
    };
    // Each held step's prefill tokens, per task, from the chunk positions.
    let mut prefill: Vec<Vec<(i64, i64)>> = vec![Vec::new(); log.steps.len()];
    for (&id, t) in &log.tasks {
        for (k, &(c, step)) in t.chunks.iter().enumerate() {
            let end = match t.chunks.get(k + 1) {
                Some(&(next, _)) => Some(next),
                None => t.last_chunk.filter(|&(s, _)| s == step).map(|(_, total)| total),
            };
            if let Some(end) = end.filter(|&e| e > c)
                && let Some(k) = held(step)
            {
                prefill[k].push((id, end - c));
            }
        }
    }
    let mut requests = 0u64;
    // Tasks whose end line's draft totals differ from the sum of their verify steps: (request, line, sum).
    let mut mismatched: Vec<(String, DraftTotals, DraftTotals)> = Vec::new();
    // Each step's drafts and accepted drafts, over its tasks.
    let mut step_spec: Vec<(u32, u32)> = vec![(0, 0); if log.speculative { log.steps.len() } else { 0 }];
    for t in log.tasks.values() {
        for &(step, drafted, accepted) in &t.verified {
            if let Some(e) = held(step).and_then(|k| step_spec.get_mut(k)) {
                *e = (e.0 + drafted, e.1 + accepted);
            }
        }
    }
    for (&id, t) in &log.tasks {
        let Some(launched) = t.launched_us else {
            continue; // a posting never launched: the loop's own tasks, or a request still queued when the log ends
        };
        requests += 1;
        let rid = format!("task-{id}");
        let mut r = record("request");
        r.request_id = text(rid.clone());
        r.source = text(SOURCE);
        let arrival = t.posted_us.unwrap_or(launched).min(launched);
        r.arrival_ns = ok(ns(arrival));
        let first_chunk_step = t.chunks.first().map(|&(_, s)| s).and_then(|s| log.step(s));
        let scheduled = first_chunk_step.map_or(launched, |s| s.start_us).max(arrival);
        // Without the posting (the default level logs none) nor a step, the arrival is the launch itself: the time
        // queued before it is unknown, not zero.
        if t.posted_us.is_some() || first_chunk_step.is_some() {
            r.scheduled_ns = ok(ns(scheduled));
        }
        let first_token_us = t
            .tokens
            .iter()
            .find(|tok| tok.0 == 1)
            .map(|tok| tok.3)
            .or_else(|| {
                // The default log: the first token comes at the end of the prompt's processing.
                t.prompt_ms.map(|ms| launched + (ms * 1e3).round() as i64)
            })
            .map(|f| f.max(scheduled));
        r.first_token_ns = first_token_us.map(|f| Val::Ok(ns(f)));
        let finished = t
            .released_us
            .or_else(|| t.tokens.last().map(|tok| tok.3))
            .map(|f| f.max(first_token_us.unwrap_or(scheduled)));
        r.finished_ns = finished.map(|f| Val::Ok(ns(f)));
        let n_gen = t.n_gen.or_else(|| t.tokens.iter().map(|tok| tok.0).max());
        let input = t.input_tokens.or_else(|| {
            // `stop processing: n_tokens` holds the prompt and every output token but the last.
            t.stop_n_tokens.zip(n_gen).map(|(n, g)| n - g + 1).filter(|&i| i > 0)
        });
        r.input_tokens = input.map(Val::Ok);
        // The cache's share: the first chunk's start (`-lv 4`), else the prompt less what was computed.
        let cached = t
            .cached_tokens
            .or_else(|| input.zip(t.prompt_computed).map(|(i, c)| i - c))
            .filter(|&c| c >= 0 && input.is_none_or(|i| c <= i));
        r.cached_tokens = cached.map(Val::Ok);
        r.output_tokens = n_gen.map(Val::Ok);
        r.finish_reason = if t.cancelled && t.prompt_ms.is_none() {
            text("abort")
        } else {
            t.stop.and_then(text)
        };
        r.server_ttft_ns = t.prompt_ms.and_then(super::ns_from_ms).map(Val::Ok);
        r.server_decode_ns = t.eval_ms.and_then(super::ns_from_ms).map(Val::Ok);
        // Speculation: the task's totals as its end line says them, else summed over its verify steps.
        let summed = t.verified.iter().fold((0u32, 0u32), |(a, d), &(_, drafted, accepted)| {
            (a + accepted, d + drafted)
        });
        let totals = t.draft_totals.or((!t.verified.is_empty()).then_some(summed));
        if let Some((accepted, drafted)) = totals {
            r.spec_accepted_tokens = ok(i64::from(accepted));
            r.spec_drafted_tokens = ok(i64::from(drafted));
        }
        if let Some(line) = t.draft_totals
            && !t.verified.is_empty()
            && line != summed
        {
            mismatched.push((rid.clone(), line, summed));
        }
        sink.add(&r, t.place.at);
        let roles = spec_roles(&t.tokens, &t.verified, log.speculative);
        // One record for all the task's tokens, each field set anew, its strings borrowed: a watch places every
        // held task's tokens at each look.
        let mut k = record("token");
        k.request_id = text(rid.as_str());
        for ((n, id_tok, piece, us, step), (role, drafted)) in t.tokens.iter().zip(roles) {
            k.index = ok(n - 1);
            k.emitted_ns = ok(ns(*us));
            k.iteration = step.map(|s| Val::Ok(s as i64));
            k.token_id = ok(*id_tok);
            k.text = text(piece.as_str());
            k.spec = role.and_then(text);
            k.spec_drafted_tokens = drafted.map(|d| Val::Ok(i64::from(d)));
            sink.add(&k, t.place.at);
        }
        let mut st = record("stage");
        st.request_id = text(rid.as_str());
        st.stage = text("prefill");
        for &(_, step) in &t.chunks {
            let Some(s) = log.step(step) else {
                continue;
            };
            let Some(&(_, tokens)) = held(step).and_then(|k| prefill[k].iter().find(|(task, _)| *task == id)) else {
                continue;
            };
            st.start_ns = ok(ns(s.start_us));
            st.end_ns = ok(ns(ends[(step - log.first_step) as usize]));
            st.iteration = ok(step as i64);
            st.tokens = ok(tokens);
            sink.add(&st, s.place.at);
        }
    }
    // One record for every step, each field set anew: a record is a few kilobytes, and a watch places every held
    // step at each look.
    let mut it = record("iteration");
    it.source = text(SOURCE);
    for (k, s) in log.steps.iter().enumerate() {
        let i64_of = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        let i = log.first_step + k as u64;
        let chunks = prefill[k].as_slice();
        it.iteration = ok(i64::try_from(i).unwrap_or(i64::MAX));
        it.start_ns = ok(ns(s.start_us));
        it.end_ns = ok(ns(ends[k]));
        // A speculating slot feeds its own token and its drafts: all are decode tokens the step computes.
        let fed: u64 = s.decode_tasks.iter().map(|&(_, d)| 1 + u64::from(d)).sum();
        it.num_decode_reqs = ok(i64_of(s.decode_tasks.len()));
        it.num_decode_tokens = ok(i64::try_from(fed).unwrap_or(i64::MAX));
        if log.speculative {
            let (drafted, accepted) = step_spec[k];
            it.spec_drafted_tokens = ok(i64::from(drafted));
            it.spec_accepted_tokens = ok(i64::from(accepted));
        }
        it.num_prefill_reqs = ok(i64_of(chunks.len()));
        it.num_prefill_tokens = ok(chunks.iter().map(|c| c.1).sum());
        it.num_reqs = ok(i64_of(s.decode_tasks.len() + chunks.len()));
        sink.add(&it, s.place.at);
    }
    if log.lines > 0 && requests == 0 && !has_steps {
        sink.reject(
            0,
            Problem::Malformed,
            None,
            format!(
                "{name}: no request or step in {} lines of llama-server's log; it needs the default level at least \
                 (`processing task`, `stop processing`)",
                log.lines
            ),
        );
    }
    if log.untimed > 0 && requests == 0 {
        sink.note(format!(
            "{name}: {} lines have no timestamp: start llama-server without --no-log-timestamps",
            log.untimed
        ));
    }
    if !has_steps && requests > 0 {
        sink.note(format!(
            "{name}: llama-server's log at its default level gives requests but no steps, and no time queued \
             before a slot took them; run it with -lv 5 (or -v) for every batch, prefill chunk and token"
        ));
    }
    if log.skipped > 0 {
        sink.note(format!(
            "{name}: {} lines that are not llama-server's request and batch lines were skipped",
            log.skipped
        ));
    }
    if let Some((rid, (la, ld), (sa, sd))) = mismatched.first() {
        sink.note(format!(
            "{name}: {} tasks' draft totals (`draft acceptance`) differ from the sum of their verify steps (`add \
             accepted tokens`), e.g. {rid}: {la} accepted of {ld} against {sa} of {sd}; the totals are the task lines'",
            mismatched.len()
        ));
    }
    sink.note(format!(
        "{name}: llama-server counts time from its start; placed on the wall clock at the file's last change. Joined \
         with a recording of the same run, the pairs place it exactly"
    ));
}

/// What each of a task's tokens was in speculative decoding, with the drafts of its step on the step's first token:
/// in a verify step, the first `accepted` tokens are accepted drafts and the next the target's own (the bonus; a
/// step cut by a stop has fewer tokens); a token of a step that verified nothing is plain. Unknown for all when the
/// server never speculated (`speculative` false).
fn spec_roles(
    tokens: &[(i64, i64, String, i64, Option<u64>)],
    verified: &[(u64, u32, u32)],
    speculative: bool,
) -> Vec<(Option<&'static str>, Option<u32>)> {
    if !speculative {
        return vec![(None, None); tokens.len()];
    }
    let mut out = Vec::with_capacity(tokens.len());
    let mut k = 0;
    while k < tokens.len() {
        let step = tokens[k].4;
        let end = tokens[k..]
            .iter()
            .position(|tok| tok.4 != step || step.is_none())
            .map_or(tokens.len(), |n| k + n.max(1));
        let outcome = step.and_then(|s| verified.iter().find(|v| v.0 == s));
        for (j, _) in tokens[k..end].iter().enumerate() {
            let role = match outcome {
                Some(&(_, _, accepted)) if (j as u32) < accepted => "draft",
                Some(_) => "bonus",
                None => "plain",
            };
            let drafted = outcome.filter(|_| j == 0).map(|&(_, d, _)| d);
            out.push((Some(role), drafted));
        }
        k = end;
    }
    out
}

#[cfg(test)]
mod tests;
