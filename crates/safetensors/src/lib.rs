//! safetensors (huggingface/safetensors): a file `*.safetensors`, or a directory of shards
//! with their `*.safetensors.index.json` (`weight_map`: key → shard file), or a directory of
//! `*.safetensors` files without one (a directory that cannot be listed, over HTTP: its
//! `model.safetensors.index.json`, else its `model.safetensors`). Only the headers are read at mount; a tensor's bytes
//! are read in place from the (mapped) file.
//!
//! Keys are split on `/` into directories as a TF key is (SPEC §2): a key `a.b.c` is one file
//! name, so the `.safetensors` view of a mounted checkpoint mounts back as the same tree. The
//! header's `__metadata__` is the root's `__metadata__.json` (the format reserves the key, so
//! no tensor has that name).
//!
//! torch's distributed HuggingFace writer (`HuggingFaceStorageWriter(save_distributed=True)`)
//! writes each rank's shards of a tensor under the tensor's own name, with where each starts
//! in its `__metadata__`'s `DCP_SHARDING_INFO`: those are assembled into the whole tensor
//! (`model::blocks`; its shards are its partitions), a shard replicated on ranks kept once.
//!
//! This is the crate `modelfs-safetensors`, one of modelfs's readers: it knows only
//! `modelfs-io` and `modelfs-model`. `files_of` says which files a path is (a file, a sharded
//! directory), `open` gives them as one `model::Model`.
//!
//! ```
//! use modelfs_model::DirEntry;
//! let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/safetensors/sharded"));
//! let files = modelfs_safetensors::files_of(&*modelfs_io::source::local(), dir)
//!     .unwrap()
//!     .expect("a sharded directory with its index");
//! assert_eq!(files.len(), 2);
//! let model = modelfs_safetensors::open(&files, &Default::default()).unwrap();
//! assert!(!model.list_dir(&[]).unwrap().is_empty());
//! ```
#![deny(clippy::undocumented_unsafe_blocks)]

// The layers below, under the names every module of modelfs uses (`crate::source::ReadAt`).
pub(crate) use modelfs_io::source;
pub(crate) use modelfs_model as model;
#[cfg(test)]
pub(crate) use modelfs_model::testing;

mod header;
mod tensor;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use crate::model::blocks::{Block, Blocks};
use crate::model::flat::{Flat, JsonDocument};
use crate::model::{
    base_name, Model, ModelError, OpenError, PartitionMeta, ReaderOptions, TensorMeta,
};
use crate::source::{EntryKind, ReadAt, ReadExt, Storage};
pub use header::HeaderError;
use tensor::StTensor;

const SUFFIX: &str = ".safetensors";
const INDEX_SUFFIX: &str = ".safetensors.index.json";
/// The root document holding `__metadata__`.
const METADATA: &[u8] = b"__metadata__.json";

/// The files of the safetensors source at `path`, if it is one: the file itself, or a
/// directory's shards (from its index, else its one `*.safetensors`, or every one when all are
/// named as shards, `…-0000i-of-0000n.safetensors`, sorted).
pub fn files_of(fs: &dyn Storage, path: &Path) -> Result<Option<Vec<PathBuf>>, OpenError> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if name.ends_with(SUFFIX) && fs.is_file(path) {
        return Ok(Some(vec![path.to_path_buf()]));
    }
    if name.ends_with(INDEX_SUFFIX) && fs.is_file(path) {
        let dir = path.parent().unwrap_or(Path::new(""));
        return crate::model::flat::shards_of_index(fs, dir, path).map(Some);
    }
    // A directory that cannot be listed (HTTP) is found by the names `save_pretrained` gives.
    let index = path.join(format!("model{INDEX_SUFFIX}"));
    let single = path.join(format!("model{SUFFIX}"));
    let entries = match fs.list(path) {
        Ok(entries) if fs.is_dir(path) => entries,
        _ if fs.is_file(&index) => {
            return crate::model::flat::shards_of_index(fs, path, &index).map(Some)
        }
        _ if fs.is_file(&single) => return Ok(Some(vec![single])),
        _ => return Ok(None),
    };
    let names = |suffix: &str| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = entries
            .iter()
            .filter(|(n, k)| {
                *k == EntryKind::File && n.to_str().is_some_and(|n| n.ends_with(suffix))
            })
            .map(|(n, _)| path.join(n))
            .collect();
        v.sort();
        v
    };
    let indexes = names(INDEX_SUFFIX);
    match indexes.as_slice() {
        [index] => crate::model::flat::shards_of_index(fs, path, index).map(Some),
        [] => {
            // Without an index, files named as shards are one model; several of other names
            // are checkpoints of a run (`epoch1.safetensors`, …): each a member of its own
            // (a run directory, found above the readers).
            let files = names(SUFFIX);
            let shards = files.len() == 1
                || files
                    .iter()
                    .all(|f| f.to_str().is_some_and(|n| n.contains("-of-")));
            Ok((!files.is_empty() && shards).then_some(files))
        }
        _ => Err(OpenError::Unsupported {
            path: path.to_path_buf(),
            what: format!(
                "{} safetensors index files; mount one of them",
                indexes.len()
            ),
        }),
    }
}

/// The model of the safetensors source at `path` (`files_of`, then `open`); `None` when it is not
/// one.
pub fn open_path(path: &Path, opts: &ReaderOptions) -> Result<Option<Arc<dyn Model>>, OpenError> {
    let files = files_of(&*opts.storage, path)?;
    files.map(|files| open(&files, opts)).transpose()
}

/// The model of the safetensors `files` (`files_of`).
pub fn open(files: &[PathBuf], opts: &ReaderOptions) -> Result<Arc<dyn Model>, OpenError> {
    let mut model = Flat::new("safetensors");
    let mut metadata = BTreeMap::new();
    let mut mtime = SystemTime::UNIX_EPOCH;
    let mut shards: BTreeMap<String, Vec<Shard>> = BTreeMap::new();
    let mut sharding = serde_json::Map::new();
    for path in files {
        let file = opts.open_file(path)?;
        mtime = mtime.max(file.mtime());
        let mut h = read_header(&*file).map_err(|e| OpenError::unreadable(path, e))?;
        // torch's HuggingFace writer with `save_distributed`: each rank's file holds its
        // shards of the tensors, where each starts in the whole (`saved_offsets`).
        let info = h.metadata.remove(SHARDING).map(|s| {
            let v = serde_json::from_str::<serde_json::Value>(&s).unwrap_or(s.into());
            sharding.insert(base_name(file.name()).into(), v.clone());
            v
        });
        metadata.extend(h.metadata);
        for e in &h.entries {
            let t = StTensor::new(e, &file);
            match info.as_ref().and_then(|i| i.get(&e.name)) {
                Some(at) => shards.entry(e.name.clone()).or_default().push(Shard {
                    offsets: at
                        .get("saved_offsets")
                        .and_then(|o| o.as_array())
                        .and_then(|o| o.iter().map(|d| d.as_u64()).collect()),
                    tensor: t,
                    entry: e.clone(),
                    file: base_name(file.name()).into(),
                }),
                None => model.add(&e.name, Arc::new(t), file.name()),
            }
        }
    }
    let source = files
        .first()
        .and_then(|f| f.parent())
        .map_or_else(String::new, |d| d.display().to_string());
    for (name, parts) in shards {
        model.add(&name, Arc::new(assemble(&name, parts, &source)), &source);
    }
    if !sharding.is_empty() {
        metadata.insert(
            SHARDING.into(),
            serde_json::Value::Object(sharding).to_string(),
        );
    }
    for (k, v) in &metadata {
        model.detail(format!("metadata {k}: {v}"));
    }
    let value = serde_json::to_value(&metadata).unwrap_or_default();
    model.add_document(METADATA, Arc::new(JsonDocument::new(value, mtime)));
    Ok(Arc::new(model))
}

/// The `__metadata__` key of torch's distributed HuggingFace writer.
const SHARDING: &str = "DCP_SHARDING_INFO";

/// One rank's shard of a tensor.
struct Shard {
    /// Where it starts in the whole (`None`: not a list of offsets).
    offsets: Option<Vec<u64>>,
    tensor: StTensor,
    entry: header::Entry,
    file: String,
}

/// The tensor `name` its shards make: the whole's shape is where the shards end; a shard
/// replicated on several ranks is kept once; gaps, overlaps and mismatched dtypes are its
/// problem (`Blocks`).
fn assemble(name: &str, mut parts: Vec<Shard>, source: &str) -> Blocks {
    let mut seen = std::collections::BTreeSet::new();
    parts.retain(|p| seen.insert((p.offsets.clone(), p.entry.shape.clone())));
    let first = &parts[0].entry;
    let rank = first.shape.len();
    let mut problems = Vec::new();
    let mut shape = vec![0u64; rank];
    for p in &parts {
        match &p.offsets {
            Some(o) if o.len() == rank && p.entry.shape.len() == rank => {
                for d in 0..rank {
                    match o[d].checked_add(p.entry.shape[d]) {
                        Some(e) => shape[d] = shape[d].max(e),
                        None => problems.push(format!("{}: offsets overflow", p.file)),
                    }
                }
            }
            _ => problems.push(format!("{}: saved_offsets do not fit its shape", p.file)),
        }
        if p.entry.dtype != first.dtype {
            problems.push(format!("{}: a shard of another dtype", p.file));
        }
    }
    let mut meta = TensorMeta::new(name.as_bytes().to_vec(), first.dtype, shape, "safetensors");
    meta.problem = (!problems.is_empty()).then(|| problems.join("; "));
    meta.extra
        .insert("assembled_from".into(), "DCP_SHARDING_INFO".into());
    let blocks = parts
        .into_iter()
        .map(|p| {
            let extent = match &p.offsets {
                Some(o) if o.len() == p.entry.shape.len() => Ok(o
                    .iter()
                    .copied()
                    .zip(p.entry.shape.iter().copied())
                    .collect()),
                _ => Err("no saved_offsets".to_string()),
            };
            Block {
                extent,
                part: PartitionMeta {
                    extent: Vec::new(),
                    file: p.file,
                    offset: p.entry.begin,
                    length: p.entry.end - p.entry.begin,
                    part_id: None,
                    extra: serde_json::Map::new(),
                },
                tensor: Ok(Arc::new(p.tensor) as Arc<dyn crate::model::Tensor>),
            }
        })
        .collect();
    Blocks::assemble(meta, source.to_string(), blocks)
}

fn read_header(file: &dyn ReadAt) -> Result<header::Header, ModelError> {
    let size = file.size();
    let first = file.read_vec(0, 8.min(size) as usize)?;
    let n = header::header_len(&first, size).map_err(|e| ModelError::data(file.name(), e))?;
    // Bounded by the file's size and MAX_HEADER (header_len).
    let json = file.read_vec(8, n as usize)?;
    let h = header::parse(&json, size).map_err(|e| ModelError::data(file.name(), e))?;
    Ok(h)
}

/// The fuzz target's entry (`fuzz/fuzz_targets/safetensors.rs`): `data` as a safetensors
/// file, opened and every tensor's first and last elements read. Any `Err` is fine; a panic,
/// a hang or a huge allocation is a bug.
#[cfg(any(test, feature = "testkit"))]
pub fn fuzz_file(data: &[u8]) {
    let file: Arc<dyn ReadAt> = Arc::new(crate::source::MemSource::new(
        "f.safetensors",
        data.to_vec(),
    ));
    let Ok(h) = read_header(&*file) else {
        return;
    };
    for e in &h.entries {
        crate::model::testing::fuzz_touch(&StTensor::new(e, &file));
    }
}

#[cfg(test)]
mod real_tests;
#[cfg(test)]
mod tests;
