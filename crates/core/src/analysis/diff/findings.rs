//! The findings of two traces matched: gone, new, eased, worsened, in both.

use std::collections::HashMap;

use serde::Serialize;

use super::*;
use crate::analysis::findings::{Finding, Kind};

/// The findings of A and B matched. A finding of A and one of B are the same when they are of one kind and:
/// - for SLO violations, of the same objective (the detector makes one finding per objective);
/// - else name a request in common (A's request paired with B's, see [`pair_requests`]);
/// - else, when either names no request (a saturation without preemptions, an overload), their time ranges
///   overlap on A's clock (see [`offset_ns`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FindingsDiff {
    /// Indexes into A's findings found in A only: gone in B.
    pub only_a: Vec<usize>,
    /// Indexes into B's findings found in B only: new in B.
    pub only_b: Vec<usize>,
    /// Pairs of indexes (A, B) of the same finding in both.
    pub both: Vec<(usize, usize)>,
}

/// The objective an SLO-violation finding is about, which its sentence names ("missed the TTFT objective"); `None`
/// for other kinds.
fn objective(f: &Finding) -> Option<&'static str> {
    (f.kind == Kind::SloViolations).then(|| {
        ["TTFT", "TPOT"]
            .into_iter()
            .find(|o| f.summary.contains(&format!("{o} objective")))
            .unwrap_or("")
    })
}

/// How a finding found in both traces changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SeverityChange {
    /// Less severe in B (critical in A, a warning in B).
    Eased,
    /// More severe in B.
    Worsened,
    /// As severe.
    Same,
}

impl SeverityChange {
    /// How `b` compares with `a`.
    pub fn of(a: &Finding, b: &Finding) -> Self {
        // `Critical` sorts first: a greater severity in B is a milder one.
        match b.severity.cmp(&a.severity) {
            std::cmp::Ordering::Greater => SeverityChange::Eased,
            std::cmp::Ordering::Less => SeverityChange::Worsened,
            std::cmp::Ordering::Equal => SeverityChange::Same,
        }
    }

    /// The word for it.
    pub fn name(self) -> &'static str {
        match self {
            SeverityChange::Eased => "eased",
            SeverityChange::Worsened => "worse",
            SeverityChange::Same => "both",
        }
    }
}

/// Matches the findings of A and B, each at most once, in A's order. `pairing` translates A's requests to B's;
/// `offset_ns` is B's clock minus A's. Indexes keep it linear in the findings and the requests they name.
pub fn match_findings(fa: &[Finding], fb: &[Finding], pairing: &Pairing, offset_ns: i64) -> FindingsDiff {
    let twin: HashMap<u32, u32> = pairing.pairs.iter().copied().collect();
    let mut by_request: HashMap<(Kind, u32), Vec<usize>> = HashMap::new();
    let mut by_objective: HashMap<(Kind, &str), Vec<usize>> = HashMap::new();
    let mut by_kind: HashMap<Kind, Vec<usize>> = HashMap::new();
    for (j, f) in fb.iter().enumerate() {
        match objective(f) {
            Some(o) => by_objective.entry((f.kind, o)).or_default().push(j),
            None => {
                for &r in &f.requests {
                    by_request.entry((f.kind, r)).or_default().push(j);
                }
            }
        }
        by_kind.entry(f.kind).or_default().push(j);
    }
    let mut taken = vec![false; fb.len()];
    let free = |list: Option<&Vec<usize>>, taken: &[bool]| list.and_then(|l| l.iter().copied().find(|&j| !taken[j]));
    let overlaps = |f: &Finding, g: &Finding| {
        let (from, to) = (g.from_ns.saturating_sub(offset_ns), g.to_ns.saturating_sub(offset_ns));
        f.from_ns < to && from < f.to_ns
    };
    let mut out = FindingsDiff::default();
    for (i, f) in fa.iter().enumerate() {
        let found = match objective(f) {
            Some(o) => free(by_objective.get(&(f.kind, o)), &taken),
            None => f
                .requests
                .iter()
                .filter_map(|r| twin.get(r))
                .find_map(|&rb| free(by_request.get(&(f.kind, rb)), &taken))
                .or_else(|| {
                    by_kind.get(&f.kind).and_then(|list| {
                        list.iter().copied().find(|&j| {
                            !taken[j] && (f.requests.is_empty() || fb[j].requests.is_empty()) && overlaps(f, &fb[j])
                        })
                    })
                }),
        };
        match found {
            Some(j) => {
                taken[j] = true;
                out.both.push((i, j));
            }
            None => out.only_a.push(i),
        }
    }
    out.only_b = (0..fb.len()).filter(|&j| !taken[j]).collect();
    out
}
