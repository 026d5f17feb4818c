//! tokenscope: a microscope for LLM inference engines. It reads token- and stage-level traces of vLLM, SGLang and
//! TensorRT-LLM (format: `docs/TRACE_FORMAT.md`), and shows why a request was slow or wrong.
//!
//! The GUI-free core (format, import, trace, analysis, view, synth) is the `tokenscope-core` crate, re-exported
//! here under the same names; the recorder is the `tokenscope-record` crate, re-exported as `record`; this crate
//! adds the app and the command line.

pub use tokenscope_core::{analysis, corpus, export, format, import, ingest, load, synth, trace, view};
/// SQL over a trace and metrics over time (the `query` feature, through polars).
#[cfg(feature = "query")]
pub use tokenscope_query as query;

/// The recorder, without a GUI (the `tokenscope-record` crate): `record`, `watch`, the flight recorder.
pub use tokenscope_record as record;

pub mod cli;
pub mod ui;
