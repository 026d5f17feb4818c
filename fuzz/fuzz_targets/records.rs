//! Fuzz target `records`: see crates/fuzz (`tokenscope_fuzz::records`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tokenscope_fuzz::records(data));
