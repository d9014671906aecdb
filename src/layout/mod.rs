//! Layouts: one renderer per file format. Given a tensor, a layout knows whether it can
//! represent it, the exact size of the file, and the bytes of any byte range.
//!
//! Public contract (used by `fs` and `cli`):
//! - `Layout` names a layout and its file suffix.
//! - `open(layout, tensor, ctx)` gives the file content, or `None` when the layout cannot
//!   represent the tensor (strings in binary layouts, sparse beyond `max_dense`, …).
//! - `FileContent::size` is exact; `FileContent::read_at` serves any offset.

use std::sync::Arc;

use crate::model::{ModelError, Tensor};
use crate::options::OptionError;

/// Angel's eight file formats (SPEC §3, formats/angel.md §6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AngelFormat {
    ValueText,
    ColIdValueText,
    RowIdColIdValueText,
    TextColumn,
    ValueBinary,
    ColIdValueBinary,
    RowIdColIdValueBinary,
    BinaryColumn,
}

impl AngelFormat {
    pub const ALL: [AngelFormat; 8] = [
        AngelFormat::ValueText,
        AngelFormat::ColIdValueText,
        AngelFormat::RowIdColIdValueText,
        AngelFormat::TextColumn,
        AngelFormat::ValueBinary,
        AngelFormat::ColIdValueBinary,
        AngelFormat::RowIdColIdValueBinary,
        AngelFormat::BinaryColumn,
    ];

    /// Layout / file suffix name: the format's class name without `RowFormat`/`Format`.
    pub fn name(self) -> &'static str {
        match self {
            AngelFormat::ValueText => "ValueText",
            AngelFormat::ColIdValueText => "ColIdValueText",
            AngelFormat::RowIdColIdValueText => "RowIdColIdValueText",
            AngelFormat::TextColumn => "TextColumn",
            AngelFormat::ValueBinary => "ValueBinary",
            AngelFormat::ColIdValueBinary => "ColIdValueBinary",
            AngelFormat::RowIdColIdValueBinary => "RowIdColIdValueBinary",
            AngelFormat::BinaryColumn => "BinaryColumn",
        }
    }

    /// Angel's simple class name (`ColIdValueTextRowFormat`, `TextColumnFormat`, …).
    pub fn class_name(self) -> &'static str {
        match self {
            AngelFormat::ValueText => "ValueTextRowFormat",
            AngelFormat::ColIdValueText => "ColIdValueTextRowFormat",
            AngelFormat::RowIdColIdValueText => "RowIdColIdValueTextRowFormat",
            AngelFormat::TextColumn => "TextColumnFormat",
            AngelFormat::ValueBinary => "ValueBinaryRowFormat",
            AngelFormat::ColIdValueBinary => "ColIdValueBinaryRowFormat",
            AngelFormat::RowIdColIdValueBinary => "RowIdColIdValueBinaryRowFormat",
            AngelFormat::BinaryColumn => "BinaryColumnFormat",
        }
    }

    pub fn from_class_name(simple: &str) -> Option<Self> {
        AngelFormat::ALL
            .into_iter()
            .find(|f| f.class_name() == simple)
    }

    pub fn is_text(self) -> bool {
        matches!(
            self,
            AngelFormat::ValueText
                | AngelFormat::ColIdValueText
                | AngelFormat::RowIdColIdValueText
                | AngelFormat::TextColumn
        )
    }
}

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
    pub const GENERIC: [Layout; 6] = [
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

    pub fn from_suffix(s: &str) -> Option<Layout> {
        Layout::all().into_iter().find(|l| l.suffix() == s)
    }

    /// Parses `-o layouts=a,b,c` (`all` for every layout). `json` is always included first
    /// because it is where a tensor's metadata and problems are reported.
    pub fn parse_list(s: &str) -> Result<Vec<Layout>, OptionError> {
        let mut out = vec![Layout::Json];
        for name in s.split([',', '+', ':']).filter(|n| !n.is_empty()) {
            if name == "all" {
                out = Layout::all();
                continue;
            }
            let l = Layout::from_suffix(name)
                .ok_or_else(|| OptionError(format!("unknown layout '{name}'")))?;
            if !out.contains(&l) {
                out.push(l);
            }
        }
        Ok(out)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error("{0}")]
    Other(String),
}

/// Settings and shared caches for rendering.
pub struct LayoutCtx {
    pub sep: String,
    pub max_dense: u64,
    /// The layouts of this mount (the `.json` lists each available one with its size).
    pub layouts: Vec<Layout>,
    pub cache: Arc<cache::ChunkCache>,
}

/// The bytes of one file.
pub trait FileContent: Send + Sync {
    /// Exact size in bytes (may render a text layout once to learn it).
    fn size(&self) -> Result<u64, LayoutError>;
    /// Fills `buf` from `offset`; returns the bytes written (short only at end of file).
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize, LayoutError>;
}

pub mod angel;
pub mod binary;
pub mod cache;
pub mod dense;
pub mod disk_index;
pub mod elements;
pub mod generic;
pub mod gentext;
pub mod json;
pub mod num;
#[doc(hidden)]
pub mod testing;
pub mod text;

#[cfg(test)]
mod tests;

/// The content of `layout` for `tensor`, or `None` if the layout cannot represent it.
pub fn open(
    layout: Layout,
    tensor: Arc<dyn Tensor>,
    ctx: &Arc<LayoutCtx>,
) -> Option<Arc<dyn FileContent>> {
    match layout {
        Layout::Angel(format) => angel::open(format, tensor, ctx),
        Layout::Json => Some(json::open_json(tensor, ctx)),
        Layout::Txt => generic::open_txt(tensor, ctx),
        Layout::Csv => generic::open_csv(tensor, ctx),
        Layout::Bin => generic::open_bin(tensor, ctx),
        Layout::Npy => generic::open_npy(tensor, ctx),
        Layout::Libsvm => generic::open_libsvm(tensor, ctx),
    }
}
