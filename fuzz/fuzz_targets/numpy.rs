#![no_main]
//! numpy files: arbitrary bytes as an `.npy` (magic, version, header length, the header dict)
//! and as an `.npz` (the zip directory, each member's header, stored and deflated), opened and
//! each array's first and last elements read (`modelfs_numpy::fuzz_file`). Seeds: `seed.sh`
//! copies the committed fixtures.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    modelfs_numpy::fuzz_file(data);
});
