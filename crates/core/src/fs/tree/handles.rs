//! Open files: `open` makes a handle that owns what it opened (the content, its size as
//! learnt) and its reader's cursor (read-ahead state, `source::cursor`); `read` goes through
//! the handle, once, for every kind of file; `release` drops it.
//!
//! Invariants:
//! - A handle number is never reused while the mount lives; 0 is never one (fuser's default).
//! - A handle serves the content it opened even after its node is gone (the source changed)
//!   or freed (the kernel forgot it): an open file reads the bytes it opened.
//! - A read never returns bytes past a known size; a short read of a file whose size was
//!   not known is its end, and sets the size.
//! - A fault is logged and recorded for the tensor's `.json` here, on the one read path.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use super::{Ino, OpenMode, Opened, Tree};
use crate::fs::error::FsError;
use crate::fs::push::Follow;
use modelfs_io::source::cursor::Cursor;
use modelfs_io::source::{ReadAt, ReadCtx};
use modelfs_layout::{Reading, Requester};

/// A file handle number, as the kernel passes it back on each read.
pub(crate) type Fh = u64;

/// An open file.
struct Handle {
    ino: Ino,
    opened: Arc<Opened>,
    cursor: Arc<Cursor>,
    /// Its reader's pattern, for pushing ahead of it (`fs::push`); `None` unless the kernel
    /// caches its pages (a push into a file whose size it does not know would set one).
    follow: Option<Follow>,
    /// Held while open: pushes for a closed file are dropped.
    live: Arc<()>,
}

/// The open files of a tree.
pub(super) struct Handles {
    next: AtomicU64,
    open: Mutex<HashMap<Fh, Arc<Handle>>>,
}

impl Default for Handles {
    fn default() -> Handles {
        Handles {
            next: AtomicU64::new(1),
            open: Mutex::default(),
        }
    }
}

impl Handles {
    fn get(&self, fh: Fh) -> Option<Arc<Handle>> {
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&fh)
            .cloned()
    }
}

/// What `open` gives: the handle, how the kernel should read through it, and the size if
/// known.
#[derive(Clone)]
pub struct Opening {
    pub fh: Fh,
    pub(crate) mode: OpenMode,
    pub size: Option<u64>,
    /// For `OpenMode::Passed`: the local file the kernel reads instead.
    pub(crate) backing: Option<Arc<dyn ReadAt>>,
}

impl Tree {
    /// Opens file `ino` for reading (`write`: refused), for `req`.
    pub fn open(&self, ino: Ino, write: bool, req: &dyn Requester) -> Result<Opening, FsError> {
        let node = self.node(ino)?;
        if write {
            return Err(FsError::ReadOnly);
        }
        let opened = self.opened(&node, req)?;
        let size = opened.size();
        let mut mode = match size {
            Some(_) if !opened.content.volatile() => OpenMode::Cached,
            _ => OpenMode::Direct,
        };
        let backing = if mode == OpenMode::Cached && self.passthrough.load(Ordering::Acquire) {
            opened.content.backing(req)
        } else {
            None
        };
        if backing.is_some() {
            mode = OpenMode::Passed;
        }
        // Pushes go into cached pages of bytes copied, not made, on read.
        let pushed = mode == OpenMode::Cached && !opened.content.rendered();
        let fh = self.handles.next.fetch_add(1, Ordering::Relaxed);
        let handle = Arc::new(Handle {
            ino,
            opened,
            cursor: Arc::default(),
            follow: self.push.get().filter(|_| pushed).map(|p| p.follower(ino)),
            live: Arc::new(()),
        });
        let mut open = self.handles.open.lock().unwrap_or_else(|e| e.into_inner());
        debug_assert!(fh != 0 && !open.contains_key(&fh));
        open.insert(fh, handle);
        Ok(Opening {
            fh,
            mode,
            size,
            backing,
        })
    }

    /// Up to `len` bytes at `offset` of open file `fh`; fewer only at its end. Stops with
    /// `FsError::Interrupted` once `req` is gone.
    pub fn read(
        &self,
        fh: Fh,
        offset: u64,
        len: usize,
        req: &dyn Requester,
    ) -> Result<Bytes, FsError> {
        let h = self.handles.get(fh).ok_or(FsError::BadHandle)?;
        let o = &h.opened;
        let size = o.size();
        let want = match size {
            Some(size) if offset >= size => return Ok(Bytes::new()),
            Some(size) => usize::try_from(size - offset).map_or(len, |left| left.min(len)),
            None => len,
        };
        // The handle's own read-ahead, down to the source.
        let req = &Reading {
            req,
            ctx: ReadCtx::of(&h.cursor),
        };
        let mut got = o.content.read(offset, want, req).map_err(|e| {
            let e = FsError::from(e);
            if !matches!(e, FsError::Interrupted) {
                let what = format!("{}: read at {offset}: {e}", self.path_of(h.ino));
                if self.first_failure(h.ino, o, what.clone(), &e) {
                    log::error!("{what}");
                }
            }
            e
        })?;
        if got.len() > want {
            // A content never gives more than asked; if one did, the size stands.
            debug_assert!(false, "{} bytes read of {want}", got.len());
            got.truncate(want);
        }
        if size.is_none() && got.len() < want && !o.content.volatile() {
            // A short read is the end of the file: the whole index has been learnt.
            if let Some(s) = o.content.known_size() {
                self.set_size(h.ino, o, s);
            }
        }
        if let (Some(size), Some(push), Some(follow)) = (size, self.push.get(), &h.follow) {
            let end = offset + got.len() as u64;
            push.follow(
                follow,
                h.ino,
                &o.content,
                size,
                (offset, end),
                (&h.live, &h.cursor),
            );
        }
        Ok(got)
    }

    /// Closes open file `fh` (an unknown one is ignored: the kernel releases each once).
    pub fn release(&self, fh: Fh) {
        let gone = self
            .handles
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&fh);
        // Dropped outside the lock: a stream ahead of the reader stops with it.
        drop(gone);
    }

    #[cfg(test)]
    /// Files open now.
    pub(crate) fn open_files(&self) -> usize {
        self.handles
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .len()
    }

    #[cfg(any(test, feature = "testkit"))]
    /// Opens `ino`, reads up to `buf.len()` bytes at `offset` into `buf` and closes it.
    pub fn read_ino(&self, ino: Ino, offset: u64, buf: &mut [u8]) -> Result<usize, FsError> {
        let fh = self.open(ino, false, &modelfs_layout::Patient)?.fh;
        let got = self.read(fh, offset, buf.len(), &modelfs_layout::Patient);
        self.release(fh);
        let got = got?;
        buf[..got.len()].copy_from_slice(&got);
        Ok(got.len())
    }
}
