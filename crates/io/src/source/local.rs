//! Local files: memory-mapped, checked against rewrites (see the module comment of
//! `source`), and the local file system as a `Storage`.

use std::ffi::OsString;
use std::fmt;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use memmap2::Mmap;

use bytes::Bytes;

use super::read::each_run;
use super::{
    checked_end, fds, scratch, sigbus, About, EntryKind, FileIdentity, ReadAt, ReadCtx,
    SourceError, Storage, To, Visit,
};

/// The local file system.
#[derive(Debug)]
pub struct LocalStorage;

impl Storage for LocalStorage {
    fn is_local(&self) -> bool {
        true
    }

    fn open(&self, path: &Path) -> Result<Arc<dyn ReadAt>, SourceError> {
        Ok(Arc::new(MmapFile::open(path)?))
    }

    fn kind(&self, path: &Path) -> Result<Option<EntryKind>, SourceError> {
        Ok(match std::fs::metadata(path) {
            Ok(m) if m.is_dir() => Some(EntryKind::Dir),
            Ok(_) => Some(EntryKind::File),
            Err(_) => None,
        })
    }

    fn list(&self, dir: &Path) -> Result<Vec<(OsString, EntryKind)>, SourceError> {
        let rd = std::fs::read_dir(dir).map_err(|e| SourceError::io(dir, e))?;
        Ok(rd
            .flatten()
            .filter_map(|e| {
                let kind = self.kind(&e.path()).ok()??;
                Some((e.file_name(), kind))
            })
            .collect())
    }

    fn stamp(&self, path: &Path) -> Result<Option<String>, SourceError> {
        match std::fs::metadata(path) {
            Ok(m) => {
                let id = FileIdentity::of(&m);
                Ok(Some(format!(
                    "{}:{}:{}:{}",
                    id.dev, id.ino, id.size, id.mtime_ns
                )))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(SourceError::io(path, e)),
        }
    }
}

/// A memory-mapped local file.
pub(crate) struct MmapFile {
    path: PathBuf,
    about: About,
    /// Registered with the SIGBUS handler; declared before `map` so it is dropped (and the
    /// region unregistered) before the mapping is unmapped.
    guard: Option<sigbus::Guard>,
    map: Option<Arc<Mmap>>, // None for an empty file (an empty mapping is not allowed)
    identity: FileIdentity,
    /// Instant (as nanos since `epoch`) of the last identity check that passed.
    last_check_ns: AtomicU64,
    /// The drop (`DROPS`) this file's mapping was last put on the list of touched ones for.
    listed_for: AtomicU64,
    epoch: Instant,
    /// This file's key in the process's descriptor tables (`fds::MAIN`, `fds::SMALL`): its
    /// descriptors are kept there while used, opened again by path when let go.
    id: u64,
}

/// Ids of `MmapFile`s, unique per open: their keys in the descriptor tables (`fds`).
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// After this many bytes read from mappings, in total over the process, the pages of every
/// mapping read since the last time are unmapped from the process again (`MADV_DONTNEED`;
/// they stay in the page cache): a mount that reads a 4 GiB checkpoint, or many files at
/// once, keeps its resident set bounded instead of growing by every page it touched.
const DROP_MAPPED_EVERY: u64 = 16 << 20;

/// Bytes handed out from mappings since their pages were last dropped (all files).
static READ_SINCE_DROP: AtomicU64 = AtomicU64::new(0);
/// How many drops there have been: a file is listed in `TOUCHED` once per drop.
static DROPS: AtomicU64 = AtomicU64::new(0);
/// The mappings read from since the drop before last, each with the drop count it was listed
/// under. A drop keeps those listed since the last one for the next: a reader may touch the
/// bytes it was handed after another thread's drop (its listing taken by that drop), and its
/// pages must still leave with the next one.
static TOUCHED: std::sync::Mutex<Vec<(std::sync::Weak<Mmap>, u64)>> =
    std::sync::Mutex::new(Vec::new());

/// What a page fault on a mapping maps beyond the bytes asked for, at most: the kernel maps a
/// large page-cache folio whole (up to 2 MiB; measured: a 1-byte read of a file whose page
/// cache holds huge folios leaves ~1.1 MiB resident, `MADV_NOHUGEPAGE` or not).
const FAULT_MAPS: u64 = 2 << 20;

/// Borrowed reads (`read_at`) shorter than this are copies (`pread`): borrowing a few bytes
/// would map megabytes (`FAULT_MAPS`), and the copy of a short read costs less than the
/// faults and the unmap.
const BORROW_MIN: usize = 1 << 20;

/// The smallest range `done_with` hands back at once.
const DONE_WITH_MIN: u64 = 256 << 10;

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
            Some(Arc::new(map))
        };
        let guard = map.as_ref().map(|m| sigbus::register(m.as_ptr(), m.len()));
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        fds::MAIN.put(id, Arc::new(file));
        Ok(MmapFile {
            about: About {
                name: path.display().to_string(),
                size: meta.len(),
                mtime: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                identity: Some(FileIdentity::of(&meta)),
                version: None,
            },
            path: path.to_path_buf(),
            guard,
            map,
            identity: FileIdentity::of(&meta),
            last_check_ns: AtomicU64::new(0),
            listed_for: AtomicU64::new(u64::MAX),
            epoch: Instant::now(),
            id,
        })
    }
}

impl Drop for MmapFile {
    fn drop(&mut self) {
        fds::MAIN.forget(self.id);
        fds::SMALL.forget(self.id);
    }
}

/// Bytes of a mapping, keeping it mapped.
struct Lent {
    map: Arc<Mmap>,
    range: std::ops::Range<usize>,
}

impl AsRef<[u8]> for Lent {
    fn as_ref(&self) -> &[u8] {
        &self.map[self.range.clone()]
    }
}

/// Lent pages leave the process with the view (they stay in the page cache): pushing a whole
/// file through views keeps the resident set to the views in flight.
impl Drop for Lent {
    fn drop(&mut self) {
        const PAGE: usize = 4096;
        let start = self.range.start.div_ceil(PAGE) * PAGE;
        let end = self.range.end / PAGE * PAGE;
        if end > start {
            // SAFETY: as in `MmapFile::visit`: a shared read-only mapping of an unchanged
            // file; dropped pages fault back in with the same bytes, so slices other threads
            // hold stay valid.
            let _ = unsafe {
                self.map.unchecked_advise_range(
                    memmap2::UncheckedAdvice::DontNeed,
                    start,
                    end - start,
                )
            };
        }
    }
}

impl MmapFile {
    /// Counts `len` bytes handed out; every `DROP_MAPPED_EVERY` bytes (over all files) the
    /// pages of every mapping read from since are dropped from the process.
    fn dropping_pages(&self, len: usize) {
        let Some(map) = &self.map else {
            return;
        };
        let drop = DROPS.load(Ordering::Relaxed);
        if self.listed_for.swap(drop, Ordering::Relaxed) != drop {
            if let Ok(mut t) = TOUCHED.lock() {
                t.push((Arc::downgrade(map), drop));
            }
        }
        // Faults map whole folios: the pages around the bytes asked for are mapped too.
        let len = len as u64 + FAULT_MAPS;
        let now = READ_SINCE_DROP.fetch_add(len, Ordering::Relaxed) + len;
        // The bytes being handed out are touched after this: they count towards the next
        // drop, and this file is listed for it. One thread drops (the exchange elects it).
        let elected = now >= DROP_MAPPED_EVERY
            && READ_SINCE_DROP
                .compare_exchange(now, len, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok();
        if elected {
            let next = DROPS.fetch_add(1, Ordering::Relaxed) + 1;
            let touched: Vec<Arc<Mmap>> = TOUCHED
                .lock()
                .map(|mut t| {
                    let mut all: Vec<Arc<Mmap>> =
                        t.iter().filter_map(|(w, _)| w.upgrade()).collect();
                    // A file read in both epochs is listed twice: its pages leave once.
                    all.sort_by_key(Arc::as_ptr);
                    all.dedup_by(|a, b| Arc::ptr_eq(a, b));
                    // Listed since the last drop: kept for the next one too (see `TOUCHED`).
                    t.retain(|(w, at)| *at + 1 >= next && w.strong_count() > 0);
                    t.push((Arc::downgrade(map), next));
                    debug_assert!(t.iter().all(|&(_, at)| at + 1 >= next));
                    all
                })
                .unwrap_or_default();
            self.listed_for.store(next, Ordering::Relaxed);
            for map in touched {
                // SAFETY: the mapping is shared, read-only and of a file checked unchanged
                // before each read: dropped pages fault back in with the same bytes, so
                // slices other threads hold stay valid and keep their contents.
                let _ = unsafe { map.unchecked_advise(memmap2::UncheckedAdvice::DontNeed) };
            }
        }
    }
}

impl ReadAt for MmapFile {
    fn about(&self) -> &About {
        &self.about
    }
    fn local_file(&self) -> Option<Arc<File>> {
        self.fd()
    }
    /// Copies by `pread`; lends views of the mapping to a context that lends (`Bytes`) and to
    /// visitors (`Whole`, `Pieces`) of at least `BORROW_MIN` bytes. Checked after.
    fn read_with(&self, ctx: &ReadCtx, offset: u64, to: To<'_>) -> Result<(), SourceError> {
        if let To::Runs(starts, out) = to {
            self.check_unchanged()?;
            each_run(&self.about.name, offset, starts, out, |at, run| {
                checked_end(&self.about.name, at, run.len() as u64, self.about.size)?;
                self.pread(at, run)
            })?;
            return self.check_consistent();
        }
        let end = checked_end(&self.about.name, offset, to.len(), self.about.size)?;
        if offset == end {
            return super::read::serve_slice(&self.about.name, &[], 0, to);
        }
        self.check_unchanged()?;
        match to {
            To::Fill(out) if ctx.is_metadata() => self.pread_small(offset, out)?,
            To::Fill(out) => self.pread(offset, out)?,
            // The kernel's copy of a view finds a file cut short itself (EFAULT): a push, the
            // only lender, shrugs it off; nothing is checked after.
            To::Bytes(len, got) if ctx.lends() => {
                *got = self.lend(offset, len);
                return Ok(());
            }
            To::Bytes(len, got) => {
                *got = scratch::filled(len, |out| self.pread(offset, out).map(|()| len))?
            }
            To::Whole(len, visit) => self.visit(offset, len, visit)?,
            To::Runs(..) => unreachable!("read run by run above"),
            To::Pieces(_, visit) => self.pass(offset, end, visit)?,
            To::Parts(_, visit) => self.pass(
                offset,
                end,
                &mut super::read::pieces_in_order(offset, visit),
            )?,
        }
        self.check_consistent()
    }
    fn done_with(&self, offset: u64, len: u64) {
        const PAGE: u64 = 4096;
        let Some(map) = self.map.as_ref() else {
            return;
        };
        // Whole pages inside the range: a page shared with bytes still in use stays. A small
        // range is left to the drop every `DROP_MAPPED_EVERY` bytes read (`dropping_pages`):
        // each madvise stops every core to flush its TLB, and a lookup's few pages (a row
        // read back by id, a line found by a seek) are not worth it.
        let start = offset.div_ceil(PAGE) * PAGE;
        let end = offset.saturating_add(len).min(self.about.size) / PAGE * PAGE;
        if end >= start + DONE_WITH_MIN {
            // SAFETY: as in `visit`: a shared read-only mapping; dropped pages fault back in
            // with the same bytes, so slices other threads hold stay valid.
            let _ = unsafe {
                map.unchecked_advise_range(
                    memmap2::UncheckedAdvice::DontNeed,
                    start as usize,
                    (end - start) as usize,
                )
            };
        }
    }
}

impl MmapFile {
    /// The mapping, for a read of bytes inside the file (an empty file has none, and no read
    /// of it gets here).
    fn mapping(&self) -> &Arc<Mmap> {
        self.map
            .as_ref()
            .expect("a non-empty range implies a mapping")
    }

    /// Bytes `offset..offset + len` (inside the file, checked) as a view of the mapping.
    fn lend(&self, offset: u64, len: usize) -> Bytes {
        let range = offset as usize..offset as usize + len;
        let map = Arc::clone(self.mapping());
        self.dropping_pages(len);
        // Mapped in one call, so the kernel's copy finds every page (no fault per 64 KiB).
        let start = range.start / 4096 * 4096;
        let _ = map.advise_range(memmap2::Advice::PopulateRead, start, range.end - start);
        Bytes::from_owner(Lent { map, range })
    }

    /// Bytes `offset..end` (inside the file, checked) to `visit` in pieces of
    /// `DROP_MAPPED_EVERY` bytes, each unmapped from the process once visited: a checksum
    /// pass over a 1 GiB tensor leaves no gigabyte resident.
    fn pass(&self, offset: u64, end: u64, visit: Visit<'_>) -> Result<(), SourceError> {
        let mut at = offset;
        while at < end {
            let n = (end - at).min(DROP_MAPPED_EVERY);
            self.visit(at, n as usize, visit)?;
            self.done_with(at, n);
            at += n;
        }
        Ok(())
    }

    /// `visit` of bytes `offset..offset + len` (inside the file, checked): borrowed from the
    /// mapping, or copied when short (borrowing a few bytes would map megabytes).
    fn visit(&self, offset: u64, len: usize, visit: Visit<'_>) -> Result<(), SourceError> {
        if len < BORROW_MIN {
            let copy = scratch::filled(len, |out| self.pread(offset, out).map(|()| len))?;
            visit(&copy);
            return Ok(());
        }
        self.dropping_pages(len);
        visit(&self.mapping()[offset as usize..offset as usize + len]);
        Ok(())
    }

    /// The kernel copies from its page cache through its own mapping of it: no page faults
    /// or TLB misses on 4 KiB pages of ours (copying out of the mapping took ~2x as long per
    /// byte), and a file truncated meanwhile gives a short read rather than SIGBUS.
    fn pread(&self, offset: u64, out: &mut [u8]) -> Result<(), SourceError> {
        match self.fd() {
            Some(f) => f.read_exact_at(out, offset).map_err(|e| self.read_error(e)),
            None => self.copy_mapped(offset, out),
        }
    }

    /// `out` copied from the mapping: the inode mapped is no longer at the path (renamed over,
    /// unlinked), so no descriptor of it can be opened again; the mapping still holds it.
    fn copy_mapped(&self, offset: u64, out: &mut [u8]) -> Result<(), SourceError> {
        if out.is_empty() {
            return Ok(());
        }
        // Inside the file: checked by every caller (`checked_end`).
        let start = offset as usize;
        out.copy_from_slice(&self.mapping()[start..start + out.len()]);
        self.dropping_pages(out.len());
        match self.guard.as_ref().is_some_and(sigbus::Guard::faulted) {
            true => Err(self.changed()),
            false => Ok(()),
        }
    }

    /// This file's descriptor: kept in `fds::MAIN`, or opened again by path when it is still
    /// the inode mapped (`None` when the path names another file now, or none).
    fn fd(&self) -> Option<Arc<File>> {
        fds::MAIN.get(self.id, || self.reopen())
    }

    /// The path opened again, if it still names the inode mapped.
    fn reopen(&self) -> Option<File> {
        let f = File::open(&self.path).ok()?;
        let now = FileIdentity::of(&f.metadata().ok()?);
        (now.dev == self.identity.dev && now.ino == self.identity.ino).then_some(f)
    }

    /// Metadata reads (a header, a pickle) through a file description of their own whose
    /// read-ahead is off (`POSIX_FADV_RANDOM`): a 4-byte read of a cold file reads 4 KiB, not
    /// the device's read-ahead (8 MiB of tensor data on some hosts). The same inode, by
    /// `/proc/self/fd`: a file renamed over meanwhile is not the one read.
    fn pread_small(&self, offset: u64, out: &mut [u8]) -> Result<(), SourceError> {
        match self.small() {
            Some(f) => f.read_exact_at(out, offset).map_err(|e| self.read_error(e)),
            None => self.pread(offset, out),
        }
    }

    /// This file's small-read description: the one `SMALL` keeps, or a new one put there
    /// (the least recently used closed once no reader holds it); `None` where it cannot be
    /// opened (the main description serves).
    fn small(&self) -> Option<Arc<File>> {
        fds::SMALL.get(self.id, || {
            use std::os::fd::AsRawFd;
            let main = self.fd()?;
            let f = File::open(format!("/proc/self/fd/{}", main.as_raw_fd())).ok()?;
            // SAFETY: an advisory call on a descriptor this function owns.
            let r = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
            (r == 0).then_some(f)
        })
    }

    fn read_error(&self, e: std::io::Error) -> SourceError {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            self.changed()
        } else {
            SourceError::io(&self.path, e)
        }
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
        // The mapped inode itself, not the path: a file renamed over or unlinked (a new
        // checkpoint written beside, an old one deleted) leaves this one, and the mapping,
        // intact; only a rewrite of this inode in place makes its bytes other than opened.
        // No descriptor: the path names another inode now, and this one, unlinked or renamed
        // away, can no longer be rewritten through it.
        let Some(file) = self.fd() else {
            return Ok(());
        };
        match file.metadata() {
            Ok(meta) if same_content(&FileIdentity::of(&meta), &self.identity) => {
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
        let Some(file) = self.fd() else {
            return Ok(());
        };
        match file.metadata() {
            Ok(m) if same_content(&FileIdentity::of(&m), &self.identity) => Ok(()),
            Ok(_) => Err(self.changed()),
            Err(e) => Err(SourceError::io(&self.path, e)),
        }
    }
}

/// An inode whose size and mtime are as opened still holds the bytes opened.
fn same_content(now: &FileIdentity, opened: &FileIdentity) -> bool {
    now.size == opened.size && now.mtime_ns == opened.mtime_ns
}

impl MmapFile {
    fn changed(&self) -> SourceError {
        SourceError::Changed {
            path: self.about.name.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::ReadExt;
    use std::io::Write;

    /// A file renamed over or unlinked (a training job's new checkpoint, an old one
    /// deleted) leaves the opened inode and its bytes; a rewrite of that inode in place is
    /// `Changed`, never other bytes.
    #[test]
    fn mmap_keeps_a_replaced_file_and_detects_a_rewrite_in_place() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, b"hello world").unwrap();
        let f = MmapFile::open(&p).unwrap();
        assert_eq!(f.read_vec(6, 5).unwrap(), b"world");
        let tmp = dir.path().join("g");
        let mut g = std::fs::File::create(&tmp).unwrap();
        g.write_all(b"HELLO WORLD!").unwrap();
        drop(g);
        std::fs::rename(&tmp, &p).unwrap();
        f.last_check_ns.store(0, Ordering::Relaxed);
        assert_eq!(f.read_vec(0, 5).unwrap(), b"hello");
        std::fs::remove_file(&p).unwrap();
        f.last_check_ns.store(0, Ordering::Relaxed);
        assert_eq!(f.read_vec(6, 5).unwrap(), b"world");

        std::fs::write(&p, b"hello world").unwrap();
        let f = MmapFile::open(&p).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&p, b"HELLO WORLD").unwrap();
        f.last_check_ns.store(0, Ordering::Relaxed);
        assert!(matches!(f.read_vec(0, 5), Err(SourceError::Changed { .. })));
    }

    /// The check is inside the read: bytes a visitor saw while the file was rewritten in
    /// place make the read `Changed`, whatever the visitor did with them.
    #[test]
    fn a_rewrite_during_a_visit_fails_the_read() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let data = vec![7u8; BORROW_MIN + 4096];
        std::fs::write(&p, &data).unwrap();
        let f = MmapFile::open(&p).unwrap();
        let ctx = ReadCtx::none();
        assert_eq!(f.with_bytes(ctx, 0, data.len(), |b| b[5]).unwrap(), 7);
        let rewrite = || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            let mut w = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
            w.write_all(b"changed").unwrap();
        };
        let got = f.with_bytes(ctx, 0, data.len(), |_| rewrite());
        assert!(matches!(got, Err(SourceError::Changed { .. })), "{got:?}");
        let mut out = vec![0u8; 10];
        assert!(
            f.read_into(ctx, 0, &mut out).is_err(),
            "and every read after"
        );
    }

    #[test]
    fn dropping_mapped_pages_keeps_bytes() {
        let _alone = DROP_ACCOUNTING.lock().unwrap_or_else(|e| e.into_inner());
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("big");
        let data: Vec<u8> = (0..(DROP_MAPPED_EVERY as usize + (8 << 20)))
            .map(|i| (i % 253) as u8)
            .collect();
        std::fs::write(&p, &data).unwrap();
        let f = MmapFile::open(&p).unwrap();
        let lend = ReadCtx::none().lending();
        let held = f.read(&lend, 100, 1000).unwrap();
        let mut at = 0usize;
        while at < data.len() {
            let n = (1 << 20).min(data.len() - at);
            let same = f.with_bytes(&lend, at as u64, n, |b| b == &data[at..at + n]);
            assert!(same.unwrap(), "at {at}");
            at += n;
        }
        // Pages dropped on the way fault back in with the same bytes.
        assert_eq!(&*held, &data[100..1100]);
        assert!(READ_SINCE_DROP.load(Ordering::Relaxed) < DROP_MAPPED_EVERY);
    }

    /// Held by the tests that count what the process keeps mapped: the drop accounting is the
    /// process's, and another such test's big reads would move it under them.
    static DROP_ACCOUNTING: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// Resident bytes of this process's mappings of `path` (`/proc/self/smaps`).
    fn mapped_rss(path: &Path) -> u64 {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let name = path.display().to_string();
        let mut inside = false;
        let mut kib = 0;
        for line in smaps.lines() {
            if line.contains(" r") && line.split_whitespace().count() >= 5 && line.contains('-') {
                // A mapping's header line: `start-end perms offset dev inode [path]`.
                if line.split_whitespace().nth(4).is_some() && !line.starts_with("Rss") {
                    inside = line.ends_with(&name);
                }
            }
            if inside {
                if let Some(v) = line.strip_prefix("Rss:") {
                    kib += v.trim().trim_end_matches(" kB").parse::<u64>().unwrap_or(0);
                }
            }
        }
        kib * 1024
    }

    /// A pass over a whole big file (a tensor's checksum) gives its bytes in order and leaves
    /// at most a piece of them mapped.
    #[test]
    fn a_pass_over_a_big_file_leaves_little_mapped() {
        let _alone = DROP_ACCOUNTING.lock().unwrap_or_else(|e| e.into_inner());
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("pass");
        let data: Vec<u8> = (0..(3 * DROP_MAPPED_EVERY as usize + 12345))
            .map(|i| (i % 251) as u8)
            .collect();
        std::fs::write(&p, &data).unwrap();
        let f = MmapFile::open(&p).unwrap();
        // What a touched mapping looks like to `mapped_rss`. Another test's reads, on another
        // thread, may drop every mapping between the touch and the look: a few tries.
        let ctx = ReadCtx::none();
        let seen = (0..5).any(|_| {
            let sum = f.with_bytes(ctx, 0, 8 << 20, |b| {
                b.iter().map(|&b| b as u64).sum::<u64>()
            });
            sum.unwrap() > 0 && mapped_rss(&p) >= 4 << 20
        });
        assert!(seen, "smaps not read");
        f.done_with(0, 8 << 20);
        let mut got = Vec::with_capacity(data.len());
        let mut pieces = 0;
        f.for_each_piece(ctx, 0, data.len() as u64, &mut |b| {
            got.extend_from_slice(b);
            pieces += 1;
        })
        .unwrap();
        assert!(got == data);
        assert_eq!(pieces, 4);
        let rss = mapped_rss(&p);
        assert!(rss <= 1 << 20, "{rss} bytes of the file still mapped");
        let past = f.for_each_piece(ctx, 1, data.len() as u64, &mut |_| ());
        assert!(past.is_err());
    }

    /// Reads spread over many files leave at most about `DROP_MAPPED_EVERY` of them mapped
    /// in all: the bound is the process's, not each file's.
    #[test]
    fn reads_over_many_files_leave_little_mapped_in_all() {
        let _alone = DROP_ACCOUNTING.lock().unwrap_or_else(|e| e.into_inner());
        let dir = tempfile::tempdir().unwrap();
        let piece = DROP_MAPPED_EVERY as usize / 2;
        let files: Vec<(std::path::PathBuf, MmapFile)> = (0..6)
            .map(|k| {
                let p = dir.path().join(format!("f{k}"));
                std::fs::write(&p, vec![k as u8 + 1; piece]).unwrap();
                let f = MmapFile::open(&p).unwrap();
                (p, f)
            })
            .collect();
        for (_, f) in &files {
            let sum = f.with_bytes(ReadCtx::none(), 0, piece, |b| {
                b.iter().map(|&b| b as u64).sum::<u64>()
            });
            assert!(sum.unwrap() > 0);
        }
        let mapped: u64 = files.iter().map(|(p, _)| mapped_rss(p)).sum();
        assert!(
            mapped <= DROP_MAPPED_EVERY + (1 << 20),
            "{mapped} bytes of 6 files still mapped"
        );
    }

    /// Metadata reads give the same bytes through their own description, which reads the
    /// inode opened even after the path is renamed over.
    #[test]
    fn read_vec_reads_the_opened_inode() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let data: Vec<u8> = (0..50_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&p, &data).unwrap();
        let f = MmapFile::open(&p).unwrap();
        let other = dir.path().join("g");
        std::fs::write(&other, vec![0u8; 50_000]).unwrap();
        std::fs::rename(&other, &p).unwrap();
        assert_eq!(f.read_vec(1000, 3000).unwrap(), &data[1000..4000]);
        assert_eq!(f.read_vec(49_990, 10).unwrap(), &data[49_990..]);
        assert!(f.read_vec(49_990, 11).is_err(), "past the end");
        assert!(fds::SMALL.holds(f.id), "its own description");
    }

    #[test]
    fn read_into_copies_and_a_shrunk_file_is_changed() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&p, &data).unwrap();
        let f = MmapFile::open(&p).unwrap();
        let ctx = ReadCtx::none();
        let mut out = vec![0u8; 70_000];
        f.read_into(ctx, 20_000, &mut out).unwrap();
        assert_eq!(out, &data[20_000..90_000]);
        assert!(f.read_into(ctx, 50_000, &mut out).is_err(), "past the end");
        f.read_into(ctx, 100_000, &mut []).unwrap();
        // Truncated in place (same inode): a short pread, never SIGBUS or stale zeros.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .unwrap()
            .set_len(50_000)
            .unwrap();
        assert!(matches!(
            f.read_into(ctx, 40_000, &mut out[..20_000]),
            Err(SourceError::Changed { .. })
        ));
    }

    #[test]
    fn empty_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("e");
        std::fs::write(&p, b"").unwrap();
        let f = MmapFile::open(&p).unwrap();
        assert_eq!(f.size(), 0);
        assert!(f.read_vec(0, 0).unwrap().is_empty());
        assert!(f.read_vec(0, 1).is_err());
        assert_eq!(f.with_bytes(ReadCtx::none(), 0, 0, |b| b.len()).unwrap(), 0);
        assert!(f.read(&ReadCtx::none().lending(), 0, 0).unwrap().is_empty());
    }
}

#[cfg(test)]
mod small_tests {
    use super::*;
    use crate::source::ReadExt;

    /// Metadata reads of many files keep at most `SMALL_KEPT` descriptions open beside each
    /// file's own: one descriptor per file, not two.
    #[test]
    fn small_reads_of_many_files_keep_few_descriptors() {
        let open_fds = || std::fs::read_dir("/proc/self/fd").unwrap().count();
        let dir = tempfile::tempdir().unwrap();
        let before = open_fds();
        let files: Vec<MmapFile> = (0..100)
            .map(|k| {
                let p = dir.path().join(format!("f{k}"));
                std::fs::write(&p, vec![k as u8; 4096]).unwrap();
                MmapFile::open(&p).unwrap()
            })
            .collect();
        for (k, f) in files.iter().enumerate() {
            assert_eq!(f.read_vec(10, 4).unwrap(), vec![k as u8; 4]);
        }
        // Other tests run beside this one and open files of their own: a margin.
        let held = open_fds().saturating_sub(before);
        let most = fds::MAIN.cap() + fds::SMALL.cap() + 8;
        assert!(
            held <= most,
            "{held} descriptors for 100 files (at most {most})"
        );
        assert!(fds::SMALL.len() <= fds::SMALL.cap());
        // Every file still reads, its descriptor opened again where it was let go.
        for (k, f) in files.iter().enumerate() {
            let mut b = [0u8; 3];
            f.read_into(ReadCtx::none(), 100, &mut b).unwrap();
            assert_eq!(b, [k as u8; 3]);
        }
        drop(files);
        let left = open_fds().saturating_sub(before);
        assert!(
            left <= fds::SMALL.cap() + 8,
            "{left} left: dropped files close"
        );
    }
}

#[cfg(test)]
mod evicted_tests {
    use super::*;
    use crate::source::ReadExt;

    /// A file whose descriptor was let go reads the inode it mapped: opened again by path
    /// while the path names it (a rewrite in place still found), from the mapping once the
    /// path names another file (renamed over), never the other file's bytes.
    #[test]
    fn a_let_go_descriptor_reads_the_inode_mapped() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let data: Vec<u8> = (0..20_000u32).map(|i| (i % 253) as u8).collect();
        std::fs::write(&p, &data).unwrap();
        let f = MmapFile::open(&p).unwrap();
        fds::MAIN.forget(f.id);
        fds::SMALL.forget(f.id);
        assert_eq!(f.read_vec(100, 50).unwrap(), &data[100..150]);
        assert!(fds::MAIN.holds(f.id), "opened again by path");
        // Renamed over: the path is another file now.
        let other = dir.path().join("g");
        std::fs::write(&other, vec![7u8; 20_000]).unwrap();
        std::fs::rename(&other, &p).unwrap();
        fds::MAIN.forget(f.id);
        fds::SMALL.forget(f.id);
        let mut out = vec![0u8; 1000];
        f.read_into(ReadCtx::none(), 5000, &mut out).unwrap();
        assert_eq!(out, &data[5000..6000], "the mapped inode's bytes");
        assert!(!fds::MAIN.holds(f.id), "no descriptor of another inode");
        // Rewritten in place while let go: found changed.
        let q = dir.path().join("h");
        std::fs::write(&q, &data).unwrap();
        let h = MmapFile::open(&q).unwrap();
        fds::MAIN.forget(h.id);
        std::fs::OpenOptions::new()
            .write(true)
            .open(&q)
            .unwrap()
            .set_len(10_000)
            .unwrap();
        let mut out = vec![0u8; 100];
        assert!(
            h.read_into(ReadCtx::none(), 0, &mut out).is_err(),
            "a rewrite is a change"
        );
    }
}
