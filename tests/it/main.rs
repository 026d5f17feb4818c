//! The app's and the CLI's integration tests, in one test binary. Each file of `tests/it/` is a module here (`cargo
//! test --test integration <name>::` runs one of them; `gui_` files drive the window with egui_kittest, `cli_` files
//! the command line, the others both or the library): one binary links the app,
//! polars and wgpu once, where one binary per file linked them twenty times over (about 5 GB of test executables,
//! which ran a CI machine's disk out). `tests/docs.rs` is apart: it changes the process's working directory.

// Test helpers may unwrap (a panic here is a failed test) and start threads (a stopper, a watchdog).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

mod common;

mod cli;
mod cli_render;
mod cli_streamed;
mod corrupt;
mod diff;
mod disaggregation;
mod export;
mod fit;
mod fleet;
mod formats;
mod gui;
mod gui_compare;
mod gui_live;
mod gui_microscope;
mod gui_opening;
mod gui_random;
mod gui_snapshots;
mod gui_stats;
mod import;
mod join;
mod real_runs;
mod record;
mod rescore;
mod server_logs;
mod speculative;
mod sse_streams;
mod synth;
mod watch;
mod watch_looks;

/// `tests/it/`.
fn this_folder() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it")
}

/// The paths of `tests/it/`'s files and folders.
fn entries_of_this_folder() -> Vec<std::path::PathBuf> {
    std::fs::read_dir(this_folder())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect()
}

/// A test that drives the window (egui_kittest's `Harness`) is found by `cargo test --test integration gui_`: it is
/// in a `gui_` file, or its name starts with `gui_`.
#[test]
fn every_gui_test_is_named_so() {
    let mut unnamed = Vec::new();
    for path in entries_of_this_folder() {
        let Some(file) = path.file_name().and_then(|s| s.to_str()) else {
            continue;
        };
        if path.extension().is_none_or(|e| e != "rs") || file.starts_with("gui") || file == "main.rs" {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if line.trim() != "#[test]" {
                continue;
            }
            // The test's name and body: from its `fn` line to the next line that closes an item at column 0.
            let Some((at, name)) = lines[i + 1..]
                .iter()
                .enumerate()
                .find_map(|(k, l)| l.strip_prefix("fn ").map(|n| (i + 1 + k, n)))
            else {
                continue;
            };
            let name = name.split('(').next().unwrap_or(name);
            let end = lines[at..]
                .iter()
                .position(|l| *l == "}")
                .map_or(lines.len(), |k| at + k);
            let drives_the_window = lines[at..end]
                .iter()
                .any(|l| l.contains("Harness") || l.contains("harness(") || l.contains("harness_on("));
            if drives_the_window && !name.starts_with("gui_") {
                unnamed.push(format!("{file}: {name}"));
            }
        }
    }
    assert!(
        unnamed.is_empty(),
        "tests that drive the window without a gui_ name (`cargo test gui_` would miss them): {unnamed:?}"
    );
}

/// Every file of `tests/it/` is a module of this binary: a file left out of the list above would never be compiled,
/// and its tests never run.
#[test]
fn every_test_file_is_compiled() {
    let main = include_str!("main.rs");
    let here = this_folder();
    let mut missing = Vec::new();
    for path in entries_of_this_folder() {
        let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        let is_module = path.extension().is_some_and(|e| e == "rs") || path.join("mod.rs").is_file();
        if is_module && name != "main" && !main.lines().any(|l| l == format!("mod {name};")) {
            missing.push(name.to_owned());
        }
    }
    assert!(
        missing.is_empty(),
        "tests/it/ files not compiled (add `mod NAME;` to tests/it/main.rs): {missing:?}"
    );
    // Nor is a test file left in tests/ itself, where nothing compiles it but the docs' binary.
    let stray: Vec<std::path::PathBuf> = std::fs::read_dir(here.parent().unwrap())
        .unwrap()
        .filter_map(|e| Some(e.ok()?.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "rs") && !p.ends_with("docs.rs"))
        .collect();
    assert!(
        stray.is_empty(),
        "test files in tests/ that no test target compiles: {stray:?}"
    );
}
