//! modelfs: mount TensorFlow checkpoints and Angel model directories read-only, showing every
//! variable, matrix and partition as files in the layouts the user picks.
//!
//! Layers, bottom up: `source` (byte access) → `tf`, `angel` (format readers) → `model` (the
//! format-neutral tree) → `layout` (file renderers) → `fs` (tree of files, FUSE glue) → `cli`.

pub mod angel;
pub mod cli;
pub mod detect;
pub mod fs;
#[cfg(test)]
mod layers_tests;
pub mod layout;
pub mod model;
pub mod options;
pub mod source;
pub mod store;
#[cfg(any(test, feature = "testkit"))]
pub mod testing;
pub mod tf;
