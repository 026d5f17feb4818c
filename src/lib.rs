//! tokenscope: a microscope for LLM inference engines. It reads token- and stage-level traces of vLLM, SGLang and
//! TensorRT-LLM (format: `docs/TRACE_FORMAT.md`), and shows why a request was slow or wrong.
//!
//! The GUI-free core (format, import, trace, analysis, view, synth) is the `tokenscope-core` crate, re-exported
//! here under the same names; this crate adds the recorder, the app and the command line.

pub use tokenscope_core::{analysis, corpus, export, format, import, ingest, load, synth, trace, view};
/// SQL over a trace and metrics over time (the `query` feature, through polars).
#[cfg(feature = "query")]
pub use tokenscope_query as query;

pub mod cli;
pub mod record;
pub mod ui;
