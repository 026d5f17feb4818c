//! Decode interrupted by prefill: a decode token that waited many times its median while other requests'
//! prompts were computed.

use std::fmt::Write as _;

use super::context::{PrefillIndex, add_to, waited_steps};
use super::thresholds::{STALL_ALONE_SHARE, STALL_PREFILL_SHARE};
use super::words::{duration, multiple, names, range, row_u32};
use super::{
    After, CRITICAL_DELAY_MS, Context, Detector, Finding, Kind, MAX_LISTED_REQUESTS, RequestTokens, Severity,
    Thresholds, Visitor,
};
use crate::analysis::metrics::ms;
use crate::analysis::stats::thousands;
use crate::analysis::summary::Slo;
use crate::trace::emission::gaps_of;
use crate::trace::{NULL_U32, Trace};

/// Prefilling requests named in a decode-interrupted sentence; the others are counted.
const MAX_NAMED_CULPRITS: usize = 5;

/// One stalled token.
struct Stall {
    victim: u32,
    /// Its token's place among the victim's tokens until the pass is over, its row after.
    token: usize,
    /// Its token's `index`.
    index: u32,
    itl_ns: i64,
    median_ns: i64,
    source: u32,
    /// Steps in the stall's window that carried other requests' prefill, ascending.
    steps: Vec<u32>,
    from_ns: i64,
    to_ns: i64,
}

/// The detector of [`Kind::DecodeInterrupted`].
pub(super) struct DecodeInterrupted;

impl Detector for DecodeInterrupted {
    fn kind(&self) -> Kind {
        Kind::DecodeInterrupted
    }

    /// Decode tokens whose ITL exceeds `itl_factor` × their request's median while another request's outsized prompt
    /// was computed in the token's step or the steps it waited through (its instance's steps that started after the
    /// previous token): a prompt whose prefill took `outsized_prefill_factor` × the instance's ordinary one (the
    /// median over its requests) or more, in time, so on any hardware. Ordinary prompts batched together (an
    /// overloaded engine without chunked prefill) are a condition, the chronic-interference finding's, not an
    /// incident. An instance with too few requests to know an ordinary prefill falls back to a count: other requests'
    /// prompt tokens in those steps, `large_prefill_tokens` or more, or a stall of `stall_ms` or more owed mostly
    /// (`STALL_PREFILL_SHARE` of its time) to other requests' prefill, whatever the prompt's size: a small trace, a
    /// slow server. Stalls whose prefill steps overlap or follow
    /// each other form one finding per episode: the worst-stalled victim (longest ITL, then largest multiple of its
    /// median) is the subject, the other victims follow, then the prefilling requests (the culprits), most prompt
    /// tokens first.
    fn visitor<'c>(&self, cx: &'c Context<'c>) -> Option<Box<dyn Visitor<'c> + 'c>> {
        if cx.source_rows().is_empty() {
            return None;
        }
        Some(Box::new(Stalls {
            cx,
            stalls: Vec::new(),
            gaps: Vec::new(),
        }))
    }
}

/// The stalls found so far.
struct Stalls<'c> {
    cx: &'c Context<'c>,
    stalls: Vec<Stall>,
    gaps: Vec<i64>,
}

impl<'c> Visitor<'c> for Stalls<'c> {
    fn see(&mut self, rt: &RequestTokens<'_>) {
        let (cx, r) = (self.cx, rt.request);
        let (trace, th) = (cx.trace, cx.th);
        if rt.len() < 3 {
            return;
        }
        let source = trace.decode_source(r);
        let Some(rows) = cx.source_rows().get(&source) else {
            return;
        };
        let prefills = cx.prefills();
        let times = cx.prefill_times();
        let it = &trace.iterations;
        let gaps = &mut self.gaps;
        gaps.clear();
        gaps.extend(gaps_of(rt.index, rt.iteration, rt.emitted_ns).map(|(_, gap)| gap));
        if gaps.len() < 2 {
            return;
        }
        let Some(median_ns) = crate::analysis::metrics::median(gaps) else {
            return;
        };
        if median_ns <= 0 {
            return;
        }
        #[expect(clippy::cast_precision_loss, reason = "ns far below 2^53")]
        let limit = th.itl_factor * median_ns as f64;
        let starts = &it.start_ns[rows.clone()];
        for k in 1..rt.len() {
            if rt.index[k] != rt.index[k - 1] + 1 {
                continue;
            }
            let (prev, emitted) = (rt.emitted_ns[k - 1], rt.emitted_ns[k]);
            let itl = emitted - prev;
            #[expect(clippy::cast_precision_loss, reason = "ns far below 2^53")]
            if (itl as f64) <= limit {
                continue;
            }
            // The steps that started after the previous token, up to the token's own step (or its emission).
            let (window, _) = waited_steps(rows, starts, (prev, emitted), rt.iter_row[k]);
            let mut others = 0u64;
            let mut outsized = false;
            let mut steps = Vec::new();
            let mut prefill_ns = 0f64;
            let ordinary = times.ordinary(source);
            for row in window {
                let mut in_step = 0u64;
                for (q, n) in prefills.of(trace, row) {
                    if q != r {
                        in_step += u64::from(n);
                        #[expect(clippy::cast_precision_loss, reason = "ns far below 2^53")]
                        if let Some(o) = ordinary
                            && q != NULL_U32
                            && times.of(q) as f64 >= th.outsized_prefill_factor * o as f64
                        {
                            outsized = true;
                        }
                    }
                }
                if in_step > 0 {
                    others += in_step;
                    steps.push(row_u32(row));
                    prefill_ns += prefill_time_ns(trace, row, in_step);
                }
            }
            // Large in absolute terms and owed mostly to others' prefill: an interruption whatever the prompt's
            // size, where no ordinary prefill is known to rank it against (a small trace, a slow server). Where
            // one is, the relative yardstick decides: it keeps the stalls of heavy-tailed ordinary traffic on an
            // overloaded engine (a condition, chronic interference's) out of the incidents.
            #[expect(clippy::cast_precision_loss, reason = "ns far below 2^53")]
            let absolute = itl as f64 >= th.stall_ms * 1e6 && prefill_ns >= STALL_PREFILL_SHARE * itl as f64;
            // Many times the request's own pace and spent almost wholly behind prompts that had their steps to
            // themselves (no decode in them): an interruption on any hardware, whatever the stall's length.
            #[expect(clippy::cast_precision_loss, reason = "ns far below 2^53")]
            let alone = !steps.is_empty()
                && itl as f64 >= th.stall_factor * median_ns as f64
                && prefill_ns >= STALL_ALONE_SHARE * itl as f64
                && steps.iter().all(|&s| it.num_decode_tokens.at(s as usize) == Some(0));
            let decided = match ordinary {
                Some(_) => outsized,
                None => (others > 0 && others >= u64::from(th.large_prefill_tokens)) || absolute || alone,
            };
            if !decided {
                continue;
            }
            self.stalls.push(Stall {
                victim: r,
                token: k,
                index: rt.index[k],
                itl_ns: itl,
                median_ns,
                source,
                steps,
                from_ns: prev,
                to_ns: emitted,
            });
        }
    }

    fn finish(self: Box<Self>) -> After<'c> {
        let cx = self.cx;
        let trace = cx.trace;
        let prefills = cx.prefills();
        let mut stalls = self.stalls;
        for s in &mut stalls {
            s.token += cx.tokens.rows(s.victim).start;
        }
        // Episodes: stalls of one instance whose prefill steps overlap or follow each other (a prompt prefilled in
        // consecutive chunks stalls a decode once per chunk).
        stalls.sort_by_key(|s| (s.source, s.steps.first().copied(), s.from_ns, s.token));
        let mut out = Vec::new();
        let mut i = 0;
        while i < stalls.len() {
            let mut last_step = stalls[i].steps.last().copied().unwrap_or(0);
            let mut j = i + 1;
            while j < stalls.len()
                && stalls[j].source == stalls[i].source
                && stalls[j].steps.first().is_some_and(|&f| f <= last_step + 1)
            {
                last_step = last_step.max(stalls[j].steps.last().copied().unwrap_or(0));
                j += 1;
            }
            out.push(interrupted_finding(trace, prefills, &stalls[i..j]));
            i = j;
        }
        After::Findings(out)
    }
}

/// The time of step `row` owed to `others` prompt tokens of other requests: the step's time × their share of its
/// tokens (all of it when the step does not say how many tokens it computed).
#[expect(clippy::cast_precision_loss, reason = "ns and token counts far below 2^53")]
fn prefill_time_ns(trace: &Trace, row: usize, others: u64) -> f64 {
    let it = &trace.iterations;
    let span = (it.end_ns[row] - it.start_ns[row]).max(0) as f64;
    let total = it.num_prefill_tokens.at(row).map_or(0, u64::from) + it.num_decode_tokens.at(row).map_or(0, u64::from);
    if total == 0 {
        span
    } else {
        span * (others.min(total) as f64 / total as f64)
    }
}

/// [`Kind::DecodeInterrupted`]'s findings alone, unsorted.
pub fn decode_interrupted(trace: &Trace, th: &Thresholds) -> Vec<Finding> {
    DecodeInterrupted.detect(&Context::new(trace, &Slo::default(), th))
}

/// Who prefilled: the requests with a tenth of the tokens or more by name (up to [`MAX_NAMED_CULPRITS`]), the
/// rest as a count ("rag-24k, rag-6k-1, rag-6k-2, rag-6k-3 and rag-6k-4 with 5 smaller prompts").
fn culprit_phrase(trace: &Trace, culprits: &[(u32, u64)], total: u64) -> String {
    let major: Vec<u32> = culprits
        .iter()
        .filter(|c| c.0 != NULL_U32 && c.1 * 10 >= total)
        .map(|c| c.0)
        .take(MAX_NAMED_CULPRITS)
        .collect();
    if major.is_empty() {
        return "other requests".to_owned();
    }
    let names: Vec<&str> = major.iter().map(|&r| trace.request_id(r)).collect();
    let mut out = match names.split_last() {
        Some((last, [])) => (*last).to_owned(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    };
    let rest = culprits.len() - major.len();
    if rest > 0 {
        let _ = write!(out, " with {rest} smaller prompt{}", if rest == 1 { "" } else { "s" });
    }
    out
}

/// The finding of one episode of stalls.
#[expect(clippy::cast_precision_loss, reason = "ns far below 2^53")]
fn interrupted_finding(trace: &Trace, prefills: &PrefillIndex, episode: &[Stall]) -> Finding {
    let mut order: Vec<&Stall> = episode.iter().collect();
    order.sort_by(|a, b| {
        b.itl_ns
            .cmp(&a.itl_ns)
            .then(
                (i128::from(b.itl_ns) * i128::from(a.median_ns)).cmp(&(i128::from(a.itl_ns) * i128::from(b.median_ns))),
            )
            .then(a.token.cmp(&b.token))
    });
    let worst = order[0];
    let mut steps: Vec<u32> = episode.iter().flat_map(|s| s.steps.iter().copied()).collect();
    steps.sort_unstable();
    steps.dedup();
    // Victims, worst first (each once, at its worst stall).
    let mut victims: Vec<u32> = Vec::new();
    for s in &order {
        if !victims.contains(&s.victim) {
            victims.push(s.victim);
        }
    }
    // Culprits: every request prefilling in the episode's steps, other than the subject, most tokens first.
    let mut culprits: Vec<(u32, u64)> = Vec::new();
    for &row in &steps {
        for (q, n) in prefills.of(trace, row as usize) {
            if q != worst.victim {
                add_to(&mut culprits, q, u64::from(n));
            }
        }
    }
    culprits.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let total: u64 = culprits.iter().map(|c| c.1).sum();
    let named: Vec<u32> = culprits.iter().map(|c| c.0).filter(|&q| q != NULL_U32).collect();
    let who = culprit_phrase(trace, &culprits, total);
    let mut summary = format!(
        "{}'s token {} waited {}, {}× its median, while {who} prefilled {} prompt tokens in {} step{}",
        trace.request_id(worst.victim),
        worst.index,
        duration(worst.itl_ns),
        multiple(worst.itl_ns as f64 / worst.median_ns as f64),
        thousands(total),
        steps.len(),
        if steps.len() == 1 { "" } else { "s" },
    );
    if let Some(source) = trace.label(worst.source) {
        let _ = write!(summary, " on {source}");
    }
    // The counterfactual, in figures: what the token takes when nothing is prefilled in its way.
    let _ = write!(
        summary,
        ": without those prefills it would have taken about {}, its median",
        duration(worst.median_ns)
    );
    if victims.len() > 1 {
        let _ = write!(summary, "; {} stalled too", names(trace, &victims[1..]));
    }
    let mut requests = victims;
    for &q in &named {
        if !requests.contains(&q) {
            requests.push(q);
        }
    }
    requests.truncate(MAX_LISTED_REQUESTS);
    let mut tokens: Vec<usize> = episode.iter().map(|s| s.token).filter(|&t| t != worst.token).collect();
    tokens.sort_unstable();
    tokens.insert(0, worst.token);
    let (from_ns, to_ns) = range(
        episode.iter().map(|s| s.from_ns).min().unwrap_or(worst.from_ns),
        episode.iter().map(|s| s.to_ns).max().unwrap_or(worst.to_ns),
    );
    let max_ms = ms(worst.itl_ns);
    Finding {
        kind: Kind::DecodeInterrupted,
        severity: if max_ms >= CRITICAL_DELAY_MS {
            Severity::Critical
        } else {
            Severity::Warning
        },
        summary,
        from_ns,
        to_ns,
        requests,
        steps,
        tokens,
    }
}
