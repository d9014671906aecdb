//! The dense view of a sparse tensor, for dense layouts (txt, csv, bin, npy, value-only Angel
//! formats), allowed only while its dense byte size stays within `-o max_dense=`.

use std::sync::{Arc, OnceLock};

use super::{InconsistentRows, Unavailable};
use crate::model::{debug_check, fill_dense_by_range, ModelError, SparseRows, Tensor, TensorMeta};
use crate::source::ReadCtx;

/// Whether dense layouts can show the tensor: always when it is dense; for a sparse one, when
/// it is a matrix whose dense bytes fit in `max_dense`.
pub(crate) fn check_dense(meta: &TensorMeta, max_dense: u64) -> Result<(), Unavailable> {
    if !meta.sparse {
        return Ok(());
    }
    if meta.shape.len() != 2 {
        return Err(Unavailable::SparseRank(meta.shape.len()));
    }
    let bytes = meta
        .dtype
        .elem_size()
        .and_then(|es| meta.num_elements()?.checked_mul(es as u64))
        .ok_or(Unavailable::Overflow)?;
    if bytes > max_dense {
        return Err(Unavailable::DenseTooBig {
            bytes,
            max: max_dense,
        });
    }
    Ok(())
}

/// The tensor dense layouts should read: `tensor` itself when dense, a `DenseView` (which
/// decodes the entries on its first read) of a sparse one that passes `check_dense`.
pub fn dense_tensor(
    tensor: &Arc<dyn Tensor>,
    max_dense: u64,
) -> Result<Arc<dyn Tensor>, Unavailable> {
    let meta = tensor.meta();
    check_dense(meta, max_dense)?;
    if !meta.sparse {
        return Ok(tensor.clone());
    }
    let mut dense_meta = meta.clone();
    dense_meta.sparse = false;
    Ok(Arc::new(DenseView {
        inner: tensor.clone(),
        meta: dense_meta,
        rows: OnceLock::new(),
    }))
}

/// A sparse rows × cols matrix read as dense C-order elements (zeros where nothing is stored;
/// stored entries whose column is outside `0..cols` are ignored).
pub(crate) struct DenseView {
    inner: Arc<dyn Tensor>,
    meta: TensorMeta,
    rows: OnceLock<Arc<SparseRows>>,
}

impl DenseView {
    fn inconsistent(&self) -> ModelError {
        ModelError::data(
            format!("tensor {}", String::from_utf8_lossy(&self.meta.name)),
            InconsistentRows,
        )
    }

    fn rows(&self) -> Result<Arc<SparseRows>, ModelError> {
        if let Some(r) = self.rows.get() {
            return Ok(r.clone());
        }
        let r = self.inner.sparse()?;
        Ok(self.rows.get_or_init(|| r).clone())
    }
}

impl Tensor for DenseView {
    fn meta(&self) -> &TensorMeta {
        &self.meta
    }

    fn cache_identity(&self) -> Option<String> {
        self.inner.cache_identity().map(|id| format!("{id}\0dense"))
    }

    fn fill_elements(&self, ctx: &ReadCtx, first: u64, out: &mut [u8]) -> Result<(), ModelError> {
        let es = self.meta.dtype.elem_size().unwrap_or(1) as u64;
        let count = out.len() as u64 / es;
        let cols = self.meta.shape.get(1).copied().unwrap_or(0);
        debug_check(&self.meta, first, out.len());
        out.fill(0);
        if count == 0 || cols == 0 {
            return Ok(());
        }
        if self.inner.sparse_shape_is_cheap() {
            // Only the entries that land in `out`: nothing is decoded whole.
            let shape = self.inner.sparse_shape()?;
            if shape.row_ptr.len() != shape.rows.len() + 1 {
                return Err(self.inconsistent());
            }
            let entries = self.inner.entries()?;
            return fill_dense_by_range(entries, ctx, &shape, 0, 0, cols, es as usize, first, out);
        }
        let s = self.rows()?;
        let (r0, r1) = (first / cols, (first + count - 1) / cols);
        let mut k = s.rows.partition_point(|&r| r < r0);
        while k < s.rows.len() && s.rows[k] <= r1 {
            let row = s.rows[k];
            let (a, b) = match (s.row_ptr.get(k), s.row_ptr.get(k + 1)) {
                (Some(&a), Some(&b)) if a <= b && b <= s.cols.len() as u64 => (a, b),
                _ => return Err(self.inconsistent()),
            };
            for e in a..b {
                let c = s.cols[e as usize];
                if c < 0 || c as u64 >= cols {
                    continue;
                }
                let idx = row * cols + c as u64;
                if idx < first || idx >= first + count {
                    continue;
                }
                let src = (e * es) as usize..((e + 1) * es) as usize;
                let dst = ((idx - first) * es) as usize;
                let v = s.values.get(src).ok_or_else(|| self.inconsistent())?;
                out[dst..dst + es as usize].copy_from_slice(v);
            }
            k += 1;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::DType;
    use crate::testing::MemTensor;

    pub(crate) fn sample() -> Arc<dyn Tensor> {
        let s = SparseRows {
            rows: vec![0, 2, 3],
            row_ptr: vec![0, 2, 2, 3],
            cols: vec![1, 3, 0],
            values: [1.5f32, -2.0, 7.0]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
        };
        MemTensor::sparse(DType::F32, 4, 4, s).arc()
    }

    #[test]
    fn densifies_any_range() {
        let t = sample();
        let d = dense_tensor(&t, 1 << 20).unwrap();
        let mut out = vec![0u8; 64];
        d.read_elements(ReadCtx::none(), 0, &mut out).unwrap();
        let v: Vec<f32> = out
            .chunks(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        assert_eq!(v[1], 1.5);
        assert_eq!(v[3], -2.0);
        assert_eq!(v[12], 7.0);
        assert_eq!(v.iter().filter(|x| **x != 0.0).count(), 3);
        let mut part = vec![0u8; 8];
        d.read_elements(ReadCtx::none(), 3, &mut part).unwrap();
        assert_eq!(&part[..4], &(-2.0f32).to_le_bytes());
        assert!(d.read_elements(ReadCtx::none(), 15, &mut part).is_err());
        assert!(dense_tensor(&t, 63).is_err());
    }
}
