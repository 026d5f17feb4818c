//! A live recording in the app, driven as a user would (egui_kittest), against the local server that replays a real
//! llama.cpp stream (`common/replay.rs`): the request tracks grow while it runs, a token selected while its request
//! streams stays selected as the trace grows, Save now writes what was recorded so far, and Stop ends the recording
//! with everything kept and written.

// Test helpers may unwrap (a panic here is a failed test) and start threads (the server).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

use std::time::{Duration, Instant};

use crate::record::replay;
use eframe::egui;
use egui_kittest::Harness;
use egui_kittest::kittest::{NodeT, Queryable};
use tokenscope::record::client::Sampling;
use tokenscope::record::prompts::{Body, Prompt};
use tokenscope::record::{RecordOptions, journal};
use tokenscope::ui::App;
use tokenscope::ui::shell::live::{LiveOptions, Phase};

/// chat_length.sse: 44 events: a role chunk, 40 token chunks ("What", " is", ...), the finish ("length", so no EOS),
/// usage, `[DONE]`.
fn live_app(url: &str, output: &std::path::Path, requests: usize) -> App {
    live_app_with(url, output, requests, None)
}

/// As [`live_app`]; rotating, the parts go to `output`, a directory, with the journal in it.
fn live_app_with(url: &str, output: &std::path::Path, requests: usize, rotate: Option<Duration>) -> App {
    let defaults = RecordOptions::to(url, requests);
    let options = RecordOptions {
        concurrency: 2,
        sampling: Sampling {
            max_tokens: 42,
            top_logprobs: 3,
            temperature: Some(0.0),
            ..defaults.sampling.clone()
        },
        eos_ids: vec![1],
        grace: Duration::from_millis(100),
        journal: Some(match rotate {
            Some(_) => output.join("journal.partial.jsonl"),
            None => journal::path_for(output),
        }),
        rotate: rotate.map(|every| tokenscope::record::rotate::Rotation {
            dir: output.to_owned(),
            every: Some(every),
            bytes: None,
        }),
        ..defaults
    };
    let prompts = vec![Prompt {
        body: Body::Text("Ask a question.".into()),
        max_tokens: None,
        app_id: None,
        user_id: None,
        at_ms: None,
    }];
    App::recording(
        LiveOptions {
            options,
            prompts,
            output: output.to_owned(),
            raw: None,
            server_log: None,
        },
        None,
    )
}

fn harness(app: App) -> Harness<'static, App> {
    Harness::builder()
        .with_size(egui::vec2(1400.0, 860.0))
        .build_ui_state(|ui, app: &mut App| app.ui(ui), app)
}

/// Steps frames (a real-time wait between them: the recording runs in real time) until `done`, at most 30 s.
fn step_until(h: &mut Harness<'static, App>, what: &str, mut done: impl FnMut(&App) -> bool) {
    let start = Instant::now();
    while !done(h.state()) {
        assert!(start.elapsed() < Duration::from_secs(30), "waited 30 s for {what}");
        if let Some(live) = h.state().live() {
            live.wait_snapshot();
        }
        std::thread::sleep(Duration::from_millis(20));
        h.step();
    }
}

fn shown(app: &App) -> (usize, usize) {
    app.session()
        .map_or((0, 0), |s| (s.view.trace.request_count(), s.view.trace.token_count()))
}

#[test]
fn a_live_recording_grows_keeps_the_selected_token_saves_and_stops_with_everything_kept() {
    // Chunks 40 ms apart: a request streams for about 1.7 s; 40 requests 2 at a time would take about 34 s, far more
    // than the test needs before it stops the recording, however slow its frames.
    let server = replay::start(replay::Behavior::replay(
        &std::fs::read_to_string("tests/data/record/chat_length.sse").unwrap(),
        Duration::from_millis(40),
    ));
    let dir = tempfile::tempdir().unwrap();
    let output = dir.path().join("rec.parquet");
    let mut app = live_app(&server.url, &output, 40);
    app.save_dir = Some(dir.path().to_owned());
    app.shown.timeline = true;
    let mut h = harness(app);
    h.step();
    h.get_by_label_contains("Recording");

    // The first snapshot: a request streaming, some of its tokens shown.
    step_until(&mut h, "a request with 3 tokens", |a| shown(a).1 >= 3);
    let first = shown(h.state());
    let s = h.state().session().unwrap();
    let streaming = (0..s.view.trace.request_count())
        .find(|&r| s.view.trace.requests.finished_ns.at(r).is_none())
        .expect("a request still streaming");
    let id = s.view.trace.request_id(streaming as u32).to_owned();

    // Select it, then its first token ("What") in the high-power view, while it streams.
    h.state_mut()
        .session_mut()
        .unwrap()
        .select(Some(streaming as u32), true);
    h.step();
    h.step();
    h.get_all_by_label("What").next().unwrap().click();
    h.step();
    assert_eq!(
        h.state().session().unwrap().microscope.as_ref().and_then(|m| m.token),
        Some(0)
    );

    // A token that arrives after the snapshot on screen shows at once, over it: after the snapshot's tokens in the
    // high-power view, and as a tick on its request's open bar.
    let mut seen = None;
    step_until(&mut h, "a token drawn before its snapshot", |a| {
        let s = a.session().unwrap();
        let Some(m) = s.microscope.as_ref().filter(|m| !m.fresh.is_empty()) else {
            return false;
        };
        let trace = &s.view.trace;
        assert_eq!(trace.request_id(m.request), id);
        let mut texts: Vec<String> = trace
            .tokens_of(m.request)
            .map(|t| trace.texts.get(trace.tokens.text[t]).unwrap_or_default().to_owned())
            .collect();
        let in_snapshot = texts.len();
        texts.extend(m.fresh.iter().cloned());
        let last_in_snapshot = trace.tokens_of(m.request).map(|t| trace.tokens.emitted_ns[t]).max();
        let after = s
            .waterfall
            .fresh
            .iter()
            .filter(|f| f.0 == m.request)
            .all(|f| Some(f.1) > last_in_snapshot);
        // Every token read since the snapshot is drawn: a tick on its request's track, or on the row below the
        // tracks of a request the snapshot does not have yet.
        let below: usize = s.waterfall.pending.iter().map(|p| p.ticks.len()).sum();
        assert_eq!(s.waterfall.fresh.len() + below, a.live().unwrap().fresh.tokens().len());
        assert!(s.waterfall.pending.iter().all(|p| trace.request_row(&p.id).is_none()));
        seen = Some((texts, in_snapshot, after));
        true
    });
    let (texts, in_snapshot, after) = seen.unwrap();
    // Their ticks are all later than the snapshot's last token of the request: what the snapshot holds left.
    assert!(after, "a token drawn over the snapshot is one the snapshot holds");
    // Each drawn as a chip of its own, besides the snapshot's chips of the same text.
    let display = |text: &str| {
        tokenscope::analysis::tokens::display_text(
            &h.state().session().unwrap().view.trace,
            tokenscope::trace::NULL_U32,
            Some(text),
            tokenscope::trace::Flag::Null,
        )
    };
    let last = display(texts.last().unwrap());
    assert!(texts.len() > in_snapshot);
    // (At least: a candidate of the selected token may read the same.)
    let same = texts.iter().filter(|t| display(t) == last).count();
    assert!(h.query_all_by_label(&last).count() >= same, "{last:?}");

    // The timeline's series of the first snapshots are drawn.
    #[cfg(feature = "query")]
    step_until(&mut h, "the timeline's series", |a| {
        a.session().unwrap().timeline.rows().is_some()
    });

    // The trace grows; the same request and token stay selected, the request now with more tokens.
    step_until(&mut h, "more tokens", |a| shown(a).1 >= first.1 + 10);
    // The timeline kept its series while the next were computed for the grown trace.
    #[cfg(feature = "query")]
    assert!(h.state().session().unwrap().timeline.rows().is_some());
    let s = h.state().session().unwrap();
    let row = s.selected.expect("still selected");
    assert_eq!(s.view.trace.request_id(row), id);
    assert_eq!(s.microscope.as_ref().and_then(|m| m.token), Some(0));
    assert!(shown(h.state()).0 >= first.0);
    // The view follows the present: the latest token is on screen.
    let vp = s.waterfall.viewport.unwrap();
    let latest = (0..s.view.trace.token_count())
        .map(|t| s.view.trace.tokens.emitted_ns[t])
        .max()
        .unwrap();
    assert!(vp.start_ns <= latest && latest <= vp.end_ns(), "{vp:?} misses {latest}");

    // Save now: what was recorded so far, while the recording goes on.
    h.get_by_label("Save now…").click();
    step_until(&mut h, "the saved file", |_| {
        std::fs::read_dir(dir.path()).unwrap().any(|e| {
            e.unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("tokenscope-recording-")
        })
    });
    assert!(matches!(h.state().live().unwrap().phase, Phase::Recording));

    // Stop: no new requests; the streams in flight are cut after the grace period; everything is written.
    h.get_by_label("Stop").click();
    step_until(&mut h, "the recording's end", |a| {
        matches!(a.live().unwrap().phase, Phase::Ended(_)) && !a.live().unwrap().running()
    });
    let Phase::Ended(what) = &h.state().live().unwrap().phase else {
        unreachable!()
    };
    assert!(what.starts_with("wrote "), "{what}");
    let written = tokenscope::load::load(&output, &tokenscope::ingest::Progress::default()).unwrap();
    let s = h.state().session().unwrap();
    // What is on screen at the end is the trace written: every request sent, each finished or cut.
    assert_eq!(written.trace.request_count(), s.view.trace.request_count());
    assert_eq!(written.trace.token_count(), s.view.trace.token_count());
    assert!(written.trace.request_count() >= first.0);
    assert!((0..written.trace.request_count()).all(|r| written.trace.requests.finished_ns.at(r).is_some()));
    // The tokens drawn before their snapshot were the request's next ones, in order.
    let w = &written.trace;
    let recorded: Vec<String> = w
        .tokens_of(w.request_row(&id).unwrap())
        .map(|t| w.texts.get(w.tokens.text[t]).unwrap_or_default().to_owned())
        .collect();
    assert!(recorded.starts_with(&texts), "{texts:?} is not how {recorded:?} begins");
    // The journal did its job and is gone.
    assert!(!journal::path_for(&output).exists());
    h.get_by_label_contains("Recorded: wrote");
}

fn ids(trace: &tokenscope::trace::Trace) -> Vec<String> {
    (0..trace.request_count())
        .map(|r| trace.request_id(r as u32).to_owned())
        .collect()
}

#[test]
fn a_rotating_live_recording_lets_its_written_parts_leave_memory_and_opens_them_from_the_live_bar() {
    // Chunks 30 ms apart: a request streams for about 1.3 s; 24 requests 2 at a time take about 16 s; a part every
    // 3 s, its first with the 4 requests ended by then. The last 4 are held by the server until the test has done
    // what it does while the recording goes on, however slow its frames.
    let server = replay::start_holding(
        replay::Behavior::replay(
            &std::fs::read_to_string("tests/data/record/chat_length.sse").unwrap(),
            Duration::from_millis(30),
        ),
        20,
    );
    let dir = tempfile::tempdir().unwrap();
    let parts = dir.path().join("parts");
    std::fs::create_dir_all(&parts).unwrap();
    let mut h = harness(live_app_with(&server.url, &parts, 24, Some(Duration::from_secs(3))));
    h.step();
    step_until(&mut h, "the first snapshot", |a| shown(a).0 > 0);
    let zero = h.state().session().unwrap().view.t0_ns;

    // A part is written; the snapshot after it holds none of its requests (they left the journal), and the live
    // bar lists it.
    let part1 = parts.join("part-00001.parquet");
    let mut in_part: Vec<String> = Vec::new();
    step_until(
        &mut h,
        "a snapshot without the first part's requests, the parts listed",
        |a| {
            if in_part.is_empty() && part1.exists() {
                let loaded = tokenscope::load::load(&part1, &tokenscope::ingest::Progress::default()).unwrap();
                in_part = ids(&loaded.trace);
            }
            let on_screen = a.session().map(|s| ids(&s.view.trace)).unwrap_or_default();
            !in_part.is_empty()
                && !a.live().unwrap().spilled.is_empty()
                && !on_screen.is_empty()
                && on_screen.iter().all(|id| !in_part.contains(id))
        },
    );
    assert!(
        in_part.len() >= 2,
        "the first part holds the first requests that ended: {in_part:?}"
    );
    // The view's zero is still the recording's start, before what is in memory; following the present, the view
    // begins where what is in memory does, not at that zero.
    h.step();
    h.step();
    let s = h.state().session().unwrap();
    assert_eq!(s.view.t0_ns, zero);
    assert!(s.view.trace.start_ns() > zero);
    assert!(s.waterfall.viewport.unwrap().start_ns > zero);
    // The part's findings, computed from its file on a thread of their own, are said in the menu.
    step_until(&mut h, "the first part's findings", |a| {
        a.live().unwrap().part_findings.contains_key(&part1)
    });
    let expected = {
        let loaded = tokenscope::load::load(&part1, &tokenscope::ingest::Progress::default()).unwrap();
        // The app's objectives and thresholds: the defaults, no settings stored.
        let found = tokenscope::analysis::findings::find(
            &loaded.trace,
            &tokenscope::analysis::summary::Slo::DEFAULT,
            &tokenscope::analysis::findings::Thresholds::default(),
        );
        tokenscope::ui::shell::live::PartFindings::of(&found).said()
    };
    assert_eq!(
        h.state().live().unwrap().part_findings[&part1]
            .as_ref()
            .map(tokenscope::ui::shell::live::PartFindings::said),
        Ok(expected.clone())
    );
    h.step();
    h.get_by_label_contains("Earlier: ").click();
    h.step();
    h.step();
    let in_menu = |h: &Harness<'static, App>| {
        h.get_all_by_label_contains("part-00001.parquet")
            .filter_map(|n| n.accesskit_node().label())
            .find(|l| l.starts_with("part-00001.parquet"))
            .expect("the part in the menu")
    };
    let label = in_menu(&h);
    assert!(label.ends_with(&format!(" · {expected}")), "{label}");
    // The part, opened from the menu, over the live view: its requests read again from disk.
    h.get_by_label(&label).click();
    step_until(&mut h, "the part on screen", |a| {
        a.session().is_some_and(|s| ids(&s.view.trace) == in_part)
    });
    assert!(matches!(h.state().live().unwrap().phase, Phase::Recording));
    // And back to the recording, which went on meanwhile.
    let live_again = |h: &mut Harness<'static, App>| {
        h.get_by_label("Show the recording").click();
        step_until(h, "the live view again", |a| {
            a.session()
                .is_some_and(|s| matches!(s.source, tokenscope::ui::TraceSource::Live { .. }))
        });
    };
    live_again(&mut h);

    // Scrolled back before the requests in memory: the part the view reaches into is offered, and opens.
    h.state_mut().live_mut().unwrap().follow.on = false;
    let t0 = h.state().session().unwrap().view.t0_ns;
    h.state_mut().session_mut().unwrap().waterfall.fit = Some((t0 - 5_000_000_000, t0 - 1_000_000));
    h.step();
    h.step();
    h.get_by_label_contains("Earlier requests are on disk: open part-0000")
        .click();
    step_until(&mut h, "a part on screen", |a| {
        a.session()
            .is_some_and(|s| matches!(&s.source, tokenscope::ui::TraceSource::Path(p) if p.starts_with(&parts)))
    });
    live_again(&mut h);
    assert!(matches!(h.state().live().unwrap().phase, Phase::Recording));
    server.release();

    // The held requests let go, every request ends; the last part is on screen; the journal is gone; the directory opens as one trace with
    // every request and token.
    step_until(&mut h, "the recording's end", |a| {
        matches!(a.live().unwrap().phase, Phase::Ended(_)) && !a.live().unwrap().running()
    });
    let Phase::Ended(what) = &h.state().live().unwrap().phase else {
        unreachable!()
    };
    assert!(what.contains(" parts to "), "{what}");
    assert!(!parts.join("journal.partial.jsonl").exists());
    let written = tokenscope::record::rotate::parts_in(&parts);
    assert!(written.len() >= 2, "{written:?}");
    let last = tokenscope::load::load(written.last().unwrap(), &tokenscope::ingest::Progress::default()).unwrap();
    assert_eq!(ids(&h.state().session().unwrap().view.trace), ids(&last.trace));
    let all = tokenscope::load::load(&parts, &tokenscope::ingest::Progress::default()).unwrap();
    assert_eq!(all.trace.request_count(), 24);
    // 40 tokens a request, each in its own chunk (stopped by length: no EOS).
    assert_eq!(all.trace.token_count(), 24 * 40);
}

#[test]
fn a_recording_whose_recorder_was_killed_says_it_is_incomplete_when_opened() {
    // A journal as a kill -9 leaves it: a request that ended, one in flight after two chunks.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rec.parquet.partial.jsonl");
    let t0 = 1_764_403_200_000_000_000_i64;
    let chunk = |id: &str, ms: i64, text: &str| {
        let data = serde_json::json!({"choices": [{"index": 0, "delta": {"content": text}}]}).to_string();
        serde_json::json!({"request_id": id, "sent_ns": t0, "events": [[t0 + ms * 1_000_000, data]]}).to_string()
    };
    let end = serde_json::json!({"request_id": "a", "sent_ns": t0, "end_ns": t0 + 40_000_000, "ending": "done",
        "events": []});
    let lines = [
        chunk("a", 10, "Hi"),
        chunk("b", 15, "Hel"),
        chunk("a", 20, "!"),
        end.to_string(),
        chunk("b", 30, "lo"),
    ];
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let mut app = App::new(tokenscope::ui::TraceSource::Path(path), None);
    app.wait_loaded();
    let mut h = harness(app);
    h.step();
    h.get_by_label_contains("This recording is incomplete: the recording was interrupted: 1 request was in flight");
    let t = &h.state().session().unwrap().view.trace;
    assert_eq!((t.request_count(), t.token_count()), (2, 4));
}
