//! The gap between a server and its client, in a joined trace (`meta.clock = "joined"`): what the client saw of
//! each request and token against what the server did, on one clock. A client's TTFT above the server's, or a
//! client's inter-token gaps above the server's, is time spent between them: the network, the detokenizer, a proxy.

use serde::Serialize;

use super::metrics::Distribution;
use crate::trace::{Trace, opt_i64};

/// The delivery figures of the requests that have both halves. Times in ms.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Delivery {
    /// Requests with both halves.
    pub requests: u64,
    /// Client TTFT: from the send to the first token received.
    pub client_ttft_ms: Distribution,
    /// Server TTFT of the same requests: from the server's arrival to its first token.
    pub server_ttft_ms: Distribution,
    /// Client TTFT minus server TTFT, per request.
    pub ttft_gap_ms: Distribution,
    /// Per token: from the server producing it to the client receiving it.
    pub token_ms: Distribution,
    /// Client inter-token latency: the gaps between tokens received.
    pub client_itl_ms: Distribution,
}

#[expect(clippy::cast_precision_loss, reason = "ns differences far below 2^53")]
fn ms(ns: i64) -> f64 {
    ns as f64 / 1e6
}

/// The delivery figures of `requests`; `None` when none of them has both halves.
pub fn delivery(trace: &Trace, requests: &[u32]) -> Option<Delivery> {
    let (mut client_ttft, mut server_ttft, mut gap) = (Vec::new(), Vec::new(), Vec::new());
    let (mut token, mut client_itl) = (Vec::new(), Vec::new());
    let mut joined = 0u64;
    for &r in requests {
        let ri = r as usize;
        let Some(sent) = trace.requests.sent_ns.get(ri) else {
            continue;
        };
        joined += 1;
        let tokens = trace.tokens_of(r);
        // A token the server's side has no time for (a log without per-token lines) keeps the client's time as
        // its emission: that is when the client received it.
        let received: Vec<i64> = tokens
            .clone()
            .map(|k| opt_i64(trace.tokens.received_ns[k]).unwrap_or(trace.tokens.emitted_ns[k]))
            .collect();
        for k in tokens {
            if let Some(rec) = opt_i64(trace.tokens.received_ns[k]) {
                token.push(ms(rec - trace.tokens.emitted_ns[k]));
            }
        }
        // One gap per emission as the client received them (a verify step's tokens come as chunks back to back).
        let tk = &trace.tokens;
        let rows = trace.tokens_of(r);
        client_itl.extend((1..received.len()).filter_map(|j| {
            let (a, b) = (rows.start + j - 1, rows.start + j);
            let new_emission = tk.index[b] == tk.index[a] + 1
                && !crate::trace::emission::same_emission(
                    tk.iteration[a],
                    received[j - 1],
                    tk.iteration[b],
                    received[j],
                );
            new_emission.then(|| ms(received[j] - received[j - 1]))
        }));
        let client = received.first().map(|&f| f - sent);
        let server = trace.first_token_ns(r).map(|f| f - trace.requests.arrival_ns[ri]);
        client_ttft.extend(client.map(ms));
        server_ttft.extend(server.map(ms));
        if let (Some(c), Some(s)) = (client, server) {
            gap.push(ms(c - s));
        }
    }
    (joined > 0).then(|| Delivery {
        requests: joined,
        client_ttft_ms: Distribution::of(&mut client_ttft),
        server_ttft_ms: Distribution::of(&mut server_ttft),
        ttft_gap_ms: Distribution::of(&mut gap),
        token_ms: Distribution::of(&mut token),
        client_itl_ms: Distribution::of(&mut client_itl),
    })
}
