//! The tree of files (FUSE-independent core) and the FUSE adapter.
//!
//! - `names`: escaping of model path components into file names (SPEC §2).
//! - `listing`: what each directory contains (shared by the mount and `modelfs ls`).
//! - `tree`: inodes, attributes, reads, xattrs, path resolution; errors carry an errno.
//! - `fuse`: the fuser `Filesystem` on top of `tree`; `notices`: what it tells the kernel
//!   unasked (invalidations, pushes).

use std::sync::Arc;

use crate::options::Options;
use modelfs_layout::{cache::ChunkCache, LayoutCtx};

mod backing;
mod caller;
pub(crate) mod error;
pub mod fuse;
#[cfg(test)]
mod fuse_tests;
#[cfg(test)]
mod laziness_tests;
pub mod listing;
pub mod live;
#[cfg(test)]
mod live_tests;
pub(crate) mod names;
pub mod notices;
#[cfg(test)]
mod passthrough_tests;
pub(crate) mod push;
#[cfg(test)]
mod push_tests;
pub mod sizing;
#[cfg(any(test, feature = "testkit"))]
pub mod testing;
pub mod tree;
#[cfg(test)]
mod tree_tests;

pub use error::FsError;
pub use tree::{FileKind, Ino, Opening, Tree, TreeConfig, ROOT_INO};

/// The rendering context of a mount (or of `ls`/`cat`) built from its options: the chunk and
/// row caches get their shares of `cache=` (`Budget`), `cache_dir=` (unless `none`) keeps the
/// chunk indexes of `source` (as shown: an absolute path or a URL) across mounts.
pub fn layout_ctx(opts: &Options, source: &str) -> Arc<LayoutCtx> {
    let budget = opts.budget();
    let cache = ChunkCache::new(budget.chunks);
    if let Some(store) = opts.store(source) {
        cache.set_offset_store(store);
    }
    Arc::new(LayoutCtx {
        sep: opts.sep.clone(),
        max_dense: opts.max_dense,
        layouts: opts.layouts.clone(),
        sparse_default: !opts.layouts_chosen,
        cache: Arc::new(cache),
        rows: Arc::new(ChunkCache::new(budget.rows)),
        angel_format: opts.angel_format,
        faults: Default::default(),
    })
}
