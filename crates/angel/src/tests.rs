//! Fixture and real-world tests of the Angel reader. The fixtures under `fixtures/angel/` are
//! written by `scripts/gen-angel-fixtures` (python, independent of this code); each case's
//! `expected.json` holds exact values. No python is needed here.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;

use super::*;
use crate::model::expect::shape;
use crate::model::{DType, ReaderOptions, SparseRows, Tensor};
use crate::source::ReadCtx;

fn fixtures() -> PathBuf {
    crate::testing::fixtures_dir().join("angel")
}

fn opts(sep: &str) -> ReaderOptions {
    ReaderOptions {
        sep: sep.to_string(),
        ..ReaderOptions::default()
    }
}

/// The expected-value string of element `i` of `values` (fixture convention).
fn value_str(dtype: DType, values: &[u8], i: usize) -> String {
    let w = dtype.elem_size().unwrap();
    let b = &values[i * w..(i + 1) * w];
    match dtype {
        DType::F32 | DType::F64 => {
            let be: Vec<u8> = b.iter().rev().copied().collect();
            format!(
                "0x{}",
                be.iter().map(|x| format!("{x:02x}")).collect::<String>()
            )
        }
        DType::I32 => i32::from_le_bytes(b.try_into().unwrap()).to_string(),
        DType::I64 => i64::from_le_bytes(b.try_into().unwrap()).to_string(),
        d => panic!("unexpected dtype {d:?}"),
    }
}

fn triples(t: &dyn Tensor, s: &SparseRows) -> Vec<(u64, i64, String)> {
    let mut out = Vec::new();
    for (ri, &row) in s.rows.iter().enumerate() {
        for i in s.row_ptr[ri] as usize..s.row_ptr[ri + 1] as usize {
            out.push((row, s.cols[i], value_str(t.meta().dtype, &s.values, i)));
        }
    }
    out
}

fn expected_triples(e: &Value) -> Vec<(u64, i64, String)> {
    e["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t[0].as_u64().unwrap(),
                t[1].as_i64().unwrap(),
                t[2].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Every way of reading `t` fails, and the message names `needle`.
fn assert_fails(name: &str, t: &dyn Tensor, needle: &str) {
    let err = match (&t.meta().problem, t.sparse()) {
        (Some(p), _) => p.clone(),
        (None, Err(e)) => e.to_string(),
        (None, Ok(_)) => panic!("{name}: expected an error containing '{needle}'"),
    };
    assert!(
        err.contains(needle),
        "{name}: error '{err}' lacks '{needle}'"
    );
    // Reads by range find a fault where it is: read every element (fixtures are small).
    let meta = t.meta();
    let n = meta.num_elements().unwrap_or(2).clamp(2, 1 << 16);
    let mut buf = vec![0u8; n as usize * meta.dtype.elem_size().unwrap_or(4)];
    assert!(
        t.read_elements(ReadCtx::none(), 0, &mut buf).is_err(),
        "{name}: read_elements succeeded"
    );
}

fn check_matrix(case: &str, name: &str, t: &Arc<dyn Tensor>, e: &Value) {
    let ctx = format!("{case}/{name}");
    if let Some(needle) = e.get("error").and_then(Value::as_str) {
        return assert_fails(&ctx, &**t, needle);
    }
    let meta = t.meta();
    assert_eq!(meta.problem, None, "{ctx}");
    assert_eq!(meta.dtype.name(), e["dtype"].as_str().unwrap(), "{ctx}");
    assert_eq!(meta.shape, shape(&e["shape"]), "{ctx}");
    assert_eq!(meta.sparse, e["sparse"].as_bool().unwrap(), "{ctx}");
    assert_eq!(meta.extra["sparse"], e["sparse"], "{ctx}");
    let s = t.sparse().unwrap_or_else(|err| panic!("{ctx}: {err}"));
    assert_eq!(s.rows, shape(&e["rows"]), "{ctx}: saved rows");
    let want = expected_triples(e);
    assert_eq!(triples(&**t, &s), want, "{ctx}: entries");
    check_ranges(&ctx, &**t, &s);
    check_rows(&ctx, &**t, &s);
    // Range partitions are read by range; overlapping (hash) ones are merged whole.
    if case != "hash" {
        assert!(t.sparse_shape_is_cheap(), "{ctx}: not read by range");
    }
    // Partitions: each decodes on its own; together (shifted back) they hold every entry.
    let mut total = 0;
    for (i, pm) in meta.partitions.iter().enumerate() {
        let p = t.partition(i).unwrap();
        let ps = p
            .sparse()
            .unwrap_or_else(|err| panic!("{ctx} part {i}: {err}"));
        total += ps.nnz();
        let want_rows = if meta.sparse {
            meta.shape[0]
        } else {
            pm.extent[0].1
        };
        assert_eq!(p.meta().shape[0], want_rows, "{ctx} part {i}");
        check_ranges(&format!("{ctx} part {i}"), &*p, &ps);
    }
    assert_eq!(total, s.nnz(), "{ctx}: partition entries");
    // Dense reads agree with the entries (small matrices only).
    let n = meta.num_elements().filter(|&n| n <= 1 << 16);
    if let (Some(n), Some(w)) = (n, meta.dtype.elem_size()) {
        let mut dense = vec![0u8; n as usize * w];
        t.read_elements(ReadCtx::none(), 0, &mut dense).unwrap();
        let cols = meta.shape[1];
        for (ri, &row) in s.rows.iter().enumerate() {
            for k in s.row_ptr[ri] as usize..s.row_ptr[ri + 1] as usize {
                let at = (row * cols + s.cols[k] as u64) as usize * w;
                assert_eq!(&dense[at..at + w], &s.values[k * w..(k + 1) * w], "{ctx}");
            }
        }
        // An unaligned window equals the same bytes of the full read.
        if n > 3 {
            let mut part = vec![0u8; (n as usize - 3) * w];
            t.read_elements(ReadCtx::none(), 2, &mut part).unwrap();
            assert_eq!(&part[..], &dense[2 * w..(n as usize - 1) * w], "{ctx}");
        }
    }
}

/// Rows by id (`row_by_id`) agree with the whole decode: every stored id is found with its
/// values (zero where a row lacks the column), ids next to them are not found unless stored.
fn check_rows(ctx: &str, t: &dyn Tensor, s: &SparseRows) {
    use crate::model::KeyKind;
    let w = t.meta().dtype.elem_size().unwrap();
    let kind = t.key_kind().unwrap_or_else(|| panic!("{ctx}: not keyed"));
    let value = |k: usize, col: i64| -> Vec<u8> {
        let (a, b) = (s.row_ptr[k] as usize, s.row_ptr[k + 1] as usize);
        match s.cols[a..b].binary_search(&col) {
            Ok(i) => s.values[(a + i) * w..(a + i + 1) * w].to_vec(),
            Err(_) => vec![0; w],
        }
    };
    let mut ids: Vec<i64> = match kind {
        KeyKind::ColumnId => s.cols.clone(),
        _ => s.rows.iter().map(|&r| r as i64).collect(),
    };
    ids.sort_unstable();
    ids.dedup();
    let probes = ids
        .iter()
        .flat_map(|&c| [c.saturating_sub(1), c, c.saturating_add(1)])
        .chain([i64::MIN, -1, 0, i64::MAX]);
    for id in probes {
        let mut got = Vec::new();
        let hit = t
            .row_by_id(id, &mut got)
            .unwrap_or_else(|e| panic!("{ctx}: row {id}: {e}"));
        let want: Option<Vec<u8>> = match kind {
            KeyKind::ColumnId => ids
                .binary_search(&id)
                .ok()
                .map(|_| (0..s.rows.len()).flat_map(|k| value(k, id)).collect()),
            KeyKind::RowId | KeyKind::RowIndex => {
                let cols = t.meta().shape[1] as i64;
                match s.rows.binary_search(&(id as u64)) {
                    Ok(k) if id >= 0 => Some((0..cols).flat_map(|c| value(k, c)).collect()),
                    // A dense matrix's unsaved rows are rows of zeros.
                    _ if kind == KeyKind::RowIndex
                        && (0..t.meta().shape[0] as i64).contains(&id) =>
                    {
                        Some(vec![0; cols as usize * w])
                    }
                    _ => None,
                }
            }
            KeyKind::HashKey => unreachable!("{ctx}"),
        };
        assert_eq!(
            hit.is_some(),
            want.is_some(),
            "{ctx}: row {id} found ({kind:?})"
        );
        if let Some(want) = want {
            assert_eq!(got, want, "{ctx}: row {id} ({kind:?})");
        }
    }
}

/// Reads by range (`sparse_shape`, `read_entries`, `seek_col`) agree with the whole decode.
fn check_ranges(ctx: &str, t: &dyn Tensor, s: &SparseRows) {
    let shape = t.sparse_shape().unwrap();
    assert_eq!(shape.rows, s.rows, "{ctx}: shape rows");
    assert_eq!(shape.row_ptr, s.row_ptr, "{ctx}: shape row_ptr");
    let w = t.meta().dtype.elem_size().unwrap();
    let nnz = s.nnz();
    for step in [1u64, 2, 3, 7, nnz.max(1)] {
        let mut got = crate::model::Entries::default();
        let mut at = 0;
        while at < nnz {
            let n = step.min(nnz - at);
            t.entries()
                .and_then(|e| e.read_entries(ReadCtx::none(), at, n, &mut got))
                .unwrap_or_else(|e| panic!("{ctx}: entries {at}+{n}: {e}"));
            at += n;
        }
        assert_eq!(got.cols, s.cols, "{ctx}: columns read by {step}");
        assert_eq!(got.values, s.values, "{ctx}: values read by {step}");
        assert_eq!(got.values.len() as u64, nnz * w as u64);
    }
    let mut got = crate::model::Entries::default();
    assert!(
        t.entries()
            .and_then(|e| e.read_entries(ReadCtx::none(), nnz, 1, &mut got))
            .is_err(),
        "{ctx}: past the end"
    );
    for k in 0..s.rows.len() {
        let (a, b) = (s.row_ptr[k] as usize, s.row_ptr[k + 1] as usize);
        let row = &s.cols[a..b];
        let probes = row
            .iter()
            .flat_map(|&c| [c.saturating_sub(1), c, c.saturating_add(1)])
            .chain([i64::MIN, -1, 0, i64::MAX]);
        for c in probes {
            let want = (a + row.partition_point(|&x| x < c)) as u64;
            assert_eq!(
                t.entries().unwrap().seek_col(k, c).unwrap(),
                want,
                "{ctx}: row {k} seek {c}"
            );
        }
    }
}

fn check_case(case: &str, sep_override: Option<&str>) {
    check_case_at(case, &fixtures().join(case).join("model"), sep_override)
}

/// `check_case` of the model at `model_dir` (a copy of the case's model).
fn check_case_at(case: &str, model_dir: &Path, sep_override: Option<&str>) {
    let dir = fixtures().join(case);
    let e = crate::model::expect::expected_at(&dir);
    let model_dir = model_dir.to_path_buf();
    let sep = sep_override.unwrap_or_else(|| e["sep"].as_str().unwrap_or(","));
    if let Some(needle) = e.get("open_error").and_then(Value::as_str) {
        assert!(is_model_dir(&crate::source::local(), &model_dir), "{case}");
        let err = open(&model_dir, &opts(sep)).err().expect(case).to_string();
        assert!(err.contains(needle), "{case}: '{err}' lacks '{needle}'");
        return;
    }
    assert!(is_model_dir(&crate::source::local(), &model_dir), "{case}");
    let model = open(&model_dir, &opts(sep)).unwrap();
    let listed: Vec<Vec<u8>> = model
        .list_dir(&[])
        .unwrap()
        .into_iter()
        .map(|d| match d {
            DirEntry::Tensor(n) => n,
            other => panic!("{case}: unexpected {other:?}"),
        })
        .collect();
    let want: Vec<Vec<u8>> = e["matrices"]
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.as_bytes().to_vec())
        .collect();
    assert_eq!(listed, want, "{case}: listing");
    for (name, me) in e["matrices"].as_object().unwrap() {
        let t = model.tensor(&[name.as_bytes().to_vec()]).unwrap();
        check_matrix(case, name, &t, me);
    }
    let summary = model.summary().unwrap();
    assert_eq!(summary.tensors as usize, want.len());
}

#[test]
fn fixture_lr35() {
    check_case("lr35", None);
}
#[test]
fn fixture_formats() {
    check_case("formats", None);
}
#[test]
fn fixture_tree() {
    check_case("tree", None);
}
#[test]
fn fixture_crlf() {
    check_case("crlf", None);
}
/// A writer whose meta counts the CRs of its CR LF lines: the meta's own windows are exact
/// and read (the same data as case `crlf`, whose files are LF copies).
#[test]
fn fixture_crlf_meta() {
    check_case("crlf_meta", None);
}

/// The text fixtures whose text partitions are written with CR LF line endings into a
/// directory; the metas are left as they are (a copy) or count the CRs (`count_crs`).
const TEXT_CASES: [&str; 6] = ["formats", "nolf", "lr35", "numbers", "sep_tab", "tree"];

fn crlf_copy(case: &str, to: &Path, count_crs: bool) {
    let from = fixtures().join(case).join("model");
    let mut converted = 0;
    copy_tree(&from, to, &mut |name, data| {
        // Text partitions only: metas, checksums and binary partitions stay as they are.
        let text = data
            .iter()
            .all(|&c| c == b'\n' || c == b'\t' || (b' '..=b'~').contains(&c));
        if name.starts_with(['_', '.']) || name == "meta" || !text {
            return data.to_vec();
        }
        converted += 1;
        data.iter()
            .flat_map(|&c| if c == b'\n' { vec![b'\r', c] } else { vec![c] })
            .collect()
    });
    assert!(converted > 0, "{case}: no text partition");
    if count_crs {
        count_crs_in_metas(&from, to);
    }
}

/// Rewrites every meta under `copy` so that its offsets and lengths count the CRs the copy
/// added to the data files of `orig`.
fn count_crs_in_metas(orig: &Path, copy: &Path) {
    for e in std::fs::read_dir(orig).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        if p.is_dir() {
            count_crs_in_metas(&p, &copy.join(&name));
            continue;
        }
        if name != "meta" && name != "_meta" {
            continue;
        }
        let raw = std::fs::read(&p).unwrap();
        let Some(mut meta) = raw
            .get(4..)
            .and_then(|b| serde_json::from_slice::<Value>(b).ok())
        else {
            continue;
        };
        let Some(parts) = meta["partMetas"].as_object_mut() else {
            continue;
        };
        for pm in parts.values_mut() {
            let file = pm["fileName"].as_str().unwrap().to_string();
            // A file that is missing (a meta of a tree case) or was not converted keeps it.
            let Ok(data) = std::fs::read(orig.join(&file)) else {
                continue;
            };
            if std::fs::read(copy.join(&file)).unwrap() == data {
                continue;
            }
            // An original position, in the copy: one CR more per LF before it.
            let moved =
                |at: u64| at + memchr::memchr_iter(b'\n', &data[..at as usize]).count() as u64;
            let (off, len) = (
                pm["offset"].as_u64().unwrap(),
                pm["length"].as_u64().unwrap(),
            );
            pm["offset"] = moved(off).into();
            pm["length"] = (moved(off + len) - moved(off)).into();
            for rm in pm["rowMetas"].as_object_mut().unwrap().values_mut() {
                // Column formats' row metas say -1: no position.
                if let Some(at) = rm["offset"].as_u64() {
                    rm["offset"] = moved(at).into();
                }
            }
        }
        let body = serde_json::to_vec(&meta).unwrap();
        let mut out = (body.len() as i32).to_be_bytes().to_vec();
        out.extend_from_slice(&body);
        std::fs::write(copy.join(&name), out).unwrap();
    }
}

/// Files that acquired CRLF line endings (formats/angel.md §9.7) read as the originals, in
/// every text format, with partitions sharing files, after partitions whose last line has no
/// LF (where the meta's line counts misplace them) and with other separators.
#[test]
fn crlf_copies_of_every_text_fixture() {
    for case in TEXT_CASES {
        let d = tempfile::tempdir().unwrap();
        crlf_copy(case, d.path(), false);
        check_case_at(case, d.path(), None);
    }
}

/// The same files saved by a writer whose meta counts the CRs read as the originals too: the
/// meta's own windows, exact in the file, also where a partition ends without LF before the
/// next one of its file.
#[test]
fn crlf_files_whose_metas_count_the_crs() {
    for case in TEXT_CASES {
        let d = tempfile::tempdir().unwrap();
        crlf_copy(case, d.path(), true);
        check_case_at(case, d.path(), None);
    }
}

fn copy_tree(from: &Path, to: &Path, f: &mut dyn FnMut(&str, &[u8]) -> Vec<u8>) {
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if src.is_dir() {
            std::fs::create_dir(&dst).unwrap();
            copy_tree(&src, &dst, f);
        } else {
            let name = e.file_name().to_string_lossy().into_owned();
            std::fs::write(&dst, f(&name, &std::fs::read(&src).unwrap())).unwrap();
        }
    }
}

/// Java writers end some text partitions without LF (Angel's own test LR): every text
/// format reads exactly, also where a partition starts right after an unterminated one.
#[test]
fn fixture_partitions_without_final_lf() {
    check_case("nolf", None);
}
#[test]
fn fixture_numbers() {
    check_case("numbers", None);
}
#[test]
fn fixture_separators_explicit_and_detected() {
    check_case("sep_tab", None);
    check_case("sep_colon", None);
    check_case("sep_tab", Some(","));
    check_case("sep_colon", Some(","));
}
#[test]
fn fixture_hash() {
    check_case("hash", None);
}
#[test]
fn fixture_bad() {
    check_case("bad", None);
}
#[test]
fn fixture_refusals() {
    check_case("refuse_legacy", None);
    check_case("refuse_writeutf", None);
}

#[test]
fn single_matrix_folder_opens() {
    let dir = fixtures().join("lr35/model/input_weight");
    assert!(is_model_dir(&crate::source::local(), &dir));
    let m = open(&dir, &opts(",")).unwrap();
    assert_eq!(
        m.list_dir(&[]).unwrap(),
        vec![DirEntry::Tensor(b"input_weight".to_vec())]
    );
}

#[test]
fn not_a_model() {
    let d = tempfile::tempdir().unwrap();
    assert!(!is_model_dir(&crate::source::local(), d.path()));
    let err = open(d.path(), &opts(",")).err().unwrap().to_string();
    assert!(err.contains("_meta"), "{err}");
}

// ---- real-world models (skipped when the shared directory is absent) ----

/// Independent reading of a `col,value` text file: rows split by the given counts.
fn read_colid_value_text(path: &Path) -> Vec<(i64, f32)> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let (c, v) = l.split_once(',').unwrap();
            (c.parse().unwrap(), v.parse().unwrap())
        })
        .collect()
}

#[test]
fn realworld_lr_three_partitions_two_files() {
    let Some(sh) = crate::testing::shared_dir() else {
        return;
    };
    let root = sh.join("realworld/angel/angel_19608468/lr");
    let model = open(&root, &opts(",")).unwrap();
    let names: Vec<DirEntry> = model.list_dir(&[]).unwrap();
    assert_eq!(
        names,
        vec![
            DirEntry::Tensor(b"input_bias".to_vec()),
            DirEntry::Tensor(b"input_weight".to_vec())
        ]
    );
    let t = model.tensor(&[b"input_weight".to_vec()]).unwrap();
    let m = t.meta();
    assert_eq!(
        (m.dtype, m.shape.clone(), m.sparse),
        (DType::F32, vec![3, 2147483657], true)
    );
    assert_eq!(m.partitions.len(), 3);
    assert_eq!(m.partitions[2].file, "0");
    assert_eq!(m.partitions[2].offset, 3820);
    assert_eq!(m.extra["rowType"], 12);
    let s = t.sparse().unwrap();
    assert_eq!(s.rows, vec![0, 1, 2]);
    assert_eq!(s.row_ptr, vec![0, 123, 246, 246]);
    let want = read_colid_value_text(&root.join("input_weight/0"));
    for (i, (c, v)) in want.iter().enumerate() {
        assert_eq!(s.cols[i], *c);
        assert_eq!(&s.values[i * 4..i * 4 + 4], &v.to_le_bytes());
    }
    for i in 0..3 {
        t.partition(i).unwrap().sparse().unwrap();
    }
}

#[test]
fn realworld_models_decode() {
    let Some(sh) = crate::testing::shared_dir() else {
        return;
    };
    let base = sh.join("realworld/angel");
    for rel in [
        "angel_19608468/lr",
        "angel_54894bf2/lr",
        "serving/deepFM/deepFM-model/0",
        "serving/lr/lr-model/6",
    ] {
        let root = base.join(rel);
        assert!(is_model_dir(&crate::source::local(), &root), "{rel}");
        let model = open(&root, &opts(",")).unwrap();
        for d in model.list_dir(&[]).unwrap() {
            let DirEntry::Tensor(name) = d else { panic!() };
            let t = model.tensor(std::slice::from_ref(&name)).unwrap();
            let ctx = format!("{rel}/{}", String::from_utf8_lossy(&name));
            assert_eq!(t.meta().problem, None, "{ctx}");
            let s = t.sparse().unwrap_or_else(|e| panic!("{ctx}: {e}"));
            assert!(s.nnz() > 0, "{ctx}");
            if !t.meta().sparse {
                let n = t.meta().num_elements().unwrap() as usize;
                let mut buf = vec![0u8; n * 4];
                t.read_elements(ReadCtx::none(), 0, &mut buf).unwrap();
            }
        }
    }
    // §3.6 embedding: 24 × 148, rows 0-7 saved; value j of line c is element (j, c).
    let root = base.join("serving/deepFM/deepFM-model/0");
    let model = open(&root, &opts(",")).unwrap();
    let t = model.tensor(&[b"embedding_embedding".to_vec()]).unwrap();
    assert_eq!(t.meta().shape, vec![24, 148]);
    let text = std::fs::read_to_string(root.join("embedding_embedding/0")).unwrap();
    let mut all = vec![0u8; 24 * 148 * 4];
    t.read_elements(ReadCtx::none(), 0, &mut all).unwrap();
    for (c, line) in text.lines().enumerate() {
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f[0].parse::<usize>().unwrap(), c);
        for j in 0..8 {
            let v: f32 = f[j + 1].parse().unwrap();
            let at = (j * 148 + c) * 4;
            assert_eq!(&all[at..at + 4], &v.to_le_bytes());
        }
    }
    assert!(
        all[8 * 148 * 4..].iter().all(|&b| b == 0),
        "unsaved rows are zeros"
    );
}
