//! Fetched blocks kept on disk under `cache_dir/blocks/`, so a remount (or a second mount of
//! the same model) does not fetch them again. A block is keyed by the object's URL, its ETag
//! and the block's index: an object that changed has another ETag, so its old blocks are never
//! served for it (they age out). Objects without an ETag are not cached on disk.
//!
//! File format: `MFBLK1\n`, key length (u32 LE), key, data, CRC32C (u32 LE) of everything
//! before it. A file whose checksum, key or length does not hold is ignored and removed, never
//! trusted. Writes go to a temporary file renamed into place.
//!
//! The directory is bounded by `cap` bytes: when a write takes the total over it, the least
//! recently used files (by modification time, refreshed on every hit) are removed until the
//! total is under 90% of the cap. The total is learnt by one scan on first use and kept up to
//! date by this process; other processes sharing the directory are caught up with at each
//! eviction scan.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use bytes::Bytes;

use crate::source::fnv1a64;

const MAGIC: &[u8] = b"MFBLK1\n";

pub(crate) struct DiskBlocks {
    dir: PathBuf,
    cap: u64,
    /// Bytes in `dir` as far as this process knows; `None` until the first scan.
    used: Mutex<Option<u64>>,
}

impl DiskBlocks {
    pub(crate) fn new(dir: PathBuf, cap: u64) -> DiskBlocks {
        DiskBlocks {
            dir,
            cap,
            used: Mutex::new(None),
        }
    }

    fn key(url: &str, etag: &str, index: u64) -> String {
        format!("{url}\n{etag}\n{index}")
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir
            .join(format!("{:016x}.blk", fnv1a64(key.as_bytes())))
    }

    /// Block `index` of the object `url` at `etag`, if stored intact with exactly `len` bytes.
    pub(crate) fn load(&self, url: &str, etag: &str, index: u64, len: u64) -> Option<Bytes> {
        let key = Self::key(url, etag, index);
        let path = self.path(&key);
        let file = std::fs::read(&path).ok()?;
        match decode(&file, &key, len) {
            Some(range) => {
                // The hit makes the file recently used (eviction goes by modification time).
                if let Ok(f) = std::fs::File::options().write(true).open(&path) {
                    let _ = f.set_modified(SystemTime::now());
                }
                Some(Bytes::from(file).slice(range))
            }
            None => {
                log::debug!("block cache: ignoring damaged {}", path.display());
                let _ = std::fs::remove_file(&path);
                None
            }
        }
    }

    /// Whether a block file exists for this key (not whether it is intact: `load` checks).
    pub(crate) fn contains(&self, url: &str, etag: &str, index: u64) -> bool {
        self.path(&Self::key(url, etag, index)).exists()
    }

    /// Stores a block; failures (a full or read-only disk) only cost a later fetch.
    pub(crate) fn store(&self, url: &str, etag: &str, index: u64, data: &[u8]) {
        if self.cap == 0 {
            return;
        }
        let key = Self::key(url, etag, index);
        let path = self.path(&key);
        let written = write_atomically(&path, &encode(&key, data));
        match written {
            Ok(n) => self.account(n),
            Err(e) => log::debug!("block cache {}: {e}", self.dir.display()),
        }
    }

    /// Adds `n` written bytes to the total and evicts if the cap is passed.
    fn account(&self, n: u64) {
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        let total = match *used {
            Some(u) => u.saturating_add(n),
            None => scan(&self.dir).iter().map(|f| f.1).sum(),
        };
        *used = Some(if total > self.cap {
            evict(&self.dir, self.cap / 10 * 9)
        } else {
            total
        });
    }
}

fn encode(key: &str, data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(MAGIC.len() + 4 + key.len() + data.len() + 4);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(key.len() as u32).to_le_bytes());
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(data);
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The data's range within `file` if it is an intact block for `key` of `len` bytes.
fn decode(file: &[u8], key: &str, len: u64) -> Option<std::ops::Range<usize>> {
    let (body, crc) = file.split_at_checked(file.len().checked_sub(4)?)?;
    if crc32c::crc32c(body).to_le_bytes() != crc {
        return None;
    }
    let rest = body.strip_prefix(MAGIC)?;
    let klen = u32::from_le_bytes(rest.get(..4)?.try_into().ok()?) as usize;
    let data_start = 4usize.checked_add(klen)?;
    if rest.get(4..data_start)? != key.as_bytes() {
        return None;
    }
    let start = MAGIC.len() + data_start;
    (body.len().checked_sub(start)? as u64 == len).then_some(start..body.len())
}

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<u64> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut f = std::fs::File::create(&tmp)?;
    if let Err(e) = f.write_all(bytes) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    drop(f);
    std::fs::rename(&tmp, path)?;
    Ok(bytes.len() as u64)
}

/// Block files of `dir` with their sizes and modification times.
fn scan(dir: &Path) -> Vec<(PathBuf, u64, SystemTime)> {
    crate::source::lru::scan(dir)
}

fn evict(dir: &Path, target: u64) -> u64 {
    crate::source::lru::evict(dir, target)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_round_trip_and_other_keys_miss() {
        let dir = tempfile::tempdir().unwrap();
        let d = DiskBlocks::new(dir.path().to_path_buf(), 1 << 20);
        d.store("s3://b/k", "\"e1\"", 3, b"hello");
        assert_eq!(d.load("s3://b/k", "\"e1\"", 3, 5).unwrap(), &b"hello"[..]);
        assert!(d.load("s3://b/k", "\"e2\"", 3, 5).is_none(), "another ETag");
        assert!(
            d.load("s3://b/k", "\"e1\"", 4, 5).is_none(),
            "another block"
        );
        assert!(
            d.load("s3://b/k", "\"e1\"", 3, 6).is_none(),
            "another length"
        );
    }

    #[test]
    fn a_damaged_block_is_ignored_and_removed() {
        let dir = tempfile::tempdir().unwrap();
        let d = DiskBlocks::new(dir.path().to_path_buf(), 1 << 20);
        d.store("u", "e", 0, b"some bytes");
        let path = scan(dir.path()).pop().unwrap().0;
        let mut bytes = std::fs::read(&path).unwrap();
        let n = bytes.len();
        bytes[n - 6] ^= 1;
        std::fs::write(&path, bytes).unwrap();
        assert!(d.load("u", "e", 0, 10).is_none());
        assert!(!path.exists());
        // Truncated files and garbage are refused without panicking.
        for junk in [&b""[..], b"MF", b"MFBLK1\n\xff\xff\xff\xff0000"] {
            assert!(decode(junk, "u\ne\n0", 0).is_none());
        }
    }

    #[test]
    fn the_directory_stays_under_its_cap_dropping_the_least_recently_used() {
        let dir = tempfile::tempdir().unwrap();
        let block = vec![7u8; 1000];
        let d = DiskBlocks::new(dir.path().to_path_buf(), 5_000);
        for i in 0..4 {
            d.store("u", "e", i, &block);
            // Distinct modification times, so "least recently used" is well defined.
            let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000 + i);
            let p = d.path(&DiskBlocks::key("u", "e", i));
            std::fs::File::options()
                .write(true)
                .open(p)
                .unwrap()
                .set_modified(t)
                .unwrap();
        }
        // Block 0 is used again: it must outlive blocks 1 and 2.
        assert!(d.load("u", "e", 0, 1000).is_some());
        for i in 4..7 {
            d.store("u", "e", i, &block);
        }
        let total: u64 = scan(dir.path()).iter().map(|f| f.1).sum();
        assert!(total <= 5_000, "{total} bytes on disk");
        assert!(
            d.load("u", "e", 0, 1000).is_some(),
            "the recently used block"
        );
        assert!(d.load("u", "e", 1, 1000).is_none(), "the oldest block");
        assert!(d.load("u", "e", 6, 1000).is_some(), "the newest block");
    }
}
