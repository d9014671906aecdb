//! Block buffers, recycled: a sequential read of a large object fills one block-sized buffer
//! per block, and fresh buffers cost more than the copy into them (a block-sized allocation is
//! a new mapping: a page fault and a zeroed page per 4 KiB, and an unmap with a TLB shootdown
//! when it is freed — half the daemon's time in a remote `cat`). A block evicted from the
//! cache returns its buffer here, and the next block is filled into it.
//!
//! Invariants: a buffer handed out is empty with capacity of at least what was asked for, and
//! no more than that for a short block (a small object's block must not hold a block-sized
//! buffer: the cache counts blocks by length); at most `keep` free buffers are held; a buffer
//! returns only when the last `Bytes` pointing into it drops. A block-sized buffer's contents
//! start on a page boundary (see `source::aligned`), a short block's on a cache line.

use std::sync::{Arc, Mutex, Weak};

use bytes::Bytes;

use crate::source::aligned::{AlignedBuf, PAGE};

pub(crate) struct BufPool {
    size: usize,
    keep: usize,
    free: Mutex<Vec<AlignedBuf>>,
}

impl BufPool {
    pub(crate) fn new(size: usize, keep: usize) -> Arc<BufPool> {
        Arc::new(BufPool {
            size,
            keep,
            free: Mutex::new(Vec::new()),
        })
    }

    /// An empty buffer with room for `want` bytes: a recycled block buffer for a whole block,
    /// a buffer of exactly `want` for a shorter one (never recycled).
    pub(crate) fn take(&self, want: usize) -> AlignedBuf {
        if want < self.size {
            return AlignedBuf::aligned_to(want, 64);
        }
        let recycled = self.free.lock().unwrap_or_else(|e| e.into_inner()).pop();
        recycled.unwrap_or_else(|| fresh(self.size))
    }

    /// `buf` as `Bytes` that give the buffer back to the pool when the last of them drops.
    pub(crate) fn freeze(self: &Arc<Self>, buf: AlignedBuf) -> Bytes {
        Bytes::from_owner(Pooled {
            buf,
            pool: Arc::downgrade(self),
        })
    }

    fn give(&self, mut buf: AlignedBuf) {
        if buf.capacity() < self.size {
            return;
        }
        buf.clear();
        let mut free = self.free.lock().unwrap_or_else(|e| e.into_inner());
        if free.len() < self.keep {
            free.push(buf);
        }
    }

    #[cfg(test)]
    fn free_count(&self) -> usize {
        self.free.lock().unwrap().len()
    }
}

/// A new buffer whose pages are made present in one call rather than one fault per page.
fn fresh(size: usize) -> AlignedBuf {
    let buf = AlignedBuf::with_capacity(size);
    // The contents start on a page (`AlignedBuf`): whole pages from there.
    let pages = size / PAGE * PAGE;
    if pages > 0 {
        // SAFETY: the range lies inside the allocation just made; MADV_POPULATE_WRITE only
        // faults its pages in (their contents stay undefined until written, and the buffer is
        // empty). Failure (an older kernel) leaves the faults to happen on first write.
        unsafe {
            libc::madvise(
                buf.as_ptr() as *mut libc::c_void,
                pages,
                libc::MADV_POPULATE_WRITE,
            );
        }
    }
    buf
}

struct Pooled {
    buf: AlignedBuf,
    pool: Weak<BufPool>,
}

impl AsRef<[u8]> for Pooled {
    fn as_ref(&self) -> &[u8] {
        &self.buf
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        if let Some(pool) = self.pool.upgrade() {
            pool.give(std::mem::take(&mut self.buf));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_when_the_last_bytes_drop() {
        let pool = BufPool::new(1 << 20, 2);
        let mut a = pool.take(1 << 20);
        assert!(a.is_empty() && a.capacity() >= 1 << 20);
        a.extend_from_slice(&[7u8; 1000]);
        let ptr = a.as_ptr();
        let bytes = pool.freeze(a);
        let slice = bytes.slice(10..20);
        drop(bytes);
        assert_eq!(pool.free_count(), 0, "a slice still points into it");
        assert_eq!(&slice[..], &[7u8; 10]);
        drop(slice);
        assert_eq!(pool.free_count(), 1);
        let b = pool.take(1 << 20);
        assert_eq!(b.as_ptr(), ptr, "the same buffer again");
        assert_eq!(b.as_ptr() as usize % 4096, 0, "page-aligned contents");
        assert!(b.is_empty());
        // At most `keep` are held.
        let bufs: Vec<_> = (0..4).map(|_| pool.freeze(pool.take(1 << 20))).collect();
        drop(bufs);
        assert_eq!(pool.free_count(), 2);
        // A short block gets a buffer of its own size, which is not kept.
        let small = pool.take(133);
        assert!(small.capacity() < 4096);
        assert_eq!(small.as_ptr() as usize % 64, 0);
        drop(pool.freeze(small));
        assert_eq!(pool.free_count(), 2);
    }
}
