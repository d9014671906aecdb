//! Chunk sources of the generic text layouts: `txt`, `csv` and `libsvm` (SPEC §3).
//!
//! Dense chunks are runs of `CHUNK_ELEMENTS` elements in C order; what follows an element
//! (newline, separator, a row's end) depends only on its index, so a chunk may start or end
//! in the middle of a row.

use std::sync::Arc;

use super::elements::{check_sparse, decode, for_each_value};
use super::num::{write_escaped, write_i64, write_u64};
use super::text::{ChunkSource, CHUNK_ELEMENTS};
use super::LayoutError;
use crate::model::{DType, SparseRows, Tensor};

fn chunks_for(n: u64, per: u64) -> u64 {
    n.div_ceil(per)
}

/// `txt` (one element per line) and `csv` (rows of `cols` elements joined by `,`; `cols` is 1
/// for rank 0/1). Strings are escaped (`num::write_escaped`).
pub(crate) struct ElementLines {
    pub(crate) tensor: Arc<dyn Tensor>,
    pub(crate) elements: u64,
    /// Elements per line.
    pub(crate) cols: u64,
}

impl ChunkSource for ElementLines {
    fn num_chunks(&self) -> u64 {
        chunks_for(self.elements, CHUNK_ELEMENTS)
    }

    fn render(&self, chunk: u64, out: &mut Vec<u8>) -> Result<(), LayoutError> {
        let first = chunk * CHUNK_ELEMENTS;
        let count = (self.elements - first).min(CHUNK_ELEMENTS);
        let cols = self.cols.max(1);
        let sep = |i: u64| if (i + 1) % cols == 0 { b'\n' } else { b',' };
        if self.tensor.meta().dtype == DType::Str {
            let mut i = first;
            self.tensor.for_each_string(first, count, &mut |s| {
                write_escaped(s, out);
                out.push(sep(i));
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
            for_each_value(&*self.tensor, first, count, |_, v| {
                v.write_py(out);
                out.push(b'\n');
            })?;
        } else {
            for_each_value(&*self.tensor, first, count, |i, v| {
                v.write_py(out);
                out.push(sep(i));
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
    fn render(&self, chunk: u64, out: &mut Vec<u8>) -> Result<(), LayoutError> {
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
    fn render(&self, chunk: u64, out: &mut Vec<u8>) -> Result<(), LayoutError> {
        let total = self.rows * self.cols;
        let first = chunk * CHUNK_ELEMENTS;
        let count = (total - first).min(CHUNK_ELEMENTS);
        let cols = self.cols;
        for_each_value(&*self.tensor, first, count, |i, v| {
            let (r, c) = (i / cols, i % cols);
            if c == 0 {
                write_u64(r, out);
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

/// `libsvm` of a sparse matrix: its stored rows and entries. Chunks are runs of stored rows
/// holding about `CHUNK_ELEMENTS` entries (`starts[i]` = first row index of chunk i).
pub(crate) struct LibsvmSparse {
    pub(crate) rows: Arc<SparseRows>,
    pub(crate) dtype: DType,
    starts: Vec<usize>,
}

impl LibsvmSparse {
    /// Checks the CSR structure once so rendering can index without surprises.
    pub(crate) fn new(rows: Arc<SparseRows>, dtype: DType) -> Result<Self, LayoutError> {
        check_sparse(&rows, dtype)?;
        let mut starts = Vec::new();
        let mut acc = CHUNK_ELEMENTS;
        for (k, w) in rows.row_ptr.windows(2).enumerate() {
            if acc >= CHUNK_ELEMENTS {
                starts.push(k);
                acc = 0;
            }
            acc += 1 + (w[1] - w[0]);
        }
        Ok(LibsvmSparse {
            rows,
            dtype,
            starts,
        })
    }
}

impl ChunkSource for LibsvmSparse {
    fn num_chunks(&self) -> u64 {
        self.starts.len() as u64
    }
    fn render(&self, chunk: u64, out: &mut Vec<u8>) -> Result<(), LayoutError> {
        let s = &*self.rows;
        let es = self.dtype.elem_size().unwrap_or(1);
        let a = self.starts[chunk as usize];
        let b = self
            .starts
            .get(chunk as usize + 1)
            .copied()
            .unwrap_or(s.rows.len());
        for k in a..b {
            write_u64(s.rows[k], out);
            for e in s.row_ptr[k] as usize..s.row_ptr[k + 1] as usize {
                out.push(b' ');
                write_i64(s.cols[e], out);
                out.push(b':');
                decode(self.dtype, &s.values[e * es..(e + 1) * es]).write_py(out);
            }
            out.push(b'\n');
        }
        Ok(())
    }
}
