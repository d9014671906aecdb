#![no_main]
//! GGUF's quantized blocks: arbitrary bytes as blocks of every type that is dequantized (Q4_0
//! to Q8_0, the K-quants), every element decoded (`modelfs_gguf::fuzz_blocks`). Seeds:
//! `seed.sh` copies the tensors' bytes of the GGUF fixtures.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    modelfs_gguf::fuzz_blocks(data);
});
