//! Every `console` example of README.md and docs/ runs here, and what it prints is compared with what the docs
//! show (trycmd: `...` on its own line stands for lines left out, `[..]` for the rest of a line). A doc that says
//! something the program no longer prints fails this test.
//!
//! The commands run in a scratch folder that sees the repository's files (sample traces, test data, scripts) but
//! not its `assets/`, so the examples that write a file (`render -o assets/...`, `export -o incident.json`) write
//! there, not into the work tree. Blocks marked `sh` (building, installing, a server to record from, the window
//! itself) are not run; the tests named beside them cover them.
//!
//! To see what a doc's commands print now: `TRYCMD=dump cargo test --test docs` writes it under `dump/`.

use std::path::Path;

/// The repository's top-level entries the scratch folder links to: everything but what the examples write into.
fn linked(name: &str) -> bool {
    !matches!(name, "assets" | "target" | ".git" | "dump")
}

#[test]
fn every_console_example_in_the_docs_prints_what_the_docs_show() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let scratch = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(root).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if linked(&name.to_string_lossy()) {
            std::os::unix::fs::symlink(entry.path(), scratch.path().join(&name)).unwrap();
        }
    }
    std::fs::create_dir(scratch.path().join("assets")).unwrap();
    // trycmd runs a Markdown file's commands in the test's working directory: this process's, set once here (this
    // file holds one test, so nothing else runs in it).
    std::env::set_current_dir(scratch.path()).unwrap();
    let cases = trycmd::TestCases::new();
    cases
        .register_bin("tokenscope", trycmd::cargo::cargo_bin!("tokenscope"))
        .env("NO_COLOR", "1")
        .case(root.join("README.md"))
        .case(root.join("sample_traces/README.md"));
    for doc in std::fs::read_dir(root.join("docs")).unwrap() {
        let path = doc.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            cases.case(path);
        }
    }
    cases.run();
}

/// The README's "Two commands" are the ones a fresh machine runs: `cargo run --release` (the app on the
/// demo: `tests/it/gui.rs` opens it), and `scripts/test.sh`, which installs what the tests need and runs them: exactly
/// what `.ci/run` runs after its format and lint checks. With the test above, which runs the README's examples in
/// order from a fresh folder, this is a new user's first hour replayed.
#[test]
fn the_readme_two_commands_are_what_ci_runs() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let section = readme.split("## Two commands").nth(1).unwrap();
    let block = section.split("```sh\n").nth(1).unwrap().split("```").next().unwrap();
    let commands: Vec<&str> = block
        .lines()
        .map(|l| l.split('#').next().unwrap().trim())
        .filter(|l| !l.is_empty())
        .collect();
    assert_eq!(commands, ["cargo run --release", "scripts/test.sh"], "{block}");
    let ci = std::fs::read_to_string(root.join(".ci/run")).unwrap();
    let tests: Vec<&str> = ci
        .lines()
        .map(str::trim)
        .filter(|l| l.contains("cargo test") || l.contains("scripts/test.sh"))
        .filter(|l| !l.starts_with('#'))
        .collect();
    assert_eq!(tests, ["scripts/test.sh 2>&1 | tee \"$log\""], "{ci}");
    // The script runs every test: it passes its arguments on, and .ci/run gives none; nothing narrows them.
    let script = std::fs::read_to_string(root.join("scripts/test.sh")).unwrap();
    let runs: Vec<&str> = script
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("cargo test"))
        .collect();
    assert_eq!(runs, ["cargo test \"$@\""], "{script}");
    assert!(
        !ci.contains("TOKENSCOPE_SKIP") && !script.contains("TOKENSCOPE_SKIP"),
        "{ci}"
    );
}
