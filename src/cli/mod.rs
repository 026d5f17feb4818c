//! The command-line subcommands' work, as functions that return their output, so tests can call them directly.
//! `main.rs` only parses arguments and dispatches here.

pub mod convert;
pub mod export;
pub mod findings;
pub mod record;
pub mod render;
pub mod summary;
pub mod synth;
pub mod validate;

use std::fmt::Write as _;

/// A command's output and exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
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

/// Renders rows as a left-aligned first column and right-aligned others, two spaces apart.
pub fn table(rows: &[Vec<String>]) -> String {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c == 0 {
                let _ = write!(line, "{cell:<w$}", w = widths[c]);
            } else {
                let _ = write!(line, "  {cell:>w$}", w = widths[c]);
            }
        }
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
    }
}
