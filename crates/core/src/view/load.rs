//! The load of each instance (a rank, a prefill or a decode server) over time, on one scale for all of them: the
//! strip that shows a starved rank idle while another queues, or a prefill instance backed up while its decode
//! instance waits. What an instance's load is read from, in order of preference:
//!
//! - its requests, whose times say it all: waiting from arrival to being scheduled, running from then until it ends
//!   there (its end, or on a prefill instance of a disaggregated deployment the end of its KV transfer, after which
//!   it runs on its decode instance until its end);
//! - else its samples' `num_running` and `num_waiting` (a server log's stats lines, a metrics scrape), each reading
//!   held until the next, as the log says nothing of what happened between two readings.
//!
//! An instance without either has no row: nothing is known of its load, which is not the same as idle.

use crate::trace::instances::InstanceRole;
use crate::trace::{NO_STR, StageKind, Trace};

use super::viewport::Viewport;

/// `(time, running, waiting)` from that time until the next change.
pub type Change = (i64, u32, u32);

/// What a row's load was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Basis {
    /// The instance's own counters.
    Samples,
    /// Its requests' times.
    Requests,
}

/// One instance's load: requests running and waiting from each time on.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceLoad {
    /// Source label id.
    pub source: u32,
    /// What it did.
    pub role: InstanceRole,
    /// What the load was read from.
    pub basis: Basis,
    /// `(time, running, waiting)` from that time until the next change, sorted by time.
    pub changes: Vec<Change>,
}

impl InstanceLoad {
    /// The largest running and waiting counts over each of `columns` point columns of `vp`; `None` in a column
    /// before the first change (nothing known yet).
    pub fn columns(&self, vp: &Viewport, columns: usize) -> Vec<Option<(u32, u32)>> {
        let mut out = vec![None; columns];
        let c = &self.changes;
        for (col, slot) in out.iter_mut().enumerate() {
            let from = vp.time_from_x(col as f64);
            let to = vp.time_from_x(col as f64 + 1.0);
            // The value holding at the column's start, then every change inside it.
            let first = c.partition_point(|&(t, _, _)| t <= from);
            let start = first.saturating_sub(1);
            let end = c.partition_point(|&(t, _, _)| t < to);
            if end == 0 {
                continue;
            }
            *slot = c[start..end]
                .iter()
                .map(|&(_, r, w)| (r, w))
                .reduce(|a, b| (a.0.max(b.0), a.1.max(b.1)));
        }
        out
    }
}

/// Every instance's load, on one scale.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LoadStrip {
    /// One row per instance with its load known: prefill instances, decode instances, then the others, each in
    /// label order.
    pub rows: Vec<InstanceLoad>,
    /// The largest running plus waiting count of any row at any time: the strip's one scale (at least 1).
    pub max: u32,
}

impl LoadStrip {
    /// The load of the trace's instances; `None` when fewer than two have one (a strip compares instances).
    pub fn of(trace: &Trace) -> Option<Self> {
        let roles = trace.instance_roles();
        let mut sources: Vec<u32> = trace
            .requests
            .source
            .iter()
            .chain(&trace.requests.decode_source)
            .chain(&trace.samples.source)
            .copied()
            .filter(|&s| s != NO_STR)
            .collect();
        sources.sort_unstable();
        sources.dedup();
        if sources.len() < 2 {
            return None;
        }
        let by_requests = request_changes(trace);
        let mut rows: Vec<InstanceLoad> = sources
            .iter()
            .filter_map(|&source| {
                let role = roles.get(&source).copied().unwrap_or(InstanceRole::Both);
                let from_requests = by_requests
                    .iter()
                    .find(|(s, _)| *s == source)
                    .map(|(_, c)| c.clone())
                    .filter(|c| !c.is_empty());
                let (basis, changes) = match from_requests {
                    Some(c) => (Basis::Requests, c),
                    None => (Basis::Samples, sample_changes(trace, source)?),
                };
                Some(InstanceLoad {
                    source,
                    role,
                    basis,
                    changes,
                })
            })
            .collect();
        if rows.len() < 2 {
            return None;
        }
        rows.sort_by(|a, b| {
            a.role
                .cmp(&b.role)
                .then_with(|| trace.label(a.source).cmp(&trace.label(b.source)))
        });
        let max = rows
            .iter()
            .flat_map(|r| r.changes.iter().map(|&(_, run, wait)| run + wait))
            .max()
            .unwrap_or(0)
            .max(1);
        Some(LoadStrip { rows, max })
    }
}

/// A source's readings of running and waiting requests, when it has any.
fn sample_changes(trace: &Trace, source: u32) -> Option<Vec<Change>> {
    let s = &trace.samples;
    let rows: Vec<usize> = (0..s.len())
        .filter(|&i| s.source[i] == source && (s.num_running[i].is_some() || s.num_waiting[i].is_some()))
        .collect();
    if rows.is_empty() {
        return None;
    }
    let mut changes: Vec<Change> = rows
        .iter()
        .map(|&i| {
            (
                s.time_ns[i],
                s.num_running[i].unwrap_or(0),
                s.num_waiting[i].unwrap_or(0),
            )
        })
        .collect();
    changes.sort_by_key(|c| c.0);
    Some(changes)
}

/// Per source, its load from its requests' times.
fn request_changes(trace: &Trace) -> Vec<(u32, Vec<Change>)> {
    let q = &trace.requests;
    // (source, time, running delta, waiting delta)
    let mut events: Vec<(u32, i64, i32, i32)> = Vec::new();
    for r in 0..q.len() {
        let source = q.source[r];
        if source == NO_STR {
            continue;
        }
        let arrival = q.arrival_ns[r];
        let Some(end) = q.finished_ns.at(r).or(q.first_token_ns.at(r)) else {
            continue;
        };
        let scheduled = q
            .scheduled_ns
            .at(r)
            .or(q.first_token_ns.at(r))
            .unwrap_or(end)
            .clamp(arrival, end);
        events.push((source, arrival, 0, 1));
        events.push((source, scheduled, 1, -1));
        let decode = q.decode_source[r];
        #[expect(clippy::cast_possible_truncation, reason = "request rows are u32")]
        let handoff = (decode != NO_STR && decode != source)
            .then(|| {
                trace
                    .explicit_stages_of(r as u32)
                    .filter(|&s| trace.stages.kind[s] == StageKind::KvTransfer)
                    .map(|s| trace.stages.end_ns[s])
                    .max()
                    .or(q.first_token_ns.at(r))
            })
            .flatten()
            .map(|t| t.clamp(scheduled, end));
        match handoff {
            Some(h) => {
                events.push((source, h, -1, 0));
                events.push((decode, h, 1, 0));
                events.push((decode, end, -1, 0));
            }
            None => events.push((source, end, -1, 0)),
        }
    }
    // By source, then time; at one time, ends before starts, so that a request handed on at once is not counted
    // twice.
    events.sort_by_key(|&(s, t, dr, dw)| (s, t, dr + dw));
    let mut out: Vec<(u32, Vec<Change>)> = Vec::new();
    let (mut running, mut waiting) = (0i64, 0i64);
    for (source, t, dr, dw) in events {
        if out.last().is_none_or(|(s, _)| *s != source) {
            out.push((source, Vec::new()));
            (running, waiting) = (0, 0);
        }
        running += i64::from(dr);
        waiting += i64::from(dw);
        let point = (
            t,
            u32::try_from(running.max(0)).unwrap_or(u32::MAX),
            u32::try_from(waiting.max(0)).unwrap_or(u32::MAX),
        );
        if let Some((_, changes)) = out.last_mut() {
            match changes.last_mut() {
                Some(last) if last.0 == t => *last = point,
                _ => changes.push(point),
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::trace_of;

    /// 2025-11-29 08:00:00 UTC, ns.
    const T0: i64 = 1_764_403_200_000_000_000;
    const MS: i64 = 1_000_000;

    #[test]
    fn a_disaggregated_pairs_load_follows_each_request_from_its_prefill_instance_to_its_decode_instance() {
        // r1 arrives at 0 on p, scheduled at 10, its KV moved 30-40, then decodes on d until 100.
        // r2 arrives at 20 on p, waits until 40 (r1's transfer over), its transfer ends at 60, decodes on d to 80.
        let t = trace_of(
            r#"{"kind":"request","request_id":"r1","source":"p","decode_source":"d","arrival_ns":1764403200000000000,"scheduled_ns":1764403200010000000,"first_token_ns":1764403200045000000,"finished_ns":1764403200100000000}
{"kind":"stage","request_id":"r1","stage":"kv_transfer","start_ns":1764403200030000000,"end_ns":1764403200040000000}
{"kind":"request","request_id":"r2","source":"p","decode_source":"d","arrival_ns":1764403200020000000,"scheduled_ns":1764403200040000000,"first_token_ns":1764403200065000000,"finished_ns":1764403200080000000}
{"kind":"stage","request_id":"r2","stage":"kv_transfer","start_ns":1764403200055000000,"end_ns":1764403200060000000}
"#,
        );
        let strip = LoadStrip::of(&t).unwrap_or_else(|| panic!("two instances"));
        let names: Vec<(&str, InstanceRole, Basis)> = strip
            .rows
            .iter()
            .map(|r| (t.label(r.source).unwrap_or(""), r.role, r.basis))
            .collect();
        assert_eq!(
            names,
            [
                ("p", InstanceRole::Prefill, Basis::Requests),
                ("d", InstanceRole::Decode, Basis::Requests)
            ]
        );
        // p: r1 waits 0-10, runs 10-40; r2 waits 20-40, runs 40-60. At 40 r1 leaves as r2 starts: one running.
        let at = |ms: i64, r: u32, w: u32| (T0 + ms * MS, r, w);
        assert_eq!(
            strip.rows[0].changes,
            [at(0, 0, 1), at(10, 1, 0), at(20, 1, 1), at(40, 1, 0), at(60, 0, 0)]
        );
        // d: r1 from 40 to 100, r2 from 60 to 80.
        assert_eq!(
            strip.rows[1].changes,
            [at(40, 1, 0), at(60, 2, 0), at(80, 1, 0), at(100, 0, 0)]
        );
        // The scale: two requests at once (p at 20-40: one running, one waiting; d at 60-80: two running).
        assert_eq!(strip.max, 2);
        // Ten columns of 10 ms from 0: p's largest counts in each, d's none before 40.
        let vp = Viewport::fit(T0, T0 + 100 * MS, 10.0);
        let p = strip.rows[0].columns(&vp, 10);
        assert_eq!(&p[..3], [Some((0, 1)), Some((1, 0)), Some((1, 1))]);
        let d = strip.rows[1].columns(&vp, 10);
        assert_eq!(&d[..5], [None, None, None, None, Some((1, 0))]);
        assert_eq!(d[6], Some((2, 0)));
    }

    #[test]
    fn ranks_read_from_their_counters_and_a_single_instance_has_no_strip() {
        // engine-000 queues 5 at 10 s; engine-001 reads idle at 0 s and then says nothing (vLLM's idle engine).
        let t = trace_of(
            r#"{"kind":"sample","source":"engine-000","time_ns":1764403200000000000,"num_running":2,"num_waiting":0}
{"kind":"sample","source":"engine-000","time_ns":1764403210000000000,"num_running":4,"num_waiting":5}
{"kind":"sample","source":"engine-001","time_ns":1764403200000000000,"num_running":0,"num_waiting":0}
"#,
        );
        let strip = LoadStrip::of(&t).unwrap_or_else(|| panic!("two ranks"));
        assert_eq!(strip.max, 9);
        assert_eq!(strip.rows[0].basis, Basis::Samples);
        // A column at 15 s: engine-000 holds its 10 s reading, engine-001 its idle one.
        let vp = Viewport::fit(T0 + 15_000 * MS, T0 + 16_000 * MS, 1.0);
        assert_eq!(strip.rows[0].columns(&vp, 1), [Some((4, 5))]);
        assert_eq!(strip.rows[1].columns(&vp, 1), [Some((0, 0))]);
        let one = trace_of(
            r#"{"kind":"sample","source":"engine-000","time_ns":1764403200000000000,"num_running":2,"num_waiting":0}
"#,
        );
        assert!(LoadStrip::of(&one).is_none());
    }
}
