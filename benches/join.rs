//! Join benchmark: opening a client's half and a server's half of one run together (joined into one trace) against
//! opening the two apart, in the same run (`docs/PERFORMANCE.md`, "Both halves"; the target is at most 1.2x).
//!
//! `cargo bench --bench join [-- --requests N --runs R]`. The run is `tokenscope synth --scenario large` (50,000
//! requests, ~10 M output tokens with top-5 candidates, ~100,000 steps): the server's half is it as written, the
//! client's the same records marked `clock = "client"` with every request and token time 3 ms later (so each pair
//! bounds the clocks' offset at 3 ms from both sides). The halves pair by id. Files are generated once into
//! `target/bench-data/`.

use std::path::{Path, PathBuf};

use tokenscope::ingest::Progress;
use tokenscope::load::{LoadOptions, load_many};

mod common;

fn halves(requests: usize) -> (PathBuf, PathBuf) {
    let (server, _) = common::large_files(requests);
    let client = server.with_file_name(format!("join-client-{requests}.parquet"));
    if !client.exists() {
        let mut t = common::load_whole(&server);
        t.meta.clock = Some("client".to_owned());
        let shift = 3_000_000;
        for a in &mut t.requests.arrival_ns {
            *a += shift;
        }
        for column in [
            &mut t.requests.first_token_ns,
            &mut t.requests.finished_ns,
            &mut t.requests.scheduled_ns,
        ] {
            column.map_known(|v| v + shift);
        }
        for e in &mut t.tokens.emitted_ns {
            *e += shift;
        }
        tokenscope::format::write(&t, &client).unwrap_or_else(|e| panic!("{e}"));
    }
    (client, server)
}

fn open(paths: &[&Path]) -> usize {
    match load_many(paths, &Progress::default(), LoadOptions::default()) {
        Ok(l) => l.trace.token_count(),
        Err(e) => panic!("{e}"),
    }
}

fn main() {
    let requests = common::flag("--requests", 50_000);
    let runs = common::flag("--runs", 3).max(1);
    let (client, server) = halves(requests);
    println!("join benchmark: synth large, {requests} requests, median of {runs} runs (in process)");
    let (apart, _, n) = common::time(runs, || open(&[&client]) + open(&[&server]));
    let (joined, _, m) = common::time(runs, || open(&[&client, &server]));
    assert_eq!(m * 2, n, "every token of the client's half has its server's");
    // Where the join's time goes: pairing (the rest is building the one trace).
    let load = |p: &Path| match tokenscope::load::load(p, &Progress::default()) {
        Ok(l) => l,
        Err(e) => panic!("{e}"),
    };
    let (c, s) = (load(&client), load(&server));
    let (pair_ms, _, pairs) = common::time(runs, || {
        tokenscope::load::join::pair(&c.trace, &s.trace, ("client", "server")).unwrap_or_else(|e| panic!("{e}"))
    });
    assert_eq!(pairs.pairs.len(), requests, "every request pairs by id");
    println!("pair:                             {pair_ms:>9.0} ms");
    println!("open apart (client, then server): {apart:>9.0} ms");
    println!("open together, joined:            {joined:>9.0} ms");
    println!(
        "joined / apart:                   {:>9.2}x (target <= 1.2x)",
        joined / apart
    );
}
