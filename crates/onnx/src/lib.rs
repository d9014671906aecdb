//! ONNX (onnx/onnx.proto3): a `.onnx` file's `ModelProto`, whose graph's initializers and
//! `Constant` nodes' tensors are shown as tensors, nothing run. The model is walked in place
//! (`proto.rs`): a tensor's `raw_data` is read where it lies in the file; its typed fields
//! (`float_data`, `int32_data`, `int64_data`, `double_data`, `uint64_data`) are decoded into
//! memory no larger than the field; external data (`location`, `offset`, `length`: how models
//! over 2 GB are saved) is read in place from the file beside the model.
//!
//! A `location` that is absolute, climbs with `..`, or (locally) resolves through a symlink
//! out of the model's directory is refused — ONNX had exactly this path traversal — and no
//! byte of what it names is read. 4-bit types (`INT4`, `UINT4`, `FLOAT4E2M1`), stored two a
//! byte, are shown one element a byte as modelfs shows TF's. Names are split on `/` into
//! directories (a leading `/`, as exporters name constants, dropped). The root's
//! `__metadata__.json` holds the producer, IR version, opsets and the graph's inputs and
//! outputs.
//!
//! This is the crate `modelfs-onnx`, one of modelfs's readers: it knows only `modelfs-io` and
//! `modelfs-model`.
//!
//! ```
//! let path = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/onnx/dtypes.onnx"));
//! assert!(modelfs_onnx::is_source(&*modelfs_io::source::local(), path));
//! let model = modelfs_onnx::open(path, &Default::default()).unwrap();
//! assert!(model.tensor(&[b"half".to_vec()]).is_ok());
//! ```
#![deny(clippy::undocumented_unsafe_blocks)]

// The layers below, under the names every module of modelfs uses (`crate::source::ReadAt`).
pub(crate) use modelfs_io::{codec, source};
pub(crate) use modelfs_model as model;

mod proto;
mod tensor;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::codec::wire::{packed_varints, Field, Value};
use crate::model::flat::{Flat, JsonDocument};
use crate::model::{DType, Model, OpenError, ReaderOptions, TensorMeta};
use crate::source::{MemSource, ReadAt, ReadCtx, ReadExt, Storage};
use proto::{Data, TensorProto};
use tensor::OnnxTensor;

const SUFFIX: &str = ".onnx";
/// The root document.
const METADATA: &[u8] = b"__metadata__.json";
/// Largest `.onnx` file walked: protobuf itself stops at 2 GB (larger models keep their
/// weights as external data).
const MAX_MODEL: u64 = 1 << 31;

/// Whether `path` is an ONNX model: a `.onnx` file.
pub fn is_source(fs: &dyn Storage, path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with(SUFFIX))
        && fs.is_file(path)
}

/// The ONNX model `path` names: the `.onnx` file itself, or the one `.onnx` file of a
/// directory (a model saved with its external data beside it).
pub fn model_file(fs: &dyn Storage, path: &Path) -> Option<PathBuf> {
    if is_source(fs, path) {
        return Some(path.to_path_buf());
    }
    let entries = fs.list(path).ok()?;
    let mut found = entries.iter().filter(|(n, k)| {
        *k == crate::source::EntryKind::File && n.to_str().is_some_and(|n| n.ends_with(SUFFIX))
    });
    match (found.next(), found.next()) {
        (Some((n, _)), None) => Some(path.join(n)),
        _ => None,
    }
}

/// The model of the `.onnx` file at `path`.
pub fn open(path: &Path, opts: &ReaderOptions) -> Result<Arc<dyn Model>, OpenError> {
    let file = opts.open_file(path)?;
    let size = file.size();
    if size > MAX_MODEL {
        let what = format!("{size} bytes: larger than protobuf allows (2 GB)");
        return Err(OpenError::unreadable(
            path,
            crate::model::ModelError::data(file.name(), what),
        ));
    }
    let dir = path.parent().unwrap_or(Path::new("")).to_path_buf();
    // The file's bytes are walked once (a mapped local file: in place), every tensor placed.
    let walked = file.with_bytes(ReadCtx::metadata(), 0, size as usize, |buf| {
        proto::parse(buf).map(|info| {
            let made: Vec<OnnxTensor> = info
                .tensors
                .iter()
                .map(|t| make(t, buf, &file, &dir, opts))
                .collect();
            (info, made)
        })
    });
    let (info, made) = walked
        .map_err(|e| OpenError::unreadable(path, e))?
        .map_err(|e| OpenError::unreadable(path, crate::model::ModelError::data(file.name(), e)))?;
    let mut model = Flat::new("onnx");
    for (t, made) in info.tensors.iter().zip(made) {
        let key = t.name.strip_prefix('/').unwrap_or(&t.name);
        model.add(key, Arc::new(made), file.name());
    }
    for n in &info.notes {
        model.detail(n.clone());
    }
    let doc = serde_json::json!({
        "ir_version": info.ir_version,
        "producer": info.producer,
        "producer_version": info.producer_version,
        "graph": info.graph,
        "opsets": info.opsets.iter().map(|(d, v)| serde_json::json!({"domain": d, "version": v})).collect::<Vec<_>>(),
        "inputs": info.inputs,
        "outputs": info.outputs,
    });
    model.add_document(METADATA, Arc::new(JsonDocument::new(doc, file.mtime())));
    Ok(Arc::new(model))
}

/// The modelfs type of ONNX `data_type`, its bytes per stored element (0: two a byte).
fn dtype(data_type: i32) -> Option<(DType, u8)> {
    Some(match data_type {
        1 => (DType::F32, 4),
        2 => (DType::U8, 1),
        3 => (DType::I8, 1),
        4 => (DType::U16, 2),
        5 => (DType::I16, 2),
        6 => (DType::I32, 4),
        7 => (DType::I64, 8),
        9 => (DType::Bool, 1),
        10 => (DType::F16, 2),
        11 => (DType::F64, 8),
        12 => (DType::U32, 4),
        13 => (DType::U64, 8),
        14 => (DType::C64, 8),
        15 => (DType::C128, 16),
        16 => (DType::BF16, 2),
        17 => (DType::Float8(25), 1),
        18 => (DType::Float8(26), 1),
        19 => (DType::Float8(24), 1),
        20 => (DType::Float8(28), 1),
        21 => (DType::UInt4, 0),
        22 => (DType::Int4, 0),
        23 => (DType::Float8(33), 0),
        _ => return None,
    })
}

/// The tensor `t` of the model in `file` (whose bytes are `buf`, in directory `dir`): its
/// elements where they are, or why they cannot be read.
fn make(
    t: &TensorProto,
    buf: &[u8],
    file: &Arc<dyn ReadAt>,
    dir: &Path,
    opts: &ReaderOptions,
) -> OnnxTensor {
    let shape: Option<Vec<u64>> = t.dims.iter().map(|&d| u64::try_from(d).ok()).collect();
    let known = dtype(t.data_type);
    let (dt, width) = known.unwrap_or((DType::Opaque(t.data_type), 1));
    let mut meta = TensorMeta {
        mtime: file.mtime(),
        ..TensorMeta::new(
            t.name.clone().into_bytes(),
            dt,
            shape.clone().unwrap_or_default(),
            "onnx",
        )
    };
    meta.extra
        .insert("onnx_data_type".into(), t.data_type.into());
    let fail = |mut meta: TensorMeta, why: String| OnnxTensor {
        meta: {
            meta.problem = Some(why);
            meta
        },
        file: Arc::new(MemSource::new(file.name(), Vec::new())),
        begin: 0,
        in_place: false,
        identity: None,
    };
    if let Some(p) = &t.problem {
        return fail(meta, p.clone());
    }
    if known.is_none() {
        return fail(meta, format!("ONNX data type {} is not read", t.data_type));
    }
    let Some(shape) = shape else {
        return fail(meta, format!("negative dimension in {:?}", t.dims));
    };
    let Some(count) = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d)) else {
        return fail(meta, format!("{shape:?} overflows"));
    };
    // Bytes the elements take as stored: 4-bit types two a byte.
    let stored = match width {
        0 => Some(count.div_ceil(2)),
        w => count.checked_mul(u64::from(w)),
    };
    let Some(stored) = stored else {
        return fail(meta, format!("{shape:?} overflows"));
    };
    let placed = match &t.data {
        Data::Raw(r) => Ok((Arc::clone(file), r.start as u64, (r.end - r.start) as u64)),
        Data::External {
            location,
            offset,
            length,
        } => {
            meta.extra
                .insert("location".into(), location.clone().into());
            external(dir, location, *offset, *length, opts)
        }
        Data::Typed { field, values } => {
            return match typed(buf, *field, values, dt, count) {
                Ok(bytes) => OnnxTensor {
                    meta,
                    file: Arc::new(MemSource::new(file.name(), bytes)),
                    begin: 0,
                    in_place: false,
                    identity: None,
                },
                Err(why) => fail(meta, why),
            };
        }
        Data::None if count == 0 => {
            Ok((Arc::new(MemSource::new(file.name(), Vec::new())) as _, 0, 0))
        }
        Data::None => return fail(meta, "no data".into()),
    };
    let (src, begin, len) = match placed {
        Ok(p) => p,
        Err(why) => return fail(meta, why),
    };
    if len != stored {
        return fail(
            meta,
            format!("{len} bytes of data where {shape:?} takes {stored}"),
        );
    }
    if begin.checked_add(len).is_none_or(|e| e > src.size()) {
        return fail(
            meta,
            format!("bytes {begin}..+{len} lie past the end of {}", src.name()),
        );
    }
    if width == 0 {
        // Unpacked (bounded by the bytes they came from, `stored`).
        return match src.read(ReadCtx::none(), begin, len as usize) {
            Ok(b) => OnnxTensor {
                meta,
                file: Arc::new(MemSource::new(src.name(), unpack4(&b, count, dt))),
                begin: 0,
                in_place: false,
                identity: None,
            },
            Err(e) => fail(meta, e.to_string()),
        };
    }
    let identity = crate::source::identity_string(&*src).map(|f| format!("{f}:{begin}"));
    OnnxTensor {
        meta,
        file: src,
        begin,
        in_place: true,
        identity,
    }
}

/// The external data file `location` beside the model: opened when it stays inside `dir`,
/// with `(file, offset, length)` (`length` the rest of the file when not given).
fn external(
    dir: &Path,
    location: &str,
    offset: u64,
    length: Option<u64>,
    opts: &ReaderOptions,
) -> Result<(Arc<dyn ReadAt>, u64, u64), String> {
    let file = crate::source::open_inside(&*opts.storage, dir, location).map_err(|e| match e {
        crate::source::Outside::Source(e) => e.to_string(),
        e => format!("external data location {location:?} {e}"),
    })?;
    let len = match length {
        Some(l) => l,
        None => file.size().saturating_sub(offset),
    };
    Ok((file, offset, len))
}

/// The elements of a typed field, little-endian in `dt`'s width: `count` of them, or why not.
/// Allocation is bounded by the field's bytes in the file.
fn typed(
    buf: &[u8],
    field: u32,
    values: &[Field],
    dt: DType,
    count: u64,
) -> Result<Vec<u8>, String> {
    let mut raw: Vec<u64> = Vec::new();
    let fixed = match field {
        4 => Some(4),
        10 => Some(8),
        _ => None,
    };
    for f in values {
        match (f.value, fixed) {
            (Value::Bytes { start, end }, Some(w)) => {
                let b = &buf[start..end];
                if b.len() % w != 0 {
                    return Err(format!("a packed field of {} bytes", b.len()));
                }
                for c in b.chunks_exact(w) {
                    raw.push(match w {
                        4 => u64::from(u32::from_le_bytes(c.try_into().unwrap_or_default())),
                        _ => u64::from_le_bytes(c.try_into().unwrap_or_default()),
                    });
                }
            }
            (Value::Bytes { start, end }, None) => {
                for v in packed_varints(&buf[start..end]) {
                    raw.push(v.map_err(|e| e.to_string())?);
                }
            }
            (Value::Fixed32(v), Some(4)) => raw.push(u64::from(v)),
            (Value::Fixed64(v), Some(8)) => raw.push(v),
            (Value::Varint(v), None) => raw.push(v),
            _ => return Err(format!("field {field} of an unexpected wire type")),
        }
    }
    // 4-bit types: each int32 value holds a byte of two elements.
    if matches!(dt, DType::Int4 | DType::UInt4 | DType::Float8(33)) {
        let bytes: Vec<u8> = raw.iter().map(|&v| v as u8).collect();
        if bytes.len() as u64 != count.div_ceil(2) {
            return Err(format!(
                "{} packed bytes where {count} elements take {}",
                bytes.len(),
                count.div_ceil(2)
            ));
        }
        return Ok(unpack4(&bytes, count, dt));
    }
    // Complex numbers are two values each.
    let per = match dt {
        DType::C64 | DType::C128 => 2,
        _ => 1,
    };
    if raw.len() as u64 != count.saturating_mul(per) {
        return Err(format!(
            "{} values where {count} elements are due",
            raw.len()
        ));
    }
    let width = match dt {
        DType::C64 => 4,
        DType::C128 => 8,
        d => d.elem_size().unwrap_or(1),
    };
    let mut out = Vec::with_capacity(raw.len() * width);
    for v in raw {
        out.extend_from_slice(&v.to_le_bytes()[..width]);
    }
    Ok(out)
}

/// `count` 4-bit elements stored two a byte (the low nibble first), one a byte: sign-extended
/// for `Int4`, as they are for `UInt4` and float4.
fn unpack4(bytes: &[u8], count: u64, dt: DType) -> Vec<u8> {
    let mut out = Vec::with_capacity(count.min(bytes.len() as u64 * 2) as usize);
    for i in 0..count.min(bytes.len() as u64 * 2) {
        let b = bytes[(i / 2) as usize];
        let n = if i % 2 == 0 { b & 0x0f } else { b >> 4 };
        out.push(match dt {
            DType::Int4 => ((n << 4) as i8 >> 4) as u8,
            _ => n,
        });
    }
    out
}

/// The fuzz target's entry (`fuzz/fuzz_targets/onnx.rs`): `data` as a `.onnx` file, walked and
/// every tensor's first and last elements read. Any `Err` is fine; a panic, a hang or a huge
/// allocation is a bug.
#[cfg(any(test, feature = "testkit"))]
pub fn fuzz_file(data: &[u8]) {
    let Ok(info) = proto::parse(data) else {
        return;
    };
    let file: Arc<dyn ReadAt> = Arc::new(MemSource::new("f.onnx", data.to_vec()));
    let opts = ReaderOptions::default();
    for t in &info.tensors {
        // External data is never followed here: the directory is nowhere.
        if matches!(t.data, Data::External { .. }) {
            continue;
        }
        let made = make(t, data, &file, Path::new("/nonexistent"), &opts);
        crate::model::testing::fuzz_touch(&made);
    }
}

#[cfg(test)]
mod real_tests;
#[cfg(test)]
mod tests;
