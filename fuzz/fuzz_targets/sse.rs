//! Fuzz target `sse`: see crates/fuzz (`tokenscope_fuzz::sse`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tokenscope_fuzz::sse(data));
