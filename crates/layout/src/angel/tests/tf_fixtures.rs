//! Round trips over the committed TensorFlow fixtures: every tensor of a dtype with an Angel
//! value type, through every Angel layout shown for it, decoded with the Angel reader's own
//! decoders and compared with the tensor's elements exactly.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::*;
use crate::model::{DirEntry, Model};

/// Every tensor of `m` (depth first) with its display path, plus its partitions.
pub(super) fn all_tensors(m: &dyn Model) -> Vec<(String, Arc<dyn Tensor>)> {
    fn walk(m: &dyn Model, dir: &mut Vec<Vec<u8>>, out: &mut Vec<(String, Arc<dyn Tensor>)>) {
        for e in m.list_dir(dir).unwrap() {
            match e {
                DirEntry::Dir(n) => {
                    dir.push(n);
                    walk(m, dir, out);
                    dir.pop();
                }
                DirEntry::Tensor(n) => {
                    dir.push(n);
                    let t = m.tensor(dir).unwrap();
                    let name = dir
                        .iter()
                        .map(|c| String::from_utf8_lossy(c).into_owned())
                        .collect::<Vec<_>>()
                        .join("/");
                    for i in 0..t.meta().partitions.len() {
                        out.push((format!("{name}#{i}"), t.partition(i).unwrap()));
                    }
                    out.push((name, t));
                    dir.pop();
                }
                DirEntry::Reserved(n) => {
                    dir.push(crate::model::own_component(&n));
                    walk(m, dir, out);
                    dir.pop();
                }
                DirEntry::Symlink { .. } | DirEntry::Document(_) | DirEntry::Alias { .. } => {}
            }
        }
    }
    let mut out = Vec::new();
    walk(m, &mut Vec::new(), &mut out);
    out
}

/// The checkpoint prefix of every TF fixture case (`expected/index.json`'s `prefix`).
pub(super) fn tf_fixture_prefixes() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tf");
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("expected/index.json").is_file())
        .collect();
    cases.sort();
    cases
        .into_iter()
        .map(|case| {
            let index = std::fs::read(case.join("expected/index.json")).unwrap();
            let v: serde_json::Value = serde_json::from_slice(&index).unwrap();
            case.join(v["prefix"].as_str().unwrap())
        })
        .collect()
}

#[test]
fn tf_fixtures_round_trip_through_every_angel_layout() {
    let mut checked = 0;
    for prefix in tf_fixture_prefixes() {
        let m = crate::tf::detect::open(&prefix, &crate::model::ReaderOptions::default())
            .map(|m| m.expect("a TF checkpoint"))
            .unwrap_or_else(|e| panic!("{}: {e}", prefix.display()));
        for (name, t) in all_tensors(&*m) {
            let meta = t.meta();
            if AngelValue::of(meta.dtype).is_none() || meta.dtype.elem_size().is_none() {
                for format in AngelFormat::ALL {
                    assert!(open(format, t.clone(), &ctx(",")).is_none(), "{name}");
                }
                continue;
            }
            let ctx = format!("{}: {name}", prefix.display());
            for sep in [",", "\t"] {
                checked += round_trip_shown(&ctx, t.clone(), sep);
            }
        }
    }
    assert!(checked > 500, "{checked}");
}
