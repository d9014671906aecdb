//! Against `.npy` and `.npz` files of other projects (fixtures/real/numpy, ORIGIN.md says
//! whose: numpy's own test data with Python 2 object arrays, scipy's Fortran-order deflated
//! members, big-endian and Fortran `.npy`s of ndarray-npy, …) and what `np.load` reads from
//! them (expected.json, scripts/real_numpy_expected.py).

use super::*;
use crate::model::expect::elements_as;
use crate::model::DirEntry;
use crate::source::ReadCtx;
use crate::testing::fixtures_dir;

#[test]
fn files_of_other_projects_read_as_numpy_reads_them() {
    let dir = fixtures_dir().join("real/numpy");
    let exp = crate::model::expect::expected_at(&dir);
    let (mut read, mut refused, mut fortran_deflated) = (0, 0, 0);
    for (file, members) in exp.as_object().unwrap() {
        let path = dir.join(file);
        assert!(is_source(&*crate::source::local(), &path), "{file}");
        let m = open(&path, &ReaderOptions::default()).unwrap_or_else(|e| panic!("{file}: {e}"));
        for (name, want) in members.as_object().unwrap() {
            let key = match file.ends_with(".npy") {
                // A `.npy` is one tensor, named by the file's stem.
                true => match &m.list_dir(&[]).unwrap()[..] {
                    [DirEntry::Tensor(n)] => n.clone(),
                    other => panic!("{file}: {other:?}"),
                },
                false => name.as_bytes().to_vec(),
            };
            let t = m
                .tensor(&[key])
                .unwrap_or_else(|e| panic!("{file}: {name}: {e}"));
            let meta = t.meta();
            if let Some(why) = want.get("refused") {
                let problem = meta
                    .problem
                    .as_deref()
                    .unwrap_or_else(|| panic!("{file}: {name}"));
                if why == "object array" {
                    // Python 2's `|O8` too: the same words as `|O`.
                    assert!(
                        problem.contains("object array"),
                        "{file}: {name}: {problem}"
                    );
                }
                refused += 1;
                continue;
            }
            let descr = want["descr"].as_str().unwrap();
            if npy::dtype_of(descr).is_err() {
                // A dtype not decoded (long double, bytes, unicode): listed with its reason.
                assert!(meta.problem.is_some(), "{file}: {name}");
                continue;
            }
            let got = elements_as(&*t, want, &format!("{file}: {name}"));
            // From the middle too: a Fortran-order deflated member's pass places a range.
            if meta.num_elements().unwrap() > 12 {
                let w = meta.dtype.elem_size().unwrap();
                let mut part = vec![0u8; 5 * w];
                t.read_elements(ReadCtx::none(), 7, &mut part).unwrap();
                assert_eq!(part, got[7 * w..12 * w], "{file}: {name}");
            }
            if want["fortran"] == true && want.get("zip").is_some_and(|z| z == "deflated") {
                fortran_deflated += 1;
            }
            read += 1;
        }
    }
    assert!(
        read >= 40 && refused >= 8 && fortran_deflated >= 4,
        "{read} read, {refused} refused, {fortran_deflated} Fortran deflated"
    );
}
