//! The format-neutral view that every reader (TensorFlow, Angel, Monolith, safetensors, numpy,
//! PyTorch, GGUF) produces and that `layout`,
//! `fs` and `cli` consume: a tree of directories and tensors, each tensor with a dtype, a shape,
//! partitions and a way to read any range of its elements.
//!
//! Invariants:
//! - Element bytes handed out by `Tensor::read_elements` are little-endian, C order, in the
//!   element width of `DType::elem_size` (bfloat16 as its 16 bits, bool as one byte 0/1).
//! - A tree path is a list of raw *display* components (bytes, not yet escaped for the file
//!   system; escaping is `fs::names`' job). Readers undo their own key encodings (TF2 object
//!   keys) before handing components out.
//! - Listing a directory never requires decoding tensor data.
//!
//! This is the crate `modelfs-model`; each reader is a crate of its own on top of it, and the
//! renderers above know only this tree. With the `testkit` feature, `testing` holds in-memory
//! doubles (a tensor, a model) for the tests of the crates above.
//!
//! ```
//! use modelfs_model::{DType, TensorMeta};
//! let meta = TensorMeta::new(b"emb".to_vec(), DType::F32, vec![1000, 16], "tf-checkpoint");
//! assert_eq!(meta.num_elements(), Some(16_000));
//! assert_eq!(DType::F32.elem_size(), Some(4));
//! ```

#![deny(clippy::undocumented_unsafe_blocks)]

// The layers below, under the names every module of modelfs uses (`crate::source::ReadAt`).
pub(crate) use modelfs_io::{codec, source, store};

mod crc;
mod dtype;
mod error;
#[cfg(any(test, feature = "testkit"))]
pub mod expect;
pub mod float8;
mod meta;
pub mod rows;
pub mod scan;
mod sparse;
mod tensor;
pub mod verdict;

pub use dtype::DType;
pub use error::{BoxError, KnownProblem, ModelError, ModelResult, OpenError, RequestError};
pub use meta::{base_name, PartitionMeta, Role, StoredForm, TensorMeta};
pub use sparse::*;
pub use verdict::{Finding, Severity};

pub use crc::Crc;
pub use rows::default_key_kind;
pub mod blocks;
pub mod flat;
pub mod grid;
pub mod in_place;
pub mod member;
pub mod multi;
pub mod strided;
pub use member::{Member, Members, Opener};
pub use rows::{KeyKind, RowHit, MAX_ROW_BYTES};
pub use tensor::{debug_check, read_elements, WithMeta};
pub use tensor::{Checksummed, EachString, Keyed, Sparse, StoredRun, Strings, Tensor};

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

/// One child of a directory in the model tree.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum DirEntry {
    Dir(Vec<u8>),
    Tensor(Vec<u8>),
    /// A symbolic link (e.g. `latest` in a multi-checkpoint directory) to a sibling path.
    Symlink {
        name: Vec<u8>,
        target: Vec<u8>,
    },
    /// A file the reader renders itself (`Model::document`), shown under exactly this name.
    Document(Vec<u8>),
    /// Another name for the tensor at `target` (a path relative to this directory; `..`
    /// goes up): the file system shows a symbolic link per file of that tensor.
    Alias {
        name: Vec<u8>,
        target: Vec<Vec<u8>>,
    },
    /// A directory the reader adds (`constants/`, `signatures/`, `by-name/`): its name wins
    /// over a key's (SPEC §6), which the file system then shows escaped.
    Reserved(Vec<u8>),
}

/// The model path component of a reader's own entry (`DirEntry::Reserved`, `::Document`)
/// named `name`: the name after a NUL byte. The file system shows `name`; the marker keeps the
/// entry's path apart from a key's component of the same name (which it shows escaped), so
/// `constants/x` of the reader and a variable `constants/x` stay two files. (A key component
/// that itself starts with NUL and equals a marked name is the one case that would collide.)
pub fn own_component(name: &[u8]) -> Vec<u8> {
    let mut c = Vec::with_capacity(name.len() + 1);
    c.push(0);
    c.extend_from_slice(name);
    c
}

/// The model path of a `/`-separated key (`dense/kernel` → `[dense, kernel]`).
pub fn key_path(key: &str) -> Vec<Vec<u8>> {
    key.split('/').map(|c| c.as_bytes().to_vec()).collect()
}

/// A file that is not a layout of one tensor (a signature, the graph as text), rendered by its
/// reader in independently renderable chunks, like a text layout.
///
/// Invariant: rendering is deterministic (the same chunk always gives the same bytes), and
/// `chunks` is known without rendering anything.
pub trait Document: Send + Sync {
    fn chunks(&self) -> u64;
    /// Appends chunk `chunk`'s bytes to `out`.
    fn render(&self, chunk: u64, out: &mut Vec<u8>) -> Result<(), ModelError>;
    /// The source file's modification time.
    fn mtime(&self) -> SystemTime;
    /// Small enough to render whole on first sight (its size is then exact at once).
    fn small(&self) -> bool {
        self.chunks() <= 1
    }
    /// Like `Tensor::cache_identity`: lets the size outlive the object and the mount.
    fn cache_identity(&self) -> Option<String> {
        None
    }
}

/// What the readers take from the command line's options.
#[derive(Clone)]
pub struct ReaderOptions {
    /// Check each tensor's checksum on its first read (`verify=crc`).
    pub verify: bool,
    /// Separator of Angel text formats.
    pub sep: String,
    /// Memory for decoded index blocks (TF tables).
    pub block_cache_bytes: u64,
    /// Where checksum verdicts of large tensors persist (`cache_dir`), if anywhere.
    pub verdicts: Option<Arc<dyn crate::store::Store>>,
    /// Where readers' indexes of data files persist (`cache_dir`: an Angel text partition's
    /// line index), if anywhere.
    pub indexes: Option<Arc<dyn crate::store::Store>>,
    /// Where hash tables' key indexes persist (`cache_dir`), if anywhere.
    pub key_index_dir: Option<PathBuf>,
    /// Where the source's files are (local, S3, HTTP).
    pub storage: Arc<dyn crate::source::Storage>,
    /// The members opened from this source (checkpoints of a directory, Serving versions),
    /// found again when the source is looked at again.
    pub members: Arc<Members>,
}

impl ReaderOptions {
    /// The source's file at `path`, or an open error naming it.
    pub fn open_file(&self, path: &Path) -> Result<Arc<dyn crate::source::ReadAt>, OpenError> {
        self.storage
            .open(path)
            .map_err(|e| OpenError::unreadable(path, e))
    }
}

impl Default for ReaderOptions {
    fn default() -> Self {
        ReaderOptions {
            verify: true,
            sep: ",".into(),
            block_cache_bytes: 64 << 20,
            verdicts: None,
            indexes: None,
            key_index_dir: None,
            storage: crate::source::local(),
            members: Arc::default(),
        }
    }
}

/// Summary for `modelfs info`.
#[derive(Clone, Debug, Default)]
pub struct ModelSummary {
    pub format: String,
    pub tensors: u64,
    pub dtypes: std::collections::BTreeMap<String, u64>,
    pub total_bytes: u64,
    /// Damage and dangerous findings (`verdict`): they fail a verdict.
    pub problems: Vec<String>,
    /// What modelfs does not run or decode (`verdict`): shown, never failing.
    pub notes: Vec<String>,
    /// A directory of several checkpoints: each one's own summary, by name.
    pub parts: Vec<(String, ModelSummary)>,
    /// More the reader tells (a graph's nodes by op, constants, signatures), line by line.
    pub details: Vec<String>,
}

impl ModelSummary {
    /// Adds `f` to the problems or the notes, as its severity says.
    pub fn add(&mut self, f: Finding) {
        match f.severity.fails() {
            true => self.problems.push(f.text),
            false => self.notes.push(f.text),
        }
    }
}

/// A mounted source: a tree of directories and tensors.
pub trait Model: Send + Sync {
    /// Children of the directory at `dir` (display components from the root), sorted, with
    /// `Dir` and `Tensor` entries of the same name both present when a key is a leaf and a
    /// prefix. `NotFound` if `dir` is not a directory.
    fn list_dir(&self, dir: &[Vec<u8>]) -> Result<Vec<DirEntry>, ModelError>;

    /// The tensor at `path`, `NotFound` if there is none.
    fn tensor(&self, path: &[Vec<u8>]) -> Result<Arc<dyn Tensor>, ModelError>;

    /// The document listed as `DirEntry::Document` at `path`.
    fn document(&self, path: &[Vec<u8>]) -> Result<Arc<dyn Document>, ModelError> {
        Err(ModelError::NotFound(format!("{} documents", path.len())))
    }

    /// Walks everything (for `info`); may be slow on huge models.
    fn summary(&self) -> Result<ModelSummary, ModelError>;

    /// Tensors of the model at `root` (a model root) that its tree does not show but a
    /// whole-model copy must carry: a TF2 checkpoint's object graph, without which
    /// `tf.train.Checkpoint.restore` cannot match objects.
    fn hidden_tensors(&self, root: &[Vec<u8>]) -> Vec<Arc<dyn Tensor>> {
        let _ = root;
        Vec::new()
    }

    /// Keyed tables the tree does not list, found by name (a TF hash table is listed as its
    /// two saved tensors): their paths.
    fn unlisted_tables(&self) -> Result<Vec<Vec<Vec<u8>>>, ModelError> {
        Ok(Vec::new())
    }

    /// How many parts the table at `path` is stored in that each read alone, without the
    /// others (a Monolith table's shards), where reading it whole would first look at every
    /// part: an engine's task reads one (`table_part`), and nothing looks at them all. `None`:
    /// the table is read as one tensor (`tensor`), whose pieces are cheap to find.
    fn table_parts(&self, path: &[Vec<u8>]) -> Option<usize> {
        let _ = path;
        None
    }

    /// Part `i` of the table at `path` (`table_parts`), as a keyed tensor of its own.
    fn table_part(&self, path: &[Vec<u8>], i: usize) -> Result<Arc<dyn Tensor>, ModelError> {
        let _ = (path, i);
        Err(ModelError::NotFound("a table stored in parts".into()))
    }

    /// The directories that are whole models of their own, each with its own views (SPEC §7):
    /// the root, or each checkpoint of a directory of several.
    fn model_roots(&self) -> Vec<Vec<Vec<u8>>> {
        vec![Vec::new()]
    }

    /// The models shown side by side at the root (a directory of checkpoints, a Serving
    /// base), by name, with their member ids (`member`): when the source is looked at again,
    /// the file system keeps the subtree of each name whose id is unchanged. `None`: one model.
    fn members(&self) -> Option<Vec<(Vec<u8>, u64)>> {
        None
    }

    /// Whether member `name` (`members`) is opened yet; `None` if there is no such member.
    /// Its directory's `stat` does not open it (`ls -l` of 500 checkpoints opens none).
    fn member_opened(&self, name: &[u8]) -> Option<bool> {
        let _ = name;
        None
    }
}

#[cfg(any(test, feature = "testkit"))]
pub mod testing;
