//! The four text formats as `ChunkSource`s for `layout::text::ChunkedText` (which gives them
//! the shared chunk cache, the parallel index build and the persistent index store).
//!
//! Row formats: a chunk is `CHUNK_ELEMENTS` records (one per line). Column formats: a chunk
//! is `CHUNK_ELEMENTS` column items (`records::Item`), so a tall column spans several chunks
//! and a chunk may start or end inside a line.

use super::records::{Item, Records};
use crate::num::{write_i64, write_u64};
use crate::source::ReadCtx;
use crate::text::{ChunkSource, CHUNK_ELEMENTS};
use crate::{AngelFormat, LayoutError};

pub(crate) struct AngelText {
    format: AngelFormat,
    records: Records,
    sep: Vec<u8>,
    /// Records (row formats) or items (column formats) in the file.
    units: u64,
}

impl AngelText {
    /// `None` when the item count overflows (a shape no real tensor has).
    pub(crate) fn new(format: AngelFormat, records: Records, sep: &str) -> Option<AngelText> {
        let units = match format {
            AngelFormat::TextColumn => records.column_items()?,
            _ => records.row_records(),
        };
        Some(AngelText {
            format,
            records,
            sep: sep.as_bytes().to_vec(),
            units,
        })
    }
}

impl ChunkSource for AngelText {
    fn num_chunks(&self) -> u64 {
        self.units.div_ceil(CHUNK_ELEMENTS)
    }

    fn render(&self, ctx: &ReadCtx, chunk: u64, out: &mut Vec<u8>) -> Result<(), LayoutError> {
        let first = chunk * CHUNK_ELEMENTS;
        let count = self.units.saturating_sub(first).min(CHUNK_ELEMENTS);
        out.reserve(count as usize * 16);
        let sep = &self.sep[..];
        let r = &self.records;
        match self.format {
            AngelFormat::ValueText => r.for_each_row_record(ctx, first, count, |_, _, v| {
                v.write_text(out);
                out.push(b'\n');
            }),
            AngelFormat::ColIdValueText => r.for_each_row_record(ctx, first, count, |_, col, v| {
                write_i64(col, out);
                out.extend_from_slice(sep);
                v.write_text(out);
                out.push(b'\n');
            }),
            AngelFormat::RowIdColIdValueText => {
                r.for_each_row_record(ctx, first, count, |row, col, v| {
                    write_u64(row, out);
                    out.extend_from_slice(sep);
                    write_i64(col, out);
                    out.extend_from_slice(sep);
                    v.write_text(out);
                    out.push(b'\n');
                })
            }
            AngelFormat::TextColumn => {
                // The separator after the id is written even with no values (`7,`, §8).
                let no_values = r.column_rows() == 0;
                r.for_each_column_item(ctx, first, count, |item| match item {
                    Item::Key(col) => {
                        write_i64(col, out);
                        if no_values {
                            out.extend_from_slice(sep);
                            out.push(b'\n');
                        }
                    }
                    Item::Value { num, last } => {
                        out.extend_from_slice(sep);
                        num.write_text(out);
                        if last {
                            out.push(b'\n');
                        }
                    }
                })
            }
            _ => Err(LayoutError::Internal("a binary format rendered as text")),
        }
    }
}
