//! SGLang's server log, as every deployment writes it by default (`tests/data/import/sglang/logs/README.md` quotes
//! the source of each line): the scheduler's
//!
//! ```text
//! [2026-04-05 20:02:51 DP0 TP0] Prefill batch, #new-seq: 1, #new-token: 158, #cached-token: 0, token usage: 0.08,
//!   #running-req: 31, #queue-req: 0, cuda graph: True, input throughput (token/s): 559.53
//! [2026-04-08 14:05:21 TP0] Decode batch, #running-req: 5, #token: 20800, token usage: 0.29, accept len: 3.10,
//!   accept rate: 0.78, cuda graph: True, gen throughput (token/s): 144.95, #queue-req: 0
//! ```
//!
//! (one line each), a `Prefill batch` line per prefill batch and a `Decode batch` line every `decode_log_interval`
//! steps (40 by default). Both become samples; a prefill line also counts its batch's new sequences, new tokens and
//! cached tokens. Older releases wrote `Prefill batch.` with a period; hybrid models `full token usage`. Labels are
//! read by name, so their order and the ones a release adds do not matter.
//!
//! The time has whole seconds and no zone (`%Y-%m-%d %H:%M:%S`, the server's local time): it is read as UTC unless
//! `--log-tz` says otherwise. Only the first tensor-parallel rank writes these lines; `DPn` names the data-parallel
//! scheduler, and becomes the sample's source. The log names no request: it gives no request's latency. Its lines are
//! read by vLLM's log reader (`vllm_log::read`), which reads both engines' lines wherever they are; this module parses
//! one line.

use super::server_log::{Counters, LocalTime, LogSample, count, fraction, number, pieces};
use crate::trace::report::Place;

/// The series of a line: prefill batches and decode batches cover different intervals (vLLM's lines are series 0).
const PREFILL: u8 = 1;
const DECODE: u8 = 2;

/// True when the line is a per-request timing line (`Time Stats(rid=...)`, `ReqTimeStats(rid=...)`): what a
/// disaggregated deployment's logs are joined by (`sglang_pd`).
pub fn is_time_stats(line: &str) -> bool {
    line.contains("Time Stats(rid=") || line.contains("ReqTimeStats(rid=")
}

/// True when the text has SGLang's scheduler stats lines, or a disaggregated server's request timing lines.
pub fn looks_like(text: &str) -> bool {
    text.lines().any(|l| {
        (batch_kind(l).is_some() && l.contains("#running-req")) || (is_time_stats(l) && l.contains("bootstrap_room="))
    })
}

/// Where a line's `Prefill batch` or `Decode batch` is, and which.
fn batch_kind(line: &str) -> Option<(usize, u8)> {
    if let Some(at) = line.find("Prefill batch") {
        return Some((at + "Prefill batch".len(), PREFILL));
    }
    line.find("Decode batch").map(|at| (at + "Decode batch".len(), DECODE))
}

/// True when the line is one of SGLang's batch lines (or a cut one).
pub fn is_batch_line(line: &str) -> bool {
    batch_kind(line).is_some()
}

/// `[YYYY-MM-DD HH:MM:SS{ DPn}{ TPn}...]` at the line's start (after any prefix a process manager added): the
/// time, and the data-parallel rank when named.
pub(super) fn prefix(line: &str) -> Option<(LocalTime, Option<u32>)> {
    let open = line.find('[')?;
    let inside = &line[open + 1..];
    let close = inside.find(']')?;
    let inside = &inside[..close];
    let date = inside.get(..10)?;
    let time = inside.get(11..19)?;
    let mut d = date.split('-').map(|x| x.parse::<u32>().ok());
    let (y, mo, da) = (d.next()??, d.next()??, d.next()??);
    let mut t = time.split(':').map(|x| x.parse::<u32>().ok());
    let (h, mi, s) = (t.next()??, t.next()??, t.next()??);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&da) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    let dp = inside[19..]
        .split_whitespace()
        .find_map(|w| w.strip_prefix("DP").and_then(|n| n.parse().ok()));
    let local = LocalTime {
        year: i32::try_from(y).ok(),
        month: mo,
        day: da,
        second_of_day: h * 3600 + mi * 60 + s,
    };
    Some((local, dp))
}

/// One batch line: its time, data-parallel rank and counters.
pub fn parse(line: &str, place: Place) -> Result<LogSample, (&'static str, String)> {
    let (after, series) = batch_kind(line).ok_or(("batch", "no Prefill batch or Decode batch".to_owned()))?;
    let (local, dp) =
        prefix(&line[..after]).ok_or(("time", "no [YYYY-MM-DD HH:MM:SS] time before the message".to_owned()))?;
    let mut c = Counters::default();
    let mut labels = 0;
    for (label, value) in pieces(&line[after..]) {
        // `#token` is SGLang's KV tokens in use; `full token usage` a hybrid model's full-attention pool.
        match label.trim_start_matches(['.', ',', ' ']) {
            "#new-seq" => c.num_prefill_reqs = count(value),
            "#new-token" => c.num_prefill_tokens = count(value),
            "#cached-token" => c.cached_tokens = count(value),
            "token usage" | "full token usage" => c.kv_usage = fraction(value),
            "#running-req" => c.num_running = count(value),
            "#queue-req" => c.num_waiting = count(value),
            "#token" => c.kv_tokens = count(value),
            "gen throughput (token/s)" => c.generation_throughput = number(value).map(|n| n.0),
            "input throughput (token/s)" => c.prompt_throughput = number(value).map(|n| n.0),
            "accept len" => c.spec_accept_length = number(value).map(|n| n.0),
            "accept rate" => c.spec_accept_rate = fraction(value),
            // A disaggregated deployment's queues: the prefill instance's handshakes and KV caches being sent, the
            // decode instance's requests waiting for room, receiving their KV cache, or retracted.
            "#bootstrap-req" => c.num_bootstrapping = count(value),
            "#inflight-req" => c.num_inflight = count(value),
            "#prealloc-req" => c.num_prealloc = count(value),
            "#transfer-req" => c.num_transferring = count(value),
            "#retracted-req" => c.num_retracted = count(value),
            // SGLang 0.3 and 0.4's prefill line, in percent.
            "cache hit rate" => c.prefix_hit_rate = fraction(value),
            _ => continue,
        }
        labels += 1;
    }
    if c.num_running.is_none() {
        return Err((
            "#running-req",
            format!("no \"#running-req: N\" among {labels} known label(s): the line is cut or of another form"),
        ));
    }
    Ok(LogSample {
        place,
        local,
        source: dp.map(|n| format!("dp{n}")),
        series,
        counters: c,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PREFILL_LINE: &str = "[2026-04-05 20:02:51] Prefill batch, #new-seq: 1, #new-token: 158, #cached-token: 0, \
         token usage: 0.08, #running-req: 31, #queue-req: 0, cuda graph: True, input throughput (token/s): 559.53";
    const DECODE_LINE: &str = "[2026-04-08 14:05:21 DP1 TP0] Decode batch. #running-req: 5, #token: 20800, token \
         usage: 0.29, accept len: 3.10, accept rate: 0.78, cuda graph: True, gen throughput (token/s): 144.95, \
         #queue-req: 2";

    #[test]
    fn a_prefill_line_gives_its_batch_and_the_queue() {
        let s = parse(PREFILL_LINE, Place::default()).unwrap();
        assert_eq!(s.series, PREFILL);
        assert_eq!(s.source, None);
        assert_eq!(
            s.local,
            LocalTime {
                year: Some(2026),
                month: 4,
                day: 5,
                second_of_day: 20 * 3600 + 2 * 60 + 51
            }
        );
        let c = s.counters;
        assert_eq!(
            (c.num_prefill_reqs, c.num_prefill_tokens, c.cached_tokens),
            (Some(1), Some(158), Some(0))
        );
        assert_eq!(
            (c.num_running, c.num_waiting, c.kv_usage),
            (Some(31), Some(0), Some(0.08))
        );
        assert_eq!(c.prompt_throughput, Some(559.53));
        assert_eq!(c.generation_throughput, None);
    }

    #[test]
    fn a_decode_line_of_an_older_release_with_speculation_on_a_second_dp_rank() {
        let s = parse(DECODE_LINE, Place::default()).unwrap();
        assert_eq!((s.series, s.source.as_deref()), (DECODE, Some("dp1")));
        let c = s.counters;
        assert_eq!(
            (c.num_running, c.kv_tokens, c.kv_usage),
            (Some(5), Some(20_800), Some(0.29))
        );
        assert_eq!((c.spec_accept_length, c.spec_accept_rate), (Some(3.10), Some(0.78)));
        assert_eq!((c.generation_throughput, c.num_waiting), (Some(144.95), Some(2)));
    }

    #[test]
    fn a_cut_line_is_refused_with_what_it_lacks() {
        let cut = &PREFILL_LINE[..60];
        let (field, reason) = parse(cut, Place::default()).unwrap_err();
        assert_eq!(field, "#running-req");
        assert!(reason.contains("cut"), "{reason}");
        assert!(looks_like(PREFILL_LINE));
        assert!(!looks_like(
            "INFO:     127.0.0.1:5000 - \"POST /generate HTTP/1.1\" 200 OK"
        ));
    }
}
