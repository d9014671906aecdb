//! The `.tf/` view mounted for real: hidden (not in any listing, so `ls -a`, `find` and `du`
//! never walk it) yet there by name, its files equal to what `modelfs cat` gives, with exact
//! sizes; in a directory of several checkpoints, one view per checkpoint.

use std::path::Path;
use std::process::Command;

use super::support::*;

#[test]
fn the_tf_view_is_hidden_and_reads_like_the_cli() {
    let Some(fuse) = Fuse::check() else { return };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    for (source, at) in [
        (root.join("tf/graphs/tf1/savedmodel"), ""),
        (root.join("angel/formats/model"), ""),
        (root.join("tf/ckpt_manager/run"), "ckpt-3/"),
    ] {
        let mount = fuse.mount(&source, "");
        let m = mount.path();
        let listed: Vec<String> = std::fs::read_dir(m.join(at))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(!listed.iter().any(|n| n == ".tf"), "{listed:?}");
        assert!(walk(m).iter().all(|p| !p.contains(".tf/")));
        let mut files: Vec<String> = std::fs::read_dir(m.join(at).join(".tf"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        assert_eq!(
            files,
            ["checkpoint", "model.data-00000-of-00001", "model.index"]
        );
        for f in &files {
            let p = m.join(at).join(".tf").join(f);
            let got = std::fs::read(&p).unwrap();
            assert_eq!(
                std::fs::metadata(&p).unwrap().len(),
                got.len() as u64,
                "{f}"
            );
            assert!(
                got == cli_cat(&source, &format!("{at}.tf/{f}")),
                "{}: {f}",
                source.display()
            );
        }
        mount.unmount_and_check();
    }
}

/// `.angel/` in a text format (sizes learnt by a size pass, so files may first show size 0):
/// hidden, copied out whole by `cp -r` byte-equal to `modelfs cat`, and the copy opens as an
/// Angel model whose matrices show the same text as the source's.
#[test]
fn the_angel_view_copies_out_as_a_model() {
    let Some(fuse) = Fuse::check() else { return };
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/angel/formats/model");
    let opts = "angel_format=TextColumnFormat";
    let mount = fuse.mount(&source, opts);
    let m = mount.path();
    assert!(walk(m).iter().all(|p| !p.contains(".angel")));
    let copy = tempfile::tempdir().unwrap();
    let st = Command::new("cp")
        .arg("-r")
        .arg(m.join(".angel"))
        .arg(copy.path().join("model"))
        .status()
        .unwrap();
    assert!(st.success());
    let copied = copy.path().join("model");
    // A copy is an ordinary tree its owner can change and remove (r-x-only directories made a
    // non-root user's copy unremovable).
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode();
        let first = std::fs::read_dir(&copied)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        assert_ne!(mode(&copied) & 0o200, 0, "copied directory not writable");
        assert_ne!(
            mode(&first.join("meta")) & 0o200,
            0,
            "copied file not writable"
        );
    }
    let mut matrices: Vec<String> = std::fs::read_dir(&copied)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    matrices.sort();
    assert_eq!(matrices.len(), 128, "{matrices:?}");
    for name in matrices.iter().step_by(9) {
        for f in std::fs::read_dir(copied.join(name)).unwrap() {
            let f = f.unwrap().file_name().to_string_lossy().into_owned();
            let got = std::fs::read(copied.join(name).join(&f)).unwrap();
            let want = Command::new(modelfs())
                .args(["cat", "-o", opts])
                .arg(&source)
                .arg(format!(".angel/{name}/{f}"))
                .output()
                .unwrap();
            assert!(want.status.success());
            assert!(got == want.stdout, "{name}/{f}");
            let meta = std::fs::metadata(m.join(".angel").join(name).join(&f)).unwrap();
            assert_eq!(meta.len(), got.len() as u64, "{name}/{f} size once known");
        }
        // The values read back: `.txt` (asked for: a sparse matrix shows `.libsvm` by
        // default, and the view may store zeros the source left out); a long-key sparse
        // matrix has no `.txt` (its dense form is too big): `.libsvm`.
        let cat = |src: &Path, path: &str| {
            Command::new(modelfs())
                .args(["cat", "-o", "layouts=json,txt,libsvm"])
                .arg(src)
                .arg(path)
                .output()
                .unwrap()
        };
        let has_txt = cat(&source, &format!("{name}.txt")).status.success();
        let txt = format!("{name}.{}", if has_txt { "txt" } else { "libsvm" });
        let back = cat(&copied, &txt);
        assert!(
            back.status.success() && back.stdout == cat(&source, &txt).stdout,
            "{txt}"
        );
    }
    mount.unmount_and_check();
}

/// Issue 28: on every committed fixture and shared real-world model, `.safetensors` (read by
/// the `safetensors` package and by its format), `.npz` (`np.load`), `NAME.safetensors` and
/// `NAME.stats.json` (numpy's stats in float64) equal each tensor's `.npy`, with exact sizes
/// (`check_views.py`).
#[test]
fn safetensors_npz_and_stats_equal_every_npy() {
    let Some(fuse) = Fuse::check() else { return };
    let have = Command::new("python3")
        .args(["-c", "import numpy, safetensors"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !have {
        assert!(
            std::env::var_os("CI").is_none() && std::env::var_os("MODELFS_REQUIRE_FUSE").is_none(),
            "python3 with numpy and safetensors is needed (scripts/test installs them)"
        );
        eprintln!("skipped: python3 numpy/safetensors missing");
        return;
    }
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let script = here.join("mount-tests/check_views.py");
    // Every TF case (fixtures by prefix, shared real-world models), every Angel fixture
    // that opens as a model (the `bad`/`refuse_*` ones do not), hash tables and Monolith.
    let mut sources: Vec<std::path::PathBuf> = cases().into_iter().map(|c| c.source).collect();
    let mut angel: Vec<_> = std::fs::read_dir(here.join("fixtures/angel"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    angel.sort();
    let opens = |p: &Path| {
        Command::new(modelfs())
            .arg("info")
            .arg(p)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    // A fixture holding its model in `model/` (with its `expected.json`) opens as a directory
    // of one model, whose whole-model views are the member's: the model itself is compared
    // where it is a case of its own.
    sources.extend(
        angel
            .into_iter()
            .filter(|p| !p.join("model").is_dir() && opens(p)),
    );
    for s in [
        "fixtures/tf/hashtable/tf1",
        "fixtures/tf/hashtable/tf2",
        "fixtures/monolith/ps_export",
        "fixtures/safetensors/dtypes.safetensors",
        "fixtures/safetensors/sharded",
        "fixtures/numpy/arrays.npz",
        "fixtures/numpy/fortran_i4.npy",
        "fixtures/torch/views.pt",
        "fixtures/torch/checkpoint.pt",
        "fixtures/torch/dtypes.pt",
        "fixtures/gguf/model.gguf",
        "fixtures/gguf/plain.gguf",
    ] {
        sources.push(here.join(s));
    }
    let (mut mounted, mut checked) = (0, 0u64);
    let mut failures = Vec::new();
    for source in &sources {
        let mount = fuse.mount(source, "layouts=json,npy");
        let out = Command::new("python3")
            .arg(&script)
            .arg(mount.path())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        // "checked {'safetensors': 3, 'npz': 1, …}": count what was compared.
        checked += text
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|n| n.parse::<u64>().ok())
            .skip(1)
            .sum::<u64>();
        if !out.status.success() {
            failures.push(format!(
                "{}:\n{text}{}",
                source.display(),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        mounted += 1;
        mount.unmount_and_check();
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(
        mounted >= 20 && checked >= 500,
        "{mounted} sources, {checked} checks"
    );
}

/// Issue 28: `modelfs diff` of a model and its own `.tf/` view (a TF checkpoint read through
/// the mount) finds every variable identical — for a TF source by equal stored checksums, for
/// an Angel one (Angel vs TF) by comparing the values — and exits 0.
#[test]
fn a_model_and_its_tf_view_diff_identical() {
    let Some(fuse) = Fuse::check() else { return };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    for source in [
        root.join("tf/dtypes/ckpt"),
        root.join("tf/partitioned"),
        root.join("angel/formats/model"),
        // Its `.tf/` data file is the GGUF file itself.
        root.join("gguf/plain.gguf"),
    ] {
        let mount = fuse.mount(&source, "");
        let view = mount.path().join(".tf/model");
        let out = Command::new(modelfs())
            .args(["diff", "--json"])
            .arg(&source)
            .arg(&view)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let lines: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
        let mut identical = 0;
        for l in &lines {
            let elements: u64 = l["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_u64().unwrap())
                .product();
            // `.tf/` leaves out sparse matrices whose dense form exceeds `max_dense`.
            if l["status"] == "only_a" && elements > 1 << 27 {
                continue;
            }
            assert_eq!(l["status"], "identical", "{}: {l}", source.display());
            identical += 1;
        }
        assert!(identical >= 3, "{}: {text}", source.display());
        let all = identical == lines.len();
        assert_eq!(
            out.status.code(),
            Some(if all { 0 } else { 1 }),
            "{}",
            source.display()
        );
        mount.unmount_and_check();
    }
}

/// `.tf/model.data-00000-of-00001` of a checkpoint with one data file is that file, which
/// the kernel reads itself (FUSE passthrough, Linux 6.9+, as root): its bytes, read or
/// mapped, are the source's, and not one READ of them reaches the daemon.
#[test]
fn the_tf_views_data_file_is_read_by_the_kernel_from_the_source() {
    let Some(fuse) = Fuse::check() else { return };
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs as root: passthrough must be tested"
        );
        eprintln!("skipped: passthrough needs root");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let src = crate::firstlook::checkpoint(tmp.path(), 2048, 4096); // 32 MiB
    let want = std::fs::read(src.with_extension("data-00000-of-00001")).unwrap();
    let log = tmp.path().join("daemon.log");
    let m = fuse.mount_env(
        &src,
        &format!("cache_dir=none,log={}", log.display()),
        &[("RUST_LOG", "modelfs_core::fs::fuse=trace")],
    );
    let reads = || reads_logged(&log);
    let data = m.path().join(".tf/model.data-00000-of-00001");
    let before = reads();
    let got = std::fs::read(&data).unwrap();
    assert!(got == want, "the view's data file is not the source's");
    let f = std::fs::File::open(&data).unwrap();
    // SAFETY: a read-only mapping of a read-only file, dropped before the unmount.
    let map = unsafe { memmap2::Mmap::map(&f) }.unwrap();
    assert!(map[..] == want[..]);
    drop((map, f));
    assert_eq!(
        reads(),
        before,
        "READs of a passed-through file reached the daemon"
    );
    // Its index is the view's own, read through the daemon; TensorFlow's reader takes both.
    assert!(!std::fs::read(m.path().join(".tf/model.index"))
        .unwrap()
        .is_empty());
    assert!(reads() > before);
    m.unmount_and_check();
}

/// One bit flipped in one tensor (`t05`) of a TF2 checkpoint whose tensors each span several
/// pages (scripts/gen_flipped_bit.py): that tensor alone fails, on the mount and through every
/// view — `.tf/` read by modelfs's own TF reader (as TensorFlow reads it: every entry's CRC32C
/// against the index), `.npz` by `np.load`, `.safetensors` by `safe_open` in a subprocess,
/// which must exit 0 for every intact tensor (no SIGBUS from a page shared with the bad one).
#[test]
fn a_bad_tensor_fails_only_itself_through_every_view() {
    let Some(fuse) = Fuse::check() else { return };
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().unwrap();
    for f in ["ckpt.index", "ckpt.data-00000-of-00001"] {
        std::fs::copy(here.join("fixtures/tf/flipbit").join(f), tmp.path().join(f)).unwrap();
    }
    let keys: Vec<String> = std::iter::once("s00".to_string())
        .chain((0..10).map(|i| format!("t{i:02}")))
        .collect();
    // Flip a bit in the middle of t05's bytes, found by its values.
    let t05 = cli_cat(&tmp.path().join("ckpt"), "t05.npy");
    let body = npy_payload(&t05).unwrap().to_vec();
    let data_path = tmp.path().join("ckpt.data-00000-of-00001");
    let mut data = std::fs::read(&data_path).unwrap();
    let at = data
        .windows(64)
        .position(|w| w == &body[..64])
        .expect("t05's bytes in the data file");
    data[at + body.len() / 2] ^= 0x10;
    std::fs::write(&data_path, &data).unwrap();

    let mount = fuse.mount(&tmp.path().join("ckpt"), "cache_dir=none");
    let mnt = mount.path().to_path_buf();
    for k in &keys {
        let read = std::fs::read(mnt.join(format!("{k}.npy")));
        assert_eq!(
            read.is_err(),
            k == "t05",
            "{k} on the mount: {:?}",
            read.err()
        );
    }
    // .tf/: modelfs reads it as a TF checkpoint (through the mount: mmap and readahead).
    let view = mnt.join(".tf/model");
    for k in &keys {
        let out = Command::new(modelfs())
            .args(["cat", "-o", "cache_dir=none"])
            .arg(&view)
            .arg(format!("{k}.npy"))
            .output()
            .unwrap();
        match k.as_str() {
            "t05" => assert!(!out.status.success(), ".tf/ served bad t05"),
            _ => {
                assert!(
                    out.status.success(),
                    ".tf/ {k}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let want = std::fs::read(mnt.join(format!("{k}.npy"))).unwrap();
                assert_eq!(out.stdout, want, ".tf/ {k}");
            }
        }
    }
    let verify = Command::new(modelfs())
        .args(["verify", "-o", "cache_dir=none"])
        .arg(&view)
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );
    assert_eq!(verify.status.code(), Some(2), "{said}");
    for k in &keys {
        assert_eq!(said.contains(&format!("{k}/")), k == "t05", "{k}: {said}");
    }
    // .npz and .safetensors, by numpy and the safetensors package.
    let have = Command::new("python3")
        .args(["-c", "import numpy, safetensors"])
        .output()
        .is_ok_and(|o| o.status.success());
    if have {
        let key = |k: &str| format!("{k}/.ATTRIBUTES/VARIABLE_VALUE");
        let mut cmd = Command::new("python3");
        cmd.arg(here.join("mount-tests/check_flipped.py"))
            .arg(&mnt)
            .arg(key("t05"));
        for k in keys.iter().filter(|k| *k != "t05") {
            cmd.arg(format!(
                "{}={}",
                key(k),
                mnt.join(format!("{k}.npy")).display()
            ));
        }
        let out = cmd.output().unwrap();
        assert!(
            out.status.success(),
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    } else {
        assert!(
            std::env::var_os("CI").is_none() && std::env::var_os("MODELFS_REQUIRE_FUSE").is_none(),
            "python3 with numpy and safetensors is needed (scripts/test installs them)"
        );
    }
    mount.unmount_and_check();
}
