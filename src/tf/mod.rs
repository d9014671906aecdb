//! The TensorFlow checkpoint reader (formats/tf-checkpoint.md).

pub mod coding;
pub mod table;
