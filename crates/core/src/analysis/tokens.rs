//! One request under the microscope: for each output token, its latency split into the time it waited to be
//! scheduled, the compute of the step that produced it and the output delay after it, the load of that step (batch
//! size, prefill tokens of other requests, who was prefilling), and what the model chose between: probability, rank
//! (or "beyond the top k" when the trace cannot say), the top-k entropy and the candidates.

use crate::trace::{Flag, NULL_U32, OwnedCandidate, StageKind, Trace, opt_f64, opt_u32};

/// The latency of one token, split as the format defines it. All in ns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Latency {
    /// emitted_i − emitted_{i−1} (the first token: TTFT).
    pub total_ns: i64,
    /// From the previous token to the start of this token's step; `None` without iteration data.
    pub schedule_wait_ns: Option<i64>,
    /// The step's span.
    pub compute_ns: Option<i64>,
    /// From the step's end to the token's emission.
    pub output_ns: Option<i64>,
    /// In a joined trace: from the server producing the token to the client receiving it (network, detokenizer,
    /// proxy); `None` where the trace has only one side.
    pub delivery_ns: Option<i64>,
}

/// What else the engine did for a token: in the step that produced it, and in the steps it waited through since
/// the previous token (a prefill-only step runs ahead of every decode when chunked prefill is off).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StepLoad {
    /// The step's iteration row.
    pub iteration_row: Option<u32>,
    /// Requests in the batch.
    pub batch_size: Option<u32>,
    /// Prompt tokens of other requests computed in the step and in the steps waited through.
    pub others_prefill_tokens: u32,
    /// Other requests prefilling in the token's own step, with their tokens, most tokens first.
    pub prefills: Vec<(u32, u32)>,
    /// Other requests prefilling in the steps the token waited through, with their tokens, most first.
    pub waited_behind: Vec<(u32, u32)>,
}

/// The rank of a chosen token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rank {
    /// Its 1-based rank, as written or found among the candidates.
    Known(u32),
    /// Not among the `k` candidates written, and no `rank` given: only known to exceed k.
    BeyondTopK(u32),
    /// Neither a rank nor candidates.
    Unknown,
}

impl std::fmt::Display for Rank {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rank::Known(r) => write!(f, "{r}"),
            Rank::BeyondTopK(k) => write!(f, "> {k}"),
            Rank::Unknown => f.write_str("?"),
        }
    }
}

/// A token's choice.
#[derive(Debug, Clone, PartialEq)]
pub struct Choice {
    /// Probability of the chosen token (exp of its logprob).
    pub probability: Option<f64>,
    /// Its rank.
    pub rank: Rank,
    /// Entropy of the top-k candidates' probabilities, renormalised to sum to 1, in nats.
    pub entropy_nats: Option<f64>,
}

/// The first token row of the emission token row `t` belongs to (`trace::emission`): `t` itself unless it came
/// out together with the tokens before it.
pub fn emission_start(trace: &Trace, request: u32, t: usize) -> usize {
    let first = trace.tokens_of(request).start;
    let mut e = t;
    while !crate::trace::emission::starts_emission(&trace.tokens, first, e) {
        e -= 1;
    }
    e
}

/// Latency of token row `t` (a token of `request`): its emission's, the same for every token that came out with
/// it (a speculative verify step's tokens; `docs/SPECULATIVE.md`).
pub fn latency(trace: &Trace, request: u32, t: usize) -> Latency {
    let tokens = trace.tokens_of(request);
    // Each token's own way to the client; the rest is its emission's.
    let delivery_ns = crate::trace::opt_i64(trace.tokens.received_ns[t]).map(|r| r - trace.tokens.emitted_ns[t]);
    let t = emission_start(trace, request, t);
    let emitted = trace.tokens.emitted_ns[t];
    let prev = if t > tokens.start && trace.tokens.index[t] == trace.tokens.index[t - 1] + 1 {
        Some(trace.tokens.emitted_ns[t - 1])
    } else if t == tokens.start && trace.tokens.index[t] == 0 {
        // The first token waits from the request's arrival.
        Some(trace.requests.arrival_ns[request as usize])
    } else {
        None
    };
    let total_ns = prev.map_or(0, |p| emitted - p);
    let Some(it) = opt_u32(trace.tokens.iter_row[t]).map(|i| i as usize) else {
        return Latency {
            total_ns,
            schedule_wait_ns: None,
            compute_ns: None,
            output_ns: None,
            delivery_ns,
        };
    };
    let (start, end) = (trace.iterations.start_ns[it], trace.iterations.end_ns[it]);
    Latency {
        total_ns,
        schedule_wait_ns: prev.map(|p| (start - p).max(0)),
        compute_ns: Some(end - start),
        output_ns: Some((emitted - end).max(0)),
        delivery_ns,
    }
}

/// For every token of a request, the prefill chunks of other requests in its step and in the steps of its instance
/// it waited through since the previous token: one pass over the stages.
pub fn step_loads(trace: &Trace, request: u32) -> Vec<StepLoad> {
    let tokens = trace.tokens_of(request);
    let source = trace.decode_source(request);
    // For each token: its step, and the steps that ran between the previous token and its own step.
    let plan: Vec<(Option<u32>, std::ops::Range<usize>)> = tokens
        .clone()
        .map(|t| {
            let own = opt_u32(trace.tokens.iter_row[t]);
            let waited = match (own, t > tokens.start) {
                (Some(row), true) => {
                    let (prev, start) = (trace.tokens.emitted_ns[t - 1], trace.iterations.start_ns[row as usize]);
                    let rows = trace.iterations_overlapping(source, prev, start);
                    // Only steps wholly inside the wait (the previous token's own step ends before it).
                    let first = (rows.start..rows.end)
                        .find(|&i| trace.iterations.start_ns[i] >= prev)
                        .unwrap_or(rows.end);
                    first..rows.end.min(row as usize)
                }
                _ => 0..0,
            };
            (own, waited)
        })
        .collect();
    let mut by_row: rustc_hash::FxHashMap<u32, Vec<(u32, u32)>> = rustc_hash::FxHashMap::default();
    for (own, waited) in &plan {
        for r in own.iter().copied().chain(waited.clone().map(|i| i as u32)) {
            by_row.entry(r).or_default();
        }
    }
    for s in 0..trace.stages.len() {
        if trace.stages.kind[s] != StageKind::Prefill || trace.stages.request[s] == request {
            continue;
        }
        if let Some(list) = trace.stages.iter_row[s].and_then(|r| by_row.get_mut(&r)) {
            list.push((trace.stages.request[s], trace.stages.tokens[s].unwrap_or(0)));
        }
    }
    let sorted = |mut v: Vec<(u32, u32)>| {
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v
    };
    plan.into_iter()
        .map(|(own, waited)| {
            let prefills = sorted(own.and_then(|r| by_row.get(&r).cloned()).unwrap_or_default());
            let mut behind: Vec<(u32, u32)> = Vec::new();
            for i in waited {
                for &(r, n) in by_row.get(&(i as u32)).map_or(&[][..], Vec::as_slice) {
                    match behind.iter_mut().find(|(q, _)| *q == r) {
                        Some(e) => e.1 += n,
                        None => behind.push((r, n)),
                    }
                }
            }
            let waited_behind = sorted(behind);
            StepLoad {
                iteration_row: own,
                batch_size: own.and_then(|r| trace.iterations.num_reqs.at(r as usize)),
                others_prefill_tokens: prefills.iter().chain(&waited_behind).map(|p| p.1).sum(),
                prefills,
                waited_behind,
            }
        })
        .collect()
}

/// The choice of token row `t` among its candidates `cands`: probability, rank (written, else found among the
/// candidates, else beyond them), and the entropy of the candidates.
pub fn choice(trace: &Trace, t: usize, cands: &[OwnedCandidate]) -> Choice {
    let chosen = trace.tokens.token_id[t];
    let rank = match opt_u32(trace.tokens.rank[t]) {
        Some(r) => Rank::Known(r),
        None if cands.is_empty() => Rank::Unknown,
        None => match cands
            .iter()
            .position(|c| c.token_id == chosen && c.token_id != NULL_U32)
        {
            Some(k) => Rank::Known(u32::try_from(k + 1).unwrap_or(u32::MAX)),
            None => Rank::BeyondTopK(u32::try_from(cands.len()).unwrap_or(u32::MAX)),
        },
    };
    let entropy_nats = (!cands.is_empty()).then(|| {
        let p: Vec<f64> = cands.iter().map(|c| c.logprob.exp()).collect();
        let total: f64 = p.iter().sum();
        p.iter()
            .filter(|&&x| x > 0.0)
            .map(|&x| x / total)
            .map(|q| -q * q.ln())
            .sum()
    });
    Choice {
        probability: opt_f64(trace.tokens.logprob[t]).map(f64::exp),
        rank,
        entropy_nats,
    }
}

/// How a token's text is shown: special tokens as a badge (`⟨EOS⟩`, `⟨im_end⟩`), whitespace and control characters
/// visibly (`␣`, `↵`, `⇥`, `\u{1b}`), never as an empty string.
pub fn display_text(trace: &Trace, token_id: u32, text: Option<&str>, special: Flag) -> String {
    // No text in the trace (an engine trace has token times, not texts): the id when known, never "empty".
    let Some(text) = text.or(trace.is_special_token(token_id, special).then_some("")) else {
        return if token_id == NULL_U32 {
            "⟨?⟩".to_owned()
        } else {
            format!("#{token_id}")
        };
    };
    if trace.is_special_token(token_id, special) {
        let eos = trace
            .meta
            .eos_token_ids
            .as_ref()
            .is_some_and(|ids| ids.contains(&token_id));
        let name = text
            .trim_start_matches("<|")
            .trim_end_matches("|>")
            .trim_start_matches('<')
            .trim_end_matches('>');
        return match (name.is_empty(), eos) {
            (true, true) => "⟨EOS⟩".to_owned(),
            (true, false) if token_id == NULL_U32 => "⟨special⟩".to_owned(),
            (true, false) => format!("⟨special {token_id}⟩"),
            (false, _) => format!("⟨{name}⟩"),
        };
    }
    if text.is_empty() {
        return if token_id == NULL_U32 {
            "⟨empty⟩".to_owned()
        } else {
            format!("⟨empty {token_id}⟩")
        };
    }
    let mut out = String::with_capacity(text.len().min(4 * MAX_SHOWN_CHARS));
    for (i, c) in text.chars().enumerate() {
        if i == MAX_SHOWN_CHARS {
            // A token of a megabyte (a corrupt or hostile trace) must not stall a frame laying it out.
            out.push_str(&format!("…(+{} chars)", text.chars().count() - i));
            break;
        }
        match c {
            ' ' => out.push('␣'),
            '\n' => out.push('↵'),
            '\t' => out.push('⇥'),
            '\r' => out.push_str("\\r"),
            // Control characters, and the invisible ones that reorder or hide text (bidirectional overrides and
            // isolates, zero-width spaces and marks): shown by code, so a token can never reorder the UI around it.
            c if c.is_control() || invisible(c) => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// Characters of a token text shown at most; the rest is counted.
pub const MAX_SHOWN_CHARS: usize = 200;

/// Format characters that change how the text around them is ordered or that cannot be seen.
fn invisible(c: char) -> bool {
    matches!(c, '\u{061c}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingest::Progress;
    use crate::load::load;

    fn four() -> Trace {
        crate::test_support::sample("four_requests.jsonl")
    }

    #[test]
    fn latency_splits_into_wait_compute_output() {
        // r1: token 1 emitted at 200 ms by step 8 (160..195 ms); token 0 at 150 ms.
        // Total 50 ms = wait 10 ms (150 -> 160) + compute 35 ms + output 5 ms (195 -> 200).
        let t = four();
        let r1 = t.request_row("r1").unwrap();
        let first = t.tokens_of(r1).start;
        let l = latency(&t, r1, first + 1);
        assert_eq!(l.total_ns, 50_000_000);
        assert_eq!(l.schedule_wait_ns, Some(10_000_000));
        assert_eq!(l.compute_ns, Some(35_000_000));
        assert_eq!(l.output_ns, Some(5_000_000));
        // Token 0: from arrival (0 ms) to 150 ms; its step 7 ran 12..148 ms: wait 12, compute 136, output 2.
        let l0 = latency(&t, r1, first);
        assert_eq!(
            (l0.total_ns, l0.schedule_wait_ns, l0.compute_ns, l0.output_ns),
            (150_000_000, Some(12_000_000), Some(136_000_000), Some(2_000_000))
        );
        // r3 has no iterations: the total only.
        let r3 = t.request_row("r3").unwrap();
        let l3 = latency(&t, r3, t.tokens_of(r3).start + 1);
        assert_eq!((l3.total_ns, l3.compute_ns), (100_000_000, None));
    }

    #[test]
    fn a_token_that_waited_through_prefill_only_steps_names_them() {
        let t = crate::test_support::sample("prefill_interrupts_decode.jsonl");
        let victim = t.request_row("chat-victim").unwrap();
        let loads = step_loads(&t, victim);
        let lat: Vec<Latency> = t.tokens_of(victim).map(|k| latency(&t, victim, k)).collect();
        let slow = (1..lat.len()).max_by_key(|&k| lat[k].total_ns).unwrap();
        // It waited through the 24k prompt's step and the step of the four 6k prompts (and the short prompts of
        // background requests admitted with them).
        let names: Vec<&str> = loads[slow]
            .waited_behind
            .iter()
            .map(|&(r, _)| t.request_id(r))
            .collect();
        assert_eq!(
            names[..5],
            ["rag-24k", "rag-6k-1", "rag-6k-2", "rag-6k-3", "rag-6k-4"],
            "{names:?}"
        );
        assert_eq!(loads[slow].waited_behind[0].1, 24_000);
        assert!(loads[slow].others_prefill_tokens >= 24_000 + 4 * 6_000);
        // Its own step was a decode step: nobody prefilled in it (chunked prefill off).
        assert!(loads[slow].prefills.is_empty());
    }

    #[test]
    fn rank_probability_and_entropy_by_hand() {
        let t = four();
        let r1 = t.request_row("r1").unwrap();
        let toks = t.tokens_of(r1);
        // Token 2 (EOS): logprob -2.3 -> p = e^-2.3 = 0.1003; rank 2 as written.
        let cands = t.owned_candidates(r1);
        let c = choice(&t, toks.start + 2, &cands[2]);
        assert!((c.probability.unwrap() - (-2.3f64).exp()).abs() < 1e-12);
        assert_eq!(c.rank, Rank::Known(2));
        // Entropy of candidates e^-0.2 = 0.818731 and e^-2.3 = 0.100259, renormalised (sum 0.918990): q = 0.890903,
        // 0.109097; H = -(0.890903 ln 0.890903 + 0.109097 ln 0.109097) = 0.102915 + 0.241707 = 0.344622 nats.
        assert!(
            (c.entropy_nats.unwrap() - 0.344_622).abs() < 1e-5,
            "{:?}",
            c.entropy_nats
        );
        // Token 0 has no rank written: found first among its candidates.
        assert_eq!(choice(&t, toks.start, &cands[0]).rank, Rank::Known(1));
    }

    #[test]
    fn a_chosen_token_outside_the_candidates_is_beyond_top_k() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.jsonl");
        std::fs::write(
            &p,
            "{\"kind\":\"request\",\"request_id\":\"a\",\"arrival_ns\":1764403200000000000}\n\
             {\"kind\":\"token\",\"request_id\":\"a\",\"index\":0,\"emitted_ns\":1764403200100000000,\"token_id\":9,\
             \"logprob\":-3.0,\"candidates\":[{\"token_id\":1,\"logprob\":-0.1},{\"token_id\":2,\"logprob\":-2.5}]}\n",
        )
        .unwrap();
        let t = load(&p, &Progress::default()).unwrap().trace;
        let c = choice(&t, 0, &t.owned_candidates(0)[0]);
        assert_eq!(c.rank, Rank::BeyondTopK(2));
        assert_eq!(c.rank.to_string(), "> 2");
    }

    #[test]
    fn special_tokens_and_whitespace_are_visible() {
        let t = four();
        // r1's last token: id 151645 in meta.eos_token_ids, empty text.
        assert_eq!(display_text(&t, 151_645, Some(""), Flag::True), "⟨EOS⟩");
        assert_eq!(
            display_text(&t, 151_645, Some(""), Flag::Null),
            "⟨EOS⟩",
            "by meta alone"
        );
        assert_eq!(display_text(&t, 2, Some("<|im_end|>"), Flag::True), "⟨im_end⟩");
        assert_eq!(display_text(&t, 7, Some(""), Flag::True), "⟨special 7⟩");
        // Flagged special with neither id nor text: no made-up id.
        assert_eq!(display_text(&t, NULL_U32, None, Flag::True), "⟨special⟩");
        assert_eq!(display_text(&t, 5, Some(" a\n\tb\u{1b}"), Flag::Null), "␣a↵⇥b\\u{1b}");
        assert_eq!(display_text(&t, 5, Some(""), Flag::Null), "⟨empty 5⟩");
        // Absent text is not empty text: the id, or a question mark without one.
        assert_eq!(display_text(&t, 5, None, Flag::Null), "#5");
        assert_eq!(display_text(&t, NULL_U32, None, Flag::Null), "⟨?⟩");
        // A right-to-left override and a zero-width space are shown by code: they cannot reorder or hide the text
        // around the token.
        assert_eq!(
            display_text(&t, 5, Some("\u{202e}evil\u{202c}\u{200b}"), Flag::Null),
            "\\u{202e}evil\\u{202c}\\u{200b}"
        );
        // Arabic and Hebrew letters are text, shown as they are.
        assert_eq!(display_text(&t, 5, Some("שלום"), Flag::Null), "שלום");
        // A token of a megabyte: its first 200 characters and the count of the rest.
        let huge = "x".repeat(1_000_000);
        let shown = display_text(&t, 5, Some(&huge), Flag::Null);
        assert_eq!(shown, format!("{}…(+999800 chars)", "x".repeat(200)));
    }
}
