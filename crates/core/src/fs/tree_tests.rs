//! Tests of `fs::tree` against the in-memory model double (no kernel needed).

use std::sync::Arc;
use std::time::SystemTime;

use super::testing::ctx;
use super::tree::{xattr_list_bytes, xattr_reply, XattrReply, XATTR_DTYPE, XATTR_SHAPE};
use super::*;
use modelfs_layout::Layout;
use modelfs_model::testing::{key, MemModel, MemTensor};

fn model() -> MemModel {
    let mut m = MemModel::default();
    m.add(
        key("layer1/W"),
        MemTensor::f32(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.5]).named(b"layer1/W"),
    );
    m.add(
        key("layer1/W/Adam"),
        MemTensor::f32(&[2], &[0.5, -1.0]).named(b"layer1/W/Adam"),
    );
    m.add(
        key("b"),
        MemTensor::f32(&[3], &[0.25, 0.5, 0.75]).named(b"b"),
    );
    m.add(
        key("emb"),
        MemTensor::partitioned(&[1.0, 2.0, 3.0, 4.0, 5.0], &[2, 3], false),
    );
    m.add(
        key("angel"),
        MemTensor::partitioned(&[7.0, 8.0], &[1, 1], true),
    );
    let bad = MemTensor::f32(&[2], &[0.0, 0.0])
        .named(b"bad")
        .with_problem("checksum mismatch in model.data-00000-of-00001");
    m.add(key("bad"), bad);
    m.symlinks
        .push((Vec::new(), b"latest".to_vec(), b"layer1".to_vec()));
    m
}

fn tree_of(m: MemModel, layouts: &[Layout]) -> Tree {
    let cfg = TreeConfig {
        uid: 1234,
        gid: 55,
        mtime: SystemTime::UNIX_EPOCH,
        text_size: crate::options::TextSize::Exact,
    };
    Tree::new(Arc::new(m), ctx(layouts), cfg)
}

fn tree() -> Tree {
    tree_of(model(), &[Layout::Json, Layout::Txt, Layout::Bin])
}

fn all_paths(t: &Tree) -> Vec<String> {
    let mut out = Vec::new();
    t.walk(ROOT_INO, "", &mut |p, _| out.push(p.to_string()))
        .unwrap();
    out
}

fn read_all(t: &Tree, path: &str) -> Vec<u8> {
    let ino = t.resolve(path.as_bytes()).unwrap();
    let size = t.getattr(ino).unwrap().size as usize;
    let mut buf = vec![0u8; size + 10];
    let n = t.read_ino(ino, 0, &mut buf).unwrap();
    buf.truncate(n);
    buf
}

#[test]
fn walk_shows_exact_tree() {
    let t = tree();
    let want = [
        "angel.bin",
        "angel.json",
        "angel.parts/",
        "angel.parts/10.bin",
        "angel.parts/10.txt",
        "angel.parts/11.bin",
        "angel.parts/11.txt",
        "angel.txt",
        "b.bin",
        "b.json",
        "b.txt",
        "bad.bin",
        "bad.json",
        "bad.txt",
        "emb.bin",
        "emb.json",
        "emb.parts/",
        "emb.parts/0.bin",
        "emb.parts/0.txt",
        "emb.parts/1.bin",
        "emb.parts/1.txt",
        "emb.txt",
        "latest",
        "layer1/",
        "layer1/W/",
        "layer1/W/Adam.bin",
        "layer1/W/Adam.json",
        "layer1/W/Adam.txt",
        "layer1/W.bin",
        "layer1/W.json",
        "layer1/W.txt",
    ];
    assert_eq!(all_paths(&t), want);
}

#[test]
fn sizes_are_exact_and_reads_match() {
    let t = tree();
    assert_eq!(
        read_all(&t, "layer1/W.txt"),
        b"1.0\n2.0\n3.0\n4.0\n5.0\n6.5\n"
    );
    let ino = t.resolve(b"layer1/W.bin").unwrap();
    let attr = t.getattr(ino).unwrap();
    assert_eq!(attr.size, 24);
    assert_eq!(attr.kind, FileKind::File);
    assert_eq!(attr.perm, 0o644);
    assert_eq!((attr.uid, attr.gid), (1234, 55));
    assert_eq!(
        attr.mtime,
        modelfs_model::testing::MemTensor::f32(&[], &[0.0])
            .meta
            .mtime
    );
    let full = read_all(&t, "layer1/W.bin");
    for off in 0..=24u64 {
        let mut buf = [0u8; 5];
        let n = t.read_ino(ino, off, &mut buf).unwrap();
        let end = (off as usize + 5).min(24);
        assert_eq!(&buf[..n], &full[off as usize..end]);
    }
    let mut buf = [0u8; 4];
    assert_eq!(t.read_ino(ino, 1 << 40, &mut buf).unwrap(), 0);
    assert_eq!(read_all(&t, "emb.parts/1.bin").len(), 12);
    assert_eq!(read_all(&t, "angel.parts/11.txt"), b"8.0\n");
}

#[test]
fn directories_and_links() {
    let t = tree();
    let root = t.getattr(ROOT_INO).unwrap();
    assert_eq!(root.kind, FileKind::Dir);
    assert_eq!(root.perm, 0o755);
    // layer1/, emb.parts/, angel.parts/
    assert_eq!(root.nlink, 5);
    let link = t.lookup_ino(ROOT_INO, b"latest").unwrap();
    assert_eq!(t.getattr(link).unwrap().kind, FileKind::Symlink);
    assert_eq!(t.readlink(link).unwrap(), b"layer1");
    assert_eq!(read_all(&t, "latest/W.txt"), read_all(&t, "layer1/W.txt"));
    assert_eq!(
        t.resolve(b"/layer1/./W/../W.json").unwrap(),
        t.resolve(b"layer1/W.json").unwrap()
    );
    let l1 = t.lookup_ino(ROOT_INO, b"layer1").unwrap();
    assert_eq!(t.lookup_ino(l1, b"..").unwrap(), ROOT_INO);
    assert_eq!(
        t.path_of(t.resolve(b"layer1/W/Adam.txt").unwrap()),
        "layer1/W/Adam.txt"
    );
}

#[test]
fn inodes_are_stable_and_unique() {
    let t = tree();
    let mut seen = std::collections::HashMap::new();
    let mut items = Vec::new();
    t.readdir(ROOT_INO, 0, |i| {
        items.push(i.owned());
        true
    })
    .unwrap();
    for item in &items {
        assert_eq!(
            t.lookup_ino(ROOT_INO, item.name.as_bytes()).unwrap(),
            item.ino
        );
        assert!(seen.insert(item.ino, item.name.clone()).is_none());
    }
    // Offsets resume where asked.
    let mut tail = Vec::new();
    t.readdir(ROOT_INO, 3, |i| {
        tail.push(i.owned());
        tail.len() < 2
    })
    .unwrap();
    assert_eq!(tail, items[3..5]);
    assert!(matches!(t.getattr(9999), Err(FsError::NotFound)));
    assert!(matches!(t.getattr(0), Err(FsError::NotFound)));
}

#[test]
fn concurrent_lookups_agree() {
    let t = Arc::new(tree());
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let t = t.clone();
            std::thread::spawn(move || {
                ["layer1/W.txt", "b.bin", "layer1/W/Adam.bin"]
                    .map(|p| t.resolve(p.as_bytes()).unwrap())
            })
        })
        .collect();
    let results: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert!(results.windows(2).all(|w| w[0] == w[1]));
}

#[test]
fn errors_carry_errnos() {
    let t = tree();
    let file = t.resolve(b"b.txt").unwrap();
    assert_eq!(t.lookup_ino(file, b"x").unwrap_err().errno(), libc::ENOTDIR);
    assert_eq!(
        t.lookup_ino(ROOT_INO, b"nope").unwrap_err().errno(),
        libc::ENOENT
    );
    assert_eq!(t.resolve(b"b.txt/x").unwrap_err().errno(), libc::ENOTDIR);
    assert_eq!(t.check_open(file, true).unwrap_err().errno(), libc::EROFS);
    t.check_open(file, false).unwrap();
    let mut buf = [0u8; 4];
    assert_eq!(
        t.read_ino(ROOT_INO, 0, &mut buf).unwrap_err().errno(),
        libc::EISDIR
    );
    assert_eq!(t.readlink(file).unwrap_err().errno(), libc::EINVAL);
    // A bad tensor: its files stat (a listing never fails for it, the size a placeholder)
    // and open; their reads fail with EIO; its .json still reads.
    let bad = t.resolve(b"bad.txt").unwrap();
    assert_eq!(t.getattr(bad).unwrap().size, 0);
    t.check_open(bad, false).unwrap();
    let mut buf = [0u8; 4];
    assert_eq!(t.read_ino(bad, 0, &mut buf).unwrap_err().errno(), libc::EIO);
    assert!(!read_all(&t, "bad.json").is_empty());
    // ...and keeps failing (errors are not cached as successes).
    assert_eq!(t.read_ino(bad, 0, &mut buf).unwrap_err().errno(), libc::EIO);
    assert_eq!(t.getattr(bad).unwrap().size, 0);
    // A binary layout's size comes from metadata; its reads fail.
    let bad_bin = t.resolve(b"bad.bin").unwrap();
    assert_eq!(t.getattr(bad_bin).unwrap().size, 8);
    let mut buf = [0u8; 8];
    assert_eq!(
        t.read_ino(bad_bin, 0, &mut buf).unwrap_err().errno(),
        libc::EIO
    );
    // xattrs still work on it (metadata only).
    assert_eq!(t.getxattr(bad, XATTR_SHAPE.as_bytes()).unwrap(), b"[2]");
}

#[test]
fn xattrs() {
    let t = tree();
    let w = t.resolve(b"layer1/W.txt").unwrap();
    assert_eq!(t.getxattr(w, XATTR_DTYPE.as_bytes()).unwrap(), b"float32");
    assert_eq!(t.getxattr(w, XATTR_SHAPE.as_bytes()).unwrap(), b"[2, 3]");
    let p = t.resolve(b"emb.parts/1.txt").unwrap();
    assert_eq!(t.getxattr(p, XATTR_SHAPE.as_bytes()).unwrap(), b"[3]");
    assert_eq!(
        t.getxattr(w, b"user.other").unwrap_err().errno(),
        libc::ENODATA
    );
    for other_namespace in [&b"security.selinux"[..], b"system.posix_acl_access"] {
        assert_eq!(
            t.getxattr(w, other_namespace).unwrap_err().errno(),
            libc::EOPNOTSUPP
        );
    }
    assert_eq!(
        t.getxattr(ROOT_INO, XATTR_DTYPE.as_bytes())
            .unwrap_err()
            .errno(),
        libc::ENODATA
    );
    assert_eq!(t.listxattr(w).unwrap(), [XATTR_DTYPE, XATTR_SHAPE]);
    assert!(t.listxattr(ROOT_INO).unwrap().is_empty());
    assert_eq!(xattr_list_bytes(&["a", "bc"]), b"a\0bc\0");
    assert_eq!(
        xattr_reply(b"abc".to_vec(), 0).unwrap(),
        XattrReply::Size(3)
    );
    assert_eq!(
        xattr_reply(b"abc".to_vec(), 3).unwrap(),
        XattrReply::Data(b"abc".to_vec())
    );
    assert_eq!(
        xattr_reply(b"abc".to_vec(), 2).unwrap_err().errno(),
        libc::ERANGE
    );
    assert_eq!(tree::shape_text(&[]), "[]");
}

#[test]
fn collisions_and_escapes() {
    let mut m = MemModel::default();
    m.add(key("a"), MemTensor::f32(&[1], &[1.0]).named(b"a"));
    m.add(
        key("a.txt/x"),
        MemTensor::f32(&[1], &[2.0]).named(b"a.txt/x"),
    );
    m.add(
        vec![b"..".to_vec(), b"%".to_vec()],
        MemTensor::f32(&[1], &[3.0]).named(b""),
    );
    m.add(
        vec![b"\xff".to_vec()],
        MemTensor::f32(&[1], &[4.0]).named(b""),
    );
    let t = tree_of(m, &[Layout::Json, Layout::Txt]);
    assert_eq!(
        all_paths(&t),
        [
            "%2E%2E/",
            "%2E%2E/%25.json",
            "%2E%2E/%25.txt",
            "%FF.json",
            "%FF.txt",
            "a%2Etxt/",
            "a%2Etxt/x.json",
            "a%2Etxt/x.txt",
            "a.json",
            "a.txt",
        ]
    );
    assert_eq!(read_all(&t, "a%2Etxt/x.txt"), b"2.0\n");
    assert_eq!(read_all(&t, "a.txt"), b"1.0\n");
}

#[test]
fn unavailable_layouts_are_not_shown() {
    let mut m = MemModel::default();
    let mut s = MemTensor::f32(&[1], &[1.0]).named(b"s");
    s.meta.dtype = modelfs_model::DType::Str;
    m.add(key("s"), s);
    let t = tree_of(m, &[Layout::Json, Layout::Bin, Layout::Npy]);
    assert_eq!(all_paths(&t), ["s.json"]);
}

#[test]
fn long_keys_get_hashed_names() {
    let long = "k".repeat(300);
    let mut m = MemModel::default();
    m.add(
        vec![long.as_bytes().to_vec()],
        MemTensor::f32(&[1], &[1.0]).named(long.as_bytes()),
    );
    let t = tree_of(m, &[Layout::Json]);
    let paths = all_paths(&t);
    assert_eq!(paths.len(), 1);
    assert!(
        paths[0].len() <= 255 && paths[0].ends_with(".json"),
        "{}",
        paths[0]
    );
    assert!(paths[0].starts_with(&"k".repeat(200)));
}

#[test]
fn owner_is_the_user_unless_overridden() {
    let c = TreeConfig::for_user(Some(7), None, SystemTime::UNIX_EPOCH);
    assert_eq!(c.uid, 7);
    // SAFETY: getuid/getgid cannot fail and touch no memory.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    assert_eq!(c.gid, gid);
    let c = TreeConfig::for_user(None, Some(9), SystemTime::UNIX_EPOCH);
    assert_eq!((c.uid, c.gid), (uid, 9));
}

/// SPEC §3 "Sizes": a big text file's size is a placeholder until learnt; the file is read to
/// its end meanwhile and the size becomes exact once a reader reaches it.
#[test]
fn big_text_sizes_are_placeholders_until_learnt() {
    let n = 3 << 20;
    let values: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
    let mut m = MemModel::default();
    m.add(
        key("big"),
        MemTensor::f32(&[n as u64], &values).named(b"big"),
    );
    m.add(
        key("small"),
        MemTensor::f32(&[2], &[1.0, 2.0]).named(b"small"),
    );
    let mut cfg = TreeConfig::for_user(None, None, SystemTime::UNIX_EPOCH);
    cfg.text_size = crate::options::TextSize::Auto;
    let t = Tree::new(
        Arc::new(m),
        ctx(&[Layout::Json, Layout::Txt, Layout::Bin]),
        cfg,
    );
    let unknown = Arc::new(std::sync::Mutex::new(Vec::new()));
    let learnt = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (u, l) = (unknown.clone(), learnt.clone());
    t.listen_sizes(
        Box::new(move |ino| u.lock().unwrap().push(ino)),
        Box::new(move |ino| l.lock().unwrap().push(ino)),
    );
    let txt = t.resolve(b"big.txt").unwrap();
    let a = t.getattr(txt).unwrap();
    assert_eq!((a.size, a.exact), (0, false));
    assert_eq!(*unknown.lock().unwrap(), [txt]);
    assert_eq!(t.check_open(txt, false).unwrap(), tree::OpenMode::Direct);
    // Binary layouts and cheap text files are exact at once.
    let bin = t.resolve(b"big.bin").unwrap();
    assert_eq!(t.getattr(bin).unwrap().size, 4 * n as u64);
    assert_eq!(t.check_open(bin, false).unwrap(), tree::OpenMode::Cached);
    let small = t.resolve(b"small.txt").unwrap();
    assert_eq!(
        (
            t.getattr(small).unwrap().size,
            t.getattr(small).unwrap().exact
        ),
        (8, true)
    );
    // The .json does not render to learn sizes.
    let json = String::from_utf8(read_all(&t, "big.json")).unwrap();
    assert!(json.contains("\"size\":null"), "{json}");
    // A reader reads to the end, then the size is exact.
    let mut want = Vec::new();
    for v in &values {
        want.extend_from_slice(format!("{v:?}\n").as_bytes());
    }
    let mut got = Vec::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let k = t.read_ino(txt, got.len() as u64, &mut buf).unwrap();
        if k == 0 {
            break;
        }
        got.extend_from_slice(&buf[..k]);
    }
    assert!(got == want, "text differs");
    let a = t.getattr(txt).unwrap();
    assert_eq!((a.size, a.exact), (want.len() as u64, true));
    assert_eq!(*learnt.lock().unwrap(), [txt]);
    assert_eq!(t.check_open(txt, false).unwrap(), tree::OpenMode::Cached);
    // Exact mode learns it on first sight.
    let mut m = MemModel::default();
    m.add(
        key("big"),
        MemTensor::f32(&[n as u64], &values).named(b"big"),
    );
    let t = tree_of(m, &[Layout::Json, Layout::Txt]);
    let txt = t.resolve(b"big.txt").unwrap();
    assert_eq!(t.getattr(txt).unwrap().size, want.len() as u64);
}

/// Issue 26 item 9: the `.json` of a tensor whose read failed gives that error as
/// `last_error`; its size follows (kept by the kernel until the change is told), other
/// `.json`s are unchanged.
#[test]
fn a_failed_read_shows_in_the_tensors_json() {
    let mut m = MemModel::default();
    m.add(
        key("flaky"),
        MemTensor::f32(&[2], &[1.0, 2.0])
            .named(b"flaky")
            .failing("injected: the store went away"),
    );
    m.add(key("ok"), MemTensor::f32(&[1], &[1.0]).named(b"ok"));
    let t = tree_of(m, &[Layout::Json, Layout::Bin]);
    let before = read_all(&t, "flaky.json");
    assert!(!String::from_utf8_lossy(&before).contains("last_error"));
    let ok_before = read_all(&t, "ok.json");
    let json = t.resolve(b"flaky.json").unwrap();
    assert_eq!(
        t.check_open(json, false).unwrap(),
        super::tree::OpenMode::Direct
    );
    let attr = t.getattr(json).unwrap();
    assert!(
        attr.exact,
        "settled: its size is kept until a change is told"
    );
    let told = Arc::new(std::sync::Mutex::new(Vec::new()));
    let heard = told.clone();
    t.listen_sizes(
        Box::new(|_| {}),
        Box::new(move |ino| heard.lock().unwrap().push(ino)),
    );
    let bin = t.resolve(b"flaky.bin").unwrap();
    let mut buf = [0u8; 8];
    assert_eq!(t.read_ino(bin, 0, &mut buf).unwrap_err().errno(), libc::EIO);
    let after = read_all(&t, "flaky.json");
    let doc: serde_json::Value = serde_json::from_slice(&after).unwrap();
    let last = doc["last_error"].as_str().unwrap();
    assert!(
        last.contains("flaky.bin") && last.contains("injected"),
        "{last}"
    );
    assert_eq!(t.getattr(json).unwrap().size, after.len() as u64);
    assert!(
        told.lock().unwrap().contains(&json),
        "the kernel is told of the change"
    );
    assert_eq!(read_all(&t, "ok.json"), ok_before);
}

#[test]
fn rows_are_found_by_id_under_a_hidden_dir_that_lists_only_its_readme() {
    let t = tree();
    let before = all_paths(&t);
    assert!(!before.iter().any(|p| p.contains(".rows")), "{before:?}");
    // layer1/W is [2, 3]: rows by index.
    assert_eq!(read_all(&t, "layer1/W.rows/1.txt"), b"4.0 5.0 6.5\n");
    assert_eq!(read_all(&t, "layer1/W.rows/0.txt"), b"1.0 2.0 3.0\n");
    let npy = read_all(&t, "layer1/W.rows/1.npy");
    assert_eq!(&npy[..6], b"\x93NUMPY");
    assert_eq!(
        &npy[npy.len() - 12..],
        &[0, 0, 128, 64, 0, 0, 160, 64, 0, 0, 208, 64]
    );
    let json: serde_json::Value =
        serde_json::from_slice(&read_all(&t, "layer1/W.rows/1.json")).unwrap();
    assert_eq!(json["id"], 1);
    assert_eq!(json["values"], serde_json::json!([4.0, 5.0, 6.5]));
    assert_eq!(json["key"], "row_index");
    // The directory lists its README, nothing else; absent and non-canonical ids are not there.
    let dir = t.resolve(b"layer1/W.rows").unwrap();
    let mut names = Vec::new();
    t.readdir(dir, 0, |i| {
        names.push(i.name.to_string());
        true
    })
    .unwrap();
    assert_eq!(names, ["README"]);
    assert!(String::from_utf8(read_all(&t, "layer1/W.rows/README"))
        .unwrap()
        .contains("row index"));
    for absent in ["2.txt", "-1.txt", "01.txt", "1.csv", "x.txt", "1"] {
        let e = t.lookup_ino(dir, absent.as_bytes()).unwrap_err();
        assert!(matches!(e, FsError::NotFound), "{absent}: {e:?}");
    }
    // Tensors without row ids (rank 1), unknown names, a file's name: no rows directory.
    for none in [
        "b.rows",
        "nothing.rows",
        "layer1/W.txt.rows",
        "layer1/W.rows.rows",
    ] {
        assert!(
            matches!(t.resolve(none.as_bytes()), Err(FsError::NotFound)),
            "{none}"
        );
    }
    // Nothing listed changed.
    assert_eq!(all_paths(&t), before);
}

#[test]
fn a_handle_reads_what_it_opened_until_released() {
    use modelfs_layout::Patient;
    let t = tree();
    let bin = t.resolve(b"b.bin").unwrap();
    let (a, b) = (
        t.open(bin, false, &Patient).unwrap(),
        t.open(bin, false, &Patient).unwrap(),
    );
    assert!(a.fh != 0 && b.fh != 0 && a.fh != b.fh);
    assert_eq!((a.size, t.open_files()), (Some(12), 2));
    let want: Vec<u8> = [0.25f32, 0.5, 0.75]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    // One read path: the size bounds every read; a read at the end is empty.
    assert_eq!(t.read(a.fh, 4, 100, &Patient).unwrap(), want[4..]);
    assert!(t.read(a.fh, 12, 4, &Patient).unwrap().is_empty());
    // The kernel forgets the name; the open file still reads.
    t.forget(bin, u64::MAX);
    assert_eq!(t.read(b.fh, 0, 12, &Patient).unwrap(), want);
    t.release(a.fh);
    assert_eq!(
        t.read(a.fh, 0, 4, &Patient).unwrap_err().errno(),
        libc::EBADF
    );
    t.release(a.fh);
    t.release(b.fh);
    assert_eq!(t.open_files(), 0);
}

#[test]
fn a_read_fault_is_logged_and_recorded_for_the_json() {
    let t = tree();
    let bad_bin = t.resolve(b"bad.bin").unwrap();
    let mut buf = [0u8; 8];
    assert_eq!(
        t.read_ino(bad_bin, 0, &mut buf).unwrap_err().errno(),
        libc::EIO
    );
    let json = String::from_utf8(read_all(&t, "bad.json")).unwrap();
    assert!(json.contains("\"last_error\""), "{json}");
    assert!(json.contains("bad.bin: read at 0"), "{json}");
}
