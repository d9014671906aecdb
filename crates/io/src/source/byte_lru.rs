//! The one byte-bounded LRU of the crate: remote blocks, rendered text chunks and decoded
//! table blocks are all kept by it, each value counted by the memory it holds (`Weigh`).
//! It is not synchronised: its owner keeps it behind a lock held only for map operations.
//!
//! Invariant: `bytes` is the sum of the weights held, and it is ≤ `cap` unless a single
//! entry (the last inserted) outweighs the cap on its own.

use std::hash::Hash;

use lru::LruCache;

/// The memory a cached value holds, in bytes.
pub trait Weigh {
    fn weight(&self) -> u64;
}

impl Weigh for bytes::Bytes {
    fn weight(&self) -> u64 {
        self.len() as u64
    }
}

/// A buffer counts by its capacity: a recycled one may be bigger than its bytes.
impl Weigh for std::sync::Arc<Vec<u8>> {
    fn weight(&self) -> u64 {
        self.capacity() as u64
    }
}

pub struct ByteLru<K: Hash + Eq, V: Weigh> {
    map: LruCache<K, V>,
    bytes: u64,
    cap: u64,
}

impl<K: Hash + Eq, V: Weigh> ByteLru<K, V> {
    pub fn new(cap: u64) -> Self {
        ByteLru {
            map: LruCache::unbounded(),
            bytes: 0,
            cap,
        }
    }

    /// The value of `key`, now the most recently used.
    pub fn get(&mut self, key: &K) -> Option<&V> {
        self.map.get(key)
    }

    /// Keeps `value` under `key`, then lets the least recently used others go until the
    /// weights fit the cap; each value let go (or replaced) is handed to `gone`.
    pub fn insert(&mut self, key: K, value: V, mut gone: impl FnMut(V)) {
        self.bytes += value.weight();
        if let Some(old) = self.map.put(key, value) {
            self.bytes -= old.weight();
            gone(old);
        }
        while self.bytes > self.cap && self.map.len() > 1 {
            match self.map.pop_lru() {
                Some((_, old)) => {
                    self.bytes -= old.weight();
                    gone(old);
                }
                None => break,
            }
        }
        debug_assert!(self.bytes <= self.cap || self.map.len() == 1);
    }

    /// Lets the value of `key` go.
    pub fn remove(&mut self, key: &K) -> Option<V> {
        let old = self.map.pop(key)?;
        self.bytes -= old.weight();
        Some(old)
    }

    /// The weights held now.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Weigh for u64 {
        fn weight(&self) -> u64 {
            *self
        }
    }

    #[test]
    fn the_least_recently_used_go_first_and_the_weights_stay_under_the_cap() {
        let mut l = ByteLru::new(10);
        let mut gone = Vec::new();
        for (k, w) in [(1, 4u64), (2, 4), (3, 2)] {
            l.insert(k, w, |v| gone.push(v));
        }
        assert_eq!((l.bytes(), gone.len()), (10, 0));
        l.get(&1);
        l.insert(4, 3, |v| gone.push(v));
        // 2 was the least recently used: 1 was read.
        assert_eq!(gone, [4]);
        assert!(l.get(&2).is_none() && l.get(&1).is_some());
        assert_eq!(l.bytes(), 9);
        // A replaced value is handed back; one heavier than the cap stays alone.
        l.insert(1, 1, |v| gone.push(v));
        assert_eq!(l.bytes(), 6);
        l.insert(5, 50, |v| gone.push(v));
        assert_eq!(l.bytes(), 50);
        assert!(l.get(&5).is_some() && l.get(&1).is_none());
        assert_eq!(l.remove(&5), Some(50));
        assert_eq!(l.bytes(), 0);
    }
}
