//! One Angel matrix as a `model::Tensor`, and each of its partitions as a tensor of its own.
//!
//! Loading a matrix reads its meta and maps the data files it references; data is decoded on
//! the first read. Decoded data is cached per partition (global coordinates) and per matrix
//! (merged) as `Arc<SparseRows>`. Memory trade-off: a decoded matrix costs about
//! `nnz × (8 + value width)` bytes, kept for the life of the mount (twice while both the
//! partition and merged forms are alive); dense reads are served from this CSR, so nothing of
//! size `rows × cols` is ever allocated because the meta claims it. The exception: a dense
//! matrix in a binary row format whose meta fixes every record's position is read by
//! arithmetic (`direct`), never decoded whole.
//!
//! Shapes: a matrix is `[row, col]`; `col ≤ 0` (unbounded long keys) is shown as
//! `i64::MAX` columns, the largest non-negative column id range (negative long keys appear only
//! in sparse output). Partitions as tensors:
//! - of a sparse matrix: the matrix's shape and its row / column ids (feature ids are what
//!   sparse data is keyed by), holding only the partition's entries;
//! - of a dense matrix: a block in *local* coordinates, like a TF slice:
//!   `[endRow − startRow, endCol − startCol]` with entries shifted by its start (a hash
//!   partition, `0/0` of §9.4, spans every column unshifted).
//!
//! The `.json` extent clamps a negative `startCol` to 0; the exact `startCol`/`endCol` are in
//! the partition's `extra`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::SystemTime;

use serde_json::{json, Map, Value};

use super::decode::{self, PartInput};
use super::dir::MatrixDir;
use super::direct::Plan;
pub(crate) use super::fault::MatrixFault;
use super::merge;
use super::meta::{self, MatrixMeta, PartMeta};
use super::region::Region;
use super::stream::{Located, Parts, Segments};
use crate::model::{
    default_key_kind as model_key_kind, fill_dense_by_range, DType, KeyKind, Keyed, ModelError,
    PartitionMeta, SparseRows, Tensor, TensorMeta,
};
use crate::source::{identity_string, Memo, ReadAt};
use crate::store::Store;

type Cached = Memo<Result<Arc<SparseRows>, Arc<MatrixFault>>>;

/// The cell's value, computed by `f` on first use; a transient fault is returned, not kept.
fn cache_unless_transient(
    cell: &Cached,
    f: impl FnOnce() -> Result<Arc<SparseRows>, Arc<MatrixFault>>,
) -> Result<Arc<SparseRows>, Arc<MatrixFault>> {
    let kept = cell.get_or_try(|| match f() {
        Err(fault) if fault.is_transient() => Err(fault),
        v => Ok(v),
    });
    kept.and_then(Clone::clone)
}

/// Shared state of a loaded matrix (meta decoded, files mapped).
struct Inner {
    meta: MatrixMeta,
    /// Mapped data file per `fileName`, or why it could not be opened.
    files: BTreeMap<String, Result<Arc<dyn ReadAt>, String>>,
    /// Meta-level problem of each partition (bounds, missing file).
    part_problem: Vec<Option<String>>,
    /// Lines stored before each partition in its file (CRLF leniency, §9.7).
    lines_before: Vec<u64>,
    sep: String,
    cols: u64,
    parts: Vec<Cached>,
    merged: Cached,
    /// Dense reads by arithmetic, when the meta allows them (`direct`), made on first read.
    direct: OnceLock<Option<Plan>>,
    /// Entries by range across all partitions (`stream`), from the meta on first use; `None`
    /// when the partitions must be merged (the matrix is then decoded whole).
    segments: OnceLock<Option<Arc<Segments>>>,
    /// Each partition located and its text lines indexed (`region`), on its first read.
    regions: Vec<OnceLock<Arc<Region>>>,
    /// Held while a partition is being located, so concurrent first readers index it once.
    locating: Vec<Mutex<()>>,
    /// Where text partitions' line indexes persist.
    indexes: Option<Arc<dyn Store>>,
}

pub(crate) struct AngelMatrix {
    tmeta: TensorMeta,
    inner: Option<Arc<Inner>>,
    /// `Tensor::cache_identity`: meta and data file identities, separator, name (`None` when
    /// a file could not be opened or has no identity).
    identity: Option<String>,
}

/// Number of columns shown for a declared `col` (see the module comment).
pub(crate) fn shown_cols(col: i64) -> u64 {
    if col > 0 {
        col as u64
    } else {
        i64::MAX as u64
    }
}

impl AngelMatrix {
    /// Loads the matrix at `m`; never fails: a bad meta gives a tensor whose `problem` says why.
    /// The matrix of `m`, and whether a problem it has may pass (a remote fault): such a
    /// matrix is not kept, so the next lookup loads it again.
    pub(crate) fn load(
        m: &MatrixDir,
        sep: &str,
        indexes: Option<Arc<dyn Store>>,
    ) -> (Arc<AngelMatrix>, bool) {
        let mut mtime = SystemTime::UNIX_EPOCH;
        let mut meta_identity = None;
        let mut transient = false;
        let parsed = m
            .storage
            .open(&m.meta_path)
            .map_err(|e| {
                transient = e.is_transient();
                e.to_string()
            })
            .and_then(|f| {
                mtime = f.mtime();
                meta_identity = identity_string(&*f);
                meta::read_envelope(&*f).map_err(|e| {
                    transient = matches!(
                        e,
                        meta::MetaError::Source {
                            transient: true,
                            ..
                        }
                    );
                    e.to_string()
                })
            })
            .and_then(|json| meta::parse_meta(&json).map_err(|e| e.to_string()));
        match parsed {
            Ok(meta) => {
                let (matrix, transient) =
                    Self::from_meta(m, meta, sep, mtime, meta_identity, indexes);
                (Arc::new(matrix), transient)
            }
            Err(e) => {
                let msg = format!("{}: {e}", m.storage.display(&m.meta_path));
                log::warn!("{msg}");
                let matrix = AngelMatrix {
                    tmeta: TensorMeta {
                        problem: Some(msg),
                        mtime,
                        role: crate::model::Role::Matrix,
                        ..TensorMeta::new(m.name.clone(), DType::Opaque(-1), vec![], "angel")
                    },
                    inner: None,
                    identity: None,
                };
                (Arc::new(matrix), transient)
            }
        }
    }

    fn from_meta(
        m: &MatrixDir,
        meta: MatrixMeta,
        sep: &str,
        mtime: SystemTime,
        meta_identity: Option<String>,
        indexes: Option<Arc<dyn Store>>,
    ) -> (AngelMatrix, bool) {
        let dir: PathBuf = m.dir.clone();
        let mut files = BTreeMap::new();
        let mut transient = false;
        for p in &meta.parts {
            files.entry(p.file_name.clone()).or_insert_with(|| {
                m.storage.open(&dir.join(&p.file_name)).map_err(|e| {
                    transient |= e.is_transient();
                    e.to_string()
                })
            });
        }
        let part_problem: Vec<Option<String>> = meta
            .parts
            .iter()
            .map(|p| match &files[&p.file_name] {
                Err(e) => Some(format!("partition {}: {e}", p.part_id)),
                Ok(f) => match p.offset.checked_add(p.length) {
                    Some(end) if end <= f.size() => None,
                    _ => Some(format!(
                        "partition {}: offset {} + length {} is beyond the end of {} ({} bytes)",
                        p.part_id,
                        p.offset,
                        p.length,
                        f.name(),
                        f.size()
                    )),
                },
            })
            .collect();
        let lines_before = lines_before(&meta);
        warn_overlaps(&meta, &m.dir);
        let mut problem = part_problem.iter().flatten().next().cloned();
        let name_str = String::from_utf8_lossy(&m.name);
        if let Some(mn) = &meta.matrix_name {
            if *mn != name_str {
                log::warn!(
                    "{}: matrixName '{mn}' differs from the folder name",
                    m.storage.display(&m.dir)
                );
            }
        }
        let cols = shown_cols(meta.col);
        if meta.row_type.dense && meta.col <= 0 && problem.is_none() {
            problem = Some(format!("dense matrix with col = {} (unbounded)", meta.col));
        }
        let partitions = meta.parts.iter().map(|p| partition_meta(p, cols)).collect();
        let tmeta = TensorMeta {
            partitions,
            sparse: !meta.row_type.dense,
            extra: matrix_extra(&meta),
            problem,
            mtime,
            role: crate::model::Role::Matrix,
            ..TensorMeta::new(
                m.name.clone(),
                meta.row_type.value.dtype(),
                vec![meta.rows as u64, cols],
                "angel",
            )
        };
        let identity = matrix_identity(meta_identity, &files, sep, &m.name);
        let n = meta.parts.len();
        let matrix = AngelMatrix {
            identity,
            tmeta,
            inner: Some(Arc::new(Inner {
                meta,
                files,
                part_problem,
                lines_before,
                sep: sep.to_string(),
                cols,
                parts: (0..n).map(|_| Memo::default()).collect(),
                merged: Memo::default(),
                direct: OnceLock::new(),
                segments: OnceLock::new(),
                regions: (0..n).map(|_| OnceLock::new()).collect(),
                locating: (0..n).map(|_| Mutex::new(())).collect(),
                indexes,
            })),
        };
        (matrix, transient)
    }

    fn fail(&self, fault: Arc<MatrixFault>) -> ModelError {
        matrix_error(&self.tmeta, fault)
    }

    fn inner(&self) -> Result<&Arc<Inner>, ModelError> {
        match (&self.inner, &self.tmeta.problem) {
            (Some(i), None) => Ok(i),
            (_, Some(p)) => Err(self.fail(MatrixFault::Known(p.clone()).into())),
            (None, None) => Err(self.fail(MatrixFault::Known("matrix not loaded".into()).into())),
        }
    }

    /// The matrix's entries by range, when its partitions allow it (`stream`).
    fn segments(&self) -> Result<Option<Arc<Segments>>, ModelError> {
        let inner = self.inner()?;
        Ok(inner
            .segments
            .get_or_init(|| {
                let all: Vec<usize> = (0..inner.meta.parts.len()).collect();
                inner.segments_of(&all)
            })
            .clone())
    }

    /// The merged stored entries of the whole matrix (global coordinates).
    pub(crate) fn entries(&self) -> Result<Arc<SparseRows>, ModelError> {
        let inner = self.inner()?;
        cache_unless_transient(&inner.merged, || {
            let mut parts = Vec::with_capacity(inner.parts.len());
            for i in 0..inner.parts.len() {
                parts.push(inner.part_entries(i)?);
            }
            let refs: Vec<&SparseRows> = parts.iter().map(|p| &**p).collect();
            merge::merge(&refs, inner.meta.row_type.value.width())
                .map(Arc::new)
                .map_err(|e| Arc::new(e.into()))
        })
        .map_err(|f| self.fail(f))
    }
}

impl Parts for Inner {
    fn part(&self, i: usize) -> &PartMeta {
        &self.meta.parts[i]
    }

    fn region(&self, i: usize) -> Result<Located, Arc<MatrixFault>> {
        let part = &self.meta.parts[i];
        let file = self.file_of(i)?;
        if let Some(r) = self.regions[i].get() {
            return Ok((r.clone(), file.clone()));
        }
        let _one = self.locating[i].lock().unwrap_or_else(|e| e.into_inner());
        if let Some(r) = self.regions[i].get() {
            return Ok((r.clone(), file.clone()));
        }
        let inp = self.input(i, &**file);
        // A transient fault is returned, not kept: the next read locates again.
        let region = Region::locate(&inp, self.indexes.as_ref()).map_err(|fault| {
            let e = decode::DecodeError {
                file: file.name().to_string(),
                part: part.part_id,
                fault,
            };
            log::warn!("{e}");
            Arc::new(MatrixFault::Decode(e))
        })?;
        let r = self.regions[i].get_or_init(|| Arc::new(region)).clone();
        Ok((r, file.clone()))
    }
}

impl Inner {
    /// The data file of partition `i`, or the problem the meta or the open found with it.
    fn file_of(&self, i: usize) -> Result<&Arc<dyn ReadAt>, Arc<MatrixFault>> {
        let known = |p: &String| Arc::new(MatrixFault::Known(p.clone()));
        if let Some(p) = &self.part_problem[i] {
            return Err(known(p));
        }
        self.files[&self.meta.parts[i].file_name]
            .as_ref()
            .map_err(known)
    }

    /// What decoding partition `i`, stored in `file`, needs to know.
    fn input<'a>(&'a self, i: usize, file: &'a dyn ReadAt) -> PartInput<'a> {
        PartInput {
            meta: &self.meta,
            part: &self.meta.parts[i],
            file,
            sep: &self.sep,
            lines_before: self.lines_before[i],
        }
    }

    /// The entries of partitions `parts` by range, when their column ranges allow it.
    fn segments_of(&self, parts: &[usize]) -> Option<Arc<Segments>> {
        Segments::new(&self.meta, parts).map(Arc::new)
    }

    fn part_entries(&self, i: usize) -> Result<Arc<SparseRows>, Arc<MatrixFault>> {
        cache_unless_transient(&self.parts[i], || {
            let inp = self.input(i, &**self.file_of(i)?);
            decode::decode_partition(&inp).map(Arc::new).map_err(|e| {
                log::warn!("{e}");
                Arc::new(e.into())
            })
        })
    }

    /// Column offset of partition `i` in local coordinates (0 for hash partitions).
    fn col_base(&self, i: usize) -> i64 {
        let p = &self.meta.parts[i];
        if p.is_hash() {
            0
        } else {
            p.start_col
        }
    }
}

/// The matrix's cache identity: every file its bytes come from (the meta fixes the layout of
/// the data files), the separator its text data is parsed with, and its name.
fn matrix_identity(
    meta: Option<String>,
    files: &BTreeMap<String, Result<Arc<dyn ReadAt>, String>>,
    sep: &str,
    name: &[u8],
) -> Option<String> {
    let mut id = format!("angel\0{}", meta?);
    for f in files.values() {
        id.push('\0');
        id.push_str(&identity_string(&**f.as_ref().ok()?)?);
    }
    id.push_str(&format!(
        "\0sep={}\0{}",
        sep.escape_default(),
        name.escape_ascii()
    ));
    Some(id)
}

fn lines_before(meta: &MatrixMeta) -> Vec<u64> {
    let mut order: Vec<usize> = (0..meta.parts.len()).collect();
    order.sort_by(|&a, &b| {
        let (pa, pb) = (&meta.parts[a], &meta.parts[b]);
        (&pa.file_name, pa.offset, pa.part_id).cmp(&(&pb.file_name, pb.offset, pb.part_id))
    });
    let mut out = vec![0u64; meta.parts.len()];
    let mut acc = 0u64;
    let mut file: Option<&str> = None;
    for i in order {
        let p = &meta.parts[i];
        if file != Some(p.file_name.as_str()) {
            file = Some(&p.file_name);
            acc = 0;
        }
        out[i] = acc;
        acc = acc.saturating_add(decode::expected_records(meta.format, p).unwrap_or(0));
    }
    out
}

/// §11: partitions sharing a file should not overlap; only worth a warning.
fn warn_overlaps(meta: &MatrixMeta, dir: &Path) {
    let mut spans: Vec<(&str, u64, u64, i32)> = meta
        .parts
        .iter()
        .map(|p| {
            (
                p.file_name.as_str(),
                p.offset,
                p.offset.saturating_add(p.length),
                p.part_id,
            )
        })
        .collect();
    spans.sort();
    for w in spans.windows(2) {
        if w[0].0 == w[1].0 && w[1].1 < w[0].2 {
            log::warn!(
                "{}: partitions {} and {} overlap in file {}",
                dir.display(),
                w[0].3,
                w[1].3,
                w[0].0
            );
        }
    }
}

fn matrix_extra(meta: &MatrixMeta) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("rowType".into(), json!(meta.row_type.code));
    m.insert("formatClassName".into(), json!(meta.format_class_name));
    m.insert("sparse".into(), json!(!meta.row_type.dense));
    m.insert("row".into(), json!(meta.rows));
    m.insert("col".into(), json!(meta.col));
    if let Some(b) = meta.block_row {
        m.insert("blockRow".into(), json!(b));
    }
    if let Some(b) = meta.block_col {
        m.insert("blockCol".into(), json!(b));
    }
    if !meta.options.is_empty() {
        m.insert("options".into(), json!(meta.options));
    }
    m
}

fn partition_meta(p: &PartMeta, cols: u64) -> PartitionMeta {
    let (col_start, width) = part_cols(p, cols);
    let mut extra = Map::new();
    extra.insert("partId".into(), json!(p.part_id));
    extra.insert("startRow".into(), json!(p.start_row));
    extra.insert("endRow".into(), json!(p.end_row));
    extra.insert("startCol".into(), json!(p.start_col));
    extra.insert("endCol".into(), json!(p.end_col));
    extra.insert("saveRowNum".into(), json!(p.save_row_num));
    extra.insert("saveColNum".into(), json!(p.save_col_num));
    extra.insert("saveColElemNum".into(), json!(p.save_col_elem_num));
    extra.insert("rows".into(), json!(p.rows.len()));
    PartitionMeta {
        extent: vec![
            (p.start_row as u64, (p.end_row - p.start_row) as u64),
            (col_start, width),
        ],
        file: p.file_name.clone(),
        offset: p.offset,
        length: p.length,
        part_id: Some(p.part_id),
        extra,
    }
}

/// `(start, width)` of a partition's columns as shown (see the module comment).
fn part_cols(p: &PartMeta, cols: u64) -> (u64, u64) {
    if p.is_hash() {
        (0, cols)
    } else {
        let width = (p.end_col as i128 - p.start_col as i128) as u64;
        (p.start_col.max(0) as u64, width)
    }
}

impl Tensor for AngelMatrix {
    fn meta(&self) -> &TensorMeta {
        &self.tmeta
    }

    fn fill_elements(&self, ctx: &ReadCtx, first: u64, out: &mut [u8]) -> Result<(), ModelError> {
        let inner = self.inner()?;
        let direct = inner.direct.get_or_init(|| {
            let files = |p: &PartMeta| inner.files.get(&p.file_name)?.as_ref().ok().cloned();
            let what = format!("Angel matrix {}", String::from_utf8_lossy(&self.tmeta.name));
            Plan::new(&inner.meta, &files, &what)
        });
        if let Some(plan) = direct {
            return plan.read(ctx, first, out).map_err(|e| {
                log::warn!("{e}");
                e
            });
        }
        // By range; when the partitions must be merged, from the decoded whole (`Ranged`).
        let w = self.tmeta.dtype.elem_size().unwrap_or(1);
        let shape = shape_of(self)?;
        fill_dense_by_range(self, ctx, &shape, 0, 0, inner.cols, w, first, out)
    }

    fn cache_identity(&self) -> Option<String> {
        self.identity.clone()
    }

    fn partition(&self, i: usize) -> Result<Arc<dyn Tensor>, ModelError> {
        let inner = self
            .inner
            .as_ref()
            .ok_or_else(|| ModelError::NotFound(format!("partition {i}")))?;
        let pm = self
            .tmeta
            .partitions
            .get(i)
            .ok_or_else(|| ModelError::NotFound(format!("partition {i}")))?;
        let p = &inner.meta.parts[i];
        let (_, width) = part_cols(p, inner.cols);
        let sparse = self.tmeta.sparse;
        let (shape, row_base, col_base) = if sparse {
            (self.tmeta.shape.clone(), 0, 0)
        } else {
            let shape = vec![(p.end_row - p.start_row) as u64, width];
            (shape, p.start_row as u64, inner.col_base(i))
        };
        let tmeta = TensorMeta {
            sparse: self.tmeta.sparse,
            extra: {
                let mut m = self.tmeta.extra.clone();
                m.extend(pm.extra.clone());
                m
            },
            problem: inner.part_problem[i].clone(),
            mtime: self.tmeta.mtime,
            role: crate::model::Role::Matrix,
            ..TensorMeta::new(self.tmeta.name.clone(), self.tmeta.dtype, shape, "angel")
        };
        Ok(Arc::new(AngelPartition {
            identity: self.identity.as_ref().map(|m| format!("{m}\0part{i}")),
            tmeta,
            inner: inner.clone(),
            index: i,
            row_base,
            col_base,
            segments: OnceLock::new(),
        }))
    }

    crate::model::capabilities!(as_sparse: Sparse, as_keyed: Keyed);
}

impl Keyed for AngelMatrix {
    /// Feature ids are what Angel keys by, and they are column ids: a column format's records,
    /// a one-row matrix's entries (an LR), a matrix whose rows are too wide to be one answer
    /// (an embedding saved by row: a row per dimension, a column per feature) are all read by
    /// column id. The other sparse row formats (an FC layer) by row id.
    fn key_kind(&self) -> Option<KeyKind> {
        let inner = self.inner.as_ref()?;
        model_key_kind(&self.tmeta)?;
        let es = self.tmeta.dtype.elem_size().unwrap_or(1) as u64;
        let wide = self.tmeta.shape[1].saturating_mul(es) > crate::model::MAX_ROW_BYTES;
        if inner.meta.format.is_column() || self.tmeta.shape[0] == 1 || wide {
            Some(KeyKind::ColumnId)
        } else if self.tmeta.sparse {
            Some(KeyKind::RowId)
        } else {
            Some(KeyKind::RowIndex)
        }
    }
}

fn matrix_error(meta: &TensorMeta, fault: Arc<MatrixFault>) -> ModelError {
    ModelError::data(
        format!("Angel matrix {}", String::from_utf8_lossy(&meta.name)),
        fault,
    )
}

mod partition;
mod ranged;

use crate::source::{ReadCtx, ReadExt};
pub(crate) use partition::AngelPartition;
use ranged::shape_of;
