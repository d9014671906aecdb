//! `.tf/`: every tensor of the mount as one TensorFlow V2 checkpoint (formats/tf-checkpoint.md
//! §3–§5): `checkpoint`, `model.index`, `model.data-00000-of-00001`.
//!
//! The data file is every tensor's raw little-endian elements, in key order, back to back;
//! the index is an SSTable of the bundle header and one `BundleEntryProto` per tensor. Sizes
//! are exact from metadata: an entry's CRC is a fixed32, so the index has the same length
//! before and after its checksums are known. The checksums are known when the index is first
//! read: a TF source's own (`Tensor::stored_crc32c`, the same bytes), else remembered from an
//! earlier mount (the persistent store under `cache_dir`, keyed by the tensor's identity), else
//! computed from the tensor's bytes on all cores and remembered.
//!
//! Sparse matrices are written dense (within `max_dense`); string tensors are encoded when the
//! view is built (their length needs every string's). Left out (logged, and absent from the
//! view): variant and opaque tensors, sparse ones beyond `max_dense`, tensors whose metadata
//! already names a problem, and string tensors that cannot be read.

use std::sync::Arc;

use bytes::Bytes;
use modelfs_layout::concat::ConcatBuilder;
use modelfs_layout::held::{slice_at, Made, Make, Whole};

use super::{FixedDir, View, ViewEntry};
use modelfs_io::codec::table::TableBuilder;
use modelfs_io::codec::{crc32c_extend, mask_crc};
use modelfs_io::source::{ReadAt, ReadCtx, ReadExt};
use modelfs_io::store::{Crc, Store};
use modelfs_layout::binary::{ElemMap, RawElements};
use modelfs_layout::dense::dense_tensor;
use modelfs_layout::{pool, FileContent, LayoutCtx, LayoutError, Requester};
use modelfs_model::{DType, ModelError, StoredRun};
use modelfs_tf::dtype::to_tf;
use modelfs_tf::writer::{encode_strings, entry_proto};

pub(crate) const DIR: &str = ".tf";
const PREFIX: &str = "model";
const DATA: &str = "model.data-00000-of-00001";
/// Index block size TF's `BundleWriter` uses.
const BLOCK_SIZE: usize = 256 << 10;
/// Bytes per read while computing a checksum.
const CRC_CHUNK: usize = 4 << 20;

struct Entry {
    key: Vec<u8>,
    dtype: i32,
    shape: Vec<u64>,
    body: Arc<Body>,
    offset: u64,
    size: u64,
}

/// A tensor's bytes in the data file.
enum Body {
    /// Fixed-width elements, read from the tensor when asked.
    Elements(RawElements),
    /// A string tensor in the bundle's string encoding (§6.1), encoded when the view is built
    /// (its length needs every string's), with its checksum.
    Encoded(Bytes, u32),
}

impl FileContent for Body {
    fn known_size(&self) -> Option<u64> {
        match self {
            Body::Elements(e) => e.size(),
            Body::Encoded(b, _) => Some(b.len() as u64),
        }
    }
    fn read(&self, offset: u64, len: usize, req: &dyn Requester) -> Result<Bytes, LayoutError> {
        match self {
            Body::Elements(e) => e.read(req.ctx(), offset, len),
            Body::Encoded(b, _) => Ok(slice_at(b, offset, len)),
        }
    }
}

struct Layout {
    entries: Vec<Entry>,
    index_size: u64,
}

pub(crate) fn view(
    tensors: Vec<Arc<dyn modelfs_model::Tensor>>,
    ctx: &Arc<LayoutCtx>,
) -> Result<View, ModelError> {
    let mut entries = Vec::new();
    // Each entry's run in a source file, if any, and its tensor.
    let mut runs = Vec::new();
    let mut offset = 0u64;
    for t in tensors {
        let meta = t.meta();
        let name = String::from_utf8_lossy(&meta.name).into_owned();
        let why = match (to_tf(meta.dtype), meta.dtype.elem_size()) {
            _ if meta.problem.is_some() => Some("it has a problem".to_string()),
            (Some(_), None) if meta.dtype == DType::Str => match strings(&*t) {
                Ok(body) => {
                    push(&mut entries, &mut offset, t.meta(), body)?;
                    runs.push((t.stored_run(), t.clone()));
                    continue;
                }
                Err(e) => Some(e.to_string()),
            },
            (None, _) | (_, None) => Some("its dtype has no fixed-size form here".to_string()),
            _ => None,
        };
        // A sparse matrix is written dense, within `max_dense`.
        let dense = match why {
            Some(why) => Err(why),
            None => dense_tensor(&t, ctx.max_dense).map_err(|e| e.to_string()),
        };
        let t = match dense {
            Ok(d) => d,
            Err(why) => {
                log::info!(".tf/: {name} left out: {why}");
                continue;
            }
        };
        let meta = t.meta();
        let map = if meta.dtype == DType::Bool {
            ElemMap::Bool
        } else {
            ElemMap::Same
        };
        let Some(elements) = RawElements::new(t.clone(), map) else {
            continue;
        };
        push(&mut entries, &mut offset, meta, Body::Elements(elements))?;
        runs.push((t.stored_run(), t.clone()));
    }
    let backing = backed(&mut entries, &runs);
    let mut layout = Layout {
        entries,
        index_size: 0,
    };
    layout.index_size = index_bytes(&layout, None).len() as u64;
    let data: Arc<dyn FileContent> = match backing {
        Some(file) => Arc::new(data_in(&layout, file, runs.into_iter().map(|(_, t)| t))?),
        None => {
            // Every tensor's bytes at the offsets the index gives, each from a page of its own.
            let mut data = ConcatBuilder::default();
            for e in &layout.entries {
                let gap = e.offset - data.offset();
                if gap > 0 {
                    data.push(Arc::new(super::Gap(gap)))
                        .map_err(|e| ModelError::data(DIR, e))?;
                }
                debug_assert_eq!(data.offset(), e.offset);
                data.push(e.body.clone())
                    .map_err(|e| ModelError::data(DIR, e))?;
            }
            Arc::new(data.finish())
        }
    };
    let layout = Arc::new(layout);
    let checkpoint =
        format!("model_checkpoint_path: \"{PREFIX}\"\nall_model_checkpoint_paths: \"{PREFIX}\"\n");
    let files: Vec<(Vec<u8>, Arc<dyn FileContent>)> = vec![
        (
            b"checkpoint".to_vec(),
            Arc::new(Whole(checkpoint.into_bytes().into())),
        ),
        (DATA.into(), data),
        (
            format!("{PREFIX}.index").into_bytes(),
            Arc::new(Made::new(Index {
                layout,
                store: ctx.cache.offset_store().cloned(),
            })),
        ),
    ];
    let entries = files
        .into_iter()
        .map(|(n, f)| (n, ViewEntry::File(f)))
        .collect();
    Ok(View::dir(FixedDir(entries)))
}

/// The one local file every entry's bytes are a run of, exactly as the view would write
/// them (`Tensor::stored_run`), the runs apart: then the data file is that file itself, and
/// each entry is moved to its run. `None` (and nothing moved) otherwise.
fn backed(
    entries: &mut [Entry],
    runs: &[(Option<StoredRun>, Arc<dyn modelfs_model::Tensor>)],
) -> Option<Arc<dyn ReadAt>> {
    debug_assert_eq!(entries.len(), runs.len());
    let first = runs.first()?.0.as_ref()?;
    first.file.local_file()?;
    let file = Arc::clone(&first.file);
    let mut order: Vec<usize> = (0..entries.len()).collect();
    order.sort_by_key(|&i| runs[i].0.as_ref().map_or(0, |r| r.offset));
    let mut end = 0u64;
    for &i in &order {
        let run = runs[i].0.as_ref()?;
        let e = &entries[i];
        let run_end = run.offset.checked_add(run.len)?;
        let same_file = std::ptr::addr_eq(Arc::as_ptr(&run.file), Arc::as_ptr(&file));
        if !same_file || run.len != e.size || run.offset < end || run_end > file.size() {
            return None;
        }
        // A string tensor is re-encoded by the view: its run must be those very bytes.
        if let Body::Encoded(b, _) = &*e.body {
            let len = usize::try_from(run.len).ok()?;
            let same = |stored: &[u8]| stored == b.as_ref();
            if !file
                .with_bytes(ReadCtx::none(), run.offset, len, same)
                .ok()?
            {
                return None;
            }
        }
        end = run_end;
    }
    for (e, (run, _)) in entries.iter_mut().zip(runs) {
        e.offset = run.as_ref()?.offset;
    }
    Some(file)
}

/// The data file of a view whose entries all lie in `file` (`backed`): that file's bytes,
/// each entry's run read through its tensor (checked as any read of it is), the bytes
/// between runs as they are.
fn data_in(
    layout: &Layout,
    file: Arc<dyn ReadAt>,
    tensors: impl Iterator<Item = Arc<dyn modelfs_model::Tensor>>,
) -> Result<Passed, ModelError> {
    let mut order: Vec<&Entry> = layout.entries.iter().collect();
    order.sort_by_key(|e| e.offset);
    let mut data = ConcatBuilder::default();
    let too_big = |e| ModelError::data(DIR, e);
    for e in order {
        let gap = e.offset - data.offset();
        data.push(Arc::new(Span::new(&file, data.offset(), gap)))
            .map_err(too_big)?;
        data.push(e.body.clone()).map_err(too_big)?;
    }
    let tail = file.size() - data.offset();
    data.push(Arc::new(Span::new(&file, data.offset(), tail)))
        .map_err(too_big)?;
    let mut runs: Vec<(u64, u64)> = layout
        .entries
        .iter()
        .map(|e| (e.offset, e.offset + e.size))
        .collect();
    runs.sort_unstable();
    Ok(Passed {
        data: data.finish(),
        runs: super::Runs(runs),
        file,
        tensors: tensors.collect(),
        checked: std::sync::OnceLock::new(),
    })
}

/// Bytes of a source file as they are.
struct Span {
    file: Arc<dyn ReadAt>,
    at: u64,
    len: u64,
}

impl Span {
    fn new(file: &Arc<dyn ReadAt>, at: u64, len: u64) -> Span {
        Span {
            file: Arc::clone(file),
            at,
            len,
        }
    }
}

impl FileContent for Span {
    fn known_size(&self) -> Option<u64> {
        Some(self.len)
    }
    fn read(&self, offset: u64, len: usize, req: &dyn Requester) -> Result<Bytes, LayoutError> {
        let left = self.len.saturating_sub(offset);
        let len = usize::try_from(left).map_or(len, |l| l.min(len));
        let got = self.file.read(req.ctx(), self.at + offset, len);
        Ok(got.map_err(ModelError::from)?)
    }
}

/// A data file that is a source file whole (`backed`).
struct Passed {
    data: modelfs_layout::concat::Concat,
    /// Each entry's bytes in the file.
    runs: super::Runs,
    file: Arc<dyn ReadAt>,
    tensors: Vec<Arc<dyn modelfs_model::Tensor>>,
    /// Every tensor passed its check (only success is kept: a failed read may pass later).
    checked: std::sync::OnceLock<()>,
}

impl FileContent for Passed {
    fn known_size(&self) -> Option<u64> {
        self.data.known_size()
    }
    fn size_for(&self, req: &dyn Requester) -> Result<u64, LayoutError> {
        self.data.size_for(req)
    }
    /// A read that fails for one entry and covers others too (the source's own data file,
    /// whose entries share pages, which TensorFlow reads a buffer at a time, neighbours
    /// included) gets the failing entry's bytes as the file holds them: TensorFlow checks
    /// every entry's CRC32C against the index and fails that entry, exactly as on the
    /// source, where failing the whole read would fail its neighbours with it. A read of the
    /// failing entry's bytes alone is EIO.
    fn read(&self, offset: u64, len: usize, req: &dyn Requester) -> Result<Bytes, LayoutError> {
        self.runs.read(&self.data, offset, len, req, |_, a, b, e| {
            log::info!("{DIR}/{DATA}: bytes {a}..{b} of a failing entry served as stored (read with other entries): {e}");
            let len = usize::try_from(b - a).map_err(|_| LayoutError::Overflow("read length"))?;
            Ok(self.file.read(req.ctx(), a, len).map_err(ModelError::from)?)
        })
    }
    /// The source file, once every tensor's checksum is checked (a first read of each does
    /// it, on all cores, and its verdict is kept): the kernel will not ask again.
    fn backing(&self, req: &dyn Requester) -> Option<Arc<dyn ReadAt>> {
        if self.checked.get().is_some() {
            return Some(Arc::clone(&self.file));
        }
        // The widest element (complex128).
        let mut one = [0u8; 16];
        for t in &self.tensors {
            if req.gone() {
                return None;
            }
            let meta = t.meta();
            let Some(width) = meta.dtype.elem_size() else {
                continue; // strings: checked when the view encoded them
            };
            debug_assert!(width <= one.len(), "a {width}-byte element");
            if meta.num_elements() == Some(0) || width > one.len() {
                continue;
            }
            if let Err(e) = t.read_elements(req.ctx(), 0, &mut one[..width]) {
                log::info!(
                    "{DIR}/{DATA}: not passed through: {}: {e}",
                    String::from_utf8_lossy(&meta.name)
                );
                return None;
            }
        }
        let _ = self.checked.set(());
        Some(Arc::clone(&self.file))
    }
}

fn push(
    entries: &mut Vec<Entry>,
    offset: &mut u64,
    meta: &modelfs_model::TensorMeta,
    body: Body,
) -> Result<(), ModelError> {
    let size = body
        .known_size()
        .ok_or_else(|| ModelError::data(DIR, "a tensor's size overflows"))?;
    // Each entry from a page of its own: a bad tensor's failed page is no other's.
    *offset = super::page_up(*offset)
        .ok_or_else(|| ModelError::data(DIR, "the view's data size overflows"))?;
    entries.push(Entry {
        key: meta.name.clone(),
        dtype: to_tf(meta.dtype).unwrap_or(0),
        shape: meta.shape.clone(),
        body: Arc::new(body),
        offset: *offset,
        size,
    });
    *offset = offset
        .checked_add(size)
        .ok_or_else(|| ModelError::data(DIR, "the view's data size overflows"))?;
    Ok(())
}

/// A string tensor's elements, encoded as a bundle stores them.
fn strings(t: &dyn modelfs_model::Tensor) -> Result<Body, ModelError> {
    let n = t.meta().num_elements().unwrap_or(0);
    let mut items: Vec<Vec<u8>> = Vec::new();
    t.for_each_string(ReadCtx::none(), 0, n, &mut |s| items.push(s.to_vec()))?;
    let refs: Vec<&[u8]> = items.iter().map(Vec::as_slice).collect();
    let (data, crc) = encode_strings(&refs, false);
    Ok(Body::Encoded(data.into(), crc))
}

/// The index with `crcs` (zeros while unknown: the length is the same).
fn index_bytes(layout: &Layout, crcs: Option<&[u32]>) -> Vec<u8> {
    let mut t = TableBuilder::new(BLOCK_SIZE, false);
    // BundleHeaderProto: num_shards 1, little-endian, version { producer: 1 }.
    t.add(b"", &[0x08, 0x01, 0x1a, 0x02, 0x08, 0x01]);
    for (i, e) in layout.entries.iter().enumerate() {
        let crc = crcs.map_or(0, |c| c[i]);
        t.add(
            &e.key,
            &entry_proto(e.dtype, &e.shape, 0, e.offset, e.size, crc),
        );
    }
    t.finish()
}

struct Index {
    layout: Arc<Layout>,
    /// Where computed checksums outlive the mount (`cache_dir`), keyed by tensor identity.
    store: Option<Arc<dyn Store>>,
}

/// The store key of the checksum of a tensor's view bytes, when the tensor has a stable
/// identity. Stored as the offsets `[0, crc]` (the store keeps only ascending lists).
fn crc_key(r: &RawElements) -> Option<String> {
    let id = r.tensor.cache_identity()?;
    Some(format!("{id}\0tf-view-crc:{:?}:v1", r.map))
}

/// The checksum (masked CRC32C, as a bundle entry holds it) of `t`'s raw little-endian
/// elements when it is known without reading them: stored by a TF source, or remembered in
/// `store` from an earlier `.tf/` index. Bool is left out (the view normalises its bytes).
pub fn known_crc(t: &Arc<dyn modelfs_model::Tensor>, store: Option<&dyn Store>) -> Option<u32> {
    let meta = t.meta();
    if meta.sparse || meta.dtype == DType::Bool || meta.dtype.elem_size().is_none() {
        return None;
    }
    if let Some(c) = t.stored_crc32c() {
        return Some(c);
    }
    remembered(
        store?,
        &crc_key(&RawElements::new(t.clone(), ElemMap::Same)?)?,
    )
}

/// A checksum remembered under `key`.
fn remembered(store: &dyn Store, key: &str) -> Option<u32> {
    store.get::<Crc>(key).map(|c| c.0)
}

impl Index {
    /// The checksum of entry `e`'s bytes: the source's own, remembered, or computed now (and
    /// remembered).
    fn crc(&self, e: &Entry, req: &dyn Requester) -> Result<u32, LayoutError> {
        let r = match &*e.body {
            Body::Encoded(_, crc) => return Ok(*crc),
            Body::Elements(r) => r,
        };
        if let Some(crc) = r.tensor.stored_crc32c().filter(|_| r.map == ElemMap::Same) {
            return Ok(crc);
        }
        let store = self.store.as_deref();
        let key = store.and_then(|_| crc_key(r));
        if let Some(crc) = store
            .zip(key.as_deref())
            .and_then(|(s, k)| remembered(s, k))
        {
            return Ok(crc);
        }
        let mut crc = 0u32;
        let mut at = 0u64;
        while at < e.size {
            if req.gone() {
                return Err(LayoutError::Interrupted);
            }
            let want = (e.size - at).min(CRC_CHUNK as u64) as usize;
            let got = e.body.read(at, want, req)?;
            if got.is_empty() {
                return Err(LayoutError::Internal("short tensor read"));
            }
            crc = crc32c_extend(crc, &got);
            at += got.len() as u64;
        }
        let crc = mask_crc(crc);
        if let (Some(k), Some(store)) = (&key, store) {
            store.put(k, &Crc(crc));
        }
        Ok(crc)
    }
}

impl Make for Index {
    fn size(&self) -> Option<u64> {
        Some(self.layout.index_size)
    }

    /// The index with every checksum (tensors shared out over all cores).
    fn make(&self, req: &dyn Requester) -> Result<Vec<u8>, LayoutError> {
        let entries = &self.layout.entries;
        let crcs = pool::each(entries.len(), req, || (), |_, i| self.crc(&entries[i], req))?
            .into_iter()
            .collect::<Result<Vec<u32>, _>>()?;
        Ok(index_bytes(&self.layout, Some(&crcs)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use modelfs_detect::model_at;
    use modelfs_io::store::DiskStore;
    use modelfs_layout::cache::ChunkCache;
    use modelfs_layout::Patient;
    use modelfs_model::testing::CountingModel;
    use modelfs_model::{Model, ReaderOptions};

    /// The index of a mount whose tensors store no checksum (an Angel model), read with a
    /// fresh context over one persistent store: `(data reads, index bytes)`.
    fn read_index(model: &CountingModel, store: &Arc<DiskStore>) -> (u64, Vec<u8>) {
        let cache = ChunkCache::new(1 << 20);
        cache.set_offset_store(store.clone());
        let ctx = Arc::new(LayoutCtx::new(vec![], cache));
        let before = model.reads();
        let v = super::super::build(DIR, model, &[], &ctx).unwrap();
        let entries = v.entries();
        let (_, ViewEntry::File(index)) =
            entries.iter().find(|(n, _)| n == b"model.index").unwrap()
        else {
            panic!("no index")
        };
        let size = index.size_for(&Patient).unwrap() as usize;
        let mut bytes = vec![0u8; size];
        assert_eq!(index.read_at(0, &mut bytes).unwrap(), size);
        (model.reads() - before, bytes)
    }

    #[test]
    fn checksums_are_computed_once_per_source_identity() {
        let source = modelfs_model::testing::fixtures_dir().join("angel/formats/model");
        let inner: Arc<dyn Model> = model_at(&source, &ReaderOptions::default()).unwrap();
        let model = CountingModel::new(inner);
        let dir = tempfile::tempdir().unwrap();
        let store = |tag| {
            Arc::new(DiskStore::new(
                dir.path(),
                &format!("{}{tag}", source.display()),
                1 << 30,
            ))
        };
        let (first, index) = read_index(&model, &store(""));
        assert!(first > 0, "the first index read computes checksums");
        // Another mount of the same source: remembered, not a byte of data read.
        let (again, same) = read_index(&model, &store(""));
        assert_eq!(again, 0);
        assert!(same == index);
        // Another source's store knows nothing of them.
        let (other, _) = read_index(&model, &store("-other"));
        assert_eq!(other, first);
    }
}
