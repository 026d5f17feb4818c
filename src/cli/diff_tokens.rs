//! `tokenscope diff A B --tokens [--json] [--kl-shift NATS]`: two runs of the same prompts, token by token: where
//! each pair of answers parts, with both tokens and both candidate lists there, and how far the two runs'
//! distributions are apart up to it (`analysis::diff::tokens`).

use std::fmt::Write as _;
use std::path::Path;

use serde_json::{Value, json};

use super::{Output, table, validate};
use crate::analysis::diff::{Emitted, PairVerdict, TokenDiff, TokenPair, TokenView, compare_tokens};
use crate::load::{LoadOptions, Loaded};
use crate::trace::Trace;

/// Divergences shown with their candidate lists in the text output.
const DIVERGENCES_SHOWN: usize = 5;
/// Characters of the shared text shown before a divergence.
const CONTEXT_CHARS: usize = 48;

fn load(path: &Path, as_json: bool) -> Result<Loaded, Output> {
    // Every candidate is read: the comparison reads them at every compared position.
    super::load(&[path], LoadOptions::default()).map_err(|e| {
        let mut out = validate::fatal(&e, as_json);
        if !as_json {
            out.stderr = format!("error: {}: {e}\n", path.display());
        }
        out
    })
}

/// Runs the token comparison of A and B.
pub fn run(a_path: &Path, b_path: &Path, kl_shift: f64, as_json: bool) -> Output {
    if !(kl_shift.is_finite() && kl_shift >= 0.0) {
        return Output::error("--kl-shift must be a number of nats, 0 or more", 2);
    }
    let (a, b) = match (load(a_path, as_json), load(b_path, as_json)) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => return e,
    };
    let d = compare_tokens(&a.trace, &b.trace, kl_shift);
    let mut stderr = String::new();
    for (path, loaded) in [(a_path, &a), (b_path, &b)] {
        if loaded.trace.tokens.is_empty() {
            let _ = writeln!(
                stderr,
                "note: {} has no tokens: record it with `tokenscope record` (or export tokens) to compare answers",
                path.display()
            );
        } else if !loaded.trace.has_candidates() {
            let _ = writeln!(
                stderr,
                "note: {} has no candidates: only where answers part is known (record with --top-logprobs K for \
                 top-1 agreement and KL)",
                path.display()
            );
        }
    }
    let stdout = if as_json {
        format!("{:#}\n", to_json((a_path, b_path), &a.trace, &b.trace, &d))
    } else {
        text((a_path, b_path), &a.trace, &b.trace, &d)
    };
    Output {
        stdout,
        stderr,
        code: 0,
    }
}

fn view_json(t: &TokenView) -> Value {
    json!({"text": t.text, "token_id": t.token_id, "logprob": t.logprob, "special": t.special})
}

fn emitted_json(e: Option<&Emitted>) -> Value {
    e.map_or(Value::Null, |e| {
        let mut v = view_json(&e.token);
        v["rank"] = json!(e.rank);
        v["rank_in_other"] = json!(e.rank_in_other);
        v["candidates"] = Value::Array(e.candidates.iter().map(view_json).collect());
        v
    })
}

fn pair_json(a: &Trace, b: &Trace, p: &TokenPair) -> Value {
    json!({
        "a": a.request_id(p.row_a),
        "b": b.request_id(p.row_b),
        "length_a": p.length_a,
        "length_b": p.length_b,
        "first_divergence": p.first_divergence,
        "divergence": p.divergence.as_ref().map(|d| json!({
            "a": emitted_json(d.a.as_ref()),
            "b": emitted_json(d.b.as_ref()),
        })),
        "verdict": p.verdict,
        "positions_compared": p.positions_compared,
        "positions_with_candidates": p.positions_with_candidates,
        "top1_agreement": p.top1_agreement,
        "kl_mean": p.kl_mean,
        "kl_max": p.kl_max,
        "kl_max_at": p.kl_max_at,
        "disjoint_positions": p.disjoint_positions,
        "rank_changes": p.rank_changes.iter().map(|r| json!({
            "index": r.index, "token": view_json(&r.token), "rank_a": r.rank_a, "rank_b": r.rank_b,
        })).collect::<Vec<_>>(),
        "special_only_a": p.special_only_a,
        "special_only_b": p.special_only_b,
    })
}

fn to_json(paths: (&Path, &Path), a: &Trace, b: &Trace, d: &TokenDiff) -> Value {
    json!({
        "a": {"trace": paths.0.display().to_string()},
        "b": {"trace": paths.1.display().to_string()},
        "paired_by": d.pairing.by,
        "only_a": d.pairing.only_a,
        "only_b": d.pairing.only_b,
        "without_tokens": d.without_tokens,
        "kl": {
            "direction": "KL(A||B), nats",
            "support": "the candidates both runs listed, plus one bucket for the rest of each run's probability: \
                        a lower bound of the full-vocabulary KL",
            "shift_threshold": d.kl_shift,
        },
        "overall": d.overall,
        "pairs": d.pairs.iter().map(|p| pair_json(a, b, p)).collect::<Vec<_>>(),
    })
}

fn token_text(t: &TokenView) -> String {
    match (&t.text, t.token_id) {
        (Some(s), _) => format!("{s:?}"),
        (None, Some(id)) => format!("id {id}"),
        (None, None) => "?".to_owned(),
    }
}

fn emitted_cell(e: Option<&Emitted>) -> String {
    e.map_or_else(
        || "(ended)".to_owned(),
        |e| {
            let mut s = token_text(&e.token);
            if let Some(lp) = e.token.logprob {
                let _ = write!(s, " {lp:.2}");
            }
            s
        },
    )
}

fn pct(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{:.1} %", v * 100.0))
}

fn nats(v: Option<f64>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| format!("{v:.4}"))
}

/// The shared answer just before position `at`, its last characters.
fn context_before(trace: &Trace, row: u32, at: u32) -> String {
    let tokens = trace.tokens_of(row);
    let end = (tokens.start + at as usize).min(tokens.end);
    let text: String = (tokens.start..end)
        .filter_map(|t| trace.texts.get(trace.tokens.text[t]))
        .collect();
    let chars: Vec<char> = text.chars().collect();
    let tail: String = chars[chars.len().saturating_sub(CONTEXT_CHARS)..].iter().collect();
    format!("{}{tail:?}", if chars.len() > CONTEXT_CHARS { "…" } else { "" })
}

fn candidates_line(side: &str, e: Option<&Emitted>) -> String {
    let Some(e) = e else {
        return format!("    {side}  (the answer ended)\n");
    };
    let list = if e.candidates.is_empty() {
        "no candidates".to_owned()
    } else {
        e.candidates
            .iter()
            .map(|c| format!("{} {:.2}", token_text(c), c.logprob.unwrap_or(f64::NAN)))
            .collect::<Vec<_>>()
            .join("  ")
    };
    format!("    {side}  chose {}; candidates: {list}\n", token_text(&e.token))
}

fn text(paths: (&Path, &Path), a: &Trace, b: &Trace, d: &TokenDiff) -> String {
    let o = &d.overall;
    let mut out = format!("A  {}\nB  {}\n", paths.0.display(), paths.1.display());
    let _ = writeln!(
        out,
        "{} pairs ({}{}{}): {} identical, {} part by sampling, {} shifted, {} part (no candidates to tell)",
        o.pairs,
        d.pairing.by.describe(),
        if d.pairing.only_a + d.pairing.only_b > 0 {
            format!("; {} only in A, {} only in B", d.pairing.only_a, d.pairing.only_b)
        } else {
            String::new()
        },
        if d.without_tokens > 0 {
            format!("; {} pairs without tokens left out", d.without_tokens)
        } else {
            String::new()
        },
        o.identical,
        o.sampling,
        o.shifted,
        o.parted
    );
    if let (Some(lo), Some(mid), Some(hi)) = (o.first_divergence_min, o.first_divergence_p50, o.first_divergence_max) {
        let _ = writeln!(
            out,
            "answers part at token {lo} at the earliest, {mid} at the median, {hi} at the latest"
        );
    }
    let _ = writeln!(
        out,
        "top-1 agreement {} over {} compared positions; KL(A||B) {} nats per position (pairs' means: p50 {}, p90 {}, \
         max {}); largest at one position {}",
        pct(o.top1_agreement),
        o.positions_compared,
        nats(o.kl_mean),
        nats(o.pair_kl_mean_p50),
        nats(o.pair_kl_mean_p90),
        nats(o.pair_kl_mean_max),
        nats(o.kl_max),
    );
    let _ = writeln!(
        out,
        "(compared: the positions up to and including the first divergence; KL over the candidates both listed plus \
         the rest as one bucket, a lower bound; shifted: a pair's mean KL above {} nats)\n",
        d.kl_shift
    );
    let mut rows = vec![
        [
            "A",
            "B",
            "parts at",
            "A's token",
            "B's token",
            "top-1",
            "KL mean",
            "KL max",
            "verdict",
        ]
        .map(str::to_owned)
        .to_vec(),
    ];
    for p in &d.pairs {
        let (ea, eb) = p.divergence.as_ref().map_or((String::new(), String::new()), |x| {
            (emitted_cell(x.a.as_ref()), emitted_cell(x.b.as_ref()))
        });
        rows.push(vec![
            a.request_id(p.row_a).to_owned(),
            b.request_id(p.row_b).to_owned(),
            p.first_divergence.map_or_else(|| "-".to_owned(), |i| i.to_string()),
            ea,
            eb,
            pct(p.top1_agreement),
            nats(p.kl_mean),
            nats(p.kl_max),
            if p.verdict == PairVerdict::Shifted {
                "SHIFTED".to_owned()
            } else {
                p.verdict.name().to_owned()
            },
        ]);
    }
    out.push_str(&table(&rows));
    out.push('\n');
    let parted: Vec<&TokenPair> = d.pairs.iter().filter(|p| p.first_divergence.is_some()).collect();
    if !parted.is_empty() {
        let _ = writeln!(
            out,
            "\nwhere they part{}:",
            if parted.len() > DIVERGENCES_SHOWN {
                format!(" (the first {DIVERGENCES_SHOWN} of {}; --json has all)", parted.len())
            } else {
                String::new()
            }
        );
    }
    for p in parted.iter().take(DIVERGENCES_SHOWN) {
        let (Some(at), Some(div)) = (p.first_divergence, &p.divergence) else {
            continue;
        };
        let _ = writeln!(
            out,
            "  {} / {} at token {at}, after {}",
            a.request_id(p.row_a),
            b.request_id(p.row_b),
            context_before(a, p.row_a, at)
        );
        out.push_str(&candidates_line("A", div.a.as_ref()));
        out.push_str(&candidates_line("B", div.b.as_ref()));
        if !p.special_only_a.is_empty() || !p.special_only_b.is_empty() {
            let _ = writeln!(
                out,
                "    special tokens in one run only: A {:?}, B {:?}",
                p.special_only_a, p.special_only_b
            );
        }
    }
    out
}
