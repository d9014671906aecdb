//! TensorFlow graphs (SPEC §6) against what TensorFlow reads (fixtures/tf/graphs, written by
//! scripts/gen-graph-fixtures): every constant, every signature, TF2 names from the object
//! graph, `modelfs info`, and a mount that does not grow with the graph.

mod common {
    pub mod npz;
    pub mod tf;
}

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use common::npz::{read_npz, Npy};
use common::tf::*;
use modelfs_core::options::Options;
use modelfs_detect::model_at;
use modelfs_io::source::ReadCtx;
use modelfs_model::{own_component, DType, DirEntry};

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
        // Issue 26 item 2: text graphs and a binary GraphDef of no known name.
        ("text/savedmodel/saved_model.pbtxt", "text/savedmodel", true),
        (
            "text/savedmodel/saved_model.pbtxt",
            "text/savedmodel/saved_model.pbtxt",
            true,
        ),
        ("text/graph/graph.pbtxt", "text/graph/graph.pbtxt", false),
        ("text/graph/graph.pbtxt", "text/graph", false),
        ("text/expected_graph", "text/expected_graph", false),
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
        walk(&*model, "tf-graph", &mut Vec::new(), &mut all);
        // Listed: all but TF's save/restore plumbing, which is still there by name.
        let names: Vec<&str> = want.keys().map(String::as_str).collect();
        assert_eq!(
            all.keys().cloned().collect::<BTreeSet<_>>(),
            names
                .iter()
                .filter(|k| !plumbing(k, &names) && !object_graph(source, k))
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
            assert_eq!(meta.format, "tf-graph");
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
                t.read_elements(ReadCtx::none(), 0, &mut buf).unwrap();
                assert!(buf == arr.data, "{source}: {name}: values differ");
                // The same through the CLI's `.npy` (the mount's code), for the listed ones.
                if meta.dtype != DType::BF16
                    && !plumbing(name, &names)
                    && !object_graph(source, name)
                {
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

/// Whether `name` is the constant a TF2 SavedModel's save call is given, the object graph it
/// writes (an input of the graph's `StatefulPartitionedCall` of `__inference__traced_save_…`,
/// as TF's `saved_model.pb` of each case shows): plumbing, not listed.
fn object_graph(source: &str, name: &str) -> bool {
    matches!(
        (source, name),
        ("tf2/savedmodel", "Const_1")
            | (
                "text/savedmodel" | "text/savedmodel/saved_model.pbtxt",
                "Const_1"
            )
    )
}

/// Whether TF generated constant `name` of `all` to save or restore: in a
/// `__inference__traced_save_…`-like function, or in a `Saver`'s scope (beside its
/// `SaveV2/tensor_names`).
fn plumbing(name: &str, all: &[&str]) -> bool {
    let functions = [
        "__inference__traced_save_",
        "__inference__traced_restore_",
        "__inference_save_fn_",
        "__inference_restore_fn_",
        "__inference__initializer_",
        "__inference__destroyer_",
    ];
    let first = name.split('/').next().unwrap();
    functions.iter().any(|f| first.starts_with(f))
        || all.iter().any(|c| {
            let scope = c
                .strip_suffix("/SaveV2/tensor_names")
                .or_else(|| c.strip_suffix("/RestoreV2/tensor_names"));
            scope.is_some_and(|s| name.starts_with(&format!("{s}/")))
        })
}

/// Every signature's `.json` gives what `saved_model_cli show --all` reports (recorded from TF),
/// and `signatures.txt` names each in its form.
#[test]
fn signatures_match_saved_model_cli() {
    for case in [
        "tf1/savedmodel",
        "tf2/savedmodel",
        "signatures/savedmodel",
        "text/savedmodel",
    ] {
        signatures_of(case);
    }
}

/// Issue 26 item 3: a COO-sparse input, a reference-typed output and a ragged (composite)
/// output, as TF wrote them: `.json` gives their parts (compared with TF's protos above),
/// `signatures.txt` and `info` the dtype names TF uses.
#[test]
fn signatures_name_sparse_composite_and_reference_tensors_as_tf_does() {
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tf/graphs/signatures/savedmodel");
    let sig: serde_json::Value =
        serde_json::from_slice(&cli_cat(&dir, "signatures/serving_default.json")).unwrap();
    assert_eq!(sig["inputs"]["sp"]["coo_sparse"]["values"], "sp/values:0");
    assert_eq!(sig["outputs"]["ref"]["dtype"], "float32_ref");
    assert_eq!(
        sig["outputs"]["ragged"]["composite"]["type_spec"],
        "RaggedTensorSpec"
    );
    let summary = String::from_utf8(cli_cat(&dir, "signatures.txt")).unwrap();
    assert!(summary.contains("dtype: DT_FLOAT_REF"), "{summary}");
    assert!(!summary.contains("sp/values:0,"), "{summary}");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_modelfs"))
        .arg("info")
        .arg(&dir)
        .output()
        .unwrap();
    let info = String::from_utf8_lossy(&out.stdout);
    assert!(info.contains("ref: float32_ref [2]"), "{info}");
    assert!(info.contains("sp: float32 [-1,4] sparse"), "{info}");
}

fn signatures_of(case: &str) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/tf/graphs")
        .join(case);
    let expected = ["saved_model.pb", "saved_model.pbtxt"]
        .map(|f| dir.join(format!("{f}.expected/signatures.json")))
        .into_iter()
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("{case}: no signatures.json"));
    let want: serde_json::Value =
        serde_json::from_slice(&std::fs::read(expected).unwrap()).unwrap();
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
            // Sparse and composite tensors have no name (TF prints it empty).
            let name = info["name"].as_str().unwrap_or("");
            assert!(summary.contains(&format!("name: {name}\n")));
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
        // The program's 4 constants; the two Savers' 14 are not listed.
        "constants: 4, ",
        "(and 14 of TF's save/restore plumbing, not listed)",
        "signatures [serve]:",
        "  serving_default: (x: float32 [-1,3]) -> (y: float32 [-1,2])",
        "  scaled: (x: float32 [-1,3]) -> (vocab: string [3], y2: float32 [-1,2])",
    ] {
        assert!(text.contains(want), "{want:?} not in\n{text}");
    }
}

/// Issue 69: `info` names the hash tables a checkpoint holds (listed only as their keys and
/// values tensors), beside a graph or not.
#[test]
fn info_names_the_hash_tables() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tf/hashtable");
    for (source, want) in [
        ("dense/savedmodel/a", "tables: 1 (dht)"),
        ("nograph/one_erase/ckpt", "tables: 1 (m/t)"),
        ("tf2/ckpt", "tables: 2 (m/dense, m/table)"),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_modelfs"))
            .arg("info")
            .arg(root.join(source))
            .output()
            .unwrap();
        assert!(out.status.success(), "{source}");
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains(want), "{want:?} not in\n{text}");
    }
}

/// Local storage that counts the bytes read through it.
#[derive(Debug)]
struct Counting(
    Arc<std::sync::atomic::AtomicU64>,
    Arc<dyn modelfs_io::source::Storage>,
);

#[derive(Debug)]
struct CountingFile(
    Arc<std::sync::atomic::AtomicU64>,
    Arc<dyn modelfs_io::source::ReadAt>,
);

impl modelfs_io::source::ReadAt for CountingFile {
    fn about(&self) -> &modelfs_io::source::About {
        self.1.about()
    }
    fn read_with(
        &self,
        ctx: &modelfs_io::source::ReadCtx,
        offset: u64,
        to: modelfs_io::source::To<'_>,
    ) -> Result<(), modelfs_io::source::SourceError> {
        self.0
            .fetch_add(to.len(), std::sync::atomic::Ordering::Relaxed);
        self.1.read_with(ctx, offset, to)
    }
}

impl modelfs_io::source::Storage for Counting {
    fn open(
        &self,
        path: &Path,
    ) -> Result<Arc<dyn modelfs_io::source::ReadAt>, modelfs_io::source::SourceError> {
        Ok(Arc::new(CountingFile(self.0.clone(), self.1.open(path)?)))
    }
    fn kind(
        &self,
        path: &Path,
    ) -> Result<Option<modelfs_io::source::EntryKind>, modelfs_io::source::SourceError> {
        self.1.kind(path)
    }
    fn list(
        &self,
        dir: &Path,
    ) -> Result<
        Vec<(std::ffi::OsString, modelfs_io::source::EntryKind)>,
        modelfs_io::source::SourceError,
    > {
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
