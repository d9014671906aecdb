//! Partitioned variables (§7): a full entry with `slices`, each slice an entry of its own,
//! assembled by `model::blocks` (read on demand; coverage checked when built).

use std::sync::Arc;

use super::entry::{parse_entry, Entry};
use super::shard_file_name;
use super::tensor::TfTensor;
use super::Bundle;
use crate::codec::table::TableError;
use crate::model::blocks::{Block, Blocks};
use crate::model::{PartitionMeta, Tensor, TensorMeta};
use crate::ordered_code::slice_key;

/// Why one slice of a partitioned entry cannot be used (reported in the tensor's `problem`).
#[derive(Debug, thiserror::Error)]
enum SliceProblem {
    #[error("rank {slice} differs from the tensor's rank {tensor}")]
    Rank { slice: usize, tensor: usize },
    #[error("bad extent start {start} length {length}")]
    BadExtent { start: i64, length: i64 },
    #[error("extent {start},{length} exceeds dimension {dim}")]
    PastDimension { start: u64, length: u64, dim: u64 },
    #[error(transparent)]
    Table(#[from] TableError),
    #[error("its entry is missing")]
    Missing,
    #[error("dtype {slice} differs from the full entry's {full}")]
    DType { slice: String, full: String },
    #[error("shape {shape:?} differs from its extent {extent:?}")]
    Shape { shape: Vec<u64>, extent: Vec<u64> },
    #[error("the slice entry is partitioned itself")]
    Nested,
    #[error("{0}")]
    Entry(String),
}

/// One slice as a reader found it: its extent, its tensor (or why there is none), and where
/// it is stored (for the `.json`).
pub(crate) struct SlicePart {
    pub(crate) proto: crate::proto::TensorSliceProto,
    pub(crate) tensor: Result<Arc<dyn Tensor>, String>,
    pub(crate) part: PartitionMeta,
}

/// The partitioned entry `entry` named `name` of `bundle`, its slices assembled.
pub(crate) fn new(bundle: Arc<Bundle>, name: Vec<u8>, entry: &Entry) -> Blocks {
    let parts = entry
        .slices
        .iter()
        .map(|proto| {
            let mut part = PartitionMeta {
                extent: Vec::new(),
                file: String::new(),
                offset: 0,
                length: 0,
                part_id: None,
                extra: Default::default(),
            };
            let tensor = resolve_extent(proto, &entry.shape)
                .and_then(|extent| slice_tensor(&bundle, &name, entry, proto, &extent))
                .map(|t| {
                    if let Some(loc) = t.loc() {
                        // The shard, not the prefix's file name: the same tensor in two
                        // checkpoints then has the same `.json` (`diff -r` of two mounts).
                        part.file = shard_file_name("", loc.shard, bundle.num_shards)
                            .trim_start_matches('.')
                            .to_string();
                        part.offset = loc.offset;
                        part.length = loc.size;
                    }
                    t as Arc<dyn Tensor>
                })
                .map_err(|p| p.to_string());
            SlicePart {
                proto: proto.clone(),
                tensor,
                part,
            }
        })
        .collect();
    let meta = TensorMeta {
        problem: entry.problem.clone(),
        note: entry.note.clone(),
        mtime: bundle.mtime,
        ..TensorMeta::new(name, entry.dtype, entry.shape.clone(), "tf-checkpoint")
    };
    assemble(meta, bundle.prefix_name.clone(), parts)
}

/// The tensor `meta` (name, dtype, full shape) made of the slices `parts` of the checkpoint
/// `prefix_name`.
pub(crate) fn assemble(meta: TensorMeta, prefix_name: String, parts: Vec<SlicePart>) -> Blocks {
    let shape = meta.shape.clone();
    let blocks = parts
        .into_iter()
        .map(|p| Block {
            extent: resolve_extent(&p.proto, &shape).map_err(|e| e.to_string()),
            tensor: p.tensor,
            part: p.part,
        })
        .collect();
    Blocks::assemble(meta, prefix_name, blocks)
}

/// The plain tensor holding one slice, checked against the full entry and the slice's extent.
fn slice_tensor(
    bundle: &Arc<Bundle>,
    name: &[u8],
    full: &Entry,
    proto: &crate::proto::TensorSliceProto,
    extent: &[(u64, u64)],
) -> Result<Arc<TfTensor>, SliceProblem> {
    let value = bundle
        .table
        .get(&slice_key(name, proto))?
        .ok_or(SliceProblem::Missing)?;
    let se = parse_entry(&value, bundle.num_shards);
    let lengths: Vec<u64> = extent.iter().map(|e| e.1).collect();
    if se.dtype != full.dtype {
        return Err(SliceProblem::DType {
            slice: se.dtype.name().into_owned(),
            full: full.dtype.name().into_owned(),
        });
    }
    if !extent.is_empty() && se.shape != lengths {
        return Err(SliceProblem::Shape {
            shape: se.shape,
            extent: lengths,
        });
    }
    if !se.slices.is_empty() {
        return Err(SliceProblem::Nested);
    }
    let t = TfTensor::new(Arc::clone(bundle), name.to_vec(), &se);
    match &t.meta().problem {
        Some(p) => Err(SliceProblem::Entry(p.clone())),
        None => Ok(Arc::new(t)),
    }
}

fn resolve_extent(
    slice: &crate::proto::TensorSliceProto,
    shape: &[u64],
) -> Result<Vec<(u64, u64)>, SliceProblem> {
    if slice.extent.len() != shape.len() {
        return Err(SliceProblem::Rank {
            slice: slice.extent.len(),
            tensor: shape.len(),
        });
    }
    slice
        .extent
        .iter()
        .zip(shape)
        .map(|(e, &dim)| match e.length {
            None => Ok((0, dim)),
            Some(len) => {
                if e.start < 0 || len <= 0 {
                    return Err(SliceProblem::BadExtent {
                        start: e.start,
                        length: len,
                    });
                }
                let (s, l) = (e.start as u64, len as u64);
                match s.checked_add(l) {
                    Some(end) if end <= dim => Ok((s, l)),
                    _ => Err(SliceProblem::PastDimension {
                        start: s,
                        length: l,
                        dim,
                    }),
                }
            }
        })
        .collect()
}
