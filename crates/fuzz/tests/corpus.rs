//! The fuzz targets' corpora (`fuzz/corpus/<target>/`, minimised after each run) replayed on every `cargo test`:
//! each input that once found new code must still load without a panic. A few seconds; the fuzzing itself is run
//! by hand (docs/RELIABILITY.md).

use std::path::Path;

#[test]
fn every_input_of_every_corpus_still_loads() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    let mut replayed = 0;
    for target in tokenscope_fuzz::TARGETS {
        let Ok(entries) = std::fs::read_dir(root.join(target)) else {
            continue;
        };
        for entry in entries.flatten() {
            if let Ok(data) = std::fs::read(entry.path()) {
                tokenscope_fuzz::run(target, &data);
                replayed += 1;
            }
        }
    }
    assert!(replayed > 0, "no corpus under {}", root.display());
}
