//! Partitioned variables (§7): a full entry with `slices`, reassembled on demand.
//!
//! A read of full-tensor elements `first..first+n` is cut into runs that are contiguous both
//! in the full tensor and in one slice, so only slices intersecting the range are touched and
//! nothing is materialised beyond the caller's buffer. Coverage (gaps, overlaps, extents out
//! of bounds, missing or mismatched slice entries) is checked when the tensor is built and
//! reported as its `problem`.

use std::sync::Arc;

use super::entry::{parse_entry, Entry};
use super::shard_file_name;
use super::tensor::TfTensor;
use super::Bundle;
use crate::codec::table::TableError;
use crate::model::{
    debug_check, EachString, ModelError, ModelResult, PartitionMeta, RequestError, Strings, Tensor,
    TensorMeta,
};
use crate::ordered_code::slice_key;
use crate::source::ReadCtx;

struct Slice {
    /// `(start, length)` per dimension, lengths resolved against the full shape.
    extent: Vec<(u64, u64)>,
    tensor: Option<Arc<dyn Tensor>>,
    /// Last dimension this slice does not cover entirely (`None`: covers the whole tensor).
    last_partial: Option<usize>,
}

pub(crate) struct PartitionedTensor {
    meta: TensorMeta,
    /// The checkpoint's base name, so errors say which checkpoint.
    prefix_name: String,
    slices: Vec<Slice>,
}

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

/// Why the slices together do not make the tensor.
#[derive(Debug, thiserror::Error)]
enum CoverageProblem {
    #[error("slices {0} and {1} overlap")]
    Overlap(usize, usize),
    #[error("slices cover {covered} of {total} elements (gaps): does not have sufficient slices")]
    Gaps { covered: u64, total: u64 },
}

/// Why a read of a partitioned tensor failed (beyond its slices' own errors).
#[derive(Debug, thiserror::Error)]
enum PartitionedFault {
    #[error("{0}")]
    Known(String),
    #[error("element {0} is in no slice")]
    Uncovered(u64),
    #[error("partition {0} has no readable entry")]
    NoEntry(usize),
}

/// Called with (slice, first element in the slice, run length) for each run of a read.
type RunFn<'a> = dyn FnMut(&dyn Tensor, u64, u64) -> Result<(), ModelError> + 'a;

/// One slice as a reader found it: its extent, its tensor (or why there is none), and where
/// it is stored (for the `.json`).
pub(crate) struct SlicePart {
    pub(crate) proto: crate::proto::TensorSliceProto,
    pub(crate) tensor: Result<Arc<dyn Tensor>, String>,
    pub(crate) part: PartitionMeta,
}

impl PartitionedTensor {
    pub(crate) fn new(bundle: Arc<Bundle>, name: Vec<u8>, entry: &Entry) -> PartitionedTensor {
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
        PartitionedTensor::assemble(meta, bundle.prefix_name.clone(), parts)
    }

    /// The tensor `meta` (name, dtype, full shape; partitions are filled here) made of `parts`;
    /// bad extents, missing slices, gaps and overlaps become its problem.
    pub(crate) fn assemble(
        mut meta: TensorMeta,
        prefix_name: String,
        parts: Vec<SlicePart>,
    ) -> PartitionedTensor {
        let shape = meta.shape.clone();
        let mut problems: Vec<String> = meta.problem.iter().cloned().collect();
        let mut slices = Vec::with_capacity(parts.len());
        for (i, p) in parts.into_iter().enumerate() {
            let extent = resolve_extent(&p.proto, &shape).unwrap_or_else(|e| {
                problems.push(format!("slice {i}: {e}"));
                Vec::new()
            });
            let tensor = match p.tensor {
                Ok(t) => Some(t),
                Err(e) => {
                    if !extent.is_empty() || shape.is_empty() {
                        problems.push(format!("slice {i}: {e}"));
                    }
                    None
                }
            };
            let last_partial = extent
                .iter()
                .zip(&shape)
                .rposition(|(&(_, len), &dim)| len != dim);
            let mut part = p.part;
            part.extent = extent.clone();
            meta.partitions.push(part);
            slices.push(Slice {
                extent,
                tensor,
                last_partial,
            });
        }
        if problems.is_empty() {
            if let Err(p) = check_coverage(&slices, &shape) {
                problems.push(p.to_string());
            }
        }
        meta.problem = (!problems.is_empty()).then(|| problems.join("; "));
        PartitionedTensor {
            meta,
            prefix_name,
            slices,
        }
    }

    fn fail(&self, fault: PartitionedFault) -> ModelError {
        ModelError::data(
            format!(
                "{}: partitioned tensor {}",
                self.prefix_name,
                String::from_utf8_lossy(&self.meta.name)
            ),
            fault,
        )
    }

    /// Calls `f(slice, first_in_slice, run)` for consecutive runs covering `first..first+n`.
    fn for_each_run(&self, first: u64, n: u64, f: &mut RunFn<'_>) -> Result<(), ModelError> {
        if let Some(p) = &self.meta.problem {
            return Err(self.fail(PartitionedFault::Known(p.clone())));
        }
        let shape = &self.meta.shape;
        let total = self.meta.num_elements().unwrap_or(0);
        let end = first
            .checked_add(n)
            .filter(|&e| e <= total)
            .ok_or(RequestError::OutOfRange {
                first,
                count: n,
                total,
            })?;
        let mut index = vec![0u64; shape.len()];
        let mut pos = first;
        while pos < end {
            unravel(pos, shape, &mut index);
            let slice = self
                .slices
                .iter()
                .find(|s| {
                    s.extent
                        .iter()
                        .zip(&index)
                        .all(|(&(st, len), &i)| i >= st && i - st < len)
                })
                .ok_or_else(|| self.fail(PartitionedFault::Uncovered(pos)))?;
            let run = match slice.last_partial {
                None => total - pos,
                Some(k) => {
                    let inner: u64 = shape[k + 1..].iter().product();
                    let (st, len) = slice.extent[k];
                    (st + len - index[k]) * inner - pos % inner
                }
            }
            .min(end - pos);
            // Row-major flat index inside the slice.
            let mut in_slice = 0u64;
            for (&(st, len), &i) in slice.extent.iter().zip(&index) {
                in_slice = in_slice * len + (i - st);
            }
            let tensor = slice
                .tensor
                .as_deref()
                .ok_or_else(|| self.fail(PartitionedFault::Uncovered(pos)))?;
            f(tensor, in_slice, run)?;
            pos += run;
        }
        Ok(())
    }
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

/// Row-major multi-index of flat position `pos`.
fn unravel(mut pos: u64, shape: &[u64], out: &mut [u64]) {
    for d in (0..shape.len()).rev() {
        let dim = shape[d].max(1);
        out[d] = pos % dim;
        pos /= dim;
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

/// Slices must be pairwise disjoint and together cover every element.
fn check_coverage(slices: &[Slice], shape: &[u64]) -> Result<(), CoverageProblem> {
    let total = shape
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .unwrap_or(0);
    // Sweep on dimension 0 so that only boxes overlapping in it are compared.
    let mut order: Vec<usize> = (0..slices.len()).collect();
    let start0 = |i: usize| slices[i].extent.first().map_or(0, |e| e.0);
    let end0 = |i: usize| slices[i].extent.first().map_or(1, |e| e.0 + e.1);
    order.sort_by_key(|&i| start0(i));
    let mut covered: u64 = 0;
    for (a_pos, &a) in order.iter().enumerate() {
        let vol = slices[a].extent.iter().map(|e| e.1).product::<u64>();
        covered = covered.saturating_add(vol);
        for &b in &order[a_pos + 1..] {
            if start0(b) >= end0(a) {
                break;
            }
            let overlap = slices[a]
                .extent
                .iter()
                .zip(&slices[b].extent)
                .all(|(x, y)| x.0 < y.0 + y.1 && y.0 < x.0 + x.1);
            if overlap {
                return Err(CoverageProblem::Overlap(a.min(b), a.max(b)));
            }
        }
    }
    if covered != total {
        return Err(CoverageProblem::Gaps { covered, total });
    }
    Ok(())
}

impl Tensor for PartitionedTensor {
    fn meta(&self) -> &TensorMeta {
        &self.meta
    }

    fn fill_elements(&self, ctx: &ReadCtx, first: u64, out: &mut [u8]) -> Result<(), ModelError> {
        debug_check(&self.meta, first, out.len());
        let elem = self.meta.dtype.elem_size().unwrap_or(1);
        let n = (out.len() / elem) as u64;
        let mut at = 0usize;
        self.for_each_run(first, n, &mut |t, start, run| {
            let len = run as usize * elem;
            t.read_elements(ctx, start, &mut out[at..at + len])?;
            at += len;
            Ok(())
        })
    }

    /// The key + every slice's own identity (index file, key, location).
    fn cache_identity(&self) -> Option<String> {
        if self.meta.problem.is_some() {
            return None;
        }
        let mut id = format!("tfp\0{}", self.meta.name.escape_ascii());
        for s in &self.slices {
            id.push('\0');
            id.push_str(&s.tensor.as_ref()?.cache_identity()?);
        }
        Some(id)
    }

    fn partition(&self, i: usize) -> Result<Arc<dyn Tensor>, ModelError> {
        let slice = self
            .slices
            .get(i)
            .ok_or_else(|| ModelError::NotFound(format!("partition {i}")))?;
        match &slice.tensor {
            Some(t) => Ok(Arc::clone(t)),
            None => Err(self.fail(PartitionedFault::NoEntry(i))),
        }
    }

    crate::model::capabilities!(as_strings: Strings);
}

impl Strings for PartitionedTensor {
    fn for_each_string(&self, ctx: &ReadCtx, first: u64, count: u64, f: EachString) -> ModelResult {
        self.for_each_run(first, count, &mut |t, start, run| {
            t.for_each_string(ctx, start, run, &mut *f)
        })
    }
}
