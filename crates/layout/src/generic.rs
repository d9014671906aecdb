//! The generic layouts (SPEC §3): what can represent a tensor (`check_*`, metadata only) and
//! the content objects wiring chunk sources and binary readers together (lazy: nothing is
//! decoded or rendered here).

use std::sync::Arc;

use super::binary::{bin_content, npy_content, npy_descr, StoredContent};
use super::dense::{check_dense, dense_tensor};
use super::gentext::{BlankRows, ElementLines, LibsvmDense, LibsvmSparse};
use super::lazy::Lazy;
use super::text::{ChunkSource, ChunkedText};
use super::{FileContent, LayoutCtx, Unavailable};
use crate::model::{DType, Tensor, TensorMeta};

/// Rows of a zero-column matrix are not backed by any data; past this many the shape is
/// nonsense and the file is not shown (it would be gigabytes of empty lines).
const MAX_BLANK_ROWS: u64 = 1 << 28;

type Built = Result<Arc<dyn FileContent>, Unavailable>;

fn decodable(meta: &TensorMeta) -> Result<(), Unavailable> {
    match meta.dtype {
        DType::Variant | DType::Opaque(_) | DType::Blocks(_) => {
            Err(Unavailable::Undecodable(meta.dtype.name().into()))
        }
        _ => Ok(()),
    }
}

fn not_strings(meta: &TensorMeta) -> Result<(), Unavailable> {
    match meta.dtype {
        DType::Str => Err(Unavailable::Strings),
        _ => Ok(()),
    }
}

/// The 2-D view, with rank 0/1 one value per line (csv, like `numpy.savetxt`).
fn csv_rows_cols(meta: &TensorMeta) -> Result<(u64, u64), Unavailable> {
    let (rows, cols) = meta.rows_cols().ok_or(Unavailable::Overflow)?;
    Ok(if meta.shape.len() <= 1 {
        (cols, 1)
    } else {
        (rows, cols)
    })
}

fn blank_rows_fit(rows: u64, cols: u64) -> Result<(), Unavailable> {
    if cols == 0 && rows > MAX_BLANK_ROWS {
        return Err(Unavailable::BlankRows(rows));
    }
    Ok(())
}

fn chunked(
    source: impl ChunkSource + 'static,
    owner: &Arc<dyn Tensor>,
    tag: &str,
    ctx: &Arc<LayoutCtx>,
) -> Arc<dyn FileContent> {
    Arc::new(ChunkedText::new(
        Arc::new(source),
        owner.clone(),
        tag,
        ctx.cache.clone(),
    ))
}

pub(crate) fn check_txt(meta: &TensorMeta, ctx: &LayoutCtx) -> Result<(), Unavailable> {
    decodable(meta)?;
    check_dense(meta, ctx.max_dense)
}

pub(crate) fn txt(tensor: Arc<dyn Tensor>, ctx: &Arc<LayoutCtx>) -> Built {
    let dense = dense_tensor(&tensor, ctx.max_dense)?;
    let elements = dense.meta().num_elements().ok_or(Unavailable::Overflow)?;
    let src = ElementLines {
        tensor: dense,
        elements,
        cols: 1,
        sep: Vec::new(),
    };
    Ok(chunked(src, &tensor, "txt", ctx))
}

pub(crate) fn check_csv(meta: &TensorMeta, ctx: &LayoutCtx) -> Result<(), Unavailable> {
    check_txt(meta, ctx)?;
    let (rows, cols) = csv_rows_cols(meta)?;
    blank_rows_fit(rows, cols)
}

pub(crate) fn csv(tensor: Arc<dyn Tensor>, ctx: &Arc<LayoutCtx>) -> Built {
    let meta = tensor.meta();
    let (rows, cols) = csv_rows_cols(meta)?;
    if cols == 0 {
        let src = BlankRows {
            rows,
            with_row_id: false,
        };
        return Ok(chunked(src, &tensor, "csv", ctx));
    }
    let src = ElementLines {
        tensor: dense_tensor(&tensor, ctx.max_dense)?,
        elements: meta.num_elements().ok_or(Unavailable::Overflow)?,
        cols,
        sep: ctx.sep.as_bytes().to_vec(),
    };
    // The separator is part of what the text's remembered offsets describe.
    let tag = match ctx.sep.as_str() {
        "," => "csv".to_string(),
        sep => format!("csv,sep={}", sep.escape_default()),
    };
    Ok(chunked(src, &tensor, &tag, ctx))
}

/// Element bytes of a fixed-width file (elements × `width`) must be countable.
fn byte_size(meta: &TensorMeta, width: usize) -> Result<u64, Unavailable> {
    meta.num_elements()
        .and_then(|n| n.checked_mul(width as u64))
        .and_then(|n| n.checked_add(1 << 16))
        .ok_or(Unavailable::Overflow)
}

pub(crate) fn check_bin(meta: &TensorMeta, ctx: &LayoutCtx) -> Result<(), Unavailable> {
    if meta.stored.is_some() {
        // Its bytes as stored, whatever its dtype decodes to.
        return Ok(());
    }
    decodable(meta)?;
    not_strings(meta)?;
    let width = meta.dtype.elem_size().ok_or(Unavailable::Overflow)?;
    byte_size(meta, width)?;
    check_dense(meta, ctx.max_dense)
}

pub(crate) fn bin(tensor: Arc<dyn Tensor>, ctx: &Arc<LayoutCtx>) -> Built {
    if let Some(s) = &tensor.meta().stored {
        let len = s.bytes;
        return Ok(Arc::new(StoredContent { tensor, len }));
    }
    bin_content(dense_tensor(&tensor, ctx.max_dense)?).ok_or(Unavailable::Overflow)
}

pub fn check_npy(meta: &TensorMeta, ctx: &LayoutCtx) -> Result<(), Unavailable> {
    decodable(meta)?;
    npy_descr(meta.dtype).ok_or_else(|| Unavailable::NoNumpyType(meta.dtype.name().into()))?;
    // bfloat16 widens to 4 bytes; the header is far below the 64 KiB `byte_size` allows.
    byte_size(meta, 4.max(meta.dtype.elem_size().unwrap_or(4)))?;
    check_dense(meta, ctx.max_dense)
}

pub fn npy(tensor: Arc<dyn Tensor>, ctx: &Arc<LayoutCtx>) -> Built {
    npy_content(dense_tensor(&tensor, ctx.max_dense)?).ok_or(Unavailable::Overflow)
}

pub(crate) fn check_libsvm(meta: &TensorMeta) -> Result<(), Unavailable> {
    decodable(meta)?;
    not_strings(meta)?;
    if meta.sparse {
        return Ok(());
    }
    let (rows, cols) = meta.rows_cols().ok_or(Unavailable::Overflow)?;
    blank_rows_fit(rows, cols)
}

pub(crate) fn libsvm(tensor: Arc<dyn Tensor>, ctx: &Arc<LayoutCtx>) -> Built {
    let meta = tensor.meta();
    if meta.sparse {
        // Built now when the shape is metadata (its chunk count keys the stored index, so a
        // known size is found without decoding); else on first use.
        let (t, ctx) = (tensor.clone(), ctx.clone());
        let build = move || {
            let src = LibsvmSparse::new(t.clone())?;
            Ok(chunked(src, &t, "libsvm:v2", &ctx))
        };
        if tensor.sparse_shape_is_cheap() {
            if let Ok(c) = build() {
                return Ok(c);
            }
        }
        return Ok(Lazy::content(build));
    }
    let (rows, cols) = meta.rows_cols().ok_or(Unavailable::Overflow)?;
    if cols == 0 {
        let src = BlankRows {
            rows,
            with_row_id: true,
        };
        return Ok(chunked(src, &tensor, "libsvm", ctx));
    }
    let src = LibsvmDense {
        tensor: tensor.clone(),
        rows,
        cols,
    };
    Ok(chunked(src, &tensor, "libsvm", ctx))
}
