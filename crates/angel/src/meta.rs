//! The matrix meta file (formats/angel.md §3): envelope detection, JSON decoding into typed
//! structs and the meta-only validation checks of §11.
//!
//! Integers are deserialized as `i64` (serde_json keeps integer literals exact; a fraction or
//! exponent is a type error), then range-checked. `partMetas`/`rowMetas` are objects keyed by
//! decimal strings; they become vectors sorted by numeric id, which is the order the data was
//! written in (never the JSON order, see §9.2).

use std::collections::BTreeMap;

use serde::Deserialize;

use super::rowtype::RowType;
use super::AngelFormat;
use crate::source::{ReadAt, ReadExt};

#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum MetaError {
    #[error(
        "Angel pre-2.0.0 development meta encoding (JSON inside Java writeUTF) is not supported"
    )]
    WriteUtf,
    #[error("legacy Angel (≤ 2.0.0-alpha) model is not supported (binary meta)")]
    LegacyBinary,
    #[error("corrupt meta: {0}")]
    Corrupt(String),
    /// The meta's bytes could not be read (`transient`: a remote fault that may pass).
    #[error("{message}")]
    Source { message: String, transient: bool },
    #[error("unsupported: {0}")]
    Unsupported(String),
}

impl From<crate::source::SourceError> for MetaError {
    fn from(e: crate::source::SourceError) -> Self {
        MetaError::Source {
            transient: e.is_transient(),
            message: e.to_string(),
        }
    }
}

fn corrupt(msg: impl Into<String>) -> MetaError {
    MetaError::Corrupt(msg.into())
}

/// Returns the JSON bytes of a meta file after the checks of §3.2, in that order. Reads the
/// 5-byte header first and the body only once its length equals `size − 4`.
pub fn read_envelope(src: &dyn ReadAt) -> Result<Vec<u8>, MetaError> {
    let size = src.size();
    let head_len = size.min(5) as usize;
    let head = src.read_vec(0, head_len)?;
    if head.len() >= 5 {
        let n = u32::from_be_bytes([head[0], head[1], head[2], head[3]]) as u64;
        let length_ok = n == size - 4;
        if length_ok && head[4] == b'{' {
            return Ok(src.read_vec(4, n as usize)?);
        }
        if length_ok {
            return Err(corrupt(format!(
                "meta length header matches the file size but byte 4 is 0x{:02x}, not '{{'",
                head[4]
            )));
        }
        if head[4] == b'{' && u16::from_be_bytes([head[0], head[1]]) as u64 + 2 != size {
            return Err(corrupt(format!(
                "meta length header says {n} bytes but the file holds {} after the header \
                 (truncated or padded)",
                size - 4
            )));
        }
    }
    if head.len() >= 2 && u16::from_be_bytes([head[0], head[1]]) as u64 + 2 == size {
        return Err(MetaError::WriteUtf);
    }
    if head.len() >= 3 && head[2] == b'{' {
        return Err(MetaError::WriteUtf);
    }
    Err(MetaError::LegacyBinary)
}

// ---- raw JSON shape (field names as Angel writes them) ----

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawMeta {
    matrix_name: Option<String>,
    format_class_name: String,
    row_type: i64,
    row: i64,
    col: i64,
    block_row: Option<i64>,
    block_col: Option<i64>,
    #[serde(default)]
    options: BTreeMap<String, serde_json::Value>,
    part_metas: BTreeMap<String, RawPart>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawPart {
    part_id: i64,
    start_row: i64,
    end_row: i64,
    start_col: i64,
    end_col: i64,
    save_row_num: Option<i64>,
    save_col_num: Option<i64>,
    save_col_elem_num: Option<i64>,
    file_name: String,
    offset: i64,
    length: i64,
    row_metas: BTreeMap<String, RawRow>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawRow {
    row_id: i64,
    element_num: i64,
    #[serde(default)]
    save_type: i64,
}

// ---- validated meta ----

#[derive(Clone, Debug)]
pub struct MatrixMeta {
    pub matrix_name: Option<String>,
    /// The class name as written (for the `.json`).
    pub format_class_name: String,
    pub format: AngelFormat,
    pub row_type: RowType,
    pub rows: u32,
    /// Declared column count; ≤ 0 means unbounded.
    pub col: i64,
    pub block_row: Option<i64>,
    pub block_col: Option<i64>,
    pub options: BTreeMap<String, String>,
    /// Sorted by `part_id`.
    pub parts: Vec<PartMeta>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct PartMeta {
    pub part_id: i32,
    pub start_row: u32,
    pub end_row: u32,
    pub start_col: i64,
    pub end_col: i64,
    pub save_row_num: i64,
    pub save_col_num: u64,
    pub save_col_elem_num: u64,
    pub file_name: String,
    pub offset: u64,
    pub length: u64,
    /// `(rowId, elementNum)` ascending by row id.
    pub rows: Vec<(u32, u64)>,
}

impl PartMeta {
    /// `startCol = endCol = 0`: hash partitioning from Angel 3.2.0 (§9.4); no column range.
    pub(crate) fn is_hash(&self) -> bool {
        self.start_col == 0 && self.end_col == 0
    }
}

fn to_i32(v: i64, what: &str) -> Result<i32, MetaError> {
    i32::try_from(v).map_err(|_| corrupt(format!("{what} = {v} does not fit in an int")))
}

fn non_negative(v: i64, what: &str) -> Result<u64, MetaError> {
    u64::try_from(v).map_err(|_| corrupt(format!("{what} = {v} is negative")))
}

fn parse_key(key: &str, what: &str) -> Result<i64, MetaError> {
    key.parse::<i64>()
        .map_err(|_| corrupt(format!("{what} key '{key}' is not a decimal id")))
}

/// A plain file name: not empty, no `/`, not `.` or `..`.
fn is_plain_file_name(name: &str) -> bool {
    !name.is_empty() && !name.contains('/') && !name.contains('\0') && name != "." && name != ".."
}

/// Decodes and validates the JSON of a meta (the checks of §11 that need no data file).
pub fn parse_meta(json: &[u8]) -> Result<MatrixMeta, MetaError> {
    let raw: RawMeta =
        serde_json::from_slice(json).map_err(|e| corrupt(format!("meta JSON: {e}")))?;
    let simple = raw
        .format_class_name
        .rsplit('.')
        .next()
        .unwrap_or(&raw.format_class_name);
    let format = AngelFormat::from_class_name(simple).ok_or_else(|| {
        MetaError::Unsupported(format!("Angel format '{}'", raw.format_class_name))
    })?;
    let row_type = RowType::from_code(raw.row_type).ok_or_else(|| {
        MetaError::Unsupported(format!(
            "rowType {} (only 0..27 can be saved by the eight formats)",
            raw.row_type
        ))
    })?;
    let rows = to_i32(raw.row, "row")?;
    let rows = u32::try_from(rows).map_err(|_| corrupt(format!("row = {rows} is negative")))?;
    let options = raw
        .options
        .into_iter()
        .map(|(k, v)| {
            let v = match v {
                serde_json::Value::String(s) => s,
                other => other.to_string(),
            };
            (k, v)
        })
        .collect();
    let mut parts = Vec::with_capacity(raw.part_metas.len());
    for (key, p) in raw.part_metas {
        let id = parse_key(&key, "partMetas")?;
        if id != p.part_id {
            return Err(corrupt(format!(
                "partMetas key {key} holds partId {}",
                p.part_id
            )));
        }
        parts.push(validate_part(p, rows, raw.col, format, row_type)?);
    }
    parts.sort_by_key(|p| p.part_id);
    Ok(MatrixMeta {
        matrix_name: raw.matrix_name,
        format_class_name: raw.format_class_name,
        format,
        row_type,
        rows,
        col: raw.col,
        block_row: raw.block_row,
        block_col: raw.block_col,
        options,
        parts,
    })
}

fn validate_part(
    mut p: RawPart,
    rows: u32,
    col: i64,
    format: AngelFormat,
    _row_type: RowType,
) -> Result<PartMeta, MetaError> {
    let id = to_i32(p.part_id, "partId")?;
    let ctx = |m: String| corrupt(format!("partition {id}: {m}"));
    let start_row = to_i32(p.start_row, "startRow")?;
    let end_row = to_i32(p.end_row, "endRow")?;
    if !(0 <= start_row && start_row < end_row && end_row as i64 <= rows as i64) {
        return Err(ctx(format!(
            "row range [{start_row}, {end_row}) is not within [0, {rows})"
        )));
    }
    if p.start_col > p.end_col {
        return Err(ctx(format!(
            "startCol {} > endCol {}",
            p.start_col, p.end_col
        )));
    }
    if col > 0 && !(p.start_col == 0 && p.end_col == 0) && (p.start_col < 0 || p.end_col > col) {
        return Err(ctx(format!(
            "column range [{}, {}) is not within [0, {col})",
            p.start_col, p.end_col
        )));
    }
    if !is_plain_file_name(&p.file_name) {
        return Err(ctx(format!(
            "fileName '{}' is not a plain file name",
            p.file_name
        )));
    }
    let offset = non_negative(p.offset, "offset").map_err(|e| ctx(e.to_string()))?;
    let length = non_negative(p.length, "length").map_err(|e| ctx(e.to_string()))?;
    if offset.checked_add(length).is_none() {
        return Err(ctx("offset + length overflows".into()));
    }
    let row_metas = std::mem::take(&mut p.row_metas);
    let row_list = part_rows(id, start_row..end_row, row_metas)?;
    let (save_col_num, save_col_elem_num) = column_counts(id, &p, format, row_list.len())?;
    Ok(PartMeta {
        part_id: id,
        start_row: start_row as u32,
        end_row: end_row as u32,
        start_col: p.start_col,
        end_col: p.end_col,
        save_row_num: p.save_row_num.unwrap_or(0),
        save_col_num,
        save_col_elem_num,
        file_name: p.file_name,
        offset,
        length,
        rows: row_list,
    })
}

/// The saved rows of partition `id` from its `rowMetas` (each within `rows`), by row id.
fn part_rows(
    id: i32,
    rows: std::ops::Range<i32>,
    row_metas: BTreeMap<String, RawRow>,
) -> Result<Vec<(u32, u64)>, MetaError> {
    let ctx = |m: String| corrupt(format!("partition {id}: {m}"));
    let mut row_list = Vec::with_capacity(row_metas.len());
    for (key, r) in row_metas {
        let rid = parse_key(&key, "rowMetas").map_err(|e| ctx(e.to_string()))?;
        if rid != r.row_id {
            return Err(ctx(format!("rowMetas key {key} holds rowId {}", r.row_id)));
        }
        if !(rows.start as i64..rows.end as i64).contains(&rid) {
            return Err(ctx(format!(
                "rowId {rid} outside the partition's rows [{}, {})",
                rows.start, rows.end
            )));
        }
        let n = non_negative(r.element_num, "elementNum").map_err(|e| ctx(e.to_string()))?;
        if to_i32(r.element_num, "elementNum").is_err() {
            return Err(ctx(format!(
                "elementNum {} does not fit in an int",
                r.element_num
            )));
        }
        if r.save_type != 0 {
            log::debug!("partition {id} row {rid}: saveType {} ignored", r.save_type);
        }
        row_list.push((rid as u32, n));
    }
    row_list.sort_unstable_by_key(|r| r.0);
    Ok(row_list)
}

/// `(saveColNum, saveColElemNum)`: required by the column formats, where every saved row
/// appears in every column record.
fn column_counts(
    id: i32,
    p: &RawPart,
    format: AngelFormat,
    saved_rows: usize,
) -> Result<(u64, u64), MetaError> {
    let ctx = |m: String| corrupt(format!("partition {id}: {m}"));
    let save_col_num = p.save_col_num.unwrap_or(0);
    let save_col_elem_num = p.save_col_elem_num.unwrap_or(0);
    let is_column = matches!(format, AngelFormat::TextColumn | AngelFormat::BinaryColumn);
    if is_column && (p.save_col_num.is_none() || p.save_col_elem_num.is_none()) {
        return Err(ctx("column format without saveColNum/saveColElemNum".into()));
    }
    let save_col_num = non_negative(to_i32(save_col_num, "saveColNum")? as i64, "saveColNum")
        .map_err(|e| ctx(e.to_string()))?;
    let save_col_elem_num = non_negative(
        to_i32(save_col_elem_num, "saveColElemNum")? as i64,
        "saveColElemNum",
    )
    .map_err(|e| ctx(e.to_string()))?;
    if is_column && save_col_elem_num != saved_rows as u64 {
        return Err(ctx(format!(
            "saveColElemNum {save_col_elem_num} differs from the {} rowMetas",
            saved_rows
        )));
    }
    Ok((save_col_num, save_col_elem_num))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::MemSource;

    fn env(json: &str) -> Vec<u8> {
        let mut v = (json.len() as u32).to_be_bytes().to_vec();
        v.extend_from_slice(json.as_bytes());
        v
    }

    #[test]
    fn envelope_cases() {
        let good = env("{\"a\":1}");
        let s = MemSource::new("m", good.clone());
        assert_eq!(read_envelope(&s).unwrap(), b"{\"a\":1}");
        // padded: length header too small
        let mut padded = good.clone();
        padded.push(b' ');
        let e = read_envelope(&MemSource::new("m", padded)).unwrap_err();
        assert!(matches!(e, MetaError::Corrupt(_)), "{e}");
        // truncated
        let e = read_envelope(&MemSource::new("m", good[..good.len() - 1].to_vec())).unwrap_err();
        assert!(matches!(e, MetaError::Corrupt(_)), "{e}");
        // writeUTF
        let mut utf = (7u16).to_be_bytes().to_vec();
        utf.extend_from_slice(b"{\"a\":1}");
        assert_eq!(
            read_envelope(&MemSource::new("m", utf)).unwrap_err(),
            MetaError::WriteUtf
        );
        // legacy binary
        let legacy = vec![0u8, 0, 0, 1, 0, 0, 0, 5, 1, 2, 3];
        assert_eq!(
            read_envelope(&MemSource::new("m", legacy)).unwrap_err(),
            MetaError::LegacyBinary
        );
        // a huge claimed length does not allocate
        let huge = vec![0x7f, 0xff, 0xff, 0xff, b'{'];
        assert!(read_envelope(&MemSource::new("m", huge)).is_err());
        // right length, not JSON
        let e = read_envelope(&MemSource::new("m", vec![0, 0, 0, 1, b'x'])).unwrap_err();
        assert!(matches!(e, MetaError::Corrupt(_)));
    }

    const LR: &str = r#"{"matrixId":0,"matrixName":"w","formatClassName":"com.tencent.angel.model.output.format.ColIdValueTextRowFormat","rowType":12,"row":3,"col":2147483657,"blockRow":3,"blockCol":1073741828,"options":{},"partMetas":{"0":{"partId":0,"startRow":0,"endRow":3,"startCol":0,"endCol":1073741828,"nnz":0,"saveRowNum":3,"saveColNum":0,"saveColElemNum":0,"fileName":"0","offset":0,"length":3820,"rowMetas":{"16":{"rowId":2,"offset":0,"elementNum":0,"saveType":0}}}}}"#;

    #[test]
    fn parses_and_checks_keys() {
        let e = parse_meta(LR.as_bytes()).unwrap_err();
        assert!(e.to_string().contains("rowMetas key 16"), "{e}");
        let ok = LR.replace("\"16\"", "\"2\"");
        let m = parse_meta(ok.as_bytes()).unwrap();
        assert_eq!(m.col, 2147483657);
        assert_eq!(m.format, AngelFormat::ColIdValueText);
        assert_eq!(m.parts[0].rows, vec![(2, 0)]);
        let bad = ok.replace("\"rowType\":12", "\"rowType\":28");
        assert!(matches!(
            parse_meta(bad.as_bytes()),
            Err(MetaError::Unsupported(_))
        ));
        let bad = ok.replace("ColIdValueTextRowFormat", "SnapshotFormat");
        let e = parse_meta(bad.as_bytes()).unwrap_err();
        assert!(e.to_string().contains("SnapshotFormat"));
        let bad = ok.replace("\"fileName\":\"0\"", "\"fileName\":\"../x\"");
        assert!(parse_meta(bad.as_bytes()).is_err());
        let bad = ok.replace("\"length\":3820", "\"length\":3820.0");
        assert!(parse_meta(bad.as_bytes()).is_err());
    }

    #[test]
    fn rows_sorted_numerically() {
        let j = r#"{"formatClassName":"x.ColIdValueBinaryRowFormat","rowType":0,"row":20,"col":4,"partMetas":{"0":{"partId":0,"startRow":14,"endRow":18,"startCol":0,"endCol":4,"fileName":"0","offset":0,"length":0,"rowMetas":{"16":{"rowId":16,"elementNum":0},"17":{"rowId":17,"elementNum":0},"14":{"rowId":14,"elementNum":0},"15":{"rowId":15,"elementNum":0}}}}}"#;
        let m = parse_meta(j.as_bytes()).unwrap();
        let ids: Vec<u32> = m.parts[0].rows.iter().map(|r| r.0).collect();
        assert_eq!(ids, vec![14, 15, 16, 17]);
    }
}
