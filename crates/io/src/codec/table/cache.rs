//! An LRU cache of decoded blocks shared by every table (and reader) of a mount, bounded by
//! the bytes the blocks hold. The mutex guards only map operations: blocks are read and
//! decoded outside it, so two threads missing on one block may both decode it (harmless).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::block::Block;
use crate::source::byte_lru::{ByteLru, Weigh};

impl Weigh for Arc<Block> {
    fn weight(&self) -> u64 {
        self.charge()
    }
}

/// Identifies a block: the table it belongs to (unique per opened table) and its offset.
pub(crate) type BlockKey = (u64, u64);

static NEXT_TABLE_ID: AtomicU64 = AtomicU64::new(1);

/// A fresh id for an opened table (never reused within the process).
pub fn new_table_id() -> u64 {
    NEXT_TABLE_ID.fetch_add(1, Ordering::Relaxed)
}

pub struct BlockCache {
    capacity: u64,
    inner: Mutex<ByteLru<BlockKey, Arc<Block>>>,
}

impl std::fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockCache")
            .field("capacity", &self.capacity)
            .finish()
    }
}

impl BlockCache {
    /// A cache holding at most `capacity` bytes of decoded blocks (a block larger than the
    /// whole capacity is returned to its reader but not kept).
    pub fn new(capacity: u64) -> Self {
        BlockCache {
            capacity,
            inner: Mutex::new(ByteLru::new(capacity)),
        }
    }

    pub(crate) fn get(&self, key: BlockKey) -> Option<Arc<Block>> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.get(&key).cloned()
    }

    pub(crate) fn insert(&self, key: BlockKey, block: Arc<Block>) {
        let cost = block.charge();
        if cost > self.capacity {
            return;
        }
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.insert(key, block, drop);
    }

    /// Bytes currently held.
    #[cfg(test)]
    pub fn bytes(&self) -> u64 {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).bytes()
    }
}
