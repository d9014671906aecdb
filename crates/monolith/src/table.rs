//! One Monolith hash table — its dump shards — as a keyed float32 tensor `[entries, dim]`: row
//! `i` is the `i`-th entry in shard order, found by id (`slot << 48 | fid`) through a key index.
//!
//! Opening a table makes one pass over its shards (every record's CRCs, every entry parsed):
//! the entry count and width are in the data only. The pass keeps the offset of every
//! `STRIDE`-th record, so a row is reached by walking at most `STRIDE - 1` records; that
//! summary persists in the store (keyed by the shards' identities), so a remount does no pass.
//! The key index (`store::KeyIndex`) is built on the first lookup by id.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::json;

use super::entry::{parse_entry, EntryError};
use super::record::{frame, Framed, RecordError, FRAMING};
use super::summary::{Summary, STRIDE};
use crate::model::rows::key_index;
use crate::model::{
    debug_check, DType, KeyKind, Keyed, ModelError, ModelResult, RequestError, RowHit, Tensor,
    TensorMeta, MAX_ROW_BYTES,
};
use crate::source::{identity_string, ReadAt, ReadCtx, ReadExt};
use crate::store::{IndexPlace, KeyIndex, KeyIndexBuilder, KeyIndexError, Pending, Store};

/// What is wrong with a table's shards, and where.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TableError {
    #[error("{shard}: {source}")]
    Record {
        shard: String,
        #[source]
        source: RecordError,
    },
    #[error("{shard}: record at {at}: {source}")]
    Entry {
        shard: String,
        at: u64,
        #[source]
        source: EntryError,
    },
    #[error("{shard}: record at {at}: {got} values where the table's entries have {dim}")]
    Width {
        shard: String,
        at: u64,
        got: u64,
        dim: u64,
    },
    #[error("{shard}: fewer entries than the table was found to hold")]
    Short { shard: String },
}

impl TableError {
    pub(crate) fn is_transient(&self) -> bool {
        matches!(self, TableError::Record { source, .. } if source.is_transient())
    }
}

pub(crate) struct Shard {
    pub(crate) name: String,
    pub(crate) file: Arc<dyn ReadAt>,
}

pub(crate) struct MonolithTable {
    meta: TensorMeta,
    shards: Vec<Shard>,
    /// Global offset where each shard starts.
    bases: Vec<u64>,
    strides: Vec<u64>,
    identity: Option<String>,
    index_dir: Option<PathBuf>,
    index: Mutex<Option<Arc<KeyIndex>>>,
}

/// A record-by-record walk over the shards from a global offset, through a window of the
/// shard (one read per `WINDOW` bytes, not two per record).
struct Cursor<'a> {
    table: &'a MonolithTable,
    /// How the shards' bytes are read (the reader's read-ahead).
    ctx: &'a ReadCtx,
    shard: usize,
    at: u64,
    /// Bytes of the shard from `window_at`: a copy, checked unchanged when read (a view of
    /// a mapping would be read after its check).
    window: bytes::Bytes,
    window_at: u64,
    /// The next window's length, doubled by each refill up to `WINDOW`: a lookup's cursor
    /// starts at `LOOKUP_WINDOW` (it walks at most a stride of entries, and a window is a
    /// copy), a pass's at `WINDOW`.
    window_len: u64,
    /// Bytes of the shard before this were handed back (`ReadAt::done_with`): a pass over a
    /// table of many GB keeps only what it is reading mapped.
    released: u64,
}

/// Bytes walked between two hand-backs, and read at once.
const RELEASE: u64 = 8 << 20;
const WINDOW: u64 = 1 << 20;
/// A lookup cursor's first window.
const LOOKUP_WINDOW: u64 = 64 << 10;

impl Drop for Cursor<'_> {
    /// What a cursor walked is handed back when it is done: a scan of the whole table in
    /// pieces (`diff --rows`, `check`) keeps only the pieces being read mapped.
    fn drop(&mut self) {
        self.release(true);
    }
}

impl<'a> Cursor<'a> {
    fn release(&mut self, all: bool) {
        if let Some(s) = self.table.shards.get(self.shard) {
            if self.at > self.released && (all || self.at - self.released >= RELEASE) {
                s.file.done_with(self.released, self.at - self.released);
                self.released = self.at;
            }
        }
    }

    fn record_error(&self, source: RecordError) -> TableError {
        TableError::Record {
            shard: self.table.shards[self.shard].name.clone(),
            source,
        }
    }

    /// The next entry (its id, its values appended to `nums`, where it was); `None` at the end
    /// of the last shard.
    fn next(&mut self, nums: &mut Vec<u8>) -> Result<Option<(i64, usize, u64)>, TableError> {
        let table: &'a MonolithTable = self.table;
        while let Some(s) = table.shards.get(self.shard) {
            let size = s.file.size();
            if self.at >= size {
                self.release(true);
                self.shard += 1;
                self.at = 0;
                self.released = 0;
                self.window = bytes::Bytes::new();
                self.window_at = 0;
                continue;
            }
            let left = size - self.at;
            let (data, len) = loop {
                let off = self.at - self.window_at;
                let buf = usize::try_from(off)
                    .ok()
                    .and_then(|o| self.window.get(o..))
                    .unwrap_or_default();
                match frame(buf, self.at, left).map_err(|e| self.record_error(e))? {
                    Framed::Whole { data, len } => {
                        let o = off as usize;
                        break (o + data.start..o + data.end, len);
                    }
                    Framed::Need(n) => {
                        // `n` ≤ `left` (checked by `frame`), so the read is in the file.
                        let want = n.max(self.window_len).min(left) as usize;
                        self.window_len = (self.window_len * 2).min(WINDOW);
                        // Copied (`read_into` never lends): the bytes are checked unchanged
                        // when read, whatever the context (a push's lends).
                        let (file, ctx, at) = (&s.file, self.ctx, self.at);
                        let fill = |out: &mut [u8]| file.read_into(ctx, at, out).map(|()| want);
                        self.window = crate::source::scratch::filled(want, fill)
                            .map_err(|e| self.record_error(e.into()))?;
                        self.window_at = self.at;
                    }
                }
            };
            let at = self.at;
            let id = parse_entry(&self.window[data], nums).map_err(|source| TableError::Entry {
                shard: s.name.clone(),
                at,
                source,
            })?;
            self.at += len;
            self.release(false);
            return Ok(Some((id, self.shard, at)));
        }
        Ok(None)
    }
}

impl MonolithTable {
    /// The table `name` of `shards` (in shard order), summarised from `store` or by a pass
    /// that builds its key index too.
    pub(crate) fn open(
        name: &str,
        shards: Vec<Shard>,
        store: Option<&Arc<dyn Store>>,
        index_dir: Option<PathBuf>,
    ) -> Result<MonolithTable, TableError> {
        Self::open_with(name, shards, store, index_dir, true)
    }

    /// One shard of table `name` read alone (an engine's task: its rows in stored order),
    /// summarised by a pass over it only; no key index is built by the pass (a lookup by id
    /// builds one).
    pub(crate) fn open_part(
        name: &str,
        shard: Shard,
        store: Option<&Arc<dyn Store>>,
    ) -> Result<MonolithTable, TableError> {
        Self::open_with(name, vec![shard], store, None, false)
    }

    fn open_with(
        name: &str,
        shards: Vec<Shard>,
        store: Option<&Arc<dyn Store>>,
        index_dir: Option<PathBuf>,
        key_index: bool,
    ) -> Result<MonolithTable, TableError> {
        let mut bases = Vec::with_capacity(shards.len());
        let mut end = 0u64;
        for s in &shards {
            bases.push(end);
            end = end.saturating_add(s.file.size());
        }
        let identity = shards
            .iter()
            .map(|s| identity_string(&*s.file))
            .collect::<Option<Vec<_>>>()
            .map(|ids| format!("monolith:{name}:{}", ids.join(",")));
        let mut table = MonolithTable {
            meta: TensorMeta {
                mtime: shards
                    .iter()
                    .map(|s| s.file.mtime())
                    .max()
                    .unwrap_or(std::time::UNIX_EPOCH),
                role: crate::model::Role::IdRows,
                ..TensorMeta::new(
                    format!("hash_tables/{name}").into_bytes(),
                    DType::F32,
                    vec![0, 0],
                    "monolith",
                )
            },
            shards,
            bases,
            strides: Vec::new(),
            identity,
            index_dir,
            index: Mutex::new(None),
        };
        let kept = match (store, &table.identity) {
            (Some(st), Some(id)) => st.get::<Summary>(id),
            _ => None,
        };
        let summary = match kept {
            Some(s) => s,
            None => {
                // The key index is built in the same pass (it is what the table is for); an
                // index that cannot be made now is made on the first lookup.
                let mut keys = key_index
                    .then(|| {
                        table
                            .builder()
                            .map_err(|e| log::warn!("key index: {e}"))
                            .ok()
                    })
                    .flatten();
                let s = table.pass(keys.as_mut().map(|(b, _)| b))?;
                if let (Some(st), Some(id)) = (store, &table.identity) {
                    st.put(id, &s);
                }
                if let Some((b, pending)) = keys {
                    match b.finish() {
                        Ok(ix) => {
                            pending.keep();
                            *table.index.get_mut().unwrap_or_else(|e| e.into_inner()) =
                                Some(Arc::new(ix));
                        }
                        Err(e) => log::warn!("key index: {e}"),
                    }
                }
                s
            }
        };
        table.meta.shape = vec![summary.entries, summary.dim];
        let slots: serde_json::Map<String, serde_json::Value> = summary
            .slots
            .iter()
            .map(|(s, n)| (s.to_string(), json!(n)))
            .collect();
        let shard_names: Vec<&str> = table.shards.iter().map(|s| s.name.as_str()).collect();
        table.meta.extra.insert(
            "monolith".into(),
            json!({
                "table": name,
                "shards": shard_names,
                "entries": summary.entries,
                "dim": summary.dim,
                "slots": slots,
                "id": "slot << 48 | fid",
            }),
        );
        table.strides = summary.strides;
        Ok(table)
    }

    /// One pass over every record: counts, width, kept offsets; each id pushed to `keys`.
    fn pass(&self, mut keys: Option<&mut KeyIndexBuilder>) -> Result<Summary, TableError> {
        let mut s = Summary {
            entries: 0,
            dim: 0,
            strides: Vec::new(),
            slots: BTreeMap::new(),
        };
        let mut cur = self.cursor_at(ReadCtx::none(), 0, WINDOW);
        let mut nums = Vec::new();
        loop {
            nums.clear();
            let Some((id, shard, at)) = cur.next(&mut nums)? else {
                break;
            };
            let got = nums.len() as u64 / 4;
            if s.entries == 0 {
                s.dim = got;
            } else if got != s.dim {
                return Err(TableError::Width {
                    shard: self.shards[shard].name.clone(),
                    at,
                    got,
                    dim: s.dim,
                });
            }
            if s.entries % STRIDE == 0 {
                s.strides.push(self.bases[shard] + at);
            }
            *s.slots.entry((id as u64) >> 48).or_default() += 1;
            s.entries += 1;
            if let Some(b) = keys.as_deref_mut() {
                if let Err(e) = b.push(id) {
                    log::warn!("{}: key index: {e}", self.shards[shard].name);
                    keys = None;
                }
            }
        }
        Ok(s)
    }

    /// A builder for the key index of the pass, sized for the most entries the shards can
    /// hold (a record is at least its framing and an id).
    fn builder(&self) -> Result<(KeyIndexBuilder, Pending), KeyIndexError> {
        let bytes: u64 = self.shards.iter().map(|s| s.file.size()).sum();
        self.place().builder((bytes / (FRAMING + 9)).max(1))
    }

    /// Where the key index persists (`cache_dir`, by the shards' identity), if anywhere.
    fn place(&self) -> IndexPlace {
        IndexPlace::new(self.index_dir.as_deref(), self.identity.as_deref())
    }

    fn cursor_at<'a>(&'a self, ctx: &'a ReadCtx, global: u64, window: u64) -> Cursor<'a> {
        let shard = self
            .bases
            .partition_point(|&b| b <= global)
            .saturating_sub(1);
        let at = global - self.bases.get(shard).copied().unwrap_or(0);
        Cursor {
            table: self,
            ctx,
            shard,
            at,
            window: bytes::Bytes::new(),
            window_at: at,
            window_len: window,
            released: at,
        }
    }

    /// A cursor at entry `i` (walked from the kept offset before it), its first window
    /// `window` bytes.
    fn cursor_at_entry<'a>(
        &'a self,
        ctx: &'a ReadCtx,
        i: u64,
        window: u64,
    ) -> Result<Cursor<'a>, TableError> {
        let k = (i / STRIDE) as usize;
        let start = *self.strides.get(k).ok_or_else(|| self.short())?;
        let mut cur = self.cursor_at(ctx, start, window);
        let mut skip = Vec::new();
        for _ in 0..i % STRIDE {
            skip.clear();
            cur.next(&mut skip)?.ok_or_else(|| self.short())?;
        }
        Ok(cur)
    }

    fn short(&self) -> TableError {
        TableError::Short {
            shard: self
                .shards
                .last()
                .map(|s| s.name.clone())
                .unwrap_or_default(),
        }
    }

    fn entries(&self) -> u64 {
        self.meta.shape[0]
    }

    fn dim(&self) -> u64 {
        self.meta.shape[1]
    }

    fn fail(&self, e: TableError) -> ModelError {
        log::warn!("{}: {e}", String::from_utf8_lossy(&self.meta.name));
        ModelError::data(String::from_utf8_lossy(&self.meta.name), e)
    }

    /// Entries `first..` in order: `f(id, values)` for each until `count` were given.
    fn each_entry(
        &self,
        ctx: &ReadCtx,
        first: u64,
        count: u64,
        mut f: impl FnMut(i64, &[u8]),
    ) -> Result<(), TableError> {
        if count == 0 {
            return Ok(());
        }
        let window = if count == 1 { LOOKUP_WINDOW } else { WINDOW };
        let mut cur = self.cursor_at_entry(ctx, first, window)?;
        let mut nums = Vec::new();
        for _ in 0..count {
            nums.clear();
            let (id, _, _) = cur.next(&mut nums)?.ok_or_else(|| self.short())?;
            if nums.len() as u64 != self.dim() * 4 {
                return Err(self.short());
            }
            f(id, &nums);
        }
        Ok(())
    }

    fn index(&self) -> Result<Arc<KeyIndex>, ModelError> {
        // Keys are asked for in order: one cursor walks the shards once.
        let mut cur: Option<(u64, Cursor<'_>)> = None;
        let mut nums = Vec::new();
        let mut read = |first: u64, out: &mut [i64]| -> Result<(), crate::store::KeysError> {
            let c = match &mut cur {
                Some((next, c)) if *next == first => c,
                _ => {
                    &mut cur
                        .insert((first, self.cursor_at_entry(ReadCtx::none(), first, WINDOW)?))
                        .1
                }
            };
            for o in out.iter_mut() {
                nums.clear();
                *o = c.next(&mut nums)?.ok_or_else(|| self.short())?.0;
            }
            if let Some((next, _)) = &mut cur {
                *next = first + out.len() as u64;
            }
            Ok(())
        };
        key_index(
            &self.index,
            &self.meta.name,
            self.entries(),
            &self.place(),
            &mut read,
        )
    }
}

impl Tensor for MonolithTable {
    fn meta(&self) -> &TensorMeta {
        &self.meta
    }

    fn fill_elements(&self, ctx: &ReadCtx, first: u64, out: &mut [u8]) -> Result<(), ModelError> {
        debug_check(&self.meta, first, out.len());
        let dim = self.dim();
        let count = (out.len() / 4) as u64;
        if count == 0 || dim == 0 {
            return Ok(());
        }
        let (row, skip) = (first / dim, (first % dim) as usize * 4);
        let rows = (first + count).div_ceil(dim) - row;
        let mut at = 0usize;
        self.each_entry(ctx, row, rows, |_, v| {
            let v = if at == 0 { &v[skip..] } else { v };
            let n = v.len().min(out.len() - at);
            out[at..at + n].copy_from_slice(&v[..n]);
            at += n;
        })
        .map_err(|e| self.fail(e))
    }

    fn cache_identity(&self) -> Option<String> {
        self.identity.clone()
    }

    crate::model::capabilities!(as_keyed: Keyed);
}

impl Keyed for MonolithTable {
    fn key_kind(&self) -> Option<KeyKind> {
        Some(KeyKind::HashKey)
    }

    fn row_keys(&self, ctx: &ReadCtx, first: u64, out: &mut [i64]) -> Option<ModelResult> {
        let mut at = 0;
        let walked = self.each_entry(ctx, first, out.len() as u64, |id, _| {
            out[at] = id;
            at += 1;
        });
        Some(walked.map_err(|e| self.fail(e)))
    }

    fn read_rows(
        &self,
        ctx: &ReadCtx,
        first: u64,
        ids: &mut [i64],
        values: &mut [u8],
    ) -> Option<Result<(), ModelError>> {
        // One walk for both: an entry holds its id and its values.
        let row = self.dim() as usize * 4;
        if values.len() != ids.len() * row {
            return Some(Err(RequestError::PartialElement {
                len: values.len(),
                elem: row.max(1),
            }
            .into()));
        }
        let mut at = 0;
        let walked = self.each_entry(ctx, first, ids.len() as u64, |id, v| {
            ids[at] = id;
            values[at * row..(at + 1) * row].copy_from_slice(v);
            at += 1;
        });
        Some(walked.map_err(|e| self.fail(e)))
    }

    fn row_by_id(&self, id: i64, out: &mut Vec<u8>) -> Result<Option<RowHit>, ModelError> {
        let mut slots = Vec::new();
        self.index()?
            .find(id, &mut slots)
            .map_err(|e| ModelError::data(String::from_utf8_lossy(&self.meta.name), e))?;
        let dim = self.dim();
        if dim * 4 > MAX_ROW_BYTES {
            return Err(RequestError::RowTooWide {
                width: dim,
                max: MAX_ROW_BYTES,
            }
            .into());
        }
        // The index only points: the entry's own id decides.
        let mut found: Option<(u64, Vec<u8>)> = None;
        for s in slots.into_iter().filter(|&s| s < self.entries()) {
            let mut hit = None;
            self.each_entry(ReadCtx::none(), s, 1, |eid, v| {
                hit = (eid == id).then(|| v.to_vec())
            })
            .map_err(|e| self.fail(e))?;
            if let Some(v) = hit {
                if found.is_some() {
                    let e = format!("id {id} saved twice");
                    log::warn!("{}: {e}", String::from_utf8_lossy(&self.meta.name));
                    return Err(ModelError::data(
                        String::from_utf8_lossy(&self.meta.name),
                        e,
                    ));
                }
                found = Some((s, v));
            }
        }
        let Some((slot, v)) = found else {
            return Ok(None);
        };
        out.extend_from_slice(&v);
        Ok(Some(RowHit {
            width: dim,
            partition: None,
            position: slot,
        }))
    }
}
