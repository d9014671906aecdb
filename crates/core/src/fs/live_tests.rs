//! `Tree::replace_model` on a directory of real TensorFlow checkpoints (`fixtures/live`) that
//! changes: what stays (inode numbers, opened files), what goes (names, nodes), what comes.

use std::path::Path;
use std::time::SystemTime;

use super::testing::ctx;
use super::*;
use modelfs_layout::Layout;
use modelfs_model::ReaderOptions;

fn copy_step(step: &Path, dir: &Path) {
    for e in std::fs::read_dir(dir).unwrap() {
        std::fs::remove_file(e.unwrap().path()).unwrap();
    }
    for e in std::fs::read_dir(step).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
    }
}

fn read_text(t: &Tree, ino: Ino) -> Result<String, FsError> {
    let mut buf = vec![0u8; 4096];
    let n = t.read_ino(ino, 0, &mut buf)?;
    Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
}

#[test]
fn a_changed_directory_keeps_its_unchanged_checkpoints_and_lets_the_others_go() {
    let steps = modelfs_model::testing::fixtures_dir().join("live/manager");
    let dir = tempfile::tempdir().unwrap();
    copy_step(&steps.join("after-2"), dir.path());
    let opts = ReaderOptions::default();
    let cfg = TreeConfig {
        uid: 0,
        gid: 0,
        mtime: SystemTime::UNIX_EPOCH,
        text_size: crate::options::TextSize::Exact,
    };
    let open = || modelfs_detect::model_at(dir.path(), &opts).unwrap();
    let tree = Tree::new(open(), ctx(&[Layout::Json, Layout::Txt]), cfg);
    // `ls -l` of the root opens no checkpoint.
    let mut items = Vec::new();
    tree.readdir(ROOT_INO, 0, |i| {
        items.push(i.ino);
        true
    })
    .unwrap();
    for ino in items {
        tree.getattr(ino).unwrap();
    }
    assert_eq!(tree.model().member_opened(b"ckpt-1"), Some(false));
    let ckpt1 = tree.lookup(ROOT_INO, b"ckpt-1").unwrap();
    let ckpt2 = tree.lookup(ROOT_INO, b"ckpt-2").unwrap();
    let w1 = tree.lookup(ckpt1, b"w.txt").unwrap();
    let w2 = tree.lookup(ckpt2, b"w.txt").unwrap();
    // Opened (as by open(2)), not read yet.
    let w2_open = tree.open(w2, false, &modelfs_layout::Patient).unwrap().fh;
    tree.lookup(ROOT_INO, b"latest").unwrap();
    assert_eq!(read_text(&tree, w1).unwrap().trim(), "1.0\n1.0\n1.0");
    // Held open across the change (a reader in the middle of it).
    let w1_open = tree.open(w1, false, &modelfs_layout::Patient).unwrap().fh;
    let nodes_before = tree.inode_count();

    // The third save: ckpt-3 in, ckpt-1 out; ckpt-2's files untouched (same inodes).
    for f in ["ckpt-3.data-00000-of-00001", "ckpt-3.index", "checkpoint"] {
        std::fs::copy(steps.join("after-3").join(f), dir.path().join(f)).unwrap();
    }
    for f in ["ckpt-1.data-00000-of-00001", "ckpt-1.index"] {
        std::fs::remove_file(dir.path().join(f)).unwrap();
    }
    let let_go = tree.replace_model(open());
    assert_eq!(let_go, 2, "ckpt-1 and latest");
    // Kept: the same inode, and its opened file the same node.
    assert_eq!(tree.lookup(ROOT_INO, b"ckpt-2").unwrap(), ckpt2);
    assert_eq!(tree.lookup(ckpt2, b"w.txt").unwrap(), w2);
    // Gone: not found by name; an opened file still reads the bytes it opened.
    assert!(matches!(
        tree.lookup(ROOT_INO, b"ckpt-1"),
        Err(FsError::NotFound)
    ));
    assert!(matches!(
        tree.lookup(ckpt1, b"step.txt"),
        Err(FsError::NotFound)
    ));
    let got = tree
        .read(w1_open, 0, 4096, &modelfs_layout::Patient)
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&got).trim(), "1.0\n1.0\n1.0");
    tree.release(w1_open);
    // A new open of it is stale: its checkpoint is gone.
    assert!(matches!(read_text(&tree, w1), Err(FsError::Stale(_))));
    // New: found, and `latest` follows the state file.
    let ckpt3 = tree.lookup(ROOT_INO, b"ckpt-3").unwrap();
    let w3 = tree.lookup(ckpt3, b"w.txt").unwrap();
    assert_eq!(read_text(&tree, w3).unwrap().trim(), "3.0\n3.0\n3.0");
    let latest = tree.lookup(ROOT_INO, b"latest").unwrap();
    match tree.node(latest).unwrap().kind() {
        listing::NodeKind::Symlink { target } => assert_eq!(target.as_slice(), b"ckpt-3"),
        k => panic!("latest is {k:?}"),
    }
    // Once the kernel forgets the gone nodes, they leave the table.
    tree.forget(w1, 1);
    tree.forget(ckpt1, 1);
    assert!(tree.node(w1).is_err() && tree.node(ckpt1).is_err());
    assert!(tree.inode_count() <= nodes_before + 2);
    // Nothing changed: every member kept.
    assert_eq!(
        tree.replace_model(open()),
        1,
        "only latest, a root entry of its own"
    );
    assert_eq!(tree.lookup(ROOT_INO, b"ckpt-3").unwrap(), ckpt3);
    // ckpt-2's files replaced (renamed over by others): a new checkpoint, new numbers; the
    // file open across the change reads what it opened, a new open of it and a name looked
    // up only are stale.
    std::thread::sleep(std::time::Duration::from_millis(10));
    for (from, to) in [
        ("ckpt-3.data-00000-of-00001", "ckpt-2.data-00000-of-00001"),
        ("ckpt-3.index", "ckpt-2.index"),
    ] {
        let tmp = dir.path().join("tmp");
        std::fs::copy(steps.join("after-3").join(from), &tmp).unwrap();
        std::fs::rename(&tmp, dir.path().join(to)).unwrap();
    }
    tree.replace_model(open());
    let ckpt2_new = tree.lookup(ROOT_INO, b"ckpt-2").unwrap();
    assert_ne!(ckpt2_new, ckpt2);
    let w2_new = tree.lookup(ckpt2_new, b"w.txt").unwrap();
    assert_eq!(read_text(&tree, w2_new).unwrap().trim(), "3.0\n3.0\n3.0");
    let got = tree
        .read(w2_open, 0, 4096, &modelfs_layout::Patient)
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&got).trim(), "2.0\n2.0\n2.0");
    assert!(matches!(read_text(&tree, w2), Err(FsError::Stale(_))));
    let step2 = tree.lookup(ckpt2, b"step.txt").unwrap_err();
    assert!(matches!(step2, FsError::NotFound), "{step2:?}");
}
