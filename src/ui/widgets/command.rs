//! What a user asked for. Widgets draw from the state they are given and push commands; the app applies them, in
//! order, after the frame is drawn (`App::apply`). One list for every panel: the waterfall, the microscope, the
//! findings, the statistics, the selection panel and the menus.

use std::path::PathBuf;

use crate::ui::widgets::png::{self, View};

/// Which trace of a comparison a finding or a request belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The trace on screen.
    A,
    /// The other.
    B,
}

/// One thing asked for.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Select a request (`None`: clear the selection); `scroll` brings its track into view.
    Select {
        /// The request row.
        request: Option<u32>,
        /// Scroll the waterfall to its track (it was named in a panel, not clicked on its track).
        scroll: bool,
    },
    /// Analyse a drag-selected time range, ns.
    AnalyseRange(i64, i64),
    /// Select a time range (ns) as a drag across the waterfall does, and analyse it.
    SelectRange(i64, i64),
    /// Forget the selected range and its analysis.
    ClearRange,
    /// Fit a time range across the waterfall, with a margin, ns.
    ZoomTo(i64, i64),
    /// Go to a finding: zoom to `from_ns..to_ns`, select `request` and its token, and analyse the range.
    GoTo {
        /// Range start, ns.
        from_ns: i64,
        /// Range end, ns.
        to_ns: i64,
        /// The subject.
        request: Option<u32>,
        /// The token to select, as a position among the request's tokens.
        token: Option<usize>,
    },
    /// Put this text on the clipboard.
    CopyText(String),
    /// Write the selected range as a slice (format v1 Parquet, or Chrome trace JSON).
    ExportRange {
        /// Chrome trace JSON for Perfetto, else Parquet.
        chrome: bool,
    },
    /// Save a table as CSV.
    SaveCsv {
        /// The CSV text.
        csv: String,
        /// What it is, for the file's name and the dialog's title ("statistics", "query").
        what: &'static str,
    },
    /// Open a trace file or directory.
    Open(PathBuf),
    /// Watch a server's log as it is written (File > Watch a server's log…).
    Watch(PathBuf),
    /// Open several files of one run as one trace (dropped together).
    OpenMany(Vec<PathBuf>),
    /// Ask for a trace to open through the file dialog.
    OpenDialog,
    /// Open the demo trace (the simulator's `mixed` scenario).
    OpenDemo,
    /// Read server logs' times with this date and zone (File > Server log times), and open the trace again.
    SetLogClock(crate::import::log_clock::LogClock),
    /// Draw views offscreen at 2x and save or copy the PNG.
    RenderPng(View, png::Destination),
    /// Capture the window, or one of its panels, as on screen, with its caption.
    Capture(png::Target, png::Destination),
    /// Ask for a trace to compare the one on screen with, through the file dialog.
    CompareDialog,
    /// Compare the trace on screen (A) with this one (B).
    CompareWith(PathBuf),
    /// Compare the trace on screen (A) with itself replayed by the simulator with these changes (`synth --set`
    /// keys separated by spaces) as B.
    CompareWhatIf(String),
    /// Close the comparison.
    StopComparing,
    /// Select a paired request in both traces and bring both tracks into view.
    SelectPair {
        /// Its row in A.
        a: u32,
        /// Its row in B.
        b: u32,
    },
    /// Go to a finding of A or B in a comparison: zoom its waterfall to the range and select its subject.
    CompareGoTo {
        /// Whose finding.
        side: Side,
        /// Range start, ns.
        from_ns: i64,
        /// Range end, ns.
        to_ns: i64,
        /// The subject.
        request: Option<u32>,
    },
}
