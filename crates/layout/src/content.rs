//! The content contract: what every file kind gives the file system (`FileContent`), who a
//! read is for (`Requester`), and why a read or a layout fails (`LayoutError`,
//! `Unavailable`). Everything in `layout` renders to it; nothing here knows a format.
//!
//! Invariants of a `FileContent`:
//! - `known_size` never does work; `size_for` is exact once it succeeds, and never changes
//!   (unless `volatile`).
//! - `read` gives `len` bytes, fewer only at the end of the file.

use std::sync::Arc;

use bytes::Bytes;

use crate::model::ModelError;
use crate::source::ReadCtx;

#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    #[error(transparent)]
    Model(#[from] ModelError),
    /// Found only once the data were seen (a row id too wide, …).
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
    #[error("{0} overflows")]
    Overflow(&'static str),
    /// A second pass over the data disagrees with the first (rendered length, string count).
    #[error("{what}: {got}, expected {want}")]
    Mismatch {
        what: &'static str,
        got: u64,
        want: u64,
    },
    #[error(transparent)]
    Inconsistent(#[from] InconsistentRows),
    #[error("{0} text chunks is more than any real tensor needs")]
    TooManyChunks(u64),
    #[error("a text rendering worker panicked")]
    WorkerPanicked,
    /// The requester went away (Ctrl-C, unmount): the work stopped unfinished.
    #[error("interrupted")]
    Interrupted,
    /// An invariant of modelfs itself does not hold (a bug, not bad data).
    #[error("internal error: {0}")]
    Internal(&'static str),
}

/// Sparse entries whose CSR arrays do not agree (a reader bug or bad data).
#[derive(Debug, thiserror::Error)]
#[error("inconsistent sparse rows")]
pub struct InconsistentRows;

/// Why a layout does not show a tensor (the `.json` gives the reason).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unavailable {
    #[error("{0} elements have no value to show")]
    Undecodable(String),
    #[error("strings have no numeric form")]
    Strings,
    #[error("numpy has no type for {0}")]
    NoNumpyType(String),
    #[error("dense form {} > max_dense {}", human_bytes(*bytes), human_bytes(*max))]
    DenseTooBig { bytes: u64, max: u64 },
    #[error("a sparse tensor of rank {0} has no dense form")]
    SparseRank(usize),
    #[error("the shape's element count or byte size overflows")]
    Overflow,
    #[error("{0} rows without columns")]
    BlankRows(u64),
    #[error("Angel has no value type for {0}")]
    NoAngelValue(String),
    #[error("value-only formats need a dense tensor")]
    ValueOnlySparse,
    #[error("a row id over 2^31 does not fit 4 bytes")]
    RowIdTooWide,
}

/// `24 GiB`, `16 MiB`, `512 B`: sizes in reasons people read.
fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut unit = 0;
    let mut v = n as f64;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 || v >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0} {}", UNITS[unit])
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// Who long work is done for: it stops (`LayoutError::Interrupted`) once `gone` says so.
pub trait Requester: Sync {
    /// True once the result is no longer wanted (the request was interrupted, unmount).
    fn gone(&self) -> bool;
    /// Background work (a size pass nobody waits for) renders on niced threads, stands aside
    /// while the file is being read, and keeps no rendered chunks in the cache.
    fn background(&self) -> bool {
        false
    }
    /// Told after each step of long work: `done` of `total` units.
    fn progress(&self, _done: u64, _total: u64) {}
    /// How the work's reads are made (the open handle's read-ahead; lending for a push):
    /// passed down to every tensor read done for it, on whatever thread.
    fn ctx(&self) -> &ReadCtx {
        ReadCtx::none()
    }
}

/// A requester whose reads carry `ctx`; everything else is `req`'s.
pub struct Reading<'a> {
    pub req: &'a dyn Requester,
    pub ctx: ReadCtx,
}

impl Requester for Reading<'_> {
    fn gone(&self) -> bool {
        self.req.gone()
    }
    fn background(&self) -> bool {
        self.req.background()
    }
    fn progress(&self, done: u64, total: u64) {
        self.req.progress(done, total)
    }
    fn ctx(&self) -> &ReadCtx {
        &self.ctx
    }
}

/// A requester that always waits for the result.
pub struct Patient;

impl Requester for Patient {
    fn gone(&self) -> bool {
        false
    }
}

/// The bytes of one file.
pub trait FileContent: Send + Sync {
    /// The exact size if it is known without rendering or decoding anything (binary layouts:
    /// always; text: once rendered or found in a cache).
    fn known_size(&self) -> Option<u64>;
    /// Exact size in bytes (may render a text layout once to learn it).
    fn size(&self) -> Result<u64, LayoutError> {
        self.size_for(&Patient)
    }
    /// Copies `read` into `buf`; returns the bytes written (short only at end of file).
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize, LayoutError> {
        self.read_into(offset, buf, &Patient)
    }
    /// `read` into the caller's buffer (a numpy array's memory): a content that can fill it
    /// straight from the source does, with no buffer of its own in between.
    fn read_into(
        &self,
        offset: u64,
        buf: &mut [u8],
        req: &dyn Requester,
    ) -> Result<usize, LayoutError> {
        let got = self.read(offset, buf.len(), req)?;
        buf[..got.len()].copy_from_slice(&got);
        Ok(got.len())
    }
    /// `size`, stopping when `req` is gone. A content whose size is always known needs no
    /// other: `known_size` is `None` for it only when the size overflows.
    fn size_for(&self, req: &dyn Requester) -> Result<u64, LayoutError> {
        let _ = req;
        self.known_size().ok_or(LayoutError::Overflow("file size"))
    }
    /// Up to `len` bytes at `offset`, fewer only at the end of the file; stops once `req` is
    /// gone. Serves any offset whether or not the size is known yet (a text file learns only
    /// the part of its index the read needs). Bytes the content holds anyway (a rendered
    /// chunk, a fetched block) come back as a view of them; others are copied into a
    /// recycled buffer (`source::scratch`).
    fn read(&self, offset: u64, len: usize, req: &dyn Requester) -> Result<Bytes, LayoutError>;
    /// How far learning the size has gone: (done, total) in the content's own units.
    fn size_progress(&self) -> Option<(u64, u64)> {
        None
    }
    /// The bytes may change while mounted (a `.json` gaining a `last_error`): the file system
    /// caches none of their pages (every read asks again), and their size only while
    /// `settled` (it tells the kernel when the bytes change).
    fn volatile(&self) -> bool {
        false
    }
    /// Of a `volatile` content: its size changes only on an event the file system hears of
    /// (a read error of its tensor), so the kernel may keep it until told.
    fn settled(&self) -> bool {
        false
    }
    /// The bytes are made on read (text rendered from values) rather than copied from the
    /// source: reading them before anyone asks costs rendering and memory, and their
    /// renderer reads ahead on its own, so a mount does not fill the page cache ahead of
    /// their reader.
    fn rendered(&self) -> bool {
        false
    }
    /// The local file these bytes are, whole and from its start, once everything `read`
    /// would check first is checked (checksums, for `req`): the kernel may then read that
    /// file itself (FUSE passthrough), bypassing `read`. `None`: no such file, or a check
    /// failed (`read` then reports it).
    fn backing(&self, req: &dyn Requester) -> Option<Arc<dyn crate::source::ReadAt>> {
        let _ = req;
        None
    }
    /// The CRC-32 (zip's) of all these bytes, when the content sums them in one pass that
    /// also makes the checks `read` would make first (`binary::NpyContent`): each byte is
    /// read once, not once to check and again to sum. `None`: the caller reads and sums.
    fn crc32(&self, req: &dyn Requester) -> Option<Result<u32, LayoutError>> {
        let _ = req;
        None
    }
}
