//! PNG evidence from the window: the whole window or one panel, with a caption strip (trace, time range in UTC,
//! selection) drawn into the frame that is captured, saved through a file dialog or copied to the clipboard.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, sync_channel};

use eframe::egui::{self, ColorImage, Rect};

use crate::view::viewport::Viewport;

/// What to capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The whole window.
    Window,
    /// The waterfall (central panel).
    Waterfall,
    /// The high-power view (bottom panel).
    Microscope,
}

/// Where the capture goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Destination {
    /// A PNG file (a dialog asks where; without one, the current directory).
    File,
    /// The clipboard.
    Clipboard,
}

/// A screenshot on its way from the renderer.
pub struct Pending {
    /// The region to keep, in points; `None` for the whole window.
    pub crop: Option<Rect>,
    /// Where it goes.
    pub destination: Destination,
    /// The pixels, when the renderer has read them.
    pub rx: Receiver<Arc<ColorImage>>,
}

/// Asks the renderer for the pixels of the frame being drawn.
pub fn request(ctx: &egui::Context, crop: Option<Rect>, destination: Destination) -> Pending {
    let (tx, rx) = sync_channel(1);
    let repaint = ctx.clone();
    ctx.request_screenshot(move |image| {
        let _ = tx.send(image);
        repaint.request_repaint();
    });
    Pending { crop, destination, rx }
}

/// The part of `image` (physical pixels) under `crop` (points), clamped to the image.
pub fn crop_image(image: &ColorImage, crop: Option<Rect>, pixels_per_point: f32) -> ColorImage {
    let [w, h] = image.size;
    let Some(crop) = crop else { return image.clone() };
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "clamped to the image"
    )]
    let px = |v: f32, max: usize| ((v * pixels_per_point).round().max(0.0) as usize).min(max);
    let (x0, x1, y0, y1) = (
        px(crop.left(), w),
        px(crop.right(), w),
        px(crop.top(), h),
        px(crop.bottom(), h),
    );
    if x1 <= x0 || y1 <= y0 {
        return image.clone();
    }
    let mut pixels = Vec::with_capacity((x1 - x0) * (y1 - y0));
    for y in y0..y1 {
        pixels.extend_from_slice(&image.pixels[y * w + x0..y * w + x1]);
    }
    ColorImage::new([x1 - x0, y1 - y0], pixels)
}

/// Which views the image shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum View {
    /// The wide-angle waterfall.
    Waterfall,
    /// The high-power view of one request.
    Request,
    /// The waterfall above the request's high-power view.
    Both,
}

impl View {
    /// Every view with its command-line name.
    pub const ALL: [(View, &'static str); 3] = [
        (View::Waterfall, "waterfall"),
        (View::Request, "request"),
        (View::Both, "both"),
    ];
}

/// The height of the caption strip, points.
pub const CAPTION_HEIGHT: f32 = 22.0;

/// Paints the caption strip over `strip`: the app's captures and the headless renders draw it with this one function.
pub fn paint_caption(painter: &egui::Painter, strip: Rect, text: String) {
    painter.rect_filled(strip, 0.0, crate::ui::widgets::theme::CAPTION_FILL);
    painter.text(
        egui::pos2(strip.left() + 8.0, strip.center().y),
        egui::Align2::LEFT_CENTER,
        text,
        egui::FontId::proportional(12.0),
        crate::ui::widgets::theme::CAPTION_TEXT,
    );
}

/// The caption of a PNG: `tokenscope · TRACE · view FROM to TO (UTC) · request ID token N` (N: the token's index
/// in the output).
pub fn caption_text(source: &str, viewport: Option<Viewport>, request: Option<&str>, token: Option<u32>) -> String {
    let mut text = format!("tokenscope · {source}");
    if let Some(vp) = viewport {
        text.push_str(&format!(
            " · view {} to {}",
            crate::view::ruler::format_utc(vp.start_ns),
            crate::view::ruler::format_utc(vp.end_ns())
        ));
    }
    if let Some(id) = request {
        text.push_str(&format!(" · request {id}"));
        if let Some(k) = token {
            text.push_str(&format!(" token {k}"));
        }
    }
    text
}

/// PNG bytes of an image.
pub fn encode_png(image: &ColorImage) -> Result<Vec<u8>, String> {
    let [w, h] = image.size;
    let rgba: Vec<u8> = image
        .pixels
        .iter()
        .flat_map(eframe::egui::Color32::to_srgba_unmultiplied)
        .collect();
    let buffer = image::RgbaImage::from_raw(
        u32::try_from(w).map_err(|e| e.to_string())?,
        u32::try_from(h).map_err(|e| e.to_string())?,
        rgba,
    )
    .ok_or_else(|| "the screenshot's size does not match its pixels".to_owned())?;
    let mut out = std::io::Cursor::new(Vec::new());
    buffer
        .write_to(&mut out, image::ImageFormat::Png)
        .map_err(|e| e.to_string())?;
    Ok(out.into_inner())
}

/// A file name for a screenshot taken now: `tokenscope-20251129-080003.png`.
pub fn default_name() -> String {
    chrono::Utc::now().format("tokenscope-%Y%m%d-%H%M%S.png").to_string()
}

/// Where to save a file: asks through the desktop's dialog, or, when none answers, `name` in the current
/// directory. Blocks while the dialog is open: call it off the UI thread.
pub fn save_path(title: &str, name: &str) -> Result<PathBuf, String> {
    let started = std::time::Instant::now();
    match rfd::FileDialog::new().set_title(title).set_file_name(name).save_file() {
        Some(p) => Ok(p),
        // An answer within a moment means no dialog was shown: no desktop portal.
        None if started.elapsed() < std::time::Duration::from_millis(500) => Ok(PathBuf::from(name)),
        None => Err("Not saved: the dialog was cancelled.".to_owned()),
    }
}

/// Where to write `name`: in `dir` when given (no question asked), else where the dialog titled `title` says.
pub fn destination(dir: Option<&std::path::Path>, title: &str, name: &str) -> Result<PathBuf, String> {
    match dir {
        Some(d) => Ok(d.join(name)),
        None => save_path(title, name),
    }
}

/// Saves a PNG as `name` in `dir`, or, without one, where [`save_path`] says. Returns the path written.
pub fn save(png: &[u8], dir: Option<&std::path::Path>, name: &str) -> Result<PathBuf, String> {
    save_as(png, dir, "Save the screenshot", name)
}

/// Saves bytes as `name` in `dir`, or, without one, where the dialog titled `title` says. Returns the path written.
pub fn save_as(bytes: &[u8], dir: Option<&std::path::Path>, title: &str, name: &str) -> Result<PathBuf, String> {
    let path = destination(dir, title, name)?;
    std::fs::write(&path, bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}

#[cfg(test)]
// Test pixels are numbered greys, not the app's colours.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use eframe::egui::{Color32, pos2};

    #[test]
    fn crop_takes_the_panel_in_physical_pixels_and_the_png_decodes_back() {
        // A 4 x 2 pixel image at 2 pixels per point: a 2 x 1 point window. Pixel (x, y) is grey 10 * (y * 4 + x).
        let pixels = (0..8u8).map(|v| Color32::from_gray(v * 10)).collect();
        let img = ColorImage::new([4, 2], pixels);
        // The right half: points 1..2 x 0..1 -> pixels 2..4 x 0..2.
        let right = crop_image(&img, Some(Rect::from_min_max(pos2(1.0, 0.0), pos2(2.0, 1.0))), 2.0);
        assert_eq!(right.size, [2, 2]);
        assert_eq!(right.pixels, [20, 30, 60, 70].map(Color32::from_gray));
        assert_eq!(crop_image(&img, None, 2.0).size, [4, 2]);
        assert_eq!(
            crop_image(&img, Some(Rect::from_min_max(pos2(5.0, 5.0), pos2(6.0, 6.0))), 2.0).size,
            [4, 2]
        );
        let png = encode_png(&right).unwrap();
        assert_eq!(&png[1..4], b"PNG");
        let back = image::load_from_memory(&png).unwrap().to_rgba8();
        assert_eq!((back.width(), back.height()), (2, 2));
        assert_eq!(back.get_pixel(1, 1).0, [70, 70, 70, 255]);
    }
}
