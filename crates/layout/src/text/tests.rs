//! Tests of chunked text files: any offset, shared reads, the persistent index, learning only
//! what is needed, read-ahead, and the render crew on size-unknown files.

use std::sync::atomic::{AtomicU32, Ordering, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::crew::WINDOW_PER_THREAD;
use super::*;
use crate::cache::ChunkCache;
use crate::model::{ModelResult, Tensor};
use crate::source::ReadCtx;
use crate::testing::MemTensor;
use crate::{FileContent, LayoutError, Patient, Requester};

/// Chunk i is i copies of the byte b'a' + i % 26 (chunk 0 empty).
struct Steps(u64);
impl ChunkSource for Steps {
    fn num_chunks(&self) -> u64 {
        self.0
    }
    fn render(&self, _: &ReadCtx, chunk: u64, out: &mut Vec<u8>) -> Result<(), LayoutError> {
        out.resize(out.len() + chunk as usize, b'a' + (chunk % 26) as u8);
        Ok(())
    }
}

fn full(n: u64) -> Vec<u8> {
    let mut v = Vec::new();
    for i in 0..n {
        Steps(n).render(ReadCtx::none(), i, &mut v).unwrap();
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
fn a_read_inside_one_chunk_is_a_view_of_the_chunk() {
    let cache = Arc::new(ChunkCache::new(1 << 20).with_threads(2));
    let owner: Arc<dyn Tensor> = Arc::new(MemTensor::f32(&[1], &[0.0]));
    let t = ChunkedText::new(Arc::new(Steps(100)), owner, "steps", cache);
    let want = full(100);
    // Chunk i holds i bytes from i(i-1)/2 on; reads before and after the index is complete.
    let (mut lent, mut copied) = (0, 0);
    for round in 0..2 {
        for off in (0..want.len() as u64 + 3).step_by(7) {
            for len in [1usize, 5, 40, 99, 300] {
                let got = t.read(off, len, &Patient).unwrap();
                let end = (off as usize + len).min(want.len());
                let from = (off as usize).min(end);
                assert_eq!(&got[..], &want[from..end], "at {off}+{len} (round {round})");
                // Held together, two reads of one chunk point into it; copies would not.
                let again = t.read(off, len, &Patient).unwrap();
                let first = (0..100u64).find(|&i| i * (i + 1) / 2 > off);
                let in_one = first.is_some_and(|f| off + len as u64 <= f * (f + 1) / 2);
                if !got.is_empty() && in_one {
                    assert_eq!(got.as_ptr(), again.as_ptr(), "at {off}+{len}");
                    lent += 1;
                } else if !got.is_empty() {
                    copied += 1;
                }
            }
        }
        if round == 0 {
            assert_eq!(t.size().unwrap(), want.len() as u64);
        }
    }
    assert!(lent > 100 && copied > 100, "{lent} {copied}");
}

/// A tensor with a stable identity: a second tensor object (even with a fresh cache, via
/// the persistent store) reuses the index without rendering.
struct Stable(MemTensor);
impl Tensor for Stable {
    fn meta(&self) -> &crate::model::TensorMeta {
        self.0.meta()
    }
    fn fill_elements(&self, ctx: &ReadCtx, first: u64, out: &mut [u8]) -> ModelResult {
        crate::model::read_elements(&self.0, ctx, first, out)
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
    // One chunk is rendered again rather than stored, on the caller's thread.
    let started = fresh.started_workers();
    let records = std::fs::metadata(dir.path().join(store_file(dir.path())))
        .unwrap()
        .len();
    let t5 = ChunkedText::new(Arc::new(Steps(1)), mk(), "one", fresh.clone());
    t5.size().unwrap();
    let after = std::fs::metadata(dir.path().join(store_file(dir.path())))
        .unwrap()
        .len();
    assert_eq!(after, records, "a one-chunk index was stored");
    assert_eq!(
        fresh.started_workers(),
        started,
        "a worker was started for one chunk"
    );
    // … and its size is known to another object of it, without a render, whatever the
    // index LRU let go.
    let rendered = fresh.rendered_chunks();
    let t6 = ChunkedText::new(Arc::new(Steps(1)), mk(), "one", fresh.clone());
    assert!(t6.known_size().is_some());
    assert_eq!(fresh.rendered_chunks(), rendered);
}

fn store_file(dir: &std::path::Path) -> std::path::PathBuf {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files.remove(0)
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

/// `Steps` taking 1 ms a chunk: the workers cannot finish 5,000 chunks before a requester
/// leaves after its 50th look (a fast machine did, and the test then saw no interruption).
struct SlowSteps(u64);
impl ChunkSource for SlowSteps {
    fn num_chunks(&self) -> u64 {
        self.0
    }
    fn render(&self, ctx: &ReadCtx, chunk: u64, out: &mut Vec<u8>) -> Result<(), LayoutError> {
        std::thread::sleep(Duration::from_millis(1));
        Steps(self.0).render(ctx, chunk, out)
    }
}

#[test]
fn a_gone_requester_stops_learning() {
    let cache = Arc::new(ChunkCache::new(1 << 20).with_threads(2));
    let owner: Arc<dyn Tensor> = Arc::new(MemTensor::f32(&[1], &[0.0]));
    let t = ChunkedText::new(Arc::new(SlowSteps(5000)), owner, "steps", cache.clone());
    let err = t.size_for(&GoneAfter(50.into())).unwrap_err();
    assert!(matches!(err, LayoutError::Interrupted), "{err}");
    // The workers stop within a chunk of the requester leaving.
    wait_idle(&cache);
    assert!(cache.rendered_chunks() < 5000);
    // What was learnt is kept (lengths learnt out of order too) and the next caller finishes
    // the job, rendering at most the chunks not learnt yet.
    let (learnt, _) = t.size_progress().unwrap();
    assert!(learnt > 0 && learnt < 5000, "{learnt}");
    let before = cache.rendered_chunks();
    assert_eq!(t.size().unwrap(), full(5000).len() as u64);
    assert!(cache.rendered_chunks() - before <= 5000 - learnt);
}

#[test]
fn empty_source() {
    let cache = Arc::new(ChunkCache::new(1 << 20));
    let owner: Arc<dyn Tensor> = Arc::new(MemTensor::f32(&[0], &[]));
    let t = ChunkedText::new(Arc::new(Steps(0)), owner, "e", cache);
    assert_eq!(t.size().unwrap(), 0);
    assert_eq!(t.read_at(0, &mut [0u8; 4]).unwrap(), 0);
}

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
    fn render(&self, _: &ReadCtx, chunk: u64, out: &mut Vec<u8>) -> Result<(), LayoutError> {
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
        src.render(ReadCtx::none(), i, &mut v).unwrap();
    }
    v
}

/// A file of `n` counted chunks (each render taking `delay_ms`) over a 64 MiB cache with
/// `threads` rendering ahead (0: the cache's default).
fn counted(n: u64, delay_ms: u64, threads: usize) -> (Arc<Counted>, Arc<ChunkCache>, ChunkedText) {
    let src = Counted::new(n as usize, delay_ms);
    let mut cache = ChunkCache::new(64 << 20);
    if threads > 0 {
        cache = cache.with_threads(threads);
    }
    let cache = Arc::new(cache);
    let f = file(src.clone(), &cache);
    (src, cache, f)
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
    let (src, cache, f) = counted(n, 1, 3);
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
    assert_eq!(f.crew().workers(), 0);
}

#[test]
fn random_reads_do_not_read_ahead() {
    let (_, cache, f) = counted(50, 0, 0);
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
    assert_eq!(f.crew().workers(), 0);
    drop(f);
    assert_eq!(cache.readahead_workers(), 0);
}

/// With the size known, a sequential reader has workers rendering ahead of it: several
/// chunks at once (counted, not timed: a busy machine slows both the same).
#[test]
fn chunks_render_in_parallel_ahead_of_the_reader() {
    let n = 40u64;
    let src = watched(n, 10);
    let cache = Arc::new(ChunkCache::new(64 << 20).with_threads(4));
    let owner: Arc<dyn Tensor> = Arc::new(MemTensor::f32(&[1], &[0.0]));
    let f = ChunkedText::new(src.clone(), owner, "watched", cache.clone());
    f.size().unwrap();
    let (mut out, mut most) = (Vec::new(), 0);
    let mut buf = vec![0u8; 8192];
    loop {
        let n = f.read_at(out.len() as u64, &mut buf).unwrap();
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
        most = most.max(src.busy.load(Relaxed));
    }
    wait_idle(&cache);
    assert_eq!(out, expected(n));
    assert!(most >= 2, "at most {most} chunk(s) rendering at once");
}

/// Chunk i is 1000 + i % 7 bytes; counts the renders in progress and the most seen at once.
struct Watched {
    chunks: u64,
    delay: Duration,
    busy: AtomicU32,
}
impl ChunkSource for Watched {
    fn num_chunks(&self) -> u64 {
        self.chunks
    }
    fn render(&self, _: &ReadCtx, chunk: u64, out: &mut Vec<u8>) -> Result<(), LayoutError> {
        self.busy.fetch_add(1, Relaxed);
        std::thread::sleep(self.delay);
        let len = 1000 + (chunk % 7) as usize;
        out.resize(out.len() + len, b'a' + (chunk % 26) as u8);
        self.busy.fetch_sub(1, Relaxed);
        Ok(())
    }
}

fn watched(n: u64, delay_ms: u64) -> Arc<Watched> {
    Arc::new(Watched {
        chunks: n,
        delay: Duration::from_millis(delay_ms),
        busy: AtomicU32::new(0),
    })
}

/// A sequential reader of a file whose size is not known yet finds the next chunks already
/// rendering when it comes back: several at once, on several cores (the serial path rendered
/// only inside the reader's own call, so nothing ran between reads).
#[test]
fn a_reader_of_unknown_size_finds_chunks_rendering_between_its_reads() {
    let src = watched(60, 3);
    let cache = Arc::new(ChunkCache::new(64 << 20).with_threads(4));
    let owner: Arc<dyn Tensor> = Arc::new(MemTensor::f32(&[1], &[0.0]));
    let f = ChunkedText::new(src.clone(), owner, "watched", cache.clone());
    assert_eq!(f.known_size(), None);
    let mut out = Vec::new();
    let mut buf = vec![0u8; 700];
    let mut most_between_reads = 0;
    loop {
        let n = f.read_at(out.len() as u64, &mut buf).unwrap();
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
        std::thread::sleep(Duration::from_micros(300));
        most_between_reads = most_between_reads.max(src.busy.load(Relaxed));
    }
    assert_eq!(out, expected(60));
    assert!(
        most_between_reads >= 2,
        "at most {most_between_reads} chunk(s) rendering while the reader was away"
    );
    assert_eq!(f.known_size(), Some(out.len() as u64));
}

/// Such a reader renders every chunk once: the index learns each length from the chunk the
/// reader reads, with no second pass.
#[test]
fn a_sequential_read_of_unknown_size_renders_each_chunk_once() {
    for step in [1usize, 700, 8192, 1 << 20] {
        let n = 50u64;
        let (src, cache, f) = counted(n, 0, 3);
        assert_eq!(read_sequentially(&f, step), expected(n));
        wait_idle(&cache);
        for (i, r) in src.renders.iter().enumerate() {
            assert_eq!(r.load(Relaxed), 1, "step {step}: chunk {i}");
        }
        assert_eq!(f.known_size(), Some(expected(n).len() as u64));
    }
}

/// A streaming reader's passed chunks leave the cache (their buffers go to the next renders):
/// the cache holds about a read-ahead window, not the file; a chunk read again is rendered
/// again, the same.
#[test]
fn a_sequential_reader_leaves_no_passed_chunks_cached() {
    let n = 300u64;
    let (src, cache, f) = counted(n, 0, 2);
    assert_eq!(read_sequentially(&f, 700), expected(n));
    wait_idle(&cache);
    // Each chunk is ~1 KB (buffers may have grown to twice that).
    let window = WINDOW_PER_THREAD * 2;
    assert!(
        cache.used_bytes() <= (window + 4) * 2048,
        "{} bytes cached after reading {} chunks",
        cache.used_bytes(),
        n
    );
    let mut buf = vec![0u8; 100];
    let k = f.read_at(5000, &mut buf).unwrap();
    assert_eq!(&buf[..k], &expected(n)[5000..5000 + k]);
    // Chunk 4 holds bytes 4006..5010.
    assert_eq!(src.renders[4].load(Relaxed), 2);
}

/// A read far beyond what is learnt sizes the way there on every worker and keeps none of the
/// chunks it only measured.
#[test]
fn a_far_read_measures_the_way_and_keeps_little() {
    let n = 400u64;
    let (src, cache, f) = counted(n, 0, 3);
    let want = expected(n);
    let mut buf = vec![0u8; 50];
    let off = want.len() as u64 - 60;
    assert_eq!(f.read_at(off, &mut buf).unwrap(), 50);
    assert_eq!(&buf[..], &want[off as usize..off as usize + 50]);
    wait_idle(&cache);
    assert!(
        cache.used_bytes() < 20 * 1010,
        "{} bytes kept",
        cache.used_bytes()
    );
    let total: u32 = src.renders.iter().map(|r| r.load(Relaxed)).sum();
    assert!(total <= n as u32 + 10, "{total} renders for {n} chunks");
}

/// The background requester (niced, nobody waiting): it sizes on several threads, and leaves
/// a file alone while a reader reads it.
struct Quiet;
impl Requester for Quiet {
    fn gone(&self) -> bool {
        false
    }
    fn background(&self) -> bool {
        true
    }
}

#[test]
fn the_background_pass_renders_on_several_threads() {
    let src = watched(80, 2);
    let cache = Arc::new(ChunkCache::new(64 << 20).with_threads(4));
    let owner: Arc<dyn Tensor> = Arc::new(MemTensor::f32(&[1], &[0.0]));
    let f = Arc::new(ChunkedText::new(
        src.clone(),
        owner,
        "watched",
        cache.clone(),
    ));
    let most = AtomicU32::new(0);
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Relaxed) {
                most.fetch_max(src.busy.load(Relaxed), Relaxed);
                std::thread::sleep(Duration::from_micros(200));
            }
        });
        assert_eq!(f.size_for(&Quiet).unwrap(), expected(80).len() as u64);
        done.store(true, Relaxed);
    });
    assert!(
        most.load(Relaxed) >= 2,
        "at most {} at once",
        most.load(Relaxed)
    );
    // Nothing measured in the background is kept.
    wait_idle(&cache);
    assert_eq!(cache.used_bytes(), 0);
}

#[test]
fn the_background_pass_leaves_a_file_being_read_to_its_reader() {
    let n = 200u64;
    let src = Counted::new(n as usize, 1);
    let cache = Arc::new(ChunkCache::new(64 << 20).with_threads(2));
    let f = Arc::new(file(src.clone(), &cache));
    std::thread::scope(|s| {
        let reader = s.spawn(|| read_sequentially(&f, 4096));
        // Let the reader start first, as a `cat` of a just-listed file does.
        std::thread::sleep(Duration::from_millis(20));
        let size = f.size_for(&Quiet).unwrap();
        let got = reader.join().unwrap();
        assert_eq!(got, expected(n));
        assert_eq!(size, got.len() as u64);
    });
    wait_idle(&cache);
    let twice = src.renders.iter().filter(|r| r.load(Relaxed) > 1).count();
    assert!(twice <= 4, "{twice} chunks rendered twice");
}
