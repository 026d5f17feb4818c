//! The token passes of a streamed trace. Each batch of token rows is cut into runs (consecutive rows of one
//! request) on rayon's threads; the runs are then met in file order, where a run that goes on from the previous
//! batch is joined to it and a request's runs are checked to be one.

use rustc_hash::FxHashMap;

use super::{StreamError, Streamed};
use crate::analysis::exact::{Second, Tally};
use crate::analysis::facts::RequestFacts;
use crate::analysis::metrics::{Distribution, ms};
use crate::format::parquet::outside;
use crate::format::parquet::stream::{At, Columns, stream};
use crate::ingest::validate::is_epoch_ns;
use crate::trace::NULL_I64;
use crate::trace::emission::same_emission;

/// The columns of a token pass, `kind` first (`iteration` tells a verify step's tokens apart from steps').
const TOKEN_COLUMNS: [&str; 5] = ["kind", "request_id", "index", "emitted_ns", "iteration"];

/// Not a request of the trace: a token of it is an orphan.
const ORPHAN: u32 = u32::MAX - 1;
/// A request the window leaves out: its tokens are left out too.
pub(super) const OUTSIDE: u32 = u32::MAX;

/// Tokens of a group emitted in one time bucket (a timeline's unit), and those of requests that met the objectives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TokenCount {
    /// Tokens.
    pub n: u64,
    /// Tokens of requests that met the objectives.
    pub good: u64,
}

/// Consecutive token rows of one request in a batch.
#[derive(Debug, Clone, Copy)]
struct Run {
    request: u32,
    first_row: u64,
    first_index: i64,
    first_emitted: i64,
    first_iteration: i64,
    last_index: i64,
    last_emitted: i64,
    last_iteration: i64,
    count: u32,
    min_emitted: i64,
    max_emitted: i64,
}

impl Run {
    fn kept(&self) -> bool {
        self.request < ORPHAN
    }
}

/// What one token pass computes: per batch on the worker threads ([`Pass::Work`], from `&self` alone), then merged
/// in file order into its [`Pass::State`].
pub(super) trait Pass: Sync {
    type Work: Send;
    type State: Send;
    fn work(&self) -> Self::Work;
    /// An inter-token latency of a kept request inside a batch (one per emission, `trace::emission`).
    fn gap(&self, _work: &mut Self::Work, _ns: i64) {}
    /// A token of a kept request.
    fn token(&self, _work: &mut Self::Work, _request: u32, _emitted: i64) {}
    /// A batch's work, in file order.
    fn merge(&self, state: &mut Self::State, work: Self::Work);
    /// An inter-token latency of a kept request across two batches.
    fn gap_between(&self, _state: &mut Self::State, _ns: i64) {}
}

/// A batch's runs and work.
struct Batch<W> {
    runs: Vec<Run>,
    incomplete: u64,
    /// The first token found out of `index` order within a run: (row, request id, index, previous index).
    unordered: Option<String>,
    work: W,
}

fn decode<P: Pass>(c: &Columns, at: At, ids: &FxHashMap<Box<str>, u32>, pass: &P) -> Result<Batch<P::Work>, String> {
    c.check_from(0, &["string", "string", "int", "int", "int"])?;
    let mut out = Batch {
        runs: Vec::new(),
        incomplete: 0,
        unordered: None,
        work: pass.work(),
    };
    let mut id: Option<&str> = None;
    for i in 0..c.rows() {
        if c.kind(i) != Some("token") {
            continue;
        }
        let (Some(rid), Some(index), Some(emitted)) = (
            c.str(1, i),
            c.int(2, i).filter(|&n| n >= 0),
            c.int(3, i).filter(|&t| is_epoch_ns(t)),
        ) else {
            out.incomplete += 1;
            continue;
        };
        let iteration = c.int(4, i).unwrap_or(NULL_I64);
        let row = at.first_row + i as u64;
        if id == Some(rid)
            && let Some(run) = out.runs.last_mut()
        {
            if index <= run.last_index {
                out.unordered = Some(format!(
                    "row {row}: token {index} of request {rid} comes after its token {}",
                    run.last_index
                ));
                return Ok(out);
            }
            if run.kept() {
                if index == run.last_index + 1
                    && !same_emission(run.last_iteration, run.last_emitted, iteration, emitted)
                {
                    pass.gap(&mut out.work, emitted - run.last_emitted);
                }
                pass.token(&mut out.work, run.request, emitted);
            }
            run.last_index = index;
            run.last_emitted = emitted;
            run.last_iteration = iteration;
            run.count += 1;
            run.min_emitted = run.min_emitted.min(emitted);
            run.max_emitted = run.max_emitted.max(emitted);
            continue;
        }
        id = Some(rid);
        let request = ids.get(rid).copied().unwrap_or(ORPHAN);
        let run = Run {
            request,
            first_row: row,
            first_index: index,
            first_emitted: emitted,
            first_iteration: iteration,
            last_index: index,
            last_emitted: emitted,
            last_iteration: iteration,
            count: 1,
            min_emitted: emitted,
            max_emitted: emitted,
        };
        if run.kept() {
            pass.token(&mut out.work, request, emitted);
        }
        out.runs.push(run);
    }
    Ok(out)
}

impl Streamed {
    /// Streams the token rows through `pass`. With `facts`, each request's token facts are set and the rows left out
    /// counted (the first token pass); the runs are checked to be whole either way.
    fn token_pass<P: Pass>(&mut self, pass: &P, state: &mut P::State, facts: bool) -> Result<(), StreamError> {
        self.passes += 1;
        let Streamed {
            files,
            ids,
            requests,
            skipped,
            token_extent,
            window,
            ..
        } = self;
        let ids = &*ids;
        let mut open: Option<Run> = None;
        let mut unordered: Option<String> = None;
        let mut last_at: Option<At> = None;
        let paths: Vec<String> = files.iter().map(|f| f.path().display().to_string()).collect();
        let place = |at: At, why: &str| format!("{}: {why}", paths[at.file]);
        let close = |run: Run, requests: &mut [RequestFacts]| -> Result<(), String> {
            if !run.kept() || !facts {
                return Ok(());
            }
            let f = &mut requests[run.request as usize];
            if f.tokens > 0 {
                return Err(format!(
                    "row {}: more tokens of a request whose tokens ended before (a request's tokens must be \
                     together, in index order)",
                    run.first_row
                ));
            }
            f.tokens = run.count;
            f.token0_ns = (run.first_index == 0).then_some(run.first_emitted);
            f.last_token_ns = Some(run.last_emitted);
            Ok(())
        };
        let mut merge = |batch: Batch<P::Work>| -> Result<(), String> {
            if facts {
                skipped.incomplete_tokens += batch.incomplete;
            }
            if let Some(why) = batch.unordered {
                return Err(why);
            }
            pass.merge(state, batch.work);
            for run in batch.runs {
                if facts {
                    if run.request == ORPHAN && window.is_none() {
                        skipped.orphan_tokens += u64::from(run.count);
                    } else if run.kept() {
                        let (lo, hi) = token_extent.unwrap_or((run.min_emitted, run.max_emitted));
                        *token_extent = Some((lo.min(run.min_emitted), hi.max(run.max_emitted)));
                    }
                }
                match open.as_mut() {
                    Some(o) if o.request == run.request && o.kept() => {
                        if run.first_index <= o.last_index {
                            return Err(format!(
                                "row {}: token {} comes after token {} of the same request",
                                run.first_row, run.first_index, o.last_index
                            ));
                        }
                        if run.first_index == o.last_index + 1
                            && !same_emission(o.last_iteration, o.last_emitted, run.first_iteration, run.first_emitted)
                        {
                            pass.gap_between(state, run.first_emitted - o.last_emitted);
                        }
                        o.count += run.count;
                        o.last_index = run.last_index;
                        o.last_emitted = run.last_emitted;
                        o.last_iteration = run.last_iteration;
                    }
                    _ => {
                        if let Some(o) = open.replace(run) {
                            close(o, requests)?;
                        }
                    }
                }
            }
            Ok(())
        };
        let result = stream(
            files,
            &TOKEN_COLUMNS,
            |kind, rg| matches!(kind, None | Some("token")) && window.as_ref().is_none_or(|w| !outside(rg, w)),
            |c, at| decode(c, at, ids, pass),
            |batch: Batch<P::Work>, at: At| {
                last_at = Some(at);
                // Every error of the merge is one of order: kept to be said as such, with the file and row group.
                merge(batch).inspect_err(|why| unordered = Some(place(at, why)))
            },
        );
        if let Some(why) = unordered {
            return Err(StreamError::Unordered(why));
        }
        result?;
        if let (Some(o), Some(at)) = (open, last_at) {
            close(o, requests).map_err(|why| StreamError::Unordered(place(at, &why)))?;
        }
        Ok(())
    }

    /// Pass 2: each request's token facts, and with `keep`, the inter-token latencies' tally (keeping at most
    /// `keep` values).
    ///
    /// # Errors
    /// A file cannot be read; a request's tokens are not together in index order ([`StreamError::Unordered`]).
    pub fn read_tokens(&mut self, keep: Option<usize>) -> Result<Option<Tally>, StreamError> {
        if let Some(keep) = keep {
            let mut tally = Tally::new(keep);
            self.token_pass(&Latencies { keep }, &mut tally, true)?;
            Ok(Some(tally))
        } else {
            self.token_pass(&Nothing, &mut (), true)?;
            Ok(None)
        }
    }

    /// Pass 3 for the latencies: their exact percentiles, from the values in the buckets `second` asks for.
    ///
    /// # Errors
    /// As [`Self::read_tokens`].
    pub fn read_itl_again(&mut self, mut second: Second) -> Result<Distribution, StreamError> {
        let again = Again { second: second.clone() };
        self.token_pass(&again, &mut second, false)?;
        Ok(second.finish())
    }

    /// Pass 3 for a timeline: the tokens per group and bucket of `every` ns from `start` (the bucket: (emitted −
    /// start) / every, rounded down), and those of requests that met the objectives; `group` and `good` are given
    /// per request. Memory holds a count per group and bucket, never one per token.
    ///
    /// # Errors
    /// As [`Self::read_tokens`].
    pub fn count_tokens(
        &mut self,
        start: i64,
        every: i64,
        group: &[u32],
        good: &[bool],
    ) -> Result<FxHashMap<(u32, i64), TokenCount>, StreamError> {
        let mut counts = FxHashMap::default();
        self.token_pass(
            &Buckets {
                start,
                every,
                group,
                good,
            },
            &mut counts,
            false,
        )?;
        Ok(counts)
    }
}

/// Token facts only.
struct Nothing;

impl Pass for Nothing {
    type Work = ();
    type State = ();
    fn work(&self) {}
    fn merge(&self, (): &mut (), (): ()) {}
}

/// The inter-token latencies, ms, counted per bucket on each thread.
struct Latencies {
    keep: usize,
}

impl Pass for Latencies {
    type Work = Tally;
    type State = Tally;
    fn work(&self) -> Tally {
        Tally::new(self.keep)
    }
    fn gap(&self, work: &mut Tally, ns: i64) {
        work.add(ms(ns));
    }
    fn merge(&self, state: &mut Tally, work: Tally) {
        state.merge(work);
    }
    fn gap_between(&self, state: &mut Tally, ns: i64) {
        state.add(ms(ns));
    }
}

/// The latencies the second look at them wants.
struct Again {
    second: Second,
}

impl Pass for Again {
    type Work = Vec<f64>;
    type State = Second;
    fn work(&self) -> Vec<f64> {
        Vec::new()
    }
    fn gap(&self, work: &mut Vec<f64>, ns: i64) {
        let v = ms(ns);
        if self.second.wants(v) {
            work.push(v);
        }
    }
    fn merge(&self, state: &mut Second, work: Vec<f64>) {
        for v in work {
            state.add(v);
        }
    }
    fn gap_between(&self, state: &mut Second, ns: i64) {
        state.add(ms(ns));
    }
}

/// Tokens per group and time bucket.
struct Buckets<'a> {
    start: i64,
    every: i64,
    group: &'a [u32],
    good: &'a [bool],
}

impl Pass for Buckets<'_> {
    type Work = FxHashMap<(u32, i64), TokenCount>;
    type State = FxHashMap<(u32, i64), TokenCount>;
    fn work(&self) -> Self::Work {
        FxHashMap::default()
    }
    fn token(&self, work: &mut Self::Work, request: u32, emitted: i64) {
        let r = request as usize;
        let bucket = (emitted - self.start).div_euclid(self.every);
        let c = work.entry((self.group[r], bucket)).or_default();
        c.n += 1;
        if self.good[r] {
            c.good += 1;
        }
    }
    fn merge(&self, state: &mut Self::State, work: Self::Work) {
        for (key, c) in work {
            let s = state.entry(key).or_default();
            s.n += c.n;
            s.good += c.good;
        }
    }
}
