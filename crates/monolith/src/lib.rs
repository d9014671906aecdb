//! ByteDance Monolith hash-table dumps (formats/monolith.md): shards
//! `<table>-NNNNN-of-NNNNN` of TFRecord-framed `EntryDump`s, in a checkpoint's `.assets/` or a
//! SavedModel's (or a PS export's) `assets/`. Each table is shown as the keyed tensor
//! `hash_tables/<table>`, beside the model's own tensors (`WithTables`).
//!
//! Compressed TFRecords (GZIP/ZLIB) are refused: their records do not frame (a CRC fails).
//!
//! This is the crate `modelfs-monolith`, one of modelfs's readers: it knows only `modelfs-io`
//! and `modelfs-model`. `tables_in` finds a directory's tables by their shards' names, without
//! reading them.
//!
//! ```
//! let assets = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/monolith/ps_export/assets"));
//! let tables = modelfs_monolith::tables_in(&*modelfs_io::source::local(), assets);
//! assert_eq!(tables.len(), 3);
//! assert_eq!(tables["MonolithHashTable_0a1b_0"].len(), 4, "its four shards");
//! ```
#![deny(clippy::undocumented_unsafe_blocks)]

// The layers below, under the names every module of modelfs uses (`crate::source::ReadAt`).
pub(crate) use modelfs_io::{codec, source, store};
pub(crate) use modelfs_model as model;
#[cfg(test)]
pub(crate) use modelfs_model::testing;

mod entry;
mod record;
mod summary;
mod table;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::model::{
    own_component, DirEntry, Document, Keyed, Model, ModelError, ModelSummary, ReaderOptions,
    Tensor,
};
use crate::source::{Memo, ReadCtx, Storage};
use table::{MonolithTable, Shard};

#[cfg(any(test, feature = "testkit"))]
pub use entry::write_entry;
#[cfg(any(test, feature = "testkit"))]
pub use record::write_record;

/// The directory the tables are shown in.
pub const HASH_TABLES: &[u8] = b"hash_tables";

/// `<table>-NNNNN-of-NNNNN` → (table, index, count).
fn shard_name(name: &str) -> Option<(&str, u32, u32)> {
    let (rest, count) = name.rsplit_once("-of-")?;
    let (table, index) = rest.rsplit_once('-')?;
    let digits = |s: &str| s.len() == 5 && s.bytes().all(|b| b.is_ascii_digit());
    if table.is_empty() || !digits(index) || !digits(count) {
        return None;
    }
    let (index, count) = (index.parse().ok()?, count.parse().ok()?);
    (index < count).then_some((table, index, count))
}

/// The tables whose shards are in `dir`: name → shard paths in shard order.
pub fn tables_in(fs: &dyn Storage, dir: &Path) -> BTreeMap<String, Vec<PathBuf>> {
    let mut out: BTreeMap<String, Vec<(u32, PathBuf)>> = BTreeMap::new();
    for (name, _) in fs.list(dir).unwrap_or_default() {
        let Some(n) = name.to_str() else { continue };
        if let Some((table, index, _)) = shard_name(n) {
            out.entry(table.to_string())
                .or_default()
                .push((index, dir.join(n)));
        }
    }
    out.into_iter()
        .map(|(t, mut v)| {
            v.sort();
            (t, v.into_iter().map(|(_, p)| p).collect())
        })
        .collect()
}

/// Why `shards` (one table's, in order) are not a whole table: a shard missing (an export
/// still being copied, or one lost) or two counts. Half a table is never shown as the table.
fn incomplete(shards: &[PathBuf]) -> Option<String> {
    let named: Vec<(u32, u32)> = shards
        .iter()
        .filter_map(|p| shard_name(p.file_name()?.to_str()?))
        .map(|(_, i, n)| (i, n))
        .collect();
    let count = named.first().map_or(0, |&(_, n)| n);
    if named.iter().any(|&(_, n)| n != count) {
        return Some("its shards give different counts (-of-N)".into());
    }
    let missing: Vec<String> = (0..count)
        .filter(|i| !named.iter().any(|&(j, _)| j == *i))
        .take(4)
        .map(|i| format!("{i:05}"))
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "{} of its {count} shards are here; missing shard {}{}",
            named.len(),
            missing.join(", "),
            if named.len() as u64 + (missing.len() as u64) < u64::from(count) {
                ", …"
            } else {
                ""
            }
        )
    })
}

/// Where the tables of the model at `path` would be: a SavedModel's or PS export's `assets/`,
/// a checkpoint prefix's `<prefix>.assets/`.
pub fn asset_dirs(path: &Path) -> Vec<PathBuf> {
    let mut dirs = vec![path.join("assets")];
    let mut s = path.as_os_str().to_os_string();
    s.push(".assets");
    dirs.push(PathBuf::from(s));
    dirs
}

type Slot = Memo<Result<Arc<MonolithTable>, String>>;

/// A model (or none: a PS export whose variables are missing) with Monolith tables added
/// under `hash_tables/`.
pub struct WithTables {
    inner: Option<Arc<dyn Model>>,
    tables: BTreeMap<String, (Vec<PathBuf>, Slot)>,
    opts: ReaderOptions,
}

impl WithTables {
    /// `inner` with the tables found in `dirs`; `None` when there are none.
    pub fn find(
        inner: Option<Arc<dyn Model>>,
        dirs: &[PathBuf],
        opts: &ReaderOptions,
    ) -> Option<WithTables> {
        let mut tables = BTreeMap::new();
        for d in dirs {
            for (name, shards) in tables_in(&*opts.storage, d) {
                tables.entry(name).or_insert((shards, Slot::default()));
            }
        }
        (!tables.is_empty()).then(|| WithTables {
            inner,
            tables,
            opts: opts.clone(),
        })
    }

    fn table(&self, name: &[u8]) -> Result<Arc<dyn Tensor>, ModelError> {
        let key = String::from_utf8_lossy(name);
        let (paths, slot) = self
            .tables
            .get(key.as_ref())
            .ok_or_else(|| ModelError::NotFound(format!("no hash table {key}")))?;
        let got = slot.get_or_try(|| {
            let opened = (|| {
                if let Some(why) = incomplete(paths) {
                    return Err((false, why));
                }
                let shards = paths
                    .iter()
                    .map(|p| {
                        let file = self.opts.storage.open(p)?;
                        let name = p.file_name().map(|n| n.to_string_lossy().into_owned());
                        Ok(Shard {
                            name: name.unwrap_or_default(),
                            file,
                        })
                    })
                    .collect::<Result<Vec<_>, crate::source::SourceError>>()
                    .map_err(|e| (e.is_transient(), e.to_string()))?;
                let indexes = self.opts.indexes.as_ref();
                MonolithTable::open(&key, shards, indexes, self.opts.key_index_dir.clone())
                    .map_err(|e| (e.is_transient(), e.to_string()))
            })();
            match opened {
                Ok(t) => Ok(Ok(Arc::new(t))),
                Err((transient, e)) => {
                    log::warn!("hash table {key}: {e}");
                    match transient {
                        true => Err(e),
                        false => Ok(Err(e)),
                    }
                }
            }
        });
        match got {
            Ok(Ok(t)) => Ok(t.clone() as Arc<dyn Tensor>),
            // Still shown (its files give EIO and the reason), not dropped from the listing.
            Ok(Err(e)) => Ok(Arc::new(Unreadable::new(&key, e.clone()))),
            Err(e) => Err(ModelError::data(format!("hash table {key}"), e)),
        }
    }

    /// Shard `i` of table `name` opened alone (`Model::table_part`).
    fn part(&self, name: &[u8], i: usize) -> Result<Arc<dyn Tensor>, ModelError> {
        let key = String::from_utf8_lossy(name);
        let (paths, _) = self
            .tables
            .get(key.as_ref())
            .ok_or_else(|| ModelError::NotFound(format!("no hash table {key}")))?;
        // A table missing a shard is not read in parts either: its parts are not all of it.
        if let Some(why) = incomplete(paths) {
            return Err(ModelError::data(format!("hash table {key}"), why));
        }
        let path = paths
            .get(i)
            .ok_or_else(|| ModelError::NotFound(format!("shard {i} of hash table {key}")))?;
        let shard = Shard {
            name: path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            file: self.opts.storage.open(path)?,
        };
        let t = MonolithTable::open_part(&key, shard, self.opts.indexes.as_ref())
            .map_err(|e| ModelError::data(format!("hash table {key}"), e.to_string()))?;
        Ok(Arc::new(t))
    }

    fn is_tables_dir(c: &[u8]) -> bool {
        c == own_component(HASH_TABLES)
    }
}

/// A table whose shards are damaged: listed, its `.json` says why, every read fails.
struct Unreadable {
    meta: crate::model::TensorMeta,
}

impl Unreadable {
    fn new(name: &str, problem: String) -> Unreadable {
        Unreadable {
            meta: crate::model::TensorMeta {
                problem: Some(problem),
                mtime: std::time::UNIX_EPOCH,
                role: crate::model::Role::IdRows,
                ..crate::model::TensorMeta::new(
                    format!("hash_tables/{name}").into_bytes(),
                    crate::model::DType::F32,
                    vec![1, 1],
                    "monolith",
                )
            },
        }
    }

    fn fail(&self) -> ModelError {
        let why = self.meta.problem.clone().unwrap_or_default();
        ModelError::data(String::from_utf8_lossy(&self.meta.name), why)
    }
}

impl Tensor for Unreadable {
    fn meta(&self) -> &crate::model::TensorMeta {
        &self.meta
    }
    fn fill_elements(&self, _: &ReadCtx, _: u64, _: &mut [u8]) -> Result<(), ModelError> {
        Err(self.fail())
    }

    crate::model::capabilities!(as_keyed: Keyed);
}

impl Keyed for Unreadable {
    fn key_kind(&self) -> Option<crate::model::KeyKind> {
        Some(crate::model::KeyKind::HashKey)
    }

    fn row_by_id(
        &self,
        _id: i64,
        _out: &mut Vec<u8>,
    ) -> Result<Option<crate::model::RowHit>, ModelError> {
        Err(self.fail())
    }
}

impl Model for WithTables {
    fn list_dir(&self, dir: &[Vec<u8>]) -> Result<Vec<DirEntry>, ModelError> {
        match dir {
            [] => {
                let mut out = match &self.inner {
                    Some(m) => m.list_dir(dir)?,
                    None => Vec::new(),
                };
                out.push(DirEntry::Reserved(HASH_TABLES.to_vec()));
                Ok(out)
            }
            [t] if Self::is_tables_dir(t) => Ok(self
                .tables
                .keys()
                .map(|n| DirEntry::Tensor(n.as_bytes().to_vec()))
                .collect()),
            _ => match &self.inner {
                Some(m) => m.list_dir(dir),
                None => Err(ModelError::NotFound("no such directory".into())),
            },
        }
    }

    fn tensor(&self, path: &[Vec<u8>]) -> Result<Arc<dyn Tensor>, ModelError> {
        match path {
            [t, name] if Self::is_tables_dir(t) => self.table(name),
            _ => match &self.inner {
                Some(m) => m.tensor(path),
                None => Err(ModelError::NotFound("no such tensor".into())),
            },
        }
    }

    fn document(&self, path: &[Vec<u8>]) -> Result<Arc<dyn Document>, ModelError> {
        match &self.inner {
            Some(m) => m.document(path),
            None => Err(ModelError::NotFound("no such document".into())),
        }
    }

    fn table_parts(&self, path: &[Vec<u8>]) -> Option<usize> {
        match path {
            [t, name] if Self::is_tables_dir(t) => {
                let (paths, _) = self.tables.get(String::from_utf8_lossy(name).as_ref())?;
                Some(paths.len())
            }
            _ => self.inner.as_ref()?.table_parts(path),
        }
    }

    fn table_part(&self, path: &[Vec<u8>], i: usize) -> Result<Arc<dyn Tensor>, ModelError> {
        match path {
            [t, name] if Self::is_tables_dir(t) => self.part(name, i),
            _ => match &self.inner {
                Some(m) => m.table_part(path, i),
                None => Err(ModelError::NotFound("no such table".into())),
            },
        }
    }

    fn summary(&self) -> Result<ModelSummary, ModelError> {
        let mut s = match &self.inner {
            Some(m) => m.summary()?,
            None => ModelSummary::default(),
        };
        s.tensors += self.tables.len() as u64;
        Ok(s)
    }

    fn hidden_tensors(&self, root: &[Vec<u8>]) -> Vec<Arc<dyn Tensor>> {
        self.inner
            .as_ref()
            .map(|m| m.hidden_tensors(root))
            .unwrap_or_default()
    }

    fn model_roots(&self) -> Vec<Vec<Vec<u8>>> {
        match &self.inner {
            Some(m) => m.model_roots(),
            None => vec![Vec::new()],
        }
    }
}

#[cfg(test)]
mod tests;

/// The fuzz target's entry (`fuzz/fuzz_targets/monolith.rs`): `data` as one shard of a table,
/// opened (one pass: framing, CRCs, entries), read densely and by id the way a mount does.
/// Any `Err` is fine; a panic, a hang or a huge allocation is a bug.
#[cfg(any(test, feature = "testkit"))]
pub fn fuzz_shard(data: &[u8]) {
    let shard = Shard {
        name: "t-00000-of-00001".into(),
        file: Arc::new(crate::source::MemSource::new(
            "t-00000-of-00001",
            data.to_vec(),
        )),
    };
    let Ok(t) = MonolithTable::open("t", vec![shard], None, None) else {
        return;
    };
    crate::model::testing::fuzz_touch(&t);
    if t.meta().shape[0] <= 4096 {
        for id in [0, 1, -1, i64::MAX] {
            let _ = t.row_by_id(id, &mut Vec::new());
        }
    }
}
