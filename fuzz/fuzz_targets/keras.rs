#![no_main]
//! Keras files: arbitrary bytes as an HDF5 file (superblock, object headers, links, B-trees,
//! heaps, attributes, through `hdf5-pure` over this crate's byte source) and as a `.keras`
//! zip (its directory, `config.json`, the stored `model.weights.h5`), opened and every
//! dataset read in place (`modelfs_keras::fuzz_file`). Seeds: `seed.sh` copies the
//! committed `.keras`/`.h5` fixtures (their first 64 KiB).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    modelfs_keras::fuzz_file(data);
});
