//! `.angel/`: every tensor of the mount as an Angel model directory (SPEC §7,
//! formats/angel.md §13): one folder per tensor, named by its key (the file system escapes
//! `/` as `%2F`), holding `meta` (2.x envelope) and its data files.
//!
//! - Format: `-o angel_format=` when it fits the tensor, else `ColIdValueBinaryRowFormat`,
//!   the one format every Angel loader reads back right (the local loader puts a Value
//!   format's values at column 0, and a column format's size from `rowMetas["0"]` of every
//!   partition: formats/angel.md §10).
//! - Row type: an Angel source's own (sparse stays sparse, with its stored entries); else
//!   dense from the dtype (`layout::angel::AngelValue`), with long keys when a column id
//!   does not fit an int.
//! - Partitions: Angel's default grid sized to about `PART_BYTES` each, grouped five to a
//!   file like one parameter server's (`angel_parts`).
//! - Folders cost nothing until listed; listing one decides its partitions (a sparse
//!   tensor's entries are decoded then). Binary formats have exact sizes at once; a text
//!   format's partition lengths, and so its `meta`, need a size pass (learnt like a text
//!   file's size, and cached with the text index).
//! - Left out (logged): tensors no Angel value type holds (strings, complex, …), empty ones,
//!   those whose metadata names a problem.

use std::ops::Range;
use std::sync::{Arc, OnceLock};

use super::angel_meta::{self, RowMetas};
use super::angel_parts::{file_groups, sub_rows, Cell, Grid, Window};
use super::{Entries, FixedDir, View, ViewDir, ViewEntry};
use modelfs_io::codec::angel::AngelFormat;
use modelfs_layout::angel::{check, part_content, rows_cols, AngelValue, Part};
use modelfs_layout::concat::Concat;
use modelfs_layout::elements::check_sparse;
use modelfs_layout::held::{Made, Make, Whole};
use modelfs_layout::{FileContent, LayoutCtx, LayoutError, Patient, Requester};
use modelfs_model::{ModelError, Role, SparseRows, Tensor, TensorMeta};

pub(crate) const DIR: &str = ".angel";
const DEFAULT_FORMAT: AngelFormat = AngelFormat::ColIdValueBinary;
/// About how many bytes one partition holds.
pub(crate) const PART_BYTES: u64 = 64 << 20;

pub(crate) fn view(
    tensors: Vec<Arc<dyn Tensor>>,
    ctx: &Arc<LayoutCtx>,
) -> Result<View, ModelError> {
    Ok(view_with(tensors, ctx, PART_BYTES))
}

/// The view with partitions of about `part_bytes` (tests make them small).
pub(crate) fn view_with(
    tensors: Vec<Arc<dyn Tensor>>,
    ctx: &Arc<LayoutCtx>,
    part_bytes: u64,
) -> View {
    let mut entries = Vec::new();
    for t in tensors {
        let meta = t.meta();
        match choose(meta, ctx) {
            Ok(format) => entries.push((
                meta.name.clone(),
                ViewEntry::Dir(Arc::new(MatrixDir {
                    tensor: t.clone(),
                    format,
                    ctx: ctx.clone(),
                    part_bytes,
                    entries: OnceLock::new(),
                })),
            )),
            Err(why) => log::info!(
                "{DIR}/: {} left out: {why}",
                String::from_utf8_lossy(&meta.name)
            ),
        }
    }
    View::dir(FixedDir(entries.into()))
}

/// The format a tensor is written in, or why it has no Angel form.
fn choose(meta: &TensorMeta, ctx: &LayoutCtx) -> Result<AngelFormat, String> {
    if let Some(p) = &meta.problem {
        return Err(p.clone());
    }
    let (rows, cols) = rows_cols(meta).map_err(|e| e.to_string())?;
    if rows == 0 || cols == 0 {
        return Err("it has no elements".into());
    }
    let wanted = ctx.angel_format.unwrap_or(DEFAULT_FORMAT);
    match check(wanted, meta, ctx) {
        Ok(()) => Ok(wanted),
        Err(why) if wanted != DEFAULT_FORMAT => {
            check(DEFAULT_FORMAT, meta, ctx).map_err(|e| e.to_string())?;
            log::info!(
                "{DIR}/{}: {} does not fit ({why}), written as {}",
                String::from_utf8_lossy(&meta.name),
                wanted.class_name(),
                DEFAULT_FORMAT.class_name()
            );
            Ok(DEFAULT_FORMAT)
        }
        Err(why) => Err(why.to_string()),
    }
}

/// One tensor's folder: `meta` and the data files, decided on first listing.
struct MatrixDir {
    tensor: Arc<dyn Tensor>,
    format: AngelFormat,
    ctx: Arc<LayoutCtx>,
    part_bytes: u64,
    entries: OnceLock<Entries>,
}

impl ViewDir for MatrixDir {
    fn entries(&self) -> Result<Entries, LayoutError> {
        if let Some(e) = self.entries.get() {
            return Ok(e.clone());
        }
        let e = self.build()?;
        Ok(self.entries.get_or_init(|| e).clone())
    }
}

/// Row type code (formats/angel.md §5) from the value type, storage and key width.
fn row_type_code(value: AngelValue, sparse: bool, long_key: bool) -> i32 {
    let base = match value {
        AngelValue::Double => 0,
        AngelValue::Float => 7,
        AngelValue::Long => 14,
        AngelValue::Int => 21,
    };
    base + match (sparse, long_key) {
        (false, false) => 0,
        (false, true) => 2,
        (true, false) => 3,
        (true, true) => 5,
    }
}

/// An Angel source's own row type, when it agrees with what is written.
fn source_row_type(meta: &TensorMeta, value: AngelValue) -> Option<i32> {
    if meta.role != Role::Matrix {
        return None;
    }
    let code = i32::try_from(meta.extra.get("rowType")?.as_i64()?).ok()?;
    let same_value = (0..28).contains(&code) && row_type_code(value, false, false) / 7 == code / 7;
    (same_value && (code % 7 >= 3) == meta.sparse).then_some(code)
}

/// An Angel source's declared `feature.index.range.*`.
fn source_range(meta: &TensorMeta) -> (Option<i64>, Option<i64>) {
    let opt =
        |k: &str| -> Option<i64> { meta.extra.get("options")?.get(k)?.as_str()?.parse().ok() };
    (
        opt("feature.index.range.start"),
        opt("feature.index.range.end"),
    )
}

/// What a partition is made of.
enum Cells {
    Dense,
    Sparse(Arc<SparseRows>),
}

impl MatrixDir {
    fn build(&self) -> Result<Entries, LayoutError> {
        let t = &self.tensor;
        let meta = t.meta();
        let value = AngelValue::of(meta.dtype).ok_or(LayoutError::Internal("no Angel value"))?;
        let es = meta
            .dtype
            .elem_size()
            .ok_or(LayoutError::Internal("no element size"))?;
        let (rows, cols) = rows_cols(meta)?;
        let name = String::from_utf8_lossy(&meta.name).into_owned();

        // Column range, storage, key width.
        let (lo, hi, col, data) = if meta.sparse {
            let s = t.sparse()?;
            check_sparse(&s, meta.dtype)?;
            let (start, end) = source_range(meta);
            let declared = meta.extra.get("col").and_then(|c| c.as_i64());
            let (min, max) = (s.cols.iter().min(), s.cols.iter().max());
            let lo = start.unwrap_or(0).min(min.copied().unwrap_or(0));
            // Unbounded (`col` ≤ 0, no declared end): up to the largest key.
            let data_hi = max.map_or(lo, |&m| m.saturating_add(1));
            let hi = match (end, declared) {
                (Some(e), _) => e,
                (None, Some(c)) if c > 0 => c,
                (None, Some(_)) => data_hi,
                (None, None) => i64::try_from(cols).unwrap_or(i64::MAX),
            }
            .max(data_hi);
            let shown_hi = i64::try_from(cols).unwrap_or(i64::MAX);
            (lo, hi, declared.unwrap_or(shown_hi), Cells::Sparse(s))
        } else {
            let c = i64::try_from(cols).map_err(|_| LayoutError::Overflow("column count"))?;
            (0, c, c, Cells::Dense)
        };
        let width = u64::try_from(i128::from(hi) - i128::from(lo))
            .map_err(|_| LayoutError::Overflow("column range"))?;
        let long_key = lo < i64::from(i32::MIN) || hi - 1 > i64::from(i32::MAX);
        let row_type = source_row_type(meta, value)
            .unwrap_or_else(|| row_type_code(value, meta.sparse, long_key));
        let key_width = if matches!(row_type % 7, 2 | 5 | 6) {
            8
        } else {
            4
        };

        let per = self.part_bytes / record_bytes(self.format, value.width() as u64, key_width);
        let grid = match &data {
            Cells::Dense => Grid::dense(rows, width, per),
            Cells::Sparse(s) => Grid::sparse(s, rows, lo, width, per),
        };
        let cells = grid.cells();
        let mut contents = Vec::with_capacity(cells.len());
        let mut parts = Vec::with_capacity(cells.len());
        for (id, cell) in cells.iter().enumerate() {
            let tag = format!("p{id}:{}..{}:{}..{}", cell.r0, cell.r1, cell.c0, cell.c1);
            let cell_cols = cell.width();
            let (part, owner, desc) = match &data {
                Cells::Dense => {
                    let window: Arc<dyn Tensor> = Arc::new(Window::new(t.clone(), cols, *cell));
                    let part = Part::Dense {
                        window: window.clone(),
                        cols: cell_cols,
                        row_base: cell.r0,
                        col_base: cell.c0,
                    };
                    (part, window, dense_desc(id, cell, self.format))
                }
                Cells::Sparse(s) => {
                    let sub = Arc::new(sub_rows(s, es, cell));
                    let desc = sparse_desc(id, cell, &sub, self.format);
                    let part = Part::Sparse {
                        rows: sub,
                        dtype: meta.dtype,
                        cols: cell_cols,
                    };
                    (part, t.clone(), desc)
                }
            };
            contents.push(part_content(
                self.format,
                part,
                owner,
                &tag,
                key_width as usize,
                &self.ctx,
            )?);
            parts.push(desc);
        }

        let groups = file_groups(cells.len());
        let mut entries: Vec<(Vec<u8>, ViewEntry)> = Vec::with_capacity(groups.len() + 1);
        for g in &groups {
            for i in g.clone() {
                parts[i].file = g.start.to_string();
            }
            let file = Concat::new(contents[g.clone()].to_vec());
            entries.push((
                g.start.to_string().into_bytes(),
                ViewEntry::File(Arc::new(file)),
            ));
        }
        let meta_file = MetaFile {
            name,
            class_name: self.format.class_name(),
            row_type,
            rows,
            col,
            grid,
            range: (lo, hi),
            parts,
            contents,
            groups,
        };
        // Known sizes (binary formats): the meta is made now, so its size is exact at once.
        let meta_file: Arc<dyn FileContent> =
            if meta_file.contents.iter().all(|c| c.known_size().is_some()) {
                Arc::new(Whole(meta_file.make(&Patient)?.into()))
            } else {
                Arc::new(Made::new(meta_file))
            };
        // Both names: Angel 2.0–3.1 read `meta`, 3.2 and later `_meta`.
        entries.push((b"_meta".to_vec(), ViewEntry::File(Arc::clone(&meta_file))));
        entries.push((b"meta".to_vec(), ViewEntry::File(meta_file)));
        Ok(entries.into())
    }
}

/// Bytes per element a partition of `format` takes, about (text: a typical line).
fn record_bytes(format: AngelFormat, value: u64, key: u64) -> u64 {
    match format {
        AngelFormat::ValueBinary | AngelFormat::BinaryColumn => value,
        AngelFormat::ColIdValueBinary => key + value,
        AngelFormat::RowIdColIdValueBinary => 4 + key + value,
        AngelFormat::ValueText | AngelFormat::TextColumn => 12,
        AngelFormat::ColIdValueText => 20,
        AngelFormat::RowIdColIdValueText => 26,
    }
}

fn dense_desc(id: usize, cell: &Cell, format: AngelFormat) -> angel_meta::Part {
    let (w, h) = (cell.width(), cell.r1 - cell.r0);
    angel_meta::Part {
        id,
        rows: (cell.r0, cell.r1),
        cols: (cell.c0, cell.c1),
        nnz: w.saturating_mul(h),
        columns: format.is_column().then_some((w, h)),
        file: String::new(),
        offset: 0,
        length: 0,
        row_metas: RowMetas::Each(cell.r0..cell.r1, w),
    }
}

fn sparse_desc(id: usize, cell: &Cell, s: &SparseRows, format: AngelFormat) -> angel_meta::Part {
    let counts = s.row_ptr.windows(2).map(|w| w[1] - w[0]);
    let (columns, row_metas) = if format.is_column() {
        // Every saved row gets a value in each column record (0 where absent).
        let mut c = s.cols.clone();
        c.sort_unstable();
        c.dedup();
        let n = c.len() as u64;
        (
            Some((n, s.rows.len() as u64)),
            s.rows.iter().map(|&r| (r, n)).collect(),
        )
    } else {
        (None, s.rows.iter().copied().zip(counts).collect())
    };
    angel_meta::Part {
        id,
        rows: (cell.r0, cell.r1),
        cols: (cell.c0, cell.c1),
        nnz: s.nnz(),
        columns,
        file: String::new(),
        offset: 0,
        length: 0,
        row_metas: RowMetas::List(row_metas),
    }
}

/// `meta` of a matrix whose partition lengths need rendering (text formats): made on first
/// need, for the requester that needs it.
struct MetaFile {
    name: String,
    class_name: &'static str,
    row_type: i32,
    rows: u64,
    col: i64,
    grid: Grid,
    range: (i64, i64),
    parts: Vec<angel_meta::Part>,
    contents: Vec<Arc<dyn FileContent>>,
    groups: Vec<Range<usize>>,
}

impl Make for MetaFile {
    fn make(&self, req: &dyn Requester) -> Result<Vec<u8>, LayoutError> {
        let mut parts = Vec::with_capacity(self.parts.len());
        for g in &self.groups {
            let mut offset = 0u64;
            for i in g.clone() {
                let length = self.contents[i].size_for(req)?;
                let p = &self.parts[i];
                parts.push(angel_meta::Part {
                    offset,
                    length,
                    file: p.file.clone(),
                    row_metas: p.row_metas.clone(),
                    ..*p
                });
                offset = offset
                    .checked_add(length)
                    .ok_or(LayoutError::Overflow("data file size"))?;
            }
        }
        let m = angel_meta::Matrix {
            name: &self.name,
            class_name: self.class_name,
            row_type: self.row_type,
            rows: self.rows,
            col: self.col,
            block_row: self.grid.block_row,
            block_col: self.grid.block_col,
            range: self.range,
        };
        Ok(angel_meta::encode(&m, &parts))
    }
}

#[cfg(test)]
#[path = "angel_tests.rs"]
mod tests;
