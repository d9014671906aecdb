//! The Angel model directory reader (formats/angel.md).
//!
//! `open` accepts two kinds of directory:
//! - a model directory: sub-folders holding `_meta` (Angel ≥ 3.2) or `meta` (2.x), one matrix
//!   each; the root lists one tensor per matrix, named by its folder;
//! - a single matrix folder (one that itself holds `_meta`/`meta`), shown as a model with that
//!   one matrix, named by the folder. This makes `modelfs ls model/input_weight` work as users
//!   expect; a model directory's own meta-less root is never confused with it.
//!
//! Listing only reads directory names. A matrix's meta is decoded (and its data files mapped)
//! when the matrix is first looked up; its data when first read. The one exception is at open:
//! the first matrix's meta header is checked so that a legacy (binary or `writeUTF`) model is
//! refused as a whole with a clear message (§3.2), instead of mounting a tree of broken files.
//!
//! This is the crate `modelfs-angel`, one of modelfs's readers: it knows only `modelfs-io` and
//! `modelfs-model`. The output side of Angel's formats (the `.angel/` view, the layouts) is
//! `modelfs`'s `layout`, which shares no code with these decoders: each checks the other.
//!
//! ```
//! let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/angel/formats/model"));
//! let model = modelfs_angel::open(dir, &Default::default()).unwrap();
//! let name = b"ValueText_float_intkey_dense".to_vec();
//! let t = model.tensor(&[name]).unwrap();
//! assert_eq!(t.meta().dtype, modelfs_model::DType::F32);
//! ```
#![deny(clippy::undocumented_unsafe_blocks)]

// The layers below, under the names every module of modelfs uses (`crate::source::ReadAt`).
pub(crate) use modelfs_io::{codec, source, store};
pub(crate) use modelfs_model as model;
#[cfg(test)]
pub(crate) use modelfs_model::testing;

mod crlf;
mod decimal;
pub mod decode;
mod dir;
mod direct;
mod fault;
mod idline;
mod lines;
mod matrix;
pub mod merge;
mod meta;
mod region;
mod rowtype;
mod stream;
mod text;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use crate::codec::angel::AngelFormat;
pub use decode::{decode_partition, DecodeError, PartInput};
pub(crate) use dir::MatrixDir;
pub(crate) use matrix::AngelMatrix;
pub use meta::{parse_meta, read_envelope, MatrixMeta, MetaError, PartMeta};
#[cfg(any(test, feature = "testkit"))]
pub use region::decode_by_range;
pub use rowtype::{RowType, ValueType};

use crate::model::{DirEntry, Model, ModelError, ModelSummary, OpenError, ReaderOptions, Tensor};
use crate::source::Storage;

/// True when `path` is an Angel model directory or a single matrix folder.
pub fn is_model_dir(storage: &Arc<dyn Storage>, path: &Path) -> bool {
    if !storage.is_dir(path) {
        return false;
    }
    dir::meta_file(&**storage, path).is_some()
        || dir::scan(storage, path)
            .map(|s| !s.matrices.is_empty())
            .unwrap_or(false)
}

/// Opens the Angel model (or single matrix folder) at `path`.
pub fn open(path: &Path, opts: &ReaderOptions) -> Result<Arc<dyn Model>, OpenError> {
    let fail = |what: String| OpenError::Unsupported {
        path: path.to_path_buf(),
        what,
    };
    let storage = &opts.storage;
    if !storage.is_dir(path) {
        return Err(fail("not a directory".into()));
    }
    let (matrices, problems) = match dir::meta_file(&**storage, path) {
        Some((meta_path, _)) => {
            use std::os::unix::ffi::OsStrExt;
            let canon = match path.canonicalize() {
                Ok(c) if storage.is_local() => c,
                _ => path.to_path_buf(),
            };
            let name = canon
                .file_name()
                .map(|n| n.as_bytes().to_vec())
                .unwrap_or_else(|| b"matrix".to_vec());
            (
                vec![MatrixDir {
                    name,
                    dir: path.to_path_buf(),
                    meta_path,
                    storage: Arc::clone(storage),
                }],
                vec![],
            )
        }
        None => {
            let s = dir::scan(storage, path).map_err(|e| OpenError::unreadable(path, e))?;
            if s.matrices.is_empty() {
                let why = if s.problems.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", s.problems.join("; "))
                };
                return Err(OpenError::NotRecognised {
                    path: path.to_path_buf(),
                    looked_for: format!("sub-directories holding _meta or meta{why}"),
                });
            }
            (s.matrices, s.problems)
        }
    };
    refuse_legacy(&matrices[0]).map_err(|e| fail(e.to_string()))?;
    let entries = matrices
        .into_iter()
        .map(|m| {
            (
                m.name.clone(),
                Entry {
                    dir: m,
                    loaded: OnceLock::new(),
                },
            )
        })
        .collect();
    Ok(Arc::new(AngelModel {
        entries,
        problems,
        sep: opts.sep.clone(),
        indexes: opts.indexes.clone(),
    }))
}

/// Refuses a model whose (first) meta is a legacy encoding (§3.2).
fn refuse_legacy(m: &MatrixDir) -> Result<(), MetaError> {
    if let Ok(entries) = m.storage.list(&m.dir) {
        use std::os::unix::ffi::OsStrExt;
        if entries
            .iter()
            .any(|(n, _)| n.as_bytes().starts_with(b"ParameterServer_"))
        {
            return Err(MetaError::LegacyBinary);
        }
    }
    let Ok(f) = m.storage.open(&m.meta_path) else {
        return Ok(()); // reported on the matrix itself
    };
    match meta::read_envelope(&*f) {
        Err(e @ (MetaError::LegacyBinary | MetaError::WriteUtf)) => Err(e),
        _ => Ok(()),
    }
}

struct Entry {
    dir: MatrixDir,
    loaded: OnceLock<Arc<AngelMatrix>>,
}

/// An Angel model: one tensor per matrix at the root.
pub(crate) struct AngelModel {
    entries: BTreeMap<Vec<u8>, Entry>,
    problems: Vec<String>,
    sep: String,
    /// Where text partitions' line indexes persist (`cache_dir`).
    indexes: Option<Arc<dyn crate::store::Store>>,
}

impl AngelModel {
    /// The matrix named `name`, loading its meta on first use.
    pub(crate) fn matrix(&self, name: &[u8]) -> Option<Arc<AngelMatrix>> {
        let e = self.entries.get(name)?;
        if let Some(m) = e.loaded.get() {
            return Some(Arc::clone(m));
        }
        match AngelMatrix::load(&e.dir, &self.sep, self.indexes.clone()) {
            (m, true) => Some(m),
            (m, false) => Some(Arc::clone(e.loaded.get_or_init(|| m))),
        }
    }
}

impl Model for AngelModel {
    fn list_dir(&self, dir: &[Vec<u8>]) -> Result<Vec<DirEntry>, ModelError> {
        if !dir.is_empty() {
            return Err(ModelError::NotFound(
                String::from_utf8_lossy(&dir.join(&b'/')).into_owned(),
            ));
        }
        Ok(self
            .entries
            .keys()
            .map(|k| DirEntry::Tensor(k.clone()))
            .collect())
    }

    fn tensor(&self, path: &[Vec<u8>]) -> Result<Arc<dyn Tensor>, ModelError> {
        let not_found =
            || ModelError::NotFound(String::from_utf8_lossy(&path.join(&b'/')).into_owned());
        match path {
            [name] => self
                .matrix(name)
                .map(|m| m as Arc<dyn Tensor>)
                .ok_or_else(not_found),
            _ => Err(not_found()),
        }
    }

    fn summary(&self) -> Result<ModelSummary, ModelError> {
        let mut s = ModelSummary {
            format: "angel".into(),
            problems: self.problems.clone(),
            ..Default::default()
        };
        for name in self.entries.keys() {
            let Some(m) = self.matrix(name) else { continue };
            let meta = m.meta();
            s.tensors += 1;
            *s.dtypes.entry(meta.dtype.name().into_owned()).or_default() += 1;
            s.total_bytes += meta.partitions.iter().map(|p| p.length).sum::<u64>();
            if let Some(p) = &meta.problem {
                s.problems
                    .push(format!("{}: {p}", String::from_utf8_lossy(name)));
            }
        }
        Ok(s)
    }
}

#[cfg(test)]
pub(crate) mod tests;
