//! `.safetensors` (the whole model) and `NAME.safetensors` (one tensor): Hugging Face's
//! safetensors format, which `safetensors.safe_open`, `safetensors.numpy.load_file` and torch
//! read (https://github.com/huggingface/safetensors, "Format"):
//! - 8 bytes: the header's length N, u64 little-endian;
//! - N bytes: a JSON object — `__metadata__` (string values only: `format` "pt", `source` the
//!   model's format, `left_out` what has no safetensors form and why) and, per tensor by key,
//!   `{"dtype", "shape", "data_offsets": [begin, end]}` relative to the data's start — padded
//!   with spaces so the data starts 8-aligned;
//! - the data: every tensor's raw little-endian elements back to back, widest elements first
//!   (then by key), so each tensor starts aligned to its element size.
//!
//! Sizes are exact from metadata; a read fetches only the elements it covers. Sparse
//! matrices are written dense within `max_dense`. Left out (named in `left_out` and logged):
//! strings, complex128, quantized and 4-bit types, which safetensors has no dtype for (but
//! its own `F4` and `F8_E8M0` from a safetensors file, copied as stored),
//! tensors whose metadata names a problem, and sparse ones beyond `max_dense`.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::View;
use bytes::Bytes;
use modelfs_layout::binary::{BinContent, ElemMap, RawElements};
use modelfs_layout::concat::{Concat, ConcatBuilder};
use modelfs_layout::dense::dense_tensor;
use modelfs_layout::{FileContent, LayoutCtx, LayoutError, Requester};
use modelfs_model::{DType, ModelError, Tensor};

/// The whole-model file at a model root.
pub(crate) const FILE: &str = ".safetensors";
/// The per-tensor file's suffix (`NAME.safetensors`).
pub const SUFFIX: &str = "safetensors";

/// The safetensors dtype of `dtype` and how its elements are written.
fn st_dtype(dtype: DType) -> Option<(&'static str, ElemMap)> {
    use DType::*;
    let same = ElemMap::Same;
    Some(match dtype {
        Bool => ("BOOL", ElemMap::Bool),
        U8 => ("U8", same),
        I8 => ("I8", same),
        U16 => ("U16", same),
        I16 => ("I16", same),
        U32 => ("U32", same),
        I32 => ("I32", same),
        U64 => ("U64", same),
        I64 => ("I64", same),
        F16 => ("F16", same),
        BF16 => ("BF16", same),
        F32 => ("F32", same),
        F64 => ("F64", same),
        C64 => ("C64", same),
        Float8(24) => ("F8_E5M2", same),
        Float8(25) => ("F8_E4M3", same),
        Float8(26) => ("F8_E4M3FNUZ", same),
        Float8(28) => ("F8_E5M2FNUZ", same),
        _ => return None,
    })
}

/// safetensors dtypes modelfs does not decode but copies as stored (`F4`: two 4-bit floats a
/// byte; `F8_E8M0`: scales), from a safetensors file whose bytes are exactly that.
const AS_STORED: &[&str] = &["F4", "F8_E8M0"];

/// One tensor's bytes in the file.
enum Part {
    Elements(RawElements),
    /// A tensor of a safetensors dtype modelfs keeps as stored (`AS_STORED`): its bytes.
    Stored(Arc<dyn Tensor>, u64),
}

impl Part {
    fn width(&self) -> usize {
        match self {
            Part::Elements(raw) => raw.width(),
            Part::Stored(..) => 1,
        }
    }
    fn size(&self) -> Option<u64> {
        match self {
            Part::Elements(raw) => raw.size(),
            Part::Stored(_, len) => Some(*len),
        }
    }
    fn tensor(&self) -> &Arc<dyn Tensor> {
        match self {
            Part::Elements(raw) => &raw.tensor,
            Part::Stored(t, _) => t,
        }
    }
}

/// A stored part's bytes (`Tensor::read_stored`).
struct StoredBytes(Arc<dyn Tensor>, u64);

impl FileContent for StoredBytes {
    fn known_size(&self) -> Option<u64> {
        Some(self.1)
    }
    fn read(&self, offset: u64, len: usize, req: &dyn Requester) -> Result<Bytes, LayoutError> {
        let len = usize::try_from(self.1.saturating_sub(offset)).map_or(len, |l| l.min(len));
        if len == 0 {
            return Ok(Bytes::new());
        }
        Ok(self.0.read_stored(req.ctx(), offset, len)?)
    }
}

/// One tensor as written: its elements (or stored bytes), or why it has no safetensors form.
fn elements(t: &Arc<dyn Tensor>, ctx: &LayoutCtx) -> Result<(&'static str, Part), String> {
    let meta = t.meta();
    if let Some(p) = &meta.problem {
        return Err(format!("it has a problem: {p}"));
    }
    if let (Some(form), "safetensors") = (&meta.stored, meta.format) {
        if let Some(name) = AS_STORED.iter().find(|n| **n == form.encoding) {
            return Ok((name, Part::Stored(t.clone(), form.bytes)));
        }
    }
    let (dtype, map) =
        st_dtype(meta.dtype).ok_or_else(|| format!("safetensors has no {}", meta.dtype.name()))?;
    let dense = dense_tensor(t, ctx.max_dense).map_err(|e| e.to_string())?;
    let raw = RawElements::new(dense, map).ok_or("its size overflows")?;
    raw.size().ok_or("its size overflows")?;
    Ok((dtype, Part::Elements(raw)))
}

/// The safetensors file of `tensors` (sorted by key, unique), and what was left out.
fn file(tensors: &[Arc<dyn Tensor>], ctx: &LayoutCtx) -> Result<(Packed, Vec<String>), ModelError> {
    let mut kept = Vec::new();
    let mut left_out = Vec::new();
    let mut sources = std::collections::BTreeSet::new();
    for t in tensors {
        let meta = t.meta();
        let Ok(key) = std::str::from_utf8(&meta.name) else {
            left_out.push(format!(
                "{} (its key is not UTF-8)",
                String::from_utf8_lossy(&meta.name)
            ));
            continue;
        };
        sources.insert(meta.format);
        match elements(t, ctx) {
            Ok((dtype, raw)) => kept.push((key, dtype, raw)),
            Err(why) => left_out.push(format!("{key} ({why})")),
        }
    }
    for why in &left_out {
        log::info!("{FILE}: left out: {why}");
    }
    // Widest first, so that every tensor starts at a multiple of its element size.
    kept.sort_by(|a, b| b.2.width().cmp(&a.2.width()).then(a.0.cmp(b.0)));
    let mut header = serde_json::Map::new();
    let mut metadata = BTreeMap::from([
        ("format", "pt".to_string()),
        ("source", sources.into_iter().collect::<Vec<_>>().join(",")),
    ]);
    if !left_out.is_empty() {
        metadata.insert("left_out", left_out.join("; "));
    }
    header.insert("__metadata__".into(), serde_json::json!(metadata));
    let mut offset = 0u64;
    for (key, dtype, raw) in &kept {
        let end = raw
            .size()
            .and_then(|s| offset.checked_add(s))
            .ok_or_else(|| ModelError::data(FILE, "the file's size overflows"))?;
        header.insert(
            key.to_string(),
            serde_json::json!({
                "dtype": dtype,
                "shape": raw.tensor().meta().shape,
                "data_offsets": [offset, end],
            }),
        );
        offset = end;
    }
    let mut json = serde_json::to_vec(&header).map_err(|e| ModelError::data(FILE, e))?;
    json.resize(json.len().next_multiple_of(8), b' ');
    let mut out = ConcatBuilder::default();
    let overflow = |_| ModelError::data(FILE, "the file's size overflows");
    out.bytes((json.len() as u64).to_le_bytes().to_vec())
        .map_err(overflow)?;
    out.bytes(json).map_err(overflow)?;
    let (mut runs, mut contents) = (Vec::new(), Vec::new());
    for (_, _, part) in kept {
        debug_assert_eq!((out.offset() - 8) % part.width() as u64, 0);
        let start = out.offset();
        let content = match part {
            Part::Elements(raw) => {
                let content = Arc::new(BinContent(raw));
                out.push(content.clone()).map_err(overflow)?;
                Some(content)
            }
            Part::Stored(t, len) => {
                out.push(Arc::new(StoredBytes(t, len))).map_err(overflow)?;
                None
            }
        };
        runs.push((start, out.offset()));
        contents.push(content);
    }
    let data = out.finish();
    let runs = super::Runs(runs);
    Ok((
        Packed {
            data,
            runs,
            contents,
        },
        left_out,
    ))
}

/// The file: safetensors has no holes, so its tensors share pages, and a read through the
/// page cache or an `mmap` fails whole pages. A tensor that fails its check fails every read
/// of its bytes, except in a page it shares with another tensor when it also has pages of its
/// own: there its bytes are served as stored, unchecked, so that the neighbour's read (and
/// `mmap`) succeeds, while any read of the bad tensor whole still meets one of its own pages
/// and fails. A bad tensor with no page of its own fails its shared pages (and neighbours).
pub(crate) struct Packed {
    data: Concat,
    /// Each tensor's bytes in the file.
    runs: super::Runs,
    /// Each tensor's elements, in the order of `runs` (`None`: bytes as stored).
    contents: Vec<Option<Arc<BinContent>>>,
}

impl FileContent for Packed {
    fn known_size(&self) -> Option<u64> {
        self.data.known_size()
    }
    fn size_for(&self, req: &dyn Requester) -> Result<u64, LayoutError> {
        self.data.size_for(req)
    }
    fn read(&self, offset: u64, len: usize, req: &dyn Requester) -> Result<Bytes, LayoutError> {
        self.runs.read(&self.data, offset, len, req, |i, a, b, e| {
            let (start, stop) = self.runs.0[i];
            let (low, high) = super::own_pages(start, stop);
            let shared = (b <= low || a >= high) && low < high;
            let unchecked = shared
                .then(|| self.contents[i].as_ref())
                .flatten()
                .and_then(|c| c.0.read_unchecked(req.ctx(), a - start, (b - a) as usize));
            match unchecked {
                Some(got) => {
                    log::info!("{FILE}: bytes {a}..{b} of a failing tensor served unchecked (a page it shares): {e}");
                    got
                }
                None => Err(e),
            }
        })
    }
}

/// `.safetensors` of the model whose tensors are `tensors` (sorted by key, unique).
pub(crate) fn view(
    tensors: Vec<Arc<dyn Tensor>>,
    ctx: &Arc<LayoutCtx>,
) -> Result<View, ModelError> {
    Ok(View::file(file(&tensors, ctx)?.0))
}

/// `NAME.safetensors` of one tensor, or why it has none.
pub fn single(tensor: Arc<dyn Tensor>, ctx: &LayoutCtx) -> Result<Arc<dyn FileContent>, String> {
    match file(&[tensor], ctx) {
        Ok((f, left_out)) if left_out.is_empty() => Ok(Arc::new(f)),
        Ok((_, left_out)) => Err(left_out.join("; ")),
        Err(e) => Err(e.to_string()),
    }
}
