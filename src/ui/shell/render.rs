//! Offscreen PNGs of the views, with no window: `tokenscope render` and the app's 2x captures. egui's own harness
//! (egui_kittest) runs the very functions the window draws with (`waterfall_ui`, `microscope_ui`) for a few
//! frames, and egui-wgpu rasterises the last one into a texture that is read back. On a machine with no GPU wgpu
//! takes Mesa's software rasterizer (llvmpipe through EGL, or lavapipe when installed).

use std::sync::Arc;

use eframe::egui::{self, ColorImage, Ui};
use egui_kittest::Harness;

use crate::view::lanes::TrackLayout;

use crate::analysis::summary::Slo;
use crate::ui::views::microscope::{Microscope, microscope_ui};
use crate::ui::views::waterfall::{self, WaterfallState};
use crate::ui::widgets::png;
pub use crate::ui::widgets::png::View;
use crate::ui::widgets::theme;
use crate::view::TraceView;
use crate::view::viewport::Viewport;

/// What to draw: the same state the window holds.
pub struct Scene {
    /// The trace, prepared for drawing.
    pub view: TraceView,
    /// Reads the selected request's candidates when the load left them on disk.
    pub candidates: Option<Arc<dyn crate::trace::CandidateSource>>,
    /// The trace's name for the caption.
    pub source_name: String,
    /// The time range across the waterfall, ns; `None` for the whole trace.
    pub time_range: Option<(i64, i64)>,
    /// The drag-selected range to highlight, ns.
    pub selection: Option<(i64, i64)>,
    /// The selected request row.
    pub request: Option<u32>,
    /// The selected token: position among the request's tokens.
    pub token: Option<usize>,
    /// Objectives the request is judged by.
    pub slo: Slo,
    /// Draw the caption strip (trace, time range in UTC, selection).
    pub caption: bool,
    /// How far the request tracks are scrolled, points; `None` brings the selected request (or the first request
    /// alive in the time range) into view.
    pub scroll_y: Option<f32>,
    /// One track per request, or lanes.
    pub layout: TrackLayout,
}

/// The image's geometry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Size {
    /// Width in points.
    pub width: f32,
    /// Height in points.
    pub height: f32,
    /// Pixels per point: 2 gives a 2x image for print and high-density screens.
    pub pixels_per_point: f32,
}

/// The state the harness draws from each frame.
struct State {
    scene: Scene,
    waterfall: WaterfallState,
    microscope: Option<Microscope>,
    which: View,
}

fn draw(ui: &mut Ui, s: &mut State) {
    let trace = Arc::clone(&s.scene.view.trace);
    if s.scene.caption {
        let text = png::caption_text(
            &s.scene.source_name,
            s.waterfall.viewport,
            s.scene.request.map(|r| trace.request_id(r)),
            s.microscope
                .as_ref()
                .and_then(|m| m.token_row(&trace))
                .map(|t| trace.tokens.index[t]),
        );
        egui::Panel::bottom("caption")
            .exact_size(png::CAPTION_HEIGHT)
            .frame(egui::Frame::NONE)
            .show(ui, |ui| png::paint_caption(ui.painter(), ui.max_rect(), text));
    }
    let slo = s.scene.slo;
    // A still image has nobody to act on what its widgets would ask for.
    let ignored = &mut Vec::new();
    match (s.which, &mut s.microscope) {
        (View::Request, Some(m)) => {
            egui::CentralPanel::default().show(ui, |ui| {
                microscope_ui(ui, &trace, m, slo, ignored);
            });
        }
        (View::Both, Some(m)) => {
            let height = ui.available_height() * 0.5;
            egui::Panel::bottom("microscope").exact_size(height).show(ui, |ui| {
                microscope_ui(ui, &trace, m, slo, ignored);
            });
            egui::CentralPanel::default().show(ui, |ui| {
                waterfall::waterfall_ui(ui, &s.scene.view, &mut s.waterfall, s.scene.request, ignored);
            });
        }
        _ => {
            egui::CentralPanel::default().show(ui, |ui| {
                waterfall::waterfall_ui(ui, &s.scene.view, &mut s.waterfall, s.scene.request, ignored);
            });
        }
    }
}

/// Why no image came out.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// The request or both views without a request.
    #[error("the {0} view needs a request: give --request ID")]
    NoRequest(&'static str),
    /// No GPU and no software rasterizer.
    #[error(
        "no renderer: wgpu found no GPU and no software rasterizer ({0}). On Linux install Mesa \
         (apt-get install libegl1 libgl1-mesa-dri, or mesa-vulkan-drivers for lavapipe)"
    )]
    NoAdapter(String),
    /// The renderer failed.
    #[error("rendering failed: {0}")]
    Failed(String),
    /// A size out of range.
    #[error("{0}")]
    Size(String),
}

/// A renderer that draws into a texture: the first adapter wgpu finds, preferring a CPU one (deterministic
/// pixels), with errors returned instead of kittest's panics.
fn offscreen_renderer() -> Result<egui_kittest::wgpu::WgpuTestRenderer, RenderError> {
    let setup = egui_kittest::wgpu::default_wgpu_setup();
    let instance = pollster::block_on(setup.new_instance());
    let config = egui_wgpu::WgpuConfiguration {
        wgpu_setup: setup,
        ..Default::default()
    };
    let state = pollster::block_on(egui_wgpu::RenderState::create(
        &config,
        &instance,
        None,
        egui_wgpu::RendererOptions::PREDICTABLE,
    ))
    .map_err(|e| RenderError::NoAdapter(e.to_string()))?;
    Ok(egui_kittest::wgpu::WgpuTestRenderer::from_render_state(state))
}

/// The largest image side, pixels: far beyond any screen, well within what a software rasterizer's textures allow.
pub const MAX_PIXELS: f32 = 8192.0;

/// Checks what to draw before anything is loaded: a size and scale in range, a request for the views that need one.
///
/// # Errors
/// A size or scale out of range, or a request view without a request.
pub fn check(which: View, has_request: bool, size: Size) -> Result<(), RenderError> {
    let (w, h, ppp) = (size.width, size.height, size.pixels_per_point);
    if !(ppp.is_finite() && (0.5..=4.0).contains(&ppp)) {
        return Err(RenderError::Size(format!(
            "scale {ppp}: give 0.5 to 4 pixels per point"
        )));
    }
    let fits = w * ppp <= MAX_PIXELS && h * ppp <= MAX_PIXELS;
    if !(w.is_finite() && h.is_finite() && w >= 200.0 && h >= 120.0 && fits) {
        return Err(RenderError::Size(format!(
            "size {w} x {h} points at scale {ppp}: give at least 200 x 120, and at most {MAX_PIXELS} pixels a side"
        )));
    }
    let name = View::ALL.iter().find(|(v, _)| *v == which).map_or("", |(_, n)| n);
    if which != View::Waterfall && !has_request {
        return Err(RenderError::NoRequest(name));
    }
    Ok(())
}

/// The largest scale, at most `preferred`, at which an image of `width` x `height` points fits [`MAX_PIXELS`].
pub fn fitting_scale(width: f32, height: f32, preferred: f32) -> f32 {
    preferred.min(MAX_PIXELS / width.max(height).max(1.0))
}

/// The sorted values of a figure of every request (or every gap between tokens, for ITL), ms, for a CDF.
fn sorted_figure(trace: &crate::trace::Trace, figure: &str) -> Vec<f64> {
    use crate::analysis::metrics::{ms, request_metrics};
    let rows = 0..u32::try_from(trace.request_count()).unwrap_or(u32::MAX);
    let mut v: Vec<f64> = match figure {
        "ITL" => rows
            .flat_map(|r| crate::analysis::metrics::itl_ns(trace, r).map(ms))
            .collect(),
        _ => rows
            .filter_map(|r| {
                let m = request_metrics(trace, r);
                match figure {
                    "TTFT" => m.ttft_ns.map(ms),
                    "TPOT" => m.tpot_ns.map(|t| t / 1e6),
                    _ => m.e2e_ns.map(ms),
                }
            })
            .collect(),
    };
    v.sort_unstable_by(f64::total_cmp);
    v
}

/// The CDFs of two runs drawn together, A (the real run) and B (its simulation, or a repeat): TTFT, ITL, TPOT and
/// E2E side by side, with a caption naming both (`tokenscope diff A B --fidelity --png OUT.png`).
///
/// # Errors
/// A size out of range, no renderer, or a failed render.
pub fn render_cdfs(
    a: &crate::trace::Trace,
    b: &crate::trace::Trace,
    names: (&str, &str),
    size: Size,
) -> Result<ColorImage, RenderError> {
    check(View::Waterfall, false, size)?;
    let figures = ["TTFT", "ITL", "TPOT", "E2E"];
    let data: Vec<(Vec<f64>, Vec<f64>)> = figures
        .iter()
        .map(|f| (sorted_figure(a, f), sorted_figure(b, f)))
        .collect();
    let caption = format!("A (real): {}    B: {}", names.0, names.1);
    let renderer = offscreen_renderer()?;
    let mut harness = Harness::builder()
        .with_size(egui::vec2(size.width, size.height))
        .with_pixels_per_point(size.pixels_per_point)
        .with_accessibility_check(false)
        .with_context_setup(theme::install_fonts)
        .renderer(renderer)
        .build_ui(move |ui| {
            egui::CentralPanel::default().show(ui, |ui| {
                ui.label(&caption);
                ui.columns(figures.len(), |cols| {
                    for ((col, figure), (sa, sb)) in cols.iter_mut().zip(figures).zip(&data) {
                        let title = format!("{figure} CDF (ms, log scale)");
                        crate::ui::views::stats::cdf(col, &format!("fidelity-{figure}"), &title, sa, Some(sb), None);
                    }
                });
            });
        });
    harness.run_steps(3);
    read_back(&mut harness)
}

/// Draws `scene` as `which` into an image of `size`.
///
/// # Errors
/// What [`check`] rejects, no renderer, or a failed render.
pub fn render(scene: Scene, which: View, size: Size) -> Result<ColorImage, RenderError> {
    check(which, scene.request.is_some(), size)?;
    let (w, h, ppp) = (size.width, size.height, size.pixels_per_point);
    let microscope = scene.request.map(|r| {
        let mut m = Microscope::new(&scene.view.trace, scene.candidates.as_ref(), r, None);
        m.wait_candidates(&scene.view.trace);
        m.token = scene.token;
        m
    });
    let mut waterfall = WaterfallState::default();
    waterfall.range = scene.selection;
    waterfall.layout = scene.layout;
    let state = State {
        scene,
        waterfall,
        microscope,
        which,
    };
    let renderer = offscreen_renderer()?;
    let mut harness = Harness::builder()
        .with_size(egui::vec2(w, h))
        .with_pixels_per_point(ppp)
        .with_accessibility_check(false)
        .with_context_setup(theme::install_fonts)
        .renderer(renderer)
        .build_ui_state(draw, state);
    // The first frame lays out and sizes the time axis; then the range is fitted to it and the selected request
    // scrolled into view; later frames let text and plots settle.
    harness.run_steps(1);
    let s = harness.state_mut();
    if let Some(vp) = s.waterfall.viewport {
        // Without a range, a selected request is shown across the middle half of the width.
        let range = s.scene.time_range.or_else(|| {
            let (a, b) = crate::view::lanes::request_extent(&s.scene.view.trace, s.scene.request?)?;
            Some((a - (b - a) / 2, b + (b - a) / 2))
        });
        if let Some((a, b)) = range {
            s.waterfall.viewport = Some(Viewport::fit(a, b, vp.width));
        }
        match (s.scene.scroll_y, s.scene.request, range) {
            (Some(y), _, _) => s.waterfall.scroll_y = y,
            (None, Some(r), _) => waterfall::scroll_to_request(&mut s.waterfall, &s.scene.view, r),
            (None, None, Some((a, b))) => waterfall::scroll_to_time(&mut s.waterfall, &s.scene.view, a, b),
            (None, None, None) => {}
        }
    }
    harness.run_steps(3);
    read_back(&mut harness)
}

/// The harness's last frame, rasterised and read back. kittest's renderer waits at most 10 s for the GPU, and
/// panics when the wait for the read-back times out; a software rasterizer on a machine busy with other work can
/// take longer: the render is tried once more, and a panic is an error like the others.
fn read_back<S>(harness: &mut Harness<'_, S>) -> Result<ColorImage, RenderError> {
    let mut render = || {
        crate::ingest::quiet::catch(|| harness.render())
            .map_err(|panic| format!("the renderer failed ({panic})"))
            .and_then(|r| r)
    };
    let image = render().or_else(|_| render()).map_err(RenderError::Failed)?;
    let [iw, ih] = [image.width() as usize, image.height() as usize];
    Ok(ColorImage::from_rgba_unmultiplied([iw, ih], image.as_raw()))
}
