//! The command-line subcommands' work, as functions that return their output, so tests can call them directly.
//! `main.rs` only parses arguments and dispatches here.

pub mod app;
pub mod convert;
pub mod corpus;
pub mod diff;
pub mod diff_tokens;
pub mod export;
pub mod findings;
pub mod fit;
pub mod globals;
#[cfg(feature = "query")]
pub mod query;
pub mod record;
pub mod render;
pub mod rescore;
pub mod summary;
pub mod synth;
#[cfg(feature = "query")]
pub mod timeline;
pub mod validate;
pub mod watch;

use std::path::Path;

use std::sync::{Arc, OnceLock};

use crate::format::window::Window;
use crate::ingest::{LoadError, Progress};
use crate::load::{LoadOptions, Loaded};

/// The window of this run (`--from-time`, `--to-time`, `--where`): every load of a command reads only it.
static WINDOW: OnceLock<Window> = OnceLock::new();

/// Sets the window of this run (once, from the command line); a window that chooses nothing out is none.
pub fn set_window(window: Window) {
    if !window.is_all() {
        let _ = WINDOW.set(window);
    }
}

/// The window of this run, if one was given.
pub fn window() -> Option<&'static Window> {
    WINDOW.get()
}

/// The memory budget of this run's loads (`--memory-budget`), bytes.
static BUDGET: OnceLock<u64> = OnceLock::new();

/// The memory budget of this run's loads, once set.
pub fn budget() -> Option<u64> {
    BUDGET.get().copied()
}

/// Sets the memory budget of this run's loads (once, from the command line); none given: half the machine's
/// memory.
pub fn set_budget(budget: Option<u64>) {
    let _ = BUDGET.set(budget.unwrap_or_else(crate::load::budget::default_budget));
}

/// The date and zone of server logs in this run's loads (`--log-date`, `--log-tz`).
static LOG_CLOCK: OnceLock<crate::import::log_clock::LogClock> = OnceLock::new();

/// Sets the date and zone of server logs in this run's loads (once, from the command line).
pub fn set_log_clock(clock: crate::import::log_clock::LogClock) {
    let _ = LOG_CLOCK.set(clock);
}

/// The importer of this run's loads (`--from KIND`), instead of recognising each file.
static FROM: OnceLock<crate::import::Kind> = OnceLock::new();

/// The importer of this run's loads, when `--from` named one.
pub fn from() -> Option<crate::import::Kind> {
    FROM.get().copied()
}

/// Sets the importer of this run's loads (once, from the command line).
pub fn set_from(kind: Option<crate::import::Kind>) {
    if let Some(kind) = kind {
        let _ = FROM.set(kind);
    }
}

/// The objectives a command judges requests by: `--slo-ttft-ms`, `--slo-tpot-ms`, or `--no-slo`; without any, the
/// app's defaults (TTFT 1000 ms and TPOT 50 ms). Flattened into `findings`, `diff` and `timeline`.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct SloArgs {
    /// TTFT objective in ms (without either objective: TTFT 1000 ms and TPOT 50 ms, the app's defaults).
    #[arg(long, value_name = "MS", value_parser = positive_ms)]
    pub slo_ttft_ms: Option<f64>,
    /// TPOT objective in ms.
    #[arg(long, value_name = "MS", value_parser = positive_ms)]
    pub slo_tpot_ms: Option<f64>,
    /// Judge no objective: no attainment, goodput or SLO-violation finding.
    #[arg(long, conflicts_with_all = ["slo_ttft_ms", "slo_tpot_ms"])]
    pub no_slo: bool,
}

impl SloArgs {
    /// The objectives these flags ask for.
    pub fn objectives(self) -> findings::Objectives {
        findings::Objectives::from_flags(self.slo_ttft_ms, self.slo_tpot_ms, self.no_slo)
    }
}

/// Parses an objective in ms (`--slo-ttft-ms`, `--slo-tpot-ms`): a positive number.
///
/// # Errors
/// Not a number, or not above 0.
pub fn positive_ms(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
        Ok(v) => Err(format!("{v} ms: an objective is a positive number of ms")),
        Err(e) => Err(format!("{text}: {e}; an objective is a positive number of ms")),
    }
}

/// The Parquet files of `path` a command reads out of core: those of the run's window.
///
/// # Errors
/// As [`crate::load::parquet_files`], or the window's filters name no key of the dataset or leave no file.
pub fn window_files(path: &Path) -> Result<Vec<std::path::PathBuf>, LoadError> {
    let files = crate::load::parquet_files(path)?;
    match window() {
        Some(w) if path.is_dir() => w.choose_files(path, files).map_err(|message| LoadError::Window {
            path: path.display().to_string(),
            message,
        }),
        _ => Ok(files),
    }
}

/// Columns whose values give figures only a load computes: the counters of samples, speculative decoding's.
const LOADED_FIGURES: [&str; 6] = [
    "time_ns",
    "spec",
    "spec_drafted_tokens",
    "spec_accepted_tokens",
    "spec_accept_length",
    "spec_accept_rate",
];

/// Why the files' summary needs a load: a column of [`LOADED_FIGURES`] with values (by the footers' statistics),
/// or a trace without times; `None` when every figure streams.
pub fn only_streamed_figures(files: &[std::path::PathBuf]) -> Option<String> {
    use crate::format::parquet::footer_text_range;
    for f in files {
        let Ok(file) = crate::format::parquet::stream::StreamFile::open(f) else {
            return Some(format!("{} could not be read ahead", f.display()));
        };
        if let Some(column) = LOADED_FIGURES.iter().find(|c| file.has_values(c)) {
            return Some(format!(
                "{} has `{column}` values (figures of a loaded trace)",
                f.display()
            ));
        }
        // The meta's note, shown by the text, is read from the footer when its statistics hold it whole.
        if file.has_values("note") && footer_text_range(f, "note").is_none_or(|(lo, hi)| lo != hi) {
            return Some(format!("{} has a note its footer does not hold whole", f.display()));
        }
        if footer_text_range(f, "clock").is_some_and(|(lo, hi)| lo == "untimed" || hi == "untimed") {
            return Some(format!("{} has no times", f.display()));
        }
    }
    None
}

/// Whether the figures of the trace at `path` all stream, as loaded: `Err` with why it is loaded (not one Parquet
/// trace read as tokenscope's format, or [`only_streamed_figures`]).
pub fn streams_exactly(path: &Path) -> Result<(), String> {
    if from().is_some() {
        return Err("--from names an importer".to_owned());
    }
    let files = window_files(path).map_err(|e| e.to_string())?;
    only_streamed_figures(&files).map_or(Ok(()), Err)
}

/// Why `summary` or `timeline` streams a trace it was not asked to: the Parquet files at `path` would take more memory loaded than
/// the budget gives. `None` when they fit, or are not Parquet (the load says what it can do then).
pub fn over_budget(path: &Path) -> Option<String> {
    // A window's share of the trace is the load's to weigh: it loads when that part fits.
    if window().is_some_and(|w| !w.is_all()) {
        return None;
    }
    let files = window_files(path).ok()?;
    let listed: Vec<_> = files
        .iter()
        .map(|f| {
            (
                f.clone(),
                crate::load::Format::Native(crate::trace::report::Encoding::Parquet),
            )
        })
        .collect();
    let need = crate::load::budget::estimate(&listed).ok()?.without_candidates;
    let budget = budget()?;
    (need > budget).then(|| {
        format!(
            "loaded, the trace would take about {} (over the memory budget of {}, --memory-budget)",
            crate::load::budget::size(need),
            crate::load::budget::size(budget)
        )
    })
}

/// Loads the files of a trace for a subcommand. On a terminal, a load that takes over a second shows a progress bar
/// on standard error, fed by the loader's own byte count; elsewhere (pipes, tests) nothing is drawn.
/// Loads for the findings: a Parquet trace's candidates stay on disk but for the tokens a detector reads (the stop
/// tokens requests ended on), read in one pass per file. The findings are those of a whole load.
pub fn load_for_findings(paths: &[&Path]) -> Result<Loaded, LoadError> {
    let options = LoadOptions {
        lazy_candidates: true,
        ..LoadOptions::default()
    };
    let mut loaded = load(paths, options)?;
    if let Some(reader) = crate::format::parquet::CandidateReader::open(&loaded.trace)? {
        let wanted = crate::analysis::findings::tokens_needing_candidates(&loaded.trace);
        let found = reader.read_tokens(&loaded.trace, &wanted)?;
        loaded.trace.attach_candidates(found);
    }
    Ok(loaded)
}

pub fn load(paths: &[&Path], mut options: LoadOptions) -> Result<Loaded, LoadError> {
    if options.window.is_none() {
        options.window = window().map(|w| Arc::new(w.clone()));
    }
    if options.budget.is_none() {
        options.budget = BUDGET.get().copied();
    }
    if options.from.is_none() {
        options.from = FROM.get().copied();
    }
    if options.log_clock == crate::import::log_clock::LogClock::default() {
        options.log_clock = LOG_CLOCK.get().copied().unwrap_or_default();
    }
    let progress = Progress::default();
    if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
        return crate::load::load_many(paths, &progress, options);
    }
    std::thread::scope(|scope| {
        let loading = scope.spawn(|| crate::load::load_many(paths, &progress, options));
        let start = std::time::Instant::now();
        let mut bar: Option<indicatif::ProgressBar> = None;
        while !loading.is_finished() {
            if bar.is_none() && start.elapsed() > std::time::Duration::from_secs(1) {
                let b = indicatif::ProgressBar::new(1000);
                b.set_style(
                    indicatif::ProgressStyle::with_template("loading {bar:40} {percent:>3} % [{elapsed}]")
                        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
                );
                bar = Some(b);
            }
            if let Some(b) = &bar {
                #[expect(
                    clippy::cast_possible_truncation,
                    clippy::cast_sign_loss,
                    reason = "a fraction 0..=1 in thousandths"
                )]
                b.set_position((progress.fraction() * 1000.0) as u64);
            }
            std::thread::park_timeout(std::time::Duration::from_millis(100));
        }
        if let Some(b) = bar {
            b.finish_and_clear();
        }
        loading.join().unwrap_or(Err(LoadError::Cancelled))
    })
}

/// A command's output and exit code.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Output {
    /// What goes to standard output.
    pub stdout: String,
    /// What goes to standard error.
    pub stderr: String,
    /// The process exit code.
    pub code: i32,
}

impl Output {
    /// A failure: `error: {message}` on standard error and the exit code.
    pub fn error(message: impl std::fmt::Display, code: i32) -> Self {
        Output {
            stdout: String::new(),
            stderr: format!("error: {message}\n"),
            code,
        }
    }
}

pub use crate::analysis::stats::thousands;

/// Renders rows as a left-aligned first column and right-aligned others, two spaces apart, no borders, each line
/// without trailing spaces. Widths are display widths (a CJK character takes two columns).
pub fn table(rows: &[Vec<String>]) -> String {
    let mut t = comfy_table::Table::new();
    t.load_preset(comfy_table::presets::NOTHING);
    for row in rows {
        // A newline in a cell (an id, a model name) would split its row: it is written as `\n`.
        t.add_row(row.iter().map(|cell| cell.replace('\n', "\\n")));
    }
    for (c, column) in t.column_iter_mut().enumerate() {
        if c == 0 {
            column.set_padding((0, 0));
        } else {
            column.set_padding((2, 0));
            column.set_cell_alignment(comfy_table::CellAlignment::Right);
        }
    }
    let mut out = String::new();
    for line in t.lines() {
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
    }

    #[test]
    fn table_aligns_columns() {
        let t = table(&[vec!["a".into(), "1".into()], vec!["bbb".into(), "22".into()]]);
        assert_eq!(t, "a     1\nbbb  22\n");
        // A CJK cell is two columns wide per character; a short row leaves its missing cells out.
        let t = table(&[
            vec!["模型".into(), "1".into()],
            vec!["m".into()],
            vec!["abcde".into(), "22".into()],
        ]);
        assert_eq!(t, "模型    1\nm\nabcde  22\n");
        // A newline in a cell stays on its row.
        assert_eq!(table(&[vec!["a\nb".into(), "1".into()]]), "a\\nb  1\n");
    }
}
