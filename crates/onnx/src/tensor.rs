//! One ONNX tensor as modelfs serves it: little-endian elements at `[begin, begin + bytes)` of
//! a file — the model's own (`raw_data`, in place), the external data file beside it (in
//! place), or the elements decoded from a typed field or unpacked from 4-bit pairs (in memory,
//! bounded by the bytes they came from): `model::in_place::InPlace`.

pub(crate) use crate::model::in_place::InPlace as OnnxTensor;
