use super::*;
use crate::ingest::Progress;

/// 2025-11-29T08:00:00Z, ns.
const T: i64 = 1_764_403_200_000_000_000;
const MS: i64 = 1_000_000;
const S: i64 = 1_000 * MS;

fn trace_of(lines: &[String]) -> (Trace, Report) {
    let text = lines.join("\n");
    let mut b = TraceBuilder::default();
    crate::format::jsonl::read_from(
        text.as_bytes(),
        std::path::Path::new("t.jsonl"),
        0,
        &mut b,
        &Progress::default(),
    )
    .unwrap();
    b.finish()
}

/// A client request sent at `sent` with `input` prompt tokens, whose tokens `ids` arrived every 50 ms from
/// `first`.
fn client_request(id: &str, sent: i64, input: u32, first: i64, ids: &[u32]) -> Vec<String> {
    let mut out = vec![format!(
        r#"{{"kind":"request","request_id":"{id}","arrival_ns":{sent},"input_tokens":{input},"output_tokens":{}}}"#,
        ids.len()
    )];
    for (i, tid) in ids.iter().enumerate() {
        let at = first + 50 * MS * i as i64;
        out.push(format!(
            r#"{{"kind":"token","request_id":"{id}","index":{i},"emitted_ns":{at},"token_id":{tid},"text":"t{tid}","logprob":-0.5,"candidates":[{{"token_id":{tid},"text":"t{tid}","logprob":-0.5}},{{"token_id":99,"text":"x","logprob":-0.1}}]}}"#
        ));
    }
    out
}

/// The server's side of the same request: received `up` after the send, each token produced `down` before the
/// client received it, on a clock `skew` behind the client's; one step per token, numbered from `step`.
fn server_request(id: &str, c: &[String], skew: i64, up: i64, down: i64, step: i64) -> Vec<String> {
    let (client, _) = trace_of(c);
    let sent = client.requests.arrival_ns[0];
    let arrival = sent + up - skew;
    let input = client.requests.input_tokens.at(0).unwrap();
    let mut out = vec![format!(
        r#"{{"kind":"request","request_id":"{id}","source":"llama-server","arrival_ns":{arrival},"scheduled_ns":{arrival},"input_tokens":{input}}}"#
    )];
    for k in client.tokens_of(0) {
        let i = client.tokens.index[k];
        let at = client.tokens.emitted_ns[k] - down - skew;
        let tid = client.tokens.token_id[k];
        let it = step + i64::from(i);
        out.push(format!(
            r#"{{"kind":"iteration","source":"llama-server","iteration":{it},"start_ns":{},"end_ns":{at},"num_decode_tokens":1}}"#,
            at - 10 * MS
        ));
        out.push(format!(
            r#"{{"kind":"token","request_id":"{id}","index":{i},"emitted_ns":{at},"iteration":{it},"token_id":{tid}}}"#
        ));
    }
    out.push(format!(
        r#"{{"kind":"stage","request_id":"{id}","stage":"prefill","start_ns":{arrival},"end_ns":{},"tokens":{input}}}"#,
        arrival + 20 * MS
    ));
    out
}

fn halves(skew: i64, server_ids: [&str; 2]) -> (Trace, Trace) {
    let c1 = client_request("rec-00000", T, 10, T + 100 * MS, &[5, 6, 7, 8]);
    let c2 = client_request("rec-00001", T + 50 * MS, 20, T + 300 * MS, &[9, 10, 11, 12]);
    let mut client = vec![r#"{"kind":"meta","clock":"client","model":"gemma"}"#.to_owned()];
    client.extend(c1.clone());
    client.extend(c2.clone());
    let mut server = vec![r#"{"kind":"meta","engine":"llama.cpp","clock":"anchored"}"#.to_owned()];
    server.extend(server_request(server_ids[0], &c1, skew, MS, 3 * MS, 1));
    server.extend(server_request(server_ids[1], &c2, skew, MS, 3 * MS, 11));
    (trace_of(&client).0, trace_of(&server).0)
}

#[test]
fn pairs_by_tokens_and_time_and_places_the_offset_between_the_bounds() {
    // The server's clock is 2 s behind; a request reaches it 1 ms after the send, a token the client 3 ms after
    // it was produced. Bounds: offset >= 2 s - 1 ms (sends), offset <= 2 s + 3 ms (tokens): 2 s + 1 ms ± 2 ms.
    let (client, server) = halves(2 * S, ["task-3", "task-7"]);
    let join = pair(&client, &server, ("rec", "log")).unwrap();
    assert_eq!(join.pairs, vec![(0, 0), (1, 1)]);
    assert_eq!(join.by_id, 0);
    assert_eq!(join.offset_ns, 2 * S + MS);
    assert_eq!(join.uncertainty_ns, Some(2 * MS));
    assert_eq!(join.conflict_ns, 0);

    let (t, report) = build(client.clone(), &server, &join, Report::default());
    assert_eq!(t.meta.clock.as_deref(), Some(JOINED));
    assert_eq!(t.meta.engine.as_deref(), Some("llama.cpp"));
    let r = t.request_row("rec-00000").unwrap();
    // Sent at T, reached the server 1 ms later on its clock: T + 1 ms - 2 s, moved by 2 s + 1 ms.
    assert_eq!(t.requests.sent_ns.at(r as usize), Some(T));
    assert_eq!(t.requests.arrival_ns[r as usize], T + 2 * MS);
    assert_eq!(t.label(t.requests.source[r as usize]), Some("llama-server"));
    let toks = t.tokens_of(r);
    assert_eq!(toks.len(), 4);
    let k = toks.start + 1;
    // Received at T + 150 ms; produced 3 ms before on the server's clock, moved: T + 148 ms.
    assert_eq!(t.tokens.received_ns[k], T + 150 * MS);
    assert_eq!(t.tokens.emitted_ns[k], T + 148 * MS);
    assert_eq!(delivery_ns(&t, k), Some(2 * MS));
    assert_eq!(t.tokens.iteration[k], 2);
    assert_eq!(t.candidates_of(k).len(), 2, "the client's candidates are kept");
    assert_eq!(t.texts.get(t.tokens.text[k]), Some("t6"));
    // The server's prefill stage, moved with its request.
    let stages = t.explicit_stages_of(r);
    assert_eq!(stages.len(), 1);
    assert_eq!(t.stages.start_ns[stages.start], T + 2 * MS);
    assert_eq!(t.iterations.len(), 8);
    assert!(report.notes[0].starts_with("Joined 2 of 2 client requests with the server's: 0 by id, 2 by"));
    assert!(
        report.notes[1].contains("+2001.000 ms ± 2.000 ms"),
        "{}",
        report.notes[1]
    );
}

#[test]
fn pairs_by_the_id_the_server_kept() {
    // vLLM answers chatcmpl-<the client's X-Request-Id>, its engine appends -<random>.
    let (client, server) = halves(0, ["chatcmpl-rec-00000-9f3a2b1c", "chatcmpl-rec-00001-0d1e2f3a"]);
    let join = pair(&client, &server, ("rec", "spans")).unwrap();
    assert_eq!(join.pairs, vec![(0, 0), (1, 1)]);
    assert_eq!(join.by_id, 2);
    assert_eq!(join.offset_ns, MS);
    // An id the server kept for a request of another shape is not taken on trust: the shapes decide.
    let (client, server) = halves(0, ["chatcmpl-rec-00001-9f3a2b1c", "chatcmpl-rec-00000-0d1e2f3a"]);
    let join = pair(&client, &server, ("rec", "spans")).unwrap();
    assert_eq!(join.by_id, 0);
    assert_eq!(join.pairs, vec![(0, 0), (1, 1)]);
}

#[test]
fn pairs_by_the_trace_id_the_client_sent_in_traceparent() {
    // SGLang and vLLM put the W3C trace id of the request's traceparent on their spans; the recording keeps the
    // one it sent. Server ids are the engine's own (no relation to the client's).
    let (client, mut server) = halves(0, ["5f2b", "a9c0"]);
    let (mut client, ids) = (
        client,
        ["0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"],
    );
    for (r, id) in ids.iter().enumerate() {
        client.requests.trace_id[r] = client.labels.intern(id);
        // The server's rows are in the same order (arrival): the first is the first client request's.
        server.requests.trace_id[r] = server.labels.intern(id);
    }
    let join = pair(&client, &server, ("rec", "spans")).unwrap();
    assert_eq!(join.by_id, 2);
    assert_eq!(join.pairs, vec![(0, 0), (1, 1)]);
}

#[test]
fn id_candidates_respect_dash_boundaries() {
    let c: Vec<&str> = id_candidates("chatcmpl-rec-00001-9f").collect();
    assert!(c.contains(&"rec-00001"));
    assert!(c.contains(&"chatcmpl-rec-00001-9f"));
    assert!(!c.contains(&"rec-0000"), "never a piece of a segment");
}

#[test]
fn refuses_halves_of_different_runs() {
    let (client, _) = halves(0, ["a", "b"]);
    // Another run: other prompts, other outputs.
    let other = client_request("x", T, 333, T + 10 * MS, &[40, 41]);
    let server = trace_of(&server_request("task-1", &other, 0, MS, MS, 1)).0;
    let e = pair(&client, &server, ("rec.parquet", "server.log"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("cannot join rec.parquet with server.log"), "{e}");
    assert!(
        e.contains("only 0 of 2 client requests and 1 server requests pair up"),
        "{e}"
    );
}

#[test]
fn refuses_wall_clocks_days_apart() {
    let (client, server) = halves(3 * 86_400 * S, ["rec-00000", "rec-00001"]);
    let mut server = server;
    server.meta.clock = None;
    let e = pair(&client, &server, ("rec", "spans")).unwrap_err().to_string();
    assert!(e.contains("their clocks are 3 days apart"), "{e}");
    // The same offset on a clock that counts from a process's start is only an anchor to find.
    server.meta.clock = Some(ANCHORED.to_owned());
    assert_eq!(
        pair(&client, &server, ("rec", "log")).unwrap().offset_ns,
        3 * 86_400 * S + MS
    );
}

#[test]
fn refuses_an_empty_side() {
    let (client, _) = halves(0, ["a", "b"]);
    let e = pair(&client, &Trace::default(), ("rec", "empty.log"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("empty.log has no requests and no engine steps"), "{e}");
}

#[test]
fn keeps_what_pairs_with_nothing() {
    let (_, server) = halves(0, ["task-1", "task-2"]);
    // The two requests the server logged, and a third it never saw.
    let mut lines = vec![r#"{"kind":"meta","clock":"client"}"#.to_owned()];
    lines.extend(client_request("rec-00000", T, 10, T + 100 * MS, &[5, 6, 7, 8]));
    lines.extend(client_request(
        "rec-00001",
        T + 50 * MS,
        20,
        T + 300 * MS,
        &[9, 10, 11, 12],
    ));
    lines.extend(client_request("rec-00002", T + 5 * S, 7, T + 6 * S, &[1, 2, 3, 4]));
    let client = trace_of(&lines).0;
    let join = pair(&client, &server, ("rec", "log")).unwrap();
    assert_eq!(join.pairs.len(), 2);
    let (t, report) = build(client.clone(), &server, &join, Report::default());
    assert_eq!(t.requests.len(), 3);
    let lone = t.request_row("rec-00002").unwrap();
    assert_eq!(
        t.requests.sent_ns.at(lone as usize),
        None,
        "a client-only request keeps its own times"
    );
    assert_eq!(t.requests.arrival_ns[lone as usize], T + 5 * S);
    assert!(
        report.notes[0].contains("1 kept on the client's side only"),
        "{}",
        report.notes[0]
    );
}
