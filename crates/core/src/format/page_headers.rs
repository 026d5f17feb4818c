//! A bounded check of a column chunk's page headers before parquet-rs decodes them.
//!
//! A page header is a Thrift struct in the compact protocol. parquet-rs 60.1 skips the fields it does not need with
//! a loop over the element count a list declares; a corrupt header declaring billions of elements that take no bytes
//! keeps it busy for minutes, out of reach once called (`tests/data/corrupt/hang-thrift-skip.parquet`, found by the
//! `parquet` fuzz target). This walk reads the same bytes with every count bounded by the bytes left (each element of
//! a list, set or map takes at least one byte), a nesting limit, and the pages' sizes bounded by the chunk: it costs
//! a few reads of at most a few kilobytes per page and is linear in the bytes it reads. A chunk it rejects is said as
//! the row group's problem before the decoder sees it.

use bytes::Bytes;
use parquet::file::reader::ChunkReader;

/// Deepest nesting of structs, lists, sets and maps a header may have (parquet's own are 3 deep).
const MAX_DEPTH: u32 = 32;

/// First bytes read for a header; doubled while a header is longer (statistics with long min/max values).
const FIRST_WINDOW: u64 = 4_096;

/// Why a header was refused, with the offset of the byte in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadHeader {
    /// Offset in the file of the page whose header is bad.
    pub page_at: u64,
    /// What is wrong.
    pub why: String,
}

impl std::fmt::Display for BadHeader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the page header at byte {} is corrupt: {}", self.page_at, self.why)
    }
}

/// What went wrong inside one header.
#[derive(Debug)]
enum Stop {
    /// The window ended before the header: read more.
    Short,
    /// The header is not valid Thrift, or declares more than the bytes hold.
    Bad(String),
}

/// A cursor over a header's window.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
    /// Bytes left in the column chunk after the window's start (the window may end before them).
    chunk_left: u64,
}

impl Cursor<'_> {
    fn byte(&mut self) -> Result<u8, Stop> {
        let b = *self.bytes.get(self.at).ok_or(Stop::Short)?;
        self.at += 1;
        Ok(b)
    }

    fn skip(&mut self, n: u64) -> Result<(), Stop> {
        let n = usize::try_from(n).map_err(|_| Stop::Bad(format!("a length of {n} bytes")))?;
        if self.at.saturating_add(n) > self.bytes.len() {
            // Past the window: more to read if the chunk holds it.
            return Err(if self.at.saturating_add(n) as u64 > self.chunk_left {
                Stop::Bad(format!("a field of {n} bytes runs past the column chunk"))
            } else {
                Stop::Short
            });
        }
        self.at += n;
        Ok(())
    }

    fn varint(&mut self) -> Result<u64, Stop> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(Stop::Bad("a varint longer than 10 bytes".to_owned()))
    }

    fn zigzag(&mut self) -> Result<i64, Stop> {
        let v = self.varint()?;
        #[expect(clippy::cast_possible_wrap, reason = "zigzag decoding of a 64-bit value")]
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    /// Bytes left in the chunk after the cursor.
    fn left(&self) -> u64 {
        self.chunk_left.saturating_sub(self.at as u64)
    }

    /// A count of elements of at least `each` bytes, bounded by the bytes left.
    fn count(&mut self, n: u64, each: u64, what: &str) -> Result<u64, Stop> {
        if n.saturating_mul(each) > self.left() {
            return Err(Stop::Bad(format!(
                "a {what} of {n} elements in the {} bytes left",
                self.left()
            )));
        }
        Ok(n)
    }

    /// Skips one value of compact type `t`; in a list, booleans take a byte.
    fn value(&mut self, t: u8, depth: u32, in_list: bool) -> Result<(), Stop> {
        if depth > MAX_DEPTH {
            return Err(Stop::Bad(format!("nesting deeper than {MAX_DEPTH}")));
        }
        match t {
            1 | 2 if !in_list => Ok(()),
            1..=3 => self.skip(1),
            4..=6 => self.varint().map(drop),
            7 => self.skip(8),
            8 => {
                let n = self.varint()?;
                self.skip(n)
            }
            9 | 10 => {
                let head = self.byte()?;
                let (size, elem) = (head >> 4, head & 0x0f);
                let size = if size == 15 { self.varint()? } else { u64::from(size) };
                let size = self.count(size, 1, "list")?;
                for _ in 0..size {
                    self.value(elem, depth + 1, true)?;
                }
                Ok(())
            }
            11 => {
                let size = self.varint()?;
                if size == 0 {
                    return Ok(());
                }
                let types = self.byte()?;
                let size = self.count(size, 2, "map")?;
                for _ in 0..size {
                    self.value(types >> 4, depth + 1, true)?;
                    self.value(types & 0x0f, depth + 1, true)?;
                }
                Ok(())
            }
            12 => self.skip_struct(depth + 1),
            13 => self.skip(16),
            _ => Err(Stop::Bad(format!("an unknown Thrift type {t}"))),
        }
    }

    fn skip_struct(&mut self, depth: u32) -> Result<(), Stop> {
        loop {
            let head = self.byte()?;
            if head == 0 {
                return Ok(());
            }
            if head >> 4 == 0 {
                self.zigzag()?;
            }
            self.value(head & 0x0f, depth, false)?;
        }
    }

    /// Reads a page header (a struct at the top level) and returns its `compressed_page_size` (field 3).
    fn page_header(&mut self) -> Result<i64, Stop> {
        let mut field: i64 = 0;
        let mut compressed = None;
        loop {
            let head = self.byte()?;
            if head == 0 {
                break;
            }
            let delta = i64::from(head >> 4);
            field = if delta == 0 { self.zigzag()? } else { field + delta };
            let t = head & 0x0f;
            if field == 3 && t == 5 {
                compressed = Some(self.zigzag()?);
            } else {
                self.value(t, 1, false)?;
            }
        }
        compressed.ok_or_else(|| Stop::Bad("no compressed_page_size".to_owned()))
    }
}

/// Checks the page headers of the column chunk at `start..start + len` of `reader`.
///
/// # Errors
/// The first header that is not valid compact Thrift, declares more elements than the bytes left, nests deeper than
/// 32, or whose page runs past the chunk.
pub fn check_chunk<R: ChunkReader>(reader: &R, start: u64, len: u64) -> Result<(), BadHeader> {
    let end = start.saturating_add(len);
    let mut page = start;
    while page < end {
        let chunk_left = end - page;
        let mut window = FIRST_WINDOW.min(chunk_left);
        let bad = |why: String| BadHeader { page_at: page, why };
        let (header_len, compressed) = loop {
            let bytes: Bytes = usize::try_from(window)
                .ok()
                .and_then(|w| reader.get_bytes(page, w).ok())
                .ok_or_else(|| bad(format!("{window} bytes cannot be read there")))?;
            let mut cursor = Cursor {
                bytes: &bytes,
                at: 0,
                chunk_left,
            };
            match cursor.page_header() {
                Ok(size) => break (cursor.at as u64, size),
                Err(Stop::Short) if window < chunk_left => window = window.saturating_mul(2).min(chunk_left),
                Err(Stop::Short) => return Err(bad("it runs past the column chunk".to_owned())),
                Err(Stop::Bad(why)) => return Err(bad(why)),
            }
        };
        let body = u64::try_from(compressed).map_err(|_| bad(format!("a page size of {compressed} bytes")))?;
        if header_len.saturating_add(body) > chunk_left {
            return Err(bad(format!(
                "a page of {body} bytes after its header, with {} bytes left in the column chunk",
                chunk_left - header_len
            )));
        }
        page += header_len + body;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal data page header: type 0 (field 1), uncompressed 10 (field 2), compressed `size` (field 3, below
    /// 64: its zigzag varint is one byte), then `extra` bytes of fields, then the stop byte.
    fn header(size: u8, extra: &[u8]) -> Vec<u8> {
        // Field 1, i32 (delta 1, type 5): zigzag 0; field 2: zigzag 10 = 20; field 3: zigzag size.
        let mut v = vec![0x15, 0x00, 0x15, 20, 0x15, size * 2];
        v.extend_from_slice(extra);
        v.push(0);
        v
    }

    fn check(bytes: Vec<u8>) -> Result<(), BadHeader> {
        let len = bytes.len() as u64;
        check_chunk(&Bytes::from(bytes), 0, len)
    }

    #[test]
    fn pages_that_fill_their_chunk_pass() {
        // Two pages: a header of 7 bytes and 3 bytes of data, twice.
        let mut chunk = header(3, &[]);
        chunk.extend_from_slice(&[9, 9, 9]);
        chunk.extend(header(3, &[]));
        chunk.extend_from_slice(&[9, 9, 9]);
        assert_eq!(check(chunk), Ok(()));
    }

    #[test]
    fn a_list_longer_than_the_bytes_left_is_refused_at_once() {
        // Field 4 (delta 1) of type list (9): size 15 -> a varint follows: 2^31 booleans (type 1), in a few bytes.
        let extra = [0x19, 0xf1, 0x80, 0x80, 0x80, 0x80, 0x08];
        let err = check(header(0, &extra)).unwrap_err();
        assert_eq!(err.page_at, 0);
        assert!(err.why.contains("a list of 2147483648 elements"), "{err}");
    }

    #[test]
    fn a_page_past_its_chunk_and_garbage_are_refused() {
        // The header says 50 bytes of data; the chunk holds 2.
        let mut chunk = header(50, &[]);
        chunk.extend_from_slice(&[1, 2]);
        let err = check(chunk).unwrap_err();
        assert!(err.why.contains("a page of 50 bytes"), "{err}");
        // Type 14 does not exist.
        let err = check(header(0, &[0x1e])).unwrap_err();
        assert!(err.why.contains("unknown Thrift type 14"), "{err}");
        // A header cut short.
        let err = check(vec![0x15, 0x00]).unwrap_err();
        assert!(err.why.contains("runs past the column chunk"), "{err}");
        // Structs nested 40 deep (field 4, type struct, again and again).
        let err = check(header(0, &[0x1c; 40])).unwrap_err();
        assert!(err.why.contains("nesting deeper than 32"), "{err}");
    }

    #[test]
    fn a_header_longer_than_the_first_window_is_read_whole() {
        // Field 4 (delta 1), binary (8) of 10,000 bytes: past the 4 KiB first window.
        let mut extra = vec![0x18, 0x90, 0x4e];
        extra.extend(std::iter::repeat_n(b'x', 10_000));
        let mut chunk = header(1, &extra);
        chunk.push(7);
        assert_eq!(check(chunk), Ok(()));
    }
}
