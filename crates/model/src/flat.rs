//! A model that is a set of named tensors (a safetensors file, an `.npz`, a `torch.save`
//! archive): keys split on `/` into directories (SPEC §2), plus documents of the reader's own
//! (at the root, or in a directory: a PyTorch dict's plain values).

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{DirEntry, Document, Model, ModelError, ModelSummary, Tensor};

/// A reader's document that is one JSON value (`__metadata__.json`, `__values__.json`),
/// pretty-printed.
pub struct JsonDocument {
    value: serde_json::Value,
    mtime: std::time::SystemTime,
}

impl JsonDocument {
    pub fn new(value: serde_json::Value, mtime: std::time::SystemTime) -> JsonDocument {
        JsonDocument { value, mtime }
    }
}

impl Document for JsonDocument {
    fn chunks(&self) -> u64 {
        1
    }
    fn render(&self, _chunk: u64, out: &mut Vec<u8>) -> Result<(), ModelError> {
        let v =
            serde_json::to_vec_pretty(&self.value).map_err(|e| ModelError::data("a .json", e))?;
        out.extend_from_slice(&v);
        out.push(b'\n');
        Ok(())
    }
    fn mtime(&self) -> std::time::SystemTime {
        self.mtime
    }
}

/// A document and its file name.
type Named = (Vec<u8>, Arc<dyn Document>);

pub struct Flat {
    /// By tree path (the key split on `/`).
    tensors: BTreeMap<Vec<Vec<u8>>, Arc<dyn Tensor>>,
    /// The reader's documents, by directory, each with its file name.
    documents: BTreeMap<Vec<Vec<u8>>, Vec<Named>>,
    summary: ModelSummary,
}

impl Flat {
    /// An empty model of `format` (as `info` names it).
    pub fn new(format: &str) -> Flat {
        Flat {
            tensors: BTreeMap::new(),
            documents: BTreeMap::new(),
            summary: ModelSummary {
                format: format.into(),
                ..Default::default()
            },
        }
    }

    /// Adds the tensor of `key`; a key seen before keeps its first tensor and is a problem.
    pub fn add(&mut self, key: &str, t: Arc<dyn Tensor>, from: &str) {
        let path = crate::key_path(key);
        if let Some(p) = &t.meta().problem {
            self.summary.problems.push(format!("{from}: {key}: {p}"));
        }
        if let Some(n) = &t.meta().note {
            self.summary.notes.push(format!("{from}: {key}: {n}"));
        }
        if self.tensors.contains_key(&path) {
            self.summary
                .problems
                .push(format!("{from}: {key} is there twice; the first is shown"));
            return;
        }
        self.tensors.insert(path, t);
    }

    /// Adds the root document `name` (a name no key can take).
    pub fn add_document(&mut self, name: &[u8], d: Arc<dyn Document>) {
        self.add_document_in(&[], name, d);
    }

    /// Adds the document `name` to the directory `dir` (key components).
    pub fn add_document_in(&mut self, dir: &[Vec<u8>], name: &[u8], d: Arc<dyn Document>) {
        self.documents
            .entry(dir.to_vec())
            .or_default()
            .push((name.to_vec(), d));
    }

    /// A problem of the source that is not one tensor's, for `info`: damage.
    pub fn problem(&mut self, line: String) {
        self.summary.problems.push(line);
    }

    /// A finding of the source that is not one tensor's, a problem or a note as its
    /// severity says.
    pub fn finding(&mut self, f: super::Finding) {
        self.summary.add(f);
    }

    /// A line for `info`.
    pub fn detail(&mut self, line: String) {
        self.summary.details.push(line);
    }
}

/// Appends the children of `dir` among `paths` (tensors, and directories holding some) to `out`,
/// once for each path below it: the caller sorts and dedups.
pub(crate) fn children<V>(
    paths: &BTreeMap<Vec<Vec<u8>>, V>,
    dir: &[Vec<u8>],
    out: &mut Vec<DirEntry>,
) {
    // Paths under `dir` are one range of the map: it is ordered component by component.
    for k in paths.range(dir.to_vec()..).map(|(k, _)| k) {
        if !k.starts_with(dir) {
            break;
        }
        if k.len() == dir.len() {
            continue;
        }
        let name = k[dir.len()].clone();
        out.push(match k.len() == dir.len() + 1 {
            true => DirEntry::Tensor(name),
            false => DirEntry::Dir(name),
        });
    }
}

impl Model for Flat {
    fn list_dir(&self, dir: &[Vec<u8>]) -> Result<Vec<DirEntry>, ModelError> {
        let mut out = Vec::new();
        children(&self.tensors, dir, &mut out);
        if let Some(docs) = self.documents.get(dir) {
            out.extend(docs.iter().map(|(n, _)| DirEntry::Document(n.clone())));
        }
        if out.is_empty() && !dir.is_empty() {
            return Err(ModelError::NotFound(format!("{} components", dir.len())));
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    fn tensor(&self, path: &[Vec<u8>]) -> Result<Arc<dyn Tensor>, ModelError> {
        self.tensors
            .get(path)
            .cloned()
            .ok_or_else(|| ModelError::NotFound("no such tensor".into()))
    }

    fn document(&self, path: &[Vec<u8>]) -> Result<Arc<dyn Document>, ModelError> {
        // The file system asks for a reader's own entry by its marked name (`own_component`).
        let Some((name, dir)) = path.split_last() else {
            return Err(ModelError::NotFound("no such document".into()));
        };
        self.documents
            .get(dir)
            .into_iter()
            .flatten()
            .find(|(n, _)| name.split_first() == Some((&0, n.as_slice())))
            .map(|(_, d)| Arc::clone(d))
            .ok_or_else(|| ModelError::NotFound("no such document".into()))
    }

    fn summary(&self) -> Result<ModelSummary, ModelError> {
        let mut s = self.summary.clone();
        for t in self.tensors.values() {
            let m = t.meta();
            s.tensors += 1;
            *s.dtypes.entry(m.dtype_shown()).or_default() += 1;
            // A count from a file: a shape whose bytes overflow counts nothing (the tensor says
            // why), never a wrapped total.
            s.total_bytes = s.total_bytes.saturating_add(m.stored_bytes().unwrap_or(0));
        }
        Ok(s)
    }
}

/// The largest index json read.
const INDEX_MAX: u64 = 64 << 20;

/// The shard files a sharded model's index names (`weight_map`: key → file, as
/// `save_pretrained` writes it for safetensors and PyTorch shards), each once, in name order.
pub fn shards_of_index(
    fs: &dyn crate::source::Storage,
    dir: &std::path::Path,
    index: &std::path::Path,
) -> Result<Vec<std::path::PathBuf>, super::OpenError> {
    let bytes = fs
        .read_small(index, INDEX_MAX)
        .map_err(|e| super::OpenError::unreadable(index, e))?;
    let v: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| super::OpenError::unreadable(index, e))?;
    let map = v
        .get("weight_map")
        .and_then(|m| m.as_object())
        .ok_or_else(|| super::OpenError::unreadable(index, "no \"weight_map\" object"))?;
    let mut files = std::collections::BTreeSet::new();
    for f in map.values() {
        let f = f
            .as_str()
            .filter(|f| !f.contains('/') && *f != ".." && !f.is_empty())
            .ok_or_else(|| {
                super::OpenError::unreadable(index, format!("shard {f} is not a file name"))
            })?;
        files.insert(dir.join(f));
    }
    Ok(files.into_iter().collect())
}
