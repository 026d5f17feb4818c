//! tokenscope's questions in SQL and its metrics over time, through polars.
//!
//! - [`tables`]: the trace as the tables `requests`, `tokens`, `steps`, `stages` and `candidates`.
//! - [`sql`]: a SQL query over them ([`run`]), with errors that name the table or column at fault.
//! - [`timeline`]: request rate, throughput, goodput, latency percentiles, queue and KV use per time bucket.
//! - [`dataset`]: the figures of a dataset of Parquet files, by `sql/tokenscope.sql` on the streaming engine.
//! - [`exact`]: exact nearest-rank percentiles of more values than memory holds, in two passes (the core's).
//! - [`result`]: a result as plain cells, and its CSV and JSON.
//!
//! The crate is the app's `query` feature: the viewer builds without it, and without polars.

pub mod dataset;
/// Moved to the core, where the streamed summary uses it too.
pub use tokenscope_core::analysis::exact;
pub mod result;
pub mod sql;
pub mod tables;
pub mod timeline;

pub use result::{Cell, Rows};
pub use sql::{QueryError, run};
pub use tables::Table;
pub use timeline::{TimelineOptions, auto_every, timeline};
