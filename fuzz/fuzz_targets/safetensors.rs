#![no_main]
//! safetensors files: arbitrary bytes as one file (the header length, the JSON header, every
//! entry's offsets), opened and each tensor's first and last elements read
//! (`modelfs_safetensors::fuzz_file`). Seeds: `seed.sh` copies the committed fixtures.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    modelfs_safetensors::fuzz_file(data);
});
