//! Encoders for Angel's eight formats as layouts (SPEC §3 "Angel layouts",
//! formats/angel.md §6–§8), for every tensor of every source.
//!
//! - `records`: what the records are (row records, column items), read by range through
//!   `layout::elements` (dense) or straight from `SparseRows` (sparse).
//! - `value`: Angel's value types; text numbers come from `layout::num`'s Java writers.
//! - Text formats are `layout::text::ChunkedText` over `text::AngelText`; binary formats are
//!   arithmetic (`binary::AngelBinary`: exact size from metadata, any range without rendering
//!   the rest).
//! - Availability (`open` returns `None`): dtypes without an Angel value type (complex,
//!   string, float8, opaque); Value formats for sparse tensors; `RowIdColIdValueBinary` when
//!   a row id does not fit its 4 bytes; column formats of a sparse tensor whose dense form
//!   (`rows × cols × width`) exceeds `max_dense`.
//! - Column ids are 4 bytes unless the column count exceeds 2^31−1 (then 8).
//! - Sparse tensors decode their entries on first access, not at `open`.
//! - The decoders in `crate::angel` share no code with this module; the round-trip tests
//!   decode these bytes with them.

mod binary;
mod records;
mod text;
mod value;

use std::sync::{Arc, OnceLock};

use super::dense::dense_tensor;
use super::text::ChunkedText;
use super::{AngelFormat, FileContent, LayoutCtx, LayoutError};
use crate::model::Tensor;
use binary::AngelBinary;
use records::Records;
use text::AngelText;
pub use value::AngelValue;

/// The content of Angel format `format` for `tensor`, or `None` if it cannot represent it.
pub fn open(
    format: AngelFormat,
    tensor: Arc<dyn Tensor>,
    ctx: &Arc<LayoutCtx>,
) -> Option<Arc<dyn FileContent>> {
    let meta = tensor.meta();
    let value = AngelValue::of(meta.dtype)?;
    meta.dtype.elem_size()?;
    let is_value = matches!(format, AngelFormat::ValueText | AngelFormat::ValueBinary);
    let is_column = matches!(format, AngelFormat::TextColumn | AngelFormat::BinaryColumn);
    let (rows, cols) = match (meta.sparse, &meta.shape[..]) {
        (true, &[r, c]) => (r, c),
        _ => meta.rows_cols()?,
    };
    if meta.sparse && is_value {
        return None;
    }
    if format == AngelFormat::RowIdColIdValueBinary && rows > i32::MAX as u64 + 1 {
        return None;
    }
    // Column formats write every saved row in full: shown when the dense view would be (an
    // Angel sparse dtype is f32/f64/i32/i64, whose element size is the Angel value width).
    if meta.sparse && is_column && dense_tensor(&tensor, ctx.max_dense).is_none() {
        return None;
    }
    let sparse = meta.sparse;
    if !sparse {
        rows.checked_mul(cols)?;
    }
    let key_width = if cols > i32::MAX as u64 { 8 } else { 4 };
    let file = AngelFile {
        format,
        key_width,
        sep: ctx.sep.clone(),
        ctx: ctx.clone(),
        value,
        cols,
        tensor,
    };
    if sparse {
        return Some(Arc::new(Deferred {
            file,
            built: OnceLock::new(),
        }));
    }
    file.content(Records::dense(file.tensor.clone(), value, cols))
        .ok()
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
    LayoutError::Other("file size overflows".into())
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

    /// Decodes a sparse tensor's entries and builds its content.
    fn sparse_content(&self) -> Result<Arc<dyn FileContent>, LayoutError> {
        let rows = self.tensor.sparse()?;
        if self.format == AngelFormat::RowIdColIdValueBinary
            && rows.rows.iter().any(|&r| r > i32::MAX as u64)
        {
            return Err(LayoutError::Other("row id does not fit 4 bytes".into()));
        }
        let columns = matches!(
            self.format,
            AngelFormat::TextColumn | AngelFormat::BinaryColumn
        );
        let dtype = self.tensor.meta().dtype;
        self.content(Records::sparse(
            rows, dtype, self.value, self.cols, columns,
        )?)
    }
}

/// A sparse tensor's file, built on first access. A failed build is retried next time (the
/// error may be transient); two racing first readers may both build, the first one stays.
struct Deferred {
    file: AngelFile,
    built: OnceLock<Arc<dyn FileContent>>,
}

impl Deferred {
    fn get(&self) -> Result<&Arc<dyn FileContent>, LayoutError> {
        if let Some(c) = self.built.get() {
            return Ok(c);
        }
        let c = self.file.sparse_content()?;
        Ok(self.built.get_or_init(|| c))
    }
}

impl FileContent for Deferred {
    fn size(&self) -> Result<u64, LayoutError> {
        self.get()?.size()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize, LayoutError> {
        self.get()?.read_at(offset, buf)
    }
}

#[cfg(test)]
mod tests;
