//! `NAME.csr.npz`: a sparse matrix or a keyed table as the archive `scipy.sparse.save_npz`
//! writes for a CSR matrix (members `indices`, `indptr`, `format`, `shape`, `data`), so that
//! `scipy.sparse.load_npz` reads it and XGBoost's `DMatrix` takes it; and, for a table,
//! `NAME.csr.ids.npy`: the id of each row.
//!
//! - A sparse matrix (Angel) is its stored entries, rows as they are numbered: `indptr` has a
//!   slot per row of its shape, `indices` are its column ids (a column outside `0..cols` is a
//!   read error: CSR cannot hold it).
//! - A hash table (TF hash tables, DeepRec EVs, Monolith) is one row per id, in id order,
//!   every value stored (explicit zeros too: the size is known from metadata); the order is
//!   an external sort of its keys made on first read (`store::KeyOrder`).
//!
//! Index arrays are int32 when every index fits, int64 otherwise (scipy takes both). Sizes
//! are exact from metadata; nothing is read before a member's bytes are.

use std::sync::{Arc, Mutex};

use super::npz::{archive, NpzMember};
use modelfs_io::source::ReadCtx;
use modelfs_io::store::KeyOrder;
use modelfs_layout::binary::{npy_content, npy_header};
use modelfs_layout::held::Whole;
use modelfs_layout::lazy::Lazy;
use modelfs_layout::{FileContent, LayoutCtx, LayoutError};
use modelfs_model::{
    debug_check, DType, Entries, KeyKind, ModelError, SparseShape, Tensor, TensorMeta,
};

pub const SUFFIX: &str = "csr.npz";
pub const IDS_SUFFIX: &str = "csr.ids.npy";
/// Rows whose order is read at once.
const ORDER_READ: usize = 1 << 12;

/// What the CSR form shows.
enum Rows {
    /// A sparse matrix's stored entries.
    Sparse(Arc<SparseShape>),
    /// A hash table's rows of `width` values in key order.
    Table {
        width: u64,
        /// Made on the first read that needs it; a failure is not kept.
        order: Mutex<Option<Arc<KeyOrder>>>,
    },
}

struct Csr {
    t: Arc<dyn Tensor>,
    rows: Rows,
    /// The matrix's shape.
    shape: [u64; 2],
    nnz: u64,
    index: DType,
}

impl Csr {
    fn new(t: Arc<dyn Tensor>) -> Result<Csr, String> {
        let meta = t.meta();
        if let Some(p) = &meta.problem {
            return Err(format!("it has a problem: {p}"));
        }
        let es = meta
            .dtype
            .elem_size()
            .ok_or("its elements have no fixed width")?;
        if meta.sparse {
            if !t.sparse_shape_is_cheap() {
                return Err("its entries are counted only by reading them".into());
            }
            let shape = t.sparse_shape().map_err(|e| e.to_string())?;
            let (r, c) = meta.rows_cols().ok_or("it is not a matrix")?;
            let nnz = shape.nnz();
            return Ok(Csr::with(t, Rows::Sparse(shape), [r, c], nnz));
        }
        if t.key_kind() != Some(KeyKind::HashKey) {
            return Err("it is neither a sparse matrix nor a hash table".into());
        }
        let (&n, rest) = meta.shape.split_first().ok_or("a table without rows")?;
        let width: u64 = rest.iter().product();
        let nnz = n
            .checked_mul(width)
            .filter(|b| b.checked_mul(es as u64).is_some())
            .ok_or("its size overflows")?;
        let order = Mutex::new(None);
        Ok(Csr::with(t, Rows::Table { width, order }, [n, width], nnz))
    }

    /// Whether the table's rows may be fewer than its saved slots, so that its shape needs a
    /// pass over its keys: it has sentinel keys, or it is a bucket array (a power of two
    /// long, as a `DenseHashTable` saves one) that may hold keys more than once.
    fn counts_rows(&self) -> bool {
        matches!(self.rows, Rows::Table { .. })
            && (self.t.as_keyed().is_some_and(|k| !k.sentinels().is_empty())
                || self.shape[0].is_power_of_two())
    }

    /// The table as CSR with its rows counted: its key order without the keys that are no
    /// rows (`KeyOrder::rows_only`), one row each.
    fn counted(&self) -> Result<Csr, ModelError> {
        let Rows::Table { width, .. } = self.rows else {
            return Err(self.error("no key order"));
        };
        let sentinels = self
            .t
            .as_keyed()
            .map_or(&[][..], |k| k.sentinels())
            .to_vec();
        let order = self
            .build_order()?
            .rows_only(&sentinels)
            .map_err(|e| self.error(e.to_string()))?;
        let n = order.len();
        let es = self.t.meta().dtype.elem_size().unwrap_or(1) as u64;
        let nnz = n
            .checked_mul(width)
            .filter(|b| b.checked_mul(es).is_some())
            .ok_or_else(|| self.error("its size overflows"))?;
        let rows = Rows::Table {
            width,
            order: Mutex::new(Some(Arc::new(order))),
        };
        Ok(Csr::with(self.t.clone(), rows, [n, width], nnz))
    }

    fn with(t: Arc<dyn Tensor>, rows: Rows, shape: [u64; 2], nnz: u64) -> Csr {
        let fits = |x: u64| x <= i32::MAX as u64;
        let index = match fits(nnz) && fits(shape[1]) {
            true => DType::I32,
            false => DType::I64,
        };
        Csr {
            t,
            rows,
            shape,
            nnz,
            index,
        }
    }

    fn error(&self, what: impl Into<String>) -> ModelError {
        ModelError::data(
            format!("{}.{SUFFIX}", String::from_utf8_lossy(&self.t.meta().name)),
            what.into(),
        )
    }

    /// The table's key order, made now if it was not.
    fn order(&self) -> Result<Arc<KeyOrder>, ModelError> {
        let Rows::Table { order, .. } = &self.rows else {
            return Err(self.error("no key order"));
        };
        let mut slot = order
            .lock()
            .map_err(|_| self.error("key order lock poisoned"))?;
        if let Some(o) = &*slot {
            return Ok(o.clone());
        }
        let o = self.build_order()?;
        Ok(slot.insert(Arc::new(o)).clone())
    }

    /// The order of every saved key.
    fn build_order(&self) -> Result<KeyOrder, ModelError> {
        let t = &self.t;
        let mut read = |first: u64, out: &mut [i64]| match t.row_keys(ReadCtx::none(), first, out) {
            Some(r) => r.map_err(|e| Box::new(e) as modelfs_io::store::KeysError),
            None => Err("a table without stored keys".into()),
        };
        KeyOrder::build(self.shape[0], &mut read).map_err(|e| self.error(e.to_string()))
    }

    /// Records `first..first + out.len()` of the key order.
    fn order_at(&self, first: u64, out: &mut [(i64, u64)]) -> Result<(), ModelError> {
        self.order()?
            .read(first, out)
            .map_err(|e| self.error(e.to_string()))
    }
}

/// Puts index `v` as an element of `dtype` (int32 or int64) at `out`.
fn put_index(dtype: DType, v: u64, out: &mut [u8]) {
    match dtype {
        DType::I32 => out.copy_from_slice(&(v as i32).to_le_bytes()),
        _ => out.copy_from_slice(&(v as i64).to_le_bytes()),
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Part {
    Indices,
    Indptr,
    Shape,
    Data,
    Ids,
}

/// One array of the CSR form, as a tensor (its `.npy` is the member).
struct Array {
    csr: Arc<Csr>,
    part: Part,
    meta: TensorMeta,
}

impl Array {
    fn new(csr: &Arc<Csr>, part: Part) -> Array {
        let src = csr.t.meta();
        let (name, dtype, shape) = match part {
            Part::Indices => ("indices", csr.index, csr.nnz),
            Part::Indptr => ("indptr", csr.index, csr.shape[0].saturating_add(1)),
            Part::Shape => ("shape", DType::I64, 2),
            Part::Data => ("data", src.dtype, csr.nnz),
            Part::Ids => ("ids", DType::I64, csr.shape[0]),
        };
        let meta = TensorMeta {
            mtime: src.mtime,
            ..TensorMeta::new(name.as_bytes().to_vec(), dtype, vec![shape], src.format)
        };
        Array {
            csr: csr.clone(),
            part,
            meta,
        }
    }

    fn fill_sparse(
        &self,
        ctx: &ReadCtx,
        shape: &SparseShape,
        first: u64,
        out: &mut [u8],
    ) -> Result<(), ModelError> {
        let csr = &self.csr;
        let es = self.meta.dtype.elem_size().unwrap_or(1);
        let count = (out.len() / es) as u64;
        match self.part {
            Part::Indptr => {
                let mut k = shape.rows.partition_point(|&r| r < first);
                for (i, o) in out.chunks_exact_mut(es).enumerate() {
                    let r = first + i as u64;
                    while k < shape.rows.len() && shape.rows[k] < r {
                        k += 1;
                    }
                    put_index(csr.index, shape.row_ptr[k], o);
                }
            }
            Part::Indices | Part::Data => {
                let mut got = Entries::default();
                csr.t.entries()?.read_entries(ctx, first, count, &mut got)?;
                if got.cols.len() as u64 != count {
                    return Err(csr.error("fewer entries than the matrix stores"));
                }
                if self.part == Part::Data {
                    if got.values.len() != out.len() {
                        return Err(csr.error("entries without their values"));
                    }
                    out.copy_from_slice(&got.values);
                    return Ok(());
                }
                for (o, &c) in out.chunks_exact_mut(es).zip(&got.cols) {
                    let c = u64::try_from(c)
                        .ok()
                        .filter(|&c| c < csr.shape[1])
                        .ok_or_else(|| {
                            csr.error(format!("column {c} is outside 0..{}", csr.shape[1]))
                        })?;
                    put_index(csr.index, c, o);
                }
            }
            _ => unreachable!("handled by fill_elements"),
        }
        Ok(())
    }

    fn fill_table(
        &self,
        ctx: &ReadCtx,
        width: u64,
        first: u64,
        out: &mut [u8],
    ) -> Result<(), ModelError> {
        let csr = &self.csr;
        let es = self.meta.dtype.elem_size().unwrap_or(1);
        let count = (out.len() / es) as u64;
        match self.part {
            Part::Indptr => {
                for (i, o) in out.chunks_exact_mut(es).enumerate() {
                    put_index(csr.index, (first + i as u64) * width, o);
                }
            }
            Part::Indices => {
                for (i, o) in out.chunks_exact_mut(es).enumerate() {
                    put_index(csr.index, (first + i as u64) % width.max(1), o);
                }
            }
            Part::Ids => {
                let mut order = vec![(0i64, 0u64); ORDER_READ];
                let mut done = 0u64;
                while done < count {
                    let n = (count - done).min(ORDER_READ as u64) as usize;
                    csr.order_at(first + done, &mut order[..n])?;
                    for (i, &(key, _)) in order[..n].iter().enumerate() {
                        let at = (done as usize + i) * 8;
                        out[at..at + 8].copy_from_slice(&key.to_le_bytes());
                    }
                    done += n as u64;
                }
            }
            Part::Data => {
                // Element e is value e % width of the row in key order e / width.
                let mut order = vec![(0i64, 0u64); ORDER_READ];
                let mut done = 0u64;
                while done < count {
                    let row = (first + done) / width;
                    let last = (first + count - 1) / width;
                    let rows = (last - row + 1).min(ORDER_READ as u64) as usize;
                    csr.order_at(row, &mut order[..rows])?;
                    for &(_, slot) in &order[..rows] {
                        let col = (first + done) % width;
                        let n = (width - col).min(count - done);
                        let at = done as usize * es;
                        csr.t.read_elements(
                            ctx,
                            slot * width + col,
                            &mut out[at..at + n as usize * es],
                        )?;
                        done += n;
                    }
                }
            }
            Part::Shape => unreachable!("handled by fill_elements"),
        }
        Ok(())
    }
}

impl Tensor for Array {
    fn meta(&self) -> &TensorMeta {
        &self.meta
    }

    fn fill_elements(&self, ctx: &ReadCtx, first: u64, out: &mut [u8]) -> Result<(), ModelError> {
        debug_check(&self.meta, first, out.len());
        if self.part == Part::Shape {
            for (i, o) in out.chunks_exact_mut(8).enumerate() {
                o.copy_from_slice(&(self.csr.shape[first as usize + i] as i64).to_le_bytes());
            }
            return Ok(());
        }
        match &self.csr.rows {
            Rows::Sparse(shape) => self.fill_sparse(ctx, shape, first, out),
            Rows::Table { width, .. } => self.fill_table(ctx, *width, first, out),
        }
    }
}

fn npy_of(csr: &Arc<Csr>, part: Part) -> Result<Arc<dyn FileContent>, String> {
    npy_content(Arc::new(Array::new(csr, part))).ok_or_else(|| "its size overflows".to_string())
}

/// `content(csr)`, or, for a table whose rows need counting (`Csr::counts_rows`), that
/// content built on the first size or read, once its rows are counted.
fn sized(
    csr: Csr,
    content: impl Fn(Arc<Csr>) -> Result<Arc<dyn FileContent>, String> + Send + Sync + 'static,
) -> Result<Arc<dyn FileContent>, String> {
    if !csr.counts_rows() {
        return content(Arc::new(csr));
    }
    Ok(Lazy::content(move || {
        let counted = Arc::new(csr.counted()?);
        content(counted).map_err(|e| LayoutError::Model(csr.error(e)))
    }))
}

/// `NAME.csr.npz` of `tensor`, or why it has none (metadata only: a table whose rows need
/// counting is sized by its first size or read).
pub fn file(tensor: Arc<dyn Tensor>, ctx: &Arc<LayoutCtx>) -> Result<Arc<dyn FileContent>, String> {
    let ctx = ctx.clone();
    sized(Csr::new(tensor)?, move |csr| archive_of(&csr, &ctx))
}

fn archive_of(csr: &Arc<Csr>, ctx: &Arc<LayoutCtx>) -> Result<Arc<dyn FileContent>, String> {
    // np.array(b'csr'): a 0-d array of 3-byte strings.
    let mut format = npy_header("|S3", &[]);
    format.extend_from_slice(b"csr");
    let mut members = Vec::new();
    for (key, part) in [
        ("indices", Some(Part::Indices)),
        ("indptr", Some(Part::Indptr)),
        ("format", None),
        ("shape", Some(Part::Shape)),
        ("data", Some(Part::Data)),
    ] {
        let npy = match part {
            Some(p) => npy_of(csr, p)?,
            None => Arc::new(Whole(format.clone().into())) as Arc<dyn FileContent>,
        };
        members.push(NpzMember {
            key: key.to_string(),
            npy,
            store_key: None,
        });
    }
    let a = archive(members, ctx).map_err(|e| e.to_string())?;
    Ok(Arc::new(a))
}

/// `NAME.csr.ids.npy` of a hash table: the id of each CSR row.
pub fn ids_file(tensor: Arc<dyn Tensor>) -> Result<Arc<dyn FileContent>, String> {
    let csr = Csr::new(tensor)?;
    if let Rows::Sparse(_) = csr.rows {
        return Err("a sparse matrix's rows are numbered: it has no ids".into());
    }
    sized(csr, |csr| npy_of(&csr, Part::Ids))
}
