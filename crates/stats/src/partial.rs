//! The summary of a run of elements, and how two summaries combine (Chan, Golub & LeVeque's
//! pairwise update of mean and squared deviations), so that chunks summarised on different
//! cores give the answer one pass over the whole tensor would, in float64.

use modelfs_model::DType;

/// A run's counts and, over its finite values, extremes, mean and squared deviations.
/// Invariant: `finite + nan + posinf + neginf == count`; `zeros <= finite`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Partial {
    pub count: u64,
    pub finite: u64,
    pub nan: u64,
    pub posinf: u64,
    pub neginf: u64,
    pub zeros: u64,
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    /// Σ (x − mean)² over the finite values.
    pub(crate) m2: f64,
    /// Σ x² over the finite values.
    pub sumsq: f64,
}

impl Default for Partial {
    fn default() -> Self {
        Partial {
            count: 0,
            finite: 0,
            nan: 0,
            posinf: 0,
            neginf: 0,
            zeros: 0,
            min: f64::INFINITY,
            max: f64::NEG_INFINITY,
            mean: 0.0,
            m2: 0.0,
            sumsq: 0.0,
        }
    }
}

impl Partial {
    /// `n` zeros (a sparse tensor's entries that are not stored).
    pub(crate) fn zeros(n: u64) -> Partial {
        if n == 0 {
            return Partial::default();
        }
        Partial {
            count: n,
            finite: n,
            zeros: n,
            min: 0.0,
            max: 0.0,
            ..Partial::default()
        }
    }

    /// `self` followed by `other`.
    pub(crate) fn merge(&mut self, other: &Partial) {
        let (na, nb) = (self.finite as f64, other.finite as f64);
        if other.finite > 0 {
            if self.finite == 0 {
                self.mean = other.mean;
                self.m2 = other.m2;
            } else {
                let n = na + nb;
                let delta = other.mean - self.mean;
                self.mean += delta * (nb / n);
                self.m2 += other.m2 + delta * delta * (na * nb / n);
            }
        }
        self.count += other.count;
        self.finite += other.finite;
        self.nan += other.nan;
        self.posinf += other.posinf;
        self.neginf += other.neginf;
        self.zeros += other.zeros;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.sumsq += other.sumsq;
        debug_assert_eq!(
            self.finite + self.nan + self.posinf + self.neginf,
            self.count
        );
    }

    /// Population standard deviation of the finite values (numpy's `std`, ddof 0).
    pub fn std(&self) -> Option<f64> {
        (self.finite > 0).then(|| (self.m2 / self.finite as f64).max(0.0).sqrt())
    }
}

/// Whether `dtype` has stats (a real number per element).
pub(crate) fn has_stats(dtype: DType) -> bool {
    decoder(dtype).is_some()
}

type Decode = fn(&[u8], &mut Partial);

fn decoder(dtype: DType) -> Option<Decode> {
    use DType::*;
    Some(match dtype {
        F32 => summarise_f32,
        F64 => |b, p| summarise(b.chunks_exact(8), p, |c| f64::from_le_bytes(w(c))),
        F16 => |b, p| {
            summarise(b.chunks_exact(2), p, |c| {
                half::f16::from_le_bytes(w(c)).to_f64()
            })
        },
        BF16 => |b, p| {
            summarise(b.chunks_exact(2), p, |c| {
                half::bf16::from_le_bytes(w(c)).to_f64()
            })
        },
        I8 | QInt8 | Int4 | Int2 => |b, p| summarise(b.chunks_exact(1), p, |c| c[0] as i8 as f64),
        U8 | QUInt8 | UInt4 | UInt2 => |b, p| summarise(b.chunks_exact(1), p, |c| c[0] as f64),
        Float8(24) => |b, p| summarise(b.chunks_exact(1), p, |c| f8(24, c)),
        Float8(25) => |b, p| summarise(b.chunks_exact(1), p, |c| f8(25, c)),
        Float8(26) => |b, p| summarise(b.chunks_exact(1), p, |c| f8(26, c)),
        Float8(27) => |b, p| summarise(b.chunks_exact(1), p, |c| f8(27, c)),
        Float8(28) => |b, p| summarise(b.chunks_exact(1), p, |c| f8(28, c)),
        Float8(33) => |b, p| summarise(b.chunks_exact(1), p, |c| f8(33, c)),
        Bool => |b, p| summarise(b.chunks_exact(1), p, |c| (c[0] != 0) as u8 as f64),
        I16 | QInt16 => |b, p| summarise(b.chunks_exact(2), p, |c| i16::from_le_bytes(w(c)) as f64),
        U16 | QUInt16 => {
            |b, p| summarise(b.chunks_exact(2), p, |c| u16::from_le_bytes(w(c)) as f64)
        }
        I32 | QInt32 => |b, p| summarise(b.chunks_exact(4), p, |c| i32::from_le_bytes(w(c)) as f64),
        U32 => |b, p| summarise(b.chunks_exact(4), p, |c| u32::from_le_bytes(w(c)) as f64),
        I64 => |b, p| summarise(b.chunks_exact(8), p, |c| i64::from_le_bytes(w(c)) as f64),
        U64 => |b, p| summarise(b.chunks_exact(8), p, |c| u64::from_le_bytes(w(c)) as f64),
        _ => return None,
    })
}

/// A narrow float's value (`DType::Float8` of `code`).
#[inline(always)]
fn f8(code: u8, c: &[u8]) -> f64 {
    f64::from(modelfs_model::float8::widen(code, c[0]))
}

/// The first `N` bytes of `c` (a `chunks_exact(N)` item) as an array.
#[inline(always)]
fn w<const N: usize>(c: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&c[..N]);
    a
}

/// Adds the elements in `bytes` (little-endian `dtype`, a whole number of them) to `p`.
pub(crate) fn add(dtype: DType, bytes: &[u8], p: &mut Partial) {
    if let Some(d) = decoder(dtype) {
        d(bytes, p)
    }
}

/// Elements per block: a block's values sit in L1 for the second pass.
const BLOCK: usize = 2048;
/// Independent accumulators, so that additions do not wait on each other (and vectorise).
const LANES: usize = 8;

/// Summarises the values `to_f64` gives for `items` into `p`, a block at a time: the block's
/// values are converted into a scratch buffer (non-finite ones, rare, are counted and moved
/// out); one pass sums them in independent lanes (which vectorise), a second sums squared
/// deviations from the block's mean (exact enough in float64 even when mean ≫ std); the block
/// then merges into `p`.
#[inline(always)]
fn summarise<'a, I>(items: I, p: &mut Partial, to_f64: impl Fn(&'a [u8]) -> f64)
where
    I: Iterator<Item = &'a [u8]>,
{
    let mut vals = [0f64; BLOCK];
    let mut items = items.peekable();
    while items.peek().is_some() {
        let mut n = 0usize;
        for (v, c) in vals.iter_mut().zip(items.by_ref()) {
            *v = to_f64(c);
            n += 1;
        }
        let mut b = Partial {
            count: n as u64,
            ..Partial::default()
        };
        let nonfinite = vals[..n].iter().filter(|x| !x.is_finite()).count();
        if nonfinite > 0 {
            let mut kept = 0;
            for i in 0..n {
                let x = vals[i];
                if x.is_finite() {
                    vals[kept] = x;
                    kept += 1;
                } else if x.is_nan() {
                    b.nan += 1;
                } else if x > 0.0 {
                    b.posinf += 1;
                } else {
                    b.neginf += 1;
                }
            }
            n = kept;
        }
        finite_block(&vals[..n], &mut b);
        p.merge(&b);
    }
}

/// `summarise` for float32 (little-endian hosts only: the crate's targets are), the common
/// case, in float32 until the lanes widen each value:
/// a block with no NaN or Inf (nearly all of them) is read once into L1 and summed there.
fn summarise_f32(bytes: &[u8], p: &mut Partial) {
    let mut copy = [0f32; BLOCK];
    for block in bytes.chunks(BLOCK * 4) {
        let n = block.len() / 4;
        // The block as floats in place when aligned (reads are), else copied.
        let cast = match cfg!(target_endian = "little") {
            true => bytemuck::try_cast_slice(&block[..n * 4]).ok(),
            false => None,
        };
        let v: &[f32] = match cast {
            Some(v) => v,
            None => {
                for (v, c) in copy.iter_mut().zip(block.chunks_exact(4)) {
                    *v = f32::from_le_bytes(w(c));
                }
                &copy[..n]
            }
        };
        match finite_block_f32(v) {
            Some(b) => p.merge(&b),
            None => summarise(block.chunks_exact(4), p, |c| {
                f32::from_le_bytes(w(c)) as f64
            }),
        }
    }
}

/// The summary of a block of float32 values, or `None` when one is NaN or infinite (rare: the
/// caller takes the general path). Three passes over the L1-resident block, each with few
/// accumulators so that they stay in registers: extremes, zeros and finiteness in float32;
/// sums and sums of squares in float64; squared deviations from the block's mean. Compiled
/// for AVX2 as well, chosen at run time (4 doubles per instruction instead of 2).
#[multiversion::multiversion(targets("x86_64+avx2"))]
fn finite_block_f32(v: &[f32]) -> Option<Partial> {
    const L: usize = 8;
    let n = v.len();
    let mut lo = [f32::INFINITY; L];
    let mut hi = [f32::NEG_INFINITY; L];
    let mut zeros = [0u32; L];
    let mut bad = [0u32; L];
    let mut lanes = v.chunks_exact(L);
    for c in lanes.by_ref() {
        for k in 0..L {
            let x = c[k];
            lo[k] = if x < lo[k] { x } else { lo[k] };
            hi[k] = if x > hi[k] { x } else { hi[k] };
            zeros[k] += (x == 0.0) as u32;
            bad[k] += (x.to_bits() & 0x7f80_0000 == 0x7f80_0000) as u32;
        }
    }
    for (k, &x) in lanes.remainder().iter().enumerate() {
        lo[k] = lo[k].min(x);
        hi[k] = hi[k].max(x);
        zeros[k] += (x == 0.0) as u32;
        bad[k] += !x.is_finite() as u32;
    }
    if bad.iter().any(|&b| b > 0) || n == 0 {
        return (n == 0).then(Partial::default);
    }
    let mut sum = [0f64; L];
    let mut sq = [0f64; L];
    let mut lanes = v.chunks_exact(L);
    for c in lanes.by_ref() {
        for k in 0..L {
            let x = c[k] as f64;
            sum[k] += x;
            sq[k] += x * x;
        }
    }
    for (k, &x) in lanes.remainder().iter().enumerate() {
        sum[k] += x as f64;
        sq[k] += x as f64 * x as f64;
    }
    let mean = sum.iter().sum::<f64>() / n as f64;
    let mut dev = [0f64; L];
    let mut lanes = v.chunks_exact(L);
    for c in lanes.by_ref() {
        for k in 0..L {
            let d = c[k] as f64 - mean;
            dev[k] += d * d;
        }
    }
    for (k, &x) in lanes.remainder().iter().enumerate() {
        dev[k] += (x as f64 - mean) * (x as f64 - mean);
    }
    Some(Partial {
        count: n as u64,
        finite: n as u64,
        zeros: zeros.iter().map(|&z| u64::from(z)).sum(),
        min: lo.iter().copied().fold(f32::INFINITY, f32::min) as f64,
        max: hi.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64,
        mean,
        m2: dev.iter().sum(),
        sumsq: sq.iter().sum(),
        ..Partial::default()
    })
}

/// Moments, extremes and zeros of `v` (all finite) into `b`.
#[inline(always)]
fn finite_block(v: &[f64], b: &mut Partial) {
    let n = v.len();
    b.finite = n as u64;
    if n == 0 {
        return;
    }
    let mut sum = [0f64; LANES];
    let mut sq = [0f64; LANES];
    let mut lo = [f64::INFINITY; LANES];
    let mut hi = [f64::NEG_INFINITY; LANES];
    let mut zeros = [0u64; LANES];
    let mut lanes = v.chunks_exact(LANES);
    for c in lanes.by_ref() {
        for k in 0..LANES {
            let x = c[k];
            sum[k] += x;
            sq[k] += x * x;
            lo[k] = if x < lo[k] { x } else { lo[k] };
            hi[k] = if x > hi[k] { x } else { hi[k] };
            zeros[k] += (x == 0.0) as u64;
        }
    }
    for (k, &x) in lanes.remainder().iter().enumerate() {
        sum[k] += x;
        sq[k] += x * x;
        lo[k] = lo[k].min(x);
        hi[k] = hi[k].max(x);
        zeros[k] += (x == 0.0) as u64;
    }
    b.mean = sum.iter().sum::<f64>() / n as f64;
    let mean = b.mean;
    let mut dev = [0f64; LANES];
    let mut lanes = v.chunks_exact(LANES);
    for c in lanes.by_ref() {
        for k in 0..LANES {
            let d = c[k] - mean;
            dev[k] += d * d;
        }
    }
    for (k, &x) in lanes.remainder().iter().enumerate() {
        dev[k] += (x - mean) * (x - mean);
    }
    b.m2 = dev.iter().sum();
    b.sumsq = sq.iter().sum();
    b.min = lo.iter().copied().fold(f64::INFINITY, f64::min);
    b.max = hi.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    b.zeros = zeros.iter().sum();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(values: &[f64]) -> Partial {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut p = Partial::default();
        add(DType::F64, &bytes, &mut p);
        p
    }

    #[test]
    fn counts_and_moments_equal_a_direct_computation() {
        let mut v: Vec<f64> = (0..10_007)
            .map(|i| 1e6 + ((i * 7919) % 1000) as f64 / 7.0)
            .collect();
        v[5] = f64::NAN;
        v[6] = f64::INFINITY;
        v[7] = f64::NEG_INFINITY;
        v[8] = 0.0;
        v[9] = -0.0;
        let p = of(&v);
        let finite: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
        let mean = finite.iter().sum::<f64>() / finite.len() as f64;
        let var = finite.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / finite.len() as f64;
        assert_eq!(
            (p.count, p.finite, p.nan, p.posinf, p.neginf, p.zeros),
            (10_007, 10_004, 1, 1, 1, 2)
        );
        assert_eq!(
            (p.min, p.max),
            (0.0, finite.iter().copied().fold(0.0, f64::max))
        );
        assert!((p.mean - mean).abs() <= 1e-12 * mean.abs());
        assert!((p.std().unwrap() - var.sqrt()).abs() <= 1e-9 * var.sqrt());
        let l2 = finite.iter().map(|x| x * x).sum::<f64>().sqrt();
        assert!((p.sumsq.sqrt() - l2).abs() <= 1e-12 * l2);
    }

    #[test]
    fn merging_halves_equals_the_whole() {
        let v: Vec<f64> = (0..5000).map(|i| ((i * 31) % 97) as f64 - 40.0).collect();
        let whole = of(&v);
        for cut in [0, 1, 2047, 2048, 4999, 5000] {
            let mut a = of(&v[..cut]);
            a.merge(&of(&v[cut..]));
            assert_eq!(
                (a.count, a.zeros, a.min, a.max),
                (5000, whole.zeros, -40.0, 56.0)
            );
            assert!((a.mean - whole.mean).abs() < 1e-12);
            assert!((a.m2 - whole.m2).abs() < 1e-9 * whole.m2);
        }
        let mut z = of(&[2.0, 4.0]);
        z.merge(&Partial::zeros(2));
        assert_eq!(
            (z.count, z.zeros, z.min, z.mean, z.m2),
            (4, 2, 0.0, 1.5, 11.0)
        );
    }

    #[test]
    fn the_float32_path_equals_the_general_one() {
        // Blocks without and with NaN/Inf, a ragged end, and an unaligned start (copied).
        let mut v: Vec<f32> = (0..10_000)
            .map(|i| ((i * 7919) % 2003) as f32 / 7.0 - 100.0)
            .collect();
        v[3000] = f32::NAN;
        v[3001] = f32::NEG_INFINITY;
        v[9000] = 0.0;
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        let mut general = Partial::default();
        summarise(bytes.chunks_exact(4), &mut general, |c| {
            f32::from_le_bytes(w(c)) as f64
        });
        let mut shifted = vec![0u8];
        shifted.extend_from_slice(&bytes);
        for b in [&bytes[..], &shifted[1..]] {
            let mut p = Partial::default();
            add(DType::F32, b, &mut p);
            assert_eq!(
                (p.count, p.finite, p.nan, p.neginf, p.zeros, p.min, p.max),
                (
                    general.count,
                    general.finite,
                    1,
                    1,
                    general.zeros,
                    general.min,
                    general.max
                )
            );
            assert!((p.mean - general.mean).abs() < 1e-12);
            assert!((p.m2 - general.m2).abs() < 1e-9 * general.m2);
            assert!((p.sumsq - general.sumsq).abs() < 1e-9 * general.sumsq);
        }
    }

    #[test]
    fn every_numeric_dtype_decodes_and_others_have_none() {
        let mut p = Partial::default();
        add(DType::I16, &[0xff, 0xff, 2, 0], &mut p);
        assert_eq!((p.min, p.max, p.count), (-1.0, 2.0, 2));
        let mut p = Partial::default();
        add(
            DType::BF16,
            &half::bf16::from_f32(1.5).to_le_bytes(),
            &mut p,
        );
        assert_eq!(p.max, 1.5);
        assert!(!has_stats(DType::Str) && !has_stats(DType::C64) && has_stats(DType::Bool));
    }
}
