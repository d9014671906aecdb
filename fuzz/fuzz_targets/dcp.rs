#![no_main]
//! PyTorch DCP checkpoints: arbitrary bytes as a `.metadata` pickle (the machine that runs
//! nothing, then DCP's dataclasses read off its values: sizes, chunks, storage entries,
//! planner paths), the tensors built (hostile chunk extents against hostile shapes, assembled
//! by `model::blocks`) and read from a directory that is not there
//! (`modelfs_torch::dcp::fuzz_metadata`). Seeds: `seed.sh` copies the fixtures' metadata.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    modelfs_torch::dcp::fuzz_metadata(data);
});
