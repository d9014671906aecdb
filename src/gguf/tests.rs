//! Against the file the real `gguf` package wrote (scripts/gen_gguf.py) and what its reader
//! and `dequantize` read back (fixtures/gguf/expected.json).

use super::*;
use crate::model::own_component;
use crate::source::MemSource;
use crate::testing::fixtures_dir;

const MODEL: &str = "model.gguf";
/// Plain types only (an unquantized conversion).
const PLAIN: &str = "plain.gguf";

fn path() -> std::path::PathBuf {
    fixtures_dir().join("gguf").join(MODEL)
}

fn expected_of(file: &str) -> serde_json::Value {
    let text = std::fs::read_to_string(fixtures_dir().join("gguf/expected.json")).unwrap();
    serde_json::from_str::<serde_json::Value>(&text).unwrap()[file].clone()
}

fn expected() -> serde_json::Value {
    expected_of(MODEL)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn check(model: &dyn Model) -> usize {
    check_against(model, &expected())
}

fn check_against(model: &dyn Model, exp: &serde_json::Value) -> usize {
    let mut decoded = 0;
    for (name, want) in exp["tensors"].as_object().unwrap() {
        let t = model.tensor(&[name.as_bytes().to_vec()]).unwrap();
        let m = t.meta();
        assert_eq!(m.problem, None, "{name}");
        let shape: Vec<u64> = want["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap())
            .collect();
        assert_eq!(m.shape, shape, "{name}");
        assert_eq!(m.extra["ggml_type"], want["type"], "{name}");
        let raw = want["raw"].as_str().unwrap();
        // `.bin`: the bytes as stored, for every type.
        let stored = match &m.stored {
            Some(s) => hex(&t.read_stored(0, s.bytes as usize).unwrap()),
            None => {
                let n = (m.num_elements().unwrap() as usize) * m.dtype.elem_size().unwrap();
                hex(&t.read(0, n).unwrap())
            }
        };
        assert_eq!(stored, raw, "{name} stored");
        let Some(values) = want.get("values") else {
            assert!(
                m.dtype.elem_size().is_none(),
                "{name}: decoded, but gguf's reading was not"
            );
            continue;
        };
        assert_eq!(m.dtype.name(), want["dtype"].as_str().unwrap(), "{name}");
        let n = m.num_elements().unwrap() as usize;
        let w = m.dtype.elem_size().unwrap();
        let mut buf = vec![0u8; n * w];
        t.read_elements(0, &mut buf).unwrap();
        assert_eq!(hex(&buf), values.as_str().unwrap(), "{name} values");
        // From the middle of a block.
        if n > 40 {
            let mut part = vec![0u8; 37 * w];
            t.read_elements(3, &mut part).unwrap();
            assert_eq!(part, buf[3 * w..40 * w], "{name} from element 3");
        }
        decoded += 1;
    }
    decoded
}

#[test]
fn every_tensor_reads_as_gguf_reads_it() {
    let opts = ReaderOptions::default();
    assert!(is_source(&*opts.storage, &path()));
    let m = open(&path(), &opts).unwrap();
    // 14 decoded (8 plain, BF16, five quantized types); Q4_K raw.
    assert_eq!(check(&*m), 14);
    assert!(m.summary().unwrap().problems.is_empty());
}

/// Every tensor of a file of plain types lies in place, as `.tf/` needs to pass the file
/// through; a quantized tensor, dequantized when read, does not.
#[test]
fn plain_tensors_are_their_bytes_in_place() {
    let plain = fixtures_dir().join("gguf").join(PLAIN);
    let m = open(&plain, &ReaderOptions::default()).unwrap();
    assert_eq!(check_against(&*m, &expected_of(PLAIN)), 5);
    let bytes = std::fs::read(&plain).unwrap();
    for (name, want) in expected_of(PLAIN)["tensors"].as_object().unwrap() {
        let t = m.tensor(&[name.as_bytes().to_vec()]).unwrap();
        let run = t.stored_run().unwrap_or_else(|| panic!("{name}"));
        let at = run.offset as usize;
        assert_eq!(
            hex(&bytes[at..at + run.len as usize]),
            want["raw"],
            "{name}"
        );
    }
    let m = open(&path(), &ReaderOptions::default()).unwrap();
    let q = m.tensor(&[b"blk.0.q8_0".to_vec()]).unwrap();
    assert!(q.stored_run().is_none());
    assert!(m
        .tensor(&[b"plain.f32".to_vec()])
        .unwrap()
        .stored_run()
        .is_some());
}

#[test]
fn the_metadata_document_is_the_writers() {
    let m = open(&path(), &ReaderOptions::default()).unwrap();
    let d = m.document(&[own_component(METADATA)]).unwrap();
    let mut out = Vec::new();
    d.render(0, &mut out).unwrap();
    let got: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let want = &expected()["metadata"];
    for (k, v) in want.as_object().unwrap() {
        // float32 values: gguf-py widens them to float64 as this reader does.
        assert_eq!(&got[k], v, "{k}");
    }
    assert_eq!(
        got.as_object().unwrap().len(),
        want.as_object().unwrap().len()
    );
}

/// Version 2 has the layout of version 3.
#[test]
fn version_2_reads_as_3() {
    let mut b = std::fs::read(path()).unwrap();
    b[4] = 2;
    let file: Arc<dyn ReadAt> = Arc::new(MemSource::new("v2.gguf", b));
    let m = model_of(&file).unwrap();
    assert_eq!(check(&m), 14);
    let mut b = std::fs::read(path()).unwrap();
    b[4..8].copy_from_slice(&3u32.to_be_bytes());
    let file: Arc<dyn ReadAt> = Arc::new(MemSource::new("be.gguf", b));
    let e = model_of(&file).err().unwrap().to_string();
    assert!(e.contains("version"), "{e}");
}

#[test]
fn damaged_files_never_panic() {
    let bytes = std::fs::read(path()).unwrap();
    for cut in (0..bytes.len()).step_by(7) {
        fuzz_file(&bytes[..cut]);
    }
    for at in (0..bytes.len()).step_by(3) {
        for x in [0x01, 0x80, 0xff] {
            let mut b = bytes.clone();
            b[at] ^= x;
            fuzz_file(&b);
        }
    }
    // Counts and lengths as large as they go.
    let mut b = bytes.clone();
    b[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
    fuzz_file(&b);
    b[16..24].copy_from_slice(&u64::MAX.to_le_bytes());
    fuzz_file(&b);
}
