//! The fuzz targets' corpora (`fuzz/corpus/<target>/`, minimised after each run) replayed on every `cargo test`:
//! each input that once found new code must still load without a panic. A few seconds; the fuzzing itself is run
//! by hand (docs/RELIABILITY.md).

use std::path::Path;

#[test]
fn every_input_of_every_corpus_still_loads() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    for target in tokenscope_fuzz::Target::ALL {
        let dir = root.join(target.name());
        let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let mut replayed = 0;
        for entry in entries.flatten() {
            if let Ok(data) = std::fs::read(entry.path()) {
                target.run(&data);
                replayed += 1;
            }
        }
        // Every target has a corpus: one left without is a target no test runs.
        assert!(replayed > 0, "no input under {}", dir.display());
    }
}
