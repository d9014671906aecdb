//! Against the file the real `gguf` package wrote (scripts/gen_gguf.py) and what its reader
//! and `dequantize` read back (fixtures/gguf/expected.json).

use super::*;
use crate::model::expect::{hex, shape};
use crate::model::own_component;
use crate::source::{MemSource, ReadCtx};
use crate::testing::fixtures_dir;

const MODEL: &str = "model.gguf";
/// Plain types only (an unquantized conversion).
const PLAIN: &str = "plain.gguf";

fn path() -> std::path::PathBuf {
    fixtures_dir().join("gguf").join(MODEL)
}

fn expected_of(file: &str) -> serde_json::Value {
    crate::model::expect::expected("gguf")[file].clone()
}

fn expected() -> serde_json::Value {
    expected_of(MODEL)
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
        let shape = shape(&want["shape"]);
        assert_eq!(m.shape, shape, "{name}");
        assert_eq!(m.extra["ggml_type"], want["type"], "{name}");
        let raw = want["raw"].as_str().unwrap();
        // `.bin`: the bytes as stored, for every type.
        let stored = match &m.stored {
            Some(s) => hex(&t.read_stored(ReadCtx::none(), 0, s.bytes as usize).unwrap()),
            None => {
                let n = (m.num_elements().unwrap() as usize) * m.dtype.elem_size().unwrap();
                hex(&t.read(ReadCtx::none(), 0, n).unwrap())
            }
        };
        assert_eq!(stored, raw, "{name} stored");
        let Some(values) = want.get("values") else {
            // gguf-py 0.18 could not decode Q4_K when model.gguf was written (the K-quants are
            // checked against later gguf-py in `every_ggml_type_*`); no gguf-py decodes Q8_K
            // (`q8_k_is_its_scale_times_each_byte`).
            assert!(
                m.dtype.elem_size().is_none()
                    || ["Q4_K", "Q8_K"].contains(&want["type"].as_str().unwrap()),
                "{name}: decoded, but gguf's reading was not"
            );
            continue;
        };
        if let crate::model::DType::Blocks(own) = m.dtype {
            // Not decoded here: named as ggml names it, its blocks as stored, a note.
            assert_eq!(own, want["type"].as_str().unwrap().to_lowercase(), "{name}");
            assert!(m.note.as_deref().unwrap().contains("not decoded"), "{name}");
            continue;
        }
        assert_eq!(m.dtype.name(), want["dtype"].as_str().unwrap(), "{name}");
        let n = m.num_elements().unwrap() as usize;
        let w = m.dtype.elem_size().unwrap();
        let mut buf = vec![0u8; n * w];
        t.read_elements(ReadCtx::none(), 0, &mut buf).unwrap();
        assert_eq!(hex(&buf), values.as_str().unwrap(), "{name} values");
        // From the middle of a block.
        if n > 40 {
            let mut part = vec![0u8; 37 * w];
            t.read_elements(ReadCtx::none(), 3, &mut part).unwrap();
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
    // 14 decoded and checked (8 plain, BF16, five quantized types); Q4_K decoded, its truth
    // in kquants.json.
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

/// Every ggml type, in files gguf-py wrote (K-quants and i-quants of random blocks, the rest
/// by its own quantizer: kquants.gguf) and files ggml's own C quantizer wrote (ggml_c.gguf,
/// every type it quantizes, as llama-quantize does): each decoded type reads bit for bit as
/// gguf-py's `dequantize` (checked against ggml's C dequantizer when written); each other
/// type is named as ggml names it and reads as stored.
#[test]
fn every_ggml_type_reads_as_gguf_py_and_ggml_read_it() {
    for (file, json, at_least) in [
        ("kquants.gguf", "kquants.json", 10),
        ("ggml_c.gguf", "ggml_c.json", 13),
    ] {
        let text = std::fs::read_to_string(fixtures_dir().join("gguf").join(json)).unwrap();
        let exp: serde_json::Value = serde_json::from_str(&text).unwrap();
        let m = open(
            &fixtures_dir().join("gguf").join(file),
            &ReaderOptions::default(),
        )
        .unwrap();
        let decoded = check_against(&*m, &exp[file]);
        assert!(decoded >= at_least, "{file}: {decoded} decoded");
        for k in ["10.q2_k", "11.q3_k", "12.q4_k", "13.q5_k", "14.q6_k"] {
            let t = m.tensor(&[format!("blk.{k}").into_bytes()]);
            let t = t.unwrap_or_else(|e| panic!("{file}: {k}: {e}"));
            assert_eq!(t.meta().dtype, crate::model::DType::F32, "{file}: {k}");
        }
        // Totals count the bytes as stored.
        let stored: u64 = exp[file]["tensors"]
            .as_object()
            .unwrap()
            .values()
            .map(|t| t["raw"].as_str().unwrap().len() as u64 / 2)
            .sum();
        assert_eq!(m.summary().unwrap().total_bytes, stored, "{file}");
    }
}

/// Q8_K (ggml's intermediate type; gguf-py cannot decode it): float32 d times each int8.
#[test]
fn q8_k_is_its_scale_times_each_byte() {
    let mut b = 0.25f32.to_le_bytes().to_vec();
    b.extend((0..256).map(|i| (i as i8).wrapping_sub(100) as u8));
    b.extend([0u8; 32]);
    let q = quant::ggml_type(15).unwrap();
    let quant::Decode::Quant(q8k) = q.decode else {
        panic!()
    };
    let mut out = vec![0u8; 256 * 4];
    q8k.dequantize(&b, 0, &mut out);
    let v: Vec<f32> = crate::testing::f32s(&out);
    assert_eq!(
        (v[0], v[100], v[255]),
        (-25.0, 0.0, 0.25 * ((255u8 as i8).wrapping_sub(100)) as f32)
    );
}

/// Real GGUF files of other projects (fixtures/real/gguf, ORIGIN.md says whose) read as
/// gguf-py reads them.
#[test]
fn real_files_of_other_projects_read_as_gguf_py_reads_them() {
    use sha2::{Digest, Sha256};
    let dir = fixtures_dir().join("real/gguf");
    let exp = crate::model::expect::expected_at(&dir);
    let mut checked = 0;
    for (file, want) in exp
        .as_object()
        .unwrap()
        .iter()
        .filter(|(f, _)| !f.starts_with('_'))
    {
        let m = open(&dir.join(file), &ReaderOptions::default())
            .unwrap_or_else(|e| panic!("{file}: {e}"));
        let tensors = want["tensors"].as_object().unwrap();
        assert_eq!(m.summary().unwrap().tensors, tensors.len() as u64, "{file}");
        for (name, w) in tensors {
            let t = m.tensor(&[name.as_bytes().to_vec()]).unwrap();
            let meta = t.meta();
            assert_eq!(meta.problem, None, "{file}: {name}");
            let n = meta.num_elements().unwrap() as usize * meta.dtype.elem_size().unwrap();
            let mut buf = vec![0u8; n];
            t.read_elements(ReadCtx::none(), 0, &mut buf).unwrap();
            assert_eq!(hex(&Sha256::digest(&buf)), w["sha256"], "{file}: {name}");
            checked += 1;
        }
    }
    assert!(checked >= 17, "{checked}");
}

/// A tensor whose dimensions multiply past what its bytes can count (2^31 × (2^31 + 1)
/// float32s: the element count fits, its bytes do not): a problem of its own, and totals are
/// never wrapped.
#[test]
fn dimensions_past_u64_bytes_are_a_problem_not_a_wrapped_total() {
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend(1u64.to_le_bytes()); // tensors
    b.extend(0u64.to_le_bytes()); // metadata
    b.extend(1u64.to_le_bytes());
    b.push(b'x');
    b.extend(2u32.to_le_bytes());
    b.extend((1u64 << 31).to_le_bytes());
    b.extend(((1u64 << 31) + 1).to_le_bytes());
    b.extend(0u32.to_le_bytes()); // F32
    b.extend(0u64.to_le_bytes()); // offset
    b.resize(b.len().div_ceil(32) * 32 + 64, 0);
    let file: Arc<dyn ReadAt> = Arc::new(MemSource::new("big.gguf", b));
    let m = model_of(&file).unwrap();
    let t = m.tensor(&[b"x".to_vec()]).unwrap();
    assert!(t.meta().problem.is_some());
    assert_eq!(m.summary().unwrap().total_bytes, 0);
}
