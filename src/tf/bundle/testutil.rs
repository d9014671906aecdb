//! Test helper: the bundle writer, re-exported from `tf::writer`.

pub(crate) use crate::tf::writer::{slice_proto, BundleBuilder, SliceSpec};
