//! A recording that rotates (`record --rotate-every`, `--rotate-mb`): the requests that ended are written as a part
//! of the run, `part-00001.parquet`, `part-00002.parquet`, ... in the output directory, each time the period passes
//! or the journal has grown by the size given; their lines then leave the journal, which keeps only what no part holds
//! yet. The recorder holds no more than one part's requests, and the directory opens as one trace (a dataset of its
//! parts; after a kill, the parts and the journal together).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;

use super::client::Outcome;
use super::journal::Journal;
use super::prompts::Prompt;
use super::{RecordOptions, ServerInfo, build_trace, request_id};

/// When a rotating recording starts a new part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rotation {
    /// The directory of the parts (created when missing).
    pub dir: PathBuf,
    /// A new part every this long.
    pub every: Option<Duration>,
    /// A new part each time the journal has grown by this many bytes.
    pub bytes: Option<u64>,
}

/// The name of the `k`-th part (1-based).
pub fn part_name(k: usize) -> String {
    format!("part-{k:05}.parquet")
}

/// The parts written in `dir` so far, in order of their number (a part is renamed into place once whole; the hidden
/// ones being written are left out); none when the directory cannot be read.
pub fn parts_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut parts: Vec<(u64, PathBuf)> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?;
            let k = name.strip_prefix("part-")?.strip_suffix(".parquet")?.parse().ok()?;
            Some((k, p))
        })
        .collect();
    // By number: part-100000 comes after part-99999.
    parts.sort();
    parts.into_iter().map(|(_, p)| p).collect()
}

/// What the rotation wrote.
#[derive(Debug, Default)]
pub struct Parts {
    /// The parts, in order.
    pub paths: Vec<PathBuf>,
    /// Requests and tokens they hold.
    pub requests: usize,
    /// Tokens they hold.
    pub tokens: usize,
}

/// What a part is made with: the recording's options, prompts, server and URL.
pub struct Context {
    /// The recording's options.
    pub options: RecordOptions,
    /// Its prompts.
    pub prompts: Vec<Prompt>,
    /// What the server said of itself.
    pub info: ServerInfo,
    /// The URL requests went to.
    pub url: String,
}

/// Takes every request as it ends and writes the parts; returns when every sender is gone, the last part written.
///
/// # Errors
/// A part, or the journal, could not be written: the path and the reason.
pub async fn run(
    rotation: Rotation,
    context: Context,
    journal: Option<Journal>,
    mut ended: mpsc::UnboundedReceiver<Outcome>,
) -> Result<Parts, String> {
    let (rotation, context) = (Arc::new(rotation), Arc::new(context));
    std::fs::create_dir_all(&rotation.dir).map_err(|e| format!("{}: {e}", rotation.dir.display()))?;
    let mut parts = Parts::default();
    let mut pending: Vec<Outcome> = Vec::new();
    let mut since = tokio::time::Instant::now();
    let mut grown_from = journal.as_ref().map_or(0, Journal::written);
    let mut tick = tokio::time::interval(Duration::from_millis(250));
    loop {
        let open = tokio::select! {
            o = ended.recv() => match o {
                Some(o) => {
                    pending.push(o);
                    true
                }
                None => false,
            },
            _ = tick.tick() => true,
        };
        let due = rotation.every.is_some_and(|e| since.elapsed() >= e)
            || rotation
                .bytes
                .is_some_and(|b| journal.as_ref().map_or(0, Journal::written).saturating_sub(grown_from) >= b);
        if !open || (due && !pending.is_empty()) {
            if !pending.is_empty() || parts.paths.is_empty() {
                write_part(&rotation, &context, journal.as_ref(), &mut pending, &mut parts).await?;
            }
            since = tokio::time::Instant::now();
            grown_from = journal.as_ref().map_or(0, Journal::written);
        }
        if !open {
            return Ok(parts);
        }
    }
}

/// Writes the requests that ended as the next part (hidden until whole, then renamed into place), then takes their
/// lines out of the journal. The part is made and written on tokio's blocking pool: the runtime's workers go on
/// reading the streams, whose chunks' arrival times are the recording's figures.
async fn write_part(
    rotation: &Arc<Rotation>,
    context: &Arc<Context>,
    journal: Option<&Journal>,
    pending: &mut Vec<Outcome>,
    parts: &mut Parts,
) -> Result<(), String> {
    let mut outcomes = std::mem::take(pending);
    outcomes.sort_by_key(|o| o.index);
    let ids: HashSet<String> = outcomes.iter().map(|o| request_id(o.index)).collect();
    let name = part_name(parts.paths.len() + 1);
    let (rotation, context) = (Arc::clone(rotation), Arc::clone(context));
    let written = tokio::task::spawn_blocking(move || {
        let c = &context;
        let (trace, _) = build_trace(&c.options, &c.prompts, &c.info, &c.url, &outcomes);
        let (hidden, path) = (rotation.dir.join(format!(".{name}")), rotation.dir.join(&name));
        tokenscope_core::format::write(&trace, &hidden).map_err(|e| format!("{}: {e}", hidden.display()))?;
        std::fs::rename(&hidden, &path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok::<_, String>((path, trace.request_count(), trace.token_count()))
    })
    .await
    .map_err(|e| format!("the part's writer: {e}"))?;
    let (path, requests, tokens) = written?;
    parts.paths.push(path);
    parts.requests += requests;
    parts.tokens += tokens;
    if let Some(j) = journal {
        j.forget(ids).await.map_err(|e| format!("the journal: {e}"))?;
    }
    Ok(())
}
