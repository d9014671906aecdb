//! Filling the kernel's page cache ahead of a reader (FUSE_NOTIFY_STORE), from threads of
//! its own: the bytes a library is about to fault in or read are already there, so its next
//! faults and reads are page-cache hits and not round trips through the daemon, and the
//! copying runs on the other cores while the reader works.
//!
//! What is pushed follows what each open file's reader does (`Follow`):
//! - a sequential reader (safetensors' mmap faults, a zip member read in order, `cat`) gets
//!   a window ahead of it twice as long as its run of reads so far (`WINDOW_MIN` to
//!   `WINDOW_MAX`, never beyond `ahead=`);
//! - a reader that jumps about (rows through `np.load(mmap_mode='r')`, TensorFlow reading
//!   tensors in its own order) in a file no larger than `ahead=` gets the whole file, once
//!   per open file, from where it is first;
//! - each chunk of a file is queued once while the file is open, whoever asked.
//!
//! Bytes a view reads anyway before anyone reads the file (the `.npz` CRC pass) are not
//! stored as they go by: a store while no reader works is time the reader waits for, while
//! one ahead of a reader runs beside it (measured on the `.npz` first load: 25 % faster).
//!
//! Invariants:
//! - A push starts on a page and covers whole pages, or ends at the end of the file (the
//!   kernel marks only whole pages up to date, and a store past the end would grow the file).
//! - A file's bytes never change and an inode number is never reused (`tree`), so a push
//!   can never store bytes that are not the file's, however late it lands.
//! - Pushes are sent by the push threads only, never from a thread serving a request: a
//!   store waits for pages the kernel has locked for a read in flight, and that read must be
//!   free to be answered.
//! - Work queued is bounded (`QUEUE_MAX` bytes); past it a push is dropped, never waited for.
//!   A push of a file closed meanwhile is dropped.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};

use modelfs_io::source::cursor::Cursor;
use modelfs_io::source::ReadCtx;
use modelfs_layout::{FileContent, Patient, Reading};

/// An inode number (as `tree` hands them out).
type Ino = u64;

/// The kernel's page size (stores start on pages).
const PAGE: u64 = 4096;
/// Bytes per store: big enough that the per-message cost vanishes, small enough that a
/// reader right behind a push waits little for it.
const CHUNK: u64 = 2 << 20;
/// A sequential reader's first window, and the largest.
const WINDOW_MIN: u64 = 8 << 20;
const WINDOW_MAX: u64 = 128 << 20;
/// Reads that did not follow the one before, after which a file is pushed whole.
const JUMPS_FOR_WHOLE: u32 = 3;
/// Bytes of queued pushes, at most (the queue holds what to read, not the bytes: this bounds
/// the work ahead, which `ahead=` bounds per reader).
const QUEUE_MAX: u64 = 64 << 30;
/// A read that starts this close to where the last one ended still follows it: the kernel
/// sends a reader's read-ahead requests on several threads, so they arrive a little out of
/// order.
const SLACK: u64 = 4 << 20;

/// Where pushed bytes go: the kernel's page cache of a file (`notices::StoreSink`), or a test's
/// record.
pub(crate) trait Sink: Send + Sync {
    /// Stores `data` at `offset` of file `ino` in the page cache.
    fn store(&self, ino: Ino, offset: u64, data: &[u8]) -> std::io::Result<()>;
}

/// What an open file's reader has done, as far as pushing goes.
#[derive(Default)]
pub(crate) struct Follow {
    state: Mutex<FollowState>,
    chunks: Arc<Chunks>,
}

#[derive(Default)]
struct FollowState {
    /// Where the last read ended, and where the reader's sequential run started.
    last_end: u64,
    run_start: u64,
    window: u64,
    jumps: u32,
    /// The file was queued whole.
    whole: bool,
}

/// The chunks of one file queued already, shared by its open handles: a bit per
/// `CHUNK`, grown as far as needed. (Forgotten with the file's last handle: pages the kernel
/// dropped meanwhile may be pushed again by a later reader.)
#[derive(Default)]
struct Chunks(Mutex<Vec<u64>>);

impl Chunks {
    /// The chunks of `[from, to)` not queued yet, marked queued now.
    fn claim(&self, from: u64, to: u64) -> Vec<u64> {
        let mut fresh = Vec::new();
        if to <= from {
            return fresh;
        }
        let mut bits = self.0.lock().unwrap_or_else(|e| e.into_inner());
        for c in from / CHUNK..=(to - 1) / CHUNK {
            let (word, bit) = ((c / 64) as usize, c % 64);
            if bits.len() <= word {
                bits.resize(word + 1, 0);
            }
            if bits[word] & (1 << bit) == 0 {
                bits[word] |= 1 << bit;
                fresh.push(c);
            }
        }
        fresh
    }
}

/// A push: `[at, end)` of `content`, for file `ino`, while its opener holds `live`.
struct Job {
    ino: Ino,
    /// The reader's cursor: a remote source's stream serves the push as it would the reader.
    cursor: Arc<Cursor>,
    content: Arc<dyn FileContent>,
    at: u64,
    end: u64,
    live: Weak<()>,
}

impl Job {
    fn len(&self) -> u64 {
        self.end - self.at
    }
}

/// Where new work goes in the queue.
#[derive(Clone, Copy)]
enum Urgency {
    /// Right ahead of a reader: before any `Later`.
    Next,
    /// A whole file: when no `Next` is left.
    Later,
}

#[derive(Default)]
struct Queue {
    /// Taken first.
    next: VecDeque<Job>,
    later: VecDeque<Job>,
    bytes: u64,
    closed: bool,
}

/// The push threads of a mount and their queue.
pub(crate) struct Pusher {
    shared: Arc<Shared>,
}

struct Shared {
    /// The most bytes pushed ahead of one reader (`ahead=`).
    ahead: u64,
    /// The largest file pushed whole (`ahead=` for a local source; 0 for a remote one, whose
    /// bytes cost a download each).
    whole_max: u64,
    sink: OnceLock<Arc<dyn Sink>>,
    queue: Mutex<Queue>,
    ready: Condvar,
    /// Bytes stored, for tests and the log.
    stored: AtomicU64,
    /// Each open file's chunks queued (`Follow::chunks`).
    files: Mutex<HashMap<Ino, Weak<Chunks>>>,
}

impl Pusher {
    /// A pusher that pushes nothing until `start` gives it a sink.
    pub(crate) fn new(ahead: u64, whole_max: u64) -> Pusher {
        Pusher {
            shared: Arc::new(Shared {
                ahead,
                whole_max: whole_max.min(ahead),
                sink: OnceLock::new(),
                queue: Mutex::default(),
                ready: Condvar::new(),
                stored: AtomicU64::new(0),
                files: Mutex::default(),
            }),
        }
    }

    /// Starts `threads` push threads storing into `sink`. Once per pusher; nothing happens
    /// when pushing is off (`ahead=0`).
    pub(crate) fn start(&self, sink: Arc<dyn Sink>, threads: usize) {
        if self.shared.ahead == 0 || self.shared.sink.set(sink).is_err() {
            return;
        }
        for i in 0..threads.max(1) {
            let shared = Arc::clone(&self.shared);
            let spawned = std::thread::Builder::new()
                .name(format!("modelfs-push-{i}"))
                .spawn(move || shared.work());
            if let Err(e) = spawned {
                log::warn!("no push thread ({e})");
            }
        }
    }

    /// The state of a new open of file `ino`: its own pattern, the file's chunks.
    pub(crate) fn follower(&self, ino: Ino) -> Follow {
        let mut files = self.shared.files.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(chunks) = files.get(&ino).and_then(Weak::upgrade) {
            return Follow {
                state: Mutex::default(),
                chunks,
            };
        }
        // Closed files' entries go when the map has doubled since the last sweep.
        if files.len() >= 64 && files.len().is_power_of_two() {
            files.retain(|_, c| c.strong_count() > 0);
        }
        let chunks = Arc::new(Chunks::default());
        files.insert(ino, Arc::downgrade(&chunks));
        Follow {
            state: Mutex::default(),
            chunks,
        }
    }

    fn on(&self) -> bool {
        self.shared.sink.get().is_some()
    }

    /// Bytes stored so far.
    #[cfg(test)]
    pub(crate) fn stored(&self) -> u64 {
        self.shared.stored.load(Ordering::Relaxed)
    }

    /// Told that the reader of an open file (`follow`, alive while `live` is) read `[offset,
    /// end)` of `content` (of `size` bytes, file `ino`): queues what it will want next.
    pub(crate) fn follow(
        &self,
        follow: &Follow,
        ino: Ino,
        content: &Arc<dyn FileContent>,
        size: u64,
        (offset, end): (u64, u64),
        (live, cursor): (&Arc<()>, &Arc<Cursor>),
    ) {
        if !self.on() {
            return;
        }
        let ahead = self.shared.ahead;
        let (chunks, urgency) = {
            let mut s = follow.state.lock().unwrap_or_else(|e| e.into_inner());
            let follows = offset <= s.last_end.saturating_add(SLACK)
                && offset.saturating_add(SLACK) >= s.last_end;
            if follows {
                s.last_end = s.last_end.max(end);
                // Twice what the run has read so far, as the kernel's read-ahead grows.
                let run = s.last_end - s.run_start.min(s.last_end);
                s.window = run
                    .saturating_mul(2)
                    .clamp(WINDOW_MIN, WINDOW_MAX.min(ahead).max(WINDOW_MIN));
                let (from, to) = (s.last_end, s.last_end.saturating_add(s.window).min(size));
                (follow.chunks.claim(from, to), Urgency::Next)
            } else {
                s.jumps = s.jumps.saturating_add(1);
                s.last_end = end;
                s.run_start = offset;
                s.window = 0;
                if s.jumps >= JUMPS_FOR_WHOLE && size <= self.shared.whole_max && !s.whole {
                    s.whole = true;
                    // From where the reader is, then the part before it.
                    let mut c = follow.chunks.claim(end, size);
                    c.extend(follow.chunks.claim(0, end));
                    (c, Urgency::Later)
                } else {
                    (Vec::new(), Urgency::Later)
                }
            }
        };
        if chunks.is_empty() {
            return;
        }
        let work = chunks
            .into_iter()
            .map(|c| {
                let at = c * CHUNK;
                Job {
                    ino,
                    cursor: Arc::clone(cursor),
                    content: Arc::clone(content),
                    at,
                    end: (at + CHUNK).min(size),
                    live: Arc::downgrade(live),
                }
            })
            .collect();
        self.shared.put(work, urgency);
    }
}

impl Drop for Pusher {
    fn drop(&mut self) {
        let mut q = self.shared.queue.lock().unwrap_or_else(|e| e.into_inner());
        q.closed = true;
        q.next.clear();
        q.later.clear();
        drop(q);
        self.shared.ready.notify_all();
    }
}

impl Shared {
    /// Queues `work`, as much of it as fits under `QUEUE_MAX`.
    fn put(&self, work: Vec<Job>, urgency: Urgency) {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        let mut kept = Vec::with_capacity(work.len());
        for w in work {
            if q.bytes + w.len() > QUEUE_MAX {
                break;
            }
            q.bytes += w.len();
            kept.push(w);
        }
        let work = kept;
        match urgency {
            Urgency::Next => q.next.extend(work),
            Urgency::Later => q.later.extend(work),
        }
        drop(q);
        self.ready.notify_all();
    }

    fn next(&self) -> Option<Job> {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if q.closed {
                return None;
            }
            if let Some(w) = q.next.pop_front().or_else(|| q.later.pop_front()) {
                q.bytes -= w.len();
                return Some(w);
            }
            // Idle: the buffers this thread kept for its reads go.
            modelfs_io::source::scratch::let_go();
            q = self.ready.wait(q).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// A push thread: takes work until the pusher is dropped.
    fn work(&self) {
        let Some(sink) = self.sink.get() else {
            return;
        };
        while let Some(j) = self.next() {
            if j.live.strong_count() == 0 {
                continue;
            }
            debug_assert!(j.at % PAGE == 0 && j.end > j.at);
            let len = (j.end - j.at) as usize;
            // The pushed bytes go to the kernel at once: a mapped file's are lent, not copied.
            let req = Reading {
                req: &Patient,
                ctx: ReadCtx::of(&j.cursor).lending(),
            };
            let (ino, at, bytes) = match j.content.read(j.at, len, &req) {
                Ok(b) if !b.is_empty() => (j.ino, j.at, b),
                Ok(_) => continue,
                Err(e) => {
                    log::debug!("push of inode {} at {}: {e}", j.ino, j.at);
                    continue;
                }
            };
            debug_assert!(at % PAGE == 0);
            match sink.store(ino, at, &bytes) {
                Ok(()) => {
                    log::trace!("pushed inode {ino} at {at}: {} bytes", bytes.len());
                    self.stored.fetch_add(bytes.len() as u64, Ordering::Relaxed);
                }
                // The kernel let go of the file: nothing to fill.
                Err(e) => log::debug!("store into inode {ino} at {at}: {e}"),
            }
        }
    }
}
