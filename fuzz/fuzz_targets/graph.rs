#![no_main]
//! See `modelfs_tf::fuzz::graph`.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| modelfs_tf::fuzz::graph(data));
