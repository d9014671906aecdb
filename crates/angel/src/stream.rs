//! A matrix's entries read by range across its partitions, from the meta alone: which
//! partition holds entry `e`, and where in it.
//!
//! Entries are numbered in CSR order (rows ascending, columns ascending within a row), as the
//! merged matrix would hold them. From the meta: row formats write `elementNum` records per
//! row, rows ascending; column formats hold, for each saved row, one value per column record
//! (§8). Within a row, the partitions that hold it cover disjoint column ranges (Angel's range
//! grid), so the row's entries are their records in `startCol` order — no merge, no sort.
//! When they are not disjoint (hash partitions, §9.4), `Segments::new` gives `None` and the
//! matrix is decoded whole instead.

use std::sync::Arc;

use super::decode::DecodeError;
use super::fault::MatrixFault;
use super::meta::{MatrixMeta, PartMeta};
use super::region::{Region, RowRun};
use crate::model::{ColumnBlock, Entries, SparseShape};
use crate::source::{ReadAt, ReadCtx, ReadExt};

/// A run of one row's entries held by one partition.
#[derive(Clone, Copy, Debug)]
struct Seg {
    /// Entry index within the row where the run starts.
    at: u64,
    part: usize,
    /// Row formats: the partition's record holding the row's first entry. Column formats: the
    /// row's slot (its rank among the partition's saved rows).
    unit: u64,
    count: u64,
}

/// How entries map to partitions (see the module comment).
pub(crate) struct Segments {
    pub(crate) shape: Arc<SparseShape>,
    /// Runs of stored row `k`: `segs[seg_ptr[k]..seg_ptr[k + 1]]`, by column.
    seg_ptr: Vec<usize>,
    segs: Vec<Seg>,
    columns: bool,
}

impl Segments {
    /// The runs of partitions `parts` of `meta`; `None` when a row's partitions overlap in
    /// columns.
    pub(crate) fn new(meta: &MatrixMeta, parts: &[usize]) -> Option<Segments> {
        let columns = meta.format.is_column();
        // (row, startCol, part, unit, count)
        let mut all: Vec<(u32, i64, usize, u64, u64)> = Vec::new();
        for &p in parts {
            let pm = meta.parts.get(p)?;
            let mut record = 0u64;
            for (slot, &(row, n)) in pm.rows.iter().enumerate() {
                if columns {
                    all.push((row, pm.start_col, p, slot as u64, pm.save_col_num));
                } else {
                    all.push((row, pm.start_col, p, record, n));
                    record = record.checked_add(n)?;
                }
            }
        }
        all.sort_unstable_by_key(|&(row, start, part, ..)| (row, start, part));
        let mut s = Segments {
            shape: Arc::new(SparseShape {
                rows: Vec::new(),
                row_ptr: vec![0],
            }),
            seg_ptr: vec![0],
            segs: Vec::with_capacity(all.len()),
            columns,
        };
        let shape = Arc::get_mut(&mut s.shape)?;
        let mut total = 0u64;
        let mut i = 0;
        while i < all.len() {
            let row = all[i].0;
            let mut at = 0u64;
            let mut prev: Option<&PartMeta> = None;
            while i < all.len() && all[i].0 == row {
                let (_, _, part, unit, count) = all[i];
                i += 1;
                if count == 0 {
                    continue;
                }
                let pm = &meta.parts[part];
                if let Some(q) = prev {
                    if q.is_hash() || pm.is_hash() || q.end_col > pm.start_col {
                        return None;
                    }
                }
                prev = Some(pm);
                s.segs.push(Seg {
                    at,
                    part,
                    unit,
                    count,
                });
                at = at.checked_add(count)?;
            }
            total = total.checked_add(at)?;
            shape.rows.push(row as u64);
            shape.row_ptr.push(total);
            s.seg_ptr.push(s.segs.len());
        }
        Some(s)
    }

    /// Whether the matrix is stored by column (a record per column).
    pub(crate) fn is_columns(&self) -> bool {
        self.columns
    }

    /// The runs of stored row `k`.
    fn runs(&self, k: usize) -> &[Seg] {
        &self.segs[self.seg_ptr[k]..self.seg_ptr[k + 1]]
    }
}

/// A partition located, and the file its bytes are in.
pub(crate) type Located = (Arc<Region>, Arc<dyn ReadAt>);

/// What a stream needs of its matrix: a partition's meta and its located region.
pub(crate) trait Parts {
    fn part(&self, i: usize) -> &PartMeta;
    fn region(&self, i: usize) -> Result<Located, Arc<MatrixFault>>;
}

pub(crate) struct Stream<'a> {
    pub(crate) segs: &'a Segments,
    pub(crate) parts: &'a dyn Parts,
    /// How the partitions' bytes are read (the reader's read-ahead).
    pub(crate) ctx: &'a ReadCtx,
}

fn fault(file: &dyn ReadAt, part: &PartMeta, f: super::decode::DecodeFault) -> Arc<MatrixFault> {
    let e = DecodeError {
        file: file.name().to_string(),
        part: part.part_id,
        fault: f,
    };
    log::warn!("{e}");
    Arc::new(MatrixFault::Decode(e))
}

impl Stream<'_> {
    /// Appends entries `first..first + count` to `out`.
    pub(crate) fn read_entries(
        &self,
        first: u64,
        count: u64,
        out: &mut Entries,
    ) -> Result<(), Arc<MatrixFault>> {
        let shape = &self.segs.shape;
        let end = first.checked_add(count).filter(|&e| e <= shape.nnz());
        let Some(end) = end else {
            return Err(Arc::new(MatrixFault::Known(format!(
                "entries {first}+{count} beyond the {} stored",
                shape.nnz()
            ))));
        };
        let mut e = first;
        let mut k = shape.row_ptr.partition_point(|&p| p <= e).saturating_sub(1);
        while e < end {
            while shape.row_ptr[k + 1] <= e {
                k += 1;
            }
            let in_row = e - shape.row_ptr[k];
            let runs = self.segs.runs(k);
            let mut r = runs.partition_point(|s| s.at <= in_row) - 1;
            let row = shape.rows[k] as u32;
            let row_end = shape.row_ptr[k + 1].min(end);
            while e < row_end {
                let seg = runs[r];
                let off = e - shape.row_ptr[k] - seg.at;
                let n = (seg.count - off).min(row_end - e);
                self.read_run(row, seg, off, n, out)?;
                e += n;
                r += 1;
            }
        }
        Ok(())
    }

    fn read_run(
        &self,
        row: u32,
        seg: Seg,
        off: u64,
        n: u64,
        out: &mut Entries,
    ) -> Result<(), Arc<MatrixFault>> {
        let (region, file) = self.parts.region(seg.part)?;
        let pm = self.parts.part(seg.part);
        let res = if self.segs.columns {
            region.columns(self.ctx, &*file, off, n, seg.unit, out)
        } else {
            let run = RowRun {
                row,
                first_col: pm.start_col.saturating_add(off as i64),
            };
            region.rows(self.ctx, &*file, seg.unit + off, n, run, out)
        };
        res.map_err(|f| fault(&*file, pm, f))
    }

    /// Column formats: every value of the column records in columns `lo..hi` (`None`:
    /// unbounded), of every stored row, appended to `out` — each partition's records read
    /// once for all its rows, where `read_entries` reads them once per row.
    pub(crate) fn column_block(
        &self,
        lo: Option<i64>,
        hi: Option<i64>,
        out: &mut ColumnBlock,
    ) -> Result<(), Arc<MatrixFault>> {
        let shape = &self.segs.shape;
        let mut parts: Vec<usize> = self.segs.segs.iter().map(|s| s.part).collect();
        parts.sort_unstable();
        parts.dedup();
        for p in parts {
            let pm = self.parts.part(p);
            let outside = !pm.is_hash()
                && (hi.is_some_and(|h| h <= pm.start_col) || lo.is_some_and(|l| l >= pm.end_col));
            let n = pm.save_col_num;
            if outside || n == 0 {
                continue;
            }
            let (region, file) = self.parts.region(p)?;
            let seek = |c: i64| {
                region
                    .seek(&*file, 0, n, c, pm.start_col)
                    .map_err(|f| fault(&*file, pm, f))
            };
            let s = match lo {
                Some(c) => seek(c)?,
                None => 0,
            };
            let e = match hi {
                Some(c) => seek(c)?,
                None => n,
            };
            if e <= s {
                continue;
            }
            // A record's values are the partition's saved rows, ascending: their stored rows.
            let mut rows = Vec::with_capacity(pm.rows.len());
            for &(row, _) in &pm.rows {
                let k = shape.rows.binary_search(&u64::from(row)).map_err(|_| {
                    Arc::new(MatrixFault::Known(format!(
                        "partition {}: row {row} is not a stored row",
                        pm.part_id
                    )))
                })?;
                rows.push(k as u32);
            }
            region
                .column_records(self.ctx, &*file, s, e - s, &rows, out)
                .map_err(|f| fault(&*file, pm, f))?;
        }
        Ok(())
    }

    /// The index of the first entry of stored row `k` whose column is ≥ `col`.
    pub(crate) fn seek_col(&self, k: usize, col: i64) -> Result<u64, Arc<MatrixFault>> {
        let shape = &self.segs.shape;
        let base = shape.row_ptr[k];
        for seg in self.segs.runs(k) {
            let pm = self.parts.part(seg.part);
            if !pm.is_hash() {
                if col <= pm.start_col {
                    return Ok(base + seg.at);
                }
                if col >= pm.end_col {
                    continue;
                }
            }
            let (region, file) = self.parts.region(seg.part)?;
            let u0 = if self.segs.columns { 0 } else { seg.unit };
            let lo = region
                .seek(&*file, u0, u0 + seg.count, col, pm.start_col)
                .map_err(|f| fault(&*file, pm, f))?
                - u0;
            if lo < seg.count || pm.is_hash() {
                return Ok(base + seg.at + lo);
            }
        }
        Ok(shape.row_ptr[k + 1])
    }
}
