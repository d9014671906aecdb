//! TF hash tables in checkpoints as keyed tensors. `MutableHashTable` and `DenseHashTable`
//! save two tensors, `<table>-keys` `[N]` (or `[N, 1]`) and `<table>-values` `[N, …]`, row `i`
//! of the values belonging to key `i` (TF1 names `<op>-keys`; TF2 `<object>/.ATTRIBUTES/
//! table-keys`; TF Recommenders-Addons `<var>_mht_<i>of<n>-keys`). The pair is one keyed
//! tensor, `<table>` (TF2: `<object>`), there by name but not listed (the listing stays what
//! TensorFlow lists: the two saved tensors): its dense form is the values in saved order, and
//! its rows are found by key through an index built on the first lookup (one pass over the
//! keys, kept on disk: `store::KeyIndex`).
//!
//! A `DenseHashTable` saves every bucket (keys `[N, 1]`, where TF's other tables save `[N]`),
//! the empty and deleted ones under its sentinel keys; a key saved more than once is therefore
//! a sentinel, never a row (real keys are unique). The keys themselves are in the table's
//! graph, not its checkpoint: a graph beside it names them (`with_sentinels`); without one,
//! TF's probing names them (`probe`: a key saved once where TF could not have inserted it is
//! the deleted key). Either way the first lookup checks every key against that probing: a key
//! TF's own lookup could not find is damage, and the table's lookups fail with it.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use bytes::Bytes;

use crate::model::rows::key_index;
use crate::model::{
    debug_check, Checksummed, DType, KeyKind, Keyed, ModelError, ModelResult, RequestError, RowHit,
    Tensor, TensorMeta,
};
use crate::probe::{self, Verdict};
use crate::source::ReadCtx;
use crate::store::{IndexPlace, KeyIndex};

pub(crate) const KEYS_SUFFIX: &[u8] = b"-keys";
pub(crate) const VALUES_SUFFIX: &[u8] = b"-values";
/// The TF2 object-graph attribute of a table (`<object>/.ATTRIBUTES/table-keys`).
pub(crate) const TF2_TABLE: &[&[u8]] = &[b".ATTRIBUTES", b"table"];

/// One saved table: its keys and values tensors.
pub(crate) type Part = (Arc<dyn Tensor>, Arc<dyn Tensor>);

/// A DeepRec EmbeddingVariable's per-row columns: the suffix of their tensors and the name a
/// row's `.json` gives each (`../shared/formats/deeprec-ev.md`).
pub(crate) const EV_COLUMNS: [(&[u8], &str); 2] = [(b"-freqs", "freq"), (b"-versions", "version")];
/// The ids a DeepRec feature filter kept out of the table.
pub(crate) const EV_FILTERED: &[u8] = b"-keys_filtered";
/// A DeepRec partitioned EV's parts: `<ev>/part_<i>`.
pub(crate) const EV_PART: &str = "part_";

/// What DeepRec saved beside one part's keys and values.
#[derive(Default)]
pub(crate) struct EvPart {
    /// Each of `EV_COLUMNS` when saved, one per row.
    pub(crate) columns: Vec<Option<Arc<dyn Tensor>>>,
    /// `-keys_filtered`'s length.
    pub(crate) filtered: Option<u64>,
}

/// `part_<i>` → i.
pub(crate) fn ev_part_index(component: &[u8]) -> Option<u32> {
    let s = std::str::from_utf8(component).ok()?.strip_prefix(EV_PART)?;
    let canonical = !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let i: u32 = s.parse().ok().filter(|_| canonical)?;
    (i.to_string() == s).then_some(i)
}

/// A TF Recommenders-Addons shard's table name, `<base>_mht_<i>of<n>` (1 ≤ i ≤ n): its base,
/// `i` and `n`.
pub(crate) fn tfra_shard(stem: &[u8]) -> Option<(&[u8], u32, u32)> {
    let s = std::str::from_utf8(stem).ok()?;
    let (base, tail) = s.rsplit_once("_mht_")?;
    let (i, n) = tail.split_once("of")?;
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    if base.is_empty() || !digits(i) || !digits(n) {
        return None;
    }
    let (i, n): (u32, u32) = (i.parse().ok()?, n.parse().ok()?);
    ((1..=n).contains(&i)).then_some((&stem[..base.len()], i, n))
}

pub struct HashTable {
    meta: TensorMeta,
    /// The saved tables shown as one (TFRA shards, in shard order; else one).
    parts: Vec<Part>,
    /// The slot of each part's first entry; then the total.
    starts: Vec<u64>,
    key_width: usize,
    /// Where the key index persists (`cache_dir`); `None`: an unnamed temporary file.
    index_dir: Option<PathBuf>,
    /// Built on the first lookup; a failure is not kept (the next lookup tries again).
    index: Mutex<Option<Arc<KeyIndex>>>,
    /// Per-row columns (DeepRec's freqs, versions): a name and one tensor per part.
    columns: Vec<(&'static str, Vec<Arc<dyn Tensor>>)>,
    /// Keys that mark no row, known from the table's graph (`Keyed::sentinels`).
    sentinels: Vec<i64>,
    /// A `DenseHashTable`'s bucket array, judged by TF's probing (`probe`).
    bucket_array: bool,
    /// The judgement, made on first need; a failed read is not kept.
    verdict: std::sync::OnceLock<Verdict>,
}

/// Integer keys: what a row id can name.
fn key_width(dtype: DType) -> Option<usize> {
    match dtype {
        DType::I64 => Some(8),
        DType::I32 => Some(4),
        _ => None,
    }
}

impl HashTable {
    /// The table of `keys` and `values` named `name`, when they pair up: integer keys, one per
    /// row of the values.
    pub fn pair(
        name: Vec<u8>,
        keys: Arc<dyn Tensor>,
        values: Arc<dyn Tensor>,
        index_dir: Option<PathBuf>,
    ) -> Option<HashTable> {
        Self::of_parts(name, vec![(keys, values)], index_dir)
    }

    /// The tables `parts` (each keys and values pairing up, all of one key dtype, value dtype
    /// and row shape) shown as one named `name`.
    pub(crate) fn of_parts(
        name: Vec<u8>,
        parts: Vec<Part>,
        index_dir: Option<PathBuf>,
    ) -> Option<HashTable> {
        let (k0, v0) = parts.first()?;
        let (km0, vm0) = (k0.meta(), v0.meta());
        let key_width = key_width(km0.dtype)?;
        if vm0.dtype.elem_size().is_none() || vm0.sparse || vm0.shape.is_empty() {
            return None;
        }
        let mut starts = vec![0u64];
        let mut problem = None;
        for (k, v) in &parts {
            let (km, vm) = (k.meta(), v.meta());
            let n = match km.shape[..] {
                [n] | [n, 1] => n,
                _ => return None,
            };
            let fits = km.dtype == km0.dtype
                && vm.dtype == vm0.dtype
                && !vm.sparse
                && vm.shape.first() == Some(&n)
                && vm.shape[1..] == vm0.shape[1..];
            if !fits {
                return None;
            }
            starts.push(starts.last()?.checked_add(n)?);
            problem = problem
                .or_else(|| km.problem.clone())
                .or_else(|| vm.problem.clone());
        }
        let entries = *starts.last()?;
        // TF's DenseHashTable exports its buckets as a matrix, one key per row (`[N, 1]`);
        // its other tables export their entries as a vector.
        let bucket_array = parts.len() == 1 && km0.shape.len() == 2;
        let mut meta = vm0.clone();
        meta.name = name;
        meta.shape[0] = entries;
        meta.partitions = Vec::new();
        meta.problem = problem;
        let names = |i: usize| -> Vec<String> {
            parts
                .iter()
                .map(|p| {
                    let t = if i == 0 { &p.0 } else { &p.1 };
                    String::from_utf8_lossy(&t.meta().name).into_owned()
                })
                .collect()
        };
        // What the `.json` can tell without reading: a bucket array's entries are its buckets
        // less its sentinels', counted only by a pass over its keys (`NAME.csr.ids.npy`).
        let (kind, count) = match bucket_array {
            true => ("DenseHashTable", "buckets"),
            false => ("MutableHashTable", "entries"),
        };
        meta.extra.insert(
            "hash_table".into(),
            serde_json::json!({
                "kind": kind,
                "keys": names(0),
                "values": names(1),
                "key_dtype": km0.dtype.name(),
                count: entries,
            }),
        );
        Some(HashTable {
            meta,
            parts,
            starts,
            key_width,
            index_dir,
            index: Mutex::new(None),
            columns: Vec::new(),
            sentinels: Vec::new(),
            bucket_array,
            verdict: Default::default(),
        })
    }

    /// The table as a DeepRec EmbeddingVariable: `ev[i]` is what was saved beside part `i`.
    /// A column is kept when every part has it, one integer per row; `.json` tells the EV's
    /// dim, entries, filtered entries and columns.
    pub(crate) fn with_ev(mut self, ev: Vec<EvPart>) -> HashTable {
        // Nothing DeepRec saves beside a lone table: a plain TF table, no EV.
        let bare = |e: &EvPart| e.filtered.is_none() && e.columns.iter().all(Option::is_none);
        if ev.len() != self.parts.len() || (ev.len() == 1 && ev.iter().all(bare)) {
            return self;
        }
        for (c, &(_, name)) in EV_COLUMNS.iter().enumerate() {
            let per_part: Option<Vec<Arc<dyn Tensor>>> = ev
                .iter()
                .zip(&self.parts)
                .map(|(e, (k, _))| {
                    let t = e.columns.get(c)?.clone()?;
                    let m = t.meta();
                    let fits = matches!(m.dtype, DType::I64 | DType::I32)
                        && m.problem.is_none()
                        && m.shape[..] == k.meta().shape[..1];
                    fits.then_some(t)
                })
                .collect();
            if let Some(t) = per_part {
                self.columns.push((name, t));
            }
        }
        let filtered: Option<u64> = ev.iter().map(|e| e.filtered).sum();
        let names: Vec<&str> = self.columns.iter().map(|c| c.0).collect();
        self.meta.extra.insert(
            "embedding_variable".into(),
            serde_json::json!({
                "dim": self.width(),
                "entries": self.entries(),
                "filtered_entries": filtered,
                "parts": self.parts.len(),
                "columns": names,
            }),
        );
        self
    }

    /// The part holding slot `slot` and the slot within it.
    fn part_of(&self, slot: u64) -> (usize, u64) {
        let p = self
            .starts
            .partition_point(|&s| s <= slot)
            .saturating_sub(1);
        (p, slot - self.starts[p])
    }

    fn name_lossy(&self) -> String {
        String::from_utf8_lossy(&self.meta.name).into_owned()
    }

    fn entries(&self) -> u64 {
        self.meta.shape[0]
    }

    /// Elements of a row (the values' trailing dimensions).
    fn width(&self) -> u64 {
        self.meta.shape[1..].iter().product()
    }

    fn key_at(&self, slot: u64) -> Result<i64, ModelError> {
        let mut k = [0i64];
        self.read_keys(ReadCtx::none(), slot, &mut k)?;
        Ok(k[0])
    }

    /// Keys of slots `first..first + out.len()`, across parts.
    fn read_keys(&self, ctx: &ReadCtx, first: u64, out: &mut [i64]) -> Result<(), ModelError> {
        thread_local! {
            // 32-bit keys before widening, kept: a fresh buffer of a scan piece's size is a
            // new mapping and its unmap a TLB shootdown on every core.
            static RAW: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        let mut done = 0usize;
        while done < out.len() {
            let (p, local) = self.part_of(first + done as u64);
            let left = self.starts[p + 1] - self.starts[p] - local;
            let n = (out.len() - done).min(left as usize);
            let keys = &self.parts[p].0;
            let got = &mut out[done..done + n];
            match self.key_width {
                8 => {
                    keys.read_elements(ctx, local, bytemuck::cast_slice_mut(got))?;
                    got.iter_mut().for_each(|k| *k = i64::from_le(*k));
                }
                w => RAW.with_borrow_mut(|raw| {
                    raw.resize(n * w, 0);
                    keys.read_elements(ctx, local, raw)?;
                    crate::model::scan::keys_from_le(raw, w, got);
                    Ok::<_, ModelError>(())
                })?,
            }
            done += n;
        }
        Ok(())
    }

    /// TF's probing's judgement of a bucket array (`probe`), made once.
    fn verdict(&self) -> Result<&Verdict, ModelError> {
        if let Some(v) = self.verdict.get() {
            return Ok(v);
        }
        let n = self.entries();
        let mut read = |first: u64, out: &mut [i64]| self.read_keys(ReadCtx::none(), first, out);
        let v = match (self.bucket_array, &self.sentinels[..]) {
            (false, _) => Verdict::Unknown,
            (true, &[empty, deleted]) => probe::check(n, &mut read, empty, deleted)?,
            (true, _) => probe::infer(n, &mut read)?,
        };
        Ok(self.verdict.get_or_init(|| v))
    }

    /// Where the key index persists: named by every keys tensor's identity.
    fn index_identity(&self) -> Option<String> {
        let ids: Option<Vec<String>> = self.parts.iter().map(|(k, _)| k.cache_identity()).collect();
        ids.map(|v| v.join("|"))
    }

    /// The key index: opened from `cache_dir` when built before, else built now.
    fn index(&self) -> Result<Arc<KeyIndex>, ModelError> {
        let place = IndexPlace::new(self.index_dir.as_deref(), self.index_identity().as_deref());
        let mut read = |first: u64, out: &mut [i64]| {
            self.read_keys(ReadCtx::none(), first, out)
                .map_err(|e| Box::new(e) as crate::store::KeysError)
        };
        key_index(
            &self.index,
            &self.meta.name,
            self.entries(),
            &place,
            &mut read,
        )
    }
}

impl Tensor for HashTable {
    fn meta(&self) -> &TensorMeta {
        &self.meta
    }

    fn fill_elements(&self, ctx: &ReadCtx, first: u64, out: &mut [u8]) -> Result<(), ModelError> {
        if let [(_, v)] = &self.parts[..] {
            return v.read_elements(ctx, first, out);
        }
        // Across parts, a row's elements at a time: element e is in the part of its row.
        let es = self.meta.dtype.elem_size().unwrap_or(1);
        let width = self.width().max(1);
        let count = (out.len() / es) as u64;
        debug_check(&self.meta, first, out.len());
        debug_assert_eq!(
            self.meta.num_elements(),
            Some(self.entries().saturating_mul(width))
        );
        let mut done = 0u64;
        while done < count {
            let e = first + done;
            let (p, local_row) = self.part_of(e / width);
            let part_end = self.starts[p + 1] * width;
            let n = (count - done).min(part_end - e);
            let local = local_row * width + e % width;
            let at = (done as usize) * es;
            self.parts[p]
                .1
                .read_elements(ctx, local, &mut out[at..at + n as usize * es])?;
            done += n;
        }
        Ok(())
    }

    fn lend(&self, ctx: &ReadCtx, first: u64, len: usize) -> Option<ModelResult<Bytes>> {
        match &self.parts[..] {
            [(_, v)] => v.lend(ctx, first, len),
            _ => None,
        }
    }

    fn cache_identity(&self) -> Option<String> {
        let ids: Option<Vec<String>> = self.parts.iter().map(|(_, v)| v.cache_identity()).collect();
        ids.map(|v| v.join("|"))
    }

    crate::model::capabilities!(as_keyed: Keyed, as_checksummed: Checksummed);
}

impl Keyed for HashTable {
    fn key_kind(&self) -> Option<KeyKind> {
        self.meta.problem.is_none().then_some(KeyKind::HashKey)
    }

    fn row_columns(&self, position: u64) -> Result<Vec<(&'static str, i64)>, ModelError> {
        if position >= self.entries() {
            return Ok(Vec::new());
        }
        let (p, local) = self.part_of(position);
        self.columns
            .iter()
            .map(|(name, per_part)| Ok((*name, integer_at(&*per_part[p], local)?)))
            .collect()
    }

    fn key_value_tensors(&self) -> Option<(Arc<dyn Tensor>, Arc<dyn Tensor>)> {
        match &self.parts[..] {
            [(k, v)] => Some((k.clone(), v.clone())),
            _ => None,
        }
    }

    fn row_keys(&self, ctx: &ReadCtx, first: u64, out: &mut [i64]) -> Option<ModelResult> {
        Some(self.read_keys(ctx, first, out))
    }

    /// The graph's keys; without a graph, those TF's probing names (`probe::infer`).
    fn sentinels(&self) -> &[i64] {
        if !self.sentinels.is_empty() || !self.bucket_array {
            return &self.sentinels;
        }
        match self.verdict() {
            Ok(Verdict::Sentinels(s)) => s,
            Ok(_) => &[],
            Err(e) => {
                // Keys repeated are still no rows; the read fails again where it is needed.
                log::warn!("{}: sentinel keys not inferred: {e}", self.name_lossy());
                &[]
            }
        }
    }

    /// The same table (sharing its key index) with `keys` as its sentinels, told in `.json`.
    fn with_sentinels(&self, keys: &[i64]) -> Option<Arc<dyn Tensor>> {
        let mut meta = self.meta.clone();
        if let Some(serde_json::Value::Object(h)) = meta.extra.get_mut("hash_table") {
            h.insert("sentinel_keys".into(), serde_json::json!(keys));
        }
        let index = self.index.lock().ok().and_then(|i| i.clone());
        Some(Arc::new(HashTable {
            meta,
            parts: self.parts.clone(),
            starts: self.starts.clone(),
            key_width: self.key_width,
            index_dir: self.index_dir.clone(),
            index: Mutex::new(index),
            columns: self.columns.clone(),
            sentinels: keys.to_vec(),
            bucket_array: self.bucket_array,
            verdict: Default::default(),
        }))
    }

    fn row_by_id(&self, id: i64, out: &mut Vec<u8>) -> Result<Option<RowHit>, ModelError> {
        if self.meta.problem.is_some() {
            return Ok(None);
        }
        if let Verdict::Damaged(off) = self.verdict()? {
            return Err(ModelError::data(self.name_lossy(), off.clone()));
        }
        let mut slots = Vec::new();
        self.index()?
            .find(id, &mut slots)
            .map_err(|e| ModelError::data(String::from_utf8_lossy(&self.meta.name), e))?;
        // The index only points: the key saved at the slot is what decides.
        if self.sentinels().contains(&id) {
            return Ok(None);
        }
        let mut found = None;
        for s in slots {
            if s < self.entries() && self.key_at(s)? == id {
                if found.is_some() {
                    return Ok(None); // saved twice: a DenseHashTable's sentinel
                }
                found = Some(s);
            }
        }
        let Some(slot) = found else {
            return Ok(None);
        };
        let width = self.width();
        let es = self.meta.dtype.elem_size().unwrap_or(1) as u64;
        let bytes = width
            .checked_mul(es)
            .filter(|&b| b <= crate::model::MAX_ROW_BYTES)
            .ok_or(RequestError::RowTooWide {
                width,
                max: crate::model::MAX_ROW_BYTES,
            })?;
        let at = out.len();
        out.resize(at + bytes as usize, 0);
        let (p, local) = self.part_of(slot);
        if let Err(e) =
            self.parts[p]
                .1
                .read_elements(ReadCtx::none(), local * width, &mut out[at..])
        {
            out.truncate(at);
            return Err(e);
        }
        Ok(Some(RowHit {
            width,
            partition: None,
            position: slot,
        }))
    }
}

/// Element `i` of an integer tensor (int64 or int32).
fn integer_at(t: &dyn Tensor, i: u64) -> Result<i64, ModelError> {
    let mut b = [0u8; 8];
    match t.meta().dtype {
        DType::I32 => {
            t.read_elements(ReadCtx::none(), i, &mut b[..4])?;
            Ok(i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64)
        }
        _ => {
            t.read_elements(ReadCtx::none(), i, &mut b)?;
            Ok(i64::from_le_bytes(b))
        }
    }
}

impl Checksummed for HashTable {
    fn stored_crc32c(&self) -> Option<u32> {
        match &self.parts[..] {
            [(_, v)] => v.stored_crc32c(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use crate::model::{DirEntry, KeyKind};

    use crate::model::key_path as path;

    use crate::testing::f32s;

    /// A table's `.json` says which TF table it is and counts what it can without reading: a
    /// MutableHashTable's entries (what it saved), a DenseHashTable's buckets; no DeepRec EV
    /// block where DeepRec saved nothing.
    #[test]
    fn a_tables_json_says_what_it_is() {
        let dir = crate::testing::fixtures_dir().join("tf/hashtable/tf2/ckpt");
        let model = crate::detect::open(&dir, &Default::default())
            .unwrap()
            .unwrap();
        for (name, kind, count, n) in [
            ("m/table", "MutableHashTable", "entries", 504),
            ("m/dense", "DenseHashTable", "buckets", 64),
        ] {
            let t = model.tensor(&path(name)).unwrap();
            let extra = &t.meta().extra;
            assert!(!extra.contains_key("embedding_variable"), "{name}");
            let h = &extra["hash_table"];
            assert_eq!(h["kind"], kind, "{name}");
            assert_eq!(h[count], n, "{name}: {h}");
            assert_eq!(h.as_object().unwrap().len(), 5, "{name}: {h}");
        }
    }

    /// DenseHashTables saved without their graph (`tf.train.Checkpoint.write`): every id gives
    /// TF's row; the deleted key saved once (one erase), the empty key and erased ids give
    /// none; the sentinels are named as the graph would name them; a bucket array with ids
    /// moved off their probe sequence fails its lookups as damaged.
    #[test]
    fn dense_tables_without_their_graph_answer_like_tensorflow() {
        let dir = crate::testing::fixtures_dir().join("tf/hashtable/nograph");
        let want = crate::model::expect::expected_at(&dir);
        let want = want.as_object().unwrap();
        assert_eq!(want.len(), 4);
        for (case, t) in want {
            let model = crate::detect::open(&dir.join(case).join("ckpt"), &Default::default())
                .unwrap()
                .unwrap();
            let table = model.tensor(&path(t["table"].as_str().unwrap())).unwrap();
            let table = table.as_keyed().unwrap();
            let h = &table.meta().extra["hash_table"];
            assert_eq!(h["kind"], "DenseHashTable", "{case}");
            assert_eq!(h["buckets"], t["buckets"], "{case}");
            assert!(
                h.get("entries").is_none()
                    && !table.meta().extra.contains_key("embedding_variable")
            );
            let mut out = Vec::new();
            if case == "damaged" {
                let e = table.row_by_id(3, &mut out).unwrap_err().to_string();
                assert!(e.contains("probe sequence"), "{e}");
                continue;
            }
            let sentinels: Vec<i64> = serde_json::from_value(t["sentinels"].clone()).unwrap();
            let mut named = table.sentinels().to_vec();
            named.sort();
            let mut expect = sentinels.clone();
            expect.sort();
            assert_eq!(named, expect, "{case}");
            for (k, v) in t["rows"].as_object().unwrap() {
                out.clear();
                let hit = table.row_by_id(k.parse().unwrap(), &mut out).unwrap();
                assert!(hit.is_some(), "{case}: {k} not found");
                assert_eq!(f32s(&out), crate::model::expect::f32_list(v), "{case}: {k}");
            }
            let absent = t["absent"]
                .as_array()
                .unwrap()
                .iter()
                .map(|k| k.as_i64().unwrap());
            for k in absent.chain(sentinels) {
                out.clear();
                let hit = table.row_by_id(k, &mut out).unwrap();
                assert!(hit.is_none() && out.is_empty(), "{case}: {k} found");
            }
        }
    }

    /// Every saved key gives the row TensorFlow's lookup gives; absent keys and a
    /// DenseHashTable's sentinels give none. With and without a directory for the index.
    #[test]
    fn tables_saved_by_tensorflow_answer_like_its_lookup() {
        let dir = crate::testing::fixtures_dir().join("tf/hashtable");
        let want = crate::model::expect::expected_at(&dir);
        let index_dir = tempfile::tempdir().unwrap();
        for keep in [
            None,
            Some(index_dir.path().to_path_buf()),
            Some(index_dir.path().to_path_buf()),
        ] {
            let opts = crate::model::ReaderOptions {
                key_index_dir: keep.clone(),
                ..Default::default()
            };
            let mut checked = 0;
            for (ckpt, tables) in want.as_object().unwrap() {
                let model = crate::detect::open(&dir.join(ckpt), &opts)
                    .unwrap()
                    .unwrap();
                for (name, t) in tables.as_object().unwrap() {
                    let p = path(name);
                    // Listed as TensorFlow lists it (keys and values), found by name.
                    let listed = model.list_dir(&p[..p.len() - 1]).unwrap();
                    assert!(
                        !listed.contains(&DirEntry::Tensor(p.last().unwrap().clone())),
                        "{name}"
                    );
                    let table = model.tensor(&p).unwrap();
                    assert_eq!(table.key_kind(), Some(KeyKind::HashKey), "{name}");
                    for (k, v) in t["rows"].as_object().unwrap() {
                        let mut out = Vec::new();
                        let hit = table.row_by_id(k.parse().unwrap(), &mut out).unwrap();
                        let hit = hit.unwrap_or_else(|| panic!("{name}: key {k} not found"));
                        let v = crate::model::expect::f32_list(v);
                        assert_eq!(f32s(&out), v, "{name}: key {k}");
                        assert_eq!(hit.width as usize, v.len());
                        checked += 1;
                    }
                    let absent = t["absent"].as_array().unwrap().iter();
                    let sentinels = t.get("sentinels").and_then(Value::as_array);
                    for k in absent.chain(sentinels.into_iter().flatten()) {
                        let mut out = Vec::new();
                        let got = table.row_by_id(k.as_i64().unwrap(), &mut out).unwrap();
                        assert!(got.is_none() && out.is_empty(), "{name}: {k} found");
                    }
                }
            }
            assert!(checked > 900, "{checked}");
        }
        // The index was kept: one file per keys tensor, reopened by the later pass.
        let kept = std::fs::read_dir(index_dir.path()).unwrap().count();
        assert_eq!(kept, 4);
        // TF2 shows the table as its object only, not also as `.ATTRIBUTES/table`.
        let model = crate::detect::open(&dir.join("tf2/ckpt"), &Default::default())
            .unwrap()
            .unwrap();
        let attrs = model.list_dir(&path("m/table/.ATTRIBUTES")).unwrap();
        assert!(
            !attrs.contains(&DirEntry::Tensor(b"table".to_vec())),
            "{attrs:?}"
        );
    }
}
