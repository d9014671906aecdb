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
