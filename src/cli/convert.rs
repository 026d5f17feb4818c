//! `tokenscope convert IN [IN...] [--from KIND] [--partition-by KEY,..] -o OUT`: writes a trace in format v1, from a
//! trace of another encoding or from what an engine or tool wrote (several files of one run become one trace); with
//! `--partition-by`, as a hive-partitioned dataset (`OUT/date=../hour=../source=../part-0.parquet`).

use super::{Output, thousands, validate};
use crate::format::partition::{PartitionKey, write_partitioned};
use crate::import::Kind;
use crate::load::LoadOptions;

/// The arguments of `convert`.
#[derive(Debug, Clone, clap::Args)]
pub struct ConvertArgs {
    /// The trace, or the engine's or tool's files (recognised by their content).
    #[arg(required = true)]
    pub input: Vec<std::path::PathBuf>,
    /// Write a hive-partitioned dataset under OUTPUT (a folder): key=value folders of Parquet files, outermost
    /// first (e.g. date,hour,source).
    #[arg(long, value_enum, value_delimiter = ',', value_name = "KEY,..")]
    pub partition_by: Vec<PartitionKey>,
    /// The file to write (.parquet, .jsonl, .jsonl.gz, .jsonl.zst), or the dataset's folder.
    #[arg(short, long)]
    pub output: std::path::PathBuf,
    // The part of the trace to read, the memory budget, the importer, a server log's clock.
    #[command(flatten)]
    pub reading: super::globals::GlobalArgs,
}

impl ConvertArgs {
    /// Runs `convert`, reading every input with the importer `from` when given (`--from`).
    pub fn run(&self, from: Option<Kind>) -> Output {
        run(&self.input, from, &self.partition_by, &self.output)
    }
}

/// `tokenscope convert`: reads the inputs as one trace and writes it; rejected records are reported on stderr and
/// not written, and what the importers noted is printed.
pub fn run(
    inputs: &[std::path::PathBuf],
    from: Option<Kind>,
    partition_by: &[PartitionKey],
    output: &std::path::Path,
) -> Output {
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
    let t = &loaded.trace;
    if !t.has_records() {
        // Nothing to write: an empty trace written with success would hide that the input was not a trace. (Read
        // with --from, the loader has refused already, saying what the files look like.)
        let first = loaded.report.rejected.first().map_or_else(String::new, |r| {
            format!(
                "; the first rejected: {}: {}",
                loaded.report.describe(r.place),
                r.reason
            )
        });
        return Output::error(
            format!(
                "nothing was read as a trace: no request, step, sample or token in {} record(s), {rejected} rejected{first}; \
                 nothing was written",
                thousands(loaded.report.records)
            ),
            1,
        );
    }
    let written = if partition_by.is_empty() {
        crate::format::write(&loaded.trace, output).map(|()| format!("wrote {}", output.display()))
    } else {
        write_partitioned(&loaded.trace, output, partition_by, None).map(|files| {
            format!(
                "wrote {} files under {}",
                thousands(files.len() as u64),
                output.display()
            )
        })
    };
    match written {
        Ok(what) => Output {
            stdout: {
                let t = &loaded.trace;
                // Steps and samples are said when there are some: a log's output is all steps or samples.
                let mut counts = vec![
                    format!("{} requests", thousands(t.request_count() as u64)),
                    format!("{} tokens", thousands(t.token_count() as u64)),
                ];
                let some =
                    |n: usize, what: &str| format!("{} {what}{}", thousands(n as u64), if n == 1 { "" } else { "s" });
                if t.request_count() == 0 && !t.iterations.is_empty() {
                    counts.push(some(t.iterations.len(), "step"));
                }
                if !t.samples.is_empty() {
                    counts.push(some(t.samples.len(), "sample"));
                }
                format!("{what} ({})\n", counts.join(", "))
            },
            stderr: {
                let mut notes: String = loaded.report.notes.iter().map(|n| format!("note: {n}\n")).collect();
                if rejected > 0 {
                    let with = from.map_or_else(String::new, |k| format!(" --from {}", k.name()));
                    notes.push_str(&format!(
                        "note: {rejected} rejected record(s) were not written; `tokenscope validate{with} ...` lists \
                         them (with the same inputs)\n"
                    ));
                }
                notes
            },
            code: 0,
        },
        Err(e) => Output::error(e, 1),
    }
}
