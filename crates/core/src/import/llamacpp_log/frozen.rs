//! What a watch's looks at a llama-server log keep from one to the next: the records of the tasks released and of
//! the steps past, placed once in a builder of their own. A look clones it and places only the tasks still running
//! and the last steps (`Incremental::builder_of_look`), so its cost follows what is running, not the window held.
//!
//! It is the whole read's records exactly (the tests place both and compare): a placed record changes only if a
//! line changes what it was made of, and then the builder is placed again whole: a placed task that a line spoke of
//! again, a placed step a line changed (`Log::touched_step`), the log turning speculative (every token's role is
//! then said). The clock placed anew moves every time; what the log forgets is cut.

use std::path::{Path, PathBuf};

use rustc_hash::FxHashMap;

use super::Log;
use super::place::{Layout, place_meta, place_steps, place_task};
use crate::import::{Kind, Sink};
use crate::trace::TraceBuilder;
use crate::trace::report::{Encoding, SourceFile};

/// Request labels a builder may keep of the tasks it dropped (its interner keeps them) before it is made again.
const DROPPED_AT_MOST: usize = 4_096;

/// The records kept from look to look.
#[derive(Debug, Clone)]
pub(super) struct Frozen {
    builder: TraceBuilder,
    path: PathBuf,
    /// The tasks placed, with their request id's label.
    tasks: FxHashMap<i64, u32>,
    /// Steps numbered below this are placed (from the log's first step when it was last cut).
    below: u64,
    /// The log's first step when it was last cut.
    first: u64,
    /// The clock the records were placed with.
    anchor_us: i64,
    speculative: bool,
    /// The log's line count when it was last brought up to date: a task changed since is placed again.
    mark: u64,
    /// Tasks dropped since it was made.
    dropped: usize,
}

impl Frozen {
    /// `kept` (the last look's) brought up to date with `log`: cut of what the log forgot, moved to the clock
    /// `anchor_us`, added what can no longer change; made anew when a line changed what it placed. `touched`: the
    /// earliest step a line changed since the last look.
    pub(super) fn bring_up_to_date(
        kept: Option<Box<Frozen>>,
        log: &Log,
        layout: &Layout,
        touched: u64,
        anchor_us: i64,
        path: &Path,
    ) -> (Box<Frozen>, bool) {
        let still = kept.filter(|f| {
            f.path == path
                && f.speculative == log.speculative
                && touched >= f.below
                && f.dropped <= DROPPED_AT_MOST
                && f.tasks
                    .keys()
                    .all(|id| log.tasks.get(id).is_none_or(|t| t.changed <= f.mark))
        });
        let anew = still.is_none();
        let mut f = still.unwrap_or_else(|| Box::new(Frozen::new(log, anchor_us, path)));
        f.forget(log);
        if f.anchor_us != anchor_us {
            f.builder.shift_times((anchor_us - f.anchor_us).saturating_mul(1_000));
            f.anchor_us = anchor_us;
        }
        f.add(log, layout);
        f.mark = log.lines;
        (f, anew)
    }

    /// An empty one: the source file and the trace's engine and clock.
    fn new(log: &Log, anchor_us: i64, path: &Path) -> Self {
        let mut builder = TraceBuilder::default();
        builder.report.files.push(SourceFile {
            path: path.display().to_string(),
            encoding: Encoding::Jsonl,
        });
        place_meta(&mut Sink::new(&mut builder, 0, Kind::LlamacppLog));
        Frozen {
            builder,
            path: path.to_owned(),
            tasks: FxHashMap::default(),
            below: log.first_step,
            first: log.first_step,
            anchor_us,
            speculative: log.speculative,
            mark: log.lines,
            dropped: 0,
        }
    }

    /// Cuts what the log forgot: its tasks, and the steps before its first.
    fn forget(&mut self, log: &Log) {
        let gone: rustc_hash::FxHashSet<u32> = self
            .tasks
            .iter()
            .filter(|(id, _)| !log.tasks.contains_key(id))
            .map(|(_, &label)| label)
            .collect();
        if gone.is_empty() && log.first_step == self.first {
            return;
        }
        let first = i64::try_from(log.first_step).unwrap_or(i64::MAX);
        self.tasks.retain(|_, label| !gone.contains(label));
        self.dropped += gone.len();
        self.builder
            .drop_records(|label| gone.contains(&label), |_, iteration| iteration < first);
        self.first = log.first_step;
        self.below = self.below.max(log.first_step);
    }

    /// Places the steps that can no longer change and the tasks released whose chunks are all in them.
    fn add(&mut self, log: &Log, layout: &Layout) {
        // The last step may still grow; a task's last chunk without its length yet will give it, in its step.
        let last = log.next_step().saturating_sub(1);
        let unresolved = log
            .tasks
            .values()
            .filter(|t| t.released_us.is_none())
            .filter_map(|t| {
                let &(_, step) = t.chunks.last()?;
                t.last_chunk.is_none_or(|(s, _)| s != step).then_some(step)
            })
            .min();
        let below = last.min(unresolved.unwrap_or(u64::MAX)).max(self.below);
        let ready: Vec<i64> = log
            .tasks
            .iter()
            .filter(|(id, t)| {
                t.released_us.is_some()
                    && t.launched_us.is_some()
                    && !self.tasks.contains_key(id)
                    && t.chunks.iter().all(|&(_, s)| s < below)
                    && t.last_chunk.is_none_or(|(s, _)| s < below)
            })
            .map(|(&id, _)| id)
            .collect();
        if ready.is_empty() && below == self.below {
            return;
        }
        let mut sink = Sink::new(&mut self.builder, 0, Kind::LlamacppLog);
        for id in ready {
            if let Some(t) = log.tasks.get(&id) {
                place_task(log, layout, self.anchor_us, id, t, &mut sink);
                let label = sink.b.labels.intern(&format!("task-{id}"));
                self.tasks.insert(id, label);
            }
        }
        place_steps(log, layout, self.anchor_us, self.below..below, &mut sink);
        self.below = below;
    }

    /// What is kept, in builder form.
    pub(super) fn builder(&self) -> &TraceBuilder {
        &self.builder
    }

    /// True when task `id`'s records are kept.
    pub(super) fn holds_task(&self, id: i64) -> bool {
        self.tasks.contains_key(&id)
    }

    /// The first step not kept.
    pub(super) fn steps_below(&self) -> u64 {
        self.below
    }

    /// The tasks and steps kept.
    pub(super) fn kept(&self) -> (usize, u64) {
        (self.tasks.len(), self.below - self.first.min(self.below))
    }
}
