//! `bin` (raw little-endian elements) and `npy` (NumPy format 1.0/2.0, the exact bytes
//! `np.save` writes). Sizes come from metadata; a read fetches just the elements it covers
//! (no rendering, no cache).

use std::sync::Arc;

use bytes::Bytes;

use super::{FileContent, LayoutError, Requester};
use crate::model::{DType, Tensor};
use crate::source::{scratch, ReadCtx};

/// How source elements become file elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElemMap {
    /// Bytes as read.
    Same,
    /// Bool: any non-zero byte becomes 1.
    Bool,
    /// bfloat16 widened to float32 (exact: the 16 bits become the high half).
    Bf16ToF32,
    /// A narrow float (`DType::Float8` of this code) widened to float32 (exact).
    Float8ToF32(u8),
}

/// Fixed-width elements of a dense tensor served at any byte offset.
pub struct RawElements {
    pub tensor: Arc<dyn Tensor>,
    pub(crate) elements: u64,
    pub(crate) src_width: usize,
    pub map: ElemMap,
}

impl RawElements {
    pub fn new(tensor: Arc<dyn Tensor>, map: ElemMap) -> Option<Self> {
        let meta = tensor.meta();
        Some(RawElements {
            elements: meta.num_elements()?,
            src_width: meta.dtype.elem_size()?,
            map,
            tensor,
        })
    }

    pub fn width(&self) -> usize {
        match self.map {
            ElemMap::Bf16ToF32 | ElemMap::Float8ToF32(_) => 4,
            _ => self.src_width,
        }
    }

    pub fn size(&self) -> Option<u64> {
        self.elements.checked_mul(self.width() as u64)
    }

    /// Up to `len` bytes at byte `offset` of the element data (fewer only at the end): the
    /// tensor's read when the elements are served as stored and whole (a view of the
    /// source's buffer where it lends one), else converted into a copy.
    pub fn read(&self, ctx: &ReadCtx, offset: u64, len: usize) -> Result<Bytes, LayoutError> {
        let size = self.size().ok_or(LayoutError::Overflow("element count"))?;
        let len = usize::try_from(size.saturating_sub(offset)).map_or(len, |left| left.min(len));
        if len == 0 {
            return Ok(Bytes::new());
        }
        let w = self.width() as u64;
        if self.map == ElemMap::Same {
            // The whole elements that cover the range (a view where the source lends one),
            // cut to it: a file whose elements start at an odd offset (a view's member) reads
            // as cheaply as one whose elements are aligned.
            let first = offset / w;
            let last = (offset + len as u64).div_ceil(w);
            let covering = usize::try_from((last - first) * w)
                .map_err(|_| LayoutError::Overflow("read length"))?;
            let got = self.tensor.read(ctx, first, covering)?;
            let from = (offset - first * w) as usize;
            debug_assert!(from + len <= got.len());
            return Ok(got.slice(from..from + len));
        }
        scratch::filled(len, |buf| self.read_at(ctx, offset, buf))
    }

    /// `read` of elements served as stored, without their checksum pass (for bytes a view
    /// must serve although their tensor fails its check: see `views::safetensors`); `None`
    /// for converted elements.
    pub fn read_unchecked(
        &self,
        ctx: &ReadCtx,
        offset: u64,
        len: usize,
    ) -> Option<Result<Bytes, LayoutError>> {
        if self.map != ElemMap::Same {
            return None;
        }
        let size = self.size()?;
        let len = usize::try_from(size.saturating_sub(offset)).map_or(len, |left| left.min(len));
        let w = self.width() as u64;
        let first = offset / w;
        let covering = usize::try_from(((offset + len as u64).div_ceil(w) - first) * w).ok()?;
        let from = (offset - first * w) as usize;
        Some(
            scratch::filled(covering, |buf| {
                self.tensor.read_elements_unchecked(ctx, first, buf)?;
                Ok(covering)
            })
            .map(|got| got.slice(from..from + len)),
        )
    }

    /// Fills `buf` from byte `offset` of the element data; short only at the end.
    pub(crate) fn read_at(
        &self,
        ctx: &ReadCtx,
        offset: u64,
        buf: &mut [u8],
    ) -> Result<usize, LayoutError> {
        let size = self.size().ok_or(LayoutError::Overflow("element count"))?;
        if offset >= size || buf.is_empty() {
            return Ok(0);
        }
        let len = (buf.len() as u64).min(size - offset) as usize;
        let w = self.width() as u64;
        let first = offset / w;
        let last = (offset + len as u64).div_ceil(w);
        let count = (last - first) as usize;
        if self.map == ElemMap::Same && offset % w == 0 && len as u64 % w == 0 {
            self.tensor.read_elements(ctx, first, &mut buf[..len])?;
            return Ok(len);
        }
        let mut src = vec![0u8; count * self.src_width];
        self.tensor.read_elements(ctx, first, &mut src)?;
        let converted = match self.map {
            ElemMap::Same => src,
            ElemMap::Bool => {
                src.iter_mut().for_each(|b| *b = (*b != 0) as u8);
                src
            }
            ElemMap::Bf16ToF32 => {
                let mut out = Vec::with_capacity(count * 4);
                for b in src.chunks_exact(2) {
                    out.extend_from_slice(&[0, 0, b[0], b[1]]);
                }
                out
            }
            ElemMap::Float8ToF32(code) => {
                let mut out = Vec::with_capacity(count * 4);
                for &b in &src {
                    out.extend_from_slice(&crate::model::float8::widen(code, b).to_le_bytes());
                }
                out
            }
        };
        let from = (offset - first * w) as usize;
        buf[..len].copy_from_slice(&converted[from..from + len]);
        Ok(len)
    }
}

/// The `bin` layout.
pub struct BinContent(pub RawElements);

impl FileContent for BinContent {
    fn known_size(&self) -> Option<u64> {
        self.0.size()
    }
    fn read(&self, offset: u64, len: usize, req: &dyn Requester) -> Result<Bytes, LayoutError> {
        self.0.read(req.ctx(), offset, len)
    }
}

/// `bin` of a tensor with a stored form of its own (`TensorMeta::stored`): those bytes.
pub(crate) struct StoredContent {
    pub(crate) tensor: Arc<dyn Tensor>,
    pub(crate) len: u64,
}

impl FileContent for StoredContent {
    fn known_size(&self) -> Option<u64> {
        Some(self.len)
    }
    fn read(&self, offset: u64, len: usize, req: &dyn Requester) -> Result<Bytes, LayoutError> {
        let len = usize::try_from(self.len.saturating_sub(offset)).map_or(len, |l| l.min(len));
        if len == 0 {
            return Ok(Bytes::new());
        }
        Ok(self.tensor.read_stored(req.ctx(), offset, len)?)
    }
}

/// `bin` for a dense tensor of fixed-width elements.
pub(crate) fn bin_content(tensor: Arc<dyn Tensor>) -> Option<Arc<dyn FileContent>> {
    let map = match tensor.meta().dtype {
        DType::Bool => ElemMap::Bool,
        _ => ElemMap::Same,
    };
    Some(Arc::new(BinContent(RawElements::new(tensor, map)?)))
}

/// NumPy `descr` and element mapping for a fixed-width dtype; `None` if numpy has no type.
pub fn npy_descr(dtype: DType) -> Option<(&'static str, ElemMap)> {
    use DType::*;
    let same = ElemMap::Same;
    Some(match dtype {
        F16 => ("<f2", same),
        BF16 => ("<f4", ElemMap::Bf16ToF32),
        F32 => ("<f4", same),
        F64 => ("<f8", same),
        I8 | QInt8 | Int4 | Int2 => ("|i1", same),
        I16 | QInt16 => ("<i2", same),
        I32 | QInt32 => ("<i4", same),
        I64 => ("<i8", same),
        U8 | QUInt8 | UInt4 | UInt2 => ("|u1", same),
        Float8(code) => ("<f4", ElemMap::Float8ToF32(code)),
        U16 | QUInt16 => ("<u2", same),
        U32 => ("<u4", same),
        U64 => ("<u8", same),
        Bool => ("|b1", ElemMap::Bool),
        C64 => ("<c8", same),
        C128 => ("<c16", same),
        Str | Variant | Opaque(_) | Blocks(_) => return None,
    })
}

/// The header `np.save` writes (numpy/lib/format.py `_write_array_header`): the dict repr,
/// 21 − len(str(shape[0])) spaces of growth room, then spaces and `\n` up to a multiple of
/// 64 bytes; version 1.0 unless the header length needs 4 bytes (2.0).
pub fn npy_header(descr: &str, shape: &[u64]) -> Vec<u8> {
    let mut dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': (");
    for (i, d) in shape.iter().enumerate() {
        if i > 0 {
            dict.push_str(", ");
        }
        dict.push_str(&d.to_string());
    }
    if shape.len() == 1 {
        dict.push(',');
    }
    dict.push_str("), }");
    if let Some(d0) = shape.first() {
        let n = 21usize.saturating_sub(d0.to_string().len());
        dict.extend(std::iter::repeat_n(' ', n));
    }
    let hlen = dict.len() + 1; // + '\n'
    let pad_v1 = 64 - (10 + hlen) % 64;
    let (version, len_bytes) = if hlen + pad_v1 <= 65535 {
        (1u8, 2)
    } else {
        (2u8, 4)
    };
    let prefix = 6 + 2 + len_bytes;
    let pad = 64 - (prefix + hlen) % 64;
    let total_hdr = hlen + pad;
    let mut out = Vec::with_capacity(prefix + total_hdr);
    out.extend_from_slice(b"\x93NUMPY");
    out.push(version);
    out.push(0);
    if len_bytes == 2 {
        out.extend_from_slice(&(total_hdr as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(total_hdr as u32).to_le_bytes());
    }
    out.extend_from_slice(dict.as_bytes());
    out.extend(std::iter::repeat_n(b' ', pad));
    out.push(b'\n');
    out
}

/// The `npy` layout: numpy's own header (byte-identical to `np.save`) and the raw elements.
///
/// String tensors get no `.npy`: a `|S<maxlen>` array cannot be reduced by numpy, and the shared
/// conformance check calls `.sum()` on every mounted `.npy` (see README, "Decisions").
pub(crate) struct NpyContent {
    header: Vec<u8>,
    raw: RawElements,
}

pub fn npy_content(tensor: Arc<dyn Tensor>) -> Option<Arc<dyn FileContent>> {
    let meta = tensor.meta();
    let (descr, map) = npy_descr(meta.dtype)?;
    let header = npy_header(descr, &meta.shape);
    let raw = RawElements::new(tensor, map)?;
    raw.size()?.checked_add(header.len() as u64)?;
    Some(Arc::new(NpyContent { header, raw }))
}

/// Bytes of elements read and summed at a time: both sums read them while they are in cache.
const SUM_RUN: usize = 1 << 20;

impl NpyContent {
    /// The CRC-32 of the header and the elements, read once each unchecked, their CRC32C
    /// confirmed against the tensor's own at the end (`Tensor::deferred_crc32c`); nothing
    /// summed is returned unless the tensor passes. `None`: the elements are served as stored
    /// only when not widened or normalised (`ElemMap::Same`), and there must be a check to
    /// come (a tensor checked already is read lent, at no cost but the sum).
    fn sum_checking(&self, req: &dyn Requester) -> Option<Result<u32, LayoutError>> {
        let t = &self.raw.tensor;
        if self.raw.map != ElemMap::Same || t.deferred_crc32c().is_none() {
            return None;
        }
        let width = self.raw.src_width;
        let per = (SUM_RUN / width).max(1) as u64;
        Some((|| {
            let mut zip = crc32fast::Hasher::new();
            zip.update(&self.header);
            let mut castagnoli = 0u32;
            let mut buf = vec![0u8; per as usize * width];
            let mut first = 0u64;
            while first < self.raw.elements {
                if req.gone() {
                    return Err(LayoutError::Interrupted);
                }
                let n = per.min(self.raw.elements - first);
                let run = &mut buf[..n as usize * width];
                t.read_elements_unchecked(req.ctx(), first, run)?;
                castagnoli = crc32c::crc32c_append(castagnoli, run);
                zip.update(run);
                first += n;
            }
            t.confirm_crc32c(castagnoli)?;
            Ok(zip.finalize())
        })())
    }
}

impl FileContent for NpyContent {
    fn crc32(&self, req: &dyn Requester) -> Option<Result<u32, LayoutError>> {
        self.sum_checking(req)
    }
    fn known_size(&self) -> Option<u64> {
        self.size().ok()
    }
    fn size_for(&self, _req: &dyn Requester) -> Result<u64, LayoutError> {
        self.raw
            .size()
            .and_then(|d| d.checked_add(self.header.len() as u64))
            .ok_or(LayoutError::Overflow("npy size"))
    }

    fn read_into(
        &self,
        offset: u64,
        buf: &mut [u8],
        req: &dyn Requester,
    ) -> Result<usize, LayoutError> {
        // The header's part (ours) copied in place, then the elements' straight from the
        // tensor: no buffer in between.
        let h = &self.header[..];
        let from = usize::try_from(offset).map_or(h.len(), |o| o.min(h.len()));
        let n = (h.len() - from).min(buf.len());
        buf[..n].copy_from_slice(&h[from..from + n]);
        if n == buf.len() {
            return Ok(n);
        }
        let at = offset + n as u64 - h.len() as u64;
        Ok(n + self.raw.read_at(req.ctx(), at, &mut buf[n..])?)
    }

    fn read(&self, offset: u64, len: usize, req: &dyn Requester) -> Result<Bytes, LayoutError> {
        // The header is ours: a read wholly in the element data is the data's read.
        if let Some(at) = offset.checked_sub(self.header.len() as u64) {
            return self.raw.read(req.ctx(), at, len);
        }
        scratch::filled(len, |buf: &mut [u8]| {
            let h = &self.header[..];
            let mut written = 0usize;
            let mut pos = offset;
            if pos < h.len() as u64 {
                let n = (h.len() - pos as usize).min(buf.len());
                buf[..n].copy_from_slice(&h[pos as usize..pos as usize + n]);
                written += n;
                pos += n as u64;
            }
            if written == buf.len() {
                return Ok(written);
            }
            let n = self
                .raw
                .read_at(req.ctx(), pos - h.len() as u64, &mut buf[written..])?;
            Ok(written + n)
        })
    }
}
