//! The `candidates` table's columns.

use super::*;

pub(super) static CANDIDATES: &[Col] = &[
    col!("request_id", "str", "the request", |s| {
        let req = s.token_request();
        request_ids(s, "request_id", s.candidate_token().iter().map(|&t| req[t as usize]))
    }),
    col!(
        "index",
        "u32",
        "the output position of the token it is an alternative of",
        |s| {
            let v: Vec<u32> = s
                .candidate_token()
                .iter()
                .map(|&t| s.trace.tokens.index[t as usize])
                .collect();
            Series::new("index".into(), v)
        }
    ),
    col!(
        "position",
        "u32",
        "1-based place among the token's candidates, as written (most probable first)",
        |s| {
            let mut v = Vec::with_capacity(s.trace.candidates.len());
            for t in 0..s.trace.tokens.len() {
                v.extend(1..=row_u32(s.trace.candidates_of(t).len()));
            }
            Series::new("position".into(), v)
        }
    ),
    col!("token_id", "u32", "vocabulary id", |s| {
        let v: Vec<Option<u32>> = s.trace.candidates.token_id.iter().map(|&i| opt_u32(i)).collect();
        Series::new("token_id".into(), v)
    }),
    col!("text", "str", "decoded text", |s| texts(
        s,
        "text",
        &s.trace.candidates.text
    )),
    col!("logprob", "f64", "natural-log probability", |s| {
        let v: Vec<Option<f64>> = s.trace.candidates.logprob.iter().map(|&l| opt_f64(l)).collect();
        Series::new("logprob".into(), v)
    }),
    col!("special", "bool", "marked special by the producer", |s| {
        let v: Vec<Option<bool>> = s.trace.candidates.special.iter().map(|f| f.get()).collect();
        Series::new("special".into(), v)
    }),
];
