//! The app under random input (egui_kittest, no display): thousands of seeded random clicks, drags, wheel turns,
//! keys, typed text, resizes, file opens (the samples, the bad and the corrupt files) and comparisons, driving every
//! panel the clicks reach. After each input the UI must settle within a bound of frames (no repaint loop), and
//! nothing may panic. `TOKENSCOPE_GUI_STEPS=20000 cargo test --test integration gui_random` runs longer; the seed of a failure is
//! in its message.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers may unwrap: a panic here is a failed test"
)]

use std::path::PathBuf;

use eframe::egui::{self, Key, Modifiers, pos2, vec2};
use egui_kittest::Harness;
use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64Mcg;
use tokenscope::ui::{App, TraceSource};

/// Frames the UI may take to settle after one input: a widget that asks for a repaint every frame (a loop) fails.
const SETTLE_FRAMES: u64 = 12;

/// Steps per seed when `TOKENSCOPE_GUI_STEPS` is not set: about a minute for the whole test in a debug build.
const DEFAULT_STEPS: usize = 500;

/// Files the random opens pick from: every sample, the malformed JSONL files and the corrupt Parquet ones.
fn files() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = Vec::new();
    for dir in ["sample_traces", "tests/data/bad", "tests/data/corrupt"] {
        let Ok(entries) = std::fs::read_dir(dir) else { continue };
        for e in entries.flatten() {
            let p = e.path();
            let name = p.to_string_lossy();
            if name.ends_with(".jsonl") || name.ends_with(".parquet") {
                v.push(p);
            }
        }
    }
    v.sort();
    v
}

/// Waits for every background job of the app: loads, findings, statistics, range analyses, timelines, queries,
/// candidates, the comparison, saves.
fn finish_jobs(app: &mut App) {
    app.wait_loaded();
    if let Some(s) = app.session_mut() {
        s.findings.wait();
        s.stats.wait();
        s.wait_interference();
        #[cfg(feature = "query")]
        {
            s.timeline.wait();
            s.query.wait();
        }
        let trace = std::sync::Arc::clone(&s.view.trace);
        if let Some(m) = &mut s.microscope {
            m.wait_candidates(&trace);
        }
    }
    if let Some(c) = app.comparing_mut() {
        c.wait();
        c.other.stats.wait();
        c.other.wait_interference();
        #[cfg(feature = "query")]
        c.other.timeline.wait();
    }
    let _ = app.wait_saved();
}

const KEYS: [Key; 12] = [
    Key::W,
    Key::A,
    Key::S,
    Key::D,
    Key::F,
    Key::Escape,
    Key::Enter,
    Key::Tab,
    Key::ArrowDown,
    Key::ArrowUp,
    Key::Space,
    Key::Backspace,
];

fn drive(seed: u64, steps: usize, files: &[PathBuf]) {
    let dir = tempfile::tempdir().unwrap();
    let mut app = App::new(TraceSource::Demo, None);
    app.wait_loaded();
    // Saves land in a temporary folder instead of asking through a dialog.
    app.save_dir = Some(dir.path().to_path_buf());
    let mut size = vec2(1400.0, 860.0);
    // A token in a script no font of the machine has (CJK without a system CJK font, emoji) shows as a box, as it
    // does in the app (egui's default policy), instead of failing the test (kittest's).
    let mut h = Harness::builder()
        .with_size(size)
        .with_max_steps(SETTLE_FRAMES)
        .allow_missing_glyphs()
        .build_ui_state(|ui, app: &mut App| app.ui(ui), app);
    // The first frame starts the findings on a thread: waited for, so that a busy machine cannot outlast the frames
    // `run` allows.
    h.step();
    if let Some(session) = h.state_mut().session_mut() {
        session.findings.wait();
    }
    h.run();
    let mut rng = Pcg64Mcg::seed_from_u64(seed);
    for step in 0..steps {
        let at = pos2(rng.random_range(0.0..size.x), rng.random_range(0.0..size.y));
        let what = rng.random_range(0..100u32);
        let action = match what {
            0..=34 => {
                h.hover_at(at);
                h.event(egui::Event::PointerButton {
                    pos: at,
                    button: egui::PointerButton::Primary,
                    pressed: true,
                    modifiers: Modifiers::NONE,
                });
                h.event(egui::Event::PointerButton {
                    pos: at,
                    button: egui::PointerButton::Primary,
                    pressed: false,
                    modifiers: Modifiers::NONE,
                });
                "click"
            }
            35..=49 => {
                let to = pos2(rng.random_range(0.0..size.x), rng.random_range(0.0..size.y));
                h.hover_at(at);
                h.drag_at(at);
                h.run_ok();
                h.hover_at(pos2(f32::midpoint(at.x, to.x), f32::midpoint(at.y, to.y)));
                h.run_ok();
                h.drop_at(to);
                "drag"
            }
            50..=59 => {
                h.hover_at(at);
                let delta = vec2(rng.random_range(-200.0..200.0), rng.random_range(-400.0..400.0));
                let modifiers = if rng.random_range(0..2u32) == 0 {
                    Modifiers::COMMAND
                } else {
                    Modifiers::NONE
                };
                h.event_modifiers(
                    egui::Event::MouseWheel {
                        unit: egui::MouseWheelUnit::Point,
                        delta,
                        modifiers,
                        phase: egui::TouchPhase::Move,
                        source: egui::MouseWheelSource::Unknown,
                    },
                    modifiers,
                );
                "wheel"
            }
            60..=74 => {
                h.key_press(KEYS[rng.random_range(0..KEYS.len())]);
                "key"
            }
            75..=79 => {
                let text: String = (0..rng.random_range(1..12usize))
                    .map(|_| char::from(rng.random_range(b' '..b'~')))
                    .collect();
                h.event(egui::Event::Text(text));
                "text"
            }
            80..=84 => {
                size = vec2(rng.random_range(300.0..2000.0), rng.random_range(200.0..1300.0));
                h.set_size(size);
                "resize"
            }
            85..=91 => {
                let file = &files[rng.random_range(0..files.len())];
                h.state_mut().open(TraceSource::Path(file.clone()));
                h.state_mut().wait_loaded();
                "open"
            }
            92..=95 => {
                let file = &files[rng.random_range(0..files.len())];
                h.state_mut().compare_with(TraceSource::Path(file.clone()));
                h.state_mut().wait_compared();
                "compare"
            }
            _ => {
                h.state_mut().open(TraceSource::Demo);
                h.state_mut().wait_loaded();
                "demo"
            }
        };
        // A spinner repaints until its job ends: the jobs are waited for, then the UI must settle.
        let mut settled = h.try_run();
        for _ in 0..3 {
            if settled.is_ok() {
                break;
            }
            finish_jobs(h.state_mut());
            settled = h.try_run();
        }
        if let Err(e) = settled {
            panic!("seed {seed}, step {step} ({action} at {at:?}, window {size:?}): the UI did not settle: {e}");
        }
    }
}

#[test]
fn random_input_never_panics_and_the_ui_always_settles() {
    let steps = std::env::var("TOKENSCOPE_GUI_STEPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_STEPS);
    let files = files();
    assert!(files.len() >= 10, "{files:?}");
    for seed in [1, 2, 3] {
        drive(seed, steps, &files);
    }
}
