//! A tensor whose elements are little-endian, back to back, at `[begin, begin + bytes)` of a
//! source: in place in a model's file (ONNX's `raw_data` and external data, an HDF5 dataset's
//! contiguous storage), or decoded into memory (`in_place: false`: a typed field, a chunked
//! dataset). Bools are served as 0/1 whatever byte was stored.

use std::sync::Arc;

use bytes::Bytes;

use crate::source::{ReadAt, ReadCtx, ReadExt};
use crate::{debug_check, DType, ModelError, StoredRun, Tensor, TensorMeta};

pub struct InPlace {
    pub meta: TensorMeta,
    pub file: Arc<dyn ReadAt>,
    /// Where its elements start in `file`.
    pub begin: u64,
    /// Whether `file` holds the elements as stored (not decoded here): views may be lent.
    pub in_place: bool,
    pub identity: Option<String>,
}

impl InPlace {
    fn at(&self, first: u64) -> Result<u64, ModelError> {
        let width = self.meta.dtype.elem_size().unwrap_or(1) as u64;
        first
            .checked_mul(width)
            .and_then(|o| o.checked_add(self.begin))
            .ok_or_else(|| ModelError::data(self.file.name(), "offset overflows"))
    }
}

impl Tensor for InPlace {
    fn meta(&self) -> &TensorMeta {
        &self.meta
    }

    fn fill_elements(&self, ctx: &ReadCtx, first: u64, out: &mut [u8]) -> Result<(), ModelError> {
        self.meta.begin_read(first, out.len(), self.file.name())?;
        self.file.read_into(ctx, self.at(first)?, out)?;
        if self.meta.dtype == DType::Bool {
            for b in out.iter_mut() {
                *b = u8::from(*b != 0);
            }
        }
        Ok(())
    }

    fn stored_run(&self) -> Option<StoredRun> {
        if !self.in_place || self.meta.problem.is_some() || self.meta.dtype == DType::Bool {
            return None;
        }
        StoredRun::elements(&self.file, self.begin, &self.meta)
    }

    fn lend(&self, ctx: &ReadCtx, first: u64, len: usize) -> Option<Result<Bytes, ModelError>> {
        if self.meta.problem.is_some() || self.meta.dtype == DType::Bool {
            return None;
        }
        debug_check(&self.meta, first, len);
        Some((|| Ok(self.file.read(ctx, self.at(first)?, len)?))())
    }

    fn cache_identity(&self) -> Option<String> {
        self.identity.clone()
    }
}
