//! The KV transfers of a range (disaggregated serving): the moves of requests' KV caches from the instance that
//! prefilled them to the one that decodes them, that overlap it.

use crate::trace::{StageKind, Trace};

/// One request's transfer in the range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Transfer {
    /// Request row.
    pub request: u32,
    /// The transfer's whole time, ms.
    pub ms: f64,
    /// Of it, the part inside the range, ms.
    pub in_range_ms: f64,
    /// Tokens whose KV moved, where the trace says.
    pub tokens: Option<u32>,
    /// Bytes moved, where the trace says.
    pub bytes: Option<u64>,
}

/// The transfers overlapping a range, longest first.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Transfers {
    /// Every transfer overlapping the range (a request's several transfers each).
    pub list: Vec<Transfer>,
    /// Their time inside the range, summed, ms.
    pub in_range_ms: f64,
    /// The tokens they moved, summed; `None` when a transfer does not say.
    pub tokens: Option<u64>,
    /// The bytes they moved, summed; `None` when a transfer does not say.
    pub bytes: Option<u64>,
    /// Of those, the bytes in flight inside the range: each transfer's bytes times the share of its time inside
    /// (a transfer read as moving at one rate); `None` when a transfer does not say its bytes.
    pub in_range_bytes: Option<u64>,
}

/// The `kv_transfer` stages overlapping `[from_ns, to_ns]`.
pub fn in_range(trace: &Trace, from_ns: i64, to_ns: i64) -> Transfers {
    let st = &trace.stages;
    let mut list: Vec<Transfer> = (0..st.len())
        .filter(|&s| st.kind[s] == StageKind::KvTransfer && st.start_ns[s] <= to_ns && st.end_ns[s] >= from_ns)
        .map(|s| {
            let inside = (st.end_ns[s].min(to_ns) - st.start_ns[s].max(from_ns)).max(0);
            Transfer {
                request: st.request[s],
                ms: super::ms(st.end_ns[s] - st.start_ns[s]),
                in_range_ms: super::ms(inside),
                tokens: st.tokens[s],
                bytes: st.bytes[s],
            }
        })
        .collect();
    list.sort_by(|a, b| b.ms.total_cmp(&a.ms).then(a.request.cmp(&b.request)));
    #[expect(clippy::cast_possible_truncation, reason = "a share of a u64, rounded")]
    #[expect(clippy::cast_sign_loss, reason = "a share of a u64 is >= 0")]
    #[expect(clippy::cast_precision_loss, reason = "bytes to a ratio")]
    let inside = |t: &Transfer| {
        let share = if t.ms > 0.0 { t.in_range_ms / t.ms } else { 1.0 };
        t.bytes.map(|b| (b as f64 * share).round() as u64)
    };
    Transfers {
        in_range_ms: list.iter().map(|t| t.in_range_ms).sum(),
        tokens: list.iter().map(|t| t.tokens.map(u64::from)).sum(),
        bytes: list.iter().map(|t| t.bytes).sum(),
        in_range_bytes: list.iter().map(inside).sum(),
        list,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::trace_of;

    /// 2025-11-29 08:00:00 UTC, ns.
    const T0: i64 = 1_764_403_200_000_000_000;

    #[test]
    fn a_range_counts_the_transfers_it_overlaps_and_their_time_inside_it() {
        // r1 moves 2,000 tokens (300 MB) over 10-40 ms, r2 500 tokens (75 MB) over 50-55 ms, r3 over 90-100 ms
        // (tokens and bytes unknown).
        let t = trace_of(
            r#"{"kind":"request","request_id":"r1","source":"p","decode_source":"d","arrival_ns":1764403200000000000}
{"kind":"request","request_id":"r2","source":"p","decode_source":"d","arrival_ns":1764403200000000001}
{"kind":"request","request_id":"r3","source":"p","decode_source":"d","arrival_ns":1764403200000000002}
{"kind":"stage","request_id":"r1","stage":"kv_transfer","start_ns":1764403200010000000,"end_ns":1764403200040000000,"tokens":2000,"bytes":300000000}
{"kind":"stage","request_id":"r2","stage":"kv_transfer","start_ns":1764403200050000000,"end_ns":1764403200055000000,"tokens":500,"bytes":75000000}
{"kind":"stage","request_id":"r3","stage":"kv_transfer","start_ns":1764403200090000000,"end_ns":1764403200100000000}
"#,
        );
        // 30-60 ms: r1's last 10 ms and r2's whole 5 ms; 2,500 tokens.
        let x = in_range(&t, T0 + 30_000_000, T0 + 60_000_000);
        let got: Vec<(&str, f64, f64)> = x
            .list
            .iter()
            .map(|m| (t.request_id(m.request), m.ms, m.in_range_ms))
            .collect();
        assert_eq!(got, [("r1", 30.0, 10.0), ("r2", 5.0, 5.0)]);
        assert_eq!((x.in_range_ms, x.tokens), (15.0, Some(2_500)));
        // 375 MB moved; in flight inside the range, r1's last third (100 MB) and r2's whole 75 MB.
        assert_eq!((x.bytes, x.in_range_bytes), (Some(375_000_000), Some(175_000_000)));
        // With r3, whose tokens are not in the trace: the sum of tokens is absent, not r1's and r2's alone.
        let x = in_range(&t, T0, T0 + 200_000_000);
        assert_eq!(x.list.len(), 3);
        assert_eq!(
            (x.in_range_ms, x.tokens, x.bytes, x.in_range_bytes),
            (45.0, None, None, None)
        );
        assert!(in_range(&t, T0 + 60_000_000, T0 + 80_000_000).list.is_empty());
    }
}
