//! tokenscope's core, without a GUI: the trace format and its readers (`format`), the importers of what engines
//! and tools write (`import`), the trace written for other tools (`export`: Perfetto's), the columnar model (`trace`), the analysis and findings (`analysis`), the view math
//! the waterfall draws from (`view`), the engine simulator (`synth`) and the diagnosis corpus the findings are
//! measured on (`corpus`).
//!
//! Data flows one way: readers and importers -> [`trace::Trace`] (columnar, immutable) -> [`analysis`] and
//! [`view`]. This crate cannot depend on egui: the app (the `tokenscope` crate) sits on it.

pub mod analysis;
pub mod corpus;
pub mod export;
pub mod format;
pub mod import;
pub mod ingest;
pub mod load;
pub mod synth;
#[cfg(test)]
mod test_support;
pub mod trace;
pub mod view;
