//! Graph sources mounted for real (SPEC §6): signatures, `graph.pbtxt` read at any offset with
//! its exact size, constants, and `by-name/` links that resolve — each file equal to what
//! `modelfs cat` gives.

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::support::*;

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/tf/graphs")
        .join(rel)
}

#[test]
fn graph_sources_mount_with_signatures_text_and_names() {
    let Some(fuse) = Fuse::check() else { return };
    let sm = fixture("tf1/savedmodel");
    let mount = fuse.mount(&sm, "");
    let root = mount.path();
    let names: Vec<String> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for want in [
        "constants",
        "signatures",
        "signatures.txt",
        "graph.pbtxt",
        "layer1",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} not in {names:?}");
    }
    for file in [
        "signatures.txt",
        "signatures/serving_default.json",
        "signatures/scaled.json",
        "constants/layer1/b.npy",
        "constants/vocab.txt",
    ] {
        let got = std::fs::read(root.join(file)).unwrap();
        assert_eq!(got, cli_cat(&sm, file), "{file}");
        assert_eq!(
            std::fs::metadata(root.join(file)).unwrap().len(),
            got.len() as u64,
            "{file}: size"
        );
    }
    // graph.pbtxt: whole, then pieces at odd offsets, equal to the CLI's bytes.
    let whole = cli_cat(&sm, "graph.pbtxt");
    assert!(whole.starts_with(b"node {\n"));
    let f = std::fs::File::open(root.join("graph.pbtxt")).unwrap();
    for off in [whole.len() as u64 / 2, 1, 4097, whole.len() as u64 - 3] {
        let mut buf = vec![0u8; 1000];
        let n = f.read_at(&mut buf, off).unwrap();
        let end = (off as usize + 1000).min(whole.len());
        assert_eq!(&buf[..n], &whole[off as usize..end], "at {off}");
    }
    assert_eq!(std::fs::read(root.join("graph.pbtxt")).unwrap(), whole);
    assert_eq!(
        std::fs::metadata(root.join("graph.pbtxt")).unwrap().len(),
        whole.len() as u64
    );
    drop(f);
    mount.unmount_and_check();

    let slots = fixture("tf2/slots");
    let mount = fuse.mount(&slots, "");
    let link = mount.path().join("by-name/dense_1/kernel/m.npy");
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(
        std::fs::read(&link).unwrap(),
        cli_cat(&slots, "layer/w/.OPTIMIZER_SLOT/optimizer/m.npy")
    );
    let kernel = std::fs::read(mount.path().join("by-name/dense_1/kernel.txt")).unwrap();
    assert_eq!(kernel, cli_cat(&slots, "layer/w.txt"));
    mount.unmount_and_check();
}
