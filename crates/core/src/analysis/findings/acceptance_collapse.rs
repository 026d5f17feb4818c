//! Acceptance collapse: speculative decoding whose drafts stopped being accepted, for some requests or for a stretch
//! of time, so that each verify step emitted about one token while still paying for its drafts.

use super::words::{names, row_u32};
use super::{Context, Detector, Finding, Kind, MAX_LISTED_REQUESTS, Severity, Thresholds};
use crate::analysis::metrics::median;
use crate::analysis::summary::Slo;
use crate::trace::Trace;

/// Stretches of time an instance's steps are judged over, ns: long enough to hold a few hundred verify steps of a
/// busy engine, short enough that a collapse of a minute shows.
const WINDOW_NS: i64 = 10_000_000_000;

/// The detector of [`Kind::AcceptanceCollapse`].
pub(super) struct AcceptanceCollapse;

impl Detector for AcceptanceCollapse {
    fn kind(&self) -> Kind {
        Kind::AcceptanceCollapse
    }

    /// Requests whose drafts were accepted at `collapse_factor` × the run's rate or less (the run's: all requests'
    /// accepted over drafted), with `collapse_min_drafts` drafts at least, as one finding with their TPOT against the
    /// others'; and, on an instance whose steps say their drafts, each stretch of 10 s windows where the same holds of
    /// the instance's steps, as one finding per stretch.
    fn detect(&self, cx: &Context<'_>) -> Vec<Finding> {
        let mut out = Vec::new();
        out.extend(collapsed_requests(cx));
        out.extend(collapsed_windows(cx));
        out
    }
}

/// [`Kind::AcceptanceCollapse`]'s findings alone, unsorted.
pub fn acceptance_collapse(trace: &Trace, th: &Thresholds) -> Vec<Finding> {
    AcceptanceCollapse.detect(&Context::new(trace, &Slo::default(), th))
}

fn rate(accepted: u64, drafted: u64) -> f64 {
    accepted as f64 / drafted as f64
}

fn collapsed_requests(cx: &Context<'_>) -> Option<Finding> {
    let (trace, th) = (cx.trace, cx.th);
    let q = &trace.requests;
    let with: Vec<(u32, u64, u64)> = (0..row_u32(trace.request_count()))
        .filter_map(|r| {
            let (d, a) = (
                q.spec_drafted_tokens.at(r as usize)?,
                q.spec_accepted_tokens.at(r as usize)?,
            );
            (d > 0).then_some((r, u64::from(d), u64::from(a)))
        })
        .collect();
    let (drafted, accepted) = with.iter().fold((0, 0), |(d, a), &(_, dr, ac)| (d + dr, a + ac));
    if drafted == 0 || accepted == 0 {
        return None;
    }
    let run = rate(accepted, drafted);
    let mut low: Vec<(u32, u64, u64)> = with
        .iter()
        .copied()
        .filter(|&(_, d, a)| d >= u64::from(th.collapse_min_drafts) && rate(a, d) <= th.collapse_factor * run)
        .collect();
    if low.is_empty() {
        return None;
    }
    low.sort_by(|x, y| rate(x.2, x.1).total_cmp(&rate(y.2, y.1)).then(x.0.cmp(&y.0)));
    let rows: Vec<u32> = low.iter().map(|l| l.0).collect();
    let tpot = |r: u32| cx.metrics(r).tpot_ns;
    let mut theirs: Vec<i64> = rows.iter().filter_map(|&r| tpot(r)).map(|t| t as i64).collect();
    let mut others: Vec<i64> = with
        .iter()
        .filter(|w| !rows.contains(&w.0))
        .filter_map(|w| tpot(w.0))
        .map(|t| t as i64)
        .collect();
    let (subject, d, a) = low[0];
    let mut summary = if low.len() == 1 {
        format!(
            "{}'s drafts were accepted {:.0} % of the time ({a} of {d}) against {:.0} % over the run",
            trace.request_id(subject),
            rate(a, d) * 100.0,
            run * 100.0
        )
    } else {
        let (ld, la) = low.iter().fold((0, 0), |(x, y), l| (x + l.1, y + l.2));
        format!(
            "{} requests' drafts were accepted {:.0} % of the time ({la} of {ld}) against {:.0} % over the run: {}; \
             the lowest, {}, {:.0} % ({a} of {d})",
            low.len(),
            rate(la, ld) * 100.0,
            run * 100.0,
            names(trace, &rows),
            trace.request_id(subject),
            rate(a, d) * 100.0
        )
    };
    let slower = match (median(&mut theirs), median(&mut others)) {
        (Some(t), Some(o)) if o > 0 => {
            summary.push_str(&format!(
                "; their TPOT {:.1} ms (median) against {:.1} ms for the other requests",
                t as f64 / 1e6,
                o as f64 / 1e6
            ));
            Some(t as f64 / o as f64)
        }
        _ => None,
    };
    let (from_ns, to_ns) = cx.span_of(&rows);
    let mut requests = rows;
    requests.truncate(MAX_LISTED_REQUESTS);
    Some(Finding {
        kind: Kind::AcceptanceCollapse,
        // A collapse that cost the requests half their speed or more is one a user felt.
        severity: if slower.is_some_and(|s| s >= 1.5) {
            Severity::Warning
        } else {
            Severity::Info
        },
        summary,
        from_ns,
        to_ns,
        requests,
        steps: Vec::new(),
        tokens: Vec::new(),
    })
}

fn collapsed_windows(cx: &Context<'_>) -> Vec<Finding> {
    let (trace, th) = (cx.trace, cx.th);
    let it = &trace.iterations;
    let mut out = Vec::new();
    for (&source, rows) in cx.source_rows() {
        let counted: Vec<usize> = rows
            .clone()
            .filter(|&i| it.spec_drafted_tokens.at(i).is_some_and(|d| d > 0) && it.spec_accepted_tokens.at(i).is_some())
            .collect();
        let (drafted, accepted) = counted.iter().fold((0u64, 0u64), |(d, a), &i| {
            (
                d + u64::from(it.spec_drafted_tokens.at(i).unwrap_or(0)),
                a + u64::from(it.spec_accepted_tokens.at(i).unwrap_or(0)),
            )
        });
        if drafted == 0 || accepted == 0 {
            continue;
        }
        let run = rate(accepted, drafted);
        let Some(&first) = counted.first() else { continue };
        let origin = it.start_ns[first];
        // Each window's drafts and accepted drafts, then the stretches of low windows.
        let mut windows: std::collections::BTreeMap<i64, (u64, u64, Vec<u32>)> = std::collections::BTreeMap::new();
        for &i in &counted {
            let w = (it.start_ns[i] - origin).div_euclid(WINDOW_NS);
            let e = windows.entry(w).or_default();
            e.0 += u64::from(it.spec_drafted_tokens.at(i).unwrap_or(0));
            e.1 += u64::from(it.spec_accepted_tokens.at(i).unwrap_or(0));
            e.2.push(row_u32(i));
        }
        let low = |d: u64, a: u64| d >= u64::from(th.collapse_min_drafts) && rate(a, d) <= th.collapse_factor * run;
        let mut stretch: Option<(i64, i64, u64, u64, Vec<u32>)> = None;
        let flush = |s: Option<(i64, i64, u64, u64, Vec<u32>)>, out: &mut Vec<Finding>| {
            let Some((w0, w1, d, a, steps)) = s else { return };
            // Not the whole run: a run whose every window is low has no collapse, only a low rate.
            if w0 == *windows.keys().next().unwrap_or(&0) && w1 == *windows.keys().last().unwrap_or(&0) {
                return;
            }
            let on = trace.label(source).map_or(String::new(), |s| format!(" on {s}"));
            let from_ns = origin + w0 * WINDOW_NS;
            let to_ns = origin + (w1 + 1) * WINDOW_NS;
            out.push(Finding {
                kind: Kind::AcceptanceCollapse,
                severity: Severity::Warning,
                summary: format!(
                    "drafts{on} were accepted {:.0} % of the time ({a} of {d}) from {:.1} s to {:.1} s against {:.0} % \
                     over the run, in {} steps that still computed every draft",
                    rate(a, d) * 100.0,
                    (from_ns - cx.start_ns()) as f64 / 1e9,
                    (to_ns - cx.start_ns()) as f64 / 1e9,
                    run * 100.0,
                    steps.len()
                ),
                from_ns,
                to_ns,
                requests: Vec::new(),
                steps,
                tokens: Vec::new(),
            });
        };
        for (&w, (d, a, steps)) in &windows {
            if low(*d, *a) {
                stretch = Some(match stretch.take() {
                    Some((w0, w1, sd, sa, mut ss)) if w1 + 1 == w => {
                        ss.extend(steps);
                        (w0, w, sd + d, sa + a, ss)
                    }
                    previous => {
                        flush(previous, &mut out);
                        (w, w, *d, *a, steps.clone())
                    }
                });
            } else {
                flush(stretch.take(), &mut out);
            }
        }
        flush(stretch.take(), &mut out);
    }
    out
}
