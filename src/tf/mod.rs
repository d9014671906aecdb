//! The TensorFlow checkpoint reader (formats/tf-checkpoint.md).

pub mod coding;
pub mod bundle;
pub mod checkpoint_state;
pub mod multi;
pub mod dtype;
pub mod keys;
pub mod model;
pub mod ordered_code;
pub mod proto;
pub mod table;
