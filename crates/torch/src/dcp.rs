//! PyTorch Distributed Checkpoints (`torch.distributed.checkpoint`, DCP: FSDP, torchtitan,
//! Lightning): a directory with a `.metadata` pickle and the ranks' `__R_N.distcp` files.
//!
//! `.metadata` is read by the pickle machine that runs nothing (`pickle.rs`); its classes
//! (`Metadata`, `TensorStorageMetadata`, `ChunkStorageMetadata`, `MetadataIndex`,
//! `_StorageInfo`, `torch.Size`, dtypes) are read as data. Each tensor is a list of chunks,
//! each a box of the whole (offsets, sizes) stored as one `torch.save` archive at
//! `(relative_path, offset, length)` of a `.distcp` file: the archive is read in place by this
//! crate's zip reader (a `Window` of the file; its CRC-32s checked with `verify`), and a
//! tensor sharded over ranks is its chunks assembled (`model::blocks`), as TF's partitioned
//! variables are. Names are the state dict's, one directory per dict (`planner_data`, the
//! flattening DCP did): `model/layer.weight`, `optim/state/layer.weight/exp_avg`. Other
//! values (`BytesStorageMetadata`: a `torch.save` of a plain object) are JSON in their
//! directory's `__values__.json`.
//!
//! Only `.metadata` and the plain values are read at mount; a chunk's archive is opened on
//! its first read. A `relative_path` that leaves the directory is refused; a chunk written
//! through a stream transform (`stream.zstd`) is decompressed into memory, up to
//! `MAX_TRANSFORMED`.

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use bytes::Bytes;

use crate::model::blocks::{Block, Blocks};
use crate::model::flat::Flat;
use crate::model::{
    DType, Finding, Model, ModelError, OpenError, PartitionMeta, ReaderOptions, Tensor, TensorMeta,
};
use crate::pickle::{Call, Id, Pickle, Value};
use crate::source::{
    EntryKind, MemSource, Memo, ReadAt, ReadCtx, ReadExt, Storage as Files, Window,
};
use crate::walk::{self, Values};

/// The checkpoint's metadata file (one for all ranks).
pub const METADATA: &str = ".metadata";
/// The largest `.metadata` read: a few hundred bytes per chunk.
const MAX_METADATA: u64 = 256 << 20;
/// The largest plain value read at mount (an optimizer's `step`, a config).
const MAX_VALUE: u64 = 16 << 20;
/// The most components of a state-dict path (`planner_data`) shown as directories.
const MAX_PATH: usize = 64;
/// The largest chunk decompressed into memory (a stream transform cannot be read in place).
const MAX_TRANSFORMED: u64 = 1 << 30;

/// The metadata files of the DCP checkpoint directory `path`, if it is one: its `.metadata`,
/// or each rank's `__R.metadata` (a save without collectives, `use_collectives=False`).
pub fn metadata_files(fs: &dyn Files, path: &Path) -> Option<Vec<PathBuf>> {
    if !fs.is_dir(path) {
        return None;
    }
    if fs.is_file(&path.join(METADATA)) {
        return Some(vec![path.join(METADATA)]);
    }
    let mut ranks: Vec<(u64, PathBuf)> = fs
        .list(path)
        .ok()?
        .into_iter()
        .filter_map(|(n, k)| {
            let n = n.to_str()?;
            let r = n.strip_prefix("__")?.strip_suffix(METADATA)?;
            let rank = r.parse::<u64>().ok().filter(|_| k == EntryKind::File)?;
            Some((rank, path.join(n)))
        })
        .collect();
    ranks.sort();
    (!ranks.is_empty()).then(|| ranks.into_iter().map(|(_, p)| p).collect())
}

/// Whether `path` is a DCP checkpoint directory.
pub fn is_checkpoint(fs: &dyn Files, path: &Path) -> bool {
    metadata_files(fs, path).is_some()
}

/// The DCP checkpoint at `path`, if it is one.
pub fn open_path(path: &Path, opts: &ReaderOptions) -> Result<Option<Arc<dyn Model>>, OpenError> {
    match metadata_files(&*opts.storage, path) {
        Some(files) => open(path, &files, opts).map(Some),
        None => Ok(None),
    }
}

/// Where one chunk (or plain value) is stored.
#[derive(Clone, Debug)]
struct StorageInfo {
    path: String,
    offset: u64,
    length: u64,
    transforms: Vec<String>,
}

/// One entry of `state_dict_metadata`.
enum Item {
    Tensor {
        dtype: Result<DType, String>,
        torch_dtype: String,
        size: Vec<u64>,
        /// `(offsets, sizes)`.
        chunks: Vec<(Vec<u64>, Vec<u64>)>,
    },
    Bytes,
}

/// What `.metadata` says.
struct Metadata {
    items: Vec<(String, Item)>,
    /// By `(fqn, chunk offsets)`; a plain value's offsets are `None`.
    storage: HashMap<(String, Option<Vec<u64>>), StorageInfo>,
    /// The state dict path of each flattened name.
    paths: HashMap<String, Vec<String>>,
    version: Option<String>,
    dangerous: Vec<String>,
}

/// The checkpoint's files, each opened on first use and shared by its chunks.
struct DataFiles {
    storage: Arc<dyn Files>,
    dir: PathBuf,
    files: HashMap<String, Memo<Arc<dyn ReadAt>>>,
}

impl DataFiles {
    fn open(&self, rel: &str) -> Result<Arc<dyn ReadAt>, ModelError> {
        let memo = self.files.get(rel).ok_or_else(|| {
            ModelError::data(self.dir.display().to_string(), format!("{rel}: not listed"))
        })?;
        memo.get_or_try(|| {
            crate::source::open_inside(&*self.storage, &self.dir, rel)
                .map_err(|e| ModelError::data(format!("{}/{rel}", self.dir.display()), e))
        })
        .cloned()
    }
}

/// Opens the checkpoint directory `dir` described by `metadata_files` (one, or one per
/// rank: merged, a chunk or value several ranks saved taken from the first).
pub fn open(
    dir: &Path,
    metadata_files: &[PathBuf],
    opts: &ReaderOptions,
) -> Result<Arc<dyn Model>, OpenError> {
    let mut meta: Option<Metadata> = None;
    let mut mtime = SystemTime::UNIX_EPOCH;
    for path in metadata_files {
        let (m, t) = read_metadata(path, opts)?;
        mtime = mtime.max(t);
        meta = Some(match meta {
            None => m,
            Some(into) => merged(into, m),
        });
    }
    let meta = meta.ok_or_else(|| OpenError::Missing {
        path: dir.join(METADATA),
    })?;
    build(dir, &meta, mtime, opts)
}

/// The model `meta` describes, its files in `dir`.
fn build(
    dir: &Path,
    meta: &Metadata,
    mtime: SystemTime,
    opts: &ReaderOptions,
) -> Result<Arc<dyn Model>, OpenError> {
    let mut model = Flat::new("pytorch-dcp");
    for d in &meta.dangerous {
        model.finding(Finding::dangerous(format!("{METADATA}: {d}")));
    }
    let mut rels: Vec<&str> = meta.storage.values().map(|s| s.path.as_str()).collect();
    rels.sort_unstable();
    rels.dedup();
    model.detail(format!(
        "DCP checkpoint{}: {} entries in {} files",
        meta.version
            .as_deref()
            .map(|v| format!(" (metadata version {v})"))
            .unwrap_or_default(),
        meta.items.len(),
        rels.len()
    ));
    let files = Arc::new(DataFiles {
        storage: Arc::clone(&opts.storage),
        dir: dir.to_path_buf(),
        files: rels
            .iter()
            .map(|r| (r.to_string(), Memo::default()))
            .collect(),
    });
    let mut values: BTreeMap<Vec<String>, Values> = BTreeMap::new();
    let mut damaged = std::collections::HashSet::new();
    let path_of = |fqn: &String| {
        meta.paths
            .get(fqn)
            .filter(|p| !p.is_empty())
            .cloned()
            .unwrap_or_else(|| vec![fqn.clone()])
    };
    // Every directory holding a tensor (and the root).
    let mut dirs: std::collections::HashSet<Vec<String>> = std::collections::HashSet::new();
    for (fqn, item) in &meta.items {
        if let Item::Tensor { .. } = item {
            let p = path_of(fqn);
            dirs.extend((0..p.len()).map(|k| p[..k].to_vec()));
        }
    }
    dirs.insert(Vec::new());
    for (fqn, item) in &meta.items {
        let path = path_of(fqn);
        match item {
            Item::Tensor {
                dtype,
                torch_dtype,
                size,
                chunks,
            } => {
                let key = path.join("/");
                let t = tensor(
                    &files,
                    meta,
                    fqn,
                    &key,
                    dtype,
                    torch_dtype,
                    size,
                    chunks,
                    opts,
                    mtime,
                );
                model.add(&key, t, METADATA);
            }
            Item::Bytes => {
                // In the deepest directory holding tensors, as JSON nested by the rest of
                // its path (`torch.save` shows a dict of plain values so).
                let k = (0..path.len())
                    .rev()
                    .find(|&k| dirs.contains(&path[..k]))
                    .unwrap_or(0);
                let (dir, rest) = path.split_at(k);
                let into = values.entry(dir.to_vec()).or_default();
                let at = path.join("/");
                match plain_value(&files, meta, fqn, &rest[0]) {
                    Ok(found) => {
                        for d in &found.dangerous {
                            model.finding(Finding::dangerous(format!("{at}: {d}")));
                        }
                        for (_, mut v) in found.values {
                            if let Some(x) = v.values.remove(&rest[0]) {
                                nest(&mut into.values, rest, x);
                            }
                            let key = rest.join("/");
                            into.problems
                                .extend(v.problems.into_values().map(|p| (key.clone(), p)));
                            into.notes
                                .extend(v.notes.into_values().map(|p| (key.clone(), p)));
                        }
                    }
                    Err(e) if crate::source::is_transient(&e) => {
                        return Err(OpenError::unreadable(&files.dir, e))
                    }
                    Err(e) => {
                        // Damage, said here; the walk's problems (dangerous calls) below.
                        model.finding(Finding::damage(format!("{at}: {e}")));
                        into.problems.insert(rest.join("/"), e.to_string().into());
                        damaged.insert(at);
                    }
                }
            }
        }
    }
    for (dir, v) in values {
        for (k, why) in &v.problems {
            let at: Vec<&str> = dir.iter().map(String::as_str).chain([k.as_str()]).collect();
            let (at, why) = (at.join("/"), why.as_str().unwrap_or_default());
            if !damaged.contains(&at) {
                model.finding(Finding::dangerous(format!("{at}: {why}")));
            }
        }
        crate::add_values(&mut model, dir, v, mtime);
    }
    Ok(Arc::new(model))
}

/// One metadata file, read, and its time.
fn read_metadata(path: &Path, opts: &ReaderOptions) -> Result<(Metadata, SystemTime), OpenError> {
    let file = opts.open_file(path)?;
    let name = crate::model::base_name(file.name()).to_string();
    if file.size() > MAX_METADATA {
        let why = format!("{} bytes, more than the {MAX_METADATA} read", file.size());
        return Err(OpenError::unreadable(path, ModelError::data(name, why)));
    }
    let bytes = file
        .read_vec(0, file.size() as usize)
        .map_err(|e| OpenError::unreadable(path, e))?;
    let p = crate::pickle::load(&bytes).map_err(|e| OpenError::unreadable(path, e))?;
    let meta =
        metadata(&p).map_err(|why| OpenError::unreadable(path, ModelError::data(name, why)))?;
    Ok((meta, file.mtime()))
}

/// `b`'s entries added to `a`'s: chunks of a tensor both name are joined (a chunk at the same
/// offsets, a replicated tensor's, is kept once), and `a`'s storage entries win.
fn merged(mut a: Metadata, b: Metadata) -> Metadata {
    let at: HashMap<String, usize> = a
        .items
        .iter()
        .enumerate()
        .map(|(i, (f, _))| (f.clone(), i))
        .collect();
    for (fqn, item) in b.items {
        match (at.get(&fqn).map(|&i| &mut a.items[i].1), item) {
            (
                Some(Item::Tensor { chunks, size, .. }),
                Item::Tensor {
                    chunks: more,
                    size: size_b,
                    ..
                },
            ) if *size == size_b => {
                for c in more {
                    if !chunks.iter().any(|k| k.0 == c.0) {
                        chunks.push(c);
                    }
                }
            }
            (Some(_), _) => {}
            (None, item) => a.items.push((fqn, item)),
        }
    }
    for (k, v) in b.storage {
        a.storage.entry(k).or_insert(v);
    }
    for (k, v) in b.paths {
        a.paths.entry(k).or_insert(v);
    }
    a.dangerous.extend(b.dangerous);
    a
}

/// `x` into `values` at the path `at` of nested objects (a value already there, not an
/// object, stays).
fn nest(
    values: &mut serde_json::Map<String, serde_json::Value>,
    at: &[String],
    x: serde_json::Value,
) {
    match at {
        [] => {}
        [last] => {
            values.entry(last.clone()).or_insert(x);
        }
        [first, rest @ ..] => {
            let sub = values
                .entry(first.clone())
                .or_insert_with(|| serde_json::Value::Object(Default::default()));
            if let serde_json::Value::Object(m) = sub {
                nest(m, rest, x);
            }
        }
    }
}

/// The tensor `fqn` (shown as `key`): its one chunk, or its chunks assembled.
#[allow(clippy::too_many_arguments)]
fn tensor(
    files: &Arc<DataFiles>,
    meta: &Metadata,
    fqn: &str,
    key: &str,
    dtype: &Result<DType, String>,
    torch_dtype: &str,
    size: &[u64],
    chunks: &[(Vec<u64>, Vec<u64>)],
    opts: &ReaderOptions,
    mtime: SystemTime,
) -> Arc<dyn Tensor> {
    let mut whole = TensorMeta {
        mtime,
        ..TensorMeta::new(
            key.as_bytes().to_vec(),
            *dtype.as_ref().unwrap_or(&DType::U8),
            size.to_vec(),
            "pytorch-dcp",
        )
    };
    whole.extra.insert("torch_dtype".into(), torch_dtype.into());
    if let Err(why) = dtype {
        whole.note = Some(why.clone());
        return Arc::new(Unread { meta: whole });
    }
    let parts: Vec<(Block, Option<StorageInfo>)> = chunks
        .iter()
        .map(|(offsets, sizes)| {
            let info = meta.storage.get(&(fqn.to_string(), Some(offsets.clone())));
            let part = PartitionMeta {
                extent: Vec::new(),
                file: info.map(|i| i.path.clone()).unwrap_or_default(),
                offset: info.map_or(0, |i| i.offset),
                length: info.map_or(0, |i| i.length),
                part_id: None,
                extra: Default::default(),
            };
            let chunk_meta = TensorMeta {
                shape: sizes.clone(),
                extra: Default::default(),
                ..whole.clone()
            };
            let tensor = match info {
                None => Err(format!("chunk at {offsets:?} has no storage entry")),
                Some(i) => check_path(&i.path).map(|()| {
                    Arc::new(Chunk {
                        meta: chunk_meta,
                        files: Arc::clone(files),
                        info: i.clone(),
                        verify: opts.verify,
                        verdicts: opts.verdicts.clone(),
                        inner: Memo::default(),
                    }) as Arc<dyn Tensor>
                }),
            };
            let extent = Ok(offsets.iter().copied().zip(sizes.iter().copied()).collect());
            (
                Block {
                    extent,
                    tensor,
                    part,
                },
                info.cloned(),
            )
        })
        .collect();
    let covers_all = |b: &Block| {
        b.extent.as_ref().is_ok_and(|e| {
            e.len() == size.len() && e.iter().zip(size).all(|(&(s, l), &d)| s == 0 && l == d)
        })
    };
    if let [(b, Some(info))] = parts.as_slice() {
        // One chunk of the whole (its path checked): the tensor is that chunk.
        if covers_all(b) && b.tensor.is_ok() {
            whole.extra.insert("file".into(), info.path.clone().into());
            whole.extra.insert("offset".into(), info.offset.into());
            whole.extra.insert("length".into(), info.length.into());
            return Arc::new(Chunk {
                meta: whole,
                files: Arc::clone(files),
                info: info.clone(),
                verify: opts.verify,
                verdicts: opts.verdicts.clone(),
                inner: Memo::default(),
            });
        }
    }
    let source = files.dir.display().to_string();
    Arc::new(Blocks::assemble(
        whole,
        source,
        parts.into_iter().map(|(b, _)| b).collect(),
    ))
}

/// Whether a `relative_path` names a file inside the checkpoint (checked again, with
/// symlinks, when it is opened).
fn check_path(rel: &str) -> Result<(), String> {
    let plain = Path::new(rel)
        .components()
        .all(|c| matches!(c, std::path::Component::Normal(_)));
    match plain && !rel.is_empty() {
        true => Ok(()),
        false => Err(format!(
            "its storage path {rel:?} leaves the checkpoint's directory: refused"
        )),
    }
}

/// The bytes of a stored item: in place, or decompressed when a stream transform wrote them.
/// At most `max` bytes decompressed.
fn item_source(
    files: &DataFiles,
    info: &StorageInfo,
    max: u64,
) -> Result<Arc<dyn ReadAt>, ModelError> {
    let file = files.open(&info.path)?;
    let window = Window::new(file, info.offset, info.length)?;
    match info.transforms.as_slice() {
        [] => Ok(Arc::new(window)),
        [t] if t == "stream.zstd" || t.starts_with("stream.zstd/") => {
            let name = window.name().to_string();
            let bad = |why: String| ModelError::data(&name, why);
            if info.length > max {
                return Err(bad(format!(
                    "a compressed chunk of {} bytes: not read",
                    info.length
                )));
            }
            let raw = window.read_vec(0, info.length as usize)?;
            let mut out = Vec::new();
            ruzstd::decoding::StreamingDecoder::new(&raw[..])
                .map_err(|e| bad(format!("zstd: {e}")))?
                .take(max + 1)
                .read_to_end(&mut out)
                .map_err(|e| bad(format!("zstd: {e}")))?;
            if out.len() as u64 > max {
                return Err(bad(format!(
                    "decompresses to more than {max} bytes: not read"
                )));
            }
            Ok(Arc::new(MemSource::new(name, out)))
        }
        other => Err(ModelError::data(
            window.name(),
            format!("written through the transforms {other:?}, which this reader does not decode"),
        )),
    }
}

/// The plain value `fqn`, a `torch.save` of it, as the walk of its pickle gives it (under
/// the name `name`).
fn plain_value(
    files: &DataFiles,
    meta: &Metadata,
    fqn: &str,
    name: &str,
) -> Result<walk::Found, ModelError> {
    let info = meta
        .storage
        .get(&(fqn.to_string(), None))
        .ok_or_else(|| ModelError::data(fqn, "no storage entry"))?;
    check_path(&info.path).map_err(|why| ModelError::data(fqn, why))?;
    if info.length > MAX_VALUE {
        return Err(ModelError::data(
            fqn,
            format!("{} bytes: not read", info.length),
        ));
    }
    let src = item_source(files, info, MAX_VALUE)?;
    let bytes = crate::object_pickle(&src, MAX_VALUE)?;
    let p = crate::pickle::load(&bytes).map_err(|e| ModelError::data(src.name(), e))?;
    Ok(walk::walk(&p, name))
}

/// A chunk: one `torch.save` archive of one tensor, opened on first read.
struct Chunk {
    meta: TensorMeta,
    files: Arc<DataFiles>,
    info: StorageInfo,
    verify: bool,
    verdicts: Option<Arc<dyn crate::store::Store>>,
    /// The archive's tensor, or why there is none (only lasting verdicts are kept).
    inner: Memo<Result<Arc<dyn Tensor>, String>>,
}

impl Chunk {
    fn inner(&self) -> Result<&Arc<dyn Tensor>, ModelError> {
        let got = self.inner.get_or_try(|| match self.open() {
            Ok(t) => Ok(Ok(t)),
            Err(e) if crate::source::is_transient(&e) => Err(e),
            Err(e) => Ok(Err(e.to_string())),
        })?;
        got.as_ref().map_err(|why| {
            ModelError::data(
                format!("{}/{}", self.files.dir.display(), self.info.path),
                why.clone(),
            )
        })
    }

    fn open(&self) -> Result<Arc<dyn Tensor>, ModelError> {
        let src = item_source(&self.files, &self.info, MAX_TRANSFORMED)?;
        let t = crate::one_tensor(&src, self.verify, self.verdicts.clone())?;
        let m = t.meta();
        if m.dtype != self.meta.dtype || m.shape != self.meta.shape {
            return Err(ModelError::data(
                src.name(),
                format!(
                    "holds a {} tensor of shape {:?}; the metadata says {} {:?}",
                    m.dtype.name(),
                    m.shape,
                    self.meta.dtype.name(),
                    self.meta.shape
                ),
            ));
        }
        if let Some(p) = m.problem.as_ref().or(m.note.as_ref()) {
            return Err(ModelError::data(src.name(), p.clone()));
        }
        Ok(t)
    }
}

impl Tensor for Chunk {
    fn meta(&self) -> &TensorMeta {
        &self.meta
    }

    fn fill_elements(&self, ctx: &ReadCtx, first: u64, out: &mut [u8]) -> Result<(), ModelError> {
        self.inner()?.fill_elements(ctx, first, out)
    }

    fn lend(&self, ctx: &ReadCtx, first: u64, len: usize) -> Option<Result<Bytes, ModelError>> {
        match self.inner() {
            Ok(t) => t.lend(ctx, first, len),
            Err(e) => Some(Err(e)),
        }
    }
}

/// A tensor whose elements are not read (a dtype not decoded), or a refused one.
struct Unread {
    meta: TensorMeta,
}

impl Tensor for Unread {
    fn meta(&self) -> &TensorMeta {
        &self.meta
    }

    fn fill_elements(&self, _: &ReadCtx, _: u64, _: &mut [u8]) -> Result<(), ModelError> {
        let why = self.meta.problem.as_ref().or(self.meta.note.as_ref());
        Err(ModelError::data(
            String::from_utf8_lossy(&self.meta.name),
            why.cloned().unwrap_or_else(|| "not read".into()),
        ))
    }
}

// ---- `.metadata`, read off the pickle's values ----

/// What `.metadata` says, or why it is not a DCP metadata pickle.
fn metadata(p: &Pickle) -> Result<Metadata, String> {
    let r = Reader { p };
    let root = r
        .object(p.root, "Metadata")
        .ok_or("its pickle is not a torch.distributed.checkpoint Metadata")?;
    let mut m = Metadata {
        items: Vec::new(),
        storage: HashMap::new(),
        paths: HashMap::new(),
        version: r
            .field(root, "version")
            .and_then(|v| r.str(v))
            .map(str::to_string),
        dangerous: Vec::new(),
    };
    let sdm = r
        .field(root, "state_dict_metadata")
        .and_then(|v| r.dict(v))
        .ok_or("no state_dict_metadata")?;
    for &(k, v) in sdm {
        let fqn = r
            .str(k)
            .ok_or("a state_dict_metadata key is not a string")?;
        m.items.push((
            fqn.to_string(),
            r.item(v).map_err(|e| format!("{fqn}: {e}"))?,
        ));
    }
    if let Some(sd) = r.field(root, "storage_data").and_then(|v| r.dict(v)) {
        for &(k, v) in sd {
            let idx = r
                .object(k, "MetadataIndex")
                .ok_or("a storage_data key is not a MetadataIndex")?;
            let fqn = r
                .field(idx, "fqn")
                .and_then(|f| r.str(f))
                .ok_or("a MetadataIndex without fqn")?;
            let offset = match r.field(idx, "offset") {
                None => None,
                Some(o) if matches!(p.get(o), Value::None) => None,
                Some(o) => Some(r.size(o).ok_or("a MetadataIndex offset is not a size")?),
            };
            let info = r.storage_info(v).map_err(|e| format!("{fqn}: {e}"))?;
            m.storage.insert((fqn.to_string(), offset), info);
        }
    }
    if let Some(pd) = r.field(root, "planner_data").and_then(|v| r.dict(v)) {
        for &(k, v) in pd {
            let (Some(fqn), Some(items)) = (r.str(k), r.seq(v)) else {
                continue;
            };
            let path: Option<Vec<String>> = items
                .iter()
                .map(|&i| match p.get(i) {
                    Value::Str(s) => Some(s.clone()),
                    Value::Int(n) => Some(n.to_string()),
                    _ => None,
                })
                .collect();
            // A path of plain components, not too deep (a memoised string repeated makes a
            // long one cheaply); else the flattened name is shown.
            let plain =
                |c: &String| !c.is_empty() && c != "." && c != ".." && !c.contains(['/', '\0']);
            let usable = |p: &Vec<String>| p.len() <= MAX_PATH && p.iter().all(plain);
            if let Some(path) = path.filter(usable) {
                m.paths.insert(fqn.to_string(), path);
            }
        }
    }
    for v in p.values() {
        if let Value::Global(module, name) = v {
            if walk::dangerous(module, name) {
                m.dangerous.push(format!(
                    "the pickle imports {module}.{name}, which a pickle scanner calls dangerous (never run here)"
                ));
            }
        }
    }
    Ok(m)
}

/// Reads DCP's dataclasses off the pickle's values.
struct Reader<'a> {
    p: &'a Pickle,
}

impl<'a> Reader<'a> {
    /// The call `id` of the class `class` (any module: DCP's classes moved between versions).
    fn object(&self, id: Id, class: &str) -> Option<&'a Call> {
        match self.p.get(id) {
            Value::Call(c) => match self.p.get(c.callee) {
                Value::Global(_, n) if n == class => Some(c),
                _ => None,
            },
            _ => None,
        }
    }

    /// A dataclass's field: its state is a dict of fields (or `(dict, slots)`).
    fn field(&self, c: &Call, name: &str) -> Option<Id> {
        let state = c.state?;
        let dicts: Vec<Id> = match self.p.get(state) {
            Value::Dict(_) => vec![state],
            Value::Tuple(t) => t.clone(),
            _ => return None,
        };
        dicts.into_iter().find_map(|d| match self.p.get(d) {
            Value::Dict(pairs) => pairs
                .iter()
                .find(|&&(k, _)| self.str(k) == Some(name))
                .map(|&(_, v)| v),
            _ => None,
        })
    }

    fn str(&self, id: Id) -> Option<&'a str> {
        match self.p.get(id) {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    fn dict(&self, id: Id) -> Option<&'a [(Id, Id)]> {
        match self.p.get(id) {
            Value::Dict(d) => Some(d),
            Value::Call(c) if !c.pairs.is_empty() => Some(&c.pairs),
            _ => None,
        }
    }

    fn seq(&self, id: Id) -> Option<&'a [Id]> {
        match self.p.get(id) {
            Value::List(v) | Value::Tuple(v) => Some(v),
            _ => None,
        }
    }

    fn uint(&self, id: Id) -> Option<u64> {
        match self.p.get(id) {
            Value::Int(n) => u64::try_from(*n).ok(),
            _ => None,
        }
    }

    /// A `torch.Size` (or a plain tuple of ints).
    fn size(&self, id: Id) -> Option<Vec<u64>> {
        let items = match self.object(id, "Size") {
            Some(c) => {
                let args = self.seq(c.args)?;
                match args {
                    [one] => self.seq(*one)?,
                    [] => &[],
                    _ => return None,
                }
            }
            None => self.seq(id)?,
        };
        items.iter().map(|&i| self.uint(i)).collect()
    }

    fn item(&self, id: Id) -> Result<Item, String> {
        if self.object(id, "BytesStorageMetadata").is_some() {
            return Ok(Item::Bytes);
        }
        let t = self
            .object(id, "TensorStorageMetadata")
            .ok_or("neither tensor nor bytes storage metadata")?;
        let size = self
            .field(t, "size")
            .and_then(|s| self.size(s))
            .ok_or("no size")?;
        let props = self
            .field(t, "properties")
            .and_then(|p| self.object(p, "TensorProperties"))
            .ok_or("no properties")?;
        // `TensorProperties.__getstate__` gives a tuple, dtype first; older ones a dict.
        let dtype_id = match props.state.map(|s| self.p.get(s)) {
            Some(Value::Tuple(t)) => t.first().copied(),
            _ => self.field(props, "dtype"),
        };
        let torch_dtype = match dtype_id.map(|d| self.p.get(d)) {
            Some(Value::Global(m, n)) if m == "torch" => n.clone(),
            _ => return Err("its dtype is not a torch dtype".into()),
        };
        let dtype = walk::dtype_of(&torch_dtype)
            .ok_or_else(|| format!("torch.{torch_dtype} elements are not decoded"));
        let mut chunks = Vec::new();
        for &c in self
            .field(t, "chunks")
            .and_then(|c| self.seq(c))
            .ok_or("no chunks")?
        {
            let c = self
                .object(c, "ChunkStorageMetadata")
                .ok_or("a chunk is not ChunkStorageMetadata")?;
            let offsets = self.field(c, "offsets").and_then(|o| self.size(o));
            let sizes = self.field(c, "sizes").and_then(|s| self.size(s));
            match (offsets, sizes) {
                (Some(o), Some(s)) if o.len() == size.len() && s.len() == size.len() => {
                    chunks.push((o, s))
                }
                _ => return Err("a chunk's offsets or sizes do not fit the tensor's rank".into()),
            }
        }
        Ok(Item::Tensor {
            dtype,
            torch_dtype,
            size,
            chunks,
        })
    }

    fn storage_info(&self, id: Id) -> Result<StorageInfo, String> {
        let s = self
            .object(id, "_StorageInfo")
            .ok_or("a storage entry is not a _StorageInfo")?;
        let path = self
            .field(s, "relative_path")
            .and_then(|v| self.str(v))
            .ok_or("no relative_path")?;
        let offset = self
            .field(s, "offset")
            .and_then(|v| self.uint(v))
            .ok_or("no offset")?;
        let length = self
            .field(s, "length")
            .and_then(|v| self.uint(v))
            .ok_or("no length")?;
        let transforms = match self.field(s, "transform_descriptors") {
            None => Vec::new(),
            Some(t) => match self.p.get(t) {
                Value::None => Vec::new(),
                _ => self
                    .seq(t)
                    .ok_or("transform_descriptors is not a list")?
                    .iter()
                    .map(|&d| self.str(d).map(str::to_string))
                    .collect::<Option<Vec<_>>>()
                    .ok_or("a transform descriptor is not a string")?,
            },
        };
        Ok(StorageInfo {
            path: path.to_string(),
            offset,
            length,
            transforms,
        })
    }
}

/// The fuzz target's entry (`fuzz/fuzz_targets/dcp.rs`): `data` as a `.metadata` pickle,
/// read, its tensors built (chunks' extents checked against hostile shapes) and every tensor
/// read from a directory that does not exist. Any `Err` is fine; a panic, a hang or a huge
/// allocation is a bug.
#[cfg(any(test, feature = "testkit"))]
pub fn fuzz_metadata(data: &[u8]) {
    let Ok(p) = crate::pickle::load(data) else {
        return;
    };
    let Ok(meta) = metadata(&p) else {
        return;
    };
    let dir = Path::new("/nonexistent/modelfs-fuzz-dcp");
    if let Ok(model) = build(
        dir,
        &meta,
        SystemTime::UNIX_EPOCH,
        &ReaderOptions::default(),
    ) {
        crate::model::testing::fuzz_walk(&*model);
    }
}
