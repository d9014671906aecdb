//! The first look at a big model (SPEC §3 "Sizes"): on a fresh mount with no cache, listing,
//! `stat`, `.json` and the first bytes of every file answer at once; a text file whose size is
//! not known yet reads as 0 bytes in `stat` but reads to its end, and has its exact size once
//! read; `text_size=exact` gives exact sizes before first use; an interrupted size pass stops.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::support::*;

/// `examples/gen_bench_ckpt` (built by `cargo test --all-targets`; built here otherwise).
fn generator() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let target = exe.parent().and_then(Path::parent).unwrap();
    let bin = target.join("examples/gen_bench_ckpt");
    if !bin.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = Command::new(cargo);
        cmd.args(["build", "--example", "gen_bench_ckpt"]);
        if target.ends_with("release") {
            cmd.arg("--release");
        }
        let st = cmd
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .unwrap();
        assert!(st.success(), "building gen_bench_ckpt");
    }
    bin
}

/// A checkpoint of one float32 tensor `W` of rows × cols, under `dir`.
pub(crate) fn checkpoint(dir: &Path, rows: u64, cols: u64) -> PathBuf {
    let prefix = dir.join("model");
    let st = Command::new(generator())
        .arg(&prefix)
        .args(["1", &rows.to_string(), &cols.to_string()])
        .status()
        .unwrap();
    assert!(st.success(), "gen_bench_ckpt failed");
    prefix
}

fn timed<T>(what: &str, limit: Duration, f: impl FnOnce() -> T) -> T {
    let t = Instant::now();
    let out = f();
    let took = t.elapsed();
    eprintln!("first look: {what}: {:.1} ms", took.as_secs_f64() * 1e3);
    assert!(took < limit, "{what} took {took:?} (limit {limit:?})");
    out
}

fn run_ok(cmd: &mut Command) -> Vec<u8> {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

#[test]
fn first_look_at_a_1gib_tensor_is_instant() {
    let Some(fuse) = Fuse::check() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let big = checkpoint(tmp.path(), 16384, 16384); // 1 GiB of float32
    let m = fuse.mount(&big, "cache_dir=none,layouts=all");
    let mnt = m.path();
    // Listing, stat and .json touch no tensor data: 200 ms is the goal and leaves a margin
    // (about 5 ms measured). A first read checksums the whole 1 GiB tensor (60-140 ms on 2
    // cores, page-cached) and renders at most one batch of text: 1 s allows for the other
    // tests running beside this one.
    let limit = Duration::from_millis(200);
    let read_limit = Duration::from_millis(1000);
    let files = timed("ls", limit, || run_ok(Command::new("ls").arg(mnt)));
    let files: Vec<String> = String::from_utf8(files)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert!(files.len() >= 10, "{files:?}");
    timed("ls -l --color=always -F", limit, || {
        run_ok(
            Command::new("ls")
                .args(["-l", "--color=always", "-F"])
                .arg(mnt),
        )
    });
    for f in &files {
        let p = mnt.join(f);
        if f.ends_with(".json") {
            let text = timed(&format!("cat {f}"), limit, || std::fs::read(&p).unwrap());
            let v: serde_json::Value = serde_json::from_slice(&text).unwrap();
            assert_eq!(v["shape"], serde_json::json!([16384, 16384]));
        }
        let head = timed(&format!("head -c 100 {f}"), read_limit, || {
            run_ok(Command::new("head").args(["-c", "100"]).arg(&p))
        });
        assert_eq!(head.len(), 100, "{f}");
    }
    // The text layouts of this tensor are not sized yet: stat shows 0, reads still work.
    let txt = mnt.join("W.txt");
    assert_eq!(std::fs::metadata(&txt).unwrap().len(), 0);
    let lines = run_ok(Command::new("head").args(["-n", "3"]).arg(&txt));
    assert_eq!(String::from_utf8(lines).unwrap().lines().count(), 3);
    m.unmount_and_check();
}

#[test]
fn unknown_sizes_read_to_the_end_then_become_exact() {
    let Some(fuse) = Fuse::check() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let src = checkpoint(tmp.path(), 1024, 2048); // 2 Mi values: past the render budget
    let exact = fuse.mount(&src, "cache_dir=none,text_size=exact");
    let want = std::fs::read(exact.path().join("W.txt")).unwrap();
    let exact_size = std::fs::metadata(exact.path().join("W.txt")).unwrap().len();
    assert_eq!(
        exact_size,
        want.len() as u64,
        "text_size=exact: stat == bytes"
    );
    exact.unmount_and_check();

    let m = fuse.mount(&src, "cache_dir=none");
    let txt = m.path().join("W.txt");
    assert_eq!(
        std::fs::metadata(&txt).unwrap().len(),
        0,
        "size not known yet"
    );
    // What common tools make of it (README "Sizes"): all read to the real end.
    let sh = |script: &str| -> Vec<u8> {
        run_ok(Command::new("sh").arg("-c").arg(script).arg("sh").arg(&txt))
    };
    assert_eq!(sh("cat \"$1\""), want, "cat");
    assert_eq!(
        sh("tail -c 100 \"$1\""),
        want[want.len() - 100..],
        "tail -c"
    );
    let wc = String::from_utf8(sh("wc -c < \"$1\"")).unwrap();
    assert_eq!(wc.trim(), want.len().to_string(), "wc -c");
    let lines = String::from_utf8(sh("awk 'END { print NR }' \"$1\"")).unwrap();
    assert_eq!(lines.trim(), "2097152", "awk");
    let dst = tmp.path().join("copy.txt");
    run_ok(Command::new("cp").arg(&txt).arg(&dst));
    assert!(std::fs::read(&dst).unwrap() == want, "cp");
    if python_numpy() {
        let py = "import sys, numpy; d = open(sys.argv[1], 'rb').read(); \
                  a = numpy.loadtxt(sys.argv[1], dtype=numpy.float32); print(len(d), a.size)";
        let out = run_ok(Command::new("python3").args(["-c", py]).arg(&txt));
        assert_eq!(
            String::from_utf8(out).unwrap().trim(),
            format!("{} 2097152", want.len())
        );
    }
    // After a reader reached the end the size is exact (and so for new opens).
    assert_eq!(std::fs::metadata(&txt).unwrap().len(), want.len() as u64);
    assert!(std::fs::read(&txt).unwrap() == want);
    m.unmount_and_check();
}

/// `lseek(SEEK_END)` on an open text file of unknown size (python's `seek(0, 2)`) reaches us as
/// a GETATTR with a file handle: it gets the exact size, learnt there and then on every core,
/// not the placeholder 0 (which would send the reader back to the start).
#[test]
fn seek_to_end_learns_the_size() {
    use std::io::{Read, Seek, SeekFrom};
    let Some(fuse) = Fuse::check() else { return };
    let tmp = tempfile::tempdir().unwrap();
    // 8 Mi values: the background pass cannot have sized it by the time we seek.
    let src = checkpoint(tmp.path(), 2048, 4096);
    let exact = fuse.mount(&src, "cache_dir=none,text_size=exact");
    let want = std::fs::read(exact.path().join("W.txt")).unwrap();
    exact.unmount_and_check();

    let m = fuse.mount(&src, "cache_dir=none");
    let txt = m.path().join("W.txt");
    let mut f = std::fs::File::open(&txt).unwrap();
    // The kernel trusts attributes with no time to live for the rest of the clock tick they
    // came in (up to 4 ms): a seek in the same tick as the open sees the placeholder.
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(f.seek(SeekFrom::End(0)).unwrap(), want.len() as u64);
    f.seek(SeekFrom::End(-100)).unwrap();
    let mut tail = Vec::new();
    f.read_to_end(&mut tail).unwrap();
    assert_eq!(tail, want[want.len() - 100..]);
    drop(f);
    assert_eq!(std::fs::metadata(&txt).unwrap().len(), want.len() as u64);
    m.unmount_and_check();
}

#[test]
fn background_pass_learns_sizes_nobody_reads() {
    let Some(fuse) = Fuse::check() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let src = checkpoint(tmp.path(), 1024, 2048);
    let m = fuse.mount(&src, "cache_dir=none,layouts=txt,csv");
    let csv = m.path().join("W.csv");
    assert_eq!(std::fs::metadata(&csv).unwrap().len(), 0);
    assert!(
        wait_until(|| std::fs::metadata(&csv).unwrap().len() > 0),
        "the background pass did not size W.csv"
    );
    let size = std::fs::metadata(&csv).unwrap().len();
    assert_eq!(std::fs::read(&csv).unwrap().len() as u64, size);
    m.unmount_and_check();
}

#[test]
fn an_interrupted_size_pass_stops() {
    let Some(fuse) = Fuse::check() else { return };
    if Command::new("python3")
        .arg("-c")
        .arg("1")
        .status()
        .map_or(true, |s| !s.success())
    {
        assert!(
            !modelfs_model::testing::must_be_complete(),
            "python3 is needed"
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let big = checkpoint(tmp.path(), 8192, 16384); // 512 MiB: seconds to size
    let m = fuse.mount(&big, "cache_dir=none,text_size=exact");
    // stat(2) from C (so the errno is seen), SIGINT to the calling thread after 300 ms.
    let py = r#"
import ctypes, os, signal, sys, threading, time
libc = ctypes.CDLL(None, use_errno=True)
signal.signal(signal.SIGINT, lambda *a: None)
main = threading.get_ident()
sent = []
def fire():
    sent.append(time.monotonic())
    signal.pthread_kill(main, signal.SIGINT)
threading.Timer(0.3, fire).start()
buf = ctypes.create_string_buffer(512)
r = libc.stat(sys.argv[1].encode(), buf)
end = time.monotonic()
print(r, ctypes.get_errno(), round((end - sent[0]) * 1000) if sent else -1)
"#;
    let out = run_ok(
        Command::new("python3")
            .args(["-c", py])
            .arg(m.path().join("W.txt")),
    );
    let out = String::from_utf8(out).unwrap();
    let f: Vec<i64> = out.split_whitespace().map(|x| x.parse().unwrap()).collect();
    eprintln!(
        "interrupted stat: result {} errno {} after {} ms",
        f[0], f[1], f[2]
    );
    assert_eq!((f[0], f[1]), (-1, libc::EINTR as i64), "{out}");
    assert!(
        f[2] >= 0 && f[2] < 300,
        "stopped {} ms after the signal",
        f[2]
    );
    m.unmount_and_check();
}

/// A second `cat` of a binary file is the kernel's page cache at work: not one READ request
/// reaches the daemon (FOPEN_KEEP_CACHE, long attribute TTLs, no invalidation on open).
#[test]
fn a_second_read_never_reaches_the_daemon() {
    let Some(fuse) = Fuse::check() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let src = checkpoint(tmp.path(), 2048, 4096); // 32 MiB
    let log = tmp.path().join("daemon.log");
    let m = fuse.mount_env(
        &src,
        &format!("layouts=bin,npy,log={}", log.display()),
        &[("RUST_LOG", "modelfs_core::fs::fuse=trace")],
    );
    let reads = || reads_logged(&log);
    for f in ["W.bin", "W.npy"] {
        let p = m.path().join(f);
        let first = std::fs::read(&p).unwrap();
        assert!(reads() > 0, "the first read of {f} logged no READ");
        // The host may reclaim page cache at any time (this VM runs DAMON's reclaim): a read
        // of pages found resident just before must not reach the daemon, in one of a few
        // tries. A cache dropped on open, or reads sent anyway, fail every try.
        let mut tries = Vec::new();
        let quiet = (0..5).any(|_| {
            let before = reads();
            let all_in = resident(&p);
            assert!(std::fs::read(&p).unwrap() == first, "{f} changed");
            tries.push((all_in, reads() - before));
            all_in && reads() == before
        });
        assert!(
            quiet,
            "a second read of {f} reached the daemon: (resident, READs) {tries:?}"
        );
    }
}

/// Whether every page of `p` is in the kernel's page cache (no READ is sent).
fn resident(p: &Path) -> bool {
    crate::support::resident_share(p, 0, u64::MAX) == 1.0
}

/// FUSE requests of `ls -l` on one directory of 1,000 tensors (3,000 files, default layouts;
/// `fixtures/tf/wide`, scripts/gen_wide.py), counted in the daemon's debug log: entries come
/// with their attributes (READDIRPLUS), so the listing costs fewer requests than files — a
/// LOOKUP per file (and a GETATTR for each whose size is not final) would cost well over one.
/// A second `ls -l` reads the directory from the kernel's cache.
#[test]
fn ls_l_of_a_wide_directory_costs_less_than_a_request_per_file() {
    let Some(fuse) = Fuse::check() else { return };
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("daemon.log");
    let mount = fuse.mount_env(
        &here.join("fixtures/tf/wide/ckpt"),
        "cache_dir=none",
        &[
            ("RUST_LOG", "fuser=debug"),
            ("MODELFS_LOG", log.to_str().unwrap()),
        ],
    );
    let requests = || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("FUSE("))
            .count()
    };
    let ls = || {
        let before = requests();
        let out = Command::new("ls")
            .arg("-l")
            .arg(mount.path())
            .output()
            .unwrap();
        assert!(out.status.success());
        let files = String::from_utf8_lossy(&out.stdout).lines().count() - 1;
        // The log is written as requests are answered: wait for it to settle.
        let mut after = requests();
        for _ in 0..20 {
            std::thread::sleep(Duration::from_millis(50));
            let now = requests();
            if now == after {
                break;
            }
            after = now;
        }
        (files, after - before)
    };
    let (files, first) = ls();
    assert_eq!(files, 3000);
    assert!(first > 0, "no request counted: is the debug log written?");
    assert!(first < files, "{first} requests for {files} files");
    let (_, second) = ls();
    assert!(
        second <= first,
        "{second} requests the second time, {first} the first"
    );
    mount.unmount_and_check();
}
