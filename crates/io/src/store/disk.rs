//! The on-disk store under `cache_dir`: one file per mounted source (`<hash>.store`) holding
//! the chunk offsets of its text files (their exact sizes survive remounts) and the checksum
//! verdicts of its large tensors. It is read once, on first use, and grows by appends.
//!
//! File format (little-endian): a header `MFSTORE3`, source length (u32), source bytes,
//! CRC32C (u32) of what precedes it; then records, each `len` (u32), `body` (`len` bytes),
//! CRC32C (u32) of `len` and `body`. A body is the record's kind (`Record::KIND`: length u32,
//! bytes), key (length u32, bytes) and the record's own encoding (the rest). The last record
//! of a kind and key wins. A key is stored with the source (named once, in the header) written
//! as `\x01s` (`short_key`): identity strings repeat the source's path, and a store whose
//! size grew with where the source lives would hold fewer models under one cap.
//!
//! Invariants: nothing from the file is used unless its checksum holds and its lengths fit in
//! the bytes that exist; a record is used only as its type decodes it (`Record::decode`); a
//! header naming another source (a hash collision) leaves the store unused. Each record is
//! appended with one `write` on an `O_APPEND` descriptor, so concurrent mounts of one source
//! do not interleave. A damaged record ends the readable part of the file, so loading a file
//! with one (a torn append), or with mostly superseded records, rewrites it (temporary file
//! renamed into place): readers never see half a file. A writer whose file was replaced or
//! evicted meanwhile notices (link count 0) and appends to the new one instead.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};

use super::{fnv1a64, Store};

/// `3`: keys without the source's path (`2` repeated it; `1` kept offsets and verdicts only;
/// such files start afresh).
const MAGIC: &[u8] = b"MFSTORE3";
/// Superseded records are dropped when they are the majority of a file bigger than this.
const COMPACT_ABOVE: u64 = 256 << 10;

pub struct DiskStore {
    dir: PathBuf,
    source: String,
    path: PathBuf,
    /// Most bytes of the whole cache directory (`cache_max=`).
    cap: u64,
    /// Bytes in the directory as last counted (`None`: not counted yet).
    used: Mutex<Option<u64>>,
    failed: AtomicU64,
    loaded: OnceLock<Loaded>,
}

/// Records by (kind, key).
type Records = HashMap<(String, String), Vec<u8>>;

#[derive(Default)]
struct Loaded {
    records: RwLock<Records>,
    /// Where records are appended: opened on the first save (`None` once that failed, or when
    /// the file belongs to another source).
    appender: Mutex<Option<Arc<File>>>,
    usable: bool,
    /// Over the cap on its own: nothing more is appended.
    stopped: std::sync::atomic::AtomicBool,
}

/// Stores shared by every user in this process, so that the readers (verdicts) and the
/// layouts (offsets) of a mount load and append to one file.
static SHARED: Mutex<Vec<(PathBuf, String, Weak<DiskStore>)>> = Mutex::new(Vec::new());

impl DiskStore {
    /// The store of `source` under `dir`, kept under `cap` bytes together with everything
    /// else in `dir` (least recently used files go). Nothing is read until first use.
    pub fn new(dir: impl Into<PathBuf>, source: &str, cap: u64) -> Self {
        let dir = dir.into();
        DiskStore {
            path: dir.join(format!("{:016x}.store", fnv1a64(source.as_bytes()))),
            dir,
            source: source.to_owned(),
            cap,
            used: Mutex::new(None),
            failed: AtomicU64::new(0),
            loaded: OnceLock::new(),
        }
    }

    /// The one store of `source` under `dir` in this process.
    pub fn shared(dir: &Path, source: &str, cap: u64) -> Arc<DiskStore> {
        let mut all = SHARED.lock().unwrap_or_else(|e| e.into_inner());
        all.retain(|e| e.2.strong_count() > 0);
        if let Some(s) = all
            .iter()
            .find(|e| e.0 == dir && e.1 == source)
            .and_then(|e| e.2.upgrade())
        {
            return s;
        }
        let s = Arc::new(DiskStore::new(dir, source, cap));
        all.push((dir.to_path_buf(), source.to_owned(), Arc::downgrade(&s)));
        s
    }

    /// The file this store keeps its records in.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn loaded(&self) -> &Loaded {
        self.loaded.get_or_init(|| self.read_file())
    }

    fn read_file(&self) -> Loaded {
        let Ok(bytes) = std::fs::read(&self.path) else {
            return Loaded {
                usable: true,
                ..Loaded::default()
            };
        };
        super::lru::touch(&self.path);
        let Some(mut rest) = header(&bytes)
            .filter(|s| *s == self.source.as_bytes())
            .map(|s| &bytes[MAGIC.len() + 4 + s.len() + 4..])
        else {
            if bytes.starts_with(MAGIC) && bytes.len() > MAGIC.len() + 8 {
                log::warn!(
                    "{}: belongs to another source; not used",
                    self.path.display()
                );
                return Loaded::default();
            }
            if bytes.starts_with(&MAGIC[..MAGIC.len() - 1]) {
                // Another version's file: expected after an upgrade, not damage.
                log::info!(
                    "{}: an older store format; starting afresh",
                    self.path.display()
                );
            } else {
                log::warn!("{}: damaged header; starting afresh", self.path.display());
            }
            let _ = std::fs::remove_file(&self.path);
            return Loaded {
                usable: true,
                ..Loaded::default()
            };
        };
        let mut out = Loaded {
            usable: true,
            ..Loaded::default()
        };
        let mut records = 0u64;
        while !rest.is_empty() {
            let Some((kind, key, body, tail)) = record(rest) else {
                log::warn!("{}: damaged record; rewriting", self.path.display());
                break;
            };
            rest = tail;
            records += 1;
            let all = out.records.get_mut().unwrap_or_else(|e| e.into_inner());
            all.insert((kind.to_owned(), key.to_owned()), body.to_vec());
        }
        let live = out
            .records
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .len() as u64;
        let bloated = bytes.len() as u64 > COMPACT_ABOVE && records > live * 2;
        if !rest.is_empty() || bloated {
            self.rewrite(&mut out);
        }
        out
    }

    /// Replaces the file by its live records.
    fn rewrite(&self, l: &mut Loaded) {
        let mut buf = self.header_bytes();
        for ((kind, key), body) in l
            .records
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            encode(&mut buf, kind, key, body);
        }
        if let Err(e) = write_atomically(&self.path, &buf) {
            log::warn!("{}: {e}", self.path.display());
        }
    }

    fn header_bytes(&self) -> Vec<u8> {
        let mut buf = Vec::with_capacity(MAGIC.len() + 8 + self.source.len());
        buf.extend_from_slice(MAGIC);
        buf.extend_from_slice(&(self.source.len() as u32).to_le_bytes());
        buf.extend_from_slice(self.source.as_bytes());
        let crc = crc32c::crc32c(&buf);
        buf.extend_from_slice(&crc.to_le_bytes());
        buf
    }

    /// An append handle on the store file, creating it (header first) if it does not exist.
    fn open_appender(&self) -> std::io::Result<Arc<File>> {
        let open = || File::options().append(true).open(&self.path);
        match open() {
            Ok(f) => return Ok(Arc::new(f)),
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
            Err(_) => {}
        }
        // Linking a complete temporary file in place creates the file with its header
        // exactly once even when several mounts race.
        std::fs::create_dir_all(&self.dir)?;
        let tmp = temporary(&self.path);
        std::fs::write(&tmp, self.header_bytes())?;
        let linked = std::fs::hard_link(&tmp, &self.path);
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
        Ok(Arc::new(open()?))
    }

    fn append(&self, kind: &str, key: &str, body: &[u8]) {
        let l = self.loaded();
        if !l.usable {
            return;
        }
        if l.stopped.load(Ordering::Relaxed) {
            self.failed.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let mut rec = Vec::new();
        encode(&mut rec, kind, key, body);
        let write = || -> std::io::Result<()> {
            for _ in 0..2 {
                let current = l.appender.lock().unwrap_or_else(|e| e.into_inner()).clone();
                let file = match current {
                    Some(f) => f,
                    None => {
                        let f = self.open_appender()?;
                        *l.appender.lock().unwrap_or_else(|e| e.into_inner()) = Some(f.clone());
                        f
                    }
                };
                (&*file).write_all(&rec)?;
                if file.metadata()?.nlink() > 0 {
                    return Ok(());
                }
                // Evicted or rewritten meanwhile: the record went nowhere; once more.
                *l.appender.lock().unwrap_or_else(|e| e.into_inner()) = None;
            }
            Err(std::io::Error::other("the store file keeps disappearing"))
        };
        match write().and_then(|()| self.account(rec.len() as u64)) {
            Ok(()) => {}
            Err(e) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                log::warn!("cache {}: {e}", self.path.display());
            }
        }
    }

    /// Counts `n` more bytes written; evicts other files, least recently used first, down to
    /// 90% of the cap when over it. A store over the cap on its own is removed and persists
    /// nothing more in this process (an error: `modelfs index` says it could not save).
    fn account(&self, n: u64) -> std::io::Result<()> {
        if self.cap == u64::MAX {
            return Ok(());
        }
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        let total = match *used {
            Some(u) => u.saturating_add(n),
            None => super::lru::scan(&self.dir).iter().map(|f| f.1).sum(),
        };
        if total <= self.cap {
            *used = Some(total);
            return Ok(());
        }
        let own = std::fs::metadata(&self.path).map_or(0, |m| m.len());
        if own <= self.cap {
            let target = self.cap / 10 * 9;
            *used = Some(super::lru::evict_except(
                &self.dir,
                target,
                Some(&self.path),
            ));
            return Ok(());
        }
        let _ = std::fs::remove_file(&self.path);
        *used = Some(total.saturating_sub(own));
        self.loaded().stopped.store(true, Ordering::Relaxed);
        Err(std::io::Error::other(format!(
            "this source's indexes alone are over cache_max ({} bytes); no more are kept",
            self.cap
        )))
    }
}

/// The source named by a valid header.
fn header(bytes: &[u8]) -> Option<&[u8]> {
    let rest = bytes.strip_prefix(MAGIC)?;
    let n = u32::from_le_bytes(rest.get(..4)?.try_into().ok()?) as usize;
    let end = MAGIC.len().checked_add(4)?.checked_add(n)?;
    let crc = bytes.get(end..end.checked_add(4)?)?;
    (crc32c::crc32c(&bytes[..end]).to_le_bytes() == crc).then(|| &bytes[MAGIC.len() + 4..end])
}

/// One record: kind, key, body, and what follows it.
fn record(bytes: &[u8]) -> Option<(&str, &str, &[u8], &[u8])> {
    let len = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?) as usize;
    let end = 4usize.checked_add(len)?;
    let crc = bytes.get(end..end.checked_add(4)?)?;
    if crc32c::crc32c(&bytes[..end]).to_le_bytes() != crc {
        return None;
    }
    let (kind, rest) = text(&bytes[4..end])?;
    let (key, body) = text(rest)?;
    Some((kind, key, body, &bytes[end + 4..]))
}

/// A length (u32) and that many bytes of UTF-8, and what follows.
fn text(bytes: &[u8]) -> Option<(&str, &[u8])> {
    let n = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?) as usize;
    let s = std::str::from_utf8(bytes.get(4..4usize.checked_add(n)?)?).ok()?;
    Some((s, &bytes[4 + n..]))
}

fn encode(buf: &mut Vec<u8>, kind: &str, key: &str, body: &[u8]) {
    let start = buf.len();
    buf.extend_from_slice(&[0; 4]);
    for s in [kind, key] {
        buf.extend_from_slice(&(s.len() as u32).to_le_bytes());
        buf.extend_from_slice(s.as_bytes());
    }
    buf.extend_from_slice(body);
    let len = (buf.len() - start - 4) as u32;
    buf[start..start + 4].copy_from_slice(&len.to_le_bytes());
    let crc = crc32c::crc32c(&buf[start..]);
    buf.extend_from_slice(&crc.to_le_bytes());
}

/// A name beside `path` that no other writer uses.
fn temporary(path: &Path) -> PathBuf {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    path.with_extension(format!("tmp{}.{n}", std::process::id()))
}

/// Writes `bytes` to a temporary file renamed into place, so readers never see half a file.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = temporary(path);
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// `key` with each occurrence of `source` written `\x01s`, after every `\x01` of both is
/// doubled: one-to-one, so two keys never share a record.
fn short_key(source: &str, key: &str) -> String {
    const ESC: &str = "\u{1}";
    let escaped = key.replace(ESC, "\u{1}\u{1}");
    if source.is_empty() {
        return escaped;
    }
    escaped.replace(&source.replace(ESC, "\u{1}\u{1}"), "\u{1}s")
}

impl Store for DiskStore {
    fn get_bytes(&self, kind: &str, key: &str) -> Option<Vec<u8>> {
        let key = short_key(&self.source, key);
        let r = self
            .loaded()
            .records
            .read()
            .unwrap_or_else(|e| e.into_inner());
        r.get(&(kind.to_owned(), key)).cloned()
    }

    fn put_bytes(&self, kind: &str, key: &str, body: &[u8]) {
        let key = &short_key(&self.source, key);
        {
            let l = self.loaded();
            let mut r = l.records.write().unwrap_or_else(|e| e.into_inner());
            let k = (kind.to_owned(), key.to_owned());
            if r.get(&k).is_some_and(|old| old == body) {
                return;
            }
            r.insert(k, body.to_vec());
        }
        self.append(kind, key, body);
    }

    fn failures(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
#[path = "disk_tests.rs"]
mod tests;
