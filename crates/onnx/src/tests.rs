//! Against the files the real `onnx` package wrote (scripts/gen_onnx.py) and what
//! `onnx.numpy_helper.to_array` reads back from them (fixtures/onnx/expected.json).

use super::*;
use crate::model::{Model, Tensor};
use modelfs_model::testing::{fixtures_dir, for_each_damaged};

fn dir() -> PathBuf {
    fixtures_dir().join("onnx")
}

fn opened(rel: &str) -> Arc<dyn Model> {
    open(&dir().join(rel), &ReaderOptions::default()).unwrap()
}

/// Every element of `t` as a float64 (how expected.json keeps them).
fn values(t: &dyn Tensor) -> Vec<f64> {
    let m = t.meta();
    let n = m.num_elements().unwrap() as usize;
    let w = m.dtype.elem_size().unwrap();
    let mut b = vec![0u8; n * w];
    t.fill_elements(ReadCtx::none(), 0, &mut b).unwrap();
    b.chunks_exact(w)
        .map(|c| match m.dtype {
            DType::F32 => f32::from_le_bytes(c.try_into().unwrap()) as f64,
            DType::F64 => f64::from_le_bytes(c.try_into().unwrap()),
            DType::F16 => half::f16::from_le_bytes(c.try_into().unwrap()).to_f64(),
            DType::BF16 => half::bf16::from_le_bytes(c.try_into().unwrap()).to_f64(),
            DType::I8 | DType::Int4 => c[0] as i8 as f64,
            DType::U8 | DType::UInt4 | DType::Bool => c[0] as f64,
            DType::I16 => i16::from_le_bytes(c.try_into().unwrap()) as f64,
            DType::U16 => u16::from_le_bytes(c.try_into().unwrap()) as f64,
            DType::I32 => i32::from_le_bytes(c.try_into().unwrap()) as f64,
            DType::U32 => u32::from_le_bytes(c.try_into().unwrap()) as f64,
            DType::I64 => i64::from_le_bytes(c.try_into().unwrap()) as f64,
            DType::U64 => u64::from_le_bytes(c.try_into().unwrap()) as f64,
            DType::Float8(code) => crate::model::float8::widen(code, c[0]) as f64,
            d => panic!("{d:?}"),
        })
        .collect()
}

fn check(rel: &str) -> usize {
    let exp: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir().join("expected.json")).unwrap()).unwrap();
    let model = opened(rel);
    let mut n = 0;
    for (name, want) in exp["models"][rel].as_object().unwrap() {
        let key = name.strip_prefix('/').unwrap_or(name);
        let t = model.tensor(&crate::model::key_path(key)).unwrap();
        let m = t.meta();
        assert_eq!(m.problem, None, "{name}");
        let shape: Vec<u64> = want["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        assert_eq!(m.shape, shape, "{name}");
        let got = values(&*t);
        let want: Vec<f64> = want["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| match v {
                serde_json::Value::Bool(b) => f64::from(u8::from(*b)),
                v => v.as_f64().unwrap(),
            })
            .collect();
        // JSON keeps float64s; a narrower float compares exactly as float32 (serde_json's
        // parse of the 17-digit form may be an ulp off in float64 itself).
        let narrow = m.dtype != DType::F64;
        assert_eq!(got.len(), want.len(), "{name}");
        for (g, w) in got.iter().zip(&want) {
            match narrow {
                true => assert_eq!(*g as f32, *w as f32, "{name}"),
                false => assert!((g - w).abs() <= w.abs() * 1e-15, "{name}: {g} vs {w}"),
            }
        }
        n += 1;
    }
    n
}

#[test]
fn every_dtype_raw_and_typed_reads_as_onnx_reads_it() {
    assert_eq!(check("dtypes.onnx"), 26);
    let m = opened("dtypes.onnx");
    // A constant's name loses its leading `/`; `.` stays in a name, `/` makes directories.
    assert!(m
        .tensor(&crate::model::key_path("model/Constant_output_0"))
        .is_ok());
    assert!(m
        .tensor(&crate::model::key_path("encoder.layer.0/weight"))
        .is_ok());
    let raw = m.tensor(&[b"half".to_vec()]).unwrap();
    assert!(raw.stored_run().is_some(), "raw_data is read in place");
}

#[test]
fn external_data_is_read_in_place_beside_the_model() {
    assert_eq!(check("external/model.onnx"), 3);
    let m = opened("external/model.onnx");
    let w1 = m.tensor(&[b"w1".to_vec()]).unwrap();
    assert_eq!(w1.meta().extra["location"], "weights.bin");
    let run = w1.stored_run().expect("in place");
    assert!(run.file.name().ends_with("weights.bin"));
}

#[test]
fn a_location_out_of_the_directory_is_refused() {
    let m = opened("hostile/model.onnx");
    for name in ["climbs", "absolute"] {
        let t = m.tensor(&[name.as_bytes().to_vec()]).unwrap();
        let p = t.meta().problem.clone().unwrap();
        assert!(p.contains("refused"), "{name}: {p}");
        let mut b = [0u8; 16];
        assert!(t.fill_elements(ReadCtx::none(), 0, &mut b).is_err());
    }
    let fine = m.tensor(&[b"fine".to_vec()]).unwrap();
    assert_eq!(values(&*fine), vec![7.0]);
}

#[test]
#[cfg(unix)]
fn a_symlink_out_of_the_directory_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let inner = tmp.path().join("m");
    std::fs::create_dir(&inner).unwrap();
    std::fs::copy(dir().join("external/model.onnx"), inner.join("model.onnx")).unwrap();
    std::fs::copy(
        dir().join("external/weights.bin"),
        tmp.path().join("weights.bin"),
    )
    .unwrap();
    std::os::unix::fs::symlink(tmp.path().join("weights.bin"), inner.join("weights.bin")).unwrap();
    let m = open(&inner.join("model.onnx"), &ReaderOptions::default()).unwrap();
    let w1 = m.tensor(&[b"w1".to_vec()]).unwrap();
    assert!(w1
        .meta()
        .problem
        .as_deref()
        .unwrap()
        .contains("resolves out"));
    // The inline one still reads.
    assert_eq!(
        values(&*m.tensor(&[b"small".to_vec()]).unwrap()),
        vec![1.0, 2.0]
    );
}

#[test]
fn the_metadata_document_names_producer_inputs_and_outputs() {
    let m = opened("dtypes.onnx");
    let doc = m
        .document(&[crate::model::own_component(METADATA)])
        .unwrap();
    let mut out = Vec::new();
    for c in 0..doc.chunks() {
        doc.render(c, &mut out).unwrap();
    }
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["producer"], "modelfs-fixtures");
    assert_eq!(v["inputs"], serde_json::json!(["x"]));
    assert_eq!(v["outputs"], serde_json::json!(["y"]));
    assert_eq!(v["opsets"][0]["version"], 21);
}

#[test]
fn damaged_models_never_panic() {
    let good = std::fs::read(dir().join("dtypes.onnx")).unwrap();
    let mut failed = 0;
    for_each_damaged(&good, 7, 3, |bad| {
        fuzz_file(bad);
        if proto::parse(bad).is_err() {
            failed += 1;
        }
    });
    assert!(failed > 0, "some damage is seen");
}

/// Protobuf bytes of field `n` holding `payload` (length-delimited).
fn ld(n: u32, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    crate::codec::put_varint64(&mut out, u64::from(n << 3 | 2));
    crate::codec::put_varint64(&mut out, payload.len() as u64);
    out.extend_from_slice(payload);
    out
}

fn varint_field(n: u32, v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    crate::codec::put_varint64(&mut out, u64::from(n << 3));
    crate::codec::put_varint64(&mut out, v);
    out
}

/// A model over 2 GB as ONNX saves one: its weights external, one of them 3 GiB into a
/// (sparse) data file, read in place there.
#[test]
fn external_data_past_4_gib_reads_in_place() {
    let tmp = tempfile::tempdir().unwrap();
    let at: u64 = 3 << 30 | 12345;
    let data = tmp.path().join("big.bin");
    let f = std::fs::File::create(&data).unwrap();
    f.set_len(at + 16).unwrap();
    use std::os::unix::fs::FileExt;
    let want = [1.5f32, -2.0, 3.25, 4.0];
    let bytes: Vec<u8> = want.iter().flat_map(|v| v.to_le_bytes()).collect();
    f.write_all_at(&bytes, at).unwrap();
    let kv = |k: &str, v: &str| ld(13, &[ld(1, k.as_bytes()), ld(2, v.as_bytes())].concat());
    let tensor = [
        varint_field(1, 4),
        varint_field(2, 1),
        ld(8, b"far"),
        kv("location", "big.bin"),
        kv("offset", &at.to_string()),
        kv("length", "16"),
        varint_field(14, 1),
    ]
    .concat();
    let model = [varint_field(1, 9), ld(7, &ld(5, &tensor))].concat();
    std::fs::write(tmp.path().join("m.onnx"), model).unwrap();
    let m = open(&tmp.path().join("m.onnx"), &ReaderOptions::default()).unwrap();
    let t = m.tensor(&[b"far".to_vec()]).unwrap();
    assert_eq!(t.meta().problem, None);
    assert_eq!(
        values(&*t),
        want.iter().map(|&v| v as f64).collect::<Vec<_>>()
    );
    assert_eq!(t.stored_run().unwrap().offset, at);
}
