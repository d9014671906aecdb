//! The `.tf/` view mounted for real: hidden (not in any listing, so `ls -a`, `find` and `du`
//! never walk it) yet there by name, its files equal to what `modelfs cat` gives, with exact
//! sizes; in a directory of several checkpoints, one view per checkpoint.

use std::path::Path;
use std::process::Command;

use super::support::*;

fn cli_cat(source: &Path, path: &str) -> Vec<u8> {
    let out = Command::new(modelfs())
        .arg("cat")
        .arg(source)
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success(), "cat {path}");
    out.stdout
}

#[test]
fn the_tf_view_is_hidden_and_reads_like_the_cli() {
    let Some(fuse) = Fuse::check() else { return };
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures");
    for (source, at) in [
        (root.join("tf/graphs/tf1/savedmodel"), ""),
        (root.join("angel/formats/model"), ""),
        (root.join("tf/ckpt_manager/run"), "ckpt-3/"),
    ] {
        let mount = fuse.mount(&source, "");
        let m = mount.path();
        let listed: Vec<String> = std::fs::read_dir(m.join(at))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(!listed.iter().any(|n| n == ".tf"), "{listed:?}");
        assert!(walk(m).iter().all(|p| !p.contains(".tf/")));
        let mut files: Vec<String> = std::fs::read_dir(m.join(at).join(".tf"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        assert_eq!(
            files,
            ["checkpoint", "model.data-00000-of-00001", "model.index"]
        );
        for f in &files {
            let p = m.join(at).join(".tf").join(f);
            let got = std::fs::read(&p).unwrap();
            assert_eq!(
                std::fs::metadata(&p).unwrap().len(),
                got.len() as u64,
                "{f}"
            );
            assert!(
                got == cli_cat(&source, &format!("{at}.tf/{f}")),
                "{}: {f}",
                source.display()
            );
        }
        mount.unmount_and_check();
    }
}
