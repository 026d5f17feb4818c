//! Fuzz target `import`: see crates/fuzz (`tokenscope_fuzz::import`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tokenscope_fuzz::import(data));
