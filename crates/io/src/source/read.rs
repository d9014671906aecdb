//! The one read verb of a source (`ReadAt::read_with`), what it is told (`ReadCtx`), and the
//! convenience verbs every caller uses on top of it (`ReadExt`).
//!
//! A read says where its bytes go (`To`): copied into the caller's buffer, lent to a visitor
//! in one slice or in pieces (borrowed from a mapping or a cached block, no copy), or handed
//! back as `Bytes`. A source that can change underneath (a mapped local file) checks, inside
//! the read and after the bytes were handed over, that they were the file's as opened — so no
//! caller can forget to, and a wrapper that forwards `read_with` forwards the check too.
//!
//! Invariants: `read_with` hands over exactly the bytes asked for or fails (never short);
//! a visitor sees the bytes in order, each once (`To::Parts`: each once, in any order); a `ReadCtx` only changes how bytes are
//! fetched (read-ahead, lending), never which.

use std::sync::{Arc, OnceLock};
use std::time::SystemTime;

use bytes::Bytes;

use super::cursor::Cursor;
use super::{scratch, FileIdentity, PartVisit, ReadAt, SourceError, Visit};

/// What a source is: fixed for the life of the open file.
#[derive(Clone, Debug)]
pub struct About {
    /// A name for error messages (the file's path, the object's URL).
    pub name: String,
    /// Length in bytes.
    pub size: u64,
    /// Modification time (shown as the mtime of files derived from it).
    pub mtime: SystemTime,
    /// The underlying local file's identity, for sources backed by one.
    pub identity: Option<FileIdentity>,
    /// A version tag of a remote object (its ETag), which pins the object for a mount.
    pub version: Option<String>,
}

impl About {
    /// A source of `size` bytes called `name`, with no time, identity or version.
    pub fn named(name: impl Into<String>, size: u64) -> About {
        About {
            name: name.into(),
            size,
            mtime: SystemTime::UNIX_EPOCH,
            identity: None,
            version: None,
        }
    }
}

/// How a read is made, passed down from whoever asked for it: the read-ahead state of the
/// open file handle it serves (`Cursor`), whether a mapped file's bytes may be lent as views
/// of the mapping, and whether it is a small metadata read. Work handed to another thread
/// carries its clone.
#[derive(Clone, Debug, Default)]
pub struct ReadCtx {
    cursor: Option<Arc<Cursor>>,
    lend: bool,
    metadata: bool,
}

impl ReadCtx {
    /// A read for no handle: a source keeps read-ahead state of its own, and copies.
    pub fn none() -> &'static ReadCtx {
        static NONE: OnceLock<ReadCtx> = OnceLock::new();
        NONE.get_or_init(ReadCtx::default)
    }

    /// A reader's small reads at open (a header, a pickle, an index block): a mapped file
    /// reads them with the kernel's read-ahead off, so a 4-byte read of a cold file reads
    /// 4 KiB, not the device's read-ahead of tensor data nobody asked for.
    pub fn metadata() -> &'static ReadCtx {
        static META: OnceLock<ReadCtx> = OnceLock::new();
        META.get_or_init(|| ReadCtx {
            metadata: true,
            ..ReadCtx::default()
        })
    }

    /// Reads for the open file handle whose read-ahead state `cursor` keeps.
    pub fn of(cursor: &Arc<Cursor>) -> ReadCtx {
        ReadCtx {
            cursor: Some(Arc::clone(cursor)),
            ..ReadCtx::default()
        }
    }

    /// The same reads, with a mapped file's bytes answered as views of the mapping (`To::Bytes`)
    /// instead of copies: for bytes handed to the kernel at once (a page-cache push), which
    /// then copies them once. Such a view must not outlive its use: a file cut short
    /// underneath makes the kernel's copy fail (EFAULT), which only a push may shrug off.
    pub fn lending(&self) -> ReadCtx {
        ReadCtx {
            lend: true,
            ..self.clone()
        }
    }

    pub fn lends(&self) -> bool {
        self.lend
    }

    pub fn is_metadata(&self) -> bool {
        self.metadata
    }

    pub(crate) fn cursor(&self) -> Option<&Cursor> {
        self.cursor.as_deref()
    }
}

/// Where the bytes of a read go.
pub enum To<'a> {
    /// Copied into the buffer, exactly its length.
    Fill(&'a mut [u8]),
    /// Handed to the visitor as one slice of `len` bytes (borrowed where the source holds
    /// them: a mapping, a block).
    Whole(usize, Visit<'a>),
    /// Handed to the visitor in order, `len` bytes in pieces that need not all be in memory at
    /// once: a pass over a whole tensor (its checksum).
    Pieces(u64, Visit<'a>),
    /// Handed to the visitor in pieces, each with its offset, in any order and possibly from
    /// several threads at once: a pass whose result does not depend on order (a checksum
    /// combined from its parts'), which a remote source fetches on several connections. An
    /// empty piece may carry any offset.
    Parts(u64, PartVisit<'a>),
    /// `len` bytes as `Bytes`: a view of a buffer the source holds anyway (a cached block; a
    /// mapping when the context lends), else copied into a recycled buffer (`scratch`).
    Bytes(usize, &'a mut Bytes),
    /// Runs of `out.len() / starts.len()` bytes, run `i` from `offset + starts[i]`, copied into
    /// `out` one after another: many short reads (rows of a table) checked once.
    Runs(&'a [u64], &'a mut [u8]),
}

impl To<'_> {
    /// How many bytes the read hands over.
    pub fn len(&self) -> u64 {
        match self {
            To::Fill(out) | To::Runs(_, out) => out.len() as u64,
            To::Whole(len, _) | To::Bytes(len, _) => *len as u64,
            To::Pieces(len, _) | To::Parts(len, _) => *len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The verbs every caller uses, each one `read_with`: implemented once for every source, so
/// no source or wrapper can answer one differently from another.
pub trait ReadExt: ReadAt {
    fn size(&self) -> u64 {
        self.about().size
    }
    fn name(&self) -> &str {
        &self.about().name
    }
    fn mtime(&self) -> SystemTime {
        self.about().mtime
    }
    /// Copies exactly `out.len()` bytes at `offset` into `out`.
    fn read_into(&self, ctx: &ReadCtx, offset: u64, out: &mut [u8]) -> Result<(), SourceError> {
        self.read_with(ctx, offset, To::Fill(out))
    }
    /// Exactly `len` bytes at `offset`, as a view where the source holds them (`To::Bytes`).
    fn read(&self, ctx: &ReadCtx, offset: u64, len: usize) -> Result<Bytes, SourceError> {
        let mut got = Bytes::new();
        self.read_with(ctx, offset, To::Bytes(len, &mut got))?;
        debug_assert_eq!(got.len(), len);
        Ok(got)
    }
    /// Exactly `len` bytes at `offset`, copied: a reader's small metadata reads.
    fn read_vec(&self, offset: u64, len: usize) -> Result<Vec<u8>, SourceError> {
        let mut v = vec![0u8; len];
        self.read_with(ReadCtx::metadata(), offset, To::Fill(&mut v))?;
        Ok(v)
    }
    /// `f` of exactly `len` bytes at `offset` in one slice, borrowed where the source holds
    /// them; checked unchanged after `f` returns.
    fn with_bytes<R>(
        &self,
        ctx: &ReadCtx,
        offset: u64,
        len: usize,
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<R, SourceError> {
        let (mut f, mut out) = (Some(f), None);
        self.read_with(
            ctx,
            offset,
            To::Whole(len, &mut |b| out = f.take().map(|f| f(b))),
        )?;
        Ok(out.expect("a read of one slice visits once"))
    }
    /// Hands the bytes `offset..offset + len` to `visit` in order, in pieces (`To::Pieces`).
    fn for_each_piece(
        &self,
        ctx: &ReadCtx,
        offset: u64,
        len: u64,
        visit: Visit<'_>,
    ) -> Result<(), SourceError> {
        self.read_with(ctx, offset, To::Pieces(len, visit))
    }
}

/// `To::Parts` answered as `To::Pieces` (in order, on the caller's thread): for a source that
/// gains nothing from several at once.
pub fn pieces_in_order(offset: u64, visit: PartVisit<'_>) -> impl FnMut(&[u8]) + '_ {
    let mut at = offset;
    move |piece| {
        visit(at, piece);
        at += piece.len() as u64;
    }
}

impl<T: ReadAt + ?Sized> ReadExt for T {}

/// `to` served from `data`, bytes `offset..` of a source called `name` held whole in memory
/// (the `read_with` of an in-memory source).
pub fn serve_slice(name: &str, data: &[u8], offset: u64, to: To<'_>) -> Result<(), SourceError> {
    if let To::Runs(starts, out) = to {
        return each_run(name, offset, starts, out, |at, run| {
            serve_slice(name, data, at, To::Fill(run))
        });
    }
    let range = super::checked_range(name, offset, to.len() as usize, data.len() as u64)?;
    let bytes = &data[range];
    match to {
        To::Fill(out) => out.copy_from_slice(bytes),
        To::Whole(_, visit) | To::Pieces(_, visit) => visit(bytes),
        To::Parts(_, visit) => visit(offset, bytes),
        To::Bytes(len, got) => {
            *got = scratch::filled(len, |out| {
                out.copy_from_slice(bytes);
                Ok::<_, SourceError>(len)
            })?
        }
        To::Runs(..) => unreachable!("served run by run above"),
    }
    Ok(())
}

/// `fill(offset + starts[i], run i of out)` for each run of a `To::Runs` read.
pub fn each_run(
    name: &str,
    offset: u64,
    starts: &[u64],
    out: &mut [u8],
    mut fill: impl FnMut(u64, &mut [u8]) -> Result<(), SourceError>,
) -> Result<(), SourceError> {
    // Never short: every byte of `out` belongs to exactly one run.
    let run = out.len().checked_div(starts.len()).unwrap_or(0);
    if run * starts.len() != out.len() {
        let why = format!("{} runs cannot fill {} bytes", starts.len(), out.len());
        let source = std::io::Error::new(std::io::ErrorKind::InvalidInput, why);
        return Err(SourceError::Io {
            path: name.to_string(),
            source,
        });
    }
    if run == 0 {
        return Ok(());
    }
    for (&start, o) in starts.iter().zip(out.chunks_exact_mut(run)) {
        let at = offset
            .checked_add(start)
            .ok_or_else(|| SourceError::OutOfBounds {
                path: name.to_string(),
                offset,
                len: start,
                size: u64::MAX,
            })?;
        fill(at, o)?;
    }
    Ok(())
}
