//! Angel models mounted for real.

use std::path::Path;

use super::support::*;

/// Angel text partitions with CR LF line endings read as their LF original, every file of
/// every layout byte for byte (a `.json` but for the partitions' offsets and lengths): a CRLF copy whose meta counts the LF-only bytes (case `crlf`)
/// and the same files from a writer whose meta counts the CRs (case `crlf_meta`).
#[test]
fn crlf_angel_partitions_read_as_their_lf_original() {
    let Some(fuse) = Fuse::check() else { return };
    let angel = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/angel");
    // The LF original: the copy's data files without their CRs, its metas as they are.
    let orig = tempfile::tempdir().unwrap();
    let from = angel.join("crlf/model");
    for m in std::fs::read_dir(&from).unwrap() {
        let m = m.unwrap().path();
        let to = orig.path().join(m.file_name().unwrap());
        std::fs::create_dir(&to).unwrap();
        for f in std::fs::read_dir(&m).unwrap() {
            let f = f.unwrap().path();
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            let mut data = std::fs::read(&f).unwrap();
            if !name.starts_with(['_', '.']) && name != "meta" {
                data.retain(|&c| c != b'\r');
            }
            std::fs::write(to.join(&name), data).unwrap();
        }
    }
    let read_all = |m: &Path| -> Vec<(String, Vec<u8>)> {
        let files: Vec<String> = walk(m).into_iter().filter(|p| !p.ends_with('/')).collect();
        files
            .into_iter()
            .map(|f| {
                let data = std::fs::read(m.join(&f)).unwrap_or_else(|e| panic!("{f}: {e}"));
                let size = std::fs::metadata(m.join(&f)).unwrap().len();
                assert_eq!(size, data.len() as u64, "{f}: stat size != bytes read");
                (f, data)
            })
            .collect()
    };
    let mount = fuse.mount(orig.path(), "layouts=all");
    let want = read_all(mount.path());
    mount.unmount_and_check();
    assert!(want.len() >= 4 * 5, "{} files", want.len());
    for case in ["crlf", "crlf_meta"] {
        let mount = fuse.mount(&angel.join(case).join("model"), "layouts=all");
        let got = read_all(mount.path());
        mount.unmount_and_check();
        let names = |v: &[(String, Vec<u8>)]| v.iter().map(|(f, _)| f.clone()).collect::<Vec<_>>();
        assert_eq!(names(&got), names(&want), "{case}: files");
        for ((f, a), (_, b)) in got.iter().zip(&want) {
            if f.ends_with(".json") {
                // The meta's partitions say where each is in its file: their own numbers.
                assert_eq!(without_partitions(a), without_partitions(b), "{case}: {f}");
                continue;
            }
            assert!(a == b, "{case}: {f} differs from the LF original's");
        }
    }
}

/// A matrix's `.json` without its `"partitions"` (offsets and lengths in its files).
fn without_partitions(json: &[u8]) -> serde_json::Value {
    let mut v: serde_json::Value = serde_json::from_slice(json).expect("valid .json");
    v.as_object_mut().map(|o| o.remove("partitions"));
    v
}
