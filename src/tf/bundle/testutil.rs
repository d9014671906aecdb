//! Test helper: the bundle writer, re-exported from `tf::writer`.

pub use crate::tf::writer::{entry_proto, shape_proto, slice_proto, BundleBuilder, SliceSpec};
