//! Angel model directories: metas whose counts, offsets and lengths overflow or point past
//! the file, truncated and deleted data files, flipped meta and data bytes. Angel files carry
//! no checksum, so a flipped data byte can change values silently; what is checked there is
//! that nothing panics, hangs or over-allocates. Everything else: the affected matrix fails
//! with an error naming its file, every other matrix reads exactly as before.

use std::path::{Path, PathBuf};

use modelfs_detect::model_at;
use modelfs_layout::Layout;
use serde_json::Value;

use super::harness::*;
use super::tf::options;

fn formats_model() -> Option<PathBuf> {
    let p = fixtures().join("angel/formats/model");
    p.is_dir().then_some(p)
}

fn open_and_snapshot(dir: &Path) -> Result<Snapshot, String> {
    let model = model_at(dir, &options().reader()).map_err(|e| e.to_string())?;
    Ok(snapshot(&*model, Some(&layout_ctx(Layout::all()))))
}

/// The JSON of a meta file (4-byte big-endian length envelope, or bare JSON).
fn read_meta(path: &Path) -> Value {
    let b = std::fs::read(path).unwrap();
    let json =
        if b.len() >= 4 && u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize == b.len() - 4 {
            &b[4..]
        } else {
            &b[..]
        };
    serde_json::from_slice(json).unwrap()
}

fn write_meta(path: &Path, v: &Value) {
    let json = serde_json::to_vec(v).unwrap();
    let mut b = (json.len() as u32).to_be_bytes().to_vec();
    b.extend_from_slice(&json);
    std::fs::write(path, b).unwrap();
}

fn meta_path(matrix: &Path) -> PathBuf {
    ["_meta", "meta"]
        .iter()
        .map(|m| matrix.join(m))
        .find(|p| p.is_file())
        .unwrap()
}

/// One matrix per format (a sparse int-key float one, a dense long-key double one).
fn chosen(model: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(model)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with("float_intkey_sparse") || n.ends_with("double_longkey_dense"))
        .collect();
    names.sort();
    names
}

/// A change to one matrix's meta JSON.
type Edit = (&'static str, fn(&mut Value));

fn first_part(v: &mut Value) -> &mut Value {
    let parts = v["partMetas"].as_object_mut().unwrap();
    let k = parts
        .keys()
        .min_by_key(|k| k.parse::<i64>().unwrap_or(0))
        .unwrap()
        .clone();
    parts.get_mut(&k).unwrap()
}

fn first_row(v: &mut Value) -> Option<&mut Value> {
    let rows = first_part(v)["rowMetas"].as_object_mut()?;
    let k = rows.keys().next()?.clone();
    rows.get_mut(&k)
}

const EDITS: &[Edit] = &[
    ("elementNum 2^40", |v| {
        if let Some(r) = first_row(v) {
            r["elementNum"] = (1u64 << 40).into();
        }
        first_part(v)["saveColNum"] = (1u64 << 40).into();
    }),
    ("elementNum i64::MAX", |v| {
        if let Some(r) = first_row(v) {
            r["elementNum"] = i64::MAX.into();
        }
        first_part(v)["saveColNum"] = i64::MAX.into();
    }),
    ("saveColNum 2^40", |v| {
        first_part(v)["saveColNum"] = (1u64 << 40).into()
    }),
    ("offset 0x7FFFFFFFFFFFFFF0 length 16", |v| {
        first_part(v)["offset"] = 0x7FFF_FFFF_FFFF_FFF0u64.into();
        first_part(v)["length"] = 16.into();
    }),
    ("length 2^62", |v| {
        first_part(v)["length"] = (1u64 << 62).into()
    }),
    ("length + 1", |v| {
        let l = first_part(v)["length"].as_u64().unwrap();
        first_part(v)["length"] = (l + 1).into();
    }),
    ("offset past the end", |v| {
        let l = first_part(v)["length"].as_u64().unwrap();
        first_part(v)["offset"] = (l + 1).into();
    }),
    ("row 2^31-1 col 2^62", |v| {
        v["row"] = i32::MAX.into();
        v["col"] = (1u64 << 62).into();
        first_part(v)["endRow"] = i32::MAX.into();
    }),
];

/// Which outcome of matrix `m` the rule allows: affected matrices fail (`must_fail`) or may
/// read as before; others read exactly as before.
fn check(case: &str, good: &Snapshot, bad: &Snapshot, m: &str, must_fail: bool) {
    let v = compare(case, good, bad);
    for (path, msg) in &v.failed {
        assert!(
            path.first().is_some_and(|c| c == m.as_bytes()),
            "case {case}: matrix /{} is not the one corrupted, yet fails: {msg}",
            show(path)
        );
    }
    if must_fail {
        let failed = v
            .failed
            .iter()
            .any(|(p, _)| p.first().is_some_and(|c| c == m.as_bytes()));
        let listed = bad
            .tensors
            .keys()
            .any(|p| p.first().is_some_and(|c| c == m.as_bytes()));
        assert!(
            failed || !listed,
            "case {case}: the corrupted matrix still reads"
        );
    }
    assert_named(case, &v, &[m, "_meta", "meta"]);
}

#[test]
fn angel_meta_counts_offsets_and_lengths_overflow() {
    let _g = serial();
    let Some(model) = formats_model() else { return };
    let tmp = tempfile::tempdir().unwrap();
    copy_tree(&model, tmp.path());
    let root = tmp.path().to_path_buf();
    let good = open_and_snapshot(&root).unwrap();
    let bound = ALLOC_SLACK + tree_bytes(&root);
    for m in chosen(&root) {
        let mp = meta_path(&root.join(&m));
        let pristine = std::fs::read(&mp).unwrap();
        for (what, edit) in EDITS {
            let mut v = read_meta(&mp);
            edit(&mut v);
            write_meta(&mp, &v);
            let case = format!("{m}: {what}");
            let r = root.clone();
            let bad = run_case(&case, bound, move || open_and_snapshot(&r)).unwrap();
            check(&case, &good, &bad, &m, true);
        }
        std::fs::write(&mp, &pristine).unwrap();
    }
}

#[test]
fn angel_data_files_truncated_and_deleted() {
    let _g = serial();
    let Some(model) = formats_model() else { return };
    let tmp = tempfile::tempdir().unwrap();
    copy_tree(&model, tmp.path());
    let root = tmp.path().to_path_buf();
    let good = open_and_snapshot(&root).unwrap();
    let bound = ALLOC_SLACK + tree_bytes(&root);
    for m in chosen(&root) {
        for file in ["0", "1"] {
            let path = root.join(&m).join(file);
            let Ok(pristine) = std::fs::read(&path) else {
                continue;
            };
            let len = pristine.len();
            let mut cuts: Vec<usize> = vec![0, 1, len / 3, len / 2, len - 1];
            cuts.sort();
            cuts.dedup();
            for cut in cuts.into_iter().filter(|&c| c < len) {
                std::fs::write(&path, &pristine[..cut]).unwrap();
                let case = format!("{m}/{file} truncated to {cut} of {len}");
                let r = root.clone();
                let bad = run_case(&case, bound, move || open_and_snapshot(&r)).unwrap();
                check(&case, &good, &bad, &m, len > 0);
            }
            std::fs::remove_file(&path).unwrap();
            let case = format!("{m}/{file} deleted");
            let r = root.clone();
            let bad = run_case(&case, bound, move || open_and_snapshot(&r)).unwrap();
            check(&case, &good, &bad, &m, true);
            std::fs::write(&path, &pristine).unwrap();
        }
    }
}

/// Flips every byte of each chosen matrix's meta and data files: no panic, hang or
/// over-allocation (values may change: Angel has no checksums).
#[test]
fn angel_byte_flips_never_panic() {
    let _g = serial();
    let Some(model) = formats_model() else { return };
    for m in chosen(&model) {
        let tmp = tempfile::tempdir().unwrap();
        copy_tree(&model.join(&m), tmp.path());
        let dir = tmp.path().to_path_buf();
        let bound = ALLOC_SLACK + tree_bytes(&dir);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .collect();
        files.sort();
        for f in files {
            let pristine = std::fs::read(&f).unwrap();
            let step = pristine.len() / 300 + 1;
            for pos in (0..pristine.len()).step_by(step) {
                let mut b = pristine.clone();
                b[pos] ^= 0xff;
                std::fs::write(&f, &b).unwrap();
                let case = format!(
                    "{m}/{} byte {pos} flipped",
                    f.file_name().unwrap().to_string_lossy()
                );
                let d = dir.clone();
                let _ = run_case(&case, bound, move || open_and_snapshot(&d));
            }
            std::fs::write(&f, &pristine).unwrap();
        }
    }
}

/// The committed bad models (each matrix broken one way) and the real-world ones.
#[test]
fn angel_bad_and_real_world_models_never_panic() {
    let _g = serial();
    let mut dirs = vec![
        fixtures().join("angel/bad/model"),
        fixtures().join("angel/hash/model"),
    ];
    if let Some(s) = shared_dir() {
        for e in std::fs::read_dir(s.join("realworld/angel"))
            .into_iter()
            .flatten()
            .flatten()
        {
            dirs.push(e.path());
        }
    }
    for d in dirs.into_iter().filter(|d| d.is_dir()) {
        let case = d.display().to_string();
        let bound = ALLOC_SLACK + tree_bytes(&d);
        let dd = d.clone();
        let _ = run_case(&case, bound, move || open_and_snapshot(&dd));
    }
}
