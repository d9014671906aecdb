//! Dense reads of a dense matrix saved in a binary row format, by arithmetic (formats/angel.md
//! §7.2: a row's records start at `offset + k × width × recordSize`), without decoding the
//! matrix into entries: a read touches only the records it returns, and nothing the size of
//! the matrix is held.
//!
//! Taken only when the meta makes positions certain (`Plan::new`): a binary row format; every
//! partition a real column range inside the matrix, its file mapped and its bytes inside it;
//! every saved row dense (`elementNum` = the partition's width, or 0: absent), row ids unique and inside the
//! partition, `Σ elementNum × recordSize == length`; no two partitions sharing a cell. Anything
//! else goes through the decoder. The ids stored in ColId/RowIdColId records are checked for
//! every record served: a wrong one fails the read (never a value in the wrong place).

use std::sync::Arc;

use super::meta::{MatrixMeta, PartMeta};
use super::AngelFormat;
use crate::model::{ModelError, RequestError};
use crate::source::{ReadAt, ReadCtx, ReadExt};

/// One partition as the plan reads it.
struct Part {
    file: Arc<dyn ReadAt>,
    offset: u64,
    start_col: u64,
    width: u64,
    /// Saved row ids, ascending; the k-th's records start at `offset + k × width × record`.
    rows: Vec<u32>,
}

/// Partitions sharing one row range, by start column.
struct Band {
    start_row: u32,
    end_row: u32,
    parts: Vec<Part>,
}

pub(crate) struct Plan {
    bands: Vec<Band>,
    cols: u64,
    /// Bytes of one record, and where its value starts in it.
    record: usize,
    key_width: usize,
    value_width: usize,
    row_ids: bool,
    col_ids: bool,
    what: String,
}

impl Plan {
    /// The plan for a matrix, or `None` when positions are not certain from the meta.
    pub(crate) fn new(
        meta: &MatrixMeta,
        files: &dyn Fn(&PartMeta) -> Option<Arc<dyn ReadAt>>,
        what: &str,
    ) -> Option<Plan> {
        let (row_ids, col_ids) = match meta.format {
            AngelFormat::ValueBinary => (false, false),
            AngelFormat::ColIdValueBinary => (false, true),
            AngelFormat::RowIdColIdValueBinary => (true, true),
            _ => return None,
        };
        if !meta.row_type.dense || meta.col <= 0 {
            return None;
        }
        let cols = meta.col as u64;
        let key_width = meta.row_type.key_width;
        let value_width = meta.row_type.value.width();
        let record =
            value_width + if col_ids { key_width } else { 0 } + if row_ids { 4 } else { 0 };
        let mut bands: Vec<Band> = Vec::new();
        for p in &meta.parts {
            if p.start_col < 0 || p.end_col as u64 > cols || p.start_col >= p.end_col {
                return None;
            }
            if p.start_row >= p.end_row || p.end_row > meta.rows {
                return None;
            }
            let width = (p.end_col - p.start_col) as u64;
            let mut rows = Vec::with_capacity(p.rows.len());
            for &(r, n) in &p.rows {
                let ascending = rows.last().is_none_or(|&last| last < r);
                if !ascending || r < p.start_row || r >= p.end_row {
                    return None;
                }
                // A row with no records is absent (reads as zeros); any other is whole.
                match n {
                    0 => {}
                    n if n == width => rows.push(r),
                    _ => return None,
                }
            }
            let bytes = (rows.len() as u64)
                .checked_mul(width)?
                .checked_mul(record as u64)?;
            let file = files(p)?;
            if bytes != p.length || p.offset.checked_add(bytes)? > file.size() {
                return None;
            }
            let part = Part {
                file,
                offset: p.offset,
                start_col: p.start_col as u64,
                width,
                rows,
            };
            match bands
                .iter_mut()
                .find(|b| (b.start_row, b.end_row) == (p.start_row, p.end_row))
            {
                Some(b) => b.parts.push(part),
                None => bands.push(Band {
                    start_row: p.start_row,
                    end_row: p.end_row,
                    parts: vec![part],
                }),
            }
        }
        bands.sort_by_key(|b| b.start_row);
        // Bands must not overlap, nor partitions within a band.
        if bands.windows(2).any(|w| w[0].end_row > w[1].start_row) {
            return None;
        }
        for b in &mut bands {
            b.parts.sort_by_key(|p| p.start_col);
            if b.parts
                .windows(2)
                .any(|w| w[0].start_col + w[0].width > w[1].start_col)
            {
                return None;
            }
        }
        Some(Plan {
            bands,
            cols,
            record,
            key_width,
            value_width,
            row_ids,
            col_ids,
            what: what.to_string(),
        })
    }

    fn bad(&self, why: String) -> ModelError {
        ModelError::data(self.what.clone(), why)
    }

    /// Fills `out` with elements `first..` of the dense matrix (little-endian; 0 where no
    /// partition saved a value). The request was checked (`model::read_elements`). Whole rows
    /// are read a partition at a time (`read_rows`), the partial ones at either end a row at
    /// a time.
    pub(crate) fn read(&self, ctx: &ReadCtx, first: u64, out: &mut [u8]) -> Result<(), ModelError> {
        let w = self.value_width;
        debug_assert_eq!(out.len() % w, 0);
        out.fill(0);
        let n = (out.len() / w) as u64;
        let mut done = 0u64;
        while done < n {
            let at = first + done;
            let (row, col) = (at / self.cols, at % self.cols);
            let whole = match col {
                0 => (n - done) / self.cols,
                _ => 0,
            };
            if whole > 0 {
                let dst = &mut out[done as usize * w..(done + whole * self.cols) as usize * w];
                self.read_rows(ctx, row, whole, dst)?;
                done += whole * self.cols;
                continue;
            }
            let run = (self.cols - col).min(n - done);
            let dst = &mut out[done as usize * w..(done + run) as usize * w];
            self.read_row(ctx, row, col, dst)?;
            done += run;
        }
        Ok(())
    }

    /// Whole rows `row..row + m` into `dst` (already zeroed): a partition's saved rows among
    /// them are one run of records in its file (the k-th saved row's at `k × width`), read at
    /// once — one read and one check per partition, not per row.
    fn read_rows(&self, ctx: &ReadCtx, row: u64, m: u64, dst: &mut [u8]) -> Result<(), ModelError> {
        let end = row.saturating_add(m);
        let row_bytes = self.cols as usize * self.value_width;
        let i0 = self.bands.partition_point(|b| u64::from(b.end_row) <= row);
        for band in &self.bands[i0..] {
            if u64::from(band.start_row) >= end {
                break;
            }
            for p in &band.parts {
                let k0 = p.rows.partition_point(|&r| u64::from(r) < row);
                let k1 = p.rows.partition_point(|&r| u64::from(r) < end);
                if k0 == k1 {
                    continue;
                }
                let saved = (p.width as usize)
                    .checked_mul(self.record)
                    .ok_or_else(|| self.bad("a row's records overflow".into()))?;
                let len = (k1 - k0)
                    .checked_mul(saved)
                    .ok_or_else(|| self.bad("a read's records overflow".into()))?;
                let at = p.offset + k0 as u64 * saved as u64;
                let decode = |bytes: &[u8]| -> Result<(), ModelError> {
                    for (j, recs) in bytes.chunks_exact(saved).enumerate() {
                        let r = p.rows[k0 + j];
                        let from = (u64::from(r) - row) as usize * row_bytes
                            + p.start_col as usize * self.value_width;
                        let into = &mut dst[from..from + p.width as usize * self.value_width];
                        self.decode(recs, r, p.start_col, into)?;
                    }
                    Ok(())
                };
                p.file.with_bytes(ctx, at, len, decode)??;
            }
        }
        Ok(())
    }

    /// Columns `col..` of `row` into `dst` (already zeroed).
    fn read_row(
        &self,
        ctx: &ReadCtx,
        row: u64,
        col: u64,
        dst: &mut [u8],
    ) -> Result<(), ModelError> {
        let Ok(r) = u32::try_from(row) else {
            return Ok(());
        };
        let i = self.bands.partition_point(|b| b.end_row <= r);
        let Some(band) = self.bands.get(i).filter(|b| b.start_row <= r) else {
            return Ok(());
        };
        let end = col + (dst.len() / self.value_width) as u64;
        for p in &band.parts {
            let (c0, c1) = (col.max(p.start_col), end.min(p.start_col + p.width));
            if c0 >= c1 {
                continue;
            }
            let Ok(k) = p.rows.binary_search(&r) else {
                continue;
            };
            let first = (k as u64 * p.width + (c0 - p.start_col)) * self.record as u64;
            let len =
                ((c1 - c0) as usize)
                    .checked_mul(self.record)
                    .ok_or(RequestError::OutOfRange {
                        first: c0,
                        count: c1 - c0,
                        total: self.cols,
                    })?;
            let into = &mut dst[(c0 - col) as usize * self.value_width..];
            let decode = |bytes: &[u8]| self.decode(bytes, r, c0, into);
            p.file.with_bytes(ctx, p.offset + first, len, decode)??;
        }
        Ok(())
    }

    /// The records `recs` of row `r`, columns `c0..`, into `into` as little-endian values: the
    /// ids they hold checked against where they are.
    fn decode(&self, recs: &[u8], r: u32, c0: u64, into: &mut [u8]) -> Result<(), ModelError> {
        for (j, rec) in recs.chunks_exact(self.record).enumerate() {
            let mut at = 0;
            if self.row_ids {
                let id = u32::from_be_bytes([rec[0], rec[1], rec[2], rec[3]]);
                if id != r {
                    return Err(self.bad(format!("record of row {r} holds row id {id}")));
                }
                at = 4;
            }
            if self.col_ids {
                let key = &rec[at..at + self.key_width];
                let id = if self.key_width == 8 {
                    i64::from_be_bytes(key.try_into().unwrap_or_default())
                } else {
                    i64::from(i32::from_be_bytes(key.try_into().unwrap_or_default()))
                };
                let want = (c0 + j as u64) as i64;
                if id != want {
                    return Err(self.bad(format!(
                        "row {r}: record of column {want} holds column id {id}"
                    )));
                }
                at += self.key_width;
            }
            let v = &rec[at..at + self.value_width];
            let o = &mut into[j * self.value_width..(j + 1) * self.value_width];
            o.copy_from_slice(v);
            o.reverse();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::meta::{parse_meta, read_envelope};
    use crate::model::{ReaderOptions, Tensor};

    fn plan_of(dir: &Path) -> Option<Plan> {
        let storage = crate::source::local();
        let meta_file = storage.open(&dir.join("_meta")).unwrap();
        let meta = parse_meta(&read_envelope(&*meta_file).unwrap()).unwrap();
        let files = |p: &PartMeta| storage.open(&dir.join(&p.file_name)).ok();
        Plan::new(&meta, &files, "test")
    }

    /// Dense bytes through the decoder (the matrix's stored entries).
    fn decoded(t: &dyn Tensor) -> Vec<u8> {
        let m = t.meta();
        let w = m.dtype.elem_size().unwrap();
        let cols = m.shape[1] as usize;
        let mut out = vec![0u8; m.num_elements().unwrap() as usize * w];
        let s = t.sparse().unwrap();
        for (i, &r) in s.rows.iter().enumerate() {
            for k in s.row_ptr[i] as usize..s.row_ptr[i + 1] as usize {
                let at = (r as usize * cols + s.cols[k] as usize) * w;
                out[at..at + w].copy_from_slice(&s.values[k * w..(k + 1) * w]);
            }
        }
        out
    }

    #[test]
    fn binary_dense_matrices_read_by_arithmetic_equal_the_decoder() {
        let root = crate::testing::fixtures_dir().join("angel/formats/model");
        let model = crate::open(&root, &ReaderOptions::default()).unwrap();
        let mut planned = 0;
        for e in std::fs::read_dir(&root).unwrap() {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            let binary_row = ["ValueBinary", "ColIdValueBinary", "RowIdColIdValueBinary"]
                .iter()
                .any(|f| name.starts_with(&format!("{f}_")));
            let plan = plan_of(&root.join(&name));
            assert_eq!(
                plan.is_some(),
                binary_row && name.ends_with("_dense"),
                "{name}"
            );
            let Some(plan) = plan else { continue };
            planned += 1;
            let t = model.tensor(&[name.clone().into_bytes()]).unwrap();
            let want = decoded(&*t);
            let w = t.meta().dtype.elem_size().unwrap();
            let mut got = vec![0u8; want.len()];
            plan.read(ReadCtx::none(), 0, &mut got).unwrap();
            assert!(got == want, "{name}");
            // Any range, crossing rows and partitions.
            let n = want.len() / w;
            for (a, b) in [(1, n - 1), (n / 3, n / 3 + 7), (n - 1, n)] {
                let mut part = vec![0u8; (b - a) * w];
                t.read_elements(ReadCtx::none(), a as u64, &mut part)
                    .unwrap();
                assert!(part == want[a * w..b * w], "{name} {a}..{b}");
            }
        }
        assert_eq!(planned, 24);
    }

    #[test]
    fn a_wrong_id_fails_the_read_never_misplaces_a_value() {
        let src = crate::testing::fixtures_dir()
            .join("angel/formats/model/RowIdColIdValueBinary_float_intkey_dense");
        let tmp = tempfile::tempdir().unwrap();
        for f in ["_meta", "0", "1"] {
            std::fs::copy(src.join(f), tmp.path().join(f)).unwrap();
        }
        let plan = plan_of(tmp.path()).unwrap();
        let mut all = vec![0u8; 4 * 5 * 10];
        plan.read(ReadCtx::none(), 0, &mut all).unwrap();
        // The first record's column id (bytes 4..8 of file 0) says 1 instead of 0.
        let mut data = std::fs::read(tmp.path().join("0")).unwrap();
        data[7] ^= 1;
        std::fs::write(tmp.path().join("0"), &data).unwrap();
        let plan = plan_of(tmp.path()).unwrap();
        let err = plan
            .read(ReadCtx::none(), 0, &mut [0u8; 4])
            .unwrap_err()
            .to_string();
        assert!(err.contains("column id"), "{err}");
        // A range without the bad record still reads.
        let mut tail = vec![0u8; 4];
        plan.read(ReadCtx::none(), 5 * 10 - 1, &mut tail).unwrap();
        assert_eq!(tail, all[all.len() - 4..]);
    }
}
