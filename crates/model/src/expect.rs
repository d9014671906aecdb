//! What a format's own reader read from a file (a fixture's `expected.json`, written by the
//! format's library), compared with what a reader here reads: shared by the readers' tests
//! against the files of other projects.

use sha2::{Digest, Sha256};

use super::Tensor;
use crate::source::ReadCtx;

/// Bytes as lower-case hex, as the fixtures' `expected.json` write them.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// A JSON array of counts.
pub fn shape(v: &serde_json::Value) -> Vec<u64> {
    let dims = v.as_array().expect("a shape is an array");
    dims.iter().map(|d| d.as_u64().expect("a count")).collect()
}

/// A JSON array of numbers as float32s.
pub fn f32_list(v: &serde_json::Value) -> Vec<f32> {
    let xs = v.as_array().expect("a list of numbers");
    xs.iter()
        .map(|x| x.as_f64().expect("a number") as f32)
        .collect()
}

/// `fixtures/<folder>/expected.json`: what the format's own library read from its files.
pub fn expected(folder: &str) -> serde_json::Value {
    expected_at(&crate::testing::fixtures_dir().join(folder))
}

/// `dir/expected.json`, as `expected`.
pub fn expected_at(dir: &std::path::Path) -> serde_json::Value {
    let path = dir.join("expected.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `t` has no problem, `want`'s shape, and all its elements (row-major, little-endian) are
/// the bytes `want` names by `hex` or `sha256` (at least one); `what` names it in failures.
/// Returns those bytes. The lending read (`Tensor::read`) and a read of the middle element
/// give the same bytes.
pub fn elements_as(t: &dyn Tensor, want: &serde_json::Value, what: &str) -> Vec<u8> {
    let m = t.meta();
    assert_eq!(m.problem, None, "{what}");
    assert_eq!(m.shape, shape(&want["shape"]), "{what}");
    let (count, w) = (m.num_elements().unwrap(), m.dtype.elem_size().unwrap());
    let mut got = vec![0u8; count as usize * w];
    t.read_elements(ReadCtx::none(), 0, &mut got)
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let lent = t.read(ReadCtx::none(), 0, got.len());
    assert_eq!(
        &lent.unwrap_or_else(|e| panic!("{what}: {e}"))[..],
        got,
        "{what}: read"
    );
    if count > 2 {
        // Readers that gather (Fortran order, strides, blocks) start mid-way here.
        let mut mid = vec![0u8; w];
        t.read_elements(ReadCtx::none(), count / 2, &mut mid)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        assert_eq!(mid, got[(count / 2) as usize * w..][..w], "{what}: middle");
    }
    let (h, sum) = (want.get("hex"), want.get("sha256"));
    assert!(h.is_some() || sum.is_some(), "{what}: no truth");
    if let Some(h) = h {
        assert_eq!(hex(&got), h.as_str().unwrap(), "{what}");
    }
    if let Some(s) = sum {
        assert_eq!(hex(&Sha256::digest(&got)), s.as_str().unwrap(), "{what}");
    }
    got
}
