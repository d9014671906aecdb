//! Layouts: one renderer per file format. Given a tensor, a layout knows whether it can
//! represent it, the exact size of the file, and the bytes of any byte range.
//!
//! Contract (used by `fs` and `cli`):
//! - `Layout` names a layout and its file suffix.
//! - `check(layout, meta, ctx)` says from metadata alone whether the layout can represent a
//!   tensor, and why not (`Unavailable`: strings in binary layouts, sparse beyond `max_dense`…).
//! - `content(layout, tensor, ctx)` builds the file's content object. Neither decodes tensor
//!   data nor renders text: that happens on the first `size` or `read_at`.
//! - `FileContent::known_size` never does work; `size` is exact (a text layout may render once
//!   to learn it); `read_at` serves any offset.

use std::sync::Arc;

use bytes::Bytes;

pub use crate::angel::AngelFormat;
use crate::model::{ModelError, Tensor, TensorMeta};

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
    pub(crate) fn is_text(self) -> bool {
        match self {
            Layout::Txt | Layout::Csv | Layout::Libsvm => true,
            Layout::Angel(f) => f.is_text(),
            Layout::Json | Layout::Bin | Layout::Npy => false,
        }
    }

    pub(crate) fn from_suffix(s: &str) -> Option<Layout> {
        Layout::all().into_iter().find(|l| l.suffix() == s)
    }

    /// Parses `-o layouts=a,b,c` (`all` for every layout). `json` is always included first
    /// because it is where a tensor's metadata and problems are reported.
    pub(crate) fn parse_list(s: &str) -> Result<Vec<Layout>, UnknownLayout> {
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
pub(crate) struct UnknownLayout(pub String);

fn layout_names() -> String {
    let names: Vec<&str> = Layout::all().iter().map(|l| l.suffix()).collect();
    names.join(", ")
}

#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    #[error(transparent)]
    Model(#[from] ModelError),
    /// Found only once the data were seen (a row id too wide, …).
    #[error(transparent)]
    Unavailable(#[from] Unavailable),
    #[error("{0} overflows")]
    Overflow(&'static str),
    /// A second pass over the data disagrees with the first (rendered length, string count).
    #[error("{what}: {got}, expected {want}")]
    Mismatch {
        what: &'static str,
        got: u64,
        want: u64,
    },
    #[error(transparent)]
    Inconsistent(#[from] InconsistentRows),
    #[error("{0} text chunks is more than any real tensor needs")]
    TooManyChunks(u64),
    #[error("a text rendering worker panicked")]
    WorkerPanicked,
    /// The requester went away (Ctrl-C, unmount): the work stopped unfinished.
    #[error("interrupted")]
    Interrupted,
    /// An invariant of modelfs itself does not hold (a bug, not bad data).
    #[error("internal error: {0}")]
    Internal(&'static str),
}

/// Sparse entries whose CSR arrays do not agree (a reader bug or bad data).
#[derive(Debug, thiserror::Error)]
#[error("inconsistent sparse rows")]
pub struct InconsistentRows;

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

/// Why a layout does not show a tensor (the `.json` gives the reason).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unavailable {
    #[error("{0} elements have no value to show")]
    Undecodable(String),
    #[error("strings have no numeric form")]
    Strings,
    #[error("numpy has no type for {0}")]
    NoNumpyType(String),
    #[error("dense form {} > max_dense {}", human_bytes(*bytes), human_bytes(*max))]
    DenseTooBig { bytes: u64, max: u64 },
    #[error("a sparse tensor of rank {0} has no dense form")]
    SparseRank(usize),
    #[error("the shape's element count or byte size overflows")]
    Overflow,
    #[error("{0} rows without columns")]
    BlankRows(u64),
    #[error("Angel has no value type for {0}")]
    NoAngelValue(String),
    #[error("value-only formats need a dense tensor")]
    ValueOnlySparse,
    #[error("a row id over 2^31 does not fit 4 bytes")]
    RowIdTooWide,
}

/// `24 GiB`, `16 MiB`, `512 B`: sizes in reasons people read.
fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut unit = 0;
    let mut v = n as f64;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 || v >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0} {}", UNITS[unit])
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// Who long work is done for: it stops (`LayoutError::Interrupted`) once `gone` says so.
pub trait Requester: Sync {
    /// True once the result is no longer wanted (the request was interrupted, unmount).
    fn gone(&self) -> bool;
    /// Background work (a size pass nobody waits for) renders on niced threads, stands aside
    /// while the file is being read, and keeps no rendered chunks in the cache.
    fn background(&self) -> bool {
        false
    }
    /// Told after each step of long work: `done` of `total` units.
    fn progress(&self, _done: u64, _total: u64) {}
}

/// A requester that always waits for the result.
pub struct Patient;

impl Requester for Patient {
    fn gone(&self) -> bool {
        false
    }
}

/// The bytes of one file.
pub trait FileContent: Send + Sync {
    /// The exact size if it is known without rendering or decoding anything (binary layouts:
    /// always; text: once rendered or found in a cache).
    fn known_size(&self) -> Option<u64>;
    /// Exact size in bytes (may render a text layout once to learn it).
    fn size(&self) -> Result<u64, LayoutError> {
        self.size_for(&Patient)
    }
    /// Copies `read` into `buf`; returns the bytes written (short only at end of file).
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize, LayoutError> {
        let got = self.read(offset, buf.len(), &Patient)?;
        buf[..got.len()].copy_from_slice(&got);
        Ok(got.len())
    }
    /// `size`, stopping when `req` is gone.
    fn size_for(&self, req: &dyn Requester) -> Result<u64, LayoutError>;
    /// Up to `len` bytes at `offset`, fewer only at the end of the file; stops once `req` is
    /// gone. Serves any offset whether or not the size is known yet (a text file learns only
    /// the part of its index the read needs). Bytes the content holds anyway (a rendered
    /// chunk, a fetched block) come back as a view of them; others are copied into a
    /// recycled buffer (`source::scratch`).
    fn read(&self, offset: u64, len: usize, req: &dyn Requester) -> Result<Bytes, LayoutError>;
    /// How far learning the size has gone: (done, total) in the content's own units.
    fn size_progress(&self) -> Option<(u64, u64)> {
        None
    }
    /// The bytes may change while mounted (a `.json` gaining a `last_error`): the file system
    /// caches neither their size nor their pages, and every stat and read asks again.
    fn volatile(&self) -> bool {
        false
    }
}

pub(crate) mod angel;
pub(crate) mod binary;
pub mod cache;
pub(crate) mod dense;
mod document;
pub(crate) mod elements;
pub mod faults;
pub(crate) mod generic;
pub(crate) mod gentext;
pub(crate) mod json;
mod lazy;
pub mod num;
pub(crate) mod pool;
pub(crate) mod rows;
pub(crate) mod stats;
pub(crate) mod text;
pub(crate) mod views;

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
/// A Monolith table also has `libsvm` by default: its rows labelled by feature id.
pub(crate) fn asked<'a>(meta: &TensorMeta, ctx: &'a LayoutCtx) -> std::borrow::Cow<'a, [Layout]> {
    const SPARSE: &[Layout] = &[Layout::Json, Layout::Libsvm];
    if meta.sparse && ctx.sparse_default {
        SPARSE.into()
    } else if meta.format == crate::model::SourceFormat::Monolith
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
/// layout `libsvm` anyway, so that every tensor's data can be seen (unless the mount asked
/// for metadata only: `layouts=json`).
pub(crate) fn shown(meta: &TensorMeta, ctx: &LayoutCtx) -> Vec<Layout> {
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

/// Files of a tensor there by name only, never listed (like the hidden views): a listing
/// stays what the model's own tools list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Hidden {
    /// `NAME.safetensors`: the tensor alone as a safetensors file.
    Safetensors,
    /// `NAME.stats.json`: its statistics, computed on first read.
    Stats,
}

impl Hidden {
    pub(crate) fn suffix(self) -> &'static str {
        match self {
            Hidden::Safetensors => views::safetensors::SUFFIX,
            Hidden::Stats => stats::SUFFIX,
        }
    }

    /// `NAME.<suffix>` as `(NAME, file)`.
    pub(crate) fn split(name: &str) -> Option<(&str, Hidden)> {
        [Hidden::Safetensors, Hidden::Stats]
            .into_iter()
            .find_map(|h| {
                let base = name.strip_suffix(h.suffix())?.strip_suffix('.')?;
                (!base.is_empty()).then_some((base, h))
            })
    }
}

/// The content of hidden file `h` of `tensor`, or why it has none (metadata only).
pub(crate) fn hidden(
    h: Hidden,
    tensor: Arc<dyn Tensor>,
    ctx: &Arc<LayoutCtx>,
) -> Result<Arc<dyn FileContent>, String> {
    match h {
        Hidden::Safetensors => views::safetensors::single(tensor, ctx),
        Hidden::Stats => stats::file(tensor, ctx.cache.offset_store().cloned()),
    }
}

/// The content of a reader's document (`Model::document`). Renders nothing yet.
pub(crate) fn document(
    doc: Arc<dyn crate::model::Document>,
    ctx: &Arc<LayoutCtx>,
) -> Arc<dyn FileContent> {
    document::content(doc, ctx)
}
