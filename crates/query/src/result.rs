//! A query's result as plain values, for a terminal table, CSV, JSON or the app's table: no polars type leaves the
//! crate through it.

use polars::prelude::*;
use serde_json::{Map, Value};

/// One value of a result.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    /// SQL NULL.
    Null,
    /// A boolean.
    Bool(bool),
    /// A signed integer.
    Int(i64),
    /// An unsigned integer.
    UInt(u64),
    /// A float.
    Float(f64),
    /// Text, or any other value in its display form.
    Text(String),
}

impl Cell {
    fn of(v: &AnyValue<'_>) -> Cell {
        match v {
            AnyValue::Null => Cell::Null,
            AnyValue::Boolean(b) => Cell::Bool(*b),
            AnyValue::String(s) => Cell::Text((*s).to_owned()),
            AnyValue::StringOwned(s) => Cell::Text(s.to_string()),
            AnyValue::UInt8(x) => Cell::UInt(u64::from(*x)),
            AnyValue::UInt16(x) => Cell::UInt(u64::from(*x)),
            AnyValue::UInt32(x) => Cell::UInt(u64::from(*x)),
            AnyValue::UInt64(x) => Cell::UInt(*x),
            AnyValue::Int8(x) => Cell::Int(i64::from(*x)),
            AnyValue::Int16(x) => Cell::Int(i64::from(*x)),
            AnyValue::Int32(x) => Cell::Int(i64::from(*x)),
            AnyValue::Int64(x) => Cell::Int(*x),
            AnyValue::Float32(x) => Cell::Float(f64::from(*x)),
            AnyValue::Float64(x) => Cell::Float(*x),
            other => Cell::Text(other.to_string()),
        }
    }

    /// The value as a number, for plotting.
    #[expect(clippy::cast_precision_loss, reason = "plotted values")]
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Cell::Int(x) => Some(*x as f64),
            Cell::UInt(x) => Some(*x as f64),
            Cell::Float(x) if x.is_finite() => Some(*x),
            _ => None,
        }
    }

    /// The value for a person: floats to three decimals at most, nulls as `-`, a text's line breaks and tabs
    /// escaped (`\n`, `\t`) so that a row of a table stays one line.
    pub fn display(&self) -> String {
        match self {
            Cell::Null => "-".to_owned(),
            Cell::Text(s) if s.contains(['\n', '\r', '\t']) => {
                s.replace('\n', "\\n").replace('\r', "\\r").replace('\t', "\\t")
            }
            Cell::Float(x) => {
                let s = format!("{x:.3}");
                let s = s.trim_end_matches('0').trim_end_matches('.');
                if s == "-0" { "0".to_owned() } else { s.to_owned() }
            }
            other => other.exact(),
        }
    }

    /// The value in full (CSV): floats in their shortest exact form, nulls empty.
    pub fn exact(&self) -> String {
        match self {
            Cell::Null => String::new(),
            Cell::Bool(b) => b.to_string(),
            Cell::Int(x) => x.to_string(),
            Cell::UInt(x) => x.to_string(),
            Cell::Float(x) => x.to_string(),
            Cell::Text(s) => s.clone(),
        }
    }

    fn json(&self) -> Value {
        match self {
            Cell::Null => Value::Null,
            Cell::Bool(b) => Value::from(*b),
            Cell::Int(x) => Value::from(*x),
            Cell::UInt(x) => Value::from(*x),
            // JSON has no NaN or infinity: null, as for a missing value.
            Cell::Float(x) => serde_json::Number::from_f64(*x).map_or(Value::Null, Value::Number),
            Cell::Text(s) => Value::from(s.as_str()),
        }
    }
}

/// A query's result: named columns of cells, row-major.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rows {
    /// Column names.
    pub columns: Vec<String>,
    /// Rows, each with a cell per column.
    pub rows: Vec<Vec<Cell>>,
}

impl Rows {
    /// The cells of a polars frame.
    pub fn of(df: &DataFrame) -> Rows {
        let columns: Vec<String> = df.columns().iter().map(|c| c.name().to_string()).collect();
        let rows = (0..df.height())
            .map(|i| {
                df.columns()
                    .iter()
                    .map(|c| c.get(i).map_or(Cell::Null, |v| Cell::of(&v)))
                    .collect()
            })
            .collect();
        Rows { columns, rows }
    }

    /// The cells of a frame's first `n` rows.
    pub fn head(df: &DataFrame, n: usize) -> Rows {
        if df.height() > n {
            Rows::of(&df.head(Some(n)))
        } else {
            Rows::of(df)
        }
    }

    /// The index of the column called `name`.
    pub fn column(&self, name: &str) -> Option<usize> {
        self.columns.iter().position(|c| c == name)
    }

    /// CSV with a header row (RFC 4180 quoting).
    pub fn to_csv(&self) -> String {
        let mut w = csv::Writer::from_writer(Vec::new());
        // Writing to memory cannot fail but for a broken record shape, which `Rows` rules out.
        let _ = w.write_record(&self.columns);
        for row in &self.rows {
            let _ = w.write_record(row.iter().map(Cell::exact));
        }
        w.into_inner()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    /// JSON: an array of objects, one per row, keys in column order.
    pub fn to_json(&self) -> Value {
        Value::Array(
            self.rows
                .iter()
                .map(|row| {
                    let mut m = Map::new();
                    for (name, cell) in self.columns.iter().zip(row) {
                        m.insert(name.clone(), cell.json());
                    }
                    Value::Object(m)
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Rows {
        Rows {
            columns: vec!["app".into(), "n".into(), "ttft".into()],
            rows: vec![
                vec![
                    Cell::Text("chat, eu".into()),
                    Cell::UInt(3),
                    Cell::Float(236.666_666_666_666_66),
                ],
                vec![Cell::Null, Cell::Int(-1), Cell::Float(f64::NAN)],
            ],
        }
    }

    #[test]
    fn csv_quotes_and_leaves_nulls_empty() {
        assert_eq!(
            sample().to_csv(),
            "app,n,ttft\n\"chat, eu\",3,236.66666666666666\n,-1,NaN\n"
        );
    }

    #[test]
    fn json_is_one_object_per_row_with_nan_as_null() {
        assert_eq!(
            sample().to_json().to_string(),
            r#"[{"app":"chat, eu","n":3,"ttft":236.66666666666666},{"app":null,"n":-1,"ttft":null}]"#
        );
    }

    #[test]
    fn display_trims_floats() {
        assert_eq!(Cell::Float(236.666_666).display(), "236.667");
        assert_eq!(Cell::Float(50.0).display(), "50");
        assert_eq!(Cell::Float(-0.0001).display(), "0");
        assert_eq!(Cell::Null.display(), "-");
        // A token's text with a line break stays on its row; CSV keeps it exact.
        assert_eq!(Cell::Text("a\nb\t".into()).display(), "a\\nb\\t");
        assert_eq!(Cell::Text("a\nb".into()).exact(), "a\nb");
        assert_eq!(
            Cell::Text("plain 'text' é 中\n".into()).display(),
            "plain 'text' é 中\\n"
        );
    }
}
