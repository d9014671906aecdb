//! modelfs: mount model artefacts read-only — TensorFlow checkpoints (V2, V1), SavedModels and
//! graphs, Angel model directories, recommendation hash tables, safetensors, PyTorch (and
//! DCP), numpy, GGUF, ONNX, Keras and Orbax; local, on S3/GCS/Azure/HTTP or HDFS — showing
//! every variable, constant, matrix, partition and embedding row as files in the layouts the
//! user picks.
//!
//! This crate is the command line only (`cli`, and `main` for the binary). What it stands on is
//! in the workspace's crates, bottom up (each uses only those before it; the compiler keeps it
//! between crates, `layers_tests` inside them): `modelfs-io` (bytes at offsets, codecs, stores)
//! → `modelfs-model` (the format-neutral tree) → one crate per format (`modelfs-tf`,
//! `modelfs-angel`, … never each other) → `modelfs-detect` (which reader a source is for) →
//! `modelfs-layout` (file renderers) → `modelfs-views`, `modelfs-stats` → `modelfs-core`
//! (options, the tree of files and FUSE, model opening, the program API) → `cli` here, and the
//! Python package beside it. `cli` and `api` are two faces over `modelfs-core`; neither names
//! the other.
//!
//! The binary is one line over `main` (its exit status is the command's: 0 yes, 1 usage or
//! "no", 2 a source's trouble, 3 a mount's, 64 a name not in the model):
//!
//! ```no_run
//! std::process::exit(modelfs::main());
//! ```

#![deny(clippy::undocumented_unsafe_blocks)]

mod cli;
#[cfg(test)]
mod layers_tests;

pub use cli::main;
