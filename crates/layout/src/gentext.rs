//! Chunk sources of the generic text layouts: `txt`, `csv` and `libsvm` (SPEC §3).
//!
//! Dense chunks are runs of `CHUNK_ELEMENTS` elements in C order; what follows an element
//! (newline, separator, a row's end) depends only on its index, so a chunk may start or end
//! in the middle of a row.

use std::sync::Arc;

use super::elements::{check_shape, decode, for_each_value, rows_before_unit, with_entries};
use super::num::{
    write_escaped, write_i64, write_libsvm_col, write_libsvm_f32, write_u64, Ascending,
};
use super::text::{ChunkSource, CHUNK_ELEMENTS};
use super::LayoutError;
use crate::model::{DType, SparseShape, Tensor};
use crate::source::ReadCtx;

fn chunks_for(n: u64, per: u64) -> u64 {
    n.div_ceil(per)
}

/// `txt` (one element per line) and `csv` (rows of `cols` elements joined by `sep`, `-o sep=`;
/// `cols` is 1 for rank 0/1). Strings are escaped (`num::write_escaped`).
pub(crate) struct ElementLines {
    pub(crate) tensor: Arc<dyn Tensor>,
    pub(crate) elements: u64,
    /// Elements per line.
    pub(crate) cols: u64,
    /// Between the elements of a line.
    pub(crate) sep: Vec<u8>,
}

impl ChunkSource for ElementLines {
    fn num_chunks(&self) -> u64 {
        chunks_for(self.elements, CHUNK_ELEMENTS)
    }

    fn render(&self, ctx: &ReadCtx, chunk: u64, out: &mut Vec<u8>) -> Result<(), LayoutError> {
        let first = chunk * CHUNK_ELEMENTS;
        let count = (self.elements - first).min(CHUNK_ELEMENTS);
        let cols = self.cols.max(1);
        let sep = |i: u64| match (i + 1) % cols == 0 {
            true => &b"\n"[..],
            false => &self.sep[..],
        };
        if self.tensor.meta().dtype == DType::Str {
            let mut i = first;
            self.tensor.for_each_string(ctx, first, count, &mut |s| {
                write_escaped(s, out);
                out.extend_from_slice(sep(i));
                i += 1;
            })?;
            if i != first + count {
                return Err(LayoutError::Mismatch {
                    what: "strings read",
                    got: i - first,
                    want: count,
                });
            }
            return Ok(());
        }
        out.reserve(count as usize * 12);
        if cols == 1 {
            for_each_value(&*self.tensor, ctx, first, count, |_, v| {
                v.write_py(out);
                out.push(b'\n');
            })?;
        } else {
            for_each_value(&*self.tensor, ctx, first, count, |i, v| {
                v.write_py(out);
                out.extend_from_slice(sep(i));
            })?;
        }
        Ok(())
    }
}

/// Lines of a matrix with rows but no columns: `""` per row (csv) or `"<row>"` (libsvm).
pub(crate) struct BlankRows {
    pub(crate) rows: u64,
    pub(crate) with_row_id: bool,
}

impl ChunkSource for BlankRows {
    fn num_chunks(&self) -> u64 {
        chunks_for(self.rows, CHUNK_ELEMENTS)
    }
    fn render(&self, _: &ReadCtx, chunk: u64, out: &mut Vec<u8>) -> Result<(), LayoutError> {
        let first = chunk * CHUNK_ELEMENTS;
        for r in first..self.rows.min(first + CHUNK_ELEMENTS) {
            if self.with_row_id {
                write_u64(r, out);
            }
            out.push(b'\n');
        }
        Ok(())
    }
}

/// `libsvm` of a dense matrix: `<row>` then ` <col>:<value>` for each non-zero, per row.
pub(crate) struct LibsvmDense {
    pub(crate) tensor: Arc<dyn Tensor>,
    pub(crate) rows: u64,
    pub(crate) cols: u64,
}

impl ChunkSource for LibsvmDense {
    fn num_chunks(&self) -> u64 {
        chunks_for(self.rows.saturating_mul(self.cols), CHUNK_ELEMENTS)
    }
    fn render(&self, ctx: &ReadCtx, chunk: u64, out: &mut Vec<u8>) -> Result<(), LayoutError> {
        let total = self.rows * self.cols;
        let first = chunk * CHUNK_ELEMENTS;
        let count = (total - first).min(CHUNK_ELEMENTS);
        let cols = self.cols;
        // A hash table's lines are labelled by their keys (feature ids), not positions.
        let r0 = first / cols;
        let mut keys = Vec::new();
        let mut labelled = false;
        if self.tensor.key_kind() == Some(crate::model::KeyKind::HashKey) {
            keys.resize(((first + count).div_ceil(cols) - r0) as usize, 0);
            if let Some(r) = self.tensor.row_keys(ctx, r0, &mut keys) {
                r?;
                labelled = true;
            }
        }
        for_each_value(&*self.tensor, ctx, first, count, |i, v| {
            let (r, c) = (i / cols, i % cols);
            if c == 0 {
                match labelled {
                    true => write_i64(keys[(r - r0) as usize], out),
                    false => write_u64(r, out),
                }
            }
            if !v.is_zero() {
                out.push(b' ');
                write_u64(c, out);
                out.push(b':');
                v.write_py(out);
            }
            if c + 1 == cols {
                out.push(b'\n');
            }
        })?;
        Ok(())
    }
}

/// `libsvm` of a sparse matrix: `<row>` then ` <col>:<value>` per stored entry, per stored
/// row. A chunk is `CHUNK_ELEMENTS` units — a row's id or one entry (`rows_before_unit`) — so
/// a row of any length spans chunks and each chunk reads only its own entries.
pub(crate) struct LibsvmSparse {
    tensor: Arc<dyn Tensor>,
    shape: Arc<SparseShape>,
    units: u64,
    /// Bytes a unit takes at most but for rare long values: ` <col>:` with the widest column
    /// id and a float of up to 12 characters (`-123.456789`, `0.0012345678`).
    unit_bytes: usize,
}

impl LibsvmSparse {
    /// Checks the shape once so rendering can index without surprises.
    pub(crate) fn new(tensor: Arc<dyn Tensor>) -> Result<Self, LayoutError> {
        let shape = tensor.sparse_shape()?;
        check_shape(&shape)?;
        let units = shape
            .nnz()
            .checked_add(shape.rows.len() as u64)
            .ok_or(LayoutError::Overflow("libsvm units"))?;
        let cols = tensor.meta().shape.last().copied().unwrap_or(0);
        let col_digits = cols.checked_ilog10().map_or(1, |l| l as usize + 1);
        Ok(LibsvmSparse {
            tensor,
            shape,
            units,
            unit_bytes: 2 + col_digits + 12,
        })
    }
}

impl ChunkSource for LibsvmSparse {
    fn num_chunks(&self) -> u64 {
        chunks_for(self.units, CHUNK_ELEMENTS)
    }
    fn render(&self, ctx: &ReadCtx, chunk: u64, out: &mut Vec<u8>) -> Result<(), LayoutError> {
        let s = &*self.shape;
        let dtype = self.tensor.meta().dtype;
        let u0 = chunk * CHUNK_ELEMENTS;
        let u1 = (u0 + CHUNK_ELEMENTS).min(self.units);
        // Entries among the units: every unit but the row ids.
        let e0 = u0 - rows_before_unit(s, u0) as u64;
        let e1 = u1 - rows_before_unit(s, u1) as u64;
        // Reserved whole: a buffer regrown near its end is a copy of the chunk and twice its
        // fresh pages.
        out.reserve((u1 - u0) as usize * self.unit_bytes);
        with_entries(&*self.tensor, ctx, e0, e1 - e0, |got, es| {
            let units = (s, u0, u1, e0);
            // float32, most weights, without a dispatch on the dtype per entry (~8 % of a
            // `cat` of an LR's libsvm).
            match dtype {
                DType::F32 => libsvm_units(units, got, 4, out, |col, b, ids, out| {
                    let v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                    write_libsvm_f32(col, v, ids, out)
                }),
                _ => libsvm_units(units, got, es, out, |col, b, ids, out| {
                    write_libsvm_col(col, ids, out);
                    decode(dtype, b).write_py(out)
                }),
            }
        })
    }
}

/// Units `u0..u1` (row ids and entries; entries from `e0` in `got`) of a sparse matrix of
/// shape `s` as libsvm text, each entry (` <col>:<value>`) written by `entry` from its column
/// and its value's `es` bytes.
#[inline(always)]
fn libsvm_units(
    (s, u0, u1, e0): (&SparseShape, u64, u64, u64),
    got: &crate::model::Entries,
    es: usize,
    out: &mut Vec<u8>,
    entry: impl Fn(i64, &[u8], &mut Ascending, &mut Vec<u8>),
) {
    // The row holding unit u0: the last whose id is at or before it.
    let mut k = rows_before_unit(s, u0 + 1).saturating_sub(1);
    let mut u = u0;
    let mut ids = Ascending::default();
    while u < u1 {
        let (start, end) = (s.row_ptr[k], s.row_ptr[k + 1]);
        if u == k as u64 + start {
            write_u64(s.rows[k], out);
            if start == end {
                out.push(b'\n');
                k += 1;
            }
            u += 1;
            continue;
        }
        // Unit u is entry u - k - 1 (k + 1 row ids before it); the row's entries in this
        // chunk run to its end or the chunk's, one loop over them.
        let e = u - k as u64 - 1;
        let stop = end.min(u1 - k as u64 - 1);
        debug_assert!(e0 <= e && e < stop);
        let (i0, i1) = ((e - e0) as usize, (stop - e0) as usize);
        let values = got.values[i0 * es..i1 * es].chunks_exact(es);
        for (&col, v) in got.cols[i0..i1].iter().zip(values) {
            entry(col, v, &mut ids, out);
        }
        u += stop - e;
        if stop == end {
            out.push(b'\n');
            k += 1;
        }
    }
}
