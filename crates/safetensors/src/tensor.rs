//! One tensor of a safetensors file: its bytes are `[begin, end)` of the file, little-endian,
//! row-major, exactly as served (no checksum: the format has none).

use std::sync::Arc;

use bytes::Bytes;

use super::header::Entry;
use crate::model::{base_name, debug_check, DType, ModelError, StoredForm, Tensor, TensorMeta};
use crate::source::{ReadAt, ReadCtx, ReadExt};

pub(crate) struct StTensor {
    meta: TensorMeta,
    file: Arc<dyn ReadAt>,
    /// Where its bytes start in the file.
    begin: u64,
    /// The file's identity and the key, for caches of rendered files.
    identity: Option<String>,
}

impl StTensor {
    pub(crate) fn new(e: &Entry, file: &Arc<dyn ReadAt>) -> StTensor {
        let mut extra = serde_json::Map::new();
        // The base name, as a TF partition's `"file"`: two copies of a model give the same `.json`.
        extra.insert("file".into(), base_name(file.name()).into());
        extra.insert("safetensors_dtype".into(), e.st_dtype.clone().into());
        extra.insert("data_offsets".into(), vec![e.begin, e.end].into());
        StTensor {
            meta: TensorMeta {
                extra,
                problem: e.problem.clone(),
                note: e.note.clone(),
                // An undecoded dtype's bytes, served as stored (`.bin`).
                stored: e.note.as_ref().map(|_| StoredForm {
                    encoding: e.st_dtype.clone(),
                    bytes: e.end - e.begin,
                }),
                mtime: file.mtime(),
                ..TensorMeta::new(
                    e.name.clone().into_bytes(),
                    e.dtype,
                    e.shape.clone(),
                    "safetensors",
                )
            },
            file: Arc::clone(file),
            begin: e.begin,
            identity: crate::source::identity_string(&**file).map(|f| format!("{f}:{}", e.name)),
        }
    }

    /// File offset of element `first` (the request was checked against the shape, whose byte
    /// size the header check bounded by the file).
    fn at(&self, first: u64) -> Result<u64, ModelError> {
        let width = self.meta.dtype.elem_size().unwrap_or(1) as u64;
        first
            .checked_mul(width)
            .and_then(|o| o.checked_add(self.begin))
            .ok_or_else(|| ModelError::data(self.file.name(), "offset overflows"))
    }
}

impl Tensor for StTensor {
    fn meta(&self) -> &TensorMeta {
        &self.meta
    }

    fn fill_elements(&self, ctx: &ReadCtx, first: u64, out: &mut [u8]) -> Result<(), ModelError> {
        self.meta.begin_read(first, out.len(), self.file.name())?;
        self.file.read_into(ctx, self.at(first)?, out)?;
        if self.meta.dtype == DType::Bool {
            // numpy's bool is one byte, 0 or 1; any other byte reads as true.
            for b in out.iter_mut() {
                *b = u8::from(*b != 0);
            }
        }
        Ok(())
    }

    fn stored_run(&self) -> Option<crate::model::StoredRun> {
        if self.meta.problem.is_some() || self.meta.dtype == DType::Bool {
            return None;
        }
        crate::model::StoredRun::elements(&self.file, self.begin, &self.meta)
    }

    fn lend(&self, ctx: &ReadCtx, first: u64, len: usize) -> Option<Result<Bytes, ModelError>> {
        if self.meta.problem.is_some() || self.meta.dtype == DType::Bool {
            return None;
        }
        debug_check(&self.meta, first, len);
        Some((|| {
            let got = self.file.read(ctx, self.at(first)?, len)?;
            Ok(got)
        })())
    }

    fn read_stored(&self, ctx: &ReadCtx, offset: u64, len: usize) -> Result<Bytes, ModelError> {
        self.meta.no_problem(self.file.name())?;
        let total = self.meta.stored.as_ref().map_or(0, |s| s.bytes);
        let at = offset
            .checked_add(self.begin)
            .filter(|_| offset.checked_add(len as u64).is_some_and(|e| e <= total))
            .ok_or_else(|| ModelError::data(self.file.name(), "a read past the tensor's bytes"))?;
        Ok(self.file.read(ctx, at, len)?)
    }

    fn cache_identity(&self) -> Option<String> {
        self.identity.clone()
    }
}
