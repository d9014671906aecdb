//! Real checkpoints written by TensorFlow and other people's tools (shared/realworld/tf) and
//! our own generated fixtures (fixtures/tf): the listing equals TF's key list and every
//! tensor's bytes equal what TF's own reader returned (expected.npz).

mod common {
    pub mod npz;
    pub mod tf;
}

use std::path::{Path, PathBuf};

use common::tf::*;
use modelfs_core::options::Options;
use modelfs_detect::model_at;
use modelfs_io::source::ReadCtx;
use modelfs_model::testing::shared_dir;
use modelfs_model::{own_component, DType, DirEntry};

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
            t.read_elements(ReadCtx::none(), 0, &mut four).unwrap();
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

    // Not a checkpoint yet: an empty directory (a run before its first save) is an empty
    // model that says so when mounted, and an error for everything else.
    let empty = tempfile::tempdir().unwrap();
    let err = model_at(empty.path(), &Options::default().reader())
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("not recognised"), "{err}");
    let none = modelfs_detect::model_or_empty(empty.path(), &Options::default().reader()).unwrap();
    let s = none.summary().unwrap();
    assert_eq!(s.tensors, 0);
    assert!(
        s.problems[0].contains("no model here yet"),
        "{:?}",
        s.problems
    );
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
    use modelfs_io::codec::table::footer::{BlockHandle, Footer};
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

/// Issue 26 item 1: tf_keras `save_weights("weights/")` writes `weights/.index` and a state file
/// naming "."; the directory, the `.index` and the data file all open as that checkpoint, and
/// every value equals what TF's reader gave.
#[test]
fn a_checkpoint_with_an_empty_base_name_opens() {
    let case = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tf/keras_empty_prefix");
    let exp = case.join("expected");
    let w = case.join("weights");
    for src in [
        w.clone(),
        w.join(".index"),
        w.join(".data-00000-of-00001"),
        case.join("weights/"),
    ] {
        assert_eq!(check_case(&src, &exp), 4, "{}", src.display());
    }
    let out = cli_cat(&w, "layer_with_weights-0/kernel.txt");
    assert_eq!(out.iter().filter(|&&b| b == b'\n').count(), 12); // 3 × 4, one per line
}
