//! The query crate's integration tests, in one test binary: each file of `tests/` is a module here (its path stays
//! `tests/<name>.rs`). One binary per file linked polars four times over.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers may unwrap: a panic here is a failed test"
)]

#[path = "dataset.rs"]
mod dataset;
#[path = "docs.rs"]
mod docs;
#[path = "query.rs"]
mod query;
#[path = "timeline.rs"]
mod timeline;
