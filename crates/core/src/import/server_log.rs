//! What the periodic stats lines of servers' ordinary logs share (vLLM's every 10 s, SGLang's per prefill batch and
//! every 40 decode steps): a message that is a `", "`-separated list of `label: value` pieces, a local time with no
//! zone (and for vLLM no year), and an engine index. Each line becomes a `sample` record, placed in time once every
//! file of the trace is read (the year may come from another file), with the user's date and zone when given.

use chrono::NaiveDate;

use super::log_clock::LogClock;
use super::{ok, record, text};
use crate::ingest::raw::RawRecord;
use crate::trace::TraceBuilder;
use crate::trace::report::Place;

/// A log line's local time, as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalTime {
    /// The year, when the line gives it (SGLang does, vLLM does not).
    pub year: Option<i32>,
    /// Month, 1..=12.
    pub month: u32,
    /// Day, 1..=31.
    pub day: u32,
    /// Seconds since midnight.
    pub second_of_day: u32,
}

/// The counters one stats line gives; `None` for what it does not.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[allow(missing_docs)] // the fields of the format's sample record, documented there
pub struct Counters {
    pub num_running: Option<i64>,
    pub num_waiting: Option<i64>,
    pub num_swapped: Option<i64>,
    pub kv_usage: Option<f64>,
    pub kv_tokens: Option<i64>,
    pub prompt_throughput: Option<f64>,
    pub generation_throughput: Option<f64>,
    pub prefix_hit_rate: Option<f64>,
    pub spec_accept_length: Option<f64>,
    pub spec_accept_rate: Option<f64>,
    pub spec_drafted_tokens: Option<i64>,
    pub spec_accepted_tokens: Option<i64>,
    pub num_prefill_reqs: Option<i64>,
    pub num_prefill_tokens: Option<i64>,
    pub cached_tokens: Option<i64>,
    pub kv_transfers: Option<i64>,
    pub kv_transfers_failed: Option<i64>,
    pub kv_transfer_ms: Option<f64>,
    pub kv_transfer_p90_ms: Option<f64>,
    pub kv_transfer_bytes: Option<i64>,
    pub num_bootstrapping: Option<i64>,
    pub num_prealloc: Option<i64>,
    pub num_transferring: Option<i64>,
    pub num_inflight: Option<i64>,
    pub num_retracted: Option<i64>,
}

impl Counters {
    /// Takes every counter `other` has (a second line of the same reading: vLLM's speculative-decoding line).
    pub fn absorb(&mut self, other: &Counters) {
        macro_rules! take {
            ($($f:ident),*) => { $( if other.$f.is_some() { self.$f = other.$f; } )* };
        }
        take!(
            num_running,
            num_waiting,
            num_swapped,
            kv_usage,
            kv_tokens,
            prompt_throughput,
            generation_throughput,
            prefix_hit_rate,
            spec_accept_length,
            spec_accept_rate,
            spec_drafted_tokens,
            spec_accepted_tokens,
            num_prefill_reqs,
            num_prefill_tokens,
            cached_tokens,
            kv_transfers,
            kv_transfers_failed,
            kv_transfer_ms,
            kv_transfer_p90_ms,
            kv_transfer_bytes,
            num_bootstrapping,
            num_prealloc,
            num_transferring,
            num_inflight,
            num_retracted
        );
    }
}

/// One stats line, read but not yet placed in time.
#[derive(Debug, Clone, PartialEq)]
pub struct LogSample {
    /// Where the line is.
    pub place: Place,
    /// When it was written, as written.
    pub local: LocalTime,
    /// The engine instance (`dp1`, `engine-001`), or `None` for the only one.
    pub source: Option<String>,
    /// Which series of lines it belongs to (SGLang: prefill or decode), for the interval its rates cover.
    pub series: u8,
    /// What it says.
    pub counters: Counters,
}

/// The `label: value` pieces of a stats message, labels trimmed: `"Running: 3 reqs"` gives `("Running", "3 reqs")`.
/// Pieces without a colon (the rest of a list value) are skipped.
pub fn pieces(message: &str) -> impl Iterator<Item = (&str, &str)> {
    message.split(", ").filter_map(|p| {
        let (label, value) = p.split_once(": ")?;
        Some((label.trim(), value.trim().trim_end_matches(['.', ','])))
    })
}

/// A value's number and whether it was a percentage: `"12.5%"` gives (12.5, true), `"3 reqs"` (3, false),
/// `"144.95"` (144.95, false).
pub fn number(value: &str) -> Option<(f64, bool)> {
    let v = value.trim();
    let end = v
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || c == '.' || (i == 0 && c == '-') || c == 'e' || c == 'E'))
        .map_or(v.len(), |(i, _)| i);
    let n: f64 = v[..end].parse().ok()?;
    n.is_finite().then(|| (n, v[end..].trim_start().starts_with('%')))
}

/// A value as a fraction: a percentage divided by 100, a plain number as it is. The division is rounded to 12
/// decimals, so that 99.4 % is 0.994 and not 0.9940000000000001 (a log prints a few decimals; none is lost).
pub fn fraction(value: &str) -> Option<f64> {
    number(value).map(|(n, pct)| if pct { (n * 1e10).round() / 1e12 } else { n })
}

/// A value as a whole count.
#[expect(
    clippy::cast_possible_truncation,
    reason = "counts read from text, checked to be whole and in range"
)]
pub fn count(value: &str) -> Option<i64> {
    number(value)
        .filter(|(n, _)| n.fract() == 0.0 && n.abs() < 9e15)
        .map(|(n, _)| n as i64)
}

/// Places the lines read in time and adds them as samples: `year` is the trace's (its other files'), `fallback` the
/// log file's last change's. A rate's interval is the time since the line before it in the same source and series.
/// Returns how many were placed.
pub fn place(samples: &[LogSample], year: Option<i32>, fallback: i32, clock: &LogClock, b: &mut TraceBuilder) -> usize {
    let mut last: Vec<(Option<&str>, u8, i64)> = Vec::new();
    let mut placed = 0;
    // A log without years that runs past New Year: its month goes back (December to January), its year on.
    let mut rollover = 0;
    let mut previous_month = None;
    for s in samples {
        if s.local.year.is_none() {
            if previous_month.is_some_and(|m| s.local.month + 6 < m) {
                rollover += 1;
            }
            previous_month = Some(s.local.month);
        }
        let y = s.local.year.unwrap_or_else(|| clock.year(year, fallback) + rollover);
        let Some(local) = NaiveDate::from_ymd_opt(y, s.local.month, s.local.day)
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .map(|t| t + chrono::Duration::seconds(i64::from(s.local.second_of_day)))
        else {
            continue;
        };
        let Some(ns) = clock.epoch_ns(local) else {
            continue;
        };
        let key = (s.source.as_deref(), s.series);
        let previous = last.iter_mut().find(|(src, series, _)| (*src, *series) == key);
        let interval = previous.as_ref().map(|p| ns - p.2).filter(|&d| d > 0);
        match previous {
            Some(p) => p.2 = ns,
            None => last.push((key.0, key.1, ns)),
        }
        let r = sample_record(s, ns, interval);
        crate::ingest::validate::ingest(&r, s.place, b);
        placed += 1;
    }
    placed
}

fn sample_record(s: &LogSample, ns: i64, interval: Option<i64>) -> RawRecord<'static> {
    let c = &s.counters;
    let mut r = record("sample");
    if let Some(src) = &s.source {
        r.source = text(src.clone());
    }
    r.time_ns = ok(ns);
    r.interval_ns = interval.and_then(ok);
    r.num_running = c.num_running.and_then(ok);
    r.num_waiting = c.num_waiting.and_then(ok);
    r.num_swapped = c.num_swapped.and_then(ok);
    r.kv_usage = c.kv_usage.and_then(ok);
    r.kv_tokens = c.kv_tokens.and_then(ok);
    r.prompt_throughput = c.prompt_throughput.and_then(ok);
    r.generation_throughput = c.generation_throughput.and_then(ok);
    r.prefix_hit_rate = c.prefix_hit_rate.and_then(ok);
    r.spec_accept_length = c.spec_accept_length.and_then(ok);
    r.spec_accept_rate = c.spec_accept_rate.and_then(ok);
    r.spec_drafted_tokens = c.spec_drafted_tokens.and_then(ok);
    r.spec_accepted_tokens = c.spec_accepted_tokens.and_then(ok);
    r.num_prefill_reqs = c.num_prefill_reqs.and_then(ok);
    r.num_prefill_tokens = c.num_prefill_tokens.and_then(ok);
    r.cached_tokens = c.cached_tokens.and_then(ok);
    r.kv_transfers = c.kv_transfers.and_then(ok);
    r.kv_transfers_failed = c.kv_transfers_failed.and_then(ok);
    r.kv_transfer_ms = c.kv_transfer_ms.and_then(ok);
    r.kv_transfer_p90_ms = c.kv_transfer_p90_ms.and_then(ok);
    r.kv_transfer_bytes = c.kv_transfer_bytes.and_then(ok);
    r.num_bootstrapping = c.num_bootstrapping.and_then(ok);
    r.num_prealloc = c.num_prealloc.and_then(ok);
    r.num_transferring = c.num_transferring.and_then(ok);
    r.num_inflight = c.num_inflight.and_then(ok);
    r.num_retracted = c.num_retracted.and_then(ok);
    r
}

/// Removes terminal colour codes (`ESC [ ... letter`) from a line written to a terminal.
pub fn strip_ansi(line: &str) -> std::borrow::Cow<'_, str> {
    if !line.contains('\x1b') {
        return std::borrow::Cow::Borrowed(line);
    }
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\x1b' && chars.peek() == Some(&'[') {
            chars.next();
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_read_as_the_logs_print_them() {
        assert_eq!(number("12.5%"), Some((12.5, true)));
        assert_eq!(number("3 reqs"), Some((3.0, false)));
        assert_eq!(number("1.0 tokens/s"), Some((1.0, false)));
        assert_eq!(number("True"), None);
        assert_eq!(fraction("45.0%"), Some(0.45));
        assert_eq!(fraction("99.4%"), Some(0.994));
        assert_eq!(fraction("0.29"), Some(0.29));
        assert_eq!(count("20800"), Some(20_800));
        assert_eq!(count("2.5"), None);
        let p: Vec<(&str, &str)> =
            pieces("Running: 3 reqs, Waiting: 0 reqs, Per-position acceptance rate: 0.8, 0.5, x").collect();
        assert_eq!(
            p,
            [
                ("Running", "3 reqs"),
                ("Waiting", "0 reqs"),
                ("Per-position acceptance rate", "0.8")
            ]
        );
    }
}
