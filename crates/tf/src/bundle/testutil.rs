//! Test helper: the bundle writer, re-exported from `tf::writer`.

pub use crate::writer::{slice_proto, BundleBuilder, SliceSpec};
