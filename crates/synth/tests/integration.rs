//! The simulator's integration tests, in one test binary that links no GUI crate (`cargo test -p tokenscope-synth`):
//! the diagnosis corpus, simulated incidents judged by the findings. Each file is a module here.

mod common;

#[path = "corpus.rs"]
mod corpus;
