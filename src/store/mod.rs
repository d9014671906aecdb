//! Persistent stores that outlive a mount, below the readers and the layouts that use them:
//! chunk offsets of rendered text files (their exact sizes) and checksum verdicts of large
//! tensors. Keys are identity strings that change whenever the bytes they describe could
//! change (`source::identity_string`), so an entry is never served for other bytes.

mod disk;
mod keys;
pub use crate::source::lru;

pub use crate::source::fnv1a64;
pub use disk::DiskStore;
pub use keys::{
    IndexPlace, KeyIndex, KeyIndexBuilder, KeyIndexError, KeysError, Pending, ReadKeys,
};

/// Chunk offsets of text files, keyed by a stable identity.
pub trait OffsetStore: Send + Sync {
    fn load(&self, key: &str) -> Option<Vec<u64>>;
    fn save(&self, key: &str, offsets: &[u64]);
    /// Saves that failed so far (`modelfs index` fails when it could not save).
    fn failures(&self) -> u64 {
        0
    }
}

/// Tensors whose checksum held, keyed by the identity of the exact bytes checked.
pub trait VerdictStore: Send + Sync {
    fn is_verified(&self, identity: &str) -> bool;
    fn mark_verified(&self, identity: &str);
}

/// Chunk offsets as a text file's index needs them: starting at 0, never decreasing.
pub fn starts_at_zero_ascending(offsets: &[u64]) -> bool {
    offsets.first().is_none_or(|&o| o == 0) && offsets.windows(2).all(|w| w[0] <= w[1])
}

/// Arbitrary words as a list the offset store keeps (starting at 0, never decreasing): each
/// word becomes two 32-bit halves, stored as running sums. `unpack_words` reverses it.
pub fn pack_words(words: &[u64]) -> Vec<u64> {
    let mut out = Vec::with_capacity(1 + 2 * words.len());
    let mut sum = 0u64;
    out.push(sum);
    for w in words {
        for half in [w >> 32, w & 0xFFFF_FFFF] {
            // At most 2 × 2^32 per word: no overflow below 2^31 words.
            sum += half;
            out.push(sum);
        }
    }
    out
}

/// The words `pack_words` packed, or `None` when `list` is not such a list.
pub fn unpack_words(list: &[u64]) -> Option<Vec<u64>> {
    if list.first() != Some(&0) || list.len() % 2 == 0 {
        return None;
    }
    let halves: Option<Vec<u64>> = list
        .windows(2)
        .map(|w| w[1].checked_sub(w[0]).filter(|&d| d <= 0xFFFF_FFFF))
        .collect();
    Some(
        halves?
            .chunks_exact(2)
            .map(|h| (h[0] << 32) | h[1])
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_words_read_back_and_are_kept_by_the_store_rules() {
        let words = [0, u64::MAX, 1, 1 << 32, 12345678901234567];
        let packed = pack_words(&words);
        assert!(starts_at_zero_ascending(&packed));
        assert_eq!(unpack_words(&packed).unwrap(), words);
        assert_eq!(unpack_words(&[0, 5]), None);
        assert_eq!(unpack_words(&[1, 5, 6]), None);
        assert_eq!(unpack_words(&[0, 1 << 33, 1 << 33]), None);
    }
}
