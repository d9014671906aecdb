//! A regular grid of chunks over an N-d array (zarr's, HDF5's chunked layout): every chunk
//! has the same shape and is stored whole, the ones at the far edges padded past the array.
//! `Grid::runs` cuts a read of C-order elements into runs contiguous both in the array and in
//! one chunk's storage, each named by its chunk's coordinates and the element it starts at in
//! that chunk — O(rank) arithmetic a run, nothing allocated per element.
//!
//! A run ends where its chunk ends along the innermost dimension the chunks cut: past it, the
//! next elements of the array are in another chunk, or (in the chunk) in its padding.
//!
//! Invariants (checked by `Grid::new`): rank of `chunk` = rank of `shape`; every chunk
//! dimension ≥ 1; the element count of the array and of one chunk fit in a `u64`.

/// One run of a read: `len` elements from element `at` (C order, padded) of the chunk at
/// `chunk` (its coordinates in the grid).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run<'a> {
    pub chunk: &'a [u64],
    pub at: u64,
    pub len: u64,
}

#[derive(Clone, Debug)]
pub struct Grid {
    shape: Vec<u64>,
    chunk: Vec<u64>,
    /// Chunks along each dimension.
    count: Vec<u64>,
    /// The innermost dimension a chunk does not span whole (`None`: one chunk is the array),
    /// and the elements of the array after one step along it.
    cut: Option<usize>,
    inner: u64,
}

impl Grid {
    /// The grid of `chunk`-shaped chunks over `shape`, or why there is none.
    pub fn new(shape: &[u64], chunk: &[u64]) -> Result<Grid, String> {
        if shape.len() != chunk.len() {
            return Err(format!(
                "chunk shape {chunk:?} for an array of shape {shape:?}"
            ));
        }
        if chunk.contains(&0) {
            return Err(format!("chunk shape {chunk:?} has an empty dimension"));
        }
        let volume = |s: &[u64]| s.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
        if volume(shape).is_none() || volume(chunk).is_none() {
            return Err(format!(
                "shape {shape:?} or chunk shape {chunk:?} overflows"
            ));
        }
        let count = shape
            .iter()
            .zip(chunk)
            .map(|(&s, &c)| s.div_ceil(c))
            .collect();
        let cut = (0..shape.len()).rev().find(|&d| chunk[d] != shape[d]);
        let inner = cut.map_or(1, |d| shape[d + 1..].iter().product());
        Ok(Grid {
            shape: shape.to_vec(),
            chunk: chunk.to_vec(),
            count,
            cut,
            inner,
        })
    }

    /// Chunks along each dimension.
    pub fn counts(&self) -> &[u64] {
        &self.count
    }

    /// Elements of one (padded) chunk.
    pub fn chunk_elements(&self) -> u64 {
        self.chunk.iter().product()
    }

    /// Calls `f` with the runs covering elements `first..first + n` of the array, in order;
    /// stops at `f`'s first error. The caller has checked the range lies inside the array.
    pub fn runs<E>(
        &self,
        first: u64,
        n: u64,
        mut f: impl FnMut(Run<'_>) -> Result<(), E>,
    ) -> Result<(), E> {
        let rank = self.shape.len();
        let mut coord = vec![0u64; rank];
        let mut chunk = vec![0u64; rank];
        let (mut e, end) = (first, first + n);
        while e < end {
            // The element's coordinates, its chunk's, and where it is in that chunk.
            let mut rest = e;
            for d in (0..rank).rev() {
                coord[d] = rest % self.shape[d];
                rest /= self.shape[d];
            }
            let mut at = 0u64;
            for d in 0..rank {
                chunk[d] = coord[d] / self.chunk[d];
                at = at * self.chunk[d] + coord[d] % self.chunk[d];
            }
            let len = match self.cut {
                None => end - e,
                Some(k) => {
                    // To the chunk's end along `k`, the dimensions inside `k` whole.
                    let stop = ((chunk[k] + 1) * self.chunk[k]).min(self.shape[k]);
                    let within: u64 = coord[k + 1..]
                        .iter()
                        .zip(&self.shape[k + 1..])
                        .fold(0, |a, (&c, &s)| a * s + c);
                    ((stop - coord[k]) * self.inner - within).min(end - e)
                }
            };
            debug_assert!(len > 0);
            f(Run {
                chunk: &chunk,
                at,
                len,
            })?;
            e += len;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every element of every read lands where element-by-element arithmetic puts it.
    #[test]
    fn runs_match_element_arithmetic() {
        let cases: &[(&[u64], &[u64])] = &[
            (&[], &[]),
            (&[7], &[3]),
            (&[7], &[7]),
            (&[7], &[10]),
            (&[5, 4], &[2, 4]),
            (&[5, 4], &[2, 3]),
            (&[5, 4], &[5, 1]),
            (&[3, 4, 5], &[2, 4, 5]),
            (&[3, 4, 5], &[3, 2, 5]),
            (&[3, 4, 5], &[1, 3, 2]),
            (&[2, 0, 3], &[1, 1, 1]),
        ];
        for &(shape, chunk) in cases {
            let g = Grid::new(shape, chunk).unwrap();
            let total: u64 = shape.iter().product();
            for first in 0..total {
                for n in 0..=total - first {
                    let mut got = Vec::new();
                    g.runs(first, n, |r| {
                        for i in 0..r.len {
                            got.push((r.chunk.to_vec(), r.at + i));
                        }
                        Ok::<_, ()>(())
                    })
                    .unwrap();
                    let want: Vec<_> = (first..first + n)
                        .map(|e| {
                            let mut c = vec![0; shape.len()];
                            let mut rest = e;
                            for d in (0..shape.len()).rev() {
                                c[d] = rest % shape[d];
                                rest /= shape[d];
                            }
                            let ch: Vec<u64> = c.iter().zip(chunk).map(|(x, k)| x / k).collect();
                            let at = c.iter().zip(chunk).fold(0, |a, (x, k)| a * k + x % k);
                            (ch, at)
                        })
                        .collect();
                    assert_eq!(got, want, "shape {shape:?} chunk {chunk:?} {first}+{n}");
                }
            }
        }
    }

    #[test]
    fn whole_rows_are_one_run() {
        let g = Grid::new(&[100, 8], &[10, 8]).unwrap();
        let mut runs = 0;
        g.runs(0, 800, |r| {
            assert_eq!(r.len, 80);
            runs += 1;
            Ok::<_, ()>(())
        })
        .unwrap();
        assert_eq!(runs, 10);
    }

    #[test]
    fn bad_grids_are_refused() {
        assert!(Grid::new(&[4], &[0]).is_err());
        assert!(Grid::new(&[4, 4], &[4]).is_err());
        assert!(Grid::new(&[u64::MAX, 4], &[1, 1]).is_err());
    }
}
