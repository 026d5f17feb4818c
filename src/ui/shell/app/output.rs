//! What the app writes: a range exported as a trace or a Chrome trace, the views rendered to PNG at 2x, the window
//! captured as on screen, each saved (or copied) by a background job that says where it went.

use std::path::PathBuf;
use std::sync::Arc;

use eframe::egui;

use super::App;
use crate::format;
use crate::ui::shell::render::{self, View};
use crate::ui::widgets::job::Job;
use crate::ui::widgets::png;

impl App {
    /// Writes the selected range as a slice on its own thread: the dialog asks where (without one, the current
    /// directory), candidates left on disk are read for the requests of the slice.
    pub(super) fn export_range(&mut self, chrome: bool) {
        let Some((s, (from, to))) = self.session.as_ref().and_then(|s| Some((s, s.waterfall.range?))) else {
            return;
        };
        let trace = Arc::clone(&s.view.trace);
        let reader = s.candidates.clone();
        let save_dir = self.save_dir.clone();
        self.save_job("export-slice", move || {
            let ext = if chrome { "json" } else { "parquet" };
            let name = chrono::Utc::now()
                .format(&format!("tokenscope-slice-%Y%m%d-%H%M%S.{ext}"))
                .to_string();
            let path = png::destination(save_dir.as_deref(), "Export the selected range", &name)?;
            let part = match &reader {
                Some(rd) => {
                    let unread = std::cell::OnceCell::new();
                    let read = |r: u32| {
                        rd.candidates(&trace, r).unwrap_or_else(|e| {
                            let _ = unread.set(e);
                            Vec::new()
                        })
                    };
                    let part = crate::trace::slice::slice_with(&trace, from, to, None, Some(&read));
                    if let Some(e) = unread.get() {
                        return Err(format!("cannot read the candidates of the slice: {e}"));
                    }
                    part
                }
                None => crate::trace::slice::slice(&trace, from, to, None),
            };
            let written = if chrome {
                crate::export::perfetto::write(&part, &path).map_err(|e| e.to_string())
            } else {
                format::write(&part, &path).map_err(|e| e.to_string())
            };
            written.map(|()| path)
        });
    }

    /// Draws the views as they are on screen (time range, scroll, selection, token) offscreen at 2 pixels per
    /// point on a thread of its own, and saves the PNG.
    pub(super) fn render_png(&mut self, which: View, size: egui::Vec2, destination: png::Destination) {
        let Some(s) = &self.session else { return };
        if self.background.saving.is_some() || self.background.rendering.is_some() {
            self.notice = Some("A PNG is being made: wait for it before asking for another.".to_owned());
            return;
        }
        let which = if which != View::Waterfall && s.microscope.is_none() {
            View::Waterfall
        } else {
            which
        };
        let scene = render::Scene {
            view: s.view.clone(),
            candidates: s.candidates.clone(),
            source_name: s.source.name(),
            time_range: s.waterfall.viewport.map(|v| (v.start_ns, v.end_ns())),
            selection: s.waterfall.range,
            request: s.selected,
            token: s.microscope.as_ref().and_then(|m| m.token),
            slo: self.settings.slo,
            caption: self.settings.caption,
            scroll_y: Some(s.waterfall.scroll_y),
            layout: s.waterfall.layout,
        };
        let (width, height) = (size.x.max(400.0), size.y.max(300.0));
        let size = render::Size {
            width,
            height,
            // 2x, unless a very large window would exceed the renderer's largest image.
            pixels_per_point: render::fitting_scale(width, height, 2.0),
        };
        if destination == png::Destination::Clipboard {
            match Job::spawn("render-png", self.ctx.as_ref(), move || {
                render::render(scene, which, size).map_err(|e| e.to_string())
            }) {
                Ok(job) => self.background.rendering = Some(job),
                Err(e) => self.message = Some(e),
            }
            return;
        }
        let save_dir = self.save_dir.clone();
        self.save_job("render-png", move || {
            let image = render::render(scene, which, size).map_err(|e| e.to_string())?;
            let png = png::encode_png(&image)?;
            png::save(&png, save_dir.as_deref(), &png::default_name())
        });
    }

    /// Saves bytes on a thread of their own (the dialog blocks), to `save_dir` when set.
    pub(super) fn save_in_background(&mut self, bytes: Vec<u8>, title: &'static str, name: String) {
        let save_dir = self.save_dir.clone();
        self.save_job("save", move || png::save_as(&bytes, save_dir.as_deref(), title, &name));
    }

    /// Runs a job that writes a file on a thread of its own; `poll_capture` reports the path it wrote or its error.
    pub(super) fn save_job(&mut self, name: &str, job: impl FnOnce() -> Result<PathBuf, String> + Send + 'static) {
        match Job::spawn(name, self.ctx.as_ref(), job) {
            Ok(job) => self.background.saving = Some(job),
            Err(e) => self.message = Some(e),
        }
    }

    /// True while a PNG or a slice is being rendered or saved.
    pub fn saving(&self) -> bool {
        self.background.saving.is_some()
    }

    /// Waits for the PNG or slice being saved and returns what came of it (tests use this).
    pub fn wait_saved(&mut self) -> Option<Result<PathBuf, String>> {
        let rx = self.background.saving.take()?;
        let result = rx.recv().ok();
        match &result {
            Some(Ok(path)) => self.notice = Some(format!("Saved {}", path.display())),
            Some(Err(e)) => self.message = Some(e.clone()),
            None => {}
        }
        result
    }

    /// True while a screenshot is on its way from the renderer.
    pub fn capture_pending(&self) -> bool {
        self.background.pending_capture.is_some()
    }

    /// Turns a screenshot that arrived into a PNG on disk or on the clipboard.
    pub(super) fn poll_capture(&mut self, ctx: &egui::Context) {
        if let Some(p) = &self.background.pending_capture
            && let Ok(image) = p.rx.try_recv()
        {
            let cropped = png::crop_image(&image, p.crop, ctx.pixels_per_point());
            let destination = p.destination;
            self.background.pending_capture = None;
            match destination {
                png::Destination::Clipboard => {
                    ctx.copy_image(cropped);
                    self.notice = Some("Copied the PNG to the clipboard.".to_owned());
                }
                png::Destination::File => match png::encode_png(&cropped) {
                    Ok(png) => {
                        let save_dir = self.save_dir.clone();
                        self.save_job("save-png", move || {
                            png::save(&png, save_dir.as_deref(), &png::default_name())
                        });
                    }
                    Err(e) => self.message = Some(format!("cannot encode the PNG: {e}")),
                },
            }
        }
        if let Some(rx) = &self.background.rendering
            && let Ok(result) = rx.try_recv()
        {
            self.background.rendering = None;
            match result {
                Ok(image) => {
                    ctx.copy_image(image);
                    self.notice = Some("Copied the 2x PNG of the views to the clipboard.".to_owned());
                }
                Err(e) => self.message = Some(e),
            }
        }
        if let Some(rx) = &self.background.saving
            && let Ok(result) = rx.try_recv()
        {
            self.background.saving = None;
            match result {
                Ok(path) => self.notice = Some(format!("Saved {}", path.display())),
                Err(e) => self.message = Some(e),
            }
        }
    }
}
