//! Everyday commands as a new user runs them first (issue 69): a row lookup with a read-only
//! home, the stored type of quantized GGUF tensors in `list`/`info`, `diff` of a model and
//! its bfloat16 copy.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::support::*;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

fn run(args: &[&str]) -> Output {
    Command::new(modelfs())
        .env("MODELFS_LOG", "/dev/null")
        .args(args)
        .output()
        .unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// With a home that takes no file (`HOME=/proc/1`, as in many containers) the key index is
/// built in the temp directory: the row is found, one warning says so, and no message has
/// a doubled prefix.
#[test]
fn a_row_lookup_with_a_read_only_home_uses_the_temp_dir() {
    let dir = fixtures().join("tf/hashtable");
    let want: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("expected.json")).unwrap()).unwrap();
    let rows = want["tf2/ckpt"]["m/table"]["rows"].as_object().unwrap();
    let (id, _) = rows.iter().next().unwrap();
    let source = dir.join("tf2/ckpt");
    let o = Command::new(modelfs())
        .env_remove("XDG_CACHE_HOME")
        .env_remove("MODELFS_LOG")
        .env("HOME", "/proc/1")
        .arg("row")
        .arg(&source)
        .args(["m/table", id])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(stdout(&o).starts_with(&format!("{id}\t")), "{}", stdout(&o));
    assert_eq!(err.matches("not writable").count(), 1, "{err}");
    assert!(!err.contains("key index: key index"), "{err}");
}

/// A K-quant GGUF: `list` shows what is stored and what reads give (`Q4_K→float32`), `--json`
/// keeps `dtype` and adds `stored`, `info` counts by both.
#[test]
fn list_and_info_show_the_stored_type_of_quantized_tensors() {
    let gguf = fixtures().join("gguf/kquants.gguf");
    let g = gguf.to_str().unwrap();
    let o = run(&["list", g]);
    assert!(o.status.success());
    let list = stdout(&o);
    for enc in ["Q4_K", "Q6_K", "Q8_0"] {
        let shown = format!("{enc}→float32");
        assert!(
            list.lines()
                .any(|l| l.split_whitespace().nth(1) == Some(shown.as_str())),
            "{shown}:\n{list}"
        );
    }
    let o = run(&["list", "--json", g]);
    let items: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    let q4k: Vec<_> = items.iter().filter(|t| t["stored"] == "Q4_K").collect();
    assert_eq!(q4k.len(), 1, "{items:?}");
    assert_eq!(q4k[0]["dtype"], "float32");
    let o = run(&["info", g]);
    let info = stdout(&o);
    assert!(info.contains("Q4_K→float32 1"), "{info}");
}

/// A safetensors file of one float32 tensor.
fn safetensors(path: &Path, dtype: &str, shape: &[u64], data: &[u8]) {
    let mut header = format!(
        "{{\"w\":{{\"dtype\":\"{dtype}\",\"shape\":{shape:?},\"data_offsets\":[0,{}]}}}}",
        data.len()
    );
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(data);
    std::fs::write(path, bytes).unwrap();
}

/// float32 → bfloat16, rounding to nearest even (as torch and ml_dtypes do).
fn bf16_bits(x: f32) -> u16 {
    let b = x.to_bits();
    ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) as u16
}

/// `diff` of a float32 model and its bfloat16 copy compares values: `retyped (float32 →
/// bfloat16)` with the changed count, max|Δ| and rel-L2, in `--json` too, equal to the
/// float64 arithmetic done here.
#[test]
fn diff_of_a_model_and_its_bfloat16_copy_measures_the_rounding() {
    let tmp = tempfile::tempdir().unwrap();
    let values: Vec<f32> = (0..64 * 32)
        .map(|i| (i as f32 * 0.37).sin() * 3.0)
        .collect();
    let f32_bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    let bf16: Vec<u16> = values.iter().map(|&v| bf16_bits(v)).collect();
    let bf16_bytes: Vec<u8> = bf16.iter().flat_map(|v| v.to_le_bytes()).collect();
    let (a, b) = (
        tmp.path().join("f32.safetensors"),
        tmp.path().join("bf16.safetensors"),
    );
    safetensors(&a, "F32", &[64, 32], &f32_bytes);
    safetensors(&b, "BF16", &[64, 32], &bf16_bytes);
    let (mut changed, mut max_abs, mut diff_sq, mut a_sq) = (0u64, 0f64, 0f64, 0f64);
    for (&x, &y) in values.iter().zip(&bf16) {
        let (x, y) = (f64::from(x), f64::from(f32::from_bits(u32::from(y) << 16)));
        changed += u64::from(x != y);
        max_abs = max_abs.max((y - x).abs());
        diff_sq += (y - x) * (y - x);
        a_sq += x * x;
    }
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let o = run(&["diff", a, b]);
    let text = stdout(&o);
    assert_eq!(o.status.code(), Some(1), "{text}");
    assert!(text.contains("retyped (float32 → bfloat16)"), "{text}");
    assert!(
        text.contains(&format!("{changed}/2048")) && text.contains("max|Δ|"),
        "{text}"
    );
    let o = run(&["diff", "--json", a, b]);
    let lines: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    let w = &lines[0];
    assert_eq!(w["status"], "retyped", "{w}");
    assert_eq!(w["changed_count"], changed, "{w}");
    assert_eq!(w["max_abs_diff"].as_f64(), Some(max_abs), "{w}");
    let rel = (diff_sq / a_sq).sqrt();
    let got = w["rel_l2"].as_f64().unwrap();
    assert!((got - rel).abs() <= rel * 1e-9, "{got} {rel}");
    assert_eq!(w["a"]["dtype"], "float32");
    assert_eq!(w["b"]["dtype"], "bfloat16");
}

/// The header and the data of a safetensors file: (key → (dtype, shape, bytes)).
fn safetensors_entries(
    file: &[u8],
) -> std::collections::BTreeMap<String, (String, String, Vec<u8>)> {
    let n = u64::from_le_bytes(file[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&file[8..8 + n]).unwrap();
    let data = &file[8 + n..];
    header
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| *k != "__metadata__")
        .map(|(k, v)| {
            let o = &v["data_offsets"];
            let (a, b) = (
                o[0].as_u64().unwrap() as usize,
                o[1].as_u64().unwrap() as usize,
            );
            let entry = (
                v["dtype"].to_string(),
                v["shape"].to_string(),
                data[a..b].to_vec(),
            );
            (k.clone(), entry)
        })
        .collect()
}

/// A safetensors file's whole-model `.safetensors` view holds every tensor of it, `F4` and
/// `F8_E8M0` too (copied as stored, as the safetensors package reads them), each with the
/// writer's dtype, shape and bytes; `info` names an undecoded dtype once (`F4`, not `F4→F4`).
#[test]
fn a_safetensors_files_view_keeps_its_f4_and_e8m0_tensors() {
    let source = fixtures().join("safetensors/dtypes.safetensors");
    let s = source.to_str().unwrap();
    let o = run(&["cat", s, ".safetensors"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got = safetensors_entries(&o.stdout);
    let want = safetensors_entries(&std::fs::read(&source).unwrap());
    assert!(
        want.values().any(|(d, ..)| d == "\"F4\""),
        "the fixture has an F4 tensor"
    );
    assert_eq!(got, want);
    let info = stdout(&run(&["info", s]));
    assert!(info.contains("F4 1") && !info.contains("F4→F4"), "{info}");
}
