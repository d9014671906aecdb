//! Who renders the chunks of one text file, and when. Rendering a chunk needs only its number,
//! not its offset, so chunks are rendered ahead of what is known, on every core, and each
//! rendered chunk also teaches the index its length:
//!
//! - **Read-ahead** (`queue`, kept in the cache): the chunks just ahead of a sequential reader,
//!   whether or not the file's size is known yet. A reader of a size-unknown file never waits
//!   on one chunk at a time: it reads what the workers rendered while it was away.
//! - **Size pass** (`urgent`, `background`: lengths only, nothing kept): the chunks from the
//!   frontier on, for someone who wants the whole index (or an offset far beyond what is
//!   learnt) — at full speed for a foreground request, on niced threads for the background
//!   pass, which also stands aside while the file is being read (a reader teaches the index
//!   the same lengths, and the pass would render the reader's chunks a second time).
//!
//! Invariants:
//! - A chunk is rendered by at most one party at a time: whoever renders it marks it in flight
//!   first (`inflight`); a reader needing an in-flight chunk waits for it.
//! - At most `threads` foreground and `threads` background workers per file, and at most
//!   `2 × threads` per cache; workers are plain threads that exit when nothing is left to do.
//!   They hold the chunk source and the cache, never the file object.
//! - Read-ahead stays within `window()` chunks of the reader; a size pass keeps nothing; so
//!   memory is bounded by the cache whatever the file's size.
//! - A worker's failure is dropped: the chunk stays unlearnt, and whoever needs it renders it
//!   itself and gets the error (so a transient fault is never remembered).

use std::cell::RefCell;
use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::learnt::Learnt;
use super::ChunkSource;
use crate::cache::{ChunkCache, ChunkOffsets};
use crate::source::ReadCtx;
use crate::LayoutError;

/// Chunks rendered ahead of a sequential reader, per core.
pub(crate) const WINDOW_PER_THREAD: u64 = 4;

/// A read counts as sequential when it starts within this many of its own lengths of the
/// previous read's end (the kernel's read-ahead requests, served by several FUSE threads, may
/// arrive slightly out of order).
const SEQUENTIAL_SLACK_READS: u64 = 2;

/// The background pass leaves a file alone for this long after a read of it.
const READER_QUIET: Duration = Duration::from_millis(200);

thread_local! {
    /// Where a size pass renders a chunk it does not keep.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// What is known of a file's index and who is rendering what.
pub(super) struct Plan {
    pub(super) learnt: Learnt,
    /// The complete index (then `learnt` is empty).
    pub(super) full: Option<Arc<ChunkOffsets>>,
    /// The cache and the persistent store were asked once already.
    pub(super) looked: bool,
    /// `full` was completed here and not yet handed to the cache and the store.
    pub(super) unpublished: bool,
    /// Chunks to render and keep for a reader, nearest first.
    queue: VecDeque<u64>,
    /// Chunks being rendered now.
    inflight: HashSet<u64>,
    /// The next chunk a size pass looks at.
    measure_next: u64,
    /// Foreground requests waiting for a size pass (a size, an offset far ahead).
    pub(super) urgent: usize,
    /// Background requests waiting for a size pass.
    pub(super) background: usize,
    workers: usize,
    bg_workers: usize,
    /// End offset of the last read (0: no read yet).
    last_end: u64,
    /// Every chunk below this one has been queued or read already.
    scheduled_to: u64,
    /// Chunks below this one that the sequential reader passed are out of the cache.
    released_to: u64,
    last_read: Option<Instant>,
}

/// One chunk to render: kept in the cache under `namespace` (read-ahead) or only measured;
/// its reads are made as `ctx` says (the reader's it is rendered for).
pub(super) struct Job {
    ctx: ReadCtx,
    chunk: u64,
    keep: bool,
    namespace: u64,
    /// Its length, when the index knows it already (checked after rendering).
    want: Option<u64>,
}

/// A rendered chunk's length, and its bytes when kept.
type Rendered = (u64, Option<Arc<Vec<u8>>>);

/// Workers to start (foreground, background).
pub(super) type Hire = (usize, usize);

pub(super) struct Crew {
    pub(super) source: Arc<dyn ChunkSource>,
    pub(super) cache: Arc<ChunkCache>,
    /// Cache namespace of chunks rendered while the index is partial (and of the index
    /// completed here).
    pub(super) namespace: u64,
    plan: Mutex<Plan>,
    changed: Condvar,
}

impl Plan {
    fn len_of(&self, c: u64) -> Option<u64> {
        match &self.full {
            Some(f) => (c < f.chunks()).then(|| f.chunk_len(c)),
            None => self.learnt.len_of(c),
        }
    }

    fn namespace(&self, own: u64) -> u64 {
        self.full.as_ref().map_or(own, |f| f.namespace)
    }

    /// Whether a reader read the file within `READER_QUIET`.
    fn being_read(&self) -> bool {
        self.last_read.is_some_and(|t| t.elapsed() < READER_QUIET)
    }

    pub(super) fn background_may_measure(&self) -> bool {
        self.background > 0 && self.urgent == 0 && self.queue.is_empty() && !self.being_read()
    }

    pub(super) fn is_inflight(&self, c: u64) -> bool {
        self.inflight.contains(&c)
    }
}

impl Crew {
    pub(super) fn new(source: Arc<dyn ChunkSource>, cache: Arc<ChunkCache>) -> Crew {
        Crew {
            source,
            namespace: cache.new_namespace(),
            cache,
            plan: Mutex::new(Plan {
                learnt: Learnt::new(),
                full: None,
                looked: false,
                unpublished: false,
                queue: VecDeque::new(),
                inflight: HashSet::new(),
                measure_next: 0,
                urgent: 0,
                background: 0,
                workers: 0,
                bg_workers: 0,
                last_end: 0,
                scheduled_to: 0,
                released_to: 0,
                last_read: None,
            }),
            changed: Condvar::new(),
        }
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, Plan> {
        self.plan.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until something changes (a chunk is done) or `timeout` passes.
    pub(super) fn wait<'a>(
        &self,
        st: MutexGuard<'a, Plan>,
        timeout: Duration,
    ) -> MutexGuard<'a, Plan> {
        self.changed
            .wait_timeout(st, timeout)
            .unwrap_or_else(|e| e.into_inner())
            .0
    }

    /// Chunks read ahead of a sequential reader.
    pub(super) fn window(&self) -> u64 {
        WINDOW_PER_THREAD * self.cache.threads().max(1) as u64
    }

    /// Queues chunks `from..=to` (those not queued, rendered or cached already) for a reader.
    pub(super) fn queue_for_reader(&self, st: &mut Plan, from: u64, to: u64) {
        let to = to.min(self.source.num_chunks().saturating_sub(1));
        let ns = st.namespace(self.namespace);
        for c in st.scheduled_to.max(from)..=to {
            if !st.inflight.contains(&c) && self.cache.get(ns, c).is_none() {
                st.queue.push_back(c);
            }
        }
        st.scheduled_to = st.scheduled_to.max(to.saturating_add(1));
    }

    /// Queues the chunks from the frontier on for a reader waiting there: one per worker for
    /// its first read (a `head` needs one chunk), a whole window once it reads on.
    pub(super) fn queue_near_frontier(&self, st: &mut Plan) {
        let ahead = if st.last_end == 0 {
            self.cache.threads().max(1) as u64
        } else {
            self.window()
        };
        let frontier = st.learnt.frontier();
        self.queue_for_reader(st, frontier, frontier + ahead - 1);
    }

    /// Notes a read of `offset..end` touching chunks `..=last_chunk`; when it continues the
    /// previous read, queues the chunks ahead. Returns the workers to hire.
    pub(super) fn after_read(&self, st: &mut Plan, offset: u64, end: u64, last_chunk: u64) -> Hire {
        st.last_read = Some(Instant::now());
        let slack = end
            .saturating_sub(offset)
            .saturating_mul(SEQUENTIAL_SLACK_READS);
        let sequential = st.last_end > 0
            && offset <= st.last_end.saturating_add(slack)
            && offset.saturating_add(slack) >= st.last_end;
        if !sequential {
            // A seek: start over from here (a later sequential pass gets read-ahead again);
            // chunks queued for the old position are of no use now.
            st.last_end = end;
            st.scheduled_to = 0;
            st.released_to = last_chunk;
            st.queue.clear();
            return (0, 0);
        }
        st.last_end = st.last_end.max(end);
        // Chunks two behind the reader are passed: dropped from the cache, their buffers kept
        // for the next renders. A streaming read then turns over a window's worth of buffers
        // instead of filling the cache with fresh pages (a page fault and a zeroed page per
        // 4 KiB) holding text nobody reads again (a file of known size is in the kernel's
        // page cache; one read while its size is unknown is read once).
        let ns = st.namespace(self.namespace);
        let passed = last_chunk.saturating_sub(1);
        if passed > st.released_to {
            // Nor rendered again for it: one the reader rendered itself may still be queued.
            st.queue.retain(|&c| c >= passed);
            for c in st.released_to..passed {
                self.cache.release(ns, c);
            }
            st.released_to = passed;
        }
        let to = last_chunk.saturating_add(self.window());
        self.queue_for_reader(st, last_chunk + 1, to);
        self.hire(st)
    }

    /// The workers to start for the work planned now (slots are taken here; `start` them).
    pub(super) fn hire(&self, st: &mut Plan) -> Hire {
        let threads = self.cache.threads().max(1);
        let fg_work = if st.urgent > 0 && st.full.is_none() {
            // The caller renders a chunk itself: workers for the others, none for a file of
            // one chunk (a thread started per small file made a walk of 10^5 of them slow).
            let unclaimed = self
                .source
                .num_chunks()
                .saturating_sub(st.learnt.frontier())
                .saturating_sub(st.inflight.len() as u64 + 1);
            threads.min(usize::try_from(unclaimed).unwrap_or(usize::MAX))
        } else {
            st.queue.len().min(threads)
        };
        let mut fg = 0;
        while st.workers + fg < fg_work && self.cache.try_start_worker() {
            fg += 1;
        }
        st.workers += fg;
        let mut bg = 0;
        if st.full.is_none() && st.background_may_measure() {
            while st.bg_workers + bg < threads && self.cache.try_start_worker() {
                bg += 1;
            }
        }
        st.bg_workers += bg;
        (fg, bg)
    }

    /// Starts workers hired by `hire` (call without the plan's lock).
    pub(super) fn start(self: &Arc<Self>, (fg, bg): Hire) {
        for i in 0..fg + bg {
            let background = i >= fg;
            let me = self.clone();
            let started = std::thread::Builder::new()
                .name(
                    if background {
                        "modelfs-size"
                    } else {
                        "modelfs-render"
                    }
                    .into(),
                )
                .spawn(move || me.work(background));
            if started.is_err() {
                let mut st = self.lock();
                if background {
                    st.bg_workers -= 1;
                } else {
                    st.workers -= 1;
                }
                self.cache.end_worker();
            }
        }
    }

    /// The next chunk for a worker (`background`: a niced one), marked in flight.
    fn next_job(&self, st: &mut Plan, background: bool) -> Option<Job> {
        let ns = st.namespace(self.namespace);
        if !background {
            while let Some(c) = st.queue.pop_front() {
                if st.inflight.insert(c) {
                    // Rendered ahead for whoever reads next: no handle's read-ahead state
                    // (a handle released meanwhile keeps nothing alive here).
                    return Some(Job {
                        ctx: ReadCtx::default(),
                        chunk: c,
                        keep: true,
                        namespace: ns,
                        want: st.len_of(c),
                    });
                }
            }
        }
        let measuring = st.full.is_none()
            && if background {
                st.background_may_measure()
            } else {
                st.urgent > 0
            };
        if !measuring {
            return None;
        }
        let chunks = self.source.num_chunks();
        let mut c = st.measure_next.max(st.learnt.frontier());
        while c < chunks && (st.inflight.contains(&c) || st.learnt.len_of(c).is_some()) {
            c += 1;
        }
        if c >= chunks {
            return None;
        }
        st.measure_next = c + 1;
        st.inflight.insert(c);
        Some(Job {
            ctx: ReadCtx::default(),
            chunk: c,
            keep: false,
            namespace: ns,
            want: None,
        })
    }

    /// Claims chunk `c` for the caller to render itself, if nobody is rendering it and its
    /// length is unknown (the frontier when every worker failed on it or none could start).
    pub(super) fn claim_unlearnt(
        &self,
        st: &mut Plan,
        ctx: &ReadCtx,
        c: u64,
        keep: bool,
    ) -> Option<Job> {
        if st.full.is_some()
            || c >= self.source.num_chunks()
            || st.learnt.len_of(c).is_some()
            || !st.inflight.insert(c)
        {
            return None;
        }
        Some(Job {
            ctx: ctx.clone(),
            chunk: c,
            keep,
            namespace: st.namespace(self.namespace),
            want: None,
        })
    }

    /// A worker: renders chunks until there is nothing left to do, then exits.
    fn work(&self, background: bool) {
        if background {
            // SAFETY: a plain syscall on the calling thread; failure leaves the default priority.
            unsafe {
                // The raw syscall, not glibc's gettid(): that wrapper is glibc 2.30's, and the wheel
                // runs on glibc 2.17 (manylinux2014).
                libc::setpriority(
                    libc::PRIO_PROCESS,
                    libc::syscall(libc::SYS_gettid) as libc::id_t,
                    19,
                );
            }
        }
        loop {
            let job = {
                let mut st = self.lock();
                match self.next_job(&mut st, background) {
                    Some(j) => j,
                    None => {
                        if background {
                            st.bg_workers -= 1;
                        } else {
                            st.workers -= 1;
                        }
                        break;
                    }
                }
            };
            // Errors are for whoever needs the chunk: it renders it again itself.
            let _ = self.run(job);
        }
        self.cache.end_worker();
    }

    /// Renders a claimed chunk: records its length, keeps it if asked, and ends the claim.
    /// Returns the kept bytes.
    pub(super) fn run(&self, job: Job) -> Result<Option<Arc<Vec<u8>>>, LayoutError> {
        // Should rendering panic, the claim still ends (nobody waits for it forever).
        struct Unclaim<'a>(&'a Crew, u64, bool);
        impl Drop for Unclaim<'_> {
            fn drop(&mut self) {
                if !self.2 {
                    self.0.lock().inflight.remove(&self.1);
                    self.0.changed.notify_all();
                }
            }
        }
        let mut unclaim = Unclaim(self, job.chunk, false);
        let result = if job.keep {
            self.render_kept(&job)
        } else {
            SCRATCH.with(|s| {
                let mut s = s.borrow_mut();
                s.clear();
                self.render_into(&job, &mut s)
                    .map(|()| (s.len() as u64, None))
            })
        };
        unclaim.2 = true;
        let mut st = self.lock();
        st.inflight.remove(&job.chunk);
        let recorded = match &result {
            Ok((len, _)) if st.full.is_none() => self.record(&mut st, job.chunk, *len),
            _ => Ok(()),
        };
        drop(st);
        self.changed.notify_all();
        recorded?;
        result.map(|(_, kept)| kept)
    }

    fn render_kept(&self, job: &Job) -> Result<Rendered, LayoutError> {
        if let Some(v) = self.cache.get(job.namespace, job.chunk) {
            return Ok((v.len() as u64, Some(v)));
        }
        // `want` may come from a persistent index file, which can be corrupt: reserve at most a
        // few chunks' worth; rendering grows the buffer if it really needs more.
        let cap = job.want.map_or(0, |w| w.min(4 << 20)) as usize;
        let mut v = self.cache.buffer(cap);
        self.render_into(job, &mut v)?;
        let v = Arc::new(v);
        self.cache.insert(job.namespace, job.chunk, v.clone());
        Ok((v.len() as u64, Some(v)))
    }

    fn render_into(&self, job: &Job, out: &mut Vec<u8>) -> Result<(), LayoutError> {
        self.source.render(&job.ctx, job.chunk, out)?;
        self.cache.count_rendered(1);
        match job.want {
            Some(want) if out.len() as u64 != want => Err(LayoutError::Mismatch {
                what: "text chunk bytes rendered",
                got: out.len() as u64,
                want,
            }),
            _ => Ok(()),
        }
    }

    /// Records chunk `c`'s length; completes the index when it was the last one missing.
    fn record(&self, st: &mut Plan, c: u64, len: u64) -> Result<(), LayoutError> {
        st.learnt.record(c, len)?;
        if st.learnt.frontier() == self.source.num_chunks() {
            self.complete(st);
        }
        Ok(())
    }

    /// Turns the learnt prefix, which covers every chunk, into the complete index.
    pub(super) fn complete(&self, st: &mut Plan) {
        debug_assert_eq!(st.learnt.frontier(), self.source.num_chunks());
        st.full = Some(Arc::new(ChunkOffsets {
            namespace: self.namespace,
            offsets: st.learnt.take(),
        }));
        st.unpublished = true;
        st.queue.clear();
    }

    /// Chunk `i` of `want` bytes in `namespace` for a reader: from the cache (rendered by
    /// read-ahead), after waiting for whoever renders it now, or rendered here.
    pub(super) fn chunk(
        &self,
        ctx: &ReadCtx,
        namespace: u64,
        i: u64,
        want: u64,
    ) -> Result<Arc<Vec<u8>>, LayoutError> {
        if let Some(c) = self.cache.get(namespace, i) {
            return Ok(c);
        }
        let mut st = self.lock();
        while st.inflight.contains(&i) {
            st = self.changed.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        if let Some(c) = self.cache.get(namespace, i) {
            return Ok(c);
        }
        st.inflight.insert(i);
        drop(st);
        let job = Job {
            ctx: ctx.clone(),
            chunk: i,
            keep: true,
            namespace,
            want: Some(want),
        };
        self.run(job)?
            .ok_or(LayoutError::Internal("a kept chunk was not kept"))
    }

    /// Workers running for this file (tests).
    #[cfg(test)]
    pub(super) fn workers(&self) -> usize {
        let st = self.lock();
        st.workers + st.bg_workers
    }
}
