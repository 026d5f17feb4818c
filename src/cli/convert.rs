//! `tokenscope convert IN -o OUT`: re-encodes a trace between Parquet and JSONL.

use super::{Output, thousands, validate};

/// `tokenscope convert IN -o OUT`: re-encodes a trace; rejected records are reported on stderr and not written.
pub fn run(input: &std::path::Path, output: &std::path::Path) -> Output {
    let loaded = match crate::format::load(input, &crate::format::Progress::default()) {
        Ok(l) => l,
        Err(e) => return validate::fatal(&e, false),
    };
    let rejected = loaded.report.rejected_count();
    match crate::format::write(&loaded.trace, output) {
        Ok(()) => Output {
            stdout: format!(
                "wrote {} ({} requests, {} tokens)\n",
                output.display(),
                thousands(loaded.trace.request_count() as u64),
                thousands(loaded.trace.token_count() as u64)
            ),
            stderr: if rejected > 0 {
                format!("note: {rejected} rejected record(s) were not written; `tokenscope validate` lists them\n")
            } else {
                String::new()
            },
            code: 0,
        },
        Err(e) => Output::error(e, 1),
    }
}
