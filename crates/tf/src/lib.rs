//! The TensorFlow checkpoint reader (formats/tf-checkpoint.md).

#![deny(clippy::undocumented_unsafe_blocks)]

// The layers below, under the names every module of modelfs uses (`crate::source::ReadAt`).
pub(crate) use modelfs_io::{codec, source, store};
pub(crate) use modelfs_model as model;
#[cfg(test)]
pub(crate) use modelfs_model::testing;

pub mod bundle;
pub mod checkpoint;
pub mod checkpoint_state;
pub mod detect;
pub mod dtype;
#[cfg(any(test, feature = "testkit"))]
pub mod fuzz;
pub(crate) mod graph;
pub mod hashtable;
pub(crate) mod keys;
pub(crate) mod object_graph;
pub(crate) mod ordered_code;
mod prefix;
pub mod proto;
pub(crate) mod v1;
mod whole;
pub mod writer;
