//! Fuzz target `parquet`: see crates/fuzz (`tokenscope_fuzz::parquet`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| tokenscope_fuzz::parquet(data));
