//! Byte access to source files behind a `ReadAt` trait.
//!
//! Everything above this module reads data through `ReadAt`; only this module touches
//! `std::fs` for data. Local files are memory-mapped. A mapped file that is truncated in place
//! would fault on access, so every read first checks that the file at the path is still the one
//! that was opened (device, inode, size, mtime): a training job that rewrites a checkpoint makes
//! reads fail with `SourceError::Changed` instead of serving a mix of old and new bytes.

use std::borrow::Cow;
use std::fmt;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
#[cfg(any(test, feature = "testkit"))]
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use memmap2::Mmap;

mod sigbus;

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
}

impl SourceError {
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

/// Random read access to an immutable byte source.
pub trait ReadAt: Send + Sync + fmt::Debug {
    /// Length in bytes, fixed for the life of the object.
    fn size(&self) -> u64;
    /// A name for error messages (the file's path).
    fn name(&self) -> &str;
    /// Exactly `len` bytes at `offset`; borrowed where the source is mapped.
    fn read_at(&self, offset: u64, len: usize) -> Result<Cow<'_, [u8]>, SourceError>;
    /// The source's modification time (shown as the mtime of files derived from it).
    fn mtime(&self) -> SystemTime {
        SystemTime::UNIX_EPOCH
    }
    /// Checks that the underlying file is unchanged; sources that cannot change return Ok.
    fn check_unchanged(&self) -> Result<(), SourceError> {
        Ok(())
    }
    /// Checks, every time (no caching), that bytes copied out of `read_at` slices since the
    /// open can be trusted: the file was not modified in place (size, mtime of the opened
    /// file) and no read faulted on a page past its end. Readers call it after copying, so
    /// a file rewritten during the copy never yields a mix of old and new bytes.
    fn check_consistent(&self) -> Result<(), SourceError> {
        Ok(())
    }
    /// The identity of the underlying file, for sources backed by one (`None` otherwise).
    fn identity(&self) -> Option<FileIdentity> {
        None
    }
}

/// A string naming `file`'s exact version (path, size, mtime in ns, inode), for keys of
/// persistent caches: it changes whenever the file is rewritten or replaced. `None` for
/// sources without a file identity (in-memory data).
pub fn identity_string(file: &dyn ReadAt) -> Option<String> {
    let id = file.identity()?;
    Some(format!(
        "{}:{}:{}:{}",
        file.name(),
        id.size,
        id.mtime_ns,
        id.ino
    ))
}

/// An in-memory source (tests, synthesized data).
#[derive(Debug, Clone)]
#[cfg(any(test, feature = "testkit"))]
pub struct MemSource {
    name: String,
    data: Arc<[u8]>,
}

#[cfg(any(test, feature = "testkit"))]
impl MemSource {
    #[cfg(any(test, feature = "testkit"))]
    pub fn new(name: impl Into<String>, data: impl Into<Arc<[u8]>>) -> Self {
        MemSource {
            name: name.into(),
            data: data.into(),
        }
    }
}

#[cfg(any(test, feature = "testkit"))]
impl ReadAt for MemSource {
    fn size(&self) -> u64 {
        self.data.len() as u64
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn read_at(&self, offset: u64, len: usize) -> Result<Cow<'_, [u8]>, SourceError> {
        let range = checked_range(&self.name, offset, len, self.size())?;
        Ok(Cow::Borrowed(&self.data[range]))
    }
}

/// Bounds-checks `offset..offset+len` against `size` with checked arithmetic.
pub fn checked_range(
    name: &str,
    offset: u64,
    len: usize,
    size: u64,
) -> Result<std::ops::Range<usize>, SourceError> {
    let end = offset.checked_add(len as u64);
    match end {
        Some(end) if end <= size => Ok(offset as usize..end as usize),
        _ => Err(SourceError::OutOfBounds {
            path: name.to_string(),
            offset,
            len: len as u64,
            size,
        }),
    }
}

/// A memory-mapped local file.
pub(crate) struct MmapFile {
    path: PathBuf,
    name: String,
    /// Registered with the SIGBUS handler; declared before `map` so it is dropped (and the
    /// region unregistered) before the mapping is unmapped.
    guard: Option<sigbus::Guard>,
    map: Option<Mmap>, // None for an empty file (an empty mapping is not allowed)
    /// The opened file, for `fstat` in `check_consistent`.
    file: File,
    identity: FileIdentity,
    mtime: SystemTime,
    /// Instant (as nanos since `epoch`) of the last identity check that passed.
    last_check_ns: AtomicU64,
    /// Bytes handed out since the mapping's pages were last dropped from this process.
    read_since_drop: AtomicU64,
    epoch: Instant,
}

/// After this many bytes read from a mapping, its pages are unmapped from the process again
/// (`MADV_DONTNEED`; they stay in the page cache): a mount that reads a 4 GiB checkpoint
/// keeps its resident set bounded instead of growing by every page it touched.
const DROP_MAPPED_EVERY: u64 = 32 << 20;

/// How long an identity check stays valid; bounds the stat calls on the read path.
const RECHECK_INTERVAL: Duration = Duration::from_millis(200);

impl fmt::Debug for MmapFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MmapFile")
            .field("path", &self.path)
            .finish()
    }
}

impl MmapFile {
    pub fn open(path: &Path) -> Result<Self, SourceError> {
        let file = File::open(path).map_err(|e| SourceError::io(path, e))?;
        let meta = file.metadata().map_err(|e| SourceError::io(path, e))?;
        if !meta.is_file() {
            return Err(SourceError::io(
                path,
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file"),
            ));
        }
        let map = if meta.len() == 0 {
            None
        } else {
            // SAFETY: the mapping is read-only; the file may change underneath, which
            // `check_unchanged` detects before every read (see the module comment).
            let map = unsafe { Mmap::map(&file) }.map_err(|e| SourceError::io(path, e))?;
            Some(map)
        };
        let guard = map.as_ref().map(|m| sigbus::register(m.as_ptr(), m.len()));
        Ok(MmapFile {
            name: path.display().to_string(),
            path: path.to_path_buf(),
            guard,
            map,
            file,
            identity: FileIdentity::of(&meta),
            mtime: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            last_check_ns: AtomicU64::new(0),
            read_since_drop: AtomicU64::new(0),
            epoch: Instant::now(),
        })
    }
}

impl ReadAt for MmapFile {
    fn size(&self) -> u64 {
        self.identity.size
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn mtime(&self) -> SystemTime {
        self.mtime
    }
    fn identity(&self) -> Option<FileIdentity> {
        Some(self.identity)
    }
    fn read_at(&self, offset: u64, len: usize) -> Result<Cow<'_, [u8]>, SourceError> {
        let range = checked_range(&self.name, offset, len, self.size())?;
        if len == 0 {
            return Ok(Cow::Borrowed(&[]));
        }
        self.check_unchanged()?;
        let map = self
            .map
            .as_ref()
            .expect("non-empty range implies a mapping");
        let before = self
            .read_since_drop
            .fetch_add(len as u64, Ordering::Relaxed);
        if before + len as u64 >= DROP_MAPPED_EVERY && before < DROP_MAPPED_EVERY {
            self.read_since_drop.store(0, Ordering::Relaxed);
            // SAFETY: the mapping is shared, read-only and of an unchanged file (checked
            // above): dropped pages fault back in with the same bytes, so slices other threads
            // hold stay valid and keep their contents.
            let _ = unsafe { map.unchecked_advise(memmap2::UncheckedAdvice::DontNeed) };
        }
        Ok(Cow::Borrowed(&map[range]))
    }
    fn check_unchanged(&self) -> Result<(), SourceError> {
        if self.guard.as_ref().is_some_and(sigbus::Guard::faulted) {
            return Err(self.changed());
        }
        let now = self.epoch.elapsed().as_nanos() as u64 + 1;
        let last = self.last_check_ns.load(Ordering::Relaxed);
        if last != 0 && now.saturating_sub(last) < RECHECK_INTERVAL.as_nanos() as u64 {
            return Ok(());
        }
        match std::fs::metadata(&self.path) {
            Ok(meta) if FileIdentity::of(&meta) == self.identity => {
                self.last_check_ns.store(now, Ordering::Relaxed);
                Ok(())
            }
            _ => Err(self.changed()),
        }
    }
    fn check_consistent(&self) -> Result<(), SourceError> {
        if self.guard.as_ref().is_some_and(sigbus::Guard::faulted) {
            return Err(self.changed());
        }
        // The mapped inode itself (a rename over the path leaves it, and the mapping, intact).
        match self.file.metadata() {
            Ok(m) => {
                let now = FileIdentity::of(&m);
                if now.size == self.identity.size && now.mtime_ns == self.identity.mtime_ns {
                    Ok(())
                } else {
                    Err(self.changed())
                }
            }
            Err(e) => Err(SourceError::io(&self.path, e)),
        }
    }
}

impl MmapFile {
    fn changed(&self) -> SourceError {
        SourceError::Changed {
            path: self.name.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn mem_source_bounds() {
        let s = MemSource::new("m", vec![1u8, 2, 3]);
        assert_eq!(&*s.read_at(1, 2).unwrap(), &[2, 3]);
        assert!(s.read_at(2, 2).is_err());
        assert!(s.read_at(u64::MAX, 2).is_err());
        assert_eq!(s.read_at(3, 0).unwrap().len(), 0);
    }

    #[test]
    fn mmap_detects_rewrite() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"hello world").unwrap();
        let f = MmapFile::open(&p).unwrap();
        assert_eq!(&*f.read_at(6, 5).unwrap(), b"world");
        // Replace the file (new inode), as a training job's rename would.
        let tmp = dir.path().join("g");
        let mut g = std::fs::File::create(&tmp).unwrap();
        g.write_all(b"HELLO WORLD!").unwrap();
        drop(g);
        std::fs::rename(&tmp, &p).unwrap();
        f.last_check_ns.store(0, Ordering::Relaxed);
        assert!(matches!(f.read_at(0, 5), Err(SourceError::Changed { .. })));
    }

    #[test]
    fn dropping_mapped_pages_keeps_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("big");
        let data: Vec<u8> = (0..(DROP_MAPPED_EVERY as usize + (8 << 20)))
            .map(|i| (i % 253) as u8)
            .collect();
        std::fs::write(&p, &data).unwrap();
        let f = MmapFile::open(&p).unwrap();
        let held = f.read_at(100, 1000).unwrap();
        let mut at = 0usize;
        while at < data.len() {
            let n = (1 << 20).min(data.len() - at);
            assert_eq!(&*f.read_at(at as u64, n).unwrap(), &data[at..at + n]);
            at += n;
        }
        // Pages dropped on the way fault back in with the same bytes.
        assert_eq!(&*held, &data[100..1100]);
        assert!(f.read_since_drop.load(Ordering::Relaxed) < DROP_MAPPED_EVERY);
    }

    #[test]
    fn empty_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("e");
        std::fs::write(&p, b"").unwrap();
        let f = MmapFile::open(&p).unwrap();
        assert_eq!(f.size(), 0);
        assert!(f.read_at(0, 0).unwrap().is_empty());
        assert!(f.read_at(0, 1).is_err());
    }
}
