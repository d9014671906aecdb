//! Per-tensor statistics (`modelfs stats`, `NAME.stats.json`): count, min, max, mean, std,
//! NaN / +Inf / −Inf / zero counts and L2 norm — extremes, moments and norm over the finite
//! values, in float64 as numpy computes them. A sparse tensor counts its dense elements, the
//! ones not stored as zeros, and reads only its stored entries.
//!
//! Work is cut into chunks of at most `CHUNK` bytes over every tensor asked for, shared out
//! over all cores; the chunks of a tensor combine in order, so the result does not depend on
//! scheduling. A result is remembered in the persistent store under the tensor's identity:
//! a second `stats` (or a remount's `.stats.json`) reads no data.
//!
//! ```
//! use std::sync::Arc;
//! use modelfs_model::{testing::MemTensor, Tensor};
//! let t: Arc<dyn Tensor> = Arc::new(MemTensor::f32(&[4], &[1.0, 2.0, f32::NAN, 0.0]));
//! let out = modelfs_stats::compute(&[t], None, &modelfs_layout::Patient).unwrap();
//! let p = out[0].as_ref().unwrap();
//! assert_eq!((p.count, p.nan, p.zeros, p.max), (4, 1, 1, 2.0));
//! ```

pub mod delta;
pub mod partial;
pub mod rowdelta;
mod rowpass;
pub mod sketch;

use std::sync::Arc;

use bytes::Bytes;

pub(crate) use partial::{has_stats, Partial};

use modelfs_io::source::{scratch, ReadCtx};
use modelfs_io::store::{put_words, words, Record, Store};
use modelfs_layout::held::{Made, Make};
use modelfs_layout::{FileContent, LayoutError, Requester};
use modelfs_model::{Entries, ModelError, Tensor};

/// The per-tensor file's suffix (`NAME.stats.json`).
pub const SUFFIX: &str = "stats.json";
/// Bytes of elements per chunk of work.
const CHUNK: usize = 4 << 20;
/// Bytes per read within a chunk: small enough that what was read is still in L2 when summed.
const READ: usize = 256 << 10;
/// Stored entries per chunk of a sparse tensor.
const ENTRY_CHUNK: u64 = 1 << 20;

pub(crate) use modelfs_model::Crc;

/// `(first element, byte length)` of each cache-sized run of elements `first..first + count`
/// of `es` bytes: a run is read, then summed or compared while still in L2.
pub(crate) fn runs(first: u64, count: u64, es: usize) -> impl Iterator<Item = (u64, usize)> {
    let per = (READ / es.max(1)).max(1) as u64;
    let end = first + count;
    (first..end)
        .step_by(per as usize)
        .map(move |at| (at, per.min(end - at) as usize * es))
}

/// `len` bytes of `t`'s elements from `first`: unchecked, their checksum added to
/// `deferred`, when given (`Tensor::deferred_crc32c`); else as `read` gives them (the
/// source's own buffer where it lends it: no copy).
pub(crate) fn read_run(
    t: &dyn Tensor,
    first: u64,
    len: usize,
    deferred: Option<&mut Crc>,
) -> Result<Bytes, ModelError> {
    match deferred {
        Some(crc) => scratch::filled(len, |buf| {
            t.read_elements_unchecked(ReadCtx::none(), first, buf)?;
            crc.add(buf);
            Ok(len)
        }),
        None => t.read(ReadCtx::none(), first, len),
    }
}

/// What one tensor's stats are, or why it has none.
pub type Outcome = Result<Partial, String>;

/// One unit of work: a run of tensor `t`'s elements or stored entries.
#[derive(Clone, Copy)]
enum Piece {
    Dense {
        first: u64,
        count: u64,
    },
    Entries {
        first: u64,
        count: u64,
    },
    /// A sparse tensor decoded whole (its reader cannot read entries by range).
    Whole,
    /// The entries a sparse tensor does not store (zeros).
    Unstored(u64),
}

/// A tensor's statistics as kept: eleven words, the floats as their bits.
impl Record for Partial {
    const KIND: &'static str = "stats/1";
    fn encode(&self, out: &mut Vec<u8>) {
        let p = self;
        put_words(
            out,
            &[
                p.count,
                p.finite,
                p.nan,
                p.posinf,
                p.neginf,
                p.zeros,
                p.min.to_bits(),
                p.max.to_bits(),
                p.mean.to_bits(),
                p.m2.to_bits(),
                p.sumsq.to_bits(),
            ],
        );
    }
    fn decode(bytes: &[u8]) -> Option<Partial> {
        let w = words(bytes)?;
        let [count, finite, nan, posinf, neginf, zeros, min, max, mean, m2, sumsq] = w[..] else {
            return None;
        };
        // Counts that add up, checked like data.
        let total = finite
            .checked_add(nan)?
            .checked_add(posinf)?
            .checked_add(neginf)?;
        (total == count && zeros <= finite).then_some(Partial {
            count,
            finite,
            nan,
            posinf,
            neginf,
            zeros,
            min: f64::from_bits(min),
            max: f64::from_bits(max),
            mean: f64::from_bits(mean),
            m2: f64::from_bits(m2),
            sumsq: f64::from_bits(sumsq),
        })
    }
}

fn remembered(t: &dyn Tensor, store: Option<&dyn Store>) -> Option<Partial> {
    let p: Partial = store?.get(&t.cache_identity()?)?;
    // For this tensor's shape.
    (Some(p.count) == t.meta().num_elements()).then_some(p)
}

fn remember(t: &dyn Tensor, store: Option<&dyn Store>, p: &Partial) {
    if let (Some(store), Some(key)) = (store, t.cache_identity()) {
        store.put(&key, p);
    }
}

/// Whether a tensor described by `meta` has stats, and why not (metadata only).
pub fn check(meta: &modelfs_model::TensorMeta) -> Result<(), String> {
    if let Some(p) = &meta.problem {
        return Err(p.clone());
    }
    if let Some(n) = &meta.note {
        return Err(n.clone());
    }
    if !has_stats(meta.dtype) {
        return Err(format!("{} has no stats", meta.dtype.name()));
    }
    Ok(())
}

/// The pieces of `t`'s work, or why it has no stats.
fn pieces(t: &dyn Tensor) -> Result<Vec<Piece>, String> {
    let meta = t.meta();
    check(meta)?;
    let n = meta
        .num_elements()
        .ok_or("the shape's element count overflows")?;
    let es = meta.dtype.elem_size().unwrap_or(1).max(1) as u64;
    let mut out = Vec::new();
    if meta.sparse {
        if !t.sparse_shape_is_cheap() {
            return Ok(vec![Piece::Whole]);
        }
        let nnz = t.sparse_shape().map_err(|e| e.to_string())?.nnz();
        let unstored = n
            .checked_sub(nnz)
            .ok_or("more stored entries than elements")?;
        let mut first = 0;
        while first < nnz {
            let count = ENTRY_CHUNK.min(nnz - first);
            out.push(Piece::Entries { first, count });
            first += count;
        }
        out.push(Piece::Unstored(unstored));
        return Ok(out);
    }
    let per = (CHUNK as u64 / es).max(1);
    let mut first = 0;
    while first < n {
        let count = per.min(n - first);
        out.push(Piece::Dense { first, count });
        first += count;
    }
    Ok(out)
}

/// Works out one piece of `t`; when `deferred`, reads unchecked and gives the bytes' checksum.
fn run(
    t: &dyn Tensor,
    piece: Piece,
    deferred: bool,
    entries: &mut Entries,
) -> Result<(Partial, Crc), String> {
    let meta = t.meta();
    let dtype = meta.dtype;
    let es = dtype.elem_size().unwrap_or(1);
    let mut p = Partial::default();
    let mut crc = Crc::default();
    let err = |e: ModelError| e.to_string();
    match piece {
        Piece::Dense { first, count } => {
            for (at, len) in runs(first, count, es) {
                let b = read_run(t, at, len, deferred.then_some(&mut crc));
                partial::add(dtype, &b.map_err(err)?, &mut p);
            }
        }
        Piece::Entries { first, count } => {
            entries.clear();
            t.entries()
                .and_then(|s| s.read_entries(ReadCtx::none(), first, count, entries))
                .map_err(err)?;
            partial::add(dtype, &entries.values, &mut p);
        }
        Piece::Whole => {
            let rows = t.sparse().map_err(err)?;
            partial::add(dtype, &rows.values, &mut p);
            let n = meta.num_elements().unwrap_or(0);
            p.merge(&Partial::zeros(n.saturating_sub(rows.nnz())));
        }
        Piece::Unstored(n) => p = Partial::zeros(n),
    }
    Ok((p, crc))
}

/// The stats of each of `tensors` (remembered ones from `store`, the rest computed on all
/// cores and remembered), in order. Stops with `Interrupted` once `req` is gone.
pub fn compute(
    tensors: &[Arc<dyn Tensor>],
    store: Option<&dyn Store>,
    req: &dyn Requester,
) -> Result<Vec<Outcome>, LayoutError> {
    let mut outcomes: Vec<Option<Outcome>> = vec![None; tensors.len()];
    let mut work: Vec<(usize, Piece)> = Vec::new();
    for (i, t) in tensors.iter().enumerate() {
        if let Some(p) = remembered(&**t, store) {
            outcomes[i] = Some(Ok(p));
            continue;
        }
        match pieces(&**t) {
            Ok(ps) => work.extend(ps.into_iter().map(|p| (i, p))),
            Err(why) => outcomes[i] = Some(Err(why)),
        }
    }
    // Tensors whose checksum this pass confirms itself (one pass over the bytes, not two).
    let deferred: Vec<bool> = tensors
        .iter()
        .map(|t| !t.meta().sparse && t.deferred_crc32c().is_some())
        .collect();
    let results = modelfs_layout::pool::each(work.len(), req, Entries::default, |entries, k| {
        let (i, piece) = work[k];
        run(&*tensors[i], piece, deferred[i], entries)
    })?;
    let mut crcs: Vec<Option<Crc>> = vec![None; tensors.len()];
    for ((i, _), r) in work.iter().zip(results) {
        let slot = &mut outcomes[*i];
        let r = r.map(|(b, c)| {
            crcs[*i] = Some(crcs[*i].map_or(c, |a| a.then(c)));
            b
        });
        *slot = Some(match (slot.take(), r) {
            (Some(Err(e)), _) | (_, Err(e)) => Err(e),
            (Some(Ok(mut a)), Ok(b)) => {
                a.merge(&b);
                Ok(a)
            }
            (None, Ok(b)) => Ok(b),
        });
    }
    for (i, t) in tensors.iter().enumerate() {
        if let (true, Some(c), Some(Ok(_))) = (deferred[i], crcs[i], &outcomes[i]) {
            if let Err(e) = t.confirm_crc32c(c.value()) {
                outcomes[i] = Some(Err(e.to_string()));
            }
        }
    }
    let mut out = Vec::with_capacity(tensors.len());
    for (i, o) in outcomes.into_iter().enumerate() {
        // A tensor with no elements has no pieces: its stats are all zeros.
        let o = o.unwrap_or_else(|| Ok(Partial::default()));
        if let Ok(p) = &o {
            if remembered(&*tensors[i], store).is_none() {
                remember(&*tensors[i], store, p);
            }
        }
        out.push(o);
    }
    Ok(out)
}

/// A float for JSON: shortest round-trip text, `null` when there is none.
fn num(x: Option<f64>) -> String {
    match x {
        Some(v) if v.is_finite() => serde_json::to_string(&v).unwrap_or_else(|_| "null".into()),
        _ => "null".into(),
    }
}

/// One tensor's stats as a JSON object, keys in the documented order: `name` is its path in
/// the mount, `key` the reader's raw key when that differs (`emb/.ATTRIBUTES/VARIABLE_VALUE`).
pub fn json(name: &str, key: &[u8], dtype: &str, p: &Partial) -> String {
    let finite = p.finite > 0;
    let str_ = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into());
    let key = String::from_utf8_lossy(key);
    let key = match key == name {
        true => String::new(),
        false => format!(", \"key\": {}", str_(&key)),
    };
    format!(
        "{{\"name\": {}{key}, \"dtype\": {}, \"count\": {}, \"min\": {}, \"max\": {}, \
         \"mean\": {}, \"std\": {}, \"nan\": {}, \"posinf\": {}, \"neginf\": {}, \"zeros\": {}, \
         \"l2\": {}}}",
        str_(name),
        str_(dtype),
        p.count,
        num(finite.then_some(p.min)),
        num(finite.then_some(p.max)),
        num(finite.then_some(p.mean)),
        num(p.std()),
        p.nan,
        p.posinf,
        p.neginf,
        p.zeros,
        num(Some(p.sumsq.sqrt())),
    )
}

/// `NAME.stats.json`: made on first read (its size is unknown until then).
struct StatsFile {
    tensor: Arc<dyn Tensor>,
    store: Option<Arc<dyn Store>>,
    /// The tensor's path in the mount: its name here as in every command.
    path: String,
}

impl Make for StatsFile {
    fn make(&self, req: &dyn Requester) -> Result<Vec<u8>, LayoutError> {
        let t = [self.tensor.clone()];
        let got = compute(&t, self.store.as_deref(), req)?.remove(0);
        let p = got.map_err(|why| {
            LayoutError::Model(ModelError::data(
                String::from_utf8_lossy(&self.tensor.meta().name),
                why,
            ))
        })?;
        let meta = self.tensor.meta();
        let mut text = json(&self.path, &meta.name, &meta.dtype.name(), &p);
        text.push('\n');
        Ok(text.into_bytes())
    }
}

/// `NAME.stats.json` of `tensor`, or why it has none (from metadata).
pub fn file(
    tensor: Arc<dyn Tensor>,
    store: Option<Arc<dyn Store>>,
    path: String,
) -> Result<Arc<dyn FileContent>, String> {
    check(tensor.meta())?;
    Ok(Arc::new(Made::new(StatsFile {
        tensor,
        store,
        path,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use modelfs_detect::model_at;
    use modelfs_layout::Patient;
    use modelfs_model::{Model, ReaderOptions};

    fn tensors(model: &dyn Model, names: &[&str]) -> Vec<Arc<dyn Tensor>> {
        names
            .iter()
            .map(|n| model.tensor(&[n.as_bytes().to_vec()]).unwrap())
            .collect()
    }

    /// A TF tensor's checksum is confirmed from the bytes stats reads (no pass of its own):
    /// a flipped byte fails that tensor — with the reader's checksum error — and only it;
    /// and the same pass over a clean copy gives the same stats as reads that verify first.
    #[test]
    fn a_deferred_checksum_fails_the_damaged_tensor_only() {
        let src = modelfs_model::testing::fixtures_dir().join("tf/dtypes");
        let dir = tempfile::tempdir().unwrap();
        for f in ["ckpt.index", "ckpt.data-00000-of-00001"] {
            std::fs::copy(src.join(f), dir.path().join(f)).unwrap();
        }
        let names = ["float32", "float64", "int32"];
        let clean = model_at(&dir.path().join("ckpt"), &ReaderOptions::default()).unwrap();
        let ts = tensors(&*clean, &names);
        assert!(ts.iter().all(|t| t.deferred_crc32c().is_some()));
        let deferred = compute(&ts, None, &Patient).unwrap();
        // Now verified (the verdict is kept): the second pass reads checked.
        assert!(ts.iter().all(|t| t.deferred_crc32c().is_none()));
        let checked = compute(&ts, None, &Patient).unwrap();
        for (a, b) in deferred.iter().zip(&checked) {
            assert_eq!(a.as_ref().unwrap(), b.as_ref().unwrap());
        }
        // A copy with a byte of float64's data flipped.
        let bad = tempfile::tempdir().unwrap();
        for f in ["ckpt.index", "ckpt.data-00000-of-00001"] {
            std::fs::copy(src.join(f), bad.path().join(f)).unwrap();
        }
        let t = clean.tensor(&[b"float64".to_vec()]).unwrap();
        let mut first = vec![0u8; 8];
        t.read_elements(ReadCtx::none(), 0, &mut first).unwrap();
        let path = bad.path().join("ckpt.data-00000-of-00001");
        let mut data = std::fs::read(&path).unwrap();
        let at = data.windows(8).position(|w| w == first).unwrap();
        data[at] ^= 1;
        std::fs::write(&path, &data).unwrap();
        let damaged = model_at(&bad.path().join("ckpt"), &ReaderOptions::default()).unwrap();
        let got = compute(&tensors(&*damaged, &names), None, &Patient).unwrap();
        assert!(got[0].is_ok() && got[2].is_ok(), "{got:?}");
        assert!(got[1].as_ref().unwrap_err().contains("checksum"), "{got:?}");
        // diff confirms both sides the same way.
        let again = model_at(&bad.path().join("ckpt"), &ReaderOptions::default()).unwrap();
        let pair = (ts[1].clone(), tensors(&*again, &["float64"]).remove(0));
        let d = delta::compare(&[pair], 1 << 30, &Patient).unwrap();
        assert!(d[0].as_ref().unwrap_err().contains("checksum"), "{d:?}");
    }

    /// Stats are remembered in the persistent store by tensor identity: another run over the
    /// same source (a new store object on the same directory, as a remount has) reads no data
    /// and gives the same numbers; another source's store knows nothing of them.
    #[test]
    fn stats_are_remembered_across_mounts() {
        use modelfs_io::store::DiskStore;
        use modelfs_model::testing::CountingModel;
        use modelfs_model::DirEntry;
        let source = modelfs_model::testing::fixtures_dir().join("angel/formats/model");
        let inner: Arc<dyn Model> = model_at(&source, &ReaderOptions::default()).unwrap();
        let model = CountingModel::new(inner);
        let ts: Vec<Arc<dyn Tensor>> = model
            .list_dir(&[])
            .unwrap()
            .into_iter()
            .filter_map(|e| match e {
                DirEntry::Tensor(n) => Some(model.tensor(&[n]).unwrap()),
                _ => None,
            })
            .collect();
        assert!(ts.len() > 10);
        let dir = tempfile::tempdir().unwrap();
        let store =
            |tag: &str| DiskStore::new(dir.path(), &format!("{}{tag}", source.display()), 1 << 30);
        let first = compute(&ts, Some(&store("")), &Patient).unwrap();
        let reads = model.reads();
        assert!(reads > 0);
        let again = compute(&ts, Some(&store("")), &Patient).unwrap();
        assert_eq!(model.reads(), reads, "remembered: no data read");
        for (a, b) in first.iter().zip(&again) {
            assert_eq!(a, b);
        }
        compute(&ts, Some(&store("-other")), &Patient).unwrap();
        assert!(model.reads() > reads);
    }
}
