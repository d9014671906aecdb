//! modelfs: mount TensorFlow checkpoints and Angel model directories read-only, showing every
//! variable, matrix and partition as files in the layouts the user picks.
//!
//! Layers, bottom up; each module uses only those before it (`layers_tests` checks it):
//! `source` (byte access) → `store` (persistent caches) → `model` (the format-neutral tree)
//! → `tf`, `angel`, `monolith`, `safetensors`, `numpy` (the readers, which never use each other) → `detect` (which
//! reader a source is for) → `layout` (file renderers, on the content contract of
//! `layout::content`) → `views` (whole-model views), `stats` (statistics and diffs),
//! `options` → `fs` (tree of files, FUSE glue, following a changing source) → `cli`.
//!
//! The binary needs `cli::main`; the integration tests, fuzzers and examples drive the readers
//! and layouts directly, so those modules are public (their internals are `pub(crate)`), and
//! the `testkit` feature adds the in-memory doubles (`testing`). The TF writer (`tf::writer`)
//! is always built: the `.tf/` view writes with it.

#![deny(clippy::undocumented_unsafe_blocks)]

pub mod angel;
mod cli;
pub mod codec;
pub mod detect;
mod fs;
pub mod gguf;
#[cfg(test)]
mod layers_tests;
pub mod layout;
pub mod model;
pub mod monolith;
pub mod numpy;
pub mod options;
pub mod safetensors;
pub mod source;
mod stats;
pub mod store;
#[cfg(any(test, feature = "testkit"))]
pub mod testing;
pub mod tf;
pub mod torch;
mod views;

pub use cli::main;
