//! The flight recorder's ring (`tokenscope watch --incidents DIR`): what a watch reads is written to `DIR/ring/` as
//! parts of `part_s` seconds each (`part-<start ms since the epoch>.parquet`, every request alive in the part whole),
//! and the oldest parts are deleted while the ring holds more bytes than its budget. The last minutes survive the
//! watch itself (a crash, a kill, a reboot) and stay bounded for a day of traffic; incident files, kept beside the
//! ring, are never deleted.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use tokenscope_core::trace::Trace;

/// The ring of parts in one folder.
#[derive(Debug)]
pub struct Ring {
    dir: PathBuf,
    budget: u64,
    part_ns: i64,
    /// Where the next part starts (ns), once anything was offered.
    next_from: Option<i64>,
    /// The parts on disk, oldest first, with their sizes (those of an earlier watch in the folder included).
    parts: VecDeque<(PathBuf, u64)>,
    /// Parts deleted to stay within the budget.
    pub deleted: u64,
}

impl Ring {
    /// A ring in `dir` (made when missing) of at most `budget` bytes, a part every `part_s` seconds. Parts an
    /// earlier watch left there count against the budget, oldest first.
    ///
    /// # Errors
    /// The folder cannot be made or listed: why.
    pub fn new(dir: &Path, budget: u64, part_s: f64) -> Result<Self, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: cannot make the ring's folder: {e}", dir.display()))?;
        let mut parts: Vec<(PathBuf, u64)> = std::fs::read_dir(dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?
            .filter_map(Result::ok)
            .filter(|e| is_part(&e.file_name().to_string_lossy()))
            .map(|e| (e.path(), e.metadata().map_or(0, |m| m.len())))
            .collect();
        // Named by their start, zero-padded: the names' order is the parts'.
        parts.sort();
        Ok(Ring {
            dir: dir.to_owned(),
            budget,
            part_ns: (part_s.max(0.001) * 1e9) as i64,
            next_from: None,
            parts: parts.into(),
            deleted: 0,
        })
    }

    /// The parts on disk, oldest first.
    pub fn parts(&self) -> impl Iterator<Item = &Path> {
        self.parts.iter().map(|(p, _)| p.as_path())
    }

    /// Bytes the ring holds.
    pub fn bytes(&self) -> u64 {
        self.parts.iter().map(|&(_, n)| n).sum()
    }

    /// Writes the part that ends at `latest_ns` when a whole part's time has passed since the last (or at once with
    /// `flush`, what is pending), then deletes the oldest parts beyond the budget (never the one just written).
    ///
    /// # Errors
    /// The part cannot be written: why (the ring is unchanged).
    pub fn offer(&mut self, trace: &Trace, latest_ns: i64, flush: bool) -> Result<(), String> {
        // Nothing read yet (a log of start-up lines only): no part, and no start taken from an empty trace's 0.
        if !trace.has_records() {
            return Ok(());
        }
        let start = trace.start_ns().min(latest_ns);
        let mut from = *self.next_from.get_or_insert(start);
        if latest_ns < from {
            // A clock gone back (a restarted server's log, placed anew): its parts start at its own start.
            from = start;
            self.next_from = Some(start);
        }
        if latest_ns <= from || (!flush && latest_ns - from < self.part_ns) {
            return Ok(());
        }
        let part = tokenscope_core::trace::slice::slice(trace, from, latest_ns, None);
        let file = self.dir.join(format!("part-{:015}.parquet", from / 1_000_000));
        let tmp = file.with_extension("tmp.parquet");
        tokenscope_core::format::write(&part, &tmp).map_err(|e| format!("{}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, &file).map_err(|e| format!("{}: {e}", file.display()))?;
        let size = std::fs::metadata(&file).map_or(0, |m| m.len());
        self.parts.retain(|(p, _)| *p != file);
        self.parts.push_back((file, size));
        self.next_from = Some(latest_ns);
        while self.bytes() > self.budget && self.parts.len() > 1 {
            if let Some((old, _)) = self.parts.pop_front() {
                // Already gone (deleted by hand) is as good as deleted.
                let _ = std::fs::remove_file(&old);
                self.deleted += 1;
            }
        }
        Ok(())
    }
}

/// Whether a file name is a ring part's.
fn is_part(name: &str) -> bool {
    name.strip_prefix("part-")
        .and_then(|n| n.strip_suffix(".parquet"))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2025-11-29 08:00 UTC, ns.
    const T0: i64 = 1_764_403_200_000_000_000;

    /// `s` seconds after [`T0`], ns.
    fn at(s: f64) -> i64 {
        T0 + (s * 1e9) as i64
    }

    /// A trace of `n` requests, one a second from `first_s` after [`T0`], each 0.5 s long.
    fn trace(first_s: i64, n: i64) -> Trace {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let file = dir.path().join("t.jsonl");
        let lines: String = (0..n)
            .map(|k| {
                let at = at((first_s + k) as f64);
                format!(
                    "{{\"kind\":\"request\",\"request_id\":\"r{k}\",\"arrival_ns\":{at},\"finished_ns\":{}}}\n",
                    at + 500_000_000
                )
            })
            .collect();
        std::fs::write(&file, lines).unwrap_or_else(|e| panic!("{e}"));
        tokenscope_core::load::load(&file, &tokenscope_core::ingest::Progress::default())
            .unwrap_or_else(|e| panic!("{e}"))
            .trace
    }

    #[test]
    fn parts_are_written_a_part_time_apart_and_the_oldest_deleted_past_the_budget() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let t = trace(1, 10);
        // Parts of 3 s: offered at 2.5 s nothing (1.5 s since the start at 1 s), at 4 s the part [1 s, 4 s].
        let mut ring = Ring::new(&dir.path().join("ring"), u64::MAX, 3.0).unwrap_or_else(|e| panic!("{e}"));
        // A log of start-up lines alone (no record yet), even flushed: no part, and the start is not taken from it.
        ring.offer(&Trace::default(), at(100.0), true)
            .unwrap_or_else(|e| panic!("{e}"));
        ring.offer(&t, at(2.5), false).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ring.parts().count(), 0);
        ring.offer(&t, at(4.0), false).unwrap_or_else(|e| panic!("{e}"));
        let first: Vec<PathBuf> = ring.parts().map(Path::to_owned).collect();
        assert_eq!(first.len(), 1);
        assert!(first[0].ends_with("part-001764403201000.parquet"), "{first:?}");
        // Its requests: r0 to r3 (arrivals 1 s to 4 s; r3 arrives at its end).
        let part = tokenscope_core::load::load(&first[0], &tokenscope_core::ingest::Progress::default())
            .unwrap_or_else(|e| panic!("{e}"))
            .trace;
        assert_eq!(part.request_count(), 4);
        // A flush writes what is pending however short: [4 s, 5 s].
        ring.offer(&t, at(5.0), true).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ring.parts().count(), 2);
        // A trace whose latest time is before the last part's end (a restarted server's log, its clock placed
        // anew): its part starts at its own start, 0 s.
        ring.offer(&trace(0, 2), at(1.5), true)
            .unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<PathBuf> = ring.parts().map(Path::to_owned).collect();
        assert_eq!(names.len(), 3);
        assert!(names[2].ends_with("part-001764403200000.parquet"), "{names:?}");
        // A budget of one part's bytes: a later watch over the folder counts the three parts, and its first part
        // deletes them all.
        let one = std::fs::metadata(&first[0]).map_or(0, |m| m.len());
        let mut small = Ring::new(&dir.path().join("ring"), one, 3.0).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(small.parts().count(), 3);
        small
            .offer(&trace(20, 4), at(23.0), false)
            .unwrap_or_else(|e| panic!("{e}"));
        let left: Vec<PathBuf> = small.parts().map(Path::to_owned).collect();
        assert_eq!(left.len(), 1, "{left:?}");
        assert!(left[0].ends_with("part-001764403220000.parquet"), "{left:?}");
        assert_eq!(small.deleted, 3);
        assert!(!first[0].exists());
        let names = std::fs::read_dir(dir.path().join("ring")).map_or(0, |d| d.filter_map(Result::ok).count());
        assert_eq!(names, 1, "no temporary file left");
    }
}
