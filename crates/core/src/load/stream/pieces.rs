//! A streamed pass's token rows decoded: each batch of a row group cut into pieces, the consecutive rows of one
//! request, with the fields the detectors read, each row checked by the rules a load checks of them.

use std::ops::Range;

use crate::format::parquet::stream::{At, Columns};
use crate::ingest::validate::is_epoch_ns;
use crate::trace::{Flag, NULL_I64, NULL_U32, Trace};

/// The columns of a token pass, `kind` first; a pass without texts reads the first six.
pub(super) const COLUMNS: [&str; 8] = [
    "kind",
    "request_id",
    "index",
    "emitted_ns",
    "iteration",
    "token_id",
    "text",
    "special",
];
pub(super) const WITHOUT_TEXTS: usize = 6;
/// The types of [`COLUMNS`], as the format has them.
pub(super) const TYPES: [&str; 8] = ["string", "string", "int", "int", "int", "int", "string", "boolean"];

/// Not a request of the trace (an orphan, or outside the window): its tokens are not the trace's.
pub(super) const NOT_KEPT: u32 = u32::MAX;

/// Consecutive token rows of one request in a batch, decoded.
#[derive(Default)]
pub(super) struct Piece {
    pub(super) request: u32,
    /// The file's rows of its first and last token.
    pub(super) rows: (u64, u64),
    pub(super) index: Vec<u32>,
    pub(super) emitted: Vec<i64>,
    pub(super) iteration: Vec<i64>,
    pub(super) token_id: Vec<u32>,
    /// Each token's text as a range of `buf` (`None`: no text).
    pub(super) text: Vec<Option<Range<u32>>>,
    pub(super) buf: String,
    pub(super) special: Vec<Flag>,
}

/// A batch's pieces, in row order.
pub(super) struct Batch {
    /// Rows read, of any kind.
    pub(super) rows: u64,
    pub(super) pieces: Vec<Piece>,
    pub(super) incomplete: u64,
    /// The first token out of `index` order within a piece.
    pub(super) unordered: Option<String>,
}

/// Decodes a batch's token rows into pieces of consecutive rows of one request.
pub(super) fn decode(c: &Columns, at: At, trace: &Trace, texts: bool) -> Result<Batch, String> {
    c.check_from(0, &TYPES[..WITHOUT_TEXTS])?;
    if texts {
        c.check_from(WITHOUT_TEXTS, &TYPES[WITHOUT_TEXTS..])?;
    }
    let mut out = Batch {
        rows: c.rows() as u64,
        pieces: Vec::new(),
        incomplete: 0,
        unordered: None,
    };
    let mut id: Option<&str> = None;
    for i in 0..c.rows() {
        if c.kind(i) != Some("token") {
            continue;
        }
        // The rules a load checks of the fields read: a request, a count for `index`, epoch ns, a token id.
        let token_id = c.int(5, i);
        let (Some(rid), Some(index), Some(emitted), true) = (
            c.str(1, i),
            c.int(2, i)
                .and_then(|n| u32::try_from(n).ok())
                .filter(|&n| n < NULL_U32),
            c.int(3, i).filter(|&t| is_epoch_ns(t)),
            token_id.is_none_or(|n| (0..i64::from(NULL_U32)).contains(&n)),
        ) else {
            out.incomplete += 1;
            continue;
        };
        let row = at.first_row + i as u64;
        if id != Some(rid) || out.pieces.is_empty() {
            id = Some(rid);
            out.pieces.push(Piece {
                request: trace.request_row(rid).unwrap_or(NOT_KEPT),
                rows: (row, row),
                ..Piece::default()
            });
        }
        let Some(p) = out.pieces.last_mut() else { continue };
        p.rows.1 = row;
        if p.request == NOT_KEPT {
            continue;
        }
        if let Some(&last) = p.index.last()
            && index <= last
        {
            out.unordered = Some(format!(
                "row {row}: token {index} of request {rid} repeats or comes after its token {last} (a request's tokens \
                 must be in index order, each once)"
            ));
            return Ok(out);
        }
        p.index.push(index);
        p.emitted.push(emitted);
        p.iteration.push(c.int(4, i).unwrap_or(NULL_I64));
        p.token_id
            .push(token_id.and_then(|n| u32::try_from(n).ok()).unwrap_or(NULL_U32));
        if texts {
            let text = c.str(6, i).map(|s| {
                let from = u32::try_from(p.buf.len()).unwrap_or(u32::MAX);
                p.buf.push_str(s);
                from..u32::try_from(p.buf.len()).unwrap_or(u32::MAX)
            });
            p.text.push(text);
            p.special.push(Flag::from_opt(c.flag(7, i)));
        }
    }
    Ok(out)
}
