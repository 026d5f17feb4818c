//! A trace written for other tools to open: the Chrome Trace Event format that Perfetto UI reads
//! ([`perfetto`]). The trace's own format, Parquet and JSONL, is written by `format/`.

pub mod perfetto;
