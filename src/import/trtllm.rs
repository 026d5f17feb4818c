//! TensorRT-LLM: iteration statistics (`/metrics`) and per-request perf metrics (`/perf_metrics`).

use std::io::Read;
use std::path::Path;

use super::Sink;
use crate::format::{LoadError, Progress};

/// True when the text has `print_iter_log` lines.
pub fn looks_like_iter_log(text: &str) -> bool {
    text.contains("iter = ") && text.contains("host_step_time")
}

/// Reads iteration statistics.
pub fn read_iterations(
    _input: impl Read,
    _path: &Path,
    _sink: &mut Sink<'_>,
    _progress: &Progress,
) -> Result<(), LoadError> {
    Ok(())
}

/// Reads perf metrics.
pub fn read_perf(_input: impl Read, _path: &Path, _sink: &mut Sink<'_>, _progress: &Progress) -> Result<(), LoadError> {
    Ok(())
}
