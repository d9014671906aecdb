//! `modelfs umount MOUNTPOINT`: like `fusermount3 -u`, and also clears a mount whose daemon
//! was killed (the kernel then only needs the unmount; no daemon is asked).
//!
//! Only FUSE mounts are touched. As root the umount2 syscall is used directly; otherwise the
//! setuid helper `fusermount3 -u` (or `fusermount -u`).

use std::path::Path;
use std::process::Command;

use super::mounts::{self, cstring};
use super::serving_lock::ServingLock;
use super::{Failure, EXIT_MOUNT};

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// Tries of a busy unmount, `BUSY_WAIT` apart: a file closed just before may hold the mount
/// a moment longer (a script's `cat f; modelfs umount d` under load), which is not "in use".
const BUSY_TRIES: u32 = 10;
const BUSY_WAIT: std::time::Duration = std::time::Duration::from_millis(100);

fn umount2(mp: &Path, flags: i32) -> Result<(), Failure> {
    let c = cstring(mp).ok_or_else(|| Failure::new(EXIT_MOUNT, "mountpoint contains NUL"))?;
    let mut tries = 0;
    let e = loop {
        // SAFETY: valid NUL-terminated path.
        if unsafe { libc::umount2(c.as_ptr(), flags) } == 0 {
            return Ok(());
        }
        let e = std::io::Error::last_os_error();
        tries += 1;
        if e.raw_os_error() != Some(libc::EBUSY)
            || flags & libc::MNT_DETACH != 0
            || tries >= BUSY_TRIES
        {
            break e;
        }
        std::thread::sleep(BUSY_WAIT);
    };
    let hint = if e.raw_os_error() == Some(libc::EBUSY) {
        " (files or directories in it are in use)"
    } else {
        ""
    };
    Err(Failure::new(
        EXIT_MOUNT,
        format!("cannot unmount {}: {e}{hint}", mp.display()),
    ))
}

fn fusermount(mp: &Path, lazy: bool) -> Result<(), Failure> {
    let mut last = String::from("fusermount3/fusermount not found");
    for bin in ["fusermount3", "fusermount"] {
        let mut cmd = Command::new(bin);
        cmd.arg("-u");
        if lazy {
            cmd.arg("-z");
        }
        match cmd.arg("--").arg(mounts::os(mp)).output() {
            Ok(out) if out.status.success() => return Ok(()),
            Ok(out) => {
                last = String::from_utf8_lossy(&out.stderr).trim().to_string();
                break;
            }
            Err(_) => continue,
        }
    }
    Err(Failure::new(
        EXIT_MOUNT,
        format!("cannot unmount {}: {last}", mp.display()),
    ))
}

pub(crate) fn umount(mountpoint: &Path, lazy: bool) -> Result<(), Failure> {
    let mp = mounts::normalize(mountpoint);
    let entry = mounts::mount_at(&mp)
        .ok_or_else(|| Failure::new(EXIT_MOUNT, format!("{} is not mounted", mp.display())))?;
    if !entry.fstype.starts_with("fuse") {
        return Err(Failure::new(
            EXIT_MOUNT,
            format!(
                "{} is a {} mount, not a FUSE mount; not touching it",
                mp.display(),
                entry.fstype
            ),
        ));
    }
    if lazy {
        return lazy_detach(&mp);
    }
    if is_root() {
        umount2(&mp, 0)?;
    } else {
        fusermount(&mp, false)?;
    }
    // The mount is gone; its daemon still has to end (and remove a mount point it made).
    if !ServingLock::wait_gone(&mp, DAEMON_WAIT) {
        log::warn!(
            "{}: unmounted, but its daemon has not ended after {} s",
            mp.display(),
            DAEMON_WAIT.as_secs()
        );
    }
    Ok(())
}

/// How long `umount` waits for the daemon of a mount it unmounted to end.
const DAEMON_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Detaches the mount now; the kernel finishes when the last user lets go.
pub(crate) fn lazy_detach(mp: &Path) -> Result<(), Failure> {
    if is_root() {
        umount2(mp, libc::MNT_DETACH)
    } else {
        fusermount(mp, true)
    }
}
