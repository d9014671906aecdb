//! `NAME.rows/` mounted for real: not in any listing, its README alone in `ls`, each row file
//! found by lookup with an exact size and the values TensorFlow's lookup gives, absent ids
//! ENOENT; `modelfs row` prints the same rows.

use std::path::Path;
use std::process::Command;

use super::support::*;

fn f32_text(s: &str) -> Vec<f32> {
    s.split(' ').map(|v| v.trim().parse().unwrap()).collect()
}

#[test]
fn rows_are_found_by_id_through_the_mount_and_the_cli() {
    let Some(fuse) = Fuse::check() else { return };
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/tf/hashtable");
    let want: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("expected.json")).unwrap()).unwrap();
    let source = dir.join("tf2/ckpt");
    let table = &want["tf2/ckpt"]["m/table"];
    let mount = fuse.mount(&source, "cache_dir=none");
    let m = mount.path();
    assert!(walk(m).iter().all(|p| !p.contains(".rows")));
    let listed: Vec<String> = std::fs::read_dir(m.join("m/table.rows"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(listed, ["README"]);
    let mut ids = Vec::new();
    for (k, v) in table["rows"].as_object().unwrap().iter().take(50) {
        let p = m.join(format!("m/table.rows/{k}.txt"));
        let text = std::fs::read_to_string(&p).unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().len(), text.len() as u64, "{k}");
        assert!(text.ends_with('\n') && !text.contains("  "), "{k}: {text:?}");
        let want: Vec<f32> = v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
        assert_eq!(f32_text(&text), want, "{k}");
        let npy = std::fs::read(m.join(format!("m/table.rows/{k}.npy"))).unwrap();
        let payload = npy_payload(&npy).unwrap();
        let got: Vec<f32> = payload.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        assert_eq!(got, want, "{k}.npy");
        ids.push((k.clone(), text));
    }
    for absent in table["absent"].as_array().unwrap() {
        let e = std::fs::read(m.join(format!("m/table.rows/{absent}.txt"))).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{absent}");
    }
    mount.unmount_and_check();
    // The CLI: `id<TAB>values` per id, exit 1 naming an absent one.
    let (k0, t0) = &ids[0];
    let out = Command::new(modelfs())
        .args(["row", "-o", "cache_dir=none"])
        .arg(&source)
        .args(["m/table", k0])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert_eq!(String::from_utf8(out.stdout).unwrap(), format!("{k0}\t{t0}"));
    let out = Command::new(modelfs())
        .args(["row", "-o", "cache_dir=none"])
        .arg(&source)
        .args(["m/table", "2"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no row with id 2"));
}
