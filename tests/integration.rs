//! The app's and the CLI's integration tests, in one test binary. Each file of `tests/` is a module here (its path
//! stays `tests/<name>.rs`, and `cargo test --test integration <name>::` runs one of them): one binary links the app,
//! polars and wgpu once, where one binary per file linked them twenty times over (about 5 GB of test executables,
//! which ran a CI machine's disk out). `tests/docs.rs` is apart: it changes the process's working directory.

// Test helpers may unwrap (a panic here is a failed test) and start threads (a stopper, a watchdog).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::disallowed_methods)]

mod common;

#[path = "cli.rs"]
mod cli;
#[path = "corrupt.rs"]
mod corrupt;
#[path = "diff.rs"]
mod diff;
#[path = "disaggregation.rs"]
mod disaggregation;
#[path = "export.rs"]
mod export;
#[path = "fit.rs"]
mod fit;
#[path = "fleet.rs"]
mod fleet;
#[path = "formats.rs"]
mod formats;
#[path = "gui.rs"]
mod gui;
#[path = "gui_compare.rs"]
mod gui_compare;
#[path = "gui_live.rs"]
mod gui_live;
#[path = "gui_opening.rs"]
mod gui_opening;
#[path = "gui_random.rs"]
mod gui_random;
#[path = "import.rs"]
mod import;
#[path = "join.rs"]
mod join;
#[path = "microscope.rs"]
mod microscope;
#[path = "real_runs.rs"]
mod real_runs;
#[path = "record.rs"]
mod record;
#[path = "render.rs"]
mod render;
#[path = "rescore.rs"]
mod rescore;
#[path = "server_logs.rs"]
mod server_logs;
#[path = "speculative.rs"]
mod speculative;
#[path = "stats.rs"]
mod stats;
#[path = "streamed.rs"]
mod streamed;
#[path = "streams.rs"]
mod streams;
#[path = "synth.rs"]
mod synth;
#[path = "watch.rs"]
mod watch;
