//! Who a piece of work is for, as the layouts ask it (`layout::Requester`): the process behind
//! a FUSE request, or the background size pass.
//!
//! fuser answers FUSE_INTERRUPT with ENOSYS (after which the kernel stops sending them), so a
//! request learns that its caller gave up by looking at the caller: once a signal is pending
//! on the calling thread and not blocked (Ctrl-C's SIGINT, or the SIGKILL the kernel queues
//! for a fatal one), the syscall waiting on us would be interrupted if it could be, and the
//! caller is only waiting for our answer to act on the signal. The check reads
//! `/proc/<tid>/status` at most every `CHECK_EVERY`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use modelfs_layout::Requester;

use super::tree::{Ino, Tree};

const CHECK_EVERY: Duration = Duration::from_millis(10);
/// Long work says how far it got this often.
const LOG_EVERY: Duration = Duration::from_secs(1);

/// Logs the progress of work that has been going on for more than a second.
pub(crate) struct ProgressLog<'a> {
    tree: &'a Tree,
    ino: Ino,
    started: Instant,
    last: Mutex<Instant>,
}

impl<'a> ProgressLog<'a> {
    pub(crate) fn new(tree: &'a Tree, ino: Ino) -> Self {
        let now = Instant::now();
        ProgressLog {
            tree,
            ino,
            started: now,
            last: Mutex::new(now),
        }
    }

    fn step(&self, done: u64, total: u64) {
        let now = Instant::now();
        let mut last = self.last.lock().unwrap_or_else(|e| e.into_inner());
        if now.duration_since(*last) < LOG_EVERY {
            return;
        }
        *last = now;
        let pct = (done.saturating_mul(100)).checked_div(total).unwrap_or(100);
        log::info!(
            "learning the size of {}: {pct}% after {:.1} s",
            self.tree.path_of(self.ino),
            now.duration_since(self.started).as_secs_f64()
        );
    }
}

/// The thread behind a FUSE request.
pub(crate) struct Caller<'a> {
    tid: u32,
    started: Instant,
    /// Milliseconds after `started` of the last look at the caller.
    checked_ms: AtomicU64,
    gone: AtomicBool,
    log: ProgressLog<'a>,
}

impl<'a> Caller<'a> {
    pub(crate) fn new(tree: &'a Tree, ino: Ino, tid: u32) -> Self {
        Caller {
            tid,
            started: Instant::now(),
            checked_ms: AtomicU64::new(0),
            gone: AtomicBool::new(false),
            log: ProgressLog::new(tree, ino),
        }
    }
}

impl Requester for Caller<'_> {
    fn gone(&self) -> bool {
        if self.gone.load(Ordering::Relaxed) {
            return true;
        }
        if self.tid == 0 {
            return false;
        }
        // First looked at once the request is `CHECK_EVERY` old: most answers take less, and
        // reading `/proc` for each of them made a walk of small files twice as slow.
        let now = self.started.elapsed().as_millis() as u64;
        let last = self.checked_ms.load(Ordering::Relaxed);
        if now < last.saturating_add(CHECK_EVERY.as_millis() as u64) {
            return false;
        }
        self.checked_ms.store(now.max(1), Ordering::Relaxed);
        let gone = signalled(self.tid);
        if gone {
            log::debug!("caller {} interrupted", self.tid);
            self.gone.store(true, Ordering::Relaxed);
        }
        gone
    }

    fn progress(&self, done: u64, total: u64) {
        self.log.step(done, total);
    }
}

/// The background size pass: gone once the mount ends.
pub(crate) struct Background<'a> {
    pub(crate) stop: &'a AtomicBool,
    pub(crate) log: ProgressLog<'a>,
}

impl Requester for Background<'_> {
    fn gone(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
    fn background(&self) -> bool {
        true
    }
    fn progress(&self, done: u64, total: u64) {
        self.log.step(done, total);
    }
}

/// True when thread `tid` has a signal pending that will end or stop what it waits for, or no
/// longer exists.
fn signalled(tid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{tid}/status")) {
        Ok(status) => pending_unblocked(&status),
        Err(_) => true,
    }
}

/// `1 << (n - 1)` for signal `n`.
const fn bit(n: u32) -> u64 {
    1 << (n - 1)
}

/// Signals whose default action is to ignore or to stop: pending, they say nothing about the
/// caller giving up. (A process that blocks SIGCHLD while spawning leaves it pending on the
/// whole group for a moment; answering EINTR then fails a `stat` no one interrupted.)
const HARMLESS: u64 = bit(17) | bit(18) | bit(19) | bit(20) | bit(21) | bit(22) | bit(23) | bit(28);
/// Caught signals that still mean "stop" (Python's KeyboardInterrupt, a shell's trap).
const STOP_REQUESTS: u64 = bit(1) | bit(2) | bit(3) | bit(15);

/// Parses a `/proc/<tid>/status` text: a pending (`SigPnd`, `ShdPnd`), unblocked (`SigBlk`),
/// not ignored (`SigIgn`) signal that is fatal by default and not caught (`SigCgt`), or is a
/// caught stop request.
fn pending_unblocked(status: &str) -> bool {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .unwrap_or(0)
    };
    let live = (field("SigPnd:") | field("ShdPnd:")) & !field("SigBlk:") & !field("SigIgn:");
    let caught = field("SigCgt:");
    live & ((!caught & !HARMLESS) | (caught & STOP_REQUESTS)) != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_signals_parse() {
        let quiet = "Name:\tcat\nSigPnd:\t0000000000000000\nShdPnd:\t0000000000000000\nSigBlk:\t0000000000000000\n";
        assert!(!pending_unblocked(quiet));
        let int = quiet.replace("ShdPnd:\t0000000000000000", "ShdPnd:\t0000000000000002");
        assert!(pending_unblocked(&int));
        let blocked = int.replace("SigBlk:\t0000000000000000", "SigBlk:\t0000000000000002");
        assert!(!pending_unblocked(&blocked));
        let kill = quiet.replace("SigPnd:\t0000000000000000", "SigPnd:\t0000000000000100");
        assert!(pending_unblocked(&kill));
        // SIGCHLD left pending on the group by a spawning thread: nobody gave up.
        let chld = quiet.replace("ShdPnd:\t0000000000000000", "ShdPnd:\t0000000000010000");
        assert!(!pending_unblocked(&chld));
        let caught_chld = format!("{chld}SigCgt:\t0000000000010000\n");
        assert!(!pending_unblocked(&caught_chld));
        // A caught SIGINT (Python) is a stop request; an ignored one is not.
        let caught_int = format!("{int}SigCgt:\t0000000000000002\n");
        assert!(pending_unblocked(&caught_int));
        let ignored_int = format!("{int}SigIgn:\t0000000000000002\n");
        assert!(!pending_unblocked(&ignored_int));
        // A caught SIGUSR1 is the caller's own business.
        let usr1 = quiet.replace("SigPnd:\t0000000000000000", "SigPnd:\t0000000000000200");
        assert!(!pending_unblocked(&format!(
            "{usr1}SigCgt:\t0000000000000200\n"
        )));
    }

    #[test]
    fn this_thread_is_not_signalled_and_a_dead_one_is() {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() } as u32;
        assert!(!signalled(tid));
        assert!(signalled(u32::MAX - 1));
    }
}
