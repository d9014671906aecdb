//! Robustness through a real mount: concurrent random reads against single-threaded ones,
//! source files replaced or rewritten while mounted, mountpoint refusals with their
//! messages, `allow_other` only when asked, key names that try to escape the mount, and
//! corrupt data reported as EIO with a log line naming the file.
//!
//! Uses `support` (mounting with a clean-up guard); skipped without /dev/fuse like the rest.

use std::collections::BTreeMap;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use modelfs_tf::writer::BundleBuilder;

use crate::support::*;

/// TF dtype codes used below.
const DT_DOUBLE: i32 = 2;
const DT_INT32: i32 = 3;
const DT_INT64: i32 = 9;
const DT_BOOL: i32 = 10;
const DT_BFLOAT16: i32 = 14;

fn le<T: Copy, const N: usize>(v: &[T], f: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    v.iter().flat_map(|&x| f(x)).collect()
}

/// A checkpoint with big and small tensors of several dtypes, strings and a partitioned
/// variable; `seed` shifts every value (same sizes, so files can be swapped).
fn write_stress_checkpoint(dir: &Path, seed: u32) -> PathBuf {
    let mut b = BundleBuilder::new("stress");
    b.block_size = 4096;
    let s = seed as f32;
    let big: Vec<f32> = (0..600 * 500)
        .map(|i| ((i as f32) * 0.001 + s).sin() * 1e3)
        .collect();
    b.add_f32(b"model/dense/kernel", &[600, 500], &big);
    let d: Vec<f64> = (0..5000)
        .map(|i| i as f64 / 7.0 + f64::from(seed))
        .collect();
    b.add_fixed(
        b"model/dense/bias64",
        DT_DOUBLE,
        &[5000],
        &le(&d, f64::to_le_bytes),
        8,
    );
    let i: Vec<i64> = (0..2500).map(|i| i * 1_000_003 - i64::from(seed)).collect();
    b.add_fixed(
        b"model/ids",
        DT_INT64,
        &[50, 50],
        &le(&i, i64::to_le_bytes),
        8,
    );
    let i32s: Vec<i32> = (0..777).map(|i| i - 300 + seed as i32).collect();
    b.add_fixed(
        b"model/step",
        DT_INT32,
        &[777],
        &le(&i32s, i32::to_le_bytes),
        4,
    );
    let bools: Vec<u8> = (0..300).map(|i| ((i + seed) % 3 == 0) as u8).collect();
    b.add_fixed(b"model/mask", DT_BOOL, &[300], &bools, 1);
    let bf: Vec<u16> = (0..1000)
        .map(|i| (i as u16).wrapping_mul(37) ^ seed as u16)
        .collect();
    b.add_fixed(
        b"model/bf16",
        DT_BFLOAT16,
        &[10, 100],
        &le(&bf, u16::to_le_bytes),
        2,
    );
    let strs: Vec<Vec<u8>> = (0..300)
        .map(|i| format!("token {i} \"{seed}\"\n,{}", "x".repeat(i % 40)).into_bytes())
        .collect();
    let refs: Vec<&[u8]> = strs.iter().map(|v| v.as_slice()).collect();
    b.add_strings(b"vocab/tokens", &[300], &refs);
    let full: Vec<f32> = (0..40 * 30).map(|v| v as f32 + s).collect();
    b.add_partitioned_f32(
        b"emb/table",
        &[40, 30],
        &full,
        &[
            vec![Some((0, 13)), None],
            vec![Some((13, 14)), None],
            vec![Some((27, 13)), None],
        ],
    );
    b.write_to_dir(dir).unwrap()
}

/// Every regular file under `root` (relative paths) with its whole content.
fn read_tree(root: &Path) -> BTreeMap<String, Vec<u8>> {
    walk(root)
        .into_iter()
        .filter(|p| !p.ends_with('/'))
        .filter(|p| std::fs::symlink_metadata(root.join(p)).unwrap().is_file())
        .map(|p| {
            let b = std::fs::read(root.join(&p)).unwrap_or_else(|e| panic!("{p}: {e}"));
            (p, b)
        })
        .collect()
}

fn stress_secs() -> u64 {
    std::env::var("MODELFS_STRESS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30)
}

/// 16 threads read random files at random offsets for 30 s (`MODELFS_STRESS_SECS`); every
/// byte must equal the single-threaded reads; no error; no deadlock (a watchdog fails the
/// test if the readers do not finish).
#[test]
fn concurrent_random_reads_match_single_threaded() {
    let Some(fuse) = Fuse::check() else { return };
    let src = tempfile::tempdir().unwrap();
    let prefix = write_stress_checkpoint(src.path(), 0);
    // A small cache, so chunks are evicted and re-rendered while other threads read them.
    let mount = fuse.mount(&prefix, "layouts=all,cache=2M,threads=8,cache_dir=none");
    let files: Arc<Vec<(PathBuf, Vec<u8>)>> = Arc::new(
        read_tree(mount.path())
            .into_iter()
            .map(|(p, b)| (mount.path().join(p), b))
            .collect(),
    );
    assert!(files.len() > 50, "only {} files", files.len());
    let stop = Arc::new(AtomicBool::new(false));
    let (reads, bytes) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let (done_tx, done_rx) = mpsc::channel();
    for t in 0..16u64 {
        let (files, stop, reads, bytes, done) = (
            Arc::clone(&files),
            Arc::clone(&stop),
            Arc::clone(&reads),
            Arc::clone(&bytes),
            done_tx.clone(),
        );
        std::thread::spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let mut rng = Lcg(0x9e37_79b9 ^ t);
                let mut buf = vec![0u8; 300_000];
                while !stop.load(Ordering::Relaxed) {
                    let (path, want) = &files[rng.below(files.len() as u64) as usize];
                    let f = std::fs::File::open(path)
                        .unwrap_or_else(|e| panic!("{}: open: {e}", path.display()));
                    for _ in 0..4 {
                        let off = rng.below(want.len() as u64 + 1);
                        let max = if rng.below(4) == 0 { 300_000 } else { 5000 };
                        let len = 1 + rng.below(max);
                        let n = f
                            .read_at(&mut buf[..len as usize], off)
                            .unwrap_or_else(|e| {
                                panic!("{}: pread {off}+{len}: {e}", path.display())
                            });
                        let end = (off as usize + len as usize).min(want.len());
                        assert_eq!(
                            &buf[..n],
                            &want[off as usize..end],
                            "{}: pread {off}+{len} differs from the single-threaded read",
                            path.display()
                        );
                        reads.fetch_add(1, Ordering::Relaxed);
                        bytes.fetch_add(n as u64, Ordering::Relaxed);
                    }
                }
            }));
            let _ = done.send(r.map_err(|p| {
                p.downcast_ref::<String>()
                    .cloned()
                    .unwrap_or_else(|| "reader panicked".into())
            }));
        });
    }
    drop(done_tx);
    let secs = stress_secs();
    std::thread::sleep(Duration::from_secs(secs));
    stop.store(true, Ordering::Relaxed);
    let deadline = Instant::now() + Duration::from_secs(60);
    for _ in 0..16 {
        let left = deadline.saturating_duration_since(Instant::now());
        match done_rx.recv_timeout(left) {
            Ok(Ok(())) => {}
            Ok(Err(m)) => panic!("{m}"),
            Err(_) => panic!("readers still blocked 60 s after the stop: deadlock?"),
        }
    }
    eprintln!(
        "stress: {} preads, {} MiB in {secs} s over {} files",
        reads.load(Ordering::Relaxed),
        bytes.load(Ordering::Relaxed) >> 20,
        files.len()
    );
    // Still consistent after the storm.
    for (path, want) in files.iter().step_by(7) {
        assert_eq!(&std::fs::read(path).unwrap(), want, "{}", path.display());
    }
    mount.unmount_and_check();
}

/// A training job rewrites the mounted checkpoint (a mount of the first look only,
/// `refresh=never`): every file then reads as ESTALE or exactly as before (the data of the
/// opened version); never a mix. A data file renamed over or deleted is still the file
/// opened: every read gives the old bytes. A rewrite in place (or a truncation) is ESTALE,
/// and the daemon logs the file that changed.
#[test]
fn sources_replaced_while_mounted() {
    let Some(fuse) = Fuse::check() else { return };
    for how in ["rename", "in-place", "truncate", "delete"] {
        let src = tempfile::tempdir().unwrap();
        let prefix = write_stress_checkpoint(src.path(), 0);
        // What the opened version reads as, from a mount of an untouched copy.
        let reference = {
            let copy = tempfile::tempdir().unwrap();
            let p = write_stress_checkpoint(copy.path(), 0);
            let m = fuse.mount(&p, "layouts=bin,txt,npy,cache_dir=none");
            let r = read_tree(m.path());
            m.unmount_and_check();
            r
        };
        let log = src.path().join("daemon.log");
        std::env::set_var("MODELFS_LOG", &log);
        let mount = fuse.mount(
            &prefix,
            "layouts=bin,txt,npy,json,cache=1M,cache_dir=none,refresh=never",
        );
        std::env::remove_var("MODELFS_LOG");
        // Read half of the files first (cached data must stay consistent), not the others.
        let all: Vec<String> = walk(mount.path())
            .into_iter()
            .filter(|p| !p.ends_with('/') && !p.ends_with(".json"))
            .collect();
        for p in all.iter().step_by(2) {
            assert_eq!(
                &std::fs::read(mount.path().join(p)).unwrap(),
                &reference[p],
                "{p}"
            );
        }
        let data = PathBuf::from(format!("{}.data-00000-of-00001", prefix.display()));
        let other = tempfile::tempdir().unwrap();
        let new_data = PathBuf::from(format!(
            "{}.data-00000-of-00001",
            write_stress_checkpoint(other.path(), 5).display()
        ));
        match how {
            "rename" => std::fs::rename(&new_data, &data).unwrap(),
            "in-place" => {
                std::thread::sleep(Duration::from_millis(20));
                std::fs::write(&data, std::fs::read(&new_data).unwrap()).unwrap();
            }
            "truncate" => {
                let f = std::fs::OpenOptions::new().write(true).open(&data).unwrap();
                f.set_len(100).unwrap();
            }
            _ => std::fs::remove_file(&data).unwrap(),
        }
        std::thread::sleep(Duration::from_millis(400));
        let mut stale = 0;
        for p in &all {
            let path = mount.path().join(p);
            match std::fs::read(&path) {
                // Only the opened version may be served (from the kernel's or our cache).
                Ok(b) => assert_eq!(
                    b, reference[p],
                    "{how}: {p} changed content without an error"
                ),
                Err(e) => {
                    assert_eq!(e.raw_os_error(), Some(libc::ESTALE), "{how}: {p}: {e}");
                    stale += 1;
                }
            }
        }
        let in_place = matches!(how, "in-place" | "truncate");
        assert_eq!(
            stale > 0,
            in_place,
            "{how}: {stale} files failed after the data file changed"
        );
        mount.unmount_and_check();
        let logged = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(
            !in_place || logged.contains("stress.data-00000-of-00001"),
            "{how}: the log does not name the changed file:\n{logged}"
        );
    }
}

/// Mountpoint missing, not a directory, already mounted: exit 3 and a message saying so.
#[test]
fn mountpoint_refusals_say_why() {
    let src = tempfile::tempdir().unwrap();
    let prefix = write_stress_checkpoint(src.path(), 0);
    let run = |mp: &Path| {
        let out = Command::new(modelfs())
            .arg("mount")
            .arg(&prefix)
            .arg(mp)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let missing = src.path().join("missing/deeper");
    let (code, err) = run(&missing);
    assert_eq!(code, Some(3), "{err}");
    assert!(
        err.contains("does not exist") && err.contains("missing"),
        "{err}"
    );
    let file = src.path().join("plain");
    std::fs::write(&file, b"x").unwrap();
    let (code, err) = run(&file);
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("not a directory"), "{err}");
    let Some(fuse) = Fuse::check() else { return };
    let mount = fuse.mount(&prefix, "");
    let (code, err) = run(mount.path());
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("already"), "{err}");
    // A dead mount (daemon killed) is refused with a hint, then cleared by `modelfs umount`.
    let pid = mount.daemon_pid().expect("daemon");
    unsafe { libc::kill(pid, libc::SIGKILL) };
    assert!(wait_until(|| process_gone(pid)));
    // (Refused as dead when the kernel reports ENOTCONN, else as already mounted while it
    // still has the root's attributes cached.)
    let (code, err) = run(mount.path());
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("umount") || err.contains("already"), "{err}");
    let u = Command::new(modelfs())
        .arg("umount")
        .arg(mount.path())
        .output()
        .unwrap();
    assert!(u.status.success(), "{}", String::from_utf8_lossy(&u.stderr));
    assert!(!is_mount_point(mount.path()));
}

/// The mount options of the mount at `mp` (super-block options of /proc/self/mountinfo).
fn mount_options(mp: &Path) -> String {
    let canon = mp.canonicalize().unwrap();
    let table = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    table
        .lines()
        .find(|l| l.split(' ').nth(4) == Some(canon.to_str().unwrap()))
        .map(|l| l.to_string())
        .unwrap_or_default()
}

#[test]
fn allow_other_only_when_asked() {
    let Some(fuse) = Fuse::check() else { return };
    let src = tempfile::tempdir().unwrap();
    let prefix = write_stress_checkpoint(src.path(), 0);
    let mount = fuse.mount(&prefix, "");
    let line = mount_options(mount.path());
    assert!(!line.contains("allow_other"), "{line}");
    mount.unmount_and_check();
    let mount = fuse.mount(&prefix, "allow_other");
    let line = mount_options(mount.path());
    assert!(line.contains("allow_other"), "{line}");
    mount.unmount_and_check();
}

/// Keys with `..`, `/`, NUL, `.` and empty components: every name stays inside the mount,
/// is listed once, and reads.
#[test]
fn hostile_key_names_never_escape() {
    let Some(fuse) = Fuse::check() else { return };
    let src = tempfile::tempdir().unwrap();
    let keys: &[&[u8]] = &[
        b"..",
        b".",
        b"../../etc/passwd",
        b"/abs/path",
        b"a/../../b",
        b"a/./b",
        b"a//b",
        b"dir/..",
        b"nul\0byte",
        b"\0",
        b"%2E%2E",
        b"x/\xff\xfe/..",
        b"trailing/",
        b"ok/value",
    ];
    let mut b = BundleBuilder::new("hostile");
    for (i, k) in keys.iter().enumerate() {
        b.add_f32(k, &[2], &[i as f32, -(i as f32)]);
    }
    let prefix = b.write_to_dir(src.path()).unwrap();
    // A file outside, which a `..` escape would reveal.
    std::fs::write(src.path().join("outside.txt"), b"secret").unwrap();
    let mount = fuse.mount(&prefix, "layouts=bin,json");
    let root = mount.path().canonicalize().unwrap();
    let paths = walk(mount.path());
    let mut bins = 0;
    for p in &paths {
        let rel = p.trim_end_matches('/');
        for comp in rel.split('/') {
            assert!(
                !comp.is_empty() && comp != "." && comp != "..",
                "bad component in {p:?}"
            );
        }
        let full = mount.path().join(rel);
        let canon = full.canonicalize().unwrap_or_else(|e| panic!("{p}: {e}"));
        assert!(
            canon.starts_with(&root),
            "{p} resolves outside the mount: {}",
            canon.display()
        );
        if p.ends_with(".bin") {
            let bytes = std::fs::read(&full).unwrap();
            assert_eq!(bytes.len(), 8, "{p}");
            bins += 1;
        }
        assert!(!full.as_os_str().as_bytes().contains(&0));
    }
    assert_eq!(
        bins,
        keys.len(),
        "every key has exactly one file: {paths:#?}"
    );
    assert!(!paths.iter().any(|p| p.contains("outside")), "{paths:#?}");
    // Looking up `..` from inside stays in the mount (the kernel resolves it, not us).
    let up = mount.path().join("..").canonicalize().unwrap();
    assert_eq!(up, root.parent().unwrap());
    mount.unmount_and_check();
}

/// Corrupt data through the mount: EIO for the affected file, a log line naming the data
/// file, every other file still reads.
#[test]
fn corrupt_data_gives_eio_and_a_log_line() {
    let Some(fuse) = Fuse::check() else { return };
    let src = tempfile::tempdir().unwrap();
    let prefix = write_stress_checkpoint(src.path(), 0);
    let good_mount = fuse.mount(&prefix, "layouts=bin,cache_dir=none");
    let good = read_tree(good_mount.path());
    good_mount.unmount_and_check();
    // Flip one byte in the middle of the data file: it lands in the big kernel.
    let data = PathBuf::from(format!("{}.data-00000-of-00001", prefix.display()));
    let mut bytes = std::fs::read(&data).unwrap();
    let mid = bytes.len() / 3;
    bytes[mid] ^= 0x55;
    std::fs::write(&data, &bytes).unwrap();
    let log = src.path().join("daemon.log");
    std::env::set_var("MODELFS_LOG", &log);
    let mount = fuse.mount(&prefix, "layouts=bin,cache_dir=none");
    std::env::remove_var("MODELFS_LOG");
    let mut failed = Vec::new();
    let mut noted = Vec::new();
    for (p, want) in &good {
        match std::fs::read(mount.path().join(p)) {
            // The failed tensor's `.json` (read after its `.bin`) gains `last_error`.
            Ok(b) if p.ends_with(".json") && b != *want => {
                let mut got: serde_json::Value = serde_json::from_slice(&b).unwrap();
                let last = got["last_error"].take();
                got.as_object_mut().unwrap().remove("last_error");
                let want: serde_json::Value = serde_json::from_slice(want).unwrap();
                assert_eq!(got, want, "{p}: more than last_error differs");
                assert!(last.as_str().unwrap().contains("checksum"), "{last}");
                noted.push(p.clone());
            }
            Ok(b) => assert_eq!(&b, want, "{p}: different bytes served"),
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(libc::EIO), "{p}: {e}");
                failed.push(p.clone());
            }
        }
    }
    assert_eq!(failed.len(), 1, "exactly the kernel fails: {failed:?}");
    assert!(failed[0].contains("kernel"), "{failed:?}");
    assert_eq!(noted.len(), 1, "the kernel's .json tells: {noted:?}");
    assert!(noted[0].contains("kernel"), "{noted:?}");
    let lines_before_probe = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .count();
    // A terminal probe (what shells and editors send to a file they open): ENOTTY, no line.
    let first = good.keys().next().unwrap();
    let f = std::fs::File::open(mount.path().join(first)).unwrap();
    // SAFETY: isatty on an open descriptor.
    assert_eq!(
        unsafe { libc::isatty(std::os::fd::AsRawFd::as_raw_fd(&f)) },
        0
    );
    assert_eq!(
        std::io::Error::last_os_error().raw_os_error(),
        Some(libc::ENOTTY)
    );
    drop(f);
    let mnt = mount.path().to_path_buf();
    mount.unmount_and_check();
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    // The checksum line names the data file, the mount point and the source: several mounts
    // share one log.
    let line = logged
        .lines()
        .find(|l| l.contains("stress.data-00000-of-00001") && l.contains("checksum"))
        .unwrap_or_else(|| panic!("no log line naming the file and the problem:\n{logged}"));
    assert!(
        line.contains(&*mnt.to_string_lossy()) && line.contains(&*prefix.to_string_lossy()),
        "the line does not name its mount point and source: {line}"
    );
    // Neither the probe nor the clean unmount logged anything.
    assert_eq!(
        logged.lines().count(),
        lines_before_probe,
        "lines after the reads:\n{logged}"
    );
}
