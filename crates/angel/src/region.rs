//! One partition's data read by range (formats/angel.md §7–§8), so that a read decodes only
//! the records it needs and nothing of a partition is kept but a sparse line index.
//!
//! `Region::locate` checks what can be checked without decoding the data — binary: `records ×
//! recordSize == length`; text: where the partition is (strict; for CR LF lines the meta's own
//! window when it holds them, else the CRLF-copy position of §9.7) and its separator. A record
//! is then found by arithmetic (binary) or from the nearest indexed line (text, `lines`: at
//! most `STRIDE − 1` lines skipped; the index is built as far as reads go, and the line count
//! and final LF are checked when it reaches the end).
//!
//! Field checks (counts, numbers, row ids, column order and ranges) are those of
//! `decode`, made on the records a read decodes; column order is checked within a read.

use std::sync::Arc;

use super::decode::{
    be_i64, be_value_to_le, check_row_id, check_value_format, expected_records, parse_key,
    parse_value, row_fields, separator, DecodeFault, PartInput,
};
use super::lines::{LineIndex, STRIDE};
use super::rowtype::ValueType;
use super::{crlf, idline, text, AngelFormat};
use crate::model::{ColumnBlock, Entries};
use crate::source::{ReadAt, ReadCtx, ReadExt};
use crate::store::Store;

type Res<T> = Result<T, DecodeFault>;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    BinaryRows { has_row: bool, has_col: bool },
    TextRows { nfields: usize },
    BinaryColumns,
    TextColumns,
}

/// A located partition: where its bytes are and how to find one record among them.
pub(crate) struct Region {
    kind: Kind,
    start: u64,
    len: u64,
    /// Records (row formats) or column records (column formats).
    records: u64,
    /// Binary: bytes per record.
    rec: u64,
    key_width: usize,
    value: ValueType,
    /// Text: the separator (configured or detected from the first line).
    sep: Vec<u8>,
    /// Text: where lines are, found as far as reads need.
    lines: Option<LineIndex>,
    /// Column ids must lie in `[0, col)` when `col > 0`, and in the partition's range.
    col: i64,
    range: Option<(i64, i64)>,
    /// Values per column record (column formats).
    k: u64,
}

/// Where row-format records go: the row they belong to, and for Value formats the column of
/// the first one (columns are implicit, §7.2).
#[derive(Clone, Copy)]
pub(crate) struct RowRun {
    pub(crate) row: u32,
    pub(crate) first_col: i64,
}

impl Region {
    /// Locates partition `inp.part` (see the module comment).
    pub(crate) fn locate(inp: &PartInput<'_>, indexes: Option<&Arc<dyn Store>>) -> Res<Region> {
        let (meta, part) = (inp.meta, inp.part);
        let vw = meta.row_type.value.width() as u64;
        let kw = meta.row_type.key_width as u64;
        let kind = match meta.format {
            AngelFormat::ValueBinary => Kind::BinaryRows {
                has_row: false,
                has_col: false,
            },
            AngelFormat::ColIdValueBinary => Kind::BinaryRows {
                has_row: false,
                has_col: true,
            },
            AngelFormat::RowIdColIdValueBinary => Kind::BinaryRows {
                has_row: true,
                has_col: true,
            },
            AngelFormat::ValueText => Kind::TextRows { nfields: 1 },
            AngelFormat::ColIdValueText => Kind::TextRows { nfields: 2 },
            AngelFormat::RowIdColIdValueText => Kind::TextRows { nfields: 3 },
            AngelFormat::BinaryColumn => Kind::BinaryColumns,
            AngelFormat::TextColumn => Kind::TextColumns,
        };
        if matches!(
            kind,
            Kind::BinaryRows { has_col: false, .. } | Kind::TextRows { nfields: 1 }
        ) {
            check_value_format(part)?;
        }
        let records = expected_records(meta.format, part).ok_or("elementNum sum overflows")?;
        let k = part.save_col_elem_num;
        let mut r = Region {
            kind,
            start: part.offset,
            len: part.length,
            records,
            rec: 0,
            key_width: kw as usize,
            value: meta.row_type.value,
            sep: Vec::new(),
            lines: None,
            col: meta.col,
            range: (!part.is_hash()).then_some((part.start_col, part.end_col)),
            k,
        };
        match kind {
            Kind::BinaryRows { has_row, has_col } => {
                r.rec = vw + if has_col { kw } else { 0 } + if has_row { 4 } else { 0 };
                if records.checked_mul(r.rec) != Some(part.length) {
                    return Err(format!(
                        "{records} records of {} bytes do not match the partition length {}",
                        r.rec, part.length
                    )
                    .into());
                }
                in_file(inp, part.offset, part.length)?;
            }
            Kind::BinaryColumns => {
                r.rec = k
                    .checked_mul(vw)
                    .and_then(|v| v.checked_add(kw))
                    .ok_or("record size overflows")?;
                if records.checked_mul(r.rec) != Some(part.length) {
                    return Err(format!(
                        "saveColNum {records} × {}-byte records do not match the partition \
                         length {}",
                        r.rec, part.length
                    )
                    .into());
                }
                in_file(inp, part.offset, part.length)?;
            }
            Kind::TextRows { .. } | Kind::TextColumns => r.index_text(inp, indexes)?,
        }
        Ok(r)
    }

    /// The strict position, else for CRLF lines (§9.7) the meta's own window when it holds the
    /// partition's lines, else the CRLF-copy one (accepted with a warning); told apart by the
    /// first line: Angel never writes CR, so a first line ending CR LF is not Angel's. The line
    /// count and the final LF are checked when the scan reaches the end.
    fn index_text(&mut self, inp: &PartInput<'_>, indexes: Option<&Arc<dyn Store>>) -> Res<()> {
        let part = inp.part;
        let lines = self.records;
        let file = inp.file;
        // A window that does not start a line is a CRLF copy's shifted partition.
        let starts_line = |off: u64| {
            off == 0
                || file
                    .read_vec(off - 1, 1)
                    .ok()
                    .and_then(|b| b.first().copied())
                    == Some(b'\n')
        };
        // A window by line counts is right only if the partition's last line has its LF
        // (else the window takes the next partition's first byte: crlf.rs).
        let ends_line = |off: u64, len: u64| {
            let last = off.checked_add(len).and_then(|e| e.checked_sub(1));
            last.and_then(|at| file.read_vec(at, 1).ok()?.first().copied()) == Some(b'\n')
        };
        let first_line_crlf = |off: u64, len: u64| -> Res<Option<bool>> {
            let n = len.min(1 << 20) as usize;
            let crlf =
                |data: &[u8]| memchr::memchr(b'\n', data).map(|i| i > 0 && data[i - 1] == b'\r');
            Ok(file.with_bytes(ReadCtx::none(), off, n, crlf)?)
        };
        in_file(inp, part.offset, part.length)?;
        // A window that starts no line but whose first line is not CR LF follows a
        // partition that ends without LF: strict too, unless a CRLF copy's window fits.
        let plain = lines == 0 || first_line_crlf(part.offset, part.length)? != Some(true);
        let strict = lines == 0 || (plain && starts_line(part.offset));
        // A writer whose meta counts the CRs: its own window is exact. Checked first, so that
        // only a copy whose bytes moved takes the adjusted window (one left unterminated is
        // first only in a file the meta's windows end with: `crlf::Fit`).
        let counts = crlf::counts_file(inp.meta, part, file.size());
        let after = counts && crlf::follows_partition(inp.meta, part);
        let own = match strict || plain {
            true => crlf::Fit::No,
            false => crlf::own_fit(file, (part.offset, part.length), lines, after)?,
        };
        let (start, len, crlf) = if strict {
            (part.offset, part.length, false)
        } else if own == crlf::Fit::Exact || (counts && own == crlf::Fit::Unterminated) {
            (part.offset, part.length, true)
        } else {
            let lenient = part
                .offset
                .checked_add(inp.lines_before)
                .zip(part.length.checked_add(lines))
                .filter(|&(off, len)| {
                    off.checked_add(len).is_some_and(|end| end <= file.size())
                        && starts_line(off)
                        && ends_line(off, len)
                        && first_line_crlf(off, len).ok().flatten() == Some(true)
                });
            // Else the copy's own CRs say where it is, whatever the meta's counts.
            let lenient = match lenient {
                Some(w) => Some(w),
                None => crlf::window(file, part.offset, part.length)?
                    .filter(|&(off, len)| first_line_crlf(off, len).ok().flatten() != Some(false)),
            };
            match lenient {
                Some((off, len)) => {
                    log::warn!(
                        "{}: partition {}: CRLF line endings (not written by Angel); \
                         offsets adjusted",
                        file.name(),
                        part.part_id
                    );
                    (off, len, true)
                }
                None if plain => (part.offset, part.length, false),
                None if own == crlf::Fit::Unterminated => (part.offset, part.length, true),
                None => return Err("the partition does not start a line".into()),
            }
        };
        self.start = start;
        self.len = len;
        let mut index = LineIndex::new(start, len, lines, crlf);
        if let (Some(store), Some(id)) = (indexes, crate::source::identity_string(file)) {
            index.persist(store.clone(), &id);
        }
        self.lines = Some(index);
        if self.kind != (Kind::TextRows { nfields: 1 }) && len > 0 {
            let sep = |first: &[u8]| {
                let end = memchr::memchr(b'\n', first).map_or(first.len(), |i| i + 1);
                separator(inp, &first[..end])
            };
            self.sep = file.with_bytes(ReadCtx::none(), start, len.min(1 << 20) as usize, sep)?;
        }
        Ok(())
    }

    /// Checks the whole of a text partition's lines (count, final LF); binary partitions
    /// were checked when located.
    #[cfg(any(test, feature = "testkit"))]
    pub(crate) fn check_all(&self, file: &dyn ReadAt) -> Res<()> {
        self.lines.as_ref().map_or(Ok(()), |l| l.finish(file))
    }

    /// Lines `first..first + n` (without LF / CR LF), from the nearest indexed line.
    fn with_lines<T>(
        &self,
        ctx: &ReadCtx,
        file: &dyn ReadAt,
        first: u64,
        n: u64,
        mut f: impl FnMut(&[u8]) -> Res<T>,
    ) -> Res<()> {
        self.with_line_starts(ctx, file, first, n, |rest| {
            let nl = memchr::memchr(b'\n', rest).ok_or("fewer lines than indexed")?;
            let line = &rest[..nl];
            f(line.strip_suffix(b"\r").unwrap_or(line))?;
            Ok(nl + 1)
        })
    }

    /// Calls `f` with the text from the start of each of lines `first..first + n` to the end
    /// of what was read; `f` answers how many bytes its line took with its LF, so a reader
    /// that parses a line through to its end need not look for the LF first.
    fn with_line_starts(
        &self,
        ctx: &ReadCtx,
        file: &dyn ReadAt,
        first: u64,
        n: u64,
        mut f: impl FnMut(&[u8]) -> Res<usize>,
    ) -> Res<()> {
        let end = first.checked_add(n).filter(|&e| e <= self.records);
        let Some(end) = end else {
            return Err(format!("lines {first}+{n} beyond the {} lines", self.records).into());
        };
        if n == 0 {
            return Ok(());
        }
        let index = self
            .lines
            .as_ref()
            .ok_or("lines asked of a binary format")?;
        let s0 = (first / STRIDE) as usize;
        let s1 = end.div_ceil(STRIDE) as usize;
        let (a, b) = index.span(file, s0, s1)?;
        let at_end = b == index.end();
        let lines = |data: &[u8]| -> Res<()> {
            let own: Vec<u8>;
            let data = match at_end && data.last().is_some_and(|&c| c != b'\n') {
                // The partition's last line has no LF: the lines below are read as if it had
                // (a copy of at most two strides, for reads that reach the end only).
                true => {
                    own = [data, b"\n"].concat();
                    &own[..]
                }
                false => data,
            };
            let mut pos = 0usize;
            for _ in 0..first % STRIDE {
                let nl = memchr::memchr(b'\n', &data[pos..]);
                pos += nl.ok_or("fewer lines than indexed")? + 1;
            }
            for _ in 0..n {
                let rest = data.get(pos..).unwrap_or_default();
                let used = f(rest)?;
                debug_assert!(used > 0 && used <= rest.len() && rest[used - 1] == b'\n');
                pos += used;
            }
            Ok(())
        };
        let res = file.with_bytes(ctx, index.start() + a, (b - a) as usize, lines);
        file.done_with(self.start + a, b - a);
        res?
    }

    /// Checks that `col` follows `last` and lies in the matrix's and the partition's columns;
    /// it becomes `last`. Once per entry: the test is one branch, the message out of line.
    #[inline]
    fn check_col(&self, col: i64, last: &mut Option<i64>) -> Res<()> {
        let follows = last.is_none_or(|l| col > l);
        let in_cols = self.col <= 0 || (0..self.col).contains(&col);
        let in_part = self.range.is_none_or(|(s, e)| (s..e).contains(&col));
        if !(follows && in_cols && in_part) {
            return Err(self.bad_col(col, *last));
        }
        *last = Some(col);
        Ok(())
    }

    #[cold]
    fn bad_col(&self, col: i64, last: Option<i64>) -> DecodeFault {
        if let Some(l) = last.filter(|&l| col <= l) {
            return format!("column id {col} does not increase (after {l})").into();
        }
        if let Some((s, e)) = self.range.filter(|&(s, e)| !(s..e).contains(&col)) {
            if self.col <= 0 || (0..self.col).contains(&col) {
                return format!("column id {col} outside the partition's columns [{s}, {e})")
                    .into();
            }
        }
        format!("column id {col} outside [0, {})", self.col).into()
    }

    /// Appends row-format records `first..first + n`, all of row `run.row`, to `out`.
    pub(crate) fn rows(
        &self,
        ctx: &ReadCtx,
        file: &dyn ReadAt,
        first: u64,
        n: u64,
        run: RowRun,
        out: &mut Entries,
    ) -> Res<()> {
        let mut last = None;
        let row = run.row;
        match self.kind {
            Kind::BinaryRows { has_row, has_col } => {
                self.with_binary(ctx, file, first, n, |data| {
                    let (kw, vw) = (self.key_width, self.value.width());
                    for (i, r) in data.chunks_exact(self.rec as usize).enumerate() {
                        let mut at = 0;
                        if has_row {
                            let rid = be_i64(&r[..4]);
                            if rid != row as i64 {
                                return Err(format!(
                                    "record row id {rid} where row {row} was expected"
                                )
                                .into());
                            }
                            at = 4;
                        }
                        let col = if has_col {
                            at += kw;
                            be_i64(&r[at - kw..at])
                        } else {
                            run.first_col + i as i64
                        };
                        self.check_col(col, &mut last)?;
                        out.cols.push(col);
                        be_value_to_le(&r[at..at + vw], &mut out.values);
                    }
                    Ok(())
                })?
            }
            Kind::TextRows { nfields } => {
                let mut i = 0i64;
                let id_sep = match (nfields, &*self.sep) {
                    (2, &[b]) => text::plain_separator(b),
                    _ => None,
                };
                self.with_line_starts(ctx, file, first, n, |rest| {
                    // `id,value\n`, the bulk of an LR's text, read in one pass; a line the fast
                    // read refuses goes the general way, which says what is wrong.
                    if let Some(b) = id_sep {
                        if let Some((col, used)) =
                            idline::id_value(rest, b, self.key_width, self.value, &mut out.values)
                        {
                            self.check_col(col, &mut last)?;
                            out.cols.push(col);
                            return Ok(used);
                        }
                    }
                    let nl = memchr::memchr(b'\n', rest).ok_or("fewer lines than indexed")?;
                    let line = &rest[..nl];
                    let line = line.strip_suffix(b"\r").unwrap_or(line);
                    let fields = row_fields(line, &self.sep, nfields, row)?;
                    if nfields == 3 {
                        check_row_id(fields[0], row)?;
                    }
                    let col = if nfields == 1 {
                        run.first_col + i
                    } else {
                        parse_key(fields[nfields - 2], self.key_width)?
                    };
                    i += 1;
                    self.check_col(col, &mut last)?;
                    out.cols.push(col);
                    parse_value(fields[nfields - 1], self.value, &mut out.values)
                        .map_err(|e| format!("row {row}: {e}"))?;
                    Ok(nl + 1)
                })?;
            }
            _ => return Err("row records asked of a column format".into()),
        }
        Ok(())
    }

    /// Appends the values at slot `slot` (the `slot`-th smallest saved row) of column records
    /// `first..first + n` to `out`.
    pub(crate) fn columns(
        &self,
        ctx: &ReadCtx,
        file: &dyn ReadAt,
        first: u64,
        n: u64,
        slot: u64,
        out: &mut Entries,
    ) -> Res<()> {
        if slot >= self.k {
            return Err(format!("slot {slot} of {} saved rows", self.k).into());
        }
        let mut last = None;
        match self.kind {
            Kind::BinaryColumns => self.with_binary(ctx, file, first, n, |data| {
                let (kw, vw) = (self.key_width, self.value.width());
                let at = kw + slot as usize * vw;
                for r in data.chunks_exact(self.rec as usize) {
                    let col = be_i64(&r[..kw]);
                    self.check_col(col, &mut last)?;
                    out.cols.push(col);
                    be_value_to_le(&r[at..at + vw], &mut out.values);
                }
                Ok(())
            })?,
            Kind::TextColumns => {
                self.with_lines(ctx, file, first, n, |line| {
                    let mut it = text::fields(line, &self.sep);
                    let col = parse_key(it.next().unwrap_or(&[]), self.key_width)?;
                    self.check_col(col, &mut last)?;
                    let f = it
                        .nth(slot as usize)
                        .ok_or_else(|| format!("column {col}: fewer values than {}", self.k))?;
                    let rest = it.count() as u64;
                    if rest != self.k - 1 - slot {
                        return Err(format!(
                            "column {col}: {} values where {} were expected",
                            slot + 1 + rest,
                            self.k
                        )
                        .into());
                    }
                    out.cols.push(col);
                    parse_value(f, self.value, &mut out.values)
                        .map_err(|e| format!("column {col}: {e}").into())
                })?;
            }
            _ => return Err("column records asked of a row format".into()),
        }
        Ok(())
    }

    /// Every value of column records `first..first + n`: value `slot` of a record belongs to
    /// stored row `rows[slot]` (`rows.len()` is the partition's saved rows).
    pub(crate) fn column_records(
        &self,
        ctx: &ReadCtx,
        file: &dyn ReadAt,
        first: u64,
        n: u64,
        rows: &[u32],
        out: &mut ColumnBlock,
    ) -> Res<()> {
        if rows.len() as u64 != self.k {
            return Err(format!("{} rows for {} saved rows", rows.len(), self.k).into());
        }
        let mut last = None;
        match self.kind {
            Kind::BinaryColumns => self.with_binary(ctx, file, first, n, |data| {
                let (kw, vw) = (self.key_width, self.value.width());
                for r in data.chunks_exact(self.rec as usize) {
                    let col = be_i64(&r[..kw]);
                    self.check_col(col, &mut last)?;
                    for (slot, &row) in rows.iter().enumerate() {
                        let at = kw + slot * vw;
                        out.cols.push(col);
                        out.rows.push(row);
                        be_value_to_le(&r[at..at + vw], &mut out.values);
                    }
                }
                Ok(())
            })?,
            Kind::TextColumns => {
                self.with_lines(ctx, file, first, n, |line| {
                    let mut it = text::fields(line, &self.sep);
                    let col = parse_key(it.next().unwrap_or(&[]), self.key_width)?;
                    self.check_col(col, &mut last)?;
                    let mut got = 0usize;
                    for f in it {
                        let Some(&row) = rows.get(got) else {
                            got += 1;
                            continue;
                        };
                        out.cols.push(col);
                        out.rows.push(row);
                        parse_value(f, self.value, &mut out.values)
                            .map_err(|e| format!("column {col}: {e}"))?;
                        got += 1;
                    }
                    if got != rows.len() {
                        return Err(format!(
                            "column {col}: {got} values where {} were expected",
                            self.k
                        )
                        .into());
                    }
                    Ok(())
                })?;
            }
            _ => return Err("column records asked of a row format".into()),
        }
        Ok(())
    }

    /// The first of records (row formats) or column records `u0..u1` — ids ascending, all of
    /// one row — whose column is ≥ `col`, else `u1`. Value formats: arithmetic from
    /// `value_col0`, the column of `u0`. Text: the first lines of whole strides first (one
    /// line read each), then one stride's lines (`with_lines`: at most two strides' bytes).
    pub(crate) fn seek(
        &self,
        file: &dyn ReadAt,
        u0: u64,
        u1: u64,
        col: i64,
        value_col0: i64,
    ) -> Res<u64> {
        if u0 >= u1 {
            return Ok(u1);
        }
        match self.kind {
            Kind::BinaryRows { has_col: false, .. } | Kind::TextRows { nfields: 1 } => {
                let ahead = (col as i128 - value_col0 as i128).clamp(0, (u1 - u0) as i128);
                Ok(u0 + ahead as u64)
            }
            Kind::BinaryRows { .. } | Kind::BinaryColumns => {
                let (mut lo, mut hi) = (u0, u1);
                while lo < hi {
                    let mid = lo + (hi - lo) / 2;
                    if self.col_of(ReadCtx::none(), file, mid, 0)? < col {
                        lo = mid + 1;
                    } else {
                        hi = mid;
                    }
                }
                Ok(lo)
            }
            Kind::TextRows { .. } | Kind::TextColumns => {
                // Whole strides inside u0..u1: [a, b). The first whose first line is ≥ col,
                // in [lo, hi]: galloping from the first (strides a, a+1, a+3, a+7, …) while
                // below the middle of what is left, then halving. A probe's line is found by
                // scanning the partition up to it, so a column near the start (a `head`)
                // scans about twice its own distance, not half the partition.
                let (a, b) = (u0.div_ceil(STRIDE), (u1 - 1) / STRIDE + 1);
                let (mut lo, mut hi) = (a, b.max(a));
                let mut step = 1u64;
                loop {
                    let probe = lo + step - 1;
                    if probe >= lo + (hi - lo) / 2 {
                        break;
                    }
                    if self.col_of(ReadCtx::none(), file, probe * STRIDE, 0)? < col {
                        lo = probe + 1;
                        step = step.saturating_mul(2);
                    } else {
                        hi = probe;
                        break;
                    }
                }
                while lo < hi {
                    let mid = lo + (hi - lo) / 2;
                    if self.col_of(ReadCtx::none(), file, mid * STRIDE, 0)? < col {
                        lo = mid + 1;
                    } else {
                        hi = mid;
                    }
                }
                // The answer lies after the last stride start below col, up to the next.
                let from = if lo == a { u0 } else { (lo - 1) * STRIDE };
                let to = if lo >= b { u1 } else { lo * STRIDE };
                let mut found = to;
                let mut i = from;
                let key_field = match self.kind {
                    Kind::TextRows { nfields } => nfields - 2,
                    _ => 0,
                };
                self.with_lines(ReadCtx::none(), file, from, to - from, |line| {
                    if found == to {
                        let f = text::fields(line, &self.sep).nth(key_field);
                        if parse_key(f.unwrap_or(&[]), self.key_width)? >= col {
                            found = i;
                        }
                    }
                    i += 1;
                    Ok(())
                })?;
                Ok(found)
            }
        }
    }

    /// The column id of record (row formats) or column record `i`; `value_col` is the column
    /// of a Value format's record `i` (its id is implicit). Text: reads line `i` alone when it
    /// starts a stride.
    pub(crate) fn col_of(
        &self,
        ctx: &ReadCtx,
        file: &dyn ReadAt,
        i: u64,
        value_col: i64,
    ) -> Res<i64> {
        match self.kind {
            Kind::BinaryRows { has_col: false, .. } | Kind::TextRows { nfields: 1 } => {
                Ok(value_col)
            }
            Kind::BinaryRows { has_row, .. } => {
                let at = if has_row { 4 } else { 0 };
                self.with_binary(ctx, file, i, 1, |r| Ok(be_i64(&r[at..at + self.key_width])))
            }
            Kind::BinaryColumns => {
                self.with_binary(ctx, file, i, 1, |r| Ok(be_i64(&r[..self.key_width])))
            }
            Kind::TextRows { .. } | Kind::TextColumns => {
                let field = match self.kind {
                    Kind::TextRows { nfields } => nfields - 2,
                    _ => 0,
                };
                let key = |line: &[u8]| {
                    let line = line.strip_suffix(b"\r").unwrap_or(line);
                    parse_key(
                        text::fields(line, &self.sep).nth(field).unwrap_or(&[]),
                        self.key_width,
                    )
                };
                let index = self
                    .lines
                    .as_ref()
                    .ok_or("lines asked of a binary format")?;
                if i % STRIDE == 0 && i < self.records {
                    // The line alone: from its indexed offset to its LF.
                    let s = (i / STRIDE) as usize;
                    let (a, b) = index.span(file, s, s + 1)?;
                    let mut want = (b - a).min(256);
                    loop {
                        let data = file.read_vec(index.start() + a, want as usize)?;
                        if let Some(nl) = memchr::memchr(b'\n', &data) {
                            return key(&data[..nl]);
                        }
                        if want == b - a {
                            if b == index.end() {
                                // The last line, without LF.
                                return key(&data);
                            }
                            return Err("a line without LF".into());
                        }
                        want = (want * 4).min(b - a);
                    }
                }
                let mut col = 0;
                self.with_lines(ctx, file, i, 1, |line| {
                    col = key(line)?;
                    Ok(())
                })?;
                Ok(col)
            }
        }
    }

    /// Calls `f` with binary records `first..first + n`, then lets the file drop them.
    fn with_binary<T>(
        &self,
        ctx: &ReadCtx,
        file: &dyn ReadAt,
        first: u64,
        n: u64,
        f: impl FnOnce(&[u8]) -> Res<T>,
    ) -> Res<T> {
        let end = first.checked_add(n).filter(|&e| e <= self.records);
        if end.is_none() {
            return Err(format!("records {first}+{n} beyond the {}", self.records).into());
        }
        let len = usize::try_from(n * self.rec).map_err(|_| "read too large")?;
        let at = self.start + first * self.rec;
        let res = file.with_bytes(ctx, at, len, f);
        file.done_with(at, n * self.rec);
        res?
    }
}

fn in_file(inp: &PartInput<'_>, offset: u64, length: u64) -> Res<()> {
    let size = inp.file.size();
    match offset.checked_add(length) {
        Some(end) if end <= size => Ok(()),
        _ => Err(format!(
            "offset {offset} + length {length} is beyond the end of the file ({size} bytes)"
        )
        .into()),
    }
}

#[cfg(test)]
mod tests;

/// A whole partition read through `Region` (one read per saved row, or per column slot),
/// as `decode::decode_partition` would give it: for the fuzzer, which checks the two agree.
#[cfg(any(test, feature = "testkit"))]
pub fn decode_by_range(inp: &PartInput<'_>) -> Result<crate::model::SparseRows, DecodeFault> {
    let r = Region::locate(inp, None)?;
    let part = inp.part;
    let mut out = crate::model::SparseRows {
        row_ptr: vec![0],
        ..Default::default()
    };
    let mut got = Entries::default();
    let mut record = 0u64;
    for (slot, &(row, n)) in part.rows.iter().enumerate() {
        got.clear();
        if inp.meta.format.is_column() {
            if part.save_col_num > 0 {
                r.columns(
                    ReadCtx::none(),
                    inp.file,
                    0,
                    part.save_col_num,
                    slot as u64,
                    &mut got,
                )?;
            }
        } else {
            let run = RowRun {
                row,
                first_col: part.start_col,
            };
            r.rows(ReadCtx::none(), inp.file, record, n, run, &mut got)?;
            record = record.checked_add(n).ok_or("record count overflows")?;
        }
        out.rows.push(row as u64);
        out.cols.extend_from_slice(&got.cols);
        out.values.extend_from_slice(&got.values);
        out.row_ptr.push(out.cols.len() as u64);
    }
    r.check_all(inp.file)?;
    Ok(out)
}
