//! Tables read whole (`model::scan`) agree with rows looked up by id, for every kind of
//! keyed table in the fixtures; `diff --rows` finds exactly the changes made; DeepRec EVs are
//! keyed tables whose rows equal what was saved.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::Value;

use super::rowdiff::tables;
use modelfs_io::source::ReadCtx;
use modelfs_layout::Patient;
use modelfs_model::scan::{Batch, TableScan};
use modelfs_model::testing::{fixtures_dir, MemTensor};
use modelfs_model::{KeyKind, Model, Tensor};
use modelfs_stats::rowdelta::{diff_rows, diff_rows_by, key_sets, Change, RowSummary, Way};

fn open(rel: &str) -> Arc<dyn Model> {
    modelfs_detect::model_at(&fixtures_dir().join(rel), &Default::default())
        .unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// Every (id, row) a scan gives, in scan order.
fn scan_all(t: &Arc<dyn Tensor>) -> Result<Vec<(i64, Vec<u8>)>, modelfs_model::ModelError> {
    let scan = TableScan::new(t.clone())?.unwrap();
    let mut b = Batch::default();
    let mut out = Vec::new();
    let rb = scan.row_bytes();
    for k in 0..scan.pieces() {
        scan.read_piece(k, &mut b)?;
        assert_eq!(b.values().len(), b.ids.len() * rb);
        for (i, &id) in b.ids.iter().enumerate() {
            // What a scan gives back by position is the row it read.
            let mut again = Vec::new();
            scan.row(b.positions[i], id, &mut again).unwrap();
            assert_eq!(again, b.values()[i * rb..(i + 1) * rb]);
            out.push((id, again));
        }
    }
    Ok(out)
}

/// The matrices of an Angel fixture that fail to load (its `expected.json` says `error`).
fn failing(rel: &str) -> BTreeSet<String> {
    let Some(dir) = rel.strip_suffix("/model") else {
        return BTreeSet::new();
    };
    let Ok(b) = std::fs::read(fixtures_dir().join(dir).join("expected.json")) else {
        return BTreeSet::new();
    };
    let v: Value = serde_json::from_slice(&b).unwrap();
    let m = v["matrices"].as_object().cloned().unwrap_or_default();
    m.into_iter()
        .filter(|(_, x)| x.get("error").is_some())
        .map(|(k, _)| k)
        .collect()
}

#[test]
fn every_keyed_table_scans_as_it_is_looked_up() {
    let mut kinds = BTreeSet::new();
    let mut rows = 0;
    for rel in [
        "deeprec/clean/model.ckpt",
        "tf/hashtable/tf1/model",
        "tf/hashtable/tf2/ckpt",
        "angel/formats/model",
        "angel/hash/model",
        "angel/lr35/model",
        "angel/tree/model",
        "monolith/ps_export",
    ] {
        let model = open(rel);
        let all = tables(&*model).unwrap();
        assert!(!all.is_empty(), "{rel}: no tables");
        for (name, t) in &all {
            let got = match scan_all(t) {
                Ok(got) => got,
                // A matrix the fixture says Angel cannot load: its rows fail to read too.
                Err(_) if failing(rel).contains(name) => continue,
                Err(e) => panic!("{rel} {name}: {e}"),
            };
            let mut seen: BTreeMap<i64, usize> = BTreeMap::new();
            for (id, _) in &got {
                *seen.entry(*id).or_default() += 1;
            }
            for (id, row) in &got {
                let mut want = Vec::new();
                let hit = t.row_by_id(*id, &mut want).unwrap();
                // An id saved more than once (a DenseHashTable's sentinel) is not a row.
                match seen[id] {
                    1 => assert_eq!(hit.map(|_| want), Some(row.clone()), "{rel} {name} {id}"),
                    _ => assert!(hit.is_none(), "{rel} {name} {id}"),
                }
            }
            if let Some(n) = TableScan::new(t.clone()).unwrap().unwrap().rows() {
                assert_eq!(got.len() as u64, n, "{rel} {name}");
            }
            kinds.insert(t.key_kind().unwrap().name());
            rows += got.len();
        }
    }
    for k in [KeyKind::HashKey, KeyKind::RowIndex, KeyKind::ColumnId] {
        assert!(kinds.contains(k.name()), "{k:?} not covered: {kinds:?}");
    }
    assert!(rows > 1000, "{rows}");
}

use modelfs_model::testing::f32s;

/// DeepRec EVs: listed as TensorFlow lists the checkpoint; each EV (a partitioned one whole,
/// its parts by name too, and the Adagrad slots) gives the saved row, freq and version for
/// every saved id, nothing for others; `.json` tells the EV's facts.
#[test]
fn deeprec_evs_are_keyed_tables() {
    for case in ["clean", "bad"] {
        let dir = fixtures_dir().join("deeprec").join(case);
        let want = modelfs_model::expect::expected_at(&dir);
        let listing: Vec<String> =
            serde_json::from_slice(&std::fs::read(dir.join("listing.json")).unwrap()).unwrap();
        let model = modelfs_detect::model_at(&dir.join("model.ckpt"), &Default::default()).unwrap();
        let listed: BTreeSet<String> = super::inspect::walk(&*model)
            .unwrap()
            .into_iter()
            .map(|f| String::from_utf8_lossy(&f.tensor.meta().name).into_owned())
            .collect();
        assert_eq!(
            listed,
            listing.into_iter().collect(),
            "{case}: listing changed"
        );
        let unlisted: Vec<String> = model
            .unlisted_tables()
            .unwrap()
            .iter()
            .map(|p| String::from_utf8_lossy(&p.join(&b'/')).into_owned())
            .collect();
        assert_eq!(
            unlisted,
            [
                "item_emb",
                "item_emb/Adagrad",
                "user_emb",
                "user_emb/Adagrad"
            ]
        );
        let mut checked = 0;
        for (name, ev) in want.as_object().unwrap() {
            let path = modelfs_model::key_path(name);
            let t = model.tensor(&path).unwrap();
            assert_eq!(t.key_kind(), Some(KeyKind::HashKey), "{name}");
            let facts = &t.meta().extra["embedding_variable"];
            let rows = ev["rows"].as_object().unwrap();
            assert_eq!(facts["dim"], ev["dim"], "{name}");
            assert_eq!(facts["entries"], rows.len(), "{name}");
            assert_eq!(
                facts["filtered_entries"],
                ev["filtered"].as_array().unwrap().len(),
                "{name}"
            );
            assert_eq!(
                facts["columns"],
                serde_json::json!(["freq", "version"]),
                "{name}"
            );
            for (id, values) in rows {
                let id: i64 = id.parse().unwrap();
                let found = modelfs_layout::rows::find(&*t, id).unwrap().unwrap();
                let v = modelfs_model::expect::f32_list(values);
                assert_eq!(f32s(&found.values), v, "{name} {id}");
                let j = found.json(&*t);
                assert_eq!(j["freq"], ev["freqs"][id.to_string()], "{name} {id}");
                assert_eq!(j["version"], ev["versions"][id.to_string()], "{name} {id}");
                checked += 1;
            }
            for id in ev["absent"]
                .as_array()
                .unwrap()
                .iter()
                .chain(ev["filtered"].as_array().unwrap())
            {
                let mut out = Vec::new();
                assert!(
                    t.row_by_id(id.as_i64().unwrap(), &mut out)
                        .unwrap()
                        .is_none(),
                    "{name} {id}"
                );
            }
        }
        assert!(checked >= 290, "{checked}");
    }
}

/// A hash table of `keys` and rows of `dim` float32 values.
fn table(keys: &[i64], values: &[f32], dim: u64) -> Arc<dyn Tensor> {
    let n = keys.len() as u64;
    let k = MemTensor::i64(&[n], keys).named(b"t-keys").arc();
    let v = MemTensor::f32(&[n, dim], values).named(b"t-values").arc();
    Arc::new(modelfs_tf::hashtable::HashTable::pair(b"t".to_vec(), k, v, None).unwrap())
}

/// Two saves of a table a step of training apart, as `diff --rows` must see them (`table`:
/// how a table is made of its keys, values and width): 1 % of ids changed, 0.1 % removed and
/// 0.1 % added, rows in another order; −0.0 for 0.0 and a NaN for a NaN are no change.
/// A, B, what differs, and A's rows.
#[allow(clippy::type_complexity)]
fn training_step(
    n: usize,
    table: impl Fn(&[i64], &[f32], u64) -> Arc<dyn Tensor>,
) -> (
    Arc<dyn Tensor>,
    Arc<dyn Tensor>,
    BTreeMap<i64, Change>,
    usize,
) {
    const DIM: usize = 4;
    let mut x = 0x1234_5678_9abc_def0u64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut ids: Vec<i64> = (0..n).map(|_| next() as i64).collect();
    ids.sort_unstable();
    ids.dedup();
    let n = ids.len();
    let mut values: Vec<f32> = (0..n * DIM)
        .map(|i| (i % 1000) as f32 * 0.5 - 3.0)
        .collect();
    values[0] = 0.0;
    values[DIM] = f32::NAN;
    let a = table(&ids, &values, DIM as u64);

    let mut want: BTreeMap<i64, Change> = BTreeMap::new();
    let mut b_rows: Vec<(i64, Vec<f32>)> = Vec::new();
    for (i, &id) in ids.iter().enumerate() {
        let mut row = values[i * DIM..(i + 1) * DIM].to_vec();
        match i % 1000 {
            0 if i == 0 => row[0] = -0.0,
            5 => {
                want.insert(id, Change::Removed);
                continue;
            }
            10..=19 => {
                row[i % DIM] += 0.25;
                want.insert(id, Change::Changed(0.25));
            }
            _ => {}
        }
        b_rows.push((id, row));
    }
    for _ in 0..n / 1000 {
        let id = next() as i64;
        if ids.binary_search(&id).is_err() && !want.contains_key(&id) {
            want.insert(id, Change::Added);
            b_rows.push((id, vec![1.0; DIM]));
        }
    }
    // Another order: a hash table's after more inserts.
    b_rows.sort_by_key(|(id, _)| (*id as u64).wrapping_mul(0x2545_F491_4F6C_DD1D));
    let bk: Vec<i64> = b_rows.iter().map(|r| r.0).collect();
    let bv: Vec<f32> = b_rows.iter().flat_map(|r| r.1.clone()).collect();
    let b = table(&bk, &bv, DIM as u64);
    (a, b, want, n)
}

#[test]
fn diff_rows_finds_every_change_and_no_other() {
    let (a, b, want, n) = training_step(300_000, table);
    let (sa, sb) = (
        TableScan::new(a).unwrap().unwrap(),
        TableScan::new(b).unwrap().unwrap(),
    );
    let mut got = BTreeMap::new();
    let s = diff_rows(&sa, &sb, &Patient, &mut |id, c| {
        assert!(got.insert(id, c).is_none(), "{id} twice");
        Ok(())
    })
    .unwrap();
    assert_eq!(got.len(), want.len());
    assert!(got == want, "differences differ");
    let count = |c: fn(&Change) -> bool| want.values().filter(|x| c(x)).count() as u64;
    assert_eq!(s.changed, count(|c| matches!(c, Change::Changed(_))));
    assert_eq!(s.added, count(|c| *c == Change::Added));
    assert_eq!(s.removed, count(|c| *c == Change::Removed));
    assert_eq!(s.unchanged + s.changed + s.removed, n as u64);
    assert!(
        s.changed > 2000 && s.added > 200 && s.removed > 200,
        "{s:?}"
    );
    assert_eq!(s.delta.max_abs, 0.25);
    assert!(s.rel_l2().unwrap() > 0.0);

    // The key sets of A and B: what was added and removed, named.
    let k = key_sets(&sa, &sb, &Patient).unwrap();
    assert_eq!((k.only_table, k.only_slot), (s.removed, s.added));
    assert_eq!(k.sample_table.len(), modelfs_stats::rowdelta::SAMPLE);
    for id in &k.sample_table {
        assert_eq!(want[id], Change::Removed);
    }
    for id in &k.sample_slot {
        assert_eq!(want[id], Change::Added);
    }
}

/// Dense tables by row index, and rows of another width (retyped, not compared).
#[test]
fn dense_tables_compare_by_row_and_widths_must_agree() {
    let v: Vec<f32> = (0..800).map(|i| i as f32).collect();
    let mut w = v.clone();
    w[8 * 37 + 3] = -1.0;
    let a = TableScan::new(MemTensor::f32(&[100, 8], &v).arc())
        .unwrap()
        .unwrap();
    let b = TableScan::new(MemTensor::f32(&[100, 8], &w).arc())
        .unwrap()
        .unwrap();
    let mut got = Vec::new();
    let s = diff_rows(&a, &b, &Patient, &mut |id, c| {
        got.push((id, c));
        Ok(())
    })
    .unwrap();
    assert_eq!(got, [(37, Change::Changed(8.0 * 37.0 + 3.0 + 1.0))]);
    assert_eq!((s.unchanged, s.changed), (99, 1));
    let c = TableScan::new(MemTensor::f32(&[200, 4], &v).arc())
        .unwrap()
        .unwrap();
    assert!(diff_rows(&a, &c, &Patient, &mut |_, _| Ok(())).is_err());
}

/// `diff --rows` reads a TF hash table's keys and values once, without their checksum passes,
/// and confirms their CRC32Cs from what it read: a byte changed in the stored values fails
/// the diff (and `check`'s key sets), as a checksum pass would have.
#[test]
fn a_scan_read_once_still_fails_on_a_bad_checksum() {
    let src = fixtures_dir().join("tf/hashtable/tf2");
    let dir = tempfile::tempdir().unwrap();
    for f in ["ckpt.index", "ckpt.data-00000-of-00001"] {
        std::fs::copy(src.join(f), dir.path().join(f)).unwrap();
    }
    let at = |d: &std::path::Path| {
        let model = modelfs_detect::model_at(&d.join("ckpt"), &Default::default())
            .unwrap_or_else(|e| panic!("{}: {e}", d.display()));
        tables(&*model).unwrap()
    };
    let clean = at(&src);
    let (name, t) = clean
        .iter()
        .find(|(_, t)| t.key_kind() == Some(KeyKind::HashKey) && t.meta().shape[0] > 1)
        .expect("a hash table");
    // Its stored values, found in the data file, get one bit flipped.
    let (_, values) = t.as_keyed().unwrap().key_value_tensors().unwrap();
    let len = values.meta().num_elements().unwrap() as usize * 4;
    let mut v = vec![0u8; len];
    values.read_elements(ReadCtx::none(), 0, &mut v).unwrap();
    let data = dir.path().join("ckpt.data-00000-of-00001");
    let mut bytes = std::fs::read(&data).unwrap();
    let start = bytes
        .windows(len)
        .position(|w| w == v)
        .expect("the values in the data file");
    bytes[start + len / 2] ^= 0x10;
    std::fs::write(&data, bytes).unwrap();

    let bad = at(dir.path());
    let scan = |t: &Arc<dyn Tensor>| TableScan::new(t.clone()).unwrap().unwrap().deferring();
    let (sa, sb) = (scan(&bad[name]), scan(t));
    // (The clean table's checksums are known by now: its reads need no pass.)
    assert!(sa.is_deferring());
    let err = diff_rows(&sa, &sb, &Patient, &mut |_, _| Ok(())).unwrap_err();
    assert!(err.to_string().contains("checksum"), "{err}");
    let bad = at(dir.path());
    let sa = scan(&bad[name]);
    assert!(sa.is_deferring());
    let err = key_sets(&sb, &sa, &Patient).unwrap_err();
    assert!(err.to_string().contains("checksum"), "{err}");
    // The clean table against itself: read once, confirmed, no change.
    let s = diff_rows(&scan(t), &scan(t), &Patient, &mut |_, _| Ok(())).unwrap();
    assert_eq!((s.changed, s.added, s.removed), (0, 0, 0));
    assert_eq!(s.unchanged + s.repeated[0], t.meta().shape[0]);
    assert!(s.unchanged > 0);
}

/// A hash table as a TF bundle keeps one: keys and values each with a checksum a reader of
/// every byte confirms (`TableScan::deferring` reads it once).
fn checksummed_table(keys: &[i64], values: &[f32], dim: u64) -> Arc<dyn Tensor> {
    let n = keys.len() as u64;
    let k = MemTensor::i64(&[n], keys)
        .named(b"t-keys")
        .checksummed()
        .arc();
    let v = MemTensor::f32(&[n, dim], values)
        .named(b"t-values")
        .checksummed()
        .arc();
    Arc::new(modelfs_tf::hashtable::HashTable::pair(b"t".to_vec(), k, v, None).unwrap())
}

/// Every line in order, and the summary, by `way` (and the way taken).
fn diff_lines(
    a: &Arc<dyn Tensor>,
    b: &Arc<dyn Tensor>,
    way: Way,
) -> (Vec<(i64, Change)>, RowSummary, Way) {
    let scan = |t: &Arc<dyn Tensor>| TableScan::new(t.clone()).unwrap().unwrap().deferring();
    let (sa, sb) = (scan(a), scan(b));
    let mut lines = Vec::new();
    let (s, taken) = diff_rows_by(
        &sa,
        &sb,
        &Patient,
        &mut |id, c| {
            lines.push((id, c));
            Ok(())
        },
        way,
    )
    .unwrap();
    (lines, s, taken)
}

/// A hash table's rows sketched (`stats::sketch`) give the spill's lines, in the spill's
/// order, and its counts; tables the sketch cannot take are spilled.
#[test]
fn a_sketch_of_the_differences_says_what_the_spill_says() {
    let (a, b, want, n) = training_step(200_000, checksummed_table);
    let (lines, s, taken) = diff_lines(&a, &b, Way::Sketch);
    assert_eq!(taken, Way::Sketch);
    let (spilled, t, taken) = diff_lines(&a, &b, Way::Spill);
    assert_eq!(taken, Way::Spill);
    assert!(
        lines == spilled,
        "{} lines sketched, {} spilled",
        lines.len(),
        spilled.len()
    );
    let got: BTreeMap<i64, Change> = lines.iter().copied().collect();
    assert!(
        got == want && got.len() == lines.len(),
        "differences differ"
    );
    // Every count the same (the deltas' sums may differ in their last bits: below).
    assert_eq!(
        RowSummary {
            delta: t.delta,
            ..s
        },
        t
    );
    assert_eq!(s.unchanged + s.changed + s.removed, n as u64);
    assert_eq!(s.delta.max_abs, t.delta.max_abs);
    let (x, y) = (s.rel_l2().unwrap(), t.rel_l2().unwrap());
    assert!((x - y).abs() <= 1e-12 * y, "{x} vs {y}");

    // The same table: nothing left once unchanged rows cancel.
    let (lines, s, taken) = diff_lines(&a, &a, Way::Sketch);
    assert_eq!(
        (lines.len(), s.unchanged, taken),
        (0, n as u64, Way::Sketch)
    );

    // A table as long as a DenseHashTable's bucket array may save ids twice: spilled.
    let keys: Vec<i64> = (0..1024).map(|i| if i % 3 == 0 { -1 } else { i }).collect();
    let values: Vec<f32> = (0..1024 * 2).map(|i| i as f32).collect();
    let mut other = values.clone();
    other[2 * 5] = 100.0; // id 5 changed
    other[2 * 3] = 100.0; // a sentinel's bucket: not a row
    let (dense_a, dense_b) = (
        checksummed_table(&keys, &values, 2),
        checksummed_table(&keys, &other, 2),
    );
    let (lines, s, taken) = diff_lines(&dense_a, &dense_b, Way::Sketch);
    assert_eq!(taken, Way::Spill);
    assert_eq!(lines, [(5, Change::Changed(90.0))]);
    assert_eq!(s.repeated, [342, 342]);

    // More differences than the sketch holds (every row of 300 K changed): spilled, right.
    let ids: Vec<i64> = (0..300_001).collect();
    let zeros = vec![0f32; ids.len()];
    let ones = vec![1f32; ids.len()];
    let (za, ob) = (
        checksummed_table(&ids, &zeros, 1),
        checksummed_table(&ids, &ones, 1),
    );
    let (lines, s, taken) = diff_lines(&za, &ob, Way::Sketch);
    assert_eq!(taken, Way::Spill);
    assert_eq!((lines.len(), s.changed), (ids.len(), ids.len() as u64));
}

/// What decides, for big tables, whether a sketch would peel: the differences estimated
/// from a sample of ids, exact when every id is sampled, near when one in 16 is.
#[test]
fn the_differences_are_estimated_from_a_sample_of_ids() {
    let (a, b, want, n) = training_step(200_000, checksummed_table);
    let scan = |t: &Arc<dyn Tensor>| TableScan::new(t.clone()).unwrap().unwrap().deferring();
    let (sa, sb) = (scan(&a), scan(&b));
    // A changed row is in a sketch twice (A's and B's), and so is the row whose 0.0 became
    // −0.0: other bytes, the same number.
    let exact: u64 = 2 + want
        .values()
        .map(|c| match c {
            Change::Changed(_) => 2,
            _ => 1,
        })
        .sum::<u64>();
    let est = |sample| modelfs_stats::sketch::estimate([&sa, &sb], sample, &Patient).unwrap();
    assert_eq!(est(1 << 20), (exact, 1));
    let (e, rate) = est(n as u64 / 16);
    assert_eq!(rate, 16);
    assert!(
        e.abs_diff(exact) < exact / 4,
        "{e} estimated, {exact} exact"
    );
    assert_eq!(
        modelfs_stats::sketch::estimate([&sa, &sa], 1 << 20, &Patient)
            .unwrap()
            .0,
        0
    );
}

/// Two saves of a `MutableHashTable` a training step apart, both written by TensorFlow (its
/// own `remove` and `insert` between them, so the export order changed): the sketch finds
/// exactly what the generator's truth file says, in the spill's lines.
#[test]
fn a_step_saved_by_tensorflow_is_sketched_to_its_truth() {
    let dir = fixtures_dir().join("tf/hashtable/step");
    let truth = std::fs::read_to_string(dir.join("b/truth")).unwrap();
    let want: BTreeMap<i64, String> = truth
        .lines()
        .map(|l| {
            let mut f = l.split('\t');
            (
                f.next().unwrap().parse().unwrap(),
                f.next().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(want.len(), 36, "the fixture's truth");
    let table = |side: &str| {
        let model = modelfs_detect::model_at(&dir.join(side).join("ckpt"), &Default::default())
            .unwrap_or_else(|e| panic!("{side}: {e}"));
        tables(&*model).unwrap()["m/emb"].clone()
    };
    let (a, b) = (table("a"), table("b"));
    let (lines, s, taken) = diff_lines(&a, &b, Way::Sketch);
    assert_eq!(taken, Way::Sketch);
    let got: BTreeMap<i64, String> = lines
        .iter()
        .map(|&(id, c)| {
            let what = match c {
                Change::Added => "added",
                Change::Removed => "removed",
                Change::Changed(d) => {
                    assert!((d - 0.25).abs() < 1e-6, "{id}: {d}");
                    "changed"
                }
            };
            (id, what.to_string())
        })
        .collect();
    assert!(got == want, "{got:?}");
    assert_eq!((s.rows_a, s.rows_b, s.unchanged), (3000, 3000, 2967));
    let (spilled, _, taken) = diff_lines(&a, &b, Way::Spill);
    assert_eq!((spilled, taken), (lines.clone(), Way::Spill));
    // Checksums settled by now, the scans no longer defer: still sketched, the same lines.
    let (again, _, taken) = diff_lines(&a, &b, Way::Sketch);
    assert_eq!((again, taken), (lines, Way::Sketch));
}
