//! The `.tf/` view (SPEC §7) read back by modelfs's own TF reader: for every committed fixture
//! (TF checkpoints, SavedModels, graphs, Angel models), the view's `checkpoint`, `model.index`
//! and `model.data-*` (taken through `modelfs cat`, the mount's code) open as a checkpoint
//! whose every tensor equals the source's. `fixtures/views/tf_readback.json` (recorded by
//! scripts/check-tf-view with TensorFlow) says TF's `load_checkpoint` reads the same bytes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use modelfs_core::options::Options;
use modelfs_detect::model_at;
use modelfs_io::source::ReadCtx;
use modelfs_model::{own_component, DType, DirEntry, Model, Tensor};

/// What the views hold of the tensors under `root` of `model`, by original key: a model's
/// variables alone, a graph's constants only when it has nothing else.
fn by_key(model: &dyn Model, root: &[Vec<u8>]) -> BTreeMap<Vec<u8>, Arc<dyn Tensor>> {
    let mut out = every_tensor(model, root);
    let graph = |t: &Arc<dyn Tensor>| t.meta().format == "tf-graph";
    if !out.values().all(graph) {
        out.retain(|_, t| !graph(t));
    }
    out
}

/// Every tensor under `root` of `model` by its original key (first of a key wins).
fn every_tensor(model: &dyn Model, root: &[Vec<u8>]) -> BTreeMap<Vec<u8>, Arc<dyn Tensor>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_vec()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = model.list_dir(&dir) else {
            continue;
        };
        for e in entries {
            let mut p = dir.clone();
            match e {
                DirEntry::Dir(n) => {
                    p.push(n);
                    stack.push(p);
                }
                DirEntry::Reserved(n) => {
                    p.push(own_component(&n));
                    stack.push(p);
                }
                DirEntry::Tensor(n) => {
                    p.push(n);
                    if let Ok(t) = model.tensor(&p) {
                        out.entry(t.meta().name.clone()).or_insert(t);
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// Dense element bytes (a sparse matrix expanded), bools as 0/1; strings as length ‖ bytes.
fn bytes_of(t: &dyn Tensor) -> Option<Vec<u8>> {
    let meta = t.meta();
    if meta.dtype == DType::Str && meta.problem.is_none() {
        let mut out = Vec::new();
        t.for_each_string(ReadCtx::none(), 0, meta.num_elements()?, &mut |s| {
            out.extend_from_slice(&(s.len() as u64).to_le_bytes());
            out.extend_from_slice(s);
        })
        .ok()?;
        return Some(out);
    }
    let w = meta.dtype.elem_size()?;
    if meta.problem.is_some() {
        return None;
    }
    let n = usize::try_from(meta.num_elements()?).ok()?;
    if n * w > 64 << 20 {
        return None; // beyond the default max_dense
    }
    let mut buf = vec![0u8; n * w];
    if meta.sparse {
        let s = t.sparse().ok()?;
        let cols = *meta.shape.get(1)? as usize;
        for (i, &row) in s.rows.iter().enumerate() {
            for k in s.row_ptr[i] as usize..s.row_ptr[i + 1] as usize {
                let at = (row as usize * cols + usize::try_from(s.cols[k]).ok()?) * w;
                buf[at..at + w].copy_from_slice(&s.values[k * w..(k + 1) * w]);
            }
        }
    } else {
        t.read_elements(ReadCtx::none(), 0, &mut buf).ok()?;
    }
    if meta.dtype == DType::Bool {
        buf.iter_mut().for_each(|b| *b = u8::from(*b != 0));
    }
    Some(buf)
}

/// The sources: every directory of fixtures/ and ../shared/realworld that opens as a model
/// (not descending into it).
fn sources() -> Vec<PathBuf> {
    modelfs_model::testing::model_dirs(|p| model_at(p, &Options::default().reader()).is_ok())
}

/// Each model root of `source` (`""`, or `ckpt-3/` in a directory of several checkpoints).
fn roots(source: PathBuf) -> Vec<(PathBuf, String)> {
    let model = model_at(&source, &Options::default().reader()).unwrap();
    model
        .model_roots()
        .into_iter()
        .map(|r| {
            let r: String = r
                .iter()
                .map(|c| format!("{}/", String::from_utf8_lossy(c)))
                .collect();
            (source.clone(), r)
        })
        .collect()
}

/// The `.tf/` view of the model at `root` of `source` written to `dir` through `modelfs cat`.
fn view_of(source: &Path, root: &str, dir: &Path) -> bool {
    for f in ["checkpoint", "model.index", "model.data-00000-of-00001"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_modelfs"))
            .arg("cat")
            .arg(source)
            .arg(format!("{root}.tf/{f}"))
            .output()
            .unwrap();
        if !out.status.success() {
            return false;
        }
        std::fs::write(dir.join(f), out.stdout).unwrap();
    }
    true
}

#[test]
fn the_tf_view_reads_back_as_the_source() {
    let (mut checked, mut opened) = (0, 0);
    for (source, root) in sources().into_iter().flat_map(roots) {
        let model = model_at(&source, &Options::default().reader()).unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let root_path: Vec<Vec<u8>> = root
            .split('/')
            .filter(|c| !c.is_empty())
            .map(|c| c.as_bytes().to_vec())
            .collect();
        if !view_of(&source, &root, tmp.path()) {
            // Only a source with a tensor whose data cannot be read has no index (its CRC).
            let unreadable = by_key(&*model, &root_path).values().any(|t| {
                let m = t.meta();
                m.problem.is_none() && bytes_of(&**t).is_none()
            });
            assert!(unreadable, "{}: no .tf/ view", source.display());
            continue;
        }
        let view = model_at(&tmp.path().join("model"), &Options::default().reader())
            .unwrap_or_else(|e| panic!("{}: the view does not open: {e}", source.display()));
        let got = by_key(&*view, &[]);
        let mut n = 0;
        for (key, t) in by_key(&*model, &root_path) {
            let Some(want) = bytes_of(&*t) else { continue };
            let v = got.get(&key).unwrap_or_else(|| {
                panic!(
                    "{}: {} missing",
                    source.display(),
                    String::from_utf8_lossy(&key)
                )
            });
            assert_eq!(v.meta().shape, t.meta().shape);
            assert_eq!(v.meta().dtype, t.meta().dtype);
            assert!(
                bytes_of(&**v) == Some(want),
                "{}: {}",
                source.display(),
                String::from_utf8_lossy(&key)
            );
            n += 1;
        }
        assert_eq!(
            n,
            got.len(),
            "{}: the view has other tensors",
            source.display()
        );
        eprintln!("{}:{root} {n}", source.display());
        checked += n;
        opened += 1;
    }
    assert!(
        opened
            >= if modelfs_model::testing::shared_dir().is_some() {
                45
            } else {
                30
            }
            && checked > 8000,
        "{opened} sources, {checked} tensors"
    );
    eprintln!("{opened} sources, {checked} tensors");
}

/// TensorFlow's `load_checkpoint` of each fixture's and each ../shared/realworld model's view
/// (recorded by scripts/check-tf-view) read the same keys, dtypes, shapes and bytes that
/// modelfs's view holds now.
#[test]
fn tensorflow_read_the_same_view() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let rec: serde_json::Value = serde_json::from_slice(
        &std::fs::read(root.join("fixtures/views/tf_readback.json")).unwrap(),
    )
    .unwrap();
    let sources = rec["sources"].as_object().unwrap();
    assert!(sources.len() >= 30, "{} sources recorded", sources.len());
    let mut checked = 0;
    let shared = modelfs_model::testing::shared_dir();
    for (rel, keys) in sources {
        let tmp = tempfile::tempdir().unwrap();
        let (src, sub) = rel.split_once("::").unwrap_or((rel, ""));
        let src = match src.strip_prefix("shared:") {
            Some(s) => match &shared {
                Some(dir) => dir.join(s),
                None => continue, // shared_dir() already failed the run where it must exist
            },
            None => root.join(src),
        };
        assert!(view_of(&src, sub, tmp.path()), "{rel}: no view");
        let view = model_at(&tmp.path().join("model"), &Options::default().reader()).unwrap();
        let mut got = by_key(&*view, &[]);
        for t in view.hidden_tensors(&[]) {
            got.insert(t.meta().name.clone(), t);
        }
        let keys = keys.as_object().unwrap();
        // The record may hold a graph's save/restore plumbing (a TF1 Saver's `save/…`
        // constants), which the tree no longer shows and so its view no longer holds; every
        // other key TensorFlow read must be there.
        let plumbing = |k: &str| k.starts_with("save/") || k.starts_with("__inference_");
        let keys: serde_json::Map<String, serde_json::Value> = keys
            .iter()
            .filter(|(k, _)| !plumbing(k) || got.contains_key(k.as_bytes()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert_eq!(got.len(), keys.len(), "{rel}: keys");
        for (key, want) in &keys {
            let t = got
                .get(key.as_bytes())
                .unwrap_or_else(|| panic!("{rel}: {key} missing"));
            let meta = t.meta();
            assert_eq!(
                meta.dtype.name(),
                want["dtype"].as_str().unwrap(),
                "{rel}: {key}"
            );
            let shape: Vec<u64> = want["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_u64().unwrap())
                .collect();
            assert_eq!(meta.shape, shape, "{rel}: {key}");
            let bytes = bytes_of(&**t).unwrap();
            let fnv = format!("{:016x}", modelfs_io::source::fnv1a64(&bytes));
            assert_eq!(
                fnv,
                want["fnv1a64"].as_str().unwrap(),
                "{rel}: {key}: bytes"
            );
            checked += 1;
        }
    }
    assert!(checked > 8000);
}

/// Issue 26 item 12: a SavedModel's `.tf/` holds its variables, not its graph's constants;
/// a frozen graph (constants only) still has a view of them.
#[test]
fn the_tf_view_holds_variables_and_constants_only_without_them() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tf/graphs/tf1");
    let keys_of_view = |source: &Path| {
        let tmp = tempfile::tempdir().unwrap();
        assert!(view_of(source, "", tmp.path()), "{}", source.display());
        let view = model_at(&tmp.path().join("model"), &Options::default().reader()).unwrap();
        by_key(&*view, &[]).into_keys().collect::<Vec<_>>()
    };
    let all_of = |source: &Path| {
        let model = model_at(source, &Options::default().reader()).unwrap();
        let all = every_tensor(&*model, &[]);
        all.into_iter()
            .map(|(k, t)| (k, t.meta().format))
            .collect::<Vec<_>>()
    };
    let saved = root.join("savedmodel");
    let all = all_of(&saved);
    let variables: std::collections::BTreeSet<Vec<u8>> = all
        .iter()
        .filter(|(_, f)| *f == "tf-checkpoint")
        .map(|(n, _)| n.clone())
        .collect();
    assert!(!variables.is_empty());
    assert!(all.iter().any(|(_, f)| *f == "tf-graph"));
    let got: std::collections::BTreeSet<Vec<u8>> = keys_of_view(&saved).into_iter().collect();
    assert_eq!(got, variables);
    let frozen = root.join("frozen");
    let constants = all_of(&frozen);
    assert!(constants.iter().all(|(_, f)| *f == "tf-graph"));
    assert!(!keys_of_view(&frozen).is_empty());
}
