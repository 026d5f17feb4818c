//! SGLang's prefill/decode disaggregation, from its per-request timing lines (`--enable-request-time-stats-logging`;
//! `tests/data/import/sglang/logs/README.md`, "Prefill/decode disaggregation", quotes the source of each release's):
//!
//! ```text
//! [2025-11-04 09:30:48] ReqTimeStats(rid=22bc…, bootstrap_room=689995756098476298, input_len=2210, cached_input_len=0,
//!   output_len=1, attempts=0, type=prefill): bootstrap_duration=4.80ms, queue_duration=0.00ms,
//!   forward_duration=579.99ms, entry_time=1762248647.811, transfer_speed=0.67 GB/s, transfer_total=276.25 MB
//! [2025-11-04 09:30:49] ReqTimeStats(rid=0af4…, bootstrap_room=689995756098476298, …, type=decode):
//!   bootstrap_duration=4.00ms, alloc_wait_duration=0.00ms, transfer_duration=583.63ms, queue_duration=0.00ms,
//!   forward_duration=810.34ms, entry_time=1762248647.811
//! ```
//!
//! (0.5.23; 0.5.3 wrote `Req Time Stats(... input len=...)` with `start_time=`, 0.5.9 and 0.5.10
//! `bootstrap_queue_duration(4.80ms) = ...;` and `start=`). Each server writes its line when it is done with the
//! request: the prefill server when the KV transfer is polled done, the decode server when the request finishes. The
//! router gives both servers the same `bootstrap_room` (each server its own `rid`), so a request is the pair of lines
//! with one room: its queue (bootstrap and queue), prefill and KV transfer on the prefill server, its queue and decode
//! on the decode server, the server's log file naming the instance. The transfer is `transfer_total /
//! transfer_speed` (MB and GB as SGLang computes them, binary) ending at the prefill server's completion, where the
//! release prints them (0.5.10 on; 0.5.9 prints zeros, 0.5.3 nothing: there the prefill stage holds the transfer and
//! no transfer is given). The decode server's `transfer_duration` runs from its KV allocation to the transfer seen
//! done: it holds the prefill server's queue and compute too, so it is not the transfer.
//!
//! Times: 0.5.23's `entry_time` is the Unix time of the request's arrival (ms). Before, `start` is the process's
//! `perf_counter`: each file's clock is found from its lines' printed seconds (each line is written at the request's
//! end, within the second it names: the tightest offset all lines allow, the middle of what remains), and the decode
//! server's is set so that each pair arrives at both servers together, as the router sends it. Room 0 is a server's
//! own warm-up (a fake transfer) and pairs with nothing.

use std::collections::BTreeMap;

use super::log_clock::LogClock;
use super::server_log::LocalTime;
use super::{ok, record, text};
use crate::trace::TraceBuilder;
use crate::trace::report::Place;

/// Which server wrote a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Prefill,
    Decode,
}

/// When a request came to a server, as its line says.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Entry {
    /// Unix seconds (0.5.23's `entry_time`).
    Epoch(f64),
    /// The process's `perf_counter` seconds (`start_time`, `start`).
    Perf(f64),
}

/// One per-request timing line.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeStats {
    pub place: Place,
    pub local: LocalTime,
    pub role: Role,
    pub rid: String,
    pub room: u64,
    pub input_len: Option<i64>,
    pub cached_len: Option<i64>,
    pub output_len: Option<i64>,
    pub entry: Entry,
    /// Seconds from arrival to the request's forward: bootstrap (prefill), or pre-allocation, transfer (decode),
    /// then the queue.
    pub before_forward_s: f64,
    /// The decode server's wait for the transfer (from its KV allocation to the transfer seen done).
    pub transfer_wait_s: Option<f64>,
    /// Its queue before the forward.
    pub queue_s: f64,
    /// The forward: prefill and transfer (prefill server), or the decode (decode server).
    pub forward_s: f64,
    /// The KV transfer's time, from its size and speed, where the release prints them (and they are not zero).
    pub transfer_s: Option<f64>,
    /// The KV transfer's bytes (`transfer_total` MB, binary), where printed and not zero.
    pub transfer_bytes: Option<u64>,
    /// The prefill server's retries of the transfer (`#retries`), where printed.
    pub retries: Option<u32>,
    /// The file the line is in (its instance).
    pub instance: String,
}

impl TimeStats {
    /// Seconds from arrival to the end of the forward.
    fn total_s(&self) -> f64 {
        self.before_forward_s + self.forward_s
    }
}

/// The instance a log file is: its name without `.gz`/`.zst` and `.log` (`prefill-0.log.gz` is `prefill-0`).
pub fn instance_name(path: &std::path::Path) -> String {
    let name = path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let name = name
        .strip_suffix(".gz")
        .or_else(|| name.strip_suffix(".zst"))
        .unwrap_or(&name);
    name.strip_suffix(".log").unwrap_or(name).to_owned()
}

/// True when the line is a per-request timing line (said where SGLang's log lines are read).
pub use super::sglang_log::is_time_stats;

/// Where `key` ends in `text` as a whole name (`queue_duration`, not the end of `bootstrap_queue_duration`).
fn key_end(text: &str, key: &str) -> Option<usize> {
    text.match_indices(key)
        .find(|&(i, _)| {
            text[..i]
                .chars()
                .next_back()
                .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_'))
        })
        .map(|(i, _)| i + key.len())
}

/// The number before `ms` after `key` (`key=4.80ms`, `key(4.80ms)`).
fn ms_after(text: &str, key: &str) -> Option<f64> {
    let at = key_end(text, key)?;
    let rest = text[at..].trim_start_matches(['=', '(']);
    let end = rest.find("ms")?;
    rest[..end].trim().parse::<f64>().ok().map(|ms| ms / 1e3)
}

/// The number after `key=` up to the next space, comma or unit.
fn number_after(text: &str, key: &str) -> Option<f64> {
    let at = key_end(text, key)?;
    let rest = text[at..].trim_start();
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-'))
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

/// One timing line, written at `local` in file `instance`.
pub fn parse(line: &str, place: Place, instance: &str) -> Result<TimeStats, (&'static str, String)> {
    let open = ["Time Stats(rid=", "TimeStats(rid="]
        .iter()
        .find_map(|k| line.find(k).map(|a| a + k.len() - "rid=".len()))
        .ok_or(("rid", "no \"Time Stats(rid=\" nor \"ReqTimeStats(rid=\"".to_owned()))?;
    let (local, _) = super::sglang_log::prefix(&line[..open])
        .ok_or(("time", "no [YYYY-MM-DD HH:MM:SS] time before the message".to_owned()))?;
    let close = line[open..].find("): ").map(|c| open + c).ok_or((
        "type",
        "no \"): \" after the request's fields: the line is cut".to_owned(),
    ))?;
    let (head, body) = (&line[open..close], &line[close + 3..]);
    let field = |key: &str| {
        head.split(", ")
            .find_map(|kv| kv.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
    };
    let rid = field("rid").ok_or(("rid", "no rid".to_owned()))?.to_owned();
    let room = field("bootstrap_room").and_then(|v| v.parse().ok()).ok_or((
        "bootstrap_room",
        "no bootstrap_room=N: not a disaggregated server's line".to_owned(),
    ))?;
    let role = match field("type") {
        Some("prefill") => Role::Prefill,
        Some("decode") => Role::Decode,
        other => {
            return Err((
                "type",
                format!("type={} is neither prefill nor decode", other.unwrap_or("?")),
            ));
        }
    };
    let int = |keys: &[&str]| keys.iter().find_map(|k| field(k)).and_then(|v| v.parse().ok());
    let input_len = int(&["input_len", "input len"]);
    let output_len = int(&["output_len", "output len"]);
    let cached_len = int(&["cached_input_len"]);
    let entry = if let Some(t) = number_after(body, "entry_time=") {
        Entry::Epoch(t)
    } else if let Some(t) = number_after(body, "start_time=").or_else(|| number_after(body, "start=")) {
        Entry::Perf(t)
    } else {
        return Err(("entry_time", "no entry_time, start_time or start".to_owned()));
    };
    let need = |key: &'static str| ms_after(body, key).ok_or((key, format!("no {key}=N.NNms")));
    let queue_s = need("queue_duration")?;
    let forward_s = need("forward_duration")?;
    let (wait_s, transfer_wait_s) = match role {
        Role::Prefill => (
            ms_after(body, "bootstrap_queue_duration")
                .or_else(|| ms_after(body, "bootstrap_duration"))
                .ok_or(("bootstrap_duration", "no bootstrap wait".to_owned()))?,
            None,
        ),
        Role::Decode => {
            // 0.5.23 gives the handshake and the allocation apart; earlier releases one pre-allocation wait.
            let prealloc = ms_after(body, "prealloc_queue_duration")
                .or_else(|| ms_after(body, "prealloc_duration"))
                .or_else(|| Some(ms_after(body, "bootstrap_duration")? + ms_after(body, "alloc_wait_duration")?))
                .ok_or(("prealloc_duration", "no pre-allocation wait".to_owned()))?;
            (prealloc, Some(need("transfer_duration")?))
        }
    };
    // transfer_total MB over transfer_speed GB/s (binary units, as SGLang divides): zero speed is "not measured".
    let transfer_s = number_after(body, "transfer_total=")
        .zip(number_after(body, "transfer_speed="))
        .filter(|&(mb, gbs)| mb > 0.0 && gbs > 0.0)
        .map(|(mb, gbs)| mb / 1024.0 / gbs)
        .filter(|&s| s <= forward_s + 1e-3);
    #[expect(clippy::cast_possible_truncation, reason = "a log's MB, checked positive and finite")]
    #[expect(clippy::cast_sign_loss, reason = "checked positive")]
    let transfer_bytes = number_after(body, "transfer_total=")
        .filter(|mb| *mb > 0.0 && mb.is_finite() && *mb < 1e12)
        .map(|mb| (mb * 1_048_576.0).round() as u64);
    #[expect(clippy::cast_possible_truncation, reason = "checked whole and in range")]
    #[expect(clippy::cast_sign_loss, reason = "checked in range")]
    let retries = number_after(body, "#retries=")
        .filter(|n| n.fract() == 0.0 && (0.0..1e6).contains(n))
        .map(|n| n as u32);
    Ok(TimeStats {
        place,
        local,
        role,
        rid,
        room,
        input_len,
        cached_len,
        output_len,
        entry,
        before_forward_s: wait_s + transfer_wait_s.unwrap_or(0.0) + queue_s,
        transfer_wait_s,
        queue_s,
        forward_s,
        transfer_s,
        transfer_bytes,
        retries,
        instance: instance.to_owned(),
    })
}

/// Seconds to add to each file's `perf_counter` to make it Unix time, from its lines' printed seconds: a line is
/// written at its request's end, within the second it names.
fn perf_offsets(lines: &[TimeStats], clock: &LogClock, year: i32) -> BTreeMap<String, f64> {
    let mut bounds: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for s in lines {
        let (Entry::Perf(start), Some(printed)) = (s.entry, printed_s(&s.local, clock, year)) else {
            continue;
        };
        let end = start + s.total_s();
        let b = bounds
            .entry(s.instance.clone())
            .or_insert((f64::NEG_INFINITY, f64::INFINITY));
        b.0 = b.0.max(printed - end);
        b.1 = b.1.min(printed + 1.0 - end);
    }
    bounds
        .into_iter()
        .map(|(k, (lo, hi))| (k, if hi >= lo { f64::midpoint(lo, hi) } else { lo }))
        .collect()
}

/// A printed local time as Unix seconds.
fn printed_s(local: &LocalTime, clock: &LogClock, year: i32) -> Option<f64> {
    let date = chrono::NaiveDate::from_ymd_opt(local.year.unwrap_or(year), local.month, local.day)?;
    let t = date.and_hms_opt(0, 0, 0)? + chrono::Duration::seconds(i64::from(local.second_of_day));
    clock.epoch_ns(t).map(|ns| ns as f64 / 1e9)
}

/// Adds the requests of the timing lines of every file: a pair of lines with one room is one request across its
/// two instances; a line alone (a warm-up, or the other server's log not given) is a request on its server alone.
/// Returns the requests joined across instances and those alone.
pub fn place(lines: &[TimeStats], clock: &LogClock, year: i32, b: &mut TraceBuilder) -> (usize, usize) {
    let mut offsets = perf_offsets(lines, clock, year);
    let mut pairs: BTreeMap<u64, (Option<&TimeStats>, Option<&TimeStats>)> = BTreeMap::new();
    let mut alone: Vec<&TimeStats> = Vec::new();
    for s in lines {
        if s.room == 0 {
            alone.push(s);
            continue;
        }
        let p = pairs.entry(s.room).or_default();
        // A room twice on one side (a retry): the later line is the request's.
        let slot = if s.role == Role::Prefill { &mut p.0 } else { &mut p.1 };
        *slot = Some(s);
    }
    // The decode servers' perf clocks set on the prefill servers': a pair arrives at both together.
    let mut shift: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for (p, d) in pairs.values().filter_map(|&(p, d)| p.zip(d)) {
        if let (Entry::Perf(ps), Entry::Perf(ds)) = (p.entry, d.entry)
            && let Some(po) = offsets.get(&p.instance)
        {
            shift.entry(d.instance.clone()).or_default().push(ps + po - ds);
        }
    }
    for (instance, mut v) in shift {
        v.sort_by(f64::total_cmp);
        offsets.insert(instance, v[v.len() / 2]);
    }
    let entry_s = |s: &TimeStats| match s.entry {
        Entry::Epoch(t) => Some(t),
        Entry::Perf(t) => offsets.get(&s.instance).map(|o| t + o),
    };
    let mut joined = 0;
    for (p, d) in pairs.values().copied() {
        match (p, d) {
            (Some(p), Some(d)) => {
                if let (Some(pe), Some(de)) = (entry_s(p), entry_s(d)) {
                    add_request(Some((p, pe)), Some((d, de)), b);
                    joined += 1;
                }
            }
            (Some(one), None) | (None, Some(one)) => alone.push(one),
            (None, None) => {}
        }
    }
    let mut single = 0;
    for s in alone {
        if let Some(e) = entry_s(s) {
            let side = Some((s, e));
            match s.role {
                Role::Prefill => add_request(side, None, b),
                Role::Decode => add_request(None, side, b),
            }
            single += 1;
        }
    }
    (joined, single)
}

/// Unix seconds to ns.
fn ns(s: f64) -> i64 {
    (s * 1e9).round() as i64
}

/// One request: its prefill server's side, its decode server's, or both (each with its arrival, Unix seconds).
fn add_request(p: Option<(&TimeStats, f64)>, d: Option<(&TimeStats, f64)>, b: &mut TraceBuilder) {
    let Some(named) = d.or(p) else { return };
    let (first, _) = named;
    let id = first.rid.clone();
    let place = first.place;
    let mut r = record("request");
    r.request_id = text(id.clone());
    let arrival = match (p, d) {
        (Some((_, a)), Some((_, b))) => a.min(b),
        (Some((_, a)), None) | (None, Some((_, a))) => a,
        (None, None) => return,
    };
    r.arrival_ns = ok(ns(arrival));
    r.source = p.or(d).and_then(|(s, _)| text(s.instance.clone()));
    r.decode_source = p.and(d).and_then(|(s, _)| text(s.instance.clone()));
    r.input_tokens = first.input_len.map(super::Val::Ok);
    r.cached_tokens = p.and_then(|(s, _)| s.cached_len).map(super::Val::Ok);
    let mut stages: Vec<(&str, f64, f64, Option<i64>)> = Vec::new();
    let mut transfer = None;
    if let Some((s, entry)) = p {
        let forward = entry + s.before_forward_s;
        let done = forward + s.forward_s;
        r.scheduled_ns = ok(ns(forward));
        stages.push(("queue", entry, forward, None));
        let computed = s.input_len.zip(s.cached_len).map(|(i, c)| i - c);
        match s.transfer_s {
            Some(t) => {
                stages.push(("prefill", forward, done - t, computed));
                stages.push(("kv_transfer", done - t, done, s.input_len));
                transfer = Some((s.transfer_bytes, s.retries));
            }
            None => stages.push(("prefill", forward, done, computed)),
        }
        if d.is_none() {
            // A prefill server's request alone (its warm-up, or the decode server's log not given): its one token
            // comes out of the prefill.
            r.output_tokens = s.output_len.map(super::Val::Ok);
            r.first_token_ns = Some(super::Val::Ok(ns(done - s.transfer_s.unwrap_or(0.0))));
            r.finished_ns = Some(super::Val::Ok(ns(done)));
        }
    }
    if let Some((s, entry)) = d {
        // After the transfer (and its queue), the decode server's forward: the first token goes out with it.
        let queued = entry + s.before_forward_s - s.queue_s;
        let forward = entry + s.before_forward_s;
        let done = forward + s.forward_s;
        if p.is_none() {
            r.scheduled_ns = ok(ns(forward));
        }
        if s.queue_s > 0.0 {
            stages.push(("queue", queued, forward, None));
        }
        stages.push(("decode", forward, done, s.output_len.map(|n| (n - 1).max(0))));
        r.first_token_ns = Some(super::Val::Ok(ns(forward)));
        r.finished_ns = Some(super::Val::Ok(ns(done)));
        r.output_tokens = s.output_len.map(super::Val::Ok);
    }
    crate::ingest::validate::ingest(&r, place, b);
    for (name, start, end, tokens) in stages {
        let mut st = record("stage");
        st.request_id = text(id.clone());
        st.stage = text(name);
        st.start_ns = ok(ns(start));
        st.end_ns = ok(ns(end.max(start)));
        st.tokens = tokens.map(super::Val::Ok);
        if name == "kv_transfer"
            && let Some((bytes, retries)) = transfer
        {
            st.bytes = bytes.and_then(|n| i64::try_from(n).ok()).map(super::Val::Ok);
            st.retries = retries.map(|n| super::Val::Ok(i64::from(n)));
        }
        crate::ingest::validate::ingest(&st, place, b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PREFILL_0523: &str = "[2025-11-04 09:30:48] ReqTimeStats(rid=22bc, bootstrap_room=689995756098476298, \
        input_len=2210, cached_input_len=0, output_len=1, attempts=0, type=prefill): bootstrap_duration=4.80ms, \
        queue_duration=0.00ms, forward_duration=579.99ms, entry_time=1762248647.811, transfer_speed=0.67 GB/s, \
        transfer_total=276.25 MB";
    const DECODE_053: &str = "[2025-11-04 09:30:49] Req Time Stats(rid=0af4, bootstrap_room=689995756098476298, \
        input len=2210, output len=96, type=decode): prealloc_duration=4.00ms, transfer_duration=583.63ms, \
        queue_duration=0.00ms, forward_duration=810.34ms, start_time=4289.811";
    const PREFILL_059: &str = "[2025-11-04 09:30:48] Req Time Stats(rid=22bc, bootstrap_room=7, input len=2210, \
        output len=1, type=prefill): bootstrap_queue_duration(4.80ms) = alloc_wait(0.00ms) + bootstrap(0.00ms) + \
        other(4.80ms); queue_duration=0.00ms, forward_duration=579.99ms, start=4289.811, transfer_speed=0.00GB/s, \
        transfer_total=0.00MB, #retries=0";

    #[test]
    fn each_releases_line_gives_its_waits_its_forward_and_the_transfer_where_printed() {
        let p = parse(PREFILL_0523, Place::default(), "p").unwrap();
        assert_eq!(
            (p.role, p.room, p.rid.as_str()),
            (Role::Prefill, 689_995_756_098_476_298, "22bc")
        );
        assert_eq!(
            (p.input_len, p.cached_len, p.output_len),
            (Some(2210), Some(0), Some(1))
        );
        assert_eq!(p.entry, Entry::Epoch(1_762_248_647.811));
        assert!((p.before_forward_s - 0.0048).abs() < 1e-9);
        assert!((p.forward_s - 0.57999).abs() < 1e-9);
        // 276.25 MB at 0.67 GB/s (binary, as SGLang divides): 276.25 / 1024 / 0.67 = 0.40265 s.
        assert!((p.transfer_s.unwrap() - 276.25 / 1024.0 / 0.67).abs() < 1e-9);
        let d = parse(DECODE_053, Place::default(), "d").unwrap();
        assert_eq!(
            (d.role, d.input_len, d.output_len),
            (Role::Decode, Some(2210), Some(96))
        );
        assert_eq!(d.entry, Entry::Perf(4289.811));
        // Pre-allocation 4.00 + transfer wait 583.63 + queue 0 before its forward of 810.34 ms.
        assert!((d.before_forward_s - 0.58763).abs() < 1e-9);
        assert_eq!(d.transfer_s, None);
        // 0.5.9 prints a zero speed and size: no transfer, not a zero one.
        let z = parse(PREFILL_059, Place::default(), "p").unwrap();
        assert_eq!(z.transfer_s, None);
        assert!((z.before_forward_s - 0.0048).abs() < 1e-9);
        let cut = &PREFILL_0523[..90];
        assert_eq!(parse(cut, Place::default(), "p").unwrap_err().0, "type");
    }
}
