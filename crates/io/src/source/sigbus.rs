//! Keeps a mapped file that is truncated under a reader from killing the process.
//!
//! Touching a page of a mapping beyond the end of its (now shorter) file raises SIGBUS. The
//! handler installed here looks the faulting address up among the registered mappings; if it
//! belongs to one, it maps a private zero page over the faulting page (so the interrupted
//! copy completes, with zeros) and marks the mapping as faulted. `MmapFile`'s consistency
//! check then fails, so the zeros are never served: every reader checks after copying.
//! Faults outside registered mappings go to the previous handler (Rust's stack-overflow
//! handler) or the default action.
//!
//! The registry is a fixed array of slots read lock-free by the handler (only atomics and
//! `mmap`, a raw system call, are used there).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Once, OnceLock};

const SLOTS: usize = 1 << 14;

struct Slot {
    used: AtomicBool,
    /// Start address of the mapping; 0 while the slot is being filled or is free.
    start: AtomicUsize,
    len: AtomicUsize,
    faulted: AtomicBool,
}

static REGISTRY: [Slot; SLOTS] = [const {
    Slot {
        used: AtomicBool::new(false),
        start: AtomicUsize::new(0),
        len: AtomicUsize::new(0),
        faulted: AtomicBool::new(false),
    }
}; SLOTS];

static PREVIOUS: OnceLock<libc::sigaction> = OnceLock::new();
static PAGE: AtomicUsize = AtomicUsize::new(4096);
static INSTALL: Once = Once::new();

/// A registered mapping; unregisters on drop (before the mapping itself is unmapped).
#[derive(Debug)]
pub(crate) struct Guard(Option<usize>);

impl Guard {
    /// True when a read of this mapping hit a page past the end of the file.
    pub(crate) fn faulted(&self) -> bool {
        self.0
            .is_some_and(|i| REGISTRY[i].faulted.load(Ordering::Acquire))
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(i) = self.0 {
            let s = &REGISTRY[i];
            s.start.store(0, Ordering::Release);
            s.len.store(0, Ordering::Release);
            s.faulted.store(false, Ordering::Release);
            s.used.store(false, Ordering::Release);
        }
    }
}

/// Registers `start..start+len`; without a free slot the mapping is unprotected (logged).
pub(crate) fn register(start: *const u8, len: usize) -> Guard {
    INSTALL.call_once(install);
    for (i, s) in REGISTRY.iter().enumerate() {
        if s.used
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            s.faulted.store(false, Ordering::Release);
            s.len.store(len, Ordering::Release);
            s.start.store(start as usize, Ordering::Release);
            return Guard(Some(i));
        }
    }
    log::warn!("more than {SLOTS} mapped files: a truncated file may crash the process");
    Guard(None)
}

fn install() {
    // SAFETY: plain sysconf / sigaction calls with valid arguments.
    unsafe {
        let page = libc::sysconf(libc::_SC_PAGESIZE);
        if page > 0 {
            PAGE.store(page as usize, Ordering::Relaxed);
        }
        let mut new: libc::sigaction = std::mem::zeroed();
        new.sa_sigaction = handler as *const () as usize;
        new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        libc::sigemptyset(&mut new.sa_mask);
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGBUS, &new, &mut old) == 0 {
            let _ = PREVIOUS.set(old);
        }
    }
}

extern "C" fn handler(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: `info` is the kernel's siginfo for this signal.
    let addr = unsafe { (*info).si_addr() } as usize;
    let page = PAGE.load(Ordering::Relaxed);
    for s in REGISTRY.iter() {
        let start = s.start.load(Ordering::Acquire);
        if start == 0 || addr < start || addr - start >= s.len.load(Ordering::Acquire) {
            continue;
        }
        // SAFETY: replaces one page of our own read-only file mapping with zeros; the
        // mapping stays owned by its `MmapFile` and is unmapped as a whole on drop.
        let p = unsafe {
            libc::mmap(
                (addr & !(page - 1)) as *mut libc::c_void,
                page,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if p != libc::MAP_FAILED {
            s.faulted.store(true, Ordering::Release);
            return;
        }
        break;
    }
    // Not ours: hand over to the previous disposition.
    match PREVIOUS.get() {
        Some(prev)
            if prev.sa_flags & libc::SA_SIGINFO != 0
                && prev.sa_sigaction != libc::SIG_DFL
                && prev.sa_sigaction != libc::SIG_IGN =>
        {
            // SAFETY: the previous handler was installed with SA_SIGINFO, so it has this
            // signature.
            let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                unsafe { std::mem::transmute(prev.sa_sigaction) };
            f(sig, info, ctx);
        }
        Some(prev) if prev.sa_sigaction != libc::SIG_DFL && prev.sa_sigaction != libc::SIG_IGN => {
            // SAFETY: a classic one-argument handler.
            let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(prev.sa_sigaction) };
            f(sig);
        }
        _ => {
            // Default action: returning re-executes the faulting access, which faults again.
            // SAFETY: resetting a disposition is async-signal-safe.
            unsafe {
                libc::signal(libc::SIGBUS, libc::SIG_DFL);
            }
        }
    }
}
