//! Chunked text files: a text layout is a sequence of chunks (runs of elements or records),
//! each rendered on its own. The chunk-offset index (byte length of every chunk, as prefix
//! sums) is built on first need, in parallel, and gives the exact size; a read at any offset
//! renders only the chunks it touches, keeping them in the shared `ChunkCache`.
//!
//! Every text layout (generic and Angel) is a `ChunkSource` wrapped in `ChunkedText`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use super::cache::{ChunkCache, ChunkOffsets, OffsetsKey};
use super::readahead::{render_checked, ReadAhead};
use super::{FileContent, LayoutError};
use crate::model::Tensor;

/// Elements per chunk for element-per-record text layouts: small enough that a random read
/// renders well under a megabyte, large enough that the index stays tiny (8 bytes per chunk).
pub(crate) const CHUNK_ELEMENTS: u64 = 32 * 1024;

/// Refuse indexes beyond this many chunks (2^32 × 32 Ki elements is far past any real tensor;
/// a shape claiming more is nonsense and must not make us allocate).
const MAX_CHUNKS: u64 = 1 << 32;

/// A text file as independently renderable chunks. Rendering must be deterministic: the same
/// chunk always gives the same bytes.
pub(crate) trait ChunkSource: Send + Sync {
    fn num_chunks(&self) -> u64;
    /// Appends chunk `chunk`'s bytes to `out`.
    fn render(&self, chunk: u64, out: &mut Vec<u8>) -> Result<(), LayoutError>;
}

enum OffsetsState {
    Absent,
    Building,
    Ready(Arc<ChunkOffsets>),
}

/// A `FileContent` serving a `ChunkSource` at any offset.
pub(crate) struct ChunkedText {
    source: Arc<dyn ChunkSource>,
    cache: Arc<ChunkCache>,
    owner: Arc<dyn Tensor>,
    key: OffsetsKey,
    state: Mutex<OffsetsState>,
    ready: Condvar,
    readahead: Arc<ReadAhead>,
}

impl ChunkedText {
    /// `tag` names the layout and its parameters (e.g. `"txt"`, `"ColIdValueText,sep=,"`): two
    /// files of one tensor with different tags never share an index.
    pub(crate) fn new(
        source: Arc<dyn ChunkSource>,
        owner: Arc<dyn Tensor>,
        tag: &str,
        cache: Arc<ChunkCache>,
    ) -> Self {
        let key = match owner.cache_identity() {
            Some(id) => OffsetsKey::Stable(format!("{id}\u{0}{tag}\u{0}v1")),
            None => OffsetsKey::Object {
                addr: Arc::as_ptr(&owner) as *const u8 as usize,
                tag: tag.to_string(),
            },
        };
        ChunkedText {
            source,
            cache,
            owner,
            key,
            state: Mutex::new(OffsetsState::Absent),
            ready: Condvar::new(),
            readahead: Arc::new(ReadAhead::default()),
        }
    }

    /// The chunk-offset index, built once (concurrent callers wait for the first builder; no
    /// lock is held while rendering).
    pub(crate) fn offsets(&self) -> Result<Arc<ChunkOffsets>, LayoutError> {
        {
            let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
            loop {
                match &*st {
                    OffsetsState::Ready(i) => return Ok(i.clone()),
                    OffsetsState::Building => {
                        st = self.ready.wait(st).unwrap_or_else(|e| e.into_inner());
                    }
                    OffsetsState::Absent => {
                        *st = OffsetsState::Building;
                        break;
                    }
                }
            }
        }
        let result = self.find_or_build();
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        *st = match &result {
            Ok(i) => OffsetsState::Ready(i.clone()),
            Err(_) => OffsetsState::Absent,
        };
        self.ready.notify_all();
        result
    }

    /// The index if it is known without rendering: built already (this object or another
    /// with the same key), or in the persistent store.
    fn known_offsets(&self) -> Option<Arc<ChunkOffsets>> {
        if let OffsetsState::Ready(i) = &*self.state.lock().unwrap_or_else(|e| e.into_inner()) {
            return Some(i.clone());
        }
        if let Some(i) = self.cache.lookup_offsets(&self.key, &self.owner) {
            return Some(i);
        }
        let chunks = self.source.num_chunks();
        let offsets = match (&self.key, self.cache.offset_store()) {
            (OffsetsKey::Stable(k), Some(store)) if chunks <= MAX_CHUNKS => store
                .load(k)
                .filter(|o| ChunkOffsets::is_valid(o, chunks))?,
            _ => return None,
        };
        Some(self.remember(offsets))
    }

    fn remember(&self, offsets: Vec<u64>) -> Arc<ChunkOffsets> {
        let index = Arc::new(ChunkOffsets {
            namespace: self.cache.new_namespace(),
            offsets,
        });
        self.cache
            .keep_offsets(&self.key, &self.owner, index.clone());
        index
    }

    fn find_or_build(&self) -> Result<Arc<ChunkOffsets>, LayoutError> {
        if let Some(i) = self.known_offsets() {
            return Ok(i);
        }
        let chunks = self.source.num_chunks();
        if chunks > MAX_CHUNKS {
            return Err(LayoutError::TooManyChunks(chunks));
        }
        let offsets = build_offsets(&*self.source, chunks, &self.cache)?;
        if let (OffsetsKey::Stable(k), Some(store)) = (&self.key, self.cache.offset_store()) {
            store.save(k, &offsets);
        }
        Ok(self.remember(offsets))
    }

    /// Chunk `i`'s bytes, from the cache (possibly rendered by read-ahead) or rendered now;
    /// checks the length the index expects.
    fn chunk(&self, index: &ChunkOffsets, i: u64) -> Result<Arc<Vec<u8>>, LayoutError> {
        if let Some(c) = self.cache.get(index.namespace, i) {
            return Ok(c);
        }
        if let Some(c) = self.readahead.claim(&self.cache, index.namespace, i) {
            return Ok(c);
        }
        let rendered = render_checked(&*self.source, &self.cache, index, i);
        let v = rendered.map(Arc::new);
        if let Ok(v) = &v {
            self.cache.insert(index.namespace, i, v.clone());
        }
        self.readahead.release(i);
        v
    }

    /// Read-ahead state (tests).
    #[cfg(test)]
    pub(crate) fn readahead(&self) -> &Arc<ReadAhead> {
        &self.readahead
    }
}

/// Renders every chunk once to learn its length, on `cache.threads()` workers taking chunks
/// from a shared counter. Returns the prefix sums. Memory grows with chunks actually rendered,
/// never with the count a shape merely claims.
fn build_offsets(
    source: &dyn ChunkSource,
    chunks: u64,
    cache: &ChunkCache,
) -> Result<Vec<u64>, LayoutError> {
    let workers = (cache.threads() as u64).min(chunks).max(1) as usize;
    let next = AtomicU64::new(0);
    let failed = AtomicBool::new(false);
    let first_error: Mutex<Option<LayoutError>> = Mutex::new(None);
    let work = |out: &mut Vec<(u64, u64)>| {
        let mut buf = Vec::new();
        loop {
            if failed.load(Ordering::Relaxed) {
                return;
            }
            let i = next.fetch_add(1, Ordering::Relaxed);
            if i >= chunks {
                return;
            }
            buf.clear();
            if let Err(e) = source.render(i, &mut buf) {
                failed.store(true, Ordering::Relaxed);
                first_error
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get_or_insert(e);
                return;
            }
            cache.count_rendered(1);
            out.push((i, buf.len() as u64));
        }
    };
    let mut results: Vec<Vec<(u64, u64)>> = Vec::new();
    if workers == 1 {
        let mut out = Vec::new();
        work(&mut out);
        results.push(out);
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..workers)
                .map(|_| {
                    s.spawn(|| {
                        let mut out = Vec::new();
                        work(&mut out);
                        out
                    })
                })
                .collect();
            for h in handles {
                match h.join() {
                    Ok(out) => results.push(out),
                    Err(_) => failed.store(true, Ordering::Relaxed),
                }
            }
        });
    }
    if let Some(e) = first_error.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    if failed.load(Ordering::Relaxed) {
        return Err(LayoutError::WorkerPanicked);
    }
    // Every chunk rendered, so `chunks` is backed by real data: only now allocate by it.
    let mut lens: Vec<(u64, u64)> = results.into_iter().flatten().collect();
    lens.sort_unstable_by_key(|&(i, _)| i);
    if lens.len() as u64 != chunks {
        return Err(LayoutError::Mismatch {
            what: "text chunks rendered",
            got: lens.len() as u64,
            want: chunks,
        });
    }
    let mut offsets = Vec::with_capacity(lens.len() + 1);
    let mut total = 0u64;
    offsets.push(0);
    for (_, l) in lens {
        total += l;
        offsets.push(total);
    }
    Ok(offsets)
}

impl FileContent for ChunkedText {
    fn known_size(&self) -> Option<u64> {
        self.known_offsets().map(|i| i.size())
    }

    fn size(&self) -> Result<u64, LayoutError> {
        Ok(self.offsets()?.size())
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize, LayoutError> {
        let index = self.offsets()?;
        let size = index.size();
        if offset >= size || buf.is_empty() {
            return Ok(0);
        }
        // The chunk holding `offset`: the last i with offsets[i] <= offset (skips empty chunks).
        let mut i = index.offsets.partition_point(|&o| o <= offset) - 1;
        let mut pos = offset;
        let mut written = 0usize;
        while written < buf.len() && pos < size && (i as u64) < index.chunks() {
            let start = index.offsets[i];
            let end = index.offsets[i + 1];
            if end > pos {
                let chunk = self.chunk(&index, i as u64)?;
                let from = (pos - start) as usize;
                let n = (chunk.len() - from).min(buf.len() - written);
                buf[written..written + n].copy_from_slice(&chunk[from..from + n]);
                written += n;
                pos += n as u64;
            }
            i += 1;
        }
        self.readahead.after_read(
            offset,
            pos,
            i.saturating_sub(1) as u64,
            &self.source,
            &self.cache,
            &index,
        );
        Ok(written)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::MemTensor;

    /// Chunk i is i copies of the byte b'a' + i % 26 (chunk 0 empty).
    struct Steps(u64);
    impl ChunkSource for Steps {
        fn num_chunks(&self) -> u64 {
            self.0
        }
        fn render(&self, chunk: u64, out: &mut Vec<u8>) -> Result<(), LayoutError> {
            out.resize(out.len() + chunk as usize, b'a' + (chunk % 26) as u8);
            Ok(())
        }
    }

    fn full(n: u64) -> Vec<u8> {
        let mut v = Vec::new();
        for i in 0..n {
            Steps(n).render(i, &mut v).unwrap();
        }
        v
    }

    #[test]
    fn any_offset_reads_and_chunk_counts() {
        let cache = Arc::new(ChunkCache::new(1 << 20).with_threads(3));
        let owner: Arc<dyn Tensor> = Arc::new(MemTensor::f32(&[1], &[0.0]));
        let t = ChunkedText::new(Arc::new(Steps(100)), owner.clone(), "steps", cache.clone());
        let want = full(100);
        assert_eq!(t.size().unwrap(), want.len() as u64);
        assert_eq!(cache.rendered_chunks(), 100);
        let mut buf = vec![0u8; 7];
        let n = t.read_at(3000, &mut buf).unwrap();
        assert_eq!(&buf[..n], &want[3000..3007]);
        assert!(cache.rendered_chunks() - 100 <= 2);
        for off in [0u64, 1, 2, 5, 77, 4000, want.len() as u64 - 3] {
            let mut buf = vec![0u8; 300];
            let n = t.read_at(off, &mut buf).unwrap();
            let end = (off as usize + 300).min(want.len());
            assert_eq!(&buf[..n], &want[off as usize..end]);
        }
        assert_eq!(t.read_at(want.len() as u64, &mut buf).unwrap(), 0);
        // A second file object for the same tensor and tag reuses the index.
        let before = cache.rendered_chunks();
        let t2 = ChunkedText::new(Arc::new(Steps(100)), owner, "steps", cache.clone());
        assert_eq!(t2.size().unwrap(), want.len() as u64);
        assert_eq!(cache.rendered_chunks(), before);
    }

    /// A tensor with a stable identity: a second tensor object (even with a fresh cache, via
    /// the persistent store) reuses the index without rendering.
    struct Stable(MemTensor);
    impl Tensor for Stable {
        fn meta(&self) -> &crate::model::TensorMeta {
            self.0.meta()
        }
        fn read_elements(&self, f: u64, o: &mut [u8]) -> Result<(), crate::model::ModelError> {
            self.0.read_elements(f, o)
        }
        fn cache_identity(&self) -> Option<String> {
            Some("file:1:2:3/key".into())
        }
    }

    #[test]
    fn stable_identity_and_disk_store() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(crate::store::DiskStore::new(dir.path()));
        let mk = || -> Arc<dyn Tensor> { Arc::new(Stable(MemTensor::f32(&[1], &[0.0]))) };
        let cache = Arc::new(ChunkCache::new(1 << 20));
        cache.set_offset_store(store.clone());
        let t = ChunkedText::new(Arc::new(Steps(50)), mk(), "steps", cache.clone());
        let size = t.size().unwrap();
        assert_eq!(cache.rendered_chunks(), 50);
        let t2 = ChunkedText::new(Arc::new(Steps(50)), mk(), "steps", cache.clone());
        assert_eq!(t2.size().unwrap(), size);
        assert_eq!(cache.rendered_chunks(), 50);
        let fresh = Arc::new(ChunkCache::new(1 << 20));
        fresh.set_offset_store(store);
        let t3 = ChunkedText::new(Arc::new(Steps(50)), mk(), "steps", fresh.clone());
        assert_eq!(t3.size().unwrap(), size);
        assert_eq!(fresh.rendered_chunks(), 0);
        let mut buf = [0u8; 3];
        t3.read_at(size - 3, &mut buf).unwrap();
        assert_eq!(&buf, b"xxx");
        // A different tag is a different file.
        let t4 = ChunkedText::new(Arc::new(Steps(50)), mk(), "other", fresh.clone());
        t4.size().unwrap();
        assert_eq!(fresh.rendered_chunks(), 1 + 50);
    }

    #[test]
    fn empty_source() {
        let cache = Arc::new(ChunkCache::new(1 << 20));
        let owner: Arc<dyn Tensor> = Arc::new(MemTensor::f32(&[0], &[]));
        let t = ChunkedText::new(Arc::new(Steps(0)), owner, "e", cache);
        assert_eq!(t.size().unwrap(), 0);
        assert_eq!(t.read_at(0, &mut [0u8; 4]).unwrap(), 0);
    }
}
