//! Chunked text files: a text layout is a sequence of chunks (runs of elements or records),
//! each rendered on its own. The chunk-offset index (byte length of every chunk, as prefix
//! sums) is learnt front to back, in parallel batches, only as far as someone needs it: a read
//! near the start learns the first few chunks (and keeps them for the reader), `size` learns
//! them all. A read at any offset renders only the chunks it touches (once the index covers
//! them), keeping them in the shared `ChunkCache`. Once complete, the index is remembered in the
//! cache and the persistent store, so the exact size outlives the file object and the mount.
//!
//! Every text layout (generic and Angel) is a `ChunkSource` wrapped in `ChunkedText`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use super::cache::{ChunkCache, ChunkOffsets, OffsetsKey, Owner};
use super::readahead::{render_checked, ReadAhead};
use super::{FileContent, LayoutError, Requester};

/// Elements per chunk for element-per-record text layouts: small enough that a random read
/// renders well under a megabyte, large enough that the index stays tiny (8 bytes per chunk).
pub(crate) const CHUNK_ELEMENTS: u64 = 32 * 1024;

/// Refuse indexes beyond this many chunks (2^32 × 32 Ki elements is far past any real tensor;
/// a shape claiming more is nonsense and must not make us allocate).
const MAX_CHUNKS: u64 = 1 << 32;

/// Most chunks per worker in one batch of learning: a batch is the unit between two checks
/// that the requester is still there (a chunk renders in about a millisecond), so this bounds
/// how long an interrupted request takes to stop. Batches start at one chunk per worker and
/// double, so that a first read near the start renders little.
const BATCH_PER_WORKER: u64 = 8;
/// The same for a pass that wants the whole index (a size): larger batches keep the workers
/// busy (each batch ends with a wait for its slowest chunk and starts new threads) while an
/// interruption still lands within about 30 ms of 1 ms chunks.
const BATCH_PER_WORKER_ALL: u64 = 64;

/// A text file as independently renderable chunks. Rendering must be deterministic: the same
/// chunk always gives the same bytes.
pub(crate) trait ChunkSource: Send + Sync {
    fn num_chunks(&self) -> u64;
    /// Appends chunk `chunk`'s bytes to `out`.
    fn render(&self, chunk: u64, out: &mut Vec<u8>) -> Result<(), LayoutError>;
}

/// What is known of the index. Invariant: `prefix[0] == 0`, non-decreasing, and
/// `prefix.len() - 1` chunks learnt; `full` once all are (then `prefix` is dropped).
struct Progress {
    prefix: Vec<u64>,
    /// Someone is rendering the next batch (others wait rather than render it twice).
    busy: bool,
    /// Chunks per worker in the next batch.
    batch: u64,
    /// The cache and the persistent store were asked once already.
    looked: bool,
    full: Option<Arc<ChunkOffsets>>,
}

/// How far the index must reach.
#[derive(Clone, Copy)]
enum Need {
    /// Past this byte offset (or to the end if the file is shorter).
    Past(u64),
    All,
}

/// A `FileContent` serving a `ChunkSource` at any offset.
pub(crate) struct ChunkedText {
    source: Arc<dyn ChunkSource>,
    cache: Arc<ChunkCache>,
    owner: Owner,
    key: OffsetsKey,
    /// Cache namespace of chunks rendered while the index is partial (and of the index built here).
    namespace: u64,
    progress: Mutex<Progress>,
    learnt: Condvar,
    readahead: Arc<ReadAhead>,
}

impl ChunkedText {
    /// `tag` names the layout and its parameters (e.g. `"txt"`, `"ColIdValueText,sep=,"`): two
    /// files of one tensor with different tags never share an index.
    pub(crate) fn new(
        source: Arc<dyn ChunkSource>,
        owner: impl Into<Owner>,
        tag: &str,
        cache: Arc<ChunkCache>,
    ) -> Self {
        let owner = owner.into();
        let key = match owner.cache_identity() {
            Some(id) => OffsetsKey::Stable(format!("{id}\u{0}{tag}\u{0}v1")),
            None => OffsetsKey::Object {
                addr: owner.addr(),
                tag: tag.to_string(),
            },
        };
        ChunkedText {
            source,
            namespace: cache.new_namespace(),
            cache,
            owner,
            key,
            progress: Mutex::new(Progress {
                prefix: vec![0],
                busy: false,
                batch: 1,
                looked: false,
                full: None,
            }),
            learnt: Condvar::new(),
            readahead: Arc::new(ReadAhead::default()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Progress> {
        self.progress.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The complete chunk-offset index, learnt now if need be.
    #[cfg(test)]
    pub(crate) fn offsets(&self) -> Result<Arc<ChunkOffsets>, LayoutError> {
        self.offsets_for(&super::Patient)
    }

    fn offsets_for(&self, req: &dyn Requester) -> Result<Arc<ChunkOffsets>, LayoutError> {
        self.learn(Need::All, req)?
            .ok_or(LayoutError::Internal("index incomplete after learning all"))
    }

    /// Learns the index as far as `need` says; returns it when complete, `None` when the
    /// learnt prefix already covers `need`. No lock is held while rendering; concurrent
    /// learners wait for the batch in progress instead of rendering it twice.
    fn learn(
        &self,
        need: Need,
        req: &dyn Requester,
    ) -> Result<Option<Arc<ChunkOffsets>>, LayoutError> {
        let chunks = self.source.num_chunks();
        let mut st = self.lock();
        loop {
            if let Some(full) = &st.full {
                return Ok(Some(full.clone()));
            }
            if !st.looked {
                st.looked = true;
                drop(st);
                let known = self.look_up(chunks);
                st = self.lock();
                if let (Some(i), None) = (known, &st.full) {
                    st.full = Some(i);
                    st.prefix = Vec::new();
                }
                continue;
            }
            if let Need::Past(b) = need {
                if st.prefix.last().is_some_and(|&end| end > b) {
                    return Ok(None);
                }
            }
            if req.gone() {
                return Err(LayoutError::Interrupted);
            }
            if st.busy {
                st = self
                    .learnt
                    .wait_timeout(st, Duration::from_millis(20))
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
                continue;
            }
            if chunks > MAX_CHUNKS {
                return Err(LayoutError::TooManyChunks(chunks));
            }
            let first = st.prefix.len() as u64 - 1;
            let workers = if req.background() {
                1
            } else {
                (self.cache.threads() as u64).max(1)
            };
            let last = first.saturating_add(workers * st.batch).min(chunks);
            let cap = match need {
                Need::Past(_) => BATCH_PER_WORKER,
                Need::All => BATCH_PER_WORKER_ALL,
            };
            st.batch = (st.batch * 2).min(cap);
            // Chunks rendered for a waiting reader are the ones it reads next: keep them.
            let keep = matches!(need, Need::Past(_)) && !req.background();
            st.busy = true;
            drop(st);
            let lens = self.render_batch(first, last, workers, keep, req);
            st = self.lock();
            st.busy = false;
            self.learnt.notify_all();
            let lens = lens?;
            let mut end = st.prefix.last().copied().unwrap_or(0);
            for l in lens {
                end = end
                    .checked_add(l)
                    .ok_or(LayoutError::Overflow("text size"))?;
                st.prefix.push(end);
            }
            if st.prefix.len() as u64 == chunks + 1 {
                let offsets = std::mem::take(&mut st.prefix);
                let index = Arc::new(ChunkOffsets {
                    namespace: self.namespace,
                    offsets,
                });
                st.full = Some(index.clone());
                drop(st);
                self.cache
                    .keep_offsets(&self.key, &self.owner, index.clone());
                if let (OffsetsKey::Stable(k), Some(store)) = (&self.key, self.cache.offset_store())
                {
                    store.save(k, &index.offsets);
                }
                return Ok(Some(index));
            }
        }
    }

    /// The complete index if another file object or the persistent store has it.
    fn look_up(&self, chunks: u64) -> Option<Arc<ChunkOffsets>> {
        if let Some(i) = self.cache.lookup_offsets(&self.key, &self.owner) {
            return Some(i);
        }
        let offsets = match (&self.key, self.cache.offset_store()) {
            (OffsetsKey::Stable(k), Some(store)) if chunks <= MAX_CHUNKS => store
                .load(k)
                .filter(|o| ChunkOffsets::is_valid(o, chunks))?,
            _ => return None,
        };
        let index = Arc::new(ChunkOffsets {
            namespace: self.namespace,
            offsets,
        });
        self.cache
            .keep_offsets(&self.key, &self.owner, index.clone());
        Some(index)
    }

    /// Renders chunks `first..last` on up to `workers` threads taking chunks from a shared
    /// counter; returns their lengths in order. Memory grows with chunks actually rendered,
    /// never with the count a shape merely claims.
    fn render_batch(
        &self,
        first: u64,
        last: u64,
        workers: u64,
        keep: bool,
        req: &dyn Requester,
    ) -> Result<Vec<u64>, LayoutError> {
        let count = last - first;
        let workers = workers.min(count).max(1) as usize;
        let next = AtomicU64::new(first);
        let failed = AtomicBool::new(false);
        let stopped = AtomicBool::new(false);
        let first_error: Mutex<Option<LayoutError>> = Mutex::new(None);
        let work = |out: &mut Vec<(u64, u64)>| {
            let mut scratch = Vec::new();
            loop {
                if failed.load(Ordering::Relaxed) || stopped.load(Ordering::Relaxed) {
                    return;
                }
                // An interrupted requester stops the batch between chunks (the caller then
                // answers EINTR), not only between batches.
                if req.gone() {
                    stopped.store(true, Ordering::Relaxed);
                    return;
                }
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= last {
                    return;
                }
                let mut buf = if keep {
                    self.cache.buffer(0)
                } else {
                    std::mem::take(&mut scratch)
                };
                buf.clear();
                if let Err(e) = self.source.render(i, &mut buf) {
                    failed.store(true, Ordering::Relaxed);
                    first_error
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .get_or_insert(e);
                    return;
                }
                self.cache.count_rendered(1);
                out.push((i, buf.len() as u64));
                if keep {
                    self.cache.insert(self.namespace, i, Arc::new(buf));
                } else {
                    scratch = buf;
                }
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
        let mut lens: Vec<(u64, u64)> = results.into_iter().flatten().collect();
        if stopped.load(Ordering::Relaxed) {
            return Err(LayoutError::Interrupted);
        }
        lens.sort_unstable_by_key(|&(i, _)| i);
        if lens.len() as u64 != count {
            return Err(LayoutError::Mismatch {
                what: "text chunks rendered",
                got: lens.len() as u64,
                want: count,
            });
        }
        Ok(lens.into_iter().map(|(_, l)| l).collect())
    }

    /// Chunk `i` of `want` bytes in `namespace`, from the cache (possibly rendered by
    /// read-ahead or by learning) or rendered now and checked against `want`.
    fn chunk(&self, namespace: u64, i: u64, want: u64) -> Result<Arc<Vec<u8>>, LayoutError> {
        if let Some(c) = self.cache.get(namespace, i) {
            return Ok(c);
        }
        if let Some(c) = self.readahead.claim(&self.cache, namespace, i) {
            return Ok(c);
        }
        let rendered = render_checked(&*self.source, &self.cache, i, want);
        let v = rendered.map(Arc::new);
        if let Ok(v) = &v {
            self.cache.insert(namespace, i, v.clone());
        }
        self.readahead.release(i);
        v
    }

    /// Copies `offset..` into `buf` from chunks `spans` (index, start, end), which cover the
    /// range; returns the bytes written and the last chunk touched.
    fn copy_out(
        &self,
        namespace: u64,
        spans: &[(u64, u64, u64)],
        offset: u64,
        buf: &mut [u8],
    ) -> Result<(usize, u64), LayoutError> {
        let mut pos = offset;
        let mut written = 0usize;
        let mut last = 0;
        for &(i, start, end) in spans {
            if written == buf.len() {
                break;
            }
            last = i;
            if end <= pos {
                continue;
            }
            let chunk = self.chunk(namespace, i, end - start)?;
            let from = usize::try_from(pos - start).map_err(|_| LayoutError::Overflow("offset"))?;
            let n = (chunk.len().saturating_sub(from)).min(buf.len() - written);
            buf[written..written + n].copy_from_slice(&chunk[from..from + n]);
            written += n;
            pos += n as u64;
        }
        Ok((written, last))
    }

    /// Read-ahead state (tests).
    #[cfg(test)]
    pub(crate) fn readahead(&self) -> &Arc<ReadAhead> {
        &self.readahead
    }
}

/// A rendered chunk lent to a reply (`read_shared`).
struct SharedChunk(Arc<Vec<u8>>);

impl AsRef<[u8]> for SharedChunk {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

/// The chunks of `offsets` (prefix sums) overlapping `offset..offset + len`.
fn spans(offsets: &[u64], offset: u64, len: usize) -> Vec<(u64, u64, u64)> {
    let chunks = offsets.len().saturating_sub(1);
    // The chunk holding `offset`: the last i with offsets[i] <= offset (skips empty chunks).
    let mut i = offsets.partition_point(|&o| o <= offset).saturating_sub(1);
    let stop = offset.saturating_add(len as u64);
    let mut out = Vec::new();
    while i < chunks && offsets[i] < stop {
        out.push((i as u64, offsets[i], offsets[i + 1]));
        i += 1;
    }
    out
}

impl FileContent for ChunkedText {
    fn known_size(&self) -> Option<u64> {
        let looked = {
            let st = self.lock();
            if let Some(f) = &st.full {
                return Some(f.size());
            }
            st.looked
        };
        if looked {
            // Another object of the same key may have learnt it since.
            let i = self.cache.lookup_offsets(&self.key, &self.owner)?;
            return Some(i.size());
        }
        let known = self.look_up(self.source.num_chunks());
        let mut st = self.lock();
        st.looked = true;
        if let (Some(i), None) = (&known, &st.full) {
            st.full = Some(i.clone());
            st.prefix = Vec::new();
        }
        known.map(|i| i.size())
    }

    fn size_for(&self, req: &dyn Requester) -> Result<u64, LayoutError> {
        Ok(self.offsets_for(req)?.size())
    }

    fn read_for(
        &self,
        offset: u64,
        buf: &mut [u8],
        req: &dyn Requester,
    ) -> Result<usize, LayoutError> {
        if buf.is_empty() {
            return Ok(0);
        }
        let need = Need::Past(offset.saturating_add(buf.len() as u64 - 1));
        if let Some(index) = self.learn(need, req)? {
            let size = index.size();
            if offset >= size {
                return Ok(0);
            }
            let spans = spans(&index.offsets, offset, buf.len());
            let (written, last) = self.copy_out(index.namespace, &spans, offset, buf)?;
            self.readahead.after_read(
                offset,
                offset + written as u64,
                last,
                &self.source,
                &self.cache,
                &index,
            );
            return Ok(written);
        }
        // The learnt prefix covers the whole range; the last chunks rendered are in the cache.
        let spans = {
            let st = self.lock();
            if st.full.is_some() {
                // Completed meanwhile (the prefix moved into the index): read from that.
                drop(st);
                return self.read_for(offset, buf, req);
            }
            spans(&st.prefix, offset, buf.len())
        };
        Ok(self.copy_out(self.namespace, &spans, offset, buf)?.0)
    }

    fn read_shared(
        &self,
        offset: u64,
        len: usize,
        _req: &dyn Requester,
    ) -> Option<Result<bytes::Bytes, LayoutError>> {
        // Only with the whole index at hand (no learning here) and within one chunk.
        let index = self.lock().full.clone()?;
        if offset >= index.size() || len == 0 {
            return Some(Ok(bytes::Bytes::new()));
        }
        let span = spans(&index.offsets, offset, len);
        let &[(i, start, end)] = &span[..] else {
            return None;
        };
        let chunk = match self.chunk(index.namespace, i, end - start) {
            Ok(c) => c,
            Err(e) => return Some(Err(e)),
        };
        let from = usize::try_from(offset - start).ok()?;
        let to = chunk.len().min(from.saturating_add(len));
        if from > to {
            return None;
        }
        self.readahead.after_read(
            offset,
            offset + (to - from) as u64,
            i,
            &self.source,
            &self.cache,
            &index,
        );
        Some(Ok(
            bytes::Bytes::from_owner(SharedChunk(chunk)).slice(from..to)
        ))
    }

    fn size_progress(&self) -> Option<(u64, u64)> {
        let st = self.lock();
        let total = self.source.num_chunks();
        Some(match &st.full {
            Some(_) => (total, total),
            None => (st.prefix.len().saturating_sub(1) as u64, total),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Tensor;
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

    #[test]
    fn shared_reads_are_the_bytes_of_one_chunk() {
        let cache = Arc::new(ChunkCache::new(1 << 20).with_threads(2));
        let owner: Arc<dyn Tensor> = Arc::new(MemTensor::f32(&[1], &[0.0]));
        let t = ChunkedText::new(Arc::new(Steps(100)), owner, "steps", cache);
        let want = full(100);
        // Not before the index is complete.
        assert!(t.read_shared(0, 1, &super::super::Patient).is_none());
        assert_eq!(t.size().unwrap(), want.len() as u64);
        // Chunk i holds i bytes from i(i-1)/2 on.
        let (mut shared, mut other) = (0, 0);
        for off in (0..want.len() as u64 + 3).step_by(7) {
            for len in [1usize, 5, 40, 99, 300] {
                match t.read_shared(off, len, &super::super::Patient) {
                    Some(got) => {
                        let got = got.unwrap();
                        let end = (off as usize + len).min(want.len());
                        let from = (off as usize).min(end);
                        assert_eq!(&got[..], &want[from..end], "at {off}+{len}");
                        shared += 1;
                    }
                    None => {
                        // Only a range over two chunks or more falls back to copying.
                        let first = (0..100u64).find(|&i| i * (i + 1) / 2 > off).unwrap();
                        assert!(off + len as u64 > first * (first + 1) / 2, "at {off}+{len}");
                        other += 1;
                    }
                }
            }
        }
        assert!(shared > 100 && other > 100, "{shared} {other}");
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
        let store = Arc::new(crate::store::DiskStore::new(dir.path(), "test", u64::MAX));
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

    /// Gone from its `n`th look on (and for good, like a real caller).
    struct GoneAfter(std::sync::atomic::AtomicU64);
    impl Requester for GoneAfter {
        fn gone(&self) -> bool {
            self.0
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_err()
        }
    }

    #[test]
    fn reads_learn_only_what_they_need() {
        let cache = Arc::new(ChunkCache::new(64 << 20).with_threads(2));
        let owner: Arc<dyn Tensor> = Arc::new(MemTensor::f32(&[1], &[0.0]));
        let t = ChunkedText::new(Arc::new(Steps(2000)), owner, "steps", cache.clone());
        let want = full(2000);
        assert_eq!(t.known_size(), None);
        let mut buf = vec![0u8; 100];
        let n = t.read_at(0, &mut buf).unwrap();
        assert_eq!(&buf[..n], &want[..100]);
        let first = cache.rendered_chunks();
        assert!(first < 100, "a read at 0 rendered {first} of 2000 chunks");
        assert_eq!(t.known_size(), None);
        assert_eq!(t.size_progress().map(|p| p.1), Some(2000));
        // Sequential reads to the end learn the whole index: the size becomes known.
        let mut out = Vec::new();
        let mut buf = vec![0u8; 64 << 10];
        loop {
            let n = t.read_at(out.len() as u64, &mut buf).unwrap();
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        assert_eq!(out, want);
        assert_eq!(t.known_size(), Some(want.len() as u64));
        // Every chunk rendered about once (kept for the reader while learning).
        assert!(
            cache.rendered_chunks() < 2000 + 200,
            "{}",
            cache.rendered_chunks()
        );
    }

    #[test]
    fn a_gone_requester_stops_learning() {
        let cache = Arc::new(ChunkCache::new(1 << 20).with_threads(2));
        let owner: Arc<dyn Tensor> = Arc::new(MemTensor::f32(&[1], &[0.0]));
        let t = ChunkedText::new(Arc::new(Steps(5000)), owner, "steps", cache.clone());
        let err = t.size_for(&GoneAfter(50.into())).unwrap_err();
        assert!(matches!(err, LayoutError::Interrupted), "{err}");
        assert!(cache.rendered_chunks() < 5000);
        // What was learnt is kept and the next caller finishes the job (chunks of the batch
        // that was cut short are rendered again).
        let (learnt, _) = t.size_progress().unwrap();
        assert!(learnt > 0 && learnt < 5000, "{learnt}");
        let before = cache.rendered_chunks();
        assert_eq!(t.size().unwrap(), full(5000).len() as u64);
        assert_eq!(cache.rendered_chunks() - before, 5000 - learnt);
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
