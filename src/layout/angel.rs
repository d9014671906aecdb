//! Encoders for Angel's eight formats as layouts (SPEC §3 "Angel layouts",
//! formats/angel.md §6–§8), for every tensor of every source.
//!
//! - Binary formats have fixed-size records: the size is arithmetic and a read at any offset
//!   renders only the records it touches.
//! - Text formats are indexed by chunks of records: the first `size()` renders every chunk
//!   once to learn its byte length (prefix sums kept, 8 bytes per chunk); a read renders the
//!   chunks it touches. The last rendered chunk is kept for sequential readers.
//! - Availability (`open` returns `None`): dtypes without an Angel value type (complex,
//!   string, float8, opaque); Value formats for sparse tensors; `RowIdColIdValueBinary` when
//!   a row id does not fit its 4 bytes; column formats of a sparse tensor whose dense form
//!   (`rows × cols × width`) exceeds `max_dense`.
//! - Column ids are 4 bytes unless the column count exceeds 2^31−1 (then 8).
//! - The decoders in `crate::angel` share no code with this module; the round-trip tests
//!   decode these bytes with them.

mod encode;
mod java;

use std::sync::{Arc, Mutex, OnceLock};

use super::{AngelFormat, FileContent, LayoutCtx, LayoutError};
use crate::model::Tensor;
pub use encode::AngelValue;
use encode::{Columns, Data, Encoder};

/// Target rendered size of one text chunk.
const CHUNK_BYTES: u64 = 64 << 10;

/// The content of Angel format `format` for `tensor`, or `None` if it cannot represent it.
pub fn open(
    format: AngelFormat,
    tensor: Arc<dyn Tensor>,
    ctx: &Arc<LayoutCtx>,
) -> Option<Arc<dyn FileContent>> {
    let meta = tensor.meta();
    let value = AngelValue::of(meta.dtype)?;
    meta.dtype.elem_size()?;
    let is_value = matches!(format, AngelFormat::ValueText | AngelFormat::ValueBinary);
    let is_column = matches!(format, AngelFormat::TextColumn | AngelFormat::BinaryColumn);
    let (rows, cols) = if meta.sparse {
        match meta.shape[..] {
            [r, c] => (r, c),
            _ => meta.rows_cols()?,
        }
    } else {
        meta.rows_cols()?
    };
    if meta.sparse && is_value {
        return None;
    }
    if format == AngelFormat::RowIdColIdValueBinary && rows > i32::MAX as u64 + 1 {
        return None;
    }
    if meta.sparse && is_column {
        let dense = rows.checked_mul(cols)?.checked_mul(value.width() as u64)?;
        if dense > ctx.max_dense {
            return None;
        }
    }
    if !meta.sparse {
        rows.checked_mul(cols)?;
    }
    let key_width = if cols > i32::MAX as u64 { 8 } else { 4 };
    let file = AngelFile {
        format,
        value,
        rows,
        cols,
        key_width,
        sep: ctx.sep.as_bytes().to_vec(),
        tensor,
        encoder: OnceLock::new(),
        index: OnceLock::new(),
        last: Mutex::new(None),
    };
    Some(Arc::new(file))
}

struct AngelFile {
    format: AngelFormat,
    value: AngelValue,
    rows: u64,
    cols: u64,
    key_width: usize,
    sep: Vec<u8>,
    tensor: Arc<dyn Tensor>,
    /// Built on first use (sparse tensors decode their entries then).
    encoder: OnceLock<Result<Arc<Encoder>, String>>,
    /// Text: records per chunk and the byte offset where each chunk starts (plus the total).
    index: OnceLock<Result<Arc<(u64, Vec<u64>)>, String>>,
    last: Mutex<Option<(usize, Arc<Vec<u8>>)>>,
}

fn other(e: impl ToString) -> LayoutError {
    LayoutError::Other(e.to_string())
}

impl AngelFile {
    fn encoder(&self) -> Result<Arc<Encoder>, LayoutError> {
        self.encoder
            .get_or_init(|| {
                let data = if self.tensor.meta().sparse {
                    let rows = self.tensor.sparse().map_err(|e| e.to_string())?;
                    let columns = matches!(
                        self.format,
                        AngelFormat::TextColumn | AngelFormat::BinaryColumn
                    )
                    .then(|| Arc::new(Columns::build(&rows)));
                    if rows.rows.iter().any(|&r| r > i32::MAX as u64)
                        && self.format == AngelFormat::RowIdColIdValueBinary
                    {
                        return Err("row id does not fit 4 bytes".to_string());
                    }
                    Data::Sparse { rows, columns }
                } else {
                    Data::Dense(self.tensor.clone())
                };
                Ok(Arc::new(Encoder {
                    format: self.format,
                    dtype: self.tensor.meta().dtype,
                    value: self.value,
                    rows: self.rows,
                    cols: self.cols,
                    key_width: self.key_width,
                    sep: self.sep.clone(),
                    data,
                }))
            })
            .clone()
            .map_err(other)
    }

    /// Text: (records per chunk, chunk start offsets + total), rendering every chunk once.
    fn index(&self, enc: &Encoder) -> Result<Arc<(u64, Vec<u64>)>, LayoutError> {
        self.index
            .get_or_init(|| {
                let n = enc.records();
                let per = records_per_chunk(enc);
                // The count comes from the shape, which a corrupt source can make huge:
                // reserve a bounded amount and let rendering (which fails first) grow it.
                let mut starts = Vec::with_capacity((n / per + 2).min(1 << 16) as usize);
                let mut at = 0u64;
                let mut buf = Vec::new();
                let mut first = 0;
                while first < n {
                    starts.push(at);
                    buf.clear();
                    let k = per.min(n - first);
                    enc.render(first, k, &mut buf).map_err(|e| e.to_string())?;
                    at += buf.len() as u64;
                    first += k;
                }
                starts.push(at);
                Ok(Arc::new((per, starts)))
            })
            .clone()
            .map_err(other)
    }

    fn chunk(&self, enc: &Encoder, per: u64, i: usize) -> Result<Arc<Vec<u8>>, LayoutError> {
        if let Some((j, c)) = &*self.last.lock().unwrap_or_else(|e| e.into_inner()) {
            if *j == i {
                return Ok(c.clone());
            }
        }
        let first = i as u64 * per;
        let mut buf = Vec::new();
        enc.render(first, per.min(enc.records() - first), &mut buf)?;
        let c = Arc::new(buf);
        *self.last.lock().unwrap_or_else(|e| e.into_inner()) = Some((i, c.clone()));
        Ok(c)
    }
}

/// Records per text chunk, aiming at `CHUNK_BYTES` (a column record holds one value per row).
fn records_per_chunk(enc: &Encoder) -> u64 {
    let per_record = if enc.is_column() {
        (enc.rows.max(1)).saturating_mul(12)
    } else {
        24
    };
    (CHUNK_BYTES / per_record).max(1)
}

impl FileContent for AngelFile {
    fn size(&self) -> Result<u64, LayoutError> {
        let enc = self.encoder()?;
        match enc.record_size() {
            Some(rec) => enc
                .records()
                .checked_mul(rec)
                .ok_or_else(|| other("file size overflows")),
            None => Ok(*self.index(&enc)?.1.last().unwrap_or(&0)),
        }
    }

    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize, LayoutError> {
        let enc = self.encoder()?;
        let size = self.size()?;
        if offset >= size || buf.is_empty() {
            return Ok(0);
        }
        let want = (buf.len() as u64).min(size - offset) as usize;
        match enc.record_size() {
            Some(rec) => {
                let first = offset / rec;
                let last = (offset + want as u64).div_ceil(rec);
                let mut tmp = Vec::with_capacity(((last - first) * rec) as usize);
                enc.render(first, last - first, &mut tmp)?;
                let skip = (offset - first * rec) as usize;
                buf[..want].copy_from_slice(&tmp[skip..skip + want]);
            }
            None => {
                let index = self.index(&enc)?;
                let (per, starts) = (&index.0, &index.1);
                let mut done = 0;
                while done < want {
                    let pos = offset + done as u64;
                    let i = starts.partition_point(|&s| s <= pos) - 1;
                    let c = self.chunk(&enc, *per, i)?;
                    let skip = (pos - starts[i]) as usize;
                    let n = (c.len() - skip).min(want - done);
                    buf[done..done + n].copy_from_slice(&c[skip..skip + n]);
                    done += n;
                }
            }
        }
        Ok(want)
    }
}

#[cfg(test)]
mod tests;
