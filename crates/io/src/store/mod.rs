//! Persistent stores that outlive a mount, below the readers and the layouts that use them:
//! typed records by key (`record.rs`: chunk offsets of rendered text files, checksum
//! verdicts of large tensors, the checksums of views, statistics, hash-table summaries).
//! Keys are identity strings that change whenever the bytes they describe could change
//! (`source::identity_string`), so an entry is never served for other bytes.

mod disk;
mod keys;
#[cfg(any(test, feature = "testkit"))]
pub use keys::BUILDS as KEY_INDEX_BUILDS;
mod order;
mod record;
pub use crate::source::lru;

pub use crate::source::fnv1a64;
pub use disk::DiskStore;
pub use keys::{
    IndexPlace, KeyIndex, KeyIndexBuilder, KeyIndexError, KeysError, Pending, ReadKeys,
};
pub use order::KeyOrder;
pub use record::{
    put_words, starts_at_zero_ascending, words, Crc, MemStore, Offsets, Record, Store, Verified,
};
