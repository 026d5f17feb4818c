//! SQL over a trace: polars' SQL front end over the tables of [`crate::tables`], built with only the columns the
//! query names, and errors that say which table, column or clause is at fault.

use std::collections::HashSet;

use polars::prelude::*;
use polars::sql::SQLContext;
use tokenscope_core::trace::Trace;

use crate::tables::{Source, Table};

/// Why a query gave no result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct QueryError(pub String);

/// The identifiers of a query, lowercased: the words that may name a table or a column.
fn words(sql: &str) -> HashSet<String> {
    sql.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// True when the query selects every column of some table (`*` or `t.*`, not `count(*)`).
fn selects_all(sql: &str) -> bool {
    let bytes = sql.as_bytes();
    bytes.iter().enumerate().any(|(i, &b)| {
        if b != b'*' {
            return false;
        }
        let before = bytes[..i].iter().rev().find(|c| !c.is_ascii_whitespace());
        let after = bytes[i + 1..].iter().find(|c| !c.is_ascii_whitespace());
        // `count(*)` has `(` before and `)` after, and a product by a number or a parenthesis is no selection
        // either. A product of two columns is taken for one: harmless, the table is built whole.
        let count_star = before == Some(&b'(') && after == Some(&b')');
        let product = matches!(after, Some(c) if c.is_ascii_digit() || *c == b'(');
        !count_star && !product
    })
}

/// The tables a query reads, as far as its words tell.
pub fn tables_of(sql: &str) -> Vec<Table> {
    let w = words(sql);
    Table::ALL.into_iter().filter(|t| w.contains(t.name())).collect()
}

/// Runs `sql` over `trace`. The tables are `requests`, `tokens`, `steps`, `stages` and `candidates`
/// (`docs/QUERY.md`); only those it names are built, with only the columns it names.
pub fn run(trace: &Trace, sql: &str) -> Result<DataFrame, QueryError> {
    let tables = tables_of(sql);
    if tables.contains(&Table::Candidates) && trace.candidates.is_empty() && trace.candidates_on_disk.is_some() {
        return Err(QueryError(
            "the candidates of this trace were left on disk when it was loaded; open it with its candidates \
             (the CLI's `query` does when the query names the candidates table)"
                .to_owned(),
        ));
    }
    let w = words(sql);
    let all = selects_all(sql);
    let source = Source::new(trace);
    let mut ctx = SQLContext::new();
    for &table in &tables {
        let frame = source
            .frame(table, |name| all || w.contains(name))
            .map_err(|e| QueryError(format!("building table {}: {e}", table.name())))?;
        ctx.register(table.name(), frame.lazy());
    }
    ctx.execute(sql)
        .and_then(LazyFrame::collect)
        .map_err(|e| explain(&e, &tables))
}

/// A polars error in the words of the trace's tables.
fn explain(e: &PolarsError, tables: &[Table]) -> QueryError {
    let text = e.to_string();
    match e {
        PolarsError::ColumnNotFound(msg) => {
            let name = quoted(msg).unwrap_or_default();
            let known = tables.iter().any(|t| t.column(&name).is_some());
            if name.is_empty() || known {
                return QueryError(format!("in the query: {text}"));
            }
            let mut out = format!("no column \"{name}\" in ");
            out.push_str(&match tables {
                [] => "any table".to_owned(),
                _ => tables.iter().map(|t| t.name()).collect::<Vec<_>>().join(" or "),
            });
            if let Some(near) = nearest(&name, tables) {
                out.push_str(&format!(" (did you mean {near}?)"));
            }
            for t in tables {
                let cols: Vec<&str> = t.columns().iter().map(|c| c.name).collect();
                out.push_str(&format!("; {} has {}", t.name(), cols.join(", ")));
            }
            QueryError(out)
        }
        _ if text.contains("relation '") && text.contains("was not found") => {
            let name = text.split('\'').nth(1).unwrap_or("?");
            let names: Vec<&str> = Table::ALL.iter().map(|t| t.name()).collect();
            QueryError(format!(
                "no table \"{name}\"; the tables are {} (docs/QUERY.md)",
                names.join(", ")
            ))
        }
        _ => QueryError(format!("in the query: {text}")),
    }
}

/// The first quoted name in a polars message (`"ttft" not found`, `unable to find column "ttft"; ...`).
fn quoted(msg: &str) -> Option<String> {
    let mut parts = msg.split('"');
    parts.next()?;
    parts.next().map(str::to_owned)
}

/// The column of `tables` closest to a mistyped `name`, when one is close enough to suggest.
fn nearest(name: &str, tables: &[Table]) -> Option<&'static str> {
    let lower = name.to_lowercase();
    tables
        .iter()
        .flat_map(|t| t.columns())
        .map(|c| {
            // A column that starts with the name (`ttft` for `ttft_ms`) is the likeliest meaning.
            let score = if c.name.starts_with(&lower) {
                1.0
            } else {
                strsim::jaro_winkler(&lower, c.name)
            };
            (score, c.name)
        })
        .filter(|(score, _)| *score >= 0.85)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, name)| name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn star_means_every_column_but_count_star_does_not() {
        assert!(selects_all("SELECT * FROM requests"));
        assert!(selects_all("select r.* from requests r"));
        assert!(!selects_all("SELECT count(*) FROM tokens"));
        assert!(!selects_all("SELECT count( * ) FROM tokens"));
        assert!(!selects_all("SELECT ttft_ms * 2 FROM requests"));
        assert!(!selects_all("SELECT ttft_ms *(2) FROM requests"));
    }

    #[test]
    fn the_tables_named_are_found_by_word() {
        assert_eq!(
            tables_of("SELECT * FROM requests JOIN tokens USING (request_id)"),
            vec![Table::Requests, Table::Tokens]
        );
        assert_eq!(tables_of("select 1"), vec![]);
        // A column called `index` does not make `stages` a table of the query, nor does `requests_x`.
        assert_eq!(tables_of("SELECT index FROM requests_x"), vec![]);
    }

    #[test]
    fn a_mistyped_column_gets_its_likely_meaning() {
        assert_eq!(nearest("ttft", &[Table::Requests]), Some("ttft_ms"));
        assert_eq!(nearest("TTFT_MS", &[Table::Requests]), Some("ttft_ms"));
        assert_eq!(nearest("kv_usge", &[Table::Steps]), Some("kv_usage"));
        assert_eq!(nearest("zzzz", &[Table::Requests]), None);
    }
}
