//! `TfModel`: one checkpoint (a bundle) as a `model::Model`.
//!
//! Listing a directory is a range scan of the keys under its prefix that jumps over every
//! sub-directory (seek to `prefix ‖ component ‖ '0'`, `'0'` being `'/' + 1`), so it reads only
//! the blocks holding the directory's direct children and the first key of each
//! sub-directory. Hidden keys: the header `""`, `_CHECKPOINTABLE_OBJECT_GRAPH`, and slice
//! keys referenced by a full entry (§7.3).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::Path;
use std::sync::Arc;

use crate::bundle::entry::parse_entry;
use crate::bundle::{
    tensor_for_key, tensor_from_value, Bundle, BundleError, DirShards, ShardOpener,
};
use crate::codec::table::{BlockCache, Table, TableError};
use crate::hashtable;
use crate::keys::{self, KeyStyle, GRAPH_KEY};
use crate::model::{DirEntry, Model, ModelError, ModelSummary, ReaderOptions, Tensor, WithMeta};
use crate::object_graph::{self, ObjectNames};
use crate::ordered_code::{slice_key, slice_key_name};
use crate::source::{Memo, ReadCtx};

pub struct TfModel {
    bundle: Arc<Bundle>,
    style: KeyStyle,
    /// TF2 names from the object graph, read on first use (`None`: no graph, or unreadable).
    names: Memo<Option<Arc<ObjectNames>>>,
    /// Where hash tables' key indexes persist (`cache_dir`).
    key_index_dir: Option<std::path::PathBuf>,
}

/// The directory of links by TF1-style full name (SPEC §6).
const BY_NAME: &[u8] = b"by-name";

/// The block cache the checkpoints of one mount share.
pub fn block_cache_for(opts: &ReaderOptions) -> Arc<BlockCache> {
    Arc::new(BlockCache::new(opts.block_cache_bytes))
}

impl TfModel {
    /// Opens checkpoint `prefix` (`prefix.index` + data files beside it).
    pub fn open(
        prefix: &Path,
        opts: &ReaderOptions,
        cache: Arc<BlockCache>,
    ) -> Result<TfModel, BundleError> {
        let file = opts
            .storage
            .open(&super::prefix::index_path(prefix))
            .map_err(TableError::from)?;
        let table = Table::open(file, cache)?;
        let (dir, name) = super::prefix::split_prefix(prefix);
        let name = String::from_utf8_lossy(&name).into_owned();
        let shards = DirShards {
            storage: opts.storage.clone(),
            dir,
        };
        let mut model = Self::from_table(table, name, Box::new(shards), opts.verify)?;
        // The data shards are opened with the index, not on first read: a checkpoint
        // replaced later (a live directory) keeps serving this index's own shards, never
        // the new ones under the old index. A shard missing now fails its reads, as before.
        for i in 0..model.bundle.num_shards {
            let _ = model.bundle.shard(i);
        }
        model.key_index_dir = opts.key_index_dir.clone();
        if let (true, Some(store)) = (opts.verify, &opts.verdicts) {
            model.bundle.set_verdict_store(store.clone());
        }
        Ok(model)
    }

    /// A model over an opened table; reads the header (and probes for the object graph).
    pub fn from_table(
        table: Table,
        prefix_name: String,
        shards: Box<dyn ShardOpener>,
        verify: bool,
    ) -> Result<TfModel, BundleError> {
        let bundle = Arc::new(Bundle::open(table, prefix_name, shards, verify)?);
        let style = if bundle.table.get(GRAPH_KEY)?.is_some() {
            KeyStyle::Object
        } else {
            KeyStyle::Plain
        };
        Ok(TfModel {
            bundle,
            style,
            names: Memo::default(),
            key_index_dir: None,
        })
    }

    /// The object graph's names, read and parsed once.
    fn names(&self) -> Option<&ObjectNames> {
        if self.style != KeyStyle::Object {
            return None;
        }
        let got = self.names.get_or_try(|| {
            // Err: a transient fault, tried again on the next look.
            let read = || -> Result<ObjectNames, Box<dyn std::error::Error + Send + Sync>> {
                let t = tensor_for_key(&self.bundle, GRAPH_KEY)?.ok_or("no object graph")?;
                let mut bytes = Vec::new();
                t.for_each_string(ReadCtx::none(), 0, 1, &mut |b| bytes.extend_from_slice(b))?;
                Ok(object_graph::parse(&bytes).map_err(|e| e.to_string())?)
            };
            let prefix = &self.bundle.prefix_name;
            match read() {
                Ok(n) => Ok(Some(Arc::new(n))),
                Err(e) if crate::source::is_transient(&*e) => {
                    log::warn!("{prefix}: object graph not read now, no TF2 names yet: {e}");
                    Err(())
                }
                Err(e) => {
                    log::warn!("{prefix}: object graph unreadable, no TF2 names: {e}");
                    Ok(None)
                }
            }
        });
        got.ok()?.as_deref()
    }

    /// `by-name/…` entries: sub-directories and aliases of the tensors named there.
    fn list_by_name(&self, dir: &[Vec<u8>]) -> Result<Vec<DirEntry>, ModelError> {
        let names = self
            .names()
            .ok_or_else(|| ModelError::NotFound("by-name".into()))?;
        let within = &dir[1..];
        let mut out = BTreeSet::new();
        for (path, key) in names.links.range(within.to_vec()..) {
            if !path.starts_with(within) {
                break;
            }
            match path.len() - within.len() {
                0 => {}
                1 => {
                    let mut target = vec![b"..".to_vec(); dir.len()];
                    target.extend(keys::display_path(self.style, key));
                    out.insert(DirEntry::Alias {
                        name: path[within.len()].clone(),
                        target,
                    });
                }
                _ => {
                    out.insert(DirEntry::Dir(path[within.len()].clone()));
                }
            }
        }
        if out.is_empty() && !within.is_empty() {
            return Err(ModelError::NotFound("no such by-name directory".into()));
        }
        Ok(out.into_iter().collect())
    }

    /// `tensor` with the object graph's names in its `.json`.
    fn named(&self, key: &[u8], t: Arc<dyn Tensor>) -> Arc<dyn Tensor> {
        let Some(n) = self.names().and_then(|n| n.by_key.get(key)) else {
            return t;
        };
        let mut meta = t.meta().clone();
        let path: Vec<String> = keys::display_path(self.style, key)
            .iter()
            .map(|c| String::from_utf8_lossy(c).into_owned())
            .collect();
        meta.extra
            .insert("full_name".into(), serde_json::json!(n.full_name));
        meta.extra
            .insert("object_path".into(), serde_json::json!(path.join("/")));
        if let Some((var, slot)) = &n.slot {
            meta.extra.insert(
                "slot".into(),
                serde_json::json!({"variable": var, "name": slot}),
            );
        }
        Arc::new(WithMeta { inner: t, meta })
    }

    /// The tensor saved under a key whose display path is `path`.
    fn plain_tensor(&self, path: &[Vec<u8>]) -> Result<Option<Arc<dyn Tensor>>, ModelError> {
        let mut hidden = HiddenKeys::default();
        for key in keys::key_candidates(self.style, path) {
            if hidden.is_hidden(&self.bundle, &key)? {
                continue;
            }
            if let Some(t) = tensor_for_key(&self.bundle, &key)? {
                return Ok(Some(self.named(&key, t)));
            }
        }
        Ok(None)
    }

    /// The paths of the keys and values tensors of a hash table shown at `path` (`hashtable`):
    /// `<name>-keys` beside it, or TF2's `<object>/.ATTRIBUTES/table-keys` under it.
    fn table_pair_paths(&self, path: &[Vec<u8>]) -> Vec<[Vec<Vec<u8>>; 2]> {
        let Some((last, dir)) = path.split_last() else {
            return Vec::new();
        };
        let beside = |suffix: &[u8]| {
            let mut p = dir.to_vec();
            p.push([&last[..], suffix].concat());
            p
        };
        let mut out = vec![[
            beside(hashtable::KEYS_SUFFIX),
            beside(hashtable::VALUES_SUFFIX),
        ]];
        if self.style == KeyStyle::Object {
            let under = |suffix: &[u8]| {
                let mut p = path.to_vec();
                p.push(hashtable::TF2_TABLE[0].to_vec());
                p.push([hashtable::TF2_TABLE[1], suffix].concat());
                p
            };
            out.push([
                under(hashtable::KEYS_SUFFIX),
                under(hashtable::VALUES_SUFFIX),
            ]);
        }
        out
    }

    /// The hash table shown at `path`, when its keys and values tensors are there and pair up;
    /// or the TF Recommenders-Addons shards `<name>_mht_<i>of<n>` beside it, all of them.
    fn hash_table(&self, path: &[Vec<u8>]) -> Result<Option<Arc<dyn Tensor>>, ModelError> {
        let name = path.join(&b'/');
        let dir = self.key_index_dir.clone();
        for (i, [k, v]) in self.table_pair_paths(path).into_iter().enumerate() {
            let (Some(keys), Some(values)) = (self.plain_tensor(&k)?, self.plain_tensor(&v)?)
            else {
                continue;
            };
            if let Some(t) = hashtable::HashTable::pair(name.clone(), keys, values, dir.clone()) {
                // Beside its keys, a DeepRec EmbeddingVariable's other tensors.
                let t = match i {
                    0 => t.with_ev(vec![self.ev_part(path)?]),
                    _ => t,
                };
                return Ok(Some(Arc::new(t)));
            }
        }
        if let Some(t) = self.partitioned_ev(path)? {
            return Ok(Some(t));
        }
        let Some((last, parent)) = path.split_last() else {
            return Ok(None);
        };
        // The shard count, from any shard's keys beside it.
        let mut hidden = HiddenKeys::default();
        let mut beside = BTreeSet::new();
        for prefix in keys::dir_prefixes(self.style, parent) {
            self.scan(&prefix, &mut hidden, &mut beside)?;
        }
        let count = beside.iter().find_map(|e| match e {
            DirEntry::Tensor(n) => n
                .strip_suffix(hashtable::KEYS_SUFFIX)
                .and_then(hashtable::tfra_shard)
                .filter(|(base, _, _)| base == last)
                .map(|(_, _, n)| n),
            _ => None,
        });
        let Some(count) = count else {
            return Ok(None);
        };
        let mut parts = Vec::new();
        for i in 1..=count {
            let stem = [&last[..], format!("_mht_{i}of{count}").as_bytes()].concat();
            let at = |suffix: &[u8]| {
                let mut p = parent.to_vec();
                p.push([&stem[..], suffix].concat());
                p
            };
            let k = self.plain_tensor(&at(hashtable::KEYS_SUFFIX))?;
            let v = self.plain_tensor(&at(hashtable::VALUES_SUFFIX))?;
            match (k, v) {
                (Some(k), Some(v)) => parts.push((k, v)),
                _ => return Ok(None),
            }
        }
        Ok(
            hashtable::HashTable::of_parts(name, parts, dir)
                .map(|t| Arc::new(t) as Arc<dyn Tensor>),
        )
    }

    /// What DeepRec saved beside the table at `path` (`<path>-freqs`, …).
    fn ev_part(&self, path: &[Vec<u8>]) -> Result<hashtable::EvPart, ModelError> {
        let Some((last, dir)) = path.split_last() else {
            return Ok(hashtable::EvPart::default());
        };
        let beside = |suffix: &[u8]| {
            let mut p = dir.to_vec();
            p.push([&last[..], suffix].concat());
            p
        };
        let mut part = hashtable::EvPart::default();
        for (suffix, _) in hashtable::EV_COLUMNS {
            part.columns.push(self.plain_tensor(&beside(suffix))?);
        }
        part.filtered = self
            .plain_tensor(&beside(hashtable::EV_FILTERED))?
            .and_then(|t| match t.meta().shape[..] {
                [n] => Some(n),
                _ => None,
            });
        Ok(part)
    }

    /// A partitioned DeepRec EV shown whole at `path`: its parts `part_<i>` (from 0, all
    /// there) inserted at one level of `path` — `emb` of `emb/part_<i>`, its slot
    /// `emb/Adagrad` of `emb/part_<i>/Adagrad`.
    fn partitioned_ev(&self, path: &[Vec<u8>]) -> Result<Option<Arc<dyn Tensor>>, ModelError> {
        if path.iter().any(|c| hashtable::ev_part_index(c).is_some()) {
            return Ok(None);
        }
        let at = |j: usize, i: u32| -> Vec<Vec<u8>> {
            let mut p = path[..j].to_vec();
            p.push(format!("{}{i}", hashtable::EV_PART).into_bytes());
            p.extend_from_slice(&path[j..]);
            p
        };
        let keys_of = |p: &[Vec<u8>]| {
            let (last, dir) = p.split_last().expect("a part path has components");
            let mut k = dir.to_vec();
            k.push([&last[..], hashtable::KEYS_SUFFIX].concat());
            k
        };
        for j in (1..=path.len()).rev() {
            if self.plain_tensor(&keys_of(&at(j, 0)))?.is_none() {
                continue;
            }
            let mut parts = Vec::new();
            let mut ev = Vec::new();
            for i in 0..MAX_EV_PARTS {
                let p = at(j, i);
                let [k, v] = [hashtable::KEYS_SUFFIX, hashtable::VALUES_SUFFIX].map(|suffix| {
                    let (last, dir) = p.split_last().expect("a part path has components");
                    let mut t = dir.to_vec();
                    t.push([&last[..], suffix].concat());
                    t
                });
                match (self.plain_tensor(&k)?, self.plain_tensor(&v)?) {
                    (Some(k), Some(v)) => parts.push((k, v)),
                    _ => break,
                }
                ev.push(self.ev_part(&p)?);
            }
            let name = path.join(&b'/');
            let dir = self.key_index_dir.clone();
            return Ok(hashtable::HashTable::of_parts(name, parts, dir)
                .map(|t| Arc::new(t.with_ev(ev)) as Arc<dyn Tensor>));
        }
        Ok(None)
    }

    /// Keyed tables found by name only (`Model::unlisted_tables`): from every listed
    /// `<name>-keys`, its table, a TF2 object's, a TFRA variable's or a partitioned EV's.
    fn find_unlisted_tables(
        &self,
        dir: &mut Vec<Vec<u8>>,
        out: &mut BTreeSet<Vec<Vec<u8>>>,
    ) -> Result<(), ModelError> {
        for e in self.list_dir(dir)? {
            match e {
                DirEntry::Dir(d) if !(dir.is_empty() && is_by_name(&d)) => {
                    dir.push(d);
                    self.find_unlisted_tables(dir, out)?;
                    dir.pop();
                }
                DirEntry::Tensor(n) => {
                    let Some(stem) = n.strip_suffix(hashtable::KEYS_SUFFIX) else {
                        continue;
                    };
                    let stem = match hashtable::tfra_shard(stem) {
                        Some((base, _, _)) => base,
                        None => stem,
                    };
                    let mut path = dir.clone();
                    if stem == hashtable::TF2_TABLE[1]
                        && dir.last().map(|c| &c[..]) == Some(hashtable::TF2_TABLE[0])
                    {
                        path.pop();
                    } else {
                        path.push(stem.to_vec());
                    }
                    // A part of a partitioned EV stands for the whole.
                    if let Some(j) = path
                        .iter()
                        .position(|c| hashtable::ev_part_index(c).is_some())
                    {
                        path.remove(j);
                    }
                    if out.contains(&path) || path.is_empty() {
                        continue;
                    }
                    let keyed = self
                        .tensor(&path)
                        .is_ok_and(|t| t.key_kind() == Some(crate::model::KeyKind::HashKey));
                    if keyed {
                        out.insert(path);
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    pub fn bundle(&self) -> &Arc<Bundle> {
        &self.bundle
    }

    #[cfg(test)]
    pub(crate) fn style(&self) -> KeyStyle {
        self.style
    }

    /// Scans the keys under `prefix` into `out`.
    fn scan(
        &self,
        prefix: &[u8],
        hidden: &mut HiddenKeys,
        out: &mut BTreeSet<DirEntry>,
    ) -> Result<(), ModelError> {
        let style = self.style;
        let mut it = self.bundle.table.iter();
        it.seek(prefix)?;
        while it.valid() && it.key().starts_with(prefix) {
            if hidden.is_hidden(&self.bundle, it.key())? {
                it.next()?;
                continue;
            }
            let key = it.key();
            let stripped = keys::strip_variable(style, key);
            // A variable whose display path is this directory itself.
            if !stripped.starts_with(prefix) {
                it.next()?;
                continue;
            }
            let rest = &stripped[prefix.len()..];
            match rest.iter().position(|&b| b == b'/') {
                None => {
                    out.insert(DirEntry::Tensor(keys::display_component(style, rest)));
                    it.next()?;
                }
                Some(i) => {
                    let seg = rest[..i].to_vec();
                    let name = keys::display_component(style, &seg);
                    let mut sub = prefix.to_vec();
                    sub.extend_from_slice(&seg);
                    if style == KeyStyle::Object {
                        // The variable `seg` itself lies inside the range skipped below.
                        let mut var = sub.clone();
                        var.extend_from_slice(keys::VARIABLE_SUFFIX);
                        if self.bundle.table.get(&var)?.is_some() {
                            out.insert(DirEntry::Tensor(name.clone()));
                        }
                    }
                    out.insert(DirEntry::Dir(name));
                    sub.push(b'/' + 1);
                    it.seek(&sub)?;
                }
            }
        }
        Ok(())
    }
}

/// Decides which keys are hidden, remembering the slice keys of the last full entry seen
/// (slice keys of one tensor are adjacent).
#[derive(Default)]
struct HiddenKeys {
    name: Option<Vec<u8>>,
    slice_keys: HashSet<Vec<u8>>,
}

impl HiddenKeys {
    fn is_hidden(&mut self, bundle: &Bundle, key: &[u8]) -> Result<bool, ModelError> {
        if key.is_empty() || key == GRAPH_KEY {
            return Ok(true);
        }
        if key[0] != 0 {
            return Ok(false);
        }
        let Some(name) = slice_key_name(key) else {
            return Ok(false);
        };
        if self.name.as_deref() != Some(&name[..]) {
            self.slice_keys.clear();
            if let Some(value) = bundle.table.get(&name)? {
                let entry = parse_entry(&value, bundle.num_shards);
                self.slice_keys = entry.slices.iter().map(|s| slice_key(&name, s)).collect();
            }
            self.name = Some(name);
        }
        Ok(self.slice_keys.contains(key))
    }
}

fn is_by_name(c: &[u8]) -> bool {
    c.split_first() == Some((&0, BY_NAME))
}

/// Parts of a partitioned EV looked for at most.
const MAX_EV_PARTS: u32 = 1 << 16;

impl Model for TfModel {
    fn list_dir(&self, dir: &[Vec<u8>]) -> Result<Vec<DirEntry>, ModelError> {
        if dir.first().is_some_and(|c| is_by_name(c)) {
            return self.list_by_name(dir);
        }
        let mut out = BTreeSet::new();
        if dir.is_empty() && self.names().is_some_and(|n| !n.links.is_empty()) {
            out.insert(DirEntry::Reserved(BY_NAME.to_vec()));
        }
        let mut hidden = HiddenKeys::default();
        for prefix in keys::dir_prefixes(self.style, dir) {
            self.scan(&prefix, &mut hidden, &mut out)?;
        }
        if out.is_empty() && !dir.is_empty() {
            return Err(ModelError::NotFound(format!(
                "no directory {}",
                dir.iter()
                    .map(|c| String::from_utf8_lossy(c))
                    .collect::<Vec<_>>()
                    .join("/")
            )));
        }
        Ok(out.into_iter().collect())
    }

    fn tensor(&self, path: &[Vec<u8>]) -> Result<Arc<dyn Tensor>, ModelError> {
        if let Some(t) = self.plain_tensor(path)? {
            return Ok(t);
        }
        if let Some(t) = self.hash_table(path)? {
            return Ok(t);
        }
        Err(ModelError::NotFound(format!(
            "no tensor {}",
            path.iter()
                .map(|c| String::from_utf8_lossy(c))
                .collect::<Vec<_>>()
                .join("/")
        )))
    }

    fn unlisted_tables(&self) -> Result<Vec<Vec<Vec<u8>>>, ModelError> {
        let mut out = BTreeSet::new();
        self.find_unlisted_tables(&mut Vec::new(), &mut out)?;
        Ok(out.into_iter().collect())
    }

    fn hidden_tensors(&self, root: &[Vec<u8>]) -> Vec<Arc<dyn Tensor>> {
        if !root.is_empty() || self.style != KeyStyle::Object {
            return Vec::new();
        }
        match tensor_for_key(&self.bundle, GRAPH_KEY) {
            Ok(Some(t)) => vec![t],
            Ok(None) => Vec::new(),
            Err(e) => {
                log::warn!("{}: object graph: {e}", self.bundle.prefix_name);
                Vec::new()
            }
        }
    }

    fn summary(&self) -> Result<ModelSummary, ModelError> {
        let mut s = ModelSummary {
            format: "tf-checkpoint".into(),
            ..Default::default()
        };
        let mut dtypes: BTreeMap<String, u64> = BTreeMap::new();
        let mut hidden = HiddenKeys::default();
        let mut it = self.bundle.table.iter();
        it.seek_to_first()?;
        while it.valid() {
            if !hidden.is_hidden(&self.bundle, it.key())? {
                let t = tensor_from_value(&self.bundle, it.key(), it.value());
                let meta = t.meta();
                s.tensors += 1;
                *dtypes.entry(meta.dtype.name().into_owned()).or_default() += 1;
                let bytes = if meta.partitions.is_empty() {
                    parse_entry(it.value(), self.bundle.num_shards)
                        .loc
                        .map_or(0, |l| l.size)
                } else {
                    meta.partitions.iter().map(|p| p.length).sum()
                };
                s.total_bytes = s.total_bytes.saturating_add(bytes);
                if let Some(p) = &meta.problem {
                    s.problems
                        .push(format!("{}: {p}", String::from_utf8_lossy(it.key())));
                }
            }
            if let Err(e) = it.next() {
                s.problems.push(e.to_string());
                break;
            }
        }
        s.dtypes = dtypes;
        Ok(s)
    }
}

#[cfg(test)]
#[path = "checkpoint_tests.rs"]
mod tests;
