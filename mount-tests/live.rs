//! Issue 38: a mount follows a source written to while mounted. Each step replays on a
//! mounted copy what real TensorFlow left after a save (`fixtures/live`, from
//! `scripts/gen-live-fixtures`), written as TensorFlow writes it: data shards by rename, the
//! `.index` in place, the `checkpoint` state file by rename, then the oldest files deleted.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::*;

fn live_fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/live")
}

pub(crate) fn names(dir: &Path) -> BTreeSet<String> {
    let rd = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    rd.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

/// Polls `f` until it holds; panics after `limit` with `what`. Returns the time it took.
pub(crate) fn within(limit: Duration, what: &str, mut f: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    loop {
        if f() {
            return start.elapsed();
        }
        assert!(start.elapsed() < limit, "not seen within {limit:?}: {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn write_renamed(from: &Path, to: &Path) {
    let tmp = to.with_extension("tempstate1234");
    std::fs::copy(from, &tmp).unwrap();
    std::fs::rename(&tmp, to).unwrap();
}

/// Replays the change from snapshot `before` to `after` in `dir`, as TensorFlow writes it.
/// `pause` runs once the data shards are in and the index is half written.
fn replay(before: &Path, after: &Path, dir: &Path, pause: &mut dyn FnMut()) {
    let (old, new) = (names(before), names(after));
    let added: Vec<&String> = new.difference(&old).collect();
    for n in added.iter().filter(|n| n.contains(".data-")) {
        write_renamed(&after.join(n), &dir.join(n));
    }
    for n in added.iter().filter(|n| n.ends_with(".index")) {
        let bytes = std::fs::read(after.join(n)).unwrap();
        std::fs::write(dir.join(n), &bytes[..bytes.len() / 2]).unwrap();
        pause();
        std::fs::write(dir.join(n), &bytes).unwrap();
    }
    write_renamed(&after.join("checkpoint"), &dir.join("checkpoint"));
    for n in old.difference(&new) {
        std::fs::remove_file(dir.join(n)).unwrap();
    }
}

fn text_values(path: &Path) -> Option<Vec<f64>> {
    let text = std::fs::read_to_string(path).ok()?;
    text.split_whitespace().map(|v| v.parse().ok()).collect()
}

/// A `CheckpointManager` directory (max_to_keep=2) saving three more times while mounted:
/// each new checkpoint appears whole, `latest` follows the state file, a deleted checkpoint
/// is ENOENT, a file opened before its checkpoint was deleted reads its bytes, and a
/// checkpoint whose index is half written is not listed.
#[test]
fn a_checkpoint_manager_directory_is_followed() {
    let Some(fuse) = Fuse::check() else { return };
    let steps = live_fixtures().join("manager");
    let src = tempfile::tempdir().unwrap();
    for n in names(&steps.join("after-1")) {
        std::fs::copy(steps.join("after-1").join(&n), src.path().join(&n)).unwrap();
    }
    let mount = fuse.mount(src.path(), "cache_dir=none");
    let m = mount.path().to_path_buf();
    assert_eq!(
        std::fs::read_link(m.join("latest")).unwrap(),
        Path::new("ckpt-1")
    );
    let mut held = std::fs::File::open(m.join("ckpt-1/w.txt")).unwrap();
    let ino_before = std::fs::metadata(m.join("ckpt-1")).unwrap();
    for n in 2..=4 {
        let (before, after) = (
            steps.join(format!("after-{}", n - 1)),
            steps.join(format!("after-{n}")),
        );
        let name = format!("ckpt-{n}");
        let mut pause = || {
            // Data in, index half written: not shown.
            std::thread::sleep(Duration::from_millis(700));
            assert!(
                !names(&m).contains(&name),
                "{name} listed with its index half written"
            );
        };
        replay(&before, &after, src.path(), &mut pause);
        let took = within(Duration::from_secs(2), &format!("latest -> {name}"), || {
            std::fs::read_link(m.join("latest")).is_ok_and(|t| t == Path::new(&name))
        });
        eprintln!("{name}: seen after {took:?}");
        assert_eq!(
            text_values(&m.join("latest/w.txt")).unwrap(),
            vec![n as f64; 3]
        );
        let gone = format!("ckpt-{}", n - 2);
        if n >= 3 {
            within(Duration::from_secs(2), &format!("{gone} gone"), || {
                !names(&m).contains(&gone)
            });
            let err = std::fs::metadata(m.join(&gone).join("w.txt")).unwrap_err();
            assert_eq!(err.raw_os_error(), Some(libc::ENOENT), "{gone}: {err}");
        }
        // The checkpoint kept across the change keeps its inode.
        if n == 2 {
            let after = std::fs::metadata(m.join("ckpt-1")).unwrap();
            use std::os::unix::fs::MetadataExt;
            assert_eq!(after.ino(), ino_before.ino(), "ckpt-1 got a new inode");
        }
    }
    let mut text = String::new();
    held.read_to_string(&mut text).unwrap();
    assert_eq!(text.split_whitespace().count(), 3, "{text}");
    assert!(
        text.split_whitespace().all(|v| v.parse() == Ok(1.0)),
        "{text}"
    );
    drop(held);
    mount.unmount_and_check();
}

/// A TF1 `Saver` directory (absolute paths in its state file, gone stale when copied).
#[test]
fn a_saver_directory_is_followed() {
    let Some(fuse) = Fuse::check() else { return };
    let steps = live_fixtures().join("saver");
    let src = tempfile::tempdir().unwrap();
    for n in names(&steps.join("after-1")) {
        std::fs::copy(steps.join("after-1").join(&n), src.path().join(&n)).unwrap();
    }
    let mount = fuse.mount(src.path(), "cache_dir=none");
    let m = mount.path().to_path_buf();
    for n in 2..=3 {
        replay(
            &steps.join(format!("after-{}", n - 1)),
            &steps.join(format!("after-{n}")),
            src.path(),
            &mut || {},
        );
        let name = format!("model.ckpt-{}", 100 * n);
        within(Duration::from_secs(2), &format!("latest -> {name}"), || {
            std::fs::read_link(m.join("latest")).is_ok_and(|t| t == Path::new(&name))
        });
        assert_eq!(
            text_values(&m.join("latest/w.txt")).unwrap(),
            vec![n as f64; 2]
        );
    }
    within(Duration::from_secs(2), "model.ckpt-100 gone", || {
        !names(&m).contains("model.ckpt-100")
    });
    mount.unmount_and_check();
}

pub(crate) fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let p = e.path();
        if p.is_dir() {
            copy_tree(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}

/// A TF Serving base directory: version 2 renamed into place appears and becomes `latest`;
/// a version being copied in under its final name is not shown until it is whole.
#[test]
fn a_serving_version_renamed_in_appears() {
    let Some(fuse) = Fuse::check() else { return };
    let versions = live_fixtures().join("serving");
    let base = tempfile::tempdir().unwrap();
    copy_tree(&versions.join("1"), &base.path().join("1"));
    let mount = fuse.mount(base.path(), "cache_dir=none");
    let m = mount.path().to_path_buf();
    assert_eq!(
        std::fs::read_link(m.join("latest")).unwrap(),
        Path::new("1")
    );
    copy_tree(&versions.join("2"), &base.path().join("tmp-2"));
    std::fs::rename(base.path().join("tmp-2"), base.path().join("2")).unwrap();
    within(Duration::from_secs(2), "latest -> 2", || {
        std::fs::read_link(m.join("latest")).is_ok_and(|t| t == Path::new("2"))
    });
    assert_eq!(text_values(&m.join("2/v.txt")).unwrap(), vec![2.0]);
    assert_eq!(text_values(&m.join("1/v.txt")).unwrap(), vec![1.0]);
    // Version 3 copied in place, its variables' data last: shown once whole.
    let v3 = base.path().join("3");
    std::fs::create_dir_all(v3.join("variables")).unwrap();
    std::fs::copy(versions.join("2/saved_model.pb"), v3.join("saved_model.pb")).unwrap();
    std::fs::copy(
        versions.join("2/variables/variables.index"),
        v3.join("variables/variables.index"),
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    assert!(
        !names(&m).contains("3"),
        "version 3 shown before it was whole"
    );
    std::fs::copy(
        versions.join("2/variables/variables.data-00000-of-00001"),
        v3.join("variables/variables.data-00000-of-00001"),
    )
    .unwrap();
    within(Duration::from_secs(2), "version 3", || {
        names(&m).contains("3")
    });
    std::fs::remove_dir_all(base.path().join("1")).unwrap();
    within(Duration::from_secs(2), "version 1 gone", || {
        !names(&m).contains("1")
    });
    mount.unmount_and_check();
}

/// An Angel job rewrites its model directory: the mount shows the new model, as a fresh
/// mount of it would.
#[test]
fn an_angel_directory_rewritten_is_shown_anew() {
    let Some(fuse) = Fuse::check() else { return };
    let fixtures = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures/angel");
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model");
    copy_tree(&fixtures.join("nolf/model"), &model);
    let mount = fuse.mount(&model, "cache_dir=none");
    let m = mount.path().to_path_buf();
    assert!(names(&m).contains("lr.json"));
    // The next epoch's model, written beside and moved in matrix by matrix.
    let next = dir.path().join("next");
    copy_tree(&fixtures.join("lr35/model"), &next);
    for e in std::fs::read_dir(&model).unwrap() {
        let p = e.unwrap().path();
        match p.is_dir() {
            true => std::fs::remove_dir_all(&p).unwrap(),
            false => std::fs::remove_file(&p).unwrap(),
        }
    }
    for e in std::fs::read_dir(&next).unwrap() {
        let e = e.unwrap();
        std::fs::rename(e.path(), model.join(e.file_name())).unwrap();
    }
    within(Duration::from_secs(2), "the rewritten model", || {
        let now = names(&m);
        now.contains("input_weight.json")
            && !now
                .iter()
                .any(|n| n.starts_with("lr.") || n.starts_with("m_"))
    });
    // The same document but for the sizes of other files, which the mount may have learnt
    // (a listing's attributes) and a fresh `cat` has not.
    let json = "input_weight.json";
    let doc = |b: &[u8]| {
        let mut v: serde_json::Value = serde_json::from_slice(b).unwrap();
        for l in v["layouts"].as_array_mut().into_iter().flatten() {
            l["size"] = serde_json::Value::Null;
        }
        v
    };
    assert_eq!(
        doc(&std::fs::read(m.join(json)).unwrap()),
        doc(&cli_cat(&model, json)),
        "{json}"
    );
    mount.unmount_and_check();
}
