//! tokenscope: a microscope for LLM inference engines. It reads token- and stage-level traces of vLLM, SGLang and
//! TensorRT-LLM (format: `docs/TRACE_FORMAT.md`), and shows why a request was slow or wrong.
//!
//! The GUI-free core (format, import, trace, analysis, view) is the `tokenscope-core` crate, re-exported
//! here under the same names; the recorder is the `tokenscope-record` crate, re-exported as `record`; this crate
//! adds the app and the command line.

pub use tokenscope_core::{analysis, export, format, import, ingest, load, trace, view};
/// SQL over a trace and metrics over time (the `query` feature, through polars).
#[cfg(feature = "query")]
pub use tokenscope_query as query;
/// The engine simulator and its fitter (the `tokenscope-synth` crate); the diagnosis corpus is its `corpus`.
pub use tokenscope_synth as synth;
pub use tokenscope_synth::corpus;

/// The recorder, without a GUI (the `tokenscope-record` crate): `record`, `watch`, the flight recorder.
pub use tokenscope_record as record;

pub mod cli;
pub mod ui;
