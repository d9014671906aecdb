//! Daemonizing `modelfs mount`: fork before any thread exists, the parent waits on a pipe until
//! the child reports that the mount is usable (or why it is not), then exits with that status.
//!
//! Protocol on the pipe (child → parent), one line: `OK` or `ERR <status> <message>`. EOF
//! without a line means the child died.
//!
//! After `OK` the child detaches: stdin/stdout → /dev/null, stderr → the log `mount` chose
//! (a file, appended; syslog for a socket) or /dev/null, cwd → `/`. Detaching stderr matters: a caller
//! capturing the parent's output (`$(modelfs mount …)`, Python's subprocess) would otherwise
//! wait for the daemon to exit.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use super::{Failure, EXIT_MOUNT};

/// The child's channel to its waiting parent (absent in the foreground).
pub(crate) struct Notifier {
    pipe: Option<File>,
    /// `--log-file` / `-o log=`: where stderr goes after detaching.
    log_file: Option<std::path::PathBuf>,
}

impl Notifier {
    pub(crate) fn foreground() -> Notifier {
        Notifier {
            pipe: None,
            log_file: None,
        }
    }

    pub(crate) fn is_daemon(&self) -> bool {
        self.pipe.is_some()
    }

    pub(crate) fn log_file(&self) -> Option<std::path::PathBuf> {
        self.log_file.clone()
    }

    pub(crate) fn ready(&mut self) {
        if let Some(mut f) = self.pipe.take() {
            let _ = f.write_all(b"OK\n");
        }
    }

    /// Reports `failure` to the parent (which prints it); returns it without its message so
    /// the child does not print it a second time. In the foreground it is returned as is.
    pub(crate) fn failed(&mut self, failure: Failure) -> Failure {
        match self.pipe.take() {
            Some(mut f) => {
                let line = format!(
                    "ERR {} {}\n",
                    failure.status,
                    failure.message.as_deref().unwrap_or("").replace('\n', " ")
                );
                let _ = f.write_all(line.as_bytes());
                Failure::silent(failure.status)
            }
            None => failure,
        }
    }
}

pub(crate) enum Forked {
    /// In the parent: the exit status and message the child reported.
    Parent(Result<(), Failure>),
    Child(Notifier),
}

fn last_os_error(what: &str) -> Failure {
    Failure::new(
        EXIT_MOUNT,
        format!("{what}: {}", std::io::Error::last_os_error()),
    )
}

/// Forks. Must be called while the process has a single thread.
pub(crate) fn daemonize(log_file: Option<std::path::PathBuf>) -> Result<Forked, Failure> {
    let mut fds = [0i32; 2];
    // SAFETY: fds is a valid array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(last_os_error("pipe"));
    }
    // SAFETY: both fds were just created and are owned here only.
    let (read_end, write_end) =
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // Flush buffered output so it is not written twice.
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: single-threaded at this point (the caller's contract); the child only continues
    // running ordinary Rust code.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(last_os_error("fork"));
    }
    if pid > 0 {
        drop(write_end);
        let mut text = String::new();
        let _ = File::from(read_end).read_to_string(&mut text);
        return Ok(Forked::Parent(parse_report(&text)));
    }
    drop(read_end);
    // SAFETY: plain syscall; failure (already a group leader) is harmless.
    unsafe { libc::setsid() };
    Ok(Forked::Child(Notifier {
        pipe: Some(File::from(write_end)),
        log_file,
    }))
}

fn parse_report(text: &str) -> Result<(), Failure> {
    let line = text.lines().next().unwrap_or("");
    if line == "OK" {
        return Ok(());
    }
    if let Some(rest) = line.strip_prefix("ERR ") {
        let (status, msg) = rest.split_once(' ').unwrap_or((rest, ""));
        let status = status.parse().unwrap_or(EXIT_MOUNT);
        return Err(Failure::new(status, msg));
    }
    Err(Failure::new(
        EXIT_MOUNT,
        "the mount daemon exited before the mount was ready",
    ))
}

/// Where a background mount logs when neither `-o log=` nor `$MODELFS_LOG` says: syslog
/// (`/dev/log`) where there is one, else `$XDG_STATE_HOME/modelfs/modelfs.log`
/// (`~/.local/state/modelfs/modelfs.log`), the directory created; `None` when there is no
/// such place.
pub(crate) fn default_log_file() -> Option<std::path::PathBuf> {
    let syslog = std::path::Path::new("/dev/log");
    if is_socket(syslog) {
        return Some(syslog.to_path_buf());
    }
    let state = std::env::var_os("XDG_STATE_HOME")
        .filter(|v| !v.is_empty())
        .map(std::path::PathBuf::from)
        .or_else(|| {
            let home = std::env::var_os("HOME").filter(|v| !v.is_empty())?;
            Some(std::path::Path::new(&home).join(".local/state"))
        })?;
    let dir = state.join("modelfs");
    std::fs::create_dir_all(&dir).ok()?;
    Some(dir.join("modelfs.log"))
}

/// Detaches the daemon from the caller's terminal and pipes (after `ready`); its log goes to
/// `log_file` (`mount` resolved it: option, `$MODELFS_LOG`, syslog or the state file), else
/// nowhere.
pub(crate) fn detach_stdio(log_file: Option<&std::path::Path>) {
    let devnull = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null");
    let log: Option<OwnedFd> = log_file.and_then(|p| {
        if is_socket(p) {
            // A syslog socket (`/dev/log`): one datagram per record.
            let sock = std::os::unix::net::UnixDatagram::unbound().ok()?;
            sock.connect(p).ok()?;
            // A syslog that falls behind loses records; it never stops the file system (a
            // full queue would block the thread logging, and with it every request).
            sock.set_nonblocking(true).ok()?;
            super::SYSLOG.store(true, std::sync::atomic::Ordering::Relaxed);
            return Some(OwnedFd::from(sock));
        }
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .ok()?;
        Some(OwnedFd::from(f))
    });
    if let Ok(null) = &devnull {
        let err_fd = log.as_ref().map_or(null.as_raw_fd(), |f| f.as_raw_fd());
        // SAFETY: dup2 onto the standard descriptors with valid open fds.
        unsafe {
            libc::dup2(null.as_raw_fd(), 0);
            libc::dup2(null.as_raw_fd(), 1);
            libc::dup2(err_fd, 2);
        }
    }
    let _ = std::env::set_current_dir("/");
}

/// Whether the daemon's log can go to `p`: a socket (syslog), or a file it can append to
/// (created if missing, as the daemon would).
pub(crate) fn writable_log(p: &std::path::Path) -> std::io::Result<()> {
    if is_socket(p) {
        return Ok(());
    }
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(p)?;
    if f.metadata()?.is_dir() {
        return Err(std::io::Error::other("a directory"));
    }
    // procfs and sysfs files open for writing (as root) and then refuse every write.
    // SAFETY: a plain C struct of integers, all-zero valid.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: fstatfs on a descriptor `f` keeps open, into a struct it fills.
    let filled = unsafe { libc::fstatfs(f.as_raw_fd(), &mut fs) } == 0;
    if filled {
        const PROC: i64 = 0x9fa0;
        const SYSFS: i64 = 0x6265_6572;
        if [PROC, SYSFS].contains(&(fs.f_type as i64)) {
            return Err(std::io::Error::other("a file of /proc or /sys"));
        }
    }
    Ok(())
}

pub(crate) fn is_socket(p: &std::path::Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    std::fs::metadata(p).is_ok_and(|m| m.file_type().is_socket())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_parse() {
        assert!(parse_report("OK\n").is_ok());
        let e = parse_report("ERR 3 mountpoint /x does not exist\n").unwrap_err();
        assert_eq!(
            (e.status, e.message.as_deref().unwrap_or("")),
            (3, "mountpoint /x does not exist")
        );
        assert_eq!(parse_report("").unwrap_err().status, EXIT_MOUNT);
    }
}
