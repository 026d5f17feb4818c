//! Fuzz target `jsonl`: see crates/fuzz (`tokenscope_fuzz::jsonl`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tokenscope_fuzz::jsonl(data));
