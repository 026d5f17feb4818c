//! A server's log watched in the app (File > Watch a server's log…, or `tokenscope watch` without `--json`): the
//! flight recorder's loop ([`crate::record::watcher`]) runs on a thread of its own, a look when the log grows (0.1 s
//! apart at least) or every interval, and hands the window what each look judged when the log said something new: the
//! trace held (the last `keep_s` of the log, with the `/metrics` readings) and its findings, and the new findings and
//! notes said, for the watch bar. Nothing is sent to the server; stopping the watch writes the ring's pending part.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;

use eframe::egui;

use crate::analysis::findings::Finding;
use crate::load::Loaded;
use crate::record::watcher::{Note, WatchOptions, Watcher, latest_ns};
use crate::ui::widgets::job::Job;

/// The lines said kept for the watch bar's list.
const SAID_AT_MOST: usize = 200;

/// What the watch's thread hands the window: a look's trace as soon as it is read (a line read reaches the screen
/// without waiting for the findings), then what judging it found.
enum Handed {
    Read {
        loaded: Box<Loaded>,
        latest_ns: i64,
    },
    Judged {
        findings: Vec<Finding>,
        said: Vec<String>,
        summary: String,
    },
}

/// What the window is to show of the looks handed since it last asked.
#[derive(Default)]
pub struct Look {
    /// The trace held (the last `keep_s` of the log, with the metrics' readings) and its report, and the latest time
    /// it holds (Unix ns), when a new one was read.
    pub read: Option<(Loaded, i64)>,
    /// Its findings once judged; without a trace read, those of the trace on screen.
    pub findings: Option<Vec<Finding>>,
}

/// A watch shown in the window.
pub struct Watching {
    /// The log watched.
    pub log: PathBuf,
    looks: Receiver<Handed>,
    stop: Arc<AtomicBool>,
    running: Arc<AtomicBool>,
    /// Asks the watch's thread for its next look even when nothing is new.
    resend: Arc<AtomicBool>,
    /// The watch's thread (it ends on its own once stopped).
    _job: Job<()>,
    /// Everything said so far, oldest first (the last [`SAID_AT_MOST`]).
    pub said: Vec<String>,
    /// How the watch goes, as of the last look handed over.
    pub summary: String,
    /// The view follows the present (off once the user moves it).
    pub follow: crate::ui::shell::follow::Follow,
    /// A look was shown: another trace opened since stays on screen until the watch is asked for again.
    pub shown: bool,
    /// Show the next look over another trace opened meanwhile.
    pub show_again: bool,
    /// The earliest time of any look shown, Unix ns: the view's zero, kept as the oldest requests are forgotten.
    pub origin: Option<i64>,
}

impl Watching {
    /// Starts watching; each look with news wakes `waker`.
    ///
    /// # Errors
    /// The watch cannot start (its incidents folder, its metrics client, its thread): why.
    pub fn start(options: WatchOptions, waker: Option<&egui::Context>) -> Result<Self, String> {
        // The watch's name in the window: its log, else where its spans come.
        let log = PathBuf::from(options.watched());
        let mut watcher = Watcher::new(options)?;
        let (tx, looks) = std::sync::mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let running = Arc::new(AtomicBool::new(true));
        let resend = Arc::new(AtomicBool::new(false));
        let (stop_rx, running_tx, waker) = (Arc::clone(&stop), Arc::clone(&running), waker.cloned());
        let resend_rx = Arc::clone(&resend);
        let job = Job::spawn("watch", None, move || {
            let mut shown: Option<(i64, usize)> = None;
            // What writing the last look's incident files found wrong, said with the next look.
            let mut unwritten: Vec<Note> = Vec::new();
            loop {
                let last = stop_rx.load(Ordering::Relaxed);
                let mut notes = watcher.read(last);
                notes.splice(0..0, std::mem::take(&mut unwritten));
                // The trace read goes to the window first.
                let now = watcher.trace().map(|t| (latest_ns(t), t.request_count()));
                let fresh = now != shown || resend_rx.swap(false, Ordering::Relaxed);
                if fresh {
                    shown = now;
                    if let (Some(trace), Some((latest_ns, _))) = (watcher.trace(), now) {
                        let loaded = Loaded {
                            trace: trace.clone(),
                            report: watcher.report().cloned().unwrap_or_default(),
                        };
                        if tx
                            .send(Handed::Read {
                                loaded: Box::new(loaded),
                                latest_ns,
                            })
                            .is_err()
                        {
                            break;
                        }
                        if let Some(ctx) = &waker {
                            ctx.request_repaint();
                        }
                    }
                }
                // Then what judging it found.
                let (new, judged) = watcher.judge();
                notes.extend(judged);
                let said = said_of(&new, notes);
                if fresh || !said.is_empty() {
                    let judged = Handed::Judged {
                        findings: watcher.findings().to_vec(),
                        said,
                        summary: format!("watching {}", watcher.summary()),
                    };
                    if tx.send(judged).is_err() {
                        break;
                    }
                    if let Some(ctx) = &waker {
                        ctx.request_repaint();
                    }
                }
                // The window has the look: now the incident files it found due.
                unwritten = watcher.write_due();
                if last {
                    break;
                }
                watcher.wait(|| stop_rx.load(Ordering::Relaxed));
            }
            running_tx.store(false, Ordering::Relaxed);
        })
        .map_err(|e| format!("cannot start the watch's thread: {e}"))?;
        Ok(Watching {
            summary: format!("watching {} (nothing is sent to the server)", log.display()),
            log,
            looks,
            stop,
            running,
            resend,
            _job: job,
            said: Vec::new(),
            follow: crate::ui::shell::follow::Follow::default(),
            shown: false,
            show_again: false,
            origin: None,
        })
    }

    /// What was handed over since the last call: the latest trace read (those before it are only said), its
    /// findings when judged; `None` when nothing came.
    pub fn poll(&mut self) -> Option<Look> {
        let mut look: Option<Look> = None;
        while let Ok(handed) = self.looks.try_recv() {
            match handed {
                Handed::Read { loaded, latest_ns } => {
                    look = Some(Look {
                        read: Some((*loaded, latest_ns)),
                        findings: None,
                    });
                }
                Handed::Judged {
                    findings,
                    said,
                    summary,
                } => {
                    self.said.extend(said);
                    self.summary = summary;
                    look.get_or_insert_with(Look::default).findings = Some(findings);
                }
            }
        }
        let over = self.said.len().saturating_sub(SAID_AT_MOST);
        self.said.drain(..over);
        look
    }

    /// Shows the next look over another trace opened meanwhile, made at the next look even if nothing is new.
    pub fn show_again(&mut self) {
        self.show_again = true;
        self.follow.again();
        self.resend.store(true, Ordering::Relaxed);
    }

    /// Stops the watch after one last look (which writes the ring's pending part).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// True until the watch's thread ended.
    pub fn running(&self) -> bool {
        self.running.load(Ordering::Relaxed)
    }
}

/// What a look said, for the watch bar: each new finding ("finding 3: Decode interrupted by prefill (critical), kept
/// in …"), a restart, a trouble.
fn said_of(new: &[crate::record::watcher::New], notes: Vec<Note>) -> Vec<String> {
    let mut said: Vec<String> = new
        .iter()
        .map(|n| {
            let kept = n
                .file
                .as_ref()
                .map_or_else(String::new, |p| format!(", kept in {}", p.display()));
            format!(
                "finding {}: {} ({}){kept}",
                n.number,
                n.finding.kind.title(),
                n.finding.severity.name()
            )
        })
        .collect();
    said.extend(notes.into_iter().map(|n| match n {
        Note::Restarted => "the server started again: its new run is read afresh".to_owned(),
        Note::Trouble(e) => e,
    }));
    said
}

impl Drop for Watching {
    fn drop(&mut self) {
        self.stop();
    }
}
