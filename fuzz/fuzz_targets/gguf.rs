#![no_main]
//! GGUF files: arbitrary bytes as a GGUF file (magic, version, counts, metadata of every type
//! and nested arrays, tensor infos, alignment), opened, its metadata rendered and each tensor's
//! first and last elements (dequantized) and stored bytes read (`modelfs_gguf::fuzz_file`).
//! Seeds: `seed.sh` copies the committed fixture.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    modelfs_gguf::fuzz_file(data);
});
