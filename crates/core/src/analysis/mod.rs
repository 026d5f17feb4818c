//! Analysis: pure functions of a `&Trace` that compute the figures the field expects (TTFT, TPOT, E2E, queue, ITL,
//! percentiles, throughput, goodput under SLOs) and the summaries built from them.

pub mod cost;
pub mod delivery;
pub mod diff;
pub mod exact;
pub mod facts;
pub mod findings;
pub mod interference;
pub mod metrics;
pub mod range_index;
pub mod reference;
pub mod samples;
pub mod spec;
pub mod stats;
pub mod summary;
pub mod tokens;
