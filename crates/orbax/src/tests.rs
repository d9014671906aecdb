//! Every array of every checkpoint orbax-checkpoint 0.12.8 wrote (fixtures/orbax, by
//! scripts/gen_orbax.py) and of the ones its wheel ships (fixtures/real/orbax) equals what
//! Orbax's restore gives (`expected.json`: dtype, shape, SHA-256 of the little-endian bytes);
//! damaged and hostile copies give their verdicts and never read outside the checkpoint.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value as Json;
use sha2::{Digest, Sha256};

use crate::model::{Model, ReaderOptions, Tensor};
use crate::source::ReadCtx;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

fn open(path: &Path) -> Arc<dyn Model> {
    crate::open_path(path, &ReaderOptions::default())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .unwrap_or_else(|| panic!("{}: not taken for Orbax", path.display()))
}

fn tensor(m: &dyn Model, name: &str) -> Arc<dyn Tensor> {
    let path: Vec<Vec<u8>> = name.split('/').map(|c| c.as_bytes().to_vec()).collect();
    m.tensor(&path).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn bytes(t: &dyn Tensor) -> Result<Vec<u8>, crate::model::ModelError> {
    let n = t.meta().num_elements().unwrap() as usize * t.meta().dtype.elem_size().unwrap();
    let mut out = vec![0u8; n];
    t.fill_elements(ReadCtx::none(), 0, &mut out)?;
    Ok(out)
}

/// Checks every array of `arrays` (expected.json's form) under `prefix` of `m`.
fn check(m: &dyn Model, prefix: &str, arrays: &serde_json::Map<String, Json>, what: &str) -> usize {
    for (name, want) in arrays {
        let full = if prefix.is_empty() {
            name.clone()
        } else {
            format!("{prefix}/{name}")
        };
        let t = tensor(m, &full);
        let meta = t.meta();
        assert_eq!(
            meta.dtype.name(),
            want["dtype"].as_str().unwrap(),
            "{what}: {full}"
        );
        let shape: Vec<u64> = want["shape"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d.as_u64().unwrap())
            .collect();
        assert_eq!(meta.shape, shape, "{what}: {full}");
        let got = bytes(&*t).unwrap_or_else(|e| panic!("{what}: {full}: {e}"));
        assert_eq!(
            hex(&Sha256::digest(&got)),
            want["sha256"].as_str().unwrap(),
            "{what}: {full}"
        );
        // A read from the middle, piece by piece, equals the whole.
        let w = meta.dtype.elem_size().unwrap();
        let n = got.len() / w;
        if n > 2 {
            let mut piece = vec![0u8; (n - 2) * w];
            t.fill_elements(ReadCtx::none(), 1, &mut piece).unwrap();
            assert_eq!(piece, got[w..w * (n - 1)], "{what}: {full} from element 1");
        }
    }
    arrays.len()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn expected(dir: &Path) -> Json {
    serde_json::from_slice(&std::fs::read(dir.join("expected.json")).unwrap()).unwrap()
}

#[test]
fn every_array_of_every_fixture_equals_orbaxs_restore() {
    let root = fixtures().join("orbax");
    let mut arrays = 0;
    let mut dirs = 0;
    for entry in std::fs::read_dir(&root).unwrap() {
        let dir = entry.unwrap().path();
        if !dir.join("expected.json").exists() {
            continue;
        }
        let want = expected(&dir);
        let what = dir.file_name().unwrap().to_string_lossy().to_string();
        let item = want.get("item_dir").and_then(Json::as_str).unwrap_or("");
        match want.get("steps").and_then(Json::as_object) {
            // A CheckpointManager's directory: each step opened as a checkpoint of its own.
            Some(steps) => {
                for (step, s) in steps {
                    let m = open(&dir.join(step));
                    arrays += check(&*m, item, s["arrays"].as_object().unwrap(), &what);
                }
            }
            None => {
                let m = open(&dir);
                arrays += check(&*m, item, want["arrays"].as_object().unwrap(), &what);
                // Python scalars are 0-d arrays too: equal to the value restored.
                for (name, v) in want["values"].as_object().unwrap() {
                    if v["metadata"] != "ScalarMetadata" {
                        continue;
                    }
                    let full = if item.is_empty() {
                        name.clone()
                    } else {
                        format!("{item}/{name}")
                    };
                    let t = tensor(&*m, &full);
                    let b = bytes(&*t).unwrap();
                    let got: Json = match t.meta().dtype.name().as_ref() {
                        "int64" => i64::from_le_bytes(b[..].try_into().unwrap()).into(),
                        "float64" => f64::from_le_bytes(b[..].try_into().unwrap()).into(),
                        "bool" => (b[0] != 0).into(),
                        d => panic!("{what}: {full}: scalar of {d}"),
                    };
                    assert_eq!(got, v["value"], "{what}: {full}");
                }
            }
        }
        dirs += 1;
    }
    assert!(
        dirs >= 13 && arrays >= 95,
        "{dirs} fixtures, {arrays} arrays"
    );
}

#[test]
fn the_checkpoints_orbaxs_wheel_ships_read_as_orbax_and_tensorstore_read_them() {
    let root = fixtures().join("real/orbax");
    for name in [
        "v0_direct",
        "v0_composite",
        "v1_composite",
        "v0_direct_no_metadata",
    ] {
        let dir = root.join(name);
        let want = expected(&dir);
        let m = open(&dir.join("checkpoint"));
        let item = want["item_dir"].as_str().unwrap();
        match want.get("arrays") {
            Some(a) => {
                check(&*m, item, a.as_object().unwrap(), name);
            }
            // No `_METADATA`: Orbax cannot restore it; tensorstore reads its arrays by their
            // keys, which name them here (`b.c` as `b/c`).
            None => {
                let a = want["arrays_by_tensorstore"].as_object().unwrap();
                let renamed = a
                    .iter()
                    .map(|(k, v)| (k.replace('.', "/"), v.clone()))
                    .collect();
                check(&*m, item, &renamed, name);
            }
        }
    }
    // Its root data file removed: Orbax and tensorstore fail NOT_FOUND; so does this open.
    let dir = root.join("v0_direct_missing_d/checkpoint");
    let err = crate::open_path(&dir, &ReaderOptions::default())
        .err()
        .expect("an error");
    assert!(
        err.to_string().contains("c2e8aef5dda5292fc58008b2a33c48c2"),
        "{err}"
    );
}

/// A copy of the fixture `name` in a temporary directory.
fn copy(name: &str) -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    let src = fixtures().join("orbax").join(name);
    fn walk(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            let t = to.join(e.file_name());
            if e.file_type().unwrap().is_dir() {
                walk(&e.path(), &t);
            } else {
                std::fs::copy(e.path(), &t).unwrap();
            }
        }
    }
    walk(&src, tmp.path());
    tmp
}

/// Flips one byte of `path` at `at` from its end (negative) or start.
fn flip(path: &Path, at: i64) {
    let mut b = std::fs::read(path).unwrap();
    let i = if at < 0 {
        b.len() - (-at) as usize
    } else {
        at as usize
    };
    b[i] ^= 0x40;
    std::fs::write(path, b).unwrap();
}

#[test]
fn a_flipped_byte_in_a_manifest_or_node_fails_its_crc() {
    let tmp = copy("ocdbt");
    flip(&tmp.path().join("manifest.ocdbt"), 20);
    let err = crate::open_path(tmp.path(), &ReaderOptions::default())
        .err()
        .expect("an error");
    assert!(err.to_string().contains("CRC-32C"), "{err}");

    let tmp = copy("ocdbt");
    let d = std::fs::read_dir(tmp.path().join("d"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    flip(&d, 30);
    let err = crate::open_path(tmp.path(), &ReaderOptions::default())
        .err()
        .expect("an error");
    assert!(err.to_string().contains("CRC-32C"), "{err}");
}

#[test]
fn a_damaged_chunk_fails_its_reads_and_no_other_tensor() {
    // zarr3 shards end with an index and its CRC-32C; the big array's chunks are out of line.
    let tmp = copy("zarr3_plain");
    let chunk = tmp.path().join("big/c/0/0");
    flip(&chunk, -3);
    let m = open(tmp.path());
    let err = bytes(&*tensor(&*m, "big")).unwrap_err();
    assert!(err.to_string().contains("CRC-32C"), "{err}");
    assert!(bytes(&*tensor(&*m, "params/dense/kernel")).is_ok());

    // A zstd frame cut short.
    let tmp = copy("zarr2_plain");
    let chunk = tmp.path().join("big/0.0");
    let b = std::fs::read(&chunk).unwrap();
    std::fs::write(&chunk, &b[..b.len() / 2]).unwrap();
    let m = open(tmp.path());
    assert!(bytes(&*tensor(&*m, "big")).is_err());
    assert!(bytes(&*tensor(&*m, "step")).is_ok());
}

#[test]
fn a_truncated_data_file_is_refused_when_opened() {
    let tmp = copy("ocdbt");
    let dir = tmp.path().join("ocdbt.process_0/d");
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        let len = std::fs::metadata(&p).unwrap().len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .unwrap()
            .set_len(len / 2)
            .unwrap();
    }
    let err = crate::open_path(tmp.path(), &ReaderOptions::default())
        .err()
        .expect("an error");
    assert!(err.to_string().contains("outside the file"), "{err}");
}

/// The manifest of `dir` re-encoded uncompressed with `edit` applied to its body.
fn rewrite_manifest(path: &Path, edit: impl FnOnce(&mut Vec<u8>)) {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[12..14], &[0, 1], "version 0, zstd");
    let mut body = zstd::stream::decode_all(&b[14..b.len() - 4]).unwrap();
    edit(&mut body);
    let mut out = b[..12].to_vec();
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&body);
    let len = (out.len() + 4) as u64;
    out[4..12].copy_from_slice(&len.to_le_bytes());
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    std::fs::write(path, out).unwrap();
}

#[test]
fn a_data_file_path_out_of_the_checkpoint_is_refused() {
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret");
    std::fs::write(&secret, b"do not read").unwrap();
    let tmp = copy("ocdbt");
    let d = std::fs::read_dir(tmp.path().join("d"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .file_name();
    let name = format!("d/{}", d.to_string_lossy());
    // The same length, climbing out.
    let hostile = format!("{}etc/passwd", "../".repeat((name.len() - 10) / 3));
    let hostile = format!("{hostile:/<width$}", width = name.len());
    assert_eq!(hostile.len(), name.len());
    rewrite_manifest(&tmp.path().join("manifest.ocdbt"), |body| {
        let at = body
            .windows(name.len())
            .position(|w| w == name.as_bytes())
            .unwrap();
        body[at..at + name.len()].copy_from_slice(hostile.as_bytes());
    });
    let err = crate::open_path(tmp.path(), &ReaderOptions::default())
        .err()
        .expect("an error");
    assert!(
        err.to_string().contains("leaves the model's directory"),
        "{err}"
    );

    // A symlink out of the checkpoint in the data file's place.
    let tmp = copy("ocdbt");
    let p = tmp.path().join(&name);
    std::fs::remove_file(&p).unwrap();
    std::os::unix::fs::symlink(&secret, &p).unwrap();
    let err = crate::open_path(tmp.path(), &ReaderOptions::default())
        .err()
        .expect("an error");
    assert!(err.to_string().contains("resolves out"), "{err}");
}

#[test]
fn a_leaf_naming_a_path_out_of_the_checkpoint_is_that_tensors_problem() {
    let tmp = copy("zarr2_plain");
    let meta = tmp.path().join("_METADATA");
    let s = std::fs::read_to_string(&meta).unwrap();
    // `step` becomes `/../../etc`: its array would be `/../../etc/.zarray`.
    let s = s.replace(
        "{\"key\": \"step\", \"key_type\": 2}",
        "{\"key\": \"/../../etc\", \"key_type\": 2}",
    );
    std::fs::write(&meta, s).unwrap();
    let m = open(tmp.path());
    let summary = m.summary().unwrap();
    assert!(
        summary
            .problems
            .iter()
            .any(|p| p.contains("leaves the model's directory")),
        "{:?}",
        summary.problems
    );
    assert!(bytes(&*tensor(&*m, "params/dense/kernel")).is_ok());
}

#[test]
fn a_big_compressed_chunk_reads_by_range_as_a_stream() {
    // f32[2048, 2048] of one chunk (16 MiB and more decoded: read as a stream), zstd.
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let (rows, cols) = (2048u64, 2100u64);
    let data: Vec<u8> = (0..rows * cols)
        .flat_map(|i| ((i % 1000) as f32).to_le_bytes())
        .collect();
    std::fs::create_dir_all(dir.join("w")).unwrap();
    std::fs::write(
        dir.join("w/.zarray"),
        format!(r#"{{"chunks":[{rows},{cols}],"compressor":{{"id":"zstd","level":1}},"dtype":"<f4","fill_value":null,"filters":null,"order":"C","shape":[{rows},{cols}],"zarr_format":2}}"#),
    )
    .unwrap();
    std::fs::write(dir.join("w/0.0"), zstd::bulk::compress(&data, 1).unwrap()).unwrap();
    std::fs::write(
        dir.join("_METADATA"),
        r#"{"tree_metadata": {"('w',)": {"key_metadata": [{"key": "w", "key_type": 2}], "value_metadata": {}}}}"#,
    )
    .unwrap();
    let m = open(dir);
    let t = tensor(&*m, "w");
    // First a read far ahead (the decoder goes through the chunk letting go as it goes).
    let mut out = vec![0u8; 4000];
    t.fill_elements(ReadCtx::none(), rows * cols - 1000, &mut out)
        .unwrap();
    assert_eq!(out, data[data.len() - 4000..]);
    // Pieces in order, then one behind (a decoder starts over), then the whole.
    let mut at = 0u64;
    while at < rows * cols {
        let n = (32768).min(rows * cols - at);
        let mut out = vec![0u8; n as usize * 4];
        t.fill_elements(ReadCtx::none(), at, &mut out).unwrap();
        assert_eq!(out, data[at as usize * 4..(at + n) as usize * 4]);
        at += n;
    }
    // Out of order as the kernel's read-ahead brings them: each pair swapped, on 4 threads.
    let piece = 32768u64;
    let pieces = rows * cols / piece;
    std::thread::scope(|s| {
        for k in 0..4u64 {
            let (t, data) = (&t, &data);
            s.spawn(move || {
                for p in (k..pieces).step_by(4) {
                    let p = p ^ 1;
                    if p >= pieces {
                        continue;
                    }
                    let mut out = vec![0u8; piece as usize * 4];
                    t.fill_elements(ReadCtx::none(), p * piece, &mut out)
                        .unwrap();
                    assert!(out == data[(p * piece * 4) as usize..((p + 1) * piece * 4) as usize]);
                }
            });
        }
    });
    let mut out = vec![0u8; 400];
    t.fill_elements(ReadCtx::none(), 5, &mut out).unwrap();
    assert_eq!(out, data[20..420]);
    assert_eq!(bytes(&*t).unwrap(), data);
}

#[test]
fn the_fuzz_entry_takes_fixtures_and_their_damaged_copies() {
    let dir = fixtures().join("orbax/ocdbt");
    let m = std::fs::read(dir.join("manifest.ocdbt")).unwrap();
    let d = std::fs::read_dir(dir.join("d"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let d = std::fs::read(d).unwrap();
    let mut data = (m.len() as u32).to_le_bytes().to_vec();
    data.extend_from_slice(&m);
    data.extend_from_slice(&d);
    crate::fuzz_file(&data);
    for i in (0..data.len()).step_by(7) {
        let mut bad = data.clone();
        bad[i] ^= 0xff;
        crate::fuzz_file(&bad);
        crate::fuzz_file(&data[..i]);
    }
    crate::fuzz_file(&std::fs::read(fixtures().join("orbax/zarr2_plain/big/.zarray")).unwrap());
}

#[test]
fn the_document_has_the_checkpoints_time() {
    for dir in ["orbax/ocdbt", "orbax/manager/1"] {
        let m = open(&fixtures().join(dir));
        let d = m
            .document(&[crate::model::own_component(b"__metadata__.json")])
            .unwrap();
        assert!(d.mtime() > std::time::SystemTime::UNIX_EPOCH, "{dir}");
    }
}
