//! A rendering context for tests of the tree and the CLI.

use std::sync::Arc;

use crate::layout::{Layout, LayoutCtx};

/// A rendering context with the given layouts (default cache settings, no disk cache).
pub(crate) fn ctx(layouts: &[Layout]) -> Arc<LayoutCtx> {
    let mut opts = crate::options::Options::default();
    opts.layouts = layouts.to_vec();
    opts.cache_dir = None;
    super::layout_ctx(&opts)
}
