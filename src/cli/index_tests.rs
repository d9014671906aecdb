//! The persistent chunk-index cache end to end: `index` fills it from real files, a fresh
//! tree (a remount) then knows every text size without rendering a chunk, and rewriting a
//! source file invalidates what was stored for it.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::index::index_tree;
use modelfs_core::fs::{layout_ctx, Tree, TreeConfig};
use modelfs_core::options::Options;
use modelfs_io::source::ReadCtx;
use modelfs_layout::LayoutCtx;
use modelfs_tf::bundle::testutil::BundleBuilder;

fn opts(cache: &Path, layouts: &str) -> Options {
    let mut o = Options::default();
    o.apply(&format!("layouts={layouts}")).unwrap();
    o.cache_dir = Some(cache.to_path_buf());
    o.threads = 2;
    o
}

/// A fresh mount of `source`: its tree and rendering context.
fn mount(source: &Path, o: &Options) -> (Tree, Arc<LayoutCtx>) {
    let name = source.to_string_lossy();
    let model = modelfs_detect::model_at(source, &o.reader_for(&name)).unwrap();
    let ctx = layout_ctx(o, &name);
    let cfg = TreeConfig::for_user(None, None, SystemTime::UNIX_EPOCH);
    (Tree::new(model, ctx.clone(), cfg), ctx)
}

/// The whole file, read to its end like any reader (its size may not be known yet).
fn read_all(tree: &Tree, path: &str) -> Vec<u8> {
    let ino = tree.resolve(path.as_bytes()).unwrap();
    let mut out = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = tree.read_ino(ino, out.len() as u64, &mut buf).unwrap();
        if n == 0 {
            return out;
        }
        out.extend_from_slice(&buf[..n]);
    }
}

fn size_of(tree: &Tree, path: &str) -> u64 {
    tree.getattr(tree.resolve(path.as_bytes()).unwrap())
        .unwrap()
        .size
}

/// Writes checkpoint `dir/ckpt` whose values depend on `seed`; returns the prefix.
fn write_checkpoint(dir: &Path, seed: f32) -> PathBuf {
    let mut b = BundleBuilder::new("ckpt");
    let big: Vec<f32> = (0..100_000).map(|i| i as f32 * 0.37 + seed).collect();
    b.add_f32(b"layer/W", &[400, 250], &big);
    b.add_f32(b"b", &[3], &[seed, 2.5, -1.0]);
    let full: Vec<f32> = (0..12).map(|i| i as f32 + seed).collect();
    b.add_partitioned_f32(
        b"P",
        &[4, 3],
        &full,
        &[vec![Some((0, 2)), None], vec![Some((2, 2)), None]],
    );
    b.write_to_dir(dir).unwrap()
}

/// Moves a file's mtime (a rewrite within one timestamp tick must still look changed).
fn bump_mtime(path: &Path) {
    let f = std::fs::File::options().write(true).open(path).unwrap();
    f.set_modified(SystemTime::now() + Duration::from_secs(7))
        .unwrap();
}

const TF_FILES: [&str; 5] = [
    "layer/W.txt",
    "layer/W.csv",
    "b.txt",
    "P.txt",
    "P.parts/1.csv",
];

#[test]
fn tf_second_mount_renders_nothing_and_rewrite_invalidates() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let prefix = write_checkpoint(dir.path(), 0.5);
    let o = opts(&cache, "json,txt,csv,npy");

    let (tree, ctx) = mount(&prefix, &o);
    let report = index_tree(&tree, 2, None).unwrap();
    assert_eq!(report.failed, 0);
    assert!(report.text_files >= 8, "{report:?}");
    assert!(ctx.cache.rendered_chunks() > 0);
    let before: Vec<Vec<u8>> = TF_FILES.iter().map(|p| read_all(&tree, p)).collect();

    // A remount: every size (and the .json sizes, which list them) from the store.
    let (tree2, ctx2) = mount(&prefix, &o);
    for (p, want) in TF_FILES.iter().zip(&before) {
        assert_eq!(size_of(&tree2, p), want.len() as u64, "{p}");
    }
    size_of(&tree2, "layer/W.json");
    assert_eq!(ctx2.cache.rendered_chunks(), 0);
    // Reads render only what they touch and give the same bytes.
    let ino = tree2.resolve(b"layer/W.txt").unwrap();
    let mut tail = [0u8; 20];
    let size = before[0].len() as u64;
    tree2.read_ino(ino, size - 20, &mut tail).unwrap();
    assert_eq!(&tail[..], &before[0][before[0].len() - 20..]);
    assert_eq!(ctx2.cache.rendered_chunks(), 1);
    for (p, want) in TF_FILES.iter().zip(&before) {
        assert_eq!(&read_all(&tree2, p), want, "{p}");
    }

    // Rewriting the checkpoint (other values, same file sizes) invalidates the stored indexes.
    let prefix = write_checkpoint(dir.path(), 1000.25);
    bump_mtime(&dir.path().join("ckpt.index"));
    bump_mtime(&dir.path().join("ckpt.data-00000-of-00001"));
    let (tree3, ctx3) = mount(&prefix, &o);
    let after = read_all(&tree3, "layer/W.txt");
    assert!(ctx3.cache.rendered_chunks() > 0);
    assert_ne!(after, before[0]);
    assert!(after.starts_with(b"1000.25\n"));
    assert_eq!(size_of(&tree3, "layer/W.txt"), after.len() as u64);

    // Only the data file changing (index untouched) also invalidates.
    let (tree4, _) = mount(&prefix, &o);
    let size4 = size_of(&tree4, "b.txt");
    let data = dir.path().join("ckpt.data-00000-of-00001");
    bump_mtime(&data);
    let o_nocrc = {
        let mut o = o.clone();
        o.apply("verify=none").unwrap();
        o
    };
    let (tree5, ctx5) = mount(&prefix, &o_nocrc);
    assert_eq!(size_of(&tree5, "b.txt"), size4);
    assert!(ctx5.cache.rendered_chunks() > 0);
}

#[test]
fn no_cache_dir_keeps_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = write_checkpoint(dir.path(), 0.5);
    let mut o = opts(&dir.path().join("cache"), "txt");
    o.apply("cache_dir=none").unwrap();
    let (tree, _) = mount(&prefix, &o);
    size_of(&tree, "layer/W.txt");
    let (tree2, ctx2) = mount(&prefix, &o);
    size_of(&tree2, "layer/W.txt");
    assert!(ctx2.cache.rendered_chunks() > 0);
    assert!(!dir.path().join("cache").exists());
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

#[test]
fn angel_second_mount_renders_nothing_and_rewrite_invalidates() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/angel/lr35/model");
    let dir = tempfile::tempdir().unwrap();
    let model_dir = dir.path().join("model");
    copy_dir(&src, &model_dir);
    let cache = dir.path().join("cache");
    let o = opts(&cache, "json,ColIdValueText,txt");
    let files = [
        "input_weight.ColIdValueText",
        "input_weight.parts/0.ColIdValueText",
        "input_weight.parts/1.ColIdValueText",
    ];

    let (tree, _) = mount(&model_dir, &o);
    let report = index_tree(&tree, 2, None).unwrap();
    assert_eq!(report.failed, 0, "{report:?}");
    let before: Vec<Vec<u8>> = files.iter().map(|p| read_all(&tree, p)).collect();

    let (tree2, ctx2) = mount(&model_dir, &o);
    for (p, want) in files.iter().zip(&before) {
        assert_eq!(size_of(&tree2, p), want.len() as u64, "{p}");
    }
    assert_eq!(ctx2.cache.rendered_chunks(), 0);
    for (p, want) in files.iter().zip(&before) {
        assert_eq!(&read_all(&tree2, p), want, "{p}");
    }

    // Change one stored value in place (same length) in data file 0.
    let data = model_dir.join("input_weight/0");
    let text = std::fs::read(&data).unwrap();
    assert!(text.starts_with(b"0,-1.517921\n"));
    let mut changed = text.clone();
    changed[3] = b'2';
    std::fs::write(&data, &changed).unwrap();
    bump_mtime(&data);
    let (tree3, ctx3) = mount(&model_dir, &o);
    let after = read_all(&tree3, "input_weight.parts/0.ColIdValueText");
    assert!(ctx3.cache.rendered_chunks() > 0);
    assert_ne!(after, before[1]);
}

/// A large tensor's checksum verdict persists with the identity of its files: a remount of the
/// same bytes does not re-verify, a rewritten data file is verified again (and fails here).
#[test]
fn large_tensor_checksum_verdict_persists_until_the_file_changes() {
    use modelfs_io::store::{Store, Verified};
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let n = (modelfs_tf::bundle::tensor::PERSIST_VERDICT_MIN / 4) as usize;
    let mut b = BundleBuilder::new("ckpt");
    let vals: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
    b.add_f32(b"big", &[n as u64], &vals);
    let prefix = b.write_to_dir(dir.path()).unwrap();
    let data = dir.path().join("ckpt.data-00000-of-00001");
    let o = opts(&cache, "json,bin");
    let name = prefix.to_string_lossy();
    let model = modelfs_detect::model_at(&prefix, &o.reader_for(&name)).unwrap();
    let t = model.tensor(&[b"big".to_vec()]).unwrap();
    let key = format!("crc32c {}", t.cache_identity().unwrap());
    let store: Arc<dyn Store> = o.store(&name).unwrap();
    assert!(store.get::<Verified>(&key).is_none());
    let mut four = [0u8; 4];
    t.read_elements(ReadCtx::none(), 1, &mut four).unwrap();
    assert_eq!(f32::from_le_bytes(four), 1.0);
    assert!(store.get::<Verified>(&key).is_some(), "verdict not stored");

    // Corrupt one value in place: a new identity, verified again, and the read fails.
    let mut bytes = std::fs::read(&data).unwrap();
    bytes[4] ^= 0x40;
    std::fs::write(&data, &bytes).unwrap();
    bump_mtime(&data);
    let model = modelfs_detect::model_at(&prefix, &o.reader_for(&name)).unwrap();
    let t = model.tensor(&[b"big".to_vec()]).unwrap();
    assert!(t.read_elements(ReadCtx::none(), 1, &mut four).is_err());
}

/// `modelfs index` builds every listed hash table's key index into the cache directory; a
/// later run finds it there and builds nothing.
#[test]
fn index_builds_the_key_index_of_every_hash_table() {
    // The listed tables: a Monolith export's three (TF's own are found by name, not listed).
    let source = modelfs_model::testing::fixtures_dir().join("monolith/ps_export");
    let cache = tempfile::tempdir().unwrap();
    let o = opts(cache.path(), "json");
    let keys = || {
        let mut k: Vec<_> = std::fs::read_dir(cache.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "keys"))
            .map(|p| {
                (
                    p.clone(),
                    std::fs::metadata(&p).unwrap().modified().unwrap(),
                )
            })
            .collect();
        k.sort();
        k
    };
    super::index::index(&source, &o).unwrap();
    let first = keys();
    assert_eq!(first.len(), 3, "{first:?}");
    // A second run finds them built: not one is written again.
    super::index::index(&source, &o).unwrap();
    assert_eq!(keys(), first);
}
