//! PyTorch checkpoints written by `torch.save` (the zip format of torch ≥ 1.6, and the legacy
//! format before it: `legacy.rs`): a file, or a
//! directory sharded as `transformers` shards one (`pytorch_model-0000i-of-0000n.bin` and
//! `pytorch_model.bin.index.json`). The archive holds `<name>/data.pkl`, the pickled object,
//! and `<name>/data/<key>`, one stored member per storage.
//!
//! The pickle is read by a machine that runs nothing (`pickle.rs`), and what it holds is read
//! off its values (`walk.rs`): tensors are views of storages (`tensor.rs`), dicts, lists and
//! tuples holding tensors are directories (`{"model": …, "optimizer": …}` → `model/`,
//! `optimizer/state/0/exp_avg`), and every other value is JSON in its directory's
//! `__values__.json` (`epoch`, `config`), or, if it is a call of anything but the few that
//! rebuild tensors, that entry's note there (its problem when a pickle scanner calls the
//! callee dangerous: `walk::dangerous`): never run. A module saved whole, a TorchScript
//! module and a YOLO-style `{"model": module}` name their tensors as `state_dict()` does
//! (`backbone.0.weight`), as a state dict's file does.
//!
//! Only the archive's directory and its pickle are read at mount; where a storage's bytes
//! start is read from its local header on its first read.
//!
//! This is the crate `modelfs-torch`, one of modelfs's readers: it knows only `modelfs-io` and
//! `modelfs-model`. `files_of` says which files a path is, `open` gives them as one
//! `model::Model`.
//!
//! ```
//! use modelfs_model::DirEntry;
//! let path = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/torch/checkpoint.pt"));
//! let files = modelfs_torch::files_of(&*modelfs_io::source::local(), path)
//!     .unwrap()
//!     .expect("a torch.save file");
//! let model = modelfs_torch::open(&files, &Default::default()).unwrap();
//! let model_dir = model.list_dir(&[b"model".to_vec()]).unwrap();
//! assert!(model_dir.contains(&DirEntry::Tensor(b"0.weight".to_vec())));
//! ```
#![deny(clippy::undocumented_unsafe_blocks)]

// The layers below, under the names every module of modelfs uses (`crate::source::ReadAt`).
pub(crate) use modelfs_io::{codec, source, store};
pub(crate) use modelfs_model as model;
#[cfg(test)]
pub(crate) use modelfs_model::testing;

pub mod dcp;
mod legacy;
mod pickle;
mod tensor;
mod walk;

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use crate::codec::zip::{self as zipdir, Method};
use crate::model::flat::{Flat, JsonDocument};
use crate::model::{Finding, Model, ModelError, OpenError, ReaderOptions};
use crate::source::{EntryKind, ReadAt, ReadExt, Storage as Files};
pub use pickle::PickleError;
use tensor::{Storage, TorchTensor};
use walk::Values;

/// The directory document holding a dict's plain values and its entries' problems.
const VALUES: &[u8] = b"__values__.json";
/// The largest pickle read: a state dict's is a few bytes per tensor.
const MAX_PICKLE: u64 = 64 << 20;
const INDEX_SUFFIXES: [&str; 3] = [".bin.index.json", ".pt.index.json", ".pth.index.json"];

/// The files of the PyTorch source at `path`, if it is one: a `torch.save` zip, an index of
/// shards, or a directory with an index (`*.bin.index.json`) or a `pytorch_model.bin`.
pub fn files_of(fs: &dyn Files, path: &Path) -> Result<Option<Vec<PathBuf>>, OpenError> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if fs.is_file(path) {
        if INDEX_SUFFIXES.iter().any(|s| name.ends_with(s)) {
            let dir = path.parent().unwrap_or(Path::new(""));
            return crate::model::flat::shards_of_index(fs, dir, path).map(Some);
        }
        return Ok(is_torch_file(fs, path).then(|| vec![path.to_path_buf()]));
    }
    // A directory that cannot be listed (HTTP) is found by the names `save_pretrained` gives.
    let index = path.join("pytorch_model.bin.index.json");
    let single = path.join("pytorch_model.bin");
    let entries = match fs.list(path) {
        Ok(entries) if fs.is_dir(path) => entries,
        _ if fs.is_file(&index) => {
            return crate::model::flat::shards_of_index(fs, path, &index).map(Some)
        }
        _ if fs.is_file(&single) && is_torch_file(fs, &single) => return Ok(Some(vec![single])),
        _ => return Ok(None),
    };
    let mut indexes: Vec<PathBuf> = entries
        .iter()
        .filter(|(n, k)| {
            *k == EntryKind::File
                && n.to_str()
                    .is_some_and(|n| INDEX_SUFFIXES.iter().any(|s| n.ends_with(s)))
        })
        .map(|(n, _)| path.join(n))
        .collect();
    indexes.sort();
    match indexes.as_slice() {
        [index] => crate::model::flat::shards_of_index(fs, path, index).map(Some),
        [] => Ok((fs.is_file(&single) && is_torch_file(fs, &single)).then(|| vec![single])),
        _ => Err(OpenError::Unsupported {
            path: path.to_path_buf(),
            what: format!("{} PyTorch index files; mount one of them", indexes.len()),
        }),
    }
}

/// Whether `path` is a `torch.save` file: a legacy one (its magic number), or a zip whose
/// directory has a `<name>/data.pkl` (the first bytes, then the directory: a zip of something
/// else is not one).
pub fn is_torch_file(fs: &dyn Files, path: &Path) -> bool {
    fs.open(path).is_ok_and(|file| is_torch_reader(&*file))
}

/// Whether `file` is a `torch.save` file (`is_torch_file` of one opened already).
pub fn is_torch_reader(file: &dyn ReadAt) -> bool {
    let Ok(head) = file.read_vec(0, 32.min(file.size()) as usize) else {
        return false;
    };
    if legacy::is_legacy(&head) {
        return true;
    }
    head.starts_with(b"PK\x03\x04")
        && zipdir::entries(file.size(), |at, buf| read_meta(file, at, buf))
            .is_ok_and(|e| pickle_member(&e).is_some())
}

/// A read of the archive's directory: metadata (`ReadAt::read_vec`, no read-ahead).
fn read_meta(file: &dyn ReadAt, at: u64, buf: &mut [u8]) -> Result<(), crate::source::SourceError> {
    buf.copy_from_slice(&file.read_vec(at, buf.len())?);
    Ok(())
}

/// The archive's pickle: `<name>/data.pkl`, one level down.
fn pickle_member(entries: &[zipdir::Entry]) -> Option<&zipdir::Entry> {
    entries.iter().find(|e| {
        e.name
            .split_once('/')
            .is_some_and(|(_, rest)| rest == "data.pkl")
    })
}

/// The model of the PyTorch source at `path` (`files_of`, then `open`); `None` when it is not
/// one.
pub fn open_path(path: &Path, opts: &ReaderOptions) -> Result<Option<Arc<dyn Model>>, OpenError> {
    let files = files_of(&*opts.storage, path)?;
    files.map(|files| open(&files, opts)).transpose()
}

/// The model of the `torch.save` archives `files` (`files_of`): one tree, shards merged.
pub fn open(files: &[PathBuf], opts: &ReaderOptions) -> Result<Arc<dyn Model>, OpenError> {
    let mut model = Flat::new("pytorch");
    let mut values: BTreeMap<Vec<String>, Values> = BTreeMap::new();
    let mut mtime = SystemTime::UNIX_EPOCH;
    for path in files {
        let file = opts.open_file(path)?;
        mtime = mtime.max(file.mtime());
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("tensor");
        let found = archive(&file, stem, opts.verify, opts.verdicts.clone(), &mut model)
            .map_err(|e| OpenError::unreadable(path, e))?;
        for (dir, v) in found {
            let into = values.entry(dir).or_default();
            for (k, x) in v.values {
                into.values.entry(k).or_insert(x);
            }
            for (k, x) in v.problems {
                into.problems.entry(k).or_insert(x);
            }
            for (k, x) in v.notes {
                into.notes.entry(k).or_insert(x);
            }
        }
    }
    for (dir, v) in values {
        let at = |k: &str| {
            let at: Vec<&str> = dir.iter().map(String::as_str).chain([k]).collect();
            at.join("/")
        };
        for (k, why) in &v.problems {
            let why = why.as_str().unwrap_or_default();
            model.finding(Finding::dangerous(format!("{}: {why}", at(k))));
        }
        for (k, why) in &v.notes {
            let why = why.as_str().unwrap_or_default();
            model.finding(Finding::note(format!("{}: {why}", at(k))));
        }
        add_values(&mut model, dir, v, mtime);
    }
    Ok(Arc::new(model))
}

/// The directory `dir`'s `__values__.json`: `{"values": {…}, "problems": {…}, "notes": {…}}`
/// (problems and notes only when there are some).
fn add_values(model: &mut Flat, dir: Vec<String>, v: Values, mtime: SystemTime) {
    let dir: Vec<Vec<u8>> = dir.into_iter().map(String::into_bytes).collect();
    let mut doc = serde_json::Map::new();
    doc.insert("values".into(), v.values.into());
    if !v.problems.is_empty() {
        doc.insert("problems".into(), v.problems.into());
    }
    if !v.notes.is_empty() {
        doc.insert("notes".into(), v.notes.into());
    }
    let doc = JsonDocument::new(doc.into(), mtime);
    model.add_document_in(&dir, VALUES, Arc::new(doc));
}

/// Adds the tensors of one `torch.save` file to `model` (a zip archive, or the legacy
/// format); returns its plain values by directory. With `verify`, a zip member's CRC-32 is
/// checked before its bytes are served.
fn archive(
    file: &Arc<dyn ReadAt>,
    stem: &str,
    verify: bool,
    verdicts: Option<Arc<dyn crate::store::Store>>,
    model: &mut Flat,
) -> Result<BTreeMap<Vec<String>, Values>, ModelError> {
    let head = file.read_vec(0, 32.min(file.size()) as usize)?;
    if legacy::is_legacy(&head) {
        let l = legacy::read(&**file)?;
        model.detail(format!(
            "{}: legacy torch.save, {} storages, {}-endian",
            crate::model::base_name(file.name()),
            l.storages.len(),
            if l.big_endian { "big" } else { "little" }
        ));
        for p in &l.problems {
            model.problem(format!("{}: {p}", crate::model::base_name(file.name())));
        }
        return Ok(add_tensors(
            file,
            &l.object,
            &l.storages,
            l.big_endian,
            stem,
            model,
        ));
    }
    let bad = |why: String| ModelError::data(file.name(), why);
    let entries = zipdir::entries(file.size(), |at, buf| read_meta(&**file, at, buf))
        .map_err(|e| ModelError::data(file.name(), e))?;
    let pkl = pickle_member(&entries)
        .ok_or_else(|| bad("no <name>/data.pkl: not a torch.save archive".into()))?;
    let prefix = &pkl.name[..pkl.name.len() - "data.pkl".len()];
    let bytes = member(file, pkl, MAX_PICKLE)?;
    let big_endian = match entries
        .iter()
        .find(|e| e.name == format!("{prefix}byteorder"))
    {
        Some(e) => match member(file, e, 16)?.as_slice() {
            b"little" => false,
            b"big" => true,
            other => {
                return Err(bad(format!(
                    "byteorder {:?}",
                    String::from_utf8_lossy(other)
                )))
            }
        },
        None => false,
    };
    let data = format!("{prefix}data/");
    let mut storages: HashMap<String, Arc<Storage>> = HashMap::new();
    for e in &entries {
        let Some(key) = e.name.strip_prefix(&data) else {
            continue;
        };
        if e.method != Method::Store || e.compressed_size != e.uncompressed_size {
            // Listed tensors of such a storage say so (no storage found).
            model.detail(format!(
                "storage {key}: compressed ({:?}), not read",
                e.method
            ));
            continue;
        }
        let crc = verify.then_some(e.crc32);
        let s = Storage::zip(key.to_string(), e.header_offset, e.uncompressed_size, crc)
            .remembered_in(verdicts.clone());
        storages.insert(key.to_string(), Arc::new(s));
    }
    let p = pickle::load(&bytes).map_err(|e| ModelError::data(file.name(), e))?;
    model.detail(format!(
        "{}: archive {}, {} storages, {}-endian",
        crate::model::base_name(file.name()),
        prefix.trim_end_matches('/'),
        storages.len(),
        if big_endian { "big" } else { "little" }
    ));
    Ok(add_tensors(file, &p, &storages, big_endian, stem, model))
}

/// Adds the tensors of the pickle `p` over `storages` to `model`; returns its plain values.
fn add_tensors(
    file: &Arc<dyn ReadAt>,
    p: &pickle::Pickle,
    storages: &HashMap<String, Arc<Storage>>,
    big_endian: bool,
    stem: &str,
    model: &mut Flat,
) -> BTreeMap<Vec<String>, Values> {
    let found = walk::walk(p, stem);
    for d in &found.dangerous {
        let at = crate::model::base_name(file.name());
        model.finding(Finding::dangerous(format!("{at}: {d}")));
    }
    for (path, spec) in &found.tensors {
        let key = path.join("/");
        let t = TorchTensor::new(&key, spec, storages.get(&spec.storage), big_endian, file);
        model.add(&key, Arc::new(t), file.name());
    }
    found.values
}

/// The pickle (`data.pkl`) of the `torch.save` archive `file`, at most `max` bytes: a plain
/// object saved on its own (a DCP checkpoint's values).
fn object_pickle(file: &Arc<dyn ReadAt>, max: u64) -> Result<Vec<u8>, ModelError> {
    let entries = zipdir::entries(file.size(), |at, buf| read_meta(&**file, at, buf))
        .map_err(|e| ModelError::data(file.name(), e))?;
    let pkl = pickle_member(&entries).ok_or_else(|| {
        ModelError::data(file.name(), "no <name>/data.pkl: not a torch.save archive")
    })?;
    member(file, pkl, max)
}

/// The one tensor a `torch.save` archive `file` holds (a DCP checkpoint's chunk), read in
/// place; an archive of anything else, or one with a dangerous import, is an error.
fn one_tensor(
    file: &Arc<dyn ReadAt>,
    verify: bool,
    verdicts: Option<Arc<dyn crate::store::Store>>,
) -> Result<Arc<dyn crate::model::Tensor>, ModelError> {
    const STEM: &str = "tensor";
    let mut flat = Flat::new("pytorch");
    archive(file, STEM, verify, verdicts, &mut flat)?;
    let summary = flat.summary()?;
    if let Some(p) = summary.problems.first() {
        return Err(ModelError::data(file.name(), p.clone()));
    }
    flat.tensor(&[STEM.as_bytes().to_vec()])
        .map_err(|_| ModelError::data(file.name(), "holds no tensor"))
}

/// The bytes of a (small) member: stored or deflated, at most `max`.
fn member(file: &Arc<dyn ReadAt>, e: &zipdir::Entry, max: u64) -> Result<Vec<u8>, ModelError> {
    let bad = |why: String| ModelError::data(file.name(), format!("{}: {why}", e.name));
    if e.uncompressed_size > max {
        return Err(bad(format!(
            "{} bytes, more than the {max} read",
            e.uncompressed_size
        )));
    }
    let n = (zipdir::LOCAL_HEADER as u64).min(file.size().saturating_sub(e.header_offset));
    let h = file.read_vec(e.header_offset, n as usize)?;
    let start =
        zipdir::data_start(e.header_offset, &h).ok_or_else(|| bad("no local header".into()))?;
    if start
        .checked_add(e.compressed_size)
        .is_none_or(|end| end > file.size())
    {
        return Err(bad("ends past the file".into()));
    }
    if e.compressed_size > max {
        return Err(bad(format!(
            "{} bytes compressed, more than the {max} read",
            e.compressed_size
        )));
    }
    let raw = file.read_vec(start, e.compressed_size as usize)?;
    let out = match e.method {
        Method::Store => raw,
        Method::Deflate => {
            let mut out = Vec::new();
            flate2::read::DeflateDecoder::new(&raw[..])
                .take(max + 1)
                .read_to_end(&mut out)
                .map_err(|err| bad(err.to_string()))?;
            out
        }
        m => return Err(bad(format!("compressed by {m:?}"))),
    };
    if out.len() as u64 != e.uncompressed_size || crc32fast::hash(&out) != e.crc32 {
        return Err(bad(
            "its length or CRC-32 does not match the directory".into()
        ));
    }
    Ok(out)
}

/// The fuzz target's entry (`fuzz/fuzz_targets/torch.rs`): `data` as a pickle, and as a
/// `torch.save` archive, opened and every tensor's first and last elements read. Any `Err`
/// is fine; a panic, a hang or a huge allocation is a bug.
#[cfg(any(test, feature = "testkit"))]
pub fn fuzz_file(data: &[u8]) {
    if let Ok(p) = pickle::load(data) {
        let _ = walk::walk(&p, "t");
    }
    let file: Arc<dyn ReadAt> = Arc::new(crate::source::MemSource::new("f.pt", data.to_vec()));
    let mut model = Flat::new("pytorch");
    if archive(&file, "f", true, None, &mut model).is_err() {
        return;
    }
    crate::model::testing::fuzz_walk(&model);
}

/// The fuzz target's entry for the legacy format (`fuzz/fuzz_targets/torch_legacy.rs`): `data`
/// after a valid magic number, protocol version and system info, so that the fuzzer spends its
/// time on the object, the keys and the storages' layout; opened and every tensor read.
#[cfg(any(test, feature = "testkit"))]
pub fn fuzz_legacy(data: &[u8]) {
    // pickle.dumps of the magic number, 1001 and {'protocol_version': 1001,
    // 'little_endian': True}, protocol 2.
    let mut file = b"\x80\x02\x8a\nl\xfc\x9cF\xf9 j\xa8P\x19.\x80\x02M\xe9\x03.".to_vec();
    file.extend_from_slice(
        b"\x80\x02}q\x00(X\x10\x00\x00\x00protocol_versionq\x01M\xe9\x03X\r\x00\x00\x00\
          little_endianq\x02\x88u.",
    );
    file.extend_from_slice(data);
    fuzz_file(&file);
}

/// The fuzz target's entry for the object walk (`fuzz/fuzz_targets/torch_walk.rs`): `data` as
/// a pickle, walked for tensors inside objects, dicts and lists, every value rendered.
#[cfg(any(test, feature = "testkit"))]
pub fn fuzz_walk(data: &[u8]) {
    if let Ok(p) = pickle::load(data) {
        let found = walk::walk(&p, "t");
        for (path, spec) in &found.tensors {
            let _ = (path.join("/"), spec.shape.len(), &spec.problem);
        }
        let _ = serde_json::to_string(&found.values.len());
    }
}

#[cfg(test)]
mod dcp_tests;
#[cfg(test)]
mod real_tests;
#[cfg(test)]
mod tests;
