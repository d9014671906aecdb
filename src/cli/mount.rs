//! `modelfs mount`: checks, then serves the tree over FUSE in the foreground or as a daemon.
//!
//! Order matters: the mountpoint is checked (exit 3) and a local source opened (exit 2) in the
//! calling process, so errors reach the user directly (a remote source is opened by the child,
//! which reports a failure through the same pipe as its readiness); then the process forks (while it still
//! has one thread); the child blocks SIGINT/SIGTERM/SIGHUP in every thread (one thread waits
//! for them and unmounts), mounts, reports readiness and runs the FUSE worker threads until
//! the file system is unmounted.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use fuser::{Session, SessionUnmounter};

use modelfs_core::fs::fuse::{fsname_for, mount_config, ModelFs};
use modelfs_core::fs::notices::start_notices;
use modelfs_core::fs::Tree;
use modelfs_core::options::Options;

use super::daemon::{self, Forked, Notifier};
use super::serving_lock::ServingLock;
use super::{build_mount_tree, mounts, umount, Failure, EXIT_MOUNT};
use modelfs_core::fs::live::Follow;

pub(crate) fn mount(
    source: &Path,
    mountpoint: &Path,
    opts: Options,
    foreground: bool,
) -> Result<(), Failure> {
    let mountpoint = mounts::normalize(mountpoint);
    let _ = super::MOUNT_TAG.set(format!(
        "{} ({}): ",
        mountpoint.display(),
        super::absolute_source(source).display()
    ));
    let created = prepare_mountpoint(&mountpoint)?;
    // A mount point modelfs created is removed again when the mount ends (or fails).
    let _created = Created(created.then(|| mountpoint.clone()));
    let fsname = fsname_for(&super::absolute_source(source));
    let remote = modelfs_io::source::remote::is_remote(&source.to_string_lossy());
    // A remote source is opened once, by the process that serves it: a runtime's threads
    // would not survive the fork, and opening it twice would cost its requests twice. The
    // child reports a failure to open it (exit 2 and the reason) as the parent would.
    if foreground {
        let tree = build_mount_tree(source, &opts)?;
        let served = serve(
            tree,
            &mountpoint,
            &opts,
            (&fsname, remote),
            Notifier::foreground(),
        );
        drop(_created);
        ServingLock::release(&mountpoint);
        return served;
    }
    // Warnings and errors of a background mount go somewhere by default (said below).
    let named = opts
        .log_file
        .clone()
        .or_else(|| std::env::var_os("MODELFS_LOG").map(PathBuf::from));
    // A log named that cannot be written (a directory, /proc/version) is refused before the
    // mount, not claimed and then silently lost; the default one is only used if writable.
    if let Some(p) = &named {
        daemon::writable_log(p).map_err(|e| {
            Failure::new(
                super::EXIT_USAGE,
                format!("log file {}: cannot be written: {e}", p.display()),
            )
        })?;
    }
    let log_file =
        named.or_else(|| daemon::default_log_file().filter(|p| daemon::writable_log(p).is_ok()));
    let tree = match super::remote_url(source) {
        Some(_) => None,
        None => Some(build_mount_tree(source, &opts)?),
    };
    match daemon::daemonize(log_file.clone())? {
        Forked::Parent(result) => {
            if result.is_ok() {
                // The daemon owns the mount point now (and removes it if it created it).
                std::mem::forget(_created);
                if let Some(log) = &log_file {
                    let to = if daemon::is_socket(log) {
                        "syslog at "
                    } else {
                        ""
                    };
                    eprintln!(
                        "modelfs: warnings and errors are logged to {to}{}",
                        log.display()
                    );
                }
            }
            result
        }
        Forked::Child(mut notifier) => {
            let tree = match tree {
                Some(t) => Ok(t),
                None => build_mount_tree(source, &opts).map_err(|f| notifier.failed(f.into())),
            };
            let status = match tree
                .and_then(|t| serve(t, &mountpoint, &opts, (&fsname, remote), notifier))
            {
                Ok(()) => 0,
                Err(f) => {
                    if let Some(m) = &f.message {
                        log::error!("{m}");
                    }
                    f.status
                }
            };
            drop(_created);
            ServingLock::release(&mountpoint);
            std::process::exit(status);
        }
    }
}

/// Removes the directory it holds, if empty, when dropped.
struct Created(Option<PathBuf>);

impl Drop for Created {
    fn drop(&mut self) {
        if let Some(dir) = &self.0 {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// Checks the mount point (`check_mountpoint`), creating it first when it is missing (its
/// parent must exist); warns when it is not empty. Returns whether it was created.
fn prepare_mountpoint(mp: &Path) -> Result<bool, Failure> {
    let created = match std::fs::symlink_metadata(mp) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => match std::fs::create_dir(mp) {
            Ok(()) => true,
            Err(e) => {
                return Err(Failure::new(
                    EXIT_MOUNT,
                    format!(
                        "mountpoint {} does not exist and cannot be created: {e}",
                        mp.display()
                    ),
                ))
            }
        },
        _ => false,
    };
    if let Err(f) = check_mountpoint(mp) {
        if created {
            let _ = std::fs::remove_dir(mp);
        }
        return Err(f);
    }
    if !created && std::fs::read_dir(mp).is_ok_and(|mut d| d.next().is_some()) {
        eprintln!(
            "modelfs: warning: {} is not empty; its files are hidden until the unmount",
            mp.display()
        );
    }
    Ok(created)
}

/// Refuses a missing, non-directory, dead or already-mounted mountpoint (exit 3).
pub(crate) fn check_mountpoint(mp: &Path) -> Result<(), Failure> {
    let shown = mp.display();
    let meta = match std::fs::metadata(mp) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Failure::new(EXIT_MOUNT, format!("mountpoint {shown} does not exist")))
        }
        Err(e) if e.raw_os_error() == Some(libc::ENOTCONN) => {
            return Err(Failure::new(
                EXIT_MOUNT,
                format!("mountpoint {shown} is a mount whose daemon died; run `modelfs umount {shown}` first"),
            ))
        }
        Err(e) => return Err(Failure::new(EXIT_MOUNT, format!("mountpoint {shown}: {e}"))),
    };
    if !meta.is_dir() {
        return Err(Failure::new(
            EXIT_MOUNT,
            format!("mountpoint {shown} is not a directory"),
        ));
    }
    if let Some(m) = mounts::mount_at(mp) {
        return Err(Failure::new(
            EXIT_MOUNT,
            format!(
                "{shown} is already a mount point ({} {})",
                m.fstype, m.source
            ),
        ));
    }
    Ok(())
}

fn shutdown_signals() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data, initialised by sigemptyset before use.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGHUP);
        set
    }
}

/// Blocks the shutdown signals in this thread and every thread it creates afterwards.
fn block_shutdown_signals() {
    let set = shutdown_signals();
    // SAFETY: valid set pointer; a null old-set pointer is allowed.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
}

/// A thread that waits for SIGINT/SIGTERM/SIGHUP and unmounts, which ends the session.
fn spawn_signal_thread(mut unmounter: SessionUnmounter, mountpoint: PathBuf) {
    let spawned = std::thread::Builder::new()
        .name("modelfs-signals".into())
        .spawn(move || {
            let set = shutdown_signals();
            let mut sig = 0;
            // SAFETY: valid pointers; the signals are blocked in all threads.
            while unsafe { libc::sigwait(&set, &mut sig) } != 0 {}
            log::info!("signal {sig}: unmounting {}", mountpoint.display());
            if let Err(e) = unmounter.unmount() {
                log::warn!(
                    "unmount of {} failed ({e}); detaching lazily",
                    mountpoint.display()
                );
                if let Err(f) = umount::lazy_detach(&mountpoint) {
                    log::error!("{}", f.message.as_deref().unwrap_or("(no message)"));
                }
            }
        });
    if let Err(e) = spawned {
        log::error!("cannot start the signal thread: {e}");
    }
}

fn serve(
    (tree, follow): (Arc<Tree>, Option<Follow>),
    mountpoint: &Path,
    opts: &Options,
    (fsname, remote): (&str, bool),
    mut notifier: Notifier,
) -> Result<(), Failure> {
    if !Path::new("/dev/fuse").exists() {
        let f = Failure::new(
            EXIT_MOUNT,
            format!("cannot mount on {}: /dev/fuse is missing (FUSE not available: load the fuse module, or run the container with --device /dev/fuse)", mountpoint.display()),
        );
        return Err(notifier.failed(f));
    }
    block_shutdown_signals();
    let cfg = mount_config(opts, fsname);
    let mut session = match Session::new(ModelFs::new(tree.clone()), mountpoint, &cfg) {
        Ok(s) => s,
        Err(e) => {
            let hint = if e.kind() == std::io::ErrorKind::PermissionDenied {
                " (/dev/fuse: this user may not open it; check its mode, the fuse group, or the container's --device /dev/fuse)"
            } else {
                ""
            };
            let f = Failure::new(
                EXIT_MOUNT,
                format!("cannot mount on {}: {e}{hint}", mountpoint.display()),
            );
            return Err(notifier.failed(f));
        }
    };
    spawn_signal_thread(session.unmount_callable(), mountpoint.to_path_buf());
    // Held until this process exits (after it has removed a mount point it made), so that
    // `modelfs umount` can wait for the end of the daemon, not only of the mount.
    ServingLock::take(mountpoint);
    let sizes = start_notices(&tree, session.notifier(), opts, remote);
    // After the fork (a daemon's threads start in the daemon) and once changes can be told.
    if let Some(f) = follow {
        modelfs_core::fs::live::start(&tree, f);
    }
    log::info!("mounted on {}", mountpoint.display());
    let daemon = notifier.is_daemon();
    let log_file = notifier.log_file();
    notifier.ready();
    if daemon {
        daemon::detach_stdio(log_file.as_deref());
    }
    let ran = session.run();
    sizes.stop();
    ran.map_err(|e| {
        Failure::new(
            EXIT_MOUNT,
            format!("FUSE session on {} ended: {e}", mountpoint.display()),
        )
    })?;
    log::info!("unmounted {}", mountpoint.display());
    Ok(())
}
