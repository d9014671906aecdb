//! What a store keeps: records of a type, each with an encoding of its own whose version is
//! part of its kind (`Record::KIND`), stored by key. A record read back is decoded and
//! checked by its type (`decode` gives `None` for anything it would not have written), so a
//! record of another kind or version, or rotten bytes, are never used.

use std::collections::HashMap;
use std::sync::Mutex;

/// A value kept under a key.
pub trait Record: Sized {
    /// The record's kind and the version of its encoding (`"offsets/1"`): bump the version
    /// when the encoding changes, and records written before are not read.
    const KIND: &'static str;
    fn encode(&self, out: &mut Vec<u8>);
    /// The record `encode` wrote, or `None` when `bytes` are not one.
    fn decode(bytes: &[u8]) -> Option<Self>;
}

/// Records by kind and key, kept for as long as the store lives (a disk store: across mounts).
pub trait Store: Send + Sync {
    /// The body of the record of `kind` under `key`.
    fn get_bytes(&self, kind: &str, key: &str) -> Option<Vec<u8>>;
    fn put_bytes(&self, kind: &str, key: &str, body: &[u8]);
    /// Saves that failed so far (`modelfs index` fails when it could not save).
    fn failures(&self) -> u64 {
        0
    }
}

impl dyn Store + '_ {
    /// The record of type `R` under `key`, when one is kept and decodes.
    pub fn get<R: Record>(&self, key: &str) -> Option<R> {
        R::decode(&self.get_bytes(R::KIND, key)?)
    }

    /// Keeps `record` under `key` (the last one put wins).
    pub fn put<R: Record>(&self, key: &str, record: &R) {
        let mut body = Vec::new();
        record.encode(&mut body);
        debug_assert!(
            R::decode(&body).is_some(),
            "{}: a record that does not decode",
            R::KIND
        );
        self.put_bytes(R::KIND, key, &body);
    }
}

/// Little-endian u64 words, the encoding most records are made of.
pub fn put_words(out: &mut Vec<u8>, words: &[u64]) {
    out.reserve(words.len() * 8);
    for w in words {
        out.extend_from_slice(&w.to_le_bytes());
    }
}

/// The words `put_words` wrote, `None` when `bytes` are not whole words.
pub fn words(bytes: &[u8]) -> Option<Vec<u64>> {
    (bytes.len() % 8 == 0).then(|| {
        bytes
            .chunks_exact(8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
            .collect()
    })
}

/// Offsets that start at 0 and never decrease: a text file's chunk starts, an Angel
/// partition's line strides.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Offsets(pub Vec<u64>);

impl Record for Offsets {
    const KIND: &'static str = "offsets/1";
    fn encode(&self, out: &mut Vec<u8>) {
        put_words(out, &self.0);
    }
    fn decode(bytes: &[u8]) -> Option<Self> {
        let o = words(bytes)?;
        starts_at_zero_ascending(&o).then_some(Offsets(o))
    }
}

/// Chunk offsets as a text file's index needs them: starting at 0, never decreasing.
pub fn starts_at_zero_ascending(offsets: &[u64]) -> bool {
    offsets.first().is_none_or(|&o| o == 0) && offsets.windows(2).all(|w| w[0] <= w[1])
}

/// A CRC32C (masked or not: the key says which) of bytes that take a pass to checksum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Crc(pub u32);

impl Record for Crc {
    const KIND: &'static str = "crc32c/1";
    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.0.to_le_bytes());
    }
    fn decode(bytes: &[u8]) -> Option<Self> {
        Some(Crc(u32::from_le_bytes(bytes.try_into().ok()?)))
    }
}

/// The checksum of the exact bytes the key names held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verified;

impl Record for Verified {
    const KIND: &'static str = "verified/1";
    fn encode(&self, _out: &mut Vec<u8>) {}
    fn decode(bytes: &[u8]) -> Option<Self> {
        bytes.is_empty().then_some(Verified)
    }
}

/// A store in memory: tests, and the doubles of a store that failed to open.
#[derive(Default)]
pub struct MemStore {
    records: Mutex<HashMap<(String, String), Vec<u8>>>,
}

impl Store for MemStore {
    fn get_bytes(&self, kind: &str, key: &str) -> Option<Vec<u8>> {
        let r = self.records.lock().unwrap_or_else(|e| e.into_inner());
        r.get(&(kind.to_owned(), key.to_owned())).cloned()
    }
    fn put_bytes(&self, kind: &str, key: &str, body: &[u8]) {
        let mut r = self.records.lock().unwrap_or_else(|e| e.into_inner());
        r.insert((kind.to_owned(), key.to_owned()), body.to_vec());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_read_back_by_type_and_never_as_another() {
        let store: &dyn Store = &MemStore::default();
        store.put("a", &Offsets(vec![0, 5, 5, 9]));
        store.put("a", &Crc(0xdead_beef));
        store.put("a", &Verified);
        assert_eq!(store.get::<Offsets>("a"), Some(Offsets(vec![0, 5, 5, 9])));
        assert_eq!(store.get::<Crc>("a"), Some(Crc(0xdead_beef)));
        assert_eq!(store.get::<Verified>("a"), Some(Verified));
        assert_eq!(store.get::<Crc>("b"), None);
        // Bytes a type would not have written are not that type.
        store.put_bytes(Offsets::KIND, "b", &[1, 2, 3]);
        assert_eq!(store.get::<Offsets>("b"), None);
        let mut down = Vec::new();
        put_words(&mut down, &[0, 7, 3]);
        store.put_bytes(Offsets::KIND, "c", &down);
        assert_eq!(store.get::<Offsets>("c"), None);
        store.put_bytes(Crc::KIND, "d", &[1, 2, 3, 4, 5]);
        assert_eq!(store.get::<Crc>("d"), None);
        store.put_bytes(Verified::KIND, "e", &[0]);
        assert_eq!(store.get::<Verified>("e"), None);
    }
}
