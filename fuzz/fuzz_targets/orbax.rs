#![no_main]
//! Orbax checkpoints: arbitrary bytes as an OCDBT database (the manifest, its version
//! entries, data file tables, B+tree nodes, inline and out-of-line values, CRC-32C and zstd)
//! and as zarr v2/v3 array metadata and chunks (`modelfs_orbax::fuzz_file`). Seeds: the
//! committed fixtures' `manifest.ocdbt` followed by one of their `d/` files.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    modelfs_orbax::fuzz_file(data);
});
