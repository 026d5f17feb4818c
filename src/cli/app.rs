//! `tokenscope [TRACE..] [--compare B]`: the app, opened on the traces given (or the demo).

use std::path::{Path, PathBuf};

use super::Output;
use super::globals::GlobalArgs;
use crate::format::window::Window;
use crate::ui::{self, TraceSource};

/// The app's own arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct AppArgs {
    /// Trace to open in the app (.parquet, .jsonl[.gz|.zst], a directory of them, or what an engine or tool
    /// writes); several files of one run (a recording and the server's log) open as one trace.
    pub traces: Vec<PathBuf>,
    /// In the app: compare TRACE (A) with this trace (B), as File > Compare with… does.
    #[arg(long, value_name = "TRACE_B")]
    pub compare: Option<PathBuf>,
}

impl AppArgs {
    /// Opens the window on the traces, read through `window`; `subcommands` are the names a mistyped first word is
    /// matched against.
    pub fn run(self, globals: &GlobalArgs, window: &Window, subcommands: &[&str]) -> Output {
        for p in self.traces.iter().chain(&self.compare) {
            if let Some(message) = not_a_trace_path(p, subcommands) {
                return Output::error(message, 2);
            }
        }
        if self.compare.is_some() && self.traces.is_empty() {
            return Output::error(
                "--compare B compares TRACE (A) with B: give TRACE too (tokenscope A --compare B)",
                2,
            );
        }
        let mut traces = self.traces;
        let source = match (traces.len(), traces.pop()) {
            (_, None) => TraceSource::Demo,
            (1, Some(p)) if window.is_all() => TraceSource::Path(p),
            (1, Some(p)) => TraceSource::Part(p, window.clone()),
            (_, Some(p)) if window.is_all() => {
                traces.push(p);
                TraceSource::Paths(traces)
            }
            (_, Some(_)) => {
                return Output::error(
                    "--from-time, --to-time and --where choose a part of one trace: give one file or directory, or \
                     convert the files of the run to one first (tokenscope convert ... -o OUT)",
                    2,
                );
            }
        };
        // B is read through the same window as A.
        let compare = self.compare.map(|b| {
            if window.is_all() {
                TraceSource::Path(b)
            } else {
                TraceSource::Part(b, window.clone())
            }
        });
        match ui::run(
            source,
            globals.memory_budget,
            globals.from,
            globals.log_clock(),
            compare,
        ) {
            Ok(()) => Output::default(),
            Err(e) => Output::error(
                format!(
                    "cannot open the window: {e}. On a machine without a display, run under Xvfb (see README) or \
                     use the subcommands (tokenscope --help)"
                ),
                1,
            ),
        }
    }
}

/// Why the app cannot open `path`, said before a window opens: a mistyped subcommand (`sumary`), or no such file.
pub fn not_a_trace_path(path: &Path, subcommands: &[&str]) -> Option<String> {
    if path.exists() {
        return None;
    }
    let word = path.to_str().unwrap_or_default();
    let closest = subcommands
        .iter()
        .map(|name| (strsim::jaro_winkler(word, name), *name))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    Some(match closest {
        Some((score, name)) if score > 0.8 && !word.contains(['/', '.']) => {
            format!("unrecognized subcommand '{word}': did you mean '{name}'? (tokenscope --help lists them)")
        }
        _ => format!(
            "{}: no such file or directory; give a trace file or directory (tokenscope --help lists the subcommands)",
            path.display()
        ),
    })
}
