//! What each fuzz target runs, shared by the cargo-fuzz targets (`fuzz/`) and by the replay of their corpora in
//! `cargo test` (`tests/corpus.rs`): every reader on arbitrary bytes, and the trace builder on arbitrary records.
//! A target passes when the load returns, with a trace or an error: a panic or a hang is the finding.

use std::path::PathBuf;

use arbitrary::{Arbitrary, Unstructured};
use tokenscope_core::import::Kind;
use tokenscope_core::ingest::Progress;
use tokenscope_core::load::{LoadOptions, load_many};

/// A fuzz target (a binary of `fuzz/fuzz_targets/` and a folder of `fuzz/corpus/` each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// Bytes as a JSON-lines trace.
    Jsonl,
    /// Bytes as a Parquet trace.
    Parquet,
    /// Bytes as what an engine or tool writes.
    Import,
    /// Arbitrary records through the trace builder.
    Records,
    /// Bytes as a server-sent event stream.
    Sse,
}

impl Target {
    /// Every target.
    pub const ALL: [Target; 5] = [
        Target::Jsonl,
        Target::Parquet,
        Target::Import,
        Target::Records,
        Target::Sse,
    ];

    /// Its name: its binary's and its corpus folder's.
    pub fn name(self) -> &'static str {
        match self {
            Target::Jsonl => "jsonl",
            Target::Parquet => "parquet",
            Target::Import => "import",
            Target::Records => "records",
            Target::Sse => "sse",
        }
    }

    /// Runs the target on `data`.
    pub fn run(self, data: &[u8]) {
        match self {
            Target::Jsonl => jsonl(data),
            Target::Parquet => parquet(data),
            Target::Import => import(data),
            Target::Records => records(data),
            Target::Sse => sse(data),
        }
    }
}

/// A file of this process and thread for the input: the loaders read files, as users give them.
fn scratch(extension: &str) -> PathBuf {
    let thread = format!("{:?}", std::thread::current().id());
    let thread: String = thread.chars().filter(char::is_ascii_digit).collect();
    std::env::temp_dir().join(format!("tokenscope-fuzz-{}-{thread}.{extension}", std::process::id()))
}

/// Loads `data` as a file named with `extension`, read by `from` when given; the outcome is dropped.
fn load(data: &[u8], extension: &str, from: Option<Kind>) {
    let path = scratch(extension);
    if std::fs::write(&path, data).is_err() {
        return;
    }
    let options = LoadOptions {
        from,
        ..LoadOptions::default()
    };
    let _ = load_many(&[path.as_path()], &Progress::default(), options);
    let _ = std::fs::remove_file(&path);
}

/// Bytes as a JSON-lines trace.
pub fn jsonl(data: &[u8]) {
    load(data, "jsonl", None);
}

/// Bytes as a Parquet trace.
pub fn parquet(data: &[u8]) {
    load(data, "parquet", None);
}

/// Bytes as what an engine or tool writes: the first byte picks the importer, the rest is the file.
pub fn import(data: &[u8]) {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let kind = Kind::ALL[usize::from(pick) % Kind::ALL.len()];
    load(rest, "json", Some(kind));
}

/// A record with fuzzed fields, among few request ids and sources so that records meet (duplicates, tokens of
/// unknown requests, steps named by tokens).
#[derive(Debug, Arbitrary)]
enum Record {
    Meta {
        eos: Vec<u32>,
    },
    Request {
        id: u8,
        source: u8,
        arrival: i64,
        scheduled: Option<i64>,
        finished: Option<i64>,
        output: Option<i32>,
    },
    Step {
        source: u8,
        iteration: i64,
        start: i64,
        end: i64,
        waiting: Option<i32>,
        kv: Option<f64>,
    },
    Stage {
        id: u8,
        name: u8,
        start: i64,
        end: i64,
        iteration: Option<i64>,
    },
    Token {
        id: u8,
        index: i64,
        emitted: i64,
        iteration: Option<i64>,
        logprobs: Vec<f64>,
        text: String,
    },
}

fn id(n: u8) -> String {
    format!("r{}", n % 6)
}

fn source(n: u8) -> String {
    format!("engine-{}", n % 3)
}

impl Record {
    fn json(&self) -> serde_json::Value {
        use serde_json::json;
        match self {
            Record::Meta { eos } => json!({"kind": "meta", "format": "tokenscope", "version": 1, "eos_token_ids": eos}),
            Record::Request {
                id: r,
                source: s,
                arrival,
                scheduled,
                finished,
                output,
            } => json!({
                "kind": "request", "request_id": id(*r), "source": source(*s), "arrival_ns": arrival,
                "scheduled_ns": scheduled, "finished_ns": finished, "output_tokens": output}),
            Record::Step {
                source: s,
                iteration,
                start,
                end,
                waiting,
                kv,
            } => json!({
                "kind": "iteration", "source": source(*s), "iteration": iteration, "start_ns": start, "end_ns": end,
                "num_waiting": waiting, "kv_usage": kv}),
            Record::Stage {
                id: r,
                name,
                start,
                end,
                iteration,
            } => {
                let stage = ["queue", "prefill", "decode", "other"][usize::from(*name) % 4];
                json!({"kind": "stage", "request_id": id(*r), "stage": stage, "start_ns": start, "end_ns": end,
                       "iteration": iteration})
            }
            Record::Token {
                id: r,
                index,
                emitted,
                iteration,
                logprobs,
                text,
            } => {
                // JSON has no NaN or infinity: those become null, which the format rejects as a missing logprob.
                let candidates: Vec<serde_json::Value> = logprobs
                    .iter()
                    .take(8)
                    .enumerate()
                    .map(|(k, lp)| json!({"token_id": k, "logprob": lp.is_finite().then_some(*lp)}))
                    .collect();
                json!({"kind": "token", "request_id": id(*r), "index": index, "emitted_ns": emitted,
                       "iteration": iteration, "text": text, "candidates": candidates})
            }
        }
    }
}

/// Arbitrary records as a JSON-lines trace: the builder's cross-record rules (duplicates, orphans, references to
/// steps, token order, candidates) on inputs that parse.
pub fn records(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let Ok(records) = Vec::<Record>::arbitrary(&mut u) else {
        return;
    };
    let text: Vec<String> = records.iter().take(256).map(|r| r.json().to_string()).collect();
    jsonl(text.join("\n").as_bytes());
}

/// Bytes as a server's streamed answer, as `tokenscope record` reads it: cut into network chunks of sizes the first
/// byte picks (events split across chunks), framed into events by `eventsource-stream`, each event's data read as an
/// OpenAI, vLLM or llama.cpp chunk, and the stream added as a request with its tokens through a raw capture.
pub fn sse(data: &[u8]) {
    use eventsource_stream::Eventsource;
    use futures::StreamExt;
    let Some((&pick, body)) = data.split_first() else {
        return;
    };
    let size = usize::from(pick % 64) + 1;
    let chunks: Vec<Result<bytes::Bytes, std::convert::Infallible>> = body
        .chunks(size)
        .map(|c| Ok(bytes::Bytes::copy_from_slice(c)))
        .collect();
    let events = futures::executor::block_on(futures::stream::iter(chunks).eventsource().collect::<Vec<_>>());
    let mut t = 1_700_000_000_000_000_000i64;
    let mut kept = Vec::new();
    for event in events {
        // A framing error ends the stream, as it ends a recording ("the stream broke").
        let Ok(event) = event else {
            break;
        };
        t += 1_000_000;
        kept.push(serde_json::json!([t, event.data]));
    }
    let line = serde_json::json!({
        "request_id": "r0", "sent_ns": 1_700_000_000_000_000_000i64, "end_ns": t, "events": kept,
    });
    load(line.to_string().as_bytes(), "jsonl", Some(Kind::OpenaiStream));
}
