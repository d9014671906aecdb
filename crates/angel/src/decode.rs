//! Decoders for one partition of each of the eight formats (formats/angel.md §6–§8), producing
//! the partition's stored entries in global (row, column) coordinates as `SparseRows`.
//!
//! Invariants enforced for every format, before anything sized by a count is allocated:
//! - the bytes `offset..offset+length` lie in the file (checked arithmetic);
//! - binary: `Σ records × recordSize == length`; text: exactly the expected number of LF-ended
//!   lines, so every byte of the slice is consumed;
//! - column ids strictly increase within a row (row formats) and across records (column
//!   formats), and lie in `[0, col)` (when `col > 0`) and in the partition's column range
//!   (unless it is the `0/0` hash marker of §9.4).
//!
//! Row metas are walked in ascending row id (they are sorted in `meta`), never in JSON order.

use super::meta::{MatrixMeta, PartMeta};
use super::rowtype::ValueType;
use super::AngelFormat;
use super::{crlf, text};
use crate::model::SparseRows;
use crate::source::{ReadAt, ReadCtx, ReadExt};

#[derive(Debug, thiserror::Error)]
#[error("{file}: partition {part}: {fault}")]
pub struct DecodeError {
    pub file: String,
    pub part: i32,
    #[source]
    pub fault: DecodeFault,
}

/// Why a partition's bytes do not decode.
#[derive(Debug, thiserror::Error)]
pub enum DecodeFault {
    #[error("{0}")]
    Source(#[from] crate::source::SourceError),
    /// The bytes break the format (the message says where and how).
    #[error("{0}")]
    Malformed(String),
}

impl From<String> for DecodeFault {
    fn from(msg: String) -> Self {
        DecodeFault::Malformed(msg)
    }
}

impl From<&str> for DecodeFault {
    fn from(msg: &str) -> Self {
        DecodeFault::Malformed(msg.to_string())
    }
}

/// Everything needed to decode one partition.
pub struct PartInput<'a> {
    pub meta: &'a MatrixMeta,
    pub part: &'a PartMeta,
    pub file: &'a dyn ReadAt,
    /// Text separator (`-o sep=`); auto-detected per §6 when absent from the first line.
    pub sep: &'a str,
    /// Lines held by the partitions stored before this one in the same file; used only to
    /// locate a partition in a CRLF copy (§9.7).
    pub lines_before: u64,
}

type Res<T> = Result<T, DecodeFault>;

/// Number of lines (text) or records a partition holds according to its meta.
pub fn expected_records(format: AngelFormat, part: &PartMeta) -> Option<u64> {
    match format {
        AngelFormat::TextColumn | AngelFormat::BinaryColumn => Some(part.save_col_num),
        _ => part.rows.iter().try_fold(0u64, |a, r| a.checked_add(r.1)),
    }
}

pub fn decode_partition(inp: &PartInput<'_>) -> Result<SparseRows, DecodeError> {
    let result = match inp.meta.format {
        AngelFormat::ValueBinary
        | AngelFormat::ColIdValueBinary
        | AngelFormat::RowIdColIdValueBinary => decode_binary_rows(inp),
        AngelFormat::ValueText | AngelFormat::ColIdValueText | AngelFormat::RowIdColIdValueText => {
            decode_text_rows(inp)
        }
        AngelFormat::BinaryColumn => decode_binary_columns(inp),
        AngelFormat::TextColumn => decode_text_columns(inp),
    };
    result.map_err(|fault| DecodeError {
        file: inp.file.name().to_string(),
        part: inp.part.part_id,
        fault,
    })
}

/// Accumulates a partition's CSR while checking column order and ranges.
struct Builder {
    out: SparseRows,
    last_col: Option<i64>,
    col: i64,
    part_range: Option<(i64, i64)>,
}

impl Builder {
    fn new(meta: &MatrixMeta, part: &PartMeta, entries: u64, value_width: usize) -> Builder {
        let entries = entries as usize;
        Builder {
            out: SparseRows {
                rows: Vec::with_capacity(part.rows.len()),
                row_ptr: {
                    let mut v = Vec::with_capacity(part.rows.len() + 1);
                    v.push(0);
                    v
                },
                cols: Vec::with_capacity(entries),
                values: Vec::with_capacity(entries.saturating_mul(value_width)),
            },
            last_col: None,
            col: meta.col,
            part_range: (!part.is_hash()).then_some((part.start_col, part.end_col)),
        }
    }
    fn begin_row(&mut self, row: u32) {
        self.out.rows.push(row as u64);
        self.last_col = None;
    }
    fn end_row(&mut self) {
        self.out.row_ptr.push(self.out.cols.len() as u64);
    }
    fn push_col(&mut self, col: i64) -> Res<()> {
        if let Some(last) = self.last_col {
            if col <= last {
                return Err(format!(
                    "row {}: column id {col} does not increase (after {last})",
                    self.out.rows.last().copied().unwrap_or(0)
                )
                .into());
            }
        }
        if self.col > 0 && !(0..self.col).contains(&col) {
            return Err(format!("column id {col} outside [0, {})", self.col).into());
        }
        if let Some((s, e)) = self.part_range {
            if !(s..e).contains(&col) {
                return Err(
                    format!("column id {col} outside the partition's columns [{s}, {e})").into(),
                );
            }
        }
        self.last_col = Some(col);
        self.out.cols.push(col);
        Ok(())
    }
}

/// `f` of the partition's bytes, bounds-checked against the file. They may come from a
/// mapping: a file rewritten in place while `f` decoded them fails the read, so no mix of old
/// and new entries is kept.
fn with_slice<T>(
    inp: &PartInput<'_>,
    offset: u64,
    length: u64,
    f: impl FnOnce(&[u8]) -> Res<T>,
) -> Res<T> {
    let size = inp.file.size();
    match offset.checked_add(length) {
        Some(end) if end <= size => {}
        _ => {
            return Err(format!(
                "offset {offset} + length {length} is beyond the end of the file ({size} bytes)"
            )
            .into())
        }
    }
    let len = usize::try_from(length).map_err(|_| "length too large".to_string())?;
    inp.file.with_bytes(ReadCtx::none(), offset, len, f)?
}

/// Value formats place the i-th record at `startCol + i`, which needs a real column range and
/// full rows (§7.2).
pub(super) fn check_value_format(part: &PartMeta) -> Res<()> {
    if part.is_hash() {
        return Err(
            "a Value format cannot be placed in a hash-partitioned matrix \
                    (startCol = endCol = 0)"
                .into(),
        );
    }
    let width = part.end_col as i128 - part.start_col as i128;
    for &(row, n) in &part.rows {
        if n != 0 && n as i128 != width {
            return Err(format!(
                "row {row}: Value format with elementNum {n} but the partition is {width} \
                 columns wide (column ids cannot be recovered)"
            )
            .into());
        }
    }
    Ok(())
}

pub(super) fn be_value_to_le(src: &[u8], out: &mut Vec<u8>) {
    out.extend(src.iter().rev());
}

pub(super) fn be_i64(src: &[u8]) -> i64 {
    match src.len() {
        4 => i32::from_be_bytes([src[0], src[1], src[2], src[3]]) as i64,
        _ => i64::from_be_bytes(src[..8].try_into().unwrap_or([0; 8])),
    }
}

fn decode_binary_rows(inp: &PartInput<'_>) -> Res<SparseRows> {
    let (meta, part) = (inp.meta, inp.part);
    let vw = meta.row_type.value.width();
    let kw = meta.row_type.key_width;
    let (has_row, has_col) = match meta.format {
        AngelFormat::ValueBinary => (false, false),
        AngelFormat::ColIdValueBinary => (false, true),
        _ => (true, true),
    };
    if !has_col {
        check_value_format(part)?;
    }
    let rec = vw + if has_col { kw } else { 0 } + if has_row { 4 } else { 0 };
    let total = expected_records(meta.format, part).ok_or("elementNum sum overflows")?;
    if total.checked_mul(rec as u64) != Some(part.length) {
        return Err(format!(
            "{total} records of {rec} bytes do not match the partition length {}",
            part.length
        )
        .into());
    }
    with_slice(inp, part.offset, part.length, |data| {
        let mut b = Builder::new(meta, part, total, vw);
        let mut pos = 0usize;
        for &(row, n) in &part.rows {
            b.begin_row(row);
            for i in 0..n {
                let r = &data[pos..pos + rec];
                let mut at = 0;
                if has_row {
                    let rid = be_i64(&r[..4]);
                    if rid != row as i64 {
                        return Err(
                            format!("record row id {rid} where row {row} was expected").into()
                        );
                    }
                    at = 4;
                }
                let col = if has_col {
                    at += kw;
                    be_i64(&r[at - kw..at])
                } else {
                    part.start_col + i as i64
                };
                b.push_col(col)?;
                be_value_to_le(&r[at..at + vw], &mut b.out.values);
                pos += rec;
            }
            b.end_row();
        }
        Ok(b.out)
    })
}

/// Parses a text partition with `parse`: first the strict slice `offset..offset+length`
/// (which must hold exactly `lines` LF-ended lines); if that fails, the same slice when it
/// holds exactly `lines` CR LF-ended lines (a writer whose meta counts the CRs); else the
/// CRLF-copy position of §9.7 (`offset + lines before`, `length + lines`), accepted with a
/// warning when every line ends CRLF and the data parses with exact counts. The strict error
/// is the one reported.
fn with_text_slice<T>(inp: &PartInput<'_>, lines: u64, parse: impl Fn(&[u8]) -> Res<T>) -> Res<T> {
    let part = inp.part;
    let strict = with_slice(inp, part.offset, part.length, |d| {
        // Angel never writes CR: a first line ending CR LF is a CRLF copy, whose strict slice
        // ends inside a line (the last line may lack its LF, so the count alone can pass).
        if memchr::memchr(b'\n', d).is_some_and(|i| i > 0 && d[i - 1] == b'\r') {
            return Err("CR LF line endings".into());
        }
        let found = text::count_lines(d);
        if found != lines {
            return Err(format!("{found} lines where the meta says {lines}").into());
        }
        parse(d)
    });
    let err = match strict {
        Ok(v) => return Ok(v),
        Err(e) => e,
    };
    // A CRLF copy's window: where the meta's line counts put it, else where the copy's own CRs
    // say (crlf.rs). Every LF in it must follow a CR, and the lines must be the meta's count.
    let try_window = |(off, len): (u64, u64)| -> Option<T> {
        let parsed = with_slice(inp, off, len, |d| {
            let lfs = memchr::memchr_iter(b'\n', d).count() as u64;
            let crlf = d.windows(2).filter(|w| w == b"\r\n").count() as u64;
            // The last line may lack its LF (nolf).
            if lines == 0 || text::count_lines(d) != lines || crlf != lfs {
                return Ok(None);
            }
            Ok(parse(d).ok())
        });
        parsed.ok().flatten()
    };
    // A writer whose meta counts the CRs: its own window is exact, and taken first; left
    // unterminated (`crlf::Fit`), first only in a file the meta's windows end with (else
    // only when no adjusted window fits).
    let counts = crlf::counts_file(inp.meta, part, inp.file.size());
    let after = counts && crlf::follows_partition(inp.meta, part);
    let own =
        crlf::own_fit(inp.file, (part.offset, part.length), lines, after).unwrap_or(crlf::Fit::No);
    let own_window = (part.offset, part.length);
    if own == crlf::Fit::Exact || (counts && own == crlf::Fit::Unterminated) {
        if let Some(v) = try_window(own_window) {
            return Ok(v);
        }
    }
    let by_lines = part
        .offset
        .checked_add(inp.lines_before)
        .zip(part.length.checked_add(lines))
        .filter(|&(off, _)| {
            off == 0
                || inp
                    .file
                    .read_vec(off - 1, 1)
                    .ok()
                    .and_then(|b| b.first().copied())
                    == Some(b'\n')
        });
    // Line counts place the window right only if its last line has its LF (crlf.rs).
    let by_lines = by_lines.filter(|&(off, len)| {
        let last = off.checked_add(len).and_then(|e| e.checked_sub(1));
        last.and_then(|at| inp.file.read_vec(at, 1).ok()?.first().copied()) == Some(b'\n')
    });
    let lenient = by_lines.and_then(try_window).or_else(|| {
        crlf::window(inp.file, part.offset, part.length)
            .ok()
            .flatten()
            .filter(|&w| Some(w) != by_lines)
            .and_then(try_window)
    });
    if lenient.is_none() && own == crlf::Fit::Unterminated {
        if let Some(v) = try_window(own_window) {
            return Ok(v);
        }
    }
    match lenient {
        Some(v) => {
            log::warn!(
                "{}: partition {}: CRLF line endings (not written by Angel); offsets adjusted",
                inp.file.name(),
                part.part_id
            );
            Ok(v)
        }
        None => Err(err),
    }
}

/// The separator to use for `data`: the configured one, or the detected one when the first
/// line does not contain it.
pub(super) fn separator(inp: &PartInput<'_>, data: &[u8]) -> Vec<u8> {
    let sep = inp.sep.as_bytes().to_vec();
    let Some(first) = text::lines(data).next() else {
        return sep;
    };
    if sep.is_empty() || first.windows(sep.len()).any(|w| w == sep) {
        return sep;
    }
    match text::detect_separator(first) {
        Some(b) => {
            log::warn!(
                "{}: partition {}: separator {:?} not found, detected {:?}",
                inp.file.name(),
                inp.part.part_id,
                inp.sep,
                b as char
            );
            vec![b]
        }
        None => sep,
    }
}

pub(super) fn parse_key(field: &[u8], key_width: usize) -> Res<i64> {
    let v =
        text::parse_i64(field).ok_or_else(|| format!("bad column id '{}'", text::show(field)))?;
    if key_width == 4 && i32::try_from(v).is_err() {
        return Err(format!("column id {v} does not fit an int key").into());
    }
    Ok(v)
}

pub(super) fn parse_value(field: &[u8], vt: ValueType, out: &mut Vec<u8>) -> Res<()> {
    if text::parse_value(field, vt, out) {
        Ok(())
    } else {
        let name = format!("{vt:?}").to_lowercase();
        Err(format!("bad {name} value '{}'", text::show(field)).into())
    }
}

/// The `nfields` fields of a row-format line (1: the line itself), exactly that many.
pub(super) fn row_fields<'a>(
    line: &'a [u8],
    sep: &'a [u8],
    nfields: usize,
    row: u32,
) -> Res<[&'a [u8]; 3]> {
    let mut fields: [&[u8]; 3] = [&[]; 3];
    if nfields == 1 {
        fields[0] = line;
        return Ok(fields);
    }
    let mut it = text::fields(line, sep);
    for f in fields.iter_mut().take(nfields) {
        *f = it
            .next()
            .ok_or_else(|| format!("row {row}: line '{}' has too few fields", text::show(line)))?;
    }
    if it.next().is_some() {
        return Err(format!("row {row}: line '{}' has too many fields", text::show(line)).into());
    }
    Ok(fields)
}

/// A RowIdColIdValue record's row id, which must be the row being read (§11).
pub(super) fn check_row_id(field: &[u8], row: u32) -> Res<()> {
    let rid =
        text::parse_i64(field).ok_or_else(|| format!("bad row id '{}'", text::show(field)))?;
    if rid != row as i64 {
        return Err(format!("record row id {rid} where row {row} was expected").into());
    }
    Ok(())
}

fn decode_text_rows(inp: &PartInput<'_>) -> Res<SparseRows> {
    let (meta, part) = (inp.meta, inp.part);
    let nfields = match meta.format {
        AngelFormat::ValueText => 1,
        AngelFormat::ColIdValueText => 2,
        _ => 3,
    };
    if nfields == 1 {
        check_value_format(part)?;
    }
    let total = expected_records(meta.format, part).ok_or("elementNum sum overflows")?;
    with_text_slice(inp, total, |data| {
        parse_text_rows(inp, data, nfields, total)
    })
}

fn parse_text_rows(
    inp: &PartInput<'_>,
    data: &[u8],
    nfields: usize,
    total: u64,
) -> Res<SparseRows> {
    let (meta, part) = (inp.meta, inp.part);
    let vt = meta.row_type.value;
    let sep = if nfields == 1 {
        Vec::new()
    } else {
        separator(inp, data)
    };
    let mut b = Builder::new(meta, part, total, vt.width());
    let mut lines = text::lines(data);
    for &(row, n) in &part.rows {
        b.begin_row(row);
        for i in 0..n {
            let line = lines.next().ok_or("fewer lines than records")?;
            let fields = row_fields(line, &sep, nfields, row)?;
            if nfields == 3 {
                check_row_id(fields[0], row)?;
            }
            let col = if nfields == 1 {
                part.start_col + i as i64
            } else {
                parse_key(fields[nfields - 2], meta.row_type.key_width)?
            };
            b.push_col(col)?;
            parse_value(fields[nfields - 1], vt, &mut b.out.values)
                .map_err(|e| format!("row {row}: {e}"))?;
        }
        b.end_row();
    }
    Ok(b.out)
}

/// Turns column records (ids ascending, values column-major) into per-row CSR: value j of a
/// record belongs to the j-th smallest saved row id (§8).
fn columns_to_rows(
    inp: &PartInput<'_>,
    col_ids: &[i64],
    values: &[u8],
    vw: usize,
) -> Res<SparseRows> {
    let (meta, part) = (inp.meta, inp.part);
    let k = part.rows.len();
    let total = (col_ids.len() as u64).saturating_mul(k as u64);
    let mut b = Builder::new(meta, part, total, vw);
    for (j, &(row, _)) in part.rows.iter().enumerate() {
        b.begin_row(row);
        for (c, &col) in col_ids.iter().enumerate() {
            b.push_col(col)?;
            let at = (c * k + j) * vw;
            b.out.values.extend_from_slice(&values[at..at + vw]);
        }
        b.end_row();
    }
    Ok(b.out)
}

fn check_increasing(col_ids: &[i64], col: i64) -> Res<()> {
    if let Some(&last) = col_ids.last() {
        if col <= last {
            return Err(format!("column id {col} does not increase (after {last})").into());
        }
    }
    Ok(())
}

fn decode_binary_columns(inp: &PartInput<'_>) -> Res<SparseRows> {
    let (meta, part) = (inp.meta, inp.part);
    let vw = meta.row_type.value.width();
    let kw = meta.row_type.key_width;
    let k = part.save_col_elem_num;
    let nc = part.save_col_num;
    let rec = k
        .checked_mul(vw as u64)
        .and_then(|v| v.checked_add(kw as u64))
        .ok_or("record size overflows")?;
    if nc.checked_mul(rec) != Some(part.length) {
        return Err(format!(
            "saveColNum {nc} × {rec}-byte records do not match the partition length {}",
            part.length
        )
        .into());
    }
    with_slice(inp, part.offset, part.length, |data| {
        let mut col_ids = Vec::with_capacity(nc as usize);
        let mut values = Vec::with_capacity(data.len());
        for r in data.chunks_exact(rec as usize) {
            let col = be_i64(&r[..kw]);
            check_increasing(&col_ids, col)?;
            col_ids.push(col);
            for v in r[kw..].chunks_exact(vw) {
                be_value_to_le(v, &mut values);
            }
        }
        columns_to_rows(inp, &col_ids, &values, vw)
    })
}

fn decode_text_columns(inp: &PartInput<'_>) -> Res<SparseRows> {
    let part = inp.part;
    with_text_slice(inp, part.save_col_num, |data| parse_text_columns(inp, data))
}

fn parse_text_columns(inp: &PartInput<'_>, data: &[u8]) -> Res<SparseRows> {
    let (meta, part) = (inp.meta, inp.part);
    let vt = meta.row_type.value;
    let k = part.save_col_elem_num;
    let sep = separator(inp, data);
    let mut col_ids = Vec::with_capacity(part.save_col_num as usize);
    let mut values = Vec::new();
    for line in text::lines(data) {
        let mut it = text::fields(line, &sep);
        let id_field = it.next().unwrap_or(&[]);
        let col = parse_key(id_field, meta.row_type.key_width)?;
        check_increasing(&col_ids, col)?;
        col_ids.push(col);
        if k == 0 {
            if it.next() != Some(&[][..]) {
                return Err(
                    format!("column {col}: expected '{col}<sep>' for zero saved rows").into(),
                );
            }
        } else {
            for j in 0..k {
                let f = it
                    .next()
                    .ok_or_else(|| format!("column {col}: {j} values where {k} were expected"))?;
                parse_value(f, vt, &mut values).map_err(|e| format!("column {col}: {e}"))?;
            }
        }
        if it.next().is_some() {
            return Err(format!("column {col}: more than {k} values").into());
        }
    }
    columns_to_rows(inp, &col_ids, &values, vt.width())
}
