//! Typed element access shared by the generic and the Angel encoders: reads a dense tensor's
//! elements by range in blocks (one scratch buffer, no per-element allocation) and hands each
//! out as a `Value`.

use crate::model::{DType, Entries, ModelError, RequestError, SparseRows, SparseShape, Tensor};

use super::{num, InconsistentRows, LayoutError};
use crate::source::ReadCtx;

/// One element, widened to a type that holds every value of its dtype exactly.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    /// float16 bits.
    F16(u16),
    /// bfloat16 bits.
    BF16(u16),
    F32(f32),
    F64(f64),
    /// Signed integers (int8..int64, qint*, int4, int2).
    I64(i64),
    /// Unsigned integers (uint8..uint64, quint*, uint4, uint2, float8 raw bytes).
    U64(u64),
    Bool(bool),
    C64(f32, f32),
    C128(f64, f64),
}

impl Value {
    /// True for a zero (libsvm leaves zeros out). NaN is not zero; -0.0 is.
    pub(crate) fn is_zero(&self) -> bool {
        match *self {
            Value::F16(b) | Value::BF16(b) => b & 0x7fff == 0,
            Value::F32(x) => x == 0.0,
            Value::F64(x) => x == 0.0,
            Value::I64(x) => x == 0,
            Value::U64(x) => x == 0,
            Value::Bool(b) => !b,
            Value::C64(r, i) => r == 0.0 && i == 0.0,
            Value::C128(r, i) => r == 0.0 && i == 0.0,
        }
    }

    /// As f32 (float16/bfloat16 widen exactly; the Angel "float" of small types).
    pub(crate) fn to_f32(self) -> f32 {
        match self {
            Value::F16(b) => half::f16::from_bits(b).to_f32(),
            Value::BF16(b) => half::bf16::from_bits(b).to_f32(),
            Value::F32(x) => x,
            Value::F64(x) => x as f32,
            Value::I64(x) => x as f32,
            Value::U64(x) => x as f32,
            Value::Bool(b) => b as u8 as f32,
            Value::C64(r, _) => r,
            Value::C128(r, _) => r as f32,
        }
    }

    /// As f64 (exact for every real float dtype).
    pub(crate) fn to_f64(self) -> f64 {
        match self {
            Value::F16(b) => half::f16::from_bits(b).to_f64(),
            Value::BF16(b) => half::bf16::from_bits(b).to_f64(),
            Value::F32(x) => x as f64,
            Value::F64(x) => x,
            Value::I64(x) => x as f64,
            Value::U64(x) => x as f64,
            Value::Bool(b) => b as u8 as f64,
            Value::C64(r, _) => r as f64,
            Value::C128(r, _) => r,
        }
    }

    /// Writes the generic-layout text (SPEC §3 "Number text").
    #[inline]
    pub(crate) fn write_py(&self, out: &mut Vec<u8>) {
        match *self {
            Value::F16(b) => num::write_f16_py(b, out),
            Value::BF16(b) => num::write_bf16_py(b, out),
            Value::F32(x) => num::write_f32_py(x, out),
            Value::F64(x) => num::write_f64_py(x, out),
            Value::I64(x) => num::write_i64(x, out),
            Value::U64(x) => num::write_u64(x, out),
            Value::Bool(b) => out.push(if b { b'1' } else { b'0' }),
            Value::C64(r, i) => num::write_complex_py(r as f64, i as f64, true, out),
            Value::C128(r, i) => num::write_complex_py(r, i, false, out),
        }
    }
}

/// True when elements of `dtype` can be decoded as `Value`s.
pub(crate) fn has_values(dtype: DType) -> bool {
    !matches!(
        dtype,
        DType::Str | DType::Variant | DType::Opaque(_) | DType::Blocks(_)
    )
}

/// Decodes one element from its little-endian bytes (`bytes.len() == elem_size`).
#[inline]
pub(crate) fn decode(dtype: DType, b: &[u8]) -> Value {
    use DType::*;
    let a2 = |b: &[u8]| [b[0], b[1]];
    let a4 = |b: &[u8]| [b[0], b[1], b[2], b[3]];
    let a8 = |b: &[u8]| [b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]];
    match dtype {
        F16 => Value::F16(u16::from_le_bytes(a2(b))),
        BF16 => Value::BF16(u16::from_le_bytes(a2(b))),
        F32 => Value::F32(f32::from_le_bytes(a4(b))),
        F64 => Value::F64(f64::from_le_bytes(a8(b))),
        I8 | QInt8 | Int4 | Int2 => Value::I64(b[0] as i8 as i64),
        I16 | QInt16 => Value::I64(i16::from_le_bytes(a2(b)) as i64),
        I32 | QInt32 => Value::I64(i32::from_le_bytes(a4(b)) as i64),
        I64 => Value::I64(i64::from_le_bytes(a8(b))),
        U8 | QUInt8 | UInt4 | UInt2 => Value::U64(b[0] as u64),
        Float8(code) => Value::F32(crate::model::float8::widen(code, b[0])),
        U16 | QUInt16 => Value::U64(u16::from_le_bytes(a2(b)) as u64),
        U32 => Value::U64(u32::from_le_bytes(a4(b)) as u64),
        U64 => Value::U64(u64::from_le_bytes(a8(b))),
        Bool => Value::Bool(b[0] != 0),
        C64 => Value::C64(f32::from_le_bytes(a4(b)), f32::from_le_bytes(a4(&b[4..]))),
        C128 => Value::C128(f64::from_le_bytes(a8(b)), f64::from_le_bytes(a8(&b[8..]))),
        Str | Variant | Opaque(_) | Blocks(_) => Value::U64(0),
    }
}

/// Checks the CSR structure of sparse entries of `dtype` once, so encoders can then index
/// rows, columns and values without surprises. Returns the element size.
pub fn check_sparse(rows: &SparseRows, dtype: DType) -> Result<usize, LayoutError> {
    let es = dtype
        .elem_size()
        .ok_or_else(|| RequestError::NoFixedSize(dtype.name().into_owned()))
        .map_err(ModelError::from)?;
    let nnz = rows.cols.len();
    let ok = rows.row_ptr.len() == rows.rows.len() + 1
        && rows.row_ptr.first() == Some(&0)
        && rows.row_ptr.last() == Some(&(nnz as u64))
        && rows.row_ptr.windows(2).all(|w| w[0] <= w[1])
        && nnz.checked_mul(es) == Some(rows.values.len());
    if !ok {
        return Err(InconsistentRows.into());
    }
    Ok(es)
}

/// Checks a sparse shape once, so traversals can index it without surprises.
pub(crate) fn check_shape(shape: &SparseShape) -> Result<(), LayoutError> {
    let ok = shape.row_ptr.len() == shape.rows.len() + 1
        && shape.row_ptr.first() == Some(&0)
        && shape.row_ptr.windows(2).all(|w| w[0] <= w[1])
        && shape.rows.windows(2).all(|w| w[0] < w[1]);
    if !ok {
        return Err(InconsistentRows.into());
    }
    Ok(())
}

/// Stored rows whose first unit is before `unit`, where stored row `k` starts at unit
/// `k + row_ptr[k]` (its id) and each of its entries is one more unit (`libsvm`, Angel's row
/// formats: a row's id or an entry per unit).
pub(crate) fn rows_before_unit(shape: &SparseShape, unit: u64) -> usize {
    let (mut lo, mut hi) = (0usize, shape.rows.len());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if mid as u64 + shape.row_ptr[mid] < unit {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Calls `f` with entries `first..first + count` of a sparse tensor (read by range; their
/// count and value bytes checked) and the dtype's element size.
pub(crate) fn with_entries<R>(
    tensor: &dyn Tensor,
    ctx: &ReadCtx,
    first: u64,
    count: u64,
    f: impl FnOnce(&Entries, usize) -> R,
) -> Result<R, LayoutError> {
    let dtype = tensor.meta().dtype;
    let es = dtype
        .elem_size()
        .ok_or_else(|| RequestError::NoFixedSize(dtype.name().into_owned()))
        .map_err(ModelError::from)?;
    ENTRIES.with(|cell| {
        let mut got = cell.take();
        got.clear();
        let res = tensor
            .entries()
            .and_then(|s| s.read_entries(ctx, first, count, &mut got))
            .map_err(LayoutError::from)
            .and_then(|()| {
                let n = got.cols.len();
                if n as u64 != count || Some(got.values.len()) != n.checked_mul(es) {
                    return Err(LayoutError::from(InconsistentRows));
                }
                Ok(f(&got, es))
            });
        cell.set(got);
        res
    })
}

thread_local! {
    /// Entries of the chunk being rendered, kept between calls like `for_each_value`'s buffer.
    static ENTRIES: std::cell::Cell<Entries> = std::cell::Cell::new(Entries::default());
}

/// Elements per `read_elements` call: bounds the scratch buffer to ~1 MiB.
const BLOCK_ELEMENTS: u64 = 64 * 1024;

/// Calls `f(index, value)` for elements `first..first + count` of a dense tensor, reading them
/// in blocks into the thread's scratch buffer.
pub fn for_each_value<F: FnMut(u64, Value)>(
    tensor: &dyn Tensor,
    ctx: &ReadCtx,
    first: u64,
    count: u64,
    mut f: F,
) -> Result<(), ModelError> {
    // One buffer per thread, kept between calls: a fresh one per chunk cost a mapping, its
    // page faults and a memset every time. Taken out while in use, so a nested call (none
    // today) would get a buffer of its own rather than a borrow error.
    thread_local! {
        static SCRATCH: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
    }
    let mut scratch = SCRATCH.take();
    let result = values_with(tensor, ctx, first, count, &mut scratch, &mut f);
    SCRATCH.set(scratch);
    result
}

fn values_with<F: FnMut(u64, Value)>(
    tensor: &dyn Tensor,
    ctx: &ReadCtx,
    first: u64,
    count: u64,
    scratch: &mut Vec<u8>,
    f: &mut F,
) -> Result<(), ModelError> {
    let dtype = tensor.meta().dtype;
    let es = match dtype.elem_size() {
        Some(es) if has_values(dtype) => es,
        _ => return Err(RequestError::NoValues(dtype.name().into_owned()).into()),
    };
    let end = first.checked_add(count).ok_or(RequestError::OutOfRange {
        first,
        count,
        total: u64::MAX,
    })?;
    let mut at = first;
    while at < end {
        let n = (end - at).min(BLOCK_ELEMENTS);
        let need = n as usize * es;
        if scratch.len() < need {
            scratch.resize(need, 0);
        }
        let scratch = &mut scratch[..need];
        tensor.read_elements(ctx, at, scratch)?;
        macro_rules! each {
            ($w:expr, $conv:expr) => {
                for (k, b) in scratch.chunks_exact($w).enumerate() {
                    f(at + k as u64, $conv(b));
                }
            };
        }
        // One loop per dtype so the per-element work is a straight decode.
        match dtype {
            DType::F32 => each!(4, |b: &[u8]| Value::F32(f32::from_le_bytes([
                b[0], b[1], b[2], b[3]
            ]))),
            DType::F64 => each!(8, |b: &[u8]| Value::F64(f64::from_le_bytes([
                b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]
            ]))),
            _ => each!(es, |b: &[u8]| decode(dtype, b)),
        }
        at += n;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::MemTensor;

    #[test]
    fn reads_ranges_across_blocks() {
        let n = 150_000u64;
        let vals: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let t = MemTensor::f32(&[n], &vals);
        let mut got = Vec::new();
        for_each_value(&t, ReadCtx::none(), 60_000, 80_000, |i, v| got.push((i, v))).unwrap();
        assert_eq!(got.len(), 80_000);
        assert_eq!(got[0], (60_000, Value::F32(60_000.0)));
        assert_eq!(got[79_999], (139_999, Value::F32(139_999.0)));
        assert!(for_each_value(&t, ReadCtx::none(), n - 1, 2, |_, _| {}).is_err());
    }

    #[test]
    fn decodes_small_types() {
        assert_eq!(decode(DType::I8, &[0xff]), Value::I64(-1));
        assert_eq!(decode(DType::U16, &[0xff, 0xff]), Value::U64(65535));
        assert_eq!(decode(DType::Bool, &[2]), Value::Bool(true));
        assert!(Value::F32(-0.0).is_zero());
        assert!(!Value::F64(f64::NAN).is_zero());
        assert!(Value::BF16(0x8000).is_zero());
    }
}
