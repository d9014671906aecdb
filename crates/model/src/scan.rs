//! A keyed tensor read whole as (id, row) pairs, piece by piece: what `diff --rows`, `check`
//! and the CSR view need of every kind of table (`row_by_id` is one row; this is all of
//! them, in stored order, each piece readable on its own so that all cores take part).
//!
//! Per key kind (`KeyKind`):
//! - `HashKey`, `RowIndex`: a piece is a range of stored rows; ids are the saved keys (a
//!   hash table's `row_keys`) or the row numbers.
//! - `RowId`: a piece is a range of stored rows of a sparse matrix, each shown dense.
//! - `ColumnId`: a piece is a range of column ids, cut at every `n`-th entry of the longest
//!   stored row; each row's entries in it are found by `seek_col` and merged by column.
//!
//! Invariants: a piece's batch holds `ids.len()` rows of `width` elements each, the positions
//! `row` takes back; the pieces together hold every row exactly once.

use std::sync::Arc;

use super::rows::{sparse_column, sparse_row, MAX_ROW_BYTES};
use super::{
    ColumnBlock, Crc, DType, Entries, KeyKind, ModelError, RequestError, SparseShape, Tensor,
};
use crate::source::ReadCtx;

/// Bytes of row values a piece holds, about.
const PIECE_BYTES: u64 = 4 << 20;
/// Rows a piece holds at most: narrow rows make pieces of many rows, and a scan's consumer
/// keeps a few words per row of a piece (ids, positions, fingerprints).
const PIECE_ROWS: u64 = 1 << 16;
/// Stored rows a `ColumnId` table may have: each is a cursor of the merge.
const MAX_MERGED_ROWS: usize = 1 << 16;

/// Rows read from one piece.
#[derive(Default)]
pub struct Batch {
    pub ids: Vec<i64>,
    /// Where each row is, for `TableScan::row`.
    pub positions: Vec<u64>,
    /// `ids.len() × width` elements, little-endian.
    values: Vec<u8>,
    /// Of a deferring scan: the CRC32Cs of the keys' and the values' stored bytes read by
    /// the pieces since the last `take_crcs`, in the order read.
    crcs: [Crc; 2],
    raw_keys: Vec<u8>,
    entries: Entries,
    block: ColumnBlock,
    merged: Vec<(i64, u32, u32)>,
}

impl Batch {
    /// Empties the batch; `values` keeps its length (overwritten or cleared by its reader:
    /// zeroing 4 MiB a piece for nothing cost as much as reading it).
    fn clear(&mut self) {
        self.ids.clear();
        self.positions.clear();
    }

    /// The checksums of what was read since the last call (`TableScan::deferring`).
    pub fn take_crcs(&mut self) -> [Crc; 2] {
        std::mem::take(&mut self.crcs)
    }

    /// `ids.len() × width` elements, little-endian.
    pub fn values(&self) -> &[u8] {
        &self.values
    }

    /// The values, taken out of the batch (one that is not read into again).
    pub fn take_values(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.values)
    }
}

/// Entries of its longest stored row a `ColumnId` piece takes, of a table of `width` stored
/// rows. A piece's entries of all rows are held several times over while merged (columns,
/// rows, values, their order): about 32 bytes an entry.
fn column_piece_entries(width: u64) -> u64 {
    (PIECE_BYTES / (width.max(1) * 32)).clamp(1024, PIECE_ROWS)
}

/// Stored little-endian keys of `width` bytes (4 or 8), widened into `out`.
pub fn keys_from_le(raw: &[u8], width: usize, out: &mut [i64]) {
    debug_assert_eq!(raw.len(), out.len() * width);
    match width {
        8 => {
            for (o, b) in out.iter_mut().zip(raw.chunks_exact(8)) {
                *o = i64::from_le_bytes(b.try_into().expect("8 bytes"));
            }
        }
        _ => {
            for (o, b) in out.iter_mut().zip(raw.chunks_exact(4)) {
                *o = i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as i64;
            }
        }
    }
}

/// `v` as `len` bytes, to be overwritten whole (only what it grows by is zeroed).
fn to_fill(v: &mut Vec<u8>, len: usize) -> &mut [u8] {
    v.resize(len, 0);
    v
}

/// A keyed tensor's rows, ready to be read piece by piece.
pub struct TableScan {
    t: Arc<dyn Tensor>,
    kind: KeyKind,
    width: u64,
    es: usize,
    /// Rows (`HashKey`, `RowIndex`, `RowId`); 0 for `ColumnId`.
    rows: u64,
    rows_per_piece: u64,
    shape: Option<Arc<SparseShape>>,
    /// `ColumnId`: the first column of each piece after the first.
    bounds: Vec<i64>,
    /// A hash table's stored keys and values, when it is one pair of them.
    deferred: Option<Deferred>,
}

/// The stored tensors of a hash table kept as one pair (`Keyed::key_value_tensors`): its keys
/// can be read alone (`read_piece_keys`), and all of it unverified (`deferring`).
struct Deferred {
    keys: Arc<dyn Tensor>,
    values: Arc<dyn Tensor>,
    /// Bytes of a stored key: 4 or 8.
    key_width: usize,
    /// Read without checksum passes, the checksums confirmed by the caller (`deferring`).
    unverified: bool,
}

impl TableScan {
    /// The scan of `t`'s rows; `None` when its rows have no ids.
    pub fn new(t: Arc<dyn Tensor>) -> Result<Option<TableScan>, ModelError> {
        let Some(kind) = t.key_kind() else {
            return Ok(None);
        };
        let meta = t.meta();
        let name = || String::from_utf8_lossy(&meta.name).into_owned();
        if let Some(p) = &meta.problem {
            return Err(ModelError::data(name(), p.clone()));
        }
        let es = meta
            .dtype
            .elem_size()
            .ok_or_else(|| RequestError::NoFixedSize(meta.dtype.name().into_owned()))?;
        let mut scan = TableScan {
            kind,
            width: 0,
            es,
            rows: 0,
            rows_per_piece: 1,
            shape: None,
            bounds: Vec::new(),
            deferred: None,
            t: t.clone(),
        };
        match kind {
            KeyKind::HashKey | KeyKind::RowIndex => {
                scan.rows = meta.shape.first().copied().unwrap_or(0);
                scan.width = meta.shape.get(1..).unwrap_or(&[]).iter().product();
            }
            KeyKind::RowId => {
                let shape = t.sparse_shape()?;
                scan.rows = shape.rows.len() as u64;
                scan.width = meta.shape.get(1).copied().unwrap_or(0);
                scan.shape = Some(shape);
            }
            KeyKind::ColumnId => {
                let shape = t.sparse_shape()?;
                if shape.rows.len() > MAX_MERGED_ROWS {
                    return Err(ModelError::data(
                        name(),
                        format!(
                            "{} stored rows: more than {MAX_MERGED_ROWS} to read by column",
                            shape.rows.len()
                        ),
                    ));
                }
                scan.width = shape.rows.len() as u64;
                scan.shape = Some(shape);
            }
        }
        let row_bytes = scan.width.saturating_mul(es as u64);
        if row_bytes > MAX_ROW_BYTES {
            return Err(RequestError::RowTooWide {
                width: scan.width,
                max: MAX_ROW_BYTES,
            }
            .into());
        }
        scan.rows_per_piece = (PIECE_BYTES / row_bytes.max(1)).clamp(1, PIECE_ROWS);
        if kind == KeyKind::ColumnId {
            scan.bounds = scan.column_bounds()?;
            // A piece's columns number at most its entries of the longest row.
            scan.rows_per_piece = column_piece_entries(scan.width);
        }
        if kind == KeyKind::HashKey {
            scan.deferred = Self::pair(&scan.t, scan.rows);
        }
        Ok(Some(scan))
    }

    /// The same scan, reading a hash table's stored keys and values without their checksum
    /// passes where it can (one pass over the bytes, not two): a batch then keeps the
    /// CRC32Cs of what it read (`Batch::take_crcs`), and the caller must hand `confirm` those
    /// of all pieces, combined in piece order, before it uses anything read.
    pub fn deferring(mut self) -> TableScan {
        if let Some(d) = &mut self.deferred {
            d.unverified =
                d.keys.deferred_crc32c().is_some() && d.values.deferred_crc32c().is_some();
        }
        self
    }

    /// A hash table's stored keys and values, when they are one pair of whole tensors.
    fn pair(t: &Arc<dyn Tensor>, rows: u64) -> Option<Deferred> {
        let (keys, values) = t.as_keyed()?.key_value_tensors()?;
        let key_width = match keys.meta().dtype {
            DType::I32 => 4,
            DType::I64 => 8,
            _ => return None,
        };
        let whole = keys.meta().shape.first() == Some(&rows)
            && values.meta().shape == t.meta().shape
            && values.meta().dtype == t.meta().dtype;
        whole.then_some(Deferred {
            keys,
            values,
            key_width,
            unverified: false,
        })
    }

    /// Whether reads skip the checksum passes (`deferring`).
    #[cfg(any(test, feature = "testkit"))]
    pub fn is_deferring(&self) -> bool {
        self.deferred.as_ref().is_some_and(|d| d.unverified)
    }

    /// Whether the keys can be read alone (`read_piece_keys`): a hash table kept as one pair
    /// of stored keys and values.
    pub fn keys_apart(&self) -> bool {
        self.deferred.is_some()
    }

    /// The ids of piece `k`, without its values, and the position of the first (`ids[i]` is
    /// at `first + i`; `positions` is left empty), of a scan whose keys read apart. A
    /// deferring scan reads them unverified (a caller that confirmed them once, `confirm`,
    /// reads them again).
    pub fn read_piece_keys(&self, k: usize, out: &mut Batch) -> Result<u64, ModelError> {
        out.clear();
        let Some(d) = &self.deferred else {
            return Err(self.error("keys read apart from a table that keeps them in its rows"));
        };
        let first = k as u64 * self.rows_per_piece;
        let n = self.rows_per_piece.min(self.rows.saturating_sub(first));
        out.ids.resize(n as usize, 0);
        let raw = to_fill(&mut out.raw_keys, n as usize * d.key_width);
        match d.unverified {
            true => d
                .keys
                .read_elements_unchecked(ReadCtx::none(), first, raw)?,
            false => d.keys.read_elements(ReadCtx::none(), first, raw)?,
        }
        keys_from_le(raw, d.key_width, &mut out.ids);
        Ok(first)
    }

    /// The keys' and values' CRC32Cs of every piece, in piece order, of a deferring scan:
    /// `Err` when either is not the stored one. Nothing to confirm otherwise.
    pub fn confirm(&self, crcs: [Crc; 2]) -> Result<(), ModelError> {
        match self.deferred.as_ref().filter(|d| d.unverified) {
            Some(d) => {
                d.keys.confirm_crc32c(crcs[0].value())?;
                d.values.confirm_crc32c(crcs[1].value())
            }
            None => Ok(()),
        }
    }

    pub fn tensor(&self) -> &Arc<dyn Tensor> {
        &self.t
    }

    /// Ids that mark no row (`Keyed::sentinels`): a reader of pieces leaves them out.
    pub fn sentinels(&self) -> &[i64] {
        self.t.as_keyed().map_or(&[], |k| k.sentinels())
    }

    pub fn kind(&self) -> KeyKind {
        self.kind
    }

    pub fn dtype(&self) -> DType {
        self.t.meta().dtype
    }

    /// Elements per row.
    pub fn width(&self) -> u64 {
        self.width
    }

    /// Bytes per row.
    pub fn row_bytes(&self) -> usize {
        self.width as usize * self.es
    }

    /// The rows a scan gives, when known before it (all but `ColumnId`).
    pub fn rows(&self) -> Option<u64> {
        (self.kind != KeyKind::ColumnId).then_some(self.rows)
    }

    /// Rows a piece gives at most (a `ColumnId` piece: about as many).
    pub fn rows_per_piece(&self) -> u64 {
        self.rows_per_piece
    }

    pub fn pieces(&self) -> usize {
        match self.kind {
            KeyKind::ColumnId => self.bounds.len() + 1,
            _ => self.rows.div_ceil(self.rows_per_piece) as usize,
        }
    }

    /// The rows of piece `k` (`k < pieces()`), replacing what `out` held.
    pub fn read_piece(&self, k: usize, out: &mut Batch) -> Result<(), ModelError> {
        out.clear();
        if self.kind == KeyKind::ColumnId {
            return self.read_columns(k, out);
        }
        let first = k as u64 * self.rows_per_piece;
        let n = self.rows_per_piece.min(self.rows.saturating_sub(first));
        out.positions.extend(first..first + n);
        match self.kind {
            KeyKind::HashKey => {
                out.ids.resize(n as usize, 0);
                if let Some(d) = self.deferred.as_ref().filter(|d| d.unverified) {
                    return self.read_deferred(d, first, n, out);
                }
                let Some(keyed) = self.t.as_keyed() else {
                    return Err(self.error("a hash table without stored keys"));
                };
                let len = n as usize * self.row_bytes();
                let values = to_fill(&mut out.values, len);
                match keyed.read_rows(ReadCtx::none(), first, &mut out.ids, values) {
                    Some(r) => r,
                    None => Err(self.error("a hash table without stored keys")),
                }
            }
            KeyKind::RowIndex => {
                out.ids.extend((first..first + n).map(|r| r as i64));
                self.read_dense(first, n, out)
            }
            _ => {
                out.values.clear();
                let sparse = self.t.entries()?;
                let shape = self.shape.as_ref().expect("RowId has a shape");
                for k in first..first + n {
                    let id = i64::try_from(shape.rows[k as usize])
                        .map_err(|_| self.error("a row id past i64"))?;
                    if sparse_row(sparse, id, &mut out.values)?.is_none() {
                        return Err(self.error("a stored row not found again"));
                    }
                    out.ids.push(id);
                }
                Ok(())
            }
        }
    }

    /// Appends the values of the row at `position` with id `id` (a batch's) to `out`.
    pub fn row(&self, position: u64, id: i64, out: &mut Vec<u8>) -> Result<(), ModelError> {
        match self.kind {
            KeyKind::HashKey | KeyKind::RowIndex => {
                let at = out.len();
                out.resize(at + self.row_bytes(), 0);
                let first = position
                    .checked_mul(self.width)
                    .ok_or_else(|| self.error("a row position overflows"))?;
                self.t.read_elements(ReadCtx::none(), first, &mut out[at..])
            }
            KeyKind::RowId => match sparse_row(self.t.entries()?, id, out)? {
                Some(_) => Ok(()),
                None => Err(self.error("a stored row not found again")),
            },
            KeyKind::ColumnId => match sparse_column(self.t.entries()?, id, out)? {
                Some(_) => Ok(()),
                None => Err(self.error("a stored column not found again")),
            },
        }
    }

    /// The rows at `positions` (a batch's), into `out` one after another (replacing what it
    /// held): one call for many rows where the rows' tensor reads them so.
    pub fn rows_at(&self, positions: &[u64], out: &mut Vec<u8>) -> Result<(), ModelError> {
        out.clear();
        if !matches!(self.kind, KeyKind::HashKey | KeyKind::RowIndex) {
            return Err(self.error("rows by position of a table found by id"));
        }
        let Some(d) = self.deferred.as_ref().filter(|d| d.unverified) else {
            for &p in positions {
                self.row(p, 0, out)?; // (the id is for tables found by id)
            }
            return Ok(());
        };
        let firsts: Vec<u64> = positions
            .iter()
            .map(|&p| p.checked_mul(self.width))
            .collect::<Option<_>>()
            .ok_or_else(|| self.error("a row position overflows"))?;
        let len = positions.len() * self.row_bytes();
        d.values
            .read_runs_unchecked(ReadCtx::none(), &firsts, to_fill(out, len))
    }

    fn error(&self, what: &str) -> ModelError {
        ModelError::data(
            String::from_utf8_lossy(&self.t.meta().name),
            what.to_string(),
        )
    }

    /// Rows `first..first + n` of a deferring scan: stored bytes read unverified, their
    /// checksums into the batch.
    fn read_deferred(
        &self,
        d: &Deferred,
        first: u64,
        n: u64,
        out: &mut Batch,
    ) -> Result<(), ModelError> {
        let raw = to_fill(&mut out.raw_keys, n as usize * d.key_width);
        d.keys
            .read_elements_unchecked(ReadCtx::none(), first, raw)?;
        out.crcs[0].add(raw);
        keys_from_le(raw, d.key_width, &mut out.ids);
        let values = to_fill(&mut out.values, n as usize * self.row_bytes());
        d.values
            .read_elements_unchecked(ReadCtx::none(), first * self.width, values)?;
        out.crcs[1].add(values);
        Ok(())
    }

    fn read_dense(&self, first: u64, n: u64, out: &mut Batch) -> Result<(), ModelError> {
        let values = to_fill(&mut out.values, n as usize * self.row_bytes());
        // first + n ≤ rows, so (first + n) · width elements exist.
        self.t
            .read_elements(ReadCtx::none(), first * self.width, values)
    }

    /// Piece boundaries of a `ColumnId` table: the column of every `n`-th entry of its
    /// longest stored row, so a piece holds at most `n` entries of any row no longer than it.
    fn column_bounds(&self) -> Result<Vec<i64>, ModelError> {
        let shape = self.shape.as_ref().expect("ColumnId has a shape");
        let Some(longest) = (0..shape.rows.len())
            .max_by_key(|&r| shape.row_ptr[r + 1].saturating_sub(shape.row_ptr[r]))
        else {
            return Ok(Vec::new());
        };
        let (start, end) = (shape.row_ptr[longest], shape.row_ptr[longest + 1]);
        let per = column_piece_entries(self.width);
        let sparse = self.t.entries()?;
        let mut got = Entries::default();
        let mut bounds = Vec::new();
        let mut e = start.saturating_add(per);
        while e < end {
            got.clear();
            sparse.read_entries(ReadCtx::none(), e, 1, &mut got)?;
            let col = *got
                .cols
                .first()
                .ok_or_else(|| self.error("an entry not read"))?;
            if bounds.last().is_some_and(|&b| b >= col) {
                return Err(self.error("columns of a row do not ascend"));
            }
            bounds.push(col);
            e += per;
        }
        Ok(bounds)
    }

    /// Piece `k` of a `ColumnId` table: columns `bounds[k-1]..bounds[k]`, each a row of one
    /// value per stored row (zero where that row does not store it).
    fn read_columns(&self, k: usize, out: &mut Batch) -> Result<(), ModelError> {
        out.values.clear();
        let shape = self.shape.as_ref().expect("ColumnId has a shape");
        let sparse = self.t.entries()?;
        let lo = k.checked_sub(1).map(|i| self.bounds[i]);
        let hi = self.bounds.get(k).copied();
        let es = self.es;
        let (entries, merged) = (&mut out.entries, &mut out.merged);
        entries.clear();
        merged.clear();
        let block = &mut out.block;
        block.clear();
        if let Some(read) = sparse.read_column_block(ReadCtx::none(), lo, hi, block) {
            // Stored by column: each record read once for all rows.
            read?;
            if block.values.len() != block.cols.len() * es || block.rows.len() != block.cols.len() {
                return Err(self.error("column values without their rows"));
            }
            if block.rows.iter().any(|&r| r as usize >= shape.rows.len()) {
                return Err(self.error("a column value of no stored row"));
            }
            merged.extend((0..block.cols.len()).map(|i| (block.cols[i], block.rows[i], i as u32)));
            gather(
                merged,
                &block.values,
                self.row_bytes(),
                es,
                &mut out.ids,
                &mut out.positions,
                &mut out.values,
            );
            return Ok(());
        }
        for r in 0..shape.rows.len() {
            let s = match lo {
                Some(c) => sparse.seek_col(r, c)?,
                None => shape.row_ptr[r],
            };
            let e = match hi {
                Some(c) => sparse.seek_col(r, c)?,
                None => shape.row_ptr[r + 1],
            };
            if e < s || e > shape.row_ptr[r + 1] {
                return Err(self.error("a column seek outside its row"));
            }
            let at = entries.cols.len();
            sparse.read_entries(ReadCtx::none(), s, e - s, entries)?;
            if entries.values.len() != entries.cols.len() * es {
                return Err(self.error("entries without their values"));
            }
            merged.extend((at..entries.cols.len()).map(|i| (entries.cols[i], r as u32, i as u32)));
        }
        gather(
            merged,
            &entries.values,
            self.row_bytes(),
            es,
            &mut out.ids,
            &mut out.positions,
            &mut out.values,
        );
        Ok(())
    }
}

/// The rows of a `ColumnId` piece from its values: `merged` holds (column, stored row, value
/// index into `values`) of each; a row per column, ascending, zero where a row lacks it.
fn gather(
    merged: &mut [(i64, u32, u32)],
    values: &[u8],
    row: usize,
    es: usize,
    ids: &mut Vec<i64>,
    positions: &mut Vec<u64>,
    out: &mut Vec<u8>,
) {
    merged.sort_unstable();
    for (i, &(col, r, e)) in merged.iter().enumerate() {
        if i == 0 || merged[i - 1].0 != col {
            ids.push(col);
            positions.push(col as u64);
            let at = out.len();
            out.resize(at + row, 0);
        }
        let base = out.len() - row + r as usize * es;
        let e = e as usize * es;
        out[base..base + es].copy_from_slice(&values[e..e + es]);
    }
}
