//! How two tensors of one dtype and shape differ (`modelfs diff`): changed elements, the
//! largest |b − a| and ‖b − a‖₂ / ‖a‖₂ over pairs of finite values, read a chunk of each at a
//! time on all cores. Floats compare as numpy's `==` does with NaN equal to NaN (−0.0 equals
//! 0.0); integers, complex and other fixed-width elements compare by their bytes; strings one
//! by one.

use std::sync::Arc;

use super::{read_run, runs, Crc};
use modelfs_io::source::ReadCtx;
use modelfs_layout::dense::dense_tensor;
use modelfs_layout::pool;
use modelfs_layout::{LayoutError, Requester};
use modelfs_model::{DType, ModelError, Tensor};

/// Bytes of elements per chunk of work (of each side).
const CHUNK: usize = 4 << 20;
/// Strings per chunk of work.
const STRING_CHUNK: u64 = 1 << 16;
/// Elements decoded at a time (they sit in L1 for the arithmetic).
const BLOCK: usize = 2048;
/// Independent accumulators (see `stats::partial`).
const LANES: usize = 8;

/// Differences over a run of elements; `merge` joins runs.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Delta {
    pub count: u64,
    pub changed: u64,
    /// Whether the elements are numbers (the norms below mean something).
    pub numeric: bool,
    pub max_abs: f64,
    /// Σ (b − a)² and Σ a², over pairs where both are finite.
    pub(crate) diff_sq: f64,
    pub(crate) a_sq: f64,
}

impl Delta {
    pub(crate) fn merge(&mut self, o: &Delta) {
        self.count += o.count;
        self.changed += o.changed;
        self.max_abs = self.max_abs.max(o.max_abs);
        self.diff_sq += o.diff_sq;
        self.a_sq += o.a_sq;
    }

    /// ‖b − a‖₂ / ‖a‖₂ (0 when nothing differs; none when ‖a‖ is 0 and something does).
    pub fn rel_l2(&self) -> Option<f64> {
        if !self.numeric {
            return None;
        }
        if self.diff_sq == 0.0 {
            return Some(0.0);
        }
        (self.a_sq > 0.0).then(|| (self.diff_sq / self.a_sq).sqrt())
    }
}

/// Two tensors to compare: `(a, b)`.
pub(crate) type TensorPair = (Arc<dyn Tensor>, Arc<dyn Tensor>);

#[derive(Clone, Copy)]
enum Piece {
    Elements { first: u64, count: u64 },
    Strings { first: u64, count: u64 },
}

/// A pair of tensors ready to compare: dense forms, and the work cut into pieces.
struct Pair {
    a: Arc<dyn Tensor>,
    b: Arc<dyn Tensor>,
    pieces: Vec<Piece>,
    /// Each side confirms its checksum from the bytes this pass reads (one pass, not two).
    deferred: [bool; 2],
}

fn prepare(a: &Arc<dyn Tensor>, b: &Arc<dyn Tensor>, max_dense: u64) -> Result<Pair, String> {
    for t in [a, b] {
        if let Some(p) = &t.meta().problem {
            return Err(format!("{}: {p}", String::from_utf8_lossy(&t.meta().name)));
        }
    }
    let a = dense_tensor(a, max_dense).map_err(|e| e.to_string())?;
    let b = dense_tensor(b, max_dense).map_err(|e| e.to_string())?;
    let meta = a.meta();
    let n = meta
        .num_elements()
        .ok_or("the shape's element count overflows")?;
    let other = b.meta().dtype;
    if other != meta.dtype && !(is_float(meta.dtype) && is_float(other)) {
        return Err(format!(
            "{} and {} elements cannot be compared",
            meta.dtype.name(),
            other.name()
        ));
    }
    let mut pieces = Vec::new();
    let mut first = 0u64;
    // A retyped pair's pieces are cut by its wider side.
    let es = meta.dtype.elem_size().max(other.elem_size());
    match es {
        Some(es) if es > 0 => {
            let per = (CHUNK / es).max(1) as u64;
            while first < n {
                let count = per.min(n - first);
                pieces.push(Piece::Elements { first, count });
                first += count;
            }
        }
        _ if meta.dtype == DType::Str => {
            while first < n {
                let count = STRING_CHUNK.min(n - first);
                pieces.push(Piece::Strings { first, count });
                first += count;
            }
        }
        _ => return Err(format!("{} elements cannot be compared", meta.dtype.name())),
    }
    let deferred = [&a, &b].map(|t| t.deferred_crc32c().is_some());
    Ok(Pair {
        a,
        b,
        pieces,
        deferred,
    })
}

/// Decodes the elements of `bytes` (little-endian `dtype`) as float64 into `out`; false when
/// they are not real numbers.
fn decode(dtype: DType, bytes: &[u8], out: &mut [f64]) -> bool {
    use DType::*;
    macro_rules! fill {
        ($n:expr, $f:expr) => {{
            for (o, c) in out.iter_mut().zip(bytes.chunks_exact($n)) {
                *o = $f(c.try_into().unwrap_or([0; $n]));
            }
            true
        }};
    }
    match dtype {
        F32 => fill!(4, |c| f32::from_le_bytes(c) as f64),
        F64 => fill!(8, f64::from_le_bytes),
        F16 => fill!(2, |c| half::f16::from_le_bytes(c).to_f64()),
        BF16 => fill!(2, |c| half::bf16::from_le_bytes(c).to_f64()),
        I8 | QInt8 | Int4 | Int2 => fill!(1, |c: [u8; 1]| c[0] as i8 as f64),
        U8 | QUInt8 | UInt4 | UInt2 => fill!(1, |c: [u8; 1]| c[0] as f64),
        Float8(code) => fill!(1, |c: [u8; 1]| f64::from(modelfs_model::float8::widen(
            code, c[0]
        ))),
        Bool => fill!(1, |c: [u8; 1]| (c[0] != 0) as u8 as f64),
        I16 | QInt16 => fill!(2, |c| i16::from_le_bytes(c) as f64),
        U16 | QUInt16 => fill!(2, |c| u16::from_le_bytes(c) as f64),
        I32 | QInt32 => fill!(4, |c| i32::from_le_bytes(c) as f64),
        U32 => fill!(4, |c| u32::from_le_bytes(c) as f64),
        I64 => fill!(8, |c| i64::from_le_bytes(c) as f64),
        U64 => fill!(8, |c| u64::from_le_bytes(c) as f64),
        _ => false,
    }
}

/// Whether a pair of these dtypes is compared by value: the same dtype, or two floating ones
/// (a model and its half-precision copy).
pub fn comparable(a: DType, b: DType) -> bool {
    a == b || (is_float(a) && is_float(b))
}

fn is_float(dtype: DType) -> bool {
    matches!(
        dtype,
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 | DType::Float8(_)
    )
}

/// Compares one block of elements (`a` and `b` hold the same count of `es`-byte elements).
fn block(
    dtype: DType,
    es: usize,
    a: &[u8],
    b: &[u8],
    d: &mut Delta,
    fa: &mut [f64],
    fb: &mut [f64],
) {
    let n = a.len() / es;
    let (fa, fb) = (&mut fa[..n], &mut fb[..n]);
    let numeric = decode(dtype, a, fa) && decode(dtype, b, fb);
    if is_float(dtype) {
        compare_floats(fa, fb, d);
        return;
    }
    // Integers and others by their bytes (float64 would merge neighbours above 2^53).
    for (k, (x, y)) in a.chunks_exact(es).zip(b.chunks_exact(es)).enumerate() {
        d.changed += (x != y) as u64;
        if numeric {
            let diff = fb[k] - fa[k];
            d.max_abs = d.max_abs.max(diff.abs());
            d.diff_sq += diff * diff;
            d.a_sq += fa[k] * fa[k];
        }
    }
}

/// Little-endian float32 bytes as floats in place (aligned, as reads are), else `None`.
fn as_f32(b: &[u8]) -> Option<&[f32]> {
    match cfg!(target_endian = "little") {
        true => bytemuck::try_cast_slice(b).ok(),
        false => None,
    }
}

/// Floats compared pairwise (float32 in place, or decoded ones): branch-free in independent
/// lanes, compiled for AVX2 as well and chosen at run time. A difference of two float32 is
/// exact in float64.
#[multiversion::multiversion(targets("x86_64+avx2"))]
fn compare_floats<T: Copy + Into<f64>>(a: &[T], b: &[T], d: &mut Delta) {
    let mut changed = [0u64; LANES];
    let mut max_abs = [0f64; LANES];
    let mut diff_sq = [0f64; LANES];
    let mut a_sq = [0f64; LANES];
    let mut pair = |k: usize, x: T, y: T| {
        let (x, y): (f64, f64) = (x.into(), y.into());
        let same = (x == y) | (x.is_nan() & y.is_nan());
        let both = x.is_finite() & y.is_finite();
        let diff = if both { y - x } else { 0.0 };
        changed[k] += (!same) as u64;
        max_abs[k] = if diff.abs() > max_abs[k] {
            diff.abs()
        } else {
            max_abs[k]
        };
        diff_sq[k] += diff * diff;
        a_sq[k] += if both { x * x } else { 0.0 };
    };
    let mut pairs = a.chunks_exact(LANES).zip(b.chunks_exact(LANES));
    for (xs, ys) in pairs.by_ref() {
        for k in 0..LANES {
            pair(k, xs[k], ys[k]);
        }
    }
    let rest = a.len() - a.len() % LANES;
    for (k, (&x, &y)) in a[rest..].iter().zip(&b[rest..]).enumerate() {
        pair(k, x, y);
    }
    d.changed += changed.iter().sum::<u64>();
    d.max_abs = max_abs.iter().copied().fold(d.max_abs, f64::max);
    d.diff_sq += diff_sq.iter().sum::<f64>();
    d.a_sq += a_sq.iter().sum::<f64>();
}

/// How `b` differs from `a`: two runs of whole elements of `dtype`, of one length (two rows
/// of a table, `diff --rows`), compared as `diff` compares tensors.
pub(crate) fn compare_runs(dtype: DType, a: &[u8], b: &[u8]) -> Delta {
    let es = dtype.elem_size().unwrap_or(1).max(1);
    debug_assert!(a.len() == b.len() && a.len() % es == 0);
    let mut d = Delta {
        numeric: super::has_stats(dtype),
        count: (a.len() / es) as u64,
        ..Delta::default()
    };
    if let (DType::F32, Some(x), Some(y)) = (dtype, as_f32(a), as_f32(b)) {
        compare_floats(x, y, &mut d);
        return d;
    }
    let (mut fa, mut fb) = (vec![0f64; BLOCK], vec![0f64; BLOCK]);
    for (x, y) in a.chunks(BLOCK * es).zip(b.chunks(BLOCK * es)) {
        block(dtype, es, x, y, &mut d, &mut fa, &mut fb);
    }
    d
}

/// Scratch buffers of one worker.
#[derive(Default)]
struct Scratch {
    fa: Vec<f64>,
    fb: Vec<f64>,
}

fn run(pair: &Pair, piece: Piece, s: &mut Scratch) -> Result<(Delta, [Crc; 2]), ModelError> {
    let dtype = pair.a.meta().dtype;
    let mut crcs = [Crc::default(); 2];
    let mut d = Delta {
        numeric: super::has_stats(dtype),
        ..Delta::default()
    };
    match piece {
        Piece::Elements { first, count } if pair.b.meta().dtype != dtype => {
            d.count = count;
            retyped(pair, first, count, &mut crcs, &mut d, s)?;
        }
        Piece::Elements { first, count } => {
            let es = dtype.elem_size().unwrap_or(1);
            s.fa.resize(BLOCK, 0.0);
            s.fb.resize(BLOCK, 0.0);
            d.count = count;
            for (at, len) in runs(first, count, es) {
                let [ca, cb] = &mut crcs;
                let a = read_run(&*pair.a, at, len, pair.deferred[0].then_some(ca))?;
                let b = read_run(&*pair.b, at, len, pair.deferred[1].then_some(cb))?;
                let (a, b) = (&a[..], &b[..]);
                if let (DType::F32, Some(x), Some(y)) = (dtype, as_f32(a), as_f32(b)) {
                    compare_floats(x, y, &mut d);
                    continue;
                }
                if a == b && !d.numeric {
                    continue;
                }
                for (x, y) in a.chunks(BLOCK * es).zip(b.chunks(BLOCK * es)) {
                    block(dtype, es, x, y, &mut d, &mut s.fa, &mut s.fb);
                }
            }
        }
        Piece::Strings { first, count } => {
            let mut left = Vec::with_capacity(count as usize);
            pair.a
                .for_each_string(ReadCtx::none(), first, count, &mut |x| {
                    left.push(x.to_vec())
                })?;
            let mut k = 0usize;
            pair.b
                .for_each_string(ReadCtx::none(), first, count, &mut |y| {
                    d.changed += (left.get(k).map(Vec::as_slice) != Some(y)) as u64;
                    k += 1;
                })?;
            d.count = count;
        }
    }
    Ok((d, crcs))
}

/// Elements `first..first + count` of a pair of floats of two dtypes (a float32 model and its
/// bfloat16 copy), compared as float64: every element a conversion rounded is changed, and
/// max |Δ| and the relative L2 say by how much.
fn retyped(
    pair: &Pair,
    first: u64,
    count: u64,
    crcs: &mut [Crc; 2],
    d: &mut Delta,
    s: &mut Scratch,
) -> Result<(), ModelError> {
    let (da, db) = (pair.a.meta().dtype, pair.b.meta().dtype);
    let (Some(ea), Some(eb)) = (da.elem_size(), db.elem_size()) else {
        return Ok(());
    };
    s.fa.resize(BLOCK, 0.0);
    s.fb.resize(BLOCK, 0.0);
    let [ca, cb] = crcs;
    for (at, len) in runs(first, count, ea.max(eb)) {
        let n = len / ea.max(eb);
        let a = read_run(&*pair.a, at, n * ea, pair.deferred[0].then_some(&mut *ca))?;
        let b = read_run(&*pair.b, at, n * eb, pair.deferred[1].then_some(&mut *cb))?;
        for (x, y) in a.chunks(BLOCK * ea).zip(b.chunks(BLOCK * eb)) {
            let k = x.len() / ea;
            let (fa, fb) = (&mut s.fa[..k], &mut s.fb[..k]);
            decode(da, x, fa);
            decode(db, y, fb);
            compare_floats(fa, fb, d);
        }
    }
    Ok(())
}

/// How each pair of `pairs` (same shape; same dtype, or two floating ones) differs, or why it
/// cannot be told; pieces of every pair shared out over all cores.
pub fn compare(
    pairs: &[TensorPair],
    max_dense: u64,
    req: &dyn Requester,
) -> Result<Vec<Result<Delta, String>>, LayoutError> {
    let mut prepared = Vec::new();
    let mut work = Vec::new();
    for (i, (a, b)) in pairs.iter().enumerate() {
        let p = prepare(a, b, max_dense);
        if let Ok(p) = &p {
            work.extend((0..p.pieces.len()).map(|k| (i, k)));
        }
        prepared.push(p);
    }
    let results = pool::each(work.len(), req, Scratch::default, |s, w| {
        let (i, k) = work[w];
        let Ok(pair) = &prepared[i] else {
            return Ok((Delta::default(), [Crc::default(); 2]));
        };
        run(pair, pair.pieces[k], s)
    })?;
    let mut out: Vec<Result<Delta, String>> = prepared
        .iter()
        .map(|p| match p {
            Ok(p) => Ok(Delta {
                numeric: super::has_stats(p.a.meta().dtype),
                ..Delta::default()
            }),
            Err(e) => Err(e.clone()),
        })
        .collect();
    let mut crcs: Vec<Option<[Crc; 2]>> = vec![None; pairs.len()];
    for (&(i, _), r) in work.iter().zip(results) {
        let slot = &mut out[i];
        match (slot.as_mut(), r) {
            (Ok(d), Ok((r, c))) => {
                d.merge(&r);
                crcs[i] = Some(match crcs[i] {
                    None => c,
                    Some([a, b]) => [a.then(c[0]), b.then(c[1])],
                });
            }
            (Ok(_), Err(e)) => *slot = Err(e.to_string()),
            (Err(_), _) => {}
        }
    }
    // What was read unchecked counts only once its checksum is confirmed.
    for (i, p) in prepared.iter().enumerate() {
        let (Ok(p), Some(c), Ok(_)) = (p, crcs[i], &out[i]) else {
            continue;
        };
        for (side, t) in [&p.a, &p.b].into_iter().enumerate() {
            if p.deferred[side] {
                if let Err(e) = t.confirm_crc32c(c[side].value()) {
                    out[i] = Err(e.to_string());
                    break;
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use modelfs_layout::Patient;
    use modelfs_model::testing::MemTensor;

    fn delta(a: &[f32], b: &[f32]) -> Delta {
        let ta: Arc<dyn Tensor> = Arc::new(MemTensor::f32(&[a.len() as u64], a));
        let tb: Arc<dyn Tensor> = Arc::new(MemTensor::f32(&[b.len() as u64], b));
        compare(&[(ta, tb)], 1 << 30, &Patient)
            .unwrap()
            .remove(0)
            .unwrap()
    }

    /// A float32 tensor and its bfloat16 copy: compared as float64, element by element.
    #[test]
    fn a_float32_tensor_and_its_bfloat16_copy_compare_by_value() {
        // Past one chunk of work, and past BLOCK, so every piece and block pairs up.
        let a: Vec<f32> = (0..(CHUNK / 2 + 3000))
            .map(|i| 1.0 + i as f32 / 7.0)
            .collect();
        let b: Vec<u8> = a
            .iter()
            .flat_map(|&x| half::bf16::from_f32(x).to_le_bytes())
            .collect();
        let n = a.len() as u64;
        let ta: Arc<dyn Tensor> = Arc::new(MemTensor::f32(&[n], &a));
        let tb: Arc<dyn Tensor> = Arc::new(MemTensor::new(DType::BF16, &[n], b));
        let d = compare(&[(ta, tb)], 1 << 30, &Patient)
            .unwrap()
            .remove(0)
            .unwrap();
        let (mut changed, mut max_abs, mut diff_sq, mut a_sq) = (0u64, 0f64, 0f64, 0f64);
        for &x in &a {
            let y = half::bf16::from_f32(x).to_f64();
            let diff = y - f64::from(x);
            changed += (diff != 0.0) as u64;
            max_abs = max_abs.max(diff.abs());
            diff_sq += diff * diff;
            a_sq += f64::from(x) * f64::from(x);
        }
        assert_eq!((d.count, d.changed), (n, changed));
        assert!(changed > n / 2, "{changed}");
        assert_eq!(d.max_abs, max_abs);
        let rel = (diff_sq / a_sq).sqrt();
        assert!(
            (d.rel_l2().unwrap() - rel).abs() <= rel * 1e-9,
            "{d:?} {rel}"
        );
        // Integers of two types are not compared.
        let ti: Arc<dyn Tensor> = Arc::new(MemTensor::i64(&[2], &[1, 2]));
        let tf: Arc<dyn Tensor> = Arc::new(MemTensor::f64(&[2], &[1.0, 2.0]));
        assert!(compare(&[(ti, tf)], 1 << 30, &Patient).unwrap()[0].is_err());
    }

    #[test]
    fn changes_are_counted_and_measured_over_finite_pairs() {
        let d = delta(
            &[1.0, 2.0, f32::NAN, 0.0, 3.0],
            &[1.0, 2.5, f32::NAN, -0.0, f32::INFINITY],
        );
        assert_eq!((d.count, d.changed), (5, 2));
        assert_eq!(d.max_abs, 0.5);
        assert!((d.rel_l2().unwrap() - (0.25f64 / 5.0).sqrt()).abs() < 1e-15);
        let same = delta(&[1.0; 5000], &[1.0; 5000]);
        assert_eq!((same.changed, same.rel_l2()), (0, Some(0.0)));
    }
}
