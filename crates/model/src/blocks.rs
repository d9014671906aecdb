//! A tensor made of blocks: TensorFlow's partitioned variables (each slice an entry of the
//! bundle), PyTorch DCP's sharded tensors (each chunk a `torch.save` archive in a `.distcp`
//! file). Each block is a tensor of its own covering a box of the whole (`(start, length)` per
//! dimension); the blocks are checked to tile the whole once, when it is built, and a read is
//! served from the blocks it touches.
//!
//! A read of elements `first..first+n` is cut into runs that are contiguous both in the whole
//! tensor and in one block, so only blocks intersecting the range are touched and nothing is
//! materialised beyond the caller's buffer. Coverage (gaps, overlaps, extents out of bounds,
//! missing blocks) is reported as the tensor's `problem`.
//!
//! Invariant: with no problem, the blocks' extents are disjoint, inside the shape, and their
//! volumes sum to the tensor's element count, so every element is in exactly one block.

use std::sync::Arc;

use crate::source::ReadCtx;
use crate::{
    debug_check, EachString, ModelError, ModelResult, PartitionMeta, RequestError, Strings, Tensor,
    TensorMeta,
};

struct Slice {
    /// `(start, length)` per dimension, lengths resolved against the full shape.
    extent: Vec<(u64, u64)>,
    tensor: Option<Arc<dyn Tensor>>,
    /// Last dimension this slice does not cover entirely (`None`: covers the whole tensor).
    last_partial: Option<usize>,
}

/// One block as a reader found it: its extent in the whole (or why it has none), its tensor
/// (or why there is none), and where it is stored (for the `.json`).
pub struct Block {
    pub extent: Result<Vec<(u64, u64)>, String>,
    pub tensor: Result<Arc<dyn Tensor>, String>,
    pub part: PartitionMeta,
}

/// A tensor assembled from `Block`s (`Blocks::assemble`).
pub struct Blocks {
    meta: TensorMeta,
    /// The source's name (a checkpoint's), so errors say which.
    source: String,
    slices: Vec<Slice>,
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

impl Blocks {
    /// The tensor `meta` (name, dtype, full shape; partitions are filled here) made of
    /// `parts`, from the source `source`; bad extents, missing blocks, gaps and overlaps
    /// become its problem.
    pub fn assemble(mut meta: TensorMeta, source: String, parts: Vec<Block>) -> Blocks {
        let shape = meta.shape.clone();
        let mut problems: Vec<String> = meta.problem.iter().cloned().collect();
        let mut slices = Vec::with_capacity(parts.len());
        for (i, p) in parts.into_iter().enumerate() {
            let extent = p.extent.unwrap_or_else(|e| {
                problems.push(format!("slice {i}: {e}"));
                Vec::new()
            });
            let fits = extent.len() == shape.len()
                && extent
                    .iter()
                    .zip(&shape)
                    .all(|(&(s, l), &d)| s.checked_add(l).is_some_and(|e| e <= d));
            if !fits && problems.is_empty() {
                problems.push(format!(
                    "slice {i}: extent {extent:?} is not inside {shape:?}"
                ));
            }
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
        Blocks {
            meta,
            source,
            slices,
        }
    }

    fn fail(&self, fault: PartitionedFault) -> ModelError {
        ModelError::data(
            format!(
                "{}: partitioned tensor {}",
                self.source,
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

/// Row-major multi-index of flat position `pos`.
fn unravel(mut pos: u64, shape: &[u64], out: &mut [u64]) {
    for d in (0..shape.len()).rev() {
        let dim = shape[d].max(1);
        out[d] = pos % dim;
        pos /= dim;
    }
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
    // Pairs compared at most (a damaged or hostile source's many boxes overlapping in
    // dimension 0 would take quadratic time): past it only the volumes are checked, and an
    // overlap then shows as a gap, which reads report (`Uncovered`).
    let mut budget: u64 = 1 << 26;
    for (a_pos, &a) in order.iter().enumerate() {
        let vol = slices[a]
            .extent
            .iter()
            .try_fold(1u64, |v, e| v.checked_mul(e.1))
            .unwrap_or(u64::MAX);
        covered = covered.saturating_add(vol);
        for &b in &order[a_pos + 1..] {
            if start0(b) >= end0(a) || budget == 0 {
                break;
            }
            budget -= 1;
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

impl Tensor for Blocks {
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
        let mut id = format!("blocks\0{}", self.meta.name.escape_ascii());
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

    crate::capabilities!(as_strings: Strings);
}

impl Strings for Blocks {
    fn for_each_string(&self, ctx: &ReadCtx, first: u64, count: u64, f: EachString) -> ModelResult {
        self.for_each_run(first, count, &mut |t, start, run| {
            t.for_each_string(ctx, start, run, &mut *f)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::in_place::InPlace;
    use crate::source::MemSource;
    use crate::DType;

    /// `n` one-element blocks along dimension 1 of a `[1, n]` uint8 tensor, block `i` at
    /// column `at(i)` holding the byte `i`.
    fn row(n: u64, at: impl Fn(u64) -> u64) -> Blocks {
        let parts = (0..n)
            .map(|i| {
                let meta = TensorMeta::new(b"b".to_vec(), DType::U8, vec![1, 1], "test");
                let file = Arc::new(MemSource::new("m", vec![i as u8]));
                Block {
                    extent: Ok(vec![(0, 1), (at(i), 1)]),
                    tensor: Ok(Arc::new(InPlace {
                        meta,
                        file,
                        begin: 0,
                        in_place: false,
                        identity: None,
                    })),
                    part: PartitionMeta {
                        extent: Vec::new(),
                        file: "m".into(),
                        offset: 0,
                        length: 1,
                        part_id: None,
                        extra: serde_json::Map::new(),
                    },
                }
            })
            .collect();
        let meta = TensorMeta::new(b"t".to_vec(), DType::U8, vec![1, n], "test");
        Blocks::assemble(meta, "src".into(), parts)
    }

    #[test]
    fn blocks_tile_and_read() {
        let t = row(300, |i| 299 - i);
        assert_eq!(t.meta().problem, None);
        let mut out = vec![0u8; 300];
        t.fill_elements(ReadCtx::none(), 0, &mut out).unwrap();
        assert_eq!(out, (0..300).rev().map(|i| i as u8).collect::<Vec<_>>());
        // The last block where the one before it is: an overlap, and a gap.
        let t = row(300, |i| if i == 299 { 298 } else { i });
        assert!(t.meta().problem.as_deref().unwrap().contains("overlap"));
    }

    /// Many blocks all overlapping in dimension 0 are not compared pair by pair without end:
    /// past the budget an overlap goes unseen at assembly, and the gap it leaves fails the
    /// read that reaches it.
    #[test]
    fn a_hostile_number_of_blocks_is_bounded() {
        let n = 12_000;
        // The last block where the one before it is: the pair compared last of ~7 * 10^7.
        let t = row(n, |i| if i == n - 1 { n - 2 } else { i });
        assert_eq!(t.meta().problem, None, "compared past the budget");
        let mut out = vec![0u8; n as usize];
        let err = t.fill_elements(ReadCtx::none(), 0, &mut out).unwrap_err();
        assert!(err.to_string().contains("in no slice"), "{err}");
    }
}
