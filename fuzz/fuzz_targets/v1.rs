#![no_main]
//! See `modelfs::tf::fuzz::v1`.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| modelfs::tf::fuzz::v1(data));
