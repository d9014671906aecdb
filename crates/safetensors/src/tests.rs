//! Against the files the real `safetensors` package wrote (scripts/gen_safetensors.py) and what
//! that package reads back from them (fixtures/safetensors/expected.json).

use std::path::Path;

use super::*;
use crate::model::expect::{elements_as, expected, shape};
use crate::model::DirEntry;
use crate::testing::fixtures_dir;

fn dir() -> PathBuf {
    fixtures_dir().join("safetensors")
}

fn opened(path: &Path) -> Arc<dyn Model> {
    let m = open_path(path, &ReaderOptions::default()).unwrap();
    m.expect("a safetensors source")
}

/// Every tensor the writer wrote reads back as the writer reads it: the same shape, and the
/// same bytes for every dtype modelfs decodes (the others are listed with a problem).
fn check(model: &dyn Model, files: &[&str]) -> usize {
    let exp = expected("safetensors");
    let mut checked = 0;
    for f in files {
        for (key, want) in exp[f].as_object().unwrap() {
            let path = crate::model::key_path(key);
            let t = model.tensor(&path).unwrap();
            let m = t.meta();
            assert_eq!(m.extra["safetensors_dtype"], want["dtype"], "{key}");
            if matches!(want["dtype"].as_str().unwrap(), "F4" | "F8_E8M0") {
                assert_eq!(m.shape, shape(&want["shape"]), "{key}");
                // Listed with a note (not a problem), their bytes served as stored.
                assert_eq!(m.problem, None, "{key}");
                assert!(m.note.as_deref().unwrap().contains("not decoded"), "{key}");
                let n = m.stored.as_ref().unwrap().bytes;
                assert_eq!(
                    t.read_stored(crate::source::ReadCtx::none(), 0, n as usize)
                        .unwrap()
                        .len() as u64,
                    n
                );
                continue;
            }
            elements_as(&*t, want, key);
            checked += 1;
        }
    }
    checked
}

#[test]
fn every_dtype_reads_as_the_writer_reads_it() {
    let m = opened(&dir().join("dtypes.safetensors"));
    assert_eq!(check(&*m, &["dtypes.safetensors"]), 20);
    let names = |e: &[DirEntry]| {
        e.iter()
            .map(|e| match e {
                DirEntry::Tensor(n) | DirEntry::Dir(n) => String::from_utf8_lossy(n).into_owned(),
                DirEntry::Document(n) => format!("doc:{}", String::from_utf8_lossy(n)),
                _ => "?".into(),
            })
            .collect::<Vec<_>>()
    };
    // Keys split on '/' only: a dotted PyTorch name is one file.
    let root = names(&m.list_dir(&[]).unwrap());
    assert_eq!(
        root,
        [
            "t",
            "model.layers.0.bias",
            "model.layers.0.weight",
            "doc:__metadata__.json"
        ]
    );
    let mut meta = Vec::new();
    m.document(&[crate::model::own_component(METADATA)])
        .unwrap()
        .render(0, &mut meta)
        .unwrap();
    let meta: serde_json::Value = serde_json::from_slice(&meta).unwrap();
    assert_eq!(meta["format"], "pt");
    let s = m.summary().unwrap();
    assert_eq!((s.format.as_str(), s.tensors), ("safetensors", 22));
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    assert_eq!(s.notes.len(), 2, "{:?}", s.notes);
}

#[test]
fn a_sharded_model_is_one_tree() {
    let files = [
        "sharded/model-00001-of-00002.safetensors",
        "sharded/model-00002-of-00002.safetensors",
    ];
    // The directory, or its index.
    for path in [
        dir().join("sharded"),
        dir().join("sharded/model.safetensors.index.json"),
    ] {
        let m = opened(&path);
        assert_eq!(check(&*m, &files), 4);
        assert_eq!(m.summary().unwrap().tensors, 4);
    }
}

#[test]
fn a_shard_the_index_names_must_exist() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(
        tmp.path().join("model.safetensors.index.json"),
        r#"{"weight_map": {"w": "missing.safetensors"}}"#,
    )
    .unwrap();
    let opts = ReaderOptions::default();
    let files = files_of(&*opts.storage, tmp.path()).unwrap().unwrap();
    let err = open(&files, &opts).err().unwrap().to_string();
    assert!(err.contains("missing.safetensors"), "{err}");
    std::fs::write(
        tmp.path().join("model.safetensors.index.json"),
        r#"{"weight_map": {"w": "../escape.safetensors"}}"#,
    )
    .unwrap();
    assert!(files_of(&*opts.storage, tmp.path()).is_err());
}

/// Damaged copies of a real file (cut anywhere, a byte flipped anywhere in the header) open
/// with an error or read with errors: never a panic.
#[test]
fn damaged_files_never_panic() {
    let good = std::fs::read(dir().join("dtypes.safetensors")).unwrap();
    crate::testing::for_each_damaged(&good, 7, 3, fuzz_file);
}

/// torch's HuggingFace writer with `save_distributed` (4 ranks, fixtures/dcp/safetensors_multi):
/// each rank's file holds its shards; every tensor assembled equals what torch reads back
/// (fixtures/dcp/expected.json), its shards its partitions. A rank's file missing leaves gaps
/// that are its tensors' problems; the format records no whole shape, so a tensor whose last
/// rows were all in that file reads as the rows that remain (`model.rows`: 9 of 10) — the
/// gaps of the others say the source is incomplete.
#[test]
fn dcp_distributed_shards_are_assembled() {
    use sha2::{Digest, Sha256};
    let src = fixtures_dir().join("dcp/safetensors_multi");
    let exp = expected("dcp");
    let reads = exp["fixtures"]["safetensors_multi"]["reads"]
        .as_object()
        .unwrap();
    let m = opened(&src);
    for (key, want) in reads {
        let t = m.tensor(&crate::model::key_path(key)).unwrap();
        assert_eq!(shape(&want["shape"]), t.meta().shape, "{key}");
        let n = t.meta().num_elements().unwrap() as usize * t.meta().dtype.elem_size().unwrap();
        let mut out = vec![0u8; n];
        t.fill_elements(crate::source::ReadCtx::none(), 0, &mut out)
            .unwrap();
        let got: String = Sha256::digest(&out)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(got, want["sha256"].as_str().unwrap(), "{key}");
    }
    assert_eq!(m.summary().unwrap().problems, Vec::<String>::new());
    assert_eq!(
        m.tensor(&crate::model::key_path("model.grid"))
            .unwrap()
            .meta()
            .partitions
            .len(),
        4
    );

    let tmp = tempfile::tempdir().unwrap();
    for f in std::fs::read_dir(&src).unwrap() {
        let f = f.unwrap();
        if !f.file_name().to_string_lossy().starts_with("shard-00004") {
            std::fs::copy(f.path(), tmp.path().join(f.file_name())).unwrap();
        }
    }
    let m = opened(tmp.path());
    let t = m.tensor(&crate::model::key_path("model.rows")).unwrap();
    assert_eq!(t.meta().shape, vec![9, 6]);
    let t = m.tensor(&crate::model::key_path("model.grid")).unwrap();
    assert!(
        t.meta()
            .problem
            .as_deref()
            .is_some_and(|p| p.contains("gaps")),
        "{:?}",
        t.meta().problem
    );
}
