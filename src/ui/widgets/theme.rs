//! Every colour and size of the app, in one place. Stage colours are chosen to stay apart for the common forms of
//! colour blindness (blue / orange / green-teal / red-purple differ in lightness too).
//!
//! The only file that may write a colour: clippy.toml forbids `Color32::from_rgb` and its kin everywhere else.
#![allow(clippy::disallowed_methods)]

use eframe::egui::{self, Color32};

use crate::trace::StageKind;
use crate::view::layout::PREFILL_CLASSES;

/// DejaVu Sans Mono (Bitstream Vera licence, `assets/fonts/DejaVu-LICENSE.txt`): a fallback for the symbols that
/// make tokens visible (⟨EOS⟩, ␣, ↵, ⇥) and that egui's own fonts lack.
const SYMBOL_FONT: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSansMono.ttf");

/// Families with Chinese, Japanese and Korean glyphs, in the order they are preferred: Noto / Source Han, WenQuanYi
/// and Droid on Linux; PingFang and Hiragino on macOS; YaHei, Yu Gothic and Malgun on Windows. None is shipped (the
/// smallest is 5 MB): without one, those tokens show as boxes.
const CJK_FAMILIES: [&str; 16] = [
    "Noto Sans CJK SC",
    "Noto Sans CJK JP",
    "Noto Sans CJK KR",
    "Noto Sans CJK TC",
    "Source Han Sans SC",
    "Source Han Sans",
    "WenQuanYi Micro Hei",
    "WenQuanYi Zen Hei",
    "Droid Sans Fallback",
    "PingFang SC",
    "Hiragino Sans GB",
    "Hiragino Sans",
    "Microsoft YaHei",
    "Yu Gothic",
    "Malgun Gothic",
    "SimSun",
];

/// The scripts the CJK fallback covers, each with a character of it: a family need not have all three (Droid Sans
/// Fallback has no Hangul, a Japanese font may lack simplified Chinese), so each script gets the first family that
/// draws it.
pub const CJK_SCRIPTS: [(&str, char); 3] = [("Chinese", '中'), ("Japanese kana", 'あ'), ("Korean Hangul", '한')];

/// A font file larger than this is not read as a fallback font.
const MAX_FONT_BYTES: u64 = 64 << 20;

/// A system font found for a fallback: where it is, which face of the file, and its bytes.
pub struct SystemFont {
    /// Its file.
    pub path: std::path::PathBuf,
    /// Its face in the file (a collection, `.ttc`, holds several).
    pub index: u32,
    /// The file's bytes.
    pub bytes: Vec<u8>,
}

/// The fonts that draw Chinese, Japanese and Korean tokens, and the scripts none of them draws.
pub struct CjkFonts {
    /// The fonts, in the order they are tried.
    pub fonts: Vec<SystemFont>,
    /// The names of the scripts of [`CJK_SCRIPTS`] that no font found draws (shown as boxes).
    pub missing: Vec<&'static str>,
}

/// Which of `candidates` (in order of preference) to load so that every script of `scripts` is drawn where one of
/// them can: for each script, none more when a font chosen already draws it, else the first candidate that does.
/// Returns the chosen candidates' positions, in the order chosen, and the scripts none draws.
pub fn choose_fonts(
    candidates: usize,
    scripts: &[(&'static str, char)],
    draws: impl Fn(usize, char) -> bool,
) -> (Vec<usize>, Vec<&'static str>) {
    let mut chosen: Vec<usize> = Vec::new();
    let mut missing = Vec::new();
    for &(name, c) in scripts {
        if chosen.iter().any(|&k| draws(k, c)) {
            continue;
        }
        match (0..candidates).find(|&k| draws(k, c)) {
            Some(k) => chosen.push(k),
            None => missing.push(name),
        }
    }
    (chosen, missing)
}

/// The system's CJK fonts: `TOKENSCOPE_CJK_FONT` first when set to a font file (its first face), then the families
/// of [`CJK_FAMILIES`] that `fontdb` finds among the system's fonts (the fontconfig directories on Linux, the
/// system's font folders on macOS and Windows), as many as it takes to draw every script of [`CJK_SCRIPTS`].
pub fn cjk_fonts() -> CjkFonts {
    let readable =
        |path: &std::path::Path| std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() <= MAX_FONT_BYTES);
    let mut db = fontdb::Database::new();
    // The file is looked at before it is read: a device or a pipe given by mistake is never read.
    let given = std::env::var_os("TOKENSCOPE_CJK_FONT").map(std::path::PathBuf::from);
    let mut ids: Vec<fontdb::ID> = Vec::new();
    if let Some(path) = given.filter(|p| readable(p)) {
        ids.extend(db.load_font_source(fontdb::Source::File(path)).first());
    }
    db.load_system_fonts();
    for family in CJK_FAMILIES {
        let families = [fontdb::Family::Name(family)];
        if let Some(id) = db.query(&fontdb::Query {
            families: &families,
            ..fontdb::Query::default()
        }) && !ids.contains(&id)
        {
            ids.push(id);
        }
    }
    let draws = |k: usize, c: char| {
        db.with_face_data(ids[k], |data, index| {
            ttf_parser::Face::parse(data, index).is_ok_and(|face| face.glyph_index(c).is_some())
        })
        .unwrap_or(false)
    };
    let (chosen, missing) = choose_fonts(ids.len(), &CJK_SCRIPTS, draws);
    let fonts = chosen
        .into_iter()
        .filter_map(|k| {
            let face = db.face(ids[k])?;
            let (fontdb::Source::File(path) | fontdb::Source::SharedFile(path, _)) = &face.source else {
                return None;
            };
            let path = path.clone();
            if !readable(&path) {
                return None;
            }
            let bytes = std::fs::read(&path).ok()?;
            Some(SystemFont {
                path,
                index: face.index,
                bytes,
            })
        })
        .collect();
    CjkFonts { fonts, missing }
}

/// Adds the symbol font, then the system's CJK fonts, as the last fallbacks of both font families.
pub fn install_fonts(ctx: &egui::Context) {
    let fallback = |family| egui::epaint::text::InsertFontFamily {
        family,
        priority: egui::epaint::text::FontPriority::Lowest,
    };
    let families = || {
        vec![
            fallback(egui::FontFamily::Proportional),
            fallback(egui::FontFamily::Monospace),
        ]
    };
    ctx.add_font(egui::epaint::text::FontInsert {
        name: "DejaVuSansMono".to_owned(),
        data: egui::FontData::from_static(SYMBOL_FONT),
        families: families(),
    });
    for (k, font) in cjk_fonts().fonts.into_iter().enumerate() {
        ctx.add_font(egui::epaint::text::FontInsert {
            name: format!("CJK {k}"),
            data: egui::FontData {
                index: font.index,
                ..egui::FontData::from_owned(font.bytes)
            },
            families: families(),
        });
    }
}

/// Height of a request track, points.
pub const ROW_HEIGHT: f32 = 16.0;
/// Height of an engine track's step row, points.
pub const ENGINE_ROW_HEIGHT: f32 = 18.0;
/// Height of each counter row under an engine track, points.
pub const COUNTER_ROW_HEIGHT: f32 = 14.0;
/// Height of the time ruler, points.
pub const RULER_HEIGHT: f32 = 22.0;
/// Width of the label column left of the tracks, points.
pub const LABEL_WIDTH: f32 = 150.0;

/// The colour of a stage.
pub fn stage_color(kind: StageKind) -> Color32 {
    match kind {
        StageKind::Queue => Color32::from_rgb(96, 112, 140),
        StageKind::Prefill => Color32::from_rgb(230, 140, 40),
        StageKind::Decode => Color32::from_rgb(46, 160, 140),
        StageKind::Preempted => Color32::from_rgb(200, 60, 90),
        StageKind::KvTransfer => Color32::from_rgb(150, 110, 200),
        // Queue and prefill not split: between the queue's slate and the prefill's orange, paler than both.
        StageKind::Waiting => Color32::from_rgb(176, 150, 120),
        StageKind::Tokenize | StageKind::Detokenize | StageKind::Other => Color32::from_rgb(130, 130, 130),
    }
}

/// The colour of an engine step by its prefill share class (0 = all decode .. 10 = all prefill): from the decode
/// colour to the prefill colour.
pub fn step_color(class: u8) -> Color32 {
    let t = f32::from(class.min(PREFILL_CLASSES)) / f32::from(PREFILL_CLASSES);
    lerp(stage_color(StageKind::Decode), stage_color(StageKind::Prefill), t)
}

fn lerp(a: Color32, b: Color32, t: f32) -> Color32 {
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "0..=255 by construction"
    )]
    let mix = |x: u8, y: u8| {
        (f32::from(x) + (f32::from(y) - f32::from(x)) * t)
            .round()
            .clamp(0.0, 255.0) as u8
    };
    Color32::from_rgb(mix(a.r(), b.r()), mix(a.g(), b.g()), mix(a.b(), b.b()))
}

/// Trace A (the one on screen) in a comparison's plots and figures.
pub const TRACE_A: Color32 = Color32::from_rgb(120, 170, 240);
/// Trace B (the other) in a comparison.
pub const TRACE_B: Color32 = Color32::from_rgb(240, 170, 80);

/// Counter bars under an engine track.
pub const COUNTER_COLOR: Color32 = Color32::from_rgb(120, 150, 200);
/// KV-cache use at or above 95 %.
pub const COUNTER_ALERT_COLOR: Color32 = Color32::from_rgb(220, 80, 80);
/// The shaded time selection.
pub const SELECTION_FILL: Color32 = Color32::from_rgba_unmultiplied_const(90, 140, 230, 50);
/// The selection's edges.
pub const SELECTION_EDGE: Color32 = Color32::from_rgb(140, 180, 255);
/// Background of the selected request's track.
pub const SELECTED_ROW: Color32 = Color32::from_rgba_unmultiplied_const(230, 200, 60, 45);
/// The outline of the selected request in lanes.
pub const SELECTION_OUTLINE: Color32 = Color32::from_rgb(250, 215, 70);
/// Every other track, for reading across.
pub const STRIPE_ROW: Color32 = Color32::from_rgba_unmultiplied_const(255, 255, 255, 8);
/// First-token and finish markers.
pub const MARKER: Color32 = Color32::from_rgb(235, 235, 235);
/// A token's delivery, from the server to the client (a joined trace): apart from the server's own stages.
pub const DELIVERY: Color32 = Color32::from_rgb(190, 120, 200);
/// Ruler ticks and grid lines.
pub const GRID: Color32 = Color32::from_rgba_unmultiplied_const(255, 255, 255, 24);
/// A live request's part still open (sent, no end yet), up to the present.
pub const OPEN_REQUEST: Color32 = Color32::from_rgb(120, 120, 140);
/// A live token read from the journal since the snapshot on screen: a tick on its request's open bar.
pub const FRESH_TOKEN: Color32 = Color32::from_rgb(230, 230, 240);
/// Muted text (labels of counters, hints).
pub const MUTED_TEXT: Color32 = Color32::from_rgb(150, 150, 150);
/// A token chip; neighbours alternate with [`CHIP_ALT`] so token boundaries show.
pub const CHIP: Color32 = Color32::from_rgb(190, 200, 210);
/// Every other token chip.
pub const CHIP_ALT: Color32 = Color32::from_rgb(150, 170, 190);
/// A token somewhat slower (or less certain) than usual.
pub const SLOWISH_TOKEN: Color32 = Color32::from_rgb(240, 200, 110);
/// A token much slower (or far less certain) than usual.
pub const SLOW_TOKEN: Color32 = Color32::from_rgb(240, 120, 110);
/// A draft token its verify step accepted (speculative decoding).
pub const SPEC_DRAFT: Color32 = Color32::from_rgb(140, 200, 190);
/// The target model's own token ending a verify step.
pub const SPEC_BONUS: Color32 = Color32::from_rgb(235, 180, 120);
/// An objective met.
pub const SLO_MET: Color32 = Color32::from_rgb(120, 200, 120);
/// The cursor's time line.
pub const CURSOR: Color32 = Color32::from_rgba_unmultiplied_const(255, 255, 255, 70);

/// Background of the caption strip on PNG captures.
pub const CAPTION_FILL: Color32 = Color32::from_gray(12);
/// A PNG caption's text.
pub const CAPTION_TEXT: Color32 = Color32::WHITE;
/// The time ruler's band above the waterfall.
pub const RULER_FILL: Color32 = Color32::from_gray(30);
/// The top edge of a run of merged steps (many steps, not one).
pub const MERGED_EDGE: Color32 = Color32::from_black_alpha(120);
/// An idle column of an instance's load strip: a line, not a block.
pub const IDLE_LOAD: Color32 = Color32::from_gray(120);
/// Text on a token's chip (the chip is light).
pub const CHIP_TEXT: Color32 = Color32::BLACK;
/// The status dots: recording, stopping, watching.
pub const RECORDING: Color32 = Color32::from_rgb(220, 60, 60);
pub const STOPPING: Color32 = Color32::from_rgb(220, 160, 60);
pub const WATCHING: Color32 = Color32::from_rgb(60, 160, 220);
/// The colours of a plot's lines: the first as the waterfall's counters, then warmer for the higher percentiles
/// (p50, p95, p99) and for goodput against output; more for more labels.
pub const LINE_COLORS: [Color32; 8] = [
    COUNTER_COLOR,
    Color32::from_rgb(0xE0, 0xA0, 0x40),
    Color32::from_rgb(0xE0, 0x50, 0x50),
    Color32::from_rgb(0x60, 0xC0, 0x90),
    Color32::from_rgb(0xB0, 0x80, 0xE0),
    Color32::from_rgb(0x50, 0xC0, 0xD0),
    Color32::from_rgb(0xD0, 0xD0, 0x60),
    Color32::from_rgb(0xE0, 0x80, 0xB0),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cjk_script_gets_the_first_font_that_draws_it_and_no_more_fonts_than_needed() {
        // Droid Sans Fallback draws Chinese and kana but no Hangul; WenQuanYi draws all three.
        let droid = ['中', 'あ'];
        let wqy = ['中', 'あ', '한'];
        let fonts = [&droid[..], &wqy[..]];
        let draws = |k: usize, c: char| fonts[k].contains(&c);
        // Droid preferred: it takes Chinese and kana, WenQuanYi is added for Hangul.
        assert_eq!(choose_fonts(2, &CJK_SCRIPTS, draws), (vec![0, 1], vec![]));
        // WenQuanYi preferred: it alone draws all three.
        let swapped = |k: usize, c: char| fonts[1 - k].contains(&c);
        assert_eq!(choose_fonts(2, &CJK_SCRIPTS, swapped), (vec![0], vec![]));
        // Droid alone: Hangul is missing, and said so.
        assert_eq!(choose_fonts(1, &CJK_SCRIPTS, draws), (vec![0], vec!["Korean Hangul"]));
        // No font: every script missing.
        assert_eq!(
            choose_fonts(0, &CJK_SCRIPTS, draws),
            (vec![], vec!["Chinese", "Japanese kana", "Korean Hangul"])
        );
    }

    #[test]
    fn step_colours_run_from_decode_to_prefill() {
        assert_eq!(step_color(0), stage_color(StageKind::Decode));
        assert_eq!(step_color(PREFILL_CLASSES), stage_color(StageKind::Prefill));
        assert_eq!(
            step_color(200),
            stage_color(StageKind::Prefill),
            "out-of-range classes clamp"
        );
    }

    #[test]
    fn the_main_stages_have_distinct_colours() {
        let main = [
            StageKind::Queue,
            StageKind::Prefill,
            StageKind::Decode,
            StageKind::Preempted,
            StageKind::Waiting,
        ];
        for (i, a) in main.iter().enumerate() {
            for b in &main[i + 1..] {
                assert_ne!(stage_color(*a), stage_color(*b));
            }
        }
    }

    /// Every colour the app draws is one of this file: a `Color32` written anywhere else under `src/ui/` (outside
    /// its tests) fails here, naming the file and line. `Color32::TRANSPARENT` (no colour) is allowed.
    #[test]
    fn every_colour_is_the_themes() {
        fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
            for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let path = entry.path();
                if path.is_dir() {
                    walk(&path, out);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    out.push(path);
                }
            }
        }
        let ui = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/ui");
        let mut files = Vec::new();
        walk(&ui, &mut files);
        assert!(files.len() > 20, "{} files under {}", files.len(), ui.display());
        let mut written = Vec::new();
        for file in files.iter().filter(|f| !f.ends_with("theme.rs")) {
            let text = std::fs::read_to_string(file).unwrap_or_default();
            for (n, line) in text.lines().enumerate() {
                if line.trim_start().starts_with("#[cfg(test)]") {
                    break;
                }
                let code = line.split("//").next().unwrap_or("");
                // A colour made (`from_rgb`, `from_gray`, ...) or named (`WHITE`); not a method of one.
                let colours = code.match_indices("Color32::").filter(|(at, _)| {
                    let rest = &code[at + "Color32::".len()..];
                    (rest.starts_with("from_") || rest.starts_with(|c: char| c.is_ascii_uppercase()))
                        && !rest.starts_with("TRANSPARENT")
                });
                if colours.count() > 0 {
                    written.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
                }
            }
        }
        assert!(
            written.is_empty(),
            "colours written outside ui/theme.rs:\n{}",
            written.join("\n")
        );
    }
}
