//! Encoders for Angel's eight formats as layouts (SPEC §3 "Angel layouts",
//! formats/angel.md §6–§8), for every tensor of every source.
//!
//! - `records`: what the records are (row records, column items), read by range through
//!   `layout::elements` (dense) or straight from `SparseRows` (sparse).
//! - `value`: Angel's value types; text numbers come from `layout::num`'s Java writers.
//! - Text formats are `layout::text::ChunkedText` over `text::AngelText`; binary formats are
//!   arithmetic (`binary::AngelBinary`: exact size from metadata, any range without rendering
//!   the rest).
//! - Availability (`check` says why not): dtypes without an Angel value type (complex,
//!   string, float8, opaque); Value formats for sparse tensors; `RowIdColIdValueBinary` when
//!   a row id does not fit its 4 bytes; column formats of a sparse tensor whose dense form
//!   (`rows × cols × width`) exceeds `max_dense`.
//! - Column ids are 4 bytes unless the column count exceeds 2^31−1 (then 8).
//! - Sparse tensors decode their entries on first access, not at `open`.
//! - The decoders of the Angel reader share no code with this module; the round-trip tests
//!   decode these bytes with them.

mod binary;
mod records;
mod text;
mod value;

use std::sync::Arc;

use super::dense::check_dense;
use super::lazy::Lazy;
use super::text::ChunkedText;
use super::{AngelFormat, FileContent, LayoutCtx, LayoutError, Unavailable};
use crate::model::{DType, SparseRows, Tensor, TensorMeta};
use binary::AngelBinary;
use records::Records;
use text::AngelText;
pub use value::AngelValue;

/// The matrix an Angel file shows: a sparse tensor's own rows × cols, else SPEC §3's 2-D view.
pub fn rows_cols(meta: &TensorMeta) -> Result<(u64, u64), Unavailable> {
    match (meta.sparse, &meta.shape[..]) {
        (true, &[r, c]) => Ok((r, c)),
        (true, s) => Err(Unavailable::SparseRank(s.len())),
        _ => meta.rows_cols().ok_or(Unavailable::Overflow),
    }
}

/// Whether Angel format `format` can represent the tensor (metadata only).
pub fn check(format: AngelFormat, meta: &TensorMeta, ctx: &LayoutCtx) -> Result<(), Unavailable> {
    let no_value = || Unavailable::NoAngelValue(meta.dtype.name().into());
    AngelValue::of(meta.dtype).ok_or_else(no_value)?;
    meta.dtype.elem_size().ok_or_else(no_value)?;
    let (rows, cols) = rows_cols(meta)?;
    if meta.sparse && format.is_value_only() {
        return Err(Unavailable::ValueOnlySparse);
    }
    if format == AngelFormat::RowIdColIdValueBinary && rows > i32::MAX as u64 + 1 {
        return Err(Unavailable::RowIdTooWide);
    }
    // Column formats write every saved row in full: shown when the dense view would be (an
    // Angel sparse dtype is f32/f64/i32/i64, whose element size is the Angel value width).
    if meta.sparse && format.is_column() {
        check_dense(meta, ctx.max_dense)?;
    }
    if !meta.sparse {
        rows.checked_mul(cols).ok_or(Unavailable::Overflow)?;
    }
    Ok(())
}

/// The content of Angel format `format` for a tensor that passed `check`. A sparse tensor's
/// entries are decoded on the first access, not here.
pub(crate) fn content(
    format: AngelFormat,
    tensor: Arc<dyn Tensor>,
    ctx: &Arc<LayoutCtx>,
) -> Result<Arc<dyn FileContent>, Unavailable> {
    let meta = tensor.meta();
    let value = AngelValue::of(meta.dtype)
        .ok_or_else(|| Unavailable::NoAngelValue(meta.dtype.name().into()))?;
    let (_, cols) = rows_cols(meta)?;
    let sparse = meta.sparse;
    let file = AngelFile {
        format,
        key_width: if cols > i32::MAX as u64 { 8 } else { 4 },
        sep: ctx.sep.clone(),
        ctx: ctx.clone(),
        value,
        cols,
        tensor,
    };
    if sparse {
        // Row formats read entries by range: built now when the shape is metadata (so a stored
        // text index is found without decoding), else on first use.
        if !format.is_column() && file.tensor.sparse_shape_is_cheap() {
            if let Ok(c) = file.sparse_content() {
                return Ok(c);
            }
        }
        return Ok(Lazy::content(move || file.sparse_content()));
    }
    file.content(Records::dense(file.tensor.clone(), value, cols))
        .map_err(|_| Unavailable::Overflow)
}

/// The records of one partition of an `.angel/` view.
pub enum Part {
    /// A dense window (`cols` wide) whose first element is at (`row_base`, `col_base`).
    Dense {
        window: Arc<dyn Tensor>,
        cols: u64,
        row_base: u64,
        col_base: i64,
    },
    /// The entries of the partition's rows and columns, with global ids.
    Sparse {
        rows: Arc<SparseRows>,
        dtype: DType,
        cols: u64,
    },
}

/// One partition's bytes in `format` (which the caller checked fits the tensor). `tensor`
/// and `tag` key its text index in the chunk cache: `tag` must name the partition.
pub fn part_content(
    format: AngelFormat,
    part: Part,
    tensor: Arc<dyn Tensor>,
    tag: &str,
    key_width: usize,
    ctx: &Arc<LayoutCtx>,
) -> Result<Arc<dyn FileContent>, LayoutError> {
    let value = AngelValue::of(tensor.meta().dtype)
        .ok_or_else(|| Unavailable::NoAngelValue(tensor.meta().dtype.name().into()))?;
    let records = match part {
        Part::Dense {
            window,
            cols,
            row_base,
            col_base,
        } => Records::dense_at(window, value, cols, row_base, col_base),
        Part::Sparse { rows, dtype, cols } => {
            Records::sparse(rows, dtype, value, cols, format.is_column())?
        }
    };
    if !format.is_text() {
        let b = AngelBinary::new(format, records, key_width).ok_or_else(too_big)?;
        return Ok(Arc::new(b));
    }
    let source = AngelText::new(format, records, &ctx.sep).ok_or_else(too_big)?;
    let tag = format!("angel-view:{}:sep={}:{tag}:v2", format.name(), ctx.sep);
    Ok(Arc::new(ChunkedText::new(
        Arc::new(source),
        tensor,
        &tag,
        ctx.cache.clone(),
    )))
}

/// What is needed to build one Angel file's content.
struct AngelFile {
    format: AngelFormat,
    key_width: usize,
    sep: String,
    ctx: Arc<LayoutCtx>,
    value: AngelValue,
    cols: u64,
    tensor: Arc<dyn Tensor>,
}

fn too_big() -> LayoutError {
    LayoutError::Overflow("file size")
}

impl AngelFile {
    fn content(&self, records: Records) -> Result<Arc<dyn FileContent>, LayoutError> {
        if !self.format.is_text() {
            let b = AngelBinary::new(self.format, records, self.key_width).ok_or_else(too_big)?;
            return Ok(Arc::new(b));
        }
        let source = AngelText::new(self.format, records, &self.sep).ok_or_else(too_big)?;
        // The tag names everything the bytes depend on besides the tensor.
        let tag = format!("angel:{}:sep={}:v2", self.format.name(), self.sep);
        Ok(Arc::new(ChunkedText::new(
            Arc::new(source),
            self.tensor.clone(),
            &tag,
            self.ctx.cache.clone(),
        )))
    }

    /// A sparse tensor's content: row formats read entries by range; column formats need
    /// every column of every saved row, so their entries are decoded whole.
    fn sparse_content(&self) -> Result<Arc<dyn FileContent>, LayoutError> {
        let records = if self.format.is_column() {
            let rows = self.tensor.sparse()?;
            let dtype = self.tensor.meta().dtype;
            Records::sparse(rows, dtype, self.value, self.cols, true)?
        } else {
            Records::stream(self.tensor.clone(), self.value, self.cols)?
        };
        if self.format == AngelFormat::RowIdColIdValueBinary
            && records
                .stored_rows()
                .is_some_and(|r| r.iter().any(|&r| r > i32::MAX as u64))
        {
            return Err(Unavailable::RowIdTooWide.into());
        }
        self.content(records)
    }
}

#[cfg(test)]
mod tests;
