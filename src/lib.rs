//! modelfs: mount model artefacts read-only — TensorFlow checkpoints (V2, V1), SavedModels and
//! graphs, Angel model directories, recommendation hash tables (Monolith, TF hash tables,
//! TFRA, DeepRec EVs), safetensors, PyTorch, numpy and GGUF files, local or on S3/HTTP —
//! showing every variable, constant, matrix, partition and embedding row as files in the
//! layouts the user picks.
//!
//! Layers, bottom up; each module uses only those before it (`layers_tests` checks it):
//! `source` (byte access) → `codec` (encodings; the LevelDB table) → `store` (persistent caches) → `model` (the
//! format-neutral tree) → `tf`, `angel`, `monolith`, `safetensors`, `numpy`, `torch`, `gguf`, `onnx`, `keras`, `orbax`
//! (the readers, which never use each other) → `detect` (which reader a source is for: its
//! `FORMATS` table) → `layout` (file renderers, on the content contract of `layout::content`)
//! → `views` (whole-model views), `stats` (statistics and diffs), `options` → `fs` (tree of
//! files, FUSE glue, following a changing source) → `cli`.
//!
//! The entry point of the readers is `detect::model_at`: the model a path holds, whatever its
//! format, as the format-neutral `model::Model`:
//!
//! ```
//! use modelfs::model::DirEntry;
//! let prefix = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tf/multi_shard/ckpt");
//! let model = modelfs::detect::model_at(&prefix, &Default::default()).unwrap();
//! // The top directory lists tensors `a` and `b` and a directory `c`.
//! let top = model.list_dir(&[]).unwrap();
//! assert!(top.contains(&DirEntry::Tensor(b"a".to_vec())));
//! assert!(top.contains(&DirEntry::Dir(b"c".to_vec())));
//! // A tensor's metadata, with no data read.
//! let a = model.tensor(&[b"a".to_vec()]).unwrap();
//! assert!(!a.meta().shape.is_empty() || a.meta().num_elements() == Some(1));
//! ```
//!
//! The binary needs `cli::main`; the integration tests, fuzzers and examples drive the readers
//! and layouts directly, so those modules are public (their internals are `pub(crate)`), and
//! the `testkit` feature adds the in-memory doubles (`testing`). The TF writer (`tf::writer`)
//! is always built: the `.tf/` view writes with it.

#![deny(clippy::undocumented_unsafe_blocks)]

pub mod api;
mod cli;
pub mod detect;
mod fs;
#[cfg(test)]
mod layers_tests;
pub mod options;
mod stats;
mod views;

pub use cli::main;

// The layers below, under the names every module here uses (`crate::source::ReadAt`).
pub use modelfs_angel as angel;
pub use modelfs_gguf as gguf;
pub use modelfs_io::{codec, source, store};
pub use modelfs_keras as keras;
pub use modelfs_layout as layout;
pub use modelfs_model as model;
#[cfg(any(test, feature = "testkit"))]
pub use modelfs_model::testing;
pub use modelfs_monolith as monolith;
pub use modelfs_numpy as numpy;
pub use modelfs_onnx as onnx;
pub use modelfs_orbax as orbax;
pub use modelfs_safetensors as safetensors;
pub use modelfs_tf as tf;
pub use modelfs_torch as torch;
