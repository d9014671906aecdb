//! Block contents (§3.3): prefix-compressed entries followed by a restart array.
//!
//! `Block::decode` validates the whole block once (every entry, every restart offset, keys
//! strictly increasing, the last entry ending exactly at the restart array), so iterating a
//! decoded block cannot meet corruption; the iterator still uses checked accessors.

use std::cmp::Ordering;
use std::ops::Range;
use std::sync::Arc;

use crate::codec::{decode_varint32, fixed32_at};

/// A decoded, validated block.
#[derive(Debug)]
pub(crate) struct Block {
    data: Box<[u8]>,
    /// End of the entry area = start of the restart array.
    entries_end: usize,
    num_restarts: usize,
    /// Number of entries, the first and the last key (empty block: 0, empty, empty).
    pub(crate) len: usize,
    pub(crate) first_key: Vec<u8>,
    pub(crate) last_key: Vec<u8>,
}

/// One decoded entry header at some offset.
struct EntryHeader {
    shared: usize,
    unshared: usize,
    value_len: usize,
    /// Offset of the key delta (just after the three varints).
    delta_at: usize,
}

impl EntryHeader {
    /// Parses the header of the entry at `at`; `None` if it runs past `limit`.
    fn parse(data: &[u8], at: usize, limit: usize) -> Option<EntryHeader> {
        let area = data.get(..limit)?;
        let mut pos = at;
        let mut next = || -> Option<usize> {
            let (v, n) = decode_varint32(area.get(pos..)?)?;
            pos += n;
            Some(v as usize)
        };
        let shared = next()?;
        let unshared = next()?;
        let value_len = next()?;
        let h = EntryHeader {
            shared,
            unshared,
            value_len,
            delta_at: pos,
        };
        (h.end()? <= limit).then_some(h)
    }

    fn value_at(&self) -> usize {
        self.delta_at + self.unshared
    }

    fn end(&self) -> Option<usize> {
        self.delta_at
            .checked_add(self.unshared)?
            .checked_add(self.value_len)
    }
}

/// Why bytes are not valid block contents.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BlockError {
    #[error("bad block contents (shorter than 4 bytes)")]
    Short,
    #[error("bad block: {0} restarts do not fit in {1} bytes")]
    TooManyRestarts(usize, usize),
    #[error("bad block: entries but no restart points")]
    NoRestarts,
    #[error("bad block: restart offset outside the entry area")]
    RestartOutside,
    #[error("bad block: restart offset {0} is not an entry boundary")]
    RestartInsideEntry(usize),
    #[error("bad block: first restart is not at offset 0")]
    FirstRestart,
    #[error("bad block: restart entry at {0} shares a prefix")]
    RestartShares(usize),
    #[error("bad entry in block at offset {0}")]
    Entry(usize),
    #[error("bad entry in block at offset {0}: shared prefix too long")]
    SharedTooLong(usize),
    #[error("keys not strictly increasing in block at offset {0}")]
    KeyOrder(usize),
    #[error("bad block: last entry does not end at the restart array")]
    Tail,
}

impl Block {
    /// Validates `data` as block contents.
    pub(crate) fn decode(data: Box<[u8]>) -> Result<Block, BlockError> {
        let size = data.len();
        if size < 4 {
            return Err(BlockError::Short);
        }
        let num_restarts = fixed32_at(&data, size - 4).unwrap_or(0) as usize;
        if num_restarts > (size - 4) / 4 {
            return Err(BlockError::TooManyRestarts(num_restarts, size));
        }
        let entries_end = size - 4 - 4 * num_restarts;
        let mut block = Block {
            data,
            entries_end,
            num_restarts,
            len: 0,
            first_key: Vec::new(),
            last_key: Vec::new(),
        };
        if num_restarts == 0 {
            // TF treats it as empty; entries without a restart array are not readable.
            if entries_end != 0 {
                return Err(BlockError::NoRestarts);
            }
            return Ok(block);
        }
        block.validate()?;
        Ok(block)
    }

    fn restart(&self, i: usize) -> usize {
        fixed32_at(&self.data, self.entries_end + 4 * i).unwrap_or(0) as usize
    }

    /// Sequential decode of the whole entry area; checks restarts and key order.
    fn validate(&mut self) -> Result<(), BlockError> {
        if self.entries_end == 0 {
            // No entries: the only sensible restart array is offsets all 0 (TF writes [0]).
            if (0..self.num_restarts).any(|i| self.restart(i) != 0) {
                return Err(BlockError::RestartOutside);
            }
            return Ok(());
        }
        let mut next_restart = 0usize;
        let mut key: Vec<u8> = Vec::new();
        let mut at = 0usize;
        let mut count = 0usize;
        while at < self.entries_end {
            let h = EntryHeader::parse(&self.data, at, self.entries_end)
                .ok_or(BlockError::Entry(at))?;
            let is_restart = next_restart < self.num_restarts && self.restart(next_restart) == at;
            if next_restart < self.num_restarts && self.restart(next_restart) < at {
                return Err(BlockError::RestartInsideEntry(self.restart(next_restart)));
            }
            if is_restart {
                next_restart += 1;
                if h.shared != 0 {
                    return Err(BlockError::RestartShares(at));
                }
            }
            if h.shared > key.len() {
                return Err(BlockError::SharedTooLong(at));
            }
            let delta = &self.data[h.delta_at..h.value_at()];
            // The new key shares `key[..shared]`, so it is greater iff its delta is greater
            // than the rest of the previous key.
            if count > 0 && delta <= &key[h.shared..] {
                return Err(BlockError::KeyOrder(at));
            }
            key.truncate(h.shared);
            key.extend_from_slice(delta);
            if count == 0 {
                self.first_key = key.clone();
            }
            count += 1;
            at = h.end().unwrap_or(usize::MAX);
        }
        if at != self.entries_end {
            return Err(BlockError::Tail);
        }
        if next_restart != self.num_restarts {
            return Err(BlockError::RestartOutside);
        }
        if self.restart(0) != 0 {
            return Err(BlockError::FirstRestart);
        }
        self.len = count;
        self.last_key = key;
        Ok(())
    }

    /// Bytes this block costs in the cache.
    pub(crate) fn charge(&self) -> u64 {
        (self.data.len() + self.first_key.len() + self.last_key.len() + 64) as u64
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Full key stored at restart point `i` (restart entries share nothing).
    fn restart_key(&self, i: usize) -> &[u8] {
        let at = self.restart(i);
        match EntryHeader::parse(&self.data, at, self.entries_end) {
            Some(h) => &self.data[h.delta_at..h.value_at()],
            None => &[],
        }
    }
}

/// Iterator over a block's entries in key order.
pub(crate) struct BlockIter {
    block: Arc<Block>,
    /// Offset of the next entry to decode.
    next_at: usize,
    key: Vec<u8>,
    value: Range<usize>,
    valid: bool,
}

impl BlockIter {
    /// Positioned before the first entry.
    pub(crate) fn new(block: Arc<Block>) -> Self {
        BlockIter {
            block,
            next_at: 0,
            key: Vec::new(),
            value: 0..0,
            valid: false,
        }
    }

    /// Decodes the next entry; false at the end.
    pub(crate) fn advance(&mut self) -> bool {
        let block = &*self.block;
        if self.next_at >= block.entries_end {
            self.valid = false;
            return false;
        }
        let Some(h) = EntryHeader::parse(&block.data, self.next_at, block.entries_end) else {
            self.valid = false;
            return false;
        };
        let shared = h.shared.min(self.key.len());
        self.key.truncate(shared);
        self.key
            .extend_from_slice(&block.data[h.delta_at..h.value_at()]);
        self.value = h.value_at()..h.end().unwrap_or(h.value_at());
        self.next_at = self.value.end;
        self.valid = true;
        true
    }

    /// Positions at the first entry with key ≥ `target`; false if there is none.
    pub(crate) fn seek(&mut self, target: &[u8]) -> bool {
        let block = Arc::clone(&self.block);
        if block.num_restarts == 0 || block.is_empty() {
            self.valid = false;
            return false;
        }
        // Last restart whose key is < target (binary search; restart 0 if none).
        let (mut lo, mut hi) = (0usize, block.num_restarts);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if block.restart_key(mid).cmp(target) == Ordering::Less {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        self.next_at = block.restart(lo);
        self.key.clear();
        while self.advance() {
            if self.key.as_slice() >= target {
                return true;
            }
        }
        false
    }

    pub(crate) fn valid(&self) -> bool {
        self.valid
    }

    pub(crate) fn key(&self) -> &[u8] {
        &self.key
    }

    pub(crate) fn value(&self) -> &[u8] {
        self.block.data.get(self.value.clone()).unwrap_or(&[])
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) use crate::codec::table::build_block;

    fn keys(n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        (0..n)
            .map(|i| {
                (
                    format!("key{i:04}").into_bytes(),
                    format!("v{i}").into_bytes(),
                )
            })
            .collect()
    }

    #[test]
    fn iterate_and_seek() {
        let kv = keys(100);
        let refs: Vec<(&[u8], &[u8])> = kv.iter().map(|(k, v)| (&k[..], &v[..])).collect();
        let block = Arc::new(Block::decode(build_block(&refs, 16).into()).unwrap());
        assert_eq!(block.len, 100);
        assert_eq!(block.first_key, b"key0000");
        assert_eq!(block.last_key, b"key0099");
        let mut it = BlockIter::new(block.clone());
        let mut n = 0;
        while it.advance() {
            assert_eq!(it.key(), &kv[n].0[..]);
            assert_eq!(it.value(), &kv[n].1[..]);
            n += 1;
        }
        assert_eq!(n, 100);
        for target in [&b"key0050"[..], b"key00505", b"a", b"key0017"] {
            let mut it = BlockIter::new(block.clone());
            assert!(it.seek(target));
            let want = kv.iter().find(|(k, _)| k.as_slice() >= target).unwrap();
            assert_eq!(it.key(), &want.0[..]);
        }
        let mut it = BlockIter::new(block);
        assert!(!it.seek(b"z"));
    }

    #[test]
    fn rejects_corruption() {
        assert!(Block::decode(vec![0u8; 3].into()).is_err());
        // num_restarts too large.
        assert!(Block::decode(vec![0, 0, 0, 0, 5, 0, 0, 0].into()).is_err());
        // Empty (num_restarts 0) is fine; the empty metaindex too.
        assert!(Block::decode(vec![0, 0, 0, 0].into()).unwrap().is_empty());
        assert!(Block::decode(vec![0, 0, 0, 0, 1, 0, 0, 0].into())
            .unwrap()
            .is_empty());
        let good = build_block(&[(b"a", b"1"), (b"b", b"2")], 16);
        assert!(Block::decode(good.clone().into()).is_ok());
        // Restart offset pointing into the middle of an entry.
        let mut bad = good.clone();
        let n = bad.len();
        bad[n - 8] = 1;
        assert!(Block::decode(bad.into()).is_err());
        // Shared > previous key length.
        let mut bad = good.clone();
        bad[5] = 5; // second entry's shared
        assert!(Block::decode(bad.into()).is_err());
        // Value running past the entry area.
        let mut bad = good.clone();
        bad[2] = 40;
        assert!(Block::decode(bad.into()).is_err());
        // Keys out of order / duplicated.
        assert!(Block::decode(build_block(&[(b"b", b""), (b"a", b"")], 16).into()).is_err());
        assert!(Block::decode(build_block(&[(b"a", b""), (b"a", b"")], 16).into()).is_err());
        // Trailing garbage before the restarts: the last entry does not end at the area end.
        let mut bad = build_block(&[(b"a", b"1")], 16);
        bad.splice(5..5, [0x80u8]);
        assert!(Block::decode(bad.into()).is_err());
    }
}
