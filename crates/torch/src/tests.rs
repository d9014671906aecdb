//! Against the archives real `torch.save` wrote (scripts/gen_torch.py) and what
//! `torch.load(weights_only=True)` reads back from them (fixtures/torch/expected.json).

use std::io::Write;

use super::*;
use crate::model::expect::{expected, hex, shape};
use crate::model::{own_component, DirEntry, Tensor};
use crate::source::{MemSource, ReadCtx, ReadExt};
use crate::testing::fixtures_dir;

fn dir() -> PathBuf {
    fixtures_dir().join("torch")
}

fn opened(path: &Path) -> Arc<dyn Model> {
    let m = open_path(path, &ReaderOptions::default()).unwrap();
    m.expect("a PyTorch source")
}

use crate::model::key_path as key;

/// Every tensor of `file` reads back as torch reads it; returns how many were compared.
fn check(model: &dyn Model, file: &str) -> usize {
    let exp = expected("torch");
    let want_all = exp[file]["tensors"].as_object().unwrap();
    assert!(!want_all.is_empty(), "{file}");
    let mut checked = 0;
    for (k, want) in want_all {
        let t = model
            .tensor(&key(k))
            .unwrap_or_else(|e| panic!("{file}: {k}: {e}"));
        let m = t.meta();
        let undecoded = ["complex32", "float8_e8m0fnu"].contains(&want["dtype"].as_str().unwrap());
        if want.get("problem").is_some() || undecoded {
            // Not decoded (a dtype, a quantized tensor): a note, never a problem.
            assert_eq!(m.problem, None, "{file}: {k}");
            assert!(m.note.is_some(), "{file}: {k}");
            assert!(
                t.read_elements(ReadCtx::none(), 0, &mut [0u8; 1]).is_err()
                    || m.num_elements() == Some(0)
            );
            continue;
        }
        assert_eq!(m.problem, None, "{file}: {k}");
        let shape = shape(&want["shape"]);
        assert_eq!(m.shape, shape, "{file}: {k}");
        assert_eq!(
            m.dtype.name(),
            want["dtype"].as_str().unwrap(),
            "{file}: {k}"
        );
        let n = m.num_elements().unwrap() as usize;
        let w = m.dtype.elem_size().unwrap();
        let mut buf = vec![0u8; n * w];
        t.read_elements(ReadCtx::none(), 0, &mut buf).unwrap();
        assert_eq!(hex(&buf), want["hex"].as_str().unwrap(), "{file}: {k}");
        assert_eq!(
            hex(&t.read(ReadCtx::none(), 0, buf.len()).unwrap()),
            hex(&buf),
            "{file}: {k} lent"
        );
        // From the middle too: a strided view's runs start anywhere.
        if n > 2 {
            let mut part = vec![0u8; (n - 2) * w];
            t.read_elements(ReadCtx::none(), 1, &mut part).unwrap();
            assert_eq!(part, buf[w..(n - 1) * w], "{file}: {k} from element 1");
        }
        checked += 1;
    }
    checked
}

fn values(model: &dyn Model, dir: &str) -> serde_json::Value {
    let mut path = if dir.is_empty() { Vec::new() } else { key(dir) };
    path.push(own_component(VALUES));
    let d = model.document(&path).unwrap();
    let mut out = Vec::new();
    d.render(0, &mut out).unwrap();
    serde_json::from_slice(&out).unwrap()
}

#[test]
fn every_dtype_reads_as_torch_reads_it() {
    let m = opened(&dir().join("dtypes.pt"));
    // 21 dtypes and a quantized tensor; complex32, float8_e8m0fnu and qint8 are not decoded.
    assert_eq!(check(&*m, "dtypes.pt"), 19);
    let s = m.summary().unwrap();
    assert_eq!(s.tensors, 22);
    assert_eq!(s.format, "pytorch");
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    assert_eq!(s.notes.len(), 3, "{:?}", s.notes);
}

#[test]
fn views_and_shared_storages_read_as_torch_shows_them() {
    let m = opened(&dir().join("views.pt"));
    assert_eq!(check(&*m, "views.pt"), 9);
    // The transpose and the base are one storage.
    let base = m.tensor(&key("base")).unwrap();
    let t = m.tensor(&key("transposed")).unwrap();
    assert_eq!(base.meta().extra["storage"], t.meta().extra["storage"]);
    assert_eq!(t.meta().extra["stride"], serde_json::json!([1, 6]));
}

#[test]
fn a_checkpoint_nests_its_dicts_and_keeps_its_values() {
    let m = opened(&dir().join("checkpoint.pt"));
    assert_eq!(check(&*m, "checkpoint.pt"), 18);
    let exp = expected("torch");
    for (d, want) in exp["checkpoint.pt"]["values"].as_object().unwrap() {
        assert_eq!(&values(&*m, d)["values"], want, "{d}");
    }
    let root = m.list_dir(&[]).unwrap();
    assert!(root.contains(&DirEntry::Dir(b"model".to_vec())), "{root:?}");
    assert!(
        root.contains(&DirEntry::Document(VALUES.to_vec())),
        "{root:?}"
    );
    assert!(m.summary().unwrap().problems.is_empty());
}

#[test]
fn a_bare_tensor_is_named_by_its_file() {
    let m = opened(&dir().join("tensor.pt"));
    assert_eq!(check(&*m, "tensor.pt"), 1);
}

#[test]
fn shards_are_one_tree() {
    for path in [
        dir().join("sharded"),
        dir().join("sharded/pytorch_model.bin.index.json"),
    ] {
        let m = opened(&path);
        let n = check(&*m, "sharded/pytorch_model-00001-of-00002.bin")
            + check(&*m, "sharded/pytorch_model-00002-of-00002.bin");
        assert_eq!(n, 4);
    }
}

/// A pickle that would run `os.system` or `eval` is read, not run: the call is its entry's
/// problem (dangerous: a verdict fails), the file's tensor reads, and the command's file
/// never appears.
#[test]
fn hostile_pickles_run_nothing() {
    let exp = expected("torch");
    let marker = Path::new(exp["_marker"].as_str().unwrap());
    let _ = std::fs::remove_file(marker);
    for (f, callee) in [("hostile_system.pt", "system"), ("hostile_eval.pt", "eval")] {
        let m = opened(&dir().join(f));
        assert_eq!(check(&*m, f), 1);
        let v = values(&*m, "");
        let why = v["problems"]["x"].as_str().unwrap();
        assert!(why.contains(callee) && why.contains("not run"), "{why}");
        assert!(why.contains("dangerous"), "{why}");
        assert!(v["values"].get("x").is_none());
        let s = m.summary().unwrap();
        assert!(
            s.problems.iter().any(|p| p.contains("dangerous")),
            "{:?}",
            s.problems
        );
        // Named once: the entry's problem stands for the import.
        assert_eq!(s.problems.len(), 1, "{:?}", s.problems);
    }
    assert!(!marker.exists(), "a hostile pickle ran");
}

/// Rewrites `views.pt` as a big-endian machine writes it: `byteorder` says so and every
/// storage's elements are swapped. It must read exactly as the little-endian original.
#[test]
fn a_big_endian_archive_reads_as_the_little_endian_one() {
    let src = std::fs::read(dir().join("views.pt")).unwrap();
    let mut zin = zip::ZipArchive::new(std::io::Cursor::new(&src)).unwrap();
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    let opts =
        zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
    let orig = opened(&dir().join("views.pt"));
    for i in 0..zin.len() {
        let mut f = zin.by_index(i).unwrap();
        let name = f.name().to_string();
        let mut b = Vec::new();
        f.read_to_end(&mut b).unwrap();
        if name.ends_with("/byteorder") {
            b = b"big".to_vec();
        } else if let Some(k) = name.split("/data/").nth(1) {
            // The element width of storage k: that of a tensor over it.
            let width = ["base", "broadcast", "permuted"]
                .iter()
                .map(|t| orig.tensor(&key(t)).unwrap())
                .find(|t| t.meta().extra["storage"] == k)
                .map(|t| t.meta().dtype.elem_size().unwrap())
                .unwrap();
            b.chunks_exact_mut(width).for_each(<[u8]>::reverse);
        }
        w.start_file(name, opts).unwrap();
        w.write_all(&b).unwrap();
    }
    let bytes = w.finish().unwrap().into_inner();
    let file: Arc<dyn ReadAt> = Arc::new(MemSource::new("big.pt", bytes));
    let mut m = Flat::new("pytorch");
    archive(&file, "big", true, None, &mut m).unwrap();
    assert_eq!(check(&m, "views.pt"), 9);
}

#[test]
fn damaged_archives_never_panic() {
    for f in ["checkpoint.pt", "views.pt", "dtypes.pt"] {
        let bytes = std::fs::read(dir().join(f)).unwrap();
        crate::testing::for_each_damaged(&bytes, 97, 13, fuzz_file);
    }
}

/// A tensor whose view reaches past its storage, and one whose storage is missing, are
/// listed with their problems.
#[test]
fn views_past_their_storage_are_problems() {
    let spec = |storage: &str, shape: Vec<u64>, stride: Vec<u64>| walk::TensorSpec {
        storage: storage.into(),
        dtype: crate::model::DType::F32,
        torch_dtype: "float32".into(),
        shape,
        stride,
        offset: 1,
        problem: None,
        note: None,
    };
    let file: Arc<dyn ReadAt> = Arc::new(MemSource::new("f.pt", vec![0; 64]));
    let st = Arc::new(Storage::zip("0".into(), 0, 16, None));
    let ok = TorchTensor::new("a", &spec("0", vec![3], vec![1]), Some(&st), false, &file);
    assert_eq!(ok.meta().problem, None);
    let past = TorchTensor::new(
        "b",
        &spec("0", vec![2, 2], vec![2, 1]),
        Some(&st),
        false,
        &file,
    );
    assert!(past.meta().problem.as_deref().unwrap().contains("reaches"));
    let none = TorchTensor::new("c", &spec("9", vec![1], vec![1]), None, false, &file);
    assert!(none
        .meta()
        .problem
        .as_deref()
        .unwrap()
        .contains("not in the archive"));
}

#[test]
fn detection() {
    let fs = crate::source::local();
    assert!(files_of(&*fs, &dir().join("views.pt")).unwrap().is_some());
    assert!(files_of(&*fs, &fixtures_dir().join("numpy/arrays.npz"))
        .unwrap()
        .is_none());
    assert!(
        files_of(&*fs, &fixtures_dir().join("safetensors/dtypes.safetensors"))
            .unwrap()
            .is_none()
    );
    assert_eq!(
        files_of(&*fs, &dir().join("sharded"))
            .unwrap()
            .unwrap()
            .len(),
        2
    );
}

/// A large storage's CRC-32 verdict outlives the mount (`cache_dir`): the next open of the same
/// file (by identity) does not read it again.
#[test]
fn a_large_storages_verdict_is_remembered() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("big.pt");
    let data = vec![7u8; 64 << 20];
    {
        let mut w = zip::ZipWriter::new(std::fs::File::create(&path).unwrap());
        let opts = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored)
            .large_file(true);
        w.start_file("big/data/0", opts).unwrap();
        w.write_all(&data).unwrap();
        w.finish().unwrap();
    }
    let file = crate::source::local().open(&path).unwrap();
    let e = zipdir::entries(file.size(), |at, buf| read_meta(&*file, at, buf)).unwrap();
    let store: Arc<dyn crate::store::Store> = Arc::new(crate::store::MemStore::default());
    let s = Storage::zip(
        "0".into(),
        e[0].header_offset,
        data.len() as u64,
        Some(e[0].crc32),
    )
    .remembered_in(Some(store.clone()));
    s.verify(&*file).unwrap();
    // A storage object of the same member whose header it could not even find: the verdict
    // comes from the store, before any byte is read.
    let again = Storage::zip("0".into(), 1, data.len() as u64, Some(e[0].crc32))
        .remembered_in(Some(store.clone()));
    again.verify(&*file).unwrap();
    let fresh = Storage::zip("0".into(), 1, data.len() as u64, Some(e[0].crc32))
        .remembered_in(Some(Arc::new(crate::store::MemStore::default())));
    assert!(fresh.verify(&*file).is_err());
}

/// The scanners' list: what reaches the system or runs code is dangerous, torch's own
/// rebuild calls and the classes of a training script are not.
#[test]
fn dangerous_is_what_a_scanner_flags() {
    for (m, n) in [
        ("os", "system"),
        ("posix", "system"),
        ("subprocess", "Popen"),
        ("builtins", "eval"),
        ("__builtin__", "exec"),
        ("builtins", "getattr"),
        ("builtins", "__import__"),
        ("operator", "attrgetter"),
        ("runpy", "run_path"),
        ("os.path", "join"),
    ] {
        assert!(walk::dangerous(m, n), "{m}.{n}");
    }
    for (m, n) in [
        ("torch._utils", "_rebuild_tensor_v2"),
        ("collections", "OrderedDict"),
        ("builtins", "set"),
        ("__builtin__", "long"),
        ("torch.jit._pickle", "build_intlist"),
        ("omegaconf.listconfig", "ListConfig"),
        ("numpy.core.multiarray", "scalar"),
        ("__torch__.torch.nn.modules.conv", "Conv2d"),
    ] {
        assert!(!walk::dangerous(m, n), "{m}.{n}");
    }
}

/// A dangerous import no value uses (popped, as a hand-made pickle can) is still the
/// file's problem: a scanner reads the opcodes, not the result.
#[test]
fn an_unused_dangerous_import_is_a_problem() {
    // PROTO 2, GLOBAL os.system, POP, {'a': 1}, STOP.
    let p = pickle::load(b"\x80\x02cos\nsystem\n0}X\x01\x00\x00\x00aK\x01s.").unwrap();
    let found = walk::walk(&p, "t");
    assert_eq!(found.dangerous.len(), 1, "{:?}", found.dangerous);
    assert!(
        found.dangerous[0].contains("os.system"),
        "{:?}",
        found.dangerous
    );
    // Without it, nothing.
    let p = pickle::load(b"\x80\x02}X\x01\x00\x00\x00aK\x01s.").unwrap();
    assert!(walk::walk(&p, "t").dangerous.is_empty());
}
