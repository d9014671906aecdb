#![no_main]
//! One `BundleEntryProto`: decode and validate (first byte = number of shards).

use libfuzzer_sys::fuzz_target;
use modelfs_tf::bundle::entry::parse_entry;

fuzz_target!(|data: &[u8]| {
    let Some((&shards, value)) = data.split_first() else {
        return;
    };
    let e = parse_entry(value, u32::from(shards).max(1));
    if e.problem.is_none() {
        // A valid entry has a countable shape.
        assert!(e.num_elements().is_some());
        if let Some(loc) = e.loc {
            assert!(loc.shard < u32::from(shards).max(1));
        }
    }
});
