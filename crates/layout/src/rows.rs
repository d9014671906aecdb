//! The files of one row found by id (`NAME.rows/<id>.txt`, `.json`, `.npy`) and the lines of
//! `modelfs row`: a row is looked up once and rendered whole (it is one answer, a few KB).

use bytes::Bytes;
use serde_json::json;

use std::sync::Arc;

use super::binary::{npy_descr, npy_header, ElemMap};
use super::cache::ChunkCache;
use super::elements::decode;
use super::{FileContent, InconsistentRows, LayoutError, Requester};
use crate::model::{DType, KeyKind, RowHit, Tensor};

/// The files a row has, by suffix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RowFile {
    Txt,
    Json,
    Npy,
}

impl RowFile {
    pub(crate) const ALL: [RowFile; 3] = [RowFile::Txt, RowFile::Json, RowFile::Npy];

    pub fn suffix(self) -> &'static str {
        match self {
            RowFile::Txt => "txt",
            RowFile::Json => "json",
            RowFile::Npy => "npy",
        }
    }

    /// `<id>.<suffix>` → (id, file): the id in canonical decimal (`-` only for negatives, no
    /// leading zeros), so each row has one name.
    pub fn parse_name(name: &[u8]) -> Option<(i64, RowFile)> {
        let s = std::str::from_utf8(name).ok()?;
        let (id, suffix) = s.rsplit_once('.')?;
        let file = RowFile::ALL.into_iter().find(|f| f.suffix() == suffix)?;
        let v: i64 = id.parse().ok()?;
        (v.to_string() == id).then_some((v, file))
    }
}

/// A row found by id: its values (little-endian elements of `dtype`) and where it was.
pub struct FoundRow {
    pub(crate) id: i64,
    pub(crate) dtype: DType,
    pub(crate) kind: KeyKind,
    pub(crate) hit: RowHit,
    pub values: Vec<u8>,
    /// Numbers saved with the row (`Keyed::row_columns`).
    pub(crate) columns: Vec<(&'static str, i64)>,
}

/// The row of `tensor` with id `id`; `None` when it has none (or is not keyed).
pub fn find(tensor: &dyn Tensor, id: i64) -> Result<Option<FoundRow>, LayoutError> {
    let Some(kind) = tensor.key_kind() else {
        return Ok(None);
    };
    let dtype = tensor.meta().dtype;
    let mut values = Vec::new();
    let Some(hit) = tensor.row_by_id(id, &mut values)? else {
        return Ok(None);
    };
    let es = dtype.elem_size().unwrap_or(0) as u64;
    if hit.width.checked_mul(es) != Some(values.len() as u64) {
        return Err(super::InconsistentRows.into());
    }
    let columns = tensor.row_columns(hit.position)?;
    Ok(Some(FoundRow {
        id,
        dtype,
        kind,
        hit,
        values,
        columns,
    }))
}

impl FoundRow {
    fn each_value(&self) -> impl Iterator<Item = &[u8]> {
        let es = self.dtype.elem_size().unwrap_or(1).max(1);
        self.values.chunks_exact(es)
    }

    /// The values in the generic text format (SPEC §3), separated by single spaces.
    pub(crate) fn write_values(&self, out: &mut Vec<u8>) {
        for (i, v) in self.each_value().enumerate() {
            if i > 0 {
                out.push(b' ');
            }
            decode(self.dtype, v).write_py(out);
        }
    }

    /// The bytes of file `file` of this row.
    pub fn render(&self, tensor: &dyn Tensor, file: RowFile) -> Option<Vec<u8>> {
        match file {
            RowFile::Txt => {
                let mut out = Vec::with_capacity(self.values.len() * 3 + 1);
                self.write_values(&mut out);
                out.push(b'\n');
                Some(out)
            }
            RowFile::Json => {
                let mut s = serde_json::to_vec_pretty(&self.json(tensor)).ok()?;
                s.push(b'\n');
                Some(s)
            }
            RowFile::Npy => {
                let (descr, map) = npy_descr(self.dtype)?;
                let mut out = npy_header(descr, &[self.hit.width]);
                for v in self.each_value() {
                    match map {
                        ElemMap::Same => out.extend_from_slice(v),
                        ElemMap::Bool => out.push((v[0] != 0) as u8),
                        ElemMap::Bf16ToF32 => out.extend_from_slice(&[0, 0, v[0], v[1]]),
                        ElemMap::Float8ToF32(code) => out.extend_from_slice(
                            &crate::model::float8::widen(code, v[0]).to_le_bytes(),
                        ),
                    }
                }
                Some(out)
            }
        }
    }

    /// What `.json` and `modelfs row --json` say of the row.
    pub fn json(&self, tensor: &dyn Tensor) -> serde_json::Value {
        let meta = tensor.meta();
        let partition = self.hit.partition.and_then(|i| meta.partitions.get(i));
        let mut values = Vec::new();
        self.write_values(&mut values);
        let values: Vec<serde_json::Value> = String::from_utf8_lossy(&values)
            .split(' ')
            .filter(|s| !s.is_empty())
            .map(|s| match serde_json::from_str::<serde_json::Value>(s) {
                Ok(v @ serde_json::Value::Number(_)) => v,
                _ => serde_json::Value::String(s.to_string()),
            })
            .collect();
        let mut out = json!({
            "id": self.id,
            "tensor": String::from_utf8_lossy(&meta.name),
            "key": self.kind.name(),
            "dtype": self.dtype.name(),
            "width": self.hit.width,
            "position": self.hit.position,
            "partition": partition.map(|p| json!({
                "index": self.hit.partition,
                "part_id": p.part_id,
                "file": p.file,
            })),
            "values": values,
        });
        for &(name, v) in &self.columns {
            out[name] = v.into();
        }
        out
    }
}

/// A row file whose bytes live in the chunk cache (bounded by `cache=`) and are rendered
/// again on a miss: a mount that looks ids up for weeks keeps a few words per row file the
/// kernel holds, not the row.
pub struct RowContent {
    tensor: Arc<dyn Tensor>,
    id: i64,
    file: RowFile,
    size: u64,
    cache: Arc<ChunkCache>,
    /// The rendered bytes' key in `cache` (block 0).
    namespace: u64,
}

impl RowContent {
    /// Row `id` of `tensor` as file `file`, found and rendered once (so its size is exact
    /// at once); `None` when the tensor has no such row or file.
    pub fn open(
        tensor: Arc<dyn Tensor>,
        id: i64,
        file: RowFile,
        cache: Arc<ChunkCache>,
    ) -> Result<Option<RowContent>, LayoutError> {
        let Some(bytes) = render_row(&*tensor, id, file)? else {
            return Ok(None);
        };
        let namespace = cache.new_namespace();
        let size = bytes.len() as u64;
        cache.insert(namespace, 0, Arc::new(bytes));
        Ok(Some(RowContent {
            tensor,
            id,
            file,
            size,
            cache,
            namespace,
        }))
    }

    fn bytes(&self) -> Result<Arc<Vec<u8>>, LayoutError> {
        if let Some(b) = self.cache.get(self.namespace, 0) {
            return Ok(b);
        }
        // The source does not change under a mount: the row renders as it did.
        let b = render_row(&*self.tensor, self.id, self.file)?
            .filter(|b| b.len() as u64 == self.size)
            .ok_or(InconsistentRows)?;
        let b = Arc::new(b);
        self.cache.insert(self.namespace, 0, b.clone());
        Ok(b)
    }
}

fn render_row(tensor: &dyn Tensor, id: i64, file: RowFile) -> Result<Option<Vec<u8>>, LayoutError> {
    Ok(find(tensor, id)?.and_then(|row| row.render(tensor, file)))
}

impl FileContent for RowContent {
    fn known_size(&self) -> Option<u64> {
        Some(self.size)
    }
    fn read(&self, offset: u64, len: usize, _req: &dyn Requester) -> Result<Bytes, LayoutError> {
        let from = usize::try_from(offset).unwrap_or(usize::MAX);
        Ok(super::cache::lend(self.bytes()?, from, len))
    }
}

/// The `README` of a `NAME.rows/` directory: it lists nothing else (a table has 10^8+ ids).
pub fn readme(tensor: &dyn Tensor) -> Vec<u8> {
    let meta = tensor.meta();
    let what = match tensor.key_kind() {
        Some(KeyKind::RowIndex) => "the row index (0 to rows - 1)",
        Some(KeyKind::ColumnId) => "a column (feature) id; the values are one per stored row",
        Some(KeyKind::RowId) => "a stored row's id; the row is shown dense",
        Some(KeyKind::HashKey) => "a key of the table",
        None => "nothing: this tensor has no row ids",
    };
    format!(
        "Rows of {} by id, found by lookup (nothing is listed here).\n\
         The id is {what}.\n\n\
         \x20 cat ID.txt    the values, separated by single spaces\n\
         \x20 cat ID.json   the id, where the row was found and its values\n\
         \x20 ID.npy        the values as a 1-D numpy array\n\n\
         IDs are decimal (a minus sign for negative ids); an id the tensor lacks is not found.\n",
        String::from_utf8_lossy(&meta.name)
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_names_are_canonical_decimal_ids() {
        assert_eq!(RowFile::parse_name(b"12.txt"), Some((12, RowFile::Txt)));
        assert_eq!(RowFile::parse_name(b"-5.npy"), Some((-5, RowFile::Npy)));
        assert_eq!(
            RowFile::parse_name(b"-9223372036854775808.json"),
            Some((i64::MIN, RowFile::Json))
        );
        for bad in [
            &b"012.txt"[..],
            b"+1.txt",
            b"-0.txt",
            b"1.csv",
            b"1",
            b".txt",
            b"9223372036854775808.txt",
            b"1 .txt",
            b"README",
        ] {
            assert_eq!(
                RowFile::parse_name(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}

#[cfg(test)]
mod model_rows_tests {
    //! `model::rows` (here: the model layer's tests cannot use the in-memory doubles).
    use crate::model::rows::*;
    use crate::model::{DType, ModelError, RequestError, SparseRows, Tensor};
    use crate::testing::MemTensor;

    use crate::testing::f32s;

    fn row(t: &dyn Tensor, id: i64) -> Option<(Vec<f32>, RowHit)> {
        let mut out = vec![9u8; 3]; // values are appended, whatever is there
        let hit = t.row_by_id(id, &mut out).unwrap()?;
        assert_eq!(&out[..3], &[9, 9, 9]);
        Some((f32s(&out[3..]), hit))
    }

    fn dynt(t: &MemTensor) -> &dyn Tensor {
        t
    }

    #[test]
    fn a_dense_matrix_is_keyed_by_row_index() {
        let t = MemTensor::f32(&[3, 2], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert_eq!(dynt(&t).key_kind(), Some(KeyKind::RowIndex));
        let (v, hit) = row(&t, 1).unwrap();
        assert_eq!(v, [3.0, 4.0]);
        assert_eq!((hit.width, hit.position, hit.partition), (2, 1, None));
        assert_eq!(row(&t, 2).unwrap().0, [5.0, 6.0]);
        assert!(row(&t, 3).is_none());
        assert!(row(&t, -1).is_none());
        assert!(row(&t, i64::MAX).is_none());
        // Not rank 2: no ids.
        assert_eq!(dynt(&MemTensor::f32(&[2], &[1.0, 2.0])).key_kind(), None);
        assert_eq!(
            dynt(&MemTensor::f32(&[1, 1, 2], &[1.0, 2.0])).key_kind(),
            None
        );
    }

    fn lr() -> MemTensor {
        // One row, long keys (negative included), as an LR saves them.
        let s = SparseRows {
            rows: vec![0],
            row_ptr: vec![0, 3],
            cols: vec![-7, 5, 1 << 40],
            values: [0.5f32, 1.5, -2.0]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
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
            values: [1.0f32, 2.0, 3.0, 4.0]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
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
        assert_eq!(dynt(&t).key_kind(), Some(KeyKind::RowId));
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
        let e = dynt(&t).row_by_id(0, &mut out).unwrap_err();
        assert!(
            matches!(e, ModelError::Request(RequestError::RowTooWide { .. })),
            "{e}"
        );
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
