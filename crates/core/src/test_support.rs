//! What the unit tests share: the committed sample traces, loaded.

use crate::ingest::Progress;
use crate::load::load;
use crate::trace::Trace;

/// A trace of `sample_traces/`, loaded whole; panics (fails the test) when it does not load.
pub fn sample(name: &str) -> Trace {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../sample_traces")
        .join(name);
    match load(&path, &Progress::default()) {
        Ok(l) => l.trace,
        Err(e) => panic!("{}: {e}", path.display()),
    }
}

/// The trace of JSONL text made in a test, with its load report; panics (fails the test) on a fatal error.
pub fn trace_and_report(jsonl: &str) -> (Trace, crate::trace::report::Report) {
    let mut b = crate::trace::TraceBuilder::default();
    if let Err(e) = crate::format::jsonl::read_from(
        jsonl.as_bytes(),
        std::path::Path::new("t.jsonl"),
        0,
        &mut b,
        &Progress::default(),
    ) {
        panic!("t.jsonl: {e}");
    }
    b.finish()
}

/// The trace of JSONL text made in a test.
pub fn trace_of(jsonl: &str) -> Trace {
    trace_and_report(jsonl).0
}
