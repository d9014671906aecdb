//! Rendering the records of one Angel format for a tensor (formats/angel.md §6–§8, SPEC §3).
//!
//! A file is a sequence of records: one per element (dense row formats), one per stored entry
//! (sparse row formats) or one per column (column formats). `render(first, n)` writes records
//! `first..first + n`; binary records have a fixed size, so any byte offset maps to a record by
//! arithmetic, and text files are indexed by chunks of records (see `super`).
//!
//! The 2-D view: rank 0/1 is one row, rank ≥ 2 is `prod(shape[:-1]) × shape[-1]`; a sparse
//! tensor is its own `rows × cols` with only its stored entries. Column formats write one
//! record per column with one value per row: all rows of a dense tensor; the saved rows
//! (`SparseRows::rows`) of a sparse one, over the union of its columns, 0 where absent.

use std::sync::Arc;

use super::java;
use crate::layout::{AngelFormat, LayoutError};
use crate::model::{DType, ModelError, SparseRows, Tensor};

/// Angel value type a dtype is written as (SPEC §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AngelValue {
    Float,
    Double,
    Int,
    Long,
}

impl AngelValue {
    /// float16/bfloat16 → float; 8/16-bit ints, bool and quantized → int; uint32, int64 and
    /// uint64 → long (uint64 keeps its bit pattern: values ≥ 2^63 read back negative);
    /// complex, strings, float8 and opaque types have no Angel form.
    pub fn of(dtype: DType) -> Option<AngelValue> {
        use DType::*;
        Some(match dtype {
            F16 | BF16 | F32 => AngelValue::Float,
            F64 => AngelValue::Double,
            I8 | I16 | I32 | U8 | U16 | Bool | QInt8 | QUInt8 | QInt16 | QUInt16 | QInt32
            | Int4 | UInt4 | Int2 | UInt2 => AngelValue::Int,
            U32 | I64 | U64 => AngelValue::Long,
            _ => return None,
        })
    }
    pub fn width(self) -> usize {
        match self {
            AngelValue::Float | AngelValue::Int => 4,
            AngelValue::Double | AngelValue::Long => 8,
        }
    }
}

/// Where the values come from.
pub enum Data {
    Dense(Arc<dyn Tensor>),
    /// Stored entries plus, for column formats, the union of columns and a per-column index.
    Sparse {
        rows: Arc<SparseRows>,
        columns: Option<Arc<Columns>>,
    },
}

/// Column-major index of a `SparseRows`: `cols[j]` with its entries `(row index, entry)`.
pub struct Columns {
    pub cols: Vec<i64>,
    pub ptr: Vec<usize>,
    pub entries: Vec<(u32, u64)>,
}

impl Columns {
    pub fn build(s: &SparseRows) -> Columns {
        let mut all: Vec<(i64, u32, u64)> = Vec::with_capacity(s.cols.len());
        for ri in 0..s.rows.len() {
            for k in s.row_ptr[ri]..s.row_ptr[ri + 1] {
                all.push((s.cols[k as usize], ri as u32, k));
            }
        }
        all.sort_unstable();
        let mut c = Columns {
            cols: Vec::new(),
            ptr: vec![0],
            entries: Vec::with_capacity(all.len()),
        };
        for (i, &(col, ri, k)) in all.iter().enumerate() {
            if i > 0 && all[i - 1].0 != col {
                c.ptr.push(c.entries.len());
            }
            if c.cols.last() != Some(&col) {
                c.cols.push(col);
            }
            c.entries.push((ri, k));
        }
        if !c.cols.is_empty() {
            c.ptr.push(c.entries.len());
        }
        c
    }
}

pub struct Encoder {
    pub format: AngelFormat,
    pub dtype: DType,
    pub value: AngelValue,
    pub rows: u64,
    pub cols: u64,
    pub key_width: usize,
    pub sep: Vec<u8>,
    pub data: Data,
}

fn model_err(e: ModelError) -> LayoutError {
    LayoutError::Model(e)
}

impl Encoder {
    pub fn is_column(&self) -> bool {
        matches!(
            self.format,
            AngelFormat::TextColumn | AngelFormat::BinaryColumn
        )
    }

    /// Rows a column record holds values for.
    fn column_rows(&self) -> u64 {
        match &self.data {
            Data::Dense(_) => self.rows,
            Data::Sparse { rows, .. } => rows.rows.len() as u64,
        }
    }

    /// Number of records in the file.
    pub fn records(&self) -> u64 {
        match (&self.data, self.is_column()) {
            (Data::Dense(_), false) => self.rows * self.cols,
            (Data::Dense(_), true) => self.cols,
            (Data::Sparse { rows, .. }, false) => rows.nnz(),
            (Data::Sparse { columns, .. }, true) => {
                columns.as_ref().map_or(0, |c| c.cols.len() as u64)
            }
        }
    }

    /// Byte size of a binary record (None for text formats).
    pub fn record_size(&self) -> Option<u64> {
        let v = self.value.width() as u64;
        let k = self.key_width as u64;
        Some(match self.format {
            AngelFormat::ValueBinary => v,
            AngelFormat::ColIdValueBinary => k + v,
            AngelFormat::RowIdColIdValueBinary => 4 + k + v,
            AngelFormat::BinaryColumn => k + self.column_rows() * v,
            _ => return None,
        })
    }

    /// Appends one value (little-endian `dtype` bytes in `src`) in the format's encoding.
    fn value(&self, src: &[u8], out: &mut Vec<u8>) {
        let binary = !self.format.is_text();
        let le8 = |n: usize| {
            let mut b = [0u8; 8];
            b[..n].copy_from_slice(&src[..n]);
            b
        };
        use DType::*;
        let (f, d, i): (Option<f32>, Option<f64>, Option<i64>) = match self.dtype {
            F32 => (
                Some(f32::from_le_bytes(le8(4)[..4].try_into().unwrap())),
                None,
                None,
            ),
            F16 => (
                Some(half::f16::from_bits(u16::from_le_bytes([src[0], src[1]])).to_f32()),
                None,
                None,
            ),
            BF16 => (
                Some(half::bf16::from_bits(u16::from_le_bytes([src[0], src[1]])).to_f32()),
                None,
                None,
            ),
            F64 => (None, Some(f64::from_le_bytes(le8(8))), None),
            I8 | QInt8 | Int4 | Int2 => (None, None, Some(src[0] as i8 as i64)),
            U8 | QUInt8 | Bool | UInt4 | UInt2 => (None, None, Some(src[0] as i64)),
            I16 | QInt16 => (
                None,
                None,
                Some(i16::from_le_bytes([src[0], src[1]]) as i64),
            ),
            U16 | QUInt16 => (
                None,
                None,
                Some(u16::from_le_bytes([src[0], src[1]]) as i64),
            ),
            I32 | QInt32 => (
                None,
                None,
                Some(i32::from_le_bytes(le8(4)[..4].try_into().unwrap()) as i64),
            ),
            U32 => (
                None,
                None,
                Some(u32::from_le_bytes(le8(4)[..4].try_into().unwrap()) as i64),
            ),
            I64 | U64 => (None, None, Some(i64::from_le_bytes(le8(8)))),
            _ => (None, None, Some(0)),
        };
        match (self.value, binary) {
            (AngelValue::Float, true) => {
                out.extend_from_slice(&f.unwrap_or(0.0).to_bits().to_be_bytes())
            }
            (AngelValue::Float, false) => java::write_f32(f.unwrap_or(0.0), out),
            (AngelValue::Double, true) => {
                out.extend_from_slice(&d.unwrap_or(0.0).to_bits().to_be_bytes())
            }
            (AngelValue::Double, false) => java::write_f64(d.unwrap_or(0.0), out),
            (AngelValue::Int, true) => {
                out.extend_from_slice(&(i.unwrap_or(0) as i32).to_be_bytes())
            }
            (AngelValue::Long, true) => out.extend_from_slice(&i.unwrap_or(0).to_be_bytes()),
            (AngelValue::Int | AngelValue::Long, false) => java::write_i64(i.unwrap_or(0), out),
        }
    }

    fn zero_value(&self, out: &mut Vec<u8>) {
        let zero = [0u8; 16];
        self.value(&zero, out);
    }

    fn key(&self, col: i64, out: &mut Vec<u8>) {
        if self.format.is_text() {
            java::write_i64(col, out);
        } else if self.key_width == 4 {
            out.extend_from_slice(&(col as i32).to_be_bytes());
        } else {
            out.extend_from_slice(&col.to_be_bytes());
        }
    }

    /// One row-format record for element/entry `(row, col)` with value bytes `v`.
    fn row_record(&self, row: u64, col: i64, v: &[u8], out: &mut Vec<u8>) {
        let text = self.format.is_text();
        match self.format {
            AngelFormat::ValueText | AngelFormat::ValueBinary => {}
            AngelFormat::ColIdValueText | AngelFormat::ColIdValueBinary => {
                self.key(col, out);
                if text {
                    out.extend_from_slice(&self.sep);
                }
            }
            _ => {
                if text {
                    java::write_i64(row as i64, out);
                    out.extend_from_slice(&self.sep);
                } else {
                    out.extend_from_slice(&(row as i32).to_be_bytes());
                }
                self.key(col, out);
                if text {
                    out.extend_from_slice(&self.sep);
                }
            }
        }
        self.value(v, out);
        if text {
            out.push(b'\n');
        }
    }

    /// Appends records `first..first + n` to `out`.
    pub fn render(&self, first: u64, n: u64, out: &mut Vec<u8>) -> Result<(), LayoutError> {
        let w = self.dtype.elem_size().unwrap_or(1);
        match (&self.data, self.is_column()) {
            (Data::Dense(t), false) => {
                let mut buf = vec![0u8; n as usize * w];
                t.read_elements(first, &mut buf).map_err(model_err)?;
                for i in 0..n {
                    let e = first + i;
                    let (row, col) = (e / self.cols, (e % self.cols) as i64);
                    self.row_record(row, col, &buf[i as usize * w..(i as usize + 1) * w], out);
                }
            }
            (Data::Dense(t), true) => {
                // Values of columns first..first+n for every row, row by row.
                let mut buf = vec![0u8; (self.rows * n) as usize * w];
                let stride = n as usize * w;
                for r in 0..self.rows {
                    let at = r as usize * stride;
                    t.read_elements(r * self.cols + first, &mut buf[at..at + stride])
                        .map_err(model_err)?;
                }
                for j in 0..n as usize {
                    self.column_start(first as i64 + j as i64, out);
                    for r in 0..self.rows as usize {
                        if self.format.is_text() {
                            out.extend_from_slice(&self.sep);
                        }
                        let at = r * stride + j * w;
                        self.value(&buf[at..at + w], out);
                    }
                    self.column_end(self.rows == 0, out);
                }
            }
            (Data::Sparse { rows: s, .. }, false) => {
                let mut ri = s.row_ptr.partition_point(|&p| p <= first).saturating_sub(1);
                for k in first..first + n {
                    while s.row_ptr[ri + 1] <= k {
                        ri += 1;
                    }
                    let k = k as usize;
                    self.row_record(s.rows[ri], s.cols[k], &s.values[k * w..(k + 1) * w], out);
                }
            }
            (Data::Sparse { rows: s, columns }, true) => {
                let c = columns
                    .as_ref()
                    .expect("column index built for column formats");
                let nrows = s.rows.len();
                for j in first as usize..(first + n) as usize {
                    self.column_start(c.cols[j], out);
                    let mut next = c.ptr[j];
                    for ri in 0..nrows {
                        if self.format.is_text() {
                            out.extend_from_slice(&self.sep);
                        }
                        if next < c.ptr[j + 1] && c.entries[next].0 as usize == ri {
                            let k = c.entries[next].1 as usize;
                            self.value(&s.values[k * w..(k + 1) * w], out);
                            next += 1;
                        } else {
                            self.zero_value(out);
                        }
                    }
                    self.column_end(nrows == 0, out);
                }
            }
        }
        Ok(())
    }

    fn column_start(&self, col: i64, out: &mut Vec<u8>) {
        self.key(col, out);
    }

    /// Ends a column record; text with no rows still writes the separator (`7,`, §8).
    fn column_end(&self, no_rows: bool, out: &mut Vec<u8>) {
        if self.format.is_text() {
            if no_rows {
                out.extend_from_slice(&self.sep);
            }
            out.push(b'\n');
        }
    }
}
