#![no_main]
//! The `.index` table: arbitrary bytes as the whole file. Open (footer + index block), iterate
//! every entry, then seek to a few keys seen on the way and a few fixed ones.

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use modelfs_io::source::MemSource;
use modelfs_io::codec::table::{BlockCache, Table};

fuzz_target!(|data: &[u8]| {
    let file = Arc::new(MemSource::new("fuzz.index", data.to_vec()));
    let cache = Arc::new(BlockCache::new(1 << 20));
    let Ok(table) = Table::open(file, cache) else {
        return;
    };
    let mut seen: Vec<Vec<u8>> = Vec::new();
    let mut it = table.iter();
    if it.seek_to_first().is_err() {
        return;
    }
    let mut last: Option<Vec<u8>> = None;
    let mut n = 0usize;
    while it.valid() && n < 100_000 {
        // Keys come out strictly increasing (checked per block and across blocks).
        if let Some(l) = &last {
            assert!(it.key() > l.as_slice(), "keys not increasing");
        }
        last = Some(it.key().to_vec());
        if n % 7 == 0 && seen.len() < 16 {
            seen.push(it.key().to_vec());
        }
        let _ = it.value();
        if it.next().is_err() {
            break;
        }
        n += 1;
    }
    seen.extend([vec![], b"a".to_vec(), vec![0xff; 4]]);
    for k in &seen {
        if let Ok(Some(v)) = table.get(k) {
            let _ = v.len();
        }
        let mut it = table.iter();
        if it.seek(k).is_ok() && it.valid() {
            assert!(it.key() >= k.as_slice(), "seek landed before its target");
        }
    }
});
