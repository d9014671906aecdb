//! modelfs's bytes, the bottom layer every format reader stands on:
//!
//! - [`source`]: bytes at offsets behind one trait, [`source::ReadAt`], whatever holds them — a
//!   mapped local file, an S3 or HTTP object read through a block cache with read-ahead,
//!   retries and ETag checks — and [`source::Storage`], which opens and lists them. Nothing
//!   above this crate knows where bytes come from.
//! - [`codec`]: the encodings under more than one format: varints and protobuf wire reading,
//!   the LevelDB table (TF's checkpoint index, its reader and writer in one home), zip.
//! - [`store`]: what a mount keeps between runs (text indexes, key indexes, verdicts), keyed by
//!   the exact version of the file it was learned from.
//!
//! Layers inside, bottom up: `source` → `codec` → `store` (`layers_tests` in the `modelfs`
//! crate checks it).
//!
//! ```
//! use modelfs_io::source::{MemSource, ReadCtx, ReadExt};
//! let file = MemSource::new("weights", vec![1u8, 2, 3, 4]);
//! assert_eq!(file.read_vec(1, 2).unwrap(), [2, 3]);
//! assert!(file.read_vec(3, 2).is_err(), "a read past the end is an error, never short");
//! // The one read verb lends where it can: the sum is taken of the source's own bytes.
//! let sum = file.with_bytes(ReadCtx::none(), 0, 4, |b| b.iter().sum::<u8>());
//! assert_eq!(sum.unwrap(), 10);
//! ```

#![deny(clippy::undocumented_unsafe_blocks)]

pub mod codec;
pub mod source;
pub mod store;
