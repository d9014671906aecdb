#![no_main]
//! ONNX models: arbitrary bytes as one `.onnx` file (the ModelProto walked in place, every
//! initializer's and Constant's dims, type and data: raw, typed fields, 4-bit pairs), each
//! tensor's first and last elements read (`modelfs_onnx::fuzz_file`). Seeds: `seed.sh`
//! copies the committed fixtures.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    modelfs_onnx::fuzz_file(data);
});
