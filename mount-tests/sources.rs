//! Sources of the readers beside TF and Angel, mounted and compared with their writers' own
//! reading of them (issue 41): safetensors files and a sharded safetensors model; numpy's
//! `.npy` and `.npz`; PyTorch checkpoints, and pickles that would run code; GGUF files.

use std::path::Path;
use std::process::Command;

use crate::support::Fuse;

/// Whether python3 imports `modules` (a comma-separated `import` list); in CI it must.
fn have_python(modules: &str) -> bool {
    let have = Command::new("python3")
        .args(["-c", &format!("import {modules}")])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        have || (std::env::var_os("CI").is_none()
            && std::env::var_os("MODELFS_REQUIRE_FUSE").is_none()),
        "python3 with {modules} is needed (scripts/test installs them)"
    );
    have
}

fn have_safetensors() -> bool {
    have_python("numpy, safetensors")
}

#[test]
fn safetensors_sources_read_as_the_writer_reads_them() {
    let Some(fuse) = Fuse::check() else { return };
    if !have_safetensors() {
        eprintln!("skipped: python3 numpy/safetensors missing");
        return;
    }
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = here.join("fixtures/safetensors");
    let sharded = [
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    ]
    .map(|f| dir.join("sharded").join(f));
    let cases = [
        (
            dir.join("dtypes.safetensors"),
            vec![dir.join("dtypes.safetensors")],
            20,
        ),
        (dir.join("sharded"), sharded.to_vec(), 4),
        (
            dir.join("sharded/model.safetensors.index.json"),
            sharded.to_vec(),
            4,
        ),
    ];
    for (source, files, n) in cases {
        let m = fuse.mount(&source, "layouts=json,npy,bin");
        let out = Command::new("python3")
            .arg(here.join("mount-tests/check_sources.py"))
            .arg(m.path())
            .args(&files)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}: {text}{}",
            source.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.contains(&format!("checked {n} tensors")),
            "{}: {text}",
            source.display()
        );
        let meta = std::fs::read_to_string(m.path().join("__metadata__.json")).unwrap();
        assert!(meta.contains("\"format\": \"pt\""), "{meta}");
        m.unmount_and_check();
    }
}

/// argv: mountpoint, source. Every array numpy reads from the source (`np.load`, each key of
/// an `.npz`) equals `np.load` of its `.npy` through the mount (also `mmap_mode='r'`), in C
/// order (a deflated Fortran-order member too); an object array has a `.json` naming its
/// problem, and reading its `.npy` fails.
const NUMPY_SOURCE_CHECK: &str = r#"
import json, os, sys, zipfile
import numpy as np
mnt, src = sys.argv[1], sys.argv[2]
bad, n = [], 0
if src.endswith(".npz"):
    z = zipfile.ZipFile(src)
    loaded = np.load(src)
    # Read: every member but object arrays.
    arrays = {i.filename[:-4]: loaded[i.filename[:-4]].dtype != object for i in z.infolist()}
else:
    key = os.path.basename(src)[:-4]
    arrays = {key: True}
    loaded = None
for key, stored in arrays.items():
    meta = json.load(open(os.path.join(mnt, key + ".json")))
    npy = os.path.join(mnt, key + ".npy")
    if not stored or (loaded is None and np.load(src, allow_pickle=True).dtype == object):
        # Listed with its problem; its data files fail (EIO), never give bytes.
        if "problem" not in meta:
            bad.append(f"{key}: no problem in its .json")
        if os.path.exists(npy):
            try:
                open(npy, "rb").read()
                bad.append(f"{key}: .npy read without an error")
            except OSError:
                pass
        continue
    want = loaded[key] if loaded is not None else np.load(src)
    for got in (np.load(npy), np.load(npy, mmap_mode="r")):
        if got.dtype != want.dtype.newbyteorder("<") and got.dtype != want.dtype:
            bad.append(f"{key}: dtype {got.dtype} != {want.dtype}")
        if got.shape != want.shape or not np.array_equal(np.asarray(got), want, equal_nan=want.dtype.kind in "fc"):
            bad.append(f"{key}: values differ")
    n += 1
print(f"checked {n} arrays")
if bad:
    print("\n".join(bad)); sys.exit(1)
"#;

#[test]
fn numpy_sources_read_as_numpy_reads_them() {
    let Some(fuse) = Fuse::check() else { return };
    if !have_safetensors() {
        eprintln!("skipped: python3 numpy missing");
        return;
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/numpy");
    let cases = [
        ("arrays.npz", 18),
        ("compressed.npz", 2),
        ("dt_f4.npy", 1),
        ("dt_b1.npy", 1),
        ("big_endian_f8.npy", 1),
        ("fortran_i4.npy", 1),
        ("object.npy", 0),
    ];
    // Files of other projects: scipy's Fortran-order deflated members, ndarray-npy's big-endian
    // Fortran complex (Python 2's object arrays: `numpy::real_tests`, numpy cannot load them).
    let real = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/real/numpy");
    let cases = cases.into_iter().map(|(n, c)| (dir.join(n), c)).chain([
        (real.join("scipy-1.17.1_linalg_carex_20_data.npz"), 4),
        (
            real.join("ndarray-npy-e147be4_example_c64_big_endian_fortran.npy"),
            1,
        ),
    ]);
    for (source, n) in cases {
        let name = source.file_name().unwrap().to_string_lossy().into_owned();
        let m = fuse.mount(&source, "layouts=json,npy");
        let out = Command::new("python3")
            .args(["-c", NUMPY_SOURCE_CHECK])
            .arg(m.path())
            .arg(&source)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{name}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.contains(&format!("checked {n} arrays")),
            "{name}: {text}"
        );
        m.unmount_and_check();
    }
}

/// Every PyTorch fixture mounted: each tensor, in each layout, is what `torch.load` read
/// (`check_torch.py`, against `fixtures/torch/expected.json`: no torch needed).
#[test]
fn pytorch_sources_read_as_torch_reads_them() {
    let Some(fuse) = Fuse::check() else { return };
    if !have_safetensors() {
        eprintln!("skipped: python3 numpy/safetensors missing");
        return;
    }
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = here.join("fixtures/torch");
    let shards = [
        "sharded/pytorch_model-00001-of-00002.bin",
        "sharded/pytorch_model-00002-of-00002.bin",
    ];
    let cases: [(&str, Vec<&str>, usize); 6] = [
        ("dtypes.pt", vec!["dtypes.pt"], 19),
        ("views.pt", vec!["views.pt"], 9),
        ("checkpoint.pt", vec!["checkpoint.pt"], 18),
        ("tensor.pt", vec!["tensor.pt"], 1),
        ("sharded", shards.to_vec(), 4),
        ("sharded/pytorch_model.bin.index.json", shards.to_vec(), 4),
    ];
    for (source, keys, n) in cases {
        let m = fuse.mount(&dir.join(source), "layouts=json,npy,bin");
        let out = Command::new("python3")
            .arg(here.join("mount-tests/check_torch.py"))
            .arg(m.path())
            .arg(dir.join("expected.json"))
            .args(&keys)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{source}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.contains(&format!("checked {n} tensors")),
            "{source}: {text}"
        );
        m.unmount_and_check();
    }
    // Every other form torch writes (scripts/gen_torch_more.py), and files of other projects.
    let more = here.join("fixtures/torch/more");
    let cases = [
        ("legacy.pt", 19),
        ("legacy_ckpt.pt", 16),
        ("module.pt", 8),
        ("module_legacy.pt", 8),
        ("module_ckpt.pt", 13),
        ("scripted.pt", 8),
        ("float8.pt", 5),
    ];
    for (source, n) in cases {
        let m = fuse.mount(&more.join(source), "layouts=json,npy,bin");
        let out = Command::new("python3")
            .arg(here.join("mount-tests/check_torch.py"))
            .arg(m.path())
            .arg(more.join("expected.json"))
            .arg(source)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains(&format!("checked {n} tensors")),
            "{source}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        m.unmount_and_check();
    }
}

/// Pickles that would run `os.system` or `eval`: mounted, every file read, and the file the
/// command would create never appears; the call is the entry's problem in `__values__.json`
/// (dangerous: `verify` fails).
#[test]
fn hostile_pickles_run_nothing_when_mounted() {
    let Some(fuse) = Fuse::check() else { return };
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/torch");
    let exp: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json")).unwrap()).unwrap();
    let marker = Path::new(exp["_marker"].as_str().unwrap());
    let _ = std::fs::remove_file(marker);
    for f in ["hostile_system.pt", "hostile_eval.pt"] {
        let m = fuse.mount(&dir.join(f), "");
        let mut read = 0;
        for e in std::fs::read_dir(m.path()).unwrap() {
            let p = e.unwrap().path();
            if p.is_file() {
                std::fs::read(&p).unwrap();
                read += 1;
            }
        }
        assert!(read >= 4, "{f}: {read} files");
        let doc = std::fs::read_to_string(m.path().join("__values__.json")).unwrap();
        assert!(doc.contains("not run"), "{f}: {doc}");
        m.unmount_and_check();
    }
    assert!(!marker.exists(), "a hostile pickle ran");
}

/// argv: mountpoint, expected.json. Every GGUF tensor's `.bin` is its bytes as stored, its
/// `.npy` what gguf-py's reader and `dequantize` give (bfloat16 widened to float32 as `.npy`
/// shows it), a type not decoded has no `.npy` and its `.json` names it as ggml does, and
/// `__metadata__.json` holds the writer's metadata.
const GGUF_CHECK: &str = r#"
import hashlib, json, os, sys
import numpy as np
mnt, exp = sys.argv[1], json.load(open(sys.argv[2]))[sys.argv[3]]
K_QUANTS = {"Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K"}
bad, n = [], 0
for name, t in exp["tensors"].items():
    base = os.path.join(mnt, name)
    if "sha256" in t:
        # fixtures/real/gguf/expected.json: digests of what gguf-py gives (values of a
        # quantized type as float32, a plain type's stored elements).
        meta = json.load(open(base + ".json"))
        plain = t["type"] in ("F32", "F16", "BF16", "F64", "I8", "I16", "I32", "I64")
        data = open(base + ".bin", "rb").read() if plain else np.load(base + ".npy").astype("<f4").tobytes()
        if meta["ggml_type"] != t["type"] or hashlib.sha256(data).hexdigest() != t["sha256"]:
            bad.append(f"{name}: {meta['ggml_type']} differs from gguf-py's")
        n += 1
        continue
    if open(base + ".bin", "rb").read().hex() != t["raw"]:
        bad.append(f"{name}: .bin differs")
    meta = json.load(open(base + ".json"))
    if meta["ggml_type"] != t["type"] or meta["shape"] != t["shape"]:
        bad.append(f"{name}: .json {meta['ggml_type']} {meta['shape']}")
    npy = os.path.exists(base + ".npy")
    if t["type"] in K_QUANTS and not npy:
        bad.append(f"{name}: a K-quant without its .npy")
    if "values" not in t or not npy:
        # Not decoded here (or no truth to check against: the K-quants of model.gguf, written
        # when gguf-py could not decode them): named as ggml names it.
        if not npy and meta["dtype"] != t["type"].lower():
            bad.append(f"{name}: dtype {meta['dtype']} for ggml's {t['type']}")
        continue
    got = np.load(base + ".npy")
    data = bytes.fromhex(t["values"])
    if t["dtype"] == "bfloat16":
        want = (np.frombuffer(data, "<u2").astype("<u4") << 16).view("<f4")
    else:
        want = np.frombuffer(data, "<" + {"float32": "f4", "float16": "f2", "float64": "f8", "int8": "i1",
                                          "int16": "i2", "int32": "i4", "int64": "i8"}[t["dtype"]])
    if got.shape != tuple(t["shape"]) or got.tobytes() != want.reshape(t["shape"]).tobytes():
        bad.append(f"{name}: .npy differs")
    n += 1
doc = json.load(open(os.path.join(mnt, "__metadata__.json")))
if "metadata" in exp and doc != exp["metadata"]:
    bad.append(f"__metadata__.json: {doc} != {exp['metadata']}")
print(f"checked {n} tensors")
if bad:
    print("\n".join(bad)); sys.exit(1)
"#;

#[test]
fn gguf_sources_read_as_gguf_reads_them() {
    let Some(fuse) = Fuse::check() else { return };
    if !have_safetensors() {
        eprintln!("skipped: python3 numpy missing");
        return;
    }
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/gguf");
    // kquants.gguf (gguf-py) and ggml_c.gguf (ggml's C quantizer): every K-quant decoded.
    for (file, truth, n) in [
        ("model.gguf", "expected.json", 14),
        ("kquants.gguf", "kquants.json", 10),
        ("ggml_c.gguf", "ggml_c.json", 13),
        // Blocks quantized by llama.cpp's llama-quantize (fixtures/real/gguf/ORIGIN.md).
        (
            "../real/gguf/gemma-3-270m-q4_k_m.trimmed.gguf",
            "../real/gguf/expected.json",
            5,
        ),
    ] {
        let m = fuse.mount(&dir.join(file), "layouts=json,npy,bin");
        let out = Command::new("python3")
            .args(["-c", GGUF_CHECK])
            .arg(m.path())
            .arg(dir.join(truth))
            .arg(Path::new(file).file_name().unwrap())
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{file}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.contains(&format!("checked {n} tensors")),
            "{file}: {text}"
        );
        m.unmount_and_check();
    }
}

fn have_scipy_xgboost() -> bool {
    have_python("numpy, scipy.sparse, xgboost")
}

/// `NAME.csr.npz` of every sparse Angel matrix and every hash table of the fixtures (TF hash
/// tables, DeepRec EVs, Monolith): `scipy.sparse.load_npz` equals the dense view or the rows
/// by id, XGBoost trains on it (`check_csr.py`).
#[test]
fn csr_views_load_in_scipy_and_train_xgboost() {
    let Some(fuse) = Fuse::check() else { return };
    if !have_scipy_xgboost() {
        eprintln!("skipped: python3 scipy/xgboost missing");
        return;
    }
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let listed = |source: &Path, pick: &dyn Fn(&serde_json::Value) -> bool| -> Vec<String> {
        let out = Command::new(crate::modelfs())
            .args(["list", "--json"])
            .arg(source)
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v.as_array()
            .unwrap()
            .iter()
            .filter(|t| pick(t))
            .map(|t| t["path"].as_str().unwrap().to_string())
            .collect()
    };
    let sparse = |t: &serde_json::Value| t["sparse"] == true && t["problem"].is_null();
    let angel = here.join("fixtures/angel/formats/model");
    let tf1 = here.join("fixtures/tf/hashtable/tf1/model");
    let tables: Vec<String> = serde_json::from_slice::<serde_json::Value>(
        &std::fs::read(here.join("fixtures/tf/hashtable/expected.json")).unwrap(),
    )
    .unwrap()["tf1/model"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    let monolith = here.join("fixtures/monolith/ps_export");
    let deeprec = here.join("fixtures/deeprec/clean/model.ckpt");
    // DenseHashTables beside their graphs: their entries, no sentinel bucket.
    let dense = here.join("fixtures/tf/hashtable/dense");
    let truth: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dense.join("truth.json")).unwrap()).unwrap();
    let dense_cases: Vec<(std::path::PathBuf, Vec<serde_json::Value>)> =
        ["tf1_meta", "savedmodel", "keras"]
            .iter()
            .map(|form| {
                let (source, table) = match *form {
                    "tf1_meta" => (dense.join("tf1_meta/b/model"), "dht"),
                    f => (dense.join(f).join("b"), truth["table"][f].as_str().unwrap()),
                };
                let item = serde_json::json!({"name": table, "kind": "table",
                    "rows": truth["diff"]["rows_b"], "sentinels": truth["sentinels"][form]});
                (source, vec![item])
            })
            .collect();
    let cases: Vec<(&Path, Vec<(String, &str)>)> = vec![
        (
            &angel,
            listed(&angel, &sparse)
                .into_iter()
                .map(|n| (n, "sparse"))
                .collect(),
        ),
        (&tf1, tables.into_iter().map(|n| (n, "table")).collect()),
        (
            &deeprec,
            ["user_emb", "user_emb/Adagrad", "item_emb"]
                .map(|n| (n.to_string(), "table"))
                .to_vec(),
        ),
        (&monolith, {
            let in_tables = |t: &serde_json::Value| {
                t["path"]
                    .as_str()
                    .is_some_and(|p| p.starts_with("hash_tables/"))
            };
            let mut n = listed(&monolith, &in_tables);
            n.push("feat_emb".into());
            n.into_iter().map(|n| (n, "table")).collect()
        }),
    ];
    let cases = cases.into_iter().map(|(source, names)| {
        let spec: Vec<serde_json::Value> = names
            .iter()
            .map(|(n, k)| serde_json::json!({"name": n, "kind": k}))
            .collect();
        (source.to_path_buf(), spec)
    });
    let mut total = 0;
    for (source, spec) in cases.chain(dense_cases) {
        let source = source.as_path();
        let names = &spec;
        assert!(!names.is_empty(), "{}", source.display());
        let m = fuse.mount(source, "layouts=npy,libsvm");
        let mut child = Command::new("python3")
            .arg(here.join("mount-tests/check_csr.py"))
            .arg(m.path())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write as _;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(serde_json::to_string(&spec).unwrap().as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}: {text}{}",
            source.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.contains(&format!("checked {} CSR files", names.len())),
            "{text}"
        );
        assert!(!text.contains("trained on 0"), "{text}");
        total += names.len();
        m.unmount_and_check();
    }
    assert!(total >= 15, "{total}");
}

/// One flipped byte in one storage of a `torch.save` zip: `verify` exits 2 naming the member
/// (the zip's CRC-32), every tensor over that storage fails with EIO, every other reads.
#[test]
fn a_flipped_byte_in_a_torch_storage_fails_only_its_tensors() {
    let Some(fuse) = Fuse::check() else { return };
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("module.pt");
    std::fs::copy(here.join("fixtures/torch/more/module.pt"), &src).unwrap();
    let verify = || {
        Command::new(crate::support::modelfs())
            .args(["verify".as_ref(), src.as_os_str()])
            .output()
            .unwrap()
    };
    // A pickled module: its unrun classes are notes of `verify`, not problems (issue 69).
    let clean = verify();
    assert!(
        !String::from_utf8_lossy(&clean.stdout).contains("CRC-32"),
        "{clean:?}"
    );
    assert_eq!(clean.status.code(), Some(0), "{clean:?}");
    // The first byte of member `<name>/data/0`.
    let at = {
        let mut z = zip::ZipArchive::new(std::fs::File::open(&src).unwrap()).unwrap();
        let name = z
            .file_names()
            .find(|n| n.ends_with("/data/0"))
            .unwrap()
            .to_string();
        let m = z.by_name(&name).unwrap();
        assert!(m.size() >= 4, "{name}");
        m.data_start()
    };
    let mut bytes = std::fs::read(&src).unwrap();
    bytes[at as usize] ^= 0x40;
    std::fs::write(&src, bytes).unwrap();
    let o = verify();
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(out.contains("data/0") && out.contains("CRC-32"), "{out}");

    let m = fuse.mount(&src, "layouts=json,npy");
    let (mut failed, mut read) = (0, 0);
    let listed = Command::new(crate::support::modelfs())
        .args(["list".as_ref(), "--json".as_ref(), src.as_os_str()])
        .output()
        .unwrap();
    let listed: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    for t in listed.as_array().unwrap() {
        let name = t["path"].as_str().unwrap();
        let json: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(m.path().join(format!("{name}.json"))).unwrap(),
        )
        .unwrap();
        let got = std::fs::read(m.path().join(format!("{name}.npy")));
        match json["storage"] == "0" {
            true => {
                assert_eq!(got.unwrap_err().raw_os_error(), Some(5), "{name}");
                failed += 1;
            }
            false => {
                got.unwrap_or_else(|e| panic!("{name}: {e}"));
                read += 1;
            }
        }
    }
    assert!(failed >= 1 && read >= 5, "{failed} failed, {read} read");
    m.unmount_and_check();
}

/// A truncated copy of a real K-quant GGUF (llama.cpp's blocks): `verify` exits 2 naming the
/// tensor cut short, `info` lists it as a problem, and a mount still serves the tensors whole.
#[test]
fn a_truncated_real_gguf_fails_only_its_cut_tensor() {
    let Some(fuse) = Fuse::check() else { return };
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("cut.gguf");
    let mut bytes =
        std::fs::read(here.join("fixtures/real/gguf/gemma-3-270m-q4_k_m.trimmed.gguf")).unwrap();
    let run = |cmd: &str| {
        Command::new(crate::support::modelfs())
            .args([cmd.as_ref(), src.as_os_str()])
            .output()
            .unwrap()
    };
    std::fs::write(&src, &bytes).unwrap();
    assert_eq!(run("verify").status.code(), Some(0));
    // The last tensor written is the Q6_K one: cut into its last block.
    bytes.truncate(bytes.len() - 100);
    std::fs::write(&src, &bytes).unwrap();
    let o = run("verify");
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(out.contains("blk.0.ffn_down.weight"), "{out}");
    let info = String::from_utf8_lossy(&run("info").stdout).into_owned();
    assert!(info.contains("blk.0.ffn_down.weight"), "{info}");
    let m = fuse.mount(&src, "layouts=json,npy,bin");
    // GGUF names keep their dots.
    let root = m.path().to_path_buf();
    let cut = std::fs::read(root.join("blk.0.ffn_down.weight.npy"));
    assert_eq!(cut.unwrap_err().raw_os_error(), Some(5));
    for whole in [
        "attn_output.weight.npy",
        "attn_k.weight.npy",
        "attn_k_norm.weight.bin",
    ] {
        let whole = format!("blk.0.{whole}");
        std::fs::read(root.join(&whole)).unwrap_or_else(|e| panic!("{whole}: {e}"));
    }
    m.unmount_and_check();
}

/// What a file is, said plainly: a damaged file of a known format says which and what is
/// damaged; a file of none says every format looked for. `info`, `list` and `mount` alike,
/// exit status 2.
#[test]
fn damaged_and_unknown_files_say_what_they_are() {
    let Some(_fuse) = Fuse::check() else { return };
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().unwrap();
    let zip = std::fs::read(here.join("fixtures/torch/more/module.pt")).unwrap();
    let legacy = std::fs::read(here.join("fixtures/torch/more/legacy.pt")).unwrap();
    // A pickle of {'a': 1}, protocol 4, as `pickle.dump` writes it.
    let pickle = b"\x80\x04\x95\x0a\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\x01a\x94K\x01s.".to_vec();
    let random: Vec<u8> = (0..5000u32)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    let cases: [(&str, Vec<u8>, &[&str]); 4] = [
        (
            "truncated.pt",
            zip[..zip.len() / 2].to_vec(),
            &["zip archive whose central directory", "truncated?"],
        ),
        (
            "plain.pkl",
            pickle,
            &["a pickle that is not a torch.save file"],
        ),
        (
            "random.bin",
            random,
            &[
                "not recognised",
                "torch.save file (zip or legacy)",
                "GGUF",
                "safetensors",
                ".npy",
            ],
        ),
        (
            "truncated_legacy.pt",
            legacy[..legacy.len() / 3].to_vec(),
            &["legacy torch.save", "damaged"],
        ),
    ];
    for (name, bytes, says) in cases {
        let path = tmp.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        for cmd in ["info", "list", "mount"] {
            let mnt = tmp.path().join("mnt");
            let mut c = Command::new(crate::support::modelfs());
            c.arg(cmd).arg(&path).env("MODELFS_LOG", "/dev/null");
            if cmd == "mount" {
                c.arg(&mnt);
            }
            let o = c.output().unwrap();
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(2), "{cmd} {name}: {err}");
            for s in says {
                assert!(err.contains(s), "{cmd} {name}: {err}");
            }
            assert!(!crate::support::is_mount_point(&mnt), "{name}");
        }
    }
}

/// A training run's directory before its first save mounts empty (its `.json`-free root),
/// one-shot commands (`info`, `check`, `verify`) fail on it; torch.save files that
/// appear are shown as members (`latest` the newest) while mounted.
#[test]
fn an_empty_run_directory_mounts_and_fills_as_saves_appear() {
    let Some(fuse) = Fuse::check() else { return };
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    std::fs::create_dir(&run).unwrap();
    let cli = |cmd: &str| {
        Command::new(crate::support::modelfs())
            .arg(cmd)
            .arg(&run)
            .output()
            .unwrap()
    };
    // One-shot commands fail (a CI gate pointed at an empty directory must not pass); only a
    // mount waits for the first save.
    for cmd in ["info", "check", "list", "verify"] {
        let out = cli(cmd);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{cmd}: {err}");
        assert!(err.contains("not recognised"), "{cmd}: {err}");
    }
    let m = fuse.mount(&run, "");
    assert_eq!(std::fs::read_dir(m.path()).unwrap().count(), 0);
    let shows = |names: &[&str]| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        loop {
            let mut got: Vec<String> = std::fs::read_dir(m.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            got.sort();
            if got == names {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{got:?}, expected {names:?}"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    };
    // Each save appears whole (written beside, then renamed in, as a careful trainer does).
    let save = |from: &str, to: &str| {
        let part = run.join(format!(".{to}.part"));
        std::fs::copy(here.join("fixtures/torch/more").join(from), &part).unwrap();
        std::fs::rename(&part, run.join(to)).unwrap();
    };
    save("module.pt", "epoch1.pt");
    shows(&["epoch1.pt", "latest"]);
    std::thread::sleep(std::time::Duration::from_millis(20));
    save("legacy.pt", "epoch2.pt");
    shows(&["epoch1.pt", "epoch2.pt", "latest"]);
    let w = std::fs::read_to_string(m.path().join("epoch1.pt/head.weight.txt")).unwrap();
    assert_eq!(w.lines().count(), 28);
    assert!(m.path().join("latest/w_t.npy").exists());
    m.unmount_and_check();
}

/// A tensor whose metadata is broken (a truncated safetensors file: 8 tensors past its end)
/// never breaks a listing: `ls -la`, `du -s` and `find -size` exit 0, its files stat and
/// list; its reads fail with EIO; the log says each broken tensor once, however many of its
/// files are stat'ed and read, and however often.
#[test]
fn a_broken_tensor_never_breaks_a_listing() {
    let Some(fuse) = Fuse::check() else { return };
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("cut.safetensors");
    let bytes = std::fs::read(here.join("fixtures/safetensors/dtypes.safetensors")).unwrap();
    std::fs::write(&src, &bytes[..bytes.len() - 40]).unwrap();
    let log = tmp.path().join("log");
    let log_s = log.to_str().unwrap();
    let m = fuse.mount_env(
        &src,
        "layouts=json,txt,npy,cache_dir=none",
        &[("MODELFS_LOG", log_s)],
    );
    let mp = m.path();
    let sh = |cmd: &str| {
        let o = Command::new("sh")
            .args(["-c", cmd])
            .current_dir(mp)
            .output()
            .unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    for _ in 0..2 {
        for cmd in [
            "ls -laR . >/dev/null",
            "du -s . >/dev/null",
            "find . -size +0 >/dev/null",
        ] {
            assert_eq!(sh(cmd), (Some(0), String::new()), "{cmd}");
        }
    }
    for f in ["t/uint8.npy", "t/uint8.txt"] {
        let e = std::fs::read(mp.join(f)).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(5), "{f}");
        let _ = std::fs::read(mp.join(f));
    }
    std::fs::read(mp.join("t/float32.npy")).unwrap();
    drop(m);
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().filter(|l| l.contains("ERROR")).collect();
    // The 8 tensors past the end: each named once (its cause), whatever asked.
    let named = |t: &str| {
        lines
            .iter()
            .filter(|l| l.contains(&format!("t/{t}")))
            .count()
    };
    for t in ["uint8", "int8", "bool", "float8_e5m2"] {
        assert_eq!(named(t), 1, "{t}: {lines:#?}");
    }
    assert!(lines.len() <= 8, "{lines:#?}");
}

/// An Orbax `CheckpointManager` directory mounted while training saves: each step (written
/// beside, then renamed in, as Orbax finalises a step) appears with its item, and its arrays
/// read as Orbax wrote them (`w` = step + arange(6)).
#[test]
fn an_orbax_run_shows_its_steps_as_they_are_saved() {
    let Some(fuse) = Fuse::check() else { return };
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = tempfile::tempdir().unwrap();
    let run = tmp.path().join("run");
    std::fs::create_dir(&run).unwrap();
    fn copy(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            if e.file_type().unwrap().is_dir() {
                copy(&e.path(), &to.join(e.file_name()));
            } else {
                std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
            }
        }
    }
    let save = |step: &str| {
        let part = run.join(format!("{step}.orbax-checkpoint-tmp"));
        copy(&here.join("fixtures/orbax/manager").join(step), &part);
        std::fs::rename(&part, run.join(step)).unwrap();
    };
    save("0");
    let m = fuse.mount(&run, "");
    let shows = |step: &str| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let w = m.path().join(step).join("default/w.txt");
        while !w.exists() {
            assert!(
                std::time::Instant::now() < deadline,
                "{step} never appeared"
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        let got: Vec<f32> = std::fs::read_to_string(&w)
            .unwrap()
            .lines()
            .map(|l| l.parse().unwrap())
            .collect();
        let s: f32 = step.parse().unwrap();
        assert_eq!(
            got,
            (0..6).map(|i| s + i as f32).collect::<Vec<_>>(),
            "{step}"
        );
    };
    shows("0");
    save("1");
    shows("1");
    save("2");
    shows("2");
    m.unmount_and_check();
}
