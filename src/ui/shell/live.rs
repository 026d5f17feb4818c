//! A recording shown as it is made. The recorder runs on a thread of its own and writes what it receives to its
//! journal as it comes (`record::journal`); the live view reads that journal as it grows (`record::tail`) and, on a
//! builder thread, makes the trace of what was read so far with its findings. A snapshot is made at most every
//! [`MIN_EVERY`], and never more often than twice the time the last one took, so a long run slows the updates down
//! rather than the window. The view is paused, never the recording; stopping ends the recording (streams in flight
//! get the grace period, then are cut) and writes the trace, as `tokenscope record` does.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::TryRecvError;
use std::time::{Duration, Instant};

use eframe::egui;
use tokio::sync::watch;

use crate::analysis::findings::{Finding, Thresholds, find};
use crate::analysis::summary::Slo;
use crate::load::Loaded;
use crate::record::fresh::Fresh;
use crate::record::prompts::Prompt;
use crate::record::server_tail::ServerLogTail;
use crate::record::tail::{self, JournalTail};
use crate::record::{self, RecordOptions};
use crate::ui::widgets::job::Job;

/// The shortest time between two snapshots.
pub const MIN_EVERY: Duration = Duration::from_millis(50);
/// How often the journal's length is looked at, to wake the window when it grew: about a frame.
const WATCH_EVERY: Duration = Duration::from_millis(16);

/// What a live recording needs: the recorder's options (their journal set), its prompts, and where its trace goes.
#[derive(Debug, Clone)]
pub struct LiveOptions {
    /// The recorder's options; `journal` must be set (`cli::record::prepare` does).
    pub options: RecordOptions,
    /// The prompts.
    pub prompts: Vec<Prompt>,
    /// The trace written when the recording ends.
    pub output: PathBuf,
    /// The raw capture of every stream, when asked for.
    pub raw: Option<PathBuf>,
    /// The server's log, joined with the recording when it ends.
    pub server_log: Option<PathBuf>,
}

/// Where the recording is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// Sending requests and receiving their streams.
    Recording,
    /// Stop was asked: no new requests; streams in flight end within the grace period.
    Stopping,
    /// Ended, with what was written (or why not).
    Ended(String),
}

/// One version of the growing trace, with its findings.
pub struct Snapshot {
    /// The trace of what was recorded so far.
    pub loaded: Loaded,
    /// Its findings, for the objectives and thresholds they were computed with, and from when they are provisional.
    pub findings: Findings,
    /// How far the journal's reading was.
    pub progress: tail::Progress,
    /// The latest time it holds, Unix ns.
    pub latest_ns: Option<i64>,
    /// The earliest send of a request still streaming: findings from here on may still change.
    pub open_from_ns: Option<i64>,
    /// How long it took to make.
    pub took: Duration,
    /// True for the recording's own trace, made when it ended (it holds everything; a rotating recording's, its
    /// last part).
    pub is_final: bool,
    /// A rotating recording's parts written so far: their requests left the journal, the recorder and this
    /// snapshot, and are read again from disk when asked for.
    pub spilled: Arc<Vec<SpilledPart>>,
}

/// A part of a rotating recording, on disk: what its footer says of it.
#[derive(Debug, Clone, PartialEq)]
pub struct SpilledPart {
    /// Its file.
    pub path: PathBuf,
    /// The earliest and latest time it holds (a send, a token), Unix ns, when its footer says.
    pub first_ns: Option<i64>,
    pub last_ns: Option<i64>,
    /// Its size on disk, bytes.
    pub bytes: u64,
}

/// A part's findings, computed once from its file (on the part alone: a finding whose window crosses into the next
/// part is seen in each of them as far as it reaches): how many of each severity, and the first few in words.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PartFindings {
    /// Findings by severity: critical, warning, info.
    pub counts: [usize; 3],
    /// The first few, most severe first.
    pub first: Vec<String>,
}

impl PartFindings {
    /// Of these findings.
    pub fn of(findings: &[Finding]) -> Self {
        let mut counts = [0; 3];
        for f in findings {
            counts[f.severity as usize] += 1;
        }
        let mut sorted: Vec<&Finding> = findings.iter().collect();
        sorted.sort_by_key(|f| f.severity);
        PartFindings {
            counts,
            first: sorted.iter().take(5).map(|f| f.summary.clone()).collect(),
        }
    }

    /// "1 critical, 2 warnings", "no findings".
    pub fn said(&self) -> String {
        let [c, w, i] = self.counts;
        let parts: Vec<String> = [
            (c, "critical", "critical"),
            (w, "warning", "warnings"),
            (i, "info", "info"),
        ]
        .into_iter()
        .filter(|&(n, _, _)| n > 0)
        .map(|(n, one, many)| format!("{n} {}", if n == 1 { one } else { many }))
        .collect();
        if parts.is_empty() {
            "no findings".to_owned()
        } else {
            parts.join(", ")
        }
    }
}

/// The journal's reader and, for a rotating recording, the parts found so far: what a snapshot's thread takes and
/// gives back.
struct Reading {
    tail: JournalTail,
    /// The directory of a rotating recording's parts.
    parts_dir: Option<PathBuf>,
    /// The parts found, shared with the snapshots (copied only when a part is added).
    spilled: Arc<Vec<SpilledPart>>,
    /// The server's log of the run, joined with every snapshot: the live engine track.
    server: Option<ServerLogTail>,
}

impl Reading {
    /// Looks for parts written since the last look; each one's footer is read once. Parts come into place in the
    /// order of their numbers, so those past the ones found are new.
    fn find_parts(&mut self) {
        let Some(dir) = &self.parts_dir else { return };
        for path in record::rotate::parts_in(dir).into_iter().skip(self.spilled.len()) {
            let footer = crate::format::parquet::footer(&path).unwrap_or_default();
            let bytes = std::fs::metadata(&path).map_or(0, |m| m.len());
            Arc::make_mut(&mut self.spilled).push(SpilledPart {
                path,
                first_ns: footer.first_ns,
                last_ns: footer.last_ns,
                bytes,
            });
        }
    }
}

pub use crate::ui::views::findings::SnapshotFindings as Findings;

/// What a snapshot's thread gives back: the reading, the snapshot when there is one, and why the journal could not
/// be read, when it could not.
type Built = (Reading, Option<Snapshot>, Option<String>);

/// The recorder's result: the recording and how writing it went.
type Recorded = Result<(record::Recording, Result<record::Written, String>), String>;

/// A recording being made and shown.
pub struct Live {
    /// The server, as shown.
    pub url: String,
    /// The recording's journal.
    pub journal: PathBuf,
    /// The trace written at the end (a rotating recording's directory of parts).
    pub output: PathBuf,
    /// A rotating recording's directory of parts: its requests leave memory as each part is written.
    pub rotating: Option<PathBuf>,
    stop: watch::Sender<bool>,
    recorder: Option<Job<Recorded>>,
    /// The journal's reader (and a rotating recording's parts), while no builder has it.
    reading: Option<Reading>,
    /// The journal's tokens since the snapshot on screen, read every frame: drawn over the snapshot.
    pub fresh: Fresh,
    /// Wakes the window when the journal grows (a frame after a chunk is written, and no frame while nothing is);
    /// runs while this is true.
    watching: Arc<AtomicBool>,
    building: Option<Job<Built>>,
    /// The recording's own trace, to be shown once the recorder ended (after the builder in flight).
    last: Option<Loaded>,
    built_at: Option<Instant>,
    build_took: Duration,
    /// Where the recording is.
    pub phase: Phase,
    /// How far the journal's reading was at the last snapshot.
    pub progress: tail::Progress,
    /// The view follows the present (off once the user moves it).
    pub follow: crate::ui::shell::follow::Follow,
    /// New snapshots are not shown (the recording goes on).
    pub paused: bool,
    /// Snapshots made while paused, not shown.
    pub unseen: usize,
    /// When the recording started.
    pub started: Instant,
    /// The chunk arrival the view last showed, Unix ns; the earliest send still streaming.
    pub shown: (Option<i64>, Option<i64>),
    /// Show the next snapshot over another trace opened meanwhile, and make it even if nothing new was read.
    pub show_again: bool,
    /// Why the view stopped updating, when it did.
    pub failed: Option<String>,
    /// A rotating recording's parts written so far, as the last snapshot found them.
    pub spilled: Arc<Vec<SpilledPart>>,
    /// The findings of each part on disk, computed once per part on a thread of their own, one part at a time (an
    /// error: the part could not be read).
    pub part_findings: std::collections::HashMap<PathBuf, Result<PartFindings, String>>,
    part_job: Option<(PathBuf, Job<Result<PartFindings, String>>)>,
    /// What waits for the journal's disk: when the disk cannot keep up, the streams are held (nothing is dropped)
    /// and the live bar says so.
    pub backlog: Arc<record::journal::Backlog>,
    /// When a signal (Ctrl-C, SIGTERM) came, during the recording or after it: the window is to close (the recording
    /// is stopped and written first, as when the window is closed).
    pub close_from: Option<Instant>,
    /// Set by the thread that waits for a signal while the window is open.
    signalled: Arc<AtomicBool>,
    /// The earliest time of any snapshot shown, Unix ns: the view's zero, kept when the oldest requests leave
    /// memory with a part; and the earliest time of the snapshot on screen, where what is in memory begins.
    pub origin: Option<i64>,
    pub in_memory_from: Option<i64>,
}

impl Live {
    /// Starts recording; the recorder and the first snapshot wake `waker` when they have something to show.
    ///
    /// # Errors
    /// The options have no journal, or the recorder's thread could not start.
    pub fn start(live: LiveOptions, waker: Option<&egui::Context>) -> Result<Live, String> {
        let journal = live
            .options
            .journal
            .clone()
            .ok_or_else(|| "a live recording needs its journal (the options have none)".to_owned())?;
        let (stop, stop_rx) = watch::channel(false);
        let url = record::shown_url(&live.options.url);
        let output = live.output.clone();
        let server = live.server_log.as_deref().map(ServerLogTail::new);
        let rotating = live.options.rotate.as_ref().map(|r| r.dir.clone());
        let backlog = Arc::clone(&live.options.backlog);
        // Woken when the journal grows; without the watcher (its thread could not start) the window still looks
        // every 100 ms.
        let watching = Arc::new(AtomicBool::new(true));
        if let Some(ctx) = waker {
            let _ = watch(&journal, ctx, Arc::clone(&watching));
        }
        // In a window: Ctrl-C or SIGTERM closes it, during the recording or after it; its closing stops the recording
        // and writes it.
        let signalled = Arc::new(AtomicBool::new(false));
        if let Some(ctx) = waker {
            let _ = wait_for_signal(ctx, Arc::clone(&signalled));
        }
        let recorder = Job::spawn("recorder", waker, move || {
            let rec =
                record::run_recording(&live.options, &live.prompts, false, Some(stop_rx)).map_err(|e| e.to_string())?;
            if live.options.rotate.is_some() {
                return Ok(ended_rotating(rec, live.options.journal.as_deref()));
            }
            let finish = record::Finish {
                raw: live.raw.as_ref(),
                server_log: live.server_log.as_deref(),
                output: &live.output,
            };
            let written = finish.write(&rec);
            Ok((rec, written))
        })?;
        Ok(Live {
            url,
            watching,
            reading: Some(Reading {
                tail: JournalTail::new(&journal),
                parts_dir: rotating.clone(),
                spilled: Arc::default(),
                server,
            }),
            rotating,
            fresh: Fresh::new(&journal),
            journal,
            output,
            stop,
            recorder: Some(recorder),
            building: None,
            last: None,
            built_at: None,
            build_took: Duration::ZERO,
            phase: Phase::Recording,
            progress: tail::Progress::default(),
            follow: crate::ui::shell::follow::Follow::default(),
            paused: false,
            unseen: 0,
            started: Instant::now(),
            shown: (None, None),
            show_again: false,
            failed: None,
            spilled: Arc::default(),
            close_from: None,
            signalled,
            backlog,
            part_findings: std::collections::HashMap::new(),
            part_job: None,
            origin: None,
            in_memory_from: None,
        })
    }

    /// Stops the recording: no new requests, streams in flight get the grace period. Everything received is kept.
    pub fn stop(&mut self) {
        if self.phase == Phase::Recording {
            let _ = self.stop.send(true);
            self.phase = Phase::Stopping;
        }
    }

    /// True until the recording ended and its own trace was handed out.
    pub fn running(&self) -> bool {
        !matches!(self.phase, Phase::Ended(_)) || self.last.is_some() || self.building.is_some()
    }

    /// The next snapshot to show, when there is one; starts the next when it is due. `slo` and `thresholds` are
    /// what the findings are computed with.
    pub fn poll(&mut self, waker: Option<&egui::Context>, slo: Slo, thresholds: Thresholds) -> Option<Snapshot> {
        let mut ready = None;
        match self.building.as_ref().map(Job::try_recv) {
            Some(Ok((reading, snapshot, unread))) => {
                self.building = None;
                self.reading = Some(reading);
                self.failed = unread;
                if let Some(s) = snapshot {
                    self.build_took = s.took;
                    self.progress = s.progress;
                    self.spilled = Arc::clone(&s.spilled);
                    ready = Some(s);
                }
            }
            // The snapshot's thread died (a bug): the view stops updating and says so; the recording goes on and is
            // written when it ends.
            Some(Err(TryRecvError::Disconnected)) => {
                self.building = None;
                self.failed =
                    Some("the live view stopped updating (its snapshot failed); the recording goes on".to_owned());
            }
            Some(Err(TryRecvError::Empty)) | None => {}
        }
        let recorded = match self.recorder.as_ref().map(Job::try_recv) {
            Some(Ok(result)) => Some(result),
            Some(Err(TryRecvError::Disconnected)) => Some(Err("the recorder stopped without a result".to_owned())),
            Some(Err(TryRecvError::Empty)) | None => None,
        };
        if let Some(result) = recorded {
            self.recorder = None;
            self.watching.store(false, Ordering::Relaxed);
            self.phase = Phase::Ended(match &result {
                Ok((rec, Ok(_))) if self.rotating.is_some() => format!(
                    "wrote {} parts to {}: {}",
                    rec.parts.paths.len(),
                    self.output.display(),
                    record::summary_line(rec)
                ),
                Ok((rec, Ok(_))) => format!("wrote {}: {}", self.output.display(), record::summary_line(rec)),
                Ok((rec, Err(e))) => format!("{}; not written: {e}", record::summary_line(rec)),
                Err(e) => format!("the recording could not run: {e}"),
            });
            if let Ok((rec, written)) = result {
                let trace = written.map_or(rec.trace, |w| w.trace);
                self.last = Some(Loaded {
                    trace,
                    report: rec.report,
                });
            }
        }
        if self.building.is_none() {
            let (start_final, due) = match (&self.last, &self.phase) {
                (Some(_), _) => (true, true),
                (None, Phase::Ended(_)) => (false, false),
                (None, _) => (
                    false,
                    self.built_at
                        .is_none_or(|t| t.elapsed() >= MIN_EVERY.max(self.build_took * 2)),
                ),
            };
            if due && let Some(reading) = self.reading.take() {
                let last = if start_final { self.last.take() } else { None };
                self.built_at = Some(Instant::now());
                let force = self.show_again;
                let work = move || build(reading, last, force, (slo, thresholds));
                match Job::spawn("live snapshot", waker, work) {
                    Ok(job) => self.building = Some(job),
                    Err(e) => self.phase = Phase::Ended(format!("cannot read the journal: {e}")),
                }
            }
        }
        if self.signalled.load(Ordering::Relaxed) && self.close_from.is_none() {
            self.close_from = Some(Instant::now());
        }
        self.find_in_parts(waker, slo, thresholds);
        if self.paused && ready.is_some() {
            self.unseen += 1;
            return None;
        }
        ready
    }

    /// Takes the findings of the part whose thread ended, and starts the next part's.
    fn find_in_parts(&mut self, waker: Option<&egui::Context>, slo: Slo, thresholds: Thresholds) {
        if let Some((path, job)) = &self.part_job {
            let done = match job.try_recv() {
                Ok(found) => Some(found),
                Err(TryRecvError::Disconnected) => Some(Err("its findings could not be computed".to_owned())),
                Err(TryRecvError::Empty) => None,
            };
            if let Some(found) = done {
                self.part_findings.insert(path.clone(), found);
                self.part_job = None;
            }
        }
        if self.part_job.is_some() {
            return;
        }
        // Parts are found in order: the first without findings is the one after the last with.
        let Some(next) = self.spilled.get(self.part_findings.len()) else {
            return;
        };
        let path = next.path.clone();
        let file = path.clone();
        let work = move || {
            let loaded = crate::load::load(&file, &crate::ingest::Progress::default()).map_err(|e| e.to_string())?;
            Ok(PartFindings::of(&find(&loaded.trace, &slo, &thresholds)))
        };
        match Job::spawn("part findings", waker, work) {
            Ok(job) => self.part_job = Some((path, job)),
            Err(e) => {
                self.part_findings.insert(path, Err(e));
            }
        }
    }

    /// Waits for the snapshot being made (tests use this).
    pub fn wait_snapshot(&self) {
        if let Some(job) = &self.building {
            job.wait();
        }
    }
}

impl Drop for Live {
    /// The window closed during the run: the recording stops as Stop does, and what was recorded is written before
    /// the window's process ends (streams in flight get the grace period).
    fn drop(&mut self) {
        self.watching.store(false, Ordering::Relaxed);
        self.stop();
        if let Some(job) = &self.recorder {
            job.wait();
        }
    }
}

/// Sets `signalled` and wakes `ctx` when Ctrl-C or SIGTERM comes, on a thread of its own (with a runtime of its
/// own: the recorder's ends with the recording, and listens for no signal when it has a caller's stop).
fn wait_for_signal(ctx: &egui::Context, signalled: Arc<AtomicBool>) -> Result<(), String> {
    let ctx = ctx.clone();
    let job = Job::spawn("signals", None, move || {
        let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_io().build() else {
            return;
        };
        runtime.block_on(record::signal());
        signalled.store(true, Ordering::Relaxed);
        ctx.request_repaint();
        // A second one while the recording is written: out at once, as without the app (the journal is on disk and
        // opens as a trace).
        runtime.block_on(record::signal());
        std::process::exit(130);
    })?;
    // The thread ends with the process, or at the signal; nothing waits for it.
    drop(job);
    Ok(())
}

/// Wakes `ctx` whenever the journal at `path` grew, looking every [`WATCH_EVERY`] while `watching` holds.
fn watch(path: &Path, ctx: &egui::Context, watching: Arc<AtomicBool>) -> Result<(), String> {
    let (path, ctx) = (path.to_owned(), ctx.clone());
    let job = Job::spawn("journal watch", None, move || {
        let mut seen = 0;
        while watching.load(Ordering::Relaxed) {
            let len = std::fs::metadata(&path).map_or(0, |m| m.len());
            if len != seen {
                seen = len;
                ctx.request_repaint();
            }
            std::thread::sleep(WATCH_EVERY);
        }
    })?;
    // The thread ends by itself once `watching` is false; nothing waits for it.
    drop(job);
    Ok(())
}

/// Reads what the journal gained and makes its snapshot, or the recording's own trace at the end; no snapshot when
/// nothing new was read (unless `force`), or no request yet.
fn build(mut reading: Reading, last: Option<Loaded>, force: bool, (slo, thresholds): (Slo, Thresholds)) -> Built {
    let started = Instant::now();
    reading.find_parts();
    let tail = &mut reading.tail;
    let (progress, unread) = match tail.poll() {
        Ok(p) => (p, None),
        Err(e) => (
            tail::Progress::default(),
            Some(format!("cannot read the journal {}: {e}", tail.path().display())),
        ),
    };
    let grew = (force || progress.fresh > 0) && progress.requests > 0;
    let is_final = last.is_some();
    let (loaded, open_from_ns) = match last {
        Some(loaded) => (loaded, None),
        None if grew => {
            let loaded = tail.snapshot();
            let open = open_from(&loaded.trace);
            let loaded = match reading.server.as_mut() {
                Some(log) => with_server_log(loaded, log),
                None => loaded,
            };
            (loaded, open)
        }
        None => return (reading, None, unread),
    };
    let findings = find(&loaded.trace, &slo, &thresholds);
    let latest_ns = tail.latest_ns();
    let snapshot = Snapshot {
        loaded,
        findings: (findings, slo, thresholds, open_from_ns),
        progress,
        latest_ns,
        open_from_ns,
        took: started.elapsed(),
        is_final,
        spilled: Arc::clone(&reading.spilled),
    };
    (reading, Some(snapshot), unread)
}

/// The end of a rotating live recording: every request that ended is in a part, so the journal is removed, and the
/// trace shown at the end is the last part (the earlier ones are opened from the live bar, or the directory as one
/// trace).
fn ended_rotating(
    rec: record::Recording,
    journal: Option<&Path>,
) -> (record::Recording, Result<record::Written, String>) {
    if let Some(j) = journal {
        let _ = std::fs::remove_file(j);
    }
    let last = rec.parts.paths.last().map_or_else(
        || Err("no part was written".to_owned()),
        |path| {
            crate::load::load(path, &crate::ingest::Progress::default())
                .map(|loaded| record::Written {
                    trace: loaded.trace,
                    notes: String::new(),
                })
                .map_err(|e| e.to_string())
        },
    );
    (rec, last)
}

/// The snapshot joined with the server's log as written so far (its engine track); the snapshot alone, with the
/// reason in its notes, while they do not join.
fn with_server_log(loaded: Loaded, log: &mut ServerLogTail) -> Loaded {
    let unread = log.poll().err();
    let (mut loaded, alone) = match log.loaded() {
        Some(server) => record::join_loaded(loaded, server, log.path()),
        None => (
            loaded,
            Some(
                unread
                    .clone()
                    .unwrap_or_else(|| "it has nothing to read yet".to_owned()),
            ),
        ),
    };
    if let Some(why) = alone.or(unread) {
        loaded
            .report
            .notes
            .push(format!("the server's log is not joined with the recording yet: {why}"));
    }
    loaded
}

/// The earliest send of a request still streaming (no end yet).
fn open_from(trace: &crate::trace::Trace) -> Option<i64> {
    (0..trace.request_count())
        .filter(|&r| trace.requests.finished_ns.at(r).is_none())
        .map(|r| trace.requests.arrival_ns[r])
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parts_findings_are_said_by_severity() {
        let said = |counts| {
            PartFindings {
                counts,
                first: Vec::new(),
            }
            .said()
        };
        assert_eq!(said([0, 0, 0]), "no findings");
        assert_eq!(said([1, 2, 0]), "1 critical, 2 warnings");
        assert_eq!(said([0, 1, 3]), "1 warning, 3 info");
    }
}
