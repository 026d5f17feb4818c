//! The app's side of a watched server log (`ui::watching`): each look shown in place of the last (selection, token,
//! range and panels kept), the view following the present until the user moves it, and the watch bar: the log, how
//! the watch goes, the findings said (with where each incident was kept), Follow and Stop.

use std::sync::Arc;
use std::time::Duration;

use eframe::egui::{self, RichText, Ui};

use super::App;
use crate::record::watcher::WatchOptions;
use crate::ui::shell::session::{Session, TraceSource};
use crate::ui::shell::watching::{Look, Watching};

/// How often the window looks for the watch's next look, besides being woken by it.
const LOOK_EVERY: Duration = Duration::from_millis(250);

impl App {
    /// Starts watching a server's log (File > Watch a server's log…, `tokenscope watch`); a watch already running is
    /// stopped.
    pub fn watch(&mut self, options: WatchOptions) {
        match Watching::start(options, self.ctx.as_ref()) {
            Ok(w) => self.background.watching = Some(w),
            Err(e) => self.message = Some(format!("cannot watch: {e}")),
        }
    }

    /// The watch, while there is one.
    pub fn watching(&self) -> Option<&Watching> {
        self.background.watching.as_ref()
    }

    fn watch_source(w: &Watching) -> TraceSource {
        TraceSource::Watch { log: w.log.clone() }
    }

    /// Shows the watch's latest look; keeps the window looking while it runs.
    pub(super) fn poll_watching(&mut self, ctx: &egui::Context) {
        let Some(w) = &mut self.background.watching else { return };
        // The user moved the view the follow set: it stops following.
        if let Some(s) = self.session.as_ref().filter(|s| s.source == Self::watch_source(w)) {
            w.follow.notice(s);
        }
        if let Some(look) = w.poll() {
            self.show_look(look);
        }
        if self.background.watching.as_ref().is_some_and(Watching::running) {
            ctx.request_repaint_after(LOOK_EVERY);
        }
    }

    /// Shows a look: over the watch's session when it is on screen, else as a new one (another trace opened over the
    /// watch is left on screen); findings judged without a new trace go to the trace on screen.
    fn show_look(&mut self, look: Look) {
        let Some(w) = &mut self.background.watching else { return };
        let source = Self::watch_source(w);
        let (slo, thresholds) = (self.settings.slo, self.settings.thresholds);
        let Some((loaded, latest_ns)) = look.read else {
            if let (Some(findings), Some(s)) = (look.findings, &mut self.session)
                && s.source == source
            {
                s.findings.computed(findings, slo, thresholds, None);
            }
            return;
        };
        let order = self.settings.order;
        let waker = self.ctx.clone();
        let start = (loaded.trace.request_count() > 0).then(|| loaded.trace.start_ns());
        w.origin = match (w.origin, start) {
            (Some(o), Some(s)) => Some(o.min(s)),
            (o, s) => o.or(s),
        };
        let origin = w.origin;
        let findings = look.findings.map(|f| (f, slo, thresholds, None));
        match &mut self.session {
            Some(s) if s.source == source => {
                s.retrace((loaded, origin), order, findings, waker.as_ref());
            }
            Some(_) if w.shown && !w.show_again => return,
            _ => {
                let previous = self.session.take();
                self.preview = None;
                let mut s = Session::new(source, loaded, None, order, previous.as_ref());
                s.view = crate::view::TraceView::from_origin(Arc::clone(&s.view.trace), order, &s.filter, origin);
                s.waterfall.layout = self.settings.layout;
                if let Some((f, slo, thresholds, open)) = findings {
                    s.findings.computed(f, slo, thresholds, open);
                }
                self.session = Some(s);
            }
        }
        (w.shown, w.show_again) = (true, false);
        if let Some(s) = &mut self.session {
            s.waterfall.open_until_ns = Some(latest_ns);
            w.follow.fit(s, s.view.t0_ns, latest_ns);
        }
    }

    /// The watch bar: what is watched and how it goes, the last things said, Follow and Stop.
    pub(super) fn watch_bar_ui(&mut self, ui: &mut Ui) {
        let on_screen = self.session.as_ref().is_some_and(|s| {
            self.background
                .watching
                .as_ref()
                .is_some_and(|w| s.source == Self::watch_source(w))
        });
        let Some(w) = &mut self.background.watching else { return };
        let mut follow_again = false;
        ui.horizontal_wrapped(|ui| {
            if w.running() {
                ui.label(RichText::new("●").color(crate::ui::widgets::theme::WATCHING));
            } else {
                ui.label(RichText::new("■"));
            }
            ui.label(&w.summary);
            if !on_screen && ui.button("Show the watch").clicked() {
                w.show_again();
            }
            if on_screen && !w.follow.on && ui.button("Follow").on_hover_text("Follow the present again").clicked() {
                follow_again = true;
            }
            if w.running() && ui.button("Stop watching").clicked() {
                w.stop();
            }
        });
        // The last findings said, newest first: each with where its incident was kept.
        for line in w.said.iter().rev().take(3) {
            ui.label(RichText::new(line).small());
        }
        if follow_again {
            w.follow.again();
        }
    }
}
