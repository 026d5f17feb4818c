//! How a server log's times are read when they lack a year or a zone. Python's `logging` writes the server's local
//! time with no zone (vLLM `%m-%d %H:%M:%S`, without the year too; SGLang `%Y-%m-%d %H:%M:%S`), so a log alone
//! cannot be placed on the Unix epoch: tokenscope reads it as UTC in the year of the trace's other files (else of
//! the log file's last change), says so in the load report, and takes the date and zone from the user when given
//! (`--log-date`, `--log-tz`).

use chrono::{Datelike, NaiveDate, NaiveDateTime};

/// The user's word on a log's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LogClock {
    /// The date of the log's first line (its year dates a vLLM log, whose lines give month and day only).
    pub date: Option<NaiveDate>,
    /// The zone the server wrote its times in, as seconds east of UTC.
    pub utc_offset_s: Option<i32>,
}

/// Parses `--log-date`: `YYYY-MM-DD`.
///
/// # Errors
/// Not a date of that form.
pub fn parse_date(s: &str) -> Result<NaiveDate, String> {
    NaiveDate::parse_from_str(s.trim(), "%Y-%m-%d")
        .map_err(|_| format!("{s:?} is not a date: write the log's first day as YYYY-MM-DD (2025-11-29)"))
}

/// Parses `--log-tz`: `UTC`, `Z`, or an offset from UTC, `+08:00`, `-0500`, `+8`; gives seconds east of UTC.
///
/// # Errors
/// Not one of those forms, or beyond ±14 hours.
pub fn parse_offset(s: &str) -> Result<i32, String> {
    let t = s.trim();
    let bad = || {
        format!(
            "{s:?} is not a zone offset: write the server's offset from UTC, +08:00, -05:00 or UTC (zone names such \
             as Asia/Shanghai are not read: give their offset on the log's dates)"
        )
    };
    if t.eq_ignore_ascii_case("utc") || t.eq_ignore_ascii_case("z") || t.eq_ignore_ascii_case("gmt") {
        return Ok(0);
    }
    let (sign, rest) = match t.as_bytes().first() {
        Some(b'+') => (1, &t[1..]),
        Some(b'-') => (-1, &t[1..]),
        _ => return Err(bad()),
    };
    let (h, m) = match rest.split_once(':') {
        Some((h, m)) => (h, m),
        None if rest.len() == 4 => rest.split_at(2),
        None => (rest, "0"),
    };
    let (h, m): (i32, i32) = (h.parse().map_err(|_| bad())?, m.parse().map_err(|_| bad())?);
    if !(0..=14).contains(&h) || !(0..60).contains(&m) || (h == 14 && m > 0) {
        return Err(bad());
    }
    Ok(sign * (h * 3600 + m * 60))
}

/// `+08:00` for 28,800 s.
pub fn describe_offset(offset_s: i32) -> String {
    if offset_s == 0 {
        return "UTC".to_owned();
    }
    let sign = if offset_s < 0 { '-' } else { '+' };
    let a = offset_s.unsigned_abs();
    format!("{sign}{:02}:{:02}", a / 3600, a % 3600 / 60)
}

impl LogClock {
    /// The year a log without years is read in: the user's date's, else `year` (the trace's other files'), else
    /// `fallback` (the log file's last change).
    pub fn year(&self, year: Option<i32>, fallback: i32) -> i32 {
        self.date.map(|d| d.year()).or(year).unwrap_or(fallback)
    }

    /// A local time of the log as ns since the Unix epoch, by the user's zone (UTC when none was given); `None`
    /// beyond the range of ns in an i64.
    pub fn epoch_ns(&self, local: NaiveDateTime) -> Option<i64> {
        let offset = i64::from(self.utc_offset_s.unwrap_or(0));
        local
            .and_utc()
            .timestamp_nanos_opt()?
            .checked_sub(offset * 1_000_000_000)
    }

    /// How the times were read, for the load report: "as UTC" or "as +08:00 (--log-tz)".
    pub fn zone_text(&self) -> String {
        match self.utc_offset_s {
            None => "as UTC (the log names no zone; give the server's with --log-tz)".to_owned(),
            Some(o) => format!("as {} (--log-tz)", describe_offset(o)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_in_the_forms_people_write_them() {
        assert_eq!(parse_offset("UTC"), Ok(0));
        assert_eq!(parse_offset("+08:00"), Ok(8 * 3600));
        assert_eq!(parse_offset("-0500"), Ok(-5 * 3600));
        assert_eq!(parse_offset("+5:30"), Ok(5 * 3600 + 30 * 60));
        assert_eq!(parse_offset("+8"), Ok(8 * 3600));
        for bad in ["Asia/Shanghai", "+15:00", "08:00", "+8:75", ""] {
            assert!(parse_offset(bad).is_err(), "{bad}");
        }
        assert_eq!(describe_offset(-5 * 3600 - 30 * 60), "-05:30");
    }

    #[test]
    fn a_local_time_east_of_utc_is_earlier_on_the_epoch() {
        let local = NaiveDate::from_ymd_opt(2025, 11, 29)
            .and_then(|d| d.and_hms_opt(8, 0, 0))
            .unwrap();
        let utc = LogClock::default().epoch_ns(local).unwrap();
        assert_eq!(utc, 1_764_403_200_000_000_000);
        let shanghai = LogClock {
            utc_offset_s: Some(8 * 3600),
            ..LogClock::default()
        };
        // 08:00 in +08:00 is 00:00 UTC: eight hours earlier.
        assert_eq!(shanghai.epoch_ns(local).unwrap(), utc - 8 * 3_600_000_000_000);
        assert_eq!(parse_date("2024-02-29").map(|d| d.year()), Ok(2024));
        assert!(parse_date("11-29").is_err());
    }
}
