//! The `.angel/` view read back by modelfs's own Angel reader (which shares no code with the
//! writers): every tensor of every fixture and real-world model, in every format, equals its
//! source as Angel values.

use std::path::Path;
use std::sync::Arc;

use super::*;
use crate::{build, NAMES};
use modelfs_detect::model_at;
use modelfs_io::source::ReadCtx;
use modelfs_layout::cache::ChunkCache;
use modelfs_layout::elements::for_each_value;
use modelfs_model::testing::{key, MemModel, MemTensor};
use modelfs_model::{DType, Model, ReaderOptions};

fn ctx(format: Option<AngelFormat>) -> Arc<LayoutCtx> {
    Arc::new(LayoutCtx {
        max_dense: 64 << 20,
        angel_format: format,
        ..LayoutCtx::new(vec![], ChunkCache::new(64 << 20))
    })
}

fn read_all(f: &dyn FileContent) -> Vec<u8> {
    let size = f.size_for(&Patient).unwrap() as usize;
    let mut out = vec![0u8; size];
    let mut at = 0;
    while at < size {
        // Odd read sizes cross partition and record boundaries.
        let end = (at + 7919).min(size);
        let n = f.read_at(at as u64, &mut out[at..end]).unwrap();
        assert!(n > 0, "short read at {at} of {size}");
        at += n;
    }
    let mut extra = [0u8; 4];
    assert_eq!(f.read_at(size as u64, &mut extra).unwrap(), 0);
    out
}

/// Writes `view` under `dir`; returns (folder, key, format class) per matrix.
fn write_view(view: &View, dir: &Path) -> Vec<(String, Vec<u8>, String)> {
    let mut out = Vec::new();
    for (i, (name, e)) in view.entries().iter().enumerate() {
        let ViewEntry::Dir(d) = e else {
            panic!("a file at the top of .angel/")
        };
        // Short names: keys can be longer than a file name may be.
        let f = format!("m{i}");
        let sub = dir.join(&f);
        std::fs::create_dir(&sub).unwrap();
        let mut class = String::new();
        let (mut meta, mut new_meta) = (None, None);
        for (file, e) in d.entries().unwrap().iter() {
            let ViewEntry::File(c) = e else {
                panic!("a folder inside a matrix folder")
            };
            let bytes = read_all(&**c);
            let file = String::from_utf8(file.clone()).unwrap();
            if file == "_meta" {
                new_meta = Some(bytes);
            } else if file == "meta" {
                meta = Some(bytes.clone());
                let n = i32::from_be_bytes(bytes[..4].try_into().unwrap()) as usize;
                assert_eq!(n + 4, bytes.len());
                let j: serde_json::Value = serde_json::from_slice(&bytes[4..]).unwrap();
                // A key that is not UTF-8 is named lossily (JSON has only Unicode strings).
                assert_eq!(j["matrixName"], *String::from_utf8_lossy(name));
                class = j["formatClassName"].as_str().unwrap().to_string();
                let mut rewritten = j.clone();
                rewritten["matrixName"] = f.clone().into();
                let json = serde_json::to_vec(&rewritten).unwrap();
                let mut m = (json.len() as i32).to_be_bytes().to_vec();
                m.extend_from_slice(&json);
                std::fs::write(sub.join("meta"), m).unwrap();
            } else {
                std::fs::write(sub.join(file), bytes).unwrap();
            }
        }
        // Angel ≥ 3.2's name for the same meta.
        assert!(meta.is_some() && new_meta == meta, "{f}: _meta and meta");
        out.push((f, name.clone(), class));
    }
    out
}

/// A tensor's values as Angel writes them (big-endian binary of its Angel value type).
fn angel_bytes(t: &dyn Tensor) -> Vec<u8> {
    let meta = t.meta();
    let value = AngelValue::of(meta.dtype).unwrap();
    let mut out = Vec::new();
    for_each_value(
        t,
        ReadCtx::none(),
        0,
        meta.num_elements().unwrap(),
        |_, v| value.num(v).write_binary(&mut out),
    )
    .unwrap();
    out
}

/// Stored entries: saved rows, entries per row, columns, values.
fn entries(t: &dyn Tensor) -> (Vec<u64>, Vec<u64>, Vec<i64>, Vec<u8>) {
    let s = t.sparse().unwrap();
    let counts = s.row_ptr.windows(2).map(|w| w[1] - w[0]).collect();
    (s.rows.clone(), counts, s.cols.clone(), s.values.clone())
}

/// Builds `.angel/` of `model`'s root `root`, writes it, reads it back with the Angel
/// reader and compares every matrix with its source. Returns (matrices, data files).
fn round_trip(
    model: &dyn Model,
    root: &[Vec<u8>],
    ctx: &Arc<LayoutCtx>,
    part: u64,
) -> (usize, usize) {
    let mut sources = super::super::tensors(model, root).unwrap();
    // Sources whose data cannot be read (the bad fixtures) have nothing to compare.
    sources.retain(|t| {
        let m = t.meta();
        if m.sparse {
            return t.sparse().is_ok();
        }
        let Some(es) = m.dtype.elem_size() else {
            return true;
        };
        let n = m.num_elements().unwrap_or(0) as usize;
        n * es > 64 << 20
            || t.read_elements(ReadCtx::none(), 0, &mut vec![0u8; n * es])
                .is_ok()
    });
    sources.sort_by(|a, b| a.meta().name.cmp(&b.meta().name));
    let view = view_with(sources.clone(), ctx, part);
    let tmp = tempfile::tempdir().unwrap();
    let written = write_view(&view, tmp.path());
    let files = written
        .iter()
        .map(|(f, _, _)| std::fs::read_dir(tmp.path().join(f)).unwrap().count() - 1)
        .sum();
    if written.is_empty() {
        return (0, 0);
    }
    let back = model_at(tmp.path(), &ReaderOptions::default()).unwrap();
    for (f, name, class) in &written {
        let src = sources.iter().find(|t| &t.meta().name == name).unwrap();
        let got = back.tensor(&[f.as_bytes().to_vec()]).unwrap();
        let (sm, gm) = (src.meta(), got.meta());
        let what = format!("{} ({class})", String::from_utf8_lossy(name));
        assert!(gm.problem.is_none(), "{what}: {:?}", gm.problem);
        assert_eq!(gm.sparse, sm.sparse, "{what}");
        if sm.sparse {
            assert_eq!(gm.shape[0], sm.shape[0], "{what}");
            assert_eq!(gm.dtype, sm.dtype, "{what}");
            if let Some(rt) = sm.extra.get("rowType") {
                assert_eq!(&gm.extra["rowType"], rt, "{what}");
            }
            assert_eq!(entries(&*got), entries(&**src), "{what}");
        } else {
            let (rows, cols) = sm.rows_cols().unwrap();
            assert_eq!(gm.shape, vec![rows, cols], "{what}");
            assert_eq!(angel_bytes(&*got), angel_bytes(&**src), "{what}");
        }
    }
    (written.len(), files)
}

/// Every directory of fixtures/ and ../shared/realworld that opens as a model.
fn sources() -> Vec<std::path::PathBuf> {
    modelfs_model::testing::model_dirs(|p| model_at(p, &ReaderOptions::default()).is_ok())
}

#[test]
fn every_fixture_reads_back_from_the_angel_view() {
    let ctx = ctx(None);
    let (mut matrices, mut files, mut models) = (0, 0, 0);
    for source in sources() {
        let model = model_at(&source, &ReaderOptions::default()).unwrap();
        for root in model.model_roots() {
            // Small partitions: every multi-partition and multi-file path is taken.
            let (m, f) = round_trip(&*model, &root, &ctx, 4096);
            matrices += m;
            files += f;
            models += 1;
        }
    }
    eprintln!("{models} models, {matrices} matrices, {files} data files");
    assert!(models >= 40, "only {models} models found");
    assert!(matrices >= 300, "only {matrices} matrices");
    assert!(
        files > matrices,
        "{files} data files for {matrices} matrices"
    );
}

fn add(m: &mut MemModel, name: &str, t: MemTensor) {
    m.add(key(name), t.named(name.as_bytes()));
}

fn mem_model() -> MemModel {
    let mut m = MemModel::default();
    let f: Vec<f32> = (0..3000).map(|i| (i as f32 * 0.37).sin() * 1e3).collect();
    add(&mut m, "dense/w", MemTensor::f32(&[50, 60], &f));
    add(&mut m, "wide", MemTensor::f32(&[3000], &f));
    add(
        &mut m,
        "d64",
        MemTensor::f64(
            &[7, 9],
            &(0..63).map(|i| i as f64 / 7.0 - 3.0).collect::<Vec<_>>(),
        ),
    );
    add(
        &mut m,
        "ints",
        MemTensor::i64(
            &[4, 5],
            &(0..20).map(|i| i * -7_000_000_000).collect::<Vec<_>>(),
        ),
    );
    let half: Vec<u8> = (0..40u16)
        .flat_map(|i| half::f16::from_f32(i as f32 / 3.0).to_bits().to_le_bytes())
        .collect();
    add(&mut m, "half", MemTensor::new(DType::F16, &[8, 5], half));
    add(
        &mut m,
        "flags",
        MemTensor::new(DType::Bool, &[2, 3], vec![1, 0, 1, 1, 0, 0]),
    );
    add(&mut m, "scalar", MemTensor::f32(&[], &[2.5]));
    add(&mut m, "empty", MemTensor::f32(&[0, 4], &[]));
    add(
        &mut m,
        "names",
        MemTensor::strings(&[2], vec![b"a".to_vec(), b"b".to_vec()]),
    );
    let n = 500usize;
    let sparse = SparseRows {
        rows: vec![0, 2, 9],
        row_ptr: vec![0, n as u64, n as u64, 2 * n as u64],
        cols: (0..n as i64)
            .map(|i| i * 1_000_003)
            .chain((0..n as i64).map(|i| i * 7))
            .collect(),
        values: (0..2 * n)
            .flat_map(|i| (i as f32 - 99.5).to_le_bytes())
            .collect(),
    };
    add(
        &mut m,
        "lr",
        MemTensor::sparse(DType::F32, 10, 6_000_000_000, sparse),
    );
    m
}

#[test]
fn every_format_reads_back() {
    let model = mem_model();
    for format in AngelFormat::ALL {
        let ctx = ctx(Some(format));
        let (matrices, files) = round_trip(&model, &[], &ctx, 2048);
        // Left out: the empty tensor and the strings.
        assert_eq!(matrices, 8, "{format:?}");
        assert!(files >= 12, "{format:?}: {files} files");
    }
}

#[test]
fn the_view_is_hidden_and_named_by_key() {
    assert!(NAMES.contains(&DIR));
    let model = mem_model();
    let view = build(DIR, &model, &[], &ctx(None)).unwrap();
    let names: Vec<String> = view
        .entries()
        .iter()
        .map(|(n, _)| String::from_utf8_lossy(n).into_owned())
        .collect();
    assert_eq!(
        names,
        ["d64", "dense/w", "flags", "half", "ints", "lr", "scalar", "wide"]
    );
}

#[test]
fn a_sparse_matrix_keeps_its_row_type_and_long_keys() {
    let model = mem_model();
    let view = view_with(
        vec![model.tensor(&key("lr")).unwrap()],
        &ctx(Some(AngelFormat::ValueBinary)),
        1 << 20,
    );
    let entries = view.entries();
    let ViewEntry::Dir(d) = &entries[0].1 else {
        panic!()
    };
    let files = d.entries().unwrap();
    let (_, ViewEntry::File(meta)) = files.iter().find(|(n, _)| n == b"meta").unwrap() else {
        panic!()
    };
    let bytes = read_all(&**meta);
    let j: serde_json::Value = serde_json::from_slice(&bytes[4..]).unwrap();
    // Value formats cannot hold sparse rows: the default is used.
    assert_eq!(
        j["formatClassName"],
        "com.tencent.angel.model.output.format.ColIdValueBinaryRowFormat"
    );
    // f32, sparse, columns beyond 2^31: T_FLOAT_SPARSE_LONGKEY.
    assert_eq!(j["rowType"], 12);
    assert_eq!(j["col"], 6_000_000_000i64);
    // 1000 entries × 12 bytes in one partition.
    assert_eq!(j["partMetas"]["0"]["length"], 12_000);
    assert_eq!(j["partMetas"]["0"]["rowMetas"]["9"]["elementNum"], 500);
    // A saved row without entries is written with none.
    assert_eq!(j["partMetas"]["0"]["rowMetas"]["2"]["elementNum"], 0);
}
