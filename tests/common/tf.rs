//! Helpers shared by the TensorFlow integration tests: walking a model's tensors, checking a
//! fixture against what TensorFlow read back, and `modelfs cat`.
// Each test binary that includes this module uses a different part of it.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;

use super::npz::{read_npz, Npy};
use modelfs_core::options::Options;
use modelfs_detect::model_at;
use modelfs_io::source::ReadCtx;
use modelfs_model::{own_component, DType, DirEntry, Model, Tensor};

/// Every tensor of `format` under `dir`, by name.
pub fn walk(
    model: &dyn Model,
    format: &str,
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

pub fn tensors_of(model: &dyn Model) -> BTreeMap<Vec<u8>, Arc<dyn Tensor>> {
    let mut out = BTreeMap::new();
    walk(model, "tf-checkpoint", &mut Vec::new(), &mut out);
    out
}

/// Checks one case: `src` against `expected/index.json` + `expected.npz` in `exp_dir`.
pub fn check_case(src: &Path, exp_dir: &Path) -> usize {
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
        t.read_elements(ReadCtx::none(), 0, &mut buf).unwrap();
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
            t.read_elements(ReadCtx::none(), n - 1, &mut part).unwrap();
            assert_eq!(
                part,
                arr.data[(n as usize - 1) * e..],
                "{name}: last element"
            );
        }
    }
    want_names.len()
}

pub fn latin1(s: &str) -> Vec<u8> {
    s.chars().map(|c| c as u32 as u8).collect()
}

pub fn read_strings(t: &dyn Tensor, n: u64) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    t.for_each_string(ReadCtx::none(), 0, n, &mut |s| v.push(s.to_vec()))
        .unwrap();
    v
}

/// `modelfs cat SOURCE PATH`: the bytes the mounted file gives.
pub fn cli_cat(source: &Path, path: &str) -> Vec<u8> {
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
