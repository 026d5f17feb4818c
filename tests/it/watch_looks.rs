//! A watch's look at a llama-server log places only what changed (issue 50): the records of the tasks released and
//! of the steps past are kept from look to look, moved when the log's clock is placed anew, cut when the log forgets,
//! placed again when a line changes them. At every look, on real logs, the trace is the one placing the whole log
//! makes.

use std::io::Read as _;
use std::path::Path;
use std::time::{Duration, SystemTime};

use tokenscope::import::llamacpp_log::Incremental;
use tokenscope::import::{LivePart, live, llamacpp_live};
use tokenscope::trace::Trace;
use tokenscope::trace::report::Report;

fn lines_of(path: &str) -> String {
    let gz = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut text = String::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_string(&mut text)
        .unwrap_or_else(|e| panic!("{path}: {e}"));
    text
}

/// The trace as the format writes it: strings, not the interners' ids (which follow the order records came in).
fn written(trace: &Trace, dir: &Path) -> String {
    let file = dir.join("written.jsonl");
    tokenscope::format::jsonl::write(trace, &file).unwrap();
    std::fs::read_to_string(&file).unwrap()
}

fn same_report(a: &Report, b: &Report, at: &str) {
    assert_eq!(a.records, b.records, "{at}: records");
    assert_eq!(a.notes, b.notes, "{at}: notes");
    assert_eq!(a.rejected.len(), b.rejected.len(), "{at}: rejected");
    assert_eq!(a.files.len(), b.files.len(), "{at}: files");
}

/// Feeds `log`'s lines one by one, a look every `every` lines; every fifth look forgets what ended more than
/// `keep_s` before the last line, every third moves the file's last change (the log's clock placed anew). Each look
/// is compared with the whole placing of the same lines. Returns what the last look kept, the largest part of the
/// tasks kept at a look, and the requests forgotten.
fn looks_are_the_whole_placing(
    log: &str,
    every: usize,
    keep_s: i64,
) -> (tokenscope::import::llamacpp_log::Kept, f64, usize) {
    let text = lines_of(log);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("llama-server.log");
    std::fs::write(&path, "").unwrap();
    let mut inc = Incremental::default();
    let lines: Vec<&str> = text.lines().collect();
    let (mut looks, mut most_kept, mut forgotten) = (0usize, 0f64, 0usize);
    for (i, line) in lines.iter().enumerate() {
        inc.line(line.as_bytes(), 0);
        if i % every != every - 1 && i + 1 != lines.len() {
            continue;
        }
        looks += 1;
        if looks % 3 == 0 {
            let when = SystemTime::UNIX_EPOCH + Duration::from_micros(1_800_000_000_000_000 + 1_237 * i as u64);
            std::fs::File::options()
                .write(true)
                .open(&path)
                .unwrap()
                .set_modified(when)
                .unwrap();
        }
        let (looked, looked_report) = llamacpp_live(&mut inc, &path);
        let (whole, whole_report) = live(&[LivePart::Llamacpp { log: &inc, path: &path }]);
        let at = format!("{log}, the look after line {}", i + 1);
        assert_eq!(looked.request_count(), whole.request_count(), "{at}: requests");
        assert_eq!(looked.iterations.len(), whole.iterations.len(), "{at}: steps");
        assert_eq!(looked.token_count(), whole.token_count(), "{at}: tokens");
        assert!(
            written(&looked, dir.path()) == written(&whole, dir.path()),
            "{at}: the records differ"
        );
        same_report(&looked_report, &whole_report, &at);
        let kept = inc.kept();
        if whole.request_count() > 0 {
            most_kept = most_kept.max(kept.tasks as f64 / whole.request_count() as f64);
        }
        if looks % 5 == 0
            && let Some(last) = inc.last_us()
        {
            forgotten += inc.forget_before(last - keep_s * 1_000_000);
        }
    }
    eprintln!(
        "{log}: {looks} looks, kept {:?}, most {most_kept}, {forgotten} forgotten",
        inc.kept()
    );
    (inc.kept(), most_kept, forgotten)
}

#[test]
fn a_look_at_the_real_watch_runs_log_places_only_what_changed_and_is_the_whole_placing() {
    // 5 requests, one a 2,583-token prompt in chunks, over about 60 s: forgetting past 15 s cuts tasks and steps.
    let (kept, most, forgotten) =
        looks_are_the_whole_placing("tests/data/real/llamacpp-runs/watch.server.log.gz", 37, 4);
    assert!(kept.steps > 0, "steps kept: {kept:?}");
    assert!(most > 0.5, "at most {most} of the tasks kept at a look");
    assert!(forgotten > 0);
    assert!(kept.looks_anew <= 3, "{kept:?}");
}

#[test]
fn a_look_at_a_real_speculative_log_places_only_what_changed_and_is_the_whole_placing() {
    // The server speculates from its first answer: verify steps, drafts accepted and rejected; the log turns
    // speculative once (every token's role is then said: the records placed before are placed again).
    let (kept, most, forgotten) =
        looks_are_the_whole_placing("tests/data/real/llamacpp-runs/spec.server.log.gz", 29, 10);
    assert!(kept.steps > 0, "steps kept: {kept:?}");
    assert!(most > 0.5, "at most {most} of the tasks kept at a look");
    assert!(forgotten > 0);
    assert!(kept.looks_anew <= 3, "{kept:?}");
}

#[test]
fn a_look_at_four_concurrent_real_streams_is_the_whole_placing() {
    let (kept, most, forgotten) =
        looks_are_the_whole_placing("tests/data/real/llamacpp-runs/healthy-c4.server.log.gz", 53, 3);
    assert!(kept.steps > 0, "steps kept: {kept:?}");
    assert!(most > 0.5, "at most {most} of the tasks kept at a look");
    assert!(forgotten > 0);
}
