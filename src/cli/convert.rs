//! `tokenscope convert IN [IN...] [--from KIND] -o OUT`: writes a trace in format v1, from a trace of another
//! encoding or from what an engine or tool wrote (several files of one run become one trace).

use super::{Output, thousands, validate};
use crate::format::LoadOptions;
use crate::import::Kind;

/// `tokenscope convert`: reads the inputs as one trace and writes it; rejected records are reported on stderr and
/// not written, and what the importers noted is printed.
pub fn run(inputs: &[std::path::PathBuf], from: Option<Kind>, output: &std::path::Path) -> Output {
    let paths: Vec<&std::path::Path> = inputs.iter().map(std::path::PathBuf::as_path).collect();
    let options = LoadOptions {
        from,
        ..LoadOptions::default()
    };
    let loaded = match super::load(&paths, options) {
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
            stderr: {
                let mut notes: String = loaded.report.notes.iter().map(|n| format!("note: {n}\n")).collect();
                if rejected > 0 {
                    notes.push_str(&format!(
                        "note: {rejected} rejected record(s) were not written; `tokenscope validate` lists them\n"
                    ));
                }
                notes
            },
            code: 0,
        },
        Err(e) => Output::error(e, 1),
    }
}
