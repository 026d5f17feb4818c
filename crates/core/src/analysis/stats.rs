//! The statistics table: one row per group (model, app, user, source) of [`Summary`] figures, the same columns for
//! `tokenscope summary --by`, the app's statistics panel and its CSV export.

use super::summary::Summary;

/// How a column's figures read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// A count, with thousands separators.
    Count,
    /// Milliseconds, one decimal.
    Ms,
    /// A share 0..1 shown as a percentage.
    Share,
    /// Tokens per second, one decimal.
    Rate,
    /// Money in the price table's currency, four decimals.
    Money,
    /// A mean of small counts (tokens per verify step), two decimals.
    Mean,
}

/// A column of the statistics table.
#[derive(Debug, Clone, Copy)]
pub struct Column {
    /// Machine name: the CSV header.
    pub key: &'static str,
    /// Human header, with its unit.
    pub header: &'static str,
    /// How the figure reads.
    pub unit: Unit,
    /// The figure of a group; `None` when undefined (no TPOT in a group of 1-token answers, no price table).
    pub get: fn(&Summary) -> Option<f64>,
}

#[expect(clippy::cast_precision_loss, reason = "counts far below 2^53")]
#[expect(
    clippy::unnecessary_wraps,
    reason = "the shape of the other figures, which may be absent"
)]
fn count(v: u64) -> Option<f64> {
    Some(v as f64)
}

/// Every column, in display order.
pub const COLUMNS: [Column; 20] = [
    Column {
        key: "requests",
        header: "requests",
        unit: Unit::Count,
        get: |s| count(s.requests),
    },
    Column {
        key: "input_tokens",
        header: "input tok",
        unit: Unit::Count,
        get: |s| count(s.input_tokens),
    },
    Column {
        key: "cached_tokens",
        header: "cached tok",
        unit: Unit::Count,
        get: |s| s.cached_tokens.and_then(count),
    },
    Column {
        key: "output_tokens",
        header: "output tok",
        unit: Unit::Count,
        get: |s| count(s.output_tokens),
    },
    Column {
        key: "throughput_tok_s",
        header: "tok/s",
        unit: Unit::Rate,
        get: |s| s.throughput_tok_s,
    },
    Column {
        key: "ttft_p50_ms",
        header: "TTFT p50 ms",
        unit: Unit::Ms,
        get: |s| s.ttft_ms.p50,
    },
    Column {
        key: "ttft_p95_ms",
        header: "TTFT p95 ms",
        unit: Unit::Ms,
        get: |s| s.ttft_ms.p95,
    },
    Column {
        key: "ttft_p99_ms",
        header: "TTFT p99 ms",
        unit: Unit::Ms,
        get: |s| s.ttft_ms.p99,
    },
    Column {
        key: "tpot_p50_ms",
        header: "TPOT p50 ms",
        unit: Unit::Ms,
        get: |s| s.tpot_ms.p50,
    },
    Column {
        key: "tpot_p95_ms",
        header: "TPOT p95 ms",
        unit: Unit::Ms,
        get: |s| s.tpot_ms.p95,
    },
    Column {
        key: "tpot_p99_ms",
        header: "TPOT p99 ms",
        unit: Unit::Ms,
        get: |s| s.tpot_ms.p99,
    },
    Column {
        key: "e2e_p50_ms",
        header: "E2E p50 ms",
        unit: Unit::Ms,
        get: |s| s.e2e_ms.p50,
    },
    Column {
        key: "e2e_p95_ms",
        header: "E2E p95 ms",
        unit: Unit::Ms,
        get: |s| s.e2e_ms.p95,
    },
    Column {
        key: "e2e_p99_ms",
        header: "E2E p99 ms",
        unit: Unit::Ms,
        get: |s| s.e2e_ms.p99,
    },
    Column {
        key: "spec_acceptance_rate",
        header: "drafts accepted",
        unit: Unit::Share,
        get: |s| s.spec.as_ref().and_then(|f| f.acceptance_rate),
    },
    Column {
        key: "spec_acceptance_length",
        header: "tok/verify step",
        unit: Unit::Mean,
        get: |s| s.spec.as_ref().and_then(|f| f.acceptance_length),
    },
    Column {
        key: "slo_attainment",
        header: "SLO met",
        unit: Unit::Share,
        get: |s| s.slo.and_then(|x| x.attainment),
    },
    Column {
        key: "goodput_tok_s",
        header: "goodput tok/s",
        unit: Unit::Rate,
        get: |s| s.slo.and_then(|x| x.goodput_tok_s),
    },
    Column {
        key: "cost",
        header: "cost",
        unit: Unit::Money,
        get: |s| s.cost.map(|c| c.total),
    },
    Column {
        key: "cache_savings",
        header: "cache savings",
        unit: Unit::Money,
        get: |s| s.cost.map(|c| c.cache_savings),
    },
];

/// Formats an integer with thousands separators: 1234567 -> "1,234,567".
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// An amount of money with three significant digits below 100 and cents above: `0.000123`, `0.0456`, `12.35`,
/// `1234.50`; `0` for nothing. Per-user costs of a few requests are fractions of a cent: fixed decimals would show
/// them as zero.
#[expect(
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss,
    reason = "a small, clamped count of decimals"
)]
pub fn money(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let magnitude = v.abs().log10().floor();
    let decimals = (2.0 - magnitude).clamp(2.0, 12.0) as usize;
    format!("{v:.decimals$}")
}

impl Column {
    /// The figure as the table shows it; `-` when undefined.
    pub fn format(&self, v: Option<f64>) -> String {
        self.unit.format(v)
    }
}

impl Unit {
    /// A figure of this unit as tables show it; `-` when undefined.
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "counts are whole and non-negative"
    )]
    pub fn format(self, v: Option<f64>) -> String {
        let Some(v) = v else { return "-".to_owned() };
        match self {
            Unit::Count => thousands(v.round().max(0.0) as u64),
            Unit::Ms | Unit::Rate => format!("{v:.1}"),
            Unit::Share => format!("{:.1} %", v * 100.0),
            Unit::Money => money(v),
            Unit::Mean => format!("{v:.2}"),
        }
    }
}

/// The columns to show: the cost columns only with a price table, the SLO columns only with objectives, the
/// speculative ones only where a group speculated.
pub fn columns_for(groups: &[(String, Summary)]) -> Vec<Column> {
    let has_cost = groups.iter().any(|(_, s)| s.cost.is_some());
    let has_slo = groups.iter().any(|(_, s)| s.slo.is_some());
    let has_spec = groups.iter().any(|(_, s)| s.spec.is_some());
    COLUMNS
        .into_iter()
        .filter(|c| match c.unit {
            Unit::Money => has_cost,
            _ if c.key.starts_with("spec") => has_spec,
            _ if c.key.starts_with("slo") || c.key.starts_with("goodput") => has_slo,
            _ => true,
        })
        .collect()
}

/// Sorts groups by a column (undefined figures last), or by key when `column` is `None`.
pub fn sort(groups: &mut [(String, Summary)], column: Option<&Column>, descending: bool) {
    groups.sort_by(|(ka, a), (kb, b)| {
        let order = match column {
            None => ka.cmp(kb),
            Some(c) => match ((c.get)(a), (c.get)(b)) {
                (Some(x), Some(y)) => x.total_cmp(&y),
                (Some(_), None) => return std::cmp::Ordering::Less,
                (None, Some(_)) => return std::cmp::Ordering::Greater,
                (None, None) => ka.cmp(kb),
            },
        };
        if descending { order.reverse() } else { order }
    });
}

/// The table as CSV: a header of machine names (`model,requests,input_tokens,…`, the first named `key_header`), one line per group, figures in
/// full precision, empty cells where undefined.
///
/// # Errors
/// When the CSV writer fails (it writes to memory: in practice never).
pub fn to_csv(key_header: &str, groups: &[(String, Summary)], columns: &[Column]) -> Result<String, csv::Error> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record(std::iter::once(key_header).chain(columns.iter().map(|c| c.key)))?;
    for (key, s) in groups {
        let cells = columns
            .iter()
            .map(|c| (c.get)(s).map_or_else(String::new, |v| v.to_string()));
        w.write_record(std::iter::once(key.clone()).chain(cells))?;
    }
    let bytes = w.into_inner().map_err(|e| csv::Error::from(e.into_error()))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn money_keeps_three_significant_digits_below_a_hundred() {
        assert_eq!(money(0.0), "0");
        assert_eq!(money(0.000_123_4), "0.000123");
        assert_eq!(money(0.045_67), "0.0457");
        assert_eq!(money(12.345), "12.35");
        assert_eq!(money(1234.5), "1234.50");
        assert_eq!(money(-0.002), "-0.00200");
    }

    #[test]
    fn sort_puts_undefined_figures_last_either_way() {
        let mut groups: Vec<(String, Summary)> = ["a", "b", "c"]
            .iter()
            .map(|k| {
                (
                    k.to_string(),
                    crate::analysis::summary::summarize(
                        &crate::trace::Trace::default(),
                        &[],
                        crate::analysis::summary::Slo::default(),
                        None,
                    ),
                )
            })
            .collect();
        groups[0].1.requests = 5;
        groups[2].1.requests = 7;
        let requests = &COLUMNS[0];
        sort(&mut groups, Some(requests), true);
        let keys: Vec<&str> = groups.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["c", "a", "b"]);
        let ttft = COLUMNS.iter().find(|c| c.key == "ttft_p50_ms").unwrap();
        groups[2].1.ttft_ms.p50 = Some(3.0); // "b", last after the sort above
        sort(&mut groups, Some(ttft), false);
        assert_eq!(groups[0].0, "b", "the only defined figure first");
    }
}
