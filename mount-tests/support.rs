//! Helpers for the real-mount tests: sources, mounting with a clean-up guard, walking,
//! process and mount-table checks, value decoding.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

pub fn modelfs() -> &'static str {
    env!("CARGO_BIN_EXE_modelfs")
}

pub use modelfs_model::testing::shared_dir;

/// A checkpoint with TensorFlow's read-back values (`expected_dir` holds index.json and
/// expected.npz).
pub struct Case {
    pub name: String,
    pub source: PathBuf,
    /// `None` for sources without expected values (Angel models).
    pub expected_dir: Option<PathBuf>,
}

fn prefix_of(index: &Path) -> Option<String> {
    let text = std::fs::read_to_string(index).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v.get("prefix")?.as_str().map(str::to_string)
}

fn find_named(dir: &Path, pred: &dyn Fn(&Path) -> bool, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if pred(&p) {
            out.push(p.clone());
        }
        if p.is_dir() && !p.is_symlink() {
            find_named(&p, pred, out);
        }
    }
}

/// Committed fixtures (`fixtures/tf/<case>/expected/index.json`) and the shared real-world
/// checkpoints (`expected.<base>/index.json` beside each prefix).
pub fn cases() -> Vec<Case> {
    let mut out = Vec::new();
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/tf");
    if let Ok(rd) = std::fs::read_dir(&fixtures) {
        let mut dirs: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
        dirs.sort();
        for d in dirs {
            let exp = d.join("expected");
            if let Some(prefix) = prefix_of(&exp.join("index.json")) {
                out.push(Case {
                    name: format!(
                        "fixture:{}",
                        d.file_name().unwrap_or_default().to_string_lossy()
                    ),
                    source: d.join(prefix),
                    expected_dir: Some(exp),
                });
            }
        }
    }
    // Sources of the other readers, written by their own writers.
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    for s in [
        "fixtures/safetensors/dtypes.safetensors",
        "fixtures/safetensors/sharded",
        "fixtures/numpy/arrays.npz",
        "fixtures/numpy/fortran_i4.npy",
        "fixtures/numpy/big_endian_f8.npy",
        "fixtures/torch/dtypes.pt",
        "fixtures/torch/views.pt",
        "fixtures/torch/checkpoint.pt",
        "fixtures/torch/sharded",
        "fixtures/gguf/model.gguf",
    ] {
        out.push(Case {
            name: format!("fixture:{s}"),
            source: root.join(s),
            expected_dir: None,
        });
    }
    if let Some(shared) = shared_dir() {
        let mut found = Vec::new();
        let is_expected = |p: &Path| {
            p.file_name()
                .is_some_and(|n| n.as_bytes().starts_with(b"expected."))
                && p.join("index.json").is_file()
        };
        find_named(&shared.join("realworld/tf"), &is_expected, &mut found);
        for exp in found {
            let (Some(prefix), Some(parent)) = (prefix_of(&exp.join("index.json")), exp.parent())
            else {
                continue;
            };
            out.push(Case {
                name: format!("realworld:{}", parent.join(&prefix).display()),
                source: parent.join(prefix),
                expected_dir: Some(exp),
            });
        }
        // Angel model directories: a folder whose sub-folders hold `meta` or `_meta`.
        let mut metas = Vec::new();
        let is_meta =
            |p: &Path| p.file_name().is_some_and(|n| n == "meta" || n == "_meta") && p.is_file();
        find_named(&shared.join("realworld/angel"), &is_meta, &mut metas);
        let mut models: Vec<PathBuf> = metas
            .iter()
            .filter_map(|m| Some(m.parent()?.parent()?.to_path_buf()))
            .collect();
        models.sort();
        models.dedup();
        for m in models {
            out.push(Case {
                name: format!("realworld:{}", m.display()),
                source: m,
                expected_dir: None,
            });
        }
    }
    out
}

/// `modelfs ls -o layouts=all SOURCE`; `None` (with a message) while no reader exists yet.
pub fn cli_ls(source: &Path) -> Option<Vec<String>> {
    let out = Command::new(modelfs())
        .args(["ls", "-o", "layouts=all"])
        .arg(source)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(2) && err.contains("not yet implemented") {
        eprintln!("skipping {}: {}", source.display(), err.trim());
        return None;
    }
    assert!(
        out.status.success(),
        "modelfs ls {}: {}",
        source.display(),
        err
    );
    Some(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_string)
            .collect(),
    )
}

/// `modelfs cat SOURCE PATH`'s output (the CLI, no mount); the command must succeed.
pub fn cli_cat(source: &Path, path: &str) -> Vec<u8> {
    let out = Command::new(modelfs())
        .arg("cat")
        .arg(source)
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success(), "cat {path}");
    out.stdout
}

/// Every path under `root` like `modelfs ls`: depth-first, names sorted by bytes, directories
/// ending in `/`, symlinks not followed.
pub fn walk(root: &Path) -> Vec<String> {
    fn rec(dir: &Path, prefix: &str, out: &mut Vec<String>) {
        let mut names: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
        for n in names {
            let p = dir.join(&n);
            let name = format!("{prefix}{}", n.to_string_lossy());
            if std::fs::symlink_metadata(&p).unwrap().is_dir() {
                out.push(format!("{name}/"));
                rec(&p, &format!("{name}/"), out);
            } else {
                out.push(name);
            }
        }
    }
    let mut out = Vec::new();
    rec(root, "", &mut out);
    out
}

pub struct Fuse;

impl Fuse {
    /// `None` (after a message) when FUSE is unusable here, unless MODELFS_REQUIRE_FUSE=1.
    pub fn check() -> Option<Fuse> {
        let require = modelfs_model::testing::must_be_complete();
        let usable = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/fuse");
        match usable {
            Ok(_) => Some(Fuse),
            Err(e) => {
                assert!(
                    !require,
                    "MODELFS_REQUIRE_FUSE=1 but /dev/fuse is unusable: {e}"
                );
                eprintln!("skipping real-mount checks: /dev/fuse unusable ({e})");
                None
            }
        }
    }

    pub fn mount(&self, source: &Path, opts: &str) -> MountGuard {
        self.mount_env(source, opts, &[])
    }

    /// `mount` with extra environment variables for the daemon (`RUST_LOG`, say).
    pub fn mount_env(&self, source: &Path, opts: &str, env: &[(&str, &str)]) -> MountGuard {
        let tmp = tempfile::Builder::new()
            .prefix("modelfs-mt-")
            .tempdir()
            .unwrap();
        let mut cmd = Command::new(modelfs());
        cmd.arg("mount");
        if !opts.is_empty() {
            cmd.args(["-o", opts]);
        }
        // A test's daemon never writes to the user's syslog or state directory: its log is
        // discarded unless the test names one (`MODELFS_LOG` here or in the environment).
        let named = std::env::var_os("MODELFS_LOG").is_some()
            || env.iter().any(|(k, _)| *k == "MODELFS_LOG");
        if !named {
            cmd.env("MODELFS_LOG", "/dev/null");
        }
        cmd.envs(env.iter().copied());
        let out = cmd.arg(source).arg(tmp.path()).output().unwrap();
        let guard = MountGuard {
            dir: tmp.path().to_path_buf(),
            _tmp: Some(tmp),
        };
        assert!(
            out.status.success(),
            "mount {} failed ({:?}): {}",
            source.display(),
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            is_mount_point(&guard.dir),
            "mount returned before the mount was usable"
        );
        guard
    }
}

/// Unmounts (whatever it takes) on drop, then removes the temporary mountpoint.
pub struct MountGuard {
    dir: PathBuf,
    _tmp: Option<tempfile::TempDir>,
}

impl MountGuard {
    pub fn adopt(dir: PathBuf) -> MountGuard {
        MountGuard { dir, _tmp: None }
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The daemon serving this mount (found by its command line).
    pub fn daemon_pid(&self) -> Option<i32> {
        let want = self.dir.as_os_str().as_bytes();
        for e in std::fs::read_dir("/proc").ok()?.flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
                continue;
            };
            let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
                continue;
            };
            let args: Vec<&[u8]> = cmd.split(|&b| b == 0).collect();
            if args.contains(&&b"mount"[..]) && args.contains(&want) && !process_gone(pid) {
                return Some(pid);
            }
        }
        None
    }

    /// `modelfs umount`, then: not a mount point, daemon gone.
    pub fn unmount_and_check(self) {
        let pid = self.daemon_pid();
        let out = Command::new(modelfs())
            .arg("umount")
            .arg(&self.dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "umount: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!is_mount_point(&self.dir), "still mounted after umount");
        if let Some(pid) = pid {
            assert!(
                wait_until(|| process_gone(pid)),
                "daemon {pid} still running after umount"
            );
        }
    }
}

impl Drop for MountGuard {
    fn drop(&mut self) {
        for cmd in [
            vec![modelfs(), "umount"],
            vec!["fusermount3", "-u"],
            vec!["umount", "-l"],
        ] {
            if !is_mount_point(&self.dir) {
                break;
            }
            let _ = Command::new(cmd[0]).args(&cmd[1..]).arg(&self.dir).output();
        }
    }
}

pub fn is_mount_point(path: &Path) -> bool {
    let canon = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let table = std::fs::read("/proc/self/mountinfo").unwrap_or_default();
    let want = canon.as_os_str().as_bytes();
    table.split(|&b| b == b'\n').any(|line| {
        line.split(|&b| b == b' ')
            .nth(4)
            .is_some_and(|mp| mp == want)
    })
}

/// Exited (no /proc entry) or a zombie (exited, not yet reaped by an init that may never).
pub fn process_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(s) => s
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z')),
    }
}

pub fn wait_until(mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    f()
}

pub fn xattr(path: &Path, name: &str) -> Option<String> {
    let p = CString::new(path.as_os_str().as_bytes()).ok()?;
    let n = CString::new(name).ok()?;
    let mut buf = vec![0u8; 1024];
    // SAFETY: valid C strings and buffer.
    let r = unsafe { libc::getxattr(p.as_ptr(), n.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if r < 0 {
        return None;
    }
    buf.truncate(r as usize);
    String::from_utf8(buf).ok()
}

/// The data after a `.npy` header (v1: u16 header length, v2/v3: u32).
pub fn npy_payload(npy: &[u8]) -> Option<&[u8]> {
    if npy.get(..6)? != b"\x93NUMPY" {
        return None;
    }
    let (start, len) = match npy.get(6)? {
        1 => (
            10,
            usize::from(u16::from_le_bytes([*npy.get(8)?, *npy.get(9)?])),
        ),
        2 | 3 => (
            12,
            u32::from_le_bytes(npy.get(8..12)?.try_into().ok()?) as usize,
        ),
        _ => return None,
    };
    npy.get(start + len..)
}

/// Values of a `.bin` as f64 for numeric dtypes.
pub fn decode(dtype: &str, b: &[u8]) -> Option<Vec<f64>> {
    fn each<const N: usize>(b: &[u8], f: impl Fn([u8; N]) -> f64) -> Vec<f64> {
        b.chunks_exact(N)
            .map(|c| f(c.try_into().unwrap_or([0; N])))
            .collect()
    }
    Some(match dtype {
        "float32" => each(b, |c| f64::from(f32::from_le_bytes(c))),
        "float64" => each(b, f64::from_le_bytes),
        "float16" => each(b, |c| f64::from(half::f16::from_le_bytes(c))),
        "bfloat16" => each(b, |c| f64::from(half::bf16::from_le_bytes(c))),
        "int8" => each(b, |c: [u8; 1]| f64::from(c[0] as i8)),
        "uint8" | "bool" => each(b, |c: [u8; 1]| f64::from(c[0])),
        "int16" => each(b, |c| f64::from(i16::from_le_bytes(c))),
        "uint16" => each(b, |c| f64::from(u16::from_le_bytes(c))),
        "int32" => each(b, |c| f64::from(i32::from_le_bytes(c))),
        "uint32" => each(b, |c| f64::from(u32::from_le_bytes(c))),
        "int64" => each(b, |c| i64::from_le_bytes(c) as f64),
        "uint64" => each(b, |c| u64::from_le_bytes(c) as f64),
        _ => return None,
    })
}

/// `python3 -c script args…` with `input` on its standard input.
pub fn python_with_stdin(
    script: &str,
    args: &[&std::ffi::OsStr],
    input: &[u8],
) -> std::process::Output {
    use std::io::Write;
    use std::process::Stdio;
    let mut child = Command::new("python3")
        .args(["-c", script])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

pub fn python_numpy() -> bool {
    Command::new("python3")
        .args(["-c", "import numpy"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// argv: mountpoint, expected dir. Compares np.load of each tensor's `.npy` (found by the
/// `"name"` in its `.json`) with TensorFlow's values, also through mmap_mode='r'.
pub const NUMPY_CHECK: &str = r#"
import json, os, sys
import numpy as np
mnt, exp = sys.argv[1], sys.argv[2]
idx = json.load(open(os.path.join(exp, "index.json")))
npz = np.load(os.path.join(exp, "expected.npz"))
names = {}
for d, _, files in os.walk(mnt):
    for f in files:
        if f.endswith(".json"):
            try:
                m = json.load(open(os.path.join(d, f)))
            except Exception:
                continue
            if isinstance(m, dict) and "name" in m and "dtype" in m and ".parts" not in d:
                names.setdefault(m["name"], os.path.join(d, f[:-5]))
STANDARD = set("float16 bfloat16 float32 float64 int8 int16 int32 int64 uint8 uint16 uint32 uint64 bool complex64 complex128".split())
errs = []
for key, t in idx["tensors"].items():
    if "npz_key" not in t or t["dtype"] not in STANDARD:
        continue
    base = names.get(key)
    if base is None:
        errs.append("%s: no .json names it" % key); continue
    want = npz[t["npz_key"]]
    if t["dtype"] == "bfloat16":
        want = (np.frombuffer(want.tobytes(), "<u2").astype(np.uint32) << 16).view(np.float32).reshape(want.shape)
    want_dt = "float32" if t["dtype"] == "bfloat16" else t["dtype"]
    for mode in (None, "r"):
        got = np.load(base + ".npy", mmap_mode=mode, allow_pickle=False)
        if got.dtype.name != want_dt or got.shape != tuple(t["shape"]) or got.tobytes() != np.ascontiguousarray(want, dtype=got.dtype).tobytes():
            errs.append("%s: np.load(mmap_mode=%r) differs (%s %s)" % (key, mode, got.dtype, got.shape))
print("\n".join(errs))
sys.exit(1 if errs else 0)
"#;

/// Tiny deterministic generator for offsets.
pub struct Lcg(pub u64);

impl Lcg {
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        if n == 0 {
            0
        } else {
            (self.0 >> 33) % n
        }
    }
}

/// The share of the pages of `[from, to)` of `p` that are in the kernel's page cache
/// (`mincore` of a mapping never touched: no READ is sent).
pub fn resident_share(p: &Path, from: u64, to: u64) -> f64 {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(p).unwrap();
    let len = f.metadata().unwrap().len() as usize;
    let to = (to as usize).min(len);
    let from = from as usize / 4096 * 4096;
    if to <= from {
        return 1.0;
    }
    let mut pages = vec![0u8; len.div_ceil(4096)];
    // SAFETY: a read-only shared mapping of `len` bytes, unmapped before returning and never
    // dereferenced; `pages` has a byte per page of it.
    unsafe {
        let at = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ,
            libc::MAP_SHARED,
            f.as_raw_fd(),
            0,
        );
        assert_ne!(at, libc::MAP_FAILED, "mmap {}", p.display());
        let r = libc::mincore(at, len, pages.as_mut_ptr());
        libc::munmap(at, len);
        assert_eq!(r, 0, "mincore {}", p.display());
    }
    let span = &pages[from / 4096..to.div_ceil(4096)];
    span.iter().filter(|&&b| b & 1 == 1).count() as f64 / span.len() as f64
}

/// READ requests a daemon logged so far in `log` (mounted with
/// `RUST_LOG=modelfs_core::fs::fuse=trace` and `log=`): one line each.
pub fn reads_logged(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("read ino "))
        .count()
}
