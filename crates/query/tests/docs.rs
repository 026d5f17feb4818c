//! `docs/QUERY.md` stays true: its column tables are the ones the code declares, and each of its SQL examples runs.

use std::path::Path;

use tokenscope_core::ingest::Progress;
use tokenscope_core::load::load;
use tokenscope_query::{run, tables};

fn doc() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/QUERY.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn the_column_tables_are_the_declared_columns() {
    let doc = doc();
    let (Some(start), Some(end)) = (doc.find("<!-- tables -->\n"), doc.find("<!-- /tables -->")) else {
        panic!("docs/QUERY.md lacks the <!-- tables --> markers");
    };
    let written = &doc[start + "<!-- tables -->\n".len()..end];
    assert!(
        written == tables::markdown(),
        "docs/QUERY.md's tables differ from the code's; replace them with:\n{}",
        tables::markdown()
    );
}

#[test]
fn every_example_runs_on_the_four_request_sample() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../sample_traces/four_requests.jsonl");
    let trace = match load(&path, &Progress::default()) {
        Ok(l) => l.trace,
        Err(e) => panic!("{e}"),
    };
    let doc = doc();
    let examples: Vec<&str> = doc
        .split("```sql\n")
        .skip(1)
        .filter_map(|block| block.split("```").next())
        .collect();
    assert!(examples.len() >= 8, "{} examples", examples.len());
    for sql in examples {
        if let Err(e) = run(&trace, sql) {
            panic!("docs/QUERY.md example fails: {e}\n{sql}");
        }
    }
}
