//! The app's side of a live recording (`ui::live`): each snapshot shown in place of the last (selection, token, range
//! and panels kept), the view following the present until the user moves it, and the live bar: what is being
//! recorded, how far behind the view is, and Follow, Pause view, Stop and Save now.

use std::sync::Arc;
use std::time::Duration;

use eframe::egui::{self, RichText, Ui};

use super::App;
use crate::ui::shell::live::{Live, LiveOptions, Phase, Snapshot, SpilledPart};
use crate::ui::shell::session::{Session, TraceSource};
use crate::ui::views::waterfall::PendingRow;

/// How often the window looks at the recording while it runs, besides when the journal grows (`ui::live` wakes it
/// then, so a token shows the frame after its chunk is written).
const LOOK_EVERY: Duration = Duration::from_millis(100);

impl App {
    /// Starts a live recording shown as it is made (`tokenscope record --live`).
    pub fn record_live(&mut self, options: LiveOptions) {
        match Live::start(options, self.ctx.as_ref()) {
            Ok(live) => self.background.live = Some(live),
            Err(e) => self.message = Some(format!("cannot start recording: {e}")),
        }
    }

    /// The live recording, while there is one.
    pub fn live(&self) -> Option<&Live> {
        self.background.live.as_ref()
    }

    /// The live recording, to drive (tests stop it, pause it, wait for its snapshots).
    pub fn live_mut(&mut self) -> Option<&mut Live> {
        self.background.live.as_mut()
    }

    fn live_source(live: &Live) -> TraceSource {
        TraceSource::Live {
            journal: live.journal.clone(),
            url: live.url.clone(),
        }
    }

    /// Takes the recording's next snapshot and shows it; keeps the window looking while it runs.
    pub(super) fn poll_live(&mut self, ctx: &egui::Context) {
        let (slo, thresholds) = (self.settings.slo, self.settings.thresholds);
        let Some(live) = &mut self.background.live else { return };
        // The user moved the view the follow set: it stops following.
        if let Some(s) = self.session.as_ref().filter(|s| s.source == Self::live_source(live)) {
            live.follow.notice(s);
        }
        if let Some(snapshot) = live.poll(Some(ctx), slo, thresholds) {
            self.show_snapshot(snapshot);
        }
        if self.background.live.as_ref().is_some_and(|l| l.close_from.is_some()) {
            ctx.send_viewport_cmd(egui::ViewportCommand::Close);
        }
        self.show_fresh();
        if self.background.live.as_ref().is_some_and(Live::running) {
            ctx.request_repaint_after(LOOK_EVERY);
        }
    }

    /// Draws the tokens the journal gained since the snapshot on screen over it: ticks on their requests' open bars
    /// (below the tracks for requests the snapshot does not have yet), the selected request's text in the high-power
    /// view.
    fn show_fresh(&mut self) {
        let Some(live) = &mut self.background.live else { return };
        let source = Self::live_source(live);
        let Some(s) = self.session.as_mut().filter(|s| s.source == source) else {
            return;
        };
        if live.paused {
            return;
        }
        if live.fresh.ended() || live.failed.is_some() || s.waterfall.open_until_ns.is_none() {
            // The recording's own trace is on screen (it holds everything), or the snapshots stopped (what is read
            // would pile up with nothing to take it): nothing drawn over it.
            live.fresh.clear();
            s.waterfall.fresh.clear();
            s.waterfall.pending.clear();
            if let Some(m) = &mut s.microscope {
                m.fresh.clear();
            }
            return;
        }
        // A journal that cannot be read is said by the snapshot's reader, in the live bar.
        let _ = live.fresh.poll();
        let trace = &s.view.trace;
        let mut ticks: Vec<(u32, i64)> = Vec::new();
        // Requests the snapshot does not have yet: sent since, in the order they were sent (or first heard of).
        let mut pending: Vec<PendingRow> = live
            .fresh
            .sends()
            .iter()
            .filter(|send| trace.request_row(&send.request_id).is_none())
            .map(|send| PendingRow {
                id: send.request_id.clone(),
                from_ns: send.sent_ns,
                ticks: Vec::new(),
            })
            .collect();
        for t in live.fresh.tokens() {
            if let Some(row) = trace.request_row(&t.request_id) {
                ticks.push((row, t.at_ns));
            } else if let Some(p) = pending.iter_mut().find(|p| p.id == t.request_id) {
                p.ticks.push(t.at_ns);
            } else {
                pending.push(PendingRow {
                    id: t.request_id.clone(),
                    from_ns: t.at_ns,
                    ticks: vec![t.at_ns],
                });
            }
        }
        ticks.sort_unstable();
        if let (Some(newest), Some(open)) = (
            live.fresh.tokens().iter().map(|t| t.at_ns).max(),
            s.waterfall.open_until_ns,
        ) {
            s.waterfall.open_until_ns = Some(open.max(newest));
        }
        s.waterfall.fresh = ticks;
        s.waterfall.pending = pending;
        if let Some(m) = &mut s.microscope {
            let id = trace.request_id(m.request);
            m.fresh = live
                .fresh
                .tokens()
                .iter()
                .filter(|t| t.request_id == id)
                .map(|t| t.text.clone())
                .collect();
        }
    }

    /// Shows a snapshot: in place of the last one, or as the trace on screen when none is (another trace opened
    /// meanwhile stays: the recording goes on behind it).
    fn show_snapshot(&mut self, snapshot: Snapshot) {
        let Some(live) = &mut self.background.live else { return };
        let source = Self::live_source(live);
        let order = self.settings.order;
        let waker = self.ctx.clone();
        let Snapshot {
            loaded,
            findings,
            latest_ns,
            open_from_ns,
            progress,
            is_final,
            ..
        } = snapshot;
        let start = (loaded.trace.request_count() > 0).then(|| loaded.trace.start_ns());
        live.origin = match (live.origin, start) {
            (Some(o), Some(s)) => Some(o.min(s)),
            (o, s) => o.or(s),
        };
        live.in_memory_from = start;
        let origin = live.origin;
        match &mut self.session {
            Some(s) if s.source == source => s.retrace((loaded, origin), order, Some(findings), waker.as_ref()),
            Some(_) if live.shown.0.is_some() && !live.show_again => {
                live.unseen += 1;
                return;
            }
            _ => {
                let previous = self.session.take();
                self.preview = None;
                let mut s = Session::new(source, loaded, None, order, previous.as_ref());
                // A live view: its requests without an end are open, and after its oldest requests left memory the
                // recording's start stays the zero.
                s.view = crate::view::TraceView::from_origin(Arc::clone(&s.view.trace), order, &s.filter, origin);
                s.waterfall.layout = self.settings.layout;
                let (f, slo, thresholds, open) = findings;
                s.findings.computed(f, slo, thresholds, open);
                self.session = Some(s);
            }
        }
        live.shown = (latest_ns, open_from_ns);
        live.show_again = false;
        // What the snapshot holds is no longer drawn over it; the recording's own trace holds everything.
        if is_final {
            live.fresh.end();
        } else {
            live.fresh.taken(progress.file, progress.lines_end);
        }
        if let Some(s) = &mut self.session {
            // The recording's own trace at the end has every request ended: nothing is drawn open. Before it, the
            // present is the latest time read (requests sent since are drawn open up to it).
            s.waterfall.open_until_ns = latest_ns.filter(|_| !is_final);
        }
        if let (Some(s), Some(latest)) = (&mut self.session, latest_ns) {
            // From what is in memory: a rotating recording's earlier requests are in its parts.
            live.follow.fit(s, live.in_memory_from.unwrap_or(s.view.t0_ns), latest);
        }
    }

    /// Shows the recording again after another trace was opened over it: its next snapshot, made at once, or the
    /// trace it wrote when it has ended.
    fn show_live_again(&mut self) {
        let Some(live) = &mut self.background.live else { return };
        if matches!(live.phase, Phase::Ended(_)) {
            let output = live.output.clone();
            self.open(TraceSource::Path(output));
            return;
        }
        live.show_again = true;
        live.follow.on = true;
        live.paused = false;
    }

    /// Writes what was recorded so far (the trace on screen, when it is the recording's) on its own thread.
    fn save_live_now(&mut self) {
        let Some(live) = &self.background.live else { return };
        if let Some(dir) = &live.rotating {
            self.notice = Some(format!(
                "Everything recorded so far is on disk in {} (its parts and its journal), which opens as one trace.",
                dir.display()
            ));
            return;
        }
        let Some(s) = self.session.as_ref().filter(|s| s.source == Self::live_source(live)) else {
            self.notice = Some("Nothing recorded is on screen yet.".to_owned());
            return;
        };
        let trace = Arc::clone(&s.view.trace);
        let save_dir = self.save_dir.clone();
        self.save_job("save-recording", move || {
            let name = chrono::Utc::now()
                .format("tokenscope-recording-%Y%m%d-%H%M%S.parquet")
                .to_string();
            let path =
                crate::ui::widgets::png::destination(save_dir.as_deref(), "Save what was recorded so far", &name)?;
            crate::format::write(&trace, &path).map_err(|e| e.to_string())?;
            Ok(path)
        });
    }

    /// The live bar: what is recorded, how far behind the view is, and the recording's controls.
    pub(super) fn live_bar_ui(&mut self, ui: &mut Ui) {
        let Some(live) = &mut self.background.live else { return };
        let on_screen = self
            .session
            .as_ref()
            .is_some_and(|s| s.source == Self::live_source(live));
        let mut again = false;
        let mut save = false;
        let mut open: Option<std::path::PathBuf> = None;
        // Scrolled back before the requests in memory (a rotating recording's earlier ones are in its parts): the
        // part the view reaches into.
        let before = self
            .session
            .as_ref()
            .filter(|_| on_screen && !live.follow.on)
            .and_then(|s| {
                let from = live.in_memory_from?;
                s.waterfall.viewport.filter(|vp| vp.start_ns < from)
            })
            .and_then(|vp| {
                part_reached(
                    &live.spilled,
                    vp.start_ns.saturating_add((vp.ns_per_point * vp.width) as i64),
                )
            })
            .cloned();
        ui.horizontal_wrapped(|ui| {
            status_ui(ui, live);
            if let Some(part) = &before {
                let label = format!("Earlier requests are on disk: open {}", part_label(part, None));
                if ui
                    .button(RichText::new(label).strong())
                    .on_hover_text("The view is before the requests in memory; the recording goes on meanwhile")
                    .clicked()
                {
                    open = Some(part.path.clone());
                }
            }
            if !live.spilled.is_empty() {
                spilled_menu(ui, live, &mut open);
            }
            if matches!(live.phase, Phase::Ended(_)) {
                if !on_screen && ui.button("Show the recording").clicked() {
                    again = true;
                }
                return;
            }
            ui.separator();
            (again, save) = controls_ui(ui, live, on_screen);
        });
        if again {
            self.show_live_again();
        }
        if save {
            self.save_live_now();
        }
        if let Some(path) = open {
            self.open(TraceSource::Path(path));
        }
    }
}

/// The recording's state and server, why it failed, and while it runs: its rates and how far the view and the disk
/// are behind it.
fn status_ui(ui: &mut Ui, live: &Live) {
    let (dot, state) = match &live.phase {
        Phase::Recording => (
            RichText::new("●").color(crate::ui::widgets::theme::RECORDING),
            "Recording".to_owned(),
        ),
        Phase::Stopping => (
            RichText::new("●").color(crate::ui::widgets::theme::STOPPING),
            "Stopping".to_owned(),
        ),
        Phase::Ended(what) => (RichText::new("■"), format!("Recorded: {what}")),
    };
    ui.label(dot);
    ui.label(format!("{state} · {}", live.url));
    if let Some(why) = &live.failed {
        ui.colored_label(ui.visuals().error_fg_color, why);
    }
    let p = live.progress;
    if p.requests == 0 && live.phase == Phase::Recording {
        ui.spinner();
        ui.label("waiting for the first chunk…");
    } else if !matches!(live.phase, Phase::Ended(_)) {
        #[expect(clippy::cast_precision_loss, reason = "a rate shown")]
        let rate = p.chunks as f64 / live.started.elapsed().as_secs_f64().max(1e-3);
        ui.label(format!(
            "{} requests ({} streaming) · {} chunks · {rate:.0} chunks/s",
            p.requests, p.streaming, p.chunks
        ));
        // How far behind the view is: journal written but not yet read, and the last snapshot's age.
        let unread = p.written.saturating_sub(p.read);
        if unread > 0 {
            ui.colored_label(
                ui.visuals().warn_fg_color,
                format!("behind: {} KiB of the journal not read yet", unread.div_ceil(1024)),
            );
        }
        // And the disk behind the streams: lines waiting to be written, and how long the streams were held for it
        // (nothing is dropped).
        if let Some(text) = disk_behind(live.backlog.queued(), live.backlog.held()) {
            ui.colored_label(ui.visuals().warn_fg_color, text).on_hover_text(
                "The journal is written as chunks come; a full queue holds the streams, never drops a chunk",
            );
        }
    }
}

/// A running recording's controls: follow and pause the view (when it is on screen) or show it again, save now,
/// stop. Returns whether to show it again and whether to save now.
fn controls_ui(ui: &mut Ui, live: &mut Live, on_screen: bool) -> (bool, bool) {
    let (mut again, mut save) = (false, false);
    if on_screen {
        ui.checkbox(&mut live.follow.on, "Follow")
            .on_hover_text("Keep the present in view (moving the view turns it off)");
        let pause = if live.paused { "Resume view" } else { "Pause view" };
        if ui
            .button(pause)
            .on_hover_text("Stop (or go on) updating the view; the recording goes on either way")
            .clicked()
        {
            live.paused = !live.paused;
            live.unseen = 0;
        }
        if live.paused && live.unseen > 0 {
            ui.weak(format!("{} updates not shown", live.unseen));
        }
    } else if live.shown.0.is_some() && ui.button("Show the recording").clicked() {
        again = true;
    }
    if ui
        .button("Save now…")
        .on_hover_text("Write what was recorded so far; the recording goes on")
        .clicked()
    {
        save = true;
    }
    if live.phase == Phase::Recording
        && ui
            .button("Stop")
            .on_hover_text("No new requests; streams in flight get the grace period. Everything is kept and written.")
            .clicked()
    {
        live.stop();
    }
    (again, save)
}

/// What the live bar says of a disk that does not keep up: `queued` lines waiting (said from 512, an eighth of what
/// may wait before the streams are held) and the time the streams were held in all; nothing while it keeps up.
fn disk_behind(queued: u64, held: Duration) -> Option<String> {
    let held = (held >= Duration::from_millis(1)).then(|| {
        format!(
            "streams held {:.1} s in all (summed over the streams)",
            held.as_secs_f64()
        )
    });
    let queued = (queued >= 512).then(|| format!("{queued} lines waiting to be written"));
    match (queued, held) {
        (None, None) => None,
        (q, h) => Some(format!(
            "disk behind: {}",
            [q, h].into_iter().flatten().collect::<Vec<_>>().join(", ")
        )),
    }
}

/// The menu of a rotating recording's parts on disk: each one with its findings, or the directory as one trace.
fn spilled_menu(ui: &mut Ui, live: &Live, open: &mut Option<std::path::PathBuf>) {
    let parts = &live.spilled;
    let bytes: u64 = parts.iter().map(|p| p.bytes).sum();
    let mut counts = [0; 3];
    for found in live.part_findings.values().flatten() {
        for (c, n) in counts.iter_mut().zip(found.counts) {
            *c += n;
        }
    }
    let findings = crate::ui::shell::live::PartFindings {
        counts,
        first: Vec::new(),
    };
    ui.menu_button(
        format!(
            "Earlier: {} part{} on disk ({}) · {}",
            parts.len(),
            if parts.len() == 1 { "" } else { "s" },
            mb(bytes),
            findings.said()
        ),
        |ui| {
            ui.weak(
                "Their requests left memory as each part was written; one opens over the live view. A part's \
                 findings are its own: one whose window crosses into the next part is seen in each as far as it \
                 reaches.",
            );
            for part in parts.iter().rev() {
                let found = live.part_findings.get(&part.path);
                let button = ui.button(part_label(part, found));
                let hover = match found {
                    Some(Ok(f)) if !f.first.is_empty() => f.first.join("\n"),
                    Some(Ok(_)) => "No findings in this part".to_owned(),
                    Some(Err(e)) => format!("Its findings could not be computed: {e}"),
                    None => "Its findings are being computed".to_owned(),
                };
                if button.on_hover_text(hover).clicked() {
                    *open = Some(part.path.clone());
                    ui.close();
                }
            }
            ui.separator();
            if ui
                .button("Open them all as one trace")
                .on_hover_text("Every part and the journal, as the directory opens")
                .clicked()
            {
                *open = Some(live.output.clone());
                ui.close();
            }
        },
    );
}

/// The part the view's right edge is in or after: the latest that started before it, else the first.
fn part_reached(parts: &[SpilledPart], end_ns: i64) -> Option<&SpilledPart> {
    parts
        .iter()
        .rev()
        .find(|p| p.first_ns.is_some_and(|f| f <= end_ns))
        .or_else(|| parts.first())
}

/// A part as the menu names it: its file, its times (UTC), its size and, when known, its findings.
fn part_label(part: &SpilledPart, found: Option<&Result<crate::ui::shell::live::PartFindings, String>>) -> String {
    let name = part
        .path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let clock = |ns: i64| {
        chrono::DateTime::from_timestamp_nanos(ns)
            .format("%H:%M:%S")
            .to_string()
    };
    let times = match (part.first_ns, part.last_ns) {
        (Some(a), Some(b)) => format!(" · {}–{} UTC", clock(a), clock(b)),
        _ => String::new(),
    };
    let findings = match found {
        Some(Ok(f)) => format!(" · {}", f.said()),
        Some(Err(_)) => " · findings unknown".to_owned(),
        None => String::new(),
    };
    format!("{name}{times} · {}{findings}", mb(part.bytes))
}

/// Bytes as the live bar says them: kB under a megabyte, MB with a decimal above.
fn mb(bytes: u64) -> String {
    #[expect(clippy::cast_precision_loss, reason = "a size shown")]
    let kb = bytes as f64 / 1e3;
    if kb < 1e3 {
        format!("{:.0} kB", kb.max(1.0))
    } else {
        format!("{:.1} MB", kb / 1e3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_disk_is_said_behind_from_an_eighth_of_the_queue_or_once_it_held_the_streams() {
        assert_eq!(disk_behind(511, Duration::ZERO), None);
        assert_eq!(
            disk_behind(512, Duration::ZERO).as_deref(),
            Some("disk behind: 512 lines waiting to be written")
        );
        assert_eq!(
            disk_behind(0, Duration::from_millis(1_250)).as_deref(),
            Some("disk behind: streams held 1.2 s in all (summed over the streams)")
        );
        assert_eq!(
            disk_behind(4_096, Duration::from_secs(3)).as_deref(),
            Some("disk behind: 4096 lines waiting to be written, streams held 3.0 s in all (summed over the streams)")
        );
    }
}
