//! What the core's integration tests share: the repository's files, found from the crate's own directory (tests run
//! in `crates/core`, the sample traces and test data are at the repository's root).

use std::path::PathBuf;

/// A path from the repository's root.
pub fn repo(path: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join(path)
}
