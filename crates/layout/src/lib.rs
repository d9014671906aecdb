//! Layouts: one renderer per file format. Given a tensor, a layout knows whether it can
//! represent it, the exact size of the file, and the bytes of any byte range.
//!
//! Contract (used by `fs` and `cli`):
//! - `Layout` names a layout and its file suffix.
//! - `check(layout, meta, ctx)` says from metadata alone whether the layout can represent a
//!   tensor, and why not (`Unavailable`: strings in binary layouts, sparse beyond `max_dense`…).
//! - `content(layout, tensor, ctx)` builds the file's content object. Neither decodes tensor
//!   data nor renders text: that happens on the first `size` or `read_at`.
//! - What a file gives the file system is the contract of `content.rs` (`FileContent`,
//!   `Requester`, `LayoutError`); the whole-model views (`src/views/`) and statistics
//!   (`src/stats/`) build on it from above, and nothing here knows them.
//!
//! This is the crate `modelfs-layout`: it knows the model tree (`modelfs-model`) and bytes
//! (`modelfs-io`), and no reader — a layout renders any reader's tensors the same way (its
//! tests check the Angel encoders against the Angel reader's decoders, which share no code).
//!
//! ```
//! use std::sync::Arc;
//! use modelfs_layout::{cache::ChunkCache, content, Layout, LayoutCtx};
//! use modelfs_model::testing::MemTensor;
//! let ctx = Arc::new(LayoutCtx::new(vec![Layout::Txt, Layout::Csv], ChunkCache::new(64 << 20)));
//! let t = Arc::new(MemTensor::f32(&[2, 2], &[1.0, 0.5, -2.0, 3.25]));
//! let csv = content(Layout::Csv, t, &ctx).unwrap();
//! assert_eq!(csv.size().unwrap(), 18, "the exact size, before any byte is read");
//! let mut buf = [0u8; 18];
//! csv.read_at(0, &mut buf).unwrap();
//! assert_eq!(&buf, b"1.0,0.5\n-2.0,3.25\n");
//! ```

#![deny(clippy::undocumented_unsafe_blocks)]

// The layers below, under the names every module of modelfs uses (`crate::source::ReadAt`).
pub(crate) use modelfs_io::{codec, source, store};
pub(crate) use modelfs_model as model;
#[cfg(test)]
pub(crate) use modelfs_model::testing;
// The tests check the encoders against the readers' decoders (which share no code with them).
#[cfg(test)]
pub(crate) use {modelfs_angel as angel_reader, modelfs_tf as tf};

use std::sync::Arc;

pub use crate::codec::angel::AngelFormat;
use crate::model::{Tensor, TensorMeta};

pub use content::{
    FileContent, InconsistentRows, LayoutError, Patient, Reading, Requester, Unavailable,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Layout {
    Json,
    Txt,
    Csv,
    Bin,
    Npy,
    Libsvm,
    Angel(AngelFormat),
}

impl Layout {
    pub(crate) const GENERIC: [Layout; 6] = [
        Layout::Json,
        Layout::Txt,
        Layout::Csv,
        Layout::Bin,
        Layout::Npy,
        Layout::Libsvm,
    ];

    pub fn all() -> Vec<Layout> {
        let mut v = Layout::GENERIC.to_vec();
        v.extend(AngelFormat::ALL.iter().map(|&f| Layout::Angel(f)));
        v
    }

    /// The file suffix (without the dot), which is also the layout's name in `-o layouts=`.
    pub fn suffix(self) -> &'static str {
        match self {
            Layout::Json => "json",
            Layout::Txt => "txt",
            Layout::Csv => "csv",
            Layout::Bin => "bin",
            Layout::Npy => "npy",
            Layout::Libsvm => "libsvm",
            Layout::Angel(f) => f.name(),
        }
    }

    /// True for layouts whose size is learnt by rendering (text).
    pub fn is_text(self) -> bool {
        match self {
            Layout::Txt | Layout::Csv | Layout::Libsvm => true,
            Layout::Angel(f) => f.is_text(),
            Layout::Json | Layout::Bin | Layout::Npy => false,
        }
    }

    pub fn from_suffix(s: &str) -> Option<Layout> {
        Layout::all().into_iter().find(|l| l.suffix() == s)
    }

    /// Parses `-o layouts=a,b,c` (`all` for every layout). `json` is always included first
    /// because it is where a tensor's metadata and problems are reported.
    pub fn parse_list(s: &str) -> Result<Vec<Layout>, UnknownLayout> {
        let mut out = vec![Layout::Json];
        for name in s.split([',', '+', ':']).filter(|n| !n.is_empty()) {
            let group: Option<Vec<Layout>> = match name {
                "all" => Some(Layout::all()),
                "generic" => Some(Layout::GENERIC.to_vec()),
                "angel" => Some(AngelFormat::ALL.iter().map(|&f| Layout::Angel(f)).collect()),
                _ => None,
            };
            if let Some(group) = group {
                for l in group {
                    if !out.contains(&l) {
                        out.push(l);
                    }
                }
                continue;
            }
            let l = Layout::from_suffix(name).ok_or_else(|| UnknownLayout(name.to_string()))?;
            if !out.contains(&l) {
                out.push(l);
            }
        }
        Ok(out)
    }
}

/// A layout name that is none of ours; the message lists the valid ones.
#[derive(Debug, thiserror::Error)]
#[error("unknown layout '{0}' (layouts: {valid}; groups: generic, angel, all)", valid = layout_names())]
pub struct UnknownLayout(pub String);

fn layout_names() -> String {
    let names: Vec<&str> = Layout::all().iter().map(|l| l.suffix()).collect();
    names.join(", ")
}

/// Settings and shared caches for rendering.
pub struct LayoutCtx {
    pub sep: String,
    pub max_dense: u64,
    /// The layouts of this mount (the `.json` lists each available one with its size).
    pub layouts: Vec<Layout>,
    /// `layouts=` was not given: a sparse matrix then shows its stored entries (`json`,
    /// `libsvm`), not dense forms of mostly zeros (an LR's 2^31 columns: 8 GiB of `0.0`
    /// lines); `layouts=` names dense forms when they are wanted.
    pub sparse_default: bool,
    pub cache: Arc<cache::ChunkCache>,
    /// Rendered rows (`NAME.rows/`), apart from the chunks so that ids looked up for weeks
    /// take their small share of `cache=` and no more.
    pub rows: Arc<cache::ChunkCache>,
    /// `angel_format=`: the format of the `.angel/` view (else its default).
    pub angel_format: Option<AngelFormat>,
    /// Each tensor's last read error (its `.json`'s `last_error`).
    pub faults: faults::Faults,
}

impl LayoutCtx {
    /// A context rendering `layouts` through `cache`, with the defaults of a mount given no
    /// options: `,` between values, dense forms up to 2^30 elements, sparse tensors in every
    /// layout asked, a 1 MiB row cache, the `.angel/` view's default format.
    pub fn new(layouts: Vec<Layout>, cache: cache::ChunkCache) -> LayoutCtx {
        LayoutCtx {
            sep: ",".into(),
            max_dense: 1 << 30,
            layouts,
            sparse_default: false,
            cache: Arc::new(cache),
            rows: Arc::new(cache::ChunkCache::new(1 << 20)),
            angel_format: None,
            faults: Default::default(),
        }
    }
}

pub mod angel;
pub mod binary;
pub mod cache;
pub mod concat;
mod content;
pub mod dense;
mod document;
pub mod elements;
pub mod faults;
pub mod generic;
pub(crate) mod gentext;
pub mod held;
pub mod json;
pub mod lazy;
pub mod num;
pub mod pool;
pub mod rows;
pub mod text;

#[cfg(test)]
mod tests;

/// Whether `layout` can represent the tensor described by `meta` (metadata only).
pub(crate) fn check(layout: Layout, meta: &TensorMeta, ctx: &LayoutCtx) -> Result<(), Unavailable> {
    match layout {
        Layout::Json => Ok(()),
        Layout::Angel(format) => angel::check(format, meta, ctx),
        Layout::Txt => generic::check_txt(meta, ctx),
        Layout::Csv => generic::check_csv(meta, ctx),
        Layout::Bin => generic::check_bin(meta, ctx),
        Layout::Npy => generic::check_npy(meta, ctx),
        Layout::Libsvm => generic::check_libsvm(meta),
    }
}

/// The layouts the mount asks of a tensor described by `meta` (see `sparse_default`).
/// A table of (id, row) entries (`Role::IdRows`, a Monolith table) also has `libsvm` by
/// default: its rows labelled by feature id.
pub(crate) fn asked<'a>(meta: &TensorMeta, ctx: &'a LayoutCtx) -> std::borrow::Cow<'a, [Layout]> {
    const SPARSE: &[Layout] = &[Layout::Json, Layout::Libsvm];
    if meta.sparse && ctx.sparse_default {
        SPARSE.into()
    } else if meta.role == crate::model::Role::IdRows
        && ctx.sparse_default
        && !ctx.layouts.contains(&Layout::Libsvm)
    {
        let mut v = ctx.layouts.clone();
        v.push(Layout::Libsvm);
        v.into()
    } else {
        ctx.layouts[..].into()
    }
}

/// The layouts that show a tensor described by `meta`: the mount's layouts that can, and,
/// when none but `.json` can (a sparse model too big for any dense form), its sparse text
/// layout `libsvm` anyway, and for blocks no layout decodes (GGUF's `iq4_nl`) their stored
/// bytes `.bin`, so that every tensor's data can be seen (unless the mount asked for metadata
/// only: `layouts=json`).
pub fn shown(meta: &TensorMeta, ctx: &LayoutCtx) -> Vec<Layout> {
    let layouts = asked(meta, ctx);
    let mut out: Vec<Layout> = layouts
        .iter()
        .copied()
        .filter(|&l| check(l, meta, ctx).is_ok())
        .collect();
    let wants_data = layouts.iter().any(|&l| l != Layout::Json);
    if wants_data
        && out.iter().all(|&l| l == Layout::Json)
        && check(Layout::Libsvm, meta, ctx).is_ok()
    {
        out.push(Layout::Libsvm);
    }
    if wants_data && out.iter().all(|&l| l == Layout::Json) && meta.stored.is_some() {
        out.push(Layout::Bin);
    }
    out
}

/// The content of `layout` for `tensor` (after `check`). Decodes and renders nothing.
pub fn content(
    layout: Layout,
    tensor: Arc<dyn Tensor>,
    ctx: &Arc<LayoutCtx>,
) -> Result<Arc<dyn FileContent>, Unavailable> {
    check(layout, tensor.meta(), ctx)?;
    match layout {
        Layout::Json => Ok(json::json_content(tensor, ctx)),
        Layout::Angel(format) => angel::content(format, tensor, ctx),
        Layout::Txt => generic::txt(tensor, ctx),
        Layout::Csv => generic::csv(tensor, ctx),
        Layout::Bin => generic::bin(tensor, ctx),
        Layout::Npy => generic::npy(tensor, ctx),
        Layout::Libsvm => generic::libsvm(tensor, ctx),
    }
}

/// The content of a reader's document (`Model::document`). Renders nothing yet.
pub fn document(
    doc: Arc<dyn crate::model::Document>,
    ctx: &Arc<LayoutCtx>,
) -> Arc<dyn FileContent> {
    document::content(doc, ctx)
}
