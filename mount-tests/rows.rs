//! `NAME.rows/` mounted for real: not in any listing, its README alone in `ls`, each row file
//! found by lookup with an exact size and the values TensorFlow's lookup gives, absent ids
//! ENOENT; `modelfs row` prints the same rows.

use std::path::Path;
use std::process::Command;

use super::support::*;

fn f32_text(s: &str) -> Vec<f32> {
    s.split(' ').map(|v| v.trim().parse().unwrap()).collect()
}

/// A JSON array of numbers as f32s (the expected values).
fn f32_json(v: &serde_json::Value) -> Vec<f32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
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
        assert_eq!(
            std::fs::metadata(&p).unwrap().len(),
            text.len() as u64,
            "{k}"
        );
        assert!(
            text.ends_with('\n') && !text.contains("  "),
            "{k}: {text:?}"
        );
        let want = f32_json(v);
        assert_eq!(f32_text(&text), want, "{k}");
        let npy = std::fs::read(m.join(format!("m/table.rows/{k}.npy"))).unwrap();
        let payload = npy_payload(&npy).unwrap();
        let got: Vec<f32> = payload
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
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
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        format!("{k0}\t{t0}")
    );
    let out = Command::new(modelfs())
        .args(["row", "-o", "cache_dir=none"])
        .arg(&source)
        .args(["m/table", "2"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no row with id 2"));
}

/// A Monolith PS export (variables and hash-table shards, no `saved_model.pb`): its tables under
/// `hash_tables/`, each row by id equal to what the writer wrote, absent ids ENOENT, the table's
/// `.json` with its entries and width, its dense `.npy` holding every entry.
#[test]
fn monolith_tables_mount_with_rows_by_id() {
    let Some(fuse) = Fuse::check() else { return };
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/monolith");
    let mount = fuse.mount(&dir.join("ps_export"), "cache_dir=none");
    let m = mount.path();
    let mut tables: Vec<String> = std::fs::read_dir(m.join("hash_tables"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    tables.sort();
    assert_eq!(
        tables,
        [
            "MonolithHashTable_0a1b_0.json",
            "MonolithHashTable_0a1b_1.json",
            "MonolithHashTable_0a1b_2.json"
        ]
    );
    // The variables are there too (a MutableHashTable of the TF bundle, as TF lists it).
    assert!(m.join("feat_emb-keys.json").is_file());
    for (table, n, dim) in [
        ("MonolithHashTable_0a1b_0", 2000u64, 8u64),
        ("MonolithHashTable_0a1b_1", 300, 4),
    ] {
        let json: serde_json::Value = serde_json::from_slice(
            &std::fs::read(m.join(format!("hash_tables/{table}.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(json["shape"], serde_json::json!([n, dim]), "{table}");
        let samples: serde_json::Value = serde_json::from_slice(
            &std::fs::read(dir.join(format!("{table}.samples.json"))).unwrap(),
        )
        .unwrap();
        let samples = samples.as_object().unwrap();
        assert!(samples.len() >= 100);
        for (id, v) in samples {
            let text =
                std::fs::read_to_string(m.join(format!("hash_tables/{table}.rows/{id}.txt")))
                    .unwrap();
            let want = f32_json(v);
            assert_eq!(f32_text(&text), want, "{table} {id}");
        }
        for absent in ["1", "-5", "9223372036854775807"] {
            let e = std::fs::read(m.join(format!("hash_tables/{table}.rows/{absent}.txt")))
                .unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::NotFound, "{table} {absent}");
        }
        let npy = std::fs::read(m.join(format!("hash_tables/{table}.npy"))).unwrap();
        assert_eq!(
            npy_payload(&npy).unwrap().len() as u64,
            n * dim * 4,
            "{table}"
        );
        // `libsvm` (there by default): a line per entry, labelled by its id, the row's values.
        let libsvm =
            std::fs::read_to_string(m.join(format!("hash_tables/{table}.libsvm"))).unwrap();
        assert_eq!(libsvm.lines().count() as u64, n, "{table}");
        for line in libsvm.lines().step_by(37) {
            let (id, rest) = line.split_once(' ').unwrap();
            let row = std::fs::read_to_string(m.join(format!("hash_tables/{table}.rows/{id}.txt")))
                .unwrap();
            let vals: Vec<&str> = rest
                .split(' ')
                .map(|e| e.split_once(':').unwrap().1)
                .collect();
            let want: Vec<&str> = row.trim_end().split(' ').filter(|v| *v != "0.0").collect();
            assert_eq!(vals, want, "{table} {id}");
        }
    }
    let empty = std::fs::read(m.join("hash_tables/MonolithHashTable_0a1b_2.npy")).unwrap();
    assert_eq!(npy_payload(&empty).unwrap().len(), 0);
    mount.unmount_and_check();
}

/// A damaged shard (one flipped byte): the table is still listed, its `.json` names the shard
/// and the offset, and its data files and row lookups give EIO, never other bytes.
#[test]
fn a_damaged_monolith_shard_gives_eio() {
    let Some(fuse) = Fuse::check() else { return };
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/monolith/ps_export");
    let tmp = tempfile::tempdir().unwrap();
    let copy = tmp.path().join("ps");
    std::fs::create_dir_all(copy.join("assets")).unwrap();
    for e in std::fs::read_dir(src.join("assets")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), copy.join("assets").join(e.file_name())).unwrap();
    }
    let shard = copy.join("assets/MonolithHashTable_0a1b_1-00001-of-00002");
    let mut b = std::fs::read(&shard).unwrap();
    let mid = b.len() / 2;
    b[mid] ^= 4;
    std::fs::write(&shard, &b).unwrap();
    let mount = fuse.mount(&copy, "cache_dir=none");
    let m = mount.path();
    let json =
        std::fs::read_to_string(m.join("hash_tables/MonolithHashTable_0a1b_1.json")).unwrap();
    assert!(
        json.contains("MonolithHashTable_0a1b_1-00001-of-00002"),
        "{json}"
    );
    for f in [
        "MonolithHashTable_0a1b_1.npy",
        "MonolithHashTable_0a1b_1.txt",
        "MonolithHashTable_0a1b_1.rows/5.txt",
    ] {
        let e = std::fs::read(m.join("hash_tables").join(f)).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EIO), "{f}: {e}");
    }
    // The undamaged table beside it reads.
    let samples: serde_json::Value = serde_json::from_slice(
        &std::fs::read(src.join("../MonolithHashTable_0a1b_0.samples.json")).unwrap(),
    )
    .unwrap();
    let id = samples.as_object().unwrap().keys().next().unwrap();
    assert!(std::fs::read(m.join(format!(
        "hash_tables/MonolithHashTable_0a1b_0.rows/{id}.txt"
    )))
    .is_ok());
    mount.unmount_and_check();
}

/// A mount that looks ids up for ever stays small: the kernel is made to let go of the rows
/// it holds past a bound (invalidated, then forgotten), so the daemon's node table — what
/// `statfs` counts as files — stays bounded, and every row read is right.
#[test]
fn rows_looked_up_for_ever_do_not_pile_up() {
    use std::os::unix::ffi::OsStrExt;
    let Some(fuse) = Fuse::check() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (rows, width) = (20_000usize, 8usize);
    let values: Vec<f32> = (0..rows * width).map(|i| i as f32 * 0.25 - 7.0).collect();
    let mut b = modelfs_tf::writer::BundleBuilder::new("emb");
    b.add_f32(b"emb", &[rows as u64, width as u64], &values);
    let prefix = b.write_to_dir(dir.path()).unwrap();
    let mount = fuse.mount(&prefix, "cache_dir=none");
    let m = mount.path();
    let files = || {
        let c = std::ffi::CString::new(m.as_os_str().as_bytes()).unwrap();
        // SAFETY: statvfs into a zeroed struct of the right type.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut st) }, 0);
        st.f_files
    };
    let ids = 12_000usize;
    let mut most = 0;
    for k in 0..ids {
        let id = (k * 7919) % rows;
        let text = std::fs::read_to_string(m.join(format!("emb.rows/{id}.txt"))).unwrap();
        let want: Vec<f32> = values[id * width..(id + 1) * width].to_vec();
        assert_eq!(f32_text(&text), want, "row {id}");
        if k % 500 == 0 {
            most = most.max(files());
        }
    }
    most = most.max(files());
    // 4,096 rows held at most (fs/tree/nodes.rs), plus the root, the tensor's files, and
    // rows whose forget is on its way.
    assert!(most < 6_000, "{most} nodes after {ids} distinct rows");
    mount.unmount_and_check();
}
