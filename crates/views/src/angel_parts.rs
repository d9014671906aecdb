//! The partitions of one tensor in the `.angel/` view (formats/angel.md §4, §13): Angel's
//! default grid (row blocks outer, column blocks inner, ids from 0, last blocks clipped,
//! columns from the index-range start), sized so that a partition holds about `limit` bytes,
//! and grouped into files as one parameter server groups its partitions.

use std::ops::Range;
use std::sync::Arc;

use modelfs_io::source::ReadCtx;
use modelfs_model::{ModelError, SparseRows, Tensor, TensorMeta};

/// Angel's partition grid over rows `0..rows` and columns `lo..lo + width`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Grid {
    pub(crate) rows: u64,
    pub(crate) lo: i64,
    pub(crate) width: u64,
    pub(crate) block_row: u64,
    pub(crate) block_col: u64,
}

/// One cell of the grid: rows `r0..r1`, columns `c0..c1` (global ids).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Cell {
    pub(crate) r0: u64,
    pub(crate) r1: u64,
    pub(crate) c0: i64,
    pub(crate) c1: i64,
}

impl Cell {
    pub(crate) fn width(&self) -> u64 {
        (i128::from(self.c1) - i128::from(self.c0)) as u64
    }
}

impl Grid {
    /// The cells in partition-id order. `block_row`, `block_col` ≥ 1 (the constructors
    /// ensure it), so the count is at most `rows × width`.
    pub(crate) fn cells(&self) -> Vec<Cell> {
        let mut out = Vec::new();
        let mut r0 = 0;
        while r0 < self.rows {
            let r1 = r0.saturating_add(self.block_row).min(self.rows);
            let mut c = 0u64;
            while c < self.width {
                let c_end = c.saturating_add(self.block_col).min(self.width);
                out.push(Cell {
                    r0,
                    r1,
                    c0: self.lo.saturating_add_unsigned(c),
                    c1: self.lo.saturating_add_unsigned(c_end),
                });
                c = c_end;
            }
            r0 = r1;
        }
        out
    }

    /// A grid whose cells hold at most `per` elements of a dense `rows × width` matrix.
    pub(crate) fn dense(rows: u64, width: u64, per: u64) -> Grid {
        let per = per.max(1);
        let (block_row, block_col) = if width <= per {
            ((per / width.max(1)).clamp(1, rows.max(1)), width.max(1))
        } else {
            (1, per)
        };
        Grid {
            rows,
            lo: 0,
            width,
            block_row,
            block_col,
        }
    }

    /// A grid whose cells hold about `per` of the stored entries `s`: as few cells as that
    /// takes, rows split before columns, refined while a cell still holds more than `per`.
    /// A uniform grid cannot part entries crowded in a few columns of a wide range: after 8
    /// refinements (at most 256× the cells first tried) the grid stays as it is.
    pub(crate) fn sparse(s: &SparseRows, rows: u64, lo: i64, width: u64, per: u64) -> Grid {
        let per = per.max(1);
        let mut cells = s.nnz().div_ceil(per).max(1);
        let full = Grid {
            rows,
            lo,
            width,
            block_row: rows.max(1),
            // Angel's blockCol is an int64.
            block_col: width.clamp(1, i64::MAX as u64),
        };
        if cells == 1 {
            return full;
        }
        let mut grid = full;
        for _ in 0..8 {
            grid = if rows >= cells {
                Grid {
                    block_row: rows.div_ceil(cells),
                    ..full
                }
            } else {
                let per_row = cells.div_ceil(rows.max(1));
                Grid {
                    block_row: 1,
                    block_col: width.div_ceil(per_row).max(1),
                    ..full
                }
            };
            if grid.cells().iter().all(|c| count_in(s, c) <= per) {
                break;
            }
            cells = cells.saturating_mul(2);
        }
        grid
    }
}

/// Entry indexes of saved row `i` of `s` with columns in `c0..c1`.
fn entries_in(s: &SparseRows, i: usize, c0: i64, c1: i64) -> Range<usize> {
    let (a, b) = (s.row_ptr[i] as usize, s.row_ptr[i + 1] as usize);
    let cols = &s.cols[a..b];
    a + cols.partition_point(|&c| c < c0)..a + cols.partition_point(|&c| c < c1)
}

/// Saved rows of `s` in `r0..r1` (indexes into `s.rows`).
fn rows_in(s: &SparseRows, r0: u64, r1: u64) -> Range<usize> {
    s.rows.partition_point(|&r| r < r0)..s.rows.partition_point(|&r| r < r1)
}

fn count_in(s: &SparseRows, c: &Cell) -> u64 {
    rows_in(s, c.r0, c.r1)
        .map(|i| entries_in(s, i, c.c0, c.c1).len() as u64)
        .sum()
}

/// The entries of `s` (checked CSR, `es` bytes per value) in `cell`. Every saved row of the
/// cell's rows stays, with no entries if it has none there (as Angel writes an absent row),
/// so a saved row without entries survives the round trip.
pub(crate) fn sub_rows(s: &SparseRows, es: usize, cell: &Cell) -> SparseRows {
    let mut out = SparseRows {
        rows: Vec::new(),
        row_ptr: vec![0],
        cols: Vec::new(),
        values: Vec::new(),
    };
    for i in rows_in(s, cell.r0, cell.r1) {
        let e = entries_in(s, i, cell.c0, cell.c1);
        out.rows.push(s.rows[i]);
        out.cols.extend_from_slice(&s.cols[e.clone()]);
        out.values
            .extend_from_slice(&s.values[e.start * es..e.end * es]);
        out.row_ptr.push(out.cols.len() as u64);
    }
    out
}

/// Partitions `0..n` grouped into files as one parameter server does (§4): split at the
/// middle until a group has at most 5; a file is named by its first partition's id.
pub(crate) fn file_groups(n: usize) -> Vec<Range<usize>> {
    fn split(r: Range<usize>, out: &mut Vec<Range<usize>>) {
        if r.len() <= 5 {
            out.push(r);
        } else {
            let mid = (r.start + r.end) / 2;
            split(r.start..mid, out);
            split(mid..r.end, out);
        }
    }
    let mut out = Vec::new();
    if n > 0 {
        split(0..n, &mut out);
    }
    out
}

/// The cell `cell` of a dense tensor seen as a `rows × cols` matrix, as a tensor of its own.
pub(crate) struct Window {
    parent: Arc<dyn Tensor>,
    meta: TensorMeta,
    cols: u64,
    cell: Cell,
}

impl Window {
    /// `cell` lies inside the parent's `rows × cols` (columns from 0).
    pub(crate) fn new(parent: Arc<dyn Tensor>, cols: u64, cell: Cell) -> Window {
        let mut meta = parent.meta().clone();
        meta.shape = vec![cell.r1 - cell.r0, cell.width()];
        meta.partitions.clear();
        Window {
            parent,
            meta,
            cols,
            cell,
        }
    }
}

impl Tensor for Window {
    fn meta(&self) -> &TensorMeta {
        &self.meta
    }

    fn fill_elements(&self, ctx: &ReadCtx, first: u64, out: &mut [u8]) -> Result<(), ModelError> {
        let es = self.meta.dtype.elem_size().unwrap_or(1);
        let width = self.cell.width();
        if width == self.cols {
            return self
                .parent
                .read_elements(ctx, self.cell.r0 * self.cols + first, out);
        }
        let n = (out.len() / es) as u64;
        let mut done = 0u64;
        while done < n {
            let at = first + done;
            let (r, c) = (at / width, at % width);
            let run = (width - c).min(n - done);
            let from = (self.cell.r0 + r) * self.cols + self.cell.c0 as u64 + c;
            let buf = &mut out[(done as usize) * es..((done + run) as usize) * es];
            self.parent.read_elements(ctx, from, buf)?;
            done += run;
        }
        Ok(())
    }

    fn cache_identity(&self) -> Option<String> {
        let c = &self.cell;
        self.parent
            .cache_identity()
            .map(|id| format!("{id}\0window {}..{} {}..{}", c.r0, c.r1, c.c0, c.c1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_group_like_one_parameter_server() {
        let firsts = |n| -> Vec<usize> { file_groups(n).iter().map(|r| r.start).collect() };
        assert_eq!(firsts(12), vec![0, 3, 6, 9]);
        assert_eq!(file_groups(7), vec![0..3, 3..7]);
        assert_eq!(file_groups(5), vec![0..5]);
        assert_eq!(file_groups(1), vec![0..1]);
        assert!(file_groups(0).is_empty());
    }

    #[test]
    fn the_grid_is_angels_row_blocks_outer() {
        // formats/angel.md §3.5: row 3, col 2147483657, blockRow 3, blockCol 1073741828.
        let g = Grid {
            rows: 3,
            lo: 0,
            width: 2147483657,
            block_row: 3,
            block_col: 1073741828,
        };
        let c: Vec<(i64, i64)> = g.cells().iter().map(|c| (c.c0, c.c1)).collect();
        assert_eq!(
            c,
            vec![
                (0, 1073741828),
                (1073741828, 2147483656),
                (2147483656, 2147483657)
            ]
        );
        let d = Grid::dense(10, 4, 8);
        assert_eq!((d.block_row, d.block_col), (2, 4));
        assert_eq!(d.cells().len(), 5);
        let wide = Grid::dense(2, 100, 30);
        assert_eq!((wide.block_row, wide.block_col), (1, 30));
        assert_eq!(wide.cells().len(), 8);
        assert_eq!(
            wide.cells()[3],
            Cell {
                r0: 0,
                r1: 1,
                c0: 90,
                c1: 100
            }
        );
    }

    fn rows_of(cols: Vec<i64>) -> SparseRows {
        let n = cols.len() as u64;
        SparseRows {
            rows: vec![0, 5],
            row_ptr: vec![0, n - 1, n],
            values: vec![0; cols.len() * 4],
            cols,
        }
    }

    #[test]
    fn a_sparse_grid_bounds_its_cells() {
        // Row 0 with 1000 keys spread over a 2^41 range, row 5 with one.
        let s = rows_of((0..1000i64).map(|i| i << 30).chain([7]).collect());
        let g = Grid::sparse(&s, 6, 0, 1 << 41, 100);
        let cells = g.cells();
        assert!(cells.iter().all(|c| count_in(&s, c) <= 100), "{g:?}");
        let total: u64 = cells.iter().map(|c| count_in(&s, c)).sum();
        assert_eq!(total, 1001);
        let first = sub_rows(&s, 4, &cells[0]);
        assert_eq!(first.rows, vec![0]);
        assert_eq!(
            first.cols,
            (0..first.cols.len() as i64)
                .map(|i| i << 30)
                .collect::<Vec<_>>()
        );
        // Crowded keys cannot be parted by a uniform grid: it still ends, every entry kept.
        let s = rows_of((0..1001i64).collect());
        let cells = Grid::sparse(&s, 6, 0, 1 << 41, 100).cells();
        assert!(cells.len() < 100_000);
        assert_eq!(cells.iter().map(|c| count_in(&s, c)).sum::<u64>(), 1001);
    }
}
