//! tokenscope: a microscope for LLM inference engines. It reads token- and stage-level traces of vLLM, SGLang and
//! TensorRT-LLM (format: `docs/TRACE_FORMAT.md`), and shows why a request was slow or wrong.
//!
//! Data flows one way: [`format`] readers -> [`trace::Trace`] (columnar, immutable) -> [`analysis`] -> views.

pub mod analysis;
pub mod cli;
pub mod format;
pub mod import;
pub mod record;
pub mod synth;
#[cfg(test)]
mod test_support;
pub mod trace;
pub mod ui;
pub mod view;
