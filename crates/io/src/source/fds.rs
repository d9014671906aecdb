//! The descriptors of local files kept open, over the whole process.
//!
//! A mapped file needs no descriptor to be read: its mapping holds the inode. Descriptors are
//! for `pread` (short reads: a copy costs less than the faults of a borrow), `fstat` (a file
//! rewritten in place) and passthrough. Keeping one per file for the file's life ran a
//! process out of them: a 163-shard model opened twice at once under `ulimit -n 256`, three
//! models of it under 1024. So a file's descriptor lives in a table of the most recently
//! used ones, bounded by a share of the process's limit, and is opened again (by path, then
//! checked to be the inode mapped) when evicted.
//!
//! Invariants: a table holds at most `cap()` entries, one per file id; nothing is opened,
//! read or closed while its lock is held (a reader holds its own `Arc<File>`: an evicted
//! descriptor closes when its last reader is done).

use std::fs::File;
use std::sync::{Arc, Mutex, OnceLock};

/// One table: (file id, descriptor), most recently used first.
pub(crate) struct Fds {
    kept: Mutex<Vec<(u64, Arc<File>)>>,
    /// The most kept, as a share of the descriptor limit (`cap`).
    share: usize,
    /// … and never more than this.
    most: usize,
}

/// Each file's own descriptor (`pread`, `fstat`, passthrough).
pub(crate) static MAIN: Fds = Fds::new(4, 256);
/// Descriptions with the kernel's read-ahead off, for small metadata reads.
pub(crate) static SMALL: Fds = Fds::new(16, 16);

impl Fds {
    const fn new(share: usize, most: usize) -> Fds {
        Fds {
            kept: Mutex::new(Vec::new()),
            share,
            most,
        }
    }

    /// The most descriptors this table keeps: `1/share` of the soft limit on open files (a
    /// quarter for `MAIN`, leaving the rest to the program and to other tables), at least 8.
    pub(crate) fn cap(&self) -> usize {
        static LIMIT: OnceLock<u64> = OnceLock::new();
        let limit = *LIMIT.get_or_init(|| {
            let mut r = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            // SAFETY: getrlimit writes the struct it is given.
            match unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } {
                0 => r.rlim_cur,
                _ => 1024,
            }
        });
        let share = usize::try_from(limit / self.share as u64).unwrap_or(usize::MAX);
        share.clamp(8, self.most.max(8))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(u64, Arc<File>)>> {
        self.kept.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// File `id`'s descriptor: the one kept, or `open()`'s, then kept (the least recently
    /// used let go when over the cap). `None` when `open` gives none.
    pub(crate) fn get(&self, id: u64, open: impl FnOnce() -> Option<File>) -> Option<Arc<File>> {
        {
            let mut kept = self.lock();
            if let Some(i) = kept.iter().position(|(k, _)| *k == id) {
                let hit = kept.remove(i);
                let f = Arc::clone(&hit.1);
                kept.insert(0, hit);
                return Some(f);
            }
        }
        let f = Arc::new(open()?);
        self.put(id, Arc::clone(&f));
        Some(f)
    }

    /// Keeps `f` as file `id`'s (a race of two first opens keeps the later one).
    pub(crate) fn put(&self, id: u64, f: Arc<File>) {
        let gone = {
            let mut kept = self.lock();
            kept.retain(|(k, _)| *k != id);
            kept.insert(0, (id, f));
            let cap = self.cap();
            let keep = cap.min(kept.len());
            let gone = kept.split_off(keep);
            debug_assert!(kept.len() <= cap);
            gone
        };
        drop(gone); // closed outside the lock
    }

    /// Lets go of file `id`'s descriptor (the file is dropped).
    pub(crate) fn forget(&self, id: u64) {
        let gone = {
            let mut kept = self.lock();
            kept.iter()
                .position(|(k, _)| *k == id)
                .map(|i| kept.remove(i))
        };
        drop(gone);
    }

    #[cfg(test)]
    pub(crate) fn holds(&self, id: u64) -> bool {
        self.lock().iter().any(|(k, _)| *k == id)
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}
