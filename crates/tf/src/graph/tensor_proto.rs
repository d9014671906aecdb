//! A `TensorProto` (a `Const` node's value, a V1 `SavedSlice`'s data) as a `model::Tensor`.
//!
//! The proto is scanned once for its dtype, shape and where its values are; nothing is copied.
//! `tensor_content` (raw little-endian bytes) stays a byte range of the source and is read in
//! place. The typed repeated fields (`float_val`, `int_val`, `half_val`, …) are decoded on the
//! first data read, and only the values stored: TF's rule that fewer values than elements
//! repeat the last one (none at all: zeros) is applied per read, so a 1M-element tensor of zeros
//! stored as one `0` is never materialised.

use std::ops::Range;
use std::sync::Arc;

use crate::codec::wire::{packed_varints, Fields, Value, WireError};
use crate::dtype::from_tf;
use crate::model::{
    DType, EachString, ModelError, ModelResult, RequestError, Strings, Tensor, TensorMeta,
};
use crate::source::{identity_string, Memo, ReadAt, ReadCtx, ReadExt};

/// Most dimensions a shape may have (TF's own limit is 254).
const MAX_RANK: usize = 254;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ProtoError {
    #[error("TensorProto: {0}")]
    Wire(#[from] WireError),
    #[error("TensorProto: {0}")]
    Invalid(String),
}

/// What a scan of a `TensorProto` found. Ranges are absolute offsets in the source file.
#[derive(Debug, Clone)]
pub(crate) struct ProtoInfo {
    pub(crate) dtype: DType,
    pub(crate) shape: Vec<u64>,
    /// `tensor_content`, when present and not empty.
    pub(crate) content: Option<Range<u64>>,
    /// The whole proto (for decoding typed fields).
    pub(crate) proto: Range<u64>,
    pub(crate) problem: Option<String>,
    /// Values of a dtype modelfs does not decode (variant, resource): a note, not damage.
    pub(crate) note: Option<String>,
}

/// Scans the `TensorProto` in `buf[range]`; `base` is `buf[0]`'s offset in the file.
pub(crate) fn scan(buf: &[u8], range: Range<usize>, base: u64) -> Result<ProtoInfo, ProtoError> {
    let abs = |r: Range<usize>| base + r.start as u64..base + r.end as u64;
    let mut dtype = 0i32;
    let mut dims: Vec<i64> = Vec::new();
    let mut unknown_rank = false;
    let mut content = None;
    for f in Fields::within(buf, range.clone()) {
        let f = f?;
        match (f.number, f.value) {
            (1, Value::Varint(v)) => dtype = v as i32,
            (2, Value::Bytes { start, end }) => {
                for d in Fields::within(buf, start..end) {
                    let d = d?;
                    match (d.number, d.value) {
                        (2, Value::Bytes { start, end }) => {
                            let mut size = 0i64;
                            for s in Fields::within(buf, start..end) {
                                let s = s?;
                                if let (1, Value::Varint(v)) = (s.number, s.value) {
                                    size = v as i64;
                                }
                            }
                            if dims.len() == MAX_RANK {
                                return Err(ProtoError::Invalid("more than 254 dimensions".into()));
                            }
                            dims.push(size);
                        }
                        (3, Value::Varint(v)) => unknown_rank = v != 0,
                        _ => {}
                    }
                }
            }
            (4, Value::Bytes { start, end }) => {
                content = (end > start).then(|| abs(start..end));
            }
            _ => {}
        }
    }
    let mut info = ProtoInfo {
        dtype: from_tf(dtype),
        shape: Vec::new(),
        content,
        proto: abs(range),
        problem: None,
        note: None,
    };
    let mut problem = None;
    if unknown_rank {
        problem = Some("shape of unknown rank".to_string());
    }
    let shape: Vec<u64> = dims
        .iter()
        .map(|&d| {
            u64::try_from(d).unwrap_or_else(|_| {
                problem.get_or_insert_with(|| format!("negative dimension {d}"));
                0
            })
        })
        .collect();
    info.shape = shape;
    info.problem = problem;
    info.validate();
    Ok(info)
}

impl ProtoInfo {
    /// Sets `problem` if the dtype cannot be decoded, the shape overflows, or
    /// `tensor_content` does not hold exactly the shape's elements.
    pub(crate) fn validate(&mut self) {
        let (dtype, shape, content) = (self.dtype, &self.shape, &self.content);
        let problem = &mut self.problem;
        let n = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
        match (n, content, dtype.elem_size()) {
            (None, _, _) => {
                problem.get_or_insert_with(|| format!("shape {shape:?} overflows"));
            }
            (Some(n), Some(c), Some(w)) if Some(c.end - c.start) != n.checked_mul(w as u64) => {
                problem.get_or_insert_with(|| {
                    format!(
                        "tensor_content holds {} bytes, the shape needs {n} × {w}",
                        c.end - c.start
                    )
                });
            }
            _ => {}
        }
        match dtype {
            DType::Opaque(0) => {
                problem.get_or_insert_with(|| "dtype invalid (code 0)".into());
            }
            DType::Variant | DType::Opaque(_) | DType::Blocks(_) => {
                self.note = Some(format!("{} values are not decoded here", dtype.name()));
            }
            _ => {}
        }
    }
}

/// Values stored in the typed fields, before the repeat-last rule.
enum Stored {
    /// Little-endian element bytes, a whole number of elements.
    Fixed(Vec<u8>),
    Strings(Vec<Vec<u8>>),
}

/// A tensor whose value is a `TensorProto` inside a source file.
pub(crate) struct ProtoTensor {
    file: Arc<dyn ReadAt>,
    info: ProtoInfo,
    meta: TensorMeta,
    stored: Memo<Result<Arc<Stored>, ProtoError>>,
}

impl ProtoTensor {
    pub(crate) fn new(file: Arc<dyn ReadAt>, info: ProtoInfo, mut meta: TensorMeta) -> Self {
        meta.dtype = info.dtype;
        meta.shape = info.shape.clone();
        if meta.problem.is_none() {
            meta.problem = info.problem.clone();
        }
        meta.note = info.note.clone();
        ProtoTensor {
            file,
            info,
            meta,
            stored: Memo::default(),
        }
    }

    /// A tensor of `meta` (its dtype and shape win over the proto's: V1 slices store values
    /// only) whose value is `info`'s proto.
    pub(crate) fn with_meta(file: Arc<dyn ReadAt>, mut info: ProtoInfo, meta: TensorMeta) -> Self {
        info.dtype = meta.dtype;
        info.shape = meta.shape.clone();
        info.problem = None;
        info.note = None;
        info.validate();
        let meta = TensorMeta {
            stored: None,
            note: info.note.clone(),
            problem: meta.problem.clone().or_else(|| info.problem.clone()),
            ..meta
        };
        ProtoTensor {
            file,
            info,
            meta,
            stored: Memo::default(),
        }
    }

    /// Meta for a graph constant named `name` (its op in the `.json`).
    pub(crate) fn graph_meta(name: &str, op: &str, file: &dyn ReadAt) -> TensorMeta {
        let mut extra = serde_json::Map::new();
        extra.insert("op".into(), op.into());
        TensorMeta {
            extra,
            mtime: file.mtime(),
            role: crate::model::Role::Constant,
            ..TensorMeta::new(name.as_bytes().to_vec(), DType::F32, Vec::new(), "tf-graph")
        }
    }

    fn what(&self) -> String {
        format!(
            "{} ({})",
            String::from_utf8_lossy(&self.meta.name),
            self.file.name()
        )
    }

    fn fail(&self, e: impl Into<crate::model::BoxError>) -> ModelError {
        ModelError::data(self.what(), e)
    }

    fn stored(&self) -> Result<Arc<Stored>, ModelError> {
        // Err: a transient fault, not kept (the next read tries again).
        let got = self
            .stored
            .get_or_try(|| -> Result<_, crate::source::SourceError> {
                let lasting = |e: crate::source::SourceError| match e.is_transient() {
                    true => Err(e),
                    false => Ok(ProtoError::Invalid(e.to_string())),
                };
                let p = &self.info.proto;
                let Ok(len) = usize::try_from(p.end - p.start) else {
                    return Ok(Err(ProtoError::Invalid("too large".into())));
                };
                let decode = |b: &[u8]| decode_typed(b, self.info.dtype);
                match self.file.with_bytes(ReadCtx::none(), p.start, len, decode) {
                    Ok(Ok(stored)) => Ok(Ok(Arc::new(stored))),
                    Ok(Err(e)) => Ok(Err(e)),
                    Err(e) => Ok(Err(lasting(e)?)),
                }
            });
        match got {
            Ok(r) => r.clone().map_err(|e| self.fail(e)),
            Err(e) => Err(ModelError::from(e)),
        }
    }

    fn count(&self) -> u64 {
        self.meta.num_elements().unwrap_or(0)
    }

    fn check_range(&self, first: u64, count: u64) -> Result<(), ModelError> {
        RequestError::within(first, count, self.count())?;
        match (&self.meta.problem, &self.meta.note) {
            (Some(p), _) | (None, Some(p)) => Err(self.fail(crate::model::KnownProblem(p.clone()))),
            (None, None) => Ok(()),
        }
    }
}

/// Fills `out` (elements from `first`) from `stored` values of `elem` bytes each, the last
/// one repeating, zeros when there is none.
fn fill_repeating(stored: &[u8], elem: usize, first: u64, out: &mut [u8]) {
    let have = (stored.len() / elem) as u64;
    if have == 0 {
        out.fill(0);
        return;
    }
    let direct = have.saturating_sub(first).min((out.len() / elem) as u64) as usize * elem;
    if direct > 0 {
        let from = first as usize * elem;
        out[..direct].copy_from_slice(&stored[from..from + direct]);
    }
    let last = &stored[stored.len() - elem..];
    for chunk in out[direct..].chunks_exact_mut(elem) {
        chunk.copy_from_slice(last);
    }
}

impl Tensor for ProtoTensor {
    fn meta(&self) -> &TensorMeta {
        &self.meta
    }

    fn fill_elements(&self, ctx: &ReadCtx, first: u64, out: &mut [u8]) -> Result<(), ModelError> {
        let elem = self.meta.dtype.elem_size().unwrap_or(1);
        self.check_range(first, (out.len() / elem) as u64)?;
        if out.is_empty() {
            return Ok(());
        }
        if let Some(c) = &self.info.content {
            let at = c.start + first * elem as u64;
            self.file.read_into(ctx, at, out)?;
            return Ok(());
        }
        match &*self.stored()? {
            Stored::Fixed(v) => fill_repeating(v, elem, first, out),
            Stored::Strings(_) => out.fill(0),
        }
        Ok(())
    }

    fn cache_identity(&self) -> Option<String> {
        let id = identity_string(&*self.file)?;
        Some(format!(
            "{id}/proto@{}+{}",
            self.info.proto.start, self.info.proto.end
        ))
    }

    crate::model::capabilities!(as_strings: Strings);
}

impl Strings for ProtoTensor {
    fn for_each_string(&self, _: &ReadCtx, first: u64, count: u64, f: EachString) -> ModelResult {
        if self.meta.dtype != DType::Str {
            return Err(RequestError::NotStrings(self.meta.dtype.name().into_owned()).into());
        }
        self.check_range(first, count)?;
        let stored = self.stored()?;
        let Stored::Strings(v) = &*stored else {
            return Err(self.fail(ProtoError::Invalid("no strings".into())));
        };
        for i in first..first + count {
            let s = match v.len() {
                0 => &[][..],
                n => &v[(i as usize).min(n - 1)][..],
            };
            f(s);
        }
        Ok(())
    }
}

/// The values a `TensorProto` stores for `dtype` (tensor_content aside, except for strings,
/// whose tensor_content is TF's string-list encoding).
fn decode_typed(buf: &[u8], dtype: DType) -> Result<Stored, ProtoError> {
    use DType::*;
    if dtype == Str {
        let mut out = Vec::new();
        for f in Fields::new(buf) {
            let f = f?;
            match (f.number, f.value) {
                (8, Value::Bytes { start, end }) => out.push(buf[start..end].to_vec()),
                (4, Value::Bytes { start, end }) if end > start => {
                    return Err(ProtoError::Invalid(
                        "string tensor_content is not supported".into(),
                    ))
                }
                _ => {}
            }
        }
        return Ok(Stored::Strings(out));
    }
    let (field, kind) = match dtype {
        F32 => (5, Kind::F32),
        F64 => (6, Kind::F64),
        I32 | I16 | I8 | U8 | U16 | QInt8 | QUInt8 | QInt16 | QUInt16 | QInt32 | Int4 | UInt4
        | Int2 | UInt2 => (7, Kind::Int(dtype.elem_size().unwrap_or(4))),
        I64 => (10, Kind::Int(8)),
        U32 => (16, Kind::Int(4)),
        U64 => (17, Kind::Int(8)),
        Bool => (11, Kind::Int(1)),
        F16 | BF16 => (13, Kind::Int(2)),
        C64 => (9, Kind::F32),
        C128 => (12, Kind::F64),
        Float8(_) => (18, Kind::Raw),
        _ => return Err(ProtoError::Invalid(format!("{} values", dtype.name()))),
    };
    let mut out = Vec::new();
    for f in Fields::new(buf) {
        let f = f?;
        if f.number != field {
            continue;
        }
        match (kind, f.value) {
            (Kind::Raw, Value::Bytes { start, end }) => out.extend_from_slice(&buf[start..end]),
            (Kind::F32, Value::Fixed32(v)) => out.extend_from_slice(&v.to_le_bytes()),
            (Kind::F64, Value::Fixed64(v)) => out.extend_from_slice(&v.to_le_bytes()),
            (Kind::F32, Value::Bytes { start, end }) => {
                if (end - start) % 4 != 0 {
                    return Err(WireError::Malformed(start).into());
                }
                out.extend_from_slice(&buf[start..end]);
            }
            (Kind::F64, Value::Bytes { start, end }) => {
                if (end - start) % 8 != 0 {
                    return Err(WireError::Malformed(start).into());
                }
                out.extend_from_slice(&buf[start..end]);
            }
            (Kind::Int(w), Value::Varint(v)) => push_int(&mut out, v, w, dtype),
            (Kind::Int(w), Value::Bytes { start, end }) => {
                for v in packed_varints(&buf[start..end]) {
                    push_int(&mut out, v?, w, dtype);
                }
            }
            _ => {
                return Err(ProtoError::Invalid(format!(
                    "field {field} has the wrong wire type"
                )))
            }
        }
    }
    // A complex value is a pair: an odd count leaves half a value, which TF refuses.
    let elem = dtype.elem_size().unwrap_or(1);
    if out.len() % elem != 0 {
        return Err(ProtoError::Invalid("half a complex value".into()));
    }
    Ok(Stored::Fixed(out))
}

#[derive(Clone, Copy)]
enum Kind {
    F32,
    F64,
    /// Varints narrowed to this many bytes (C-style truncation, like TF's static_cast).
    Int(usize),
    /// Bytes, one element each.
    Raw,
}

fn push_int(out: &mut Vec<u8>, v: u64, width: usize, dtype: DType) {
    let v = match dtype {
        DType::Bool => u64::from(v != 0),
        _ => v,
    };
    out.extend_from_slice(&v.to_le_bytes()[..width]);
}

#[cfg(test)]
#[path = "tensor_proto_tests.rs"]
mod tests;
