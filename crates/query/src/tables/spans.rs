//! The columns of the tables of spans: `stages` (every span of every request) and `transfers` (its KV transfers).

use super::*;
use tokenscope_core::trace::StageKind;

pub(super) static STAGES: &[Col] = &[
    col!("request_id", "str", "the request", |s| {
        request_ids(s, "request_id", s.stages().iter().map(|(r, _)| *r))
    }),
    col!(
        "stage",
        "str",
        "queue, prefill, decode, preempted, kv_transfer, tokenize, detokenize, other, waiting",
        |s| {
            let v: Vec<&str> = s.stages().iter().map(|(_, st)| st.kind.name()).collect();
            Series::new("stage".into(), v)
        }
    ),
    col!("start_ns", "i64", "start (ns since the Unix epoch)", |s| {
        let v: Vec<i64> = s.stages().iter().map(|(_, st)| st.start_ns).collect();
        Series::new("start_ns".into(), v)
    }),
    col!("end_ns", "i64", "end", |s| {
        let v: Vec<i64> = s.stages().iter().map(|(_, st)| st.end_ns).collect();
        Series::new("end_ns".into(), v)
    }),
    col!(
        "start_s",
        "f64",
        "start, seconds since the trace's first arrival",
        |s| {
            let v: Vec<f64> = s.stages().iter().map(|(_, st)| s.seconds(st.start_ns)).collect();
            Series::new("start_s".into(), v)
        }
    ),
    col!("duration_ms", "f64", "end − start", |s| {
        let v: Vec<f64> = s.stages().iter().map(|(_, st)| ms(st.end_ns - st.start_ns)).collect();
        Series::new("duration_ms".into(), v)
    }),
    col!("iteration", "i64", "the engine step the span belongs to", |s| {
        let v: Vec<Option<i64>> = s.stages().iter().map(|(_, st)| st.iteration).collect();
        Series::new("iteration".into(), v)
    }),
    col!("tokens", "u32", "tokens computed for the request in the span", |s| {
        let v: Vec<Option<u32>> = s.stages().iter().map(|(_, st)| st.tokens).collect();
        Series::new("tokens".into(), v)
    }),
    col!(
        "derived",
        "bool",
        "true when derived from the request's times rather than written in the trace",
        |s| {
            let v: Vec<bool> = s.stages().iter().map(|(_, st)| st.derived).collect();
            Series::new("derived".into(), v)
        }
    ),
];

/// The explicit `kv_transfer` stages, as (request row, stage row), in the stages' order (by request, then start).
fn transfers<'a>(s: &'a Source<'_>) -> impl Iterator<Item = (u32, usize)> + 'a {
    let st = &s.trace.stages;
    (0..st.len())
        .filter(|&i| st.kind[i] == StageKind::KvTransfer)
        .map(|i| (st.request[i], i))
}

pub(super) static TRANSFERS: &[Col] = &[
    col!("request_id", "str", "the request", |s| {
        request_ids(s, "request_id", transfers(s).map(|(r, _)| r))
    }),
    col!(
        "from_source",
        "str",
        "the instance the KV moved from (the request's `source`, where it prefilled)",
        |s| {
            let ids: Vec<u32> = transfers(s).map(|(r, _)| s.trace.requests.source[r as usize]).collect();
            labels(s, "from_source", &ids)
        }
    ),
    col!(
        "to_source",
        "str",
        "the instance it moved to (the request's `decode_source`); null where the source does not say",
        |s| {
            let ids: Vec<u32> = transfers(s)
                .map(|(r, _)| s.trace.requests.decode_source[r as usize])
                .collect();
            labels(s, "to_source", &ids)
        }
    ),
    col!("start_ns", "i64", "start (ns since the Unix epoch)", |s| {
        let v: Vec<i64> = transfers(s).map(|(_, i)| s.trace.stages.start_ns[i]).collect();
        Series::new("start_ns".into(), v)
    }),
    col!("end_ns", "i64", "end", |s| {
        let v: Vec<i64> = transfers(s).map(|(_, i)| s.trace.stages.end_ns[i]).collect();
        Series::new("end_ns".into(), v)
    }),
    col!(
        "start_s",
        "f64",
        "start, seconds since the trace's first arrival",
        |s| {
            let v: Vec<f64> = transfers(s)
                .map(|(_, i)| s.seconds(s.trace.stages.start_ns[i]))
                .collect();
            Series::new("start_s".into(), v)
        }
    ),
    col!("duration_ms", "f64", "end − start", |s| {
        let st = &s.trace.stages;
        let v: Vec<f64> = transfers(s).map(|(_, i)| ms(st.end_ns[i] - st.start_ns[i])).collect();
        Series::new("duration_ms".into(), v)
    }),
    col!("tokens", "u32", "tokens whose KV moved, where the source says", |s| {
        let v: Vec<Option<u32>> = transfers(s).map(|(_, i)| s.trace.stages.tokens[i]).collect();
        Series::new("tokens".into(), v)
    }),
    col!("bytes", "u64", "bytes moved, where the source says", |s| {
        let v: Vec<Option<u64>> = transfers(s).map(|(_, i)| s.trace.stages.bytes[i]).collect();
        Series::new("bytes".into(), v)
    }),
    col!("retries", "u32", "retries, where the source says", |s| {
        let v: Vec<Option<u32>> = transfers(s).map(|(_, i)| s.trace.stages.retries[i]).collect();
        Series::new("retries".into(), v)
    }),
];
