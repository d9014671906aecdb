//! Whole-model views for other tools (SPEC §7): hidden entries at a model root whose bytes are
//! another system's own format, produced from the mount's tensors on demand — directories
//! (`.tf/`, `.angel/`) and single files (`.safetensors`, `.npz`). A view is built (metadata
//! only) on its first lookup; a directory inside it lists its entries on first use (an
//! `.angel/` tensor folder decides its partitions then).
//!
//! ```
//! use std::sync::Arc;
//! use modelfs_layout::{cache::ChunkCache, FileContent, LayoutCtx};
//! use modelfs_model::testing::{key, MemModel, MemTensor};
//! let mut m = MemModel::default();
//! m.add(key("w"), MemTensor::f32(&[2], &[1.0, 2.0]).named(b"w"));
//! let ctx = Arc::new(LayoutCtx::new(Vec::new(), ChunkCache::new(1 << 20)));
//! assert_eq!(modelfs_views::NAMES[2], ".safetensors");
//! let view = modelfs_views::build(".safetensors", &m, &[], &ctx).unwrap();
//! let modelfs_views::ViewEntry::File(file) = &view.root else { panic!("a file") };
//! // The header's length (8 bytes), its JSON, then the 8 bytes of `w`: an exact size,
//! // known before any byte is produced.
//! assert!(file.size().unwrap() > 16);
//! ```

use std::sync::Arc;

use modelfs_layout::{FileContent, LayoutCtx, LayoutError};
use modelfs_model::{own_component, DirEntry, Model, ModelError, Role, Tensor};

pub(crate) mod angel;
mod angel_meta;
mod angel_parts;
pub mod csr;
pub(crate) mod npz;
pub mod safetensors;
pub mod tf;

/// The page a reader's failure spreads over: a read through the page cache (and every `mmap`
/// fault) fails whole pages, so where a format allows gaps, no two tensors' bytes share one
/// and a bad tensor fails only itself.
pub(crate) const PAGE: u64 = 4096;

/// `at` rounded up to a page; `None` on overflow.
pub(crate) fn page_up(at: u64) -> Option<u64> {
    Some(at.checked_add(PAGE - 1)? / PAGE * PAGE)
}

/// The pages of bytes `start..end` of a file that hold no other bytes: `(low, high)`, the
/// end of its first page when that page is shared, the start of its last when that one is;
/// `low >= high` when every page it has is shared.
pub(crate) fn own_pages(start: u64, end: u64) -> (u64, u64) {
    let low = match start % PAGE {
        0 => start,
        _ => page_up(start).unwrap_or(u64::MAX),
    };
    let high = match end % PAGE {
        0 => end,
        _ => end / PAGE * PAGE,
    };
    (low, high)
}

/// A failure that reading again will not mend (bad data, not a passing fault).
pub(crate) fn lasting(e: &LayoutError) -> bool {
    matches!(e, LayoutError::Model(_)) && !modelfs_io::source::is_transient(e)
}

/// Where each tensor's bytes are in a view file of tensors back to back, `(start, end)`,
/// ascending: for a read that fails for one tensor and covers others too (`Runs::read`).
pub(crate) struct Runs(pub(crate) Vec<(u64, u64)>);

impl Runs {
    /// Bytes `offset..offset + len` of `data`. A read that fails for good is done again
    /// tensor by tensor when it covers more than one tensor's bytes (or bytes between):
    /// `failing(i, a, b, e)` answers for bytes `a..b` of tensor `i`, whose read failed with
    /// `e`, or fails the read. A read within one tensor fails as it did.
    pub(crate) fn read(
        &self,
        data: &modelfs_layout::concat::Concat,
        offset: u64,
        len: usize,
        req: &dyn modelfs_layout::Requester,
        failing: impl Fn(usize, u64, u64, LayoutError) -> Result<bytes::Bytes, LayoutError>,
    ) -> Result<bytes::Bytes, LayoutError> {
        let e = match data.read(offset, len, req) {
            Err(e) if lasting(&e) => e,
            r => return r,
        };
        let end = offset
            .saturating_add(len as u64)
            .min(data.known_size().unwrap_or(0));
        let first = self.0.partition_point(|r| r.1 <= offset);
        if end <= offset
            || self
                .0
                .get(first)
                .is_some_and(|r| r.0 <= offset && end <= r.1)
        {
            return Err(e);
        }
        let mut out = Vec::with_capacity(end.saturating_sub(offset) as usize);
        let mut at = offset;
        for (i, &(start, stop)) in self.0.iter().enumerate().skip(first) {
            if start >= end {
                break;
            }
            if start > at {
                out.extend_from_slice(&data.read(at, (start - at) as usize, req)?);
            }
            let (a, b) = (start.max(at), stop.min(end));
            match data.read(a, (b - a) as usize, req) {
                Ok(got) => out.extend_from_slice(&got),
                Err(e) if lasting(&e) => out.extend_from_slice(&failing(i, a, b, e)?),
                Err(e) => return Err(e),
            }
            at = b;
        }
        if at < end {
            out.extend_from_slice(&data.read(at, (end - at) as usize, req)?);
        }
        debug_assert_eq!(out.len() as u64, end - offset);
        Ok(out.into())
    }
}

/// Zero bytes between two parts of a view (fewer than a page).
pub(crate) struct Gap(pub(crate) u64);

impl FileContent for Gap {
    fn known_size(&self) -> Option<u64> {
        Some(self.0)
    }
    fn read(
        &self,
        offset: u64,
        len: usize,
        _req: &dyn modelfs_layout::Requester,
    ) -> Result<bytes::Bytes, LayoutError> {
        static ZEROS: [u8; PAGE as usize] = [0; PAGE as usize];
        debug_assert!(self.0 <= PAGE);
        let left = self.0.saturating_sub(offset).min(PAGE) as usize;
        Ok(bytes::Bytes::from_static(&ZEROS[..left.min(len)]))
    }
}

/// One view: the hidden entry's content (a directory, or one file).
pub struct View {
    pub root: ViewEntry,
}

impl View {
    fn dir(root: impl ViewDir + 'static) -> View {
        View {
            root: ViewEntry::Dir(Arc::new(root)),
        }
    }

    fn file(root: impl FileContent + 'static) -> View {
        View {
            root: ViewEntry::File(Arc::new(root)),
        }
    }

    /// The entries of a directory view (tests).
    #[cfg(test)]
    pub(crate) fn entries(&self) -> Entries {
        match &self.root {
            ViewEntry::Dir(d) => d.entries().unwrap(),
            ViewEntry::File(_) => panic!("a file view has no entries"),
        }
    }
}

/// An entry of a view directory.
#[derive(Clone)]
pub enum ViewEntry {
    File(Arc<dyn FileContent>),
    Dir(Arc<dyn ViewDir>),
}

/// Entries by raw name (the file system escapes them like key components).
pub(crate) type Entries = Arc<[(Vec<u8>, ViewEntry)]>;

/// A directory of a view. Invariant: `entries` gives the same list every time it succeeds.
pub trait ViewDir: Send + Sync {
    fn entries(&self) -> Result<Entries, LayoutError>;
}

/// A directory whose entries are known when it is made.
pub(crate) struct FixedDir(pub(crate) Entries);

impl ViewDir for FixedDir {
    fn entries(&self) -> Result<Entries, LayoutError> {
        Ok(self.0.clone())
    }
}

/// The hidden entries at a model root and how to build each.
pub const NAMES: [&str; 4] = [tf::DIR, angel::DIR, safetensors::FILE, npz::FILE];

/// Whether view `NAMES[i]` is a directory (known before it is built: a lookup builds nothing).
pub fn is_dir(i: usize) -> bool {
    i < 2
}

/// Builds the view named `name` (one of `NAMES`) of the model at directory `root` of `model`.
pub fn build(
    name: &str,
    model: &dyn Model,
    root: &[Vec<u8>],
    ctx: &Arc<LayoutCtx>,
) -> Result<View, ModelError> {
    let mut tensors = tensors(model, root)?;
    tensors.extend(model.hidden_tensors(root));
    tensors.sort_by(|a, b| a.meta().name.cmp(&b.meta().name));
    tensors.dedup_by(|a, b| a.meta().name == b.meta().name);
    // A model's variables alone, as `tf.train.list_variables` lists them; a graph's constants
    // only when there is nothing else (a frozen graph, a `.meta` alone).
    let graph = |t: &Arc<dyn Tensor>| t.meta().role == Role::Constant;
    if !tensors.iter().all(graph) {
        tensors.retain(|t| !graph(t));
    }
    match name {
        tf::DIR => tf::view(tensors, ctx),
        angel::DIR => angel::view(tensors, ctx),
        safetensors::FILE => safetensors::view(tensors, ctx),
        npz::FILE => npz::view(tensors, ctx),
        _ => Err(ModelError::NotFound(name.to_string())),
    }
}

/// Every tensor under `root` with its original key (metadata only), first of a key wins.
fn tensors(model: &dyn Model, root: &[Vec<u8>]) -> Result<Vec<Arc<dyn Tensor>>, ModelError> {
    let mut out = Vec::new();
    let mut stack: Vec<Vec<Vec<u8>>> = vec![root.to_vec()];
    while let Some(dir) = stack.pop() {
        let entries = match model.list_dir(&dir) {
            Ok(e) => e,
            Err(e) if dir == root => return Err(e),
            Err(e) => {
                log::warn!("view: a directory cannot be listed: {e}");
                continue;
            }
        };
        for e in entries {
            let mut p = dir.clone();
            match e {
                DirEntry::Dir(n) => {
                    p.push(n);
                    stack.push(p);
                }
                DirEntry::Reserved(n) => {
                    p.push(own_component(&n));
                    stack.push(p);
                }
                DirEntry::Tensor(n) => {
                    p.push(n);
                    match model.tensor(&p) {
                        Ok(t) => out.push(t),
                        Err(e) => log::warn!("view: a tensor cannot be opened: {e}"),
                    }
                }
                DirEntry::Symlink { .. } | DirEntry::Document(_) | DirEntry::Alias { .. } => {}
            }
        }
    }
    out.sort_by(|a, b| a.meta().name.cmp(&b.meta().name));
    out.dedup_by(|a, b| a.meta().name == b.meta().name);
    Ok(out)
}
