//! Against safetensors files of other projects (fixtures/real/safetensors, ORIGIN.md says
//! whose: writers in Julia, R, C++, Rust and Python, unaligned data, 0-d tensors, float8) and
//! what the `safetensors` package reads from them (expected.json).

use sha2::{Digest, Sha256};

use super::*;
use crate::testing::fixtures_dir;

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn files_of_other_projects_read_as_safetensors_reads_them() {
    let dir = fixtures_dir().join("real/safetensors");
    let exp: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json")).unwrap()).unwrap();
    let mut checked = 0;
    for (file, want) in &exp {
        let opts = ReaderOptions::default();
        let files = files_of(&*opts.storage, &dir.join(file))
            .unwrap()
            .expect(file);
        let m = open(&files, &opts).unwrap_or_else(|e| panic!("{file}: {e}"));
        for (name, w) in want["tensors"].as_object().unwrap() {
            let key: Vec<Vec<u8>> = name.split('/').map(|c| c.as_bytes().to_vec()).collect();
            let t = m
                .tensor(&key)
                .unwrap_or_else(|e| panic!("{file}: {name}: {e}"));
            let meta = t.meta();
            assert_eq!(meta.problem, None, "{file}: {name}");
            assert_eq!(
                Some(meta.dtype),
                header::dtype_of(w["dtype"].as_str().unwrap()),
                "{file}: {name}"
            );
            let shape: Vec<u64> = w["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|d| d.as_u64().unwrap())
                .collect();
            assert_eq!(meta.shape, shape, "{file}: {name}");
            let n = meta.num_elements().unwrap() as usize * meta.dtype.elem_size().unwrap();
            let mut got = vec![0u8; n];
            t.read_elements(0, &mut got)
                .unwrap_or_else(|e| panic!("{file}: {name}: {e}"));
            assert_eq!(hex(&Sha256::digest(&got)), w["sha256"], "{file}: {name}");
            checked += 1;
        }
    }
    assert!(checked >= 60, "{checked}");
}
