//! The TensorFlow checkpoint reader (formats/tf-checkpoint.md).
