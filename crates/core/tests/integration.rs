//! The core's integration tests, in one test binary that links no GUI crate (`cargo test -p tokenscope-core` runs
//! them): the figures worked by hand, the findings (on simulated incidents too: the simulator is a dev-dependency), and the importers on what SGLang's and
//! vLLM's own code emits. Each file is a module here (`cargo test -p tokenscope-core --test integration findings::`
//! runs one), as in the top crate's `tests/it/main.rs`.

mod common;

#[path = "findings.rs"]
mod findings;
#[path = "findings_by_hand.rs"]
mod findings_by_hand;
#[path = "findings_streamed.rs"]
mod findings_streamed;
#[path = "findings_windowed.rs"]
mod findings_windowed;
#[path = "metrics.rs"]
mod metrics;
#[path = "sglang_engine.rs"]
mod sglang_engine;
#[path = "vllm_engine.rs"]
mod vllm_engine;
