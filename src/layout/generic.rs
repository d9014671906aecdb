//! `open` for the generic layouts: picks what can represent a tensor (SPEC §3) and wires the
//! chunk sources and binary readers together.

use std::sync::Arc;

use super::binary::{open_bin as bin_content, open_npy as npy_content};
use super::dense::dense_tensor;
use super::gentext::{BlankRows, ElementLines, LibsvmDense, LibsvmSparse};
use super::text::ChunkedText;
use super::{FileContent, LayoutCtx, LayoutError};
use crate::model::{DType, Tensor};

/// Rows of a zero-column matrix are not backed by any data; past this many the shape is
/// nonsense and the file is not shown (it would be gigabytes of empty lines).
const MAX_BLANK_ROWS: u64 = 1 << 28;

/// A file whose every access fails with the same error (e.g. sparse rows that cannot be read).
pub struct FailingContent(pub String);

impl FileContent for FailingContent {
    fn size(&self) -> Result<u64, LayoutError> {
        Err(LayoutError::Other(self.0.clone()))
    }
    fn read_at(&self, _: u64, _: &mut [u8]) -> Result<usize, LayoutError> {
        Err(LayoutError::Other(self.0.clone()))
    }
}

fn undecodable(dtype: DType) -> bool {
    matches!(dtype, DType::Variant | DType::Opaque(_))
}

fn chunked(
    source: Arc<dyn super::text::ChunkSource>,
    owner: &Arc<dyn Tensor>,
    tag: &str,
    ctx: &Arc<LayoutCtx>,
) -> Option<Arc<dyn FileContent>> {
    Some(Arc::new(ChunkedText::new(
        source,
        owner.clone(),
        tag,
        ctx.cache.clone(),
    )))
}

pub fn open_txt(tensor: Arc<dyn Tensor>, ctx: &Arc<LayoutCtx>) -> Option<Arc<dyn FileContent>> {
    if undecodable(tensor.meta().dtype) {
        return None;
    }
    let dense = dense_tensor(&tensor, ctx.max_dense)?;
    let elements = dense.meta().num_elements()?;
    let src = ElementLines {
        tensor: dense,
        elements,
        cols: 1,
    };
    chunked(Arc::new(src), &tensor, "txt", ctx)
}

pub fn open_csv(tensor: Arc<dyn Tensor>, ctx: &Arc<LayoutCtx>) -> Option<Arc<dyn FileContent>> {
    let meta = tensor.meta();
    if undecodable(meta.dtype) {
        return None;
    }
    let dense = dense_tensor(&tensor, ctx.max_dense)?;
    let elements = meta.num_elements()?;
    let (rows, cols) = meta.rows_cols()?;
    // Rank 0/1: one value per line, like numpy.savetxt.
    let cols = if meta.shape.len() <= 1 { 1 } else { cols };
    if cols == 0 {
        if rows > MAX_BLANK_ROWS {
            return None;
        }
        let src = BlankRows {
            rows,
            with_row_id: false,
        };
        return chunked(Arc::new(src), &tensor, "csv", ctx);
    }
    let src = ElementLines {
        tensor: dense,
        elements,
        cols,
    };
    chunked(Arc::new(src), &tensor, "csv", ctx)
}

pub fn open_bin(tensor: Arc<dyn Tensor>, ctx: &Arc<LayoutCtx>) -> Option<Arc<dyn FileContent>> {
    if undecodable(tensor.meta().dtype) || tensor.meta().dtype == DType::Str {
        return None;
    }
    bin_content(dense_tensor(&tensor, ctx.max_dense)?)
}

pub fn open_npy(tensor: Arc<dyn Tensor>, ctx: &Arc<LayoutCtx>) -> Option<Arc<dyn FileContent>> {
    if undecodable(tensor.meta().dtype) {
        return None;
    }
    npy_content(dense_tensor(&tensor, ctx.max_dense)?)
}

pub fn open_libsvm(tensor: Arc<dyn Tensor>, ctx: &Arc<LayoutCtx>) -> Option<Arc<dyn FileContent>> {
    let meta = tensor.meta();
    if undecodable(meta.dtype) || meta.dtype == DType::Str {
        return None;
    }
    if meta.sparse {
        let src = tensor
            .sparse()
            .map_err(LayoutError::from)
            .and_then(|rows| LibsvmSparse::new(rows, meta.dtype));
        return match src {
            Ok(src) => chunked(Arc::new(src), &tensor, "libsvm", ctx),
            Err(e) => Some(Arc::new(FailingContent(e.to_string()))),
        };
    }
    let (rows, cols) = meta.rows_cols()?;
    if cols == 0 {
        if rows > MAX_BLANK_ROWS {
            return None;
        }
        let src = BlankRows {
            rows,
            with_row_id: true,
        };
        return chunked(Arc::new(src), &tensor, "libsvm", ctx);
    }
    let src = LibsvmDense {
        tensor: tensor.clone(),
        rows,
        cols,
    };
    chunked(Arc::new(src), &tensor, "libsvm", ctx)
}
