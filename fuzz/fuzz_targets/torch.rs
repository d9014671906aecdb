#![no_main]
//! PyTorch checkpoints: arbitrary bytes as a pickle (every opcode of protocols 0–5, the memo,
//! marks, calls recorded and never made, then the walk over shared and cyclic values) and as
//! a `torch.save` zip (the directory, `data.pkl`, `byteorder`, storages bounded by their
//! members, strided views), opened and each tensor's first and last elements read
//! (`modelfs_torch::fuzz_file`). Seeds: `seed.sh` copies the committed fixtures and their
//! pickles.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    modelfs_torch::fuzz_file(data);
});
