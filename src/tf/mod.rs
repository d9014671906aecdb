//! The TensorFlow checkpoint reader (formats/tf-checkpoint.md).

pub mod bundle;
pub mod checkpoint_state;
pub mod coding;
pub mod detect;
pub mod dtype;
pub mod keys;
pub mod model;
pub mod multi;
pub mod ordered_code;
pub mod proto;
pub mod table;
#[doc(hidden)]
pub mod writer;
