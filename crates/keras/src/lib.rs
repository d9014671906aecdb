//! Keras models: a `.keras` file (Keras 3's zip of `config.json`, `metadata.json` and
//! `model.weights.h5`), a `.weights.h5` file, and the legacy HDF5 files of Keras 2 and
//! tf.keras (`model.save("m.h5")`: `model_weights/<layer>/<layer>/kernel:0`, and
//! `save_weights`). Any other HDF5 file is read the same way: its datasets are tensors.
//!
//! The HDF5 metadata is read through `hdf5-pure`, which asks this crate's source for bytes at
//! offsets (`H5Source`): nothing is read whole. A dataset stored contiguously, as every Keras
//! writer stores them, is served in place (`model::in_place::InPlace`), inside the `.keras`
//! zip too (its `model.weights.h5` is stored, so it is a `Window` of the zip); a chunked or
//! compact one (h5py's gzip, shuffle) is decoded when read, the rows a read touches, by
//! `hdf5-pure` (filters undone): never at open. h5py's bools (an enum) are bools.
//!
//! Names are the HDF5 paths (`model_weights/dense/dense/kernel:0`), except that Keras 3 names
//! its layers' groups by class (`layers/dense_1/vars/0`) and keeps the user's name as the
//! `vars` group's `name` attribute: those groups are shown by that name
//! (`layers/head/vars/0`), and the `.json` says the HDF5 path. Keras 3 stores bfloat16 as
//! 2-byte opaque data: shown as bfloat16. The root's attributes (`keras_version`, `backend`,
//! `model_config` parsed), `config.json`, `metadata.json` and every group's attributes are in
//! `__metadata__.json`.
//!
//! This is the crate `modelfs-keras`, one of modelfs's readers: it knows only `modelfs-io`
//! and `modelfs-model`. `files_of` says whether a path is one, `open` gives its files as one
//! `model::Model`.
//!
//! ```
//! use modelfs_model::DirEntry;
//! let path = std::path::Path::new(concat!(
//!     env!("CARGO_MANIFEST_DIR"),
//!     "/../../fixtures/keras/keras-3.15.1_tensorflow.keras"
//! ));
//! let model = modelfs_keras::open_path(path, &Default::default())
//!     .unwrap()
//!     .expect("a Keras file");
//! let layers = model.list_dir(&[b"layers".to_vec()]).unwrap();
//! assert!(layers.contains(&DirEntry::Dir(b"head".to_vec())));
//! ```
#![deny(clippy::undocumented_unsafe_blocks)]

pub(crate) use modelfs_io::{codec, source};
pub(crate) use modelfs_model as model;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use hdf5_pure::{AttrValue, Datatype, DatatypeByteOrder, Layout};

use crate::codec::zip::{self as zipdir, Method};
use crate::model::flat::{Flat, JsonDocument};
use crate::model::in_place::InPlace;
use crate::model::{DType, Model, ModelError, OpenError, ReaderOptions, TensorMeta};
use crate::source::{ReadAt, ReadCtx, ReadExt, SourceError, Storage as Files, Window};

/// The HDF5 file signature, at the start of every file Keras writes.
const SIGNATURE: &[u8; 8] = b"\x89HDF\r\n\x1a\n";
/// The weights member of a `.keras` zip.
const WEIGHTS: &str = "model.weights.h5";
/// The root document.
const METADATA: &[u8] = b"__metadata__.json";
/// The largest JSON member of a `.keras` read (`config.json`).
const MAX_JSON: u64 = 64 << 20;
/// The most bytes of a chunked dataset one read decodes beyond what it asked for (whole rows
/// are decoded: a read of a few bytes of a row of more than this is refused).
const MAX_ROWS: u64 = 1 << 30;
/// Groups nested deeper than this, or more objects than this in all, are not walked (a
/// damaged file's links may loop).
const MAX_DEPTH: usize = 64;
const MAX_OBJECTS: usize = 1 << 20;

/// The files of the Keras (or HDF5) source at `path`, if it is one: a `.keras` zip holding
/// `model.weights.h5`, an HDF5 file, or the index of sharded weights (`save_weights(…,
/// max_shard_size=…)`: `NAME.weights.json`, its `weight_map` naming the shards beside it).
pub fn files_of(fs: &dyn Files, path: &Path) -> Option<Vec<PathBuf>> {
    if !fs.is_file(path) {
        return None;
    }
    if path.to_str().is_some_and(|p| p.ends_with(SHARDED)) {
        return shards_of(fs, path).ok();
    }
    let file = fs.open(path).ok()?;
    is_keras_reader(&*file).then(|| vec![path.to_path_buf()])
}

/// The index of sharded weights.
const SHARDED: &str = ".weights.json";

/// The shards a `.weights.json` names, in order, each a plain name beside it (a name that
/// leaves its directory is refused).
fn shards_of(fs: &dyn Files, path: &Path) -> Result<Vec<PathBuf>, String> {
    let bytes = fs.read_small(path, MAX_JSON).map_err(|e| e.to_string())?;
    let index: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
    let map = index
        .get("weight_map")
        .and_then(|m| m.as_object())
        .ok_or("no weight_map")?;
    let mut names = Vec::new();
    for v in map.values() {
        let list = match v {
            serde_json::Value::Array(a) => a.iter().collect(),
            one => vec![one],
        };
        for n in list {
            let n = n.as_str().ok_or("a shard name that is not a string")?;
            if !is_name(n) {
                return Err(format!("shard {n:?} leaves the index's directory: refused"));
            }
            if !names.iter().any(|m: &String| m == n) {
                names.push(n.to_string());
            }
        }
    }
    names.sort();
    if names.is_empty() {
        return Err("names no shards".into());
    }
    let dir = path.parent().unwrap_or(Path::new(""));
    Ok(names.into_iter().map(|n| dir.join(n)).collect())
}

/// Whether `file` is a `.keras` zip (its directory holds `model.weights.h5`) or an HDF5 file
/// (its signature).
pub fn is_keras_reader(file: &dyn ReadAt) -> bool {
    let Ok(head) = file.read_vec(0, 8.min(file.size()) as usize) else {
        return false;
    };
    let keras_zip = || {
        zipdir::entries(file.size(), |at, buf| {
            file.read_into(ReadCtx::metadata(), at, buf)
        })
        .is_ok_and(|e| e.iter().any(|e| e.name == WEIGHTS))
    };
    head == SIGNATURE || (head.starts_with(b"PK\x03\x04") && keras_zip())
}

/// The model at `path`, if it is a Keras (or HDF5) file.
pub fn open_path(path: &Path, opts: &ReaderOptions) -> Result<Option<Arc<dyn Model>>, OpenError> {
    // An index that cannot be followed says why (a shard name out of its directory).
    if opts.storage.is_file(path) && path.to_str().is_some_and(|p| p.ends_with(SHARDED)) {
        return match shards_of(&*opts.storage, path) {
            Ok(files) => open(&files, opts).map(Some),
            Err(why) => Err(OpenError::unreadable(
                path,
                ModelError::data(path.display().to_string(), why),
            )),
        };
    }
    match files_of(&*opts.storage, path) {
        Some(files) => open(&files, opts).map(Some),
        None => Ok(None),
    }
}

/// The model of the Keras files `files` (`files_of`): one file, or the shards of one model
/// (their documents in one `__metadata__.json`, by shard).
pub fn open(files: &[PathBuf], opts: &ReaderOptions) -> Result<Arc<dyn Model>, OpenError> {
    let mut model = Flat::new("keras");
    let mut docs = serde_json::Map::new();
    let mut mtime = std::time::SystemTime::UNIX_EPOCH;
    for path in files {
        let file = opts.open_file(path)?;
        mtime = mtime.max(file.mtime());
        let doc = read_file(&file, &mut model).map_err(|e| OpenError::unreadable(path, e))?;
        let name = path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into());
        docs.insert(name, doc.into());
    }
    let doc = match docs.len() {
        1 => docs.into_iter().next().map(|(_, d)| d).unwrap_or_default(),
        _ => docs.into(),
    };
    model.add_document(METADATA, Arc::new(JsonDocument::new(doc, mtime)));
    Ok(Arc::new(model))
}

/// Adds the datasets of `file` (a `.keras` zip or an HDF5 file) to `model`; returns its
/// document.
fn read_file(
    file: &Arc<dyn ReadAt>,
    model: &mut Flat,
) -> Result<serde_json::Map<String, serde_json::Value>, ModelError> {
    let mtime = file.mtime();
    let mut doc = serde_json::Map::new();
    let head = file.read_vec(0, 8.min(file.size()) as usize)?;
    let h5: Arc<dyn ReadAt> = if head.starts_with(b"PK\x03\x04") {
        let entries = zipdir::entries(file.size(), |at, buf| {
            file.read_into(ReadCtx::metadata(), at, buf)
        })
        .map_err(|e| ModelError::data(file.name(), e))?;
        for json in ["config.json", "metadata.json"] {
            if let Some(e) = entries.iter().find(|e| e.name == json) {
                let key = json.trim_end_matches(".json");
                match member(file, e, MAX_JSON).and_then(|b| {
                    serde_json::from_slice::<serde_json::Value>(&b)
                        .map_err(|err| ModelError::data(file.name(), format!("{json}: {err}")))
                }) {
                    Ok(v) => doc.insert(key.into(), v),
                    Err(e) => doc.insert(key.into(), format!("not read: {e}").into()),
                };
            }
        }
        let e = entries
            .iter()
            .find(|e| e.name == WEIGHTS)
            .ok_or_else(|| ModelError::data(file.name(), "no model.weights.h5"))?;
        let (start, len) = stored(file, e)?;
        Arc::new(Window::new(Arc::clone(file), start, len)?)
    } else {
        Arc::clone(file)
    };
    let fault = Arc::new(Mutex::new(None));
    let source = H5Source {
        file: Arc::clone(&h5),
        fault: Arc::clone(&fault),
    };
    let h5file = match hdf5_pure::File::from_source(source) {
        Ok(f) => f,
        Err(e) => {
            transient(&fault)?;
            return Err(ModelError::data(h5.name(), format!("HDF5: {e}")));
        }
    };
    let mut walk = Walk {
        h5: &h5,
        model,
        groups: BTreeMap::new(),
        objects: 0,
        fault: Arc::clone(&fault),
        mtime,
    };
    let root = h5file.root();
    let attrs = root
        .attrs()
        .map_err(|e| ModelError::data(h5.name(), format!("HDF5: {e}")))?;
    let root_attrs = attrs_json(&attrs);
    walk.group(&root, &[], &[], 0);
    let groups = std::mem::take(&mut walk.groups);
    transient(&fault)?;
    doc.insert("attrs".into(), root_attrs.into());
    doc.insert(
        "groups".into(),
        serde_json::Value::Object(groups.into_iter().collect()),
    );
    Ok(doc)
}

/// Where the stored (uncompressed) member `e` of the zip `file` lies: its data's start and
/// length, checked inside the file.
fn stored(file: &Arc<dyn ReadAt>, e: &zipdir::Entry) -> Result<(u64, u64), ModelError> {
    let bad = |why: String| ModelError::data(file.name(), format!("{}: {why}", e.name));
    if e.method != Method::Store || e.compressed_size != e.uncompressed_size {
        return Err(bad(format!(
            "compressed ({:?}): not read in place",
            e.method
        )));
    }
    let n = (zipdir::LOCAL_HEADER as u64).min(file.size().saturating_sub(e.header_offset));
    let h = file.read_vec(e.header_offset, n as usize)?;
    let start =
        zipdir::data_start(e.header_offset, &h).ok_or_else(|| bad("no local header".into()))?;
    start
        .checked_add(e.uncompressed_size)
        .filter(|&end| end <= file.size())
        .ok_or_else(|| bad("ends past the file".into()))?;
    Ok((start, e.uncompressed_size))
}

/// The bytes of a small stored member, its CRC-32 checked.
fn member(file: &Arc<dyn ReadAt>, e: &zipdir::Entry, max: u64) -> Result<Vec<u8>, ModelError> {
    let (start, len) = stored(file, e)?;
    if len > max {
        return Err(ModelError::data(
            file.name(),
            format!("{}: {len} bytes: not read", e.name),
        ));
    }
    let b = file.read_vec(start, len as usize)?;
    if crc32fast::hash(&b) != e.crc32 {
        return Err(ModelError::data(
            file.name(),
            format!("{}: its CRC-32 does not match", e.name),
        ));
    }
    Ok(b)
}

/// `hdf5-pure`'s view of a source: bytes at offsets, as metadata reads. `hdf5-pure` keeps a
/// fault only as text, so the first one is kept here whole: a transient one (a remote
/// store's) is then the open's error, never a verdict on the file.
struct H5Source {
    file: Arc<dyn ReadAt>,
    fault: Arc<Mutex<Option<SourceError>>>,
}

impl hdf5_pure::Source for H5Source {
    fn len(&self) -> u64 {
        self.file.size()
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), hdf5_pure::FormatError> {
        self.file
            .read_into(ReadCtx::metadata(), offset, buf)
            .map_err(|e| {
                let text = e.to_string();
                if let Ok(mut f) = self.fault.lock() {
                    f.get_or_insert(e);
                }
                hdf5_pure::FormatError::Source(text)
            })
    }
}

/// The fault `fault` kept, when it is transient: the whole open fails with it.
fn transient(fault: &Mutex<Option<SourceError>>) -> Result<(), ModelError> {
    match fault.lock().ok().and_then(|mut f| f.take()) {
        Some(e) if e.is_transient() => Err(ModelError::Source(e)),
        _ => Ok(()),
    }
}

/// The walk over an HDF5 file's groups.
struct Walk<'a> {
    h5: &'a Arc<dyn ReadAt>,
    model: &'a mut Flat,
    /// Each group's attributes, by HDF5 path.
    groups: BTreeMap<String, serde_json::Value>,
    objects: usize,
    /// The file's source fault, kept by `H5Source` (for the lazy reads of `Rows`).
    fault: Arc<Mutex<Option<SourceError>>>,
    mtime: std::time::SystemTime,
}

impl Walk<'_> {
    /// The group at HDF5 path `h5_path`, shown at `shown`.
    fn group(&mut self, g: &hdf5_pure::Group, h5_path: &[String], shown: &[String], depth: usize) {
        let at = h5_path.join("/");
        if depth > MAX_DEPTH {
            self.model.problem(format!(
                "{at}: groups nested more than {MAX_DEPTH} deep are not read"
            ));
            return;
        }
        let datasets = match g.iter_datasets() {
            Ok(d) => d,
            Err(e) => return self.model.problem(format!("{at}/: HDF5: {e}")),
        };
        for (name, ds) in datasets {
            if !self.count(&at) {
                return;
            }
            let mut path = h5_path.to_vec();
            path.push(name.clone());
            let mut key = shown.to_vec();
            key.push(name);
            self.dataset(&ds, &path.join("/"), &key.join("/"));
        }
        let groups = match g.iter_groups() {
            Ok(g) => g,
            Err(e) => return self.model.problem(format!("{at}/: HDF5: {e}")),
        };
        let subs: Vec<(
            String,
            hdf5_pure::Group,
            serde_json::Map<String, serde_json::Value>,
        )> = groups
            .map(|(name, sub)| {
                let attrs = sub.attrs().map(|a| attrs_json(&a)).unwrap_or_default();
                (name, sub, attrs)
            })
            .collect();
        // Keras 3 names a layer's group by class (`dense_1`) and its `vars` group by the
        // user's name: the layer is shown by that name when no sibling takes it.
        let user_name = |sub: &hdf5_pure::Group| -> Option<String> {
            let vars = sub.iter_groups().ok()?.find(|(n, _)| n == "vars")?.1;
            match vars.attrs().ok()?.get("name")? {
                AttrValue::VarLenString(s) | AttrValue::String(s) => Some(s.clone()),
                _ => None,
            }
        };
        let keras3_layers = h5_path.len() == 1 && h5_path[0] == "layers";
        let names: Vec<String> = subs
            .iter()
            .map(|(name, sub, _)| {
                keras3_layers
                    .then(|| user_name(sub))
                    .flatten()
                    .filter(|n| is_name(n))
                    .unwrap_or_else(|| name.clone())
            })
            .collect();
        let mut shown_count: std::collections::HashMap<&str, usize> = Default::default();
        for n in &names {
            *shown_count.entry(n.as_str()).or_default() += 1;
        }
        let stored: std::collections::HashSet<&str> =
            subs.iter().map(|(n, _, _)| n.as_str()).collect();
        for (i, (name, sub, attrs)) in subs.iter().enumerate() {
            if !self.count(&at) {
                return;
            }
            let taken = shown_count[names[i].as_str()] > 1
                || (names[i] != *name && stored.contains(names[i].as_str()));
            let as_shown = if taken {
                name.clone()
            } else {
                names[i].clone()
            };
            let mut path = h5_path.to_vec();
            path.push(name.clone());
            let mut key = shown.to_vec();
            key.push(as_shown);
            if !attrs.is_empty() {
                self.groups.insert(path.join("/"), attrs.clone().into());
            }
            self.group(sub, &path, &key, depth + 1);
        }
    }

    fn count(&mut self, at: &str) -> bool {
        self.objects += 1;
        if self.objects == MAX_OBJECTS {
            self.model.problem(format!(
                "{at}: more than {MAX_OBJECTS} objects: the rest are not read"
            ));
        }
        self.objects < MAX_OBJECTS
    }

    /// The dataset `ds` at HDF5 path `h5_path`, added as the tensor `key`.
    fn dataset(&mut self, ds: &hdf5_pure::Dataset, h5_path: &str, key: &str) {
        let h5 = Arc::clone(self.h5);
        let fail = |why: String| ModelError::data(h5.name(), format!("{h5_path}: {why}"));
        let attrs = ds.attrs().map(|a| attrs_json(&a)).unwrap_or_default();
        let (dtype, stored_as, problem) = match (ds.datatype(), ds.shape()) {
            (Ok(t), Ok(_)) => match dtype_of(&t, &attrs) {
                Ok((d, s)) => (d, s, None),
                Err(why) => (DType::U8, String::new(), Some(why)),
            },
            (Err(e), _) | (_, Err(e)) => (DType::U8, String::new(), Some(format!("HDF5: {e}"))),
        };
        let shape = ds.shape().unwrap_or_default();
        let mut meta = TensorMeta {
            mtime: self.mtime,
            ..TensorMeta::new(key.as_bytes().to_vec(), dtype, shape, "keras")
        };
        if key != h5_path {
            meta.extra.insert("hdf5_path".into(), h5_path.into());
        }
        if !stored_as.is_empty() {
            meta.extra.insert("stored_as".into(), stored_as.into());
        }
        if !attrs.is_empty() {
            meta.extra.insert("attrs".into(), attrs.into());
        }
        let bytes = meta
            .num_elements()
            .and_then(|n| n.checked_mul(dtype.elem_size().unwrap_or(1) as u64));
        let placed: Result<(Arc<dyn ReadAt>, u64, bool), String> = match (problem, bytes) {
            (Some(p), _) => Err(p),
            (None, None) => Err("its size overflows".into()),
            (None, Some(bytes)) => match ds.layout() {
                Ok(Layout::Contiguous {
                    address: Some(a),
                    size,
                }) => {
                    let inside = a.checked_add(size).is_some_and(|e| e <= h5.size());
                    match (size == bytes, inside) {
                        (true, true) => Ok((Arc::clone(&h5), a, true)),
                        (false, _) => {
                            Err(format!("its storage holds {size} bytes, its shape {bytes}"))
                        }
                        (_, false) => Err(format!(
                            "its storage ends past the file ({} bytes)",
                            h5.size()
                        )),
                    }
                }
                Ok(Layout::Contiguous { address: None, .. }) => {
                    Err("no data was written (h5py reads its fill value)".into())
                }
                Ok(Layout::Compact { .. } | Layout::Chunked { .. }) => {
                    // Decoded when read, rows at a time (`Rows`): never at open.
                    meta.extra.insert(
                        "layout".into(),
                        "chunked or compact: decoded rows at a time when read".into(),
                    );
                    let t = Rows {
                        meta,
                        ds: Mutex::new(ds.clone()),
                        name: format!("{}: {h5_path}", h5.name()),
                        fault: Arc::clone(&self.fault),
                    };
                    self.model.add(key, Arc::new(t), h5.name());
                    return;
                }
                Ok(_) => Err("a virtual dataset: not read".into()),
                Err(e) => Err(format!("HDF5: {e}")),
            },
        };
        let (file, begin, in_place) = match placed {
            Ok(p) => p,
            Err(why) => {
                meta.problem = Some(fail(why).to_string());
                (Arc::clone(&h5), 0, false)
            }
        };
        let identity = in_place
            .then(|| crate::source::identity_string(&*file).map(|f| format!("{f}:{begin}")))
            .flatten();
        let t = InPlace {
            meta,
            file,
            begin,
            in_place,
            identity,
        };
        self.model.add(key, Arc::new(t), h5.name());
    }
}

/// A chunked (or compact) dataset, decoded when read: the rows (first dimension) a read
/// touches, by `hdf5-pure` (its filters undone; its own cache of chunks kept per dataset).
struct Rows {
    meta: TensorMeta,
    ds: Mutex<hdf5_pure::Dataset>,
    /// The file and HDF5 path, for errors.
    name: String,
    fault: Arc<Mutex<Option<SourceError>>>,
}

impl Rows {
    fn fail(&self, why: impl std::fmt::Display) -> ModelError {
        // A fault of the source under it may pass: given as it is, never as damage.
        match self.fault.lock().ok().and_then(|mut f| f.take()) {
            Some(e) if e.is_transient() => ModelError::Source(e),
            _ => ModelError::data(&self.name, format!("HDF5: {why}")),
        }
    }
}

impl crate::model::Tensor for Rows {
    fn meta(&self) -> &TensorMeta {
        &self.meta
    }

    fn fill_elements(&self, _: &ReadCtx, first: u64, out: &mut [u8]) -> Result<(), ModelError> {
        self.meta.begin_read(first, out.len(), &self.name)?;
        let w = self.meta.dtype.elem_size().unwrap_or(1) as u64;
        let n = out.len() as u64 / w;
        let ds = self.ds.lock().unwrap_or_else(|e| e.into_inner());
        let (bytes, skip) = match self.meta.shape.split_first() {
            Some((_, inner)) if n > 0 => {
                let row: u64 = inner.iter().product::<u64>().max(1);
                let (r0, r1) = (first / row, (first + n).div_ceil(row));
                if (r1 - r0).saturating_mul(row).saturating_mul(w) > MAX_ROWS.max(out.len() as u64)
                {
                    return Err(ModelError::data(
                        &self.name,
                        "rows of more than 1 GiB: not decoded",
                    ));
                }
                let b = ds.read_raw_rows(r0, r1 - r0).map_err(|e| self.fail(e))?;
                (b, (first - r0 * row) * w)
            }
            _ => (ds.read_raw().map_err(|e| self.fail(e))?, first * w),
        };
        let src = usize::try_from(skip)
            .ok()
            .and_then(|s| bytes.get(s..s + out.len()))
            .ok_or_else(|| {
                ModelError::data(
                    &self.name,
                    format!("decoded {} bytes, fewer than its shape", bytes.len()),
                )
            })?;
        out.copy_from_slice(src);
        if self.meta.dtype == DType::Bool {
            for b in out.iter_mut() {
                *b = u8::from(*b != 0);
            }
        }
        Ok(())
    }
}

/// A layer name usable as one path component.
fn is_name(n: &str) -> bool {
    !n.is_empty() && n != "." && n != ".." && !n.contains('/') && !n.contains('\0')
}

/// The model's dtype of an HDF5 datatype, and what it is stored as when that differs (Keras
/// 3's bfloat16: 2-byte opaque data, its dataset's `dtype` attribute `bfloat16` or none).
fn dtype_of(
    t: &Datatype,
    attrs: &serde_json::Map<String, serde_json::Value>,
) -> Result<(DType, String), String> {
    use DType::*;
    let little = |o: &DatatypeByteOrder| matches!(o, DatatypeByteOrder::LittleEndian);
    Ok(match t {
        Datatype::FloatingPoint {
            size,
            byte_order,
            layout,
        } if little(byte_order) => match (size, layout.exponent_size) {
            // An 8-bit exponent in 2 bytes is bfloat16 (h5py and PyTables write it so).
            (2, 8) => (BF16, "float16-sized bfloat16".into()),
            (2, 5) => (F16, String::new()),
            (4, 8) => (F32, String::new()),
            (8, 11) => (F64, String::new()),
            (s, e) => {
                return Err(format!(
                    "a {s}-byte float with a {e}-bit exponent is not decoded"
                ))
            }
        },
        Datatype::FixedPoint {
            size,
            byte_order,
            layout,
        } if little(byte_order) || *size == 1 => match (size, layout.signed) {
            (1, true) => (I8, String::new()),
            (2, true) => (I16, String::new()),
            (4, true) => (I32, String::new()),
            (8, true) => (I64, String::new()),
            (1, false) => (U8, String::new()),
            (2, false) => (U16, String::new()),
            (4, false) => (U32, String::new()),
            (8, false) => (U64, String::new()),
            (s, _) => return Err(format!("a {s}-byte integer is not decoded")),
        },
        Datatype::Opaque { size: 2, tag }
            if tag.iter().all(|&b| b == 0)
                || attrs.get("dtype").and_then(|v| v.as_str()) == Some("bfloat16") =>
        {
            (BF16, "opaque[2]".into())
        }
        // h5py's bool: an enum of 1-byte integers, FALSE = 0 and TRUE = 1.
        Datatype::Enumeration {
            size: 1, members, ..
        } if members.len() == 2
            && members
                .iter()
                .any(|m| m.name == "FALSE" && m.value.first() == Some(&0))
            && members
                .iter()
                .any(|m| m.name == "TRUE" && m.value.first() == Some(&1)) =>
        {
            (Bool, "h5py bool (enum)".into())
        }
        Datatype::FixedPoint { .. } | Datatype::FloatingPoint { .. } => {
            return Err("big-endian elements are not decoded".into())
        }
        other => return Err(format!("HDF5 {} elements are not decoded", class(other))),
    })
}

fn class(t: &Datatype) -> &'static str {
    match t {
        Datatype::Time { .. } => "time",
        Datatype::String { .. } => "string",
        Datatype::BitField { .. } => "bitfield",
        Datatype::Opaque { .. } => "opaque",
        Datatype::Compound { .. } => "compound",
        Datatype::Reference { .. } => "reference",
        Datatype::Enumeration { .. } => "enum",
        Datatype::VariableLength { .. } => "variable-length",
        Datatype::Array { .. } => "array",
        _ => "other",
    }
}

/// Attributes as JSON: numbers and strings as themselves, a string holding a JSON document
/// (`model_config`) as that document.
fn attrs_json(
    attrs: &std::collections::HashMap<String, AttrValue>,
) -> serde_json::Map<String, serde_json::Value> {
    let mut sorted: Vec<(&String, &AttrValue)> = attrs.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(b.0));
    sorted
        .into_iter()
        .map(|(k, v)| (k.clone(), attr_json(v)))
        .collect()
}

fn attr_json(v: &AttrValue) -> serde_json::Value {
    use serde_json::Value as J;
    let text = |s: &str| -> J {
        let t = s.trim_start();
        if t.starts_with('{') || t.starts_with('[') {
            if let Ok(v) = serde_json::from_str::<J>(s) {
                return v;
            }
        }
        J::String(s.to_string())
    };
    let f = |x: f64| serde_json::Number::from_f64(x).map_or(J::Null, J::Number);
    match v {
        AttrValue::F32(x) => f(*x as f64),
        AttrValue::F64(x) => f(*x),
        AttrValue::F32Array(a) => a.iter().map(|&x| f(x as f64)).collect(),
        AttrValue::F64Array(a) => a.iter().map(|&x| f(x)).collect(),
        AttrValue::I8(x) => (*x).into(),
        AttrValue::I16(x) => (*x).into(),
        AttrValue::I32(x) => (*x).into(),
        AttrValue::I64(x) => (*x).into(),
        AttrValue::U8(x) => (*x).into(),
        AttrValue::U16(x) => (*x).into(),
        AttrValue::U32(x) => (*x).into(),
        AttrValue::U64(x) => (*x).into(),
        AttrValue::I8Array(a) => a.iter().map(|&x| J::from(x)).collect(),
        AttrValue::I16Array(a) => a.iter().map(|&x| J::from(x)).collect(),
        AttrValue::I32Array(a) => a.iter().map(|&x| J::from(x)).collect(),
        AttrValue::I64Array(a) => a.iter().map(|&x| J::from(x)).collect(),
        AttrValue::U8Array(a) => a.iter().map(|&x| J::from(x)).collect(),
        AttrValue::U16Array(a) => a.iter().map(|&x| J::from(x)).collect(),
        AttrValue::U32Array(a) => a.iter().map(|&x| J::from(x)).collect(),
        AttrValue::U64Array(a) => a.iter().map(|&x| J::from(x)).collect(),
        AttrValue::String(s)
        | AttrValue::AsciiString(s)
        | AttrValue::VarLenString(s)
        | AttrValue::VarLenAsciiString(s) => text(s),
        AttrValue::StringArray(a)
        | AttrValue::AsciiStringArray(a)
        | AttrValue::VarLenAsciiCharArray(a)
        | AttrValue::VarLenStringArray(a)
        | AttrValue::VarLenAsciiStringArray(a) => a.iter().map(|s| J::String(s.clone())).collect(),
        other => {
            let mut s = format!("{other:?}");
            s.truncate(200);
            J::String(s)
        }
    }
}

/// The fuzz target's entry (`fuzz/fuzz_targets/keras.rs`): `data` as an HDF5 file and as a
/// `.keras` zip, opened and every tensor read. Any `Err` is fine; a panic, a hang or a huge
/// allocation is a bug.
#[cfg(any(test, feature = "testkit"))]
pub fn fuzz_file(data: &[u8]) {
    let file: Arc<dyn ReadAt> = Arc::new(crate::source::MemSource::new("f.h5", data.to_vec()));
    let mut model = Flat::new("keras");
    if read_file(&file, &mut model).is_ok() {
        crate::model::testing::fuzz_walk(&model);
    }
}

#[cfg(test)]
mod tests;
