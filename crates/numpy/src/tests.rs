//! Against the files numpy wrote (scripts/gen_numpy.py) and what numpy reads back from them
//! (fixtures/numpy/expected.json).

use super::*;
use crate::model::expect::{elements_as, expected};
use crate::model::DirEntry;
use crate::source::ReadCtx;
use crate::testing::fixtures_dir;

fn opened(name: &str) -> Arc<dyn Model> {
    let path = fixtures_dir().join("numpy").join(name);
    assert!(is_source(&*crate::source::local(), &path), "{name}");
    open(&path, &ReaderOptions::default()).unwrap()
}

use crate::model::key_path as path;

/// Every array reads back as numpy reads it: C order, little-endian, element for element.
fn check(file: &str) -> usize {
    let m = opened(file);
    let exp = expected("numpy");
    let mut n = 0;
    for (key, want) in exp[file].as_object().unwrap() {
        let t = m.tensor(&path(key)).unwrap();
        assert_eq!(t.meta().extra["descr"], want["descr"], "{file} {key}");
        elements_as(&*t, want, &format!("{file} {key}"));
        n += 1;
    }
    n
}

#[test]
fn npy_files_read_as_numpy_reads_them() {
    for f in [
        "dt_f4.npy",
        "big_endian_f8.npy",
        "fortran_i4.npy",
        "dt_b1.npy",
    ] {
        assert_eq!(check(f), 1, "{f}");
    }
}

#[test]
fn npz_members_read_as_numpy_reads_them() {
    assert_eq!(check("arrays.npz"), 18);
    let m = opened("arrays.npz");
    let root = m.list_dir(&[]).unwrap();
    assert!(root.contains(&DirEntry::Dir(b"dt".to_vec())), "{root:?}");
    assert_eq!(m.summary().unwrap().tensors, 18);
}

/// `np.savez_compressed`: a C-order array reads as numpy reads it, from any offset, in any
/// order (decoders start over or go on); so does a Fortran-order one, element by element.
#[test]
fn deflated_members_read_by_range() {
    // Both members, the Fortran-order one by a pass over its member.
    assert_eq!(check("compressed.npz"), 2);
    let m = opened("compressed.npz");
    let t = m.tensor(&path("dt/f4")).unwrap();
    let mut all = vec![0u8; 48];
    t.read_elements(ReadCtx::none(), 0, &mut all).unwrap();
    for first in [11u64, 3, 7, 0, 10, 2] {
        let mut one = [0u8; 4];
        t.read_elements(ReadCtx::none(), first, &mut one).unwrap();
        assert_eq!(one, all[first as usize * 4..][..4]);
    }
    let f = m.tensor(&path("fortran_f4")).unwrap();
    let n = f.meta().num_elements().unwrap() as usize;
    let mut all = vec![0u8; n * 4];
    f.read_elements(ReadCtx::none(), 0, &mut all).unwrap();
    for first in (0..n).rev() {
        let mut one = [0u8; 4];
        f.read_elements(ReadCtx::none(), first as u64, &mut one)
            .unwrap();
        assert_eq!(one, all[first * 4..][..4], "{first}");
    }
}

/// A byte flipped in a deflated member's stream (bytes 39..160 of the file hold the first
/// member's) fails its reads: a bad stream, or its CRC-32.
#[test]
fn a_damaged_deflated_member_fails() {
    let good = std::fs::read(fixtures_dir().join("numpy/compressed.npz")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("bad.npz");
    let mut failed = 0;
    for i in [60usize, 80, 100, 120] {
        let mut bad = good.clone();
        bad[i] ^= 0x10;
        std::fs::write(&p, &bad).unwrap();
        let Ok(m) = open(&p, &ReaderOptions::default()) else {
            continue;
        };
        let Ok(t) = m.tensor(&path("dt/f4")) else {
            continue;
        };
        if t.read_elements(ReadCtx::none(), 0, &mut [0u8; 48]).is_err() {
            failed += 1;
        }
    }
    assert!(failed >= 3, "{failed} of 4 damaged copies failed");
}

/// An object array is a pickle: listed with a problem, its bytes never unpickled nor served.
#[test]
fn object_arrays_are_refused() {
    let m = opened("object.npy");
    let t = m.tensor(&path("object")).unwrap();
    assert!(t.meta().problem.as_deref().unwrap().contains("pickle"));
    assert_eq!(t.meta().shape, [2]);
    assert!(
        t.read(ReadCtx::none(), 0, 8).is_err(),
        "an object array has no elements to read"
    );
    assert_eq!(m.summary().unwrap().problems.len(), 1);
}

#[test]
fn damaged_files_never_panic() {
    for f in [
        "arrays.npz",
        "compressed.npz",
        "fortran_i4.npy",
        "big_endian_f8.npy",
    ] {
        let good = std::fs::read(fixtures_dir().join("numpy").join(f)).unwrap();
        crate::testing::for_each_damaged(&good, 5, 3, fuzz_file);
    }
}

/// A flipped byte in a stored member's data fails that array's reads, naming its CRC, and only
/// that array's.
#[test]
fn a_damaged_member_fails_its_crc() {
    let good = std::fs::read(fixtures_dir().join("numpy/arrays.npz")).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let m = opened("arrays.npz");
    let t = m.tensor(&path("dt/f8")).unwrap();
    let (start, end) = (t.meta().extra["data_start"].as_u64().unwrap(), good.len());
    assert!((start as usize) < end);
    let mut bad = good.clone();
    bad[start as usize + 3] ^= 1;
    let p = tmp.path().join("bad.npz");
    std::fs::write(&p, &bad).unwrap();
    let m = open(&p, &ReaderOptions::default()).unwrap();
    let t = m.tensor(&path("dt/f8")).unwrap();
    let mut buf = vec![0u8; 8];
    let err = t
        .read_elements(ReadCtx::none(), 0, &mut buf)
        .unwrap_err()
        .to_string();
    assert!(err.contains("CRC-32"), "{err}");
    let other = m.tensor(&path("dt/f4")).unwrap();
    other
        .read_elements(ReadCtx::none(), 0, &mut [0u8; 4])
        .unwrap();
    // Without verification the bytes are served as they are.
    let opts = ReaderOptions {
        verify: false,
        ..Default::default()
    };
    let m = open(&p, &opts).unwrap();
    m.tensor(&path("dt/f8"))
        .unwrap()
        .read_elements(ReadCtx::none(), 0, &mut buf)
        .unwrap();
}
