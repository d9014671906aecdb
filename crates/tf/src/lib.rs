//! The TensorFlow reader (formats/tf-checkpoint.md): checkpoints (V2 bundles: `bundle/` on
//! `codec::table`, `checkpoint.rs`; V1: `v1.rs`), a directory of several, SavedModels and
//! graphs (`graph/`: constants, signatures, the text printer), TF2 object names
//! (`object_graph.rs`), hash tables saved as tensor pairs (`hashtable.rs`; TFRA, DeepRec EVs),
//! and the checkpoint writer the `.tf/` view and the tests write with (`writer.rs`).
//!
//! This is the crate `modelfs-tf`, one of modelfs's readers: it knows only `modelfs-io` and
//! `modelfs-model`. `detect::open` says whether a path is any TensorFlow form and opens it.
//!
//! ```
//! use modelfs_model::DirEntry;
//! let prefix = std::path::Path::new(concat!(
//!     env!("CARGO_MANIFEST_DIR"),
//!     "/../../fixtures/tf/multi_shard/ckpt"
//! ));
//! let model = modelfs_tf::detect::open(prefix, &Default::default())
//!     .unwrap()
//!     .expect("a TensorFlow checkpoint");
//! assert!(model.list_dir(&[]).unwrap().contains(&DirEntry::Tensor(b"a".to_vec())));
//! // Not a TensorFlow form: another reader may know it.
//! let npy = prefix.join("../../../numpy/dt_f4.npy");
//! assert!(modelfs_tf::detect::open(&npy, &Default::default()).unwrap().is_none());
//! ```

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
mod probe;
pub mod proto;
pub(crate) mod v1;
mod whole;
pub mod writer;
