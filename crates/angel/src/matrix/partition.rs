//! One partition of an Angel matrix as a tensor of its own (coordinates: the module comment
//! of `matrix`).

use std::sync::{Arc, OnceLock};

use super::super::stream::Segments;
use super::ranged::{shape_of, Ranged};
use super::{matrix_error, Inner, MatrixFault};
use crate::model::{fill_dense_by_range, ModelError, SparseRows, Tensor, TensorMeta};
use crate::source::ReadCtx;

/// Partition `index` of a matrix (coordinates: see the module comment).
pub(crate) struct AngelPartition {
    pub(super) tmeta: TensorMeta,
    pub(super) inner: Arc<Inner>,
    pub(super) index: usize,
    /// Subtracted from row / column ids for dense reads (0 for sparse partitions).
    pub(super) row_base: u64,
    pub(super) col_base: i64,
    /// The matrix's cache identity plus the partition index.
    pub(super) identity: Option<String>,
    pub(super) segments: OnceLock<Option<Arc<Segments>>>,
}

impl AngelPartition {
    fn global(&self) -> Result<Arc<SparseRows>, ModelError> {
        self.inner
            .part_entries(self.index)
            .map_err(|f| matrix_error(&self.tmeta, f))
    }

    fn segments(&self) -> Result<Option<Arc<Segments>>, ModelError> {
        if let Some(p) = &self.tmeta.problem {
            return Err(matrix_error(
                &self.tmeta,
                Arc::new(MatrixFault::Known(p.clone())),
            ));
        }
        Ok(self
            .segments
            .get_or_init(|| self.inner.segments_of(&[self.index]))
            .clone())
    }

    fn fail(&self, f: Arc<MatrixFault>) -> ModelError {
        matrix_error(&self.tmeta, f)
    }
}

impl Tensor for AngelPartition {
    fn meta(&self) -> &TensorMeta {
        &self.tmeta
    }

    fn fill_elements(&self, ctx: &ReadCtx, first: u64, out: &mut [u8]) -> Result<(), ModelError> {
        let w = self.tmeta.dtype.elem_size().unwrap_or(1);
        let (base, cols) = (self.row_base, self.tmeta.shape[1]);
        let shape = shape_of(self)?;
        fill_dense_by_range(self, ctx, &shape, base, self.col_base, cols, w, first, out)
    }

    fn cache_identity(&self) -> Option<String> {
        self.identity.clone()
    }

    crate::model::capabilities!(as_sparse: Sparse);
}

impl Ranged for AngelPartition {
    fn segments(&self) -> Result<Option<Arc<Segments>>, ModelError> {
        AngelPartition::segments(self)
    }
    fn whole(&self) -> Result<Arc<SparseRows>, ModelError> {
        self.global()
    }
    fn parts(&self) -> &Inner {
        &self.inner
    }
    fn fault(&self, f: Arc<MatrixFault>) -> ModelError {
        self.fail(f)
    }
    fn elem_size(&self) -> usize {
        self.tmeta.dtype.elem_size().unwrap_or(1)
    }
}
