//! Which TensorFlow form a path is (SPEC §1) and the model that reads it: a checkpoint prefix,
//! its `.index` or a `.data-…` file, a directory of one or several checkpoints (with its
//! `checkpoint` state file), a SavedModel directory, a graph file (`X.pb`, `X.meta`), or a V1
//! checkpoint (§12).

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::checkpoint::{block_cache_for, TfModel};
use super::checkpoint_state::{resolve_prefix, CheckpointState};
use super::graph::{sniff, GraphKind, GraphModel};
use super::v1::V1Model;
use super::whole::{self, ends_with_table_magic};
use crate::codec::table::{BlockCache, Table};
use crate::model::multi::MultiModel;
use crate::model::{Member, Model, OpenError, ReaderOptions};
use crate::source::{EntryKind, ReadExt, SourceError, Storage};

pub use super::prefix::{index_path, split_prefix, INDEX_SUFFIX};

/// The prefix of the checkpoint with an empty base name in `dir` (`dir/`).
fn unnamed_prefix(dir: &Path) -> PathBuf {
    let mut s = dir.as_os_str().to_owned();
    s.push("/");
    PathBuf::from(s)
}

/// `P.index` → `P`; `P.data-00000-of-00001` → `P`; `P.meta` (the graph beside a `Saver`
/// checkpoint) → `P`; anything else unchanged.
pub fn strip_checkpoint_suffix(path: &Path) -> PathBuf {
    let bytes = path.as_os_str().as_bytes();
    let prefix = bytes
        .strip_suffix(INDEX_SUFFIX)
        .or_else(|| bytes.strip_suffix(b".meta"))
        .or_else(|| strip_data_suffix(bytes));
    match prefix {
        Some(p) => PathBuf::from(OsString::from_vec(p.to_vec())),
        None => path.to_path_buf(),
    }
}

/// `P.data-NNNNN-of-MMMMM` → `P`.
fn strip_data_suffix(bytes: &[u8]) -> Option<&[u8]> {
    let pos = bytes.windows(6).rposition(|w| w == b".data-")?;
    let (a, b) = std::str::from_utf8(&bytes[pos + 6..])
        .ok()?
        .split_once("-of-")?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit());
    (digits(a) && digits(b)).then_some(&bytes[..pos])
}

/// The TF model at `path`, `Ok(None)` when `path` is no TensorFlow form (another reader may
/// know it).
pub fn open(path: &Path, opts: &ReaderOptions) -> Result<Option<Arc<dyn Model>>, OpenError> {
    let cache = block_cache_for(opts);
    let fs = &*opts.storage;
    // `…/saved_model.pb` names its SavedModel directory.
    let is_saved_model_file = path.file_name().is_some_and(|n| {
        SAVED_MODEL_FILES
            .iter()
            .any(|f| n.as_bytes() == f.as_bytes())
    });
    if let (true, Some(dir)) = (is_saved_model_file, path.parent()) {
        if fs.is_file(path) {
            return open_dir(dir, opts, cache);
        }
    }
    let prefix = strip_checkpoint_suffix(path);
    if fs.is_file(&index_path(&prefix)) {
        return open_prefix(&prefix, opts, cache).map(Some);
    }
    if fs.is_dir(path) {
        return open_dir(path, opts, cache);
    }
    if let Some(hint) = graph_file_kind(path) {
        if fs.is_file(path) {
            return open_graph(path, hint, None, opts).map(Some);
        }
    }
    if is_v1_checkpoint(fs, &prefix) || is_v1_checkpoint(fs, path) {
        return open_v1(path, opts, cache).map(Some);
    }
    // A graph file of any other name (`expected_graph`, `graph.txt`), by its content.
    if fs.is_file(path) {
        return graph_at(path, None, None, opts);
    }
    Ok(None)
}

/// `X-00000-of-00002` → `X`; anything else unchanged.
fn strip_shard_suffix(path: &Path) -> PathBuf {
    let b = path.as_os_str().as_bytes();
    // "-" 5 digits "-of-" 5 digits
    let is_shard = b.len() > 15 && {
        let t = &b[b.len() - 15..];
        t[0] == b'-'
            && t[6..10] == *b"-of-"
            && t[1..6].iter().chain(&t[10..]).all(u8::is_ascii_digit)
    };
    match is_shard {
        true => PathBuf::from(OsStr::from_bytes(&b[..b.len() - 15])),
        false => path.to_path_buf(),
    }
}

/// The V1 checkpoint at `path` (its prefix `P`, the file `P`, or a shard `P-0000i-of-0000N`),
/// with its graph when `P.meta` is beside it.
fn open_v1(
    path: &Path,
    opts: &ReaderOptions,
    cache: Arc<BlockCache>,
) -> Result<Arc<dyn Model>, OpenError> {
    let fs = &*opts.storage;
    let prefix = strip_shard_suffix(&strip_checkpoint_suffix(path));
    let mut files = Vec::new();
    if ends_with_table_magic(fs, &prefix) {
        files.push(prefix.clone());
    } else if let (Some(dir), Some(name)) = (prefix.parent(), prefix.file_name()) {
        let mut want = name.as_bytes().to_vec();
        want.push(b'-');
        for (n, _) in fs.list(dir).into_iter().flatten() {
            let p = dir.join(&n);
            if n.as_bytes().starts_with(&want) && strip_shard_suffix(&p) == prefix {
                files.push(p);
            }
        }
        files.sort();
    }
    if files.is_empty() {
        files.push(path.to_path_buf());
    }
    let mut shards = Vec::new();
    let mut mtime = std::time::SystemTime::UNIX_EPOCH;
    for f in &files {
        let file = fs.open(f).map_err(|e| OpenError::unreadable(f, e))?;
        mtime = mtime.max(file.mtime());
        let table =
            Table::open(file, Arc::clone(&cache)).map_err(|e| OpenError::unreadable(f, e))?;
        let name = f
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        shards.push((name, table));
    }
    let model: Arc<dyn Model> =
        Arc::new(V1Model::open(shards, mtime).map_err(|e| OpenError::unreadable(&prefix, e))?);
    let mut meta = prefix.as_os_str().to_owned();
    meta.push(".meta");
    let meta = PathBuf::from(meta);
    if fs.is_file(&meta) {
        return open_graph(&meta, Some(GraphKind::MetaGraphDef), Some(model), opts);
    }
    Ok(model)
}

/// A checkpoint, with the constants and signatures of its graph when `P.meta` is beside it.
fn open_prefix(
    prefix: &Path,
    opts: &ReaderOptions,
    cache: Arc<BlockCache>,
) -> Result<Arc<dyn Model>, OpenError> {
    let model = open_variables(prefix, opts, cache)?;
    let mut meta = prefix.as_os_str().to_owned();
    meta.push(".meta");
    let meta = PathBuf::from(meta);
    if opts.storage.is_file(&meta) {
        return open_graph(&meta, Some(GraphKind::MetaGraphDef), Some(model), opts);
    }
    Ok(model)
}

fn open_variables(
    prefix: &Path,
    opts: &ReaderOptions,
    cache: Arc<BlockCache>,
) -> Result<Arc<dyn Model>, OpenError> {
    TfModel::open(prefix, opts, cache)
        .map(|m| Arc::new(m) as Arc<dyn Model>)
        .map_err(|e| OpenError::unreadable(&index_path(prefix), e))
}

/// What a graph file's name says it holds (`.pbtxt`: a text graph of any kind).
fn graph_file_kind(path: &Path) -> Option<Option<GraphKind>> {
    match path.extension()?.as_bytes() {
        b"pb" => Some(Some(GraphKind::GraphDef)),
        b"meta" => Some(Some(GraphKind::MetaGraphDef)),
        b"pbtxt" => Some(None),
        _ => None,
    }
}

/// The graph file at `path` (opened now; scanned on first use) over `variables`: binary or
/// text, the message by `hint` (what the name says) and the file's first bytes.
fn open_graph(
    path: &Path,
    hint: Option<GraphKind>,
    variables: Option<Arc<dyn Model>>,
    opts: &ReaderOptions,
) -> Result<Arc<dyn Model>, OpenError> {
    match graph_at(path, hint, variables, opts)? {
        Some(model) => Ok(model),
        None => Err(OpenError::NotRecognised {
            path: path.to_path_buf(),
            looked_for: match hint {
                Some(kind) => format!("a {kind:?} protobuf, binary or text"),
                None => "a graph protobuf in text format".to_string(),
            },
        }),
    }
}

/// `open_graph`, `Ok(None)` when the file's first bytes are no graph.
fn graph_at(
    path: &Path,
    hint: Option<GraphKind>,
    variables: Option<Arc<dyn Model>>,
    opts: &ReaderOptions,
) -> Result<Option<Arc<dyn Model>>, OpenError> {
    let file = opts.open_file(path)?;
    let n = usize::try_from(file.size())
        .unwrap_or(usize::MAX)
        .min(sniff::HEAD);
    // A sniff of any file the user named: a metadata read (no read-ahead into its data).
    let head = file
        .read_vec(0, n)
        .map_err(|e| OpenError::unreadable(path, e))?;
    let Some((kind, text)) = sniff::sniff(&head, hint) else {
        return Ok(None);
    };
    drop(head);
    Ok(Some(Arc::new(GraphModel::new(file, kind, text, variables))))
}

/// A V1 checkpoint: a table file `P` (or `P-00000-of-0000N`) without `P.index` (§12).
fn is_v1_checkpoint(fs: &dyn Storage, p: &Path) -> bool {
    if !matches!(fs.kind(&index_path(p)), Ok(None)) {
        return false;
    }
    if ends_with_table_magic(fs, p) {
        return true;
    }
    let (Some(dir), Some(name)) = (p.parent(), p.file_name()) else {
        return false;
    };
    let dir = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    let Ok(entries) = fs.list(dir) else {
        return false;
    };
    let mut want = name.as_bytes().to_vec();
    want.push(b'-');
    entries.iter().any(|(n, _)| {
        let n = n.as_bytes();
        n.starts_with(&want)
            && n[want.len()..].windows(4).any(|w| w == b"-of-")
            && ends_with_table_magic(fs, &dir.join(OsStr::from_bytes(n)))
    })
}

/// A V1 table file in `dir` (`P-0000i-of-0000N` with table magic, no `P.index`).
fn dir_v1(fs: &dyn Storage, dir: &Path) -> Option<PathBuf> {
    let entries = fs.list(dir).ok()?;
    entries.iter().find_map(|(n, _)| {
        let n = n.as_bytes();
        let looks_like =
            n.windows(4).any(|w| w == b"-of-") && !n.windows(6).any(|w| w == b".data-");
        let p = dir.join(OsStr::from_bytes(n));
        (looks_like && is_v1_checkpoint(fs, &p)).then_some(p)
    })
}

fn open_dir(
    dir: &Path,
    opts: &ReaderOptions,
    cache: Arc<BlockCache>,
) -> Result<Option<Arc<dyn Model>>, OpenError> {
    let fs = &*opts.storage;
    if let Some(model) = open_saved_model(fs, dir, opts, Arc::clone(&cache))? {
        return Ok(Some(model));
    }
    let found = Checkpoints::find(fs, dir);
    // One checkpoint without a state file, or one with an empty base name (which has no name
    // to show it under): the model itself.
    let unnamed_alone = found.prefixes.len() == 1 && found.prefixes.contains_key(&b""[..]);
    if found.prefixes.len() == 1 && (!found.has_state || unnamed_alone) {
        let (_, prefix) = found.prefixes.into_iter().next().unwrap_or_default();
        return open_prefix(&prefix, opts, cache).map(Some);
    }
    if !found.prefixes.is_empty() {
        return open_several(found, opts, cache).map(Some);
    }
    if let Some(v1) = found.v1_named.clone().or_else(|| dir_v1(fs, dir)) {
        return open_v1(&v1, opts, cache).map(Some);
    }
    if let Some(model) = open_serving_base(fs, dir, opts, cache)? {
        return Ok(Some(model));
    }
    // A directory holding one frozen graph.
    let graphs: Vec<PathBuf> = fs
        .list(dir)
        .into_iter()
        .flatten()
        .filter(|(n, _)| {
            let n = n.as_bytes();
            n.ends_with(b".pb") || n.ends_with(b".pbtxt")
        })
        .map(|(n, _)| dir.join(n))
        .filter(|p| fs.is_file(p))
        .collect();
    match graphs.as_slice() {
        [one] => open_graph(one, graph_file_kind(one).flatten(), None, opts).map(Some),
        _ => Ok(None),
    }
}

/// A TF Serving base directory: numbered version sub-directories, each a SavedModel. Every
/// version is shown, and `latest` names the highest.
fn open_serving_base(
    fs: &dyn Storage,
    dir: &Path,
    opts: &ReaderOptions,
    cache: Arc<BlockCache>,
) -> Result<Option<Arc<dyn Model>>, OpenError> {
    let Ok(entries) = fs.list(dir) else {
        return Ok(None);
    };
    let mut versions: Vec<(u64, Vec<u8>)> = entries
        .iter()
        .filter_map(|(n, _)| {
            let v = std::str::from_utf8(n.as_bytes())
                .ok()?
                .parse::<u64>()
                .ok()?;
            let sub = dir.join(n);
            SAVED_MODEL_FILES
                .iter()
                .any(|f| fs.is_file(&sub.join(f)))
                .then(|| (v, n.as_bytes().to_vec()))
        })
        .collect();
    if versions.is_empty() {
        return Ok(None);
    }
    versions.sort();
    let mut members = Vec::new();
    for (_, name) in versions {
        let sub = dir.join(OsStr::from_bytes(&name));
        let known = |stamp: &str| opts.members.get(&sub, stamp).is_some();
        // A version being copied in place (not renamed in whole) waits until it is whole.
        let Some(stamp) = whole::version_stamp(fs, &sub, &SAVED_MODEL_FILES, &known) else {
            log::info!("{}: not whole yet, not shown", fs.display(&sub));
            continue;
        };
        let (o, c, p) = (opts.clone(), Arc::clone(&cache), sub.clone());
        let open = Box::new(move || {
            open_saved_model(&*o.storage, &p, &o, Arc::clone(&c))?.ok_or_else(|| {
                OpenError::NotRecognised {
                    path: p.clone(),
                    looked_for: "a SavedModel".into(),
                }
            })
        });
        members.push((name, opts.members.get_or_make(&sub, stamp, open)));
    }
    let latest = members.last().map(|(n, _)| n.clone());
    Ok(Some(Arc::new(MultiModel::new(members, latest))))
}

const SAVED_MODEL_FILES: [&str; 3] = ["saved_model.pb", "saved_model.pbtxt", "saved_model.cpb"];

/// A SavedModel directory: its variables, with the constants and signatures of its
/// `saved_model.pb` or `saved_model.pbtxt` (without variables, the graph alone).
fn open_saved_model(
    fs: &dyn Storage,
    dir: &Path,
    opts: &ReaderOptions,
    cache: Arc<BlockCache>,
) -> Result<Option<Arc<dyn Model>>, OpenError> {
    let variables = saved_model_variables(fs, dir);
    // Binary, else text (`builder.save(as_text=True)`).
    let pb = ["saved_model.pb", "saved_model.pbtxt"]
        .map(|f| dir.join(f))
        .into_iter()
        .find(|p| fs.is_file(p));
    let Some(pb) = pb else {
        return match variables? {
            Some(v) => open_variables(&v, opts, cache).map(Some),
            None => Ok(None),
        };
    };
    let variables = match variables {
        Ok(Some(v)) => Some(open_variables(&v, opts, cache)?),
        _ => None,
    };
    open_graph(&pb, Some(GraphKind::SavedModel), variables, opts).map(Some)
}

/// A SavedModel directory's variables prefix; an error for a SavedModel without variables.
fn saved_model_variables(fs: &dyn Storage, dir: &Path) -> Result<Option<PathBuf>, OpenError> {
    let is_saved_model = SAVED_MODEL_FILES.iter().any(|f| fs.is_file(&dir.join(f)));
    if !is_saved_model {
        return Ok(None);
    }
    let variables = dir.join("variables").join("variables");
    if fs.is_file(&index_path(&variables)) {
        return Ok(Some(variables));
    }
    Err(OpenError::NotRecognised {
        path: dir.to_path_buf(),
        looked_for: format!(
            "the variables of a SavedModel, {}",
            index_path(&variables).display()
        ),
    })
}

/// The checkpoints of a directory: every `*.index`, plus those its state file names.
#[derive(Default)]
struct Checkpoints {
    /// Base name → prefix.
    prefixes: BTreeMap<Vec<u8>, PathBuf>,
    has_state: bool,
    /// The base name the state file's `model_checkpoint_path` names.
    latest: Option<Vec<u8>>,
    /// The V1 checkpoint the state file names.
    v1_named: Option<PathBuf>,
}

impl Checkpoints {
    /// Storages that cannot list (HTTP) find the checkpoints their state file names.
    fn find(fs: &dyn Storage, dir: &Path) -> Checkpoints {
        let mut found = Checkpoints::default();
        for (name, kind) in fs.list(dir).into_iter().flatten() {
            if let Some(base) = name.as_bytes().strip_suffix(INDEX_SUFFIX) {
                if kind == EntryKind::File {
                    let prefix = match base {
                        [] => unnamed_prefix(dir),
                        _ => dir.join(OsStr::from_bytes(base)),
                    };
                    found.prefixes.insert(base.to_vec(), prefix);
                }
            }
        }
        let state_path = dir.join("checkpoint");
        if let Some(st) = fs
            .is_file(&state_path)
            .then(|| CheckpointState::read(fs, &state_path))
            .flatten()
        {
            found.has_state = true;
            found.add_listed(fs, dir, &state_path, &st);
        }
        found
    }

    fn add_listed(
        &mut self,
        fs: &dyn Storage,
        dir: &Path,
        state_path: &Path,
        st: &CheckpointState,
    ) {
        let has_index = |p: &Path| fs.is_file(&index_path(p));
        let base_name = |p: &Path| Some(split_prefix(p).1);
        let listed = st
            .all_model_checkpoint_paths
            .iter()
            .chain(st.model_checkpoint_path.iter());
        for p in listed {
            match resolve_prefix(dir, p, &has_index) {
                Some(resolved) => {
                    let base = base_name(&resolved).unwrap_or_default();
                    self.prefixes.entry(base).or_insert(resolved);
                }
                None => {
                    // Listed but gone (CheckpointManager deletes old ones), or V1.
                    if self.v1_named.is_none() {
                        self.v1_named = resolve_prefix(dir, p, &|q| is_v1_checkpoint(fs, q));
                    }
                    log::info!(
                        "{}: listed checkpoint {} not found",
                        state_path.display(),
                        String::from_utf8_lossy(p)
                    );
                }
            }
        }
        self.latest = st
            .model_checkpoint_path
            .as_ref()
            .and_then(|p| resolve_prefix(dir, p, &has_index))
            .and_then(|r| base_name(&r));
    }
}

/// One sub-directory per whole checkpoint (`whole`), each opened on first use; a checkpoint
/// whose files are unchanged since the last look is the same member.
fn open_several(
    found: Checkpoints,
    opts: &ReaderOptions,
    cache: Arc<BlockCache>,
) -> Result<Arc<dyn Model>, OpenError> {
    let fs = &*opts.storage;
    // Beside others, the checkpoint with an empty base name (`dir/.index`) is shown as `_`.
    let shown = |name: Vec<u8>| if name.is_empty() { b"_".to_vec() } else { name };
    // `None`: a storage that cannot list (HTTP).
    let mut listings: BTreeMap<PathBuf, Option<Vec<(OsString, EntryKind)>>> = BTreeMap::new();
    let mut members: Vec<(Vec<u8>, Arc<Member>)> = Vec::new();
    for (name, prefix) in found.prefixes {
        let (dir, base) = split_prefix(&prefix);
        if !listings.contains_key(&dir) {
            let entries = match fs.list(&dir) {
                Ok(e) => Some(e),
                Err(SourceError::NoListing { .. }) => None,
                // A fault now must not show the directory as empty.
                Err(e) => return Err(OpenError::unreadable(&dir, e)),
            };
            listings.insert(dir.clone(), entries);
        }
        let entries = listings.get(&dir).and_then(Option::as_deref);
        let known = |stamp: &str| opts.members.get(&prefix, stamp).is_some();
        let Some(stamp) = whole::checkpoint_stamp(fs, &dir, &base, entries, &known) else {
            log::info!("{}: not whole yet, not shown", fs.display(&prefix));
            continue;
        };
        let (o, c, p) = (opts.clone(), Arc::clone(&cache), prefix.clone());
        let open = Box::new(move || open_prefix(&p, &o, Arc::clone(&c)));
        members.push((shown(name), opts.members.get_or_make(&prefix, stamp, open)));
    }
    Ok(Arc::new(MultiModel::new(members, found.latest.map(shown))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strips_suffixes() {
        let s = |p: &str| {
            strip_checkpoint_suffix(Path::new(p))
                .to_string_lossy()
                .into_owned()
        };
        assert_eq!(s("d/model.ckpt-100.index"), "d/model.ckpt-100");
        assert_eq!(
            s("d/model.ckpt-100.data-00000-of-00001"),
            "d/model.ckpt-100"
        );
        assert_eq!(s("d/p.data-00007-of-123456"), "d/p");
        assert_eq!(s("d/p.data-x-of-1"), "d/p.data-x-of-1");
        assert_eq!(s("d/model.ckpt-100"), "d/model.ckpt-100");
    }
}
