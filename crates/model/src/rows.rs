//! Rows found by id: the answer to "what is the embedding of feature 123456789?" without a scan
//! of the table (`NAME.rows/<id>.txt`, `modelfs row`).
//!
//! A tensor is *keyed* when its rows have ids (`Tensor::key_kind`); `Tensor::row_by_id` gives
//! one row's values. Readers say how their ids work; what is here serves every reader:
//! - a dense 2-D tensor `[V, d]`: id `i` is row `i` (a TF embedding), read by range;
//! - a sparse matrix, through its entries by range (`Tensor::seek_col`): the column id of a
//!   one-row matrix (an LR's weight) or of a column format (an embedding's column of `k`
//!   values, one per saved row), the row id of the other row formats (the dense row).

use super::Entries;
use super::{ModelError, RequestError, Sparse, Tensor, TensorMeta};
use crate::source::ReadCtx;
use crate::store::{IndexPlace, KeyIndex, ReadKeys};

/// What an id names in a keyed tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    /// Row `id` of a dense `[V, d]` tensor.
    RowIndex,
    /// A sparse matrix's column id: the column's values, one per stored row.
    ColumnId,
    /// A sparse matrix's row id: the row, dense.
    RowId,
    /// A hash table's key (TF hash tables, Monolith): the values saved with it.
    HashKey,
}

impl KeyKind {
    pub fn name(self) -> &'static str {
        match self {
            KeyKind::RowIndex => "row_index",
            KeyKind::ColumnId => "column_id",
            KeyKind::RowId => "row_id",
            KeyKind::HashKey => "hash_key",
        }
    }
}

/// Where a row found by id is. Its values (`width` elements of the tensor's dtype, little
/// endian) were appended to the caller's buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowHit {
    pub width: u64,
    /// The partition holding it (an index into `TensorMeta::partitions`), when partitioned.
    pub partition: Option<usize>,
    /// Its position in the tensor: the dense row, the first stored entry, the table slot.
    pub position: u64,
}

/// A row's values are at most this many bytes: a row is one answer, not a tensor.
pub const MAX_ROW_BYTES: u64 = 64 << 20;

/// The key kind a reader gets unless it says otherwise: dense rank-2 tensors of a fixed-size
/// dtype, by row index; sparse matrices by column id when they have one stored row, else by
/// row id (a reader whose sparse format is by column says `ColumnId` itself).
pub fn default_key_kind(meta: &TensorMeta) -> Option<KeyKind> {
    if meta.problem.is_some() || meta.shape.len() != 2 || meta.dtype.elem_size().is_none() {
        return None;
    }
    match meta.sparse {
        false => Some(KeyKind::RowIndex),
        true => Some(KeyKind::RowId),
    }
}

/// The partition whose extent holds `(row, col)` (`None` for an unpartitioned tensor).
fn partition_of(meta: &TensorMeta, row: u64, col: Option<u64>) -> Option<usize> {
    let inside = |(s, n): (u64, u64), x: u64| x >= s && x - s < n;
    meta.partitions.iter().position(|p| {
        p.extent.first().is_some_and(|&e| inside(e, row))
            && match (col, p.extent.get(1)) {
                (Some(c), Some(&e)) => inside(e, c),
                _ => true,
            }
    })
}

fn elem_size(meta: &TensorMeta) -> Result<usize, ModelError> {
    let dt = meta.dtype;
    Ok(dt
        .elem_size()
        .ok_or_else(|| RequestError::NoFixedSize(dt.name().into_owned()))?)
}

fn row_bytes(width: u64, es: usize) -> Result<usize, ModelError> {
    width
        .checked_mul(es as u64)
        .filter(|&b| b <= MAX_ROW_BYTES)
        .map(|b| b as usize)
        .ok_or_else(|| {
            RequestError::RowTooWide {
                width,
                max: MAX_ROW_BYTES,
            }
            .into()
        })
}

/// Row `id` of a dense `[V, d]` tensor.
pub(crate) fn dense_row<T: Tensor + ?Sized>(
    t: &T,
    id: i64,
    out: &mut Vec<u8>,
) -> Result<Option<RowHit>, ModelError> {
    let meta = t.meta();
    let (Ok(row), &[v, d]) = (u64::try_from(id), &meta.shape[..]) else {
        return Ok(None);
    };
    if row >= v {
        return Ok(None);
    }
    let es = elem_size(meta)?;
    let n = row_bytes(d, es)?;
    let at = out.len();
    out.resize(at + n, 0);
    // row < v and v·d elements exist, so row·d cannot overflow.
    let read = super::read_elements(t, ReadCtx::none(), row * d, &mut out[at..]);
    if let Err(e) = read {
        out.truncate(at);
        return Err(e);
    }
    Ok(Some(RowHit {
        width: d,
        partition: partition_of(meta, row, None),
        position: row,
    }))
}

/// The values of stored entry `e` (checked to be at column `col`), appended to `out`; false
/// when entry `e` is at another column (`col` is not stored in its row).
fn entry_at(
    t: &dyn Sparse,
    e: u64,
    col: i64,
    got: &mut Entries,
    out: &mut Vec<u8>,
) -> Result<bool, ModelError> {
    got.cols.clear();
    got.values.clear();
    t.read_entries(ReadCtx::none(), e, 1, got)?;
    if got.cols.first() != Some(&col) {
        return Ok(false);
    }
    out.extend_from_slice(&got.values);
    Ok(true)
}

/// Column `id` of a sparse matrix: its value in each stored row (zero where a row does not
/// store it); `None` when no row stores it.
pub fn sparse_column(
    t: &dyn Sparse,
    id: i64,
    out: &mut Vec<u8>,
) -> Result<Option<RowHit>, ModelError> {
    let meta = t.meta();
    let es = elem_size(meta)?;
    let shape = t.sparse_shape()?;
    let k = shape.rows.len();
    row_bytes(k as u64, es)?;
    let at = out.len();
    let mut got = Entries::default();
    let mut first = None;
    for r in 0..k {
        let e = t.seek_col(r, id)?;
        let found = e < shape.row_ptr[r + 1] && entry_at(t, e, id, &mut got, out)?;
        if found {
            first.get_or_insert((r, e));
        } else {
            out.resize(out.len() + es, 0);
        }
    }
    let Some((r, e)) = first else {
        out.truncate(at);
        return Ok(None);
    };
    let col = u64::try_from(id).ok();
    Ok(Some(RowHit {
        width: k as u64,
        partition: partition_of(meta, shape.rows[r], col),
        position: e,
    }))
}

/// Row `id` of a sparse matrix, dense (zero where nothing is stored); `None` when the row is
/// not stored.
pub(crate) fn sparse_row(
    t: &dyn Sparse,
    id: i64,
    out: &mut Vec<u8>,
) -> Result<Option<RowHit>, ModelError> {
    let meta = t.meta();
    let es = elem_size(meta)?;
    let shape = t.sparse_shape()?;
    let Ok(row) = u64::try_from(id) else {
        return Ok(None);
    };
    let Ok(k) = shape.rows.binary_search(&row) else {
        return Ok(None);
    };
    let width = meta.shape.get(1).copied().unwrap_or(0);
    let n = row_bytes(width, es)?;
    let (e0, e1) = (shape.row_ptr[k], shape.row_ptr[k + 1]);
    let mut got = Entries::default();
    // A row's stored entries are at most its width (columns ascend within it).
    if e1 - e0 > width {
        return Err(bad_row(meta));
    }
    t.read_entries(ReadCtx::none(), e0, e1 - e0, &mut got)?;
    let at = out.len();
    out.resize(at + n, 0);
    for (i, &c) in got.cols.iter().enumerate() {
        let c = u64::try_from(c).ok().filter(|&c| c < width);
        let (Some(c), Some(v)) = (c, got.values.get(i * es..(i + 1) * es)) else {
            out.truncate(at);
            return Err(bad_row(meta));
        };
        let c = c as usize * es;
        out[at + c..at + c + es].copy_from_slice(v);
    }
    Ok(Some(RowHit {
        width,
        partition: partition_of(meta, row, None),
        position: e0,
    }))
}

fn bad_row(meta: &TensorMeta) -> ModelError {
    ModelError::data(
        String::from_utf8_lossy(&meta.name),
        "a row's stored entries do not fit its width",
    )
}

/// `row_by_id` for the key kinds served here.
pub fn row_of<T: Tensor + ?Sized>(
    t: &T,
    kind: KeyKind,
    id: i64,
    out: &mut Vec<u8>,
) -> Result<Option<RowHit>, ModelError> {
    match kind {
        KeyKind::RowIndex => dense_row(t, id, out),
        KeyKind::ColumnId => sparse_column(entries(t)?, id, out),
        KeyKind::RowId => sparse_row(entries(t)?, id, out),
        // A hash table is its reader's to search.
        KeyKind::HashKey => Ok(None),
    }
}

fn entries<T: Tensor + ?Sized>(t: &T) -> Result<&dyn Sparse, ModelError> {
    t.as_sparse().ok_or_else(|| RequestError::NotSparse.into())
}

/// The key index of a keyed table (a TF hash table, a Monolith table), made once for the
/// table's life and kept in `slot`: the one `place` holds (built before for `entries` keys),
/// else built now from `read` (keys in row order, asked for front to back).
pub fn key_index(
    slot: &std::sync::Mutex<Option<std::sync::Arc<KeyIndex>>>,
    name: &[u8],
    entries: u64,
    place: &IndexPlace,
    read: &mut ReadKeys<'_>,
) -> Result<std::sync::Arc<KeyIndex>, ModelError> {
    let what = || String::from_utf8_lossy(name).into_owned();
    let mut slot = slot
        .lock()
        .map_err(|_| ModelError::data(what(), "key index lock poisoned"))?;
    if let Some(ix) = &*slot {
        return Ok(ix.clone());
    }
    let ix = match place.existing(entries) {
        Some(ix) => ix,
        None => place
            .build(entries, read)
            // `e` says "key index: …" itself.
            .map_err(|e| ModelError::data(what(), e))?,
    };
    Ok(slot.insert(std::sync::Arc::new(ix)).clone())
}
