//! V1 checkpoints (TensorFlow before 0.12, formats/tf-checkpoint.md §12): one table per shard
//! (`P`, or `P-0000i-of-0000N`) whose `""` entry lists every tensor and the slices stored, and
//! whose other keys hold one `SavedSlice` each, its values in a `TensorProto`. A tensor saved
//! whole is one slice; a partitioned one several, assembled like V2 partitions (§7.4). No
//! tensor checksum exists in V1; the tables' block CRCs are verified.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::bundle::partitioned::{self, SlicePart};
use super::dtype::from_tf;
use super::graph::tensor_proto::{self, ProtoTensor};
use super::ordered_code::slice_key;
use super::proto::{Extent, TensorSliceProto};
use crate::codec::table::{Table, TableError};
use crate::codec::wire::{Fields, Value};
use crate::model::{
    DirEntry, EachString, Model, ModelError, ModelResult, ModelSummary, PartitionMeta, Strings,
    Tensor, TensorMeta,
};
use crate::source::{MemSource, Memo, ReadAt, ReadCtx};

/// What the meta entries say of one tensor.
struct V1Tensor {
    dtype: i32,
    shape: Vec<i64>,
    /// (shard, slice) for every slice stored.
    slices: Vec<(usize, TensorSliceProto)>,
}

/// Shard file names (for the `.json`) and their tables.
struct Shards(Vec<(String, Table)>);

pub(crate) struct V1Model {
    shards: Arc<Shards>,
    tensors: BTreeMap<Vec<u8>, V1Tensor>,
    /// Tensor paths (name split on `/`), sorted.
    paths: Vec<Vec<Vec<u8>>>,
    mtime: std::time::SystemTime,
}

#[derive(Debug, thiserror::Error)]
pub(crate) enum V1Error {
    #[error(transparent)]
    Table(#[from] TableError),
    #[error("{0}: no V1 header entry")]
    NoHeader(String),
    #[error("{0}: {1}")]
    Proto(String, String),
}

impl V1Model {
    pub(crate) fn open(
        shards: Vec<(String, Table)>,
        mtime: std::time::SystemTime,
    ) -> Result<Self, V1Error> {
        let mut tensors: BTreeMap<Vec<u8>, V1Tensor> = BTreeMap::new();
        for (i, (name, table)) in shards.iter().enumerate() {
            let header = table
                .get(b"")?
                .ok_or_else(|| V1Error::NoHeader(name.clone()))?;
            let bad = |e: &dyn std::fmt::Display| V1Error::Proto(name.clone(), e.to_string());
            for f in Fields::new(&header) {
                let f = f.map_err(|e| bad(&e))?;
                let (1, Some(meta)) = (f.number, f.range()) else {
                    continue;
                };
                for t in Fields::within(&header, meta) {
                    let t = t.map_err(|e| bad(&e))?;
                    let (1, Some(r)) = (t.number, t.range()) else {
                        continue;
                    };
                    let (key, entry) = slice_meta(&header, r).map_err(|e| bad(&e))?;
                    let e = tensors.entry(key).or_insert(V1Tensor {
                        dtype: entry.dtype,
                        shape: entry.shape.clone(),
                        slices: Vec::new(),
                    });
                    e.slices.extend(entry.slices.into_iter().map(|s| (i, s.1)));
                }
            }
        }
        let mut paths: Vec<Vec<Vec<u8>>> = tensors
            .keys()
            .map(|k| k.split(|&b| b == b'/').map(<[u8]>::to_vec).collect())
            .collect();
        paths.sort();
        Ok(V1Model {
            shards: Arc::new(Shards(shards)),
            tensors,
            paths,
            mtime,
        })
    }

    /// The tensor of one slice: its meta now, its value (a table read) on first use, so that
    /// listing never reads data.
    fn slice_tensor(
        &self,
        name: &[u8],
        shard: usize,
        slice: &TensorSliceProto,
        meta: TensorMeta,
    ) -> Result<Arc<dyn Tensor>, String> {
        Ok(Arc::new(LazySlice {
            shards: Arc::clone(&self.shards),
            name: name.to_vec(),
            shard,
            slice: slice.clone(),
            meta,
            value: Memo::default(),
        }))
    }

    fn meta(&self, name: &[u8], t: &V1Tensor) -> TensorMeta {
        let mut problem = None;
        let shape = t
            .shape
            .iter()
            .map(|&d| {
                u64::try_from(d).unwrap_or_else(|_| {
                    problem = Some(format!("negative dimension {d}"));
                    0
                })
            })
            .collect();
        TensorMeta {
            problem,
            mtime: self.mtime,
            ..TensorMeta::new(name.to_vec(), from_tf(t.dtype), shape, "tf-checkpoint")
        }
    }
}

impl Shards {
    fn load_slice(
        &self,
        name: &[u8],
        shard: usize,
        slice: &TensorSliceProto,
        meta: TensorMeta,
    ) -> Result<ProtoTensor, Fault> {
        let (file, table) = &self.0[shard];
        let value = table
            .get(&slice_key(name, slice))
            .map_err(|e| match crate::source::is_transient(&e) {
                true => Fault::Transient(e),
                false => Fault::Lasting(e.to_string()),
            })?
            .ok_or_else(|| format!("{file}: its slice entry is missing"))?;
        // SavedTensorSlices.data (2) → SavedSlice.data (3): the TensorProto.
        let mut proto = None;
        for f in Fields::new(&value) {
            let f = f.map_err(|e| e.to_string())?;
            if let (2, Some(r)) = (f.number, f.range()) {
                for g in Fields::within(&value, r) {
                    let g = g.map_err(|e| e.to_string())?;
                    if let (3, Value::Bytes { start, end }) = (g.number, g.value) {
                        proto = Some(start..end);
                    }
                }
            }
        }
        let proto = proto.ok_or_else(|| format!("{file}: the slice holds no data"))?;
        let info = tensor_proto::scan(&value, proto, 0).map_err(|e| e.to_string())?;
        let src: Arc<dyn ReadAt> = Arc::new(MemSource::new(file.clone(), value));
        Ok(ProtoTensor::with_meta(src, info, meta))
    }
}

/// A slice whose value is read from its table on first use.
struct LazySlice {
    shards: Arc<Shards>,
    name: Vec<u8>,
    shard: usize,
    slice: TensorSliceProto,
    meta: TensorMeta,
    value: Memo<Result<ProtoTensor, String>>,
}

/// Why a slice could not be loaded: a transient fault of the source (tried again on the next
/// read), or a lasting one.
enum Fault {
    Transient(TableError),
    Lasting(String),
}

impl From<String> for Fault {
    fn from(e: String) -> Fault {
        Fault::Lasting(e)
    }
}

impl LazySlice {
    fn value(&self) -> Result<&ProtoTensor, ModelError> {
        let name = || String::from_utf8_lossy(&self.name).into_owned();
        let got = self.value.get_or_try(|| {
            let load =
                self.shards
                    .load_slice(&self.name, self.shard, &self.slice, self.meta.clone());
            match load {
                Ok(v) => Ok(Ok(v)),
                Err(Fault::Lasting(e)) => Ok(Err(e)),
                // Not kept: the next read tries again.
                Err(Fault::Transient(e)) => Err(e),
            }
        });
        match got {
            Ok(r) => r.as_ref().map_err(|e| ModelError::data(name(), e.clone())),
            Err(e) => Err(ModelError::data(name(), e)),
        }
    }
}

impl Tensor for LazySlice {
    fn meta(&self) -> &TensorMeta {
        &self.meta
    }

    fn fill_elements(&self, ctx: &ReadCtx, first: u64, out: &mut [u8]) -> Result<(), ModelError> {
        crate::model::read_elements(self.value()?, ctx, first, out)
    }

    /// None: V1 text indexes are kept per mount only (a V1 checkpoint is small and rare).
    fn cache_identity(&self) -> Option<String> {
        None
    }

    crate::model::capabilities!(as_strings: Strings);
}

impl Strings for LazySlice {
    fn for_each_string(&self, ctx: &ReadCtx, first: u64, count: u64, f: EachString) -> ModelResult {
        self.value()?.for_each_string(ctx, first, count, f)
    }
}

/// One `SavedSliceMeta`: name, dtype, shape, slices.
fn slice_meta(buf: &[u8], r: std::ops::Range<usize>) -> Result<(Vec<u8>, V1Tensor), String> {
    let mut name = Vec::new();
    let mut t = V1Tensor {
        dtype: 0,
        shape: Vec::new(),
        slices: Vec::new(),
    };
    for f in Fields::within(buf, r) {
        let f = f.map_err(|e| e.to_string())?;
        match (f.number, f.value) {
            (1, Value::Bytes { start, end }) => name = buf[start..end].to_vec(),
            (2, Value::Bytes { start, end }) => {
                for d in Fields::within(buf, start..end) {
                    let d = d.map_err(|e| e.to_string())?;
                    if let (2, Value::Bytes { start, end }) = (d.number, d.value) {
                        let mut size = 0i64;
                        for s in Fields::within(buf, start..end) {
                            let s = s.map_err(|e| e.to_string())?;
                            if let (1, Value::Varint(v)) = (s.number, s.value) {
                                size = v as i64;
                            }
                        }
                        t.shape.push(size);
                    }
                }
            }
            (3, Value::Varint(v)) => t.dtype = v as i32,
            (4, Value::Bytes { start, end }) => {
                let mut extent = Vec::new();
                for e in Fields::within(buf, start..end) {
                    let e = e.map_err(|e| e.to_string())?;
                    if let (1, Some(er)) = (e.number, e.range()) {
                        let mut x = Extent {
                            start: 0,
                            length: None,
                        };
                        for g in Fields::within(buf, er) {
                            let g = g.map_err(|e| e.to_string())?;
                            match (g.number, g.value) {
                                (1, Value::Varint(v)) => x.start = v as i64,
                                (2, Value::Varint(v)) => x.length = Some(v as i64),
                                _ => {}
                            }
                        }
                        extent.push(x);
                    }
                }
                t.slices.push((0, TensorSliceProto { extent }));
            }
            _ => {}
        }
    }
    Ok((name, t))
}

impl Model for V1Model {
    fn list_dir(&self, dir: &[Vec<u8>]) -> Result<Vec<DirEntry>, ModelError> {
        super::graph::model::list_paths(&self.paths, dir)
    }

    fn tensor(&self, path: &[Vec<u8>]) -> Result<Arc<dyn Tensor>, ModelError> {
        let name = path.join(&b'/');
        let t = self
            .tensors
            .get(&name)
            .ok_or_else(|| ModelError::NotFound(String::from_utf8_lossy(&name).into_owned()))?;
        let meta = self.meta(&name, t);
        let whole = |s: &TensorSliceProto| s.extent.iter().all(|e| e.length.is_none());
        if let [(shard, s)] = t.slices.as_slice() {
            if whole(s) && meta.problem.is_none() {
                return self
                    .slice_tensor(&name, *shard, s, meta)
                    .map_err(|e| ModelError::data(String::from_utf8_lossy(&name), e));
            }
        }
        let parts = t
            .slices
            .iter()
            .map(|(shard, s)| {
                let lengths: Vec<u64> = s
                    .extent
                    .iter()
                    .zip(&meta.shape)
                    .map(|(e, &d)| e.length.map_or(d, |l| l.max(0) as u64))
                    .collect();
                let slice_meta = TensorMeta {
                    stored: None,
                    shape: lengths,
                    partitions: Vec::new(),
                    ..meta.clone()
                };
                SlicePart {
                    proto: s.clone(),
                    tensor: self.slice_tensor(&name, *shard, s, slice_meta),
                    part: PartitionMeta {
                        extent: Vec::new(),
                        file: self.shards.0[*shard].0.clone(),
                        offset: 0,
                        length: 0,
                        part_id: None,
                        extra: Default::default(),
                    },
                }
            })
            .collect();
        let file = self
            .shards
            .0
            .first()
            .map(|s| s.0.clone())
            .unwrap_or_default();
        Ok(Arc::new(partitioned::assemble(meta, file, parts)))
    }

    fn summary(&self) -> Result<ModelSummary, ModelError> {
        let mut s = ModelSummary {
            format: "tf-checkpoint-v1".into(),
            ..Default::default()
        };
        for (name, t) in &self.tensors {
            let meta = self.meta(name, t);
            s.tensors += 1;
            *s.dtypes.entry(meta.dtype.name().into_owned()).or_default() += 1;
            let bytes = meta
                .num_elements()
                .zip(meta.dtype.elem_size())
                .map_or(0, |(n, e)| n.saturating_mul(e as u64));
            s.total_bytes = s.total_bytes.saturating_add(bytes);
        }
        Ok(s)
    }
}
