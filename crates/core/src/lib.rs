//! modelfs's core, under both of its faces: the commands (`modelfs`, the root crate's `cli`)
//! and programs (`api`, which the Python package drives). Neither face reaches into the other;
//! both stand on these modules, each using only those before it (`layers_tests` checks it):
//!
//! - `options`: every `-o` option, once (`Options` and its table);
//! - `fs`: the tree of files a mount shows (FUSE-free: inodes, sizes, reads, xattrs) and the
//!   fuser adapter over it, following a source that changes;
//! - `open`: SOURCE opened as every command opens it (options, a path or a URL, the reader
//!   `modelfs_detect` picks, the tree), and `walk`: its tensors with their paths;
//! - `api`: the FUSE-free front door for programs.
//!
//! ```
//! let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/tf/multi_shard/ckpt");
//! let opts = modelfs_core::open::parse_options(&[]).unwrap();
//! let model = modelfs_core::open::open_model(fixture.as_ref(), &opts).unwrap();
//! let found = modelfs_core::walk::walk(&*model).unwrap();
//! assert!(found.iter().any(|f| f.path == "a"));
//! ```

#![deny(clippy::undocumented_unsafe_blocks)]

pub mod api;
pub mod fs;
pub mod open;
pub mod options;
pub mod walk;
