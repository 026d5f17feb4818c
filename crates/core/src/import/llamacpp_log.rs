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

use super::Sink;
use super::server_log::strip_ansi;
use crate::format::jsonl::for_each_line;
use crate::ingest::{LoadError, Progress};
use crate::trace::report::Place;

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
    /// The log's line count when a line last said something of it: a watch places again what changed
    /// ([`frozen`]).
    changed: u64,
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
    /// What the tasks forgotten while the step is held put in it: a step's record stays what the server computed
    /// whatever a watch forgets around it.
    gone: Gone,
}

/// A step's share of the tasks forgotten: their prefill chunks and tokens, their drafts and accepted drafts.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Gone {
    prefill_reqs: u32,
    prefill_tokens: i64,
    drafted: u32,
    accepted: u32,
}

/// What the reader gathers while reading the lines.
#[derive(Debug, Default, Clone)]
struct Log {
    tasks: BTreeMap<i64, Task>,
    /// Tasks posted to the queue and not launched yet, with their posting's time and place: most are the server's
    /// own (a `/metrics` read, the main loop's), tens a second, never launched.
    posted: BTreeMap<i64, (i64, Place)>,
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
    /// The earliest step whose record a line changed since a watch last looked (`u64::MAX`: none).
    touched_step: u64,
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

    fn step_mut(&mut self, i: u64) -> Option<&mut Step> {
        i.checked_sub(self.first_step)
            .and_then(|k| self.steps.get_mut(usize::try_from(k).ok()?))
    }

    fn task(&mut self, id: i64, slot: u32, place: Place) -> &mut Task {
        let changed = self.lines;
        let posted = &mut self.posted;
        let t = self.tasks.entry(id).or_insert_with(|| {
            let posting = posted.remove(&id);
            Task {
                slot,
                place: posting.map_or(place, |p| p.1),
                posted_us: posting.map(|p| p.0),
                ..Task::default()
            }
        });
        t.changed = changed;
        t
    }

    /// Notes that step `step`'s record changed.
    fn touch(&mut self, step: u64) {
        self.touched_step = self.touched_step.min(step);
    }

    /// Notes that task `task`'s last chunk's token count may change: the step it went into.
    fn touch_last_chunk(&mut self, task: i64) {
        if let Some(&(_, step)) = self.tasks.get(&task).and_then(|t| t.chunks.last()) {
            self.touch(step);
        }
    }

    fn line(&mut self, raw: &str, place: Place) {
        self.lines += 1;
        let line = strip_ansi(raw);
        let Some((time, _level, m)) = parse_line(&line) else {
            // A piece that holds a newline continues on the next physical line.
            let changed = self.lines;
            if let Some(task) = self.open_piece
                && let Some(t) = self.tasks.get_mut(&task).and_then(|t| {
                    t.changed = changed;
                    t.tokens.last_mut()
                })
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
                        gone: Gone::default(),
                    };
                    // The step before ends no later than this one starts.
                    let next = self.next_step();
                    self.touch(next.saturating_sub(1));
                    self.current_step = Some(next);
                    self.steps.push(step);
                } else if let Some(task) = text
                    .strip_prefix("stop: cancel task, id_task = ")
                    .and_then(|t| t.trim().parse::<i64>().ok())
                    && let Some(t) = self.tasks.get_mut(&task)
                {
                    t.cancelled = true;
                    t.changed = self.lines;
                }
            }
            Tag::Que => {
                if let Some(rest) = text.strip_prefix("new task, id = ") {
                    let id: Option<i64> = rest.split(['/', ',']).next().and_then(|t| t.trim().parse().ok());
                    // The main loop's own NEXT_RESPONSE task is posted with the single-task form and never launched:
                    // it stays a posting with no request.
                    if let Some(id) = id {
                        match self.tasks.get_mut(&id) {
                            Some(t) => {
                                t.posted_us.get_or_insert(us);
                                t.changed = self.lines;
                            }
                            None => {
                                self.posted.entry(id).or_insert((us, place));
                            }
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
        if let Some(step) = self.current_step {
            self.touch(step);
        }
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
            // The chunk goes into the decode this pass makes next: the step after the last one opened. It gives the
            // task's chunk before it its length.
            let next = self.next_step();
            self.touch_last_chunk(task);
            self.touch(next);
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
            self.touch_last_chunk(task);
            self.touch(next);
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
                self.touch(step);
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
    place::place(&log, anchor_us, path, sink);
    Ok(())
}

/// A llama-server log read as it is written (a live view's engine track): its lines fed as they come, the records
/// of what was read made when asked, as [`read`] makes them of the whole file, without reading it again.
#[derive(Debug, Default, Clone)]
pub struct Incremental {
    log: Log,
    /// Lines fed (the next line's number is one more).
    lines: u64,
    /// What a watch's looks placed once and keep ([`Self::builder_of_look`]).
    frozen: Option<Box<frozen::Frozen>>,
    /// Looks that placed everything anew.
    looks_anew: u64,
}

/// What the last look kept from the one before ([`Incremental::builder_of_look`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Kept {
    /// Tasks and steps whose records were kept.
    pub tasks: usize,
    pub steps: u64,
    /// Looks so far that placed everything anew (the first; a line that changed what was kept; the log turning
    /// speculative; many tasks forgotten).
    pub looks_anew: u64,
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
    /// refers to. A task that spoke since is kept whole however long it has run; the steps keep their numbers, and
    /// what the tasks forgotten computed in them. What a long watch keeps in memory is then the last minutes, not
    /// the day. Returns the requests forgotten (the tasks that were launched; the server's own, a `/metrics` read,
    /// are not counted).
    pub fn forget_before(&mut self, cutoff_us: i64) -> usize {
        let log = &mut self.log;
        let (steps, first) = (&log.steps, log.first_step);
        let step_end = |i: u64| {
            i.checked_sub(first)
                .and_then(|k| steps.get(usize::try_from(k).ok()?))
                .map(|s| s.end_us)
        };
        let gone: Vec<i64> = log
            .tasks
            .iter()
            .filter(|(_, t)| {
                let chunk = t.chunks.last().and_then(|&(_, s)| step_end(s));
                let token = t.tokens.last().map(|k| k.3);
                [t.posted_us, t.launched_us, t.released_us, chunk, token]
                    .into_iter()
                    .flatten()
                    .max()
                    .is_some_and(|last| last < cutoff_us)
            })
            .map(|(&id, _)| id)
            .collect();
        // Postings never launched: their posting is all they said.
        log.posted.retain(|_, &mut (us, _)| us >= cutoff_us);
        let mut forgotten = 0;
        for id in gone {
            let Some(t) = log.tasks.remove(&id) else { continue };
            // Requests are counted; the server's own tasks (a /metrics read, NEXT_RESPONSE) are not.
            forgotten += usize::from(t.launched_us.is_some());
            // What it computed in the steps still held stays theirs.
            for (step, tokens) in chunk_tokens(&t) {
                if let Some(s) = log.step_mut(step) {
                    s.gone.prefill_reqs += 1;
                    s.gone.prefill_tokens += tokens;
                }
            }
            for &(step, drafted, accepted) in &t.verified {
                if let Some(s) = log.step_mut(step) {
                    s.gone.drafted += drafted;
                    s.gone.accepted += accepted;
                }
            }
        }
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
        let first = log.first_step;
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

    /// What the last look kept from the one before, and how many placed everything anew.
    pub fn kept(&self) -> Kept {
        let (tasks, steps) = self.frozen.as_ref().map_or((0, 0), |f| f.kept());
        Kept {
            tasks,
            steps,
            looks_anew: self.looks_anew,
        }
    }

    /// Adds the records of the lines fed so far, timed as [`read`] times the file at `path`.
    pub fn place_into(&self, path: &Path, sink: &mut Sink<'_>) {
        place::place(&self.log, anchor_us(path, self.log.last_us), path, sink);
    }

    /// A builder holding the records of the lines fed so far, as a builder given to [`Self::place_into`] (file 0
    /// of the trace) would, for a watch's look: what can no longer change (the tasks released, the steps past) is
    /// placed once and kept from look to look, moved in time when the log's clock is placed anew, cut when
    /// [`Self::forget_before`] forgets it, placed again whole when a line changed it; the rest is placed anew.
    pub fn builder_of_look(&mut self, path: &Path) -> crate::trace::TraceBuilder {
        let anchor_us = anchor_us(path, self.log.last_us);
        let touched = std::mem::replace(&mut self.log.touched_step, u64::MAX);
        let layout = place::Layout::of(&self.log);
        let (frozen, anew) =
            frozen::Frozen::bring_up_to_date(self.frozen.take(), &self.log, &layout, touched, anchor_us, path);
        self.looks_anew += u64::from(anew);
        let mut b = frozen.builder().clone();
        let mut sink = Sink::new(&mut b, 0, super::Kind::LlamacppLog);
        let log = &self.log;
        place::place_rest(
            log,
            &layout,
            anchor_us,
            path,
            &mut sink,
            |id| frozen.holds_task(id),
            frozen.steps_below(),
        );
        self.frozen = Some(frozen);
        b
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

/// Each of a task's prefill chunks that has its length, with the step it went into: up to the next chunk's start,
/// or to the prompt's end for the last chunk (`init sampler` in the same step).
fn chunk_tokens(t: &Task) -> impl Iterator<Item = (u64, i64)> + '_ {
    t.chunks.iter().enumerate().filter_map(|(k, &(c, step))| {
        let end = match t.chunks.get(k + 1) {
            Some(&(next, _)) => Some(next),
            None => t.last_chunk.filter(|&(s, _)| s == step).map(|(_, total)| total),
        };
        end.filter(|&e| e > c).map(|e| (step, e - c))
    })
}

mod frozen;
mod place;
#[cfg(test)]
mod tests;
