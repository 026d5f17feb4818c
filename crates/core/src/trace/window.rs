//! A window onto a trace: a time range and `key=value` filters on the request labels, as the builder keeps records
//! by it (a request arriving in it whose labels match, a step starting in it). Which folders and files of a dataset
//! can hold the window's records is the format's business (`format::window`).

/// The request labels a filter can choose records by.
pub const LABELS: [&str; 4] = ["source", "model", "app_id", "user_id"];

/// A time window and filters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Window {
    /// Records at or after this time, ns since the Unix epoch.
    pub from_ns: Option<i64>,
    /// Records before this time, ns since the Unix epoch.
    pub to_ns: Option<i64>,
    /// `(key, value)`, values as written (not escaped): a record or folder must have one of the values given for
    /// each key named (`source=a`, `source=b` and `model=m`: source a or b, and model m).
    pub filters: Vec<(String, String)>,
}

/// The filter value that chooses requests without the label (`--where model=(none)`), as summaries name them.
pub const ABSENT: &str = "(none)";

impl Window {
    /// True when the window chooses nothing out (no times, no filters).
    pub fn is_all(&self) -> bool {
        self.from_ns.is_none() && self.to_ns.is_none() && self.filters.is_empty()
    }

    /// Whether `t` is within the window's times.
    pub fn contains(&self, t: i64) -> bool {
        self.from_ns.is_none_or(|f| t >= f) && self.to_ns.is_none_or(|e| t < e)
    }

    /// Whether a value of `key` passes the filters: one of the values given for the key, if any is.
    pub fn allows(&self, key: &str, value: &str) -> bool {
        let mut given = self.filters.iter().filter(|(k, _)| k == key).peekable();
        given.peek().is_none() || given.any(|(_, v)| v == value)
    }

    /// Whether a request's label passes the filters; a request without it passes a filter for [`ABSENT`].
    pub fn allows_label(&self, key: &str, value: Option<&str>) -> bool {
        self.allows(key, value.unwrap_or(ABSENT))
    }

    /// The window in words: `from 2025-11-29T08:00:00Z to 2025-11-29T09:00:00Z where source=vllm-0`.
    pub fn describe(&self) -> String {
        let time = |ns: i64| {
            chrono::DateTime::from_timestamp_nanos(ns)
                .format("%Y-%m-%dT%H:%M:%S%.fZ")
                .to_string()
        };
        let mut parts = Vec::new();
        if let Some(f) = self.from_ns {
            parts.push(format!("from {}", time(f)));
        }
        if let Some(t) = self.to_ns {
            parts.push(format!("to {}", time(t)));
        }
        if !self.filters.is_empty() {
            let mut keys: Vec<&str> = Vec::new();
            for (k, _) in &self.filters {
                if !keys.contains(&k.as_str()) {
                    keys.push(k);
                }
            }
            let f: Vec<String> = keys
                .iter()
                .map(|&k| {
                    let values: Vec<&str> = self
                        .filters
                        .iter()
                        .filter(|(fk, _)| fk == k)
                        .map(|(_, v)| v.as_str())
                        .collect();
                    format!("{k}={}", values.join("|"))
                })
                .collect();
            parts.push(format!("where {}", f.join(" and ")));
        }
        if parts.is_empty() {
            "everything".to_owned()
        } else {
            parts.join(" ")
        }
    }
}
