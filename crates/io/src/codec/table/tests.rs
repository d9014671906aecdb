use std::sync::Arc;

use super::testutil::*;
use super::*;
use crate::source::MemSource;

fn open(bytes: Vec<u8>) -> Result<Table, TableError> {
    Table::open(
        Arc::new(MemSource::new("t.index", bytes)),
        Arc::new(BlockCache::new(1 << 20)),
    )
}

fn all(t: &Table) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = t.iter();
    it.seek_to_first().unwrap();
    let mut out = Vec::new();
    while let Some(e) = it.next_entry() {
        out.push(e.unwrap());
    }
    out
}

#[test]
fn worked_example_reads() {
    let t = open(worked_example()).unwrap();
    assert_eq!(t.num_blocks(), 1);
    let e = all(&t);
    assert_eq!(e.len(), 2);
    assert_eq!(e[0].0, b"");
    assert_eq!(e[0].1, [0x08, 0x01, 0x1a, 0x02, 0x08, 0x01]);
    assert_eq!(e[1].0, b"counter");
    assert_eq!(t.get(b"counter").unwrap().unwrap().len(), 11);
    // The separator "d" is not a key.
    assert_eq!(t.get(b"d").unwrap(), None);
    // Our writer produces the same bytes.
    let mut b = TableBuilder::new(262144, false);
    b.add(b"", &e[0].1);
    b.add(b"counter", &e[1].1);
    assert_eq!(b.finish(), worked_example());
}

#[test]
fn corrupt_tables_are_errors() {
    let good = worked_example();
    assert!(matches!(
        open(good[..40].to_vec()),
        Err(TableError::NotATable(_))
    ));
    let mut bad = good.clone();
    bad[122] ^= 1;
    assert!(matches!(open(bad), Err(TableError::NotATable(_))));
    // Index block CRC.
    let mut bad = good.clone();
    bad[0x39] ^= 1;
    let err = open(bad).unwrap_err().to_string();
    assert!(err.contains("checksum"), "{err}");
    // Data block CRC: open succeeds (only the index is read), reading fails.
    let mut bad = good.clone();
    bad[0x10] ^= 1;
    let t = open(bad).unwrap();
    assert!(t.get(b"counter").is_err());
    // Bad block type.
    let mut bad = good.clone();
    bad[0x26] = 2;
    let t = open(bad).unwrap();
    assert!(t
        .get(b"counter")
        .unwrap_err()
        .to_string()
        .contains("checksum"));
    // Index handle past the footer.
    let mut bad = good.clone();
    bad[0x4b + 2] = 0x70;
    assert!(open(bad).is_err());
    // Every single-byte corruption: no panic.
    for i in 0..good.len() {
        for x in [0x01u8, 0x80, 0xff] {
            let mut b = good.clone();
            b[i] ^= x;
            if let Ok(t) = open(b) {
                let mut it = t.iter();
                if it.seek_to_first().is_ok() {
                    while let Some(r) = it.next_entry() {
                        if r.is_err() {
                            break;
                        }
                    }
                }
            }
        }
    }
}

fn many_keys(n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..n)
        .map(|i| {
            (
                format!("dir{:02}/sub{:03}/var{:04}", i % 37, (i / 37) % 100, i).into_bytes(),
                vec![(i % 251) as u8; 20],
            )
        })
        .collect()
}

fn build(kv: &[(Vec<u8>, Vec<u8>)], block: usize, snappy: bool) -> Vec<u8> {
    let mut sorted = kv.to_vec();
    sorted.sort();
    let mut b = TableBuilder::new(block, snappy);
    for (k, v) in &sorted {
        b.add(k, v);
    }
    b.finish()
}

#[test]
fn multi_block_with_separators_and_snappy() {
    let mut kv = many_keys(5000);
    kv.sort();
    for snappy in [false, true] {
        let t = open(build(&kv, 4096, snappy)).unwrap();
        assert!(t.num_blocks() > 10);
        assert_eq!(all(&t), kv);
        for i in (0..kv.len()).step_by(97) {
            assert_eq!(t.get(&kv[i].0).unwrap().as_deref(), Some(&kv[i].1[..]));
            // A key just after kv[i] (not present): seek lands on kv[i+1].
            let mut probe = kv[i].0.clone();
            probe.push(0);
            assert_eq!(t.get(&probe).unwrap(), None);
            let mut it = t.iter();
            it.seek(&probe).unwrap();
            match kv.get(i + 1) {
                Some(next) => assert_eq!(it.key(), &next.0[..]),
                None => assert!(!it.valid()),
            }
        }
        // Separators are never keys.
        for e in &t.index {
            if kv
                .binary_search_by(|(k, _)| k.as_slice().cmp(&e.separator))
                .is_err()
            {
                assert_eq!(t.get(&e.separator).unwrap(), None);
            }
        }
    }
}

#[test]
fn snappy_data_block_is_decoded() {
    // Repetitive values compress well; check the block really is type 1.
    let kv: Vec<(Vec<u8>, Vec<u8>)> = (0..50)
        .map(|i| (format!("k{i:03}").into_bytes(), vec![7u8; 100]))
        .collect();
    let bytes = build(&kv, 1 << 20, true);
    let t = open(bytes.clone()).unwrap();
    let h = t.index[0].handle;
    assert_eq!(bytes[(h.offset + h.size) as usize], 1);
    assert_eq!(all(&t), kv);
}

#[test]
fn open_reads_only_footer_and_index_and_seek_reads_one_block() {
    let kv = many_keys(5000);
    let src = CountingReadAt::new("t.index", build(&kv, 4096, false));
    let t = Table::open(src.clone(), Arc::new(BlockCache::new(1 << 20))).unwrap();
    let reads = src.take();
    assert_eq!(reads.len(), 2, "{reads:?}");
    assert_eq!(reads[0].1, 48);
    t.get(b"dir05/sub010/var0375").unwrap();
    assert_eq!(src.take().len(), 1);
    // Cached now.
    t.get(b"dir05/sub010/var0375").unwrap();
    assert_eq!(src.take().len(), 0);
}

#[test]
fn cache_is_bounded() {
    let kv = many_keys(5000);
    let cache = Arc::new(BlockCache::new(20_000));
    let t = Table::open(
        Arc::new(MemSource::new("t", build(&kv, 4096, false))),
        cache.clone(),
    )
    .unwrap();
    assert_eq!(all(&t).len(), 5000);
    assert!(cache.bytes() <= 20_000);
}

#[test]
fn out_of_order_blocks_detected() {
    // Two blocks whose index says "b" but the second block holds "a".
    let mut b = TableBuilder::new(1, false);
    b.add(b"c", b"");
    b.add(b"d", b"");
    let mut bytes = b.finish();
    // Overwrite key "d" with "a" and fix the CRC of that block.
    let pos = bytes.iter().position(|&x| x == b'd').unwrap();
    bytes[pos] = b'a';
    // Block 2 starts after block 1 (contents 3+1+8 = 12 bytes + 5 trailer).
    let start = 17;
    let end = pos + 1 + 8;
    let crc = crate::codec::mask_crc(crate::codec::crc32c_extend(
        crate::codec::crc32c_extend(0, &bytes[start..end]),
        &[0],
    ));
    bytes[end + 1..end + 5].copy_from_slice(&crc.to_le_bytes());
    let t = open(bytes).unwrap();
    let mut it = t.iter();
    it.seek_to_first().unwrap();
    assert_eq!(it.key(), b"c");
    assert!(it.next().is_err());
}
