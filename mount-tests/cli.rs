//! The commands around the mount (SPEC §4): `list`, `info`, `verify`, `cache`, `index`, and the
//! paths and conventions people use (`.meta`, `saved_model.pb`, serving directories, fstab).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::support::*;

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/tf")
        .join(rel)
}

fn run(args: &[&std::ffi::OsStr]) -> Output {
    let mut cmd = Command::new(modelfs());
    // A daemon started here logs nowhere unless the test says (never the user's syslog).
    if std::env::var_os("MODELFS_LOG").is_none() {
        cmd.env("MODELFS_LOG", "/dev/null");
    }
    cmd.args(args).output().unwrap()
}

fn text(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn list_shows_one_line_per_tensor_and_json() {
    let src = fixture("partitioned/ckpt");
    let o = run(&["list".as_ref(), src.as_os_str()]);
    assert!(o.status.success());
    let out = text(&o);
    let line = out
        .lines()
        .find(|l| l.starts_with("cols_3x5_i64 "))
        .unwrap_or_else(|| panic!("{out}"));
    let f: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(
        &f[..5],
        ["cols_3x5_i64", "int64", "[3,5]", "120", "2"],
        "{line}"
    );
    let o = run(&["list".as_ref(), "--json".as_ref(), src.as_os_str()]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let item = v
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["path"] == "cols_3x5_i64")
        .unwrap();
    assert_eq!(item["shape"], serde_json::json!([3, 5]));
    assert_eq!(item["partitions"], 2);
    assert_eq!(item["bytes"], 120);
    // A directory of checkpoints: info per checkpoint, list with each one's prefix.
    let run_dir = fixture("ckpt_manager/run");
    let info = text(&run(&["info".as_ref(), run_dir.as_os_str()]));
    assert!(info.contains("checkpoints: 2"), "{info}");
    assert!(info.contains("  ckpt-3: 3 tensors"), "{info}");
    let out = text(&run(&["list".as_ref(), run_dir.as_os_str()]));
    assert!(out.lines().any(|l| l.starts_with("ckpt-2/w ")), "{out}");
}

#[test]
fn verify_finds_a_flipped_data_byte_that_info_cannot() {
    let tmp = tempfile::tempdir().unwrap();
    for f in ["ckpt.index", "ckpt.data-00000-of-00001"] {
        std::fs::copy(fixture("dtypes").join(f), tmp.path().join(f)).unwrap();
    }
    let src = tmp.path().join("ckpt");
    let o = run(&["verify".as_ref(), src.as_os_str()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(text(&o).contains("no problems"));
    let data = tmp.path().join("ckpt.data-00000-of-00001");
    let mut bytes = std::fs::read(&data).unwrap();
    bytes[20] ^= 1;
    std::fs::write(&data, bytes).unwrap();
    let info = run(&["info".as_ref(), src.as_os_str()]);
    assert!(info.status.success());
    let info = text(&info);
    assert!(!info.contains("problems: 0"), "{info}");
    assert!(info.contains("not verified"), "{info}");
    let o = run(&["verify".as_ref(), src.as_os_str()]);
    assert_eq!(o.status.code(), Some(2));
    let out = text(&o);
    assert!(
        out.contains("1 problem in") && out.contains("checksum"),
        "{out}"
    );
}

#[test]
fn a_sparse_model_too_big_for_dense_layouts_shows_libsvm() {
    let Some(shared) = shared_dir() else {
        assert!(
            !modelfs_model::testing::must_be_complete(),
            "../shared is missing"
        );
        return;
    };
    let lr = shared.join("realworld/angel/angel_19608468/lr");
    let ls = text(&run(&["ls".as_ref(), lr.as_os_str()]));
    assert!(ls.lines().any(|l| l == "input_weight.libsvm"), "{ls}");
    // By default a sparse matrix shows its stored entries, and nothing is "unavailable".
    let o = run(&["cat".as_ref(), lr.as_os_str(), "input_weight.json".as_ref()]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["layouts"][0]["layout"], "libsvm");
    assert!(v.get("unavailable").is_none(), "{v}");
    // Dense layouts asked by name: too big for max_dense, said so, libsvm shown anyway.
    let o = run(&[
        "cat".as_ref(),
        "-o".as_ref(),
        "layouts=json,txt,npy".as_ref(),
        lr.as_os_str(),
        "input_weight.json".as_ref(),
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["layouts"][0]["layout"], "libsvm");
    let why = v["unavailable"][0]["why"].as_str().unwrap();
    assert!(why.contains("max_dense"), "{why}");
    let data = run(&[
        "cat".as_ref(),
        lr.as_os_str(),
        "input_weight.libsvm".as_ref(),
    ]);
    assert!(data.status.success() && data.stdout.starts_with(b"0 0:"));
    // Layout groups.
    let ls = text(&run(&[
        "ls".as_ref(),
        "-o".as_ref(),
        "layouts=angel".as_ref(),
        lr.as_os_str(),
    ]));
    assert!(
        ls.contains("input_bias.ColIdValueText") && !ls.contains("input_bias.npy"),
        "{ls}"
    );
    let bad = run(&[
        "ls".as_ref(),
        "-o".as_ref(),
        "layouts=tsv".as_ref(),
        lr.as_os_str(),
    ]);
    assert_eq!(bad.status.code(), Some(1));
    let msg = String::from_utf8_lossy(&bad.stderr);
    assert!(msg.contains("libsvm") && msg.contains("generic"), "{msg}");
}

#[test]
fn identical_tensors_have_identical_json_whatever_the_prefix() {
    let tmp = tempfile::tempdir().unwrap();
    let src = fixture("partitioned");
    for (from, to) in [
        ("ckpt.index", "model.ckpt-100.index"),
        (
            "ckpt.data-00000-of-00001",
            "model.ckpt-100.data-00000-of-00001",
        ),
    ] {
        std::fs::copy(src.join(from), tmp.path().join(to)).unwrap();
    }
    let a = src.join("ckpt");
    let b = tmp.path().join("model.ckpt-100");
    let files = text(&run(&["ls".as_ref(), a.as_os_str()]));
    let mut checked = 0;
    for f in files.lines().filter(|f| f.ends_with(".json")) {
        let ja = run(&[
            "cat".as_ref(),
            "-o".as_ref(),
            "cache_dir=none".as_ref(),
            a.as_os_str(),
            f.as_ref(),
        ]);
        let jb = run(&[
            "cat".as_ref(),
            "-o".as_ref(),
            "cache_dir=none".as_ref(),
            b.as_os_str(),
            f.as_ref(),
        ]);
        assert!(ja.status.success());
        assert_eq!(text(&ja), text(&jb), "{f}");
        checked += 1;
    }
    assert!(checked >= 3, "{files}");
}

#[test]
fn the_paths_people_type() {
    let ls = |p: &Path| {
        let o = run(&["ls".as_ref(), p.as_os_str()]);
        (
            o.status.code(),
            text(&o),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let (code, out, _) = ls(&fixture("tf1_saver/model.ckpt-1.meta"));
    assert_eq!(code, Some(0));
    assert!(out.lines().any(|l| l == "b.txt"), "{out}");
    let (code, out, _) = ls(&fixture("savedmodel/saved_model/saved_model.pb"));
    assert_eq!(code, Some(0), "{out}");
    let (code, _, err) = ls(Path::new("/nonexistent/path"));
    assert_eq!(code, Some(2));
    assert!(
        err.contains("no such file or directory") && !err.contains(".index"),
        "{err}"
    );
    // A TF Serving base directory: every version, `latest` the highest.
    let tmp = tempfile::tempdir().unwrap();
    let sm = fixture("savedmodel/saved_model");
    for v in ["7", "12"] {
        let d = tmp.path().join(v);
        std::fs::create_dir_all(d.join("variables")).unwrap();
        std::fs::copy(sm.join("saved_model.pb"), d.join("saved_model.pb")).unwrap();
        for e in std::fs::read_dir(sm.join("variables")).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), d.join("variables").join(e.file_name())).unwrap();
        }
    }
    let (code, out, err) = ls(tmp.path());
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.lines().any(|l| l == "7/") && out.lines().any(|l| l == "12/"),
        "{out}"
    );
    let latest = std::fs::read_dir(tmp.path()).unwrap().count();
    assert_eq!(latest, 2);
    let o = run(&["ls".as_ref(), tmp.path().as_os_str(), "latest".as_ref()]);
    assert!(text(&o).lines().all(|l| l.starts_with("latest/")) && o.status.success());
    let cat12 = run(&["cat".as_ref(), tmp.path().as_os_str(), "latest".as_ref()]);
    assert!(!cat12.status.success()); // a directory
}

/// Removes the helper link it made, even on failure.
struct HelperLink(Option<PathBuf>);

impl Drop for HelperLink {
    fn drop(&mut self) {
        if let Some(p) = &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

#[test]
fn mount_t_fuse_modelfs_and_fstab() {
    let Some(_fuse) = Fuse::check() else { return };
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        assert!(
            !modelfs_model::testing::must_be_complete(),
            "mount -t / fstab checks need root (mount(8) helpers)"
        );
        eprintln!("skipping mount -t / fstab checks: they need root (mount(8) helpers)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mnt = tmp.path().join("m");
    std::fs::create_dir(&mnt).unwrap();
    // Without the helper link, mount(8) runs mount.fuse3, which runs `modelfs SOURCE
    // MOUNTPOINT -o …` by the shell's default PATH (mount passes none): a checkpoint prefix,
    // which is no file, must mount (it was taken for a mistyped subcommand).
    let helper = Path::new("/sbin/mount.fuse.modelfs");
    if !helper.exists() {
        assert!(
            Path::new("/sbin/mount.fuse3").exists(),
            "mount.fuse3 is missing (package fuse3)"
        );
        let on_path = Path::new("/usr/local/bin/modelfs");
        let _bin = if on_path.exists() {
            HelperLink(None)
        } else {
            std::os::unix::fs::symlink(modelfs(), on_path).unwrap();
            HelperLink(Some(on_path.to_path_buf()))
        };
        let prefix = fixture("tf1_saver/model.ckpt-1");
        assert!(!prefix.exists());
        let o = Command::new("mount")
            .args(["-t", "fuse.modelfs"])
            .arg(&prefix)
            .arg(&mnt)
            .args(["-o", "ro"])
            .output()
            .unwrap();
        let _guard = MountGuard::adopt(mnt.clone());
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert!(mnt.join("W.txt").is_file());
        assert!(Command::new("umount").arg(&mnt).status().unwrap().success());
    }
    // mount(8) runs /sbin/mount.fuse.modelfs for type fuse.modelfs (README: Install).
    let _link = if helper.exists() {
        HelperLink(None)
    } else {
        std::os::unix::fs::symlink(modelfs(), helper).unwrap();
        HelperLink(Some(helper.to_path_buf()))
    };
    let src = fixture("dtypes/ckpt");
    let st = Command::new("mount")
        .args(["-t", "fuse.modelfs"])
        .arg(&src)
        .arg(&mnt)
        .args(["-o", "layouts=bin,noatime,_netdev"])
        .status()
        .unwrap();
    let _guard = MountGuard::adopt(mnt.clone());
    assert!(st.success());
    let found = Command::new("findmnt")
        .args(["-n", "-t", "fuse.modelfs", "-o", "TARGET"])
        .output()
        .unwrap();
    assert!(
        text(&found).lines().any(|l| Path::new(l) == mnt),
        "{}",
        text(&found)
    );
    assert!(mnt.join("float32.bin").is_file());
    assert!(
        !mnt.join("float32.txt").exists(),
        "layouts= was not applied"
    );
    assert!(Command::new("umount").arg(&mnt).status().unwrap().success());
    // An fstab line with the usual options.
    let fstab = tmp.path().join("fstab");
    std::fs::write(
        &fstab,
        format!(
            "{} {} fuse.modelfs defaults,ro,nosuid,nodev,noatime,_netdev,x-systemd.automount,layouts=all 0 0\n",
            src.display(),
            mnt.display()
        ),
    )
    .unwrap();
    let st = Command::new("mount")
        .arg("-a")
        .arg("-T")
        .arg(&fstab)
        .status()
        .unwrap();
    assert!(st.success());
    assert!(mnt.join("float32.ValueText").is_file());
    assert!(Command::new("umount").arg(&mnt).status().unwrap().success());
}

#[test]
fn mount_points_are_made_and_removed_and_umount_z_detaches() {
    let Some(fuse) = Fuse::check() else { return };
    let _ = fuse;
    let tmp = tempfile::tempdir().unwrap();
    let mnt = tmp.path().join("new");
    let src = fixture("dtypes/ckpt");
    let o = run(&["mount".as_ref(), src.as_os_str(), mnt.as_os_str()]);
    let guard = MountGuard::adopt(mnt.clone());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(mnt.join("float32.json").is_file());
    let busy = std::fs::File::open(mnt.join("float32.json")).unwrap();
    let o = run(&["umount".as_ref(), "-z".as_ref(), mnt.as_os_str()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(!is_mount_point(&mnt));
    drop(busy);
    assert!(
        wait_until(|| !mnt.exists()),
        "the mount point modelfs made is still there"
    );
    drop(guard);
    // Mounting over a non-empty directory warns.
    let full = tmp.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("x"), b"x").unwrap();
    let log = tmp.path().join("daemon.log");
    let o = run(&[
        "mount".as_ref(),
        "--log-file".as_ref(),
        log.as_os_str(),
        src.as_os_str(),
        full.as_os_str(),
    ]);
    let _g = MountGuard::adopt(full.clone());
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("not empty"));
    assert!(std::fs::read(full.join("float32.json")).is_ok());
    let o = run(&["umount".as_ref(), full.as_os_str()]);
    assert!(o.status.success());
    assert!(
        full.join("x").exists(),
        "a directory modelfs did not make is kept"
    );
    assert!(log.exists(), "--log-file was not created");
}

/// `modelfs umount` returns once the daemon has ended and removed the mount point it made:
/// a script that unmounts and mounts again does not race it, even with both cores busy.
#[test]
fn umount_returns_when_the_mount_point_made_is_gone() {
    let Some(_fuse) = Fuse::check() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let mnt = tmp.path().join("made");
    let src = fixture("dtypes/ckpt");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load: Vec<_> = (0..2)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
                }
            })
        })
        .collect();
    let mut left = 0;
    for _ in 0..100 {
        let o = run(&["mount".as_ref(), src.as_os_str(), mnt.as_os_str()]);
        let guard = MountGuard::adopt(mnt.clone());
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let o = run(&["umount".as_ref(), mnt.as_os_str()]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        if mnt.exists() {
            left += 1;
            assert!(wait_until(|| !mnt.exists()));
        }
        drop(guard);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for t in load {
        t.join().unwrap();
    }
    assert_eq!(
        left, 0,
        "the mount point was still there after umount returned"
    );
}

#[test]
fn help_man_and_completions() {
    let help = text(&run(&["--help".as_ref()]));
    for word in [
        "text_size=",
        "cache_max=",
        "ValueText",
        "EXIT STATUS",
        "MODELFS_LOG",
        "fstab",
    ] {
        assert!(help.contains(word), "--help lacks {word}");
    }
    let man = run(&["man".as_ref()]);
    assert!(man.status.success() && text(&man).contains(".TH modelfs 1"));
    // One page: every command's options in it, no pointer to pages that do not exist.
    let page = text(&man);
    assert!(
        !page.contains("modelfs\\-mount(1)"),
        "pages that do not exist"
    );
    for c in ["mount", "diff", "check", "row", "verify"] {
        assert!(page.contains(&format!(".SS modelfs {c}\n")), "{c}");
    }
    assert!(page.contains("--max-abs") && page.contains("--transpose"));
    let comp = run(&["completions".as_ref(), "bash".as_ref()]);
    assert!(comp.status.success() && text(&comp).contains("modelfs"));
}

#[test]
fn the_cache_stays_under_its_cap_and_cleans() {
    let tmp = tempfile::tempdir().unwrap();
    // The cap is set from what the stores take (so that the test holds wherever the checkout
    // lives and however records are encoded): all three do not fit, the last two do.
    let size_of = |case: &str| -> u64 {
        let d = tmp.path().join(format!("sizes-{}", case.replace('/', "-")));
        let o = run(&[
            "index".as_ref(),
            "-o".as_ref(),
            format!("cache_dir={},layouts=all", d.display()).as_ref(),
            fixture(case).as_os_str(),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum()
    };
    let (a, b, c) = (
        size_of("dtypes/ckpt"),
        size_of("partitioned/ckpt"),
        size_of("odd_keys/ckpt"),
    );
    assert!(a > 0 && b > 0 && c >= a / 2, "{a} {b} {c}");
    let cap = b + c + a / 2;
    let dir = tmp.path().join("cache");
    let opt = format!("cache_dir={},cache_max={cap},layouts=all", dir.display());
    let used = || -> u64 {
        let o = run(&["cache".as_ref(), "du".as_ref(), "-o".as_ref(), opt.as_ref()]);
        assert!(o.status.success());
        text(&o).split_whitespace().next().unwrap().parse().unwrap()
    };
    let index = |case: &str| {
        let src = fixture(case);
        run(&[
            "index".as_ref(),
            "-o".as_ref(),
            opt.as_ref(),
            src.as_os_str(),
        ])
    };
    let stores = || std::fs::read_dir(&dir).unwrap().count();
    // One store file per source, however many text files it has; many_keys' is 16 MB.
    for (i, case) in ["dtypes/ckpt", "partitioned/ckpt"].iter().enumerate() {
        let o = index(case);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(stores(), i + 1);
    }
    std::thread::sleep(std::time::Duration::from_millis(20));
    let dtypes_store = dir.join(format!(
        "{:016x}.store",
        modelfs_io::store::fnv1a64(fixture("dtypes/ckpt").to_string_lossy().as_bytes())
    ));
    assert!(dtypes_store.exists());
    let o = index("odd_keys/ckpt");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(used() <= cap, "cache over its cap: {}", used());
    assert!(
        !dtypes_store.exists(),
        "the least recently used source goes first"
    );
    assert_eq!(stores(), 2);
    // A source whose indexes alone are over the cap is not kept, and index says so.
    let o = index("many_keys");
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("cache_max"));
    assert!(used() <= cap, "cache over its cap: {}", used());
    // Its appends made the others least recently used: they went first, then itself.
    assert!(stores() <= 2);
    assert!(index("strings/ckpt").status.success());
    let o = run(&[
        "cache".as_ref(),
        "clean".as_ref(),
        "-o".as_ref(),
        opt.as_ref(),
    ]);
    assert!(o.status.success());
    assert_eq!(used(), 0);
    // index says so when it cannot save.
    let o = run(&[
        "index".as_ref(),
        "-o".as_ref(),
        "cache_dir=/proc/nope".as_ref(),
        fixture("dtypes/ckpt").as_os_str(),
    ]);
    assert_ne!(o.status.code(), Some(0));
}

/// `list` names every tensor by its path in the mount: a graph constant under `constants/`,
/// not the reader's internal marker (a NUL byte), in text and `--json`; each is a file `ls`
/// shows.
#[test]
fn list_paths_are_the_mounts_paths() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tf/graphs/tf1/saver");
    let listed = run(&["list".as_ref(), src.as_os_str()]);
    assert!(listed.status.success());
    assert!(!listed.stdout.contains(&0), "a NUL in `list`");
    let json = run(&["list".as_ref(), "--json".as_ref(), src.as_os_str()]);
    assert!(
        !json.stdout.contains(&0) && !text(&json).contains("\\u0000"),
        "{}",
        text(&json)
    );
    let ls = text(&run(&["ls".as_ref(), src.as_os_str()]));
    let mut constants = 0;
    for line in text(&listed).lines() {
        let path = line.split_whitespace().next().unwrap();
        assert!(
            ls.lines().any(|l| l == format!("{path}.json")),
            "{path} not in ls"
        );
        constants += path.contains("/constants/") as usize;
    }
    assert!(constants > 0, "no graph constant listed");
}

/// Issue 26 item 9: a background mount's warnings and errors go to
/// `$XDG_STATE_HOME/modelfs/modelfs.log` when nothing else is named, and `mount` says so.
#[test]
fn a_background_mount_logs_by_default_and_says_where() {
    let Some(_fuse) = Fuse::check() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/angel/bad/model");
    let mnt = tmp.path().join("m");
    let state = tmp.path().join("state");
    let o = std::process::Command::new(modelfs())
        .arg("mount")
        .arg(&src)
        .arg(&mnt)
        .env("XDG_STATE_HOME", &state)
        .env_remove("MODELFS_LOG")
        .output()
        .unwrap();
    let guard = MountGuard::adopt(mnt.clone());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let log = state.join("modelfs/modelfs.log");
    let said = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(said.contains(&log.display().to_string()), "{said}");
    // Listing the model meets its corrupt metas: warnings.
    assert!(std::fs::read_dir(&mnt).unwrap().count() > 0);
    guard.unmount_and_check();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("WARN") && text.contains("corrupt meta"),
        "{text}"
    );
}

/// Issue 26 item 9: where there is a syslog socket (`/dev/log`, here one of the test's own
/// named by `-o log=`), each warning is one syslog message: `<PRI>modelfs[pid]: …`.
#[test]
fn a_background_mount_logs_to_a_syslog_socket() {
    let Some(_fuse) = Fuse::check() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let sock_path = tmp.path().join("log.sock");
    let sock = std::os::unix::net::UnixDatagram::bind(&sock_path).unwrap();
    sock.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/angel/bad/model");
    let mnt = tmp.path().join("m");
    let o = std::process::Command::new(modelfs())
        .arg("mount")
        .arg("-o")
        .arg(format!("log={}", sock_path.display()))
        .arg(&src)
        .arg(&mnt)
        .output()
        .unwrap();
    let guard = MountGuard::adopt(mnt.clone());
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("syslog at"));
    assert!(std::fs::read_dir(&mnt).unwrap().count() > 0);
    let mut buf = [0u8; 4096];
    let n = sock.recv(&mut buf).expect("no syslog message");
    let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
    // Facility daemon (3 × 8) + warning (4).
    assert!(msg.starts_with("<28>modelfs["), "{msg}");
    assert!(msg.contains("corrupt meta"), "{msg}");
    guard.unmount_and_check();
}

/// Issue 28: `modelfs diff --json` of two steps of a TF1 Estimator-style training directory
/// (Saver with global_step and Adam slots, written by TensorFlow) equals numpy's comparison of
/// the two steps' `.npy` files: changed count, max |Δ| and relative L2 per variable.
#[test]
fn diff_of_two_training_steps_equals_numpy() {
    if !python_numpy() {
        assert!(
            std::env::var_os("CI").is_none(),
            "python3 with numpy is needed"
        );
        return;
    }
    let run = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tf/tf1_saver_moved/run7");
    let (a, b) = (run.join("model.ckpt-100"), run.join("model.ckpt-200"));
    let out = Command::new(modelfs())
        .args(["diff", "--json"])
        .arg(&a)
        .arg(&b)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "the steps differ");
    let script = r#"
import json, subprocess, sys
import numpy as np
modelfs, a, b = sys.argv[1:4]
got = json.load(sys.stdin)
assert len(got) >= 10, got
def load(src, name):
    raw = subprocess.run([modelfs, "cat", src, name + ".npy"], check=True, capture_output=True).stdout
    open("/tmp/_diff_check.npy", "wb").write(raw)
    return np.load("/tmp/_diff_check.npy").astype(np.float64)
changed = 0
for g in got:
    x, y = load(a, g["name"]), load(b, g["name"])
    n = int((x != y).sum())
    assert g["changed_count"] == n and g["count"] == x.size, (g, n)
    assert g["status"] == ("changed" if n else "identical"), g
    d = np.abs(y - x).max() if x.size else 0.0
    assert abs(g["max_abs_diff"] - d) <= 1e-12 * max(1.0, d), (g, d)
    na = np.sqrt((x * x).sum())
    want = np.sqrt(((y - x) ** 2).sum()) / na if na else 0.0
    assert abs(g["rel_l2"] - want) <= 1e-9 * max(1.0, want), (g, want)
    changed += n > 0
assert changed >= 10, changed
print("ok", len(got), "tensors", changed, "changed")
"#;
    let res = python_with_stdin(
        script,
        &[modelfs().as_ref(), a.as_os_str(), b.as_os_str()],
        &out.stdout,
    );
    assert!(
        res.status.success(),
        "{}{}",
        String::from_utf8_lossy(&res.stdout),
        String::from_utf8_lossy(&res.stderr)
    );
}

/// Issue 28: `modelfs stats --json` equals numpy (float64) on every tensor of the dtype
/// fixture (NaN, ±Inf, ±0, extremes of each width), and `--check-finite` exits 2 there.
#[test]
fn stats_json_equals_numpy() {
    if !python_numpy() {
        assert!(
            std::env::var_os("CI").is_none(),
            "python3 with numpy is needed"
        );
        return;
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tf/dtypes/ckpt");
    let out = Command::new(modelfs())
        .args(["stats", "--json", "-o", "cache_dir=none"])
        .arg(&src)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let script = r#"
import json, math, subprocess, sys
import numpy as np
modelfs, src = sys.argv[1:3]
got = json.load(sys.stdin)
checked = 0
for g in got:
    if "error" in g:
        assert g["dtype"].startswith("complex"), g
        continue
    raw = subprocess.run([modelfs, "cat", src, g["name"] + ".npy"], check=True, capture_output=True).stdout
    open("/tmp/_stats_check.npy", "wb").write(raw)
    with np.errstate(all="ignore"):
        a = np.load("/tmp/_stats_check.npy").astype(np.float64).ravel()
        f = a[np.isfinite(a)]
        want = {"count": a.size, "nan": int(np.isnan(a).sum()), "posinf": int((a == np.inf).sum()),
                "neginf": int((a == -np.inf).sum()), "zeros": int((a == 0).sum())}
        ref = {"min": f.min(), "max": f.max(), "mean": f.mean(), "std": f.std(), "l2": np.sqrt((f * f).sum())}
    for k, v in want.items():
        assert g[k] == v, (g, k, v)
    scale = float(np.abs(f).max())
    for k, v in ref.items():
        if not math.isfinite(v):
            assert g[k] is None or k == "mean", (g, k, v)
            continue
        tol = 1e-9 * abs(v) + (1e-12 * scale if k in ("mean", "std") else 0)
        assert g[k] is not None and abs(g[k] - v) <= tol, (g, k, v)
    checked += 1
assert checked >= 15, checked
print("ok", checked)
"#;
    let res = python_with_stdin(script, &[modelfs().as_ref(), src.as_os_str()], &out.stdout);
    assert!(
        res.status.success(),
        "{}{}",
        String::from_utf8_lossy(&res.stdout),
        String::from_utf8_lossy(&res.stderr)
    );
    let finite = Command::new(modelfs())
        .args(["stats", "--check-finite", "-o", "cache_dir=none"])
        .arg(&src)
        .output()
        .unwrap();
    assert_eq!(finite.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&finite.stderr).contains("float32"));
}

/// A TF checkpoint written by TensorFlow and the same weights saved by PyTorch
/// (scripts/gen_port.py): with the key map and `--transpose`, `diff` reports them identical;
/// with one value of the PyTorch copy changed, it names that tensor and only it; without
/// `--transpose`, the [in, out] kernels are retyped (or changed, when square).
#[test]
fn diff_across_frameworks_with_a_key_map() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/port");
    let tf = dir.join("tf/ckpt");
    let map = [
        "--map",
        r"\.weight$=/kernel",
        "--map",
        r"\.bias$=/bias",
        "--map",
        "^embedding/kernel$=embedding",
    ];
    let run = |b: &str, extra: &[&str]| {
        let out = Command::new(modelfs())
            .args(["diff", "--json"])
            .args(map)
            .args(extra)
            .arg(&tf)
            .arg(dir.join(b))
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        let by: std::collections::BTreeMap<String, String> = v
            .as_array()
            .unwrap()
            .iter()
            .map(|l| {
                (
                    l["name"].as_str().unwrap().to_string(),
                    l["status"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        (out.status.code(), by)
    };
    let (code, by) = run("torch.pt", &["--transpose"]);
    assert_eq!(code, Some(0), "{by:?}");
    assert_eq!(by.len(), 7, "{by:?}");
    assert!(by.values().all(|s| s == "identical"), "{by:?}");
    let (code, by) = run("torch_changed.pt", &["--transpose"]);
    assert_eq!(code, Some(1));
    let changed: Vec<&String> = by
        .iter()
        .filter(|(_, s)| *s != "identical")
        .map(|(k, _)| k)
        .collect();
    assert_eq!(changed, ["out/bias"], "{by:?}");
    let (code, by) = run("torch.pt", &[]);
    assert_eq!(code, Some(1));
    assert_eq!(by["dense/kernel"], "retyped");
    assert_eq!(by["square/kernel"], "changed");
    assert_eq!(by["embedding"], "identical");
    // A map that sends two keys to one is refused, naming both.
    let out = Command::new(modelfs())
        .args(["diff", "--map", ".*=x"])
        .arg(&tf)
        .arg(dir.join("torch.pt"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("same name x"));
    // --transpose says which it transposed: the [in, out] kernels, square ones too.
    let out = Command::new(modelfs())
        .args(["diff", "--json", "--transpose"])
        .args(map)
        .arg(&tf)
        .arg(dir.join("torch.pt"))
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let transposed: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["transposed"] == true)
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert_eq!(transposed, ["dense/kernel", "out/kernel", "square/kernel"]);
}

/// `diff --rows` of two saves of DeepRec EVs: the slot that lost 3 ids, gained 2 and had one
/// accumulator set to 1e38 is named id by id; everything else is identical.
#[test]
fn diff_rows_names_each_id_that_moved() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/deeprec");
    let (clean, bad) = (dir.join("clean/model.ckpt"), dir.join("bad/model.ckpt"));
    let expected = |case: &str| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(dir.join(case).join("expected.json")).unwrap())
            .unwrap()
    };
    let ids = |v: &serde_json::Value| -> std::collections::BTreeSet<i64> {
        v["user_emb/Adagrad"]["rows"]
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.parse().unwrap())
            .collect()
    };
    let (before, after) = (ids(&expected("clean")), ids(&expected("bad")));
    let run = |args: &[&str], a: &Path, b: &Path| {
        let out = Command::new(modelfs())
            .args(["diff", "--rows"])
            .args(args)
            .arg(a)
            .arg(b)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, text, err) = run(&[], &clean, &bad);
    assert_eq!(code, Some(1), "{err}");
    let mut got: std::collections::BTreeMap<&str, std::collections::BTreeSet<i64>> =
        Default::default();
    let mut summaries = Vec::new();
    for line in text.lines() {
        if let Some(s) = line.strip_prefix("# ") {
            summaries.push(s.to_string());
            continue;
        }
        let f: Vec<&str> = line.split('\t').collect();
        assert_eq!(f.len(), 3, "{line}");
        got.entry(f[1]).or_default().insert(f[0].parse().unwrap());
        if f[1] == "changed" {
            assert_eq!(f[2].parse::<f64>().unwrap() as f32, 1e38 - 0.0, "{line}");
        }
    }
    assert_eq!(got["removed"], before.difference(&after).copied().collect());
    assert_eq!(got["added"], after.difference(&before).copied().collect());
    assert_eq!(got["changed"].len(), 1);
    assert_eq!(summaries.len(), 5, "{summaries:?}");
    assert_eq!(
        summaries
            .iter()
            .filter(|s| s.contains("\tidentical\t"))
            .count(),
        4,
        "{summaries:?}"
    );
    // JSON: one object a line, the summary with its counts.
    let (code, text, _) = run(&["--json"], &clean, &bad);
    assert_eq!(code, Some(1));
    let objs: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let s = objs
        .iter()
        .find(|o| o["table"] == "user_emb/Adagrad" && o.get("added").is_some())
        .unwrap();
    assert_eq!(
        (
            s["added"].as_u64(),
            s["removed"].as_u64(),
            s["changed"].as_u64()
        ),
        (Some(2), Some(3), Some(1))
    );
    // Named tables only; the same save is identical; a name of no table is a usage error.
    assert_eq!(run(&[], &clean, &clean).0, Some(0));
    let (code, text, _) = run(&[], &clean, &bad);
    assert_eq!(code, Some(1), "{text}");
    let mut named = Command::new(modelfs());
    named
        .args(["diff", "--rows"])
        .arg(&clean)
        .arg(&bad)
        .args(["user_emb", "item_emb"]);
    let out = named.output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 2);
    let out = Command::new(modelfs())
        .args(["diff", "--rows"])
        .arg(&clean)
        .arg(&bad)
        .arg("nope")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64), "a name of no table");
}

/// `check`: a slot whose ids are not its table's and a finite 1e38 are both found (exit 2,
/// naming them); the clean save and a TF Adam checkpoint written by TensorFlow pass.
#[test]
fn check_finds_slot_key_sets_and_huge_values() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    let run = |args: &[&str], src: &Path| {
        let out = Command::new(modelfs())
            .arg("check")
            .args(args)
            .arg(src)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, text, err) = run(&[], &root.join("deeprec/bad/model.ckpt"));
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains(
            "user_emb/Adagrad: ids differ from its table user_emb: 59 vs 60; 3 only in the table"
        ),
        "{text}"
    );
    assert!(
        text.contains("user_emb/Adagrad-values: |x| up to 9.99999968"),
        "{text}"
    );
    assert!(
        err.contains("user_emb/Adagrad") && err.contains("2 problems"),
        "{err}"
    );
    let (code, text, _) = run(&["--json"], &root.join("deeprec/bad/model.ckpt"));
    assert_eq!(code, Some(2));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let kinds: Vec<&str> = v["problems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["problem"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["slot_keys", "too_large"]);
    assert_eq!(
        v["problems"][0]["detail"]["only_in_table_sample"]
            .as_array()
            .unwrap()
            .len(),
        3
    );
    for clean in [
        "deeprec/clean/model.ckpt",
        "tf/adam_keras2/train",
        "tf/tf1_saver",
    ] {
        let (code, text, err) = run(&[], &root.join(clean));
        assert_eq!(code, Some(0), "{clean}: {text}{err}");
        assert!(text.contains(": 0 problems"), "{text}");
    }
    // The Adam checkpoint has slots, and they were checked.
    let (_, text, _) = run(&["--json"], &root.join("tf/adam_keras2/train"));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert!(v["slots_checked"].as_u64().unwrap() >= 4, "{text}");
    // A DeepRec EV is a table there by name: its `.json` tells the EV's facts, a row's its
    // freq and version.
    let src = root.join("deeprec/clean/model.ckpt");
    let cat = |path: &str| {
        let out = Command::new(modelfs())
            .arg("cat")
            .arg(&src)
            .arg(path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{path}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let ev = &cat("item_emb.json")["embedding_variable"];
    assert_eq!(
        (
            ev["dim"].as_u64(),
            ev["entries"].as_u64(),
            ev["parts"].as_u64()
        ),
        (Some(4), Some(90), Some(3))
    );
    let want: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join("deeprec/clean/expected.json")).unwrap())
            .unwrap();
    let (id, freq) = want["user_emb"]["freqs"]
        .as_object()
        .unwrap()
        .iter()
        .next()
        .unwrap();
    let row = cat(&format!("user_emb.rows/{id}.json"));
    assert_eq!(&row["freq"], freq);
    assert_eq!(row["version"], want["user_emb"]["versions"][id]);
    // A tighter bound flags ordinary weights.
    assert_eq!(
        run(
            &["--max-abs", "0.5"],
            &root.join("deeprec/clean/model.ckpt")
        )
        .0,
        Some(2)
    );
}

/// One table of exit codes (README "Exit status"), command by command, on a clean model, the
/// same with one tensor's bytes flipped (its CRC-32C fails) and a name that is not there:
/// each code, and the summary line that goes with it.
#[test]
fn exit_codes_command_by_command() {
    let tmp = tempfile::tempdir().unwrap();
    let clean = fixture("partitioned/ckpt");
    let bad_dir = tmp.path().join("bad");
    std::fs::create_dir(&bad_dir).unwrap();
    for f in ["ckpt.index", "ckpt.data-00000-of-00001"] {
        std::fs::copy(fixture("partitioned").join(f), bad_dir.join(f)).unwrap();
    }
    let data = bad_dir.join("ckpt.data-00000-of-00001");
    let mut bytes = std::fs::read(&data).unwrap();
    bytes[100] ^= 0x10; // inside rows_10x4
    std::fs::write(&data, bytes).unwrap();
    let bad = bad_dir.join("ckpt");
    let other = fixture("dtypes/ckpt");
    let (c, b, o) = (
        clean.to_str().unwrap(),
        bad.to_str().unwrap(),
        other.to_str().unwrap(),
    );
    let cases: &[(&[&str], i32, &str)] = &[
        (&["frobnicate"], 1, ""),
        (&["list", "--bogus", c], 1, ""),
        (&["info", c], 0, "problems: none"),
        (&["info", b], 0, "data not verified"),
        (&["list", c], 0, "rows_10x4"),
        (&["verify", c], 0, "no problems"),
        (&["verify", b], 2, "1 problem in 6 tensors"),
        (&["check", c], 0, ": 0 problems"),
        (&["check", b], 2, ": 1 problem"),
        (&["check", c, "nosuch"], 64, ""),
        (&["stats", c], 0, "rows_10x4"),
        (&["stats", b], 2, "rows_10x4"),
        (&["stats", c, "nosuch"], 64, ""),
        (&["ls", c], 0, "rows_10x4.txt"),
        (&["ls", c, "nosuch"], 64, ""),
        (&["cat", c, "rows_10x4.txt"], 0, ""),
        (&["cat", b, "rows_10x4.txt"], 2, ""),
        (&["cat", c, "nosuch.txt"], 64, ""),
        (&["row", c, "rows_10x4", "3"], 0, "3\t"),
        (&["row", c, "rows_10x4", "99"], 1, ""),
        (&["row", c, "nosuch", "3"], 64, ""),
        (&["diff", c, c], 0, "identical"),
        (&["diff", c, o], 1, "only in"),
        (&["diff", c, b], 2, "1 error"),
        (&["diff", "--rows", c, c], 0, ""),
        (&["diff", "--rows", c, c, "nosuch"], 64, ""),
    ];
    let mut wrong = Vec::new();
    for (args, code, says) in cases {
        let mut args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_ref()).collect();
        // Nothing remembered between cases: each reads what it checks.
        if args.len() > 1 && !args[1].to_string_lossy().starts_with('-') {
            args.insert(1, "-o".as_ref());
            args.insert(2, "cache_dir=none".as_ref());
        }
        let out = run(&args);
        let all = format!("{}{}", text(&out), String::from_utf8_lossy(&out.stderr));
        if out.status.code() != Some(*code) || !all.contains(says) {
            wrong.push(format!(
                "{args:?}: {:?} (want {code}): {all}",
                out.status.code()
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// One name per tensor: on a TF2 checkpoint (keys `NAME/.ATTRIBUTES/VARIABLE_VALUE`), the
/// names of `list --json`, `stats --json`, `diff --json` and `NAME.stats.json` are the mount's
/// paths, the raw key a field of its own.
#[test]
fn one_name_per_tensor_in_every_command() {
    let src = fixture("object_tf2/obj");
    let s = src.as_os_str();
    let json = |args: &[&std::ffi::OsStr]| -> Vec<serde_json::Value> {
        let o = run(args);
        serde_json::from_slice::<serde_json::Value>(&o.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}"))
            .as_array()
            .unwrap()
            .clone()
    };
    let names = |v: &[serde_json::Value], field: &str| -> Vec<String> {
        let mut n: Vec<String> = v
            .iter()
            .map(|x| x[field].as_str().unwrap().into())
            .collect();
        n.sort();
        n
    };
    let listed = json(&["list".as_ref(), "--json".as_ref(), s]);
    let paths = names(&listed, "path");
    assert!(paths.contains(&"bf".to_string()), "{paths:?}");
    // `list --json`'s `name` is the path too (it was the raw key), `key` the raw one.
    assert_eq!(names(&listed, "name"), paths);
    let bf_listed = listed.iter().find(|x| x["name"] == "bf").unwrap();
    assert_eq!(bf_listed["key"], "bf/.ATTRIBUTES/VARIABLE_VALUE");
    let stats = json(&["stats".as_ref(), "--json".as_ref(), s]);
    assert_eq!(names(&stats, "name"), paths);
    let bf = stats.iter().find(|x| x["name"] == "bf").unwrap();
    assert_eq!(bf["key"], "bf/.ATTRIBUTES/VARIABLE_VALUE");
    let diff = json(&["diff".as_ref(), "--json".as_ref(), s, s]);
    assert_eq!(names(&diff, "name"), paths);
    let Some(fuse) = crate::support::Fuse::check() else {
        return;
    };
    let m = fuse.mount(&src, "cache_dir=none");
    let file: serde_json::Value =
        serde_json::from_slice(&std::fs::read(m.path().join("bf.stats.json")).unwrap()).unwrap();
    assert_eq!((&file["name"], &file["key"]), (&bf["name"], &bf["key"]));
    m.unmount_and_check();
}

/// `sep=` applies to csv as `--help` says, and a csv with another separator is remembered
/// apart (a shared cache_dir never serves one's offsets for the other).
#[test]
fn csv_takes_the_separator() {
    let tmp = tempfile::tempdir().unwrap();
    let src = fixture("partitioned/ckpt");
    let cat = |sep: &str| {
        let o = format!("layouts=csv,sep={sep},cache_dir={}", tmp.path().display());
        let out = run(&[
            "cat".as_ref(),
            "-o".as_ref(),
            o.as_ref(),
            src.as_os_str(),
            "rows_10x4.csv".as_ref(),
        ]);
        assert!(out.status.success());
        text(&out)
    };
    for _ in 0..2 {
        let comma = cat("comma");
        let tab = cat("tab");
        assert!(comma.starts_with("0.0,0.5,1.0,1.5\n"), "{comma}");
        assert_eq!(tab, comma.replace(',', "\t"));
    }
}

/// A text file's size in its tensor's `.json` is `null` until known, then what `ls -l` shows.
#[test]
fn a_json_keeps_what_it_showed_first() {
    let Some(fuse) = Fuse::check() else { return };
    let m = fuse.mount(
        &fixture("partitioned/ckpt"),
        "cache_dir=none,text_size=auto",
    );
    let size = || -> serde_json::Value {
        let j: serde_json::Value =
            serde_json::from_slice(&std::fs::read(m.path().join("rows_10x4.json")).unwrap())
                .unwrap();
        j["layouts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["layout"] == "txt")
            .unwrap()["size"]
            .clone()
    };
    // Shown before the text was sized, the document stays as it was shown (its size was given
    // out), however the text's size is learnt since; the text's own stat says it.
    let before = size();
    let len = std::fs::read(m.path().join("rows_10x4.txt")).unwrap().len();
    assert!(before.is_null() || before == len, "{before}");
    assert_eq!(size(), before, "a .json changed after it was shown");
    // One first shown after the text was read has its size.
    let len = std::fs::read(m.path().join("grid_4x6.txt")).unwrap().len();
    let j: serde_json::Value =
        serde_json::from_slice(&std::fs::read(m.path().join("grid_4x6.json")).unwrap()).unwrap();
    let txt = j["layouts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["layout"] == "txt")
        .unwrap();
    assert_eq!(txt["size"], len);
    m.unmount_and_check();
}

/// `diff` of two saves of a TF hash table compares its keys and values slot by slot, which
/// says little: it says so, naming the table and the `--rows` command.
#[test]
fn diff_of_hash_tables_points_at_rows() {
    let s = fixture("hashtable/step");
    let out = run(&[
        "diff".as_ref(),
        s.join("a/ckpt").as_os_str(),
        s.join("b/ckpt").as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("diff --rows A B m/emb"), "{err}");
    assert_eq!(err.matches("hash table").count(), 1, "{err}");
}

/// A log file that cannot be written (a directory, a /proc file) is refused before mounting,
/// never claimed and then lost.
#[test]
fn an_unwritable_log_file_is_refused() {
    let Some(_fuse) = Fuse::check() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let mp = tmp.path().join("mp");
    for log in [tmp.path().to_str().unwrap(), "/proc/version"] {
        let out = run(&[
            "mount".as_ref(),
            "--log-file".as_ref(),
            log.as_ref(),
            fixture("partitioned/ckpt").as_os_str(),
            mp.as_os_str(),
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{log}: {err}");
        assert!(err.contains("cannot be written"), "{err}");
        assert!(!mp.exists() || std::fs::read_dir(&mp).unwrap().next().is_none());
    }
}

/// Hash tables beside a graph, as TensorFlow writes them by default
/// (scripts/gen_hashtable_graphs.py): a TF1 Saver checkpoint with its `.meta`, a TF2
/// SavedModel and a Keras export. `diff --rows` finds the generator's changes id by id, `check` the slot's
/// missing and extra ids; the graph's constants (the inserted keys and values) are no tables.
#[test]
fn hash_tables_beside_a_graph_are_tables() {
    let dir = fixture("hashtable/graphs");
    let truth: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("truth.json")).unwrap()).unwrap();
    let d = &truth["diff"];
    let want = format!(
        "rows {}/{}\tadded {}\tremoved {}\tchanged {}",
        d["rows_a"], d["rows_b"], d["added"], d["removed"], d["changed"]
    );
    for (a, b, table) in [
        ("tf1_meta/a/model", "tf1_meta/b/model", "emb"),
        ("savedmodel/a", "savedmodel/b", "emb"),
        // Keras 3's export saves the layer's table as `_misc_assets/0`.
        ("keras/a", "keras/b", "_misc_assets/0"),
    ] {
        let out = run(&[
            "diff".as_ref(),
            "--rows".as_ref(),
            "-o".as_ref(),
            "cache_dir=none".as_ref(),
            dir.join(a).as_os_str(),
            dir.join(b).as_os_str(),
        ]);
        let t = text(&out);
        assert_eq!(out.status.code(), Some(1), "{a}: {t}");
        let head = format!("# {table}\t");
        let summary: Vec<&str> = t.lines().filter(|l| l.starts_with(&head)).collect();
        assert_eq!(summary.len(), 1, "{a}: {t}");
        assert!(
            summary[0].contains(&want),
            "{a}: {} lacks {want}",
            summary[0]
        );
        assert!(
            !t.contains("# constants/"),
            "{a}: a constant taken for a table: {t}"
        );
    }
    let out = run(&[
        "check".as_ref(),
        "--json".as_ref(),
        "-o".as_ref(),
        "cache_dir=none".as_ref(),
        dir.join("tf1_meta/b/model").as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (v["tables"].as_u64(), v["slots_checked"].as_u64()),
        (Some(2), Some(1)),
        "{v}"
    );
    let p = &v["problems"][0]["detail"];
    let c = &truth["check_b"];
    assert_eq!(
        (&p["only_in_table"], &p["only_in_slot"]),
        (&c["only_table"], &c["only_slot"]),
        "{v}"
    );
}

/// DenseHashTables beside their graph (scripts/gen_dense_tables.py): a TF1 Saver checkpoint
/// with its `.meta`, a SavedModel and a Keras export, each table saved after exactly one
/// erase, so its `deleted_key` is saved once, like an id. Its sentinel keys (from the graph)
/// are never rows: `diff --rows` counts entries, not buckets, and finds the generator's
/// changes; `row` finds no sentinel and every entry's values; `check` finds the slot's ids.
#[test]
fn dense_hash_table_sentinels_are_never_rows() {
    let dir = fixture("hashtable/dense");
    let truth: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("truth.json")).unwrap()).unwrap();
    let d = &truth["diff"];
    let want = format!(
        "rows {}/{}\tadded {}\tremoved {}\tchanged {}",
        d["rows_a"], d["rows_b"], d["added"], d["removed"], d["changed"]
    );
    let buckets = truth["buckets"].as_u64().unwrap();
    let mut looked = 0;
    for form in ["tf1_meta", "savedmodel", "keras"] {
        let table = truth["table"][form].as_str().unwrap();
        let side = |s: &str| match form {
            "tf1_meta" => dir.join(form).join(s).join("model"),
            _ => dir.join(form).join(s),
        };
        let diff = |json: bool| {
            let mut args = vec!["diff", "--rows", "-o", "cache_dir=none"];
            if json {
                args.push("--json");
            }
            let mut args: Vec<&std::ffi::OsStr> = args.iter().map(|a| a.as_ref()).collect();
            let (a, b) = (side("a"), side("b"));
            args.extend([a.as_os_str(), b.as_os_str(), table.as_ref()]);
            run(&args)
        };
        let out = diff(false);
        let t = text(&out);
        assert_eq!(out.status.code(), Some(1), "{form}: {t}");
        let summary = t.lines().last().unwrap_or("");
        assert!(summary.contains(&want), "{form}: {summary} lacks {want}");
        for s in truth["sentinels"][form].as_array().unwrap() {
            assert!(
                !t.contains(&format!("\n{s}\t")),
                "{form}: sentinel {s} as a row: {t}"
            );
        }
        let out = diff(true);
        let last = String::from_utf8_lossy(&out.stdout);
        let v: serde_json::Value = serde_json::from_str(last.lines().last().unwrap()).unwrap();
        let rows = [d["rows_a"].as_u64().unwrap(), d["rows_b"].as_u64().unwrap()];
        assert_eq!(
            v["sentinel_buckets"],
            serde_json::json!([buckets - rows[0], buckets - rows[1]]),
            "{form}: {v}"
        );
        let b = side("b");
        let row = |id: &str| {
            run(&[
                "row".as_ref(),
                "-o".as_ref(),
                "cache_dir=none".as_ref(),
                b.as_os_str(),
                table.as_ref(),
                id.as_ref(),
            ])
        };
        for s in truth["sentinels"][form].as_array().unwrap() {
            let out = row(&s.to_string());
            assert_eq!(
                out.status.code(),
                Some(1),
                "{form}: sentinel {s}: {}",
                text(&out)
            );
        }
        for s in truth["absent_b"].as_array().unwrap() {
            assert_eq!(row(&s.to_string()).status.code(), Some(1), "{form}: {s}");
        }
        for (id, vals) in truth["rows_b"].as_object().unwrap() {
            let out = row(id);
            let t = text(&out);
            let got: Vec<f32> = t
                .split_whitespace()
                .skip(1)
                .map(|x| x.parse().unwrap())
                .collect();
            let want: Vec<f32> = vals
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap() as f32)
                .collect();
            assert_eq!(got, want, "{form}: row {id}: {t}");
            looked += 1;
        }
    }
    assert!(looked >= 24, "{looked}");
    let out = run(&[
        "check".as_ref(),
        "--json".as_ref(),
        "-o".as_ref(),
        "cache_dir=none".as_ref(),
        dir.join("tf1_meta/b/model").as_os_str(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = &v["problems"][0]["detail"];
    let c = &truth["check_b"];
    assert_eq!(
        (&p["only_in_table"], &p["only_in_slot"]),
        (&c["only_table"], &c["only_slot"]),
        "{v}"
    );
    assert_eq!(p["table_ids"].as_u64(), d["rows_b"].as_u64(), "{v}");

    // A Serving base of both SavedModels: each version's table, its sentinels known.
    let base = tempfile::tempdir().unwrap();
    for (v, side) in [("1", "a"), ("2", "b")] {
        let to = base.path().join(v);
        for f in walk_files(&dir.join("savedmodel").join(side)) {
            let rel = f.strip_prefix(dir.join("savedmodel").join(side)).unwrap();
            std::fs::create_dir_all(to.join(rel).parent().unwrap()).unwrap();
            std::fs::copy(&f, to.join(rel)).unwrap();
        }
    }
    let out = run(&[
        "diff".as_ref(),
        "--rows".as_ref(),
        "--json".as_ref(),
        "-o".as_ref(),
        "cache_dir=none".as_ref(),
        base.path().as_os_str(),
        base.path().as_os_str(),
    ]);
    let t = String::from_utf8_lossy(&out.stdout).into_owned();
    for (table, rows) in [("1/dht", &d["rows_a"]), ("2/dht", &d["rows_b"])] {
        let line = t
            .lines()
            .find(|l| l.contains(&format!("\"table\":\"{table}\"")))
            .unwrap_or_else(|| panic!("{table}: {t}"));
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(
            (&v["rows_a"], &v["status"]),
            (rows, &serde_json::json!("identical")),
            "{v}"
        );
    }
    let out = run(&[
        "row".as_ref(),
        "-o".as_ref(),
        "cache_dir=none".as_ref(),
        base.path().as_os_str(),
        "2/dht".as_ref(),
        "-8".as_ref(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
}

/// Every file under `dir`.
fn walk_files(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        match p.is_dir() {
            true => out.extend(walk_files(&p)),
            false => out.push(p),
        }
    }
    out
}

fn fixtures(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(rel)
}

/// One rule for verdicts (issue 69): what modelfs does not run or decode is a note (listed,
/// in `--json`, exit 0) in `verify`, `check` and `info`, for every format; damage and a
/// dangerous pickle import are problems (exit 2).
#[test]
fn unrun_classes_and_undecoded_dtypes_are_notes_in_every_verdict() {
    let healthy = [
        ("torch/more/scripted.pt", "build_intlist"),
        ("torch/more/module.pt", "not run"),
        ("torch/more/module_ckpt.pt", "not run"),
        ("real/torch/pesto-pitch-2.0.1_mir-1k_g7.ckpt", "ListConfig"),
        ("safetensors/dtypes.safetensors", "F8_E8M0"),
        ("gguf/kquants.gguf", "not decoded"),
    ];
    for (f, says) in healthy {
        let src = fixtures(f);
        let s = src.as_os_str();
        let o = run(&["verify".as_ref(), s]);
        let out = text(&o);
        assert_eq!(o.status.code(), Some(0), "{f}: {out}");
        assert!(
            out.contains("no problems") && out.contains(" note") && out.contains(says),
            "{f}: {out}"
        );
        let o = run(&["verify".as_ref(), "--json".as_ref(), s]);
        assert_eq!(o.status.code(), Some(0), "{f}");
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(v["problems"], serde_json::json!([]), "{f}: {v}");
        let notes = v["notes"].as_array().unwrap();
        assert!(
            notes
                .iter()
                .any(|n| n["detail"].as_str().unwrap().contains(says)),
            "{f}: {v}"
        );
        assert!(v["tensors_checked"].as_u64().unwrap() > 0, "{f}: {v}");
        // `check` too: notes beside its problems, never among them (dtypes.safetensors's
        // random values are over the bound, or NaN: those are its only problems).
        let o = run(&["check".as_ref(), "--json".as_ref(), s]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let values =
            |p: &serde_json::Value| p["problem"] == "too_large" || p["problem"] == "not_finite";
        let problems = v["problems"].as_array().unwrap();
        assert!(problems.iter().all(values), "{f}: {v}");
        assert_eq!(
            o.status.code(),
            Some(if problems.is_empty() { 0 } else { 2 }),
            "{f}: {v}"
        );
        assert!(!v["notes"].as_array().unwrap().is_empty(), "{f}: {v}");
        let info = text(&run(&["info".as_ref(), s]));
        assert!(
            info.contains("problems: none") && info.contains("notes: "),
            "{f}: {info}"
        );
    }
    // A tensor of an undecoded dtype is named, with its note.
    let o = run(&[
        "verify".as_ref(),
        "--json".as_ref(),
        fixtures("safetensors/dtypes.safetensors").as_os_str(),
    ]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let named: Vec<&str> = v["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap())
        .collect();
    assert_eq!(named, ["t/float4_e2m1fn_x2", "t/float8_e8m0fnu"], "{v}");
    // A dangerous call is a problem of `verify`, `check` and `info` alike.
    let src = fixtures("torch/hostile_system.pt");
    let o = run(&["verify".as_ref(), "--json".as_ref(), src.as_os_str()]);
    assert_eq!(o.status.code(), Some(2));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let p = v["problems"][0]["detail"].as_str().unwrap();
    assert!(p.contains("system") && p.contains("dangerous"), "{v}");
    let o = run(&["check".as_ref(), src.as_os_str()]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("the source"),
        "{o:?}"
    );
    assert!(text(&run(&["info".as_ref(), src.as_os_str()])).contains("problems: 1"));
}

/// A state dict and the same net saved whole, as TorchScript or YOLO-style have the same
/// names (`backbone.0.conv.weight`): `diff` pairs every tensor (issue 69: "20 tensors: 10
/// only_a, 10 only_b"). The TorchScript copy was scripted after more training: paired, changed.
#[test]
fn diff_of_a_state_dict_and_its_whole_module_pairs_every_tensor() {
    let sd = fixtures("torch/more/module_sd.pt");
    for (whole, code) in [
        ("module.pt", 0),
        ("module_legacy.pt", 0),
        ("scripted.pt", 1),
    ] {
        let w = fixtures(&format!("torch/more/{whole}"));
        let o = run(&[
            "diff".as_ref(),
            "--json".as_ref(),
            sd.as_os_str(),
            w.as_os_str(),
        ]);
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let lines = v.as_array().unwrap();
        assert_eq!(lines.len(), 8, "{whole}: {v}");
        let paired = |l: &serde_json::Value| match code {
            0 => l["status"] == "identical",
            _ => l["status"] == "identical" || l["status"] == "changed",
        };
        assert!(lines.iter().all(paired), "{whole}: {v}");
        assert_eq!(o.status.code(), Some(code), "{whole}: {v}");
    }
    let listed = text(&run(&[
        "list".as_ref(),
        fixtures("torch/more/module_ckpt.pt").as_os_str(),
    ]));
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("model/backbone.0.conv.weight ")),
        "{listed}"
    );
}

/// `stats` keeps its columns: a tensor without stats has dashes, and why on a line of its own
/// below the table (the error text was in its count column, widening every row).
#[test]
fn stats_keeps_errors_out_of_its_columns() {
    let src = fixtures("safetensors/dtypes.safetensors");
    let out = text(&run(&["stats".as_ref(), src.as_os_str()]));
    let (table, below) = out
        .split_once("no stats:\n")
        .unwrap_or_else(|| panic!("{out}"));
    // No row is wider than the header's columns need for the numbers.
    let widths: Vec<usize> = table.lines().map(|l| l.chars().count()).collect();
    assert!(widths.iter().all(|&w| w <= widths[0]), "{out}");
    assert!(
        below.contains("t/float4_e2m1fn_x2: ") && below.contains("not decoded"),
        "{out}"
    );
    let row = table
        .lines()
        .find(|l| l.starts_with("t/float4_e2m1fn_x2 "))
        .unwrap();
    assert!(!row.contains("not decoded"), "{row}");
}
