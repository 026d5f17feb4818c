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
