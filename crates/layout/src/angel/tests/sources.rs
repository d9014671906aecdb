//! Round trips of matrices read from Angel sources (fixtures, real-world models), and
//! reproduction of a text source's own bytes.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::*;
use crate::model::{DirEntry, Model};

fn open_model(dir: &Path) -> Arc<dyn Model> {
    angel::open(dir, &crate::model::ReaderOptions::default()).unwrap()
}

fn tensors(m: &dyn Model) -> Vec<(Vec<u8>, Arc<dyn Tensor>)> {
    m.list_dir(&[])
        .unwrap()
        .into_iter()
        .filter_map(|d| match d {
            DirEntry::Tensor(n) => Some((n.clone(), m.tensor(&[n]).unwrap())),
            _ => None,
        })
        .collect()
}

/// Round trip of a sparse tensor: row formats give back exactly the stored entries; column
/// formats give every saved row over the union of columns (0 where absent).
pub(super) fn round_trip_sparse(name: &str, t: Arc<dyn Tensor>) {
    let m = t.meta().clone();
    let s = t.sparse().unwrap();
    let vt = AngelValue::of(m.dtype).unwrap();
    let w = vt.width();
    for format in AngelFormat::ALL {
        let f = open(format, t.clone(), &ctx(","));
        let is_value = matches!(format, AngelFormat::ValueText | AngelFormat::ValueBinary);
        let is_column = matches!(format, AngelFormat::TextColumn | AngelFormat::BinaryColumn);
        if is_value {
            assert!(f.is_none(), "{name} {format:?}");
            continue;
        }
        let Some(f) = f else {
            assert!(is_column, "{name} {format:?} not shown");
            continue;
        };
        let bytes = file_bytes(&*f);
        let ctx = format!("{name} {format:?}");
        if !is_column {
            let rows_meta = (0..s.rows.len())
                .map(|i| (s.rows[i] as u32, s.row_ptr[i + 1] - s.row_ptr[i]))
                .collect();
            let d = decode(format, &*t, bytes, ",", rows_meta, 0);
            assert_eq!(d.rows, s.rows, "{ctx}");
            assert_eq!(d.row_ptr, s.row_ptr, "{ctx}");
            assert_eq!(d.cols, s.cols, "{ctx}");
            for i in 0..s.cols.len() {
                assert!(
                    same_value(
                        vt,
                        &d.values[i * w..(i + 1) * w],
                        &s.values[i * w..(i + 1) * w],
                        format.is_text()
                    ),
                    "{ctx}"
                );
            }
        } else {
            let mut union: Vec<i64> = s.cols.clone();
            union.sort_unstable();
            union.dedup();
            let rows_meta = s.rows.iter().map(|&r| (r as u32, 0)).collect();
            let d = decode(format, &*t, bytes, ",", rows_meta, union.len() as u64);
            assert_eq!(d.rows, s.rows, "{ctx}");
            for ri in 0..s.rows.len() {
                let got = &d.cols[d.row_ptr[ri] as usize..d.row_ptr[ri + 1] as usize];
                assert_eq!(got, &union[..], "{ctx}");
                for (j, &c) in union.iter().enumerate() {
                    let k = d.row_ptr[ri] as usize + j;
                    let (a, b) = (s.row_ptr[ri] as usize, s.row_ptr[ri + 1] as usize);
                    let want = match s.cols[a..b].binary_search(&c) {
                        Ok(i) => s.values[(a + i) * w..(a + i + 1) * w].to_vec(),
                        Err(_) => vec![0u8; w],
                    };
                    assert!(
                        same_value(vt, &d.values[k * w..(k + 1) * w], &want, format.is_text()),
                        "{ctx}"
                    );
                }
            }
        }
    }
}

fn fixture(case: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join("fixtures/angel")
        .join(case)
        .join("model")
}

#[test]
fn angel_fixture_matrices_round_trip() {
    for case in ["formats", "numbers", "lr35", "tree", "nolf"] {
        let m = open_model(&fixture(case));
        for (name, t) in tensors(&*m) {
            let name = format!("{case}/{}", String::from_utf8_lossy(&name));
            if t.meta().sparse {
                round_trip_sparse(&name, t.clone());
            } else if t.meta().num_elements().unwrap() < 100_000 {
                round_trip_dense(t.clone(), ",");
            }
            // Partitions are tensors too.
            for i in 0..t.meta().partitions.len() {
                let p = t.partition(i).unwrap();
                if p.meta().sparse {
                    round_trip_sparse(&name, p);
                } else if p.meta().num_elements().unwrap() < 100_000 {
                    round_trip_dense(p, ",");
                }
            }
        }
    }
}

/// A text source shown in its own format gives its bytes back (its numbers are shortest).
/// Not applicable to dense matrices that saved fewer rows than they have (deepFM's
/// `input_weight`: 3 rows, row 0 saved), since every row of a dense tensor is written.
#[test]
fn realworld_text_sources_reproduce_their_bytes() {
    let Some(sh) = crate::testing::shared_dir() else {
        return;
    };
    let base = sh.join("realworld/angel");
    for (rel, matrix, format) in [
        (
            "angel_19608468/lr",
            "input_weight",
            AngelFormat::ColIdValueText,
        ),
        (
            "angel_19608468/lr",
            "input_bias",
            AngelFormat::ColIdValueText,
        ),
        (
            "angel_54894bf2/lr",
            "input_weight",
            AngelFormat::ColIdValueText,
        ),
        (
            "serving/lr/lr-model/6",
            "input_weight",
            AngelFormat::ColIdValueText,
        ),
        (
            "serving/deepFM/deepFM-model/0",
            "fclayer_0_bias",
            AngelFormat::RowIdColIdValueText,
        ),
        (
            "serving/deepFM/deepFM-model/0",
            "fclayer_bias",
            AngelFormat::RowIdColIdValueText,
        ),
    ] {
        let root = base.join(rel);
        let m = open_model(&root);
        let t = m.tensor(&[matrix.as_bytes().to_vec()]).unwrap();
        let f = open(format, t.clone(), &ctx(",")).unwrap();
        let got = file_bytes(&*f);
        let want = std::fs::read(root.join(matrix).join("0")).unwrap();
        assert!(
            got == want,
            "{rel}/{matrix}: {} vs {} bytes",
            got.len(),
            want.len()
        );
        // And each matrix round-trips through every layout.
        if t.meta().sparse {
            round_trip_sparse(rel, t);
        } else {
            round_trip_dense(t, ",");
        }
    }
}
