//! Logging: env_logger with fuser's noise filtered, one line per record naming its mount,
//! or one syslog datagram per record once the daemon logs to syslog.

pub(super) fn init_logging() {
    // `-d` / `-o debug` (libfuse's) ask for debug lines; logging starts before options parse.
    let debug = std::env::args()
        .skip(1)
        .any(|a| a == "-d" || a.split(',').any(|o| o == "debug"));
    let _ = log_builder(debug).try_init();
}

pub(super) fn log_builder(debug: bool) -> env_logger::Builder {
    let env = env_logger::Env::default().default_filter_or(if debug { "debug" } else { "warn" });
    let mut b = env_logger::Builder::from_env(env);
    // fuser's own debug lines (every request, the session set-up) drown ours; `RUST_LOG`
    // naming fuser still gets them.
    let wants_fuser = std::env::var("RUST_LOG").is_ok_and(|v| v.contains("fuser"));
    if !wants_fuser {
        b.filter_module("fuser", log::LevelFilter::Warn);
        // "Failed to send FUSE reply": a reply to a request the kernel dropped (interrupted,
        // or the file system unmounted under it, as at Ctrl-C). Nothing a user can act on.
        b.filter_module("fuser::reply", log::LevelFilter::Off);
        // "Failed to umount filesystem" / "Unmount failed" (EINVAL): fuser unmounting again
        // at the end of a session the kernel has already unmounted — every clean unmount.
        b.filter_module("fuser::session", log::LevelFilter::Error);
        b.filter_module("fuser::mnt", log::LevelFilter::Error);
    }
    // hdfs-native warns of each retry and failover it makes; the error that ends them is ours
    // to say, once, naming the URL.
    if !std::env::var("RUST_LOG").is_ok_and(|v| v.contains("hdfs_native")) {
        b.filter_module("hdfs_native", log::LevelFilter::Error);
    }
    b.format(|buf, record| {
        use std::io::Write;
        if SYSLOG.load(std::sync::atomic::Ordering::Relaxed) {
            // RFC 3164 priority: facility daemon (3), the record's severity.
            let severity = match record.level() {
                log::Level::Error => 3,
                log::Level::Warn => 4,
                log::Level::Info => 6,
                _ => 7,
            };
            let pid = std::process::id();
            let (target, args) = (record.target(), record.args());
            let tag = MOUNT_TAG.get().map_or("", String::as_str);
            write!(
                buf,
                "<{}>modelfs[{pid}]: {tag}{target}: {args}",
                3 * 8 + severity
            )
        } else {
            let (level, target, args) = (record.level(), record.target(), record.args());
            let ts = buf.timestamp_millis();
            match MOUNT_TAG.get() {
                // Several mounts share one log file: each line says which it is about.
                Some(tag) => {
                    let pid = std::process::id();
                    writeln!(buf, "[{ts} {level:<5} {target}] modelfs[{pid}] {tag}{args}")
                }
                None => writeln!(buf, "[{ts} {level:<5} {target}] {args}"),
            }
        }
    });
    b
}

/// `MOUNTPOINT (SOURCE): `, set by a mount before it serves: the start of each of its log
/// lines, so that a line in a log shared by several mounts names its mount and source.
pub(crate) static MOUNT_TAG: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Set once the daemon's stderr is a syslog socket (`daemon::detach_stdio`): each record is
/// then one syslog message, written in one datagram.
pub(crate) static SYSLOG: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 26 item 10: Ctrl-C of a foreground mount with reads in flight logs no "Failed
    /// to send FUSE reply" (fuser's, for replies to requests the kernel dropped), nor a clean
    /// unmount its session's second unmount; our own warnings and fuser's other ones show.
    #[test]
    fn the_log_drops_fusers_reply_failures_only() {
        use log::Log;
        let logger = log_builder(false).build();
        let at = |target: &str, level| {
            let m = log::Metadata::builder().target(target).level(level).build();
            logger.enabled(&m)
        };
        if std::env::var_os("RUST_LOG").is_some() {
            return; // the user's filter decides
        }
        assert!(!at("fuser::reply", log::Level::Error));
        // The second unmount at the end of every clean unmount (issue 37): errors only.
        assert!(!at("fuser::session", log::Level::Warn));
        assert!(!at("fuser::mnt", log::Level::Warn));
        assert!(at("fuser::session", log::Level::Error));
        assert!(at("fuser", log::Level::Warn));
        assert!(at("modelfs_core::fs", log::Level::Warn));
    }
}
