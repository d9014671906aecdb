//! Orbax checkpoints (JAX, Flax, T5X, MaxText): a directory saved by `orbax.checkpoint`,
//! its arrays read in place, nothing restored.
//!
//! An Orbax item (what `StandardCheckpointer`/`PyTreeCheckpointer` save) is a directory with
//! `_METADATA` (the pytree: each leaf's key path) and its arrays, each a zarr array (v2
//! `.zarray` or v3 `zarr.json`, `zarr`) named by the leaf's path joined with `.`
//! (`params.dense.kernel`). The arrays are either keys of one OCDBT database
//! (`manifest.ocdbt`, `d/…`, `ocdbt.process_N/…`: `ocdbt`) — Orbax's default — or
//! directories of their own. A step of a `CheckpointManager` (`0/`, `1/`, …) is a directory
//! of items (`default/`, `state/`, …) beside `_CHECKPOINT_METADATA`; the manager's directory
//! is its steps side by side, and a run still writing them is followed as any other.
//!
//! Names are the pytree paths (`params/dense/kernel`, `opt_state/0/mu/…`); a step's items
//! are its top directories. An array sharded over devices is one tensor (its shards are the
//! chunks of its grid). Each chunk is decoded when a read first needs it (zstd, gzip, zlib,
//! a CRC-32C checked), and the decoded chunks of the process are kept within a fixed budget
//! (`chunks`: the decoded-blocks share of `cache=`); an uncompressed chunk is read in place. `__metadata__.json` holds
//! `_METADATA`, `_CHECKPOINT_METADATA` and `_sharding` as stored; a tensor's `.json` gives
//! its zarr metadata and sharding. Paths in the metadata never leave the checkpoint.
//!
//! This is the crate `modelfs-orbax`, one of modelfs's readers: it knows only `modelfs-io`
//! and `modelfs-model`. `open_path` opens a directory if it is an Orbax item or step.
//!
//! ```
//! use modelfs_model::DirEntry;
//! let path = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/orbax/ocdbt"));
//! let model = modelfs_orbax::open_path(path, &Default::default())
//!     .unwrap()
//!     .expect("an Orbax checkpoint");
//! let params = model.list_dir(&[b"params".to_vec()]).unwrap();
//! assert!(params.contains(&DirEntry::Dir(b"dense".to_vec())));
//! ```

pub(crate) use modelfs_io::source;
pub(crate) use modelfs_model as model;

mod chunks;
mod ocdbt;
mod stream;
mod zarr;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value as Json;

use crate::model::flat::{Flat, JsonDocument};
use crate::model::grid::Grid;
use crate::model::{DType, Model, ModelError, OpenError, ReaderOptions, Tensor, TensorMeta};
use crate::source::{open_inside, Outside, ReadCtx, ReadExt, SourceError, Storage};
use crate::zarr::Array;

/// An item's pytree metadata.
const METADATA: &str = "_METADATA";
/// A step's (and, in older saves, an item's) metadata.
const CHECKPOINT_METADATA: &str = "_CHECKPOINT_METADATA";
const SHARDING: &str = "_sharding";
const STRINGS: &str = "_strings.json";
/// What a step's JSON items (`JsonSave`) are stored as.
const JSON_ITEMS: &[&str] = &["metadata", "data.json"];
/// The root document.
const DOCUMENT: &[u8] = b"__metadata__.json";
/// The largest metadata file read (`_METADATA`, `.zarray`).
const MAX_JSON: u64 = 64 << 20;
/// Items of a step, arrays of an item: a damaged checkpoint cannot make the open unbounded.
const MAX_ITEMS: usize = 256;
const MAX_ARRAYS: usize = 1 << 20;
/// Chunks up to this size are decoded whole and kept (`chunks`); larger ones are read as a
/// stream (`stream`).
const WHOLE: u64 = 16 << 20;

/// Whether `dir` is an Orbax item (`_METADATA`, or an OCDBT database's `manifest.ocdbt`).
fn is_item(fs: &dyn Storage, dir: &Path) -> bool {
    fs.is_file(&dir.join(METADATA)) || fs.is_file(&dir.join(ocdbt::MANIFEST))
}

/// The items of the step `dir` (its sub-directories that are items), if it is one.
fn items_of(fs: &dyn Storage, dir: &Path) -> Option<Vec<String>> {
    if !fs.is_file(&dir.join(CHECKPOINT_METADATA)) {
        return None;
    }
    let mut items: Vec<String> = fs
        .list(dir)
        .ok()?
        .into_iter()
        .filter_map(|(n, _)| n.into_string().ok())
        .filter(|n| !n.starts_with('.') && is_item(fs, &dir.join(n)))
        .collect();
    items.sort();
    items.truncate(MAX_ITEMS);
    (!items.is_empty()).then_some(items)
}

/// The model at `path`, if it is an Orbax item or a step of items.
pub fn open_path(path: &Path, opts: &ReaderOptions) -> Result<Option<Arc<dyn Model>>, OpenError> {
    let fs = &*opts.storage;
    if !fs.is_dir(path) {
        return Ok(None);
    }
    chunks::budget(opts.block_cache_bytes);
    let mut model = Flat::new("orbax");
    let mut doc = serde_json::Map::new();
    if is_item(fs, path) {
        let d = item(opts, path, "", &mut model).map_err(|e| OpenError::unreadable(path, e))?;
        doc = d;
    } else if let Some(items) = items_of(fs, path) {
        // A step's JSON items (a `Composite`'s `JsonSave`): not arrays, kept in the document.
        for (name, kind) in fs.list(path).unwrap_or_default() {
            let Some(name) = name.to_str().filter(|n| !items.iter().any(|i| i == n)) else {
                continue;
            };
            if kind != source::EntryKind::Dir {
                continue;
            }
            for file in JSON_ITEMS {
                if let Ok(Some(v)) = json_file(fs, &path.join(name).join(file)) {
                    doc.insert(name.to_string(), v);
                }
            }
        }
        for name in items {
            let d = item(opts, &path.join(&name), &name, &mut model)
                .map_err(|e| OpenError::unreadable(&path.join(&name), e))?;
            doc.insert(name, d.into());
        }
    } else {
        return Ok(None);
    }
    if let Some(v) = json_file(fs, &path.join(CHECKPOINT_METADATA)).transpose() {
        doc.insert(
            CHECKPOINT_METADATA.into(),
            v.unwrap_or_else(|e| format!("not read: {e}").into()),
        );
    }
    let mtime = mtime_of(fs, path);
    model.add_document(DOCUMENT, Arc::new(JsonDocument::new(doc.into(), mtime)));
    Ok(Some(Arc::new(model)))
}

/// When the checkpoint at `dir` was written: its metadata files' time (a directory has none
/// a `ReadAt` gives); a step's from its first item's when it has none of its own.
fn mtime_of(fs: &dyn Storage, dir: &Path) -> std::time::SystemTime {
    [CHECKPOINT_METADATA, METADATA, ocdbt::MANIFEST]
        .iter()
        .find_map(|f| fs.open(&dir.join(f)).ok())
        .map(|f| f.mtime())
        .or_else(|| {
            let items = items_of(fs, dir)?;
            Some(mtime_of(fs, &dir.join(items.first()?)))
        })
        .unwrap_or(std::time::SystemTime::UNIX_EPOCH)
}

/// The JSON file at `path`, if there is one.
fn json_file(fs: &dyn Storage, path: &Path) -> Result<Option<Json>, ModelError> {
    if !fs.is_file(path) {
        return Ok(None);
    }
    let f = fs.open(path)?;
    if f.size() > MAX_JSON {
        return Err(ModelError::data(f.name(), "larger than 64 MiB: not read"));
    }
    let bytes = f.read_vec(0, f.size() as usize)?;
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| ModelError::data(f.name(), format!("not JSON: {e}")))
}

/// Where an item's arrays are.
enum Store {
    Ocdbt(BTreeMap<Vec<u8>, ocdbt::Value>),
    Dir { fs: Arc<dyn Storage>, root: PathBuf },
}

impl Store {
    /// The value of `key` (`param/.zarray`, `param/0.0`), `None` if it was never written.
    fn get(&self, key: &str) -> Result<Option<ocdbt::Value>, ModelError> {
        match self {
            Store::Ocdbt(map) => Ok(map.get(key.as_bytes()).cloned()),
            Store::Dir { fs, root } => match open_inside(&**fs, root, key) {
                Ok(file) => {
                    let len = file.size();
                    Ok(Some(ocdbt::Value::At {
                        file,
                        offset: 0,
                        len,
                    }))
                }
                Err(Outside::Source(SourceError::Io { source, .. }))
                    if source.kind() == std::io::ErrorKind::NotFound =>
                {
                    Ok(None)
                }
                Err(e) => Err(ModelError::data(root.join(key).display().to_string(), e)),
            },
        }
    }

    fn name(&self, key: &str, root: &Path) -> String {
        format!("{}: {key}", root.display())
    }
}

/// One leaf of the pytree: its path (the tensor's name) and its array's name in the store.
struct Leaf {
    path: Vec<String>,
    param: String,
    meta: Json,
}

/// Adds the arrays of the item `dir` to `model` under `prefix`; returns its metadata.
fn item(
    opts: &ReaderOptions,
    dir: &Path,
    prefix: &str,
    model: &mut Flat,
) -> Result<serde_json::Map<String, Json>, ModelError> {
    let fs = &*opts.storage;
    let mut doc = serde_json::Map::new();
    let tree = json_file(fs, &dir.join(METADATA))?;
    let store = if fs.is_file(&dir.join(ocdbt::MANIFEST)) {
        Store::Ocdbt(ocdbt::read(fs, dir)?)
    } else {
        Store::Dir {
            fs: Arc::clone(&opts.storage),
            root: dir.to_path_buf(),
        }
    };
    let sharding = match json_file(fs, &dir.join(SHARDING)) {
        Ok(s) => s,
        Err(e) => Some(format!("not read: {e}").into()),
    };
    let leaves = match &tree {
        Some(t) => leaves_of(t),
        None => params_of(&store, fs, dir)?,
    };
    if leaves.len() > MAX_ARRAYS {
        return Err(ModelError::data(
            dir.display().to_string(),
            "more than 2^20 arrays",
        ));
    }
    let mtime = mtime_of(fs, dir);
    let store = Arc::new(store);
    let mut values = serde_json::Map::new();
    for leaf in leaves {
        let name = match prefix {
            "" => leaf.path.join("/"),
            p => format!("{p}/{}", leaf.path.join("/")),
        };
        let found = match array(&store, dir, &leaf, &name, sharding.as_ref(), mtime) {
            // A fault that may pass fails the open: it must not be kept as the array's verdict.
            Err(e) if source::is_transient(&e) => return Err(e),
            // Damage (or a name that leaves the item) is the array's problem, not the item's.
            Err(e) => {
                let mut meta =
                    TensorMeta::new(name.as_bytes().to_vec(), DType::U8, vec![], "orbax");
                meta.problem = Some(e.to_string());
                meta.mtime = mtime;
                Some(
                    Arc::new(Zarr::broken(meta, &store, store.name(&leaf.param, dir)))
                        as Arc<dyn Tensor>,
                )
            }
            Ok(t) => t,
        };
        match found {
            Some(t) => model.add(&name, t, &dir.display().to_string()),
            // A leaf with no array (a value `_METADATA` keeps, or one Orbax skipped).
            None => {
                values.insert(leaf.path.join("/"), leaf.meta);
            }
        }
    }
    if let Some(t) = tree {
        doc.insert(METADATA.into(), t);
    }
    // String leaves are kept only there (`{"nested.unicode": "…"}`).
    match json_file(fs, &dir.join(STRINGS)) {
        Ok(Some(s)) => {
            doc.insert(STRINGS.into(), s);
        }
        Ok(None) => {}
        Err(e) => {
            doc.insert(STRINGS.into(), format!("not read: {e}").into());
        }
    }
    if let Some(s) = sharding {
        doc.insert(SHARDING.into(), s);
    }
    if !values.is_empty() {
        doc.insert("leaves_without_arrays".into(), values.into());
    }
    doc.insert(
        "storage".into(),
        match &*store {
            Store::Ocdbt(m) => format!("ocdbt ({} keys)", m.len()),
            Store::Dir { .. } => "a directory per array".into(),
        }
        .into(),
    );
    Ok(doc)
}

/// The leaves `_METADATA` names, in its order.
fn leaves_of(tree: &Json) -> Vec<Leaf> {
    let Some(entries) = tree.get("tree_metadata").and_then(Json::as_object) else {
        return Vec::new();
    };
    entries
        .iter()
        .filter_map(|(tuple, v)| {
            let keys: Vec<String> = v
                .get("key_metadata")?
                .as_array()?
                .iter()
                .map(|k| match k.get("key") {
                    Some(Json::String(s)) => s.clone(),
                    Some(other) => other.to_string(),
                    None => String::new(),
                })
                .collect();
            let keys = if keys.is_empty() {
                vec![tuple.clone()]
            } else {
                keys
            };
            Some(Leaf {
                param: keys.join("."),
                path: keys.iter().map(|k| component(k)).collect(),
                meta: v.get("value_metadata").cloned().unwrap_or(Json::Null),
            })
        })
        .collect()
}

/// A key as one path component: never empty, `.`, `..`, nor holding `/`.
fn component(k: &str) -> String {
    match k {
        "" => "_".into(),
        "." | ".." => k.replace('.', "_"),
        _ => k.replace('/', "%2F"),
    }
}

/// Without `_METADATA` (older saves): the arrays the store holds, each named by its key
/// split on `.`.
fn params_of(store: &Store, fs: &dyn Storage, dir: &Path) -> Result<Vec<Leaf>, ModelError> {
    let names: Vec<String> = match store {
        Store::Ocdbt(map) => map
            .keys()
            .filter_map(|k| std::str::from_utf8(k).ok())
            .filter_map(|k| {
                k.strip_suffix("/.zarray")
                    .or_else(|| k.strip_suffix("/zarr.json"))
            })
            .map(String::from)
            .collect(),
        Store::Dir { .. } => fs
            .list(dir)?
            .into_iter()
            .filter_map(|(n, _)| n.into_string().ok())
            .filter(|n| {
                fs.is_file(&dir.join(n).join(".zarray"))
                    || fs.is_file(&dir.join(n).join("zarr.json"))
            })
            .collect(),
    };
    Ok(names
        .into_iter()
        .map(|p| Leaf {
            path: p.split('.').map(component).collect(),
            param: p,
            meta: Json::Null,
        })
        .collect())
}

/// The tensor of `leaf`, if the store holds an array for it.
fn array(
    store: &Arc<Store>,
    dir: &Path,
    leaf: &Leaf,
    name: &str,
    sharding: Option<&Json>,
    mtime: std::time::SystemTime,
) -> Result<Option<Arc<dyn Tensor>>, ModelError> {
    let (value, v3) = match store.get(&format!("{}/.zarray", leaf.param))? {
        Some(v) => (v, false),
        None => match store.get(&format!("{}/zarr.json", leaf.param))? {
            Some(v) => (v, true),
            None => return Ok(None),
        },
    };
    let file = store.name(&leaf.param, dir);
    if value.len() > MAX_JSON {
        return Err(ModelError::data(file, "array metadata larger than 64 MiB"));
    }
    let bytes = value.read(ReadCtx::metadata())?;
    let parsed = if v3 {
        Array::v3(&bytes)
    } else {
        Array::v2(&bytes)
    };
    let mut meta = TensorMeta {
        mtime,
        ..TensorMeta::new(name.as_bytes().to_vec(), DType::U8, vec![], "orbax")
    };
    meta.extra.insert("param".into(), leaf.param.clone().into());
    if !leaf.meta.is_null() {
        meta.extra
            .insert("value_metadata".into(), leaf.meta.clone());
    }
    // `_sharding` names each array by its param name in base64.
    if let Some(s) = sharding.and_then(|s| s.get(base64(leaf.param.as_bytes()))) {
        let s = s
            .as_str()
            .and_then(|s| serde_json::from_str(s).ok())
            .unwrap_or_else(|| s.clone());
        meta.extra.insert("sharding".into(), s);
    }
    let (array, grid) = match parsed.and_then(|a| Grid::new(&a.shape, &a.chunk).map(|g| (a, g))) {
        Ok(ag) => ag,
        Err(why) => {
            meta.problem = Some(why);
            return Ok(Some(Arc::new(Zarr::broken(meta, store, file))));
        }
    };
    meta.dtype = array.dtype;
    meta.shape = array.shape.clone();
    meta.note = array.note.clone();
    meta.extra.insert("zarr".into(), array.json.clone());
    if array.chunk_bytes().is_none() {
        meta.problem = Some("its chunk size overflows".into());
    }
    Ok(Some(Arc::new(Zarr {
        meta,
        id: chunks::new_array(),
        store: Arc::clone(store),
        param: leaf.param.clone(),
        file,
        array,
        grid: Some(grid),
    })))
}

/// Standard base64 with padding (how Orbax names arrays in `_sharding`).
fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// A zarr array of an item, read chunk by chunk.
struct Zarr {
    meta: TensorMeta,
    id: u64,
    store: Arc<Store>,
    param: String,
    /// The item and array, for errors.
    file: String,
    array: Array,
    grid: Option<Grid>,
}

impl Zarr {
    fn broken(meta: TensorMeta, store: &Arc<Store>, file: String) -> Zarr {
        Zarr {
            meta,
            id: 0,
            store: Arc::clone(store),
            param: String::new(),
            file,
            array: Array::empty(),
            grid: None,
        }
    }

    /// Where inner chunk `i` lies in the stored shard `shard` (`None`: never written).
    fn inner_chunk(
        &self,
        ctx: &ReadCtx,
        layout: &zarr::Shard,
        shard: &ocdbt::Value,
        i: u64,
        key: &str,
    ) -> Result<Option<ocdbt::Value>, ModelError> {
        let n = layout.index_bytes();
        let at = match layout.index_at_end {
            true => shard.len().checked_sub(n),
            false => Some(0),
        };
        let index = at
            .and_then(|at| shard.slice(at, n))
            .ok_or_else(|| {
                self.fail(format!(
                    "shard {key}: {} bytes, shorter than its index",
                    shard.len()
                ))
            })?
            .read(ctx)?;
        let (entries, crc) = index.split_at(index.len() - if layout.index_crc { 4 } else { 0 });
        if layout.index_crc
            && crc32c::crc32c(entries) != u32::from_le_bytes(crc.try_into().expect("4 bytes"))
        {
            return Err(self.fail(format!("shard {key}: index CRC-32C mismatch: damaged")));
        }
        let e = &entries[i as usize * 16..i as usize * 16 + 16];
        let offset = u64::from_le_bytes(e[..8].try_into().expect("8 bytes"));
        let len = u64::from_le_bytes(e[8..].try_into().expect("8 bytes"));
        if offset == u64::MAX && len == u64::MAX {
            return Ok(None);
        }
        shard.slice(offset, len).map(Some).ok_or_else(|| {
            self.fail(format!(
                "shard {key}: inner chunk {i} at {offset}+{len} is outside it"
            ))
        })
    }

    fn fail(&self, why: impl Into<String>) -> ModelError {
        ModelError::data(self.file.clone(), why.into())
    }
}

impl Tensor for Zarr {
    fn meta(&self) -> &TensorMeta {
        &self.meta
    }

    fn fill_elements(&self, ctx: &ReadCtx, first: u64, out: &mut [u8]) -> Result<(), ModelError> {
        self.meta.begin_read(first, out.len(), &self.file)?;
        let (Some(grid), Some(width), Some(chunk_bytes)) = (
            &self.grid,
            self.meta.dtype.elem_size(),
            self.array.chunk_bytes(),
        ) else {
            return Err(self.fail("no grid"));
        };
        let w = width as u64;
        let chunk_len = usize::try_from(chunk_bytes).map_err(|_| self.fail("chunk too large"))?;
        let counts = grid.counts();
        let mut pos = 0usize;
        grid.runs(first, (out.len() / width) as u64, |run| {
            let dst = &mut out[pos..pos + (run.len * w) as usize];
            pos += dst.len();
            let index = run
                .chunk
                .iter()
                .zip(counts)
                .fold(0u64, |a, (&c, &n)| a * n + c);
            let fill = |dst: &mut [u8]| {
                for e in dst.chunks_exact_mut(width) {
                    e.copy_from_slice(&self.array.fill);
                }
                Ok(())
            };
            let value = match &self.array.shard {
                None => {
                    let key = format!("{}/{}", self.param, self.array.keys.key(run.chunk));
                    self.store.get(&key)?.map(|v| (key, v))
                }
                Some(shard) => {
                    let outer: Vec<u64> = run
                        .chunk
                        .iter()
                        .zip(&shard.per)
                        .map(|(c, p)| c / p)
                        .collect();
                    let inner = run
                        .chunk
                        .iter()
                        .zip(&shard.per)
                        .fold(0u64, |a, (c, p)| a * p + c % p);
                    let key = format!("{}/{}", self.param, self.array.keys.key(&outer));
                    match self.store.get(&key)? {
                        None => None,
                        Some(v) => self
                            .inner_chunk(ctx, shard, &v, inner, &key)?
                            .map(|v| (key, v)),
                    }
                }
            };
            let Some((key, value)) = value else {
                return fill(dst);
            };
            let at = run.at * w;
            if self.array.raw() {
                if value.len() != chunk_bytes {
                    return Err(self.fail(format!(
                        "chunk {key}: {} bytes, {chunk_bytes} expected",
                        value.len()
                    )));
                }
                return match &value {
                    ocdbt::Value::Inline(b) => {
                        dst.copy_from_slice(&b[at as usize..at as usize + dst.len()]);
                        Ok(())
                    }
                    ocdbt::Value::At { file, offset, .. } => {
                        Ok(file.read_into(ctx, offset + at, dst)?)
                    }
                };
            }
            if chunk_bytes > WHOLE && self.array.streams() {
                if let ocdbt::Value::At { file, offset, len } = &value {
                    let name = format!("{}: chunk {key}", self.file);
                    let s = stream::Stream {
                        key: (self.id, index),
                        file,
                        offset: *offset,
                        len: *len,
                        compression: self.array.compression,
                        decoded: chunk_bytes,
                        name: &name,
                    };
                    return s.read(at, dst);
                }
            }
            let decoded = chunks::get((self.id, index), || {
                // A stored chunk is at most its decoded size plus a codec's overhead.
                if value.len() > chunk_bytes.saturating_mul(2).saturating_add(1 << 16) {
                    return Err(self.fail(format!(
                        "chunk {key}: {} bytes stored for {chunk_bytes}",
                        value.len()
                    )));
                }
                let stored = value.read(ctx)?;
                self.array
                    .decode(&stored, chunk_len)
                    .map_err(|e| self.fail(format!("chunk {key}: {e}")))
            })?;
            dst.copy_from_slice(&decoded[at as usize..at as usize + dst.len()]);
            Ok(())
        })
    }

    fn cache_identity(&self) -> Option<String> {
        None
    }
}

/// The fuzz target's entry (`fuzz/fuzz_targets/orbax.rs`): `data` as an OCDBT database (a
/// little-endian u32 length, that many bytes of `manifest.ocdbt`, the rest every data file it
/// may name), walked, every
/// value read; and as a zarr v2 and v3 array's metadata. Any `Err` is fine; a panic, a hang
/// or a huge allocation is a bug.
#[cfg(any(test, feature = "testkit"))]
pub fn fuzz_file(data: &[u8]) {
    use crate::source::{EntryKind, MemSource, ReadAt};
    use std::ffi::OsString;

    /// Every path but the manifest is the data file.
    #[derive(Debug)]
    struct Mem(Arc<[u8]>, Arc<[u8]>);
    impl Storage for Mem {
        fn open(&self, path: &Path) -> Result<Arc<dyn ReadAt>, SourceError> {
            let d = if path.ends_with(ocdbt::MANIFEST) {
                &self.0
            } else {
                &self.1
            };
            Ok(Arc::new(MemSource::new(
                path.display().to_string(),
                d.to_vec(),
            )))
        }
        fn kind(&self, _: &Path) -> Result<Option<EntryKind>, SourceError> {
            Ok(Some(EntryKind::File))
        }
        fn list(&self, _: &Path) -> Result<Vec<(OsString, EntryKind)>, SourceError> {
            Ok(Vec::new())
        }
    }
    let (head, rest) = data.split_at(4.min(data.len()));
    let n = head.iter().rev().fold(0usize, |a, &b| a << 8 | b as usize);
    let (m, d) = rest.split_at(n.min(rest.len()));
    let fs = Mem(m.into(), d.into());
    if let Ok(kv) = ocdbt::read(&fs, Path::new("/f")) {
        for v in kv.values() {
            if v.len() < 1 << 20 {
                let _ = v.read(ReadCtx::none());
            }
        }
    }
    for a in [Array::v2(data), Array::v3(data)].into_iter().flatten() {
        let _ = Grid::new(&a.shape, &a.chunk);
        let _ = a.decode(data, a.chunk_bytes().map_or(0, |b| b.min(1 << 16)) as usize);
    }
}
