//! The commands panels push during a frame, applied after it in order ([`App::apply`]): selection, navigation,
//! opening and comparing traces, exports and captures, and what each changes in the session on screen.

use super::*;

impl App {
    /// Applies what was asked for during the frame, in order.
    pub fn apply(&mut self, ctx: &egui::Context, commands: Vec<Command>) {
        for c in commands {
            self.apply_one(ctx, c);
        }
    }

    fn apply_one(&mut self, ctx: &egui::Context, command: Command) {
        let waker = self.ctx.clone();
        match command {
            Command::Open(path) => self.open(TraceSource::Path(path)),
            Command::Watch(path) => self.watch(crate::record::watcher::WatchOptions::of(&path)),
            Command::OpenMany(paths) => self.open(TraceSource::Paths(paths)),
            Command::OpenDemo => self.open(TraceSource::Demo),
            Command::SetLogClock(clock) => {
                self.log_clock = clock;
                if let Some(source) = self.session.as_ref().map(|s| s.source.clone()) {
                    self.open(source);
                }
            }
            Command::OpenDialog => self.open_dialog(Purpose::Show),
            Command::CompareDialog => self.open_dialog(Purpose::Compare),
            Command::CompareWith(path) => self.compare_with(TraceSource::Path(path)),
            Command::CompareWhatIf(settings) => self.compare_with(TraceSource::WhatIf { settings }),
            Command::StopComparing => {
                self.compare = None;
                self.compare_next = None;
                if let Some(l) = self
                    .background
                    .loading
                    .as_ref()
                    .filter(|l| l.purpose == Purpose::Compare)
                {
                    l.progress.cancel();
                }
            }
            Command::SelectPair { a, b } => {
                if let (Some(s), Some(c)) = (&mut self.session, &mut self.compare) {
                    s.select(Some(a), true);
                    c.other.select(Some(b), true);
                }
            }
            Command::CompareGoTo {
                side,
                from_ns,
                to_ns,
                request,
            } => match side {
                Side::A => self.go_to(from_ns, to_ns, request, None),
                Side::B => {
                    if let Some(c) = &mut self.compare {
                        c.other.go_to(from_ns, to_ns, request, None, waker.as_ref());
                    }
                }
            },
            Command::RenderPng(which, destination) => self.render_png(which, ctx.content_rect().size(), destination),
            Command::Capture(target, destination) => {
                let crop = match target {
                    png::Target::Window => None,
                    png::Target::Waterfall => self.panel_rects[0],
                    png::Target::Microscope => self.panel_rects[1],
                };
                self.background.pending_capture = Some(png::request(ctx, crop, destination));
            }
            Command::CopyText(text) => ctx.copy_text(text),
            Command::ExportRange { chrome } => self.export_range(chrome),
            Command::SaveCsv { csv, what } => {
                let name = format!("tokenscope-{what}-{}.csv", chrono::Utc::now().format("%Y%m%d-%H%M%S"));
                let title = match what {
                    "statistics" => "Export the statistics as CSV",
                    _ => "Export the query's result as CSV",
                };
                self.save_in_background(csv.into_bytes(), title, name);
            }
            Command::Select { request, scroll } => {
                if let Some(s) = &mut self.session {
                    s.select(request, scroll);
                }
                self.select_twin();
            }
            Command::AnalyseRange(a, b) => {
                if let Some(s) = &mut self.session {
                    s.analyse_range(a, b, waker.as_ref());
                }
            }
            Command::SelectRange(a, b) => {
                if let Some(s) = &mut self.session {
                    s.waterfall.range = Some((a, b));
                    s.analyse_range(a, b, waker.as_ref());
                }
            }
            Command::ClearRange => {
                if let Some(s) = &mut self.session {
                    s.clear_range();
                }
            }
            Command::ZoomTo(a, b) => {
                if let Some(s) = &mut self.session {
                    s.zoom_to(a, b);
                }
            }
            Command::GoTo {
                from_ns,
                to_ns,
                request,
                token,
            } => self.go_to(from_ns, to_ns, request, token),
        }
    }

    /// Shows a time range with a margin, selects a request (scrolled into view) and a token, and analyses the range
    /// as if it had been drag-selected.
    pub fn go_to(&mut self, from_ns: i64, to_ns: i64, request: Option<u32>, token: Option<usize>) {
        let waker = self.ctx.clone();
        if let Some(s) = &mut self.session {
            s.go_to(from_ns, to_ns, request, token, waker.as_ref());
        }
        self.select_twin();
    }

    /// While comparing, selects in B the twin of the request selected in A (when it has one) and brings it into view;
    /// no selection in A clears B's.
    fn select_twin(&mut self) {
        let (Some(s), Some(c)) = (&self.session, &mut self.compare) else {
            return;
        };
        let Some(r) = s.selected else {
            c.other.select(None, false);
            return;
        };
        let twin = c
            .comparison
            .as_ref()
            .and_then(|cmp| cmp.pairing.pairs.iter().find(|&&(ra, _)| ra == r).map(|&(_, rb)| rb));
        if let Some(rb) = twin
            && c.other.selected != Some(rb)
        {
            c.other.select(Some(rb), true);
        }
    }
}
