//! Which reader reads a file: a native encoding by the file's name, an importer by its content
//! (`import::sniff`), or the one the user named (`--from`); and which files a path stands for (a file, or a
//! directory's trace files and those of its `key=value` folders).

use std::path::{Path, PathBuf};

use crate::format::{encoding_of, jsonl};
use crate::import::Kind;
use crate::ingest::LoadError;
use crate::trace::report::Encoding;

/// How a file of a trace is read: a native encoding, or an importer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Trace format v1.
    Native(Encoding),
    /// An engine's or tool's own output.
    Import(Kind),
}

impl Format {
    /// How places in the file are counted.
    pub fn encoding(self) -> Encoding {
        match self {
            Format::Native(enc) => enc,
            Format::Import(kind) => kind.encoding(),
        }
    }
}

/// The format of one file: by its name for native traces, else by its content; `from` forces an importer.
pub(crate) fn format_of(path: &Path, from: Option<Kind>) -> Result<Option<Format>, LoadError> {
    if let Some(kind) = from {
        return Ok(Some(Format::Import(kind)));
    }
    if let Some(kind) = crate::import::sniff(path) {
        return Ok(Some(Format::Import(kind)));
    }
    if let Some(enc) = encoding_of(path) {
        return Ok(Some(Format::Native(enc)));
    }
    // Unknown extension: trust the content when it looks like Parquet or JSON.
    let mut head = [0u8; 4];
    let n = std::fs::File::open(path)
        .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
        .map_err(|source| LoadError::Io {
            path: path.display().to_string(),
            source,
        })?;
    let head = &head[..n];
    if head == b"PAR1" {
        Ok(Some(Format::Native(Encoding::Parquet)))
    } else if head.first() == Some(&b'{') || jsonl::Compression::sniff(head) != jsonl::Compression::None {
        Ok(Some(Format::Native(Encoding::Jsonl)))
    } else {
        Ok(None)
    }
}

/// The trace files of a directory, and those of its `key=value` folders (a hive-partitioned dataset), at any
/// depth; hidden files and other folders are left out.
fn trace_files_in(dir: &Path, from: Option<Kind>, files: &mut Vec<(PathBuf, Format)>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let p = entry?.path();
        let Some(name) = p.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if name.starts_with('.') {
            continue;
        }
        if p.is_dir() {
            if name.contains('=') {
                trace_files_in(&p, from, files)?;
            }
        } else if p.is_file() {
            let format = match encoding_of(&p) {
                Some(Encoding::Parquet) => Some(Format::Native(Encoding::Parquet)),
                _ => format_of(&p, from).ok().flatten(),
            };
            if let Some(format) = format {
                files.push((p, format));
            }
        }
    }
    Ok(())
}

/// The files of a trace path with their formats: the file itself, or a directory's trace files sorted by name
/// (the files of one run: partitions of a trace, or an engine's outputs to be opened together).
pub(crate) fn files_of(path: &Path, from: Option<Kind>) -> Result<Vec<(PathBuf, Format)>, LoadError> {
    let io = |e| LoadError::Io {
        path: path.display().to_string(),
        source: e,
    };
    let meta = std::fs::metadata(path).map_err(io)?;
    if meta.is_dir() {
        let mut files = Vec::new();
        trace_files_in(path, from, &mut files).map_err(io)?;
        files.sort_by(|a, b| a.0.cmp(&b.0));
        if files.is_empty() {
            return Err(LoadError::EmptyDirectory {
                path: path.display().to_string(),
            });
        }
        return Ok(files);
    }
    match format_of(path, from)? {
        Some(format) => Ok(vec![(path.to_path_buf(), format)]),
        None => Err(LoadError::UnknownFormat {
            path: path.display().to_string(),
            kinds: Kind::names(),
        }),
    }
}

/// Which half of a run a file holds: the client's (a recording, a benchmark tool's export: times on the client's
/// clock) or the server's (everything an engine writes, and native traces on the engine's clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The client's side.
    Client,
    /// The server's side.
    Server,
}

/// The side of a file: by its importer, or for a native trace by its meta record's `clock` (read from the Parquet
/// footer's statistics, or the first line of a JSON-lines file), without reading its records.
pub fn side_of(path: &Path, format: Format) -> Side {
    let client = match format {
        Format::Import(kind) => kind.engine().is_none(),
        Format::Native(Encoding::Parquet) => {
            crate::format::parquet::footer_clock(path).as_deref() == Some(crate::load::join::CLIENT)
        }
        Format::Native(_) => first_line_clock(path).as_deref() == Some(crate::load::join::CLIENT),
    };
    if client { Side::Client } else { Side::Server }
}

/// The `clock` of a JSON-lines trace's first record (the meta record, when the writer put it first).
fn first_line_clock(path: &Path) -> Option<String> {
    use std::io::BufRead;
    let file = std::fs::File::open(path).ok()?;
    let mut raw = std::io::BufReader::new(file);
    let head = raw.fill_buf().ok()?;
    let reader: Box<dyn std::io::Read> = match jsonl::Compression::sniff(head) {
        jsonl::Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(raw)),
        jsonl::Compression::Zstd => Box::new(zstd::stream::read::Decoder::new(raw).ok()?),
        jsonl::Compression::None => Box::new(raw),
    };
    let mut line = Vec::new();
    std::io::BufReader::new(std::io::Read::take(reader, 1 << 20))
        .read_until(b'\n', &mut line)
        .ok()?;
    #[derive(serde::Deserialize)]
    struct Head {
        kind: Option<String>,
        clock: Option<String>,
    }
    let head: Head = serde_json::from_slice(&line).ok()?;
    (head.kind.as_deref() == Some("meta")).then_some(head.clock).flatten()
}
