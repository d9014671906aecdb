//! The TensorFlow checkpoint reader (formats/tf-checkpoint.md).

pub mod bundle;
pub mod checkpoint_state;
pub(crate) mod detect;
pub(crate) mod dtype;
#[cfg(any(test, feature = "testkit"))]
pub mod fuzz;
pub(crate) mod graph;
pub(crate) mod hashtable;
pub(crate) mod keys;
pub mod model;
pub(crate) mod object_graph;
pub(crate) mod ordered_code;
mod prefix;
pub mod proto;
pub(crate) mod v1;
mod whole;
pub mod writer;
