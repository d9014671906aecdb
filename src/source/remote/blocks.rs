//! Aligned blocks of remote objects: fetched by ranged GET pinned to the object's ETag, kept
//! in one memory-bounded LRU per mount, and fetched once however many readers want a block at
//! the same time (later arrivals wait on the first request instead of sending their own).
//!
//! Invariants: a cached block holds exactly `min(block_size, size - start)` bytes of the
//! version of the object that was opened (the GET carries `If-Match: <etag>`, and a response
//! of another length is an error); the cache's byte total never exceeds its cap by more than
//! one block; no lock is held while a request is in flight.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use lru::LruCache;
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, GetRange, ObjectStore};
use tokio::sync::OnceCell;

use super::disk::DiskBlocks;
use crate::source::SourceError;

/// One object as opened: what every block request of it is pinned to.
#[derive(Debug)]
pub(crate) struct ObjectRef {
    /// Distinguishes objects in the shared cache.
    pub(crate) id: u64,
    pub(crate) url: String,
    pub(crate) path: ObjectPath,
    pub(crate) size: u64,
    pub(crate) etag: Option<String>,
    pub(crate) last_modified: Option<chrono::DateTime<chrono::Utc>>,
}

type Key = (u64, u64);

/// Blocks of every object of one storage.
pub(crate) struct Blocks {
    store: Arc<dyn ObjectStore>,
    pub(crate) block_size: u64,
    cap: u64,
    cached: Mutex<Cached>,
    inflight: Mutex<HashMap<Key, Arc<OnceCell<Bytes>>>>,
    /// Blocks kept across mounts (`cache_dir`), for objects with an ETag.
    disk: Option<Arc<DiskBlocks>>,
    /// GET requests sent (tests and benchmarks count them).
    pub(crate) gets: AtomicU64,
}

struct Cached {
    lru: LruCache<Key, Bytes>,
    bytes: u64,
}

impl Blocks {
    pub(crate) fn new(
        store: Arc<dyn ObjectStore>,
        block_size: u64,
        cap: u64,
        disk: Option<DiskBlocks>,
    ) -> Blocks {
        Blocks {
            disk: disk.map(Arc::new),
            store,
            block_size,
            cap,
            cached: Mutex::new(Cached {
                lru: LruCache::unbounded(),
                bytes: 0,
            }),
            inflight: Mutex::new(HashMap::new()),
            gets: AtomicU64::new(0),
        }
    }

    /// Byte range of block `index` of `obj`.
    pub(crate) fn range(&self, obj: &ObjectRef, index: u64) -> std::ops::Range<u64> {
        let start = index.saturating_mul(self.block_size).min(obj.size);
        start..start.saturating_add(self.block_size).min(obj.size)
    }

    pub(crate) fn cached(&self, obj: &ObjectRef, index: u64) -> Option<Bytes> {
        let mut c = self.cached.lock().unwrap_or_else(|e| e.into_inner());
        c.lru.get(&(obj.id, index)).cloned()
    }

    /// Block `index` of `obj`, from the cache or fetched (once for all concurrent callers).
    pub(crate) async fn get(&self, obj: &ObjectRef, index: u64) -> Result<Bytes, SourceError> {
        if let Some(b) = self.cached(obj, index) {
            return Ok(b);
        }
        let key = (obj.id, index);
        let cell = {
            let mut inflight = self.inflight.lock().unwrap_or_else(|e| e.into_inner());
            Arc::clone(inflight.entry(key).or_default())
        };
        let result = cell
            .get_or_try_init(|| self.load_or_fetch(obj, index))
            .await
            .cloned();
        if let Ok(bytes) = &result {
            self.insert(key, bytes.clone());
        }
        // Removed on failure too, so a later read tries again.
        let mut inflight = self.inflight.lock().unwrap_or_else(|e| e.into_inner());
        if inflight.get(&key).is_some_and(|c| Arc::ptr_eq(c, &cell)) {
            inflight.remove(&key);
        }
        result
    }

    fn insert(&self, key: Key, bytes: Bytes) {
        let mut c = self.cached.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(old) = c.lru.put(key, bytes.clone()) {
            c.bytes -= old.len() as u64;
        }
        c.bytes += bytes.len() as u64;
        while c.bytes > self.cap && c.lru.len() > 1 {
            match c.lru.pop_lru() {
                Some((_, b)) => c.bytes -= b.len() as u64,
                None => break,
            }
        }
    }

    /// The block from the disk cache, or fetched and then stored there.
    async fn load_or_fetch(&self, obj: &ObjectRef, index: u64) -> Result<Bytes, SourceError> {
        let disk = self.disk.as_ref().zip(obj.etag.as_ref());
        if let Some((disk, etag)) = disk {
            let (disk, url, etag) = (Arc::clone(disk), obj.url.clone(), etag.clone());
            let range = self.range(obj, index);
            let len = range.end - range.start;
            let found =
                tokio::task::spawn_blocking(move || disk.load(&url, &etag, index, len)).await;
            if let Ok(Some(bytes)) = found {
                return Ok(bytes);
            }
        }
        let bytes = self.fetch(obj, index).await?;
        if let Some((disk, etag)) = disk {
            let (disk, url, etag) = (Arc::clone(disk), obj.url.clone(), etag.clone());
            let data = bytes.clone();
            // Awaited, so that a block read before an unmount is on disk for the next mount.
            let _ =
                tokio::task::spawn_blocking(move || disk.store(&url, &etag, index, &data)).await;
        }
        Ok(bytes)
    }

    async fn fetch(&self, obj: &ObjectRef, index: u64) -> Result<Bytes, SourceError> {
        let range = self.range(obj, index);
        let want = range.end - range.start;
        if want == 0 {
            return Ok(Bytes::new());
        }
        let options = GetOptions {
            if_match: obj.etag.clone(),
            if_unmodified_since: obj.etag.is_none().then_some(obj.last_modified).flatten(),
            range: Some(GetRange::Bounded(range.clone())),
            ..Default::default()
        };
        self.gets.fetch_add(1, Ordering::Relaxed);
        let result = self.store.get_opts(&obj.path, options).await;
        let got = match result {
            Ok(r) => {
                if r.meta.e_tag.is_some() && obj.etag.is_some() && r.meta.e_tag != obj.etag {
                    return Err(changed(obj));
                }
                r.bytes().await.map_err(|e| remote_error(obj, e))?
            }
            Err(e) => return Err(remote_error(obj, e)),
        };
        if got.len() as u64 != want {
            return Err(SourceError::Remote {
                url: obj.url.clone(),
                cause: format!(
                    "asked for bytes {}..{}, got {} bytes",
                    range.start,
                    range.end,
                    got.len()
                ),
            });
        }
        Ok(got)
    }
}

fn changed(obj: &ObjectRef) -> SourceError {
    SourceError::Changed {
        path: obj.url.clone(),
    }
}

/// A failed request: a changed or vanished object is `Changed` (ESTALE above), anything else
/// names the URL and the cause (object_store's messages carry no credentials).
pub(crate) fn remote_error(obj: &ObjectRef, e: object_store::Error) -> SourceError {
    match e {
        object_store::Error::Precondition { .. } | object_store::Error::NotFound { .. } => {
            changed(obj)
        }
        other => SourceError::Remote {
            url: obj.url.clone(),
            cause: other.to_string(),
        },
    }
}
