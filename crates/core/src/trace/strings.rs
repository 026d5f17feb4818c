//! String interning: every repeated string of a trace (request ids, sources, labels, token texts) is stored once
//! and referred to by a `u32` id, so ten million tokens cost ids, not strings.

use std::hash::BuildHasher;

use hashbrown::HashTable;
use rustc_hash::FxBuildHasher;

/// Marks an absent string id in `u32` columns.
pub const NO_STR: u32 = u32::MAX;

/// A set of distinct strings, each with a dense `u32` id in insertion order.
///
/// The strings are kept one after another in one buffer, and found by a table of ids alone (each looked up by the
/// string it names): about the strings' bytes and 20 bytes more each, where a string of its own and a map from it
/// took about 80. A trace of 500,000 requests holds 500,000 request ids here.
#[derive(Debug, Default, Clone)]
pub struct Interner {
    /// Every string, one after another.
    text: String,
    /// Where string `id` ends in `text` (it starts where string `id - 1` ends).
    ends: Vec<usize>,
    /// The ids, found by their strings' hashes; an id pushed by [`Self::push_duplicate`] is not in it.
    ids: HashTable<u32>,
}

/// String `id` of `text` cut at `ends`.
fn cut<'a>(text: &'a str, ends: &[usize], id: u32) -> &'a str {
    let i = id as usize;
    let start = if i == 0 { 0 } else { ends[i - 1] };
    &text[start..ends[i]]
}

fn hash(s: &str) -> u64 {
    FxBuildHasher.hash_one(s)
}

impl Interner {
    /// The id of `s`, adding it when new.
    pub fn intern(&mut self, s: &str) -> u32 {
        let h = hash(s);
        let (text, ends) = (&self.text, &self.ends);
        if let Some(&id) = self.ids.find(h, |&id| cut(text, ends, id) == s) {
            return id;
        }
        let id = self.push_duplicate(s);
        let (text, ends) = (&self.text, &self.ends);
        self.ids.insert_unique(h, id, |&id| hash(cut(text, ends, id)));
        id
    }

    /// Appends `s` under a new id even when it is present (its lookup keeps the first id): for rebuilding an
    /// interner id for id.
    pub fn push_duplicate(&mut self, s: &str) -> u32 {
        let id = u32::try_from(self.ends.len()).unwrap_or(NO_STR - 1).min(NO_STR - 1);
        self.text.push_str(s);
        self.ends.push(self.text.len());
        id
    }

    /// The id of `s` if it is present.
    pub fn lookup(&self, s: &str) -> Option<u32> {
        self.ids.find(hash(s), |&id| self.str_of(id) == s).copied()
    }

    fn str_of(&self, id: u32) -> &str {
        cut(&self.text, &self.ends, id)
    }

    /// The string with this id; `None` for [`NO_STR`] or an id out of range.
    pub fn get(&self, id: u32) -> Option<&str> {
        ((id as usize) < self.ends.len()).then(|| self.str_of(id))
    }

    /// The string with this id, or `""` when absent.
    pub fn str_or_empty(&self, id: u32) -> &str {
        self.get(id).unwrap_or("")
    }

    /// Number of distinct strings.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// True when no string was interned.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Bytes held by the strings themselves (not counting the lookup table).
    pub fn heap_bytes(&self) -> usize {
        self.text.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_string_same_id_and_dense_ids() {
        let mut i = Interner::default();
        assert_eq!(i.intern("r1"), 0);
        assert_eq!(i.intern("r2"), 1);
        assert_eq!(i.intern("r1"), 0);
        assert_eq!(i.len(), 2);
        assert_eq!(i.get(1), Some("r2"));
        assert_eq!(i.get(NO_STR), None);
        assert_eq!(i.lookup("r3"), None);
        assert_eq!(i.intern(""), 2, "the empty string is a string like any other");
        assert_eq!(i.get(2), Some(""));
        assert_eq!(i.get(3), None);
        assert_eq!(i.push_duplicate("r1"), 3, "a duplicate takes an id of its own");
        assert_eq!(
            (i.get(3), i.lookup("r1")),
            (Some("r1"), Some(0)),
            "its lookup keeps the first id"
        );
        assert_eq!(i.intern("r2"), 1);
        assert_eq!(i.heap_bytes(), "r1r2r1".len());
    }
}
