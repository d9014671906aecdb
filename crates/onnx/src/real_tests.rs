//! Against ONNX files other projects wrote (fixtures/real/onnx, ORIGIN.md there): every
//! initializer and Constant tensor byte-equal to what `onnx.numpy_helper` reads.

use sha2::Digest;

use super::*;
use modelfs_model::testing::fixtures_dir;

#[test]
fn every_tensor_of_every_real_file_is_what_onnx_reads() {
    let dir = fixtures_dir().join("real/onnx");
    let exp: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("expected.json")).unwrap()).unwrap();
    let mut tensors = 0;
    let models = exp["models"].as_object().unwrap();
    assert!(models.len() >= 10);
    // Tensors inside subgraphs (`If` branches, `Loop` bodies), named below their node.
    let inside = exp["subgraphs"].as_object().unwrap();
    assert!(inside.len() >= 3);
    let both = models.iter().chain(inside);
    for (rel, want) in both {
        let m = open(&dir.join(rel), &ReaderOptions::default()).unwrap();
        for (name, w) in want.as_object().unwrap() {
            let key = name.strip_prefix('/').unwrap_or(name);
            let t = m.tensor(&crate::model::key_path(key)).unwrap();
            let meta = t.meta();
            assert_eq!(meta.problem, None, "{rel}: {name}");
            // The sha256 alone cannot tell int8 from uint8 (quantized weights, zero points) nor
            // float16 from int16; numpy's dtype names are modelfs's for every dtype here.
            assert_eq!(
                meta.dtype.name(),
                w["dtype"].as_str().unwrap(),
                "{rel}: {name}"
            );
            let shape: Vec<u64> = w["shape"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap())
                .collect();
            assert_eq!(meta.shape, shape, "{rel}: {name}");
            let n = meta.num_elements().unwrap() as usize;
            let mut b = vec![0u8; n * meta.dtype.elem_size().unwrap()];
            t.fill_elements(ReadCtx::none(), 0, &mut b).unwrap();
            let got = format!("{:x}", sha2::Sha256::digest(&b));
            assert_eq!(got, w["sha256"].as_str().unwrap(), "{rel}: {name}");
            tensors += 1;
        }
    }
    assert!(tensors > 900, "{tensors}");
}
