//! The lock a daemon holds while it serves a mount point (see `ServingLock`).

use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use super::mounts::os;
use std::os::unix::ffi::OsStrExt;
/// A lock held by the daemon serving a mount point for as long as it runs: `modelfs umount`
/// waits on it, so that it returns once the daemon has exited and the mount point it made is
/// gone (a script that unmounts and mounts again does not race the old daemon). A file per
/// mount point under the runtime directory, named by a hash of the normalized path; the lock
/// goes with the process however it ends.
pub(crate) struct ServingLock;

/// The one lock of this process (never dropped: released by the exit).
static HELD: std::sync::OnceLock<std::fs::File> = std::sync::OnceLock::new();

impl ServingLock {
    fn path(mp: &Path) -> PathBuf {
        // SAFETY: geteuid cannot fail.
        let uid = unsafe { libc::geteuid() };
        let dir = if uid == 0 {
            PathBuf::from("/run/modelfs")
        } else if let Some(d) = std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
            PathBuf::from(d).join("modelfs")
        } else {
            std::env::temp_dir().join(format!("modelfs-{uid}"))
        };
        // FNV-1a: the same in every process and every build.
        let hash = os(mp)
            .as_bytes()
            .iter()
            .fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
                (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
            });
        dir.join(format!("{hash:016x}.lock"))
    }

    /// Takes the lock of `mp` for the life of this process (best effort: without it,
    /// `umount` returns when the mount is gone, as before).
    pub(crate) fn take(mp: &Path) {
        let path = Self::path(mp);
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let Ok(f) = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
        else {
            return;
        };
        // SAFETY: flock on an open descriptor.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            let _ = HELD.set(f);
        }
    }

    /// Removes the lock file of `mp` as this process ends (the lock itself goes with it).
    pub(crate) fn release(mp: &Path) {
        if HELD.get().is_some() {
            let _ = std::fs::remove_file(Self::path(mp));
        }
    }

    /// Waits, at most `limit`, until no process serves `mp` any more. Returns false if one
    /// still does.
    pub(crate) fn wait_gone(mp: &Path, limit: std::time::Duration) -> bool {
        let path = Self::path(mp);
        let Ok(f) = std::fs::File::open(&path) else {
            // No file: no daemon took it, or it has ended (it removes it last).
            return true;
        };
        let fd = f.as_raw_fd();
        let start = std::time::Instant::now();
        loop {
            // SAFETY: flock on an open descriptor; a shared lock is granted once the daemon's
            // exclusive one is gone, and dropped with `f`.
            if unsafe { libc::flock(fd, libc::LOCK_SH | libc::LOCK_NB) } == 0 {
                return true;
            }
            if start.elapsed() >= limit {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}
