//! Owned bytes of a read, in buffers recycled by the thread that drops them.
//!
//! Every read answers with `Bytes`: a view of a buffer something holds anyway (a rendered
//! chunk, a fetched block) or bytes copied for this read. The copies go into buffers kept
//! here, because a fresh buffer of a reply's size is a new mapping (glibc maps anything over
//! 128 KiB on its own): a page fault per 4 KiB and an unmap per read. A FUSE thread takes a
//! buffer, fills it, replies and drops the `Bytes`, which gives the buffer back to that
//! thread's stash for its next read.
//!
//! Invariants: a stash holds at most `KEEP` buffers, none larger than `KEEP_MAX`; the bytes
//! of a `Bytes` handed out are exactly what `fill` wrote (stale bytes past them are never
//! shown); a buffer's contents start on a page (`AlignedBuf`).

use std::cell::RefCell;

use bytes::Bytes;

use super::aligned::AlignedBuf;

/// Buffers a thread keeps: a read that reads another file's bytes (a view over its parts)
/// holds two at once.
const KEEP: usize = 2;
/// Larger buffers are not kept (a reply is at most 1 MiB; a whole-chunk read more).
const KEEP_MAX: usize = 4 << 20;

thread_local! {
    static STASH: RefCell<Vec<AlignedBuf>> = const { RefCell::new(Vec::new()) };
}

/// Up to `len` bytes written by `fill` (which returns how many it wrote) as `Bytes`.
pub fn filled<E>(len: usize, fill: impl FnOnce(&mut [u8]) -> Result<usize, E>) -> Result<Bytes, E> {
    if len == 0 {
        return Ok(Bytes::new());
    }
    let mut buf = take(len);
    // A recycled buffer keeps its length: only bytes never written before are zeroed.
    if buf.len() < len {
        buf.resize(len);
    }
    let n = fill(&mut buf.as_mut_slice()[..len])?;
    debug_assert!(n <= len, "fill wrote {n} of {len}");
    Ok(Bytes::from_owner(Filled {
        buf,
        len: n.min(len),
    }))
}

/// Frees the buffers this thread keeps: for a thread that goes idle after a burst of reads
/// (a push thread), so that its stash does not stay resident while it waits.
pub fn let_go() {
    let _ = STASH.try_with(|s| s.borrow_mut().clear());
}

fn take(len: usize) -> AlignedBuf {
    let kept = STASH
        .try_with(|s| {
            let mut s = s.borrow_mut();
            let i = s.iter().position(|b| b.capacity() >= len)?;
            Some(s.swap_remove(i))
        })
        .ok()
        .flatten();
    kept.unwrap_or_else(|| AlignedBuf::with_capacity(len))
}

/// A buffer and how many of its bytes were filled.
struct Filled {
    buf: AlignedBuf,
    len: usize,
}

impl AsRef<[u8]> for Filled {
    fn as_ref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl Drop for Filled {
    fn drop(&mut self) {
        if self.buf.capacity() > KEEP_MAX {
            return;
        }
        let buf = std::mem::take(&mut self.buf);
        // During the thread's teardown the stash is gone: the buffer is freed.
        let _ = STASH.try_with(|s| {
            let mut s = s.borrow_mut();
            if s.len() < KEEP {
                s.push(buf);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_what_was_filled_and_the_buffer_comes_back() {
        let a = filled(10, |b| {
            b[..4].copy_from_slice(b"abcd");
            Ok::<_, ()>(4)
        })
        .unwrap();
        assert_eq!(&a[..], b"abcd");
        let ptr = a.as_ptr();
        drop(a);
        // The same buffer serves the next read; its stale bytes are not shown.
        let b = filled(8, |b| {
            b[0] = b'x';
            Ok::<_, ()>(1)
        })
        .unwrap();
        assert_eq!(b.as_ptr(), ptr);
        assert_eq!(&b[..], b"x");
        assert_eq!(b.as_ptr() as usize % super::super::aligned::PAGE, 0);
    }

    #[test]
    fn at_most_keep_buffers_are_kept() {
        let held: Vec<Bytes> = (0..KEEP + 2)
            .map(|_| filled(4096, |b| Ok::<_, ()>(b.len())).unwrap())
            .collect();
        drop(held);
        STASH.with(|s| assert_eq!(s.borrow().len(), KEEP));
        let e = filled(4, |_| Err("no"));
        assert_eq!(e.unwrap_err(), "no");
        assert!(filled(0, |_| Ok::<_, ()>(0)).unwrap().is_empty());
    }
}
