//! `tokenscope query TRACE "SQL" [--format table|csv|json]`: SQL over the trace's tables (`docs/QUERY.md`).

use std::path::Path;
use std::path::PathBuf;

use super::validate::fatal;
use super::{Output, table, thousands};
use crate::query::{Rows, Table, sql};

/// How a result is printed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// Aligned columns for a terminal (the first 1,000 rows).
    #[default]
    Table,
    /// CSV with a header row, every row, values in full.
    Csv,
    /// An array of objects, one per row.
    Json,
}

/// Rows a terminal table shows; CSV and JSON give all.
pub const TABLE_ROWS: usize = 1000;

/// Prints rows in `format`; the note on standard error says what a table left out.
pub fn print(rows: &Rows, format: Format) -> Output {
    let (stdout, stderr) = match format {
        Format::Csv => (rows.to_csv(), String::new()),
        Format::Json => (format!("{:#}\n", rows.to_json()), String::new()),
        Format::Table => {
            let mut lines = vec![rows.columns.clone()];
            lines.extend(
                rows.rows
                    .iter()
                    .take(TABLE_ROWS)
                    .map(|r| r.iter().map(crate::query::Cell::display).collect()),
            );
            let n = rows.rows.len();
            let note = if n > TABLE_ROWS {
                format!(
                    "note: showing the first {} of {} rows; --format csv or json gives them all\n",
                    thousands(TABLE_ROWS as u64),
                    thousands(n as u64)
                )
            } else {
                String::new()
            };
            (
                format!(
                    "{}({} row{})\n",
                    table(&lines),
                    thousands(n as u64),
                    if n == 1 { "" } else { "s" }
                ),
                note,
            )
        }
    };
    Output {
        stdout,
        stderr,
        code: 0,
    }
}

/// The arguments of `query`.
#[derive(Debug, Clone, clap::Args)]
pub struct QueryArgs {
    /// The trace.
    pub trace: PathBuf,
    /// The query.
    pub sql: String,
    /// How to print the result.
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
    /// Query the Parquet files (a file, a directory, a partitioned dataset) without loading them: the views of
    /// sql/tokenscope.sql (requests, tokens, itl, trace, ...) on polars' streaming engine.
    #[arg(long)]
    pub out_of_core: bool,
    // The part of the trace to read, the memory budget, the importer, a server log's clock.
    #[command(flatten)]
    pub reading: super::globals::GlobalArgs,
}

impl QueryArgs {
    /// Runs `query`.
    pub fn run(&self) -> Output {
        if self.out_of_core {
            run_out_of_core(&self.trace, &self.sql, self.format)
        } else {
            run(&self.trace, &self.sql, self.format)
        }
    }
}

/// Runs `sql` over the views of `sql/tokenscope.sql` on the Parquet files at `path` (a file, a directory, a
/// partitioned dataset), out of core on polars' streaming engine, without loading the trace.
pub fn run_out_of_core(path: &Path, sql_text: &str, format: Format) -> Output {
    let files = match super::window_files(path) {
        Ok(f) => f,
        Err(e) => return fatal(&e, false),
    };
    match crate::query::dataset::query_files(&files, super::window(), sql_text) {
        Ok(df) => print(&Rows::of(&df), format),
        Err(e) => Output::error(e, 2),
    }
}

/// Runs `sql` over the trace at `path`. Its candidates are read only when the query names the `candidates` table.
pub fn run(path: &Path, sql_text: &str, format: Format) -> Output {
    let options = crate::load::LoadOptions {
        lazy_candidates: !sql::tables_of(sql_text).contains(&Table::Candidates),
        ..crate::load::LoadOptions::default()
    };
    let loaded = match super::load(&[path], options) {
        Ok(l) => l,
        Err(e) => return fatal(&e, false),
    };
    match sql::run(&loaded.trace, sql_text) {
        Ok(df) => {
            let mut out = print(&Rows::of(&df), format);
            let rejected = loaded.report.rejected_count();
            if rejected > 0 {
                out.stderr.push_str(&format!(
                    "note: {rejected} record(s) of {} were rejected; `tokenscope validate` lists them\n",
                    path.display()
                ));
            }
            out
        }
        Err(e) => Output::error(e, 2),
    }
}
