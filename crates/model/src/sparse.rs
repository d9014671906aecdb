//! Stored entries of sparse matrices (CSR `SparseRows`, `SparseShape`, column blocks,
//! entries by range) and the dense reads built on them.

use crate::source::ReadCtx;
use crate::{ModelError, RequestError, Sparse};

/// Stored entries of a sparse matrix, compressed by row (CSR). Rows without entries that
/// were saved still appear in `rows` with an empty range (libsvm prints them as `<row>`).
#[derive(Debug, Default, Clone)]
pub struct SparseRows {
    /// Row ids, strictly ascending.
    pub rows: Vec<u64>,
    /// `row_ptr[i]..row_ptr[i+1]` indexes `cols`/`values` for `rows[i]`; len = rows.len() + 1.
    pub row_ptr: Vec<u64>,
    /// Column ids, strictly ascending within a row. Long-key matrices may have negative ids.
    pub cols: Vec<i64>,
    /// Values as little-endian element bytes of the tensor's dtype, `elem_size` each.
    pub values: Vec<u8>,
}

impl SparseRows {
    pub fn nnz(&self) -> u64 {
        self.cols.len() as u64
    }
}

/// The row structure of a sparse tensor without its entries: `SparseRows::rows` and
/// `row_ptr`. Entries are numbered in CSR order (row by row, columns ascending).
#[derive(Debug, Default, Clone)]
pub struct SparseShape {
    pub rows: Vec<u64>,
    /// len = rows.len() + 1, non-decreasing; the last is the entry count.
    pub row_ptr: Vec<u64>,
}

impl SparseShape {
    pub fn nnz(&self) -> u64 {
        self.row_ptr.last().copied().unwrap_or(0)
    }
}

/// Values of a matrix stored by column, a range of columns at a time
/// (`Sparse::read_column_block`): value `i` is at column `cols[i]` of stored row `rows[i]`
/// (an index into `SparseShape::rows`), little-endian element bytes.
#[derive(Debug, Default)]
pub struct ColumnBlock {
    pub cols: Vec<i64>,
    pub rows: Vec<u32>,
    pub values: Vec<u8>,
}

impl ColumnBlock {
    pub(crate) fn clear(&mut self) {
        self.cols.clear();
        self.rows.clear();
        self.values.clear();
    }
}

/// Entries of a sparse tensor read by range (`Tensor::read_entries`).
#[derive(Debug, Default)]
pub struct Entries {
    pub cols: Vec<i64>,
    /// Little-endian element bytes of the tensor's dtype.
    pub values: Vec<u8>,
}

impl Entries {
    pub fn clear(&mut self) {
        self.cols.clear();
        self.values.clear();
    }
}

/// Fills `out` (elements of `es` bytes, C order over `cols` columns, from element `first`)
/// with the dense form of the sparse tensor `t` of shape `shape`, reading only the entries
/// that land in `out` (`Tensor::seek_col`, `Tensor::read_entries`). `t`'s row ids and columns
/// are shifted by `row_base` and `col_base` (a window of a bigger matrix); entries outside
/// `0..cols` are ignored.
#[allow(clippy::too_many_arguments)]
pub fn fill_dense_by_range(
    t: &dyn Sparse,
    ctx: &ReadCtx,
    shape: &SparseShape,
    row_base: u64,
    col_base: i64,
    cols: u64,
    es: usize,
    first: u64,
    out: &mut [u8],
) -> Result<(), ModelError> {
    if es == 0 || out.len() % es != 0 {
        return Err(RequestError::PartialElement {
            len: out.len(),
            elem: es,
        }
        .into());
    }
    out.fill(0);
    let n = (out.len() / es) as u64;
    if n == 0 || cols == 0 {
        return Ok(());
    }
    let end = first.checked_add(n).ok_or(RequestError::OutOfRange {
        first,
        count: n,
        total: u64::MAX,
    })?;
    let (r0, r1) = (first / cols, (end - 1) / cols);
    let global =
        |c: u64| (c as i128 + col_base as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64;
    let mut k = shape
        .rows
        .partition_point(|&r| r < r0.saturating_add(row_base));
    let mut got = Entries::default();
    while k < shape.rows.len() && shape.rows[k] - row_base <= r1 {
        let row = shape.rows[k] - row_base;
        // This row's local columns in [first, end).
        let lo = first.saturating_sub(row * cols);
        let hi = (end - row * cols).min(cols);
        let e0 = t.seek_col(k, global(lo))?;
        let e1 = if hi == cols {
            shape.row_ptr[k + 1]
        } else {
            t.seek_col(k, global(hi))?
        };
        got.clear();
        t.read_entries(ctx, e0, e1.saturating_sub(e0), &mut got)?;
        if got.values.len() != got.cols.len() * es {
            return Err(RequestError::PartialElement {
                len: got.values.len(),
                elem: es,
            }
            .into());
        }
        for (i, &c) in got.cols.iter().enumerate() {
            let local = c as i128 - col_base as i128;
            if local < lo as i128 || local >= hi as i128 {
                continue;
            }
            let at = (row * cols + local as u64 - first) as usize * es;
            out[at..at + es].copy_from_slice(&got.values[i * es..(i + 1) * es]);
        }
        k += 1;
    }
    Ok(())
}

/// `Tensor::read_entries` of entries held in memory.
pub fn entries_in(
    s: &SparseRows,
    es: usize,
    first: u64,
    count: u64,
    out: &mut Entries,
) -> Result<(), ModelError> {
    RequestError::within(first, count, s.nnz())?;
    let (a, b) = (first as usize, (first + count) as usize);
    out.cols.extend_from_slice(&s.cols[a..b]);
    out.values.extend_from_slice(&s.values[a * es..b * es]);
    Ok(())
}

/// `Tensor::seek_col` of entries held in memory.
pub fn seek_col_in(s: &SparseRows, k: usize, col: i64) -> Result<u64, ModelError> {
    match (s.row_ptr.get(k), s.row_ptr.get(k + 1)) {
        (Some(&a), Some(&b)) if a <= b && b <= s.nnz() => {
            let (a, b) = (a as usize, b as usize);
            Ok((a + s.cols[a..b].partition_point(|&c| c < col)) as u64)
        }
        _ => Err(RequestError::OutOfRange {
            first: k as u64,
            count: 1,
            total: s.rows.len() as u64,
        }
        .into()),
    }
}
