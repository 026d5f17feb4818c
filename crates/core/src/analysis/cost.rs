//! Cost attribution: what the tokens of a request cost under a price table (per 1 M tokens, as providers list
//! them: input, cached input, output), and what the prefix cache saved.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::trace::Trace;

/// Prices per 1 M tokens, in the table's currency.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// A prompt token computed by the engine.
    pub input: f64,
    /// A prompt token served from the prefix cache.
    pub cached_input: f64,
    /// A generated token.
    pub output: f64,
}

/// A price table: one price for every model, and prices for named models.
///
/// As a file (`--prices FILE`):
/// `{"currency": "USD", "default": {"input": 0.15, "cached_input": 0.075, "output": 0.6},
///   "models": {"qwen2.5-7b": {"input": 0.3, "cached_input": 0.15, "output": 1.2}}}`
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prices {
    /// The currency of the figures, for display.
    #[serde(default = "default_currency")]
    pub currency: String,
    /// The price of models not in `models` (and of requests without a model).
    #[serde(default)]
    pub default: Price,
    /// Prices by the request's `model` label.
    #[serde(default)]
    pub models: BTreeMap<String, Price>,
}

/// The highest price per 1 M tokens a table may give: far above any provider's, low enough that sums of billions
/// of tokens stay finite.
pub const MAX_PRICE: f64 = 1e6;

fn default_currency() -> String {
    "USD".to_owned()
}

impl Default for Prices {
    fn default() -> Self {
        Prices {
            currency: default_currency(),
            default: Price::default(),
            models: BTreeMap::new(),
        }
    }
}

/// What a set of requests cost, in the table's currency.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct Cost {
    /// Uncached prompt tokens at the input price.
    pub input: f64,
    /// Cached prompt tokens at the cached-input price.
    pub cached_input: f64,
    /// Output tokens at the output price.
    pub output: f64,
    /// The sum of the three.
    pub total: f64,
    /// What the cached tokens would have cost more at the input price.
    pub cache_savings: f64,
}

impl Cost {
    /// Adds another cost to this one.
    pub fn add(&mut self, other: &Cost) {
        self.input += other.input;
        self.cached_input += other.cached_input;
        self.output += other.output;
        self.total += other.total;
        self.cache_savings += other.cache_savings;
    }
}

/// Why a price table was refused; the message names the field and says what a good value is.
#[derive(Debug, thiserror::Error)]
pub enum PriceError {
    /// Not JSON, or not the shape of a price table.
    #[error(
        "{message} at {path}: a price table is {{\"currency\": \"USD\", \"default\": {{\"input\": 0.15, \
         \"cached_input\": 0.075, \"output\": 0.6}}, \"models\": {{\"NAME\": {{...}}}}}}, per 1 M tokens"
    )]
    Malformed {
        /// Where in the document (`models.m.input`).
        path: String,
        /// What the parser said.
        message: String,
    },
    /// A price below 0, above the largest plausible one, or not a number.
    #[error("{model}.{field} = {value}: a price is a number from 0 to {MAX_PRICE}, per 1 M tokens")]
    OutOfRange {
        /// `default` or the model's name.
        model: String,
        /// `input`, `cached_input` or `output`.
        field: &'static str,
        /// The value given.
        value: f64,
    },
    /// A cached prompt token priced above an uncached one.
    #[error(
        "{model}.cached_input = {cached_input} is above {model}.input = {input}: a cached token costs at most an \
         uncached one"
    )]
    CachedAboveInput {
        /// `default` or the model's name.
        model: String,
        /// The cached-input price given.
        cached_input: f64,
        /// The input price given.
        input: f64,
    },
    /// The file cannot be read.
    #[error("cannot read {file}: {source}")]
    Read {
        /// The file.
        file: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file's table was refused.
    #[error("{file}: {error}")]
    InFile {
        /// The file.
        file: String,
        /// Why.
        error: Box<PriceError>,
    },
}

impl Prices {
    /// The price of a model.
    pub fn for_model(&self, model: Option<&str>) -> Price {
        model.and_then(|m| self.models.get(m)).copied().unwrap_or(self.default)
    }

    /// Reads a price table from JSON, naming the field that is wrong.
    ///
    /// # Errors
    /// Malformed JSON, an unknown field, a price that is negative or not a number.
    pub fn from_json(text: &str) -> Result<Self, PriceError> {
        let de = &mut serde_json::Deserializer::from_str(text);
        let prices: Prices = serde_path_to_error::deserialize(de).map_err(|e| PriceError::Malformed {
            path: e.path().to_string(),
            message: e.inner().to_string(),
        })?;
        let all =
            std::iter::once(("default", &prices.default)).chain(prices.models.iter().map(|(k, p)| (k.as_str(), p)));
        for (name, p) in all {
            for (field, v) in [
                ("input", p.input),
                ("cached_input", p.cached_input),
                ("output", p.output),
            ] {
                if !(v.is_finite() && (0.0..=MAX_PRICE).contains(&v)) {
                    return Err(PriceError::OutOfRange {
                        model: name.to_owned(),
                        field,
                        value: v,
                    });
                }
            }
            if p.cached_input > p.input {
                return Err(PriceError::CachedAboveInput {
                    model: name.to_owned(),
                    cached_input: p.cached_input,
                    input: p.input,
                });
            }
        }
        Ok(prices)
    }

    /// Reads a price table from a JSON file.
    ///
    /// # Errors
    /// An unreadable file, or what [`Prices::from_json`] rejects; the message names the file.
    pub fn load(path: &Path) -> Result<Self, PriceError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| PriceError::Read {
            file: file.clone(),
            source: e,
        })?;
        Self::from_json(&text).map_err(|e| PriceError::InFile {
            file,
            error: Box::new(e),
        })
    }

    /// The cost of one request: uncached prompt tokens at the input price, cached ones at the cached-input price,
    /// output tokens (usage, else token records) at the output price.
    pub fn request_cost(&self, trace: &Trace, r: u32) -> Cost {
        let q = &trace.requests;
        let ri = r as usize;
        let price = self.for_model(trace.label(q.model[ri]));
        let input = f64::from(q.input_tokens.at(ri).unwrap_or(0));
        let cached = f64::from(q.cached_tokens.at(ri).unwrap_or(0)).min(input);
        let output = f64::from(trace.output_tokens(r));
        let per = |tokens: f64, price: f64| tokens * price / 1e6;
        let c = Cost {
            input: per(input - cached, price.input),
            cached_input: per(cached, price.cached_input),
            output: per(output, price.output),
            total: 0.0,
            cache_savings: per(cached, price.input - price.cached_input),
        };
        Cost {
            total: c.input + c.cached_input + c.output,
            ..c
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_price_table_reads_with_defaults_and_names_its_errors() {
        let p = Prices::from_json(r#"{"default": {"input": 1, "cached_input": 0.5, "output": 2}}"#).unwrap();
        assert_eq!(p.currency, "USD");
        assert_eq!(p.for_model(Some("any")).output, 2.0);
        let e = Prices::from_json(r#"{"default": {"input": 1, "cached": 0.5, "output": 2}}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown field `cached`") && e.contains("default"), "{e}");
        let e = Prices::from_json(r#"{"models": {"m": {"input": -1, "cached_input": 0, "output": 0}}}"#)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("m.input = -1"), "{e}");
        let e = Prices::from_json(r#"{"default": {"input": 1, "cached_input": 2, "output": 1}}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("default.cached_input = 2 is above default.input = 1"), "{e}");
        let e = Prices::from_json(r#"{"default": {"input": 1e308, "cached_input": 0, "output": 0}}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("from 0 to 1000000"), "{e}");
        let e = Prices::from_json(r#"{"default": {"input": "cheap"}}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("default.input"), "{e}");
    }
}
