//! Real mounts through the built `modelfs` binary, on the committed fixtures (`fixtures/tf/*`)
//! and the real-world checkpoints of the shared directory (`$MODELFS_SHARED`,
//! `CARGO_MANIFEST_DIR/../shared` or `/work/shared`, `realworld/tf`).
//!
//! For every file of every mount: stat size == bytes read; random preads == slices of the full
//! read; `.npy` payload == `.bin` (except bfloat16, widened in `.npy`); mmap of `.npy` == read;
//! awk sums over `.txt`/`.csv` == sums of the `.bin` values; readdir == `modelfs ls`; with
//! python3 + numpy, `numpy.load` (also `mmap_mode='r'`) equals TensorFlow's expected values.
//! Plus: EROFS on writes, `latest` symlinks, SIGTERM/`umount`/`kill -9` clean-up, exit statuses.
//!
//! Without /dev/fuse or the right to mount, the mount checks are skipped with a message,
//! unless MODELFS_REQUIRE_FUSE=1. Every mount is undone by a Drop guard, even on failure.

mod angel;
mod cli;
mod clouds;
mod directories;
mod everyday;
mod faults;
mod firstlook;
mod graphs;
mod hdfs;
mod live;
mod proxy;
mod push;
mod remote;
mod robustness;
mod rows;
mod sources;
mod support;
mod views;

use std::collections::BTreeMap;
use std::collections::HashMap;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use support::*;

/// Checks every regular file of the mount; returns the number of files checked.
fn check_files(mnt: &Path, files: &[String]) -> usize {
    let mut rng = Lcg(0x5eed);
    for rel in files {
        let p = mnt.join(rel);
        let meta = std::fs::symlink_metadata(&p).unwrap();
        if !meta.is_file() {
            continue;
        }
        let full = match std::fs::read(&p) {
            Ok(b) => b,
            Err(e) => panic!("{rel}: read failed: {e}"),
        };
        // A big text file may show 0 until its size is learnt (SPEC §3): once read, exact.
        // Only a text layout may show a placeholder 0 before its size is learnt.
        let text = [".txt", ".csv", ".libsvm", "Text", "TextColumn"]
            .iter()
            .any(|s| rel.ends_with(s));
        assert!(
            meta.len() == full.len() as u64 || (text && meta.len() == 0),
            "{rel}: stat size {} before the read, {} bytes read",
            meta.len(),
            full.len()
        );
        assert_eq!(
            std::fs::metadata(&p).unwrap().len(),
            full.len() as u64,
            "{rel}: stat size != bytes read"
        );
        if rel.ends_with(".json") || rel.ends_with(".npy") {
            assert!(!full.is_empty(), "{rel}: empty");
        }
        let f = std::fs::File::open(&p).unwrap();
        for _ in 0..16 {
            let off = if full.is_empty() {
                0
            } else {
                rng.below(full.len() as u64)
            };
            let len = 1 + rng.below(9000) as usize;
            let mut buf = vec![0u8; len];
            let n = f.read_at(&mut buf, off).unwrap();
            let end = (off as usize + len).min(full.len());
            assert_eq!(
                &buf[..n],
                &full[off as usize..end],
                "{rel}: pread at {off}+{len}"
            );
        }
        let mut past = [0u8; 4];
        assert_eq!(
            f.read_at(&mut past, full.len() as u64 + 10).unwrap(),
            0,
            "{rel}: read past EOF"
        );
    }
    files.len()
}

/// Every file of every `step`-th tensor (by base name), so that at most about `max` files
/// remain; all files when there are fewer.
fn sample_tensors(files: &[String], max: usize) -> Vec<String> {
    if files.len() <= max {
        return files.to_vec();
    }
    let base = |f: &String| f.rsplit_once('.').map_or(f.clone(), |(b, _)| b.to_string());
    let mut bases: Vec<String> = files.iter().map(base).collect();
    bases.dedup();
    let step = files.len().div_ceil(max);
    let keep: std::collections::HashSet<String> = bases.into_iter().step_by(step).collect();
    files
        .iter()
        .filter(|f| keep.contains(&base(f)))
        .cloned()
        .collect()
}

/// Relative error of the shortest decimal text of one element of `dtype`.
fn text_precision(dtype: &str) -> f64 {
    match dtype {
        "bfloat16" => 8e-3,
        "float16" => 1e-3,
        "float32" => 1e-7,
        _ => 1e-15,
    }
}

/// `.npy` payload == `.bin`, mmap == read, and awk sums of `.txt`/`.csv` == `.bin` sums
/// (where `.bin` holds elements: a GGUF quantized tensor's holds its blocks as stored).
fn check_values(mnt: &Path, files: &[String]) {
    for rel in files.iter().filter(|f| f.ends_with(".bin")) {
        let base = &rel[..rel.len() - 4];
        let json = std::fs::read_to_string(mnt.join(format!("{base}.json"))).unwrap_or_default();
        if json.contains("\"stored\":") {
            continue;
        }
        let bin_path = mnt.join(rel);
        let dtype = xattr(&bin_path, "user.modelfs.dtype").unwrap_or_default();
        let bin = std::fs::read(&bin_path).unwrap();
        let npy_path = mnt.join(format!("{base}.npy"));
        if npy_path.exists() {
            let npy = std::fs::read(&npy_path).unwrap();
            let payload = npy_payload(&npy).unwrap_or_else(|| panic!("{base}.npy: bad header"));
            // bfloat16 and the float8 types: `.npy` widens them to float32 (the `.json` says).
            if dtype != "bfloat16" && !json.contains("npy_widened_to") {
                assert_eq!(payload, &bin[..], "{base}.npy payload != .bin");
            }
            let f = std::fs::File::open(&npy_path).unwrap();
            if !npy.is_empty() {
                // SAFETY: read-only mapping of a file nobody writes (read-only mount).
                let map = unsafe { memmap2::Mmap::map(&f) }.unwrap();
                assert_eq!(&map[..], &npy[..], "{base}.npy: mmap != read");
            }
        }
        let Some(values) = decode(&dtype, &bin) else {
            continue;
        };
        if values.iter().any(|v| !v.is_finite()) {
            continue;
        }
        let want: f64 = values.iter().sum();
        let scale: f64 =
            values.iter().map(|v| v.abs()).sum::<f64>() * text_precision(&dtype) + 1e-12;
        for (suffix, prog) in [
            ("txt", "{s+=$1} END{printf \"%.17g\", s}"),
            (
                "csv",
                "BEGIN{FS=\",\"} {for(i=1;i<=NF;i++) s+=$i} END{printf \"%.17g\", s}",
            ),
        ] {
            let p = mnt.join(format!("{base}.{suffix}"));
            if !p.exists() {
                continue;
            }
            let out = Command::new("awk").arg(prog).arg(&p).output().unwrap();
            let got: f64 = String::from_utf8_lossy(&out.stdout)
                .trim()
                .parse()
                .unwrap_or(f64::NAN);
            assert!(
                (got - want).abs() <= scale,
                "{base}.{suffix}: awk sum {got}, .bin sum {want}"
            );
        }
    }
}

/// Python + numpy: `np.load` of every `.npy` equals TensorFlow's expected values.
fn check_numpy(mnt: &Path, case: &Case) {
    let Some(expected_dir) = &case.expected_dir else {
        return;
    };
    if !walk(mnt).iter().any(|p| p.ends_with(".json")) {
        eprintln!(
            "note: {}: no .json files (generic layouts unavailable); skipping numpy.load checks",
            case.name
        );
        return;
    }
    if !python_numpy() {
        assert!(
            !modelfs_model::testing::must_be_complete(),
            "python3 with numpy is required here"
        );
        eprintln!("note: python3 with numpy not available; skipping numpy.load checks");
        return;
    }
    let out = Command::new("python3")
        .arg("-c")
        .arg(NUMPY_CHECK)
        .arg(mnt)
        .arg(expected_dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}: numpy check failed:\n{}{}",
        case.name,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn check_read_only(mnt: &Path, files: &[String]) {
    for e in [
        std::fs::create_dir(mnt.join("new-dir")).unwrap_err(),
        std::fs::write(mnt.join("new-file"), b"x").unwrap_err(),
    ] {
        assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{e}");
    }
    let Some(file) = files.first() else { return };
    let p = mnt.join(file);
    let e = std::fs::OpenOptions::new()
        .write(true)
        .open(&p)
        .unwrap_err();
    assert!(
        matches!(e.raw_os_error(), Some(libc::EROFS) | Some(libc::EACCES)),
        "write open: {e}"
    );
    for e in [
        std::fs::remove_file(&p).unwrap_err(),
        std::fs::rename(&p, mnt.join("renamed")).unwrap_err(),
    ] {
        assert_eq!(e.raw_os_error(), Some(libc::EROFS), "{e}");
    }
}

#[test]
fn exit_statuses() {
    let bin = modelfs();
    let tmp = tempfile::tempdir().unwrap();
    let status =
        |args: &[&std::ffi::OsStr]| Command::new(bin).args(args).output().unwrap().status.code();
    let t = tmp.path().as_os_str();
    assert_eq!(
        status(&["mount".as_ref(), "-o".as_ref(), "bogus".as_ref(), t, t]),
        Some(1)
    );
    assert_eq!(status(&["frobnicate".as_ref()]), Some(1));
    assert_eq!(
        status(&[
            "mount".as_ref(),
            t,
            tmp.path().join("missing/deeper").as_os_str()
        ]),
        Some(3)
    );
    let file = tmp.path().join("file");
    std::fs::write(&file, b"not a model").unwrap();
    assert_eq!(status(&["mount".as_ref(), t, file.as_os_str()]), Some(3));
    assert_eq!(status(&["mount".as_ref(), file.as_os_str(), t]), Some(2));
    assert_eq!(status(&["ls".as_ref(), file.as_os_str()]), Some(2));
    assert_eq!(status(&["info".as_ref(), file.as_os_str()]), Some(2));
    assert_eq!(status(&["umount".as_ref(), t]), Some(3));
}

#[test]
fn every_file_of_every_source() {
    let cases = cases();
    assert!(
        !cases.is_empty(),
        "no sources found (shared dir: {:?})",
        shared_dir()
    );
    let Some(fuse) = Fuse::check() else { return };
    let mut checked = 0;
    for case in &cases {
        let started = std::time::Instant::now();
        let Some(listed) = cli_ls(&case.source) else {
            continue;
        };
        let mount = fuse.mount(&case.source, "layouts=all");
        let walked = walk(mount.path());
        assert_eq!(walked, listed, "{}: readdir != modelfs ls", case.name);
        let all: Vec<String> = walked
            .iter()
            .filter(|p| !p.ends_with('/'))
            .cloned()
            .collect();
        // Huge sources (many_keys: ~120k files) are checked on an even sample of whole tensors.
        let files = sample_tensors(&all, 1500);
        checked += check_files(mount.path(), &files);
        check_values(mount.path(), &files);
        check_numpy(mount.path(), case);
        check_read_only(mount.path(), &files);
        // `cat` gives the same bytes as the mount.
        for f in files.iter().take(8) {
            let out = Command::new(modelfs())
                .args(["cat", "-o", "layouts=all"])
                .arg(&case.source)
                .arg(f)
                .output()
                .unwrap();
            if std::fs::symlink_metadata(mount.path().join(f))
                .unwrap()
                .is_file()
            {
                let mounted = std::fs::read(mount.path().join(f)).unwrap();
                if f.ends_with(".json") {
                    // A text layout's size is `null` until it has been rendered once, so
                    // the two `.json` may differ in those sizes only.
                    assert_eq!(
                        without_sizes(&out.stdout),
                        without_sizes(&mounted),
                        "{}: cat {f}",
                        case.name
                    );
                } else {
                    assert_eq!(out.stdout, mounted, "{}: cat {f}", case.name);
                }
            }
        }
        mount.unmount_and_check();
        eprintln!(
            "{}: {} files checked in {:?}",
            case.name,
            files.len(),
            started.elapsed()
        );
    }
    eprintln!("checked {checked} files in {} sources", cases.len());
}

/// Whether `rel` is a text layout, whose size may be a placeholder 0 until learnt (SPEC §3).
fn is_text(rel: &str) -> bool {
    [".txt", ".csv", ".libsvm", "Text", "TextColumn"]
        .iter()
        .any(|s| rel.ends_with(s))
}

/// Every file's `stat` size, in `order`.
fn stat_all(mnt: &Path, order: &[&String]) -> Vec<(String, u64)> {
    order
        .iter()
        .map(|rel| {
            (
                rel.to_string(),
                std::fs::metadata(mnt.join(rel)).unwrap().len(),
            )
        })
        .collect()
}

/// Every file's bytes, in `order`.
fn read_all(mnt: &Path, order: &[&String]) -> HashMap<String, usize> {
    order
        .iter()
        .map(|rel| {
            let b = std::fs::read(mnt.join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
            (rel.to_string(), b.len())
        })
        .collect()
}

/// A size given out differs from what a read returns (a text's placeholder 0 aside).
fn size_mismatches(stats: &[(String, u64)], reads: &HashMap<String, usize>) -> Vec<String> {
    stats
        .iter()
        .filter(|(rel, size)| {
            let got = reads[rel] as u64;
            *size != got && !(is_text(rel) && *size == 0)
        })
        .map(|(rel, size)| format!("{rel}: stat {size} != read {}", reads[rel]))
        .collect()
}

/// "File sizes are exact" at every moment of a mount, whatever was listed, read or let go
/// before: stat all then read all (a `.json` stat'ed before its tensor's texts were sized),
/// read all then stat all, in reverse order, and again after the tree let its recent tensors
/// go (more tensors than it keeps were read) and the kernel dropped its inodes.
#[test]
fn sizes_equal_reads_in_every_order() {
    let Some(fuse) = Fuse::check() else { return };
    let mut checked = 0;
    for case in cases() {
        if cli_ls(&case.source).is_none() {
            continue;
        }
        for (n, opts) in ["layouts=all", "layouts=all,cache_dir=none"]
            .iter()
            .enumerate()
        {
            let mount = fuse.mount(&case.source, opts);
            let mnt = mount.path();
            let all: Vec<String> = walk(mnt)
                .into_iter()
                .filter(|p| !p.ends_with('/'))
                .collect();
            let files = sample_tensors(&all, 1200);
            let forward: Vec<&String> = files.iter().collect();
            let backward: Vec<&String> = files.iter().rev().collect();
            let mut bad = Vec::new();
            // 1: stat all, then read all (in the other order on the second mount).
            let (first, second) = if n == 0 {
                (&forward, &backward)
            } else {
                (&backward, &forward)
            };
            let stats = stat_all(mnt, first);
            let reads = read_all(mnt, second);
            bad.extend(size_mismatches(&stats, &reads));
            // 2: read all (done), then stat all.
            bad.extend(size_mismatches(&stat_all(mnt, first), &reads));
            // 3: the kernel forgets what it cached; every file asked for again.
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .write(true)
                .open("/proc/sys/vm/drop_caches")
            {
                use std::io::Write;
                let _ = f.write_all(b"2\n");
            }
            let stats = stat_all(mnt, second);
            bad.extend(size_mismatches(&stats, &read_all(mnt, first)));
            assert!(bad.is_empty(), "{} ({opts}): {bad:#?}", case.name);
            checked += files.len();
            mount.unmount_and_check();
        }
    }
    eprintln!("sizes equal reads: {checked} files");
}

/// A `.json` opened before any listing, then its directory listed (sizing its tensor's
/// texts): the open file reads what `stat` says, before and after.
#[test]
fn a_json_opened_before_a_listing_reads_what_stat_says() {
    use std::io::{Read, Seek};
    let Some(fuse) = Fuse::check() else { return };
    let source = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/tf/partitioned/ckpt");
    let mount = fuse.mount(&source, "layouts=all,cache_dir=none");
    let path = mount.path().join("rows_10x4.json");
    let mut f = std::fs::File::open(&path).unwrap();
    let mut first = Vec::new();
    f.read_to_end(&mut first).unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().len(), first.len() as u64);
    walk(mount.path());
    for rel in ["rows_10x4.txt", "rows_10x4.csv", "rows_10x4.libsvm"] {
        let _ = std::fs::read(mount.path().join(rel));
    }
    let size = std::fs::metadata(&path).unwrap().len();
    f.rewind().unwrap();
    let mut again = Vec::new();
    f.read_to_end(&mut again).unwrap();
    let fresh = std::fs::read(&path).unwrap();
    assert_eq!(size, again.len() as u64, "stat vs the open file's read");
    assert_eq!(size, fresh.len() as u64, "stat vs a new read");
    assert_eq!(again, first, "the .json changed after it was shown");
    drop(f);
    mount.unmount_and_check();
}

#[test]
fn checkpoint_directories_have_latest() {
    let Some(fuse) = Fuse::check() else { return };
    let mut dirs: BTreeMap<PathBuf, ()> = BTreeMap::new();
    for case in cases() {
        if let Some(dir) = case.source.parent() {
            if dir.join("checkpoint").is_file() {
                dirs.insert(dir.to_path_buf(), ());
            }
        }
    }
    for dir in dirs.keys() {
        if cli_ls(dir).is_none() {
            continue;
        }
        let mount = fuse.mount(dir, "layouts=all");
        let latest = mount.path().join("latest");
        if let Ok(target) = std::fs::read_link(&latest) {
            assert!(
                latest.is_dir(),
                "{}: latest -> {} does not resolve",
                dir.display(),
                target.display()
            );
            assert!(std::fs::read_dir(&latest).unwrap().count() > 0);
        }
        mount.unmount_and_check();
    }
}

#[test]
fn daemon_lifecycle() {
    let Some(fuse) = Fuse::check() else { return };
    let Some(case) = cases().into_iter().find(|c| cli_ls(&c.source).is_some()) else {
        eprintln!("skipping: no readable source");
        return;
    };
    // Already mounted → 3; SIGTERM unmounts cleanly.
    let mount = fuse.mount(&case.source, "");
    let again = Command::new(modelfs())
        .arg("mount")
        .arg(&case.source)
        .arg(mount.path())
        .output()
        .unwrap();
    assert_eq!(
        again.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    let pid = mount.daemon_pid().expect("daemon process");
    unsafe { libc::kill(pid, libc::SIGTERM) };
    assert!(
        wait_until(|| !is_mount_point(mount.path()) && process_gone(pid)),
        "SIGTERM did not unmount"
    );
    drop(mount);
    // kill -9 leaves a dead mount; `modelfs umount` clears it.
    let mount = fuse.mount(&case.source, "");
    let pid = mount.daemon_pid().expect("daemon process");
    unsafe { libc::kill(pid, libc::SIGKILL) };
    assert!(wait_until(|| process_gone(pid)));
    assert!(is_mount_point(mount.path()));
    let u = Command::new(modelfs())
        .arg("umount")
        .arg(mount.path())
        .output()
        .unwrap();
    assert!(
        u.status.success(),
        "umount of a dead mount: {}",
        String::from_utf8_lossy(&u.stderr)
    );
    assert!(!is_mount_point(mount.path()));
    drop(mount);
    // Foreground: SIGINT unmounts and the process exits 0.
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(modelfs())
        .args(["mount", "-f"])
        .arg(&case.source)
        .arg(dir.path())
        .spawn()
        .unwrap();
    let guard = MountGuard::adopt(dir.path().to_path_buf());
    assert!(
        wait_until(|| is_mount_point(dir.path())),
        "foreground mount did not appear"
    );
    assert!(std::fs::read_dir(dir.path()).unwrap().count() > 0);
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(!is_mount_point(dir.path()));
    drop(guard);
}

/// A `.json` with every `"layouts"` size removed.
fn without_sizes(json: &[u8]) -> serde_json::Value {
    let mut v: serde_json::Value = serde_json::from_slice(json).expect("valid .json");
    if let Some(layouts) = v.get_mut("layouts").and_then(|l| l.as_array_mut()) {
        for l in layouts {
            l.as_object_mut().map(|o| o.remove("size"));
        }
    }
    v
}
