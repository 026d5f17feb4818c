//! Headless PNGs (`tokenscope render`): drawn by the window's own code with no display and no GPU, at 2 pixels per
//! point; the demo's waterfall and request views are the reviewed pictures of tests/snapshots/; a time range zooms;
//! bad arguments get clear errors.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers may unwrap: a panic here is a failed test"
)]

use std::path::Path;

use crate::common::tokenscope;
use tokenscope::trace::StageKind;
use tokenscope::ui::widgets::theme::stage_color;

const DEMO: &str = "sample_traces/demo.parquet";
const LONG: &str = "sample_traces/long_prefill.jsonl";

fn render(args: &[&str], out: &Path) -> image::RgbaImage {
    let mut all = vec!["render"];
    all.extend_from_slice(args);
    let out_s = out.to_string_lossy();
    all.extend_from_slice(&["-o", &out_s]);
    let (code, stdout, stderr) = tokenscope(&all);
    assert_eq!(code, 0, "render {args:?}: {stderr}");
    assert!(stdout.contains("wrote"), "{stdout}");
    image::open(out).unwrap().to_rgba8()
}

#[test]
fn the_demo_renders_at_2x_and_its_two_views_are_the_reviewed_pictures() {
    let dir = tempfile::tempdir().unwrap();
    let waterfall = render(&[DEMO], &dir.path().join("w.png"));
    // 1400 x 860 points (the defaults) at 2 pixels per point.
    assert_eq!(waterfall.dimensions(), (2800, 1720));
    // What they draw, at 1 pixel per point (a quarter of the bytes to review and keep): compared with the reviewed
    // pictures in tests/snapshots/, as the window's views are (gui_snapshots.rs, which says how to update them).
    let waterfall = render(&[DEMO, "--scale", "1"], &dir.path().join("w1.png"));
    egui_kittest::image_snapshot(&waterfall, "render_waterfall");
    let request = render(
        &[
            DEMO,
            "--request",
            "med-question",
            "--token",
            "37",
            "--view",
            "request",
            "--scale",
            "1",
        ],
        &dir.path().join("r.png"),
    );
    egui_kittest::image_snapshot(&request, "render_request");
}

#[test]
fn scale_and_size_set_the_pixels() {
    let dir = tempfile::tempdir().unwrap();
    let img = render(
        &[
            LONG,
            "--width",
            "800",
            "--height",
            "500",
            "--scale",
            "1",
            "--no-caption",
        ],
        &dir.path().join("small.png"),
    );
    assert_eq!(img.dimensions(), (800, 500));
}

/// The largest share of a pixel row (over the time axis, right of the 150-point label column) in this colour.
fn widest_row_share(img: &image::RgbaImage, rgb: [u8; 3]) -> f64 {
    let (w, h) = img.dimensions();
    let x0 = 160;
    (0..h)
        .map(|y| (x0..w).filter(|&x| img.get_pixel(x, y).0[..3] == rgb).count() as f64 / f64::from(w - x0))
        .fold(0.0, f64::max)
}

#[test]
fn a_time_range_zooms_the_waterfall() {
    // The long prefill runs from ~1.5 s to ~12.7 s of a trace of ~16 s: in the whole view its steps take about two
    // thirds of the engine track's width. Zoomed into 3 s .. 9 s, they fill all of it.
    let dir = tempfile::tempdir().unwrap();
    let prefill = stage_color(StageKind::Prefill).to_array();
    let rgb = [prefill[0], prefill[1], prefill[2]];
    let full = render(&[LONG, "--scale", "1"], &dir.path().join("full.png"));
    let zoomed = render(
        &[LONG, "--scale", "1", "--from-ms", "3000", "--to-ms", "9000"],
        &dir.path().join("zoom.png"),
    );
    let (f, z) = (widest_row_share(&full, rgb), widest_row_share(&zoomed, rgb));
    assert!((0.5..0.75).contains(&f), "whole view: {f}");
    assert!(z > 0.97, "zoomed: {z}");
}

#[test]
fn bad_arguments_get_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.png");
    let out_s = out.to_string_lossy().into_owned();
    let cases: [(&[&str], &str); 7] = [
        (&["--from-ms", "5000", "--to-ms", "1000"], "give 0 <= FROM < TO"),
        (&["--from-ms", "5000"], "give both --from-ms and --to-ms"),
        (&["--from-ms", "900000", "--to-ms", "990000"], "the trace spans 0 ms to"),
        (&["--request", "no-such"], "no request with id no-such"),
        (
            &["--request", "short-700", "--token", "500"],
            "request short-700 has no token 500: its tokens are indices 0 to 119",
        ),
        (
            &["--view", "request"],
            "the request view needs a request: give --request ID",
        ),
        (&["--width", "10"], "size 10 x 860 points"),
    ];
    for (args, expected) in cases {
        let mut all = vec!["render", LONG, "-o", &out_s];
        all.extend_from_slice(args);
        let (code, _, stderr) = tokenscope(&all);
        assert_ne!(code, 0, "{args:?}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
    let missing = dir.path().join("no/such/dir/x.png");
    let (code, _, stderr) = tokenscope(&["render", LONG, "-o", &missing.to_string_lossy()]);
    assert_eq!(code, 1);
    assert!(stderr.contains("does not exist"), "{stderr}");
    // Size and view errors come before loading, as usage errors.
    let (code, _, stderr) = tokenscope(&["render", LONG, "--scale", "0.4", "-o", &out_s]);
    assert_eq!(code, 2);
    assert!(stderr.contains("scale 0.4: give 0.5 to 4 pixels per point"), "{stderr}");
    let (code, _, stderr) = tokenscope(&["render", LONG, "--from-ms", "-5", "--to-ms", "10", "-o", &out_s]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("--from-ms -5 --to-ms 10: give 0 <= FROM < TO"),
        "{stderr}"
    );
    let (code, _, stderr) = tokenscope(&["render", LONG, "--slo-ttft-ms", "NaN", "-o", &out_s]);
    assert_eq!(code, 2);
    assert!(stderr.contains("an objective is a positive number of ms"), "{stderr}");
    let (code, _, stderr) = tokenscope(&["render", LONG, "-o", &dir.path().join("x.jpg").to_string_lossy()]);
    assert_eq!(code, 2);
    assert!(stderr.contains("give the output a .png name"), "{stderr}");
    assert!(!out.exists(), "no PNG after an error");
}

#[test]
fn a_range_far_past_the_end_still_draws_the_trace() {
    // 0 ms .. 1e13 ms covers the whole trace: the ms-to-ns conversion saturates instead of overflowing.
    let dir = tempfile::tempdir().unwrap();
    let img = render(
        &[LONG, "--scale", "1", "--from-ms", "0", "--to-ms", "1e13"],
        &dir.path().join("far.png"),
    );
    assert_eq!(img.dimensions(), (1400, 860));
}

#[test]
fn a_finding_renders_as_a_click_on_it_shows_it() {
    let dir = tempfile::tempdir().unwrap();
    // long_prefill's second finding (in `tokenscope findings` order) is doc-96k's prefill monopoly: its five steps
    // with a margin, doc-96k and its first token selected, both views.
    let (code, stdout, _) = tokenscope(&["findings", LONG]);
    assert_eq!(code, 0);
    let second = stdout.split("\n\n").nth(2).unwrap();
    assert!(second.contains("[prefill-monopoly]"), "{stdout}");
    let finding = render(&[LONG, "--finding", "2"], &dir.path().join("f.png"));
    assert_eq!(finding.dimensions(), (2800, 1720));
    let request = render(
        &[LONG, "--request", "doc-96k", "--token", "0"],
        &dir.path().join("r.png"),
    );
    assert_ne!(finding, request, "the finding's range is zoomed to and selected");
    // Beyond the count, and with a range given: clear errors.
    let out = dir.path().join("x.png");
    let out_s = out.to_string_lossy();
    let (code, _, stderr) = tokenscope(&["render", LONG, "--finding", "9", "-o", &out_s]);
    assert_eq!(code, 2);
    assert!(
        stderr.contains("long_prefill.jsonl has 5 findings") && stderr.contains("give 1 to 5"),
        "{stderr}"
    );
    let (code, _, stderr) = tokenscope(&["render", LONG, "--finding", "1", "--from-ms", "0", "-o", &out_s]);
    assert_eq!(code, 2);
    assert!(stderr.contains("cannot be used with"), "{stderr}");
}
