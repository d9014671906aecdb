//! Sources of the readers beside TF and Angel, mounted and compared with their writers' own
//! reading of them (issue 41): safetensors files and a sharded safetensors model.

use std::path::Path;
use std::process::Command;

use crate::support::Fuse;

fn have_safetensors() -> bool {
    let have = Command::new("python3")
        .args(["-c", "import numpy, safetensors"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        have || (std::env::var_os("CI").is_none()
            && std::env::var_os("MODELFS_REQUIRE_FUSE").is_none()),
        "python3 with numpy and safetensors is needed (scripts/test installs them)"
    );
    have
}

#[test]
fn safetensors_sources_read_as_the_writer_reads_them() {
    let Some(fuse) = Fuse::check() else { return };
    if !have_safetensors() {
        eprintln!("skipped: python3 numpy/safetensors missing");
        return;
    }
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = here.join("fixtures/safetensors");
    let sharded = [
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    ]
    .map(|f| dir.join("sharded").join(f));
    let cases = [
        (
            dir.join("dtypes.safetensors"),
            vec![dir.join("dtypes.safetensors")],
            20,
        ),
        (dir.join("sharded"), sharded.to_vec(), 4),
        (
            dir.join("sharded/model.safetensors.index.json"),
            sharded.to_vec(),
            4,
        ),
    ];
    for (source, files, n) in cases {
        let m = fuse.mount(&source, "layouts=json,npy,bin");
        let out = Command::new("python3")
            .arg(here.join("mount-tests/check_sources.py"))
            .arg(m.path())
            .args(&files)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}: {text}{}",
            source.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.contains(&format!("checked {n} tensors")),
            "{}: {text}",
            source.display()
        );
        let meta = std::fs::read_to_string(m.path().join("__metadata__.json")).unwrap();
        assert!(meta.contains("\"format\": \"pt\""), "{meta}");
        m.unmount_and_check();
    }
}
