//! The flags of the commands that read a trace (`--from-time`, `--to-time`, `--where`, `--memory-budget`, `--from`,
//! `--log-date`, `--log-tz`): flattened into each such command (and the app), parsed once, checked, and installed as
//! the run's load settings. A command that reads no trace (`corpus`) shows none of them; `record` shows only the
//! server log's date and zone, for the log it joins.

use crate::format::window::{self, Window};
use crate::import::log_clock::{self, LogClock};
use std::ffi::OsString;

use super::Output;

/// The flags of every command that reads a trace.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct GlobalArgs {
    /// Only the part of the trace from this time: requests arriving and steps starting at or after it. A dataset's
    /// `date=`/`hour=` folders before it are not read. RFC 3339 (2025-11-29T08:15:00Z), a UTC date and time
    /// (2025-11-29T08:15), a UTC date, or ns since 1970.
    #[arg(long, value_name = "TIME", value_parser = window::parse_time, help_heading = "Reading")]
    pub from_time: Option<i64>,
    /// Only the part of the trace before this time (same forms as --from-time).
    #[arg(long, value_name = "TIME", value_parser = window::parse_time, help_heading = "Reading")]
    pub to_time: Option<i64>,
    /// Only requests whose label has this value (source, model, app_id, user_id), and only a dataset's folders
    /// with it (any folder key: date=2025-11-29, hour=08, ...). Repeat for several; all must hold.
    #[arg(long = "where", value_name = "KEY=VALUE", value_parser = window::parse_filter, help_heading = "Reading")]
    pub filters: Vec<(String, String)>,
    /// Refuse, before reading a record, to load a trace estimated to take more memory than this (4GB, 500MB, 4GiB);
    /// by default half this machine's memory. The message says which part of it fits.
    #[arg(long, value_name = "SIZE", value_parser = crate::load::budget::parse_size, help_heading = "Reading")]
    pub memory_budget: Option<u64>,
    /// Read every input with this importer instead of recognising it by its content (for a file whose name and
    /// first bytes do not say what it is).
    #[arg(long, value_enum, value_name = "KIND", help_heading = "Reading")]
    pub from: Option<crate::import::Kind>,
    #[command(flatten)]
    pub log: LogClockArgs,
}

/// The date and zone of a server log's times, for the commands that read one.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct LogClockArgs {
    /// The date a server log starts on (YYYY-MM-DD), for logs whose times have no year (vLLM's `MM-DD HH:MM:SS`);
    /// by default the year of the trace's other files, else of the log file's last change.
    #[arg(long, value_name = "DATE", value_parser = log_clock::parse_date, help_heading = "Server logs")]
    pub log_date: Option<chrono::NaiveDate>,
    /// The zone a server log's times are in (+08:00, -05:00, UTC): Python's logging writes local time with no zone;
    /// by default they are read as UTC.
    #[arg(long, value_name = "OFFSET", value_parser = log_clock::parse_offset, allow_hyphen_values = true,
          help_heading = "Server logs")]
    pub log_tz: Option<i32>,
}

/// The long flags of [`GlobalArgs`], each of which takes one value: those `subcommand_first` steps over.
pub fn reading_flags() -> Vec<String> {
    use clap::Args as _;
    GlobalArgs::augment_args(clap::Command::new("reading"))
        .get_arguments()
        .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
        .collect()
}

impl GlobalArgs {
    /// The window the flags choose.
    ///
    /// # Errors
    /// `--from-time` at or after `--to-time`: the window would hold nothing.
    pub fn window(&self) -> Result<Window, Output> {
        let window = Window {
            from_ns: self.from_time,
            to_ns: self.to_time,
            filters: self.filters.clone(),
        };
        match (window.from_ns, window.to_ns) {
            (Some(from), Some(to)) if from >= to => Err(Output::error(
                format!(
                    "--from-time must come before --to-time: the window {} holds nothing",
                    window.describe()
                ),
                2,
            )),
            _ => Ok(window),
        }
    }

    /// The date and zone of server logs.
    pub fn log_clock(&self) -> LogClock {
        LogClock {
            date: self.log.log_date,
            utc_offset_s: self.log.log_tz,
        }
    }

    /// Makes the flags the settings of every load of this run.
    ///
    /// # Errors
    /// As [`GlobalArgs::window`].
    pub fn install(&self) -> Result<Window, Output> {
        let window = self.window()?;
        super::set_window(window.clone());
        super::set_budget(self.memory_budget);
        super::set_from(self.from);
        super::set_log_clock(self.log_clock());
        Ok(window)
    }
}

/// The command line with a subcommand that follows reading flags moved before them (`tokenscope --memory-budget
/// 1GB summary X` read as `tokenscope summary --memory-budget 1GB X`): the app's TRACE is optional and positional,
/// so clap alone would read the subcommand as a trace. `globals` are the flags stepped over, each taking one value
/// ([`reading_flags`]); a subcommand that does not take them then says so.
pub fn subcommand_first(args: Vec<OsString>, subcommands: &[&str], globals: &[String]) -> Vec<OsString> {
    let mut k = 1;
    while let Some(word) = args.get(k).and_then(|a| a.to_str()) {
        match word.split_once('=') {
            Some((flag, _)) if globals.iter().any(|g| g == flag) => k += 1,
            None if globals.iter().any(|g| g == word) => k += 2,
            _ => break,
        }
    }
    match args.get(k).and_then(|a| a.to_str()) {
        Some(word) if k > 1 && subcommands.contains(&word) => {
            let mut out = args;
            let sub = out.remove(k);
            out.insert(1, sub);
            out
        }
        _ => args,
    }
}

#[cfg(test)]
mod subcommand_tests {
    use super::*;

    fn moved(words: &[&str]) -> Vec<String> {
        let args = words.iter().map(OsString::from).collect();
        subcommand_first(args, &["summary"], &reading_flags())
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn a_subcommand_after_global_options_is_moved_before_them() {
        assert_eq!(
            moved(&["t", "--memory-budget", "1GB", "summary", "x"]),
            ["t", "summary", "--memory-budget", "1GB", "x"]
        );
        assert_eq!(
            moved(&["t", "--memory-budget=1GB", "--where", "source=a", "summary", "x"]),
            ["t", "summary", "--memory-budget=1GB", "--where", "source=a", "x"]
        );
        // Already first, a trace, or after something that is not a global option: left as it is.
        assert_eq!(moved(&["t", "summary", "x"]), ["t", "summary", "x"]);
        assert_eq!(
            moved(&["t", "--memory-budget", "1GB", "x.parquet"]),
            ["t", "--memory-budget", "1GB", "x.parquet"]
        );
        assert_eq!(
            moved(&["t", "--compare", "b", "summary"]),
            ["t", "--compare", "b", "summary"]
        );
    }

    #[test]
    fn the_reading_flags_are_the_seven_a_load_takes() {
        assert_eq!(
            reading_flags(),
            [
                "--from-time",
                "--to-time",
                "--where",
                "--memory-budget",
                "--from",
                "--log-date",
                "--log-tz"
            ]
        );
    }
}
