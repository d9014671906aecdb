//! One ONNX tensor as modelfs serves it: little-endian elements at `[begin, begin + bytes)` of
//! a file — the model's own (`raw_data`, in place), the external data file beside it (in
//! place), or the elements decoded from a typed field or unpacked from 4-bit pairs (in memory,
//! bounded by the bytes they came from).

use std::sync::Arc;

use bytes::Bytes;

use crate::model::{debug_check, DType, ModelError, StoredRun, Tensor, TensorMeta};
use crate::source::{ReadAt, ReadCtx, ReadExt};

pub(crate) struct OnnxTensor {
    pub(crate) meta: TensorMeta,
    pub(crate) file: Arc<dyn ReadAt>,
    /// Where its elements start in `file`.
    pub(crate) begin: u64,
    /// Whether `file` holds the elements as stored (not decoded here): views may be lent.
    pub(crate) in_place: bool,
    pub(crate) identity: Option<String>,
}

impl OnnxTensor {
    fn at(&self, first: u64) -> Result<u64, ModelError> {
        let width = self.meta.dtype.elem_size().unwrap_or(1) as u64;
        first
            .checked_mul(width)
            .and_then(|o| o.checked_add(self.begin))
            .ok_or_else(|| ModelError::data(self.file.name(), "offset overflows"))
    }
}

impl Tensor for OnnxTensor {
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
