//! `tokenscope rescore` (issue 46): a recording's answers re-scored by a server, each emitted token's reference
//! written into the trace; the dice told from the model. A local server answering as llama-server's `/apply-template`,
//! `/tokenize` and `/completion` do, with distributions chosen here; and real runs of llama-server re-scored by it.

use std::path::Path;

use serde_json::{Value, json};
use tokenscope::analysis::findings::{Kind, Severity, Thresholds, find_kinds};
use tokenscope::analysis::reference::{Verdict, verdict};
use tokenscope::analysis::summary::Slo;
use tokenscope::trace::Trace;

use crate::common::tokenscope;
use crate::record::replay::{self, Behavior};

fn load(path: &Path) -> Trace {
    tokenscope::load::load(path, &tokenscope::ingest::Progress::default())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trace
}

/// The findings of a re-scored trace's two kinds.
fn rescored_findings(t: &Trace) -> Vec<tokenscope::analysis::findings::Finding> {
    find_kinds(
        t,
        &Slo::default(),
        &Thresholds::default(),
        &[Kind::OffDistribution, Kind::SamplingAccident],
    )
}

/// The two prompts, as `record --prompts` reads them.
const PROMPTS: &str = "{\"prompt\": \"Hi\"}\n{\"prompt\": \"Yo\"}\n";

/// The server's distributions. "Hi" is templated and tokenized as [1, 7, 8], "Yo" as [1, 9]; at each position after
/// the prompt, its top candidates (id, text, p):
/// - "Hi", position 0: 10 "a" 0.6, 12 "c" 0.3;
/// - "Hi", position 1: 12 "c" 0.7, 11 "b" 0.2;
/// - "Hi", position 2: 13 " d" 0.8, 2 "<eos>" 0.15;
/// - "Yo", position 0: 13 " d" 0.5, 14 " e" 0.4; the recording's 99 not listed, at 0.0002.
///
/// As llama-server does, the token sampled is the one `logit_bias` forces, given with its own probability (from the
/// whole distribution: `others` holds the unlisted ones), the list unchanged by the bias.
fn llama_server(path: &str, body: &Value) -> (u16, Value) {
    let forced = body["logit_bias"][0][0].as_u64();
    let top = |list: &[(u32, &str, f64)], others: &[(u32, f64)]| {
        let listed: Vec<Value> = list
            .iter()
            .map(|&(id, text, p)| json!({"id": id, "token": text, "bytes": [], "logprob": p.ln()}))
            .collect();
        let (id, p) = list
            .iter()
            .map(|&(id, _, p)| (id, p))
            .chain(others.iter().copied())
            .find(|&(id, _)| Some(u64::from(id)) == forced)
            .unwrap_or((list[0].0, list[0].2));
        json!({"completion_probabilities": [{"id": id, "token": "", "logprob": p.ln(), "top_logprobs": listed}]})
    };
    match path {
        "/apply-template" => {
            let text = body["messages"][0]["content"].as_str().unwrap_or("");
            (200, json!({"prompt": format!("<user>{text}<model>")}))
        }
        "/tokenize" => match body["content"].as_str() {
            Some("<user>Hi<model>") => (200, json!({"tokens": [1, 7, 8]})),
            Some("<user>Yo<model>") => (200, json!({"tokens": [1, 9]})),
            _ => (400, json!({"error": "unknown prompt"})),
        },
        "/completion" => {
            let prompt: Vec<u64> = body["prompt"]
                .as_array()
                .map(|l| l.iter().filter_map(Value::as_u64).collect())
                .unwrap_or_default();
            match (prompt.get(1), prompt.len()) {
                (Some(7), 3) => (200, top(&[(10, "a", 0.6), (12, "c", 0.3)], &[])),
                (Some(7), 4) => (200, top(&[(12, "c", 0.7), (11, "b", 0.2)], &[])),
                (Some(7), 5) => (200, top(&[(13, " d", 0.8), (2, "<eos>", 0.15)], &[])),
                (Some(9), 2) => (200, top(&[(13, " d", 0.5), (14, " e", 0.4)], &[(99, 0.0002)])),
                _ => (400, json!({"error": "no such position"})),
            }
        }
        _ => (404, json!({"error": "not here"})),
    }
}

/// A recording of the two prompts: "Hi" answered a, b, <eos> (id 2, in meta.eos_token_ids) at temperature 0.7; "Yo"
/// answered 99.
fn recording(prompts: &tokenscope::record::prompts::Prompts) -> String {
    let (hi, yo) = (prompts.prompts[0].body.hash(), prompts.prompts[1].body.hash());
    format!(
        r#"{{"kind":"meta","format":"tokenscope","version":1,"eos_token_ids":[2]}}
{{"kind":"request","request_id":"r1","arrival_ns":1764403200000000000,"first_token_ns":1764403200100000000,"finished_ns":1764403200300000000,"input_tokens":3,"output_tokens":3,"prompt_hash":"{hi}","temperature":0.7}}
{{"kind":"request","request_id":"r2","arrival_ns":1764403200050000000,"first_token_ns":1764403200150000000,"finished_ns":1764403200150000000,"input_tokens":2,"output_tokens":1,"prompt_hash":"{yo}"}}
{{"kind":"token","request_id":"r1","index":0,"emitted_ns":1764403200100000000,"token_id":10,"text":"a"}}
{{"kind":"token","request_id":"r1","index":1,"emitted_ns":1764403200200000000,"token_id":11,"text":"b"}}
{{"kind":"token","request_id":"r1","index":2,"emitted_ns":1764403200300000000,"token_id":2,"text":""}}
{{"kind":"token","request_id":"r2","index":0,"emitted_ns":1764403200150000000,"token_id":99,"text":" zz"}}
"#
    )
}

/// Writes the prompts and the recording into `dir` and runs `rescore` on them against `url`: its output file and
/// what it said (exit code, stdout, stderr).
fn rescore_recording(dir: &Path, url: &str) -> (std::path::PathBuf, (i32, String, String)) {
    let prompts_path = dir.join("prompts.jsonl");
    std::fs::write(&prompts_path, PROMPTS).unwrap_or_else(|e| panic!("{e}"));
    let rec = dir.join("rec.jsonl");
    std::fs::write(&rec, recording(&tokenscope::record::prompts::parse(PROMPTS))).unwrap_or_else(|e| panic!("{e}"));
    let out = dir.join("rescored.parquet");
    let s = |p: &Path| p.to_string_lossy().into_owned();
    let said = tokenscope(&[
        "rescore",
        &s(&rec),
        "--prompts",
        &s(&prompts_path),
        "--url",
        url,
        "-o",
        &s(&out),
    ]);
    (out, said)
}

#[test]
fn each_emitted_token_gets_what_the_server_gives_it_and_the_dice_are_told_from_the_model() {
    let server = replay::start(Behavior::Json(llama_server));
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (out, (code, stdout, err)) = rescore_recording(dir.path(), &server.url);
    let s = |p: &Path| p.to_string_lossy().into_owned();
    assert_eq!(code, 0, "{err}");
    // 4 tokens: a (the first choice), b (p 0.2, rank 2: a draw), <eos> (p 0.15: a draw), 99 (p 0.0002: off).
    assert!(
        stdout.starts_with(
            "re-scored 4 tokens of 2 requests: 1 the reference's first choice (25.0 %), 2 a draw of the dice \
             (50.0 %), 1 off its distribution (25.0 %)"
        ),
        "{stdout}"
    );
    // What was asked: each prompt templated and tokenized, then a position at a time, the answer growing by the
    // recorded token, 20 candidates, at temperature 0, each computed afresh.
    let posts = server.posts.lock().unwrap_or_else(|e| panic!("{e}")).clone();
    // The recorded token is forced by a logit bias, so that its own probability comes back.
    let completions: Vec<(Value, Value, Value, Value)> = posts
        .iter()
        .filter(|(p, _)| p == "/completion")
        .map(|(_, b)| {
            (
                b["prompt"].clone(),
                b["n_probs"].clone(),
                b["cache_prompt"].clone(),
                b["logit_bias"][0][0].clone(),
            )
        })
        .collect();
    assert_eq!(
        completions,
        [
            (json!([1, 7, 8]), json!(20), json!(false), json!(10)),
            (json!([1, 7, 8, 10]), json!(20), json!(false), json!(11)),
            (json!([1, 7, 8, 10, 11]), json!(20), json!(false), json!(2)),
            (json!([1, 9]), json!(20), json!(false), json!(99)),
        ]
    );
    // The written trace holds each token's reference.
    let t = load(&out);
    type Row<'a> = (String, u32, Option<u32>, Option<f64>, Option<u32>, &'a str, Verdict);
    let got: Vec<Row<'_>> = (0..t.references.len())
        .map(|i| {
            let r = t.references.row(i);
            (
                t.request_id(r.request).to_owned(),
                r.index,
                r.rank,
                r.logprob.map(f64::exp),
                r.top_token_id,
                t.texts.get(r.top_text).unwrap_or(""),
                verdict(&r),
            )
        })
        .collect();
    let close = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => (a - b).abs() < 1e-9,
        (None, None) => true,
        _ => false,
    };
    let want = [
        ("r1", 0, Some(1), Some(0.6), Some(10), "a", Verdict::Top),
        ("r1", 1, Some(2), Some(0.2), Some(12), "c", Verdict::Sampled),
        ("r1", 2, Some(2), Some(0.15), Some(13), " d", Verdict::Sampled),
        ("r2", 0, None, Some(0.0002), Some(13), " d", Verdict::OffDistribution),
    ];
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert!(
            g.0 == w.0 && g.1 == w.1 && g.2 == w.2 && close(g.3, w.3) && g.4 == w.4 && g.5 == w.5 && g.6 == w.6,
            "{g:?} vs {w:?}"
        );
    }
    // The findings (a leading space shown as ␣, an EOS without text as ⟨EOS⟩, as everywhere): r2's token off the distribution; r1's stop drawn at 15 % where the model would go on.
    let found = rescored_findings(&t);
    let off = found
        .iter()
        .find(|f| f.kind == Kind::OffDistribution)
        .unwrap_or_else(|| panic!("{found:#?}"));
    assert_eq!(off.severity, Severity::Critical);
    assert_eq!(
        off.summary,
        "1 of 4 re-scored tokens were off the model's distribution (under 0.1 % by the reference, the same model \
         asked again): r2; the least likely, r2's token 0 \"␣zz\", which the reference gives 0.020 % (below its 2 most \
         probable) where it would choose \"␣d\" (50 %): not a draw of the dice but the serving (a kernel, \
         quantization or batching fault) or another model"
    );
    let accident = found
        .iter()
        .find(|f| f.kind == Kind::SamplingAccident)
        .unwrap_or_else(|| panic!("{found:#?}"));
    assert_eq!(
        accident.summary,
        "r1's answer stopped at token 2 on \"⟨EOS⟩\" drawn by sampling at temperature 0.7: the reference (the same \
         model asked again) gives it 15 % (rank 2) and would have gone on with \"␣d\" (80 %); the dice, not the \
         model: a lower temperature or top-p keeps such a stop from being drawn"
    );
    assert_eq!(accident.tokens, [t.tokens_of(0).start + 2]);
    // The references survive the trace's other encoding.
    let jsonl = dir.path().join("rescored.jsonl");
    let (code, _, err) = tokenscope(&["convert", &s(&out), "-o", &s(&jsonl)]);
    assert_eq!(code, 0, "{err}");
    let again = load(&jsonl);
    assert_eq!(again.references.token, t.references.token);
    assert_eq!(again.references.logprob, t.references.logprob);
}

#[test]
fn a_server_that_does_not_answer_as_llama_server_is_named_and_nothing_is_written() {
    let server = replay::start(Behavior::Status(404, "{\"error\": \"File Not Found\"}".to_owned()));
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (out, (code, _, err)) = rescore_recording(dir.path(), &server.url);
    assert_eq!(code, 1);
    assert!(
        err.contains("the reference server: ") && err.contains("/apply-template: HTTP 404"),
        "{err}"
    );
    assert!(!out.exists());
}

/// The real runs' folder.
const RUNS: &str = "tests/data/real/llamacpp-runs";

#[test]
fn a_real_greedy_run_rescored_by_its_own_server_is_its_first_choice_or_a_near_tie_at_every_token() {
    // greedy-c1: Gemma 3 270M on llama-server, temperature 0, one request at a time; re-scored against the same
    // server (scripts/llamacpp/rescore-runs.sh).
    let t = load(&Path::new(RUNS).join("greedy-c1.rescored.parquet"));
    assert_eq!(t.references.len(), t.tokens.len(), "every token re-scored");
    let mut first = 0;
    for i in 0..t.references.len() {
        let r = t.references.row(i);
        match verdict(&r) {
            Verdict::Top => first += 1,
            // A greedy token the reference ranks lower is a near tie: within 0.2 nats of its first choice (the
            // batch shapes' arithmetic, as between concurrency 1 and 8), never off the distribution.
            Verdict::Sampled => {
                let gap = r.top_logprob.unwrap_or(0.0) - r.logprob.unwrap_or(f64::NEG_INFINITY);
                assert!(
                    gap < 0.2,
                    "{}[{}]: {gap} nats from the first choice",
                    t.request_id(r.request),
                    r.index
                );
            }
            Verdict::OffDistribution => panic!("{}[{}] off the distribution", t.request_id(r.request), r.index),
        }
        // The recording's token is the one the reference was asked about, at its position.
        assert_eq!(t.tokens.index[r.token as usize], r.index);
    }
    assert!(
        first * 100 >= t.references.len() * 99,
        "{first} of {}",
        t.references.len()
    );
    let found = rescored_findings(&t);
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn a_token_planted_in_a_copy_of_the_recording_is_named_off_the_distribution() {
    // The same recording with rec-00003's token 20 ("Explain") replaced by " banana", re-scored for rec-00003.
    let original = load(&Path::new(RUNS).join("greedy-c1.rescored.parquet"));
    let planted = load(&Path::new(RUNS).join("greedy-c1-planted.rescored.parquet"));
    let (o, p) = (
        original.request_row("rec-00003").unwrap_or(u32::MAX),
        planted.request_row("rec-00003").unwrap_or(u32::MAX),
    );
    let at = |t: &Trace, r: u32, i: usize| t.reference_of(t.tokens_of(r).start + i);
    // Before the plant, the same prompt and answer: the same figures, position by position.
    for i in 0..20 {
        let (a, b) = (at(&original, o, i), at(&planted, p, i));
        assert_eq!(
            a.map(|r| (r.rank, r.logprob, r.top_token_id)),
            b.map(|r| (r.rank, r.logprob, r.top_token_id)),
            "position {i}"
        );
    }
    // At it: the original's token was the reference's first choice; " banana" is off its distribution.
    let orig = at(&original, o, 20).unwrap_or_else(|| panic!("original 20"));
    assert_eq!(verdict(&orig), Verdict::Top);
    let plant = at(&planted, p, 20).unwrap_or_else(|| panic!("planted 20"));
    let t20 = planted.tokens_of(p).start + 20;
    assert_eq!(planted.texts.get(planted.tokens.text[t20]), Some(" banana"));
    assert_eq!(verdict(&plant), Verdict::OffDistribution);
    assert_eq!(
        plant.top_token_id, orig.top_token_id,
        "the reference would still write what was recorded"
    );
    let found = find_kinds(
        &planted,
        &Slo::default(),
        &Thresholds::default(),
        &[Kind::OffDistribution],
    );
    let [f] = found.as_slice() else { panic!("{found:#?}") };
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(f.requests.first(), Some(&p));
    assert_eq!(f.tokens.first(), Some(&t20), "the planted token first");
}

#[test]
fn gui_the_high_power_view_says_what_the_reference_made_of_the_planted_token() {
    use egui_kittest::kittest::Queryable;
    let path = format!("{RUNS}/greedy-c1-planted.rescored.parquet");
    let mut h = crate::gui::harness_on(&path);
    let (r, reference) = {
        let t = &h.state().session().unwrap_or_else(|| panic!("opened")).view.trace;
        let r = t.request_row("rec-00003").unwrap_or(u32::MAX);
        (
            r,
            t.reference_of(t.tokens_of(r).start + 20)
                .unwrap_or_else(|| panic!("re-scored")),
        )
    };
    if let Some(s) = h.state_mut().session_mut() {
        s.selected = Some(r);
    }
    h.run_steps(4);
    if let Some(m) = h.state_mut().session_mut().and_then(|s| s.microscope.as_mut()) {
        m.token = Some(20);
    }
    h.run_steps(4);
    // Its figures, from the file: its own probability and where it would stand, the reference's own choice.
    let p = reference.logprob.map_or(0.0, f64::exp) * 100.0;
    assert!(p < 1e-3, "{p} %");
    h.get_by_label("Reference (re-scored):");
    h.get_by_label(&format!("p {p:.1e} % · below its 20 most probable"));
    h.get_by_label("off its distribution: not the model's choice at any temperature served");
    // The answer coloured by it: a choice the view offers on a re-scored request.
    h.get_by_label("by reference");
}

#[test]
fn gui_the_comparison_lists_where_two_real_runs_answers_part_and_shows_a_pair() {
    use egui_kittest::kittest::Queryable;
    use tokenscope::ui::TraceSource;
    // Temperature 0, one request at a time (A) against eight at a time (B): batching breaks near ties.
    let mut h = crate::gui::harness_on(&format!("{RUNS}/greedy-c1.client.parquet"));
    h.state_mut()
        .compare_with(TraceSource::Path(format!("{RUNS}/greedy-c8.client.parquet").into()));
    h.state_mut().wait_loaded();
    h.run_steps(4);
    h.state_mut().wait_compared();
    h.run_steps(6);
    let d = h
        .state()
        .comparing()
        .and_then(|c| c.tokens.clone())
        .unwrap_or_else(|| panic!("the answers compared"));
    let parts = d.pairs.iter().filter(|p| p.first_divergence.is_some()).count();
    assert!(parts > 0);
    // The app reads the candidates its load left on disk: the same verdicts as `diff --tokens` on the files loaded
    // whole (none "parted" for want of candidates).
    let whole = tokenscope::analysis::diff::compare_tokens(
        &load(&Path::new(RUNS).join("greedy-c1.client.parquet")),
        &load(&Path::new(RUNS).join("greedy-c8.client.parquet")),
        tokenscope::analysis::diff::DEFAULT_KL_SHIFT,
    );
    assert_eq!(d.overall, whole.overall);
    assert_eq!(d.overall.parted, 0);
    // One line until opened (the window's figures stay where they were).
    h.get_by_label_contains(&format!(
        "Answers token by token: {} pairs (paired by prompt), {parts} part",
        d.pairs.len()
    ))
    .click();
    h.run_steps(4);
    // The pair that parts first, clicked: both continuations.
    let first = d
        .pairs
        .iter()
        .filter(|p| p.first_divergence.is_some())
        .min_by_key(|p| p.first_divergence)
        .unwrap_or_else(|| panic!("a pair that parts"));
    let name = {
        let a = &h.state().session().unwrap_or_else(|| panic!("A")).view.trace;
        let b = &h.state().comparing().unwrap_or_else(|| panic!("B")).other.view.trace;
        format!("{} / {}", a.request_id(first.row_a), b.request_id(first.row_b))
    };
    assert!(
        h.query_by_label("Click a pair to see both answers where they part.")
            .is_some()
    );
    h.get_by_label(&name).click();
    h.run_steps(4);
    assert!(
        h.query_by_label("Click a pair to see both answers where they part.")
            .is_none(),
        "selected"
    );
    h.get_by_label_contains("A goes on: ");
    h.get_by_label_contains("B goes on: ");
}

#[test]
fn a_healthy_run_at_temperature_0_8_is_drawn_by_the_dice_and_raises_nothing() {
    // seed-7: the same prompts at temperature 0.8, re-scored against its server.
    let t = load(&Path::new(RUNS).join("seed-7.rescored.parquet"));
    assert_eq!(t.references.len(), t.tokens.len());
    let refs: Vec<_> = (0..t.references.len()).map(|i| t.references.row(i)).collect();
    let sampled = refs.iter().filter(|r| verdict(r) == Verdict::Sampled).count();
    assert!(sampled > 0, "sampling at 0.8 draws tokens other than the first choice");
    // Some of them below the reference's 20 most probable: judged by their own probability (0.1 % or more), not
    // called off the distribution for being left off the list.
    let below: Vec<f64> = refs
        .iter()
        .filter(|r| r.rank.is_none())
        .map(|r| r.logprob.map_or(0.0, f64::exp))
        .collect();
    assert!(!below.is_empty());
    assert!(below.iter().all(|&p| p >= 1e-3), "{below:?}");
    assert!(refs.iter().all(|r| verdict(r) != Verdict::OffDistribution));
    let found = rescored_findings(&t);
    assert!(found.is_empty(), "{found:#?}");
}
