//! Real checkpoints written by TensorFlow and other people's tools (shared/realworld/tf) and
//! our own generated fixtures (fixtures/tf): the listing equals TF's key list and every
//! tensor's bytes equal what TF's own reader returned (expected.npz).

mod common {
    pub mod npz;
}

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::npz::{read_npz, Npy};
use modelfs::detect::model_at;
use modelfs::model::{own_component, DType, DirEntry, Model, SourceFormat, Tensor};
use modelfs::options::Options;
use modelfs::testing::shared_dir;

/// Every tensor of `format` under `dir`, by name.
fn walk(
    model: &dyn Model,
    format: SourceFormat,
    dir: &mut Vec<Vec<u8>>,
    out: &mut BTreeMap<Vec<u8>, Arc<dyn Tensor>>,
) {
    for e in model.list_dir(dir).unwrap() {
        match e {
            DirEntry::Dir(name) => {
                dir.push(name);
                walk(model, format, dir, out);
                dir.pop();
            }
            DirEntry::Reserved(name) => {
                dir.push(own_component(&name));
                walk(model, format, dir, out);
                dir.pop();
            }
            DirEntry::Tensor(name) => {
                dir.push(name);
                let t = model.tensor(dir).unwrap();
                dir.pop();
                if t.meta().format != format {
                    continue; // graph constants (SPEC §6) are not checkpoint variables
                }
                let prev = out.insert(t.meta().name.clone(), t);
                assert!(prev.is_none(), "a key appears twice in the tree");
            }
            DirEntry::Symlink { .. } | DirEntry::Document(_) | DirEntry::Alias { .. } => {}
        }
    }
}

fn tensors_of(model: &dyn Model) -> BTreeMap<Vec<u8>, Arc<dyn Tensor>> {
    let mut out = BTreeMap::new();
    walk(model, SourceFormat::TfCheckpoint, &mut Vec::new(), &mut out);
    out
}

/// Checks one case: `src` against `expected/index.json` + `expected.npz` in `exp_dir`.
fn check_case(src: &Path, exp_dir: &Path) -> usize {
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(exp_dir.join("index.json")).unwrap()).unwrap();
    let npz = read_npz(&exp_dir.join("expected.npz"));
    let model = model_at(src, &Options::default().reader())
        .unwrap_or_else(|e| panic!("{}: {e}", src.display()));
    let got = tensors_of(&*model);
    let want = index["tensors"].as_object().unwrap();
    // Keys are UTF-8 unless the case says it spells raw bytes as latin-1.
    let key_bytes = |k: &str| -> Vec<u8> {
        if index.get("key_encoding").and_then(|v| v.as_str()) == Some("latin-1") {
            latin1(k)
        } else {
            k.as_bytes().to_vec()
        }
    };
    let want_names: BTreeSet<Vec<u8>> = want
        .keys()
        .filter(|k| *k != "_CHECKPOINTABLE_OBJECT_GRAPH")
        .map(|k| key_bytes(k))
        .collect();
    let got_names: BTreeSet<Vec<u8>> = got.keys().cloned().collect();
    assert_eq!(got_names, want_names, "{}: listing", src.display());
    for (name, exp) in want {
        let Some(t) = got.get(&key_bytes(name)) else {
            continue;
        };
        let meta = t.meta();
        assert!(meta.problem.is_none(), "{name}: {:?}", meta.problem);
        assert_eq!(
            meta.dtype.name(),
            exp["dtype"].as_str().unwrap(),
            "{name}: dtype"
        );
        let shape: Vec<u64> = exp["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        assert_eq!(meta.shape, shape, "{name}: shape");
        let n = meta.num_elements().unwrap();
        if let Some(strings) = exp.get("strings").and_then(|s| s.as_array()) {
            // Generator-side full values went through numpy `|S`, which drops trailing NULs.
            let strip = |mut s: Vec<u8>| {
                while s.last() == Some(&0) {
                    s.pop();
                }
                s
            };
            let want: Vec<Vec<u8>> = strings
                .iter()
                .map(|s| strip(latin1(s.as_str().unwrap())))
                .collect();
            let got: Vec<Vec<u8>> = read_strings(&**t, n).into_iter().map(strip).collect();
            assert_eq!(got, want, "{name}: strings");
            // Each slice as TF read it back, exactly.
            for (i, sl) in exp
                .get("slices")
                .and_then(|v| v.as_array())
                .into_iter()
                .flatten()
                .enumerate()
            {
                let Some(ss) = sl.get("strings").and_then(|v| v.as_array()) else {
                    continue;
                };
                let part = t.partition(i).unwrap();
                let want: Vec<Vec<u8>> = ss.iter().map(|s| latin1(s.as_str().unwrap())).collect();
                assert_eq!(
                    read_strings(&*part, want.len() as u64),
                    want,
                    "{name}: slice {i}"
                );
            }
            continue;
        }
        let arr: &Npy = &npz[exp["npz_key"].as_str().unwrap()];
        assert_eq!(arr.shape, shape, "{name}: npz shape");
        if meta.dtype.elem_size().is_none() {
            // Strings stored as |S<w>: NUL-padded.
            let w: usize = arr.descr.trim_start_matches(['|', 'S']).parse().unwrap();
            let want: Vec<Vec<u8>> = arr
                .data
                .chunks(w.max(1))
                .take(n as usize)
                .map(|c| {
                    c.iter()
                        .rposition(|&b| b != 0)
                        .map_or(vec![], |e| c[..=e].to_vec())
                })
                .collect();
            let got: Vec<Vec<u8>> = read_strings(&**t, n)
                .into_iter()
                .map(|mut s| {
                    while s.last() == Some(&0) {
                        s.pop();
                    }
                    s
                })
                .collect();
            assert_eq!(got, want, "{name}: strings");
            continue;
        }
        let mut buf = vec![0u8; n as usize * meta.dtype.elem_size().unwrap()];
        t.read_elements(0, &mut buf).unwrap();
        // Sub-byte integers are served as stored (one per byte); layouts sign-extend.
        let bits = match meta.dtype {
            DType::Int4 | DType::UInt4 => 4,
            DType::Int2 | DType::UInt2 => 2,
            _ => 0,
        };
        if bits > 0 {
            let signed = matches!(meta.dtype, DType::Int4 | DType::Int2);
            for b in &mut buf {
                let low = *b & ((1u8 << bits) - 1);
                *b = if signed {
                    (((low << (8 - bits)) as i8) >> (8 - bits)) as u8
                } else {
                    low
                };
            }
        }
        assert_eq!(buf, arr.data, "{name}: bytes");
        // A partial read at an offset.
        if n > 1 && bits == 0 {
            let e = meta.dtype.elem_size().unwrap();
            let mut part = vec![0u8; e];
            t.read_elements(n - 1, &mut part).unwrap();
            assert_eq!(
                part,
                arr.data[(n as usize - 1) * e..],
                "{name}: last element"
            );
        }
    }
    want_names.len()
}

fn latin1(s: &str) -> Vec<u8> {
    s.chars().map(|c| c as u32 as u8).collect()
}

fn read_strings(t: &dyn Tensor, n: u64) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    t.for_each_string(0, n, &mut |s| v.push(s.to_vec()))
        .unwrap();
    v
}

fn find_expected(root: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(root) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            if p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("expected.")
                && p.join("index.json").is_file()
            {
                out.push(p);
            } else {
                find_expected(&p, out);
            }
        }
    }
}

#[test]
fn realworld_checkpoints_match_tensorflow() {
    let Some(shared) = shared_dir() else {
        println!("skipped: no shared/realworld (set MODELFS_SHARED)");
        return;
    };
    let mut cases = Vec::new();
    find_expected(&shared.join("realworld/tf"), &mut cases);
    assert!(cases.len() >= 9, "{} cases", cases.len());
    for exp in cases {
        let index: serde_json::Value =
            serde_json::from_slice(&std::fs::read(exp.join("index.json")).unwrap()).unwrap();
        let prefix = exp
            .parent()
            .unwrap()
            .join(index["prefix"].as_str().unwrap());
        check_case(&prefix, &exp);
        // The same through the `.index` file and a data file.
        let mut idx = prefix.clone().into_os_string();
        idx.push(".index");
        check_case(Path::new(&idx), &exp);
        let mut data = prefix.clone().into_os_string();
        data.push(".data-00000-of-00001");
        if Path::new(&data).exists() {
            check_case(Path::new(&data), &exp);
        }
        // SavedModel directories open as their variables.
        let parent = exp.parent().unwrap().parent().unwrap();
        if parent.join("saved_model.pb").is_file() {
            check_case(parent, &exp);
        }
    }
}

#[test]
fn generated_fixtures_match_tensorflow() {
    let root = std::env::var_os("MODELFS_TF_FIXTURES")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tf"));
    let Ok(rd) = std::fs::read_dir(&root) else {
        println!("skipped: no fixtures/tf");
        return;
    };
    let mut n = 0;
    let mut cases: Vec<_> = rd.flatten().map(|e| e.path()).collect();
    cases.sort();
    for case in cases {
        let exp = case.join("expected");
        if !exp.join("index.json").is_file() {
            continue;
        }
        let index: serde_json::Value =
            serde_json::from_slice(&std::fs::read(exp.join("index.json")).unwrap()).unwrap();
        let src = case.join(index["prefix"].as_str().unwrap());
        println!("fixture {}", case.display());
        check_case(&src, &exp);
        n += 1;
    }
    println!("{n} fixture cases");
}

fn serving(shared: &Path) -> PathBuf {
    shared.join("realworld/tf/tensorflow+serving/tensorflow_serving")
}

/// V1 checkpoints (TF < 0.12) mount: the real `half_plus_two` (a = 0.5, b = 2.0, with its
/// graph), its copy with a stale state file, and each form of naming them.
#[test]
fn v1_checkpoints_mount() {
    let Some(shared) = shared_dir() else { return };
    let base = serving(&shared);
    let half = base.join("session_bundle/testdata/half_plus_two/00000123");
    for p in [
        half.clone(),
        half.join("export"),
        half.join("export-00000-of-00001"),
    ] {
        let model = model_at(&p, &Options::default().reader())
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        for (name, want) in [("a", 0.5f32), ("b", 2.0)] {
            let t = model.tensor(&[name.as_bytes().to_vec()]).unwrap();
            assert_eq!(t.meta().shape, Vec::<u64>::new());
            let mut four = [0u8; 4];
            t.read_elements(0, &mut four).unwrap();
            assert_eq!(f32::from_le_bytes(four), want, "{}: {name}", p.display());
        }
        // The graph beside it (export.meta) gives its constants.
        let consts = model.list_dir(&[own_component(b"constants")]).unwrap();
        assert!(!consts.is_empty());
    }
    // A `checkpoint` file with a stale absolute path naming a V1 checkpoint.
    let bad = base.join("servables/tensorflow/testdata/bad_half_plus_two/00000123");
    let model = model_at(&bad, &Options::default().reader()).unwrap();
    let t = model.tensor(&[b"Variable".to_vec()]).unwrap();
    assert_eq!(t.meta().dtype, DType::F32);
}

/// The V1 checkpoint written by TF 2.21's `Saver(write_version=V1)` (whole, partitioned,
/// int64 and string tensors) equals what TF's V1 reader returns.
#[test]
fn generated_v1_checkpoint_matches_tensorflow() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tf/graphs/v1");
    assert_eq!(
        check_case(&dir.join("model.ckpt"), &dir.join("expected")),
        4
    );
    assert_eq!(check_case(&dir, &dir.join("expected")), 4);
}

/// Every `Const` of every graph fixture (a `.meta` beside a Saver checkpoint, a SavedModel, a
/// frozen graph, Consts using every typed TensorProto field) equals `tf.make_ndarray` of it.
#[test]
fn graph_constants_match_tensorflow() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tf/graphs");
    let cases = [
        ("tf1/saver/model.ckpt.meta", "tf1/saver/model.ckpt", true),
        ("tf1/savedmodel/saved_model.pb", "tf1/savedmodel", true),
        ("tf1/frozen/frozen.pb", "tf1/frozen/frozen.pb", false),
        ("tf1/frozen/frozen.pb", "tf1/frozen", false),
        ("typed/graph.pb", "typed/graph.pb", false),
        ("tf2/savedmodel/saved_model.pb", "tf2/savedmodel", true),
    ];
    for (file, source, beside_variables) in cases {
        let exp_dir = root.join(format!("{file}.expected"));
        let index: serde_json::Value =
            serde_json::from_slice(&std::fs::read(exp_dir.join("consts.json")).unwrap()).unwrap();
        let npz = read_npz(&exp_dir.join("consts.npz"));
        let model = model_at(&root.join(source), &Options::default().reader())
            .unwrap_or_else(|e| panic!("{source}: {e}"));
        let want = index["consts"].as_object().unwrap();
        assert!(!want.is_empty());
        let mut got = 0;
        let mut all = BTreeMap::new();
        walk(&*model, SourceFormat::TfGraph, &mut Vec::new(), &mut all);
        assert_eq!(
            all.keys().cloned().collect::<BTreeSet<_>>(),
            want.keys()
                .map(|k| k.as_bytes().to_vec())
                .collect::<BTreeSet<_>>(),
            "{source}: constants listed"
        );
        for (name, exp) in want {
            let mut path: Vec<Vec<u8>> = Vec::new();
            if beside_variables {
                path.push(own_component(b"constants"));
            }
            path.extend(name.split('/').map(|c| c.as_bytes().to_vec()));
            let t = model
                .tensor(&path)
                .unwrap_or_else(|e| panic!("{source}: {name}: {e}"));
            let meta = t.meta();
            assert!(meta.problem.is_none(), "{name}: {:?}", meta.problem);
            assert_eq!(meta.format, SourceFormat::TfGraph);
            assert_eq!(meta.dtype.name(), exp["dtype"].as_str().unwrap(), "{name}");
            let shape: Vec<u64> = exp["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap())
                .collect();
            assert_eq!(meta.shape, shape, "{source}: {name}: shape");
            let n = meta.num_elements().unwrap();
            if let Some(strings) = exp.get("strings").and_then(|s| s.as_array()) {
                let want: Vec<Vec<u8>> = strings
                    .iter()
                    .map(|s| latin1(s.as_str().unwrap()))
                    .collect();
                assert_eq!(read_strings(&*t, n), want, "{source}: {name}");
            } else {
                let arr: &Npy = &npz[exp["npz_key"].as_str().unwrap()];
                let mut buf = vec![0u8; n as usize * meta.dtype.elem_size().unwrap()];
                t.read_elements(0, &mut buf).unwrap();
                assert!(buf == arr.data, "{source}: {name}: values differ");
                if meta.dtype != DType::BF16 {
                    // The same through the CLI's `.npy` (the mount's code).
                    let dir = if beside_variables { "constants/" } else { "" };
                    let npy = cli_cat(&root.join(source), &format!("{dir}{name}.npy"));
                    let npy = common::npz::parse_npy(&npy);
                    assert!(npy.data == arr.data, "{source}: {name}.npy differs");
                    assert_eq!(npy.shape, shape, "{source}: {name}.npy shape");
                }
            }
            got += 1;
        }
        assert_eq!(got, want.len());
    }
}

#[test]
fn checkpoint_directory_with_state_file() {
    let Some(shared) = shared_dir() else { return };
    let dir = shared.join("realworld/tf/onnx+tensorflow-onnx/tests/models/regression/checkpoint");
    let model = model_at(&dir, &Options::default().reader()).unwrap();
    let root = model.list_dir(&[]).unwrap();
    assert_eq!(
        root,
        vec![
            DirEntry::Dir(b"model".to_vec()),
            DirEntry::Symlink {
                name: b"latest".to_vec(),
                target: b"model".to_vec()
            }
        ]
    );
    assert!(model.tensor(&[b"latest".to_vec(), b"W".to_vec()]).is_ok());

    // Copied elsewhere with stale absolute paths, plus a second prefix and a deleted one.
    let tmp = tempfile::tempdir().unwrap();
    for f in ["model.index", "model.data-00000-of-00001"] {
        std::fs::copy(dir.join(f), tmp.path().join(f)).unwrap();
        std::fs::copy(dir.join(f), tmp.path().join(f.replace("model", "model-2"))).unwrap();
    }
    std::fs::write(
        tmp.path().join("checkpoint"),
        "model_checkpoint_path: \"/home/u/run7/model-2\"\nall_model_checkpoint_paths: \"/home/u/run7/model-1\"\n\
         all_model_checkpoint_paths: \"/home/u/run7/model\"\nall_model_checkpoint_paths: \"/home/u/run7/model-2\"\n",
    )
    .unwrap();
    let model = model_at(tmp.path(), &Options::default().reader()).unwrap();
    let root = model.list_dir(&[]).unwrap();
    assert_eq!(root.len(), 3, "{root:?}");
    assert!(root.contains(&DirEntry::Symlink {
        name: b"latest".to_vec(),
        target: b"model-2".to_vec()
    }));
    assert_eq!(model.summary().unwrap().tensors, 4);

    // Not a checkpoint at all.
    let empty = tempfile::tempdir().unwrap();
    let err = model_at(empty.path(), &Options::default().reader())
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("not recognised"), "{err}");
    let err = model_at(&empty.path().join("nope"), &Options::default().reader())
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("nope: no such file or directory"), "{err}");
    // A data file given as the index.
    let bogus = tmp.path().join("bogus.index");
    std::fs::write(&bogus, vec![0u8; 100]).unwrap();
    let err = model_at(&bogus, &Options::default().reader())
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("not a TensorFlow checkpoint index"), "{err}");
    assert!(!err.contains('\n'));
}

#[test]
fn snappy_index_blocks_are_read() {
    use modelfs::tf::table::footer::{BlockHandle, Footer};
    let Some(shared) = shared_dir() else { return };
    for case in [
        "saved_model_half_plus_two_cpu",
        "saved_model_half_plus_two_tf2_cpu",
    ] {
        let p = serving(&shared).join(format!(
            "servables/tensorflow/testdata/{case}/00000123/variables/variables.index"
        ));
        let bytes = std::fs::read(&p).unwrap();
        let footer = Footer::decode(&bytes[bytes.len() - 48..], bytes.len() as u64).unwrap();
        // The index block holds one entry: shared 0, key length, value length, key, handle.
        let ib = &bytes[footer.index.offset as usize..];
        let key_len = ib[1] as usize;
        let (h, _) = BlockHandle::decode(&ib[3 + key_len..]).unwrap();
        assert_eq!(
            bytes[(h.offset + h.size) as usize],
            1,
            "{case}: data block is Snappy"
        );
        let model = model_at(&p, &Options::default().reader()).unwrap();
        assert!(model.summary().unwrap().tensors >= 3, "{case}");
        assert!(model.summary().unwrap().problems.is_empty());
    }
}

/// `modelfs cat SOURCE PATH`: the bytes the mounted file gives.
fn cli_cat(source: &Path, path: &str) -> Vec<u8> {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_modelfs"))
        .arg("cat")
        .arg(source)
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cat {} {path}: {}",
        source.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Every signature's `.json` gives what `saved_model_cli show --all` reports (recorded from TF),
/// and `signatures.txt` names each in its form.
#[test]
fn signatures_match_saved_model_cli() {
    for case in ["tf1/savedmodel", "tf2/savedmodel"] {
        signatures_of(case);
    }
}

fn signatures_of(case: &str) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/tf/graphs")
        .join(case);
    let want: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.join("saved_model.pb.expected/signatures.json")).unwrap(),
    )
    .unwrap();
    let metas = want["meta_graphs"].as_array().unwrap();
    assert_eq!(metas.len(), 1);
    let sigs = metas[0]["signatures"].as_object().unwrap();
    assert!(sigs.len() >= 2, "{case}");
    let summary = String::from_utf8(cli_cat(&dir, "signatures.txt")).unwrap();
    for (key, exp) in sigs {
        let got: serde_json::Value =
            serde_json::from_slice(&cli_cat(&dir, &format!("signatures/{key}.json"))).unwrap();
        assert_eq!(got["key"], serde_json::json!(key));
        assert_eq!(got["tags"], metas[0]["tags"], "{key}");
        for field in ["method_name", "inputs", "outputs"] {
            assert_eq!(got[field], exp[field], "{key}: {field}");
        }
        assert!(
            summary.contains(&format!("signature_def['{key}']:")),
            "{summary}"
        );
        for (arg, info) in exp["inputs"].as_object().unwrap() {
            assert!(summary.contains(&format!("inputs['{arg}'] tensor_info:")));
            assert!(summary.contains(&format!("name: {}", info["name"].as_str().unwrap())));
        }
    }
    assert!(summary.starts_with("MetaGraphDef with tag-set: 'serve' contains"));
}

/// TF2 names: every variable of the Keras checkpoint, its SavedModel and a checkpoint with TF's
/// slot variables equals TF's values; each unique full name from the object graph (recorded by
/// TF) is a `by-name/` link to that variable's files, its `.json` gives the `full_name`, and
/// each optimizer slot is `by-name/<variable>/<slot>`.
#[test]
fn tf2_names_from_the_object_graph() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tf/graphs/tf2");
    for (source, prefix, exp) in [
        ("ckpt", "ckpt/model", "ckpt/expected"),
        ("slots", "slots/model", "slots/expected"),
        (
            "savedmodel",
            "savedmodel/variables/variables",
            "savedmodel/expected",
        ),
    ] {
        let (src, exp) = (root.join(source), root.join(exp));
        assert!(check_case(&root.join(prefix), &exp) > 3, "{source}");
        let names: serde_json::Value =
            serde_json::from_slice(&std::fs::read(exp.join("names.json")).unwrap()).unwrap();
        let full = names["full_names"].as_object().unwrap();
        let slots = names["slots"].as_object().unwrap();
        let link_of = |key: &str| match slots.get(key) {
            Some(s) => format!(
                "{}/{}",
                s["variable"].as_str().unwrap(),
                s["slot"].as_str().unwrap()
            ),
            None => full[key].as_str().unwrap().to_string(),
        };
        let mut count = BTreeMap::<String, usize>::new();
        for key in full.keys() {
            *count.entry(link_of(key)).or_default() += 1;
        }
        let mut linked = 0;
        for (key, name) in full {
            let display = key.strip_suffix("/.ATTRIBUTES/VARIABLE_VALUE").unwrap();
            let own = cli_cat(&src, &format!("{display}.npy"));
            let json: serde_json::Value =
                serde_json::from_slice(&cli_cat(&src, &format!("{display}.json"))).unwrap();
            assert_eq!(json["full_name"], *name, "{source}: {key}");
            assert_eq!(json["object_path"], display, "{source}: {key}");
            let link = link_of(key);
            if count[&link] == 1 {
                assert_eq!(cli_cat(&src, &format!("by-name/{link}.npy")), own, "{link}");
                linked += 1;
            }
        }
        assert!(linked >= 4, "{source}: {linked} links");
    }
}

/// `modelfs info` on a graph source: nodes by op, constants, and the signatures.
#[test]
fn info_on_a_saved_model_gives_ops_constants_and_signatures() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tf/graphs/tf1/savedmodel");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_modelfs"))
        .arg("info")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for want in [
        "format: tf-savedmodel",
        "graph: 52 nodes in 1 meta graph(s); by op: Const 18, Identity 5,",
        "constants: 18,",
        "signatures [serve]:",
        "  serving_default: (x: float32 [-1,3]) -> (y: float32 [-1,2])",
        "  scaled: (x: float32 [-1,3]) -> (vocab: string [3], y2: float32 [-1,2])",
    ] {
        assert!(text.contains(want), "{want:?} not in\n{text}");
    }
}

/// Local storage that counts the bytes read through it.
#[derive(Debug)]
struct Counting(
    Arc<std::sync::atomic::AtomicU64>,
    Arc<dyn modelfs::source::Storage>,
);

#[derive(Debug)]
struct CountingFile(
    Arc<std::sync::atomic::AtomicU64>,
    Arc<dyn modelfs::source::ReadAt>,
);

impl modelfs::source::ReadAt for CountingFile {
    fn size(&self) -> u64 {
        self.1.size()
    }
    fn name(&self) -> &str {
        self.1.name()
    }
    fn read_at(
        &self,
        offset: u64,
        len: usize,
    ) -> Result<std::borrow::Cow<'_, [u8]>, modelfs::source::SourceError> {
        self.0
            .fetch_add(len as u64, std::sync::atomic::Ordering::Relaxed);
        self.1.read_at(offset, len)
    }
}

impl modelfs::source::Storage for Counting {
    fn open(
        &self,
        path: &Path,
    ) -> Result<Arc<dyn modelfs::source::ReadAt>, modelfs::source::SourceError> {
        Ok(Arc::new(CountingFile(self.0.clone(), self.1.open(path)?)))
    }
    fn kind(
        &self,
        path: &Path,
    ) -> Result<Option<modelfs::source::EntryKind>, modelfs::source::SourceError> {
        self.1.kind(path)
    }
    fn list(
        &self,
        dir: &Path,
    ) -> Result<Vec<(std::ffi::OsString, modelfs::source::EntryKind)>, modelfs::source::SourceError>
    {
        self.1.list(dir)
    }
}

fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn field(number: u32, payload: &[u8], out: &mut Vec<u8>) {
    varint(u64::from(number) << 3 | 2, out);
    varint(payload.len() as u64, out);
    out.extend_from_slice(payload);
}

/// A SavedModel (`saved_model.pb` only) whose graph has `nodes` Const nodes of 16 floats.
fn synthetic_saved_model(dir: &Path, nodes: usize) {
    let mut graph = Vec::new();
    for i in 0..nodes {
        let mut tensor = vec![0x08, 1]; // dtype float
        field(2, &[0x12, 2, 0x08, 16], &mut tensor); // shape [16]
        field(4, &[0u8; 64], &mut tensor);
        let mut value = Vec::new();
        field(8, &tensor, &mut value);
        let mut entry = Vec::new();
        field(1, b"value", &mut entry);
        field(2, &value, &mut entry);
        let mut node = Vec::new();
        field(1, format!("layer{}/c{i}", i % 100).as_bytes(), &mut node);
        field(2, b"Const", &mut node);
        field(5, &entry, &mut node);
        field(1, &node, &mut graph);
    }
    let mut meta_info = Vec::new();
    field(4, b"serve", &mut meta_info);
    let mut meta = Vec::new();
    field(1, &meta_info, &mut meta);
    field(2, &graph, &mut meta);
    let mut sm = vec![0x08, 1];
    field(2, &meta, &mut sm);
    std::fs::write(dir.join("saved_model.pb"), sm).unwrap();
}

/// Opening a SavedModel (what a mount does before it answers) reads the same few bytes
/// whatever the size of its graph: the graph is scanned on the first look at its entries.
#[test]
fn opening_a_saved_model_does_not_grow_with_its_graph() {
    let tmp = tempfile::tempdir().unwrap();
    let mut read = Vec::new();
    for nodes in [100, 100_000] {
        let dir = tmp.path().join(nodes.to_string());
        std::fs::create_dir(&dir).unwrap();
        synthetic_saved_model(&dir, nodes);
        let bytes = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let mut opts = Options::default().reader();
        opts.storage = Arc::new(Counting(bytes.clone(), opts.storage.clone()));
        let model = model_at(&dir, &opts).unwrap();
        let at_open = bytes.load(std::sync::atomic::Ordering::Relaxed);
        // The first look scans it all, once.
        let root = model.list_dir(&[]).unwrap();
        assert!(
            root.contains(&DirEntry::Dir(b"layer7".to_vec())),
            "{root:?}"
        );
        let size = std::fs::metadata(dir.join("saved_model.pb")).unwrap().len();
        assert!(bytes.load(std::sync::atomic::Ordering::Relaxed) >= size);
        read.push((size, at_open));
    }
    eprintln!("(graph size, bytes read at open): {read:?}");
    let (small, large) = (read[0], read[1]);
    assert!(large.0 > 1000 * small.0 / 2, "{read:?}");
    assert!(
        large.1 <= small.1.max(4096),
        "open read {read:?} (size, bytes read)"
    );
}
