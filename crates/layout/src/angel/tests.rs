//! Round trips: the bytes of every Angel layout, decoded with the Angel reader's decoders
//! (`crate::angel`, which shares no code with the encoders), give the tensor back exactly.

use std::sync::Arc;

use super::*;
use crate::angel_reader::{self as angel, MatrixMeta, PartInput, PartMeta, RowType};
use crate::cache::ChunkCache;
use crate::model::{DType, ModelResult, SparseRows, Tensor};
use crate::source::{MemSource, ReadCtx};
use crate::testing::MemTensor;

/// The content of Angel format `format`, `None` when it cannot show the tensor.
fn open(
    format: AngelFormat,
    t: Arc<dyn Tensor>,
    ctx: &Arc<LayoutCtx>,
) -> Option<Arc<dyn FileContent>> {
    crate::content(crate::Layout::Angel(format), t, ctx).ok()
}

/// A dense in-memory tensor.
fn mem(dtype: DType, shape: &[u64], data: Vec<u8>) -> Arc<dyn Tensor> {
    MemTensor::new(dtype, shape, data).arc()
}

fn ctx(sep: &str) -> Arc<LayoutCtx> {
    ctx_with(sep, 1 << 30)
}

fn ctx_with(sep: &str, max_dense: u64) -> Arc<LayoutCtx> {
    Arc::new(LayoutCtx {
        sep: sep.into(),
        max_dense,
        ..LayoutCtx::new(vec![], ChunkCache::new(64 << 20))
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
        F32 | F64 | I32 | I64 | QInt32 => src.to_vec(),
        F16 => half::f16::from_bits(u16::from_le_bytes([src[0], src[1]]))
            .to_f32()
            .to_le_bytes()
            .to_vec(),
        BF16 => half::bf16::from_bits(u16::from_le_bytes([src[0], src[1]]))
            .to_f32()
            .to_le_bytes()
            .to_vec(),
        I8 | QInt8 | Int4 | Int2 => (src[0] as i8 as i32).to_le_bytes().to_vec(),
        U8 | QUInt8 | UInt4 | UInt2 => (src[0] as i32).to_le_bytes().to_vec(),
        Bool => ((src[0] != 0) as i32).to_le_bytes().to_vec(),
        I16 | QInt16 => (i16::from_le_bytes([src[0], src[1]]) as i32)
            .to_le_bytes()
            .to_vec(),
        U16 | QUInt16 => (u16::from_le_bytes([src[0], src[1]]) as i32)
            .to_le_bytes()
            .to_vec(),
        U32 => (u32::from_le_bytes(src.try_into().unwrap()) as i64)
            .to_le_bytes()
            .to_vec(),
        U64 => src.to_vec(),
        d => panic!("{d:?}"),
    }
}

/// Equal values; NaN equals any NaN only in text (Java prints every NaN as `NaN`), binary
/// formats keep the bits.
fn same_value(vt: AngelValue, a: &[u8], b: &[u8], text: bool) -> bool {
    let nan = |x: f64| x.is_nan() && text;
    match vt {
        AngelValue::Float => {
            let (x, y) = (
                f32::from_le_bytes(a.try_into().unwrap()),
                f32::from_le_bytes(b.try_into().unwrap()),
            );
            x.to_bits() == y.to_bits() || (nan(x as f64) && nan(y as f64))
        }
        AngelValue::Double => {
            let (x, y) = (
                f64::from_le_bytes(a.try_into().unwrap()),
                f64::from_le_bytes(b.try_into().unwrap()),
            );
            x.to_bits() == y.to_bits() || (nan(x) && nan(y))
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

/// Round trip of a dense tensor through every Angel layout (all eight must be shown).
fn round_trip_dense(t: Arc<dyn Tensor>, sep: &str) {
    let ctx = format!("{:?} {:?}", t.meta().dtype, t.meta().shape);
    assert_eq!(round_trip_shown(&ctx, t, sep), AngelFormat::ALL.len());
}

/// Round trip of a dense tensor through every Angel layout shown for it; returns how many.
fn round_trip_shown(what: &str, t: Arc<dyn Tensor>, sep: &str) -> usize {
    let m = t.meta().clone();
    let w = m.dtype.elem_size().unwrap();
    let (rows, cols) = m.rows_cols().unwrap();
    let n = (rows * cols) as usize;
    let mut all = vec![0u8; n * w];
    t.read_elements(ReadCtx::none(), 0, &mut all).unwrap();
    let vt = AngelValue::of(m.dtype).unwrap();
    let mut shown = 0;
    for format in AngelFormat::ALL {
        let Some(f) = open(format, t.clone(), &ctx(sep)) else {
            continue;
        };
        shown += 1;
        let bytes = file_bytes(&*f);
        if cols == 0 {
            // No columns, no records (and an Angel meta with `col` 0 means "unbounded").
            assert!(bytes.is_empty(), "{what}: {format:?}");
            continue;
        }
        let is_column = matches!(format, AngelFormat::TextColumn | AngelFormat::BinaryColumn);
        let rows_meta: Vec<(u32, u64)> = (0..rows as u32)
            .map(|r| (r, if is_column { 0 } else { cols }))
            .collect();
        let s = decode(format, &*t, bytes, sep, rows_meta, cols);
        let ctx = format!("{what}: {format:?} {:?} {:?} sep {sep:?}", m.dtype, m.shape);
        assert_eq!(s.rows, (0..rows).collect::<Vec<_>>(), "{ctx}");
        assert_eq!(s.nnz(), n as u64, "{ctx}");
        for e in 0..n {
            assert_eq!(s.cols[e], (e as u64 % cols) as i64, "{ctx}");
            let want = angel_value(m.dtype, &all[e * w..(e + 1) * w]);
            let got = &s.values[e * vt.width()..(e + 1) * vt.width()];
            assert!(
                same_value(vt, &want, got, format.is_text()),
                "{ctx}: element {e}: {want:?} vs {got:?}"
            );
        }
    }
    shown
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
    round_trip_dense(mem(DType::F32, &[3, 4], le(&f32s, f32::to_le_bytes)), ",");
    round_trip_dense(
        mem(DType::F32, &[2, 3, 2], le(&f32s, f32::to_le_bytes)),
        "\t",
    );
    let f64s = [0.1 + 0.2, 5e-324, 1e300, -0.0, f64::NAN, 2e23];
    round_trip_dense(mem(DType::F64, &[2, 3], le(&f64s, f64::to_le_bytes)), ",");
    round_trip_dense(mem(DType::F64, &[6], le(&f64s, f64::to_le_bytes)), "::");
    round_trip_dense(mem(DType::F32, &[], le(&[2.5f32], f32::to_le_bytes)), ",");
    let i32s = le(&[i32::MIN, -1, 0, 1, i32::MAX], i32::to_le_bytes);
    let i64s = le(&[i64::MIN, -1, 0, i64::MAX], i64::to_le_bytes);
    let (u64s, u32s) = (
        le(&[u64::MAX, 7], u64::to_le_bytes),
        le(&[u32::MAX, 7], u32::to_le_bytes),
    );
    let (i16s, u16s) = (
        le(&[i16::MIN, 5], i16::to_le_bytes),
        le(&[u16::MAX, 5], u16::to_le_bytes),
    );
    round_trip_dense(mem(DType::I32, &[5], i32s), ",");
    round_trip_dense(mem(DType::I64, &[2, 2], i64s), ",");
    round_trip_dense(mem(DType::U64, &[2], u64s), ",");
    round_trip_dense(mem(DType::U32, &[2], u32s), ",");
    round_trip_dense(mem(DType::I16, &[2], i16s), ",");
    round_trip_dense(mem(DType::U16, &[2], u16s), ",");
    let h: Vec<u16> = [1.0f32, -0.0, 65504.0, 6e-8, f32::INFINITY, 0.333]
        .iter()
        .map(|&x| half::f16::from_f32(x).to_bits())
        .collect();
    round_trip_dense(mem(DType::F16, &[2, 3], le(&h, u16::to_le_bytes)), ",");
    let b: Vec<u16> = [1.0f32, -3.0e38, 1e-40, 0.333]
        .iter()
        .map(|&x| half::bf16::from_f32(x).to_bits())
        .collect();
    round_trip_dense(mem(DType::BF16, &[1, 2, 2], le(&b, u16::to_le_bytes)), ",");
    round_trip_dense(mem(DType::I8, &[3], vec![0x80, 0xff, 0x7f]), ",");
    round_trip_dense(mem(DType::U8, &[3], vec![0x80, 0xff, 0x7f]), ",");
    round_trip_dense(mem(DType::Bool, &[2], vec![1, 0]), ",");
    // Enough elements for several text chunks.
    let big: Vec<f32> = (0..20000).map(|i| (i as f32).sin() * 1e-3).collect();
    round_trip_dense(
        mem(DType::F32, &[100, 200], le(&big, f32::to_le_bytes)),
        ",",
    );
}

#[test]
fn unsupported_dtypes_and_sparse_value_layouts_are_not_shown() {
    let c = mem(DType::C64, &[1], vec![0; 8]);
    assert!(open(AngelFormat::ColIdValueText, c, &ctx(",")).is_none());
    let s = mem(DType::Str, &[1], vec![]);
    assert!(open(AngelFormat::ValueBinary, s, &ctx(",")).is_none());
}

#[test]
fn byte_vectors_of_the_spec() {
    let t = mem(DType::F32, &[2], le(&[1.0f32, -2.5], f32::to_le_bytes));
    let f = open(AngelFormat::ValueBinary, t.clone(), &ctx(",")).unwrap();
    assert_eq!(file_bytes(&*f), [0x3f, 0x80, 0, 0, 0xc0, 0x20, 0, 0]);
    let f = open(AngelFormat::ColIdValueText, t.clone(), &ctx(",")).unwrap();
    assert_eq!(file_bytes(&*f), b"0,1.0\n1,-2.5\n");
    let f = open(AngelFormat::TextColumn, t, &ctx(",")).unwrap();
    assert_eq!(file_bytes(&*f), b"0,1.0\n1,-2.5\n");
    let t = mem(DType::F32, &[2, 1], le(&[0.5f32, -1.0], f32::to_le_bytes));
    let f = open(AngelFormat::BinaryColumn, t, &ctx(",")).unwrap();
    assert_eq!(
        file_bytes(&*f),
        [0, 0, 0, 0, 0x3f, 0, 0, 0, 0xbf, 0x80, 0, 0]
    );
}

mod sources;
mod tf_fixtures;

/// A tall matrix: its column records span several text chunks (chunks start and end inside a
/// line) and binary column reads start inside a record.
pub(super) fn tall_dense() -> Arc<dyn Tensor> {
    let v: Vec<f32> = (0..3 * 40_000).map(|i| (i as f32 * 0.37).cos()).collect();
    mem(DType::F32, &[40_000, 3], le(&v, f32::to_le_bytes))
}

/// A sparse matrix with many saved rows and few columns (column records span chunks).
pub(super) fn tall_sparse() -> Arc<dyn Tensor> {
    let (mut rows, mut row_ptr, mut cols, mut values) = (vec![], vec![0u64], vec![], vec![]);
    for r in 0..50_000u64 {
        if r % 7 == 3 {
            continue;
        }
        rows.push(r * 2);
        for c in [1i64, 4, 9] {
            if (r + c as u64) % 3 != 0 {
                cols.push(c);
                values.extend_from_slice(&((r as f64) * 0.1 - c as f64).to_le_bytes());
            }
        }
        row_ptr.push(cols.len() as u64);
    }
    let s = SparseRows {
        rows,
        row_ptr,
        cols,
        values,
    };
    MemTensor::sparse(DType::F64, 100_000, 12, s).arc()
}

#[test]
fn tall_columns_span_chunks() {
    round_trip_dense(tall_dense(), ",");
    sources::round_trip_sparse("tall", tall_sparse());
    // A chunk boundary inside a line: the bytes around it, read alone, match the whole file.
    let f = open(AngelFormat::TextColumn, tall_dense(), &ctx(",")).unwrap();
    let whole = file_bytes(&*f);
    for off in [0usize, 100_000, 300_000, whole.len() - 5] {
        let mut b = vec![0u8; 4096];
        let n = f.read_at(off as u64, &mut b).unwrap();
        assert_eq!(&b[..n], &whole[off..(off + 4096).min(whole.len())]);
    }
}

/// ColIdValueText of a dense f32 matrix renders at about the rate of `txt`:
/// `cargo test --release --lib layout::angel::tests::colid_throughput -- --ignored --nocapture`
#[test]
#[ignore]
fn colid_throughput() {
    use crate::text::ChunkSource;
    let n = 4_000_000u64;
    let vals = crate::testing::pseudo_random_f32(n);
    let t: Arc<dyn Tensor> = MemTensor::f32(&[2000, 2000], &vals).arc();
    let time = |name: &str, src: &dyn ChunkSource| {
        let mut out = Vec::new();
        let (mut bytes, start) = (0, std::time::Instant::now());
        for i in 0..src.num_chunks() {
            out.clear();
            src.render(ReadCtx::none(), i, &mut out).unwrap();
            bytes += out.len();
        }
        let dt = start.elapsed().as_secs_f64();
        println!(
            "{name}: {:.1} ns/elem, {:.0} MB/s",
            dt * 1e9 / n as f64,
            bytes as f64 / dt / 1e6
        );
        dt
    };
    let txt = crate::gentext::ElementLines {
        tensor: t.clone(),
        elements: n,
        cols: 1,
        sep: b",".to_vec(),
    };
    let t_txt = time("txt", &txt);
    for format in [AngelFormat::ColIdValueText, AngelFormat::TextColumn] {
        let records = super::records::Records::dense(t.clone(), AngelValue::Float, 2000);
        let src = super::text::AngelText::new(format, records, ",").unwrap();
        let t_angel = time(format.name(), &src);
        println!("{} / txt = {:.2}", format.name(), t_angel / t_txt);
    }
}

#[test]
fn sparse_column_formats_need_the_dense_view() {
    let t = tall_sparse(); // 100 000 × 12 f64: 9.6 MB dense
    let small = ctx_with(",", 9_600_000 - 1);
    for format in AngelFormat::ALL {
        let shown = open(format, t.clone(), &small).is_some();
        let row_format = !matches!(
            format,
            AngelFormat::TextColumn
                | AngelFormat::BinaryColumn
                | AngelFormat::ValueText
                | AngelFormat::ValueBinary
        );
        assert_eq!(shown, row_format, "{format:?}");
    }
    let exact = ctx_with(",", 9_600_000);
    assert!(open(AngelFormat::BinaryColumn, t, &exact).is_some());
}

/// Counts the elements read through it.
struct Counting(Arc<dyn Tensor>, std::sync::atomic::AtomicU64);

impl Tensor for Counting {
    fn meta(&self) -> &crate::model::TensorMeta {
        self.0.meta()
    }
    fn fill_elements(&self, ctx: &ReadCtx, first: u64, out: &mut [u8]) -> ModelResult {
        let n = out.len() as u64 / self.0.meta().dtype.elem_size().unwrap() as u64;
        self.1.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        self.0.read_elements(ctx, first, out)
    }
}

#[test]
fn reads_touch_only_what_they_need() {
    use std::sync::atomic::Ordering::Relaxed;
    let counting = Arc::new(Counting(tall_dense(), Default::default()));
    let t: Arc<dyn Tensor> = counting.clone();
    // Binary: 8 bytes in the middle of a 40 000-value column record (straddling 3 values)
    // read 3 elements.
    let f = open(AngelFormat::BinaryColumn, t.clone(), &ctx(",")).unwrap();
    let record = 4 + 40_000 * 4;
    let mut b = [0u8; 8];
    assert_eq!(f.read_at(record + 4 + 1000 * 4 + 2, &mut b).unwrap(), 8);
    assert_eq!(counting.1.load(Relaxed), 3);
    // Text: the index renders every chunk once (in the shared cache's counter); then a small
    // read renders at most the two chunks it straddles, and a second file object for the same
    // tensor and format reuses the index.
    let c = ctx(",");
    let f = open(AngelFormat::TextColumn, t.clone(), &c).unwrap();
    let size = f.size().unwrap();
    let chunks = c.cache.rendered_chunks();
    assert_eq!(
        chunks,
        (3 * 40_001u64).div_ceil(crate::text::CHUNK_ELEMENTS)
    );
    counting.1.store(0, Relaxed);
    let mut b = [0u8; 100];
    f.read_at(size / 2, &mut b).unwrap();
    assert!(c.cache.rendered_chunks() - chunks <= 2);
    assert!(counting.1.load(Relaxed) <= 2 * crate::text::CHUNK_ELEMENTS);
    let again = open(AngelFormat::TextColumn, t.clone(), &c).unwrap();
    let before = c.cache.rendered_chunks();
    assert_eq!(again.size().unwrap(), size);
    assert_eq!(c.cache.rendered_chunks(), before);
    // Another separator is another file (same size here: one byte either way).
    let tab = Arc::new(LayoutCtx {
        sep: "\t".into(),
        max_dense: 1 << 30,
        layouts: vec![],
        sparse_default: false,
        cache: c.cache.clone(),
        rows: c.rows.clone(),
        angel_format: None,
        faults: Default::default(),
    });
    let f = open(AngelFormat::TextColumn, t, &tab).unwrap();
    assert_eq!(f.size().unwrap(), size);
    assert_eq!(c.cache.rendered_chunks(), before + chunks);
    f.read_at(size - 100, &mut b).unwrap();
    assert!(b.contains(&b'\t') && !b.contains(&b','));
}
