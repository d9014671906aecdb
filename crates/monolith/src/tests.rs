//! Tables written by a test writer that follows formats/monolith.md (`write_entry`,
//! `write_record`), read back through the model: listing, rows by id, dense reads, and hostile
//! shards refused with an error naming the shard, never a wrong row.

use std::path::Path;
use std::sync::Arc;

use super::*;
use crate::model::KeyKind;
use crate::source::ReadCtx;

struct Table {
    ids: Vec<i64>,
    values: Vec<Vec<f32>>,
}

/// Writes table `name` as `shards` shards of entries with `dim` values into `dir`.
fn write_table(dir: &Path, name: &str, n: usize, dim: usize, shards: usize) -> Table {
    let mut t = Table {
        ids: Vec::new(),
        values: Vec::new(),
    };
    let mut files = vec![Vec::new(); shards];
    for i in 0..n {
        let slot = (i % 7) as i64;
        let id = (slot << 48) | ((i as i64 * 2_654_435_761) & ((1 << 48) - 1));
        let v: Vec<f32> = (0..dim).map(|k| i as f32 * 0.5 - k as f32).collect();
        let mut e = Vec::new();
        write_entry(id, &v, i % 2 == 0, &mut e);
        // Shards by a hash of the id, as the table's buckets place them.
        write_record(&e, &mut files[(id as usize).wrapping_mul(31) % shards]);
        t.ids.push(id);
        t.values.push(v);
    }
    for (k, f) in files.iter().enumerate() {
        std::fs::write(dir.join(format!("{name}-{k:05}-of-{shards:05}")), f).unwrap();
    }
    t
}

fn open(dir: &Path) -> WithTables {
    WithTables::find(None, &[dir.to_path_buf()], &ReaderOptions::default()).unwrap()
}

fn row(t: &dyn Tensor, id: i64) -> Result<Option<Vec<f32>>, ModelError> {
    let mut out = Vec::new();
    Ok(t.row_by_id(id, &mut out)?
        .map(|_| crate::testing::f32s(&out)))
}

#[test]
fn shard_names_parse_and_others_are_ignored() {
    assert_eq!(shard_name("t-00002-of-00004"), Some(("t", 2, 4)));
    assert_eq!(
        shard_name("MonolithHashTable_ab12_3-00000-of-00001"),
        Some(("MonolithHashTable_ab12_3", 0, 1))
    );
    for bad in [
        "t-00004-of-00004",
        "t-0002-of-00004",
        "-00000-of-00001",
        "t.txt",
        "t-0000x-of-00001",
    ] {
        assert_eq!(shard_name(bad), None, "{bad}");
    }
}

#[test]
fn every_id_reads_its_values_and_absent_ids_none() {
    let dir = tempfile::tempdir().unwrap();
    let t = write_table(dir.path(), "MonolithHashTable_0", 3000, 5, 4);
    // An empty shard of another table: zero entries, still a table.
    std::fs::write(dir.path().join("empty-00000-of-00001"), b"").unwrap();
    std::fs::write(dir.path().join("README"), b"not a shard").unwrap();
    let m = open(dir.path());
    assert_eq!(
        m.list_dir(&[]).unwrap(),
        [DirEntry::Reserved(HASH_TABLES.to_vec())]
    );
    let tables = m.list_dir(&[own_component(HASH_TABLES)]).unwrap();
    assert_eq!(
        tables,
        [
            DirEntry::Tensor(b"MonolithHashTable_0".to_vec()),
            DirEntry::Tensor(b"empty".to_vec())
        ]
    );
    let table = m
        .tensor(&[own_component(HASH_TABLES), b"MonolithHashTable_0".to_vec()])
        .unwrap();
    assert_eq!(table.meta().shape, [3000, 5]);
    assert_eq!(table.key_kind(), Some(KeyKind::HashKey));
    let extra = &table.meta().extra["monolith"];
    assert_eq!(extra["entries"], 3000);
    assert_eq!(extra["slots"]["3"], 3000 / 7 + 1);
    for (id, v) in t.ids.iter().zip(&t.values) {
        assert_eq!(row(&*table, *id).unwrap().as_ref(), Some(v), "{id}");
    }
    for absent in [1, -1, i64::MAX, i64::MIN, t.ids[5] + 1] {
        assert!(!t.ids.contains(&absent));
        assert_eq!(row(&*table, absent).unwrap(), None, "{absent}");
    }
    // The dense form holds every entry once, in shard order, at any offset.
    let mut all = vec![0u8; 3000 * 5 * 4];
    table.read_elements(ReadCtx::none(), 0, &mut all).unwrap();
    let mut part = vec![0u8; 1234 * 4];
    table
        .read_elements(ReadCtx::none(), 2021, &mut part)
        .unwrap();
    assert_eq!(part[..], all[2021 * 4..(2021 + 1234) * 4]);
    let rows: Vec<Vec<f32>> = all.chunks_exact(20).map(crate::testing::f32s).collect();
    let mut sorted = rows.clone();
    sorted.sort_by(|a, b| a[0].total_cmp(&b[0]));
    assert_eq!(sorted, t.values);
    let empty = m
        .tensor(&[own_component(HASH_TABLES), b"empty".to_vec()])
        .unwrap();
    assert_eq!(empty.meta().shape, [0, 0]);
    assert_eq!(row(&*empty, 1).unwrap(), None);
}

/// Damage anywhere in a shard: the table does not open (an error naming the shard), or,
/// damage past what was summarised, a read fails; never a wrong row.
#[test]
fn hostile_shards_give_errors_never_wrong_rows() {
    let dir = tempfile::tempdir().unwrap();
    let t = write_table(dir.path(), "t", 200, 3, 1);
    let shard = dir.path().join("t-00000-of-00001");
    let good = std::fs::read(&shard).unwrap();
    let mut cases: Vec<(&str, Vec<u8>)> = Vec::new();
    let mut flip = good.clone();
    flip[good.len() / 2] ^= 1;
    cases.push(("flipped byte", flip));
    cases.push(("truncated", good[..good.len() - 3].to_vec()));
    let mut long = good.clone();
    let len = (1u64 << 40).to_le_bytes();
    let mut head = len.to_vec();
    head.extend_from_slice(&record::masked_crc(&len).to_le_bytes());
    long.extend_from_slice(&head);
    cases.push(("a record too long", long));
    let mut wide = good.clone();
    let mut e = Vec::new();
    write_entry(99, &[1.0; 4], true, &mut e);
    write_record(&e, &mut wide);
    cases.push(("an entry of another width", wide));
    for (what, bytes) in cases {
        std::fs::write(&shard, &bytes).unwrap();
        let m = open(dir.path());
        // Still there (listed, its `.json` says why); every read and lookup fails.
        let t = m
            .tensor(&[own_component(HASH_TABLES), b"t".to_vec()])
            .unwrap();
        let problem = t
            .meta()
            .problem
            .clone()
            .unwrap_or_else(|| panic!("{what}: opened"));
        assert!(problem.contains("t-00000-of-00001"), "{what}: {problem}");
        let e = t.row_by_id(7, &mut Vec::new()).unwrap_err();
        assert!(e.to_string().contains("t-00000-of-00001"), "{what}: {e}");
        assert!(t.read_elements(ReadCtx::none(), 0, &mut [0u8; 4]).is_err());
    }
    std::fs::write(&shard, &good).unwrap();
    let m = open(dir.path());
    let table = m
        .tensor(&[own_component(HASH_TABLES), b"t".to_vec()])
        .unwrap();
    assert_eq!(row(&*table, t.ids[7]).unwrap().as_ref(), Some(&t.values[7]));
    let _ = Arc::clone(&table);
}

/// The fuzz target's entry over every truncation and many byte flips of a real shard: no
/// panic, no hang (a stand-in for `cargo fuzz run monolith` in the test run).
#[test]
fn the_fuzz_entry_survives_cut_and_flipped_shards() {
    let shard = crate::testing::fixtures_dir()
        .join("monolith/ps_export/assets/MonolithHashTable_0a1b_1-00000-of-00002");
    let good = std::fs::read(shard).unwrap();
    let good = &good[..good.len().min(4096)];
    for cut in (0..good.len()).step_by(7) {
        fuzz_shard(&good[..cut]);
    }
    let mut x = 0x9E37_79B9u32;
    for _ in 0..300 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let mut b = good.to_vec();
        let at = x as usize % b.len();
        b[at] ^= (x >> 24) as u8 | 1;
        fuzz_shard(&b);
    }
}

/// A table with a shard missing (an export still being copied, or one lost) is listed with
/// why, and never read as the table: its rows in the other shards are not served as all of it.
#[test]
fn a_table_missing_a_shard_is_never_read_as_whole() {
    let dir = tempfile::tempdir().unwrap();
    let t = write_table(dir.path(), "t", 300, 2, 4);
    let whole = write_table(dir.path(), "u", 50, 2, 2);
    std::fs::remove_file(dir.path().join("t-00002-of-00004")).unwrap();
    let m = open(dir.path());
    let table = m
        .tensor(&[own_component(HASH_TABLES), b"t".to_vec()])
        .unwrap();
    let problem = table
        .meta()
        .problem
        .clone()
        .expect("a table without its shard opened");
    assert!(
        problem.contains("3 of its 4 shards") && problem.contains("00002"),
        "{problem}"
    );
    for id in &t.ids[..20] {
        assert!(row(&*table, *id).is_err());
    }
    assert!(table
        .read_elements(ReadCtx::none(), 0, &mut [0u8; 4])
        .is_err());
    // The whole table beside it reads.
    let u = m
        .tensor(&[own_component(HASH_TABLES), b"u".to_vec()])
        .unwrap();
    assert_eq!(
        row(&*u, whole.ids[3]).unwrap().as_ref(),
        Some(&whole.values[3])
    );
    // Counts that disagree.
    std::fs::write(dir.path().join("t-00002-of-00005"), b"").unwrap();
    let m = open(dir.path());
    let table = m
        .tensor(&[own_component(HASH_TABLES), b"t".to_vec()])
        .unwrap();
    assert!(table.meta().problem.as_ref().unwrap().contains("counts"));
}
