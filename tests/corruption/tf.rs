//! TensorFlow checkpoints: `.index` byte flips, data files truncated, flipped or deleted, and
//! hand-built entries whose offsets, sizes, shapes and counts overflow.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use modelfs_core::options::Options;
use modelfs_detect::model_at;
use modelfs_layout::Layout;
use modelfs_tf::bundle::entry::{parse_entry, DataLoc};
use modelfs_tf::bundle::tensor_from_value;
use modelfs_tf::checkpoint::{block_cache_for, TfModel};
use modelfs_tf::writer::BundleBuilder;

use super::harness::*;

pub fn options() -> Options {
    Options {
        cache_dir: None,
        threads: 1,
        ..Options::default()
    }
}

/// Small fixture cases whose `.index` is flipped byte by byte.
const SMALL_CASES: &[&str] = &[
    "dtypes",
    "dtypes_exotic",
    "multi_shard",
    "nonutf8_keys",
    "object_tf2",
    "odd_keys",
    "partitioned",
    "partitioned_strings",
    "scalars_empty",
    "sharded_maxsize",
    "strings",
    "tf1_saver",
];

/// A fixture case copied into a fresh temporary directory: (dir guard, prefix path).
pub fn copy_case(case: &str) -> Option<(tempfile::TempDir, PathBuf)> {
    let src = fixtures().join("tf").join(case);
    if !src.is_dir() {
        eprintln!("fixture {case} missing, skipped");
        return None;
    }
    let tmp = tempfile::tempdir().unwrap();
    copy_tree(&src, tmp.path());
    let prefix = prefix_in(tmp.path())?;
    Some((tmp, prefix))
}

/// The checkpoint prefix in `dir` (the first `*.index`).
pub fn prefix_in(dir: &Path) -> Option<PathBuf> {
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.strip_suffix(".index").map(|p| dir.join(p))
        })
        .collect();
    names.sort();
    names.into_iter().next()
}

fn index_path(prefix: &Path) -> PathBuf {
    PathBuf::from(format!("{}.index", prefix.display()))
}

fn base_name(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}

fn bytes_of_prefix(prefix: &Path) -> u64 {
    tree_bytes(prefix.parent().unwrap())
}

/// Opens `prefix` and snapshots it (with every layout when `layouts`); the open error if any.
fn open_and_snapshot(prefix: &Path, layouts: bool) -> Result<Snapshot, String> {
    let model = model_at(prefix, &options().reader()).map_err(|e| e.to_string())?;
    let ctx = layouts.then(|| layout_ctx(Layout::all()));
    Ok(snapshot(&*model, ctx.as_ref()))
}

/// Flips (XOR 0xff) each chosen byte of `prefix.index` in turn; every flip either fails to
/// open with an error naming the index, or leaves every tensor failing or exact.
fn flip_index(
    label: &str,
    prefix: &Path,
    positions: impl Iterator<Item = usize>,
    layouts_every: usize,
) {
    let index = index_path(prefix);
    let pristine = std::fs::read(&index).unwrap();
    let good = open_and_snapshot(prefix, true).unwrap_or_else(|e| panic!("{label}: {e}"));
    let bound = ALLOC_SLACK + bytes_of_prefix(prefix);
    let names = [base_name(&index), base_name(prefix)];
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let (mut open_failed, mut some_failed, mut all_same, mut n) = (0, 0, 0, 0);
    for pos in positions.filter(|&p| p < pristine.len()) {
        let mut bad = pristine.clone();
        bad[pos] ^= 0xff;
        std::fs::write(&index, &bad).unwrap();
        let case = format!("{label}: .index byte {pos} flipped");
        let p = prefix.to_path_buf();
        let layouts = layouts_every > 0 && n % layouts_every == 0;
        n += 1;
        match run_case(&case, bound, move || open_and_snapshot(&p, layouts)) {
            Err(m) => {
                assert!(
                    names.iter().any(|n| m.contains(n)),
                    "case {case}: open error does not name the index: {m}"
                );
                open_failed += 1;
            }
            Ok(snap) => {
                let mut good = good.clone();
                if !layouts {
                    good.tensors
                        .values_mut()
                        .for_each(|t| t.layouts = Ok(Vec::new()));
                }
                let v = compare(&case, &good, &snap);
                assert_named(&case, &v, &names);
                if v.failed.is_empty() {
                    all_same += 1;
                } else {
                    some_failed += 1;
                }
            }
        }
    }
    std::fs::write(&index, &pristine).unwrap();
    eprintln!(
        "{label}: {n} flips: {open_failed} refused at open, {some_failed} with failing reads, {all_same} harmless"
    );
}

#[test]
fn index_flips_every_byte_of_small_fixtures() {
    let _g = serial();
    for case in SMALL_CASES {
        let Some((_tmp, prefix)) = copy_case(case) else {
            continue;
        };
        let len = std::fs::metadata(index_path(&prefix)).unwrap().len() as usize;
        flip_index(case, &prefix, 0..len, 32);
    }
}

#[test]
fn index_flips_sampled_in_the_multi_block_fixture() {
    let _g = serial();
    let Some((_tmp, prefix)) = copy_case("many_keys") else {
        return;
    };
    let len = std::fs::metadata(index_path(&prefix)).unwrap().len() as usize;
    // Both block trailers and the whole index block + footer densely, the rest sparsely.
    // (8000 tensors are read per flip: keep the sample small.)
    let tail = len.saturating_sub(100);
    let positions = (0..len).step_by(len / 20 + 1).chain(tail..len).chain(0..8);
    flip_index("many_keys", &prefix, positions, 0);
}

/// A checkpoint with many small blocks (Snappy or not): numbers, strings, a partitioned
/// tensor, nested names; two shards.
pub fn synth_multiblock(dir: &Path, snappy: bool) -> PathBuf {
    let mut b = BundleBuilder::new("synth");
    b.block_size = 200;
    b.snappy = snappy;
    for i in 0..60u32 {
        let v: Vec<f32> = (0..i % 7 + 1).map(|j| (i * 10 + j) as f32 * 0.5).collect();
        b.add_f32(
            format!("layer{:02}/w{i}", i % 9).as_bytes(),
            &[v.len() as u64],
            &v,
        );
    }
    for i in 0..10u32 {
        let items: Vec<Vec<u8>> = (0..i + 1)
            .map(|j| format!("s{i}-{j}\n").into_bytes())
            .collect();
        let refs: Vec<&[u8]> = items.iter().map(|s| s.as_slice()).collect();
        b.add_strings(
            format!("strings/t{i}").as_bytes(),
            &[refs.len() as u64],
            &refs,
        );
    }
    let full: Vec<f32> = (0..24).map(|v| v as f32).collect();
    b.add_partitioned_f32(
        b"part/emb",
        &[6, 4],
        &full,
        &[vec![Some((0, 2)), None], vec![Some((2, 4)), None]],
    );
    let le: Vec<u8> = (0..16u8).collect();
    b.add_fixed(b"zz/bytes", 4, &[16], &le, 1);
    b.write_to_dir(dir).unwrap()
}

#[test]
fn index_flips_in_a_synthesized_multi_block_checkpoint() {
    let _g = serial();
    for snappy in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let prefix = synth_multiblock(tmp.path(), snappy);
        let len = std::fs::metadata(index_path(&prefix)).unwrap().len() as usize;
        flip_index(
            &format!("synth snappy={snappy}"),
            &prefix,
            (0..len).step_by(3),
            32,
        );
    }
}

// ---- data files, at the bundle level (where each entry's location is known) ----

struct Located {
    loc: Option<DataLoc>,
    outcome: TensorOutcome,
}

/// Every entry of the bundle (slice entries included) with its location and bytes.
fn located(prefix: &Path, layouts: bool) -> Result<BTreeMap<Vec<u8>, Located>, String> {
    let opts = options().reader();
    let model = TfModel::open(prefix, &opts, block_cache_for(&opts)).map_err(|e| e.to_string())?;
    let bundle = Arc::clone(model.bundle());
    let ctx = layouts.then(|| layout_ctx(Layout::all()));
    let mut out = BTreeMap::new();
    let mut it = bundle.table.iter();
    it.seek_to_first().map_err(|e| e.to_string())?;
    while let Some(kv) = it.next_entry() {
        let (key, value) = kv.map_err(|e| e.to_string())?;
        if key.is_empty() {
            continue;
        }
        let entry = parse_entry(&value, bundle.num_shards);
        let t = tensor_from_value(&bundle, &key, &value);
        let outcome = TensorOutcome {
            model: tensor_bytes(&*t),
            layouts: match &ctx {
                Some(c) => layout_bytes(&t, c),
                None => Ok(Vec::new()),
            },
        };
        out.insert(
            key,
            Located {
                loc: entry.loc,
                outcome,
            },
        );
    }
    Ok(out)
}

/// Checks a corrupted bundle against the pristine one: entries for which `affected` says
/// yes fail (model and layouts), the others read exactly as before; entries without a
/// location (partitioned) fail or read exactly.
fn check_located(
    case: &str,
    good: &BTreeMap<Vec<u8>, Located>,
    bad: &BTreeMap<Vec<u8>, Located>,
    affected: &dyn Fn(&DataLoc) -> bool,
    names: &[&str],
) {
    assert_eq!(good.len(), bad.len(), "case {case}: entries changed");
    for (key, g) in good {
        let b = &bad[key];
        let k = String::from_utf8_lossy(key);
        let hit = g.loc.as_ref().is_some_and(affected);
        let baseline_ok = g.outcome.model.is_ok();
        for (what, gb, bb) in [
            ("model", &g.outcome.model, &b.outcome.model),
            ("layouts", &g.outcome.layouts, &b.outcome.layouts),
        ] {
            match bb {
                Err(m) => {
                    assert!(
                        hit || g.loc.is_none() || gb.is_err(),
                        "case {case}: {what} read of unaffected entry {k} fails: {m}"
                    );
                    if baseline_ok && what == "model" {
                        assert!(
                            names.iter().any(|n| m.contains(n)),
                            "case {case}: error for {k} names no file ({names:?}): {m}"
                        );
                    }
                }
                Ok(x) => {
                    assert!(
                        !(hit && baseline_ok && what == "model"),
                        "case {case}: affected entry {k} still reads"
                    );
                    assert!(
                        gb.as_ref().ok() == Some(x),
                        "case {case}: {what} of {k} reads different bytes"
                    );
                }
            }
        }
    }
}

fn data_files(prefix: &Path) -> Vec<(u32, PathBuf)> {
    let dir = prefix.parent().unwrap();
    let base = format!("{}.data-", base_name(prefix));
    let mut v: Vec<(u32, PathBuf)> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            let shard = n.strip_prefix(&base)?.split('-').next()?.parse().ok()?;
            Some((shard, e.path()))
        })
        .collect();
    v.sort();
    v
}

/// Cut points for a file of `len` bytes: both ends, ~40 spread points, and around every
/// entry boundary.
fn cut_points(len: u64, ends: impl Iterator<Item = u64>, max: usize) -> Vec<u64> {
    let mut v: Vec<u64> = (0..=40).map(|i| len * i / 40).collect();
    for e in ends {
        v.extend([e.saturating_sub(1), e, e + 1]);
    }
    v.extend([1, len.saturating_sub(1)]);
    v.retain(|&p| p <= len);
    v.sort();
    v.dedup();
    if v.len() > max {
        let step = v.len() / max + 1;
        v = v.into_iter().step_by(step).collect();
    }
    v
}

/// Truncates (at most `max_cuts` points) and, when `flips`, flips bytes of every data file.
fn corrupt_data(label: &str, prefix: &Path, flips: bool, layouts: bool, max_cuts: usize) {
    let good = located(prefix, layouts).unwrap_or_else(|e| panic!("{label}: {e}"));
    let bound = ALLOC_SLACK + bytes_of_prefix(prefix);
    for (shard, path) in data_files(prefix) {
        let pristine = std::fs::read(&path).unwrap();
        let len = pristine.len() as u64;
        let name = base_name(&path);
        let names = [name.as_str(), "data file"];
        let ends: Vec<u64> = good
            .values()
            .filter_map(|l| l.loc.filter(|l| l.shard == shard))
            .map(|l| l.offset + l.size)
            .collect();
        // Truncations.
        for cut in cut_points(len, ends.iter().copied(), max_cuts) {
            std::fs::write(&path, &pristine[..cut as usize]).unwrap();
            let case = format!("{label}: {name} truncated to {cut} of {len} bytes");
            let p = prefix.to_path_buf();
            let bad = run_case(&case, bound, move || located(&p, layouts))
                .unwrap_or_else(|e| panic!("case {case}: index no longer opens: {e}"));
            let affected = |l: &DataLoc| l.shard == shard && l.offset + l.size > cut;
            check_located(&case, &good, &bad, &affected, &names);
        }
        // Byte flips: a tensor covering the byte must fail its checksum.
        if flips {
            let positions: Vec<u64> = if len <= 2048 {
                (0..len).collect()
            } else {
                (0..len).step_by((len / 400) as usize + 1).collect()
            };
            for q in positions {
                let mut bad_bytes = pristine.clone();
                bad_bytes[q as usize] ^= 0xff;
                std::fs::write(&path, &bad_bytes).unwrap();
                let case = format!("{label}: {name} byte {q} flipped");
                let p = prefix.to_path_buf();
                let bad = run_case(&case, bound, move || located(&p, layouts && q % 8 == 0))
                    .unwrap_or_else(|e| panic!("case {case}: index no longer opens: {e}"));
                let affected =
                    |l: &DataLoc| l.shard == shard && l.offset <= q && q < l.offset + l.size;
                let mut good_view: BTreeMap<Vec<u8>, Located> = BTreeMap::new();
                for (k, g) in &good {
                    let mut o = g.outcome.clone();
                    if !(layouts && q % 8 == 0) {
                        o.layouts = Ok(Vec::new());
                    }
                    good_view.insert(
                        k.clone(),
                        Located {
                            loc: g.loc,
                            outcome: o,
                        },
                    );
                }
                check_located(&case, &good_view, &bad, &affected, &names);
            }
        }
        std::fs::write(&path, &pristine).unwrap();
    }
}

#[test]
fn data_files_truncated_and_flipped_in_fixtures() {
    let _g = serial();
    for case in [
        "dtypes",
        "strings",
        "multi_shard",
        "partitioned",
        "partitioned_strings",
        "scalars_empty",
        "sharded_maxsize",
    ] {
        let Some((_tmp, prefix)) = copy_case(case) else {
            continue;
        };
        corrupt_data(case, &prefix, true, true, 120);
    }
    if let Some((_tmp, prefix)) = copy_case("many_keys") {
        corrupt_data("many_keys", &prefix, false, false, 16);
    }
}

#[test]
fn data_files_truncated_and_flipped_in_a_synthesized_checkpoint() {
    let _g = serial();
    let tmp = tempfile::tempdir().unwrap();
    let prefix = synth_multiblock(tmp.path(), false);
    corrupt_data("synth", &prefix, true, true, 120);
}

#[test]
fn data_files_truncated_in_real_world_checkpoints() {
    let _g = serial();
    let Some(shared) = shared_dir() else {
        eprintln!("shared/realworld not found, skipped");
        return;
    };
    let mut dirs = Vec::new();
    find_index_dirs(&shared.join("realworld/tf"), &mut dirs);
    for dir in dirs {
        let tmp = tempfile::tempdir().unwrap();
        copy_tree(&dir, tmp.path());
        let Some(prefix) = prefix_in(tmp.path()) else {
            continue;
        };
        let label = dir.display().to_string();
        if located(&prefix, false).is_err() {
            continue; // not a readable bundle to begin with
        }
        corrupt_data(&label, &prefix, true, false, 120);
        let len = std::fs::metadata(index_path(&prefix)).unwrap().len() as usize;
        flip_index(&label, &prefix, (0..len).step_by(5), 0);
    }
}

fn find_index_dirs(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut has = false;
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            find_index_dirs(&p, out);
        } else if p.extension().is_some_and(|x| x == "index") {
            has = true;
        }
    }
    if has {
        out.push(dir.to_path_buf());
    }
}

#[test]
fn deleted_shards() {
    let _g = serial();
    for case in ["multi_shard", "sharded_maxsize"] {
        let Some((_tmp, prefix)) = copy_case(case) else {
            continue;
        };
        let good = located(&prefix, true).unwrap();
        for (shard, path) in data_files(&prefix) {
            let saved = std::fs::read(&path).unwrap();
            std::fs::remove_file(&path).unwrap();
            let name = base_name(&path);
            let case_name = format!("{case}: {name} deleted");
            let p = prefix.clone();
            let bad = run_case(&case_name, ALLOC_SLACK, move || located(&p, true)).unwrap();
            check_located(&case_name, &good, &bad, &|l| l.shard == shard, &[&name]);
            // The model level agrees: nothing reads different bytes.
            let p = prefix.clone();
            let snap = run_case(&case_name, ALLOC_SLACK, move || {
                open_and_snapshot(&p, false)
            })
            .unwrap();
            let good_snap = {
                std::fs::write(&path, &saved).unwrap();
                let mut s = open_and_snapshot(&prefix, false).unwrap();
                s.tensors
                    .values_mut()
                    .for_each(|t| t.layouts = Ok(Vec::new()));
                s
            };
            let v = compare(&case_name, &good_snap, &snap);
            assert!(
                v.same > 0 || good_snap.tensors.is_empty(),
                "case {case_name}: nothing readable"
            );
        }
    }
}

// ---- hand-built entries ----

#[test]
fn hand_built_overflowing_entries() {
    use modelfs_tf::writer::{encode_strings, entry_proto, partitioned_entry_proto};
    let _g = serial();
    let tmp = tempfile::tempdir().unwrap();
    let mut b = BundleBuilder::new("ovf");
    b.add_f32(b"good/a", &[3], &[1.0, -2.5, 3.25]);
    b.add_strings(b"good/s", &[2], &[b"x", b"yz"]);
    let (strs, strs_crc) = encode_strings(&[b"ab", b"c"], false);
    // A second copy of valid string data for the entries below to point at.
    b.add_raw(b"good/t", 7, &[2], 0, &strs, strs_crc);
    let big = 0x7FFF_FFFF_FFFF_FFF0u64;
    let bad: Vec<(&str, Vec<u8>)> = vec![
        ("bad/offset_7ff0", entry_proto(1, &[4], 0, big, 16, 0)),
        ("bad/offset_max", entry_proto(1, &[4], 0, u64::MAX, 16, 0)),
        (
            "bad/size_max",
            entry_proto(1, &[1u64 << 61], 0, 0, 1 << 63, 0),
        ),
        (
            "bad/size_huge",
            entry_proto(1, &[1u64 << 60], 0, 0, 1 << 62, 0),
        ),
        (
            "bad/count_overflow",
            entry_proto(1, &[1 << 40, 1 << 40], 0, 0, 16, 0),
        ),
        (
            "bad/count_overflow_u8",
            entry_proto(4, &[1 << 32, 1 << 32, 2], 0, 0, 16, 0),
        ),
        ("bad/negative_dim", entry_proto(1, &[u64::MAX], 0, 0, 4, 0)),
        ("bad/rank_300", entry_proto(1, &[1; 300], 0, 0, 4, 0)),
        ("bad/size_mismatch", entry_proto(1, &[4], 0, 0, 12, 0)),
        ("bad/shard_99", entry_proto(1, &[1], 99, 0, 4, 0)),
        ("bad/dtype_9999", entry_proto(9999, &[1], 0, 0, 4, 0)),
        (
            "bad/strings_2e40",
            entry_proto(7, &[1 << 40], 0, 0, strs.len() as u64, strs_crc),
        ),
        (
            "bad/strings_2e40_big_size",
            entry_proto(7, &[1 << 40], 0, 0, 1 << 40, strs_crc),
        ),
        (
            "bad/variant_2e40",
            entry_proto(21, &[1 << 40], 0, 0, strs.len() as u64, strs_crc),
        ),
        (
            "bad/strings_bad_crc",
            entry_proto(7, &[2], 0, 0, strs.len() as u64, strs_crc ^ 1),
        ),
        ("bad/f32_bad_crc", entry_proto(1, &[3], 0, 0, 12, 0x1234)),
        (
            "bad/partitioned_huge_extent",
            partitioned_entry_proto(1, &[4, 4], &[vec![Some((1 << 62, 1 << 62)), None]]),
        ),
        (
            "bad/partitioned_overflow_shape",
            partitioned_entry_proto(1, &[1 << 40, 1 << 40], &[vec![None, None]]),
        ),
        (
            "bad/partitioned_missing_slice",
            partitioned_entry_proto(1, &[4], &[vec![Some((0, 2))]]),
        ),
    ];
    for (k, e) in &bad {
        b.add_entry_bytes(k.as_bytes(), e.clone());
    }
    // A string entry whose first length varint claims 2^60 bytes.
    let mut lying = Vec::new();
    modelfs_io::codec::put_varint64(&mut lying, 1 << 60);
    lying.extend_from_slice(&[1, 0, 0, 0, 0, b'a']);
    b.add_raw(b"bad/string_length_2e60", 7, &[2], 0, &lying, 0);
    let prefix = b.write_to_dir(tmp.path()).unwrap();

    let p = prefix.clone();
    let snap = run_case("hand-built entries", ALLOC_SLACK, move || {
        open_and_snapshot(&p, true)
    })
    .unwrap();
    let read = |k: &str| {
        let path: Vec<Vec<u8>> = k.split('/').map(|c| c.as_bytes().to_vec()).collect();
        snap.tensors
            .get(&path)
            .unwrap_or_else(|| panic!("{k} not listed"))
            .clone()
    };
    let a = read("good/a").model.unwrap();
    let expect: Vec<u8> = [1.0f32, -2.5, 3.25]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    assert!(a.ends_with(&expect), "good/a reads wrong bytes");
    assert!(read("good/s").model.unwrap().ends_with(b"yz"));
    assert!(read("good/t").model.unwrap().ends_with(b"c"));
    assert!(read("good/a").layouts.is_ok());
    let mut bad_names: Vec<String> = bad.iter().map(|(k, _)| k.to_string()).collect();
    bad_names.push("bad/string_length_2e60".into());
    for k in &bad_names {
        let o = read(k);
        let m = o.model.clone().expect_err(k);
        assert!(m.contains("ovf"), "{k}: error names no file: {m}");
        assert!(
            o.layouts.is_err() || o.layouts == Ok(Vec::new()) || layouts_all_none(&o),
            "{k}: a layout serves data"
        );
    }
}

fn layouts_all_none(o: &TensorOutcome) -> bool {
    // Layout output with every data layout absent ("none") is no data served; the .json
    // (metadata only) is allowed.
    let Ok(bytes) = &o.layouts else { return true };
    let text = String::from_utf8_lossy(bytes);
    Layout::all()
        .iter()
        .filter(|l| **l != Layout::Json)
        .all(|l| text.contains(&format!("{} none", l.suffix())))
}
