//! Rows found by id: the answer to "what is the embedding of feature 123456789?" without a scan
//! of the table (`NAME.rows/<id>.txt`, `modelfs row`).
//!
//! A tensor is *keyed* when its rows have ids (`Tensor::key_kind`); `Tensor::row_by_id` gives
//! one row's values. Readers say how their ids work; what is here serves every reader:
//! - a dense 2-D tensor `[V, d]`: id `i` is row `i` (a TF embedding), read by range;
//! - a sparse matrix, through its entries by range (`Tensor::seek_col`): the column id of a
//!   one-row matrix (an LR's weight) or of a column format (an embedding's column of `k`
//!   values, one per saved row), the row id of the other row formats (the dense row).

use super::{ModelError, RequestError, Tensor, TensorMeta};
use super::Entries;

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
pub(crate) fn default_key_kind(meta: &TensorMeta) -> Option<KeyKind> {
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
    let es = meta
        .dtype
        .elem_size()
        .ok_or_else(|| RequestError::NoFixedSize(meta.dtype.name().into_owned()))?;
    let n = row_bytes(d, es)?;
    let at = out.len();
    out.resize(at + n, 0);
    // row < v and v·d elements exist, so row·d cannot overflow.
    let read = t.read_elements(row * d, &mut out[at..]);
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
fn entry_at<T: Tensor + ?Sized>(
    t: &T,
    e: u64,
    col: i64,
    got: &mut Entries,
    out: &mut Vec<u8>,
) -> Result<bool, ModelError> {
    got.cols.clear();
    got.values.clear();
    t.read_entries(e, 1, got)?;
    if got.cols.first() != Some(&col) {
        return Ok(false);
    }
    out.extend_from_slice(&got.values);
    Ok(true)
}

/// Column `id` of a sparse matrix: its value in each stored row (zero where a row does not
/// store it); `None` when no row stores it.
pub(crate) fn sparse_column<T: Tensor + ?Sized>(
    t: &T,
    id: i64,
    out: &mut Vec<u8>,
) -> Result<Option<RowHit>, ModelError> {
    let meta = t.meta();
    let es = meta
        .dtype
        .elem_size()
        .ok_or_else(|| RequestError::NoFixedSize(meta.dtype.name().into_owned()))?;
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
pub(crate) fn sparse_row<T: Tensor + ?Sized>(
    t: &T,
    id: i64,
    out: &mut Vec<u8>,
) -> Result<Option<RowHit>, ModelError> {
    let meta = t.meta();
    let es = meta
        .dtype
        .elem_size()
        .ok_or_else(|| RequestError::NoFixedSize(meta.dtype.name().into_owned()))?;
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
    t.read_entries(e0, e1 - e0, &mut got)?;
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
pub(crate) fn row_of<T: Tensor + ?Sized>(
    t: &T,
    kind: KeyKind,
    id: i64,
    out: &mut Vec<u8>,
) -> Result<Option<RowHit>, ModelError> {
    match kind {
        KeyKind::RowIndex => dense_row(t, id, out),
        KeyKind::ColumnId => sparse_column(t, id, out),
        KeyKind::RowId => sparse_row(t, id, out),
        // A hash table is its reader's to search.
        KeyKind::HashKey => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{DType, SparseRows};
    use crate::testing::MemTensor;

    fn f32s(b: &[u8]) -> Vec<f32> {
        b.chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }

    fn row(t: &dyn Tensor, id: i64) -> Option<(Vec<f32>, RowHit)> {
        let mut out = vec![9u8; 3]; // values are appended, whatever is there
        let hit = t.row_by_id(id, &mut out).unwrap()?;
        assert_eq!(&out[..3], &[9, 9, 9]);
        Some((f32s(&out[3..]), hit))
    }

    #[test]
    fn a_dense_matrix_is_keyed_by_row_index() {
        let t = MemTensor::f32(&[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert_eq!(t.key_kind(), Some(KeyKind::RowIndex));
        let (v, hit) = row(&t, 1).unwrap();
        assert_eq!(v, [3.0, 4.0]);
        assert_eq!((hit.width, hit.position, hit.partition), (2, 1, None));
        assert_eq!(row(&t, 2).unwrap().0, [5.0, 6.0]);
        assert!(row(&t, 3).is_none());
        assert!(row(&t, -1).is_none());
        assert!(row(&t, i64::MAX).is_none());
        // Not rank 2: no ids.
        assert_eq!(MemTensor::f32(&[2], &[1.0, 2.0]).key_kind(), None);
        assert_eq!(MemTensor::f32(&[1, 1, 2], &[1.0, 2.0]).key_kind(), None);
    }

    fn lr() -> MemTensor {
        // One row, long keys (negative included), as an LR saves them.
        let s = SparseRows {
            rows: vec![0],
            row_ptr: vec![0, 3],
            cols: vec![-7, 5, 1 << 40],
            values: [0.5f32, 1.5, -2.0].iter().flat_map(|v| v.to_le_bytes()).collect(),
        };
        MemTensor::sparse(DType::F32, 1, i64::MAX as u64, s)
    }

    #[test]
    fn a_one_row_sparse_matrix_is_keyed_by_column_id() {
        let t = lr();
        let kind = KeyKind::ColumnId;
        let get = |id| {
            let mut out = Vec::new();
            row_of(&t, kind, id, &mut out)
                .unwrap()
                .map(|h| (f32s(&out), h.position))
        };
        assert_eq!(get(-7), Some((vec![0.5], 0)));
        assert_eq!(get(5), Some((vec![1.5], 1)));
        assert_eq!(get(1 << 40), Some((vec![-2.0], 2)));
        for absent in [-8, 0, 4, 6, i64::MIN, i64::MAX] {
            assert_eq!(get(absent), None, "{absent}");
        }
    }

    #[test]
    fn a_column_of_several_rows_is_zero_where_a_row_lacks_it() {
        // Rows 0 and 3 stored; column 4 only in row 3.
        let s = SparseRows {
            rows: vec![0, 3],
            row_ptr: vec![0, 2, 4],
            cols: vec![1, 2, 2, 4],
            values: [1.0f32, 2.0, 3.0, 4.0].iter().flat_map(|v| v.to_le_bytes()).collect(),
        };
        let t = MemTensor::sparse(DType::F32, 4, 8, s);
        let col = |id| {
            let mut out = Vec::new();
            sparse_column(&t, id, &mut out).unwrap().map(|_| f32s(&out))
        };
        assert_eq!(col(2), Some(vec![2.0, 3.0]));
        assert_eq!(col(4), Some(vec![0.0, 4.0]));
        assert_eq!(col(1), Some(vec![1.0, 0.0]));
        assert_eq!(col(3), None);
        // By row id: dense rows of the stored ones.
        assert_eq!(t.key_kind(), Some(KeyKind::RowId));
        let (v, hit) = row(&t, 3).unwrap();
        assert_eq!(v, [0.0, 0.0, 3.0, 0.0, 4.0, 0.0, 0.0, 0.0]);
        assert_eq!(hit.position, 2);
        assert!(row(&t, 1).is_none());
        assert!(row(&t, -3).is_none());
    }

    #[test]
    fn a_row_too_wide_to_be_an_answer_is_refused_not_allocated() {
        let s = SparseRows {
            rows: vec![0, 1],
            row_ptr: vec![0, 1, 1],
            cols: vec![3],
            values: 1.0f32.to_le_bytes().to_vec(),
        };
        let t = MemTensor::sparse(DType::F32, 2, 1 << 40, s);
        let mut out = Vec::new();
        let e = t.row_by_id(0, &mut out).unwrap_err();
        assert!(matches!(e, ModelError::Request(RequestError::RowTooWide { .. })), "{e}");
        assert!(out.is_empty());
    }

    #[test]
    fn the_partition_of_a_row_is_the_one_whose_extent_holds_it() {
        let mut t = MemTensor::f32(&[4, 1], &[1.0, 2.0, 3.0, 4.0]);
        for (start, len) in [(0, 3), (3, 1)] {
            t.meta.partitions.push(crate::model::PartitionMeta {
                extent: vec![(start, len), (0, 1)],
                file: "f".into(),
                offset: 0,
                length: 0,
                part_id: None,
                extra: Default::default(),
            });
        }
        assert_eq!(row(&t, 2).unwrap().1.partition, Some(0));
        assert_eq!(row(&t, 3).unwrap().1.partition, Some(1));
    }
}
