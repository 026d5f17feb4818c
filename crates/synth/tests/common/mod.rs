//! What the simulator's integration tests share: the repository's files, found from the crate's own directory (tests
//! run in `crates/synth`, the test data are at the repository's root).

use std::path::PathBuf;

/// A path from the repository's root.
pub fn repo(path: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join(path)
}
