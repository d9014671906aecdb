#![no_main]
//! The `checkpoint` state file (text proto): parse arbitrary bytes, then resolve every path.

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use modelfs_tf::checkpoint_state::{resolve_prefix, CheckpointState};

fuzz_target!(|data: &[u8]| {
    let st = CheckpointState::parse(data);
    let exists = |p: &Path| p.as_os_str().len() % 3 == 0;
    let listed = st
        .all_model_checkpoint_paths
        .iter()
        .chain(st.model_checkpoint_path.iter());
    for p in listed {
        let _ = resolve_prefix(Path::new("/nonexistent/dir"), p, &exists);
    }
});
