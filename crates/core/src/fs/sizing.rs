//! The background size pass: text files reported with a placeholder size are sized one at a
//! time, in the order they were first seen, so that they soon become ordinary exact-size,
//! page-cached files. Each file is rendered on every core by niced workers (the file's render
//! crew), so the pass takes the cores nobody else wants; it leaves a file alone while a reader
//! reads it (the reader teaches the index the same lengths). Readers never wait for it.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use super::caller::{Background, ProgressLog};
use super::tree::{Ino, SizeListener, Tree};

#[derive(Default)]
struct Queue {
    pending: VecDeque<Ino>,
    /// Every file ever queued: each is sized at most once per mount.
    seen: HashSet<Ino>,
}

pub struct SizePass {
    queue: Mutex<Queue>,
    wake: Condvar,
    stop: AtomicBool,
}

impl SizePass {
    /// Starts the pass for `tree`; `on_learnt` hears of every file whose size became known
    /// after a placeholder was reported (by the pass or by a reader that reached its end).
    pub(crate) fn start(tree: &Arc<Tree>, on_learnt: SizeListener) -> Arc<SizePass> {
        let pass = Arc::new(SizePass {
            queue: Mutex::new(Queue::default()),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
        });
        let weak = Arc::downgrade(&pass);
        tree.listen_sizes(
            Box::new(move |ino| {
                if let Some(p) = weak.upgrade() {
                    p.add(ino);
                }
            }),
            on_learnt,
        );
        let (me, tree) = (pass.clone(), tree.clone());
        let started = std::thread::Builder::new()
            .name("modelfs-sizes".into())
            .spawn(move || me.run(&tree));
        if let Err(e) = started {
            log::warn!("no background size pass ({e}): text sizes are learnt by readers only");
        }
        pass
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn add(&self, ino: Ino) {
        let mut q = self.lock();
        if q.seen.insert(ino) {
            q.pending.push_back(ino);
            self.wake.notify_one();
        }
    }

    /// Ends the pass (the file being sized stops at its next step).
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        let _q = self.lock();
        self.wake.notify_all();
    }

    fn run(&self, tree: &Tree) {
        // SAFETY: plain syscalls on the calling thread; failure leaves the default priority.
        unsafe {
            // The raw syscall, not glibc's gettid(): that wrapper is glibc 2.30's, and the wheel
            // runs on glibc 2.17 (manylinux2014).
            libc::setpriority(
                libc::PRIO_PROCESS,
                libc::syscall(libc::SYS_gettid) as libc::id_t,
                19,
            );
        }
        loop {
            let ino = {
                let mut q = self.lock();
                loop {
                    if self.stop.load(Ordering::Relaxed) {
                        return;
                    }
                    if let Some(ino) = q.pending.pop_front() {
                        break ino;
                    }
                    q = self.wake.wait(q).unwrap_or_else(|e| e.into_inner());
                }
            };
            let req = Background {
                stop: &self.stop,
                log: ProgressLog::new(tree, ino),
            };
            let started = std::time::Instant::now();
            match tree.learn_size(ino, &req) {
                Ok(true) => log::debug!(
                    "size of {} learnt in {:.2} s",
                    tree.path_of(ino),
                    started.elapsed().as_secs_f64()
                ),
                Ok(false) => {}
                // Logged where it happened; readers still get the error when they read.
                Err(e) => log::debug!("size pass: {}: {e}", tree.path_of(ino)),
            }
        }
    }
}
