//! One GGUF tensor: `bytes` bytes at `at` of the file, blocks of its ggml type. Shown in
//! numpy's (row-major) order: ggml's dimensions reversed. A plain type's elements are read
//! (and lent) in place; a quantized one's are dequantized block by block, reading only the
//! blocks a request covers; `.bin` is always the bytes as stored.

use std::sync::Arc;

use bytes::Bytes;

use super::quant::{Decode, GgmlType};
use crate::model::{base_name, debug_check, DType, ModelError, StoredForm, Tensor, TensorMeta};
use crate::source::{ReadAt, ReadCtx, ReadExt};

pub(crate) struct GgufTensor {
    meta: TensorMeta,
    file: Arc<dyn ReadAt>,
    ty: GgmlType,
    at: u64,
    identity: Option<String>,
}

impl GgufTensor {
    /// The tensor `name` of ggml type `ty` whose ggml dimensions are `dims`, at `at` of
    /// `file` (its offset in the data section: `offset`); `problem` if its info is wrong.
    pub(crate) fn new(
        name: &str,
        dims: &[u64],
        ty: GgmlType,
        at: u64,
        offset: u64,
        file: &Arc<dyn ReadAt>,
    ) -> GgufTensor {
        let shape: Vec<u64> = dims.iter().rev().copied().collect();
        let mut extra = serde_json::Map::new();
        extra.insert("file".into(), base_name(file.name()).into());
        extra.insert("ggml_type".into(), ty.name.into());
        extra.insert("data_offset".into(), offset.into());
        let count = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
        let row = dims.first().copied().unwrap_or(1);
        let mut problem = None;
        let bytes = match count {
            None => {
                problem = Some("its element count overflows".to_string());
                0
            }
            Some(_) if row % ty.block != 0 => {
                problem = Some(format!(
                    "rows of {row} elements are not whole {}-element blocks of {}",
                    ty.block, ty.name
                ));
                0
            }
            Some(n) => match (n / ty.block).checked_mul(ty.bytes) {
                Some(b) if at.checked_add(b).is_some_and(|e| e <= file.size()) => b,
                _ => {
                    problem = Some(format!("its {} blocks end past the file", ty.name));
                    0
                }
            },
        };
        let dtype = match ty.decode {
            Decode::Plain(d) => d,
            Decode::Quant(_) => DType::F32,
            Decode::Raw => DType::Blocks(ty.lower_name),
        };
        let stored = match ty.decode {
            Decode::Plain(_) => None,
            _ => Some(StoredForm {
                encoding: ty.name.into(),
                bytes,
            }),
        };
        // Blocks not decoded: a note of the verdicts, not a problem (`model::verdict`).
        let note = (ty.decode == Decode::Raw && problem.is_none())
            .then(|| format!("{} is not decoded: .bin holds its blocks", ty.lower_name));
        GgufTensor {
            meta: TensorMeta {
                stored,
                extra,
                problem,
                note,
                mtime: file.mtime(),
                ..TensorMeta::new(name.as_bytes().to_vec(), dtype, shape, "gguf")
            },
            file: Arc::clone(file),
            ty,
            at,
            identity: crate::source::identity_string(&**file).map(|f| format!("{f}:{name}")),
        }
    }
}

impl Tensor for GgufTensor {
    fn meta(&self) -> &TensorMeta {
        &self.meta
    }

    fn fill_elements(&self, ctx: &ReadCtx, first: u64, out: &mut [u8]) -> Result<(), ModelError> {
        self.meta.begin_read(first, out.len(), self.file.name())?;
        match self.ty.decode {
            Decode::Plain(_) => {
                let w = self.ty.bytes;
                self.file.read_into(ctx, self.at + first * w, out)?;
            }
            Decode::Quant(q) => {
                // The blocks the request covers, read at once, each dequantized in part.
                let (bsz, bb) = (self.ty.block, self.ty.bytes);
                let n = out.len() as u64 / 4;
                let (b0, b1) = (first / bsz, (first + n).div_ceil(bsz));
                let dequantize = |blocks: &[u8]| {
                    let mut e = first;
                    let mut rest = &mut out[..];
                    while !rest.is_empty() {
                        let (b, from) = (e / bsz, (e % bsz) as usize);
                        let take = ((bsz as usize - from) * 4).min(rest.len());
                        let (dst, tail) = rest.split_at_mut(take);
                        let at = ((b - b0) * bb) as usize;
                        q.dequantize(&blocks[at..at + bb as usize], from, dst);
                        rest = tail;
                        e += (take / 4) as u64;
                    }
                };
                let (at, len) = (self.at + b0 * bb, ((b1 - b0) * bb) as usize);
                self.file.with_bytes(ctx, at, len, dequantize)?;
            }
            Decode::Raw => unreachable!("a raw type's dtype has no width"),
        }
        Ok(())
    }

    fn lend(&self, ctx: &ReadCtx, first: u64, len: usize) -> Option<Result<Bytes, ModelError>> {
        if !matches!(self.ty.decode, Decode::Plain(_)) || self.meta.problem.is_some() {
            return None;
        }
        debug_check(&self.meta, first, len);
        let got = self.file.read(ctx, self.at + first * self.ty.bytes, len);
        Some(got.map_err(Into::into))
    }

    /// A plain type's elements are its blocks (one element each, little-endian as this
    /// reader requires): the tensor is its bytes in place.
    fn stored_run(&self) -> Option<crate::model::StoredRun> {
        if !matches!(self.ty.decode, Decode::Plain(_)) || self.meta.problem.is_some() {
            return None;
        }
        debug_assert_eq!(Some(self.ty.bytes as usize), self.meta.dtype.elem_size());
        crate::model::StoredRun::elements(&self.file, self.at, &self.meta)
    }

    fn read_stored(&self, ctx: &ReadCtx, offset: u64, len: usize) -> Result<Bytes, ModelError> {
        self.meta.no_problem(self.file.name())?;
        let total = self.meta.stored.as_ref().map_or(0, |s| s.bytes);
        if offset.checked_add(len as u64).is_none_or(|e| e > total) {
            return Err(ModelError::data(
                self.file.name(),
                "a read past the tensor's blocks",
            ));
        }
        Ok(self.file.read(ctx, self.at + offset, len)?)
    }

    fn cache_identity(&self) -> Option<String> {
        self.identity.clone()
    }
}
