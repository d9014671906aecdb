//! Decoded chunks of every zarr array of the process, kept in one byte-bounded LRU (the
//! decoded-blocks share of `cache=`, `ReaderOptions::block_cache_bytes`, as the first open
//! gives it):
//! a compressed chunk must be decoded whole to serve any byte of it, and a reader going
//! through a tensor in small pieces (the kernel's 128 KiB reads) must not decode it again for
//! each. Readers racing on one chunk wait for the one decoding it (work done once); no lock
//! is held while a chunk is read or decoded. A failed decode is not kept: the next read tries
//! again (a transient fault passes; damage fails the same way again).

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, LazyLock, Mutex, OnceLock};

use crate::model::ModelError;
use crate::source::byte_lru::ByteLru;

/// Bytes of decoded chunks kept; a chunk larger than this is decoded for its read only.
static CAP: OnceLock<u64> = OnceLock::new();

/// Sets the bytes kept (the first call only: one cache serves the process).
pub(crate) fn budget(bytes: u64) {
    let _ = CAP.set(bytes);
}

fn cap() -> u64 {
    *CAP.get_or_init(|| 64 << 20)
}

/// A chunk: its array (`new_array`) and its index in the array's grid.
pub(crate) type Key = (u64, u64);

struct State {
    lru: ByteLru<Key, Arc<Vec<u8>>>,
    busy: HashSet<Key>,
}

static CACHE: LazyLock<(Mutex<State>, Condvar)> = LazyLock::new(|| {
    let state = State {
        lru: ByteLru::new(cap()),
        busy: HashSet::new(),
    };
    (Mutex::new(state), Condvar::new())
});

static NEXT_ARRAY: AtomicU64 = AtomicU64::new(1);

/// A fresh id for an opened array (never reused within the process).
pub(crate) fn new_array() -> u64 {
    NEXT_ARRAY.fetch_add(1, Ordering::Relaxed)
}

/// The decoded chunk `key`, decoded by `decode` when no one has it.
pub(crate) fn get(
    key: Key,
    decode: impl FnOnce() -> Result<Vec<u8>, ModelError>,
) -> Result<Arc<Vec<u8>>, ModelError> {
    let (lock, idle) = &*CACHE;
    {
        let mut s = lock.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(c) = s.lru.get(&key) {
                return Ok(Arc::clone(c));
            }
            if !s.busy.contains(&key) {
                s.busy.insert(key);
                break;
            }
            s = idle.wait(s).unwrap_or_else(|e| e.into_inner());
        }
    }
    let got = decode().map(Arc::new);
    let mut s = lock.lock().unwrap_or_else(|e| e.into_inner());
    s.busy.remove(&key);
    if let Ok(c) = &got {
        if c.len() as u64 <= cap() {
            s.lru.insert(key, Arc::clone(c), drop);
        }
    }
    drop(s);
    idle.notify_all();
    got
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn racing_readers_decode_once_and_failures_are_not_kept() {
        let id = new_array();
        let decodes = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    let c = get((id, 0), || {
                        decodes.fetch_add(1, Ordering::SeqCst);
                        std::thread::sleep(std::time::Duration::from_millis(50));
                        Ok(vec![7; 16])
                    })
                    .unwrap();
                    assert_eq!(*c, vec![7; 16]);
                });
            }
        });
        assert_eq!(decodes.load(Ordering::SeqCst), 1);
        assert!(get((id, 1), || Err(ModelError::data("x", "damaged"))).is_err());
        assert_eq!(*get((id, 1), || Ok(vec![1])).unwrap(), vec![1]);
    }
}
