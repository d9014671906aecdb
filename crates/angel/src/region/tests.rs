//! Reads by range equal the whole-partition decoder, across line-index strides, for text and
//! binary row formats and both column formats, LF and CRLF.

use super::*;
use crate::decode::decode_partition;
use crate::meta::{parse_meta, MatrixMeta};
use crate::source::{MemSource, ReadCtx};

/// A one-partition, one-row meta over `n` records of `format` holding columns `10 i`.
fn meta(format: &str, row_type: i64, n: u64, len: usize, columns: bool) -> Vec<u8> {
    let (save_col, elem, rows) = if columns {
        (n, 2, r#""0":{"rowId":0,"offset":-1,"elementNum":1,"saveType":0},"1":{"rowId":1,"offset":-1,"elementNum":1,"saveType":0}"#.to_string())
    } else {
        (
            0,
            0,
            format!(r#""0":{{"rowId":0,"offset":0,"elementNum":{n},"saveType":0}}"#),
        )
    };
    format!(
        r#"{{"matrixName":"m","formatClassName":"{format}","rowType":{row_type},"row":2,"col":100000,
        "partMetas":{{"0":{{"partId":0,"startRow":0,"endRow":2,"startCol":0,"endCol":100000,
        "saveColNum":{save_col},"saveColElemNum":{elem},"fileName":"0","offset":0,"length":{len},
        "rowMetas":{{{rows}}}}}}}}}"#
    )
    .into_bytes()
}

/// The input of partition 0 of `m`, in `file`, fields separated by `,`.
fn first_part<'a>(m: &'a MatrixMeta, file: &'a dyn ReadAt) -> PartInput<'a> {
    PartInput {
        meta: m,
        part: &m.parts[0],
        file,
        sep: ",",
        lines_before: 0,
    }
}

fn check(format: &str, row_type: i64, n: u64, data: Vec<u8>, columns: bool) {
    let m = parse_meta(&meta(format, row_type, n, data.len(), columns)).unwrap();
    let file = MemSource::new("0", data);
    let inp = first_part(&m, &file);
    let whole = decode_partition(&inp).unwrap_or_else(|e| panic!("{format} {n}: {e}"));
    let r = Region::locate(&inp, None).unwrap_or_else(|e| panic!("{format} {n}: {e}"));
    let slots: &[u64] = if columns { &[0, 1] } else { &[0] };
    for &slot in slots {
        let (a, b) = (
            whole.row_ptr[slot as usize],
            whole.row_ptr[slot as usize + 1],
        );
        let want_cols = &whole.cols[a as usize..b as usize];
        for step in [1u64, 7, 1024, 1500, n.max(1)] {
            let mut got = Entries::default();
            let mut at = 0;
            while at < n {
                let k = step.min(n - at);
                if columns {
                    r.columns(ReadCtx::none(), &file, at, k, slot, &mut got)
                        .unwrap();
                } else {
                    let run = RowRun {
                        row: 0,
                        first_col: at as i64,
                    };
                    r.rows(ReadCtx::none(), &file, at, k, run, &mut got)
                        .unwrap();
                }
                at += k;
            }
            assert_eq!(got.cols, want_cols, "{format} {n} by {step}");
            assert_eq!(got.values, whole.values[a as usize * 4..b as usize * 4]);
        }
        for i in [0, n / 2, n.saturating_sub(1)]
            .into_iter()
            .filter(|&i| i < n)
        {
            assert_eq!(
                r.col_of(ReadCtx::none(), &file, i, 0).unwrap(),
                10 * i as i64,
                "{format} {n} col {i}"
            );
        }
        // Columns are 10 i: the first at or after 10 i − 1, 10 i, 10 i + 1.
        for i in (0..n)
            .step_by(97)
            .chain([n.saturating_sub(1), 1023, 1024, 1025])
        {
            if i >= n {
                continue;
            }
            let c = 10 * i as i64;
            assert_eq!(
                r.seek(&file, 0, n, c - 1, 0).unwrap(),
                i,
                "{format} {n} seek {c}-1"
            );
            assert_eq!(
                r.seek(&file, 0, n, c, 0).unwrap(),
                i,
                "{format} {n} seek {c}"
            );
            let next = r.seek(&file, 0, n, c + 1, 0).unwrap();
            assert_eq!(next, i + 1, "{format} {n} seek {c}+1");
            assert_eq!(
                r.seek(&file, i, n, 0, 0).unwrap(),
                i,
                "{format} {n} from {i}"
            );
        }
    }
    let mut got = Entries::default();
    assert!(r
        .rows(ReadCtx::none(), &file, n, 1, AT_ROW_0, &mut got)
        .is_err());
}

/// Records that start row 0 at its column 0.
const AT_ROW_0: RowRun = RowRun {
    row: 0,
    first_col: 0,
};

#[test]
fn text_rows_across_strides() {
    for n in [0u64, 1, 1023, 1024, 1025, 2048, 3001] {
        let text: String = (0..n).map(|i| format!("{},{}.5\n", 10 * i, i)).collect();
        check("ColIdValueTextRowFormat", 10, n, text.into_bytes(), false);
        let text: String = (0..n).map(|i| format!("0,{},{}.5\n", 10 * i, i)).collect();
        check(
            "RowIdColIdValueTextRowFormat",
            10,
            n,
            text.into_bytes(),
            false,
        );
    }
}

#[test]
fn binary_rows_and_columns() {
    for n in [0u64, 1, 1025] {
        let mut b = Vec::new();
        for i in 0..n {
            b.extend_from_slice(&(10 * i as i32).to_be_bytes());
            b.extend_from_slice(&(i as f32 + 0.5).to_be_bytes());
        }
        check("ColIdValueBinaryRowFormat", 10, n, b, false);
        let mut b = Vec::new();
        for i in 0..n {
            b.extend_from_slice(&(10 * i as i32).to_be_bytes());
            b.extend_from_slice(&(i as f32).to_be_bytes());
            b.extend_from_slice(&(-(i as f32)).to_be_bytes());
        }
        check("BinaryColumnFormat", 10, n, b, true);
    }
}

#[test]
fn text_columns_across_strides() {
    for n in [1u64, 1024, 2500] {
        let text: String = (0..n)
            .map(|i| format!("{},{i}.25,-{i}\n", 10 * i))
            .collect();
        check("TextColumnFormat", 10, n, text.into_bytes(), true);
    }
}

/// The line index checks what the whole decoder checks without decoding, when it reaches the
/// end: the line count (a last line without LF is a line).
#[test]
fn miscounted_text_is_refused() {
    let data = b"0,1.0\n10,2.0";
    let m = parse_meta(&meta("ColIdValueTextRowFormat", 10, 2, data.len(), false)).unwrap();
    let file = MemSource::new("0", data.to_vec());
    let inp = first_part(&m, &file);
    let r = Region::locate(&inp, None).unwrap();
    let mut got = Entries::default();
    r.rows(ReadCtx::none(), &file, 0, 2, AT_ROW_0, &mut got)
        .unwrap();
    assert_eq!(got.cols, [0, 10]);
    assert_eq!(
        got.values,
        [1.0f32.to_le_bytes(), 2.0f32.to_le_bytes()].concat()
    );
    assert_eq!(r.col_of(ReadCtx::none(), &file, 1, 0).unwrap(), 10);
    r.check_all(&file).unwrap();
    assert_eq!(decode_by_range(&inp).unwrap().cols, [0, 10]);

    for (data, n) in [(&b"0,1.0\n10,2.0"[..], 3u64), (&b"0,1.0\n"[..], 2)] {
        let m = parse_meta(&meta("ColIdValueTextRowFormat", 10, n, data.len(), false)).unwrap();
        let file = MemSource::new("0", data.to_vec());
        let inp = first_part(&m, &file);
        let r = Region::locate(&inp, None).unwrap();
        let mut got = Entries::default();
        // (The first piece scanned holds the whole partition: even line 0 fails.)
        assert!(r
            .rows(ReadCtx::none(), &file, 1, 1, AT_ROW_0, &mut got)
            .is_err());
        assert!(
            r.check_all(&file).is_err(),
            "{:?}",
            String::from_utf8_lossy(data)
        );
        assert!(decode_by_range(&inp).is_err());
    }
}

/// A seek to a column near the start of a big text partition (what a `head` of its dense
/// layouts asks) scans the line index only that far, not to the partition's middle.
#[test]
fn a_seek_near_the_start_scans_little() {
    #[derive(Debug)]
    struct Counting(MemSource, std::sync::atomic::AtomicU64);
    impl ReadAt for Counting {
        fn about(&self) -> &crate::source::About {
            self.0.about()
        }
        fn read_with(
            &self,
            ctx: &crate::source::ReadCtx,
            offset: u64,
            to: crate::source::To<'_>,
        ) -> Result<(), crate::source::SourceError> {
            self.1
                .fetch_add(to.len(), std::sync::atomic::Ordering::Relaxed);
            self.0.read_with(ctx, offset, to)
        }
    }
    let n = 200_000u64;
    let text: String = (0..n).map(|i| format!("{},{}.5\n", 10 * i, i)).collect();
    let len = text.len();
    let m = parse_meta(&meta("ColIdValueTextRowFormat", 10, n, len, false)).unwrap();
    let file = Counting(MemSource::new("0", text.into_bytes()), Default::default());
    let inp = first_part(&m, &file);
    let r = Region::locate(&inp, None).unwrap();
    let before = file.1.load(std::sync::atomic::Ordering::Relaxed);
    assert_eq!(r.seek(&file, 0, n, 10 * 30, 0).unwrap(), 30);
    let read = file.1.load(std::sync::atomic::Ordering::Relaxed) - before;
    // Lines are ~16 bytes: the first piece of the scan (256 KiB) holds the strides probed, of
    // a 3.3 MB partition (halving from the start scanned to its middle).
    assert!(
        read < len as u64 / 4,
        "{read} of {len} bytes read to seek line 30"
    );
    assert_eq!(r.seek(&file, 0, n, 10 * 150_000 + 1, 0).unwrap(), 150_001);
}
