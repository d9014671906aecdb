//! Reads by range shared by a matrix and its partitions (`Ranged`): entries through `stream`,
//! or, when the partitions must be merged, from the decoded whole.

use std::sync::Arc;

use super::super::stream::{Segments, Stream};
use super::{AngelMatrix, Inner, MatrixFault};
use crate::model::{
    entries_in, seek_col_in, ColumnBlock, Entries, ModelError, Sparse, SparseRows, SparseShape,
};
use crate::source::ReadCtx;

/// A matrix or one partition: its entries by range (`stream`), or, when its partitions must
/// be merged, from the decoded whole.
pub(super) trait Ranged {
    fn segments(&self) -> Result<Option<Arc<Segments>>, ModelError>;
    fn whole(&self) -> Result<Arc<SparseRows>, ModelError>;
    fn parts(&self) -> &Inner;
    fn fault(&self, f: Arc<MatrixFault>) -> ModelError;
    fn elem_size(&self) -> usize;
}

/// A matrix's and a partition's stored entries are their ranged reads (a partition's in
/// matrix coordinates: see `partition.rs`).
macro_rules! ranged_sparse {
    ($t:ty) => {
        impl Sparse for $t {
            fn sparse(&self) -> Result<Arc<SparseRows>, ModelError> {
                self.whole()
            }

            fn sparse_shape(&self) -> Result<Arc<SparseShape>, ModelError> {
                shape_of(self)
            }

            fn sparse_shape_is_cheap(&self) -> bool {
                matches!(self.segments(), Ok(Some(_)))
            }

            fn read_entries(
                &self,
                ctx: &ReadCtx,
                first: u64,
                count: u64,
                out: &mut Entries,
            ) -> Result<(), ModelError> {
                entries_of(self, ctx, first, count, out)
            }

            fn seek_col(&self, k: usize, col: i64) -> Result<u64, ModelError> {
                seek_of(self, k, col)
            }

            fn read_column_block(
                &self,
                ctx: &ReadCtx,
                lo: Option<i64>,
                hi: Option<i64>,
                out: &mut ColumnBlock,
            ) -> Option<Result<(), ModelError>> {
                let segs = match self.segments() {
                    Ok(Some(s)) if s.is_columns() => s,
                    Ok(_) => return None,
                    Err(e) => return Some(Err(e)),
                };
                let stream = Stream {
                    segs: &segs,
                    parts: self.parts(),
                    ctx,
                };
                Some(stream.column_block(lo, hi, out).map_err(|f| self.fault(f)))
            }
        }
    };
}
ranged_sparse!(AngelMatrix);
ranged_sparse!(super::AngelPartition);

impl Ranged for AngelMatrix {
    fn segments(&self) -> Result<Option<Arc<Segments>>, ModelError> {
        AngelMatrix::segments(self)
    }
    fn whole(&self) -> Result<Arc<SparseRows>, ModelError> {
        self.entries()
    }
    fn parts(&self) -> &Inner {
        // `segments` succeeded, so the matrix is loaded.
        self.inner.as_deref().expect("a loaded matrix")
    }
    fn fault(&self, f: Arc<MatrixFault>) -> ModelError {
        self.fail(f)
    }
    fn elem_size(&self) -> usize {
        self.tmeta.dtype.elem_size().unwrap_or(1)
    }
}

pub(super) fn shape_of(r: &impl Ranged) -> Result<Arc<SparseShape>, ModelError> {
    if let Some(s) = r.segments()? {
        return Ok(s.shape.clone());
    }
    let e = r.whole()?;
    Ok(Arc::new(SparseShape {
        rows: e.rows.clone(),
        row_ptr: e.row_ptr.clone(),
    }))
}

pub(super) fn entries_of(
    r: &impl Ranged,
    ctx: &ReadCtx,
    first: u64,
    count: u64,
    out: &mut Entries,
) -> Result<(), ModelError> {
    match r.segments()? {
        Some(segs) => Stream {
            segs: &segs,
            parts: r.parts(),
            ctx,
        }
        .read_entries(first, count, out)
        .map_err(|f| r.fault(f)),
        None => entries_in(&*r.whole()?, r.elem_size(), first, count, out),
    }
}

pub(super) fn seek_of(r: &impl Ranged, k: usize, col: i64) -> Result<u64, ModelError> {
    match r.segments()? {
        Some(segs) if k < segs.shape.rows.len() => Stream {
            segs: &segs,
            parts: r.parts(),
            ctx: ReadCtx::none(),
        }
        .seek_col(k, col)
        .map_err(|f| r.fault(f)),
        _ => seek_col_in(&*r.whole()?, k, col),
    }
}
