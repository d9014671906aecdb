#![no_main]
//! Monolith hash-table shards: arbitrary bytes as one shard (TFRecord framing, CRCs,
//! `EntryDump` entries), opened, read densely and by id (`modelfs_monolith::fuzz_shard`).
//! Seeds: `seed.sh` writes valid shards with `gen_monolith`.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    modelfs_monolith::fuzz_shard(data);
});
