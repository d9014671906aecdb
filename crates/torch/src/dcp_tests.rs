//! Against DCP checkpoints written by torch itself (scripts/gen_dcp.py: one process, four
//! gloo ranks with DTensors sharded over one and two mesh dimensions, the zstd transform, the
//! per-rank metadata form): every tensor and value reads as `dcp_to_torch_save` +
//! `torch.load` give it (fixtures/dcp/expected.json), every chunk as its own region; damaged
//! copies give their verdicts and never other bytes.

use super::dcp;
use crate::model::expect::elements_as;
use crate::model::{key_path, Model, ReaderOptions};
use crate::testing::fixtures_dir;
use std::path::Path;
use std::sync::Arc;

fn expected() -> serde_json::Value {
    crate::model::expect::expected("dcp")
}

fn opened(dir: &Path) -> Arc<dyn Model> {
    dcp::open_path(dir, &ReaderOptions::default())
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .unwrap_or_else(|| panic!("{}: not a DCP checkpoint", dir.display()))
}

/// The tree path of the flattened name `fqn`, as `planner_data` of the fixture's (first)
/// metadata file gives it.
fn path_of(fixture: &serde_json::Value, fqn: &str) -> Vec<Vec<u8>> {
    let parts = &fixture["metadata"][0]["planner_data"][fqn];
    let parts: Vec<String> = parts
        .as_array()
        .unwrap_or_else(|| panic!("{fqn}: no planner_data"))
        .iter()
        .map(|c| match c {
            serde_json::Value::String(s) => s.clone(),
            n => n.to_string(),
        })
        .collect();
    key_path(&parts.join("/"))
}

/// The values document of directory `dir` of `model`.
fn values_of(model: &dyn Model, dir: &[Vec<u8>]) -> serde_json::Value {
    let mut at = dir.to_vec();
    at.push(b"\0__values__.json".to_vec());
    let doc = model.document(&at).unwrap();
    let mut out = Vec::new();
    for c in 0..doc.chunks() {
        doc.render(c, &mut out).unwrap();
    }
    serde_json::from_slice(&out).unwrap()
}

/// The plain value at `path`: in the values of the deepest directory that has them, nested
/// by the rest of the path.
fn value_at(model: &dyn Model, path: &[Vec<u8>]) -> serde_json::Value {
    for k in (0..path.len()).rev() {
        let mut at = path[..k].to_vec();
        at.push(b"\0__values__.json".to_vec());
        if model.document(&at).is_err() {
            continue;
        }
        let mut v = values_of(model, &path[..k])["values"].clone();
        for c in &path[k..] {
            v = v[String::from_utf8_lossy(c).as_ref()].clone();
        }
        return v;
    }
    panic!("no values document above {path:?}")
}

/// Every read of `name` in `expected.json` is what `model` gives: tensors whole (when torch's
/// read of the whole is recorded) and chunk by chunk, plain values in `__values__.json`.
/// Returns (tensors, chunks, values) compared.
fn check(name: &str, whole: bool) -> (usize, usize, usize) {
    let e = expected();
    let fixture = &e["fixtures"][name];
    let model = opened(&fixtures_dir().join("dcp").join(name));
    let (mut tensors, mut chunks, mut values) = (0, 0, 0);
    for (fqn, want) in fixture["reads"].as_object().unwrap() {
        let path = path_of(fixture, fqn);
        if let Some(v) = want.get("value") {
            assert_eq!(&value_at(&*model, &path), v, "{name}: {fqn}");
            values += 1;
            continue;
        }
        let t = model
            .tensor(&path)
            .unwrap_or_else(|e| panic!("{name}: {fqn}: {e}"));
        assert_eq!(
            t.meta().dtype.name(),
            want["dtype"].as_str().unwrap(),
            "{name}: {fqn}"
        );
        if whole {
            elements_as(&*t, want, &format!("{name}: {fqn}"));
            tensors += 1;
        }
        let parts = want["chunks"].as_array().unwrap();
        if parts.len() > 1 || !whole {
            // Torch's read of a rank-local save lists rank 0's chunks only.
            let n = t.meta().partitions.len();
            if n == 0 && parts.len() == 1 {
                // One chunk of the whole: the tensor is it.
                let c = &parts[0];
                let want = serde_json::json!({"shape": c["sizes"], "sha256": c["sha256"]});
                elements_as(&*t, &want, &format!("{name}: {fqn} (one chunk)"));
                chunks += 1;
                continue;
            }
            assert!(
                n == parts.len() || (!whole && n > parts.len()),
                "{name}: {fqn}: {n}"
            );
            for c in parts {
                let i = t
                    .meta()
                    .partitions
                    .iter()
                    .position(|p| {
                        let starts: Vec<u64> = p.extent.iter().map(|e| e.0).collect();
                        starts == crate::model::expect::shape(&c["offsets"])
                    })
                    .unwrap_or_else(|| panic!("{name}: {fqn}: no chunk at {}", c["offsets"]));
                let part = t.partition(i).unwrap();
                let want = serde_json::json!({"shape": c["sizes"], "sha256": c["sha256"]});
                elements_as(
                    &*part,
                    &want,
                    &format!("{name}: {fqn} chunk {}", c["offsets"]),
                );
                chunks += 1;
            }
        }
    }
    (tensors, chunks, values)
}

#[test]
fn a_one_process_save_reads_as_torch_reads_it() {
    let (t, _, v) = check("single", true);
    assert!(t >= 18 && v >= 7, "{t} tensors, {v} values");
}

#[test]
fn tensors_sharded_over_ranks_are_their_chunks_assembled() {
    let (t, c, v) = check("multi", true);
    assert!(
        t >= 4 && c >= 8 && v >= 4,
        "{t} tensors, {c} chunks, {v} values"
    );
    // A 2-D mesh: chunks with offsets in both dimensions, each shown as a partition.
    let model = opened(&fixtures_dir().join("dcp/multi"));
    let grid = model.tensor(&key_path("model/grid")).unwrap();
    let starts: Vec<Vec<u64>> = grid
        .meta()
        .partitions
        .iter()
        .map(|p| p.extent.iter().map(|e| e.0).collect())
        .collect();
    assert!(starts.contains(&vec![3, 4]), "{starts:?}");
}

#[test]
fn a_zstd_transformed_save_reads_as_torch_reads_it() {
    let (t, _, v) = check("zstd", true);
    assert!(t >= 3 && v >= 1, "{t} tensors, {v} values");
}

#[test]
fn per_rank_metadata_files_are_one_checkpoint() {
    // torch reads rank 0's file only; every rank's chunks are here, each its own region.
    let (_, c, v) = check("rank_local", false);
    assert!(c >= 4 && v >= 2, "{c} chunks, {v} values");
    let model = opened(&fixtures_dir().join("dcp/rank_local"));
    let rows = model.tensor(&key_path("model/rows")).unwrap();
    assert_eq!(rows.meta().problem, None, "the ranks' chunks tile it");
    assert_eq!(rows.meta().partitions.len(), 4);
    let grid = model.tensor(&key_path("model/grid")).unwrap();
    assert_eq!(grid.meta().partitions.len(), 4);
}

#[test]
fn a_hostile_metadata_pickle_is_refused_and_never_run() {
    let marker = Path::new("/tmp/modelfs-hostile-pickle-ran");
    let _ = std::fs::remove_file(marker);
    let dir = fixtures_dir().join("dcp/hostile/pickle_reduce");
    let got = dcp::open_path(&dir, &ReaderOptions::default());
    let err = got.err().expect("not a checkpoint").to_string();
    assert!(
        err.contains("not a torch.distributed.checkpoint Metadata"),
        "{err}"
    );
    assert!(!marker.exists());
}

/// A `relative_path` out of the directory is the tensor's problem; nothing of that file is
/// read, and the other tensors read as torch reads them.
#[test]
fn a_storage_path_out_of_the_checkpoint_is_refused() {
    for case in ["path_dotdot", "path_absolute"] {
        let model = opened(&fixtures_dir().join("dcp/hostile").join(case));
        let t = model.tensor(&key_path("model/embed.weight")).unwrap();
        let p = t.meta().problem.clone().unwrap_or_default();
        assert!(
            p.contains("leaves the checkpoint's directory: refused"),
            "{case}: {p}"
        );
        let mut out = vec![0u8; 4];
        assert!(t
            .read_elements(crate::source::ReadCtx::none(), 0, &mut out)
            .is_err());
        let s = model.summary().unwrap();
        assert!(
            s.problems.iter().any(|l| l.contains("embed.weight")),
            "{case}: {s:?}"
        );
        let other = model.tensor(&key_path("model/layer1/bias")).unwrap();
        let want = &expected()["fixtures"]["single"]["reads"]["model.layer1.bias"];
        elements_as(&*other, want, case);
    }
}

#[test]
fn a_flipped_byte_fails_its_crc_and_a_truncated_file_its_items() {
    let e = expected();
    let reads = &e["fixtures"]["single"]["reads"];
    let model = opened(&fixtures_dir().join("dcp/hostile/flipped_byte"));
    let t = model.tensor(&key_path("model/embed.weight")).unwrap();
    let mut out = vec![0u8; 16 * 8 * 4];
    let err = t
        .read_elements(crate::source::ReadCtx::none(), 0, &mut out)
        .expect_err("torch reads it silently; the CRC-32 says it is damaged")
        .to_string();
    assert!(err.contains("CRC"), "{err}");
    let bias = model.tensor(&key_path("model/layer1/bias")).unwrap();
    elements_as(&*bias, &reads["model.layer1.bias"], "flipped_byte");

    let model = opened(&fixtures_dir().join("dcp/hostile/truncated"));
    let step = model.tensor(&key_path("optim/state/0/step")).unwrap();
    let mut out = vec![0u8; step.meta().dtype.elem_size().unwrap()];
    let err = step
        .read_elements(crate::source::ReadCtx::none(), 0, &mut out)
        .expect_err("the item cut short")
        .to_string();
    assert!(err.contains("past the end"), "{err}");
    // Items wholly before the cut still read.
    let first = model.tensor(&key_path("model/layer1/bias")).unwrap();
    elements_as(&*first, &reads["model.layer1.bias"], "truncated");
}

#[test]
fn a_safetensors_serialized_save_is_an_error_never_other_bytes() {
    // `FileSystemWriter(serialization_format=SAFETENSORS)` records offsets that do not point
    // at the data; torch's own reader fails on it too.
    let e = expected();
    let fixture = &e["fixtures"]["safetensors_fs"];
    let model = opened(&fixtures_dir().join("dcp/safetensors_fs"));
    let mut tried = 0;
    for fqn in fixture["metadata"][0]["planner_data"]
        .as_object()
        .unwrap()
        .keys()
    {
        let Ok(t) = model.tensor(&path_of(fixture, fqn)) else {
            continue;
        };
        tried += 1;
        let n = t.meta().num_elements().unwrap() as usize;
        let mut out = vec![0u8; n * t.meta().dtype.elem_size().unwrap()];
        if n > 0 {
            assert!(t
                .read_elements(crate::source::ReadCtx::none(), 0, &mut out)
                .is_err());
        }
    }
    assert!(tried >= 2, "{tried}");
}

/// The fuzz entry over every metadata file of the fixtures, cut short and with bytes
/// flipped: errors, never a panic.
#[test]
fn damaged_metadata_is_an_error_never_a_panic() {
    for rel in [
        "single/.metadata",
        "multi/.metadata",
        "rank_local/__1.metadata",
    ] {
        let good = std::fs::read(fixtures_dir().join("dcp").join(rel)).unwrap();
        dcp::fuzz_metadata(&good);
        crate::testing::for_each_damaged(&good, 97, 13, dcp::fuzz_metadata);
    }
}
