//! The simulated engine's prefix cache: prompt blocks kept for reuse, least recently used evicted first.

use std::collections::VecDeque;

/// The prompt blocks whose KV is kept for reuse, least recently used evicted first. Recency is a tick per use;
/// the queue holds (tick, block) and skips entries a later use made stale.
pub(super) struct PrefixCache {
    last_use: rustc_hash::FxHashMap<u64, u64>,
    queue: VecDeque<(u64, u64)>,
    tick: u64,
    capacity: usize,
}

impl PrefixCache {
    pub(super) fn new(capacity: usize) -> Self {
        PrefixCache {
            last_use: rustc_hash::FxHashMap::default(),
            queue: VecDeque::new(),
            tick: 0,
            capacity,
        }
    }

    /// Leading blocks present; they count as used now.
    pub(super) fn hit_blocks(&mut self, blocks: &[u64]) -> usize {
        let hit = blocks.iter().take_while(|b| self.last_use.contains_key(b)).count();
        self.touch(&blocks[..hit]);
        hit
    }

    /// Adds (or refreshes) blocks, evicting the least recently used beyond capacity.
    pub(super) fn insert(&mut self, blocks: &[u64]) {
        self.touch(blocks);
        while self.last_use.len() > self.capacity {
            let Some((tick, block)) = self.queue.pop_front() else {
                break;
            };
            if self.last_use.get(&block) == Some(&tick) {
                self.last_use.remove(&block);
            }
        }
    }

    fn touch(&mut self, blocks: &[u64]) {
        for &b in blocks {
            self.tick += 1;
            self.last_use.insert(b, self.tick);
            self.queue.push_back((self.tick, b));
        }
        // Stale entries pile up in the queue under heavy reuse: compact when it is far longer than the set.
        if self.queue.len() > 4 * self.last_use.len() + 1024 {
            let last_use = &self.last_use;
            self.queue.retain(|(tick, b)| last_use.get(b) == Some(tick));
        }
    }
}
