//! Read-ahead for chunked text files: when reads of a file are sequential, the chunks just
//! ahead of the reader are rendered in parallel on background threads into the shared LRU,
//! so a `cat` of a text file formats on every core while the reader copies bytes.
//!
//! Invariants:
//! - A chunk is rendered by at most one party at a time: whoever renders it (a worker or a
//!   reader) marks it in flight first; a reader needing an in-flight chunk waits for it.
//! - At most `WINDOW_PER_THREAD × threads` chunks are scheduled ahead of the last sequential
//!   read, and at most `threads` workers run per file and `2 × threads` per cache, so memory
//!   and CPU stay bounded whatever the file size.
//! - Workers are plain threads that exit as soon as their file's queue is empty; they hold
//!   the chunk source and the cache, never the file object, so nothing outlives its use.
//! - A background failure (render error, length mismatch) is dropped: the reader renders the
//!   chunk itself and reports the error.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Condvar, Mutex};

use super::cache::{ChunkCache, ChunkOffsets};
use super::text::ChunkSource;

/// Chunks scheduled ahead of a sequential reader, per worker thread.
pub(crate) const WINDOW_PER_THREAD: u64 = 3;

/// A read counts as sequential when it starts within this many of its own lengths of the
/// previous read's end (the kernel's read-ahead requests, served by several FUSE threads, may
/// arrive slightly out of order).
const SEQUENTIAL_SLACK_READS: u64 = 2;

#[derive(Default)]
struct State {
    /// End offset of the last read (0: no read yet).
    last_end: u64,
    /// Every chunk below this one has been scheduled or read already.
    scheduled_to: u64,
    queue: VecDeque<u64>,
    inflight: HashSet<u64>,
    workers: usize,
}

/// Read-ahead state of one text file.
#[derive(Default)]
pub(crate) struct ReadAhead {
    state: Mutex<State>,
    done: Condvar,
}

/// Renders chunk `i`, checking that it has the `want` bytes an index says; counts it.
pub(crate) fn render_checked(
    source: &dyn ChunkSource,
    cache: &ChunkCache,
    i: u64,
    want: u64,
) -> Result<Vec<u8>, super::LayoutError> {
    // `want` may come from a persistent index file, which can be corrupt: reserve at most a
    // few chunks' worth; rendering grows the buffer if it really needs more.
    let mut v = cache.buffer(usize::try_from(want.min(4 << 20)).unwrap_or(0));
    source.render(i, &mut v)?;
    cache.count_rendered(1);
    if v.len() as u64 != want {
        return Err(super::LayoutError::Mismatch {
            what: "text chunk bytes rendered",
            got: v.len() as u64,
            want,
        });
    }
    Ok(v)
}

impl ReadAhead {
    /// Notes a read of `offset..end` touching chunks `..=last_chunk`; when it continues the
    /// previous read, schedules the chunks ahead and starts workers as needed.
    pub(crate) fn after_read(
        self: &Arc<Self>,
        offset: u64,
        end: u64,
        last_chunk: u64,
        source: &Arc<dyn ChunkSource>,
        cache: &Arc<ChunkCache>,
        index: &Arc<ChunkOffsets>,
    ) {
        let threads = cache.threads().max(1);
        let mut spawn = 0;
        {
            let mut st = self.lock();
            let slack = end
                .saturating_sub(offset)
                .saturating_mul(SEQUENTIAL_SLACK_READS);
            let sequential = st.last_end > 0
                && offset <= st.last_end.saturating_add(slack)
                && offset.saturating_add(slack) >= st.last_end;
            if !sequential {
                // A seek: start over from here (a later sequential pass gets read-ahead again).
                st.last_end = end;
                st.scheduled_to = 0;
                return;
            }
            st.last_end = st.last_end.max(end);
            let target = last_chunk
                .saturating_add(WINDOW_PER_THREAD * threads as u64)
                .min(index.chunks().saturating_sub(1));
            let from = st.scheduled_to.max(last_chunk + 1);
            for c in from..=target {
                if !st.inflight.contains(&c) && cache.get(index.namespace, c).is_none() {
                    st.queue.push_back(c);
                }
            }
            st.scheduled_to = st.scheduled_to.max(target + 1);
            while st.workers + spawn < threads.min(st.queue.len()) && cache.try_start_worker() {
                spawn += 1;
            }
            st.workers += spawn;
        }
        for _ in 0..spawn {
            let (me, src, c, idx) = (self.clone(), source.clone(), cache.clone(), index.clone());
            let started = std::thread::Builder::new()
                .name("modelfs-readahead".into())
                .spawn(move || me.work(&*src, &c, &idx));
            if started.is_err() {
                self.lock().workers -= 1;
                cache.end_worker();
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A worker: renders queued chunks until the queue is empty, then exits.
    fn work(&self, source: &dyn ChunkSource, cache: &ChunkCache, index: &ChunkOffsets) {
        loop {
            let c = {
                let mut st = self.lock();
                match st.queue.pop_front() {
                    Some(c) => {
                        st.inflight.insert(c);
                        c
                    }
                    None => {
                        st.workers -= 1;
                        break;
                    }
                }
            };
            if cache.get(index.namespace, c).is_none() {
                if let Ok(v) = render_checked(source, cache, c, index.chunk_len(c)) {
                    cache.insert(index.namespace, c, Arc::new(v));
                }
            }
            self.lock().inflight.remove(&c);
            self.done.notify_all();
        }
        cache.end_worker();
    }

    /// Before a reader renders chunk `c` itself: waits while a worker renders it, then claims
    /// it (removing it from the queue). Returns the cached bytes if the worker produced them,
    /// else `None` with `c` marked in flight (the caller must call `release`).
    pub(crate) fn claim(&self, cache: &ChunkCache, namespace: u64, c: u64) -> Option<Arc<Vec<u8>>> {
        let mut st = self.lock();
        while st.inflight.contains(&c) {
            st = self.done.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        if let Some(v) = cache.get(namespace, c) {
            return Some(v);
        }
        st.queue.retain(|&q| q != c);
        st.inflight.insert(c);
        None
    }

    /// Ends a reader's claim on `c`.
    pub(crate) fn release(&self, c: u64) {
        self.lock().inflight.remove(&c);
        self.done.notify_all();
    }

    /// Workers currently running for this file (tests).
    #[cfg(test)]
    pub(crate) fn workers(&self) -> usize {
        self.lock().workers
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
    use std::time::{Duration, Instant};

    use super::*;
    use crate::layout::text::ChunkedText;
    use crate::layout::{FileContent, LayoutError};
    use crate::model::Tensor;
    use crate::testing::MemTensor;

    /// Chunk i is 1000 + i % 7 bytes of a letter depending on i; counts renders per chunk.
    struct Counted {
        renders: Vec<AtomicU32>,
        delay: Duration,
    }
    impl Counted {
        fn new(n: usize, delay_ms: u64) -> Arc<Counted> {
            Arc::new(Counted {
                renders: (0..n).map(|_| AtomicU32::new(0)).collect(),
                delay: Duration::from_millis(delay_ms),
            })
        }
    }
    impl ChunkSource for Counted {
        fn num_chunks(&self) -> u64 {
            self.renders.len() as u64
        }
        fn render(&self, chunk: u64, out: &mut Vec<u8>) -> Result<(), LayoutError> {
            self.renders[chunk as usize].fetch_add(1, Relaxed);
            std::thread::sleep(self.delay);
            let len = 1000 + (chunk % 7) as usize;
            out.resize(out.len() + len, b'a' + (chunk % 26) as u8);
            Ok(())
        }
    }

    fn expected(n: u64) -> Vec<u8> {
        let src = Counted::new(n as usize, 0);
        let mut v = Vec::new();
        for i in 0..n {
            src.render(i, &mut v).unwrap();
        }
        v
    }

    fn file(src: Arc<Counted>, cache: &Arc<ChunkCache>) -> ChunkedText {
        let owner: Arc<dyn Tensor> = Arc::new(MemTensor::f32(&[1], &[0.0]));
        ChunkedText::new(src, owner, "counted", cache.clone())
    }

    fn read_sequentially(f: &ChunkedText, step: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; step];
        loop {
            let n = f.read_at(out.len() as u64, &mut buf).unwrap();
            if n == 0 {
                return out;
            }
            out.extend_from_slice(&buf[..n]);
        }
    }

    fn wait_idle(cache: &ChunkCache) {
        let until = Instant::now() + Duration::from_secs(20);
        while cache.readahead_workers() > 0 {
            assert!(Instant::now() < until, "read-ahead workers never finished");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn sequential_read_renders_ahead_once_each() {
        let n = 60u64;
        let src = Counted::new(n as usize, 1);
        let cache = Arc::new(ChunkCache::new(64 << 20).with_threads(3));
        let f = file(src.clone(), &cache);
        let size = f.size().unwrap();
        for r in &src.renders {
            r.store(0, Relaxed);
        }
        // Two reads in a row: the second continues the first, so chunks ahead get scheduled.
        let mut buf = vec![0u8; 700];
        f.read_at(0, &mut buf).unwrap();
        f.read_at(700, &mut buf).unwrap();
        wait_idle(&cache);
        let ahead = WINDOW_PER_THREAD * 3;
        for c in 1..=1 + ahead {
            assert!(
                cache.get(f.offsets().unwrap().namespace, c).is_some(),
                "{c}"
            );
        }
        let whole = read_sequentially(&f, 4096);
        assert_eq!(whole, expected(n));
        assert_eq!(whole.len() as u64, size);
        wait_idle(&cache);
        for (i, r) in src.renders.iter().enumerate() {
            assert_eq!(r.load(Relaxed), 1, "chunk {i} rendered more than once");
        }
        assert_eq!(f.readahead().workers(), 0);
    }

    #[test]
    fn random_reads_do_not_read_ahead() {
        let src = Counted::new(50, 0);
        let cache = Arc::new(ChunkCache::new(64 << 20));
        let f = file(src.clone(), &cache);
        let size = f.size().unwrap();
        let before = cache.rendered_chunks();
        let mut buf = [0u8; 10];
        for off in [size / 2, 10, size - 20, size / 3] {
            f.read_at(off, &mut buf).unwrap();
        }
        wait_idle(&cache);
        assert!(cache.rendered_chunks() - before <= 4);
    }

    #[test]
    fn concurrent_readers_small_cache_exact_bytes_no_leak() {
        let n = 80u64;
        let src = Counted::new(n as usize, 0);
        // Room for a few chunks only: read-ahead results get evicted and re-rendered.
        let cache = Arc::new(ChunkCache::new(16 * 1024).with_threads(2));
        let f = Arc::new(file(src, &cache));
        let want = expected(n);
        std::thread::scope(|s| {
            for step in [1usize, 333, 4096, 65536] {
                let (f, want, cache) = (f.clone(), &want, &cache);
                s.spawn(move || {
                    for _ in 0..3 {
                        assert_eq!(&read_sequentially(&f, step), want);
                        assert!(cache.readahead_workers() <= 4);
                    }
                });
            }
        });
        wait_idle(&cache);
        assert_eq!(f.readahead().workers(), 0);
        drop(f);
        assert_eq!(cache.readahead_workers(), 0);
    }

    #[test]
    fn parallel_render_is_faster_than_serial() {
        // 40 chunks of 10 ms each: serially 400 ms; with 4 workers ahead of the reader the
        // read finishes in well under that, even on a busy machine.
        let n = 40u64;
        let src = Counted::new(n as usize, 10);
        let cache = Arc::new(ChunkCache::new(64 << 20).with_threads(4));
        let f = file(src.clone(), &cache);
        f.size().unwrap();
        let started = Instant::now();
        assert_eq!(read_sequentially(&f, 8192), expected(n));
        let took = started.elapsed();
        wait_idle(&cache);
        assert!(took < Duration::from_millis(300), "took {took:?}");
    }
}
