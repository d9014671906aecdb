#![no_main]
//! The walk of a `torch.save` pickle for tensors: arbitrary bytes as a pickle, then tensors
//! found inside dicts, lists, pickled `nn.Module`s and other unrun objects' state, every plain
//! value rendered (`modelfs_torch::fuzz_walk`). Seeds: `seed.sh` copies the fixtures' pickles.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    modelfs_torch::fuzz_walk(data);
});
