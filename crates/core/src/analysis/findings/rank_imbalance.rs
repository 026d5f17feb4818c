//! Rank imbalance: requests waiting on one instance of a server (a data-parallel rank: vLLM's `Engine 001:` lines,
//! one source each) while another instance of the same server ran none, reading after reading. The load was not
//! spread: the waiting requests had an idle engine beside them.
//!
//! An instance's state between two of its readings is its last reading: vLLM logs an idle engine's line at DEBUG
//! (`LoggingStatLogger.log`: nothing to report in this interval and the last), so a starved rank says "Running: 0
//! reqs, Waiting: 0 reqs" once and then falls silent; its silence after that reading is idleness, not a gap.

use rustc_hash::FxHashMap as HashMap;

use super::words::range;
use super::{Context, Detector, Finding, Kind, Severity};
use crate::trace::Trace;

/// Readings in a row of an instance with requests waiting beside an idle one that make an episode: one reading is
/// a moment (a burst the balancer had not spread yet), not a condition.
pub const MIN_READINGS: usize = 2;

/// A peer's reading this long after an instance's one still describes the same moment (the per-rank lines of one
/// stats call share their second).
const SAME_MOMENT_NS: i64 = 1_000_000_000;

/// The detector of [`Kind::RankImbalance`].
pub(super) struct RankImbalance;

/// The instances of each server that have samples, each with its sample rows: the part of a source's name before a
/// `/` names its server (`vllm-b/engine-001`, as a compose log's service prefixes it); a source without one is of
/// the trace's one server.
fn servers(trace: &Trace) -> Vec<Vec<(u32, std::ops::Range<usize>)>> {
    let sa = &trace.samples;
    let mut by_server: HashMap<&str, Vec<(u32, std::ops::Range<usize>)>> = HashMap::default();
    let mut order: Vec<&str> = Vec::new();
    let mut start = 0;
    for i in 1..=sa.len() {
        if i < sa.len() && sa.source[i] == sa.source[start] {
            continue;
        }
        let source = sa.source[start];
        let name = trace.label(source).unwrap_or("");
        let server = name.rsplit_once('/').map_or("", |(s, _)| s);
        if !by_server.contains_key(server) {
            order.push(server);
        }
        by_server.entry(server).or_default().push((source, start..i));
        start = i;
    }
    order
        .into_iter()
        .filter_map(|s| by_server.remove(s))
        .filter(|instances| instances.len() > 1)
        .collect()
}

/// True when the last reading of `rows` at `t` (or within [`SAME_MOMENT_NS`] after it) says nothing ran or waited.
fn idle_at(trace: &Trace, rows: &std::ops::Range<usize>, t: i64) -> bool {
    let sa = &trace.samples;
    let times = &sa.time_ns[rows.clone()];
    let k = times.partition_point(|&x| x <= t + SAME_MOMENT_NS);
    k.checked_sub(1).is_some_and(|k| {
        let row = rows.start + k;
        sa.num_running[row] == Some(0) && sa.num_waiting[row] == Some(0)
    })
}

/// An episode in the making: the busy instance's rows, its peak queue, the idle peers.
struct Episode {
    first: usize,
    last: usize,
    readings: usize,
    peak: u32,
    idle: Vec<u32>,
}

impl Detector for RankImbalance {
    fn kind(&self) -> Kind {
        Kind::RankImbalance
    }

    /// For each instance of a server with others beside it: each run of [`MIN_READINGS`] or more readings with
    /// requests waiting while another instance of the server was idle (its last reading: nothing running, nothing
    /// waiting) is one finding naming both, the peak queue and how long it lasted.
    fn detect(&self, cx: &Context<'_>) -> Vec<Finding> {
        let trace = cx.trace;
        let sa = &trace.samples;
        let mut out = Vec::new();
        for instances in servers(trace) {
            for (source, rows) in &instances {
                let mut episode: Option<Episode> = None;
                for row in rows.clone().chain(std::iter::once(usize::MAX)) {
                    let waiting = if row == usize::MAX {
                        0
                    } else {
                        sa.num_waiting[row].unwrap_or(0)
                    };
                    let idle: Vec<u32> = if waiting > 0 {
                        instances
                            .iter()
                            .filter(|(other, other_rows)| {
                                other != source && idle_at(trace, other_rows, sa.time_ns[row])
                            })
                            .map(|&(other, _)| other)
                            .collect()
                    } else {
                        Vec::new()
                    };
                    if idle.is_empty() {
                        if let Some(e) = episode.take()
                            && e.readings >= MIN_READINGS
                        {
                            out.push(finding(trace, *source, &e));
                        }
                        continue;
                    }
                    let e = episode.get_or_insert(Episode {
                        first: row,
                        last: row,
                        readings: 0,
                        peak: 0,
                        idle: Vec::new(),
                    });
                    e.last = row;
                    e.readings += 1;
                    e.peak = e.peak.max(waiting);
                    for peer in idle {
                        if !e.idle.contains(&peer) {
                            e.idle.push(peer);
                        }
                    }
                }
            }
        }
        out
    }
}

/// The finding of one episode of `source`.
fn finding(trace: &Trace, source: u32, e: &Episode) -> Finding {
    let sa = &trace.samples;
    let name = |s: u32| trace.label(s).unwrap_or("engine").to_owned();
    // The episode covers the intervals its readings report: from the start of the first one.
    let from_ns = sa.time_ns[e.first] - sa.interval_ns[e.first].unwrap_or(0).max(0);
    let to_ns = sa.time_ns[e.last];
    let idle: Vec<String> = e.idle.iter().map(|&s| name(s)).collect();
    let (one, verb) = if idle.len() == 1 { ("", "was") } else { ("s", "were") };
    let summary = format!(
        "{} had requests waiting (up to {}) in {} readings over {:.0} s while instance{one} {} of the same server {verb} \
         idle (nothing running or waiting): the load was not spread over its ranks",
        name(source),
        e.peak,
        e.readings,
        (to_ns - from_ns) as f64 / 1e9,
        idle.join(", "),
    );
    let (from_ns, to_ns) = range(from_ns, to_ns);
    Finding {
        kind: Kind::RankImbalance,
        severity: Severity::Warning,
        summary,
        from_ns,
        to_ns,
        requests: Vec::new(),
        steps: Vec::new(),
        tokens: Vec::new(),
    }
}
