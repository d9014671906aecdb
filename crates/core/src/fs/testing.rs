//! A rendering context for tests of the tree and the CLI.

use std::sync::Arc;

use modelfs_layout::{Layout, LayoutCtx};

/// A rendering context with the given layouts (default cache settings, no disk cache).
pub fn ctx(layouts: &[Layout]) -> Arc<LayoutCtx> {
    super::layout_ctx(
        &crate::options::Options {
            layouts: layouts.to_vec(),
            layouts_chosen: true,
            cache_dir: None,
            ..Default::default()
        },
        "",
    )
}
