//! The on-disk store under `cache_dir`: chunk offsets (one file per text file, so the exact
//! sizes of text files survive remounts) and checksum verdicts (`verdicts/`, one empty-bodied
//! file per verified tensor).
//!
//! File format (little-endian): `MFIDX2\n`, key length (u32), key bytes, offset count (u64),
//! offsets (u64 each), then the masked-free CRC32C (u32) of everything before it. A file is
//! used only when its checksum holds, its key equals the requested key exactly (file names are
//! hashes; the stored key settles collisions), its length matches the count and its offsets
//! start at 0 and never decrease: a damaged cache file is ignored (and rewritten), never
//! trusted. Writes go to a temporary file renamed into place, so readers never see half a file.

use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::{fnv1a64, OffsetStore, VerdictStore};

const MAGIC: &[u8] = b"MFIDX2\n";

pub struct DiskStore {
    dir: PathBuf,
    /// Most bytes of the whole cache directory (`cache_max=`).
    cap: u64,
    /// Bytes in the directory as last counted (`None`: not counted yet).
    used: Mutex<Option<u64>>,
    failed: AtomicU64,
}

impl DiskStore {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        DiskStore::with_cap(dir, u64::MAX)
    }

    /// A store whose directory is kept under `cap` bytes (least recently used files go).
    pub fn with_cap(dir: impl Into<PathBuf>, cap: u64) -> Self {
        DiskStore {
            dir: dir.into(),
            cap,
            used: Mutex::new(None),
            failed: AtomicU64::new(0),
        }
    }

    /// Counts `n` more bytes written; evicts down to 90% of the cap when over it.
    fn account(&self, n: u64) {
        if self.cap == u64::MAX {
            return;
        }
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        let total = match *used {
            Some(u) => u.saturating_add(n),
            None => super::lru::scan(&self.dir).iter().map(|f| f.1).sum(),
        };
        *used = Some(if total > self.cap {
            super::lru::evict(&self.dir, self.cap / 10 * 9)
        } else {
            total
        });
    }

    fn saved(&self, result: std::io::Result<u64>, what: &str) {
        match result {
            Ok(n) => self.account(n),
            Err(e) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                log::warn!("{what} cache {}: {e}", self.dir.display());
            }
        }
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir
            .join(format!("{:016x}.idx", fnv1a64(key.as_bytes())))
    }

    fn verdict_path(&self, identity: &str) -> PathBuf {
        self.dir
            .join("verdicts")
            .join(format!("{:016x}.ok", fnv1a64(identity.as_bytes())))
    }
}

impl VerdictStore for DiskStore {
    fn is_verified(&self, identity: &str) -> bool {
        let path = self.verdict_path(identity);
        let ok = std::fs::read(&path).is_ok_and(|k| k == identity.as_bytes());
        if ok {
            super::lru::touch(&path);
        }
        ok
    }

    fn mark_verified(&self, identity: &str) {
        let path = self.verdict_path(identity);
        let r = write_atomically(&path, identity.as_bytes()).map(|()| identity.len() as u64);
        self.saved(r, "verdict");
    }
}

/// Writes `bytes` to a temporary file renamed into place, so readers never see half a file.
fn write_atomically(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    drop(f);
    std::fs::rename(&tmp, path)
}

impl OffsetStore for DiskStore {
    fn load(&self, key: &str) -> Option<Vec<u64>> {
        let path = self.path(key);
        let file = std::fs::read(&path).ok()?;
        super::lru::touch(&path);
        let (data, crc) = file.split_at_checked(file.len().checked_sub(4)?)?;
        if crc32c::crc32c(data).to_le_bytes() != crc {
            return None;
        }
        let rest = data.strip_prefix(MAGIC)?;
        let klen = u32::from_le_bytes(rest.get(..4)?.try_into().ok()?) as usize;
        let stored_key = rest.get(4..4usize.checked_add(klen)?)?;
        if stored_key != key.as_bytes() {
            return None;
        }
        let rest = &rest[4 + klen..];
        let n = u64::from_le_bytes(rest.get(..8)?.try_into().ok()?);
        let body = &rest[8..];
        if Some(body.len() as u64) != n.checked_mul(8) {
            return None;
        }
        let offsets: Vec<u64> = body
            .chunks_exact(8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
            .collect();
        super::starts_at_zero_ascending(&offsets).then_some(offsets)
    }

    fn save(&self, key: &str, offsets: &[u64]) {
        let write = || -> std::io::Result<u64> {
            let mut buf = Vec::with_capacity(MAGIC.len() + 12 + key.len() + offsets.len() * 8);
            buf.extend_from_slice(MAGIC);
            buf.extend_from_slice(&(key.len() as u32).to_le_bytes());
            buf.extend_from_slice(key.as_bytes());
            buf.extend_from_slice(&(offsets.len() as u64).to_le_bytes());
            for o in offsets {
                buf.extend_from_slice(&o.to_le_bytes());
            }
            let crc = crc32c::crc32c(&buf);
            buf.extend_from_slice(&crc.to_le_bytes());
            write_atomically(&self.path(key), &buf).map(|()| buf.len() as u64)
        };
        self.saved(write(), "chunk index");
    }

    fn failures(&self) -> u64 {
        self.failed.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_key_check() {
        let dir = tempfile::tempdir().unwrap();
        let s = DiskStore::new(dir.path().join("c"));
        assert!(s.load("k").is_none());
        s.save("k", &[0, 5, 9]);
        assert_eq!(s.load("k"), Some(vec![0, 5, 9]));
        assert!(s.load("other").is_none());
        // A truncated file is ignored.
        let p = s.path("k");
        let data = std::fs::read(&p).unwrap();
        std::fs::write(&p, &data[..data.len() - 3]).unwrap();
        assert!(s.load("k").is_none());
        // A flipped bit anywhere is caught by the checksum.
        for i in 0..data.len() {
            let mut bad = data.clone();
            bad[i] ^= 0x10;
            std::fs::write(&p, &bad).unwrap();
            assert!(s.load("k").is_none(), "flip at byte {i} accepted");
        }
        // Offsets out of order are refused even with a valid checksum.
        s.save("k", &[0, 9, 5]);
        assert!(s.load("k").is_none());
    }

    #[test]
    fn the_directory_stays_under_its_cap() {
        let dir = tempfile::tempdir().unwrap();
        let s = DiskStore::with_cap(dir.path(), 20_000);
        let offsets: Vec<u64> = (0..500).collect(); // about 4 KB per file
        for i in 0..40 {
            s.save(&format!("k{i}"), &offsets);
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let used: u64 = crate::store::lru::scan(dir.path())
            .iter()
            .map(|f| f.1)
            .sum();
        assert!(used <= 20_000, "{used}");
        assert!(s.load("k39").is_some(), "the newest is kept");
        assert!(s.load("k0").is_none(), "the oldest went");
        assert_eq!(s.failures(), 0);
        let bad = DiskStore::new("/proc/nope");
        bad.save("k", &[0, 1]);
        assert_eq!(bad.failures(), 1);
    }

    #[test]
    fn verdicts_are_kept_per_identity() {
        let dir = tempfile::tempdir().unwrap();
        let s = DiskStore::new(dir.path());
        assert!(!s.is_verified("a:1:2:3"));
        s.mark_verified("a:1:2:3");
        assert!(s.is_verified("a:1:2:3"));
        assert!(!s.is_verified("a:1:2:4"));
    }
}
