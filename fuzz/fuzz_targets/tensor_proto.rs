#![no_main]
//! See `modelfs_tf::fuzz::tensor_proto`.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| modelfs_tf::fuzz::tensor_proto(data));
