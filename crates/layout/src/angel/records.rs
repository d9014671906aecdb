//! The records of an Angel file, independent of text or binary encoding (formats/angel.md
//! §7–§8, SPEC §3).
//!
//! The 2-D view: rank 0/1 is one row, rank ≥ 2 is `prod(shape[:-1]) × shape[-1]`; a sparse
//! tensor is its own `rows × cols` with only its stored entries.
//! - Row formats: one record per element (dense, C order) or per stored entry (sparse).
//! - Column formats: one record per column holding one value per row: all rows of a dense
//!   tensor; the saved rows (`SparseRows::rows`) of a sparse one, over the union of its
//!   columns, 0 where absent. A column record is `1 + k` *items* (its id, then k values), and
//!   items are what the traversal counts, so a range never needs a whole tall column.

use std::sync::Arc;

use super::value::{AngelNum, AngelValue};
use crate::elements::{check_shape, check_sparse, decode, for_each_value, with_entries, Value};
use crate::model::{DType, SparseRows, SparseShape, Tensor};
use crate::source::ReadCtx;
use crate::LayoutError;

/// Where the values come from.
pub(crate) enum Data {
    Dense(Arc<dyn Tensor>),
    /// Stored entries read by range (row formats of a sparse tensor); the shape passed
    /// `check_shape`.
    Stream {
        tensor: Arc<dyn Tensor>,
        shape: Arc<SparseShape>,
    },
    /// Stored entries (checked by `Records::sparse`) and, for column formats, their
    /// column-major index.
    Sparse {
        rows: Arc<SparseRows>,
        dtype: DType,
        columns: Option<Columns>,
    },
}

/// Column-major index of a `SparseRows`: column `cols[j]` holds entries
/// `entries[ptr[j]..ptr[j + 1]]` as `(saved row index, entry index)`, ascending by row.
pub(crate) struct Columns {
    cols: Vec<i64>,
    ptr: Vec<usize>,
    entries: Vec<(u32, usize)>,
}

impl Columns {
    fn build(s: &SparseRows) -> Result<Columns, LayoutError> {
        if s.rows.len() > u32::MAX as usize {
            return Err(LayoutError::Overflow("saved row count"));
        }
        let mut all: Vec<(i64, u32, usize)> = Vec::with_capacity(s.cols.len());
        for (ri, w) in s.row_ptr.windows(2).enumerate() {
            for k in w[0] as usize..w[1] as usize {
                all.push((s.cols[k], ri as u32, k));
            }
        }
        all.sort_unstable();
        let mut c = Columns {
            cols: Vec::new(),
            ptr: vec![0],
            entries: Vec::with_capacity(all.len()),
        };
        for &(col, ri, k) in &all {
            if c.cols.last() != Some(&col) {
                if !c.cols.is_empty() {
                    c.ptr.push(c.entries.len());
                }
                c.cols.push(col);
            }
            c.entries.push((ri, k));
        }
        if !c.cols.is_empty() {
            c.ptr.push(c.entries.len());
        }
        Ok(c)
    }
}

/// One item of a column record.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Item {
    /// The column id that starts a record.
    Key(i64),
    /// A value; `last` ends the record.
    Value { num: AngelNum, last: bool },
}

pub(crate) struct Records {
    pub(crate) value: AngelValue,
    pub(crate) cols: u64,
    pub(crate) data: Data,
    /// Added to a dense tensor's row and column ids: the tensor is a window of a bigger
    /// matrix (one partition of an `.angel/` view), whose ids are global. Sparse entries
    /// carry global ids already.
    row_base: u64,
    col_base: i64,
}

impl Records {
    pub(crate) fn dense(tensor: Arc<dyn Tensor>, value: AngelValue, cols: u64) -> Records {
        Records {
            value,
            cols,
            data: Data::Dense(tensor),
            row_base: 0,
            col_base: 0,
        }
    }

    /// A dense window whose first element is at (`row_base`, `col_base`) of its matrix.
    pub(crate) fn dense_at(
        tensor: Arc<dyn Tensor>,
        value: AngelValue,
        cols: u64,
        row_base: u64,
        col_base: i64,
    ) -> Records {
        Records {
            row_base,
            col_base,
            ..Records::dense(tensor, value, cols)
        }
    }

    /// A sparse tensor's stored entries, read by range (row formats).
    pub(crate) fn stream(
        tensor: Arc<dyn Tensor>,
        value: AngelValue,
        cols: u64,
    ) -> Result<Records, LayoutError> {
        let shape = tensor.sparse_shape()?;
        check_shape(&shape)?;
        Ok(Records {
            value,
            cols,
            data: Data::Stream { tensor, shape },
            row_base: 0,
            col_base: 0,
        })
    }

    /// The stored row ids (sparse tensors).
    pub(crate) fn stored_rows(&self) -> Option<&[u64]> {
        match &self.data {
            Data::Dense(_) => None,
            Data::Stream { shape, .. } => Some(&shape.rows),
            Data::Sparse { rows, .. } => Some(&rows.rows),
        }
    }

    /// Checks the CSR structure once, so traversals can index without surprises, and builds
    /// the column index when `columns` is asked for.
    pub(crate) fn sparse(
        rows: Arc<SparseRows>,
        dtype: DType,
        value: AngelValue,
        cols: u64,
        columns: bool,
    ) -> Result<Records, LayoutError> {
        check_sparse(&rows, dtype)?;
        let columns = if columns {
            Some(Columns::build(&rows)?)
        } else {
            None
        };
        Ok(Records {
            value,
            cols,
            data: Data::Sparse {
                rows,
                dtype,
                columns,
            },
            row_base: 0,
            col_base: 0,
        })
    }

    /// Records of a row format: elements (dense) or stored entries (sparse).
    pub(crate) fn row_records(&self) -> u64 {
        match &self.data {
            Data::Dense(t) => t.meta().num_elements().unwrap_or(0),
            Data::Stream { shape, .. } => shape.nnz(),
            Data::Sparse { rows, .. } => rows.nnz(),
        }
    }

    /// Values per column record (`k`).
    pub(crate) fn column_rows(&self) -> u64 {
        match &self.data {
            Data::Dense(t) => t.meta().num_elements().unwrap_or(0) / self.cols.max(1),
            Data::Stream { shape, .. } => shape.rows.len() as u64,
            Data::Sparse { rows, .. } => rows.rows.len() as u64,
        }
    }

    /// Records of a column format.
    pub(crate) fn column_records(&self) -> u64 {
        match &self.data {
            Data::Dense(_) => self.cols,
            Data::Stream { .. } => 0,
            Data::Sparse { columns, .. } => columns.as_ref().map_or(0, |c| c.cols.len() as u64),
        }
    }

    /// Items of a column format (`records × (1 + k)`), `None` on overflow.
    pub(crate) fn column_items(&self) -> Option<u64> {
        self.column_records()
            .checked_mul(self.column_rows().checked_add(1)?)
    }

    /// Calls `f(row, col, value)` for row records `first..first + count`.
    pub(crate) fn for_each_row_record<F: FnMut(u64, i64, AngelNum)>(
        &self,
        ctx: &ReadCtx,
        first: u64,
        count: u64,
        mut f: F,
    ) -> Result<(), LayoutError> {
        let vt = self.value;
        match &self.data {
            Data::Dense(t) => {
                let cols = self.cols.max(1);
                let (mut row, mut col) = (first / cols, first % cols);
                for_each_value(&**t, ctx, first, count, |_, v| {
                    f(row + self.row_base, col as i64 + self.col_base, vt.num(v));
                    col += 1;
                    if col == cols {
                        col = 0;
                        row += 1;
                    }
                })?;
            }
            Data::Stream { tensor, shape } => {
                let dtype = tensor.meta().dtype;
                let end = first.saturating_add(count).min(shape.nnz());
                with_entries(
                    &**tensor,
                    ctx,
                    first,
                    end.saturating_sub(first),
                    |got, es| {
                        let mut k = shape
                            .row_ptr
                            .partition_point(|&p| p <= first)
                            .saturating_sub(1);
                        for (i, &col) in got.cols.iter().enumerate() {
                            while shape.row_ptr[k + 1] <= first + i as u64 {
                                k += 1;
                            }
                            let v = decode(dtype, &got.values[i * es..(i + 1) * es]);
                            f(shape.rows[k], col, vt.num(v));
                        }
                    },
                )?;
            }
            Data::Sparse { rows: s, dtype, .. } => {
                let es = dtype.elem_size().unwrap_or(1);
                let end = first.saturating_add(count).min(s.nnz());
                let mut ri = s.row_ptr.partition_point(|&p| p <= first).saturating_sub(1);
                for k in first..end {
                    while s.row_ptr[ri + 1] <= k {
                        ri += 1;
                    }
                    let k = k as usize;
                    let v = decode(*dtype, &s.values[k * es..][..es]);
                    f(s.rows[ri], s.cols[k], vt.num(v));
                }
            }
        }
        Ok(())
    }

    /// Calls `f` for column items `first..first + count` (see the module comment).
    pub(crate) fn for_each_column_item<F: FnMut(Item)>(
        &self,
        ctx: &ReadCtx,
        first: u64,
        count: u64,
        mut f: F,
    ) -> Result<(), LayoutError> {
        let k = self.column_rows();
        let per = k + 1;
        let end = first
            .saturating_add(count)
            .min(self.column_items().unwrap_or(0));
        let mut rect = Vec::new();
        let mut at = first;
        while at < end {
            // A piece: columns j0..j1, each from slot s0 to s1 (slot 0 is the id, slot s ≥ 1
            // is row s − 1). Whole columns are grouped; a partial one is a piece of its own.
            let (j0, s0) = (at / per, at % per);
            let (j1, s1) = if s0 == 0 && end - at >= per {
                (j0 + (end - at) / per, per)
            } else {
                (j0 + 1, per.min(s0 + (end - at)))
            };
            let (r0, r1) = (s0.max(1) - 1, s1 - 1);
            match &self.data {
                Data::Dense(t) => {
                    self.dense_rect(ctx, &**t, r0..r1, j0..j1, &mut rect)?;
                    let width = (j1 - j0) as usize;
                    for j in j0..j1 {
                        if s0 == 0 {
                            f(Item::Key(j as i64 + self.col_base));
                        }
                        for r in r0..r1 {
                            let v = rect[(r - r0) as usize * width + (j - j0) as usize];
                            f(Item::Value {
                                num: self.value.num(v),
                                last: r + 1 == k,
                            });
                        }
                    }
                }
                Data::Stream { .. } => {
                    return Err(LayoutError::Internal("column items of streamed entries"))
                }
                Data::Sparse {
                    rows: s,
                    dtype,
                    columns,
                } => {
                    let c = columns
                        .as_ref()
                        .ok_or(LayoutError::Internal("column index not built"))?;
                    let es = dtype.elem_size().unwrap_or(1);
                    for j in j0 as usize..j1 as usize {
                        if s0 == 0 {
                            f(Item::Key(c.cols[j]));
                        }
                        let entries = &c.entries[c.ptr[j]..c.ptr[j + 1]];
                        let mut next = entries.partition_point(|e| (e.0 as u64) < r0);
                        for r in r0..r1 {
                            let num = match entries.get(next) {
                                Some(&(ri, e)) if ri as u64 == r => {
                                    next += 1;
                                    let v = decode(*dtype, &s.values[e * es..][..es]);
                                    self.value.num(v)
                                }
                                _ => self.value.zero(),
                            };
                            f(Item::Value {
                                num,
                                last: r + 1 == k,
                            });
                        }
                    }
                }
            }
            at += (j1 - j0 - 1) * per + (s1 - s0);
        }
        Ok(())
    }

    /// Elements `rows × cols` of a dense tensor into `out`, row-major (one ranged read per row).
    fn dense_rect(
        &self,
        ctx: &ReadCtx,
        t: &dyn Tensor,
        rows: std::ops::Range<u64>,
        cols: std::ops::Range<u64>,
        out: &mut Vec<Value>,
    ) -> Result<(), LayoutError> {
        out.clear();
        for r in rows {
            let first = r * self.cols + cols.start;
            for_each_value(t, ctx, first, cols.end - cols.start, |_, v| out.push(v))?;
        }
        Ok(())
    }
}
