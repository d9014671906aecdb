#![no_main]
//! See `modelfs::tf::fuzz::object_graph`.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| modelfs::tf::fuzz::object_graph(data));
