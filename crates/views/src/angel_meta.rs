//! An `.angel/` matrix's `meta` (formats/angel.md §3, §13): the 2.x envelope (`i32` length,
//! then compact UTF-8 JSON), keys in Angel's order, `/` escaped, integers plain, row metas in
//! ascending row id. Written by hand because Angel's key order and escaping are part of what
//! makes the output byte-comparable with Angel's own.

use std::fmt::Write as _;

/// The matrix-level fields.
pub(crate) struct Matrix<'a> {
    pub(crate) name: &'a str,
    pub(crate) class_name: &'a str,
    pub(crate) row_type: i32,
    pub(crate) rows: u64,
    pub(crate) col: i64,
    pub(crate) block_row: u64,
    pub(crate) block_col: u64,
    /// `feature.index.range.start` / `.end`.
    pub(crate) range: (i64, i64),
}

/// One partition, as its meta says it.
pub(crate) struct Part {
    pub(crate) id: usize,
    pub(crate) rows: (u64, u64),
    pub(crate) cols: (i64, i64),
    pub(crate) nnz: u64,
    /// Column formats: `(saveColNum, saveColElemNum)`; row formats: `None`.
    pub(crate) columns: Option<(u64, u64)>,
    pub(crate) file: String,
    pub(crate) offset: u64,
    pub(crate) length: u64,
    pub(crate) row_metas: RowMetas,
}

/// A partition's `(rowId, elementNum)` pairs, ascending.
#[derive(Clone)]
pub(crate) enum RowMetas {
    /// Every row of a range, each with the same count (a dense cell).
    Each(std::ops::Range<u64>, u64),
    List(Vec<(u64, u64)>),
}

impl RowMetas {
    fn len(&self) -> u64 {
        match self {
            RowMetas::Each(r, _) => r.end - r.start,
            RowMetas::List(l) => l.len() as u64,
        }
    }

    fn for_each(&self, mut f: impl FnMut(u64, u64)) {
        match self {
            RowMetas::Each(r, n) => r.clone().for_each(|row| f(row, *n)),
            RowMetas::List(l) => l.iter().for_each(|&(row, n)| f(row, n)),
        }
    }
}

/// JSON string with Angel's escaping (`/` as `\/`, control characters as `\uXXXX`).
fn string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '/' => out.push_str("\\/"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// The whole `meta` file: envelope and JSON.
pub(crate) fn encode(m: &Matrix, parts: &[Part]) -> Vec<u8> {
    let mut j = String::with_capacity(256 + parts.len() * 256);
    j.push_str("{\"matrixId\":0,\"matrixName\":");
    string(&mut j, m.name);
    j.push_str(",\"formatClassName\":");
    string(
        &mut j,
        &format!("com.tencent.angel.model.output.format.{}", m.class_name),
    );
    let _ = write!(
        j,
        ",\"rowType\":{},\"row\":{},\"col\":{},\"blockRow\":{},\"blockCol\":{}",
        m.row_type, m.rows, m.col, m.block_row, m.block_col
    );
    let _ = write!(
        j,
        ",\"options\":{{\"feature.index.range.start\":\"{}\",\"feature.index.range.end\":\"{}\"}}",
        m.range.0, m.range.1
    );
    j.push_str(",\"partMetas\":{");
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            j.push(',');
        }
        let (save_rows, (save_cols, save_elems)) = match p.columns {
            Some(c) => (0, c),
            None => (p.row_metas.len(), (0, 0)),
        };
        let _ = write!(
            j,
            "\"{id}\":{{\"partId\":{id},\"startRow\":{},\"endRow\":{},\"startCol\":{},\"endCol\":{},\
             \"nnz\":{},\"saveRowNum\":{save_rows},\"saveColNum\":{save_cols},\
             \"saveColElemNum\":{save_elems},\"fileName\":",
            p.rows.0,
            p.rows.1,
            p.cols.0,
            p.cols.1,
            p.nnz,
            id = p.id,
        );
        string(&mut j, &p.file);
        let _ = write!(
            j,
            ",\"offset\":{},\"length\":{},\"rowMetas\":{{",
            p.offset, p.length
        );
        // Angel mimicry: a row's offset is its partition's (row formats) or -1 (columns).
        let row_offset = if p.columns.is_some() {
            -1
        } else {
            p.offset as i64
        };
        let mut first = true;
        p.row_metas.for_each(|row, n| {
            if !std::mem::take(&mut first) {
                j.push(',');
            }
            let _ = write!(
                j,
                "\"{row}\":{{\"rowId\":{row},\"offset\":{row_offset},\"elementNum\":{n},\"saveType\":0}}"
            );
        });
        j.push_str("}}");
    }
    j.push_str("}}");
    let mut out = Vec::with_capacity(j.len() + 4);
    out.extend_from_slice(&(j.len() as i32).to_be_bytes());
    out.extend_from_slice(j.as_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// formats/angel.md §3.5: a real 1303-byte meta, reproduced byte for byte (its options
    /// were `{}`; ours always carry the index range, so that part is swapped back).
    #[test]
    fn the_documented_meta_comes_out_byte_for_byte() {
        let m = Matrix {
            name: "input_weight",
            class_name: "ColIdValueTextRowFormat",
            row_type: 12,
            rows: 3,
            col: 2147483657,
            block_row: 3,
            block_col: 1073741828,
            range: (0, 2147483657),
        };
        let part = |id, c0, c1, file: &str, offset, length, n: [u64; 3]| Part {
            id,
            rows: (0, 3),
            cols: (c0, c1),
            nnz: 0,
            columns: None,
            file: file.into(),
            offset,
            length,
            row_metas: RowMetas::List(vec![(0, n[0]), (1, n[1]), (2, n[2])]),
        };
        let parts = [
            part(0, 0, 1073741828, "0", 0, 3820, [123, 123, 0]),
            part(1, 1073741828, 2147483656, "1", 0, 0, [0, 0, 0]),
            part(2, 2147483656, 2147483657, "0", 3820, 0, [0, 0, 0]),
        ];
        let ours = encode(&m, &parts);
        let json = String::from_utf8(ours[4..].to_vec()).unwrap().replace(
            "{\"feature.index.range.start\":\"0\",\"feature.index.range.end\":\"2147483657\"}",
            "{}",
        );
        assert_eq!(json.len(), 1299);
        assert!(json.starts_with(
            "{\"matrixId\":0,\"matrixName\":\"input_weight\",\"formatClassName\":\
             \"com.tencent.angel.model.output.format.ColIdValueTextRowFormat\",\"rowType\":12,"
        ));
        assert!(json.contains(
            "\"2\":{\"partId\":2,\"startRow\":0,\"endRow\":3,\"startCol\":2147483656,\
             \"endCol\":2147483657,\"nnz\":0,\"saveRowNum\":3,\"saveColNum\":0,\
             \"saveColElemNum\":0,\"fileName\":\"0\",\"offset\":3820,\"length\":0,\"rowMetas\":\
             {\"0\":{\"rowId\":0,\"offset\":3820,\"elementNum\":0,\"saveType\":0},"
        ));
        assert_eq!(
            i32::from_be_bytes(ours[..4].try_into().unwrap()) as usize,
            ours.len() - 4
        );
        let mut s = String::new();
        string(&mut s, "a/b\"\n");
        assert_eq!(s, "\"a\\/b\\\"\\u000a\"");
    }
}
