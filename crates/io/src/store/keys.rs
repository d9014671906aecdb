//! An on-disk index from 64-bit keys to the slots that hold them: how a hash table's row is
//! found by feature id without a scan and without holding the keys in memory (a table has
//! 10^8+ of them). Built in one pass over the keys; a lookup reads two small pieces.
//!
//! File format (little-endian):
//! - header: `MFKEYS01`, key count `n` (u64), bucket count `b` (u64, a power of two), CRC32C
//!   (u32) of the 24 bytes before it;
//! - bucket table: `b + 1` entries of (first entry index u32, CRC32C u32 of the bucket's
//!   entry bytes) — bucket `i`'s entries are `first[i]..first[i + 1]`;
//! - entries: `n` of (key i64, slot u32), grouped by bucket.
//!
//! Invariants: nothing read is used unless its CRC holds and its indexes lie inside the file's
//! `n` entries; a key's bucket is `hash(key) >> (64 - log2 b)`. The index only says where to
//! look: callers read the key at the slot from the source and compare, so a stale or damaged
//! index can never give a wrong row.
//!
//! Building stays within a small constant of memory whatever `n`: the first pass counts keys
//! per bucket and spills (key, slot) pairs to one temporary file per group of buckets; each
//! group (a few MB) is then laid out in memory and appended.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::fnv1a64;
use crate::codec::le::{self, Le};

const MAGIC: &[u8; 8] = b"MFKEYS01";
const HEADER: u64 = 28;
const ENTRY: usize = 12;
/// Keys per bucket on average: a lookup reads about this many entries.
const PER_BUCKET: u64 = 32;
/// Entries laid out in memory at once while building (12 bytes each).
const GROUP_ENTRIES: u64 = 1 << 20;

fn bucket_of(key: i64, bits: u32) -> usize {
    if bits == 0 {
        return 0;
    }
    // Fibonacci hashing: sequential and strided ids spread over every bucket.
    ((key as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - bits)) as usize
}

/// Why the keys could not be read (the caller's own error).
pub type KeysError = Box<dyn std::error::Error + Send + Sync>;
/// Fills its slice with keys from the given index on.
pub type ReadKeys<'a> = dyn FnMut(u64, &mut [i64]) -> Result<(), KeysError> + 'a;

/// The index, open for lookups.
pub struct KeyIndex {
    file: File,
    n: u64,
    bits: u32,
}

/// Why an index could not be built or read.
#[derive(Debug, thiserror::Error)]
pub enum KeyIndexError {
    #[error("key index: {0}")]
    Io(#[from] io::Error),
    #[error("key index: damaged ({0})")]
    Damaged(&'static str),
    #[error("key index: {0} keys are more than it holds")]
    TooMany(u64),
    /// The keys could not be read (the caller's error, kept whole).
    #[error("{0}")]
    Keys(KeysError),
}

/// An index being built from keys given in slot order (`push`), at most `max_keys` of them:
/// counted per bucket and spilled to temporary files by group of buckets; `finish` lays each
/// group out in memory and writes it.
pub struct KeyIndexBuilder {
    file: File,
    bits: u32,
    group_bits: u32,
    max_keys: u64,
    n: u64,
    spills: Vec<BufWriter<File>>,
}

#[cfg(any(test, feature = "testkit"))]
thread_local! {
    /// Key indexes this thread began to build (tests count them).
    pub static BUILDS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

impl KeyIndexBuilder {
    /// A builder writing into `file`, its temporary files in `tmp_dir`; `max_keys` sizes the
    /// buckets (an over-estimate only makes buckets emptier).
    pub fn new(file: File, tmp_dir: &Path, max_keys: u64) -> Result<Self, KeyIndexError> {
        Self::in_scratch(file, &Scratch::Dir(tmp_dir.to_path_buf()), max_keys)
    }

    fn in_scratch(file: File, scratch: &Scratch, max_keys: u64) -> Result<Self, KeyIndexError> {
        #[cfg(any(test, feature = "testkit"))]
        BUILDS.with(|b| b.set(b.get() + 1));
        if max_keys > u64::from(u32::MAX) {
            return Err(KeyIndexError::TooMany(max_keys));
        }
        let buckets = (max_keys / PER_BUCKET).max(1).next_power_of_two();
        let bits = buckets.trailing_zeros();
        let groups = max_keys
            .div_ceil(GROUP_ENTRIES)
            .max(1)
            .next_power_of_two()
            .min(buckets);
        let spills = (0..groups)
            .map(|_| scratch.file().map(|f| BufWriter::with_capacity(1 << 16, f)))
            .collect::<io::Result<Vec<_>>>()?;
        Ok(KeyIndexBuilder {
            file,
            bits,
            group_bits: groups.trailing_zeros(),
            max_keys,
            n: 0,
            spills,
        })
    }

    /// The key of the next slot.
    pub fn push(&mut self, key: i64) -> Result<(), KeyIndexError> {
        if self.n >= self.max_keys {
            return Err(KeyIndexError::TooMany(self.n + 1));
        }
        // Only appended here (to its group's file): counting in a table of millions of buckets
        // would cost a cache miss per key.
        let b = bucket_of(key, self.bits);
        let mut pair = [0u8; ENTRY];
        pair[..8].copy_from_slice(&key.to_le_bytes());
        pair[8..].copy_from_slice(&(self.n as u32).to_le_bytes());
        self.spills[b >> (self.bits - self.group_bits)].write_all(&pair)?;
        self.n += 1;
        Ok(())
    }

    /// Pushes keys `0..n`, read by `read` in blocks.
    fn push_all(mut self, n: u64, read: &mut ReadKeys<'_>) -> Result<Self, KeyIndexError> {
        let mut keys = vec![0i64; 1 << 16];
        let mut at = 0u64;
        while at < n {
            let len = (n - at).min(keys.len() as u64) as usize;
            read(at, &mut keys[..len]).map_err(KeyIndexError::Keys)?;
            for &k in &keys[..len] {
                self.push(k)?;
            }
            at += len as u64;
        }
        Ok(self)
    }

    /// Lays the index out and writes it; the index of the keys pushed. Each group's pairs
    /// (a few MB) are read back, counted per bucket, placed and written.
    pub fn finish(self) -> Result<KeyIndex, KeyIndexError> {
        let KeyIndexBuilder {
            mut file,
            bits,
            n,
            spills,
            ..
        } = self;
        let buckets = 1u64 << bits;
        let per_group = (buckets as usize) / spills.len();
        let entries_at = HEADER + (buckets + 1) * 8;
        let (mut pairs, mut placed) = (Vec::new(), Vec::new());
        let mut base = 0u32; // entries of the groups before
        for (g, spill) in spills.into_iter().enumerate() {
            let b0 = g * per_group;
            let mut spill = spill.into_inner().map_err(|e| e.into_error())?;
            io::Seek::rewind(&mut spill)?;
            pairs.clear();
            spill.read_to_end(&mut pairs)?;
            if pairs.len() % ENTRY != 0 {
                return Err(KeyIndexError::Damaged("spill"));
            }
            let bucket = |p: &[u8]| bucket_of(le::i64_at(p, 0).unwrap_or_default(), bits) - b0;
            // start[i + 1] counts bucket b0 + i, then is where bucket b0 + i + 1 starts.
            let mut start = vec![0u32; per_group + 1];
            for p in pairs.chunks_exact(ENTRY) {
                start[bucket(p) + 1] += 1;
            }
            for i in 0..per_group {
                start[i + 1] += start[i];
            }
            let mut cursor = start.clone();
            placed.clear();
            placed.resize(pairs.len(), 0);
            for p in pairs.chunks_exact(ENTRY) {
                let c = &mut cursor[bucket(p)];
                let at = *c as usize * ENTRY;
                placed[at..at + ENTRY].copy_from_slice(p);
                *c += 1;
            }
            // The group's part of the table: where each bucket starts, its entries' CRC.
            let mut table = Vec::with_capacity(per_group * 8);
            for i in 0..per_group {
                let (s, e) = (start[i] as usize, start[i + 1] as usize);
                let crc = crc32c::crc32c(&placed[s * ENTRY..e * ENTRY]);
                table.extend_from_slice(&(base + start[i]).to_le_bytes());
                table.extend_from_slice(&crc.to_le_bytes());
            }
            file.write_all_at(&table, HEADER + b0 as u64 * 8)?;
            file.write_all_at(&placed, entries_at + u64::from(base) * ENTRY as u64)?;
            base += start[per_group];
        }
        debug_assert_eq!(u64::from(base), n);
        let mut end = base.to_le_bytes().to_vec();
        end.extend_from_slice(&[0; 4]);
        file.write_all_at(&end, HEADER + buckets * 8)?;
        let mut header = Vec::with_capacity(HEADER as usize);
        header.extend_from_slice(MAGIC);
        header.extend_from_slice(&n.to_le_bytes());
        header.extend_from_slice(&buckets.to_le_bytes());
        header.extend_from_slice(&crc32c::crc32c(&header).to_le_bytes());
        file.write_all_at(&header, 0)?;
        file.flush()?;
        Ok(KeyIndex { file, n, bits })
    }
}

/// Where the key index of some keys lives: under `cache_dir`, named by the keys' identity, so
/// later mounts find it; else an unnamed temporary file, gone with its last handle.
pub struct IndexPlace {
    tmp_dir: PathBuf,
    path: Option<PathBuf>,
}

/// An index being written: kept under its name by `keep` once whole.
pub struct Pending {
    /// The file and the name it is kept under; `None`: an unnamed file, gone with its index.
    named: Option<(tempfile::NamedTempFile, PathBuf)>,
}

impl Pending {
    pub fn keep(self) {
        if let Some((file, p)) = self.named {
            if let Err(e) = file.persist(&p) {
                log::warn!("key index {}: not kept: {e}", p.display());
            }
        }
    }
}

/// Where an index's unnamed files go: a directory, or memory when no directory takes a file
/// (a read-only home and temp directory).
enum Scratch {
    Dir(PathBuf),
    Memory,
}

impl Scratch {
    /// A new unnamed file, gone with its last handle.
    fn file(&self) -> io::Result<File> {
        match self {
            Scratch::Dir(d) => tempfile::tempfile_in(d),
            Scratch::Memory => {
                // The raw syscall, not glibc's memfd_create(): that wrapper is glibc 2.27's, and
                // the wheel runs on glibc 2.17 (manylinux2014).
                // SAFETY: a C string literal, flags from libc; the descriptor returned is new
                // and owned by the File alone.
                let fd = unsafe {
                    libc::syscall(
                        libc::SYS_memfd_create,
                        c"modelfs-keys".as_ptr(),
                        libc::MFD_CLOEXEC,
                    )
                };
                if fd < 0 {
                    return Err(io::Error::last_os_error());
                }
                use std::os::fd::FromRawFd;
                let fd = i32::try_from(fd)
                    .map_err(|_| io::Error::other("memfd_create: no descriptor"))?;
                // SAFETY: `fd` is a valid descriptor no one else owns.
                Ok(unsafe { File::from_raw_fd(fd) })
            }
        }
    }
}

/// Said once per process: a cache directory that takes no file, and where indexes go instead.
static FELL_BACK: std::sync::Once = std::sync::Once::new();

impl IndexPlace {
    pub fn new(dir: Option<&Path>, identity: Option<&str>) -> IndexPlace {
        let path = dir
            .zip(identity)
            .map(|(d, id)| d.join(format!("{:016x}.keys", fnv1a64(id.as_bytes()))));
        IndexPlace {
            tmp_dir: dir.map_or_else(std::env::temp_dir, Path::to_path_buf),
            path,
        }
    }

    /// The index of `n` keys built before, when it is there and whole (a damaged one is
    /// logged and built again by the caller).
    pub fn existing(&self, n: u64) -> Option<KeyIndex> {
        let p = self.path.as_ref()?;
        let f = File::open(p).ok()?;
        KeyIndex::open(f, n)
            .map_err(|e| log::warn!("{}: {e}; built again", p.display()))
            .ok()
    }

    /// Where this index is written: the cache directory (kept under its name), else the temp
    /// directory, else memory (neither kept past the process), with one warning.
    fn scratch(&self) -> (Scratch, Option<PathBuf>) {
        let _ = std::fs::create_dir_all(&self.tmp_dir);
        let why = match tempfile::tempfile_in(&self.tmp_dir) {
            Ok(_) => return (Scratch::Dir(self.tmp_dir.clone()), self.path.clone()),
            Err(e) => e,
        };
        let tmp = std::env::temp_dir();
        let (scratch, there) = match tmp != self.tmp_dir && tempfile::tempfile_in(&tmp).is_ok() {
            true => (Scratch::Dir(tmp.clone()), tmp.display().to_string()),
            false => (Scratch::Memory, "memory".into()),
        };
        FELL_BACK.call_once(|| {
            log::warn!(
                "{}: not writable ({why}); key indexes are built in {there} and not kept",
                self.tmp_dir.display()
            )
        });
        (scratch, None)
    }

    /// A builder for at most `max_keys` keys, writing a file kept by `Pending::keep`.
    pub fn builder(&self, max_keys: u64) -> Result<(KeyIndexBuilder, Pending), KeyIndexError> {
        let (scratch, path) = self.scratch();
        let (handle, named) = match (&scratch, path) {
            (Scratch::Dir(d), Some(p)) => {
                let file = tempfile::NamedTempFile::new_in(d)?;
                (file.as_file().try_clone()?, Some((file, p)))
            }
            _ => (scratch.file()?, None),
        };
        let builder = KeyIndexBuilder::in_scratch(handle, &scratch, max_keys)?;
        Ok((builder, Pending { named }))
    }

    /// Builds (and keeps) the index of keys `0..n` read by `read`.
    pub fn build(&self, n: u64, read: &mut ReadKeys<'_>) -> Result<KeyIndex, KeyIndexError> {
        let (b, pending) = self.builder(n)?;
        let ix = b.push_all(n, read)?.finish()?;
        pending.keep();
        Ok(ix)
    }

    /// `builder`'s choice, for tests: where the index's files go.
    #[cfg(test)]
    fn goes_to(&self) -> Option<PathBuf> {
        match self.scratch().0 {
            Scratch::Dir(d) => Some(d),
            Scratch::Memory => None,
        }
    }
}

impl KeyIndex {
    /// Builds the index of keys `0..n` (`read(first, out)` fills `out` with keys `first..`)
    /// into `file`, using temporary files in `tmp_dir` meanwhile.
    pub fn build(
        file: File,
        tmp_dir: &Path,
        n: u64,
        read: &mut ReadKeys<'_>,
    ) -> Result<KeyIndex, KeyIndexError> {
        KeyIndexBuilder::new(file, tmp_dir, n)?
            .push_all(n, read)?
            .finish()
    }

    /// An index built before, when its header holds and its size is what the header says.
    pub fn open(file: File, n: u64) -> Result<KeyIndex, KeyIndexError> {
        let mut header = [0u8; HEADER as usize];
        file.read_exact_at(&mut header, 0)?;
        let mut h = Le::new(&header);
        let (magic, count, buckets) = (h.take(8), h.u64(), h.u64());
        let sum = crc32c::crc32c(&header[..h.pos()]);
        let (Some(count), Some(buckets)) = (count, buckets) else {
            return Err(KeyIndexError::Damaged("header"));
        };
        if magic != Some(&MAGIC[..]) || h.u32() != Some(sum) {
            return Err(KeyIndexError::Damaged("header"));
        }
        if count != n || !buckets.is_power_of_two() || buckets > 1 << 32 {
            return Err(KeyIndexError::Damaged("counts"));
        }
        let size = buckets
            .checked_add(1)
            .and_then(|b| b.checked_mul(8))
            .and_then(|t| t.checked_add(HEADER))
            .and_then(|t| t.checked_add(n.checked_mul(ENTRY as u64)?));
        if size != Some(file.metadata()?.len()) {
            return Err(KeyIndexError::Damaged("size"));
        }
        Ok(KeyIndex {
            file,
            n,
            bits: buckets.trailing_zeros(),
        })
    }

    /// Appends to `slots` every slot whose key the index says is `key` (callers check the
    /// source: see the module comment).
    pub fn find(&self, key: i64, slots: &mut Vec<u64>) -> Result<(), KeyIndexError> {
        let b = bucket_of(key, self.bits) as u64;
        let mut t = [0u8; 16];
        self.file.read_exact_at(&mut t, HEADER + b * 8)?;
        let mut b = Le::new(&t);
        let (s, crc, e) = match (b.u32(), b.u32(), b.u32()) {
            (Some(s), Some(crc), Some(e)) => (u64::from(s), crc, u64::from(e)),
            _ => return Err(KeyIndexError::Damaged("bucket bounds")),
        };
        if s > e || e > self.n {
            return Err(KeyIndexError::Damaged("bucket bounds"));
        }
        let entries_at = HEADER + ((1u64 << self.bits) + 1) * 8;
        let mut buf = vec![0u8; (e - s) as usize * ENTRY];
        self.file
            .read_exact_at(&mut buf, entries_at + s * ENTRY as u64)?;
        if crc32c::crc32c(&buf) != crc {
            return Err(KeyIndexError::Damaged("bucket checksum"));
        }
        for pair in buf.chunks_exact(ENTRY) {
            let mut p = Le::new(pair);
            if p.i64() == Some(key) {
                slots.extend(p.u32().map(u64::from));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(keys: &[i64]) -> KeyIndex {
        let dir = tempfile::tempdir().unwrap();
        let file = tempfile::tempfile_in(dir.path()).unwrap();
        let mut read = |first: u64, out: &mut [i64]| {
            out.copy_from_slice(&keys[first as usize..first as usize + out.len()]);
            Ok(())
        };
        KeyIndex::build(file, dir.path(), keys.len() as u64, &mut read).unwrap()
    }

    fn find(ix: &KeyIndex, k: i64) -> Vec<u64> {
        let mut v = Vec::new();
        ix.find(k, &mut v).unwrap();
        v.sort_unstable();
        v
    }

    /// A cache directory that cannot be made (a read-only home): the index is built in the
    /// temp directory and not kept; in memory when no directory takes a file.
    #[test]
    fn an_unwritable_cache_dir_falls_back_to_the_temp_dir_then_memory() {
        let keys: Vec<i64> = (0..5000).map(|i| i * 7 - 100).collect();
        let mut read = |first: u64, out: &mut [i64]| {
            out.copy_from_slice(&keys[first as usize..first as usize + out.len()]);
            Ok(())
        };
        // procfs takes no directory, even from root.
        let place = IndexPlace::new(Some(Path::new("/proc/1/.cache/modelfs")), Some("t"));
        assert_eq!(place.goes_to(), Some(std::env::temp_dir()));
        let ix = place.build(keys.len() as u64, &mut read).unwrap();
        assert_eq!(find(&ix, 7 * 123 - 100), [123]);
        assert!(!Path::new("/proc/1/.cache").exists());
        // In memory: the same index.
        let file = Scratch::Memory.file().unwrap();
        let b = KeyIndexBuilder::in_scratch(file, &Scratch::Memory, keys.len() as u64).unwrap();
        let ix = b
            .push_all(keys.len() as u64, &mut read)
            .unwrap()
            .finish()
            .unwrap();
        assert_eq!(find(&ix, 7 * 4999 - 100), [4999]);
    }

    #[test]
    fn every_key_is_found_at_its_slots_and_no_other_key_is() {
        // Several groups (GROUP_ENTRIES), repeated sentinels, negative and extreme keys.
        let n = (GROUP_ENTRIES * 5 / 2) as usize;
        let mut keys: Vec<i64> = (0..n as i64)
            .map(|i| i.wrapping_mul(0x1_0000_0001) - 77)
            .collect();
        for i in (0..n).step_by(1000) {
            keys[i] = 0; // an empty key repeated, as a DenseHashTable saves its buckets
        }
        keys[1] = i64::MIN;
        keys[2] = i64::MAX;
        let ix = build(&keys);
        for (i, &k) in keys.iter().enumerate().step_by(997) {
            if k != 0 {
                assert_eq!(find(&ix, k), [i as u64], "{k}");
            }
        }
        assert_eq!(find(&ix, i64::MIN), [1]);
        assert_eq!(find(&ix, i64::MAX), [2]);
        let zeros: Vec<u64> = (0..n as u64).step_by(1000).collect();
        assert_eq!(find(&ix, 0), zeros);
        assert!(find(&ix, -78).is_empty());
        assert!(find(&ix, 5).is_empty());
    }

    #[test]
    fn a_reopened_index_answers_and_a_damaged_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ix");
        let keys: Vec<i64> = (0..1000).map(|i| i * 3).collect();
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        let mut read = |first: u64, out: &mut [i64]| {
            out.copy_from_slice(&keys[first as usize..first as usize + out.len()]);
            Ok(())
        };
        KeyIndex::build(file, dir.path(), 1000, &mut read).unwrap();
        let ix = KeyIndex::open(File::open(&path).unwrap(), 1000).unwrap();
        assert_eq!(find(&ix, 300), [100]);
        assert!(KeyIndex::open(File::open(&path).unwrap(), 999).is_err());
        // A flipped entry byte: its bucket's checksum fails, nothing wrong is answered.
        let bytes = std::fs::read(&path).unwrap();
        for at in [3usize, 40, bytes.len() - 5] {
            let mut bad = bytes.clone();
            bad[at] ^= 0x10;
            std::fs::write(&path, &bad).unwrap();
            let broken = KeyIndex::open(File::open(&path).unwrap(), 1000)
                .and_then(|ix| (0..1000).try_for_each(|i| ix.find(i * 3, &mut Vec::new())));
            assert!(broken.is_err(), "byte {at}");
        }
        // A truncated file is refused at open.
        std::fs::write(&path, &bytes[..bytes.len() - 1]).unwrap();
        assert!(KeyIndex::open(File::open(&path).unwrap(), 1000).is_err());
    }

    #[test]
    fn no_keys_make_an_empty_index() {
        let ix = build(&[]);
        assert!(find(&ix, 0).is_empty());
    }
}
