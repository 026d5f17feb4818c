//! String interning: every repeated string of a trace (request ids, sources, labels, token texts) is stored once
//! and referred to by a `u32` id, so ten million tokens cost ids, not strings.

use rustc_hash::FxHashMap as HashMap;
use std::sync::Arc;

/// Marks an absent string id in `u32` columns.
pub const NO_STR: u32 = u32::MAX;

/// A set of distinct strings, each with a dense `u32` id in insertion order.
#[derive(Debug, Default, Clone)]
pub struct Interner {
    list: Vec<Arc<str>>,
    ids: HashMap<Arc<str>, u32>,
}

impl Interner {
    /// The id of `s`, adding it when new.
    pub fn intern(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let id = u32::try_from(self.list.len()).unwrap_or(NO_STR - 1).min(NO_STR - 1);
        let shared: Arc<str> = Arc::from(s);
        self.list.push(Arc::clone(&shared));
        self.ids.insert(shared, id);
        id
    }

    /// Appends `s` under a new id even when it is present (its lookup keeps the first id): for rebuilding an
    /// interner id for id.
    pub fn push_duplicate(&mut self, s: &str) -> u32 {
        let id = u32::try_from(self.list.len()).unwrap_or(NO_STR - 1).min(NO_STR - 1);
        self.list.push(Arc::from(s));
        id
    }

    /// The id of `s` if it is present.
    pub fn lookup(&self, s: &str) -> Option<u32> {
        self.ids.get(s).copied()
    }

    /// The string with this id; `None` for [`NO_STR`] or an id out of range.
    pub fn get(&self, id: u32) -> Option<&str> {
        self.list.get(id as usize).map(|s| &**s)
    }

    /// The string with this id, or `""` when absent.
    pub fn str_or_empty(&self, id: u32) -> &str {
        self.get(id).unwrap_or("")
    }

    /// Number of distinct strings.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// True when no string was interned.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Bytes held by the strings themselves (not counting the lookup table).
    pub fn heap_bytes(&self) -> usize {
        self.list.iter().map(|s| s.len()).sum()
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
    }
}
