//! Byte access to source files behind a `ReadAt` trait.
//!
//! Everything above this module reads data through `ReadAt`; only this module touches
//! `std::fs` for data. Local files are memory-mapped. A mapped file that is truncated in place
//! would fault on access, so every read first checks that the file at the path is still the one
//! that was opened (device, inode, size, mtime): a training job that rewrites a checkpoint makes
//! reads fail with `SourceError::Changed` instead of serving a mix of old and new bytes.

use std::ffi::OsString;
use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;

pub(crate) mod aligned;
pub mod byte_lru;
pub mod cursor;
mod fds;
mod local;
pub mod lru;
mod memo;
pub(crate) mod read;
pub mod remote;
pub mod scratch;
pub mod seekable;
mod span;
mod window;

pub use read::pieces_in_order;
pub use read::{serve_slice, About, ReadCtx, ReadExt, To};

pub use memo::{is_transient, Flight, Memo};
mod sigbus;

pub use local::LocalStorage;
pub use span::Span;
pub use window::Window;

#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path}: read of {len} bytes at offset {offset} is past the end of the file ({size} bytes)"
    )]
    OutOfBounds {
        path: String,
        offset: u64,
        len: u64,
        size: u64,
    },
    #[error("{path}: the file changed or was removed since it was opened")]
    Changed { path: String },
    /// The storage cannot list directories (HTTP): only named files can be opened.
    #[error("{path}: cannot list a directory over {scheme}")]
    NoListing { path: String, scheme: &'static str },
    /// A remote store's failure after its retries (the URL and the cause; never credentials).
    #[error("{url}: {cause}")]
    Remote { url: String, cause: String },
}

impl SourceError {
    /// A fault that may pass (a remote store's failure after its retries): never remembered
    /// as a verdict on the data, so a later request tries again.
    pub fn is_transient(&self) -> bool {
        matches!(self, SourceError::Remote { .. })
    }

    pub fn io(path: &Path, source: std::io::Error) -> Self {
        SourceError::Io {
            path: path.display().to_string(),
            source,
        }
    }
}

/// Identity of a file at open time; a file whose identity differs is not the one we mapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FileIdentity {
    pub(crate) dev: u64,
    pub(crate) ino: u64,
    pub(crate) size: u64,
    pub(crate) mtime_ns: i128,
}

impl FileIdentity {
    pub fn of(meta: &std::fs::Metadata) -> Self {
        FileIdentity {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.len(),
            mtime_ns: meta.mtime() as i128 * 1_000_000_000 + meta.mtime_nsec() as i128,
        }
    }
}

/// What a pass over bytes hands each piece to, in order (`ReadAt::for_each_piece`).
pub type Visit<'a> = &'a mut dyn FnMut(&[u8]);

/// What a pass whose result does not depend on order hands each piece to, with its offset:
/// in any order, possibly from several threads at once (`To::Parts`).
pub type PartVisit<'a> = &'a (dyn Fn(u64, &[u8]) + Sync);

/// Random read access to an immutable byte source, in LevelDB's shape: what it is, one read
/// verb, and two hints. Callers use the verbs of `ReadExt`, each one `read_with`.
pub trait ReadAt: Send + Sync + fmt::Debug {
    /// What the source is (name, size, time, identity), fixed for the life of the object.
    fn about(&self) -> &About;
    /// Hands exactly the bytes `offset..offset + to.len()` over as `to` asks, or fails (never
    /// short). A source that can change underneath checks, after handing them over, that they
    /// were the source's as opened: a file rewritten during the read is `Changed`, never a
    /// mix of old and new bytes. `ctx` changes how bytes are fetched, never which.
    fn read_with(&self, ctx: &ReadCtx, offset: u64, to: To<'_>) -> Result<(), SourceError>;
    /// The caller is done with the bytes `offset..offset + len` it read and will not soon
    /// read them again (a decoded region): a mapped file unmaps those pages from the process
    /// (they stay in the page cache), so reading a big file keeps the resident set to what is
    /// in use. Slices other callers hold stay valid.
    fn done_with(&self, offset: u64, len: u64) {
        let _ = (offset, len);
    }
    /// The local file these bytes are, whole and from its start: what the kernel may read
    /// itself instead of asking (FUSE passthrough). `None` for anything else.
    fn local_file(&self) -> Option<Arc<std::fs::File>> {
        None
    }
}

/// A string naming `file`'s exact version (path, size, mtime in ns, inode; for a remote
/// object its URL, size and ETag), for keys of persistent caches: it changes whenever the file
/// is rewritten or replaced. `None` for sources without an identity (in-memory data).
pub fn identity_string(file: &dyn ReadAt) -> Option<String> {
    let about = file.about();
    if let Some(v) = &about.version {
        return Some(format!("{}:{}:{v}", about.name, about.size));
    }
    let id = about.identity?;
    Some(format!(
        "{}:{}:{}:{}",
        about.name, id.size, id.mtime_ns, id.ino
    ))
}

/// What a path names in a `Storage`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    File,
    Dir,
}

/// Where a model's files live — a local tree, an S3 bucket, an HTTP server — as paths. Readers
/// find and open files only through it, so none of them knows where bytes come from.
pub trait Storage: Send + Sync + fmt::Debug {
    /// Opens the file at `path` for reading.
    fn open(&self, path: &Path) -> Result<Arc<dyn ReadAt>, SourceError>;
    /// What `path` names (symbolic links followed), `None` if nothing; `Err` when that cannot
    /// be known (a server refusing the credentials, say).
    fn kind(&self, path: &Path) -> Result<Option<EntryKind>, SourceError>;
    /// The entries of directory `dir`: names and kinds, in no particular order.
    fn list(&self, dir: &Path) -> Result<Vec<(OsString, EntryKind)>, SourceError>;
    /// `path` as the user would write it (a URL for remote storages), for messages.
    fn display(&self, path: &Path) -> String {
        path.display().to_string()
    }
    /// The whole of a small file (a state file, a meta): at most `max` bytes.
    fn read_small(&self, path: &Path, max: u64) -> Result<Vec<u8>, SourceError> {
        let f = self.open(path)?;
        let len = f.size().min(max);
        let len = usize::try_from(len).map_err(|_| SourceError::OutOfBounds {
            path: self.display(path),
            offset: 0,
            len,
            size: f.size(),
        })?;
        f.read_vec(0, len)
    }
    fn is_file(&self, path: &Path) -> bool {
        matches!(self.kind(path), Ok(Some(EntryKind::File)))
    }
    fn is_dir(&self, path: &Path) -> bool {
        matches!(self.kind(path), Ok(Some(EntryKind::Dir)))
    }
    /// Local paths may be canonicalised and stat'ed directly; remote keys may not.
    fn is_local(&self) -> bool {
        false
    }
    /// What tells the content of the file at `path` now from another (local: device, inode,
    /// size, mtime; remote: size, ETag, time), without opening it; `None` if there is none.
    fn stamp(&self, path: &Path) -> Result<Option<String>, SourceError> {
        let _ = path;
        Ok(None)
    }
    /// Forgets the listings and files learnt so far: the next look sees the source as it is
    /// now (a remote source remembers them; a local one asks each time).
    fn look_again(&self) {}
}

/// The local file system.
pub fn local() -> Arc<dyn Storage> {
    Arc::new(LocalStorage)
}

/// An in-memory source (tests, synthesized data, values read out of a table).
#[derive(Debug, Clone)]
pub struct MemSource {
    about: About,
    data: Arc<[u8]>,
}

impl MemSource {
    pub fn new(name: impl Into<String>, data: impl Into<Arc<[u8]>>) -> Self {
        let data = data.into();
        MemSource {
            about: About::named(name, data.len() as u64),
            data,
        }
    }
}

impl ReadAt for MemSource {
    fn about(&self) -> &About {
        &self.about
    }
    fn read_with(&self, _: &ReadCtx, offset: u64, to: To<'_>) -> Result<(), SourceError> {
        read::serve_slice(&self.about.name, &self.data, offset, to)
    }
}

/// Bounds-checks `offset..offset+len` against `size` with checked arithmetic.
pub fn checked_range(
    name: &str,
    offset: u64,
    len: usize,
    size: u64,
) -> Result<std::ops::Range<usize>, SourceError> {
    let end = checked_end(name, offset, len as u64, size)?;
    Ok(offset as usize..end as usize)
}

/// The end of `offset..offset+len` when it lies within `size` bytes of the file `name`.
pub fn checked_end(name: &str, offset: u64, len: u64, size: u64) -> Result<u64, SourceError> {
    let out = || SourceError::OutOfBounds {
        path: name.to_string(),
        offset,
        len,
        size,
    };
    offset
        .checked_add(len)
        .filter(|&e| e <= size)
        .ok_or_else(out)
}

/// Why a file a model names by a path relative to its directory (ONNX's external data, a DCP
/// chunk's `relative_path`) is not opened.
#[derive(Debug, thiserror::Error)]
pub enum Outside {
    /// Empty, absolute, or climbing with `..`.
    #[error("leaves the model's directory: refused")]
    Leaves,
    /// A symlink (of a local tree) to a file outside the directory.
    #[error("resolves out of the model's directory: refused")]
    ResolvesOut,
    // Not `transparent`: the fault stays a link of the chain (`source::is_transient`).
    #[error("{0}")]
    Source(#[from] SourceError),
}

/// The file `rel` of the directory `dir` of `fs`, opened only when it stays inside `dir`:
/// formats that name files by path have been used to read other files (ONNX's `location:
/// ../../etc/passwd`, Orbax's absolute paths).
pub fn open_inside(fs: &dyn Storage, dir: &Path, rel: &str) -> Result<Arc<dyn ReadAt>, Outside> {
    let r = Path::new(rel);
    let plain = r
        .components()
        .all(|c| matches!(c, std::path::Component::Normal(_)));
    if rel.is_empty() || rel.contains('\0') || !plain {
        return Err(Outside::Leaves);
    }
    let path = dir.join(r);
    let file = fs.open(&path)?;
    // A symlink out of the directory (a local file only: object stores have none).
    if file.local_file().is_some() {
        match (std::fs::canonicalize(dir), std::fs::canonicalize(&path)) {
            (Ok(d), Ok(p)) if p.starts_with(&d) => {}
            _ => return Err(Outside::ResolvesOut),
        }
    }
    Ok(file)
}

/// FNV-1a 64: a file-name hash stable across runs and builds (unlike std's hasher).
/// The cores this process may use, asked of the system once: `available_parallelism` reads
/// cgroup files on every call (tens of microseconds), and it is asked per tensor checked.
pub fn cores() -> usize {
    static CORES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf29ce484222325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x100000001b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mem_source_bounds() {
        let s = MemSource::new("m", vec![1u8, 2, 3]);
        assert_eq!(s.read_vec(1, 2).unwrap(), [2, 3]);
        assert!(s.read_vec(2, 2).is_err());
        assert!(s.read_vec(u64::MAX, 2).is_err());
        assert_eq!(s.read_vec(3, 0).unwrap().len(), 0);
        let ctx = ReadCtx::none();
        assert_eq!(s.with_bytes(ctx, 0, 3, |b| b.to_vec()).unwrap(), [1, 2, 3]);
        assert_eq!(&s.read(ctx, 2, 1).unwrap()[..], [3]);
    }

    /// Runs are all of one length and cover the buffer: anything else is an error, never a
    /// read that leaves bytes unfilled.
    #[test]
    fn runs_fill_every_byte_or_fail() {
        let s = MemSource::new("m", (0u8..10).collect::<Vec<_>>());
        let ctx = ReadCtx::none();
        let mut out = [0u8; 4];
        s.read_with(ctx, 1, To::Runs(&[0, 5], &mut out)).unwrap();
        assert_eq!(out, [1, 2, 6, 7]);
        for (starts, len) in [(&[][..], 4), (&[0, 1, 2][..], 4), (&[0, 1, 2, 3, 4][..], 4)] {
            let mut out = vec![0u8; len];
            let got = s.read_with(ctx, 0, To::Runs(starts, &mut out));
            assert!(got.is_err(), "{starts:?} into {len} bytes");
        }
        assert!(
            s.read_with(ctx, 0, To::Runs(&[8], &mut [0u8; 4])).is_err(),
            "past the end"
        );
        s.read_with(ctx, 0, To::Runs(&[], &mut [])).unwrap();
    }
}
