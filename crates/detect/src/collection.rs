//! A directory of models side by side: a training run's `torch.save` or safetensors
//! checkpoints, a zoo of files of any kinds (GGUF, `.npz`, torch, safetensors) and of model
//! directories (`dense/` holding `savedmodel/a`, `savedmodel/b`). Each model a member, named
//! by its file or sub-directory; each file that looks like a model and is none a problem line
//! (nothing dropped without a word).

use std::path::Path;
use std::sync::Arc;

use modelfs_io::source::{EntryKind, ReadExt};
use modelfs_model::multi::MultiModel;
use modelfs_model::{Member, Model, OpenError, ReaderOptions};

/// The most entries of a directory looked at.
const MAX_ENTRIES: usize = 100_000;

/// File names that say "a model" whatever their content: such a file no reader takes is
/// reported, not passed over.
const MODEL_SUFFIXES: &[&str] = &[
    ".pt",
    ".pth",
    ".ckpt",
    ".bin",
    ".safetensors",
    ".gguf",
    ".npy",
    ".npz",
    ".onnx",
    ".keras",
    ".h5",
    ".hdf5",
];

/// A single-file model kind a collection takes as a member.
#[derive(Clone, Copy, PartialEq)]
enum FileKind {
    Safetensors,
    Torch,
    Gguf,
    Numpy,
    Onnx,
    Keras,
}

impl FileKind {
    fn of(name: &str, file: &dyn modelfs_io::source::ReadAt) -> Option<FileKind> {
        if name.ends_with(".safetensors") {
            return Some(FileKind::Safetensors);
        }
        if name.ends_with(".npy") || name.ends_with(".npz") {
            return Some(FileKind::Numpy);
        }
        if name.ends_with(".onnx") {
            return Some(FileKind::Onnx);
        }
        if modelfs_torch::is_torch_reader(file) {
            return Some(FileKind::Torch);
        }
        if modelfs_keras::is_keras_reader(file) {
            return Some(FileKind::Keras);
        }
        let magic = file.read_vec(0, 4.min(file.size()) as usize);
        magic.is_ok_and(|m| m == b"GGUF").then_some(FileKind::Gguf)
    }

    fn open(self, file: &Path, opts: &ReaderOptions) -> Result<Arc<dyn Model>, OpenError> {
        let one = [file.to_path_buf()];
        match self {
            FileKind::Safetensors => modelfs_safetensors::open(&one, opts),
            FileKind::Torch => modelfs_torch::open(&one, opts),
            FileKind::Gguf => modelfs_gguf::open(file, opts),
            FileKind::Numpy => modelfs_numpy::open(file, opts),
            FileKind::Onnx => modelfs_onnx::open(file, opts),
            FileKind::Keras => modelfs_keras::open(&one, opts),
        }
    }
}

/// The collection at `path`, or `None` when it holds no model, or is one model its reader
/// takes whole: an index of shards, `model.safetensors` or `pytorch_model.bin`, files all
/// named as shards, one safetensors file alone. Sub-directories are looked into `depth`
/// levels down.
pub(super) fn open(
    path: &Path,
    opts: &ReaderOptions,
    depth: usize,
) -> Result<Option<Arc<dyn Model>>, OpenError> {
    let fs = &opts.storage;
    if !fs.is_dir(path) {
        return Ok(None);
    }
    let Ok(entries) = fs.list(path) else {
        return Ok(None);
    };
    let one_model = entries.iter().any(|(n, _)| {
        n.to_str().is_some_and(|n| {
            n.ends_with(".index.json") || n == "model.safetensors" || n == "pytorch_model.bin"
        })
    });
    if one_model {
        return whole_and_others(path, opts, &entries, None);
    }
    let mut files = Vec::new();
    let mut dirs = Vec::new();
    let mut skipped = Vec::new();
    // The newest torch.save or safetensors file: a run's `latest`.
    let mut newest: Option<(std::time::SystemTime, Vec<u8>)> = None;
    for (name, kind) in entries.into_iter().take(MAX_ENTRIES) {
        let sub = path.join(&name);
        let Some(text) = name.to_str() else { continue };
        if kind == EntryKind::Dir {
            if depth > 0 {
                if let Some(m) = directory_member(&sub, opts, depth - 1)? {
                    dirs.push((text.as_bytes().to_vec(), m));
                }
            }
            continue;
        }
        if kind != EntryKind::File || text.ends_with(".json") {
            continue;
        }
        // Opened once: its kind and its mtime.
        let Ok(opened) = fs.open(&sub) else { continue };
        let Some(what) = FileKind::of(text, &*opened) else {
            if MODEL_SUFFIXES.iter().any(|s| text.ends_with(s)) {
                let why = super::damaged(&sub, opts)
                    .unwrap_or_else(|| "no reader recognises its content".into());
                skipped.push(format!("{text}: skipped: {why}"));
            }
            continue;
        };
        let stamp = fs
            .stamp(&sub)
            .map_err(|e| OpenError::unreadable(&sub, e))?
            .unwrap_or_default();
        if matches!(what, FileKind::Torch | FileKind::Safetensors) {
            let mtime = opened.mtime();
            if newest.as_ref().is_none_or(|(t, _)| mtime > *t) {
                newest = Some((mtime, text.as_bytes().to_vec()));
            }
        }
        let (o, f) = (opts.clone(), sub.clone());
        let open = Box::new(move || what.open(&f, &o));
        let member = opts.members.get_or_make(&sub, stamp, open);
        files.push((text.as_bytes().to_vec(), member, what));
    }
    // The files the safetensors and torch readers take as one model: GGUF and numpy files
    // beside them are models of their own.
    let theirs: Vec<_> = files
        .iter()
        .filter(|(.., k)| matches!(k, FileKind::Safetensors | FileKind::Torch))
        .collect();
    let shards = !theirs.is_empty()
        && theirs
            .iter()
            .all(|(n, ..)| n.windows(4).any(|w| w == b"-of-"));
    // One safetensors file is a model of its own (`safetensors::files_of`); one torch.save
    // file of a run is its first member, as the second will be.
    let lone_safetensors = matches!(theirs.as_slice(), [(_, _, FileKind::Safetensors)]);
    if dirs.is_empty() && (shards || lone_safetensors) {
        // Torch shards without an index are no model its reader finds in the directory:
        // the files are given.
        let torch: Vec<_> = theirs
            .iter()
            .map(|(n, ..)| path.join(String::from_utf8_lossy(n).as_ref()))
            .collect();
        let all_torch = theirs.iter().all(|(.., k)| *k == FileKind::Torch);
        let given = all_torch.then_some(torch);
        return whole_and_others(path, opts, &fs.list(path).unwrap_or_default(), given);
    }
    if files.is_empty() && dirs.is_empty() {
        return match skipped.as_slice() {
            [] => Ok(None),
            // Only files that look like models and are none: what is wrong with them is the
            // answer (an empty model would pass every check).
            _ => Err(OpenError::Unsupported {
                path: path.to_path_buf(),
                what: format!("no model read: {}", skipped.join("; ")),
            }),
        };
    }
    let latest = newest.map(|(_, n)| n);
    let members = files
        .into_iter()
        .map(|(n, m, _)| (n, m))
        .chain(dirs)
        .collect();
    Ok(Some(Arc::new(MultiModel::collection(
        members, latest, skipped,
    ))))
}

/// A directory its safetensors or torch reader takes as one model (an index of shards,
/// `model.safetensors`, shards by name): that model alone (`None`: the readers after this one
/// open it), or, when GGUF or numpy files lie beside it, a collection of it (named by its
/// index or file) and them — a GGUF beside a sharded checkpoint is not dropped without a word.
fn whole_and_others(
    path: &Path,
    opts: &ReaderOptions,
    entries: &[(std::ffi::OsString, EntryKind)],
    torch_files: Option<Vec<std::path::PathBuf>>,
) -> Result<Option<Arc<dyn Model>>, OpenError> {
    let fs = &opts.storage;
    let mut others = Vec::new();
    let mut names: Vec<&str> = Vec::new();
    for (name, kind) in entries.iter().take(MAX_ENTRIES) {
        let Some(text) = name.to_str() else { continue };
        if *kind != EntryKind::File {
            continue;
        }
        names.push(text);
        if ![".gguf", ".npy", ".npz"].iter().any(|s| text.ends_with(s)) {
            continue;
        }
        let sub = path.join(text);
        let Ok(opened) = fs.open(&sub) else { continue };
        let Some(what @ (FileKind::Gguf | FileKind::Numpy)) = FileKind::of(text, &*opened) else {
            continue;
        };
        let stamp = fs
            .stamp(&sub)
            .map_err(|e| OpenError::unreadable(&sub, e))?
            .unwrap_or_default();
        let (o, f) = (opts.clone(), sub.clone());
        let open = Box::new(move || what.open(&f, &o));
        others.push((
            text.as_bytes().to_vec(),
            opts.members.get_or_make(&sub, stamp, open),
        ));
    }
    if others.is_empty() {
        return Ok(None);
    }
    let name = whole_name(&names);
    let stamp = super::fingerprint::fingerprint(&**fs, path)
        .map(|f| format!("{f:016x}"))
        .unwrap_or_default();
    let (o, dir) = (opts.clone(), path.to_path_buf());
    let open = Box::new(move || {
        if let Some(files) = &torch_files {
            return modelfs_torch::open(files, &o);
        }
        if let Some(m) = modelfs_safetensors::open_path(&dir, &o)? {
            return Ok(m);
        }
        modelfs_torch::open_path(&dir, &o)?.ok_or_else(|| OpenError::NotRecognised {
            path: dir.clone(),
            looked_for: "safetensors or torch.save files".into(),
        })
    });
    let whole = opts.members.get_or_make(&path.join(&name), stamp, open);
    let mut members = vec![(name.into_bytes(), whole)];
    members.extend(others);
    Ok(Some(Arc::new(MultiModel::collection(
        members,
        None,
        Vec::new(),
    ))))
}

/// The name of the one model among `names` (a directory's files): its index's name without
/// `.index.json` (`model.safetensors`), its single file's, or its shards' without the
/// `-00001-of-00002` part.
fn whole_name(names: &[&str]) -> String {
    if let Some(index) = names.iter().find_map(|n| n.strip_suffix(".index.json")) {
        return index.to_string();
    }
    for single in ["model.safetensors", "pytorch_model.bin"] {
        if names.contains(&single) {
            return single.to_string();
        }
    }
    let shard = names
        .iter()
        .filter(|n| n.contains("-of-"))
        .min()
        .or(names.iter().find(|n| n.ends_with(".safetensors")));
    let Some(shard) = shard else {
        return "model".into();
    };
    match shard.rfind("-of-").and_then(|of| shard[..of].rfind('-')) {
        Some(dash) => {
            let tail = shard[dash..]
                .find('.')
                .map_or("", |dot| &shard[dash + dot..]);
            format!("{}{tail}", &shard[..dash])
        }
        None => shard.to_string(),
    }
}

/// The sub-directory `dir` as a member when it holds a model (`depth`: how much deeper
/// directories of models are looked into). A sub-directory whose files are unchanged since a
/// look before (a mount following its source) is that member again, not opened anew.
fn directory_member(
    dir: &Path,
    opts: &ReaderOptions,
    depth: usize,
) -> Result<Option<Arc<Member>>, OpenError> {
    let stamp = super::fingerprint::fingerprint(&*opts.storage, dir)
        .map(|f| format!("{f:016x}"))
        .unwrap_or_default();
    if !stamp.is_empty() {
        if let Some(m) = opts.members.get(dir, &stamp) {
            return Ok(Some(m));
        }
    }
    let model = match super::open_at(dir, opts, depth, false) {
        Ok(m) => m,
        // Not a model (`logs/`, `assets/`): not a member.
        Err(OpenError::NotRecognised { .. } | OpenError::Missing { .. }) => return Ok(None),
        Err(e) if modelfs_io::source::is_transient(&e) => return Err(e),
        // A model that cannot be read: a member that says why.
        Err(e) => {
            let (at, why) = (dir.to_path_buf(), e.to_string());
            let open = Box::new(move || Err(OpenError::unreadable(&at, why.clone())));
            return Ok(Some(opts.members.get_or_make(dir, stamp, open)));
        }
    };
    let open = Box::new(move || Ok(Arc::clone(&model)));
    Ok(Some(opts.members.get_or_make(dir, stamp, open)))
}
