//! Merging decoded partitions into one matrix (formats/angel.md §12 step 8): rows are the union
//! of the partitions' saved rows; within a row, entries from all partitions sorted by column.
//! A (row, column) supplied twice is an error (§11, and the ambiguous hash case of §9.4).

use crate::model::SparseRows;

/// A (row, column) stored by two partitions: which value Angel would load is undefined.
#[derive(Debug, thiserror::Error)]
#[error("row {row}, column {col} is stored by two partitions")]
pub struct DuplicateEntry {
    pub row: u64,
    pub col: i64,
}

/// Merges `parts` (each in global coordinates, rows ascending) into one `SparseRows`.
pub fn merge(parts: &[&SparseRows], value_width: usize) -> Result<SparseRows, DuplicateEntry> {
    if parts.len() == 1 {
        return Ok(parts[0].clone());
    }
    let nnz: usize = parts.iter().map(|p| p.cols.len()).sum();
    let mut rows: Vec<u64> = parts.iter().flat_map(|p| p.rows.iter().copied()).collect();
    rows.sort_unstable();
    rows.dedup();
    let mut out = SparseRows {
        row_ptr: Vec::with_capacity(rows.len() + 1),
        cols: Vec::with_capacity(nnz),
        values: Vec::with_capacity(nnz * value_width),
        rows: Vec::new(),
    };
    out.row_ptr.push(0);
    // Cursor into each partition's row list; both lists ascend, so one pass suffices.
    let mut cursor = vec![0usize; parts.len()];
    // (first col, part, entry range) of each partition's slice of the current row.
    let mut slices: Vec<(i64, usize, usize, usize)> = Vec::new();
    let mut scratch: Vec<(i64, usize, usize)> = Vec::new();
    for &row in &rows {
        slices.clear();
        for (pi, p) in parts.iter().enumerate() {
            let c = &mut cursor[pi];
            if *c < p.rows.len() && p.rows[*c] == row {
                let (s, e) = (p.row_ptr[*c] as usize, p.row_ptr[*c + 1] as usize);
                if s < e {
                    slices.push((p.cols[s], pi, s, e));
                }
                *c += 1;
            }
        }
        slices.sort_unstable();
        // Fast path: partitions cover disjoint, ordered column ranges (range partitioning).
        let disjoint = slices
            .windows(2)
            .all(|w| parts[w[0].1].cols[w[0].3 - 1] < w[1].0);
        if disjoint {
            for &(_, pi, s, e) in &slices {
                out.cols.extend_from_slice(&parts[pi].cols[s..e]);
                out.values
                    .extend_from_slice(&parts[pi].values[s * value_width..e * value_width]);
            }
        } else {
            scratch.clear();
            for &(_, pi, s, e) in &slices {
                scratch.extend((s..e).map(|i| (parts[pi].cols[i], pi, i)));
            }
            scratch.sort_unstable();
            for w in scratch.windows(2) {
                if w[0].0 == w[1].0 {
                    return Err(DuplicateEntry { row, col: w[0].0 });
                }
            }
            for &(col, pi, i) in &scratch {
                out.cols.push(col);
                out.values
                    .extend_from_slice(&parts[pi].values[i * value_width..(i + 1) * value_width]);
            }
        }
        out.rows.push(row);
        out.row_ptr.push(out.cols.len() as u64);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sr(rows: &[(u64, &[i64])]) -> SparseRows {
        let mut s = SparseRows {
            row_ptr: vec![0],
            ..Default::default()
        };
        for (r, cols) in rows {
            s.rows.push(*r);
            for &c in *cols {
                s.cols.push(c);
                s.values.push(c as u8);
            }
            s.row_ptr.push(s.cols.len() as u64);
        }
        s
    }

    #[test]
    fn merges_ranges_and_interleaved() {
        let a = sr(&[(0, &[0, 1]), (2, &[])]);
        let b = sr(&[(0, &[5]), (1, &[7])]);
        let m = merge(&[&b, &a], 1).unwrap();
        assert_eq!(m.rows, vec![0, 1, 2]);
        assert_eq!(m.row_ptr, vec![0, 3, 4, 4]);
        assert_eq!(m.cols, vec![0, 1, 5, 7]);
        assert_eq!(m.values, vec![0, 1, 5, 7]);
        let c = sr(&[(0, &[0, 4])]);
        let d = sr(&[(0, &[2, 6])]);
        let m = merge(&[&c, &d], 1).unwrap();
        assert_eq!(m.cols, vec![0, 2, 4, 6]);
        let e = sr(&[(0, &[2])]);
        assert!(merge(&[&c, &d, &e], 1).unwrap_err().col == 2);
    }
}
