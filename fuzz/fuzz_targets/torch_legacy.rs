#![no_main]
//! Legacy `torch.save` files (before torch 1.6): arbitrary bytes after a valid magic number,
//! protocol version and system info — the object pickle with its persistent ids, the list of
//! storage keys, the storages' counts and bytes — opened and every tensor read
//! (`modelfs_torch::fuzz_legacy`). Seeds: `seed.sh` copies the legacy fixtures past their
//! third pickle.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    modelfs_torch::fuzz_legacy(data);
});
