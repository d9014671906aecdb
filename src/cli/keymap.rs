//! What `diff --map` and `--transpose` do to one model before it is compared with another
//! of a different framework: keys rewritten by rules (`dense.weight` → `dense/kernel`), and a
//! 2-D tensor stored the other way round (PyTorch's `Linear.weight` is `[out, in]`, a TF
//! kernel `[in, out]`) seen transposed.

use std::sync::{Arc, OnceLock};

use regex::Regex;

use modelfs_io::source::ReadCtx;
use modelfs_model::{ModelError, Tensor, TensorMeta};

/// `REGEX=REPLACEMENT` rules, each applied in turn to a key (the replacement as the `regex`
/// crate takes it: `$1`, `${name}`).
pub(crate) struct KeyMap {
    rules: Vec<(Regex, String)>,
}

impl KeyMap {
    pub(crate) fn parse(specs: &[String]) -> Result<KeyMap, String> {
        let mut rules = Vec::new();
        for s in specs {
            let (re, to) = s
                .split_once('=')
                .ok_or_else(|| format!("--map {s:?}: not REGEX=REPLACEMENT"))?;
            let re = Regex::new(re).map_err(|e| format!("--map {s:?}: {e}"))?;
            rules.push((re, to.to_string()));
        }
        Ok(KeyMap { rules })
    }

    pub(crate) fn apply(&self, key: &str) -> String {
        let mut k = key.to_string();
        for (re, to) in &self.rules {
            k = re.replace_all(&k, to.as_str()).into_owned();
        }
        k
    }
}

/// The transpose of a 2-D tensor. Served from the whole tensor read once when it is at most
/// `WHOLE` bytes; a larger one is read in bands of rows for every request (slow, but memory
/// stays bounded).
pub(crate) struct Transposed {
    inner: Arc<dyn Tensor>,
    meta: TensorMeta,
    whole: OnceLock<Vec<u8>>,
    /// The largest tensor read whole (`WHOLE`; tests lower it).
    whole_max: u64,
}

const WHOLE: u64 = 256 << 20;
/// Rows of the inner tensor read at a time by the band path.
const BAND_BYTES: u64 = 8 << 20;

impl Transposed {
    /// `None` unless `t` is 2-D with a fixed-width dtype.
    pub(crate) fn new(t: Arc<dyn Tensor>) -> Option<Transposed> {
        let m = t.meta();
        if m.shape.len() != 2 || m.dtype.elem_size().is_none() || m.stored.is_some() {
            return None;
        }
        let mut meta = m.clone();
        meta.shape.reverse();
        meta.partitions.clear();
        Some(Transposed {
            inner: t,
            meta,
            whole: OnceLock::new(),
            whole_max: WHOLE,
        })
    }

    /// Inner rows `r0..r1` (whole rows).
    fn inner_rows(
        &self,
        ctx: &ReadCtx,
        r0: u64,
        r1: u64,
        cols: u64,
        w: usize,
    ) -> Result<Vec<u8>, ModelError> {
        let mut buf = vec![0u8; ((r1 - r0) * cols) as usize * w];
        if !buf.is_empty() {
            self.inner.read_elements(ctx, r0 * cols, &mut buf)?;
        }
        Ok(buf)
    }
}

impl Tensor for Transposed {
    fn meta(&self) -> &TensorMeta {
        &self.meta
    }

    fn fill_elements(&self, ctx: &ReadCtx, first: u64, out: &mut [u8]) -> Result<(), ModelError> {
        let w = self.meta.dtype.elem_size().unwrap_or(1);
        // Inner [rows, cols]; this is [cols, rows]: element (c, r) is inner (r, c).
        let (rows, cols) = (self.meta.shape[1], self.meta.shape[0]);
        let total = rows * cols * w as u64;
        let place = |e: u64| {
            let (c, r) = (e / rows.max(1), e % rows.max(1));
            ((r * cols + c) as usize) * w
        };
        if total <= self.whole_max {
            let all = match self.whole.get() {
                Some(a) => a,
                None => {
                    let a = self.inner_rows(ctx, 0, rows, cols, w)?;
                    self.whole.get_or_init(|| a)
                }
            };
            for (k, slot) in out.chunks_exact_mut(w).enumerate() {
                let at = place(first + k as u64);
                slot.copy_from_slice(&all[at..at + w]);
            }
            return Ok(());
        }
        let band = (BAND_BYTES / (cols * w as u64).max(1)).max(1);
        let mut r0 = 0;
        while r0 < rows {
            let r1 = (r0 + band).min(rows);
            let rows_here = self.inner_rows(ctx, r0, r1, cols, w)?;
            for (k, slot) in out.chunks_exact_mut(w).enumerate() {
                let e = first + k as u64;
                let (c, r) = (e / rows, e % rows);
                if (r0..r1).contains(&r) {
                    let at = (((r - r0) * cols + c) as usize) * w;
                    slot.copy_from_slice(&rows_here[at..at + w]);
                }
            }
            r0 = r1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use modelfs_model::testing::MemTensor;

    #[test]
    fn rules_apply_in_turn() {
        let m = KeyMap::parse(&[r"^(.*)\.weight$=$1/kernel".into(), r"\.=/".into()]).unwrap();
        assert_eq!(m.apply("dense.1.weight"), "dense/1/kernel");
        assert_eq!(m.apply("bias"), "bias");
        assert!(KeyMap::parse(&["no rule".into()]).is_err());
        assert!(KeyMap::parse(&["(=x".into()]).is_err());
    }

    #[test]
    fn a_transpose_reads_as_one() {
        let t = MemTensor::f32(&[2, 3], &[0., 1., 2., 3., 4., 5.]).arc();
        let x: Arc<dyn Tensor> = Arc::new(Transposed::new(t).unwrap());
        assert_eq!(x.meta().shape, [3, 2]);
        let mut out = vec![0u8; 6 * 4];
        x.read_elements(ReadCtx::none(), 0, &mut out).unwrap();
        let v: Vec<f32> = modelfs_model::testing::f32s(&out);
        assert_eq!(v, [0., 3., 1., 4., 2., 5.]);
        let mut part = vec![0u8; 2 * 4];
        x.read_elements(ReadCtx::none(), 3, &mut part).unwrap();
        assert_eq!(part, out[12..20]);
        assert!(Transposed::new(MemTensor::f32(&[3], &[0., 1., 2.]).arc()).is_none());
        // Read in bands of rows: the same elements.
        let vals: Vec<f32> = (0..12).map(|v| v as f32).collect();
        let mut x = Transposed::new(MemTensor::f32(&[4, 3], &vals).arc()).unwrap();
        x.whole_max = 0;
        let x: Arc<dyn Tensor> = Arc::new(x);
        let mut banded = vec![0u8; 12 * 4];
        x.read_elements(ReadCtx::none(), 0, &mut banded).unwrap();
        let v: Vec<f32> = modelfs_model::testing::f32s(&banded);
        assert_eq!(v, [0., 3., 6., 9., 1., 4., 7., 10., 2., 5., 8., 11.]);
    }
}
