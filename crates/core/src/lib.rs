//! tokenscope's core, without a GUI: the trace format and its readers (`format`), the importers of what engines
//! and tools write (`import`), the trace written for other tools (`export`: Perfetto's), the columnar model
//! (`trace`), the analysis and findings (`analysis`), the view math the waterfall draws from (`view`). The engine
//! simulator, its fitter and the diagnosis corpus are the `tokenscope-synth` crate, on this one.
//!
//! Data flows one way: readers and importers -> [`trace::Trace`] (columnar, immutable) -> [`analysis`] and
//! [`view`]. This crate cannot depend on egui: the app (the `tokenscope` crate) sits on it.

pub mod analysis;
pub mod export;
pub mod format;
pub mod import;
pub mod ingest;
pub mod load;
#[cfg(test)]
mod test_support;
pub mod trace;
pub mod view;
