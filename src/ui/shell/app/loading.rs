//! Loading: a trace (or the B side of a comparison, or a server's log to watch) read on a thread with its
//! progress, the file dialog's answer waited for without blocking a frame, and what a finished load becomes.

use super::*;

impl App {
    /// Starts loading a trace on a background thread.
    pub(super) fn load(&mut self, source: TraceSource, purpose: Purpose) {
        if let Some(old) = self.background.loading.take() {
            old.progress.cancel();
        }
        // With no trace on screen, the one loading is drawn as it is read.
        self.preview = None;
        let progress = if purpose == Purpose::Show && self.session.is_none() {
            let (preview, progress) = Preview::start(self.ctx.as_ref(), self.settings.order);
            self.preview = Some(preview);
            Arc::new(progress)
        } else {
            Arc::new(Progress::default())
        };
        // One set of options for every source; a part of a trace adds its window.
        let options = load::LoadOptions {
            lazy_candidates: true,
            budget: Some(self.memory_budget()),
            from: self.importer.take(),
            log_clock: self.log_clock,
            ..load::LoadOptions::default()
        };
        // A what-if replays the trace on screen.
        let shown = self.session.as_ref().map(|s| Arc::clone(&s.view.trace));
        let worker = (Arc::clone(&progress), source.clone());
        let judged = (self.settings.slo, self.settings.thresholds);
        let spawned = Job::spawn("trace-loader", self.ctx.as_ref(), move || {
            let (progress, source) = worker;
            let result = match &source {
                TraceSource::Path(p) | TraceSource::Live { journal: p, .. } | TraceSource::Watch { log: p } => {
                    load::load_with(p, &progress, options)
                }
                TraceSource::Part(p, window) => load::load_with(
                    p,
                    &progress,
                    load::LoadOptions {
                        window: Some(Arc::new(window.clone())),
                        ..options
                    },
                ),
                TraceSource::Paths(ps) => {
                    load::load_many(&ps.iter().map(PathBuf::as_path).collect::<Vec<_>>(), &progress, options)
                }
                TraceSource::WhatIf { settings } => what_if::replay(shown.as_deref(), settings),
                TraceSource::Demo => Ok(load::Loaded {
                    trace: crate::synth::demo(),
                    report: crate::trace::report::Report::default(),
                }),
            };
            // A Parquet trace over the budget opens without its tokens, its findings streamed.
            let (slo, thresholds) = judged;
            let result = match result {
                // B of a comparison is compared with its tokens: it is refused over the budget, as before.
                Err(over @ LoadError::OverBudget { .. }) if purpose != Purpose::Compare => {
                    return without_tokens::open(&source, over, &progress, slo, &thresholds)
                        .map(|(loaded, streamed)| (loaded, None, Some(streamed)));
                }
                other => other,
            };
            // The candidate reader reads the files' metadata once, here rather than at the first click.
            result.and_then(|loaded| {
                let reader = load::open_candidates(&loaded.trace)?;
                Ok((loaded, reader, None))
            })
        });
        match spawned {
            Ok(rx) => {
                self.background.loading = Some(Loading {
                    source,
                    purpose,
                    progress,
                    rx,
                });
            }
            Err(e) => self.message = Some(format!("cannot start loading: {e}")),
        }
    }

    /// Waits for the load in progress (tests and the headless renderer use this).
    pub fn wait_loaded(&mut self) {
        // A directory's survey first: when it is no dataset, the load starts here.
        if let Some(answer) = self.dataset.as_mut().and_then(DatasetDialog::wait) {
            self.answer(answer);
        }
        while let Some(loading) = &self.background.loading {
            loading.rx.wait();
            self.poll_loading();
        }
    }

    pub(super) fn poll_loading(&mut self) {
        let Some(loading) = &self.background.loading else {
            return;
        };
        let result = match loading.rx.try_recv() {
            Ok(r) => r,
            Err(TryRecvError::Empty) => return,
            Err(TryRecvError::Disconnected) => Err(LoadError::Cancelled),
        };
        let (source, purpose) = (loading.source.clone(), loading.purpose);
        self.background.loading = None;
        self.preview = None;
        match result {
            Ok((loaded, reader, _)) if purpose == Purpose::Compare => {
                let other = Session::new(source, loaded, reader, self.settings.order, self.session.as_ref());
                self.compare = Some(Comparing::new(other));
                self.message = None;
            }
            Ok((loaded, reader, without_tokens)) => {
                if let TraceSource::Path(p) | TraceSource::Part(p, _) = &source {
                    let p = p.display().to_string();
                    self.settings.recent.retain(|r| *r != p);
                    self.settings.recent.insert(0, p);
                    self.settings.recent.truncate(MAX_RECENT);
                }
                self.shown.problems = loaded.report.rejected_count() > 0;
                // A recording whose recorder was killed is incomplete: said where it cannot be missed.
                if let Some(n) = loaded
                    .report
                    .notes
                    .iter()
                    .find(|n| n.starts_with("the recording was interrupted"))
                {
                    self.notice = Some(format!("This recording is incomplete: {n}."));
                }
                let mut session = Session::new(source, loaded, reader, self.settings.order, self.session.as_ref());
                if self.session.is_none() {
                    session.stats.prices = self.settings.prices.clone();
                }
                if let Some(w) = without_tokens {
                    session.findings.computed(w.findings, w.slo, w.thresholds, None);
                    session.findings.judged_on_disk = true;
                    self.notice = Some(w.notice);
                }
                // The previous session goes whole, with its jobs and its comparison: nothing of it can land on
                // this trace.
                self.session = Some(session);
                self.compare = None;
                if let Some(next) = self.compare_next.take() {
                    self.load(next, Purpose::Compare);
                }
                self.message = None;
            }
            Err(e) => {
                // B was to be compared with a trace that did not load: it is not compared with the next one.
                if purpose == Purpose::Show {
                    self.compare_next = None;
                }
                if !matches!(e, LoadError::Cancelled) {
                    self.message = Some(match purpose {
                        Purpose::Show | Purpose::Watch => e.to_string(),
                        Purpose::Compare => format!("Cannot compare: {e}"),
                    });
                }
            }
        }
    }

    pub(super) fn poll_dialog(&mut self) {
        let Some(d) = &self.dialog else { return };
        match d.rx.try_recv() {
            Ok(Some(path)) => {
                let purpose = d.purpose;
                self.dialog = None;
                match purpose {
                    Purpose::Show => self.open(TraceSource::Path(path)),
                    Purpose::Compare => self.compare_with(TraceSource::Path(path)),
                    Purpose::Watch => self.watch(crate::record::watcher::WatchOptions::of(&path)),
                }
            }
            Ok(None) | Err(TryRecvError::Disconnected) => {
                // An answer within a moment means no dialog was shown: no desktop portal is running.
                if d.started.elapsed() < Duration::from_millis(500) {
                    self.message = Some(
                        "No file dialog is available (no desktop portal answered). Type the path instead.".to_owned(),
                    );
                    self.path_purpose = Some(d.purpose);
                }
                self.dialog = None;
            }
            Err(TryRecvError::Empty) => {}
        }
    }

    pub(super) fn open_dialog(&mut self, purpose: Purpose) {
        let title = match purpose {
            Purpose::Show => "Open a tokenscope trace",
            Purpose::Compare => "Compare with a trace (B)",
            Purpose::Watch => "Watch a server's log",
        };
        let spawned = Job::spawn("file-dialog", self.ctx.as_ref(), move || {
            let dialog = rfd::FileDialog::new().set_title(title);
            // A server's log is named as its operator chose.
            let dialog = if purpose == Purpose::Watch {
                dialog
            } else {
                dialog.add_filter("trace", &["parquet", "jsonl", "gz", "zst", "ndjson"])
            };
            dialog.pick_file()
        });
        match spawned {
            Ok(rx) => {
                self.dialog = Some(Dialog {
                    rx,
                    purpose,
                    started: Instant::now(),
                });
            }
            Err(_) => self.path_purpose = Some(purpose),
        }
    }
}
