//! Round trips: the bytes of every Angel layout, decoded with the Angel reader's decoders
//! (`crate::angel`, which shares no code with the encoders), give the tensor back exactly.

use std::sync::Arc;

use super::*;
use crate::angel::{self, MatrixMeta, PartInput, PartMeta, RowType};
use crate::layout::cache::ChunkCache;
use crate::model::{DType, ModelError, SourceFormat, SparseRows, Tensor, TensorMeta};
use crate::source::MemSource;

/// A dense in-memory tensor.
struct Mem {
    meta: TensorMeta,
    data: Vec<u8>,
}

impl Mem {
    fn new(dtype: DType, shape: &[u64], data: Vec<u8>) -> Arc<dyn Tensor> {
        Arc::new(Mem {
            meta: TensorMeta {
                name: b"t".to_vec(),
                dtype,
                shape: shape.to_vec(),
                format: SourceFormat::TfCheckpoint,
                partitions: vec![],
                sparse: false,
                extra: Default::default(),
                problem: None,
                mtime: std::time::SystemTime::UNIX_EPOCH,
            },
            data,
        })
    }
}

impl Tensor for Mem {
    fn meta(&self) -> &TensorMeta {
        &self.meta
    }
    fn read_elements(&self, first: u64, out: &mut [u8]) -> Result<(), ModelError> {
        let w = self.meta.dtype.elem_size().unwrap();
        let at = first as usize * w;
        out.copy_from_slice(&self.data[at..at + out.len()]);
        Ok(())
    }
}

fn ctx(sep: &str) -> Arc<LayoutCtx> {
    Arc::new(LayoutCtx {
        sep: sep.into(),
        max_dense: 1 << 30,
        layouts: vec![],
        cache: Arc::new(ChunkCache::new(64 << 20)),
    })
}

/// The whole file, read in uneven pieces (exercises any-offset reads) and checked against one
/// big read and the reported size.
fn file_bytes(f: &dyn FileContent) -> Vec<u8> {
    let size = f.size().unwrap() as usize;
    let mut whole = vec![0u8; size + 10];
    assert_eq!(f.read_at(0, &mut whole).unwrap(), size);
    whole.truncate(size);
    let mut pieces = Vec::new();
    let mut off = 0;
    let mut step = 1;
    while off < size {
        let mut b = vec![0u8; step];
        let n = f.read_at(off as u64, &mut b).unwrap();
        assert!(n > 0);
        pieces.extend_from_slice(&b[..n]);
        off += n;
        step = step * 3 % 17 + 1;
    }
    assert_eq!(pieces, whole);
    whole
}

/// The value the reader must give back for element bytes `src` of `dtype` (Angel type LE).
fn angel_value(dtype: DType, src: &[u8]) -> Vec<u8> {
    use DType::*;
    match dtype {
        F32 | F64 | I32 | I64 => src.to_vec(),
        F16 => half::f16::from_bits(u16::from_le_bytes([src[0], src[1]]))
            .to_f32()
            .to_le_bytes()
            .to_vec(),
        BF16 => half::bf16::from_bits(u16::from_le_bytes([src[0], src[1]]))
            .to_f32()
            .to_le_bytes()
            .to_vec(),
        I8 => (src[0] as i8 as i32).to_le_bytes().to_vec(),
        U8 | Bool => (src[0] as i32).to_le_bytes().to_vec(),
        I16 => (i16::from_le_bytes([src[0], src[1]]) as i32)
            .to_le_bytes()
            .to_vec(),
        U16 => (u16::from_le_bytes([src[0], src[1]]) as i32)
            .to_le_bytes()
            .to_vec(),
        U32 => (u32::from_le_bytes(src.try_into().unwrap()) as i64)
            .to_le_bytes()
            .to_vec(),
        U64 => src.to_vec(),
        d => panic!("{d:?}"),
    }
}

fn same_value(vt: AngelValue, a: &[u8], b: &[u8]) -> bool {
    match vt {
        AngelValue::Float => {
            let (x, y) = (
                f32::from_le_bytes(a.try_into().unwrap()),
                f32::from_le_bytes(b.try_into().unwrap()),
            );
            x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
        }
        AngelValue::Double => {
            let (x, y) = (
                f64::from_le_bytes(a.try_into().unwrap()),
                f64::from_le_bytes(b.try_into().unwrap()),
            );
            x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
        }
        _ => a == b,
    }
}

/// Decodes `bytes` as one partition of `format` covering the whole tensor.
fn decode(
    format: AngelFormat,
    t: &dyn Tensor,
    bytes: Vec<u8>,
    sep: &str,
    rows_meta: Vec<(u32, u64)>,
    ncols_saved: u64,
) -> SparseRows {
    let m = t.meta();
    let vt = AngelValue::of(m.dtype).unwrap();
    let (rows, cols) = if m.sparse {
        (m.shape[0], m.shape[1])
    } else {
        m.rows_cols().unwrap()
    };
    let long = cols > i32::MAX as u64;
    // An Angel matrix with `col ≤ 0` is shown with i64::MAX columns (ids may be negative).
    let unbounded = cols >= i64::MAX as u64;
    let code = match vt {
        AngelValue::Double => 0,
        AngelValue::Float => 7,
        AngelValue::Long => 14,
        AngelValue::Int => 21,
    } + match (m.sparse, long) {
        (false, false) => 0,
        (false, true) => 2,
        (true, false) => 3,
        (true, true) => 5,
    };
    let is_column = matches!(format, AngelFormat::TextColumn | AngelFormat::BinaryColumn);
    let part = PartMeta {
        part_id: 0,
        start_row: 0,
        end_row: rows as u32,
        start_col: if unbounded { i64::MIN } else { 0 },
        end_col: if unbounded { i64::MAX } else { cols as i64 },
        save_row_num: 0,
        save_col_num: if is_column { ncols_saved } else { 0 },
        save_col_elem_num: if is_column { rows_meta.len() as u64 } else { 0 },
        file_name: "0".into(),
        offset: 0,
        length: bytes.len() as u64,
        rows: rows_meta,
    };
    let meta = MatrixMeta {
        matrix_name: None,
        format_class_name: format.class_name().into(),
        format,
        row_type: RowType::from_code(code).unwrap(),
        rows: rows as u32,
        col: if unbounded { -1 } else { cols as i64 },
        block_row: None,
        block_col: None,
        options: Default::default(),
        parts: vec![part.clone()],
    };
    let src = MemSource::new("0", bytes);
    let inp = PartInput {
        meta: &meta,
        part: &part,
        file: &src,
        sep,
        lines_before: 0,
    };
    angel::decode_partition(&inp).unwrap_or_else(|e| panic!("{format:?}: {e}"))
}

/// Round trip of a dense tensor through every Angel layout.
fn round_trip_dense(t: Arc<dyn Tensor>, sep: &str) {
    let m = t.meta().clone();
    let w = m.dtype.elem_size().unwrap();
    let (rows, cols) = m.rows_cols().unwrap();
    let n = (rows * cols) as usize;
    let mut all = vec![0u8; n * w];
    t.read_elements(0, &mut all).unwrap();
    let vt = AngelValue::of(m.dtype).unwrap();
    for format in AngelFormat::ALL {
        let f = open(format, t.clone(), &ctx(sep))
            .unwrap_or_else(|| panic!("{format:?} {:?}", m.dtype));
        let bytes = file_bytes(&*f);
        let is_column = matches!(format, AngelFormat::TextColumn | AngelFormat::BinaryColumn);
        let rows_meta: Vec<(u32, u64)> = (0..rows as u32)
            .map(|r| (r, if is_column { 0 } else { cols }))
            .collect();
        let s = decode(format, &*t, bytes, sep, rows_meta, cols);
        let ctx = format!("{format:?} {:?} {:?}", m.dtype, m.shape);
        assert_eq!(s.rows, (0..rows).collect::<Vec<_>>(), "{ctx}");
        assert_eq!(s.nnz(), n as u64, "{ctx}");
        for e in 0..n {
            assert_eq!(s.cols[e], (e as u64 % cols) as i64, "{ctx}");
            let want = angel_value(m.dtype, &all[e * w..(e + 1) * w]);
            let got = &s.values[e * vt.width()..(e + 1) * vt.width()];
            assert!(
                same_value(vt, &want, got),
                "{ctx}: element {e}: {want:?} vs {got:?}"
            );
        }
    }
}

fn le<T: Copy, const N: usize>(v: &[T], f: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    v.iter().flat_map(|&x| f(x)).collect()
}

#[test]
fn dense_round_trips() {
    let f32s = [
        0.0f32,
        -0.0,
        f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        1.0e-45,
        3.4028235e38,
        0.1,
        9.999e-4,
        1.0e7,
        9999999.0,
        -1.5,
    ];
    round_trip_dense(
        Mem::new(DType::F32, &[3, 4], le(&f32s, f32::to_le_bytes)),
        ",",
    );
    round_trip_dense(
        Mem::new(DType::F32, &[2, 3, 2], le(&f32s, f32::to_le_bytes)),
        "\t",
    );
    let f64s = [0.1 + 0.2, 5e-324, 1e300, -0.0, f64::NAN, 2e23];
    round_trip_dense(
        Mem::new(DType::F64, &[2, 3], le(&f64s, f64::to_le_bytes)),
        ",",
    );
    round_trip_dense(
        Mem::new(DType::F64, &[6], le(&f64s, f64::to_le_bytes)),
        "::",
    );
    round_trip_dense(
        Mem::new(DType::F32, &[], le(&[2.5f32], f32::to_le_bytes)),
        ",",
    );
    round_trip_dense(
        Mem::new(
            DType::I32,
            &[5],
            le(&[i32::MIN, -1, 0, 1, i32::MAX], i32::to_le_bytes),
        ),
        ",",
    );
    round_trip_dense(
        Mem::new(
            DType::I64,
            &[2, 2],
            le(&[i64::MIN, -1, 0, i64::MAX], i64::to_le_bytes),
        ),
        ",",
    );
    round_trip_dense(
        Mem::new(DType::U64, &[2], le(&[u64::MAX, 7], u64::to_le_bytes)),
        ",",
    );
    round_trip_dense(
        Mem::new(DType::U32, &[2], le(&[u32::MAX, 7], u32::to_le_bytes)),
        ",",
    );
    let h: Vec<u16> = [1.0f32, -0.0, 65504.0, 6e-8, f32::INFINITY, 0.333]
        .iter()
        .map(|&x| half::f16::from_f32(x).to_bits())
        .collect();
    round_trip_dense(Mem::new(DType::F16, &[2, 3], le(&h, u16::to_le_bytes)), ",");
    let b: Vec<u16> = [1.0f32, -3.0e38, 1e-40, 0.333]
        .iter()
        .map(|&x| half::bf16::from_f32(x).to_bits())
        .collect();
    round_trip_dense(
        Mem::new(DType::BF16, &[1, 2, 2], le(&b, u16::to_le_bytes)),
        ",",
    );
    round_trip_dense(Mem::new(DType::I8, &[3], vec![0x80, 0xff, 0x7f]), ",");
    round_trip_dense(Mem::new(DType::U8, &[3], vec![0x80, 0xff, 0x7f]), ",");
    round_trip_dense(Mem::new(DType::Bool, &[2], vec![1, 0]), ",");
    round_trip_dense(
        Mem::new(DType::I16, &[2], le(&[i16::MIN, 5], i16::to_le_bytes)),
        ",",
    );
    round_trip_dense(
        Mem::new(DType::U16, &[2], le(&[u16::MAX, 5], u16::to_le_bytes)),
        ",",
    );
    // Enough elements for several text chunks.
    let big: Vec<f32> = (0..20000).map(|i| (i as f32).sin() * 1e-3).collect();
    round_trip_dense(
        Mem::new(DType::F32, &[100, 200], le(&big, f32::to_le_bytes)),
        ",",
    );
}

#[test]
fn unsupported_dtypes_and_sparse_value_layouts_are_not_shown() {
    let c = Mem::new(DType::C64, &[1], vec![0; 8]);
    assert!(open(AngelFormat::ColIdValueText, c, &ctx(",")).is_none());
    let s = Mem::new(DType::Str, &[1], vec![]);
    assert!(open(AngelFormat::ValueBinary, s, &ctx(",")).is_none());
}

#[test]
fn byte_vectors_of_the_spec() {
    let t = Mem::new(DType::F32, &[2], le(&[1.0f32, -2.5], f32::to_le_bytes));
    let f = open(AngelFormat::ValueBinary, t.clone(), &ctx(",")).unwrap();
    assert_eq!(file_bytes(&*f), [0x3f, 0x80, 0, 0, 0xc0, 0x20, 0, 0]);
    let f = open(AngelFormat::ColIdValueText, t.clone(), &ctx(",")).unwrap();
    assert_eq!(file_bytes(&*f), b"0,1.0\n1,-2.5\n");
    let f = open(AngelFormat::TextColumn, t, &ctx(",")).unwrap();
    assert_eq!(file_bytes(&*f), b"0,1.0\n1,-2.5\n");
    let t = Mem::new(DType::F32, &[2, 1], le(&[0.5f32, -1.0], f32::to_le_bytes));
    let f = open(AngelFormat::BinaryColumn, t, &ctx(",")).unwrap();
    assert_eq!(
        file_bytes(&*f),
        [0, 0, 0, 0, 0x3f, 0, 0, 0, 0xbf, 0x80, 0, 0]
    );
}

mod sources;
