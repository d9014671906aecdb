use super::*;
use crate::store::{Offsets, Record, Verified};

fn load(s: &DiskStore, key: &str) -> Option<Vec<u64>> {
    (s as &dyn Store).get::<Offsets>(key).map(|o| o.0)
}

fn save(s: &DiskStore, key: &str, offsets: &[u64]) {
    (s as &dyn Store).put(key, &Offsets(offsets.to_vec()));
}

fn mark(s: &DiskStore, key: &str) {
    (s as &dyn Store).put(key, &Verified);
}

fn verified(s: &DiskStore, key: &str) -> bool {
    (s as &dyn Store).get::<Verified>(key).is_some()
}

fn fresh(dir: &Path, source: &str) -> DiskStore {
    DiskStore::new(dir, source, u64::MAX)
}

#[test]
fn records_survive_a_reload_and_the_last_one_wins() {
    let dir = tempfile::tempdir().unwrap();
    let s = fresh(dir.path(), "/m/a");
    assert!(load(&s, "k").is_none());
    save(&s, "k", &[0, 5, 9]);
    save(&s, "j", &[0, 1]);
    save(&s, "k", &[0, 7]);
    mark(&s, "a:1:2:3");
    assert_eq!(load(&s, "k"), Some(vec![0, 7]));
    let again = fresh(dir.path(), "/m/a");
    assert_eq!(load(&again, "k"), Some(vec![0, 7]));
    assert_eq!(load(&again, "j"), Some(vec![0, 1]));
    assert!(load(&again, "other").is_none());
    assert!(verified(&again, "a:1:2:3"));
    assert!(!verified(&again, "a:1:2:4"));
    // One file for the source, whatever the number of text files.
    let files: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert_eq!(files.len(), 1);
    // Another source has its own store.
    let b = fresh(dir.path(), "/m/b");
    assert!(load(&b, "k").is_none());
}

#[test]
fn damage_is_never_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let s = fresh(dir.path(), "src");
    save(&s, "k", &[0, 5, 9]);
    save(&s, "j", &[0, 2]);
    let p = s.path().to_path_buf();
    let data = std::fs::read(&p).unwrap();
    for i in 0..data.len() {
        let mut bad = data.clone();
        bad[i] ^= 0x10;
        std::fs::write(&p, &bad).unwrap();
        let r = fresh(dir.path(), "src");
        let (k, j) = (load(&r, "k"), load(&r, "j"));
        assert!(
            k.is_none() || k == Some(vec![0, 5, 9]),
            "flip at {i}: {k:?}"
        );
        assert!(j.is_none() || j == Some(vec![0, 2]), "flip at {i}: {j:?}");
        assert!(k.is_none() || j.is_none(), "flip at {i} went unnoticed");
    }
    // A torn append loses only itself, and the file is repaired so later appends count.
    std::fs::write(&p, &data[..data.len() - 3]).unwrap();
    let r = fresh(dir.path(), "src");
    assert_eq!(load(&r, "k"), Some(vec![0, 5, 9]));
    assert!(load(&r, "j").is_none());
    save(&r, "z", &[0, 1]);
    let r = fresh(dir.path(), "src");
    assert_eq!(load(&r, "z"), Some(vec![0, 1]));
    assert_eq!(load(&r, "k"), Some(vec![0, 5, 9]));
}

#[test]
fn offsets_out_of_order_are_refused_even_with_a_valid_checksum() {
    let dir = tempfile::tempdir().unwrap();
    let s = fresh(dir.path(), "src");
    let mut down = Vec::new();
    crate::store::put_words(&mut down, &[0, 9, 5]);
    s.put_bytes(Offsets::KIND, "k", &down);
    assert!(load(&fresh(dir.path(), "src"), "k").is_none());
}

#[test]
fn concurrent_writers_of_one_source_keep_every_record() {
    let dir = tempfile::tempdir().unwrap();
    // Two stores stand for two mounts of the source (two processes).
    let (a, b) = (fresh(dir.path(), "src"), fresh(dir.path(), "src"));
    std::thread::scope(|t| {
        t.spawn(|| (0..200).for_each(|i| save(&a, &format!("a{i}"), &[0, i])));
        t.spawn(|| (0..200).for_each(|i| save(&b, &format!("b{i}"), &[0, i])));
    });
    let r = fresh(dir.path(), "src");
    for i in 0..200 {
        assert_eq!(load(&r, &format!("a{i}")), Some(vec![0, i]));
        assert_eq!(load(&r, &format!("b{i}")), Some(vec![0, i]));
    }
    // A writer whose file was removed under it (eviction, `cache clean`) starts a new one.
    std::fs::remove_file(r.path()).unwrap();
    save(&a, "late", &[0, 3]);
    assert_eq!(load(&fresh(dir.path(), "src"), "late"), Some(vec![0, 3]));
}

#[test]
fn superseded_records_are_compacted_away() {
    let dir = tempfile::tempdir().unwrap();
    let s = fresh(dir.path(), "src");
    let offsets: Vec<u64> = (0..100).collect();
    for i in 0..2000u64 {
        let mut o = offsets.clone();
        o.push(100 + i);
        save(&s, "k", &o);
    }
    let big = std::fs::metadata(s.path()).unwrap().len();
    let r = fresh(dir.path(), "src");
    assert_eq!(load(&r, "k").unwrap().last(), Some(&2099));
    let small = std::fs::metadata(s.path()).unwrap().len();
    assert!(small * 100 < big, "{small} vs {big}");
}

#[test]
fn a_store_named_for_another_source_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let s = fresh(dir.path(), "one");
    save(&s, "k", &[0, 1]);
    let other = fresh(dir.path(), "two");
    std::fs::rename(s.path(), other.path()).unwrap();
    assert!(load(&other, "k").is_none());
    save(&other, "j", &[0, 1]);
    assert_eq!(load(&fresh(dir.path(), "one"), "k"), None);
    let back = std::fs::read(other.path()).unwrap();
    assert_eq!(header(&back), Some(&b"one"[..]), "not overwritten");
}

#[test]
fn the_directory_stays_under_its_cap() {
    let dir = tempfile::tempdir().unwrap();
    let offsets: Vec<u64> = (0..500).collect(); // about 4 KB per source
    for i in 0..40 {
        let s = DiskStore::new(dir.path(), &format!("src{i}"), 20_000);
        save(&s, "k", &offsets);
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    let used: u64 = crate::store::lru::scan(dir.path())
        .iter()
        .map(|f| f.1)
        .sum();
    assert!(used <= 20_000, "{used}");
    assert!(
        load(&fresh(dir.path(), "src39"), "k").is_some(),
        "the newest is kept"
    );
    assert!(
        load(&fresh(dir.path(), "src0"), "k").is_none(),
        "the oldest went"
    );
    let bad = DiskStore::new("/proc/nope", "src", u64::MAX);
    save(&bad, "k", &[0, 1]);
    assert_eq!(bad.failures(), 1);
}

#[test]
fn shared_stores_are_one_per_directory_and_source() {
    let dir = tempfile::tempdir().unwrap();
    let a = DiskStore::shared(dir.path(), "s", u64::MAX);
    let b = DiskStore::shared(dir.path(), "s", u64::MAX);
    let c = DiskStore::shared(dir.path(), "t", u64::MAX);
    assert!(Arc::ptr_eq(&a, &b));
    assert!(!Arc::ptr_eq(&a, &c));
}

/// A store's size does not depend on where its source lives (keys repeat the source's path;
/// a cap that holds N models in one place holds N in any), and shortened keys stay apart.
#[test]
fn the_size_does_not_grow_with_the_source_path() {
    let size_for = |source: &str| {
        let dir = tempfile::tempdir().unwrap();
        let s = fresh(dir.path(), source);
        for i in 0..50 {
            save(&s, &format!("{source}/t{i}.txt:10:20:30"), &[0, 1, 2]);
            mark(&s, &format!("crc32 {source}/data:{i}:{source}/data"));
        }
        std::fs::metadata(s.path()).unwrap().len() - source.len() as u64
    };
    assert_eq!(
        size_for("/m"),
        size_for("/a/much/longer/checkout/path/of/the/model")
    );
    let dir = tempfile::tempdir().unwrap();
    let s = fresh(dir.path(), "/m\u{1}x");
    // Keys that a careless shortening would confuse: the source itself, its escape.
    let keys = [
        "/m\u{1}x/a",
        "\u{1}s/a",
        "\u{1}/m\u{1}x/a",
        "\u{1}\u{1}s/a",
        "/m/a",
    ];
    for (i, k) in keys.iter().enumerate() {
        save(&s, k, &[0, i as u64 + 1]);
    }
    let again = fresh(dir.path(), "/m\u{1}x");
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(load(&again, k), Some(vec![0, i as u64 + 1]), "{k:?}");
    }
}
