//! Against safetensors files of other projects (fixtures/real/safetensors, ORIGIN.md says
//! whose: writers in Julia, R, C++, Rust and Python, unaligned data, 0-d tensors, float8) and
//! what the `safetensors` package reads from them (expected.json).

use super::*;
use crate::model::expect::elements_as;
use crate::testing::fixtures_dir;

#[test]
fn files_of_other_projects_read_as_safetensors_reads_them() {
    let dir = fixtures_dir().join("real/safetensors");
    let exp = crate::model::expect::expected_at(&dir);
    let mut checked = 0;
    for (file, want) in exp.as_object().unwrap() {
        let m = open_path(&dir.join(file), &ReaderOptions::default())
            .unwrap_or_else(|e| panic!("{file}: {e}"))
            .expect(file);
        for (name, w) in want["tensors"].as_object().unwrap() {
            let key = crate::model::key_path(name);
            let t = m
                .tensor(&key)
                .unwrap_or_else(|e| panic!("{file}: {name}: {e}"));
            let what = format!("{file}: {name}");
            let dtype = header::dtype_of(w["dtype"].as_str().unwrap());
            assert_eq!(Some(t.meta().dtype), dtype, "{what}");
            let _ = elements_as(&*t, w, &what);
            checked += 1;
        }
    }
    assert!(checked >= 60, "{checked}");
}
