//! What a reader implements for a tensor: `Tensor` is metadata and one raw read of elements;
//! what only some tensors can do is a capability of its own (`Strings`, `Sparse`, `Keyed`,
//! `Checksummed`), reached through `Tensor::as_*`. Callers use the methods on `dyn Tensor`,
//! which check a request once (`check_request`) and answer for a tensor without the
//! capability (an error, or the dense default).
//!
//! Invariants:
//! - `fill_elements`, `lend` and `fill_elements_unverified` are only called with a request
//!   `check_request` accepted; implementations may `debug_check` it.
//! - A capability's methods see the same tensor as its `Tensor` methods (`Sparse: Tensor`):
//!   a wrapper forwards `as_*` to what it wraps.

use std::sync::Arc;

use bytes::Bytes;

use crate::source::ReadCtx;

use super::rows::{self, default_key_kind, KeyKind, RowHit};
use super::{
    entries_in, seek_col_in, ColumnBlock, Entries, ModelError, RequestError, SparseRows,
    SparseShape, TensorMeta,
};
use crate::ModelResult;

/// A tensor's bytes as one run of a source file (`Tensor::stored_run`).
#[derive(Clone)]
pub struct StoredRun {
    pub file: Arc<dyn crate::source::ReadAt>,
    pub offset: u64,
    pub len: u64,
}

impl StoredRun {
    /// The elements of `meta`, fixed-width and back to back, from `offset` of `file`.
    pub fn elements(
        file: &Arc<dyn crate::source::ReadAt>,
        offset: u64,
        meta: &TensorMeta,
    ) -> Option<StoredRun> {
        let len = meta
            .num_elements()?
            .checked_mul(meta.dtype.elem_size()? as u64)?;
        Some(StoredRun {
            file: Arc::clone(file),
            offset,
            len,
        })
    }
}

/// A tensor (or one partition of one) that can be read.
pub trait Tensor: Send + Sync {
    fn meta(&self) -> &TensorMeta;

    /// Fills `out` with elements `first..first + out.len() / elem_size` (dense tensors with a
    /// fixed-size dtype). Verifies the source checksum on first use. Called through
    /// `read_elements`, which has checked the request: the dtype has a fixed width, `out`
    /// holds whole elements, and they lie within the tensor (`debug_check` says so).
    fn fill_elements(&self, ctx: &ReadCtx, first: u64, out: &mut [u8]) -> Result<(), ModelError>;

    /// What `fill_elements` would give for `len` bytes from element `first`, as a view of a
    /// buffer the source holds anyway or a copy (`ReadAt::read`); `None`: the reader must
    /// transform them (byte order, bools) and `fill_elements` does. Called through `read`,
    /// which has checked the request.
    fn lend(&self, ctx: &ReadCtx, first: u64, len: usize) -> Option<Result<Bytes, ModelError>> {
        let _ = (ctx, first, len);
        None
    }

    /// Where the bytes `read` gives for the whole tensor lie, when they are one run of one
    /// local source file, stored exactly as served (no byte swap, no decoding): a view may
    /// then point into that file and the kernel serve it (`views::tf`). A string tensor's run
    /// is its bytes in TensorFlow's bundle encoding (formats/tf-checkpoint.md §6.1).
    fn stored_run(&self) -> Option<StoredRun> {
        None
    }

    /// Bytes `offset..offset + len` of the stored form (`TensorMeta::stored`), inside it.
    fn read_stored(&self, ctx: &ReadCtx, offset: u64, len: usize) -> Result<Bytes, ModelError> {
        let _ = (ctx, offset, len);
        Err(ModelError::data(
            String::from_utf8_lossy(&self.meta().name),
            "no stored form",
        ))
    }

    /// A stable string that changes whenever this tensor's bytes could change (e.g. data file
    /// path + identity + key + partition index). Lets rendered-file indexes be shared across
    /// tensor objects and kept on disk; `None` (the default) keeps them per object.
    fn cache_identity(&self) -> Option<String> {
        None
    }

    /// Partition `i` of `meta().partitions`, readable as a tensor of its own.
    fn partition(&self, i: usize) -> Result<Arc<dyn Tensor>, ModelError> {
        Err(ModelError::NotFound(format!("partition {i}")))
    }

    /// A string (or variant) tensor's elements.
    fn as_strings(&self) -> Option<&dyn Strings> {
        None
    }

    /// Stored entries (a sparse tensor, or one that keeps entries: Angel).
    fn as_sparse(&self) -> Option<&dyn Sparse> {
        None
    }

    /// Rows found by an id the reader knows (hash tables, Angel's feature ids); without it
    /// a 2-D tensor's rows are found by index (`rows::default_key_kind`).
    fn as_keyed(&self) -> Option<&dyn Keyed> {
        None
    }

    /// A checksum stored with the data, and reads that may defer checking it.
    fn as_checksummed(&self) -> Option<&dyn Checksummed> {
        None
    }
}

/// What a string tensor hands each element to, in order (the bytes of one element a call, as
/// a pass over a source hands its pieces).
pub type EachString<'a> = crate::source::Visit<'a>;

/// A string (or variant) tensor.
pub trait Strings: Tensor {
    /// Calls `f` with each element `first..first + count`.
    fn for_each_string(&self, ctx: &ReadCtx, first: u64, count: u64, f: EachString) -> ModelResult;
}

/// A tensor whose stored entries can be read (CSR order).
pub trait Sparse: Tensor {
    /// All the stored entries, in memory.
    fn sparse(&self) -> Result<Arc<SparseRows>, ModelError>;

    /// The row structure. Readers that know it without decoding entries (Angel: from the
    /// meta) say so with `sparse_shape_is_cheap`.
    fn sparse_shape(&self) -> Result<Arc<SparseShape>, ModelError> {
        let s = self.sparse()?;
        Ok(Arc::new(SparseShape {
            rows: s.rows.clone(),
            row_ptr: s.row_ptr.clone(),
        }))
    }

    /// True when `sparse_shape` reads no data (metadata only).
    fn sparse_shape_is_cheap(&self) -> bool {
        false
    }

    /// Appends entries `first..first + count` to `out`. Readers that can decode a range
    /// without the whole tensor override this (memory stays bounded).
    fn read_entries(
        &self,
        ctx: &ReadCtx,
        first: u64,
        count: u64,
        out: &mut Entries,
    ) -> Result<(), ModelError> {
        let _ = ctx;
        let es = self.meta().dtype.elem_size().unwrap_or(1);
        entries_in(&*self.sparse()?, es, first, count, out)
    }

    /// The index of the first entry of stored row `k` (`sparse_shape().rows[k]`) whose column
    /// is ≥ `col` (the row's end when none is).
    fn seek_col(&self, k: usize, col: i64) -> Result<u64, ModelError> {
        seek_col_in(&*self.sparse()?, k, col)
    }

    /// A matrix stored by column (a record per column holding a value per stored row): every
    /// stored value in columns `lo..hi` (`None`: unbounded), appended to `out` in any order,
    /// each record read once for all rows. `None` when the reader stores rows (read them by
    /// `seek_col` and `read_entries`).
    fn read_column_block(
        &self,
        ctx: &ReadCtx,
        lo: Option<i64>,
        hi: Option<i64>,
        out: &mut ColumnBlock,
    ) -> Option<Result<(), ModelError>> {
        let _ = (ctx, lo, hi, out);
        None
    }
}

/// The capability accessors of a `Tensor` impl whose type implements them: inside
/// `impl Tensor for T`, `capabilities!(as_sparse: Sparse, as_keyed: Keyed);` says `as_sparse`
/// and `as_keyed` are `Some(self)` (any of `Strings`, `Sparse`, `Keyed`, `Checksummed`).
#[macro_export]
macro_rules! capabilities {
    ($($method:ident: $cap:ident),+ $(,)?) => {
        $(fn $method(&self) -> Option<&dyn $crate::$cap> {
            Some(self)
        })+
    };
}

/// A tensor whose rows are found by an id of the reader's own.
pub trait Keyed: Tensor {
    /// What an id names, `None` when its rows have no ids after all.
    fn key_kind(&self) -> Option<KeyKind>;

    /// The ids of rows `first..first + out.len()` of a hash table (`KeyKind::HashKey`), in
    /// row order (`libsvm` labels its lines with them); `None` when rows have no stored ids.
    fn row_keys(&self, ctx: &ReadCtx, first: u64, out: &mut [i64]) -> Option<ModelResult> {
        let _ = (ctx, first, out);
        None
    }

    /// The ids and values (`values`: `ids.len()` rows' elements) of rows `first..` of a hash
    /// table at once, for a reader whose ids and values are read together (Monolith's
    /// entries); the default reads them apart. `None` when rows have no stored ids.
    fn read_rows(
        &self,
        ctx: &ReadCtx,
        first: u64,
        ids: &mut [i64],
        values: &mut [u8],
    ) -> Option<Result<(), ModelError>> {
        if let Err(e) = self.row_keys(ctx, first, ids)? {
            return Some(Err(e));
        }
        let width: u64 = self.meta().shape.get(1..).unwrap_or(&[]).iter().product();
        Some(read_elements(
            self,
            ctx,
            first.saturating_mul(width),
            values,
        ))
    }

    /// Appends the values of the row with id `id` to `out`: where it was, or `None` when no
    /// row has that id. Reads only what the row needs (a seek, not a scan).
    fn row_by_id(&self, id: i64, out: &mut Vec<u8>) -> Result<Option<RowHit>, ModelError> {
        match self.key_kind() {
            Some(kind) => rows::row_of(self, kind, id, out),
            None => Ok(None),
        }
    }

    /// The stored keys and values tensors of a hash table kept as one pair (row `i`: key `i`,
    /// values `i·width..`), for a reader of every row that reads them unverified and
    /// confirms their checksums itself (`TableScan::deferring`); `None`: rows are read
    /// through `read_rows`.
    fn key_value_tensors(&self) -> Option<(Arc<dyn Tensor>, Arc<dyn Tensor>)> {
        None
    }

    /// Numbers saved per row beside its values (a DeepRec EmbeddingVariable's `freq` and
    /// `version`), of the row `row_by_id` found at `position`.
    fn row_columns(&self, position: u64) -> Result<Vec<(&'static str, i64)>, ModelError> {
        let _ = position;
        Ok(Vec::new())
    }

    /// Stored ids that mark no row (a `DenseHashTable`'s empty and deleted keys, when its
    /// graph tells them): `row_by_id` finds none, a scan's reader leaves them out.
    fn sentinels(&self) -> &[i64] {
        &[]
    }

    /// This table told that `keys` mark no row; `None` for a table without such ids.
    fn with_sentinels(&self, keys: &[i64]) -> Option<Arc<dyn Tensor>> {
        let _ = keys;
        None
    }
}

/// A tensor stored with a checksum of its bytes.
pub trait Checksummed: Tensor {
    /// TF's masked CRC32C of exactly the bytes `read_elements` gives, when the source stores
    /// it (a little-endian TF bundle entry): a `.tf/` view's index then needs no data read.
    /// Reads still verify the stored bytes against it.
    fn stored_crc32c(&self) -> Option<u32> {
        None
    }

    /// For a caller that reads every byte of the tensor in any order of pieces (stats, diff):
    /// the masked CRC32C it may confirm itself from the bytes it reads, instead of the
    /// tensor's own checksum pass before its first read (one pass over the data, not two).
    /// `Some(crc)`: reads with `read_elements_unchecked` are not verified, and the caller
    /// must pass the CRC32C of all the bytes, in order, to `confirm_crc32c` before it uses
    /// anything it read. `None`: `read_elements` verifies as usual.
    fn deferred_crc32c(&self) -> Option<u32> {
        None
    }

    /// `fill_elements` without the checksum pass (see `deferred_crc32c`), called through
    /// `read_elements_unchecked`.
    fn fill_elements_unverified(&self, ctx: &ReadCtx, first: u64, out: &mut [u8]) -> ModelResult {
        self.fill_elements(ctx, first, out)
    }

    /// Runs of elements, each `out.len() / firsts.len()` bytes, from each of `firsts`
    /// (checked by the caller), as `fill_elements_unverified` reads one: for a reader of
    /// many short runs (rows), who pays a file's consistency check once, not per run.
    fn fill_runs_unverified(&self, ctx: &ReadCtx, firsts: &[u64], out: &mut [u8]) -> ModelResult {
        let run = out.len() / firsts.len().max(1);
        for (&first, o) in firsts.iter().zip(out.chunks_exact_mut(run.max(1))) {
            self.fill_elements_unverified(ctx, first, o)?;
        }
        Ok(())
    }

    /// The caller's CRC32C (unmasked) of all the tensor's bytes read with
    /// `read_elements_unchecked`: `Err` (the tensor's checksum fault) when it is not the
    /// stored one. The verdict is kept, as a checksum pass would keep it.
    fn confirm_crc32c(&self, crc: u32) -> Result<(), ModelError> {
        let _ = crc;
        Ok(())
    }
}

impl dyn Tensor + '_ {
    /// Fills `out` with elements `first..first + out.len() / elem_size` of a dense tensor with
    /// a fixed-size dtype, verifying the source checksum on first use. The one place a
    /// request is checked (width, whole elements, range) before any reader sees it.
    pub fn read_elements(&self, ctx: &ReadCtx, first: u64, out: &mut [u8]) -> ModelResult {
        read_elements(self, ctx, first, out)
    }

    /// `len` bytes of elements from `first` (checked as `read_elements` checks them): a view
    /// of the source's own buffer where it lends one (`Tensor::lend`), else a copy in a
    /// recycled buffer (`source::scratch`).
    pub fn read(&self, ctx: &ReadCtx, first: u64, len: usize) -> Result<Bytes, ModelError> {
        check_request(self.meta(), first, len)?;
        if let Some(got) = self.lend(ctx, first, len) {
            let got = got?;
            if got.len() == len {
                return Ok(got);
            }
            debug_assert!(false, "lent {} bytes of {len}", got.len());
        }
        let fill = |buf: &mut [u8]| self.fill_elements(ctx, first, buf).map(|()| len);
        crate::source::scratch::filled(len, fill)
    }

    /// `read_elements` without the checksum pass (see `Checksummed::deferred_crc32c`).
    pub fn read_elements_unchecked(
        &self,
        ctx: &ReadCtx,
        first: u64,
        out: &mut [u8],
    ) -> Result<(), ModelError> {
        check_request(self.meta(), first, out.len())?;
        match self.as_checksummed() {
            Some(c) => c.fill_elements_unverified(ctx, first, out),
            None => self.fill_elements(ctx, first, out),
        }
    }

    /// Runs of `out.len() / firsts.len()` bytes from each element of `firsts`, without the
    /// checksum pass (`read_elements_unchecked` of each, in one call).
    pub fn read_runs_unchecked(
        &self,
        ctx: &ReadCtx,
        firsts: &[u64],
        out: &mut [u8],
    ) -> Result<(), ModelError> {
        if firsts.is_empty() || out.len() % firsts.len() != 0 {
            return match out.is_empty() {
                true => Ok(()),
                false => Err(ModelError::data(
                    String::from_utf8_lossy(&self.meta().name),
                    format!(
                        "{} bytes are not {} runs of one length",
                        out.len(),
                        firsts.len()
                    ),
                )),
            };
        }
        let run = out.len() / firsts.len();
        for &first in firsts {
            check_request(self.meta(), first, run)?;
        }
        match self.as_checksummed() {
            Some(c) => c.fill_runs_unverified(ctx, firsts, out),
            None => {
                for (&first, o) in firsts.iter().zip(out.chunks_exact_mut(run.max(1))) {
                    self.fill_elements(ctx, first, o)?;
                }
                Ok(())
            }
        }
    }

    /// `Strings::for_each_string`; an error for a tensor of another dtype.
    pub fn for_each_string(
        &self,
        ctx: &ReadCtx,
        first: u64,
        count: u64,
        f: EachString<'_>,
    ) -> Result<(), ModelError> {
        match self.as_strings() {
            Some(s) => s.for_each_string(ctx, first, count, f),
            None => Err(ModelError::Request(RequestError::NotStrings(
                self.meta().dtype.name().into_owned(),
            ))),
        }
    }

    /// The stored entries' capability; an error for a tensor without entries.
    pub fn entries(&self) -> Result<&dyn Sparse, ModelError> {
        self.as_sparse()
            .ok_or_else(|| RequestError::NotSparse.into())
    }

    /// `Sparse::sparse`; an error for a tensor without entries.
    pub fn sparse(&self) -> Result<Arc<SparseRows>, ModelError> {
        self.entries()?.sparse()
    }

    /// `Sparse::sparse_shape`; an error for a tensor without entries.
    pub fn sparse_shape(&self) -> Result<Arc<SparseShape>, ModelError> {
        self.entries()?.sparse_shape()
    }

    /// `Sparse::sparse_shape_is_cheap`; false for a tensor without entries.
    pub fn sparse_shape_is_cheap(&self) -> bool {
        self.as_sparse().is_some_and(|s| s.sparse_shape_is_cheap())
    }

    /// What an id names in this tensor (`NAME.rows/`), `None` when its rows have no ids.
    pub fn key_kind(&self) -> Option<KeyKind> {
        match self.as_keyed() {
            Some(k) => k.key_kind(),
            None => default_key_kind(self.meta()),
        }
    }

    /// `Keyed::row_keys`; `None` for a tensor whose rows have no stored ids.
    pub fn row_keys(&self, ctx: &ReadCtx, first: u64, out: &mut [i64]) -> Option<ModelResult> {
        self.as_keyed()?.row_keys(ctx, first, out)
    }

    /// The values of the row with id `id` (see `Keyed::row_by_id`); rows by index for a
    /// tensor without ids of its own.
    pub fn row_by_id(&self, id: i64, out: &mut Vec<u8>) -> Result<Option<RowHit>, ModelError> {
        if let Some(k) = self.as_keyed() {
            return k.row_by_id(id, out);
        }
        match default_key_kind(self.meta()) {
            Some(kind) => rows::row_of(self, kind, id, out),
            None => Ok(None),
        }
    }

    /// `Keyed::row_columns`; none for a tensor without ids of its own.
    pub fn row_columns(&self, position: u64) -> Result<Vec<(&'static str, i64)>, ModelError> {
        match self.as_keyed() {
            Some(k) => k.row_columns(position),
            None => Ok(Vec::new()),
        }
    }

    /// `Checksummed::stored_crc32c`.
    pub fn stored_crc32c(&self) -> Option<u32> {
        self.as_checksummed()?.stored_crc32c()
    }

    /// `Checksummed::deferred_crc32c`.
    pub fn deferred_crc32c(&self) -> Option<u32> {
        self.as_checksummed()?.deferred_crc32c()
    }

    /// `Checksummed::confirm_crc32c`; nothing to confirm without a stored checksum.
    pub fn confirm_crc32c(&self, crc: u32) -> Result<(), ModelError> {
        match self.as_checksummed() {
            Some(c) => c.confirm_crc32c(crc),
            None => Ok(()),
        }
    }
}

/// `read_elements` of any tensor type (the method is on `dyn Tensor`).
pub fn read_elements<T: Tensor + ?Sized>(
    t: &T,
    ctx: &ReadCtx,
    first: u64,
    out: &mut [u8],
) -> Result<(), ModelError> {
    check_request(t.meta(), first, out.len())?;
    t.fill_elements(ctx, first, out)
}

/// Whether `len` bytes of elements from `first` are a request a tensor of `meta` can serve:
/// a fixed-width dtype, whole elements, within the tensor. A tensor with a known problem and
/// no width passes, as does one of a dtype not decoded (its note): its reader reports the
/// problem or the note, naming the file.
pub(crate) fn check_request(meta: &TensorMeta, first: u64, len: usize) -> Result<(), ModelError> {
    let Some(elem) = meta.dtype.elem_size() else {
        return match (&meta.problem, &meta.note) {
            (None, None) => Err(RequestError::NoFixedSize(meta.dtype.name().into_owned()).into()),
            _ => Ok(()),
        };
    };
    if len % elem != 0 {
        return Err(RequestError::PartialElement { len, elem }.into());
    }
    let count = (len / elem) as u64;
    let total = meta.num_elements().unwrap_or(u64::MAX);
    Ok(RequestError::within(first, count, total)?)
}

/// In debug builds, asserts what `read_elements` checked before calling `fill_elements`.
pub fn debug_check(meta: &TensorMeta, first: u64, len: usize) {
    debug_assert!(
        check_request(meta, first, len).is_ok(),
        "{}: unchecked request of {len} bytes from element {first}",
        String::from_utf8_lossy(&meta.name)
    );
}

/// A tensor with other metadata (names a reader learnt besides the tensor's own: TF2 full
/// names); everything else is the inner tensor's.
pub struct WithMeta {
    pub inner: Arc<dyn Tensor>,
    pub meta: TensorMeta,
}

impl Tensor for WithMeta {
    fn meta(&self) -> &TensorMeta {
        &self.meta
    }
    fn fill_elements(&self, ctx: &ReadCtx, first: u64, out: &mut [u8]) -> Result<(), ModelError> {
        self.inner.read_elements(ctx, first, out)
    }
    fn lend(&self, ctx: &ReadCtx, first: u64, len: usize) -> Option<Result<Bytes, ModelError>> {
        self.inner.lend(ctx, first, len)
    }
    fn stored_run(&self) -> Option<StoredRun> {
        self.inner.stored_run()
    }
    fn cache_identity(&self) -> Option<String> {
        self.inner.cache_identity()
    }
    fn partition(&self, i: usize) -> Result<Arc<dyn Tensor>, ModelError> {
        self.inner.partition(i)
    }
    fn as_strings(&self) -> Option<&dyn Strings> {
        self.inner.as_strings()
    }
    fn as_sparse(&self) -> Option<&dyn Sparse> {
        self.inner.as_sparse()
    }
    fn as_keyed(&self) -> Option<&dyn Keyed> {
        self.inner.as_keyed()
    }
    fn as_checksummed(&self) -> Option<&dyn Checksummed> {
        self.inner.as_checksummed()
    }
}
