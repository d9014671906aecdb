//! `.tf/model.data-00000-of-00001` of a source whose tensors all lie in one local file, as
//! stored, is that file byte for byte, and an open of it names the file for the kernel to
//! read itself (FUSE passthrough) once every checksum is checked; any other source keeps the
//! view's own data file, read through the daemon.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::tree::OpenMode;
use super::{layout_ctx, FsError, Tree, TreeConfig};
use crate::options::Options;
use modelfs_io::source::ReadExt;
use modelfs_layout::Patient;
use modelfs_tf::bundle::testutil::BundleBuilder;

const DATA: &str = ".tf/model.data-00000-of-00001";
const SHARD: &str = "../safetensors/sharded/model-00001-of-00002.safetensors";

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/tf")
        .join(name)
}

fn tree_of(source: &Path) -> Tree {
    let o = Options {
        cache_dir: None,
        ..Default::default()
    };
    let name = source.to_string_lossy();
    let model = modelfs_detect::model_at(source, &o.reader_for(&name)).unwrap();
    let cfg = TreeConfig::for_user(None, None, SystemTime::UNIX_EPOCH);
    Tree::new(model, layout_ctx(&o, &name), cfg)
}

fn read_all(tree: &Tree, path: &str) -> Result<Vec<u8>, FsError> {
    let ino = tree.resolve(path.as_bytes())?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = tree.read_ino(ino, out.len() as u64, &mut buf)?;
        if n == 0 {
            return Ok(out);
        }
        out.extend_from_slice(&buf[..n]);
    }
}

/// How `path` opens, and the name of the file it is passed to.
fn opens(tree: &Tree, path: &str) -> (OpenMode, Option<String>) {
    let ino = tree.resolve(path.as_bytes()).unwrap();
    let o = tree.open(ino, false, &Patient).unwrap();
    tree.release(o.fh);
    (o.mode, o.backing.map(|b| b.name().to_string()))
}

#[test]
fn a_checkpoint_of_one_data_file_is_passed_through_as_that_file() {
    // Written by TensorFlow: a TF2 object graph (a string tensor) and floats; strings.
    for (name, data) in [
        ("object_tf2", "object_tf2/obj.data-00000-of-00001"),
        ("strings", "strings/ckpt.data-00000-of-00001"),
        (
            "adam_keras3/train/ckpt-1",
            "adam_keras3/train/ckpt-1.data-00000-of-00001",
        ),
        // Other writers' single files: numpy's, a shard written by `safetensors`, a
        // `torch.save` of a model and its optimizer.
        ("../numpy/dt_f4.npy", "../numpy/dt_f4.npy"),
        (SHARD, SHARD),
        ("../torch/checkpoint.pt", "../torch/checkpoint.pt"),
        // gguf-py's file of plain types (an unquantized conversion).
        ("../gguf/plain.gguf", "../gguf/plain.gguf"),
    ] {
        let source = fixture(data);
        let tree = tree_of(&fixture(name));
        let want = std::fs::read(&source).unwrap();
        assert!(!want.is_empty());
        // Read through the daemon, it is the source's data file itself.
        let got = read_all(&tree, DATA).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(got == want, "{name}");
        // Opened where the kernel can pass it through, it names that file.
        assert_eq!(opens(&tree, DATA).0, OpenMode::Cached, "{name}");
        tree.allow_passthrough();
        let (mode, backing) = opens(&tree, DATA);
        assert_eq!(mode, OpenMode::Passed, "{name}");
        assert_eq!(
            backing.as_deref(),
            Some(&*source.to_string_lossy()),
            "{name}"
        );
        // Small files are never passed: the index is the view's own.
        assert_eq!(
            opens(&tree, ".tf/model.index").0,
            OpenMode::Cached,
            "{name}"
        );
    }
}

#[test]
fn other_sources_keep_the_views_own_data_file() {
    // Three data files; partitioned variables written whole; bools normalised by the view;
    // big-endian and Fortran-order arrays among numpy's; two safetensors shards; torch's
    // views; GGUF's quantized tensors.
    for (name, data) in [
        ("multi_shard", "multi_shard/ckpt.data-00000-of-00003"),
        ("partitioned", "partitioned/ckpt.data-00000-of-00001"),
        ("dtypes", "dtypes/ckpt.data-00000-of-00001"),
        ("../numpy/arrays.npz", "../numpy/arrays.npz"),
        ("../safetensors/sharded", SHARD),
        // Transposed, sliced and shared storages; bools.
        ("../torch/views.pt", "../torch/views.pt"),
        ("../torch/dtypes.pt", "../torch/dtypes.pt"),
        // Quantized tensors, dequantized by the view.
        ("../gguf/model.gguf", "../gguf/model.gguf"),
    ] {
        let tree = tree_of(&fixture(name));
        tree.allow_passthrough();
        assert_eq!(opens(&tree, DATA).0, OpenMode::Cached, "{name}");
        let got = read_all(&tree, DATA).unwrap();
        assert!(got != std::fs::read(fixture(data)).unwrap(), "{name}");
    }
}

#[test]
fn a_tensor_failing_its_checksum_keeps_the_file_in_the_daemons_hands() {
    let tmp = tempfile::tempdir().unwrap();
    let mut b = BundleBuilder::new("ckpt");
    b.add_f32(b"small", &[4], &[1.0, 2.0, 3.0, 4.0]);
    let big: Vec<f32> = (0..50_000).map(|i| i as f32 * 0.5).collect();
    b.add_f32(b"w", &[500, 100], &big);
    b.write_to_dir(tmp.path()).unwrap();
    let data = tmp.path().join("ckpt.data-00000-of-00001");
    let good = std::fs::read(&data).unwrap();
    let tree = tree_of(tmp.path());
    tree.allow_passthrough();
    assert_eq!(opens(&tree, DATA).0, OpenMode::Passed);
    // One byte of `w` (the last 200,000 bytes) flipped: a fresh mount checks on open.
    let mut bad = good.clone();
    let at = bad.len() - 1000;
    bad[at] ^= 0x40;
    std::fs::write(&data, &bad).unwrap();
    let tree = tree_of(tmp.path());
    tree.allow_passthrough();
    assert_eq!(opens(&tree, DATA).0, OpenMode::Cached);
    // Read through the daemon, a read of `w`'s bytes alone is refused, those before them
    // are served, and a read of both gets `w`'s as the file holds them (TensorFlow reads so,
    // a buffer at a time, and fails `w` by its CRC32C, as on the source).
    let ino = tree.resolve(DATA.as_bytes()).unwrap();
    let mut tail = vec![0u8; 500];
    let err = tree
        .read_ino(ino, (bad.len() - 1500) as u64, &mut tail)
        .unwrap_err();
    assert_eq!(err.errno(), libc::EIO, "{err}");
    let mut head = vec![0u8; 16];
    assert_eq!(tree.read_ino(ino, 0, &mut head).unwrap(), 16);
    assert!(head == good[..16]);
    let mut all = vec![0u8; bad.len()];
    assert_eq!(tree.read_ino(ino, 0, &mut all).unwrap(), bad.len());
    assert!(all == bad);
}

/// Rows by id through the tree, `cache_dir=none`: the table's key index is built once for
/// all lookups (the table is kept per mount), not once per row.
#[test]
fn a_tables_key_index_is_built_once_for_every_row() {
    let tree = tree_of(&fixture("hashtable/tf2/ckpt"));
    let want: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture("hashtable/expected.json")).unwrap())
            .unwrap();
    let rows = want["tf2/ckpt"]["m/table"]["rows"].as_object().unwrap();
    let before = modelfs_io::store::KEY_INDEX_BUILDS.with(|b| b.get());
    for k in rows.keys().take(50) {
        let got = read_all(&tree, &format!("m/table.rows/{k}.txt")).unwrap();
        assert!(!got.is_empty(), "{k}");
    }
    let built = modelfs_io::store::KEY_INDEX_BUILDS.with(|b| b.get()) - before;
    assert_eq!(built, 1, "key indexes built for 50 rows");

    // A Monolith table the same way (its own reader and key index).
    let tree = tree_of(&fixture("../monolith/ps_export"));
    let table = "MonolithHashTable_0a1b_0";
    let samples: serde_json::Value = serde_json::from_slice(
        &std::fs::read(fixture(&format!("../monolith/{table}.samples.json"))).unwrap(),
    )
    .unwrap();
    let ids: Vec<&String> = samples.as_object().unwrap().keys().take(50).collect();
    assert_eq!(ids.len(), 50);
    let row = |id: &str| read_all(&tree, &format!("hash_tables/{table}.rows/{id}.txt")).unwrap();
    // The first look at the directory opens each of its three tables in one pass that
    // builds its key index; rows after that build nothing.
    let before = modelfs_io::store::KEY_INDEX_BUILDS.with(|b| b.get());
    assert!(!row(ids[0]).is_empty());
    let first = modelfs_io::store::KEY_INDEX_BUILDS.with(|b| b.get()) - before;
    assert!(
        (1..=3).contains(&first),
        "{first} key indexes for the first row"
    );
    for id in &ids[1..] {
        assert!(!row(id).is_empty(), "{id}");
    }
    let built = modelfs_io::store::KEY_INDEX_BUILDS.with(|b| b.get()) - before;
    assert_eq!(built, first, "Monolith key indexes built again for 49 rows");
}
