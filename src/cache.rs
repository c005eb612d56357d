//! A bounded cache of decoded chunks.
//!
//! Chunks are keyed by the identity of their stored bytes (file slot,
//! offset, length, CRC32) and by the form they were decoded into (data
//! type and element count): stored bytes below a committed length never
//! change, so a cached chunk stays valid across commits and refreshes, and
//! entries that share stored bytes but decode them differently (a shared
//! chunk of two types, or a crafted index) never see each other's data.
//! Eviction is first-in first-out; the bound counts decoded bytes.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

/// Identity of a decoded chunk: slot, offset, length, CRC32 of the stored
/// bytes, then the data type's index and the element count decoded, and
/// for a chunk made of blocks a digest of its chunk and block shapes (0
/// otherwise): the same bytes are another chunk under another block grid.
pub(crate) type ChunkId = (u16, u64, u32, u32, u8, usize, u64);

pub(crate) struct ChunkCache {
    map: HashMap<ChunkId, Arc<Vec<u8>>>,
    order: VecDeque<ChunkId>,
    bytes: usize,
    capacity: usize,
    /// Buffers of evicted chunks that nothing else held, for the next
    /// chunks read: a read larger than the cache then reuses a few buffers
    /// instead of allocating, faulting in and freeing one per chunk.
    spare: Vec<Vec<u8>>,
}

/// The most evicted buffers kept for reuse; together they also stay within
/// a quarter of the capacity.
const SPARE_BUFFERS: usize = 4;

impl ChunkCache {
    pub(crate) fn new(capacity: usize) -> ChunkCache {
        ChunkCache { map: HashMap::new(), order: VecDeque::new(), bytes: 0, capacity, spare: Vec::new() }
    }

    /// An empty buffer for a chunk of `n` bytes: a kept one that is large
    /// enough, or a new one.
    pub(crate) fn take_spare(&mut self, n: usize) -> Vec<u8> {
        match self.spare.iter().position(|b| b.capacity() >= n) {
            Some(i) => self.spare.swap_remove(i),
            None => Vec::new(),
        }
    }

    /// Drops the oldest entry, keeping its buffer when nothing else holds it.
    fn evict_oldest(&mut self) -> bool {
        let Some(old) = self.order.pop_front() else { return false };
        if let Some(d) = self.map.remove(&old) {
            self.bytes -= d.len();
            if let Ok(mut buf) = Arc::try_unwrap(d) {
                let kept: usize = self.spare.iter().map(Vec::capacity).sum();
                if self.spare.len() < SPARE_BUFFERS && kept + buf.capacity() <= self.capacity / 4 {
                    buf.clear();
                    self.spare.push(buf);
                }
            }
        }
        true
    }

    pub(crate) fn get(&self, id: &ChunkId) -> Option<Arc<Vec<u8>>> {
        self.map.get(id).cloned()
    }

    pub(crate) fn contains(&self, id: &ChunkId) -> bool {
        self.map.contains_key(id)
    }

    /// Keeps `data` unless it alone exceeds the capacity; evicts the oldest entries to make room.
    pub(crate) fn insert(&mut self, id: ChunkId, data: Arc<Vec<u8>>) {
        if data.len() > self.capacity || self.map.contains_key(&id) {
            return;
        }
        while self.bytes + data.len() > self.capacity && self.evict_oldest() {}
        self.bytes += data.len();
        self.order.push_back(id);
        self.map.insert(id, data);
    }

    /// Forgets every chunk.
    pub(crate) fn clear(&mut self) {
        self.map.clear();
        self.order.clear();
        self.bytes = 0;
        self.spare.clear();
    }

    /// Changes the capacity, evicting as needed (0 disables the cache).
    pub(crate) fn resize(&mut self, capacity: usize) {
        self.capacity = capacity;
        while self.bytes > self.capacity && self.evict_oldest() {}
        self.spare.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_holds_and_the_oldest_go_first() {
        let mut c = ChunkCache::new(100);
        for i in 0..5u64 {
            c.insert((0, i, 1, 1, 0, 40, 0), Arc::new(vec![0u8; 40]));
        }
        assert_eq!(c.bytes, 80);
        assert!(!c.contains(&(0, 2, 1, 1, 0, 40, 0)) && c.contains(&(0, 3, 1, 1, 0, 40, 0)) && c.contains(&(0, 4, 1, 1, 0, 40, 0)));
        // The same stored bytes decoded as another type are another entry.
        assert!(!c.contains(&(0, 3, 1, 1, 10, 40, 0)));
        c.insert((0, 9, 1, 1, 0, 101, 0), Arc::new(vec![0u8; 101]));
        assert!(!c.contains(&(0, 9, 1, 1, 0, 101, 0)));
        c.resize(0);
        assert_eq!((c.bytes, c.map.len()), (0, 0));
    }

    #[test]
    fn evicted_buffers_are_reused_within_bounds() {
        let mut c = ChunkCache::new(1000);
        let held = Arc::new(vec![7u8; 100]);
        c.insert((0, 0, 1, 1, 0, 100, 0), held.clone());
        for i in 1..20u64 {
            c.insert((0, i, 1, 1, 0, 100, 0), Arc::new(vec![i as u8; 100]));
        }
        // Eleven were evicted; the one still held elsewhere was not kept, and
        // at most 4 buffers of at most 250 bytes in all were.
        assert_eq!(c.bytes, 1000);
        assert_eq!(c.spare.len(), 2);
        assert_eq!(*held, vec![7u8; 100]);
        let b = c.take_spare(100);
        assert!(b.is_empty() && b.capacity() >= 100);
        assert_eq!(c.take_spare(101).capacity(), 0, "none large enough: a new buffer");
        c.resize(500);
        assert!(c.spare.is_empty() && c.bytes <= 500);
    }
}
