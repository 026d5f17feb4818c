//! Recorder overhead: what `tokenscope record` spends per streamed chunk (HTTP, SSE parsing, JSON, candidates) beside
//! the bare cost of receiving the same bytes with the same HTTP client, measured in the same run against a local
//! server that streams as fast as it can.
//!
//! `cargo bench --bench record [-- --chunks N --runs R]`: one request of N chunks (default 20,000), each a real
//! chat chunk of the llama.cpp capture with its top-3 logprobs; the median of R runs. The last line is the
//! recorder's own work per chunk without the network (SSE payload to a token with its candidates), which the two
//! end-to-end figures, both paced by the local server, cannot resolve.

#[path = "../tests/it/common/replay.rs"]
mod replay;

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use tokenscope::record::client::{Limits, Sampling};
use tokenscope::record::prompts::{Body, Prompt};
use tokenscope::record::{RecordOptions, run_recording};

mod common;

fn events(chunks: usize) -> Vec<String> {
    let capture = std::fs::read_to_string("tests/data/record/chat_length.sse").unwrap_or_else(|e| panic!("{e}"));
    let data: Vec<&str> = capture.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
    // data[1] is a token chunk with logprobs; the last three are the finish, usage and [DONE].
    let mut out = vec![data[0].to_owned()];
    out.extend(std::iter::repeat_n(data[1].to_owned(), chunks));
    out.extend(data[data.len() - 3..].iter().map(|s| (*s).to_owned()));
    out
}

fn recorder(url: &str) -> f64 {
    let defaults = RecordOptions::to(url, 1);
    let options = RecordOptions {
        sampling: Sampling {
            max_tokens: 64,
            top_logprobs: 3,
            ..defaults.sampling.clone()
        },
        eos_ids: vec![1],
        limits: Limits {
            idle: Duration::from_secs(30),
            ..defaults.limits
        },
        grace: Duration::from_secs(1),
        keep_raw: true,
        ..defaults
    };
    let prompts = [Prompt {
        body: Body::Text("x".into()),
        max_tokens: None,
        app_id: None,
        user_id: None,
        at_ms: None,
    }];
    let (_keep, stop) = tokio::sync::watch::channel(false);
    let start = Instant::now();
    let rec = run_recording(&options, &prompts, false, Some(stop)).unwrap_or_else(|e| panic!("{e}"));
    let secs = start.elapsed().as_secs_f64();
    assert_eq!(rec.outcomes[0].ending, tokenscope::record::client::Ending::Done);
    secs
}

fn bare(url: &str) -> f64 {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    rt.block_on(async {
        let client = reqwest::Client::new();
        let start = Instant::now();
        let r = client
            .post(format!("{url}/v1/chat/completions"))
            .body("{}")
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let mut body = r.bytes_stream();
        let mut bytes = 0usize;
        while let Some(b) = body.next().await {
            bytes += b.map_or(0, |b| b.len());
        }
        assert!(bytes > 0);
        start.elapsed().as_secs_f64()
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let chunks = common::flag("--chunks", 20_000);
    let runs = common::flag("--runs", 5);
    let server = replay::start(replay::Behavior::Stream {
        events: events(chunks),
        gap: Duration::ZERO,
        cut_after: None,
        stall_after: None,
    });
    // The recorder's own work on each chunk, without the network: SSE payload to tokens with their candidates.
    let payloads = events(chunks);
    let parse = median(
        (0..runs)
            .map(|_| {
                let start = Instant::now();
                let mut stream = tokenscope::import::openai::Stream::default();
                for (i, p) in payloads.iter().enumerate() {
                    stream.push(i64::try_from(i).unwrap_or(0), p);
                }
                assert_eq!(stream.tokens.len(), chunks);
                start.elapsed().as_secs_f64()
            })
            .collect(),
    );
    let rec = median((0..runs).map(|_| recorder(&server.url)).collect());
    let raw = median((0..runs).map(|_| bare(&server.url)).collect());
    let per = |s: f64| s / chunks as f64 * 1e6;
    println!("one stream of {chunks} chat chunks with top-3 logprobs, median of {runs} runs");
    println!("recorder        {:>8.3} s  {:>7.2} us/chunk", rec, per(rec));
    println!("bare HTTP read  {:>8.3} s  {:>7.2} us/chunk", raw, per(raw));
    println!("difference      {:>8.3} s  {:>7.2} us/chunk", rec - raw, per(rec - raw));
    println!(
        "chunk to tokens {:>8.3} s  {:>7.2} us/chunk (the recorder's own work; target < 50)",
        parse,
        per(parse)
    );
}
