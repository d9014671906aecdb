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

use super::{fnv1a64, OffsetStore, VerdictStore};

const MAGIC: &[u8] = b"MFIDX2\n";

pub struct DiskStore {
    dir: PathBuf,
}

impl DiskStore {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        DiskStore { dir: dir.into() }
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
        std::fs::read(self.verdict_path(identity)).is_ok_and(|k| k == identity.as_bytes())
    }

    fn mark_verified(&self, identity: &str) {
        let path = self.verdict_path(identity);
        if let Err(e) = write_atomically(&path, identity.as_bytes()) {
            log::debug!("verdict cache {}: {e}", self.dir.display());
        }
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
        let file = std::fs::read(self.path(key)).ok()?;
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
        let write = || -> std::io::Result<()> {
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
            write_atomically(&self.path(key), &buf)
        };
        if let Err(e) = write() {
            log::debug!("chunk index cache {}: {e}", self.dir.display());
        }
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
    fn verdicts_are_kept_per_identity() {
        let dir = tempfile::tempdir().unwrap();
        let s = DiskStore::new(dir.path());
        assert!(!s.is_verified("a:1:2:3"));
        s.mark_verified("a:1:2:3");
        assert!(s.is_verified("a:1:2:3"));
        assert!(!s.is_verified("a:1:2:4"));
    }
}
