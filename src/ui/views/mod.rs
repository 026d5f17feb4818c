//! The views of a trace, each drawn from the state it is given: the waterfall, the high-power view (microscope), the
//! findings, the statistics, the query, the timeline, a comparison's token answers, a trace drawn while it loads.

pub mod compare_tokens;
pub mod findings;
pub mod microscope;
pub mod preview;
#[cfg(feature = "query")]
pub mod query;
pub mod stats;
#[cfg(feature = "query")]
pub mod timeline;
pub mod waterfall;
