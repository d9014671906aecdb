//! Memory-bounded LRU of rendered chunks (and other byte blocks), plus the in-process map of
//! chunk-offset indexes.
//!
//! Invariants:
//! - Every mutex here is held only for map operations: nothing renders, reads or writes a file
//!   while holding one. Two readers missing the same chunk may both render it; the second
//!   insert simply replaces the first (the bytes are equal).
//! - Blocks are keyed by `(namespace, index)`. A namespace is a number handed out by
//!   `new_namespace` and never reused, so a block can never be served for the wrong file.
//! - An index keyed by a tensor's address also holds a `Weak` to that tensor: while the entry
//!   exists the address cannot be reused by another allocation, and the entry is only served
//!   when the weak still upgrades to the same tensor.

use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use lru::LruCache;
use std::collections::HashMap;

use crate::source::byte_lru::ByteLru;

use crate::model::{Document, Tensor};
use crate::store::Store;

/// Chunk-offset index of one text file: `offsets[i]..offsets[i + 1]` are the bytes of chunk
/// `i`; `offsets[0] == 0`, non-decreasing, `offsets.len() == chunks + 1`.
#[derive(Debug)]
pub(crate) struct ChunkOffsets {
    /// Cache namespace of this file's rendered chunks.
    pub(crate) namespace: u64,
    pub(crate) offsets: Vec<u64>,
}

impl ChunkOffsets {
    /// Exact file size.
    pub(crate) fn size(&self) -> u64 {
        self.offsets.last().copied().unwrap_or(0)
    }
    pub(crate) fn chunks(&self) -> u64 {
        self.offsets.len().saturating_sub(1) as u64
    }
    /// Bytes of chunk `i` (`i < chunks()`).
    pub(crate) fn chunk_len(&self, i: u64) -> u64 {
        self.offsets[i as usize + 1] - self.offsets[i as usize]
    }
    /// Checks the invariants (for indexes loaded from a persistent store).
    pub(crate) fn is_valid(offsets: &[u64], chunks: u64) -> bool {
        offsets.len() as u64 == chunks.saturating_add(1)
            && !offsets.is_empty()
            && crate::store::starts_at_zero_ascending(offsets)
    }
}

/// Who an index belongs to.
#[derive(Clone, Debug)]
pub(crate) enum OffsetsKey {
    /// A stable identity (`Tensor::cache_identity` plus layout parameters): shared across
    /// tensor objects and, through an `Store`, across mounts.
    Stable(String),
    /// A tensor object's address plus layout parameters: in-process only.
    Object { addr: usize, tag: String },
}

#[derive(Hash, PartialEq, Eq)]
enum MapKey {
    Stable(String),
    Object(usize, String),
}

struct OffsetsEntry {
    owner: Option<WeakOwner>,
    index: Arc<ChunkOffsets>,
}

/// What a text file renders: a tensor's layout, or a reader's document.
#[derive(Clone)]
pub(crate) enum Owner {
    Tensor(Arc<dyn Tensor>),
    Doc(Arc<dyn Document>),
}

enum WeakOwner {
    Tensor(Weak<dyn Tensor>),
    Doc(Weak<dyn Document>),
}

impl Owner {
    pub(crate) fn addr(&self) -> usize {
        match self {
            Owner::Tensor(t) => Arc::as_ptr(t) as *const u8 as usize,
            Owner::Doc(d) => Arc::as_ptr(d) as *const u8 as usize,
        }
    }

    pub(crate) fn cache_identity(&self) -> Option<String> {
        match self {
            Owner::Tensor(t) => t.cache_identity(),
            Owner::Doc(d) => d.cache_identity(),
        }
    }

    fn downgrade(&self) -> WeakOwner {
        match self {
            Owner::Tensor(t) => WeakOwner::Tensor(Arc::downgrade(t)),
            Owner::Doc(d) => WeakOwner::Doc(Arc::downgrade(d)),
        }
    }
}

impl From<Arc<dyn Tensor>> for Owner {
    fn from(t: Arc<dyn Tensor>) -> Owner {
        Owner::Tensor(t)
    }
}

impl WeakOwner {
    /// Still alive and the very object `owner` is.
    fn is(&self, owner: &Owner) -> bool {
        match (self, owner) {
            (WeakOwner::Tensor(w), Owner::Tensor(t)) => w
                .upgrade()
                .is_some_and(|u| std::ptr::addr_eq(Arc::as_ptr(&u), Arc::as_ptr(t))),
            (WeakOwner::Doc(w), Owner::Doc(d)) => w
                .upgrade()
                .is_some_and(|u| std::ptr::addr_eq(Arc::as_ptr(&u), Arc::as_ptr(d))),
            _ => false,
        }
    }
}

/// Up to `len` bytes of a cached chunk from `from`, lent to a reply without a copy: the
/// `Bytes` keep the chunk alive after the cache lets it go.
pub(crate) fn lend(chunk: Arc<Vec<u8>>, from: usize, len: usize) -> bytes::Bytes {
    let from = from.min(chunk.len());
    let to = from + len.min(chunk.len() - from);
    bytes::Bytes::from_owner(Lent(chunk)).slice(from..to)
}

struct Lent(Arc<Vec<u8>>);

impl AsRef<[u8]> for Lent {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

/// Rendered chunks by (namespace, index).
type RenderedBlocks = ByteLru<(u64, u64), Arc<Vec<u8>>>;

/// Shared cache of one mount.
pub struct ChunkCache {
    max_bytes: u64,
    threads: usize,
    blocks: Mutex<RenderedBlocks>,
    indexes: Mutex<LruCache<MapKey, OffsetsEntry>>,
    store: OnceLock<Arc<dyn Store>>,
    next_namespace: AtomicU64,
    rendered: AtomicU64,
    /// Read-ahead worker threads running (bounded by `2 × threads`).
    readahead_workers: AtomicUsize,
    /// Workers ever started (tests: a small file's size is learnt on the caller's thread).
    started_workers: AtomicUsize,
    /// `store_every_index` was asked for.
    store_one_chunk: std::sync::atomic::AtomicBool,
    /// One-chunk text sizes by the 128-bit hash of their stable key (`keep_one_chunk`).
    one_chunk: Mutex<HashMap<u128, u64>>,
    /// Buffers of evicted blocks nobody else held, for the next render (at most `4 × threads`).
    spare: Mutex<Vec<Vec<u8>>>,
}

/// One-chunk text sizes kept (`keep_one_chunk`): about 10 MB at most (24 bytes and the hash
/// table's slack each), the small texts of a 250,000-tensor model, so a mount that follows a
/// directory for days stays bounded.
const MAX_ONE_CHUNK_SIZES: usize = 1 << 18;
/// How many chunk indexes stay in memory without a file holding them.
const MAX_OFFSET_TABLES: usize = 4096;

impl ChunkCache {
    /// A cache holding at most `max_bytes` of blocks; index building uses every core.
    pub fn new(max_bytes: u64) -> Self {
        let threads = crate::source::cores();
        ChunkCache {
            max_bytes,
            threads,
            blocks: Mutex::new(ByteLru::new(max_bytes)),
            indexes: Mutex::new(LruCache::new(NonZeroUsize::new(MAX_OFFSET_TABLES).unwrap())),
            store: OnceLock::new(),
            next_namespace: AtomicU64::new(1),
            rendered: AtomicU64::new(0),
            readahead_workers: AtomicUsize::new(0),
            started_workers: AtomicUsize::new(0),
            store_one_chunk: std::sync::atomic::AtomicBool::new(false),
            one_chunk: Mutex::new(HashMap::new()),
            spare: Mutex::new(Vec::new()),
        }
    }

    /// Number of worker threads used to build a chunk index (at least 1).
    pub fn with_threads(mut self, threads: usize) -> Self {
        self.threads = threads.max(1);
        self
    }

    pub(crate) fn threads(&self) -> usize {
        self.threads
    }

    /// Plugs in a persistent index store (once; later calls are ignored).
    pub fn set_offset_store(&self, store: Arc<dyn Store>) {
        let _ = self.store.set(store);
    }

    /// Stores every index learnt, one chunk's too (`modelfs index`: a remount renders
    /// nothing); a mount stores only the indexes of more than one chunk.
    pub fn store_every_index(&self) {
        self.store_one_chunk.store(true, Ordering::Relaxed);
    }

    pub(crate) fn stores_one_chunk(&self) -> bool {
        self.store_one_chunk.load(Ordering::Relaxed)
    }

    pub fn offset_store(&self) -> Option<&Arc<dyn Store>> {
        self.store.get()
    }

    /// A fresh namespace for blocks of one file (never reused).
    pub(crate) fn new_namespace(&self) -> u64 {
        let n = self.next_namespace.fetch_add(1, Ordering::Relaxed);
        // Never reused: a wrap would take 2^64 files.
        debug_assert_ne!(n, u64::MAX);
        n
    }

    /// Chunks rendered so far (by index builds and reads); tests use it to show that a read
    /// touches only the chunks it needs.
    pub fn rendered_chunks(&self) -> u64 {
        self.rendered.load(Ordering::Relaxed)
    }

    pub(crate) fn count_rendered(&self, n: u64) {
        self.rendered.fetch_add(n, Ordering::Relaxed);
    }

    /// Reserves a read-ahead worker slot (at most `2 × threads` run at once, over all files).
    pub(crate) fn try_start_worker(&self) -> bool {
        let max = self.threads.saturating_mul(2).max(1);
        let started = self
            .readahead_workers
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < max).then_some(n + 1)
            })
            .is_ok();
        if started {
            self.started_workers.fetch_add(1, Ordering::Relaxed);
        }
        started
    }

    /// Workers started so far.
    #[cfg(test)]
    pub(crate) fn started_workers(&self) -> usize {
        self.started_workers.load(Ordering::Relaxed)
    }

    /// Frees a slot taken by `try_start_worker`.
    pub(crate) fn end_worker(&self) {
        self.readahead_workers.fetch_sub(1, Ordering::AcqRel);
    }

    /// Read-ahead workers running now.
    #[cfg(test)]
    pub(crate) fn readahead_workers(&self) -> usize {
        self.readahead_workers.load(Ordering::Acquire)
    }

    /// Bytes currently held by blocks.
    #[cfg(test)]
    pub(crate) fn used_bytes(&self) -> u64 {
        self.blocks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .bytes()
    }

    pub(crate) fn get(&self, namespace: u64, index: u64) -> Option<Arc<Vec<u8>>> {
        let mut b = self.blocks.lock().unwrap_or_else(|e| e.into_inner());
        b.get(&(namespace, index)).cloned()
    }

    /// Inserts a block, evicting least recently used ones to stay within `max_bytes`. A block
    /// larger than a quarter of the cache is not kept (it would flush everything else).
    /// Blocks are counted by the memory they hold (their capacity: a recycled buffer may be
    /// bigger than its bytes), so `max_bytes` bounds memory, not just content.
    pub(crate) fn insert(&self, namespace: u64, index: u64, block: Arc<Vec<u8>>) {
        let len = block.capacity() as u64;
        if len > self.max_bytes / 4 {
            return;
        }
        let mut b = self.blocks.lock().unwrap_or_else(|e| e.into_inner());
        let mut evicted = Vec::new();
        b.insert((namespace, index), block, |old| evicted.push(old));
        debug_assert!(b.bytes() <= self.max_bytes);
        drop(b);
        self.recycle(evicted);
    }

    /// Drops block `index` of `namespace` (if cached) and keeps its buffer for the next
    /// render when nobody else holds it.
    pub(crate) fn release(&self, namespace: u64, index: u64) {
        let mut b = self.blocks.lock().unwrap_or_else(|e| e.into_inner());
        let Some(old) = b.remove(&(namespace, index)) else {
            return;
        };
        drop(b);
        self.recycle(vec![old]);
    }

    /// An empty buffer for rendering a block of about `cap` bytes: a recycled one when there
    /// is one. A fresh buffer of a block's size is a new mapping (the allocator maps buffers
    /// over 128 KiB on their own): page faults, zeroed pages and an unmap per block, about a
    /// tenth of the time of a `cat` of a text file.
    pub(crate) fn buffer(&self, cap: usize) -> Vec<u8> {
        let spare = self.spare.lock().unwrap_or_else(|e| e.into_inner()).pop();
        match spare {
            Some(mut v) => {
                v.clear();
                v.reserve(cap);
                v
            }
            None => Vec::with_capacity(cap),
        }
    }

    fn recycle(&self, evicted: Vec<Arc<Vec<u8>>>) {
        let keep = self.threads.saturating_mul(4).max(4);
        let mut spare = self.spare.lock().unwrap_or_else(|e| e.into_inner());
        for block in evicted {
            if spare.len() >= keep {
                break;
            }
            // A block a reader still holds is freed by that reader instead.
            if let Ok(v) = Arc::try_unwrap(block) {
                spare.push(v);
            }
        }
    }

    /// The index stored under `key`, if any (and, for object keys, if its owner is `owner`).
    pub(crate) fn lookup_offsets(
        &self,
        key: &OffsetsKey,
        owner: &Owner,
    ) -> Option<Arc<ChunkOffsets>> {
        let mk = map_key(key);
        let mut m = self.indexes.lock().unwrap_or_else(|e| e.into_inner());
        let e = m.get(&mk)?;
        match &e.owner {
            Some(w) if w.is(owner) => Some(e.index.clone()),
            Some(_) => {
                m.pop(&mk);
                None
            }
            None => Some(e.index.clone()),
        }
    }

    /// Keeps the size of a one-chunk text under its stable key (`text::publish`: the store
    /// does not keep them): 24 bytes, so that a `.json` shows every small text's size as long
    /// as the mount lives, whatever the index LRU let go.
    pub(crate) fn keep_one_chunk(&self, key: &str, size: u64) {
        let mut m = self.one_chunk.lock().unwrap_or_else(|e| e.into_inner());
        if m.len() >= MAX_ONE_CHUNK_SIZES {
            // Rare (a mount following new checkpoints for days): starting afresh costs a
            // render per small text asked again, and keeps the table 24 bytes an entry.
            m.clear();
        }
        m.insert(xxhash_rust::xxh3::xxh3_128(key.as_bytes()), size);
    }

    /// The size `keep_one_chunk` kept under `key`.
    pub(crate) fn one_chunk(&self, key: &str) -> Option<u64> {
        let m = self.one_chunk.lock().unwrap_or_else(|e| e.into_inner());
        m.get(&xxhash_rust::xxh3::xxh3_128(key.as_bytes())).copied()
    }

    pub(crate) fn keep_offsets(&self, key: &OffsetsKey, owner: &Owner, index: Arc<ChunkOffsets>) {
        debug_assert!(ChunkOffsets::is_valid(&index.offsets, index.chunks()));
        let owner = match key {
            OffsetsKey::Stable(_) => None,
            OffsetsKey::Object { .. } => Some(owner.downgrade()),
        };
        let mut m = self.indexes.lock().unwrap_or_else(|e| e.into_inner());
        m.put(map_key(key), OffsetsEntry { owner, index });
    }
}

fn map_key(key: &OffsetsKey) -> MapKey {
    match key {
        OffsetsKey::Stable(s) => MapKey::Stable(s.clone()),
        OffsetsKey::Object { addr, tag } => MapKey::Object(*addr, tag.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lru_stays_within_bytes() {
        let c = ChunkCache::new(1000);
        for i in 0..20 {
            c.insert(1, i, Arc::new(vec![0u8; 200]));
        }
        assert!(c.used_bytes() <= 1000);
        assert!(c.get(1, 19).is_some());
        assert!(c.get(1, 0).is_none());
        c.insert(2, 0, Arc::new(vec![0u8; 600])); // > max/4: not kept
        assert!(c.get(2, 0).is_none());
    }

    #[test]
    fn index_validity() {
        assert!(ChunkOffsets::is_valid(&[0, 5, 5, 9], 3));
        assert!(!ChunkOffsets::is_valid(&[0, 5, 4], 2));
        assert!(!ChunkOffsets::is_valid(&[1, 5], 1));
        assert!(!ChunkOffsets::is_valid(&[0, 5], 2));
    }
}
