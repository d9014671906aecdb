//! A strided view of stored elements: a PyTorch tensor's size, stride and storage offset over
//! its storage, or a Fortran-order numpy array. Reads give its elements row-major, gathered
//! from the store in runs: the longest suffix of dimensions laid out row-major is one run.
//!
//! Invariant (checked by `new`'s caller through `extent`): every element of the view lies in
//! the store's first `extent()` elements.

use crate::source::{ReadAt, ReadCtx, ReadExt, SourceError};

/// Gather from one read of the whole extent when it is at most this many bytes, or at most
/// `SPAN_FACTOR` times what is asked for; else read run by run.
const SPAN_BYTES: u64 = 4 << 20;
const SPAN_FACTOR: u64 = 4;

#[derive(Clone, Debug)]
pub struct Strided {
    shape: Vec<u64>,
    /// In elements, one per dimension.
    strides: Vec<u64>,
    /// Element of the store where element 0 of the view is.
    offset: u64,
    width: u64,
    /// Elements per run: the product of the trailing dimensions laid out row-major.
    run: u64,
}

impl Strided {
    pub fn new(shape: &[u64], strides: &[u64], offset: u64, width: usize) -> Strided {
        debug_assert_eq!(shape.len(), strides.len());
        let mut run = 1u64;
        for (&n, &s) in shape.iter().zip(strides).rev() {
            if n == 1 {
                continue;
            }
            if s != run {
                break;
            }
            run = run.saturating_mul(n);
        }
        Strided {
            shape: shape.to_vec(),
            strides: strides.to_vec(),
            offset,
            width: width as u64,
            run,
        }
    }

    /// Column-major strides of `shape` (Fortran order).
    pub fn column_major(shape: &[u64]) -> Vec<u64> {
        let mut s = 1u64;
        shape
            .iter()
            .map(|&n| {
                let here = s;
                s = s.saturating_mul(n);
                here
            })
            .collect()
    }

    /// Elements of the store the view reaches into (one past its last element's), `None` if
    /// that overflows; the offset alone for an empty view.
    pub fn extent(&self) -> Option<u64> {
        if self.shape.contains(&0) {
            return Some(self.offset);
        }
        let mut last = self.offset;
        for (&n, &s) in self.shape.iter().zip(&self.strides) {
            last = last.checked_add((n - 1).checked_mul(s)?)?;
        }
        last.checked_add(1)
    }

    /// Whether the view is its store's elements `offset..` in row-major order.
    pub fn is_contiguous(&self) -> bool {
        let count = self.shape.iter().try_fold(1u64, |a, &n| a.checked_mul(n));
        count.is_some_and(|c| self.run >= c)
    }

    /// Store element of row-major element `i`.
    fn place(&self, mut i: u64) -> u64 {
        let mut at = self.offset;
        for (&n, &s) in self.shape.iter().zip(&self.strides).rev() {
            let n = n.max(1);
            at += i % n * s;
            i /= n;
        }
        at
    }

    /// Row-major elements `first..` into `out` (a whole number of elements), from `file`
    /// whose store starts at byte `base`.
    pub fn fill(
        &self,
        ctx: &ReadCtx,
        file: &dyn ReadAt,
        base: u64,
        first: u64,
        out: &mut [u8],
    ) -> Result<(), SourceError> {
        let w = self.width;
        debug_assert_eq!(out.len() as u64 % w.max(1), 0);
        let count = out.len() as u64 / w.max(1);
        if count == 0 {
            return Ok(());
        }
        let (lo, hi) = (self.offset, self.extent().unwrap_or(self.offset));
        let span = (hi - lo) * w;
        if span <= SPAN_BYTES.max(SPAN_FACTOR * out.len() as u64) {
            return file.with_bytes(ctx, base + lo * w, span as usize, |all| {
                self.copy_runs(first, out, |at, dst| {
                    let from = ((at - lo) * w) as usize;
                    dst.copy_from_slice(&all[from..from + dst.len()]);
                    Ok(())
                })
            })?;
        }
        self.copy_runs(first, out, |at, dst| {
            file.read_into(ctx, base + at * w, dst)
        })
    }

    /// Calls `copy(store element, destination)` for each run of `out`.
    fn copy_runs(
        &self,
        first: u64,
        out: &mut [u8],
        mut copy: impl FnMut(u64, &mut [u8]) -> Result<(), SourceError>,
    ) -> Result<(), SourceError> {
        let w = self.width as usize;
        let mut i = first;
        let mut rest = out;
        while !rest.is_empty() {
            let left_in_run = self.run - i % self.run;
            let n = (left_in_run as usize).min(rest.len() / w);
            let (dst, tail) = rest.split_at_mut(n * w);
            copy(self.place(i), dst)?;
            rest = tail;
            i += n as u64;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::MemSource;

    /// A store of 4-byte elements 0, 1, 2, … .
    fn store(n: u32) -> MemSource {
        let bytes: Vec<u8> = (0..n).flat_map(u32::to_le_bytes).collect();
        MemSource::new("s", bytes)
    }

    fn read(v: &Strided, file: &MemSource, first: u64, n: usize) -> Vec<u32> {
        let mut out = vec![0u8; n * 4];
        v.fill(ReadCtx::none(), file, 0, first, &mut out).unwrap();
        out.chunks(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }

    #[test]
    fn a_transposed_matrix_reads_as_its_transpose() {
        // A 2×3 matrix [[0 1 2] [3 4 5]] seen as its 3×2 transpose.
        let v = Strided::new(&[3, 2], &[1, 3], 0, 4);
        assert!(!v.is_contiguous());
        assert_eq!(v.extent(), Some(6));
        let s = store(6);
        assert_eq!(read(&v, &s, 0, 6), [0, 3, 1, 4, 2, 5]);
        assert_eq!(read(&v, &s, 3, 2), [4, 2]);
    }

    #[test]
    fn a_slice_with_an_offset_reads_its_rows() {
        // Rows 1..3, columns 1..3 of a 4×4 matrix.
        let v = Strided::new(&[2, 2], &[4, 1], 5, 4);
        assert_eq!(v.extent(), Some(11));
        assert_eq!(read(&v, &store(16), 0, 4), [5, 6, 9, 10]);
    }

    #[test]
    fn contiguous_views_and_broadcasts() {
        assert!(Strided::new(&[2, 1, 3], &[3, 7, 1], 0, 4).is_contiguous());
        // A broadcast row (stride 0) repeats its elements.
        let v = Strided::new(&[3, 2], &[0, 1], 1, 4);
        assert_eq!(read(&v, &store(4), 0, 6), [1, 2, 1, 2, 1, 2]);
        assert_eq!(Strided::new(&[0, 5], &[5, 1], 3, 4).extent(), Some(3));
        assert_eq!(
            Strided::new(&[u64::MAX, 2], &[u64::MAX, 1], 0, 4).extent(),
            None
        );
    }

    #[test]
    fn column_major_strides() {
        assert_eq!(Strided::column_major(&[2, 3, 4]), [1, 2, 6]);
        let v = Strided::new(&[2, 3], &Strided::column_major(&[2, 3]), 0, 4);
        // Stored column by column: [[0 2 4] [1 3 5]].
        assert_eq!(read(&v, &store(6), 0, 6), [0, 2, 4, 1, 3, 5]);
    }

    #[test]
    fn a_long_view_reads_run_by_run() {
        // Wider than SPAN_BYTES: the runs are read one by one and agree with the one-read path.
        let n = (SPAN_BYTES / 4) as u32 * 2;
        let v = Strided::new(&[2, u64::from(n) / 2], &[1, 2], 0, 4);
        let s = store(n);
        let got = read(&v, &s, 3, 4);
        assert_eq!(got, [6, 8, 10, 12]);
    }
}
