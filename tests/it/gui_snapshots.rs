//! Five views of the demo trace drawn by the window and compared with the reviewed pictures in `tests/snapshots/`:
//! the waterfall, the long prefill's finding under the microscope, the lanes, the timeline and the statistics.
//!
//! A picture that changes fails its test and leaves `NAME.new.png` and `NAME.diff.png` beside the reviewed one. Look
//! at them; when the change is meant, `UPDATE_SNAPSHOTS=1 cargo test gui_snapshot` takes the new pictures, which
//! are then reviewed and committed with the change (docs/DEVELOPING.md).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers may unwrap: a panic here is a failed test"
)]

use egui_kittest::Harness;
use egui_kittest::kittest::Queryable;
use tokenscope::ui::App;

use crate::gui::{demo_app, harness};

/// What the window draws, compared with `tests/snapshots/{name}.png`, once every job the frames started (the
/// findings, a range's analysis, the timeline, the statistics) is done and drawn: on a busy machine a job outlasts
/// the frames `run` allows, and a picture taken then would show its spinner. The window's text says no time of day
/// nor how long anything took, so its pixels are the same run after run on the same renderer (Mesa's).
fn check(h: &mut Harness<'static, App>, name: &str) {
    for _ in 0..100 {
        h.step();
        if let Some(s) = h.state_mut().session_mut() {
            s.findings.wait();
            s.wait_interference();
            s.timeline.wait();
            s.stats.wait();
        }
        if h.try_run().is_ok() {
            break;
        }
    }
    h.snapshot(name);
}

#[test]
fn gui_snapshot_the_demo_opens_on_its_waterfall() {
    let mut h = harness(demo_app());
    check(&mut h, "waterfall");
}

#[test]
fn gui_snapshot_a_finding_clicked_zooms_to_its_request_under_the_microscope() {
    let mut h = harness(demo_app());
    h.get_by_label_contains("doc-96k's prefill of 96,213 prompt tokens")
        .click();
    check(&mut h, "finding_microscope");
}

#[test]
fn gui_snapshot_lanes_pack_the_demo() {
    let mut h = harness(demo_app());
    h.get_by_label("Layout").click();
    h.run();
    h.get_by_label("lanes (packed)").click();
    check(&mut h, "lanes");
}

#[test]
fn gui_snapshot_the_timeline_under_the_waterfall() {
    let mut h = harness(demo_app());
    h.get_by_label("Timeline").click();
    h.step();
    h.state_mut().session_mut().unwrap().timeline.wait();
    check(&mut h, "timeline");
}

#[test]
fn gui_snapshot_the_statistics_by_app() {
    let mut app = demo_app();
    app.session_mut().unwrap().stats.grouping =
        tokenscope::ui::views::stats::Grouping::By(tokenscope::analysis::summary::GroupBy::AppId);
    app.shown.stats = true;
    // The harness every GUI test opens the window with; `check` waits for the statistics it starts.
    let mut h = harness(app);
    check(&mut h, "statistics");
}
