//! Partitioned variables (§7): a full entry with `slices`, reassembled on demand.
//!
//! A read of full-tensor elements `first..first+n` is cut into runs that are contiguous both
//! in the full tensor and in one slice, so only slices intersecting the range are touched and
//! nothing is materialised beyond the caller's buffer. Coverage (gaps, overlaps, extents out
//! of bounds, missing or mismatched slice entries) is checked when the tensor is built and
//! reported as its `problem`.

use std::sync::Arc;

use super::entry::{parse_entry, Entry};
use super::tensor::TfTensor;
use super::Bundle;
use crate::model::{ModelError, PartitionMeta, SourceFormat, Tensor, TensorMeta};
use crate::tf::ordered_code::slice_key;

struct Slice {
    /// `(start, length)` per dimension, lengths resolved against the full shape.
    extent: Vec<(u64, u64)>,
    tensor: Option<Arc<TfTensor>>,
    /// Last dimension this slice does not cover entirely (`None`: covers the whole tensor).
    last_partial: Option<usize>,
}

pub(crate) struct PartitionedTensor {
    meta: TensorMeta,
    /// The checkpoint's base name, so errors say which checkpoint.
    prefix_name: String,
    slices: Vec<Slice>,
}

impl PartitionedTensor {
    pub(crate) fn new(bundle: Arc<Bundle>, name: Vec<u8>, entry: &Entry) -> PartitionedTensor {
        let shape = entry.shape.clone();
        let mut problems: Vec<String> = entry.problem.iter().cloned().collect();
        let mut slices = Vec::with_capacity(entry.slices.len());
        let mut parts = Vec::with_capacity(entry.slices.len());
        for (i, proto) in entry.slices.iter().enumerate() {
            let extent = match resolve_extent(proto, &shape) {
                Ok(e) => e,
                Err(m) => {
                    problems.push(format!("slice {i}: {m}"));
                    Vec::new()
                }
            };
            let key = slice_key(&name, proto);
            let mut tensor = None;
            let mut part = PartitionMeta {
                extent: extent.clone(),
                file: String::new(),
                offset: 0,
                length: 0,
                part_id: None,
                extra: Default::default(),
            };
            match bundle.table.get(&key) {
                Err(e) => problems.push(format!("slice {i}: {e}")),
                Ok(None) => problems.push(format!("slice {i}: its entry is missing")),
                Ok(Some(value)) => {
                    let se = parse_entry(&value, bundle.num_shards);
                    let lengths: Vec<u64> = extent.iter().map(|e| e.1).collect();
                    if se.dtype != entry.dtype {
                        problems.push(format!(
                            "slice {i}: dtype {} differs from the full entry's {}",
                            se.dtype.name(),
                            entry.dtype.name()
                        ));
                    } else if !extent.is_empty() && se.shape != lengths {
                        problems.push(format!(
                            "slice {i}: shape {:?} differs from its extent {lengths:?}",
                            se.shape
                        ));
                    } else if !se.slices.is_empty() {
                        problems.push(format!("slice {i}: the slice entry is partitioned itself"));
                    } else {
                        if let Some(loc) = se.loc {
                            part.file = bundle.shard_name(loc.shard);
                            part.offset = loc.offset;
                            part.length = loc.size;
                        }
                        let t = TfTensor::new(Arc::clone(&bundle), name.clone(), &se);
                        if let Some(p) = &t.meta().problem {
                            problems.push(format!("slice {i}: {p}"));
                        }
                        tensor = Some(Arc::new(t));
                    }
                }
            }
            let last_partial = extent
                .iter()
                .zip(&shape)
                .rposition(|(&(_, len), &dim)| len != dim);
            slices.push(Slice {
                extent,
                tensor,
                last_partial,
            });
            parts.push(part);
        }
        if problems.is_empty() {
            if let Err(m) = check_coverage(&slices, &shape) {
                problems.push(m);
            }
        }
        let meta = TensorMeta {
            name,
            dtype: entry.dtype,
            shape,
            format: SourceFormat::TfCheckpoint,
            partitions: parts,
            sparse: false,
            extra: Default::default(),
            problem: (!problems.is_empty()).then(|| problems.join("; ")),
            mtime: bundle.mtime,
        };
        PartitionedTensor {
            meta,
            prefix_name: bundle.prefix_name.clone(),
            slices,
        }
    }

    fn fail(&self, msg: impl std::fmt::Display) -> ModelError {
        ModelError::Corrupt(format!(
            "{}: partitioned tensor {}: {msg}",
            self.prefix_name,
            String::from_utf8_lossy(&self.meta.name)
        ))
    }

    /// Calls `f(slice, first_in_slice, run)` for consecutive runs covering `first..first+n`.
    fn for_each_run(
        &self,
        first: u64,
        n: u64,
        f: &mut dyn FnMut(&TfTensor, u64, u64) -> Result<(), ModelError>,
    ) -> Result<(), ModelError> {
        if let Some(p) = &self.meta.problem {
            return Err(self.fail(p));
        }
        let shape = &self.meta.shape;
        let total = self.meta.num_elements().unwrap_or(0);
        let end = first
            .checked_add(n)
            .filter(|&e| e <= total)
            .ok_or_else(|| self.fail(format!("elements {first}..+{n} out of range ({total})")))?;
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
                .ok_or_else(|| self.fail(format!("element {pos} is in no slice")))?;
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
                .ok_or_else(|| self.fail("slice missing"))?;
            f(tensor, in_slice, run)?;
            pos += run;
        }
        Ok(())
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
    slice: &crate::tf::proto::TensorSliceProto,
    shape: &[u64],
) -> Result<Vec<(u64, u64)>, String> {
    if slice.extent.len() != shape.len() {
        return Err(format!(
            "rank {} differs from the tensor's rank {}",
            slice.extent.len(),
            shape.len()
        ));
    }
    slice
        .extent
        .iter()
        .zip(shape)
        .map(|(e, &dim)| match e.length {
            None => Ok((0, dim)),
            Some(len) => {
                if e.start < 0 || len <= 0 {
                    return Err(format!("bad extent start {} length {len}", e.start));
                }
                let (s, l) = (e.start as u64, len as u64);
                match s.checked_add(l) {
                    Some(end) if end <= dim => Ok((s, l)),
                    _ => Err(format!("extent {s},{l} exceeds dimension {dim}")),
                }
            }
        })
        .collect()
}

/// Slices must be pairwise disjoint and together cover every element.
fn check_coverage(slices: &[Slice], shape: &[u64]) -> Result<(), String> {
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
                return Err(format!("slices {} and {} overlap", a.min(b), a.max(b)));
            }
        }
    }
    if covered != total {
        return Err(format!(
            "slices cover {covered} of {total} elements (gaps): does not have sufficient slices"
        ));
    }
    Ok(())
}

impl Tensor for PartitionedTensor {
    fn meta(&self) -> &TensorMeta {
        &self.meta
    }

    fn read_elements(&self, first: u64, out: &mut [u8]) -> Result<(), ModelError> {
        let elem = self.meta.dtype.elem_size().ok_or_else(|| {
            ModelError::Unsupported(format!(
                "{} elements have no fixed size",
                self.meta.dtype.name()
            ))
        })?;
        if out.len() % elem != 0 {
            return Err(ModelError::Unsupported(
                "buffer is not a whole number of elements".into(),
            ));
        }
        let n = (out.len() / elem) as u64;
        let mut at = 0usize;
        self.for_each_run(first, n, &mut |t, start, run| {
            let len = run as usize * elem;
            t.read_elements(start, &mut out[at..at + len])?;
            at += len;
            Ok(())
        })
    }

    fn for_each_string(
        &self,
        first: u64,
        count: u64,
        f: &mut dyn FnMut(&[u8]),
    ) -> Result<(), ModelError> {
        self.for_each_run(first, count, &mut |t, start, run| {
            t.for_each_string(start, run, &mut *f)
        })
    }

    /// Index file identity + key + every slice's location identity.
    fn cache_identity(&self) -> Option<String> {
        if self.meta.problem.is_some() {
            return None;
        }
        let first = self.slices.first()?.tensor.as_ref()?;
        let mut id = format!(
            "tfp\0{}\0{}",
            first.index_identity()?,
            self.meta.name.escape_ascii()
        );
        for s in &self.slices {
            id.push('\0');
            id.push_str(&s.tensor.as_ref()?.location_identity()?);
        }
        Some(id)
    }

    fn partition(&self, i: usize) -> Result<Arc<dyn Tensor>, ModelError> {
        let slice = self
            .slices
            .get(i)
            .ok_or_else(|| ModelError::NotFound(format!("partition {i}")))?;
        match &slice.tensor {
            Some(t) => Ok(Arc::clone(t) as Arc<dyn Tensor>),
            None => Err(self.fail(format!("partition {i} has no readable entry"))),
        }
    }
}
