//! `xlarge`: the `large` workload over and over, about 100 M output tokens. Ten parts of 50,000 requests each run one
//! after another on the same four instances: each part is a simulation of its own that starts once the last has
//! drained, with its steps numbered on from the last's and its request ids prefixed `pK-`. The parts are written to
//! one Parquet file as they are simulated, so memory holds one part; the whole trace at once would take about
//! 15 GB.

use std::path::Path;

use super::overrides::Overrides;
use super::{SynthError, SynthOptions, configure, flag_overrides, scenarios, simulate};
use tokenscope_core::format::{WriteError, encoding_of, parquet::TraceWriter};
use tokenscope_core::trace::Trace;
use tokenscope_core::trace::report::Encoding;

/// Why `xlarge` cannot be generated in memory.
pub const IN_PARTS: &str = "the xlarge scenario is written part by part: give -o FILE.parquet";
/// Requests of each part.
pub const PART_REQUESTS: usize = 50_000;
/// Part K numbers its steps from K times this.
const PART_ITERATIONS: i64 = 1_000_000_000;
/// Idle time between one part's last step and the next part's first arrival.
const PART_GAP_NS: i64 = 1_000_000_000;

/// What was written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Written {
    /// Parts simulated.
    pub parts: usize,
    /// Requests.
    pub requests: u64,
    /// Token records.
    pub tokens: u64,
    /// Steps.
    pub iterations: u64,
    /// Candidates.
    pub candidates: u64,
}

/// The latest time of a trace: its last finish or step end.
fn end_ns(trace: &Trace) -> i64 {
    let finishes = (0..trace.request_count() as u32).filter_map(|r| trace.finish_ns(r));
    finishes
        .chain(trace.iterations.end_ns.iter().copied())
        .max()
        .unwrap_or(scenarios::T0_NS)
}

/// Simulates `xlarge` (`options.requests`, default 500,000, in parts of [`PART_REQUESTS`]) with the engines changed
/// by `set`, writing each part to the Parquet file `path` as it is done; `progress` hears of each part (`done`,
/// `parts`).
///
/// # Errors
/// A path that is not `.parquet`, `--plant` (it belongs to one part, not the whole), or the writer's failure.
pub fn write(
    options: &SynthOptions,
    set: &Overrides,
    path: &Path,
    progress: impl FnMut(usize, usize),
) -> Result<Written, SynthError> {
    write_in_parts(options, set, path, PART_REQUESTS, progress)
}

/// [`write`] with parts of `part_requests` requests.
fn write_in_parts(
    options: &SynthOptions,
    set: &Overrides,
    path: &Path,
    part_requests: usize,
    mut progress: impl FnMut(usize, usize),
) -> Result<Written, SynthError> {
    if encoding_of(path) != Some(Encoding::Parquet) {
        return Err(SynthError::BadOption(IN_PARTS.to_owned()));
    }
    if options.plant.is_some() {
        return Err(SynthError::BadOption(
            "--plant is not available with xlarge: plant the incident in `large`, or in a replay".to_owned(),
        ));
    }
    let requests = options.requests.unwrap_or(500_000).max(1);
    let part_requests = part_requests.max(1);
    let parts = requests.div_ceil(part_requests);
    let failed = |source| {
        SynthError::Write(WriteError::Parquet {
            path: path.display().to_string(),
            source,
        })
    };
    let mut writer =
        TraceWriter::create(path, tokenscope_core::format::parquet::WRITE_ROW_GROUP_ROWS).map_err(failed)?;
    let mut written = Written::default();
    let mut next_start = scenarios::T0_NS;
    for k in 0..parts {
        let n = part_requests.min(requests - k * part_requests);
        let (mut config, mut arrivals) = scenarios::large(options.seed.wrapping_add(k as u64), n);
        configure(&mut config, &flag_overrides(options).then(set), &[])?;
        config.first_iteration = PART_ITERATIONS * k as i64;
        let shift = next_start - scenarios::T0_NS;
        for a in &mut arrivals {
            a.at_ns += shift;
            a.id = format!("p{k}-{}", a.id);
        }
        let trace = simulate(&config, arrivals, None)?;
        writer.append(&trace).map_err(failed)?;
        next_start = end_ns(&trace) + PART_GAP_NS;
        written.parts += 1;
        written.requests += trace.request_count() as u64;
        written.tokens += trace.token_count() as u64;
        written.iterations += trace.iterations.len() as u64;
        written.candidates += trace.candidates.len() as u64;
        progress(k + 1, parts);
    }
    writer.close().map_err(failed)?;
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Scenario;
    use crate::arrivals::ReplayOptions;
    use tokenscope_core::ingest::Progress;
    use tokenscope_core::load::load;

    fn options(requests: usize) -> SynthOptions {
        SynthOptions {
            scenario: Scenario::Xlarge,
            seed: 7,
            requests: Some(requests),
            arrivals: None,
            replay: ReplayOptions::default(),
            sources: 4,
            prefix_cache_tokens: None,
            profile: crate::ProfileChoice::default(),
            chunked_prefill: None,
            plant: None,
        }
    }

    #[test]
    fn parts_follow_one_another_in_one_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.parquet");
        // 70 requests in parts of 30: 30, 30 and 10.
        let mut heard = Vec::new();
        let w = write_in_parts(&options(70), &Overrides::default(), &path, 30, |d, n| {
            heard.push((d, n));
        })
        .unwrap();
        assert_eq!((w.parts, w.requests), (3, 70));
        assert_eq!(heard, [(1, 3), (2, 3), (3, 3)]);
        let loaded = load(&path, &Progress::default()).unwrap();
        let t = &loaded.trace;
        assert!(loaded.report.rejected.is_empty(), "{:?}", loaded.report.rejected);
        assert_eq!(t.request_count(), 70);
        assert_eq!(
            (t.token_count() as u64, t.iterations.len() as u64),
            (w.tokens, w.iterations)
        );
        // Requests by arrival: each part's after the last part's last step, a second later at least.
        let part_of = |r: u32| t.request_id(r)[1..2].parse::<usize>().unwrap();
        let count = |k: usize| (0..70).filter(|&r| part_of(r) == k).count();
        assert_eq!([count(0), count(1), count(2)], [30, 30, 10]);
        for k in 1..3 {
            let first = (0..70u32).find(|&r| part_of(r) == k).unwrap();
            let before = (0..70u32)
                .filter(|&r| part_of(r) == k - 1)
                .map(|r| t.finish_ns(r).unwrap())
                .max()
                .unwrap();
            assert!(t.requests.arrival_ns[first as usize] >= before + PART_GAP_NS);
        }
        // Steps numbered on: part 2's from 2 x 10^9.
        assert!(t.iterations.iteration.iter().any(|&i| i >= 2 * PART_ITERATIONS));
        assert!(t.iterations.iteration.iter().any(|&i| i < PART_ITERATIONS));
        let jsonl = dir.path().join("x.jsonl");
        let e = write(&options(60), &Overrides::default(), &jsonl, |_, _| {}).unwrap_err();
        assert!(e.to_string().contains("-o FILE.parquet"), "{e}");
    }
}
