//! The four binary formats: fixed-size big-endian records, so the size is arithmetic and a
//! read at any offset renders only the records (row formats) or column items (column
//! formats) it touches. No cache: rendering a few records costs less than a lookup.

use super::records::{Item, Records};
use crate::source::ReadCtx;
use crate::{AngelFormat, FileContent, LayoutError, Requester};
use bytes::Bytes;

pub(crate) struct AngelBinary {
    format: AngelFormat,
    records: Records,
    key_width: u64,
    value_width: u64,
    /// Bytes of one record (row formats) or one column record (`key + k × value`).
    record: u64,
    size: u64,
}

impl AngelBinary {
    /// `None` when the size overflows (a shape no real tensor has).
    pub(crate) fn new(
        format: AngelFormat,
        records: Records,
        key_width: usize,
    ) -> Option<AngelBinary> {
        let (k, v) = (key_width as u64, records.value.width() as u64);
        let (record, count) = match format {
            AngelFormat::ValueBinary => (v, records.row_records()),
            AngelFormat::ColIdValueBinary => (k + v, records.row_records()),
            AngelFormat::RowIdColIdValueBinary => (4 + k + v, records.row_records()),
            AngelFormat::BinaryColumn => (
                records.column_rows().checked_mul(v)?.checked_add(k)?,
                records.column_records(),
            ),
            _ => return None,
        };
        Some(AngelBinary {
            format,
            key_width: k,
            value_width: v,
            record,
            size: count.checked_mul(record)?,
            records,
        })
    }

    fn key(&self, col: i64, out: &mut Vec<u8>) {
        if self.key_width == 4 {
            out.extend_from_slice(&(col as i32).to_be_bytes());
        } else {
            out.extend_from_slice(&col.to_be_bytes());
        }
    }

    /// Renders the records holding bytes `from..to`; returns the byte offset of `out[0]`.
    fn render_rows(
        &self,
        ctx: &ReadCtx,
        from: u64,
        to: u64,
        out: &mut Vec<u8>,
    ) -> Result<u64, LayoutError> {
        let first = from / self.record;
        let last = to.div_ceil(self.record);
        out.reserve(((last - first) * self.record) as usize);
        let format = self.format;
        self.records
            .for_each_row_record(ctx, first, last - first, |row, col, v| {
                if format == AngelFormat::RowIdColIdValueBinary {
                    // `open` refuses row ids that do not fit (checked again at build).
                    out.extend_from_slice(&(row as i32).to_be_bytes());
                }
                if format != AngelFormat::ValueBinary {
                    self.key(col, out);
                }
                v.write_binary(out);
            })?;
        Ok(first * self.record)
    }

    /// Column item holding byte `pos`, and the byte offset where that item starts.
    fn item_at(&self, pos: u64) -> (u64, u64) {
        let per = self.records.column_rows() + 1;
        let (j, p) = (pos / self.record, pos % self.record);
        if p < self.key_width {
            (j * per, j * self.record)
        } else {
            let slot = (p - self.key_width) / self.value_width;
            (
                j * per + 1 + slot,
                j * self.record + self.key_width + slot * self.value_width,
            )
        }
    }

    /// Renders the column items holding bytes `from..to`; returns the offset of `out[0]`.
    fn render_columns(
        &self,
        ctx: &ReadCtx,
        from: u64,
        to: u64,
        out: &mut Vec<u8>,
    ) -> Result<u64, LayoutError> {
        let (first, start) = self.item_at(from);
        let (last, _) = self.item_at(to - 1);
        self.records
            .for_each_column_item(ctx, first, last + 1 - first, |item| match item {
                Item::Key(col) => self.key(col, out),
                Item::Value { num, .. } => num.write_binary(out),
            })?;
        Ok(start)
    }
}

impl FileContent for AngelBinary {
    fn known_size(&self) -> Option<u64> {
        Some(self.size)
    }

    fn read(&self, offset: u64, len: usize, req: &dyn Requester) -> Result<Bytes, LayoutError> {
        let ctx = req.ctx();
        crate::source::scratch::filled(len, |buf: &mut [u8]| {
            if offset >= self.size || buf.is_empty() {
                return Ok(0);
            }
            let want = (buf.len() as u64).min(self.size - offset);
            let end = offset + want;
            let mut tmp = Vec::new();
            let start = match self.format {
                AngelFormat::BinaryColumn => self.render_columns(ctx, offset, end, &mut tmp)?,
                _ => self.render_rows(ctx, offset, end, &mut tmp)?,
            };
            let skip = (offset - start) as usize;
            let got = tmp
                .get(skip..skip + want as usize)
                .ok_or(LayoutError::Mismatch {
                    what: "binary record bytes rendered",
                    got: tmp.len() as u64,
                    want: skip as u64 + want,
                })?;
            buf[..want as usize].copy_from_slice(got);
            Ok(want as usize)
        })
    }
}
