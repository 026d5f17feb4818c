//! Saved streams (`curl -N ... > stream.sse`): the bodies of real llama.cpp responses (`tests/data/record/`, see its
//! PROVENANCE.md), alone, several in one file, and without their `[DONE]`: each response a request with its tokens,
//! texts, logprobs and candidates, and no time read from a file that wrote none.

use std::path::{Path, PathBuf};

use tokenscope::load::{LoadOptions, Progress, load_with};

use crate::common::tokenscope;

fn record(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/record")
        .join(name)
}

#[test]
fn a_saved_chat_stream_opens_with_its_candidates_and_the_eos_usage_counts() {
    let loaded = load_with(
        &record("chat_eos_omitted.sse"),
        &Progress::default(),
        LoadOptions::default(),
    )
    .unwrap();
    let t = &loaded.trace;
    assert_eq!(t.meta.clock.as_deref(), Some("untimed"));
    assert!(!t.has_times());
    assert_eq!((t.request_count(), t.request_id(0)), (1, "stream-1"));
    // Five token chunks, and the EOS usage counts (6) but no chunk carried: added without text.
    assert_eq!(t.output_tokens(0), 6);
    assert_eq!(t.tokens_of(0).len(), 6);
    let first = t.tokens.row(0);
    assert_eq!(first.token_id, 1567, "the server's id of \"Name\"");
    assert_eq!(t.texts.get(first.text), Some("Name"));
    assert!((first.logprob - -2.083_642).abs() < 1e-5, "{}", first.logprob);
    assert_eq!(t.candidates_of(0).len(), 3, "top_logprobs: 3");
    assert!(
        loaded.report.notes.iter().any(|n| n.contains("no latency is known")),
        "{:?}",
        loaded.report.notes
    );
}

#[test]
fn several_responses_in_one_file_with_or_without_done_are_one_request_each() {
    let dir = tempfile::tempdir().unwrap();
    let read = |n: &str| std::fs::read_to_string(record(n)).unwrap();
    // Chat (40 tokens, cut at the limit), completions (6, the EOS with its logprob), llama.cpp native (6).
    let all = dir.path().join("three.sse");
    std::fs::write(
        &all,
        [
            read("chat_length.sse"),
            read("completions_eos.sse"),
            read("native_eos.sse"),
        ]
        .concat(),
    )
    .unwrap();
    let t = load_with(&all, &Progress::default(), LoadOptions::default())
        .unwrap()
        .trace;
    let counts: Vec<usize> = (0..3).map(|r| t.tokens_of(r).len()).collect();
    assert_eq!(counts, [40, 6, 6]);
    let reasons: Vec<Option<&str>> = (0..3).map(|r| t.label(t.requests.finish_reason[r])).collect();
    assert_eq!(reasons, [Some("length"), Some("stop"), Some("stop")]);
    // The same chat streams saved without their [DONE] lines: split where a new id follows a finished response.
    let bare = dir.path().join("bare.sse");
    let without_done: String = [read("chat_length.sse"), read("chat_eos_omitted.sse")]
        .concat()
        .lines()
        .filter(|l| !l.contains("[DONE]"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&bare, without_done).unwrap();
    let t = load_with(&bare, &Progress::default(), LoadOptions::default())
        .unwrap()
        .trace;
    assert_eq!(t.request_count(), 2);
    assert_eq!((t.tokens_of(0).len(), t.output_tokens(1)), (40, 6));
    // No time is read from it: no latency in the summary, and no finding that would judge times.
    let (code, stdout, stderr) = tokenscope(&["summary", all.to_str().unwrap()]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("span              -\n"), "{stdout}");
    assert!(
        stdout.contains("latency           - (the source wrote no times"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("latency (ms)"),
        "no table of made-up latencies: {stdout}"
    );
    let (code, stdout, _) = tokenscope(&["summary", all.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert!(v["ttft_ms"].is_null() && v["itl_ms"].is_null(), "{v}");
    assert_eq!(
        (v["requests"].as_u64(), v["clock"].as_str()),
        (Some(3), Some("untimed"))
    );
    let (code, stdout, _) = tokenscope(&["findings", all.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert!(
        !stdout.contains("slo-violations") && !stdout.contains("overload"),
        "{stdout}"
    );
}

#[test]
fn llama_cpp_plain_probabilities_are_read_as_logs() {
    // llama.cpp before its OpenAI-style logprobs: `completion_probabilities: [{content, probs: [{tok_str, prob}]}]`;
    // and with `post_sampling_probs`: `{id, token, prob, top_probs: [{id, token, prob}]}`.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.sse");
    std::fs::write(
        &path,
        "data: {\"content\":\" Paris\",\"stop\":false,\"completion_probabilities\":[{\"content\":\" Paris\",\"probs\":[{\"tok_str\":\" Paris\",\"prob\":0.5},{\"tok_str\":\" Lyon\",\"prob\":0.25}]}]}\n\n\
         data: {\"content\":\".\",\"stop\":false,\"completion_probabilities\":[{\"id\":236761,\"token\":\".\",\"prob\":0.8,\"top_probs\":[{\"id\":236761,\"token\":\".\",\"prob\":0.8},{\"id\":107,\"token\":\"\\n\",\"prob\":0.1}]}]}\n\n\
         data: {\"content\":\"\",\"stop\":true,\"stop_type\":\"limit\",\"tokens_predicted\":2}\n",
    )
    .unwrap();
    let t = load_with(&path, &Progress::default(), LoadOptions::default())
        .unwrap()
        .trace;
    assert_eq!(t.tokens_of(0).len(), 2);
    let (a, b) = (t.tokens.row(0), t.tokens.row(1));
    assert!((a.logprob - 0.5f64.ln()).abs() < 1e-12, "{}", a.logprob);
    assert!((b.logprob - 0.8f64.ln()).abs() < 1e-12, "{}", b.logprob);
    assert_eq!(b.token_id, 236_761);
    let lyon = t.candidates.row(t.candidates_of(0).start + 1);
    assert!((lyon.logprob - 0.25f64.ln()).abs() < 1e-12);
    assert_eq!(t.label(t.requests.finish_reason[0]), Some("length"));
}

#[test]
fn the_servers_own_draft_counts_are_kept_per_request() {
    // llama.cpp's final chat chunk carries `timings.draft_n`/`draft_n_accepted` (its shape as a real server writes
    // it: usage and timings on an empty-choices chunk); vLLM with `--per-request-spec-decode-metrics` carries
    // `metrics.speculative_decoding`; a third response says nothing of drafts.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("spec.sse");
    std::fs::write(
        &path,
        "data: {\"id\":\"a\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n\
         data: {\"id\":\"a\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n\
         data: {\"id\":\"a\",\"choices\":[],\"usage\":{\"completion_tokens\":1,\"prompt_tokens\":9},\"timings\":{\"cache_n\":0,\"prompt_n\":9,\"predicted_n\":1,\"draft_n\":604,\"draft_n_accepted\":515}}\n\n\
         data: [DONE]\n\n\
         data: {\"id\":\"b\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Yo\"}}]}\n\n\
         data: {\"id\":\"b\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"completion_tokens\":1,\"prompt_tokens\":4},\"metrics\":{\"speculative_decoding\":{\"mean_acceptance_length\":1.2325581395348837,\"draft_acceptance_rate\":0.07751937984496124,\"acceptance_histogram\":[39,1,0,3],\"num_spec_steps\":43,\"num_accepted_draft_tokens\":10,\"num_draft_tokens\":129,\"num_spec_tokens\":3}}}\n\n\
         data: [DONE]\n\n\
         data: {\"id\":\"c\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Ok\"},\"finish_reason\":\"stop\"}],\"timings\":{\"prompt_n\":3,\"predicted_n\":1}}\n\n\
         data: [DONE]\n",
    )
    .unwrap();
    let t = load_with(&path, &Progress::default(), LoadOptions::default())
        .unwrap()
        .trace;
    assert_eq!(t.request_count(), 3);
    let spec: Vec<(Option<u32>, Option<u32>)> = (0..3)
        .map(|r| {
            (
                t.requests.spec_drafted_tokens.at(r),
                t.requests.spec_accepted_tokens.at(r),
            )
        })
        .collect();
    // vLLM's histogram agrees with its counts: 1x1 + 3x3 = 10 accepted over 43 steps of 3 drafts (129).
    assert_eq!(spec, [(Some(604), Some(515)), (Some(129), Some(10)), (None, None)]);
}
