//! Which request of one trace is which of the other: by id, else by arrival and prompt length.

use std::collections::HashMap;

use serde::Serialize;

use crate::trace::Trace;

/// Two requests whose arrivals differ by more than this (from each trace's start) are not the same request when
/// paired by arrival and prompt length. Recording the same prompt set twice at the same seeded rate starts each
/// request within a few ms of its twin; 100 ms leaves room for a client's jitter and stays far below the gaps
/// between requests of different prompt lengths in ordinary traffic.
pub const ARRIVAL_TOLERANCE_NS: i64 = 100_000_000;

/// How requests were paired.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PairedBy {
    /// The same `request_id`.
    RequestId,
    /// The same prompt (its hash), the k-th request of a prompt in A with the k-th in B.
    Prompt,
    /// The same offset from the trace's start (within [`ARRIVAL_TOLERANCE_NS`]) and the same prompt length.
    ArrivalAndPrompt,
    /// The traces share too few requests to pair them.
    Unpaired,
}

impl PairedBy {
    /// Words for the output.
    pub fn describe(self) -> &'static str {
        match self {
            PairedBy::RequestId => "paired by request_id",
            PairedBy::Prompt => "paired by prompt",
            PairedBy::ArrivalAndPrompt => "paired by arrival and prompt length",
            PairedBy::Unpaired => {
                "not paired: fewer than half of the smaller trace's requests match by id or by arrival and prompt"
            }
        }
    }
}

/// The requests of A paired with those of B.
#[derive(Debug, Clone, PartialEq)]
pub struct Pairing {
    /// How.
    pub by: PairedBy,
    /// (row in A, row in B), in A's arrival order.
    pub pairs: Vec<(u32, u32)>,
    /// Requests of A with no twin in B.
    pub only_a: usize,
    /// Requests of B with no twin in A.
    pub only_b: usize,
}

fn rows(trace: &Trace) -> impl Iterator<Item = u32> {
    0..u32::try_from(trace.request_count()).unwrap_or(u32::MAX)
}

fn by_id(a: &Trace, b: &Trace) -> Vec<(u32, u32)> {
    rows(a)
        .filter_map(|ra| b.request_row(a.request_id(ra)).map(|rb| (ra, rb)))
        .collect()
}

/// True when most id-pairs whose prompt lengths are both known agree on them: benchmarks that number their requests
/// 0..N share every id across unrelated runs.
fn same_prompts(a: &Trace, b: &Trace, pairs: &[(u32, u32)]) -> bool {
    let (mut known, mut equal) = (0usize, 0usize);
    for &(ra, rb) in pairs {
        if let (Some(x), Some(y)) = (
            a.requests.input_tokens.at(ra as usize),
            b.requests.input_tokens.at(rb as usize),
        ) {
            known += 1;
            equal += usize::from(x == y);
        }
    }
    equal * 2 >= known
}

/// The first arrival: the origin of arrival offsets (steps logged before it, a warm-up, do not shift them).
fn first_arrival(trace: &Trace) -> i64 {
    trace.requests.arrival_ns.first().copied().unwrap_or(0)
}

fn by_arrival(a: &Trace, b: &Trace) -> Vec<(u32, u32)> {
    let (oa, ob) = (first_arrival(a), first_arrival(b));
    // B's requests with a known prompt length, by length, ordered by arrival offset; a twin taken leaves its set, so
    // a burst of equal prompts costs a logarithm per request, not a walk over those already taken.
    let mut twins: HashMap<u32, std::collections::BTreeSet<(i64, u32)>> = HashMap::new();
    for rb in rows(b) {
        let i = rb as usize;
        if let Some(len) = b.requests.input_tokens.at(i) {
            twins
                .entry(len)
                .or_default()
                .insert((b.requests.arrival_ns[i].saturating_sub(ob), rb));
        }
    }
    let mut pairs = Vec::new();
    for ra in rows(a) {
        let i = ra as usize;
        let Some(set) = a.requests.input_tokens.at(i).and_then(|len| twins.get_mut(&len)) else {
            continue;
        };
        let at = a.requests.arrival_ns[i].saturating_sub(oa);
        let after = set.range((at, 0)..).next().copied();
        let before = set.range(..(at, 0)).next_back().copied();
        let nearest = [before, after]
            .into_iter()
            .flatten()
            .filter(|&(t, _)| t.abs_diff(at) <= ARRIVAL_TOLERANCE_NS.unsigned_abs())
            .min_by_key(|&(t, _)| t.abs_diff(at));
        if let Some(entry) = nearest {
            set.remove(&entry);
            pairs.push((ra, entry.1));
        }
    }
    pairs
}

/// Pairs the requests of A and B: by id when at least half of the smaller trace's ids are in both and those pairs
/// mostly agree on their prompt lengths, else by arrival and prompt length when that pairs at least half; else not
/// at all.
pub fn pair_requests(a: &Trace, b: &Trace) -> Pairing {
    let smaller = a.request_count().min(b.request_count());
    let enough = |pairs: &[(u32, u32)]| smaller > 0 && pairs.len() * 2 >= smaller;
    let (by, pairs) = {
        let ids = by_id(a, b);
        if enough(&ids) && same_prompts(a, b, &ids) {
            (PairedBy::RequestId, ids)
        } else {
            let arrivals = by_arrival(a, b);
            if enough(&arrivals) {
                (PairedBy::ArrivalAndPrompt, arrivals)
            } else {
                (PairedBy::Unpaired, Vec::new())
            }
        }
    };
    Pairing {
        by,
        only_a: a.request_count() - pairs.len(),
        only_b: b.request_count() - pairs.len(),
        pairs,
    }
}

/// B's clock minus A's: the median of the paired requests' arrival differences (a replay keeps its original's
/// clock, a re-run of a benchmark starts later, a replay of a window starts where the window does); without pairs,
/// the difference of the first arrivals.
pub fn offset_ns(a: &Trace, b: &Trace, pairing: &Pairing) -> i64 {
    let mut gaps: Vec<i64> = pairing
        .pairs
        .iter()
        .map(|&(ra, rb)| b.requests.arrival_ns[rb as usize].saturating_sub(a.requests.arrival_ns[ra as usize]))
        .collect();
    crate::analysis::metrics::median(&mut gaps).unwrap_or_else(|| first_arrival(b).saturating_sub(first_arrival(a)))
}
